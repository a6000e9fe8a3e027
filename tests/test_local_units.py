"""Units of work that survive lost workers on the local backend (decision SV4): real worker processes, one
SIGKILLed and one SIGSTOPped (alive but silent) in the middle of a unit, not the driver.

The market, orchestrator and trainable are :mod:`tests.test_local_backend`'s. Each trial pauses at the θ barrier
(step 20, a checkpoint: the first unit ``0-20`` completes) and continues (unit ``20-40``); at its 25th step its
worker is lost. The unit goes back to the queue and the trial relaunches from its latest checkpoint (step 20) on a
new worker (each launch is a new worker: a warm process of the pool, or a new one); every step ends up counted once.
"""

from __future__ import annotations

import os
import signal

import pytest

from spotmarket import Billing, LegacyBidRevocation
from spottune.backends import LocalBackend, LocalSettings
from spottune.backends._worker_driver import WORKER_LOST
from spottune.orchestrator import Orchestrator, OrchestratorConfig, TrialState
from spottune.results import curves_frame
from tests.test_local_backend import FACTS, assert_same_curve, reported
from tests.test_sim_backend import T0, Fixed, history
from tests.test_worker_process import WORKLOAD

pytestmark = [pytest.mark.process, pytest.mark.slow]

PERIOD_S, MISSED = 0.5, 3
CONFIGS = {"t0": {"lr": 0.02}, "t1": {"lr": 0.05}}
HOW = {"t0": signal.SIGKILL, "t1": signal.SIGSTOP}


def test_a_killed_and_a_stopped_worker_lose_their_units_which_finish_once_elsewhere(tmp_path):
    hist = history()
    orch = Orchestrator(sorted(CONFIGS), OrchestratorConfig(max_steps=40, theta=0.5, top_k=2, metric="loss",
                                                            max_failures=0), Fixed())
    backend = LocalBackend(orch, hist, LegacyBidRevocation(hist), Billing(), WORKLOAD,
                           {t: (c, 100 + i) for i, (t, c) in enumerate(sorted(CONFIGS.items()))}, FACTS.__getitem__,
                           T0, LocalSettings(store_url=str(tmp_path / "store"), time_scale=3600.0, max_wall_s=60.0,
                                             heartbeat_wall_s=PERIOD_S, missed_beats=MISSED, checkpoint_keep=1))
    hit: dict[str, dict] = {}

    def progress(now_s, orch_, usd):  # on the driver's thread, as each event is delivered
        for tid, tr in orch_.trials.items():
            inst = backend.driver.instances.get(tr.instance_id)
            if tid not in hit and tr.step >= 25 and inst is not None and inst.worker is not None:
                pid = inst.worker.proc.pid
                os.kill(pid, HOW[tid])  # the worker process only: the driver runs on
                hit[tid] = {"instance_id": inst.instance_id, "pid": pid, "wall_s": backend.driver.clock.wall_s()}

    backend.driver.progress = progress
    rec = backend.run()
    assert sorted(hit) == ["t0", "t1"]
    units = rec.meta["units"]
    lost = {x["trial_id"]: x for x in units["lost"]}
    assert sorted(lost) == ["t0", "t1"] and len(units["lost"]) == 2  # no live worker was declared lost
    assert lost["t0"]["why"] == "the worker process was killed (SIGKILL)"
    assert lost["t1"]["why"] == f"missed {MISSED} heartbeats of {PERIOD_S} s"
    for tid in CONFIGS:
        assert lost[tid]["instance_id"] == hit[tid]["instance_id"]
        assert lost[tid]["unit"] == f"{tid}:20-40"  # the unit in flight: from the θ checkpoint to the end
    # the stopped worker's last beat came at most one period before it stopped: declared lost within N periods
    delay = lost["t1"]["wall_s"] - hit["t1"]["wall_s"]
    assert (MISSED - 1) * PERIOD_S - 0.05 <= delay <= MISSED * PERIOD_S + 0.5, delay
    assert lost["t0"]["wall_s"] - hit["t0"]["wall_s"] < MISSED * PERIOD_S  # seen at its exit, before any beat
    # the units: every step counted once, the latest checkpoint of each trial at its last step
    assert units["steps_done"] == {"t0": 40, "t1": 40} and units["pending"] == [] and units["in_flight"] == {}
    # v1: the θ save, v2 the last unit's save at step 40; the lost worker saved none. On a loaded machine a segment
    # can outlast its instance's hour (1 wall second at 3600x) and save at the hourly tick too, one version more.
    version = {tid: int(units["checkpoints"][tid].removeprefix(f"{tid}@40:v")) for tid in CONFIGS}
    assert all(v >= 2 for v in version.values()), units["checkpoints"]
    # only the latest checkpoint is kept: the θ one (step 20), pinned by the segment that restored it, went once
    # the last unit's save completed it, and so did any hourly one before it
    assert units["deleted_versions"] == {tid: v - 1 for tid, v in version.items()}
    for tid in CONFIGS:
        manifests = sorted((tmp_path / "store" / tid / "manifests").glob("v*.json"))
        assert [m.name for m in manifests] == [f"v{version[tid]:08d}.json"]
        assert len(list((tmp_path / "store" / tid / "data").iterdir())) == 1
    curves = curves_frame(orch)
    for i, (tid, tr) in enumerate(sorted(orch.trials.items())):
        # a lost worker is neither a trainable failure (max_failures 0 would have failed the trial) nor a notice
        assert (tr.state, tr.step, tr.failures, tr.revocations) == (TrialState.FINISHED, 40, 0, 1), tid
        assert 5 <= tr.lost_steps <= 8, tid  # killed at step 25, at most a few more steps reported before
        assert curves.loc[curves.trial_id == tid, "step"].tolist() == list(range(1, 41))  # each step once
        assert_same_curve(rec, tid, CONFIGS[tid], 100 + i, 40)  # the relaunch from step 20 repeats the curve
        assert len(reported(rec, tid)) == 40 + tr.lost_steps  # every lost step was run again, once
        ended = [r for r in rec.ledger if r.instance_id == hit[tid]["instance_id"]]
        assert [(r.ended_by, r.reason) for r in ended] == [("user", WORKER_LOST)]
        assert {"instance_id": hit[tid]["instance_id"], "unit": f"{tid}:20-40", "why": "lost"} in units["requeued"]
        last = tr.instance_ids[-1]  # the last segment ran on a new worker
        assert last != hit[tid]["instance_id"] and rec.meta["worker"][last]["ready_wall_s"] > lost[tid]["wall_s"]
        assert rec.meta["worker"][last]["worker"] != rec.meta["worker"][hit[tid]["instance_id"]]["worker"]
        launches = [r for r in rec.log if r["kind"] == "action" and r["type"] == "Launch" and r["trial_id"] == tid]
        resumes = [r["resume_step"] for r in launches]  # the third resumes the latest checkpoint (the θ one); a
        assert resumes[:3] == [0, 20, 20] and len(resumes) <= 3 + version[tid] - 2, resumes  # later one: an hourly save
    assert sum(executed - lost_ for executed, lost_ in rec.instance_steps.values()) == 80
