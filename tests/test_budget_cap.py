"""The budget as a hard cap in the sim backend (issue 17): no launch may push committed plus expected spend
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
