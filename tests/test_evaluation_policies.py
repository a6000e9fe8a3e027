"""Policy recipes assemble what they say, and behave as they say on a synthetic market replay."""

from __future__ import annotations

import pandas as pd
import pytest

from earlycurve import LastValue
from provisioner import (
    CheapestMarketChooser,
    FixedMaxPrice,
    FixedTypeChooser,
    GuardedProvisioner,
    InstanceCatalog,
    MaxPriceRule,
    Pool,
    Provisioner,
    RefundProvisioner,
)
from spotmarket.prices import Market
from revpred.protocol import ConstantRevocation
from spottune.backends import SimBackend, SimSettings
from spottune.compose import DEFAULT_RESTART_MARGIN
from spottune.errors import ConfigError
from spottune.evaluation import (
    DEFAULT_POLICIES,
    NeverRevoked,
    OnDemandBilling,
    OptunaStopRule,
    OraclePredictor,
    Study,
    assemble,
    get_policy,
    parse_policies,
)
from spotmarket import Billing, LegacyBidRevocation
from spottune.orchestrator import TrialState
from tests._fakes import price_history, toy_study

T0 = pd.Timestamp("2015-05-05T00:00Z").value / 1e9
A = Market("us-east-1a", "r3.large")
B = Market("us-east-1a", "c3.xlarge")


def _history(spike=True, types=("r3.large", "c3.xlarge")):
    times = [T0 - 7200, T0 + 3 * 86400]
    price = {"r3.large": 0.02, "c3.xlarge": 0.04}
    rows = [(t, itype, price[itype]) for itype in types for t in times]
    if spike:  # every market spikes above on-demand for 10 minutes, 40 minutes in
        for itype in types:
            rows += [(T0 + 2400, itype, 0.50), (T0 + 3000, itype, 0.02 if itype == "r3.large" else 0.04)]
    return price_history(rows)


def _study(n=4, steps=30, sps=300.0):
    return toy_study(n, steps, sps, checkpoint_size_mb=0.0)


def _run(name, history=None, study=None, predictor=None, cov=0.0, provisioning="spottune", max_concurrent_trials=None):
    history = history or _history()
    study = study or _study()
    catalog = InstanceCatalog.load()
    pool = Pool()
    markets = pool.resolve(history, catalog)
    revocations = LegacyBidRevocation(history)
    policy = get_policy(name, provisioning=provisioning, max_concurrent_trials=max_concurrent_trials)
    if policy.uses_predictor and predictor is None:
        predictor = OraclePredictor(revocations) if policy.predictor == "hindsight" else ConstantRevocation(0.0)
    asm = assemble(policy, study=study, history=history, catalog=catalog, pool=pool, markets=markets,
                   revocation_model=revocations, billing=Billing(), predictor=predictor, seed=0)
    record = SimBackend(asm.orchestrator, history, asm.revocation_model, asm.billing, study.sim_curves(),
                        lambda t: (catalog[t].vcpus, catalog[t].ecu), T0, SimSettings(step_time_cov=cov)).run()
    return asm, record


def test_the_value_of_time_reaches_the_refund_objective():
    history, study, catalog, pool = _history(), _study(), InstanceCatalog.load(), Pool()
    kw = dict(study=study, history=history, catalog=catalog, pool=pool, markets=pool.resolve(history, catalog),
              revocation_model=LegacyBidRevocation(history), billing=Billing(), predictor=ConstantRevocation(0.0),
              seed=0)
    assert assemble(get_policy("spottune-0.7"), **kw).chooser.objective.time_value_usd_per_hour == 0.0
    asm = assemble(get_policy("spottune-0.7"), time_value_usd_per_hour=0.25, **kw)
    assert asm.chooser.objective.time_value_usd_per_hour == 0.25 and asm.chooser.objective.boot_s == 120.0
    # the job's value of time (R11): the composition root's default unless given
    from spottune.experiment import DEFAULT_JOB_TIME_VALUE_USD_PER_HOUR

    assert asm.chooser.objective.job_time_value_usd_per_hour == DEFAULT_JOB_TIME_VALUE_USD_PER_HOUR == 0.01
    asm = assemble(get_policy("spottune-0.7"), job_time_value_usd_per_hour=0.0, **kw)
    assert asm.chooser.objective.job_time_value_usd_per_hour == 0.0
    # the speed model (design R9) reaches the chooser too, and the workload's declared speed sets T's prior
    from provisioner import PerformanceMatrix, PooledSpeedMatrix

    assert type(assemble(get_policy("spottune-0.7"), **kw).chooser.performance) is PooledSpeedMatrix
    cores = assemble(get_policy("spottune-0.7"), speed_model="cores", **kw).chooser.performance
    ref = study.reference_seconds_per_step
    assert type(cores) is PerformanceMatrix and cores.kappa_s == 2 * sum(ref.values()) / len(ref)


