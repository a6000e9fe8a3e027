"""Checkpoint retention and fallback with real worker processes: unconfirmed saves never prune the confirmed checkpoint,
and a corrupt confirmed checkpoint falls back to the newest good earlier one instead of failing the trial."""

from __future__ import annotations

import pytest

from spottune.checkpoint import open_store
from tests.test_worker_process import Worker, reference


def _segment(store, resume, until, keep):
    """A worker that restores ``resume``, trains to ``until`` and saves there (the orchestrator may never hear of it)."""
    w = Worker(store, "none", until=until, resume=resume, step_wall_s=0.0, extra=("--keep", str(keep)))
    ready = w.until("ready")
    w.until("idle")
    w.send(cmd="checkpoint", reason="hop")
    saved = w.until("checkpoint")
    assert w.finish() == 0
    return ready, saved


@pytest.mark.parametrize("keep", [1, 2])
def test_unconfirmed_worker_saves_keep_the_confirmed_checkpoint(tmp_path, keep):
    store = str(tmp_path / "store")
    _, first = _segment(store, 0, 5, keep)  # confirmed: the orchestrator resumes from step 5
    assert (first["version"], first["step"]) == (1, 5)
    for until in (10, 8):  # published, then the worker "dies" before the orchestrator hears of it
        ready, _ = _segment(store, 5, until, keep)
        assert ready["step"] == 5 and "lost_steps" not in ready
    ready, saved = _segment(store, 5, 7, keep)
    assert (ready["step"], ready["version"], saved["step"]) == (5, 1, 7)


def test_corrupt_confirmed_checkpoint_falls_back_and_the_curve_continues(tmp_path):
    store = str(tmp_path / "store")
    _segment(store, 0, 5, 2)
    _segment(store, 5, 10, 2)  # confirmed at step 10
    s = open_store(store)
    v2 = s.versions("t0")[-1]
    path = f"{s.fs._strip_protocol(v2.location)}/.spottune_trainable.json"
    data = bytearray(s.fs.cat_file(path))
    data[3] ^= 0x01  # one flipped bit
    s.fs.pipe_file(path, bytes(data))
    w = Worker(store, "none", until=12, resume=10, step_wall_s=0.0)
    ready = w.until("ready")
    assert (ready["step"], ready["version"], ready["requested_step"], ready["lost_steps"]) == (5, 1, 10, 5)
    w.until("idle")
    w.send(cmd="exit")
    assert w.finish() == 0
    assert w.metrics() == reference(12)[5:]  # steps 6..12 redone, bit-identical to an uninterrupted run
