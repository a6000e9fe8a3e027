"""The budget as a hard cap in the sim backend (decision DB5): no launch may push committed plus expected spend
above the budget; when it runs short the run stops, keeps the best trials so far and says so.

The scripted market of ``tests.test_backend_contract`` (3 trials, fixed max price 0.1 USD/h)."""

from __future__ import annotations

import pytest

from spotmarket import Billing, LegacyBidRevocation
from spottune.backends import SimBackend, SimSettings, TrainableCurves
from spottune.backends._caps import CapExceeded, check_caps
from spottune.orchestrator import Orchestrator, OrchestratorConfig
from tests.test_backend_contract import CONFIGS, MAX_STEPS, SEEDS, THETA
from tests.test_local_backend import FACTS
from tests.test_sim_backend import A, T0, Choice, history
from tests.test_worker_process import Walk


class Tight:
    """Market A at max price 0.021 USD/h (price 0.02; the spike to 1.0 at 600 s revokes it)."""

    def choose(self, trial_id, now_s):
        return Choice(A, 0.021)

    def record_segment(self, *args):
        pass


def _run(budget):
    hist = history(spike_at_s=600.0, hours=12)
    orch = Orchestrator(list(CONFIGS), OrchestratorConfig(max_steps=MAX_STEPS, theta=THETA, top_k=1, metric="loss",
                                                          max_failures=1), Tight())
    curves = TrainableCurves({t: (lambda t=t: Walk(CONFIGS[t], seed=SEEDS[t])) for t in CONFIGS})
    sim = SimBackend(orch, hist, LegacyBidRevocation(hist), Billing(), curves, FACTS.__getitem__, T0,
                     SimSettings(boot_s=0.0, step_time_cov=0.0, checkpoint_overhead_s=0.0))
    sim.budget_usd = budget
    rec = sim.run()
    return orch, rec, sum(r.charged_usd for r in rec.ledger)


def test_whole_hours_counts_live_instances_to_their_hour_end():
    live = [(0.10, 0.0), (0.20, 0.0)]
    # at 30 min, 0.05 accrued: the rest of each first hour at max price (0.05 + 0.10), + 0.10 for the new one
    kw = dict(max_price=0.10, live=live, now_s=1800.0, spent_usd=0.0, max_usd_per_hour=None, whole_hours=True,
              accrued_usd=0.05)
    assert check_caps(budget_usd=0.30 + 1e-9, **kw) is None
    with pytest.raises(CapExceeded, match=r"0.2000 committed"):
        check_caps(budget_usd=0.2999, **kw)
    # at 1 h 10 min, nothing accrued (given): 50 min left of the second hour
    with pytest.raises(CapExceeded, match=r"0.2500 committed"):
        check_caps(max_price=0.10, live=live, now_s=4200.0, spent_usd=0.0, max_usd_per_hour=None,
                   budget_usd=0.34, whole_hours=True, accrued_usd=0.0)


def test_ample_budget_changes_nothing():
    _, free, usd_free = _run(None)
    orch, rec, usd = _run(10.0)
    assert "budget_exhausted" not in rec.meta and usd == pytest.approx(usd_free) and orch.done


@pytest.mark.parametrize("share", [0.5, 0.7, 0.9])
def test_short_budget_is_never_exceeded_and_said(share):
    _, _, usd_free = _run(None)
    budget = max(0.064, share * usd_free)  # at least the first three launches (3 x 0.021 USD/h x 1 h)
    orch, rec, usd = _run(budget)
    assert usd <= budget + 1e-12
    assert usd_free > budget  # the cap binds
    assert "would exceed --budget-usd" in rec.meta["budget_exhausted"]
    launched = {r["instance_id"] for r in rec.log if r["kind"] == "event" and r["type"] == "TrialLaunched"}
    assert launched <= {r.instance_id for r in rec.ledger}  # every instance was ended and billed


def _held(budget, price_after_1h):
    """One trial of 200 steps (60 s each on r3.large: 3 h 20 min) on one instance that never hops, max price
    0.1 USD/h; the price is 0.02 USD/h for the first hour, then ``price_after_1h`` (below the max price: no
    revocation)."""
    import pandas as pd

    from spotmarket.prices import PriceHistory
    from tests.test_sim_backend import Fixed

    rows = [(T0 - 86400, 0.02), (T0 + 3600, price_after_1h), (T0 + 12 * 3600, price_after_1h)]
    hist = PriceHistory(pd.DataFrame({
        "timestamp": pd.to_datetime([r[0] for r in rows], unit="s", utc=True), "availability_zone": A.availability_zone,
        "instance_type": A.instance_type, "product_description": "Linux/UNIX", "price": [r[1] for r in rows]}))
    orch = Orchestrator(["t0"], OrchestratorConfig(max_steps=200, theta=1.0, top_k=1, metric="loss",
                                                   hourly_hop=False), Fixed())
    curves = TrainableCurves({"t0": lambda: Walk(CONFIGS["t0"], seed=SEEDS["t0"])})
    sim = SimBackend(orch, hist, LegacyBidRevocation(hist), Billing(), curves, FACTS.__getitem__, T0,
                     SimSettings(boot_s=0.0, step_time_cov=0.0, checkpoint_overhead_s=0.0))
    sim.budget_usd = budget
    rec = sim.run()
    return rec, sum(r.charged_usd for r in rec.ledger)