@pytest.mark.parametrize("name", DEFAULT_POLICIES)
def test_every_default_policy_parses(name):
    assert get_policy(name).name == name


def test_policy_names_and_errors():
    p = get_policy("spottune-0.3-tributary")
    assert (p.theta, p.predictor, p.hourly_hop, p.early_curve) == (0.3, "tributary", False, True)  # guarded: no hop (R12)
    assert p.restart_margin == DEFAULT_RESTART_MARGIN
    assert p.objective == "refund" and get_policy("spottune-0.3-tributary", "paper").objective == "paper"
    for name, pred, obj in [("spottune-0.7-paper", "auto", "paper"), ("spottune-0.7-constant-paper", "constant", "paper"),
                            ("spottune-0.7-online-hazard-paper", "online-hazard", "paper"),
                            ("spottune-0.7-none-refund", "none", "refund")]:
        q = get_policy(name, "paper" if obj == "refund" else "refund")  # the suffix wins over the default
        assert (q.predictor, q.objective) == (pred, obj)
    assert get_policy("optuna-sha", "paper").objective == "paper"
    assert get_policy("single-cheapest", "paper") is get_policy("single-cheapest")
    assert [q.name for q in parse_policies("spottune-0.7,theta-sweep")][:3] == ["spottune-0.7", "spottune-0.1",
                                                                                "spottune-0.2"]
    for bad in ("spottune-1.5", "spottune-0.7-magic", "nope", "spottune-0.7-constant-magic"):
        with pytest.raises(ConfigError):
            get_policy(bad)


def test_recipes_assemble_the_right_parts():
    asm, _ = _run("spottune-0.7-hindsight")
    assert isinstance(asm.chooser, GuardedProvisioner) and asm.orchestrator.config.theta == 0.7
    assert asm.chooser.margin == DEFAULT_RESTART_MARGIN and not asm.orchestrator.config.hourly_hop  # R12
    assert asm.chooser.objective.boot_s == 120.0  # the simulator's default launch-to-training latency
    paper, _ = _run("spottune-0.7-hindsight-paper")
    assert type(paper.chooser) is Provisioner and paper.chooser.objective.name == "eq2"
    assert paper.orchestrator.config.hourly_hop and asm.orchestrator.plateau_rule is not None
    hop, _ = _run("spottune-0.7-hindsight", provisioning="refund-hop")  # the unguarded refund objective, hourly hops
    assert type(hop.chooser) is RefundProvisioner and hop.orchestrator.config.hourly_hop
    assert isinstance(asm.chooser.predictor, OraclePredictor)
    asm, _ = _run("single-fastest")
    assert isinstance(asm.chooser, FixedTypeChooser) and asm.chooser.instance_type == "c3.xlarge"
    rule = asm.chooser.max_price_rule  # the on-demand price, as a careful user bids (design E14)
    assert isinstance(rule, MaxPriceRule) and rule.cap_at_on_demand and rule.delta_low_usd_per_hour >= 1e6
    paper, _ = _run("single-cheapest-never-revoked")  # the paper's assumption: above every recorded price
    assert isinstance(paper.chooser.max_price_rule, FixedMaxPrice)
    assert paper.chooser.max_price_rule.max_price_usd_per_hour == pytest.approx(10 * 0.50)
    cfg = asm.orchestrator.config
    assert (cfg.theta, cfg.hourly_hop) == (1.0, False) and isinstance(asm.orchestrator.predictor, LastValue)
    asm, _ = _run("single-cheapest")
    assert asm.chooser.instance_type == "r3.large"  # 0.175 < 0.21 USD/h on demand
    asm, _ = _run("on-demand")
    assert isinstance(asm.revocation_model, NeverRevoked) and isinstance(asm.billing, OnDemandBilling)
    asm, _ = _run("spot-restart")
    assert isinstance(asm.chooser, CheapestMarketChooser) and not asm.orchestrator.config.hourly_hop
    assert asm.chooser.max_price_rule.cap_at_on_demand
    asm, _ = _run("optuna-sha")
    assert isinstance(asm.stop_rule, OptunaStopRule) and asm.orchestrator.config.theta == 1.0


