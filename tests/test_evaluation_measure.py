"""measure(): one table row from a finished run, on a hand-made run whose numbers are worked out below."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from spotmarket import LedgerRow
from spotmarket.prices import Market
from spottune.evaluation import Study
from spottune.evaluation._runner import Task, measure
from spottune.orchestrator import TrialState
from tests._fakes import FakeOrchestrator, FakeRecord, FakeTrial

M = Market("us-east-1a", "r3.large")
T0 = 1430784000.0  # 2015-05-05T00:00Z
FINAL = {"a": 0.90, "b": 0.80, "c": 0.95, "d": 0.70}  # each trial's true metric at max_steps


def _study(mode):
    curves = {t: [{"acc": 0.1}, {"acc": v}] for t, v in FINAL.items()}
    return Study(name="toy", trial_ids=list(FINAL), configs={t: {} for t in FINAL}, curves=curves, metric="acc",
                 mode=mode, max_steps=2, reference_seconds_per_step={t: 1.0 for t in FINAL}, checkpoint_size_mb=0.0)


def _row(instance_id, trial_id, start, end, ended_by, reason, billed_s, charged, refunded):
    return LedgerRow(market=M, instance_id=instance_id, trial_id=trial_id, start_s=T0 + start, end_s=T0 + end,
                     ended_by=ended_by, reason=reason, billed_s=billed_s, charged_usd=charged, refunded_usd=refunded)


def _run(top_k):
    """Two hours; four instance runs; 30 steps of which the 6 of the refunded run i2 ran on refunded time."""
    trials = {"a": FakeTrial(TrialState.FINISHED, revocations=0, hops=1),
              "b": FakeTrial(TrialState.STOPPED_EARLY),
              "c": FakeTrial(TrialState.FINISHED, revocations=2),
              "d": FakeTrial(TrialState.STOPPED_EARLY)}
    ledger = [
        _row("i1", "a", 0, 3600, "user", "hop", 3600.0, 0.10, 0.0),
        _row("i2", "c", 0, 1800, "provider", "price", 0.0, 0.0, 0.05),  # refunded
        _row("i3", "a", 3600, 7200, "user", "end", 3600.0, 0.15, 0.0),
        _row("i4", "c", 1800, 5400, "provider", "price", 3600.0, 0.05, 0.0),  # billed: not refunded
    ]
    steps = {"i1": (10, 0), "i2": (6, 1), "i3": (10, 0), "i4": (4, 0)}
    log = [  # a 10 s HOP checkpoint on i1 and a 30 s restore on i3
        {"kind": "action", "type": "Checkpoint", "instance_id": "i1", "t": T0 + 3590},
        {"kind": "event", "type": "CheckpointSaved", "instance_id": "i1", "t": T0 + 3600},
        {"kind": "event", "type": "TrialLaunched", "instance_id": "i3", "t": T0 + 3630, "time_s": T0 + 3630,
         "started_s": T0 + 3600},
    ]
    return FakeOrchestrator(trials, top_k=tuple(top_k)), FakeRecord(ledger, steps, log, T0, T0 + 7200)


TASK = Task(workload="toy", policy="spottune-0.7", start_index=3, start_s=T0, market_mode="legacy", seed=7,
            train_lo_s=0.0, train_hi_s=1.0)
POLICY = SimpleNamespace(name="spottune-0.7", theta=0.7, predictor="revpred", uses_predictor=True)


def test_the_row_of_a_hand_made_run():
    orch, record = _run(["a", "c", "b"])
    row = measure(TASK, POLICY, _study("max"), orch, record)
    assert row == {
        "policy": "spottune-0.7", "workload": "toy", "market_mode": "legacy", "start_index": 3,
        "start": "2015-05-05T00:00Z", "seed": 7, "theta": 0.7, "predictor": "revpred",
        "cost_usd": pytest.approx(0.30), "jct_h": 2.0, "pcr": pytest.approx(1 / (2.0 * 0.30)), "pcr_norm": row["pcr_norm"],
        # mode max: truly best c (0.95), then a, b, d; chosen a first, c second
        "top1": 0.0, "top3": 1.0, "regret": pytest.approx(0.95 - 0.90),
        "refunded_share": pytest.approx(6 / 30), "revocations": 2, "hops": 1, "lost_steps": 1,
        # 10 s checkpoint + 30 s restore over 12600 s of instance time minus those 40 s
        "ckpt_overhead_share": pytest.approx(40 / 12560), "steps_executed": 30, "instances": 4,
        "refunded_usd": pytest.approx(0.05), "stopped_early": 2, "chosen_best": "a", "true_best": "c",
        "note": "", "error": "", "deadline_met": row["deadline_met"], "budget_stopped": 0.0,
    }
    assert math.isnan(row["pcr_norm"])  # normalised later, across the policies of one start
    assert math.isnan(row["deadline_met"])  # no deadline: undefined, not 0 or 1


@pytest.mark.parametrize(("mode", "top_k", "top1", "top3", "regret"), [
    ("max", ["c"], 1.0, 1.0, 0.0),
    ("max", ["a", "c", "b"], 0.0, 1.0, 0.95 - 0.90),
    ("max", ["b", "d", "a", "c"], 0.0, 0.0, 0.95 - 0.80),  # c only fourth: outside the top 3
    ("min", ["d", "a"], 1.0, 1.0, 0.0),  # mode min: truly best d (0.70)
    ("min", ["a", "c", "b"], 0.0, 0.0, 0.90 - 0.70),
])
def test_top1_top3_and_regret(mode, top_k, top1, top3, regret):
    orch, record = _run(top_k)
    row = measure(TASK, POLICY, _study(mode), orch, record)
    assert (row["top1"], row["top3"]) == (top1, top3)
    assert row["regret"] == pytest.approx(regret, abs=1e-12)
    assert row["chosen_best"] == top_k[0]


def test_no_choice_has_no_regret():
    orch, record = _run([])
    row = measure(TASK, POLICY, _study("max"), orch, record)
    assert (row["top1"], row["top3"], row["chosen_best"], row["true_best"]) == (0.0, 0.0, "", "c")
    assert math.isnan(row["regret"])


def test_refunded_share_counts_only_unbilled_provider_ends():
    orch, record = _run(["c"])
    # make i4 unbilled too (as if interrupted in its first hour): its 4 steps and 0.05 USD become refunded
    record.ledger[3] = _row("i4", "c", 1800, 5400, "provider", "price", 0.0, 0.0, 0.05)
    row = measure(TASK, POLICY, _study("max"), orch, record)
    assert row["refunded_share"] == pytest.approx((6 + 4) / 30)
    assert row["cost_usd"] == pytest.approx(0.25) and row["refunded_usd"] == pytest.approx(0.10)


@pytest.mark.parametrize(("deadline_s", "met"), [(7200.0, 1.0), (7199.0, 0.0)])
def test_deadline_met_is_jct_within_the_deadline(deadline_s, met):
    from dataclasses import replace

    orch, record = _run(["a"])
    row = measure(replace(TASK, deadline_s=deadline_s), POLICY, _study("max"), orch, record)  # JCT 2.0 h
    assert row["deadline_met"] == met and row["budget_stopped"] == 0.0


def test_the_trial_order_of_a_start_is_drawn_once_for_every_policy():
    """DB16: a permutation from default_rng([seed, start_index]): the same at the same start, another at another."""
    import numpy as np

    from spottune.evaluation._runner import trial_order

    ids = [f"t{i:02d}" for i in range(16)]
    a = trial_order(ids, 0, 5)
    assert a == trial_order(ids, 0, 5) and sorted(a) == ids and a != ids
    assert a == [ids[i] for i in np.random.default_rng([0, 5]).permutation(16)]
    assert trial_order(ids, 0, 6) != a and trial_order(ids, 1, 5) != a
    assert not Task(workload="w", policy="p", start_index=0, start_s=0.0, market_mode="legacy", seed=0,
                    train_lo_s=0.0, train_hi_s=1.0).shuffle_trials  # off by default: spottune simulate keeps the order
