"""The local backend: real worker processes, real checkpoints (folder and SeaweedFS S3), a replayed market.

The market and the orchestrator are the simulator's; the trainable is the NumPy ``Walk`` of
``test_worker_process`` so worker processes start fast. Time runs 1,800x faster than the market.
"""

from __future__ import annotations

import pytest

from spottune.backends import LocalBackend, LocalSettings
from spottune.errors import BackendError
from spotmarket import Billing, LegacyBidRevocation
from spottune.orchestrator import Orchestrator, OrchestratorConfig, TrialState
from tests.test_sim_backend import T0, Fixed, history
from tests.test_worker_process import WORKLOAD, Walk

FACTS = {"r3.large": (2, 6.5)}  # Fixed always chooses market A (us-east-1a, r3.large)


def run_local(store_url, configs, *, spike_at_s=None, max_steps=40, theta=1.0, top_k=1, storage_options=None,
              time_scale=1800.0, max_failures=1, max_wall_s=60.0):
    hist = history(spike_at_s)
    ids = [f"t{i}" for i in range(len(configs))]
    orch = Orchestrator(ids, OrchestratorConfig(max_steps=max_steps, theta=theta, top_k=top_k, metric="loss",
                                                max_failures=max_failures), Fixed())
    backend = LocalBackend(orch, hist, LegacyBidRevocation(hist), Billing(), WORKLOAD,
                           {t: (c, 100 + i) for i, (t, c) in enumerate(zip(ids, configs))}, FACTS.__getitem__, T0,
                           LocalSettings(store_url=store_url, storage_options=storage_options or {},
                                         time_scale=time_scale, max_wall_s=max_wall_s))
    return orch, backend.run()


def reported(record, trial_id):
    """Every MetricReported of a trial, in order (replayed steps after a rollback appear twice)."""
    return [(r["step"], r["metrics"]) for r in record.log
            if r["kind"] == "event" and r["type"] == "MetricReported" and r["trial_id"] == trial_id]


def assert_same_curve(record, trial_id, config, seed, max_steps):
    ref = Walk(config, seed=seed)
    expected = {i + 1: ref.train() for i in range(max_steps)}
    got = reported(record, trial_id)
    assert {s for s, _ in got} == set(expected)
    for step, metrics in got:  # every report, including replays, equals the uninterrupted run
        assert metrics == expected[step], step


def test_revocation_and_hourly_hops_with_real_processes_repeat_the_curve(tmp_path):
    configs = [{"lr": 0.02}, {"lr": 0.05}]
    # 100 steps x 60 s = 1.7 h of training: a revocation at 30 min (price spike), then an hourly hop
    orch, rec = run_local(str(tmp_path / "store"), configs, spike_at_s=1800.0, max_steps=100, top_k=1,
                          time_scale=1200.0)  # the 120 s notice is 100 ms of wall time for the save
    for i, (tid, tr) in enumerate(orch.trials.items()):
        assert tr.state is TrialState.FINISHED and tr.step == 100 and tr.failures == 0
        assert tr.revocations == 1 and tr.hops >= 1
        assert_same_curve(rec, tid, configs[i], 100 + i, 100)
    provider = [r for r in rec.ledger if r.ended_by == "provider"]
    assert len(provider) == 2 and all(r.charged_usd == 0 and r.refunded_usd > 0 for r in provider)
    assert all(r.end_s == pytest.approx(T0 + 1800 + 120) for r in provider)
    kinds = [(r["type"], r.get("reason")) for r in rec.log]
    # on a loaded machine one save may miss the 100 ms: then that trial rolled back (checked by the curve)
    assert ("CheckpointSaved", "revocation") in kinds and ("CheckpointSaved", "hop") in kinds
    assert ("HourElapsed", None) in kinds and orch.top_k and rec.end_s is not None
    workers = rec.meta["worker"]
    assert len(workers) == len(rec.ledger) and all(w.get("ready_wall_s") for w in workers.values())