@pytest.mark.parametrize("name", ["single-cheapest", "single-fastest"])
def test_single_spot_never_hops_and_is_never_revoked_below_its_bid(name):
    asm, record = _run(name, history=_history(spike=False))
    trials = asm.orchestrator.trials.values()
    assert all(tr.state is TrialState.FINISHED for tr in trials)
    assert sum(tr.revocations for tr in trials) == 0 and sum(tr.hops for tr in trials) == 0
    assert len(record.ledger) == 4 and all(str(r.ended_by) == "user" for r in record.ledger)


def test_the_single_spot_bid_decides_whether_a_spike_is_paid():
    # r3.large at 0.02 USD/h, 0.50 from +2400 s to +3000 s; on demand 0.175 USD/h. 30 steps of 300 s, 120 s boot.
    # Bid 10x the highest price (the paper's assumption): never revoked, each trial pays the spike's 600 s at 0.50:
    # 0.02 * (9121 - 600) + 0.50 * 600 USD-seconds over 0..9121 s (boot 120 + 9000 + end checkpoint 1).
    asm, record = _run("single-cheapest-never-revoked")
    assert sum(tr.revocations for tr in asm.orchestrator.trials.values()) == 0
    assert [(r.start_s - T0, r.end_s - T0) for r in record.ledger] == [(0.0, 9121.0)] * 4
    assert sum(r.charged_usd for r in record.ledger) == pytest.approx(4 * (0.02 * 8521 + 0.50 * 600) / 3600)
    # Bid the on-demand price: revoked by the spike (notice +2400, termination +2520, in the first hour: refunded
    # 0.02 * 2400 + 0.50 * 120 USD-seconds), relaunched once the price is back under the bid, 7 steps kept
    # (2280 s of training at the notice): 120 s boot + 1 s restore + 23 * 300 s + 1 s end checkpoint at 0.02.
    asm, record = _run("single-cheapest")
    assert sum(tr.revocations for tr in asm.orchestrator.trials.values()) == 4
    first, second = record.ledger[:4], record.ledger[4:]
    assert [(r.end_s - T0, str(r.ended_by)) for r in first] == [(2520.0, "provider")] * 4
    assert sum(r.charged_usd for r in first) == 0.0
    assert sum(r.refunded_usd for r in first) == pytest.approx(4 * (0.02 * 2400 + 0.50 * 120) / 3600)
    assert all(3000.0 <= r.start_s - T0 < 3300.0 and r.end_s - r.start_s == 7022.0 for r in second)
    assert sum(r.charged_usd for r in second) == pytest.approx(4 * 0.02 * 7022 / 3600)
    assert sum(r.charged_usd for r in record.ledger) < 0.5 * 4 * (0.02 * 8521 + 0.50 * 600) / 3600


def test_on_demand_is_billed_at_the_on_demand_price():
    asm, record = _run("on-demand")
    # r3.large = the reference instance: 300 s per step exactly (cov 0); 120 s of launch-to-training latency
    # (the default boot, paid by the baselines too), 30 steps and a 1 s end checkpoint
    for row in record.ledger:
        assert row.end_s - row.start_s == pytest.approx(120.0 + 30 * 300.0 + 1.0)
        assert row.charged_usd == pytest.approx(0.175 * (120.0 + 30 * 300.0 + 1.0) / 3600.0)
    assert sum(tr.revocations for tr in asm.orchestrator.trials.values()) == 0


def test_spot_restart_is_revoked_relaunches_and_never_hops():
    asm, record = _run("spot-restart")
    trials = asm.orchestrator.trials.values()
    assert all(tr.state is TrialState.FINISHED for tr in trials)
    assert sum(tr.revocations for tr in trials) == 4  # each trial once, by the spike above on-demand
    assert sum(tr.hops for tr in trials) == 0
    assert len(record.ledger) == 8


