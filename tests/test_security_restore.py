"""A bucket writer cannot plant files outside a restore's destination, nor pass a forged manifest where a
checkpoint key is set: the bad version is skipped and the previous good one restored."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from pathlib import Path

import pytest

from spottune.checkpoint import open_store
from spottune.checkpoint._store import _body_digest

KEY = bytes.fromhex("ab" * 32)
PAYLOAD = b"import os; os.system('touch /tmp/spottune-pwned')\n"


def _body_hmac(body: dict, key: bytes) -> str:
    """The manifest HMAC: SHA-256 under the key over a domain line and the canonical JSON of the body."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return hmac.new(key, b"spottune-manifest\n" + canonical, hashlib.sha256).hexdigest()


def _save(store, tmp_path: Path, step: int) -> None:
    src = tmp_path / f"src{step}"
    src.mkdir()
    (src / "weights.bin").write_bytes(f"weights at step {step}".encode())
    store.save("t00", src, step=step)


def _plant(store, files: dict[str, bytes], *, hmac_key: bytes | None = None, data_name: str = "v00000003-abc123"
           ) -> None:
    """What a writer of the bucket can do: put files and a version-3 manifest whose SHA-256 is right."""
    trial = f"{store.root}/t00"
    body = {"format": 1, "trial_id": "t00", "version": 3, "step": 15, "data": f"data/{data_name}",
            "files": {rel: {"sha256": hashlib.sha256(b).hexdigest(), "size_bytes": len(b)} for rel, b in files.items()},
            "created_utc": "2026-01-01T00:00:00+00:00", "metadata": {}}
    for rel, blob in files.items():
        path = f"{trial}/data/{data_name}/{rel}"
        if store._local:
            store.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        store.fs.pipe_file(path, blob)
    doc = {"body": body, "sha256": _body_digest(body)}
    if hmac_key is not None:
        doc["hmac"] = _body_hmac(body, hmac_key)
    if store._local:
        store.fs.makedirs(f"{trial}/manifests", exist_ok=True)
    store.fs.pipe_file(f"{trial}/manifests/v00000003.json", json.dumps(doc).encode())


