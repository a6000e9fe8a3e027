"""The checkpoint store contract, run against every store: local folder, memory, and S3 (SeaweedFS)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from spottune.checkpoint import CheckpointInfo, CheckpointStore, open_store
from spottune.errors import CheckpointError, ConfigError


@pytest.fixture(params=["file", "memory", pytest.param("s3", marks=pytest.mark.server)])
def store(request, tmp_path) -> CheckpointStore:
    if request.param == "file":
        return open_store(str(tmp_path / "store"), keep=2)
    if request.param == "memory":
        return open_store(f"memory://spottune-{uuid.uuid4().hex}", keep=2)
    seaweedfs = request.getfixturevalue("seaweedfs")
    url = request.getfixturevalue("s3_store_url")
    return open_store(url, seaweedfs["storage_options"], keep=2)


def _write(folder: Path, **files: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        target = folder / name.replace("__", "/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return folder


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _corrupt(store, info: CheckpointInfo, rel: str, data: bytes = b"garbage") -> None:
    store.fs.pipe_file(f"{store.fs._strip_protocol(info.location)}/{rel}", data)


def test_no_checkpoint_restores_nothing(store, tmp_path):
    assert store.latest_good("t00") is None and store.versions("t00") == []
    assert store.restore("t00", tmp_path / "out") is None


def test_save_and_restore_round_trip(store, tmp_path):
    src = _write(tmp_path / "a", **{"model.bin": b"\x00\x01" * 1000, "sub__state.json": b"{}", "empty": b""})
    info = store.save("t00", src, step=12, metadata={"reason": "hop"})
    assert (info.version, info.step, info.size_bytes, dict(info.metadata)) == (1, 12, 2002, {"reason": "hop"})
    assert set(info.files) == {"model.bin", "sub/state.json", "empty"}
    restored = store.restore("t00", tmp_path / "out")
    assert restored.version == 1 and restored.skipped_versions == ()
    assert _files(tmp_path / "out") == _files(src)
    assert store.latest_good("t00").step == 12


def test_versions_increase_and_old_ones_are_pruned_after_the_new_is_published(store, tmp_path):
    for step in (1, 2, 3, 4):
        info = store.save("t01", _write(tmp_path / f"s{step}", w=str(step).encode()), step=step)
        assert info.version == step
    assert [v.version for v in store.versions("t01")] == [3, 4]
    trial = f"{store.root}/t01"
    data_dirs = {p.split("/data/", 1)[1].split("/", 1)[0] for p in store.fs.find(f"{trial}/data")}
    assert len(data_dirs) == 2 and len(store._ls(f"{trial}/manifests")) == 2  # (SeaweedFS lists empty prefixes)
    store.restore("t01", tmp_path / "out")
    assert (tmp_path / "out" / "w").read_bytes() == b"4"


def test_trials_are_independent(store, tmp_path):
    store.save("a", _write(tmp_path / "a", f=b"A"), step=1)
    store.save("b", _write(tmp_path / "b", f=b"B"), step=5)
    assert store.latest_good("a").step == 1 and store.latest_good("b").step == 5
    store.delete("a")
    assert store.latest_good("a") is None and store.latest_good("b").step == 5


def test_corrupted_file_falls_back_to_the_previous_version(store, tmp_path):
    store.save("t02", _write(tmp_path / "v1", w=b"one"), step=10)
    info2 = store.save("t02", _write(tmp_path / "v2", w=b"two"), step=20)
    _corrupt(store, info2, "w", b"tw0")  # same size, different content
    good = store.latest_good("t02")
    assert (good.version, good.step, good.skipped_versions) == (1, 10, (2,))
    restored = store.restore("t02", tmp_path / "out")
    assert restored.step == 10 and (tmp_path / "out" / "w").read_bytes() == b"one"


def test_missing_file_and_corrupt_manifest_fall_back(store, tmp_path):
    store.save("t03", _write(tmp_path / "v1", w=b"one"), step=1)
    info2 = store.save("t03", _write(tmp_path / "v2", w=b"two"), step=2)
    store.fs.rm(f"{store.fs._strip_protocol(info2.location)}/w")
    assert store.latest_good("t03").version == 1
    store.keep = 3  # keep v1 and v2 through the next save
    info3 = store.save("t03", _write(tmp_path / "v3", w=b"three"), step=3)
    manifest = f"{store.root}/t03/manifests/v{info3.version:08d}.json"
    store.fs.pipe_file(manifest, store.fs.cat_file(manifest).replace(b'"step": 3', b'"step": 9'))
    assert store.latest_good("t03").version == 1  # v3 fails its self-checksum, v2 misses a file


def test_no_intact_version_raises_checkpoint_error(store, tmp_path):
    info = store.save("t04", _write(tmp_path / "v1", w=b"one"), step=1)
    _corrupt(store, info, "w")
    with pytest.raises(CheckpointError, match="trial t04: no intact checkpoint among versions \\[1\\]"):
        store.latest_good("t04")
    with pytest.raises(CheckpointError):
        store.restore("t04", tmp_path / "out")


def test_unpublished_upload_is_invisible_and_cleaned_by_the_next_save(store, tmp_path):
    store.save("t05", _write(tmp_path / "v1", w=b"one"), step=1)
    leftover = f"{store.root}/t05/data/v00000002-deadbeef0000"
    store.fs.makedirs(leftover, exist_ok=True)
    store.fs.pipe_file(f"{leftover}/w", b"half-written")  # a writer died before publishing
    assert store.latest_good("t05").version == 1 and [v.version for v in store.versions("t05")] == [1]
    info = store.save("t05", _write(tmp_path / "v2", w=b"two"), step=2)
    assert info.version == 2 and not store.fs.exists(f"{leftover}/w")
    assert store.restore("t05", tmp_path / "out").step == 2 and (tmp_path / "out" / "w").read_bytes() == b"two"


def test_crash_before_publish_keeps_the_previous_version(store, tmp_path, monkeypatch):
    store.save("t06", _write(tmp_path / "v1", w=b"one"), step=1)

    def die(path, payload):
        raise KeyboardInterrupt("power cut")

    monkeypatch.setattr(store, "_publish", die)
    with pytest.raises(KeyboardInterrupt):
        store.save("t06", _write(tmp_path / "v2", w=b"two"), step=2)
    monkeypatch.undo()
    assert store.latest_good("t06").step == 1
    assert store.restore("t06", tmp_path / "out").version == 1


def test_failed_upload_verification_publishes_nothing(store, tmp_path, monkeypatch):
    store.save("t07", _write(tmp_path / "v1", w=b"one"), step=1)
    real_put = store._put

    def flaky_put(local, remote):
        real_put(local, remote)
        store.fs.pipe_file(remote, b"bitrot")

    monkeypatch.setattr(store, "_put", flaky_put)
    with pytest.raises(CheckpointError, match="reads back as sha256"):
        store.save("t07", _write(tmp_path / "v2", w=b"two"), step=2)
    monkeypatch.undo()
    assert [v.version for v in store.versions("t07")] == [1]


def test_restore_refuses_a_non_empty_target(store, tmp_path):
    store.save("t08", _write(tmp_path / "v1", w=b"one"), step=1)
    _write(tmp_path / "out", mine=b"keep me")
    with pytest.raises(CheckpointError, match="is not empty"):
        store.restore("t08", tmp_path / "out")
    assert (tmp_path / "out" / "mine").read_bytes() == b"keep me"


def test_bad_arguments(store, tmp_path):
    with pytest.raises(CheckpointError, match="trial id '../x' is not usable"):
        store.latest_good("../x")
    with pytest.raises(CheckpointError, match="step is -1"):
        store.save("t09", _write(tmp_path / "v", w=b"x"), step=-1)
    with pytest.raises(CheckpointError, match="does not exist"):
        store.save("t09", tmp_path / "nope", step=1)


def test_open_store_rejects_bad_options(tmp_path):
    with pytest.raises(ConfigError, match="keep is 0"):
        open_store(str(tmp_path), keep=0)
    with pytest.raises(ConfigError, match="cannot be opened"):
        open_store("nosuchproto://x")


def test_relative_folder_and_file_url_are_the_same_store(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    a = open_store("ckpts")
    a.save("t", _write(tmp_path / "v", w=b"x"), step=3)
    assert open_store(f"file://{tmp_path}/ckpts").latest_good("t").step == 3


def test_restore_at_a_given_step(store, tmp_path):
    for step in (5, 9):
        store.save("t10", _write(tmp_path / f"v{step}", w=str(step).encode()), step=step)
    assert store.latest_good("t10", step=5).version == 1
    assert store.restore("t10", tmp_path / "out", step=5).step == 5 and (tmp_path / "out" / "w").read_bytes() == b"5"
    # no version at step 7: fall back to the newest intact earlier one, 2 steps lost
    fallback = store.latest_good("t10", step=7)
    assert (fallback.version, fallback.step, fallback.requested_step, fallback.lost_steps) == (1, 5, 7, 2)
    assert store.latest_good("t10", step=4) is None  # nothing at or before step 4: fresh start


def test_retain_deletes_all_but_the_newest_versions_even_a_pinned_one(store, tmp_path):
    """A driver's prune once a newer save is confirmed (decision SV4): the version a segment restored is pinned
    only in that segment's store, so it survives the save and goes here."""
    store.pin("t05", 1)
    for step in (10, 20, 30):
        store.save("t05", _write(tmp_path / f"s{step}", w=str(step).encode()), step=step)
    assert [v.step for v in store.versions("t05")] == [10, 20, 30]  # keep=2, plus the pinned version 1
    assert store.retain("t05", 1) == [1, 2]
    assert [(v.version, v.step) for v in store.versions("t05")] == [(3, 30)]
    data_dirs = {p.split("/data/", 1)[1].split("/", 1)[0] for p in store.fs.find(f"{store.root}/t05/data")}
    assert len(data_dirs) == 1  # the deleted versions' data went with their manifests
    assert store.retain("t05", 1) == [] and store.restore("t05", tmp_path / "out").step == 30
    with pytest.raises(ConfigError, match="keep is 0, but must be an integer >= 1"):
        store.retain("t05", 0)