def test_spottune_hops_every_hour():
    # one market (r3.large, the reference instance: 300 s per step), no spike: each trial trains 30 steps =
    # 9000 s = 2.5 h, so it hops at 1 h and 2 h of instance time (1 h + a 1 s HOP checkpoint per segment)
    # and ends in its third segment: 2 hops per trial, 8 in all, never revoked (the refund-hop provisioning; the
    # default guarded one does not hop, decision R12).
    asm, record = _run("spottune-1.0", history=_history(spike=False, types=("r3.large",)), provisioning="refund-hop")
    trials = asm.orchestrator.trials
    assert {t: (tr.state, tr.hops, tr.revocations) for t, tr in trials.items()} == {
        t: (TrialState.FINISHED, 2, 0) for t in ("t0", "t1", "t2", "t3")}
    for t in trials:
        rows = [r for r in record.ledger if r.trial_id == t]
        assert [str(r.reason) for r in rows] == ["hop", "hop", "end"]
        assert [(r.start_s - T0, r.end_s - T0) for r in rows[:2]] == [(0.0, 3601.0), (3601.0, 7202.0)]


# Nine trials in lockstep (one market, 60 s per step, 27 steps), loss a / k + b at step k. t4 is a late
# bloomer (a = 2, b = 0.3): the worst of all at step 1 (2.3), the best at the end (2/27 + 0.3 = 0.374);
# the others have a = 1 and the b below. Without a pruner t4 ranks first.
LATE_B = {"t0": 0.9, "t1": 0.8, "t2": 1.0, "t3": 0.6, "t5": 0.7, "t6": 0.5, "t7": 1.1, "t8": 0.55}


def _crossing_study():
    ab = {t: (2.0, 0.3) if t == "t4" else (1.0, LATE_B[t]) for t in (f"t{i}" for i in range(9))}
    curves = {t: [{"loss": a / k + b} for k in range(1, 28)] for t, (a, b) in ab.items()}
    return Study(name="toy", trial_ids=list(ab), configs={t: {"i": i} for i, t in enumerate(ab)}, curves=curves,
                 metric="loss", mode="min", max_steps=27, reference_seconds_per_step={t: 60.0 for t in ab},
                 checkpoint_size_mb=0.0)


def _pruned(name):
    asm, _ = _run(name, study=_crossing_study())
    trials = asm.orchestrator.trials
    return {t: tr.pruned_at for t, tr in trials.items() if tr.state is TrialState.STOPPED_EARLY}, asm


# Optuna's rule (SuccessiveHalvingPruner, min_resource 1, eta 3): at a rung step a trial is promoted iff its
# value <= the max(n // 3, 1)-th smallest of the n values reported there so far, its own included; trials
# report in launch order t0..t8.
# - SHA, rungs at steps 1, 3, 9. Step 1 (a + b): t0 1.9 (n = 1) kept; t1 1.8 <= min kept; t2 2.0 > 1.8 pruned;
#   t3 1.6 kept; t4 2.3 (n = 5, min 1.6) pruned; t5 1.7 (n = 6, 2nd smallest 1.7) kept; t6 1.5 kept; t7 2.1
#   (2nd smallest 1.6) pruned; t8 1.55 (n = 9, 3rd smallest 1.6) kept. Step 3 (1/3 + b): t0 1.233, t1 1.133,
#   t3 0.933 kept (each <= min); t5 1.033 (n = 4, min 0.933) pruned; t6 0.833 kept; t8 0.883 (n = 6, 2nd
#   smallest 0.883) kept. Step 9 (1/9 + b): t0 1.011, t1 0.911, t3 0.711, t6 0.611 kept (each <= min);
#   t8 0.661 (n = 5, min 0.611) pruned. Survivors t0, t1, t3, t6; the late bloomer t4 is pruned at step 1
#   and t6 (b = 0.5) ranks first.
# - Hyperband (4 brackets with budgets 27, 12, 6, 4 of 49; bracket = crc32("spottune-sim_<n>") % 49):
#   t0 -> 39 (bracket 2: one rung at step 9, alone: kept); t4 -> 28, t6 -> 35 (bracket 1: rungs at 3 and 9);
#   the rest in bracket 0 (rungs 1, 3, 9). Bracket 0, step 1: t1 1.8 kept, t2 2.0 pruned, t3 1.6 kept,
#   t5 1.7 and t7 2.1 pruned, t8 1.55 (n = 6, 2nd smallest 1.6) kept; steps 3 and 9: t1, t3, t8 each the
#   smallest so far. Bracket 1, step 3: t4 0.967 alone kept, t6 0.833 kept; step 9: t4 0.522 kept, t6 0.611
#   > 0.522 pruned. Survivors t0, t1, t3, t4, t8; the late bloomer t4 survives and ranks first.
EXPECTED_PRUNING = {
    "optuna-sha": ({"t2": 1, "t4": 1, "t7": 1, "t5": 3, "t8": 9}, ("t6", "t3", "t1")),
    "optuna-hyperband": ({"t2": 1, "t5": 1, "t7": 1, "t6": 9}, ("t4", "t8", "t3")),
}


