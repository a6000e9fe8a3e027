"""SEER-family baselines on a tiny scripted market (decision DB7, F-S5, F-S2): rounds as step targets, the
synchronous barrier, per-bracket elimination, SEER's re-sorting across brackets, the answer, the cost.

Market: r3.large (2 vCPUs, 60 s/step on the toy study) at 0.02 USD/h in us-east-1a and c3.xlarge
(4 vCPUs) at 0.05 USD/h in us-east-1b, never revoked; no boot, no checkpoint time, no step noise."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from spotmarket import Billing, LegacyBidRevocation
from spottune.backends import SimBackend, SimSettings
from spottune.speed import seconds_per_step
from spottune.errors import ConfigError
from spottune.evaluation import get_policy
from spottune.planning._brackets import BracketOrchestrator
from spottune.orchestrator import OrchestratorConfig, TrialState
from spottune.planning import Bracket, ElasticSchedule
from tests._fakes import toy_study
from tests.test_sim_backend import A, B, FACTS, T0, history

TYPE = {2.0: "r3.large", 4.0: "c3.xlarge"}
MARKET = {"r3.large": A, "c3.xlarge": B}
SPS_C = seconds_per_step(60.0, 4, 14.0)  # c3.xlarge


@dataclass(frozen=True)
class Choice:
    market: object
    max_price_usd_per_hour: float


class ScriptChooser:
    """The assigned type's market at a max price far above its flat price (never revoked)."""

    def __init__(self):
        self.assigned, self.calls = {}, []

    def assign(self, trial_id, itype):
        self.assigned[trial_id] = itype

    def choose(self, trial_id, now_s, **kw):
        self.calls.append((trial_id, self.assigned[trial_id], now_s - T0))
        return Choice(MARKET[self.assigned[trial_id]], 0.5)

    def record_segment(self, *args):
        return 0.0


def _run(schedule, n=4, predictor=None, max_steps=100, wall_clock=False, spike_at_s=None):
    study = toy_study(n, max_steps, sps=60.0)
    orch = BracketOrchestrator(study.trial_ids, OrchestratorConfig(max_steps=max_steps, theta=1.0, top_k=1,
                                                                   hourly_hop=False), ScriptChooser(), schedule,
                               instance_type=TYPE.__getitem__, overhead_s=0.0, predictor=predictor,
                               seconds_per_step=lambda tid, t: seconds_per_step(60.0, *FACTS[t]), wall_clock=wall_clock)
    hist = history(spike_at_s=spike_at_s, hours=12)
    sim = SimBackend(orch, hist, LegacyBidRevocation(hist), Billing(), study.sim_curves(), FACTS.__getitem__, T0,
                     SimSettings(boot_s=0.0, step_time_cov=0.0, checkpoint_overhead_s=0.0))
    rec = sim.run()
    return orch, rec


SEER = ElasticSchedule("seer", (Bracket((600.0, 1200.0), (2, 1), (2.0, 2.0)),
                                Bracket((600.0, 1200.0), (2, 1), (4.0, 4.0))), migrate=True)


