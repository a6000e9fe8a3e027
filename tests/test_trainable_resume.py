"""No work lost: a trial checkpointed and resumed several times repeats the uninterrupted curve exactly.

Each resume builds a fresh trainable (as a new instance would), restores it from the checkpoint store
(folder, memory or SeaweedFS S3), and continues. Curves are compared with ``==`` on floats: bit for bit.
"""

from __future__ import annotations

import uuid

import pytest

from spottune.checkpoint import open_store
from spottune.workloads import get_workload, list_workloads


def _uninterrupted(workload, config, seed, n):
    t = workload.make(config, seed=seed)
    return [t.train() for _ in range(n)]


def _interrupted(workload, config, seed, n, store, cuts, trial_id="t00"):
    """Run to each cut, checkpoint, throw the trainable away, resume a new one from the store."""
    out = []
    t = workload.make(config, seed=seed)
    for cut in list(cuts) + [n]:
        while t.iteration < cut:
            out.append(t.train())
        if cut == n:
            break
        info = store.save_trainable(trial_id, t, metadata={"reason": "revocation"})
        assert info.step == cut
        t = workload.make(config, seed=seed)  # a new instance: setup() from scratch
        restored = store.restore_trainable(trial_id, t)
        assert restored.step == cut and t.iteration == cut
    return out


@pytest.mark.parametrize("name", list_workloads())
def test_every_workload_resumes_bit_for_bit(name):
    w = get_workload(name)
    config = w.configs()[9]
    store = open_store(f"memory://resume-{uuid.uuid4().hex}")
    n = 40
    assert _interrupted(w, config, 11, n, store, cuts=[3, 4, 17, 30]) == _uninterrupted(w, config, 11, n)


@pytest.fixture(params=["file", pytest.param("s3", marks=pytest.mark.server)])
def store(request, tmp_path):
    if request.param == "file":
        return open_store(str(tmp_path / "ckpt"))
    seaweedfs = request.getfixturevalue("seaweedfs")
    return open_store(request.getfixturevalue("s3_store_url"), seaweedfs["storage_options"])


def test_digits_mlp_revoked_five_times_matches_uninterrupted(store):
    w = get_workload("digits-mlp")
    config = {"lr": 0.2, "hidden": 32, "batch_size": 8}
    n = 60  # max_steps 300 -> first decay at 90; use max_steps=60 so both decays happen inside the test
    ref = [m for m in (lambda t: [t.train() for _ in range(n)])(w.make(config, seed=5, max_steps=n))]
    out = []
    t = w.make(config, seed=5, max_steps=n)
    for cut in (7, 18, 19, 36, 50, n):
        while t.iteration < cut:
            out.append(t.train())
        if cut < n:
            store.save_trainable("digits", t)
            t = w.make(config, seed=5, max_steps=n)
            store.restore_trainable("digits", t)
    assert out == ref
    assert sorted({round(m["lr"], 6) for m in out}) == [0.002, 0.02, 0.2]  # the resumed run crossed both decays
    assert [v.version for v in store.versions("digits")] == [4, 5]


def test_resuming_from_an_older_checkpoint_replays_the_lost_steps_identically(store):
    """A checkpoint that could not finish before termination: resume from the last good one."""
    w = get_workload("logreg")
    config = w.configs()[6]
    ref = _uninterrupted(w, config, 2, 30)
    t = w.make(config, seed=2)
    for _ in range(10):
        t.train()
    store.save_trainable("lr", t)
    for _ in range(8):
        t.train()  # steps 11..18 run, then the instance dies before its checkpoint is saved
    t = w.make(config, seed=2)
    assert store.restore_trainable("lr", t).step == 10
    replay = [t.train() for _ in range(20)]
    assert replay == ref[10:]
