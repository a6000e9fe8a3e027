"""Checkpoint store: retention keeps the confirmed version, a corrupt pinned version falls back, outages are retried.

Real stores: a local folder and S3 (SeaweedFS, started by ``tests/conftest.py``). Each "worker" below
is a fresh store object, as each worker process opens its own; the real-process variants are in
``test_worker_process.py`` and ``test_checkpoint_atomicity.py``.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import pytest

from spottune.checkpoint import RetryPolicy, StoreUnavailable, open_store
from spottune.errors import CheckpointError
from tests._wait import wait_until

FAST = RetryPolicy(attempts=3, base_delay_s=0.05, max_delay_s=0.2)


@pytest.fixture(params=["file", pytest.param("s3", marks=pytest.mark.server)])
def store_args(request, tmp_path):
    if request.param == "file":
        return str(tmp_path / "store"), {}
    seaweedfs = request.getfixturevalue("seaweedfs")
    return request.getfixturevalue("s3_store_url"), seaweedfs["storage_options"]


def _dir(folder: Path, step: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "w").write_bytes(f"state at step {step}".encode())
    return folder


def _worker_segment(url, options, keep, tmp: Path, resume_step: int, save_step: int) -> int:
    """One worker: open the store, restore at the confirmed step, publish one version (never confirmed)."""
    store = open_store(url, options, keep=keep)
    got = store.restore("t00", tmp / f"restore-{uuid.uuid4().hex}", step=resume_step)
    assert got is not None and got.step == resume_step
    return store.save("t00", _dir(tmp / f"save-{uuid.uuid4().hex}", save_step), step=save_step).version


@pytest.mark.parametrize("keep", [1, 2])
def test_unconfirmed_versions_never_prune_the_confirmed_one(store_args, tmp_path, keep):
    url, options = store_args
    first = open_store(url, options, keep=keep)
    assert first.save("t00", _dir(tmp_path / "v1", 59), step=59).version == 1  # confirmed by the orchestrator
    # two (keep=2) or one (keep=1) workers in a row publish and are killed before confirming
    versions = [_worker_segment(url, options, keep, tmp_path, resume_step=59, save_step=s) for s in (118, 100, 90)]
    assert versions == [2, 3, 4]
    kept = [v.version for v in open_store(url, options, keep=keep).versions("t00")]
    assert kept == ([1, 4] if keep == 1 else [1, 3, 4])
    out = tmp_path / "final"
    info = open_store(url, options, keep=keep).restore("t00", out, step=59)
    assert (info.version, info.step, info.lost_steps) == (1, 59, 0)
    assert (out / "w").read_bytes() == b"state at step 59"


def test_confirmed_newer_version_releases_the_old_pin(store_args, tmp_path):
    url, options = store_args
    open_store(url, options, keep=1).save("t00", _dir(tmp_path / "v1", 10), step=10)
    assert _worker_segment(url, options, 1, tmp_path, resume_step=10, save_step=20) == 2  # confirmed this time
    assert _worker_segment(url, options, 1, tmp_path, resume_step=20, save_step=30) == 3
    assert [v.version for v in open_store(url, options).versions("t00")] == [2, 3]


def _flip_a_byte(store, info, rel="w") -> None:
    path = f"{store.fs._strip_protocol(info.location)}/{rel}"
    data = bytearray(store.fs.cat_file(path))
    data[len(data) // 2] ^= 0x01
    store.fs.pipe_file(path, bytes(data))


@pytest.mark.parametrize("damage", ["flip", "missing-file", "missing-manifest"])
def test_corrupt_pinned_version_falls_back_to_the_newest_good_earlier_one(store_args, tmp_path, damage):
    url, options = store_args
    store = open_store(url, options, keep=3)
    store.save("t00", _dir(tmp_path / "a", 59), step=59)
    v2 = store.save("t00", _dir(tmp_path / "b", 118), step=118)
    if damage == "flip":
        _flip_a_byte(store, v2)
    elif damage == "missing-file":
        store.fs.rm(f"{store.fs._strip_protocol(v2.location)}/w")
    else:
        store.fs.rm(f"{store.root}/t00/manifests/v00000002.json")
    worker = open_store(url, options, keep=1)
    out = tmp_path / "out"
    info = worker.restore("t00", out, step=118)
    assert (info.version, info.step, info.requested_step, info.lost_steps) == (1, 59, 118, 59)
    assert info.skipped_versions == ((2,) if damage != "missing-manifest" else ())
    assert (out / "w").read_bytes() == b"state at step 59"
    # the fallback is pinned: the worker's next save (keep=1) does not delete it before confirmation
    worker.save("t00", _dir(tmp_path / "c", 80), step=80)
    assert 1 in [v.version for v in open_store(url, options).versions("t00")]


def test_nothing_intact_at_or_before_the_pinned_step_is_a_fresh_start(tmp_path):
    store = open_store(str(tmp_path / "s"), keep=2)
    v1 = store.save("t00", _dir(tmp_path / "a", 5), step=5)
    _flip_a_byte(store, v1)
    out = tmp_path / "out"
    assert store.restore("t00", out, step=5) is None and list(out.iterdir()) == []
    with pytest.raises(CheckpointError, match="no intact checkpoint among versions \\[1\\]"):
        store.restore("t00", tmp_path / "out2")  # without a pinned step the old contract stands


def test_trainable_resume_falls_back_and_counts_lost_steps(tmp_path):
    from spottune.workloads import get_workload

    wl = get_workload("linreg")
    store = open_store(str(tmp_path / "s"), keep=2)
    t = wl.make(wl.configs()[0], seed=1)
    curve = []
    for _ in range(3):
        curve.append(t.train())
    store.save_trainable("t00", t)
    for _ in range(3):
        t.train()
    _flip_a_byte(store, store.save_trainable("t00", t), ".spottune_trainable.json")
    fresh = wl.make(wl.configs()[0], seed=1)
    info = store.restore_trainable("t00", fresh, step=6)
    assert (info.step, info.lost_steps, fresh.iteration) == (3, 3, 3)


# -- outages ----------------------------------------------------------------------------------------

def test_retry_policy_is_bounded_and_seeded():
    assert RetryPolicy(attempts=4, base_delay_s=0.1, factor=2, max_delay_s=0.3).delays() == [0.1, 0.2, 0.3]
    a, b = RetryPolicy(jitter=0.5, seed=3), RetryPolicy(jitter=0.5, seed=3)
    assert a.delays() == b.delays() and all(0.05 <= d <= 6.0 for d in a.delays())
    assert RetryPolicy(attempts=1).delays() == []
    assert RetryPolicy().max_total_s == pytest.approx(0.2 + 0.4 + 0.8 + 1.6 + 3.2)


def test_unreachable_endpoint_raises_store_unavailable_quickly(tmp_path):
    # nothing listens on port 1: a persistent outage (a real connection refused, no mock)
    store = open_store("s3://spottune/x", {"endpoint_url": "http://127.0.0.1:1", "key": "k", "secret": "s"},
                       retry=FAST)
    health = store.probe()
    assert not health.ok and health.error.startswith("checkpoint store s3://spottune/x is unreachable")
    t0 = time.monotonic()
    with pytest.raises(StoreUnavailable, match=r"checkpoint store s3://spottune/x is unreachable: .* failed 3 times"):
        store.save("t00", _dir(tmp_path / "a", 1), step=1)
    with pytest.raises(CheckpointError, match="unreachable"):
        store.restore("t00", tmp_path / "out", step=1)
    assert time.monotonic() - t0 < 15.0


@pytest.mark.server
def test_outage_shorter_than_the_backoff_is_ridden_out(seaweedfs, s3_store_url, tmp_path):
    """The real SeaweedFS server is frozen (SIGSTOP: requests hang, like a network outage) for 1.5 s, then resumed."""
    import threading

    pid = seaweedfs["pid"]
    options = {**seaweedfs["storage_options"], "config_kwargs": {"connect_timeout": 0.5, "read_timeout": 0.5}}
    store = open_store(s3_store_url, options, retry=RetryPolicy(attempts=10, base_delay_s=0.25, max_delay_s=1.0))
    store.save("t00", _dir(tmp_path / "a", 1), step=1)
    os.killpg(pid, signal.SIGSTOP)
    timer = threading.Timer(1.5, os.killpg, (pid, signal.SIGCONT))
    try:
        assert not store.probe().ok
        timer.start()
        info = store.save("t00", _dir(tmp_path / "b", 2), step=2)  # retried through the outage
    finally:
        timer.cancel()
        os.killpg(pid, signal.SIGCONT)
    assert info.version == 2 and store.probe().ok
    assert store.restore("t00", tmp_path / "out", step=2).step == 2


def test_s3_please_try_again_answers_are_transient():
    """s3fs turns S3's 500 InternalError into OSError(EREMOTEIO) and 503 SlowDown into OSError(EBUSY); a
    SeaweedFS just restarted answers 500 for seconds, which read as a corrupt manifest before."""
    import errno

    from spottune.checkpoint._store import is_transient

    assert is_transient(OSError(getattr(errno, "EREMOTEIO", errno.EIO), "We encountered an internal error, please try again."))
    assert is_transient(OSError(errno.EBUSY, "Please reduce your request rate."))
    assert not is_transient(OSError(errno.EINVAL, "The provided token is malformed"))
    assert not is_transient(FileNotFoundError("no such key"))


def test_transient_error_is_not_mistaken_for_corruption(tmp_path):
    """A read that fails with connection errors must not skip a good version (it would silently lose steps)."""
    from spottune.checkpoint._store import FsspecCheckpointStore

    class Flaky(FsspecCheckpointStore):  # mock: a flaky network cannot be made on a local folder
        failures_left = 0

        def _check_version(self, info, dest):
            def attempt() -> None:
                if Flaky.failures_left > 0:
                    Flaky.failures_left -= 1
                    raise ConnectionResetError("connection reset by peer")
            self._call("reading", attempt)
            return super()._check_version(info, dest)

    store = Flaky(str(tmp_path / "s"), retry=FAST)
    store.save("t00", _dir(tmp_path / "a", 1), step=1)
    store.save("t00", _dir(tmp_path / "b", 2), step=2)
    Flaky.failures_left = 1
    with pytest.raises(StoreUnavailable, match="failed 1 times"):  # no retries: an error, never version 1
        Flaky(str(tmp_path / "s"), retry=RetryPolicy(attempts=1)).latest_good("t00", step=2)
    Flaky.failures_left = 2
    info = store.latest_good("t00", step=2)  # the third attempt reads it
    assert (info.version, info.skipped_versions, info.lost_steps) == (2, (), 0)


# -- the orchestrator continues from the fallback ------------------------------------------------------

def test_orchestrator_continues_from_the_restored_earlier_step_and_counts_lost_steps():
    from spottune.orchestrator import (CheckpointReason, CheckpointSaved, EndReason, RevocationNotice, SegmentEnded,
                                       TrialLaunched)
    from tests.test_orchestrator_scenarios import A, Script

    s = Script()
    s.start()
    i1 = s.launched()
    s.steps("t0", i1, 6)
    s(RevocationNotice,
      trial_id="t0", instance_id=i1, deadline_s=s.t + 120)
    acts = s(CheckpointSaved, trial_id="t0", instance_id=i1, reason=CheckpointReason.REVOCATION, step=6)
    assert acts[0].resume_step == 6
    s(SegmentEnded, trial_id="t0", instance_id=i1, steps_done=6, reason=EndReason.PROVIDER)
    # the checkpoint at step 6 turns out corrupt: the worker restored the intact one at step 4
    s(TrialLaunched, trial_id="t0", instance_id="i2", market=A, started_s=s.t, restored_step=4)
    tr = s.orch.trials["t0"]
    assert (tr.step, tr.checkpoint_step, tr.lost_steps, tr.steps) == (4, 4, 2, [1, 2, 3, 4])
    s.steps("t0", "i2", 6)  # steps 5 and 6 are reported again and accepted
    assert tr.steps == [1, 2, 3, 4, 5, 6] and tr.step == 6


# -- a writer killed at several points of a save -------------------------------------------------------

#: After each stage it prints, the writer waits for a line on stdin: the test kills it there, or lets it go on.
KILLABLE_WRITER = """
import json, sys
from spottune.checkpoint._store import FsspecCheckpointStore