def _tree(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")}


def _escapes(tmp_path: Path) -> dict[str, str]:
    return {"dotdot": "../escape/sitecustomize.py", "absolute": str(tmp_path / "abs" / "sitecustomize.py"),
            "deep": "a/../../sitecustomize.py"}


def _check_refused(store, tmp_path: Path, name: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    dest = work / "ckpt"
    before = _tree(tmp_path) - {"work", "work/ckpt"}
    info = store.restore("t00", dest, step=15)
    assert (info.version, info.step, info.skipped_versions, info.lost_steps) == (2, 10, (3,), 5)
    assert (dest / "weights.bin").read_bytes() == b"weights at step 10"
    assert _tree(dest) == {"weights.bin"}
    assert _tree(work) == {"ckpt", "ckpt/weights.bin"}
    assert not (tmp_path / "abs").exists() and not (work / "escape").exists()
    assert not (work / "sitecustomize.py").exists() and not (tmp_path / "sitecustomize.py").exists()
    assert _tree(tmp_path) - {"work", "work/ckpt", "work/ckpt/weights.bin"} == before
    assert store.latest_good("t00").version == 2


@pytest.mark.parametrize("escape", ["dotdot", "absolute", "deep"])
def test_folder_store_refuses_a_manifest_naming_a_path_outside_the_destination(tmp_path, escape):
    store = open_store(str(tmp_path / "store"))
    _save(store, tmp_path, 5)
    _save(store, tmp_path, 10)
    _plant(store, {_escapes(tmp_path)[escape]: PAYLOAD})
    _check_refused(store, tmp_path, escape)


@pytest.mark.server
@pytest.mark.parametrize("escape", ["absolute"])  # SeaweedFS refuses keys holding ".."
def test_s3_store_refuses_a_manifest_naming_a_path_outside_the_destination(seaweedfs, s3_store_url, tmp_path, escape):
    store = open_store(s3_store_url, seaweedfs["storage_options"])
    _save(store, tmp_path, 5)
    _save(store, tmp_path, 10)
    _plant(store, {_escapes(tmp_path)[escape]: PAYLOAD})
    _check_refused(store, tmp_path, escape)


def test_a_manifest_whose_data_folder_lies_elsewhere_is_refused(tmp_path):
    store = open_store(str(tmp_path / "store"))
    _save(store, tmp_path, 5)
    _save(store, tmp_path, 10)
    _plant(store, {"weights.bin": b"x"}, data_name="../../other-trial")
    _check_refused(store, tmp_path, "data")


def test_folder_store_refuses_a_link_in_a_version(tmp_path):
    store = open_store(str(tmp_path / "store"))
    _save(store, tmp_path, 5)
    _save(store, tmp_path, 10)
    secret = tmp_path / "private.txt"
    secret.write_bytes(b"not for the trial")
    _plant(store, {"weights.bin": secret.read_bytes()})
    planted = Path(store.root) / "t00" / "data" / "v00000003-abc123" / "weights.bin"
    planted.unlink()
    os.symlink(secret, planted)
    _check_refused(store, tmp_path, "link")


@pytest.mark.parametrize("forgery", ["no-hmac", "other-key"])
def test_keyed_store_refuses_a_manifest_without_a_valid_hmac(tmp_path, forgery):
    """The manifest's SHA-256 and every file's are right: only the HMAC tells it was not written with the key."""
    store = open_store(str(tmp_path / "store"), key=KEY)
    _save(store, tmp_path, 5)
    _save(store, tmp_path, 10)
    _plant(store, {"weights.bin": b"poisoned weights"}, hmac_key=None if forgery == "no-hmac" else b"k" * 32)
    _check_refused(store, tmp_path, forgery)
    assert [v.version for v in store.versions("t00")] == [1, 2]  # the forged one is not listed as published


def test_keyed_store_reads_its_own_manifests_and_an_unkeyed_one_ignores_the_hmac(tmp_path):
    store = open_store(str(tmp_path / "store"), key=KEY)
    _save(store, tmp_path, 5)
    assert store.latest_good("t00").step == 5
    doc = json.loads((Path(store.root) / "t00" / "manifests" / "v00000001.json").read_text())
    assert doc["hmac"] == _body_hmac(doc["body"], KEY)
    assert open_store(str(tmp_path / "store")).latest_good("t00").step == 5
    assert open_store(str(tmp_path / "store"), key=b"z" * 32).latest_good("t00", step=5) is None


@pytest.mark.server
def test_keyed_s3_store_refuses_a_forged_manifest(seaweedfs, s3_store_url, tmp_path):
    store = open_store(s3_store_url, seaweedfs["storage_options"], key=KEY)
    _save(store, tmp_path, 5)
    _save(store, tmp_path, 10)
    _plant(store, {"weights.bin": b"poisoned weights"})
    _check_refused(store, tmp_path, "no-hmac")


@pytest.mark.process
def test_a_worker_resumes_from_the_previous_version_when_the_newest_is_forged(tmp_path):
    """Real worker processes with the experiment's key: a planted version at the confirmed step (absolute
    file name, no HMAC) is refused, the worker restores the previous one and the curve goes on."""
    from tests.test_worker_process import Worker, reference

    keyfile = tmp_path / "checkpoint.key"
    keyfile.write_text("ab" * 32)
    keyfile.chmod(0o600)
    store = str(tmp_path / "store")

    def segment(resume: int, until: int) -> dict:
        w = Worker(store, "none", until=until, resume=resume, step_wall_s=0.0,
                   extra=("--checkpoint-key-file", str(keyfile)))
        ready = w.until("ready")
        w.until("idle")
        w.send(cmd="checkpoint", reason="hop")
        w.until("checkpoint")
        assert w.finish() == 0
        return ready

    segment(0, 5)
    segment(5, 10)
    s = open_store(store, key=KEY)
    assert [(v.version, v.step) for v in s.versions("t0")] == [(1, 5), (2, 10)]
    planted = tmp_path / "planted" / "sitecustomize.py"
    trial = f"{s.root}/t0"
    body = {"format": 1, "trial_id": "t0", "version": 3, "step": 10, "data": "data/v00000003-abc123",
            "files": {str(planted): {"sha256": hashlib.sha256(PAYLOAD).hexdigest(), "size_bytes": len(PAYLOAD)}},
            "created_utc": "2026-01-01T00:00:00+00:00", "metadata": {}}
    s.fs.makedirs(f"{trial}/data/v00000003-abc123/{planted.parent}", exist_ok=True)
    s.fs.pipe_file(f"{trial}/data/v00000003-abc123/{planted}", PAYLOAD)
    s.fs.pipe_file(f"{trial}/manifests/v00000003.json",
                   json.dumps({"body": body, "sha256": _body_digest(body)}).encode())
    w = Worker(store, "none", until=12, resume=10, step_wall_s=0.0, extra=("--checkpoint-key-file", str(keyfile)))
    ready = w.until("ready")
    assert (ready["step"], ready["version"]) == (10, 2) and "lost_steps" not in ready
    w.until("idle")
    w.send(cmd="exit")
    assert w.finish() == 0
    assert w.metrics() == reference(12)[10:]
    assert not planted.exists()