@pytest.mark.parametrize("name", ["optuna-sha", "optuna-hyperband"])
def test_optuna_pruners_stop_exactly_the_trials_their_rules_name(name):
    pruned, asm = _pruned(name)
    expected_pruned, expected_top = EXPECTED_PRUNING[name]
    assert pruned == expected_pruned
    assert asm.stop_rule.pruned == expected_pruned
    assert asm.orchestrator.top_k == expected_top
    survivors = {t for t, tr in asm.orchestrator.trials.items() if tr.state is TrialState.FINISHED}
    assert survivors == {f"t{i}" for i in range(9)} - set(expected_pruned)
    assert _pruned(name)[0] == pruned  # deterministic


def test_optuna_median_needs_completed_trials():
    # all trials run in lockstep: MedianPruner never sees a COMPLETE trial before the end, so prunes nothing
    pruned, asm = _pruned("optuna-median")
    assert pruned == {}
    assert len(asm.stop_rule.study.get_trials()) == 9


def test_optuna_peers_at_given_settings():
    # optuna-sha-r<min_resource>-rf<rf>: the peers at their best (decision ES2). r1-rf3 is the module setting here
    # (27 // 27 = 1, rf 3); at r3 the rungs are steps 3 and 9 (1/3 + b, then 1/9 + b, as above): step 3 keeps t0
    # 1.233, t1 1.133 and t3 0.933 (each the smallest so far), prunes t2 1.333 and t4 0.967 (> min 0.933), t5 1.033
    # (n = 6, 2nd smallest 0.967), keeps t6 0.833, prunes t7 1.433, keeps t8 0.883 (n = 9, 3rd smallest 0.933);
    # step 9 prunes t8 0.661 (> min 0.611), as at r1
    assert _pruned("optuna-sha-r1-rf3")[0] == EXPECTED_PRUNING["optuna-sha"][0]
    pruned, asm = _pruned("optuna-sha-r3-rf3")
    assert pruned == {"t2": 3, "t4": 3, "t5": 3, "t7": 3, "t8": 9} and asm.orchestrator.top_k == ("t6", "t3", "t1")
    p = get_policy("optuna-hyperband-r2-rf4")
    assert (p.pruner, p.pruner_settings, p.theta) == ("hyperband", (2, 4), 1.0)
    for bad in ("optuna-sha-r0-rf3", "optuna-sha-r3-rf1", "optuna-median-r3-rf3"):
        with pytest.raises(ConfigError):
            get_policy(bad)


def _seeded_rule(previous):
    import optuna

    rule = OptunaStopRule(optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=2), ["a", "b"], 4,
                          previous_runs=[((1, 2, 3, 4), (v, v, v, v)) for v in previous])
    return rule, [rule.should_stop(t, 1, loss) for t, loss in (("a", 0.5), ("b", 0.15))]