class Held(FsspecCheckpointStore):
    def _put(self, local, remote):
        super()._put(local, remote)
        print("uploaded", flush=True); sys.stdin.readline()
    def _publish(self, path, payload):
        print("verified", flush=True); sys.stdin.readline()
        super()._publish(path, payload)

url, options, folder = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
Held(url, options, keep=1).save("t00", folder, step=2)
print("published", flush=True); sys.stdin.readline()
"""


@pytest.mark.process
@pytest.mark.parametrize("kill_after", [1, 4, "verified", "published"])
def test_writer_killed_at_any_point_leaves_the_previous_good_version_latest(store_args, tmp_path, kill_after):
    import json
    import subprocess
    import sys

    url, options = store_args
    store = open_store(url, options, keep=1)
    store.save("t00", _dir(tmp_path / "v1", 1), step=1)
    v2 = tmp_path / "v2"
    v2.mkdir()
    for name in "abcdef":
        (v2 / name).write_bytes(name.encode() * 1000)
    proc = subprocess.Popen([sys.executable, "-c", KILLABLE_WRITER, url, json.dumps(options), str(v2)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        uploads = 0
        for line in proc.stdout:
            uploads += line.startswith("uploaded")
            if uploads == kill_after or line.strip() == kill_after:
                break
            proc.stdin.write("\n")  # go on to the next stage
            proc.stdin.flush()
        else:
            raise AssertionError(f"the writer ended before {kill_after!r}: exit code {proc.wait()}")
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    latest = open_store(url, options).latest_good("t00")
    if kill_after == "published":  # the manifest is written: version 2 is complete, and version 1 is pruned
        assert (latest.version, latest.step) == (2, 2)
    else:
        assert (latest.version, latest.step) == (1, 1)
        out = tmp_path / "out"
        assert open_store(url, options).restore("t00", out).step == 1 and (out / "w").read_bytes() == b"state at step 1"


@pytest.mark.server
@pytest.mark.slow
def test_store_killed_mid_checkpoint_and_restarted_keeps_the_previous_version(tmp_path):
    """SeaweedFS itself is SIGKILLed after the first file of a checkpoint is uploaded and
    restarted on the same data once the writer has given up: the previous version is still the
    latest good one, restores intact, and the next save publishes over the dead writer's leftovers."""
    import json
    import subprocess
    import sys

    from tests.conftest import _weed_binary, start_weed, stop_weed

    if _weed_binary() is None:
        pytest.skip("SeaweedFS `weed` binary not found")
    data = tmp_path / "weed"
    data.mkdir()
    proc, info = start_weed(data)
    try:
        url, options = f"s3://{info['bucket']}/kill-store", info["storage_options"]
        open_store(url, options, keep=1).save("t00", _dir(tmp_path / "v1", 1), step=1)
        v2 = tmp_path / "v2"
        v2.mkdir()
        for name in "abcdef":
            (v2 / name).write_bytes(name.encode() * 1000)
        writer = subprocess.Popen([sys.executable, "-c", KILLABLE_WRITER, url, json.dumps(options), str(v2)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env={**os.environ, "PYTHONPATH": os.getcwd()})
        assert writer.stdout.readline().startswith("uploaded")
        os.killpg(proc.pid, signal.SIGKILL)  # the store dies mid-checkpoint
        proc.wait()
        # let the writer go on (stdin closed): it retries (bounded) and gives up
        _, err = writer.communicate(timeout=60)
        assert writer.returncode != 0 and "StoreUnavailable" in err
        proc, info = start_weed(data, info["ports"])  # the same store comes back
        store = open_store(url, options, keep=1)
        latest = store.latest_good("t00")
        assert (latest.version, latest.step) == (1, 1)
        out = tmp_path / "out"
        assert store.restore("t00", out).step == 1 and (out / "w").read_bytes() == b"state at step 1"
        assert store.save("t00", _dir(tmp_path / "v3", 2), step=2).version == 2
        assert open_store(url, options).restore("t00", tmp_path / "out2").step == 2
    finally:
        stop_weed(proc)


# -- launches pause during an outage; a persistent one ends the run -------------------------------------

@pytest.mark.server
def test_store_monitor_sees_an_outage_and_the_recovery(seaweedfs, s3_store_url):
    from spottune.checkpoint import StoreMonitor

    pid = seaweedfs["pid"]
    options = {**seaweedfs["storage_options"], "config_kwargs": {"connect_timeout": 0.5, "read_timeout": 0.5}}
    monitor = StoreMonitor(open_store(s3_store_url, options), give_up_after_s=30.0, min_interval_s=0.0)
    assert monitor.reachable() and monitor.last.ok
    os.killpg(pid, signal.SIGSTOP)  # the real server freezes
    try:
        _wait_stopped(pid)
        # once in CI the first probe after the stop was still answered (cause not found; the stop is now awaited
        # above): the outage must show within three probes
        seen = [monitor.reachable() for _ in range(3)]
        assert False in seen and "is unreachable" in monitor.last.error, seen
        assert monitor.outages == 1 and monitor.down_since is not None
    finally:
        os.killpg(pid, signal.SIGCONT)
    assert monitor.reachable() and monitor.down_since is None


def _wait_stopped(pid: int, timeout_s: float = 5.0) -> None:
    """Wait until the kernel reports ``pid`` stopped (state T in /proc/<pid>/stat): kill() only queues SIGSTOP."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "T":
                return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} did not stop within {timeout_s} s")


def test_store_monitor_gives_up_after_the_limit():
    from spottune.checkpoint import StoreMonitor

    now = [0.0]
    store = open_store("s3://spottune/x", {"endpoint_url": "http://127.0.0.1:1", "key": "k", "secret": "s"})
    monitor = StoreMonitor(store, give_up_after_s=10.0, min_interval_s=1.0, clock=lambda: now[0])
    assert monitor.reachable() is False
    now[0] = 9.5
    assert monitor.reachable() is False
    now[0] = 10.0
    with pytest.raises(StoreUnavailable, match=r"unreachable for 10\.0 s \(limit 10 s\), giving up"):
        monitor.reachable()


def test_local_run_with_an_unreachable_store_ends_with_a_clear_error_quickly(tmp_path):
    """A real local-backend run whose S3 endpoint refuses connections: no instance is launched, and the
    run ends with BackendError after ``store_outage_s`` instead of churning workers."""
    from spotmarket import Billing, LegacyBidRevocation
    from spottune.backends import LocalBackend, LocalSettings
    from spottune.errors import BackendError
    from spottune.orchestrator import Orchestrator, OrchestratorConfig
    from tests.test_local_backend import FACTS
    from tests.test_sim_backend import T0, Fixed, history
    from tests.test_worker_process import WORKLOAD

    hist = history(None)
    orch = Orchestrator(["t0"], OrchestratorConfig(max_steps=20, theta=1.0, top_k=1, metric="loss"), Fixed())
    settings = LocalSettings(store_url="s3://spottune/x",
                             storage_options={"endpoint_url": "http://127.0.0.1:1", "key": "k", "secret": "s"},
                             time_scale=1800.0, max_wall_s=60.0, standby_workers=0, store_outage_s=2.0,
                             log_dir=str(tmp_path / "w"))
    backend = LocalBackend(orch, hist, LegacyBidRevocation(hist), Billing(), WORKLOAD, {"t0": ({"lr": 0.1}, 1)},
                           FACTS.__getitem__, T0, settings)
    t0 = time.monotonic()
    with pytest.raises(BackendError, match=r"local backend: checkpoint store s3://spottune/x is unreachable .* giving up"):
        backend.run()
    assert time.monotonic() - t0 < 30.0
    assert backend.record.ledger == []  # no instance was paid for during the outage
    failed = [r for r in backend.record.log if r["type"] == "LaunchFailed"]
    assert failed and all("is unreachable" in r["error"] for r in failed)


@pytest.mark.server
def test_local_run_pauses_launches_while_seaweedfs_is_frozen_then_finishes(seaweedfs, s3_store_url, tmp_path):
    """The real SeaweedFS server is frozen (SIGSTOP) when a local-backend run starts and thawed 1 s after the
    backend has seen the outage: no instance is launched (nor paid for) meanwhile, then the trial runs to
    the end."""
    import threading

    from spotmarket import Billing, LegacyBidRevocation
    from spottune.backends import LocalBackend, LocalSettings
    from spottune.orchestrator import Orchestrator, OrchestratorConfig, TrialState
    from tests.test_local_backend import FACTS
    from tests.test_sim_backend import T0, Fixed, history
    from tests.test_worker_process import WORKLOAD

    pid = seaweedfs["pid"]
    options = {**seaweedfs["storage_options"], "config_kwargs": {"connect_timeout": 0.5, "read_timeout": 0.5}}
    hist = history(None)
    orch = Orchestrator(["t0"], OrchestratorConfig(max_steps=20, theta=1.0, top_k=1, metric="loss"), Fixed())
    settings = LocalSettings(store_url=s3_store_url, storage_options=options, time_scale=1800.0, max_wall_s=90.0,
                             standby_workers=0, store_outage_s=30.0, log_dir=str(tmp_path / "w"))
    backend = LocalBackend(orch, hist, LegacyBidRevocation(hist), Billing(), WORKLOAD, {"t0": ({"lr": 0.1}, 1)},
                           FACTS.__getitem__, T0, settings)
    frozen = threading.Event()

    def paused_twice():  # the backend refused two launches for the outage (or the run ended)
        failed = sum(r["type"] == "LaunchFailed" for r in list(backend.record.log))
        return failed >= 2 or not frozen.is_set()

    def thaw_once_launches_pause():  # not a fixed delay: a loaded machine may take seconds to start the run
        try:
            wait_until(paused_twice, 60.0, interval_s=0.05, what="two launches paused by the outage")
        finally:
            os.killpg(pid, signal.SIGCONT)

    os.killpg(pid, signal.SIGSTOP)
    frozen.set()
    thaw = threading.Thread(target=thaw_once_launches_pause, daemon=True)
    thaw.start()
    try:
        record = backend.run()
    finally:
        frozen.clear()
        os.killpg(pid, signal.SIGCONT)
    assert orch.trials["t0"].state is TrialState.FINISHED and orch.trials["t0"].failures == 0
    types = [r["type"] for r in record.log if r["kind"] == "event"]
    first_launch = types.index("TrialLaunched")
    paused = [r for r in record.log if r["type"] == "LaunchFailed"]
    assert paused and all("is unreachable" in r["error"] for r in paused)
    assert types[:first_launch].count("LaunchFailed") == len(paused)  # all before the first instance
    assert backend.store_monitor.outages == 1