def test_seer_rounds_elimination_and_resorting_by_hand():
    orch, rec = _run(SEER)
    k1 = int(600.0 // SPS_C)  # steps in round 1 on c3.xlarge
    # round 1: t0, t1 on r3.large (10 steps), t2, t3 on c3.xlarge; each bracket keeps its best (t0, t2);
    # survivors by descending loss (t2 worse, then t0) are dealt in bracket order: t2 -> r3.large, t0 -> c3.xlarge
    assert orch.members == [[["t0", "t1"], ["t2"]], [["t2", "t3"], ["t0"]]]
    assert orch.eliminated == {"t1": 0, "t3": 0}
    assert orch.trials["t0"].step == 10 + int(1200.0 // SPS_C) and orch.trials["t2"].step == k1 + 20
    assert orch.trials["t0"].markets_used == [A, B] and orch.trials["t2"].markets_used == [B, A]
    assert {t: orch.trials[t].state for t in orch.trials} == {
        "t0": TrialState.FINISHED, "t1": TrialState.STOPPED_EARLY, "t2": TrialState.FINISHED,
        "t3": TrialState.STOPPED_EARLY}
    assert orch.top_k == ("t0",) and orch.final_set == ["t2", "t0"]
    # the barrier: round 2 starts at 600 s (r3.large: 10 x 60 s; c3.xlarge ends earlier), ends at 1800 s
    assert rec.end_s - T0 == pytest.approx(1800.0)
    starts = sorted((t, round(s, 6)) for t, _, s in orch.chooser.calls)
    assert starts == [("t0", 0.0), ("t0", 600.0), ("t1", 0.0), ("t2", 0.0), ("t2", 600.0), ("t3", 0.0)]
    # per-second billing at flat prices: instance-seconds x price
    r3 = 2 * 600.0 + 20 * 60.0
    c3 = 2 * k1 * SPS_C + int(1200.0 // SPS_C) * SPS_C
    assert sum(r.charged_usd for r in rec.ledger) == pytest.approx((0.02 * r3 + 0.05 * c3) / 3600.0, rel=1e-8)


def test_predictive_elimination_ranks_by_the_predicted_final_value():
    # a predictor that says the worse now, the better at the end: t1 and t3 survive instead of t0, t2 (F-S2)
    class Flip:
        def predict_final(self, steps, losses, max_steps):
            return _Pred(-float(losses[-1]))  # the worse now, the better predicted

    orch, _ = _run(SEER, predictor=Flip())
    assert orch.eliminated == {"t0": 0, "t2": 0}
    # re-sorted by predicted loss: t3 (predicted -0.3 - 1/k1) is the best, dealt to the larger bracket
    assert orch.members[0][1] == ["t1"] and orch.members[1][1] == ["t3"]
    assert orch.top_k == ("t1",)  # the answer is the best observed value of the last round (t1 < t3)


@dataclass(frozen=True)
class _Pred:
    value: float


def test_e_hyperband_brackets_are_independent():
    s = ElasticSchedule("e-hyperband", (Bracket((300.0, 300.0), (2, 1), (2.0, 2.0)),
                                        Bracket((600.0,), (2,), (2.0,))), migrate=False)
    orch, rec = _run(s)
    assert orch.members == [[["t0", "t1"], ["t0"]], [["t2", "t3"]]]
    assert orch.eliminated == {"t1": 0}
    assert sorted(orch.final_set) == ["t0", "t2", "t3"] and orch.top_k == ("t0",)
    assert rec.end_s - T0 == pytest.approx(600.0)
    assert orch.trials["t0"].step == 10 and orch.trials["t3"].step == 10


def test_a_trial_at_s_max_finishes_and_stays_in_the_running():
    orch, _ = _run(SEER, max_steps=12)  # t0 hits S_max in round 2; t2 too
    assert orch.trials["t0"].step == 12 and orch.trials["t0"].state is TrialState.FINISHED
    assert orch.top_k == ("t0",)


def test_too_few_trials_for_the_schedule():
    with pytest.raises(ConfigError, match="samples 4 trials"):
        _run(SEER, n=3)


def test_policies_need_a_deadline_and_a_budget():
    from spottune.evaluation import assemble

    p = get_policy("seer")
    assert (p.schedule, p.early_curve, p.hourly_hop, p.chooser) == ("seer", False, False, "bracket-type")
    assert get_policy("seer-predictive").early_curve and get_policy("e-grid").schedule == "e-grid"
    with pytest.raises(ConfigError, match="needs a deadline and a budget"):
        assemble(p, study=toy_study(4, 10), history=None, catalog=None, pool=None, markets=[], revocation_model=None,
                 billing=None, predictor=None, seed=0)


@pytest.mark.parametrize("wall_clock", [False, True])
def test_without_revocations_wall_clock_rounds_are_the_same(wall_clock):
    orch, rec = _run(SEER, wall_clock=wall_clock)
    assert rec.end_s - T0 == pytest.approx(1800.0) and orch.top_k == ("t0",)
    assert orch.trials["t2"].step == int(600.0 // SPS_C) + 20


def test_wall_clock_rounds_end_on_time_despite_a_revocation():
    """r3.large spikes to 1.0 USD/h (max price 0.5) from 900 s to 1,500 s: in round 2 t2 is revoked on it and
    cannot relaunch until 1,500 s. Wall-clock rounds still end at 1,800 s (t2 relaunched with the 5 steps that
    fit); step-target rounds wait for t2's 20 steps and end later."""
    late, rec_late = _run(SEER, spike_at_s=900.0)
    on_time, rec = _run(SEER, spike_at_s=900.0, wall_clock=True)
    assert rec_late.end_s - T0 > 1800.0 + 60.0
    assert rec.end_s - T0 <= 1800.0 + 1e-6
    assert on_time.trials["t2"].revocations >= 1 and on_time.trials["t2"].step < late.trials["t2"].step
    assert on_time.top_k == ("t0",)


def test_a_stale_retry_timer_is_ignored():
    from spottune.orchestrator import ExperimentStarted, TrialLaunched, WakeUp

    orch = BracketOrchestrator(["t0", "t1", "t2", "t3"], OrchestratorConfig(max_steps=100, theta=1.0, top_k=1),
                               ScriptChooser(), SEER, instance_type=TYPE.__getitem__, overhead_s=0.0,
                               seconds_per_step=lambda tid, t: 60.0, wall_clock=True)
    orch.handle(ExperimentStarted(time_s=T0))
    assert orch.handle(WakeUp(time_s=T0 + 1.0, trial_id="t0")) == []  # LAUNCHING: a stale timer
    orch.handle(TrialLaunched(time_s=T0 + 2.0, trial_id="t0", instance_id="i-1", market=A, started_s=T0 + 1.0))
    assert orch.handle(WakeUp(time_s=T0 + 3.0, trial_id="t0")) == []  # RUNNING


def test_a_wall_clock_round_holds_back_two_sd_of_its_step_time_noise():
    from spottune.planning._brackets import reserve_steps

    # 2 x 0.05 x sqrt(n) steps, rounded up: n = 100 -> 1.0 -> 1; n = 400 -> 2.0 -> 2; n = 401 -> 2.0025 -> 3
    assert [reserve_steps(n, 0.05) for n in (1, 100, 400, 401)] == [1, 1, 2, 3]
    assert reserve_steps(100, 0.0) == 0 and reserve_steps(0, 0.05) == 0


@pytest.mark.parametrize("wall_clock", [False, True])
def test_rungs_cap_the_steps_of_each_round(wall_clock):
    # the lean plan's rungs (DB15): round 1 fits 10 steps on r3.large but stops at 5, round 2 at 8 in all;
    # the barrier does not wait for the planned end: 5 x 60 s + 3 x 60 s = 480 s, billed by the second
    lean = ElasticSchedule("seer-lean", (Bracket((600.0, 1200.0), (2, 1), (2.0, 2.0), rungs=(5, 8)),), migrate=False)
    orch, rec = _run(lean, n=2, wall_clock=wall_clock)
    assert orch.members == [[["t0", "t1"], ["t0"]]] and orch.eliminated == {"t1": 0}
    assert orch.trials["t0"].step == 8 and orch.trials["t1"].step == 5
    assert rec.end_s - T0 == pytest.approx(480.0)
    assert sum(r.charged_usd for r in rec.ledger) == pytest.approx(0.02 * (5 + 5 + 3) * 60.0 / 3600.0, rel=1e-8)


def test_rungs_must_grow():
    with pytest.raises(ConfigError, match="rungs"):
        Bracket((1.0, 1.0), (2, 1), (2.0, 2.0), rungs=(5, 5))
