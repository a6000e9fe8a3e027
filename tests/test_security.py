"""Security: no credential on a command line or in results, no unauthenticated unpickling,
no silent IMDSv1 fallback."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from spottune.checkpoint import open_store
from spottune.checkpoint._secrets import (CHECKPOINT_KEY_ENV, STORAGE_SECRETS_ENV, redact, sign, split_secrets,
                                          storage_options_from_env, verify)
from spottune.errors import CheckpointError


# -- credentials ------------------------------------------------------------------------------------

def test_split_and_redact_storage_options():
    options = {"endpoint_url": "http://h:1", "key": "AKIA1", "secret": "s3cr3t",
               "client_kwargs": {"region_name": "us-east-1", "aws_session_token": "tok"}}
    public, secret = split_secrets(options)
    assert public == {"endpoint_url": "http://h:1", "client_kwargs": {"region_name": "us-east-1"}}
    assert secret == {"key": "AKIA1", "secret": "s3cr3t", "client_kwargs": {"aws_session_token": "tok"}}
    assert storage_options_from_env(public, {STORAGE_SECRETS_ENV: json.dumps(secret)}) == options
    assert redact({"spec": {"storage_options": options}, "store": "s3://u:pw@bucket/x", "n": [1, "a"]}) == {
        "spec": {"storage_options": {"endpoint_url": "http://h:1", "key": "***", "secret": "***",
                                     "client_kwargs": {"region_name": "us-east-1", "aws_session_token": "***"}}},
        "store": "s3://***@bucket/x", "n": [1, "a"]}


def test_url_userinfo_is_a_secret_and_is_redacted_whole():
    options = {"endpoint_url": "http://alice:pa55@h:1/p", "client_kwargs": {"proxy": "https://tok3n@proxy:3128"}}
    public, secret = split_secrets(options)
    assert public == {"endpoint_url": "http://h:1/p", "client_kwargs": {"proxy": "https://proxy:3128"}}
    assert secret == options
    assert storage_options_from_env(public, {STORAGE_SECRETS_ENV: json.dumps(secret)}) == options
    assert redact({"o": options, "line": "GET http://alice:pa55@h:1/p failed; s3://bob@b/k"}) == {
        "o": {"endpoint_url": "http://***@h:1/p", "client_kwargs": {"proxy": "https://***@proxy:3128"}},
        "line": "GET http://***@h:1/p failed; s3://***@b/k"}


@pytest.mark.server
def test_storage_secret_never_reaches_argv_or_results(seaweedfs, s3_store_url, tmp_path, monkeypatch):
    """A real local-backend run on SeaweedFS S3: the secret works (through the environment) but is
    never on a worker's command line (what `ps` shows) nor anywhere in the results folder."""
    from spottune.backends.local import _pool
    from spottune.cli import cli

    secret = seaweedfs["secret"]
    seen: list[tuple[list[str], dict[str, str]]] = []
    real_popen = subprocess.Popen

    def spy(args, **kw):  # records, then starts the real worker process
        seen.append((list(args), dict(kw.get("env") or {})))
        return real_popen(args, **kw)

    monkeypatch.setattr(_pool.subprocess, "Popen", spy)
    opts = seaweedfs["storage_options"]
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text("workload: logreg\nsearch_space: {lr: {grid_search: [0.05, 0.2]}}\nmax_steps: 12\n"
                   "theta: 0.5\ntop_k: 1\ninstance_types: [r3.large]\nzones: [us-east-1a]\npredictor: none\n"
                   f"storage_path: {s3_store_url}\nstorage_options: {json.dumps(opts)}\n")
    out = tmp_path / "res"
    result = CliRunner().invoke(cli, ["run", "--config", str(cfg), "--backend", "local", "--time-scale", "1200",
                                      "--no-progress", "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert seen and all(secret not in " ".join(argv) and "--storage-options" not in argv for argv, _ in seen)
    assert all(STORAGE_SECRETS_ENV not in env and len(env[CHECKPOINT_KEY_ENV]) == 64 for _, env in seen)
    assert all("--storage-options-file" in argv for argv, _ in seen)
    assert secret not in result.output
    for path in out.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    summary = json.loads((out / "summary.json").read_text())
    assert summary["settings"]["spec"]["storage_options"]["secret"] == "***"
    best = summary["top_k"][0]["trial_id"]
    assert open_store(s3_store_url, opts).latest_good(best).step == 12  # the workers did write to S3
    # the run's checkpoint key (kept 0600 in the results folder, never in the store) authenticates the manifests
    key = (out / "checkpoint.key").read_text().strip()
    assert (out / "checkpoint.key").stat().st_mode & 0o777 == 0o600 and key.encode() not in b"".join(
        open_store(s3_store_url, opts).fs.cat_file(p) for p in open_store(s3_store_url, opts).fs.find(s3_store_url))
    assert open_store(s3_store_url, opts, key=bytes.fromhex(key)).latest_good(best).step == 12
    with pytest.raises(CheckpointError, match="failed its HMAC check"):
        open_store(s3_store_url, opts, key=b"k" * 32).latest_good(best)


# -- pickled checkpoints ----------------------------------------------------------------------------

class _Boom:
    def __reduce__(self):
        return (os.system, ("touch /tmp/spottune-pwned-by-checkpoint",))


def _quad():
    from spottune.trainable import from_function

    def step(config, state, rng):
        state["x"] = state.get("x", 5.0) * 0.5
        return {"loss": state["x"]}

    return from_function(step)


def test_function_state_round_trips_with_its_hmac(tmp_path):
    Quad = _quad()
    t = Quad({}, seed=1)
    t.train()
    t.save(tmp_path / "ck")
    t2 = Quad({}, seed=1)
    t2.restore(tmp_path / "ck")
    assert t2.state == {"x": 2.5} and t2.iteration == 1


@pytest.mark.parametrize("tamper", ["unsigned-pickle", "flipped-payload", "other-key"])
def test_tampered_function_state_is_refused_and_never_unpickled(tmp_path, tamper, monkeypatch):
    marker = Path("/tmp/spottune-pwned-by-checkpoint")
    marker.unlink(missing_ok=True)
    Quad = _quad()
    t = Quad({}, seed=1)
    t.train()
    t.save(tmp_path / "ck")
    path = tmp_path / "ck" / "state.pkl"
    evil = pickle.dumps(_Boom())
    if tamper == "unsigned-pickle":
        path.write_bytes(evil)
    elif tamper == "flipped-payload":
        blob = path.read_bytes()
        head = blob[: blob.index(b"\n", blob.index(b"\n") + 1) + 1]
        path.write_bytes(head + evil)  # the old tag over a new (malicious) payload
    else:
        path.write_bytes(sign(evil, key=b"k" * 32))  # signed, but by someone else's key
    monkeypatch.setattr(pickle, "loads", lambda *a, **k: pytest.fail("unpickled a tampered checkpoint"))
    with pytest.raises(CheckpointError, match="refusing to unpickle"):
        Quad({}, seed=1).restore(tmp_path / "ck")
    assert not marker.exists()


def test_checkpoint_key_from_the_environment_is_shared_by_processes(tmp_path, monkeypatch):
    monkeypatch.setenv(CHECKPOINT_KEY_ENV, "ab" * 32)
    blob = sign(b"payload")
    assert verify(blob, "x", key=bytes.fromhex("ab" * 32)) == b"payload"
    monkeypatch.setenv(CHECKPOINT_KEY_ENV, "cd" * 32)
    with pytest.raises(CheckpointError, match="failed its HMAC check"):
        verify(blob, "x")


def test_gbt_checkpoint_is_not_a_pickle_and_resumes_bit_identically(tmp_path):
    from spottune.workloads import get_workload

    wl = get_workload("gbt")
    config = {"learning_rate": 0.1, "max_depth": 2}
    ref = wl.make(config, seed=4)
    expected = [ref.train() for _ in range(6)]
    a = wl.make(config, seed=4)
    got = [a.train() for _ in range(3)]
    a.save(tmp_path / "ck")
    assert not list((tmp_path / "ck").glob("*.pkl"))
    for f in (tmp_path / "ck").iterdir():
        assert not f.read_bytes().startswith(b"\x80"), f  # no pickle protocol header anywhere
    b = wl.make(config, seed=4)
    b.restore(tmp_path / "ck")
    got += [b.train() for _ in range(3)]
    assert got == expected


def test_gbt_checkpoint_with_an_unknown_type_is_refused(tmp_path):
    import skops.io as sio

    from spottune.workloads import get_workload

    wl = get_workload("gbt")
    a = wl.make({"learning_rate": 0.1, "max_depth": 2}, seed=4)
    a.train()
    a.save(tmp_path / "ck")
    trees = next((tmp_path / "ck").glob("*.skops"))
    sio.dump([_Boom()], trees)  # skops would need the untrusted type os.system / _Boom
    with pytest.raises(CheckpointError, match="Untrusted types found in the file: \\['tests.test_security._Boom'\\]"):
        wl.make({"learning_rate": 0.1, "max_depth": 2}, seed=4).restore(tmp_path / "ck")


def test_gbt_tree_with_out_of_range_nodes_is_refused(tmp_path):
    import skops.io as sio

    from spottune.workloads import get_workload

    wl = get_workload("gbt")
    a = wl.make({"learning_rate": 0.1, "max_depth": 2}, seed=4)
    a.train()
    a.save(tmp_path / "ck")
    tree = a.model.trees[0]
    state = tree.tree_.__getstate__()
    nodes = state["nodes"].copy()
    nodes["left_child"][0] = 10**6  # would make predict() read far outside the node array
    tree.tree_.__setstate__({**state, "nodes": nodes})
    sio.dump([tree], tmp_path / "ck" / "trees.skops")
    with pytest.raises(CheckpointError, match="tree 0: node indices or features out of range"):
        wl.make({"learning_rate": 0.1, "max_depth": 2}, seed=4).restore(tmp_path / "ck")


# -- IMDS -------------------------------------------------------------------------------------------

def test_imds_client_retries_the_token_and_sees_the_notice_where_tokens_are_required(caplog):
    from spottune.backends.local.imds import ImdsClient, ImdsEmulator

    # real HTTP server (the emulator), tokens required, the token endpoint refuses the first request
    with ImdsEmulator(require_token=True, token_failures=1, token_failure_code=403) as imds:
        client = ImdsClient(imds.register("i-1"))
        with caplog.at_level("WARNING", logger="spottune.backends.local.imds"):
            assert client.instance_action() is None  # 403 on the token, v1 GET 401, new token, 404
        assert client.v1_fallbacks == 1
        assert "falls back to IMDSv1" in caplog.text and "401 Unauthorized" in caplog.text
        imds.notify("i-1", time_s=1431000000.0 + 120)
        assert client.instance_action().time_utc == "2015-05-07T12:02:00Z"
        # the token endpoint fails for good: the 401 is raised, not swallowed
        imds.token_failures = 10**6
        client._token = None
        with pytest.raises(PermissionError, match=r"401 Unauthorized .* \(no token could be obtained\)"):
            client.instance_action()


@pytest.mark.process
def test_worker_sees_the_notice_when_the_first_token_request_fails(tmp_path):
    from spottune.backends.local.imds import ImdsEmulator
    from tests.test_worker_process import Worker

    with ImdsEmulator(require_token=True, token_failures=1, token_failure_code=404) as imds:
        url = imds.register("i-1")
        w = Worker(str(tmp_path / "s"), url, until=300, step_wall_s=0.01)  # bounded: idle after ~3 s
        try:
            w.until("metric")
            imds.notify("i-1", time_s=1431000000.0 + 120)
            while (msg := w.next())["event"] not in ("notice", "idle"):
                pass
            assert msg == {"event": "notice", "action": "terminate", "time": "2015-05-07T12:02:00Z"}
            assert w.until("checkpoint")["reason"] == "revocation" and w.finish() == 0
        finally:
            if w.proc.poll() is None:
                w.proc.kill()
                w.proc.wait()