def test_an_instance_past_its_first_hour_commits_each_next_hour():
    # no budget: 0.02 + 0.09 x 2 h 20 min = 0.23 USD
    rec, usd = _held(None, 0.09)
    assert usd == pytest.approx(0.02 + 0.09 * 7 / 3, rel=1e-5)  # + the final checkpoint's 0.015 s
    # budget 0.15: launch 0.1 committed; at 1 h 0.02 billed + 0.1 (next hour) = 0.12; at 2 h 0.02 + 0.09 + 0.1 =
    # 0.21 > 0.15: the run stops at 2 h, having spent 0.11 USD (the launch check alone let it spend 0.23)
    rec, usd = _held(0.15, 0.09)
    assert usd == pytest.approx(0.11)
    assert rec.end_s == pytest.approx(T0 + 2 * 3600)
    assert "at 2.00 h would exceed --budget-usd 0.15" in rec.meta["budget_exhausted"]


def test_the_hourly_commitment_binds_at_the_max_price_not_the_price():
    # flat 0.02 USD/h: at 3 h 0.06 billed + 0.1 (next hour at the max price) = 0.16 > 0.15, though the whole run
    # would cost 0.0667 USD: the cap counts the max price, as at a launch (DB5)
    rec, usd = _held(0.15, 0.02)
    assert usd == pytest.approx(0.06) and rec.end_s == pytest.approx(T0 + 3 * 3600)
    rec, usd = _held(0.17, 0.02)
    assert "budget_exhausted" not in rec.meta and usd == pytest.approx(0.02 * 10 / 3, rel=1e-5)


def committed_at_max_price(record):
    """USD a run's instances committed at their max prices: every instance-hour begun (the first at least, as the
    guard counts it at the launch), at the max price of its launch. The guard (DB5) keeps it within the budget when
    the price stays at or below the max price (the legacy rule)."""
    import math

    return sum(r.max_price_usd_per_hour * max(1, math.ceil(r.billed_s / 3600.0 - 1e-6)) for r in record.ledger)


def _first_launches(kind, tmp_path, budget):
    """The three trials of the contract at max price 0.021 USD/h on the sim or the local backend, under ``budget``."""
    from spottune.backends import LocalBackend, LocalSettings
    from tests.test_worker_process import WORKLOAD

    hist = history(spike_at_s=600.0, hours=12)
    orch = Orchestrator(list(CONFIGS), OrchestratorConfig(max_steps=MAX_STEPS, theta=THETA, top_k=1, metric="loss",
                                                          max_failures=1), Tight())
    if kind == "sim":
        curves = TrainableCurves({t: (lambda t=t: Walk(CONFIGS[t], seed=SEEDS[t])) for t in CONFIGS})
        backend = SimBackend(orch, hist, LegacyBidRevocation(hist), Billing(), curves, FACTS.__getitem__, T0,
                             SimSettings(boot_s=0.0, step_time_cov=0.0, checkpoint_overhead_s=0.0))
    else:
        backend = LocalBackend(orch, hist, LegacyBidRevocation(hist), Billing(), WORKLOAD,
                               {t: (CONFIGS[t], SEEDS[t]) for t in CONFIGS}, FACTS.__getitem__, T0,
                               LocalSettings(store_url=str(tmp_path / "store"), time_scale=1800.0, max_wall_s=60.0))
    backend.budget_usd = budget
    return backend.run()


@pytest.mark.parametrize("kind", ["sim", pytest.param("local", marks=pytest.mark.process)])
def test_the_first_launches_commit_no_more_than_the_budget(kind, tmp_path):
    # 0.021 + 0.021 = 0.042 <= 0.05; the third launch would commit 0.063: the run stops at its start on every
    # backend (the aws backend: tests/test_aws_backend.py::test_the_budget_guard_counts_the_live_instances_first_hours)
    rec = _first_launches(kind, tmp_path, 0.05)
    assert "would exceed --budget-usd 0.05" in rec.meta["budget_exhausted"]
    assert len(rec.ledger) == 2 and [r.reason for r in rec.ledger] == ["budget", "budget"]
    assert committed_at_max_price(rec) == pytest.approx(0.042)


def test_the_dry_run_says_whether_the_budget_lets_the_first_launches_go():
    from spottune.backends.aws import Plan

    plan = Plan((("t0", "a", 0.02), ("t1", "a", 0.03), ("t2", "b", 0.05)))
    assert plan.budget_verdict(0.10) == (
        "--budget-usd 0.1: ok, the first launches commit 0.10000 USD (first hours at max price), 0.00000 USD left; "
        "the guard checks again before every launch and at every instance-hour")
    assert plan.budget_verdict(0.06).startswith(
        "--budget-usd 0.06: the run would stop at its start: launch 3 of 3 (t2) would commit 0.10000 USD")
    # the hourly cap holds t2 back: it commits nothing yet
    assert plan.budget_verdict(0.06, max_usd_per_hour=0.05) == (
        "--budget-usd 0.06: ok, the first launches commit 0.05000 USD (first hours at max price, 1 launch(es) "
        "waiting for the hourly cap), 0.01000 USD left; the guard checks again before every launch and at every "
        "instance-hour")
    assert plan.render(budget_usd=0.01).splitlines()[-1].startswith(
        "--budget-usd 0.01: the run would stop at its start: launch 1 of 3 (t0)")