def test_a_seeded_sha_pruner_compares_new_trials_with_the_previous_runs():
    # SHA, min_resource 1, eta 2: at step 1 a trial is promoted iff its value <= the max(n // 2, 1)-th smallest of the
    # n values recorded there, its own included. Unseeded: "a" 0.5 is alone (kept), "b" 0.15 the smallest (kept).
    # Seeded with three previous runs at 0.1, 0.2, 0.3: "a" 0.5 against [0.1, 0.2, 0.3, 0.5] needs <= the 2nd
    # smallest 0.2 (pruned at step 1); "b" 0.15 against [0.1, 0.15, 0.2, 0.3, 0.5] is <= the 2nd smallest (kept).
    rule, stops = _seeded_rule(())
    assert stops == [False, False] and rule.pruned == {} and rule.n_previous == 0
    rule, stops = _seeded_rule((0.1, 0.2, 0.3))
    assert stops == [True, False] and rule.pruned == {"a": 1} and rule.n_previous == 3
    # the previous runs are COMPLETE trials 0-2 with their final value and every step below max_steps; the study's
    # own trials come after them
    seeded = rule.study.get_trials()[:3]
    assert [(t.number, t.state.name, t.value) for t in seeded] == [(0, "COMPLETE", 0.1), (1, "COMPLETE", 0.2),
                                                                   (2, "COMPLETE", 0.3)]
    assert seeded[1].intermediate_values == {1: 0.2, 2: 0.2, 3: 0.2}
    assert [t.number for t in rule.study.get_trials()[3:]] == [3, 4]
    # worse previous runs let "a" through: 0.5 <= the 2nd smallest of [0.5, 0.6, 0.7, 0.8]
    assert _seeded_rule((0.6, 0.7, 0.8))[1] == [False, False]
    with pytest.raises(ValueError):
        OptunaStopRule(optuna_sha(), ["a"], 4, previous_runs=[((2, 1), (0.1, 0.2))])


def optuna_sha():
    import optuna

    return optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=2)


def test_seeded_optuna_policies_start_from_the_studys_previous_runs_which_never_run():
    # optuna-sha-r1-rf3-seeded on the crossing study with 9 previous runs at a constant loss of 1.65 (rungs at steps 1,
    # 3 and 9, eta 3: promoted iff <= the max(n // 3, 1)-th smallest of the n values there). Step 1 (a + b, trials in
    # launch order): t0 1.9 (n = 10, 3rd smallest 1.65), t1 1.8, t2 2.0 pruned; t3 1.6 (n = 13, 4th smallest 1.65)
    # kept; t4 2.3, t5 1.7 pruned; t6 1.5 kept; t7 2.1 pruned; t8 1.55 (n = 18, 6th smallest 1.65) kept. Steps 3 and 9:
    # t3, t6 and t8 are all below 1.65, as many as the rank allowed (kept). Unseeded, t0, t1, t3 and t6 survive
    # (EXPECTED_PRUNING).
    study = _crossing_study()
    study.extra["previous_runs"] = [(list(range(1, 28)), [1.65] * 27, 27, {"i": -1 - j}) for j in range(9)]
    asm, record = _run("optuna-sha-r1-rf3-seeded", study=study)
    trials = asm.orchestrator.trials
    pruned = {t: tr.pruned_at for t, tr in trials.items() if tr.state is TrialState.STOPPED_EARLY}
    assert pruned == {"t0": 1, "t1": 1, "t2": 1, "t4": 1, "t5": 1, "t7": 1}
    assert asm.orchestrator.top_k == ("t6", "t8", "t3")
    assert asm.stop_rule.n_previous == 9 and len(asm.stop_rule.study.get_trials()) == 18
    assert set(trials) == set(study.trial_ids)  # the previous runs are not trials of the run: never launched or billed
    assert {row.trial_id for row in record.ledger} == set(study.trial_ids)
    p = get_policy("optuna-hyperband-r2-rf4-seeded")
    assert (p.pruner, p.pruner_settings, p.seeded, p.name) == ("hyperband", (2, 4), True, "optuna-hyperband-r2-rf4-seeded")
    assert get_policy("optuna-sha-seeded").seeded and not get_policy("optuna-sha").seeded
    for bad in ("spottune-0.7-seeded", "spot-restart-seeded", "optuna-sha-seeded-seeded"):
        with pytest.raises(ConfigError):
            get_policy(bad)
    with pytest.raises(ConfigError, match="previous runs"):  # a study without previous runs
        _run("optuna-sha-seeded", study=_crossing_study())


