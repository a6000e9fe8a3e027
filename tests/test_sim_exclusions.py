"""A replayed capacity refusal leaves its market out of the choice, as the aws backend does with EC2's (AWS3).

Real parts: the modern market model (:class:`spotmarket.ModernHazardRevocation`, its seeded outages), the
simulator and the cheapest-market chooser; the price trace is the synthetic two-market one of
``tests/test_sim_backend.py`` (A at 0.02 USD/h, B at 0.05).
"""

from __future__ import annotations

import numpy as np

from provisioner import DEFAULT_EXCLUSION_S, CheapestMarketChooser, InstanceCatalog, MarketExclusions, Pool
from spotmarket import Billing, LegacyBidRevocation, ModernHazardRevocation
from spottune.backends import SimBackend, SimSettings, TrainableCurves
from spottune.orchestrator import Orchestrator, OrchestratorConfig, TrialState, WakeUp
from tests.test_sim_backend import A, B, FACTS, T0, Fixed, Quadratic, history


class FixedWithExclusions(Fixed):
    """``Fixed`` that keeps exclusions (a ``provisioner.LearningChooser``) but always answers its market."""

    observes_instances = False

    def __init__(self, market=A):
        super().__init__(market)
        self.exclusions = MarketExclusions()

    def exclude(self, market, now_s, reason):
        self.exclusions.exclude(market, now_s, reason)

    def excluded(self, now_s):
        return self.exclusions.active(now_s)

    def observe(self, market, launch_s, end_s, interrupted):
        pass

    def signal(self, market, time_s, kind, value):
        pass


def modern(hist):
    """The modern market (seed 3: market A has an outage in the first 30 days of the trace)."""
    return ModernHazardRevocation(None, seed=3, history=hist)


def outage_start(model: ModernHazardRevocation, market, lo_s: float, hi_s: float) -> float:
    """The first time in [lo_s, hi_s) at which ``market`` refuses launches for capacity (60 s grid)."""
    for t in np.arange(lo_s, hi_s, 60.0):
        if not model.has_capacity(market, float(t)):
            return float(t)
    raise AssertionError("no outage in the window: pick another seed")


def run(revocation, start_s, chooser=None, max_steps=20, failover=True, spike_at_s=None):
    hist = history(spike_at_s, hours=24 * 40)
    exclusions = MarketExclusions() if failover else None  # as the composition root does for sim and local runs (E12)
    chooser = chooser or CheapestMarketChooser(hist, InstanceCatalog.load(), Pool(), np.random.default_rng(0),
                                               exclusions=exclusions)
    orch = Orchestrator(["t0"], OrchestratorConfig(max_steps=max_steps, theta=1.0, top_k=1, hourly_hop=False,
                                                   launch_retry_s=60.0), chooser)
    curves = TrainableCurves({"t0": lambda: Quadratic({"lr": 0.05}, seed=0)})
    model = revocation(hist)
    sim = SimBackend(orch, hist, model, Billing(), curves, FACTS.__getitem__, start_s, SimSettings(seed=0))
    return orch, sim, sim.run()


def launches(rec):
    """(market, outcome) of every launch: the event after each Launch action."""
    out = []
    for i, r in enumerate(rec.log):
        if r["type"] == "Launch":
            nxt = next(e for e in rec.log[i + 1:] if e["type"] in ("TrialLaunched", "LaunchFailed"))
            out.append((r["market"], nxt.get("error", "launched")))
    return out


def test_a_capacity_refusal_sends_the_next_launch_to_another_market_at_once():
    start = outage_start(modern(None), A, T0, T0 + 30 * 86400)
    orch, sim, rec = run(modern, start)
    got = launches(rec)
    # A (the cheapest) refuses; the trial fails over at once to B, which A's exclusion leaves as the cheapest
    assert got[0] == (str(A), "refused-capacity")
    assert got[1] == (str(B), "launched")
    assert orch.chooser.exclusions.duration_s == DEFAULT_EXCLUSION_S
    second = next(r for r in rec.log if r["type"] == "Launch" and r["market"] == str(B))
    assert second["t"] == start  # at the refusal itself: no back-off
    assert [(str(s["market"]), s["reason"]) for s in second["explanation"]["skipped"]] == [
        (str(A), f"excluded after refused-capacity until {start + DEFAULT_EXCLUSION_S:.0f} s")]
    assert orch.trials["t0"].state is TrialState.FINISHED