@pytest.mark.server
def test_local_backend_on_seaweedfs_s3(seaweedfs, s3_store_url):
    config = {"lr": 0.03}
    orch, rec = run_local(s3_store_url, [config], spike_at_s=1200.0, max_steps=80,
                          storage_options=seaweedfs["storage_options"])
    tr = orch.trials["t0"]
    assert tr.state is TrialState.FINISHED and tr.revocations == 1
    assert_same_curve(rec, "t0", config, 100, 80)
    from spottune.checkpoint import open_store

    assert open_store(s3_store_url, seaweedfs["storage_options"]).latest_good("t0").step == 80


def test_checkpoint_that_cannot_finish_before_termination_rolls_back(tmp_path):
    """Each save takes 0.3 s wall = 540 simulated s > the 120 s notice: the revocation checkpoint is lost,
    the trial resumes from its last good checkpoint (none: step 0), the lost steps are counted, and the
    replayed steps equal the uninterrupted run."""
    config = {"lr": 0.02, "save_sleep_s": 0.3}
    orch, rec = run_local(str(tmp_path / "store"), [config], spike_at_s=1500.0, max_steps=40)
    tr = orch.trials["t0"]
    assert tr.state is TrialState.FINISHED and tr.revocations == 1 and tr.lost_steps > 0
    first = rec.ledger[0]
    assert first.ended_by == "provider" and rec.instance_steps[first.instance_id][1] == tr.lost_steps
    kinds = [(r["type"], r.get("reason")) for r in rec.log if r.get("trial_id") == "t0"]
    assert ("CheckpointSaved", "revocation") not in kinds and ("SegmentEnded", "provider") in kinds
    assert_same_curve(rec, "t0", config, 100, 40)
    assert len(reported(rec, "t0")) == 40 + tr.lost_steps  # every lost step was run again


def test_failing_trainable_is_retried_then_failed(tmp_path):
    orch, rec = run_local(str(tmp_path / "store"), [{"lr": 0.02, "fail_at": 5}, {"lr": 0.02}], max_steps=20,
                          max_failures=1)
    assert orch.trials["t0"].state is TrialState.FAILED and orch.trials["t0"].failures == 2
    assert orch.trials["t1"].state is TrialState.FINISHED
    errors = [r["error"] for r in rec.log if r["type"] == "SegmentFailed"]
    assert errors and all("RuntimeError: boom" in e for e in errors)


def test_a_memory_store_is_refused():
    hist = history()
    orch = Orchestrator(["t0"], OrchestratorConfig(max_steps=5), Fixed())
    with pytest.raises(BackendError, match="separate processes"):
        LocalBackend(orch, hist, LegacyBidRevocation(hist), Billing(), WORKLOAD, {"t0": ({}, 0)}, FACTS.__getitem__,
                     T0, LocalSettings(store_url="memory://x"))


def test_an_instance_held_past_its_hours_is_stopped_by_the_budget_with_real_processes(tmp_path):
    """The hourly budget check (DB5) in the local backend: one trial of 200 steps (3 h 20 min) that never hops,
    max price 0.1 USD/h at a flat 0.02: at 3 h, 0.06 USD billed + its next hour at the max price (0.1) > 0.15, so
    the run stops there, the worker is ended and billed, and the run keeps the trial's best so far."""
    orch = Orchestrator(["t0"], OrchestratorConfig(max_steps=200, theta=1.0, top_k=1, metric="loss",
                                                   hourly_hop=False), Fixed())
    hist = history()
    backend = LocalBackend(orch, hist, LegacyBidRevocation(hist), Billing(), WORKLOAD, {"t0": ({"lr": 0.02}, 100)},
                           FACTS.__getitem__, T0, LocalSettings(store_url=str(tmp_path / "store"), time_scale=1800.0,
                                                                max_wall_s=60.0))
    backend.budget_usd = 0.15
    rec = backend.run()
    assert "at 3.00 h would exceed --budget-usd 0.15" in rec.meta["budget_exhausted"]
    (row,) = rec.ledger
    # the worker ends a few wall milliseconds after the check (a wall millisecond is 1.8 engine seconds): allow 60 s
    assert row.end_s == pytest.approx(T0 + 3 * 3600, abs=60.0)
    assert row.charged_usd == pytest.approx(0.02 * (row.end_s - row.start_s) / 3600, rel=1e-9)
    assert row.charged_usd == pytest.approx(0.06, abs=0.02 * 60 / 3600)
    assert sum(r.charged_usd for r in rec.ledger) <= 0.15