def test_restart_provisioning_gives_the_spottune_provisioned_policies_spot_restarts_provisioning():
    # --provisioning restart: stoppers compared on a provisioning that does not depend on when a trial will stop
    # the spike above on-demand 40 min in revokes every trial still running then: all 4 under the θ 0.5 barrier
    # (step 15 of 30 at 300 s per step is after it); under SHA r3 only t0, the others pruned at step 3 (~17 min)
    for name, revoked in (("spottune-0.5", 4), ("optuna-sha-r3-rf3", 1)):
        asm, record = _run(name, provisioning="restart")
        assert isinstance(asm.chooser, CheapestMarketChooser) and not asm.orchestrator.config.hourly_hop
        assert asm.chooser.max_price_rule.cap_at_on_demand
        trials = asm.orchestrator.trials.values()
        assert sum(tr.hops for tr in trials) == 0 and sum(tr.revocations for tr in trials) == revoked
        assert {r.market.instance_type for r in record.ledger} == {"r3.large"}  # the cheaper market, every launch
    assert get_policy("spottune-0.5", provisioning="restart").rungs == ()
    assert get_policy("spottune-0.5", rungs="0.1:3", provisioning="restart").rungs == ((0.1, 3),)
    for name in ("single-fastest", "spot-restart", "on-demand"):  # policies with their own provisioning keep it
        assert get_policy(name, provisioning="restart") == get_policy(name)
    with pytest.raises(ConfigError, match="provisioning is 'magic'"):
        get_policy("spottune-0.7", provisioning="magic")


def test_simulate_refuses_a_deadline_under_restart_provisioning_and_an_unknown_speed_model(tmp_path):
    from spottune.cli._simulate import simulate_all

    for provisioning in ("restart", "restart-failover"):
        with pytest.raises(ConfigError, match=f"--deadline needs --provisioning spottune or refund-hop, not '{provisioning}'"):
            simulate_all("digits-mlp", "spottune-0.7", 1, "legacy", tmp_path, deadline="6h", provisioning=provisioning)
    with pytest.raises(ConfigError, match="--speed-model is 'linear', but must be one of pooled, cores"):
        simulate_all("digits-mlp", "spottune-0.7", 1, "legacy", tmp_path, speed_model="linear")


# -- fewer trials at once than trials (max_concurrent_trials, design D14) ------------------------------------------
def _most_at_once(ledger):
    """The most instances alive at once in a run's ledger (an instance ending at t does not overlap one starting at t)."""
    edges = sorted([(r.start_s, 1) for r in ledger] + [(r.end_s, -1) for r in ledger])
    live = most = 0
    for _, d in edges:
        live += d
        most = max(most, live)
    return most


@pytest.mark.parametrize("name", ["spot-restart", "spottune-0.5", "optuna-sha-r3-rf3"])
def test_two_workers_for_four_trials_never_hold_more_than_two_instances(name):
    # no spike: nothing is revoked (a revoked instance runs on until the provider ends it, design E12's refund rule,
    # and may overlap its trial's relaunch; that is the same with or without a limit)
    asm, record = _run(name, history=_history(spike=False), max_concurrent_trials=2)
    every, _ = _run(name, history=_history(spike=False))
    assert _most_at_once(record.ledger) == 2
    states = {t: tr.state for t, tr in asm.orchestrator.trials.items()}
    assert all(s in (TrialState.FINISHED, TrialState.STOPPED_EARLY) for s in states.values())
    assert states == {t: tr.state for t, tr in every.orchestrator.trials.items()}  # these curves never cross
    assert asm.orchestrator.done and asm.orchestrator.top_k == every.orchestrator.top_k