def test_without_exclusions_the_chooser_asks_the_refusing_market_again():
    """The counterfactual of the test above (what the replay did before, and the single-spot and spot-restart
    baselines still do): a chooser without exclusions retries A after each ``launch_retry_s`` (60 s) until
    the outage ends."""
    start = outage_start(modern(None), A, T0, T0 + 30 * 86400)
    orch, sim, rec = run(modern, start, failover=False)
    got = launches(rec)
    assert orch.chooser.exclusions is None
    assert got[0] == got[1] == (str(A), "refused-capacity")
    wakes = [r["at_s"] - r["t"] for r in rec.log if r["type"] == "ScheduleWakeUp"]
    assert len(wakes) >= 2 and set(wakes) == {60.0}
    assert {m for m, _ in got} == {str(A)}


def test_a_price_revocation_or_refusal_excludes_nothing():
    """Legacy mode revokes and refuses only for price (the chooser sees the price itself). A spikes to 1.0 USD/h
    from T0 + 1800 s for 600 s; ``Fixed`` always asks A at 0.1: revoked at the spike, refused until it ends."""
    orch, sim, rec = run(LegacyBidRevocation, T0, chooser=FixedWithExclusions(A), spike_at_s=1800.0, max_steps=60)
    errors = [r["error"] for r in rec.log if r["type"] == "LaunchFailed"]
    assert orch.trials["t0"].revocations == 1 and errors and set(errors) == {"refused-price"}
    assert orch.chooser.exclusions.active(T0) == {}
    wakes = [r["at_s"] - r["t"] for r in rec.log if r["type"] == "ScheduleWakeUp"]
    assert len(wakes) == len(errors) and set(wakes) == {60.0}  # each refusal backs off: nothing to fail over to
    assert orch.trials["t0"].state is TrialState.FINISHED


def test_the_local_backends_resume_excludes_a_journaled_capacity_refusal_again(tmp_path):
    """A refusal is journaled as its launch outcome (not as an event), so a resumed run must deliver its
    ``CapacityRefused`` again (as the aws backend's resume does, AWS14). The refusal's record comes from a real journal of the simulator's run; the backend is
    a real ``LocalBackend`` built as for a resume (no worker is started before ``run``)."""
    from spottune.backends import LocalBackend, LocalSettings
    from spottune.journal import Journal, read_journal
    from spottune.orchestrator import Launch
    from tests.test_worker_process import WORKLOAD

    start = outage_start(modern(None), A, T0, T0 + 30 * 86400)
    hist = history(hours=24 * 40)

    def orchestrator():
        chooser = CheapestMarketChooser(hist, InstanceCatalog.load(), Pool(), np.random.default_rng(0),
                                        exclusions=MarketExclusions())
        return Orchestrator(["t0"], OrchestratorConfig(max_steps=20, theta=1.0, top_k=1, hourly_hop=False), chooser)

    sim = SimBackend(orchestrator(), hist, modern(hist), Billing(),
                     TrainableCurves({"t0": lambda: Quadratic({"lr": 0.05}, seed=0)}), FACTS.__getitem__, start,
                     SimSettings(seed=0))
    sim.journal = Journal(tmp_path / "run.jsonl")
    sim.run()
    sim.journal.close()
    refused = [r for r in read_journal(tmp_path / "run.jsonl") if r["k"] == "outcome" and r["op"] == "launch"
               and not r["fulfilled"]]
    assert [(r["cause"], r["time_s"]) for r in refused][:1] == [("refused-capacity", start)]

    orch = orchestrator()
    local = LocalBackend(orch, hist, modern(hist), Billing(), WORKLOAD, {"t0": ({"lr": 0.05}, 0)}, FACTS.__getitem__,
                         start, LocalSettings(store_url=(tmp_path / "store").as_uri()))
    exclusions = orch.chooser.exclusions  # read by the test only: the backend delivers events
    action = Launch(trial_id="t0", market=A, max_price_usd_per_hour=0.1, resume_step=0, target_steps=20)
    local.transport.replay_refused({**refused[0], "cause": "refused-price"}, action)  # a price refusal excludes nothing
    assert exclusions.active(start) == {}
    local.transport.replay_refused(refused[0], action)
    assert exclusions.active(start + 1799.0) == {
        A: f"excluded after refused-capacity until {start + DEFAULT_EXCLUSION_S:.0f} s"}


def test_a_chooser_that_answers_an_excluded_market_gets_the_back_off_not_a_retry_loop():
    """``Fixed`` exposes exclusions but always answers A. In the simulator the retry would come at the same
    instant; on a real clock (local, aws) every refusal has a new time. Either way the orchestrator backs off."""
    start = outage_start(modern(None), A, T0, T0 + 30 * 86400)
    orch, sim, rec = run(modern, start, chooser=FixedWithExclusions(A))
    at_start = [r for r in rec.log if r.get("t") == start and r["type"] in ("Launch", "LaunchFailed", "ScheduleWakeUp")]
    assert [r["type"] for r in at_start] == ["Launch", "LaunchFailed", "ScheduleWakeUp"]
    assert at_start[-1]["at_s"] == start + 60.0

    from spottune.orchestrator import ExperimentStarted, LaunchFailed, ScheduleWakeUp

    from spottune.orchestrator import CapacityRefused

    chooser = FixedWithExclusions(A)
    orch = Orchestrator(["t0"], OrchestratorConfig(max_steps=5, theta=1.0, top_k=1, launch_retry_s=60.0), chooser)
    orch.handle(ExperimentStarted(time_s=T0))
    for i in range(3):  # refusals milliseconds apart, as a real clock gives them
        t = T0 + 0.005 * (i + 1) + 60.0 * i
        assert orch.handle(CapacityRefused(time_s=t, market=A, reason="InsufficientInstanceCapacity")) == []
        assert A in chooser.exclusions.active(t)
        actions = orch.handle(LaunchFailed(time_s=t, trial_id="t0", error="InsufficientInstanceCapacity"))
        assert actions == [ScheduleWakeUp(trial_id="t0", at_s=t + 60.0)]
        orch.handle(WakeUp(time_s=t + 60.0, trial_id="t0"))


def test_the_deadline_guard_hands_its_exclusions_to_the_chooser_that_skips_them():
    from spottune.planning import DeadlineGuard

    inner = CheapestMarketChooser(history(), InstanceCatalog.load(), Pool(), np.random.default_rng(0))
    guard = DeadlineGuard(inner, start_s=T0, deadline_s=T0 + 86400, max_steps=20, markets=[A, B],
                          on_demand_usd_per_hour=lambda m: 0.1, seconds_per_step=lambda t: 60.0, overhead_s=120.0)
    guard.exclusions = MarketExclusions()
    assert inner.exclusions is guard.exclusions and "exclusions" not in vars(guard)
    guard.exclusions.exclude(A, T0, "refused-capacity")
    assert guard.choose("t0", T0 + 1.0).market == B


def test_which_policies_fail_over():
    """The paper's SpotTune, the refund-hop provisioning and spot-restart-failover fail over; the single-spot
    baselines, spot-restart (also as another policy's ``provisioning="restart"``) and SpotTune's guarded default, which
    keeps spot-restart's handling of a refusal (design R12), ask their choice again after the back-off (design E12)."""
    from spottune.compose import get_policy

    assert {n: get_policy(n).failover for n in ("spottune-0.7", "spottune-0.7-revpred-paper", "optuna-sha",
                                                "spot-restart-failover", "spot-restart", "single-cheapest",
                                                "single-fastest", "on-demand")} == {
        "spottune-0.7": False, "spottune-0.7-revpred-paper": True, "optuna-sha": False, "spot-restart-failover": True,
        "spot-restart": False, "single-cheapest": False, "single-fastest": False, "on-demand": False}
    assert get_policy("spottune-0.7", provisioning="restart").failover is False
    assert get_policy("spottune-0.7", provisioning="refund-hop").failover is True
    # restart-failover: spot-restart-failover's provisioning under another policy's stopper
    rf, sr = get_policy("spottune-0.7", provisioning="restart-failover"), get_policy("spot-restart-failover")
    assert rf.failover is True and rf.theta == 0.7 and rf.early_curve
    assert [getattr(rf, f) for f in ("chooser", "predictor", "max_price", "hourly_hop", "failover", "exclusion_s")] == \
        [getattr(sr, f) for f in ("chooser", "predictor", "max_price", "hourly_hop", "failover", "exclusion_s")]