def test_waiting_trials_launch_when_a_trial_ends_is_pruned_or_pauses():
    # r3.large at 300 s per step, 30 steps, 120 s boot, 1 s checkpoints; trials t0..t3 in order
    _, record = _run("spot-restart", history=_history(spike=False), max_concurrent_trials=2)
    assert [(r.trial_id, r.start_s - T0, r.end_s - T0) for r in record.ledger] == [  # ends: the next two launch
        ("t0", 0.0, 9121.0), ("t1", 0.0, 9121.0), ("t2", 9121.0, 18242.0), ("t3", 9121.0, 18242.0)]
    _, record = _run("spottune-0.5", history=_history(spike=False), max_concurrent_trials=2)
    rows = [(r.trial_id, r.start_s - T0, r.end_s - T0, str(r.reason)) for r in record.ledger]
    assert rows == [  # paused at the θ barrier (step 15), then the barrier's 3 kept trials two at a time
        ("t0", 0.0, 4621.0, "theta"), ("t1", 0.0, 4621.0, "theta"), ("t2", 4621.0, 9242.0, "theta"),
        ("t3", 4621.0, 9242.0, "theta"), ("t0", 9242.0, 13864.0, "end"), ("t1", 9242.0, 13864.0, "end"),
        ("t2", 13864.0, 18486.0, "end")]
    _, record = _run("optuna-sha-r3-rf3", history=_history(spike=False), max_concurrent_trials=2)
    assert [(r.trial_id, r.start_s - T0, r.end_s - T0, str(r.reason)) for r in record.ledger] == [  # pruned at step 3
        ("t1", 0.0, 1020.0, "prune"), ("t2", 1020.0, 2040.0, "prune"), ("t3", 2040.0, 3060.0, "prune"),
        ("t0", 0.0, 9121.0, "end")]


# USD of today's runs (every trial at once), computed before max_concurrent_trials existed: None keeps them exactly
TODAY_USD = {("spot-restart", False): 0.1560444444444445, ("spottune-0.5", False): 0.45254444444444436,
             ("optuna-sha-r3-rf3", False): 0.1358777777777778, ("spottune-0.5", True): 0.06308333333333331,
             ("optuna-hyperband", True): 0.05502777777777777}


@pytest.mark.parametrize(("name", "crossing"), list(TODAY_USD))
def test_no_limit_is_todays_run(name, crossing):
    asm, record = _run(name, study=_crossing_study() if crossing else None, max_concurrent_trials=None)
    assert sum(r.charged_usd for r in record.ledger) == pytest.approx(TODAY_USD[(name, crossing)], abs=1e-12)
    assert asm.orchestrator.config.max_concurrent_trials is None and asm.orchestrator.waiting == []


def test_an_asynchronous_pruner_meets_the_earlier_trials_values_with_one_worker():
    # SHA, min_resource 1, rf 2: promoted iff value <= the max(n // 2, 1)-th smallest of the n values at the rung.
    # t0 is slow (120 s per step) and worse (2 / k + 0.5), t1 and t2 fast (60 s per step): 1 / k + 0.3 and + 0.4.
    # All at once t1 reaches step 1 first (1.3, alone: kept), t2 next (1.4 > 1.3: pruned), then t0 (2.5: pruned).
    # One at a time t0 comes first and is alone at every rung (kept to the end); t1 then meets t0's values (1.3 <=
    # 1.3 at step 1, kept), and t2 meets both (1.4 > 1.3: pruned).
    ab = {"t0": (2.0, 0.5, 120.0), "t1": (1.0, 0.3, 60.0), "t2": (1.0, 0.4, 60.0)}
    study = Study(name="toy", trial_ids=list(ab), configs={t: {"i": i} for i, t in enumerate(ab)},
                  curves={t: [{"loss": a / k + b} for k in range(1, 10)] for t, (a, b, _) in ab.items()},
                  metric="loss", mode="min", max_steps=9, reference_seconds_per_step={t: v[2] for t, v in ab.items()},
                  checkpoint_size_mb=0.0)
    every, _ = _run("optuna-sha-r1-rf2", study=study, history=_history(spike=False))
    assert every.stop_rule.pruned == {"t2": 1, "t0": 1}
    one, record = _run("optuna-sha-r1-rf2", study=study, history=_history(spike=False), max_concurrent_trials=1)
    assert one.stop_rule.pruned == {"t2": 1} and _most_at_once(record.ledger) == 1
    assert one.orchestrator.top_k == ("t1", "t0")


def test_max_concurrent_trials_is_refused_for_an_elastic_schedule_and_below_one():
    assert get_policy("optuna-sha", max_concurrent_trials=4).max_concurrent_trials == 4
    for name, n in (("seer", 2), ("e-grid", 2), ("spottune-0.7", 0), ("optuna-sha", -1)):
        with pytest.raises(ConfigError, match="max_concurrent_trials"):
            get_policy(name, max_concurrent_trials=n)
