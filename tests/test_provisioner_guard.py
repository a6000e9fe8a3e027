"""The guarded provisioner (decision R12): spot-restart's choice unless another candidate beats it by the margin,
with honest speeds of unmeasured types; hand-computed step costs and the expected choice of each case."""

import sys
from pathlib import Path

import numpy as np
import pytest

from provisioner import (GuardedProvisioner, InstanceCatalog, Pool, ProvisionerConfigError, RefundStepCost,
                         refund_step_cost_usd)
from spotmarket.prices import Market

sys.path.insert(0, str(Path(__file__).parent))
from test_provisioner_refund import NOW, R4A, R4B, TablePredictor, chooser, history  # noqa: E402

G2 = Market("us-east-1a", "g2.2xlarge")  # 8 vCPUs, a GPU type: the cores rule's prior says 4x r4.large's speed
M3 = Market("us-east-1a", "m3.medium")  # 1 vCPU
OBJ = RefundStepCost(boot_s=120.0, checkpoint_s=2.0)
KW = dict(boot_s=120.0, restore_s=2.0, checkpoint_s=2.0)  # a resumed trial: boot, restore, checkpoint (seconds)


def guarded(prices, predictor, **kw):
    kw.setdefault("p_shrink", 0.0)  # the cases price the predictor's own p (the default shrinks it, decision R12)
    return GuardedProvisioner(history(prices), InstanceCatalog.load(), predictor, Pool(), np.random.default_rng(0),
                              objective=OBJ, **kw)


def tight(market, price):
    """p = 0.9 at the tight rungs (max price <= price + 0.001 USD/h) of ``market``, 0 elsewhere."""
    return lambda m, b: 0.9 if m == market and b <= price + 0.001 + 1e-12 else 0.0


def test_a_refund_bet_leaves_restart_only_beyond_the_margin():
    # two zones of r4.large (0.5 s/step each): restart = @1a, the cheaper one, at its on-demand 0.13 USD/h (p = 0);
    # the bet = @1a at the tightest rung 0.0201 USD/h with p = 0.9.
    restart = refund_step_cost_usd(0.0, 0.02, 0.5, 3600.0, **KW)
    bet = refund_step_cost_usd(0.9, 0.02, 0.5, 3600.0, **KW)
    assert restart == pytest.approx(0.02 * 0.5 / 3476.0) and bet / restart == pytest.approx(0.26959, abs=1e-5)
    prices, pred = {R4A: 0.02, R4B: 0.05}, TablePredictor(tight(R4A, 0.02))
    left = guarded(prices, pred, margin=0.5).choose("t", NOW, resume_step=5)  # 0.27 < 1 - 0.5: leaves
    assert (left.market, left.max_price_usd_per_hour) == (R4A, pytest.approx(0.0201))
    assert left.expected_step_cost_usd == pytest.approx(bet)
    ch = guarded(prices, pred, margin=0.8)  # 0.27 > 1 - 0.8: keeps restart's choice
    kept = ch.choose("t", NOW, resume_step=5)
    assert (kept.market, kept.max_price_usd_per_hour) == (R4A, pytest.approx(0.13))
    assert kept.expected_step_cost_usd == pytest.approx(restart) and kept.p_revocation == 0.0
    assert kept.explanation.order[0] == "restart_guard" and ch.decisions == {"restart": 1, "left": 0}


def test_a_cpu_trial_does_not_bet_on_a_gpu_type_whose_speed_is_a_guess():
    # r4.large@1a 0.02 USD/h, never revoked; g2.2xlarge 0.07 USD/h revoked with p = 0.9 at its tight rungs. The cores
    # rule believes g2 runs 0.125 s/step (8 vCPUs): the unguarded choice bets on its refund.
    prices, pred = {R4A: 0.02, G2: 0.07}, TablePredictor(tight(G2, 0.07))
    assert chooser(prices, pred, objective=OBJ).choose("t", NOW, resume_step=5).market == G2
    restart = refund_step_cost_usd(0.0, 0.02, 0.5, 3600.0, **KW)
    believed = refund_step_cost_usd(0.9, 0.07, 0.125, 3600.0, **KW)
    honest = refund_step_cost_usd(0.9, 0.07, 0.5, 3600.0, **KW)  # no speed-up above 2 vCPUs until measured
    assert believed / restart == pytest.approx(0.235866, abs=1e-6) and honest / restart == pytest.approx(0.943579, abs=1e-6)
    kept = guarded(prices, pred, margin=0.1).choose("t", NOW, resume_step=5)  # 0.944 > 0.9
    assert (kept.market, kept.max_price_usd_per_hour) == (R4A, pytest.approx(0.13))
    g2 = next(c for c in kept.explanation.candidates if c.market == G2)
    assert g2.step_cost_usd == pytest.approx(honest) and g2.seconds_per_step == pytest.approx(0.125)
    assert guarded(prices, pred, margin=0.0).choose("t", NOW, resume_step=5).market == G2  # 0.944 < 1
    assert guarded(prices, pred, margin=0.1, honest_speed=False).choose("t", NOW, resume_step=5).market == G2
    # once a trial has run on g2 (0.125 s/step measured), the measurement replaces the guess: 0.236 < 0.9
    ch = guarded(prices, pred, margin=0.1)
    ch.record_segment("u", "g2.2xlarge", 300.0, 2400)
    c = ch.choose("u", NOW, resume_step=5)
    assert c.market == G2 and c.expected_step_cost_usd == pytest.approx(believed)


def test_an_unmeasured_small_restart_type_is_priced_at_the_reference_speed():
    # m3.medium (1 vCPU) 0.0081 USD/h is restart's market; r4.large@1b 0.0161 USD/h; p = 0 everywhere. The cores rule:
    # m3 1.0 s/step, r4 0.5. Priced at its own 1.0 s/step, restart would lose to r4 by 0.6 %; unmeasured it is taken
    # at the reference 0.5 s/step and kept even at margin 0. Measured at 1.0 s/step, r4 wins at margin 0 and not at 0.1.
    prices, pred = {M3: 0.0081, R4B: 0.0161}, TablePredictor(lambda m, b: 0.0)
    m3, m3_ref = (refund_step_cost_usd(0.0, 0.0081, t, 3600.0, **KW) for t in (1.0, 0.5))
    r4 = refund_step_cost_usd(0.0, 0.0161, 0.5, 3600.0, **KW)
    assert r4 / m3 == pytest.approx(0.0161 / 0.0162) and m3_ref < r4  # the same whole steps in the hour
    kept = guarded(prices, pred, margin=0.0).choose("t", NOW, resume_step=5)
    assert (kept.market, kept.max_price_usd_per_hour) == (M3, pytest.approx(0.067))
    assert kept.expected_step_cost_usd == pytest.approx(m3_ref)
    for margin, market in ((0.0, R4B), (0.1, M3)):
        ch = guarded(prices, pred, margin=margin)
        ch.record_segment("t", "m3.medium", 100.0, 100)
        c = ch.choose("t", NOW, resume_step=5)
        assert c.market == market, margin
        assert c.expected_step_cost_usd == pytest.approx(r4 if market == R4B else m3)


def test_margin_one_is_spot_restart():
    # whatever the bets, margin 1 keeps the cheapest market at its on-demand price for every trial of the round
    prices, pred = {R4A: 0.02, R4B: 0.019, G2: 0.07}, TablePredictor(tight(G2, 0.07))
    choices = guarded(prices, pred, margin=1.0).choose_many(["a", "b"], NOW, [None, 50], [5, 0])
    assert [(c.market, round(c.max_price_usd_per_hour, 6)) for c in choices] == [(R4B, 0.13), (R4B, 0.13)]


def test_bad_settings_are_refused():
    pred = TablePredictor(lambda m, b: 0.0)
    for bad in (-0.1, 1.5, True, "0.1"):
        with pytest.raises(ProvisionerConfigError, match="margin"):
            guarded({R4A: 0.02}, pred, margin=bad)
    with pytest.raises(ProvisionerConfigError, match="reference_cores"):
        guarded({R4A: 0.02}, pred, reference_cores=0.0)


def test_the_default_provisioning_is_guarded_without_hops():
    from spottune.compose import DEFAULT_RESTART_MARGIN, get_policy

    p = get_policy("spottune-0.7")
    assert (p.restart_margin, p.hourly_hop) == (DEFAULT_RESTART_MARGIN, False)
    old = get_policy("spottune-0.7", provisioning="refund-hop")
    assert (old.restart_margin, old.hourly_hop) == (None, True)
    paper = get_policy("spottune-0.7-paper")
    assert (paper.restart_margin, paper.hourly_hop) == (None, True)  # the paper's design keeps its hops
    restart = get_policy("spottune-0.7", provisioning="restart")
    assert (restart.chooser, restart.restart_margin, restart.hourly_hop) == ("cheapest-market", None, False)


def _bench_provisioning():
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_provisioning.py"
    spec = importlib.util.spec_from_file_location("bench_provisioning_under_test", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_tuning_selection_rule_excludes_harm_then_takes_the_cheapest_and_breaks_ties_conservatively():
    bench = _bench_provisioning()
    p = "spottune-0.7"

    def summary(ratios):  # arm -> (pooled ratio, [cell ratios])
        cells = {}
        for arm, (_, per_cell) in ratios.items():
            for i, r in enumerate(per_cell):
                cells.setdefault(f"t w{i} modern {p}", {})[arm] = {"cost_ratio": r}
        return {"cells": cells, "pooled": {f"{a} {p}": {"cost_ratio": v[0]} for a, v in ratios.items()}}

    grid = [(0.1, 0.5), (0.25, 0.5), (0.1, 0.75), (0.25, 0.75)]
    # m0.1-w0.5 is the cheapest pooled (0.90) but one cell costs 1.03 > 1.02: not eligible; of the eligible,
    # m0.1-w0.75 (0.930) and m0.25-w0.5 (0.938) are tied within 0.01, and the tie goes to the larger margin
    out = bench.select(summary({"m0.1-w0.5": (0.90, [0.77, 1.03]), "m0.25-w0.5": (0.938, [0.90, 0.98]),
                                "m0.1-w0.75": (0.930, [0.90, 0.96]), "m0.25-w0.75": (0.95, [0.93, 0.97])}), grid, p)
    assert (out["margin"], out["shrink"], out["pooled"]) == (0.25, 0.5, 0.938)
    assert [a for a, v in out["table"].items() if not v["eligible"]] == ["m0.1-w0.5"]
    assert out["table"]["m0.1-w0.5"]["worst_cell"] == 1.03
    # a gap of more than 0.01 is no tie: the cheapest eligible setting wins, however aggressive
    out = bench.select(summary({"m0.1-w0.5": (0.90, [0.85, 0.95]), "m0.25-w0.5": (0.92, [0.90, 0.94]),
                                "m0.1-w0.75": (0.95, [0.93, 0.97]), "m0.25-w0.75": (0.96, [0.95, 0.97])}), grid, p)
    assert (out["margin"], out["shrink"]) == (0.1, 0.5)
    # none eligible: all compete; equal pooled ratios go to the larger margin, then the larger shrinkage
    out = bench.select(summary({"m0.1-w0.5": (0.95, [0.9, 1.1]), "m0.25-w0.5": (0.95, [0.9, 1.1]),
                                "m0.1-w0.75": (0.95, [0.9, 1.1]), "m0.25-w0.75": (0.95, [0.9, 1.1])}), grid, p)
    assert (out["margin"], out["shrink"]) == (0.25, 0.75) and bench.tuning_arm(0.25, 0.75) == "m0.25-w0.75"
    # probes (decision R13): a tie goes to fewer probes; a probe setting wins only by more than 0.01
    probe_grid = [(0.1, 0.75, False, 0), (0.1, 0.75, False, 3)]
    assert bench.tuning_arm(0.1, 0.75, False, 3) == "m0.1-w0.75-probe3"
    out = bench.select(summary({"m0.1-w0.75": (0.95, [0.93, 0.97]), "m0.1-w0.75-probe3": (0.945, [0.9, 0.99])}),
                       probe_grid, p)
    assert out["probes"] == 0
    out = bench.select(summary({"m0.1-w0.75": (0.95, [0.93, 0.97]), "m0.1-w0.75-probe3": (0.93, [0.9, 0.96])}),
                       probe_grid, p)
    assert (out["probes"], out["pooled"]) == (3, 0.93)


def test_the_robust_p_test_keeps_restart_unless_the_bet_also_wins_at_the_pool_rate():
    # the bet of the first test (r4.large @1a at 0.0201 USD/h, the predictor's p = 0.9; @1b's p is 0 at its own tight
    # rung, so the rung's pool rate p0 = 0.45). Step cost ÷ restart's: 0.2696 at p = 0.9 (w = 0), 0.5534 at
    # p' = 0.675 (w = 0.5), 0.7388 at p0 = 0.45 (w = 1).
    restart = refund_step_cost_usd(0.0, 0.02, 0.5, 3600.0, **KW)
    ratio = {p: refund_step_cost_usd(p, 0.02, 0.5, 3600.0, **KW) / restart for p in (0.9, 0.675, 0.45)}
    assert [round(ratio[p], 4) for p in (0.9, 0.675, 0.45)] == [0.2696, 0.5534, 0.7388]
    prices, pred = {R4A: 0.02, R4B: 0.05}, TablePredictor(tight(R4A, 0.02))

    def run(m, robust):
        g = guarded(prices, pred, margin=m, p_shrink=0.5, robust_p=robust)
        c = g.choose("t", NOW, resume_step=5)
        return c.max_price_usd_per_hour, g.decisions

    # m = 0.4: 0.5534 < 0.6 leaves on p' alone; the robust test also asks 0.7388 < 0.6 at the pool rate: kept
    assert run(0.4, False) == (0.0201, {"restart": 0, "left": 1})
    assert run(0.4, True) == (0.13, {"restart": 1, "left": 0, "kept_by_robust_p": 1})
    # m = 0.2: 0.7388 < 0.8 and 0.2696 < 0.8 too: the bet survives both ends
    assert run(0.2, True) == (0.0201, {"restart": 0, "left": 1, "kept_by_robust_p": 0})


def test_one_trial_probes_an_unmeasured_type_and_the_rest_keep_restart_until_it_is_measured():
    # the g2.2xlarge case above: honestly priced the bet loses (0.944 > 0.9), at the cores rule's 0.125 s/step it wins
    # by far. With one probe in flight one trial of the round is sent to g2 at its optimistic speed (z = 0: the
    # matrix's own), the other keeps restart; no second probe until g2 is measured or the probe is lost (its
    # horizon, 3600 s, plus an hour).
    prices, pred = {R4A: 0.02, G2: 0.07}, TablePredictor(tight(G2, 0.07))
    ch = guarded(prices, pred, margin=0.1, probes=1, probe_z=0.0)
    first = ch.choose_many(["a", "b"], NOW, None, [5, 5])
    assert [c.market for c in first] == [G2, R4A]
    assert first[0].expected_step_cost_usd == pytest.approx(refund_step_cost_usd(0.9, 0.07, 0.125, 3600.0, **KW))
    assert first[1].max_price_usd_per_hour == pytest.approx(0.13)
    assert ch.decisions == {"restart": 2, "left": 0, "probe": 1}
    assert [c.market for c in ch.choose_many(["a", "b"], NOW + 7199.0, None, [5, 5])] == [R4A, R4A]  # in flight
    assert [c.market for c in ch.choose_many(["a", "b"], NOW + 7200.0, None, [5, 5])] == [G2, R4A]  # lost: again
    ch.record_segment("a", "g2.2xlarge", 300.0, 2400)  # measured at 0.125 s/step: every trial may now leave
    assert [c.market for c in ch.choose_many(["a", "b"], NOW + 7300.0, None, [5, 5])] == [G2, G2]
    # z = 1: the optimistic speed is the matrix's times exp(-sigma_type); probes = 0 (the default) never probes
    up = guarded(prices, pred, margin=0.1, probes=1).choose_many(["a"], NOW, None, [5])[0]
    assert up.expected_step_cost_usd == pytest.approx(
        refund_step_cost_usd(0.9, 0.07, 0.125 * np.exp(-0.3), 3600.0, **KW))
    assert guarded(prices, pred, margin=0.1).choose_many(["a", "b"], NOW, None, [5, 5])[0].market == R4A
    with pytest.raises(ProvisionerConfigError, match="probes"):
        guarded(prices, pred, probes=-1)


def test_a_gpu_trainable_counts_gpus_in_the_honest_speed_rule():
    # p2.xlarge (4 vCPUs, 1 GPU) 0.09 USD/h is restart's market; g2.2xlarge (8 vCPUs, 1 GPU) 0.10 USD/h, p = 0.9 at
    # its tight rungs. On a GPU matrix (reference 1 GPU) both run kappa / 1 = 1 s/step, so the bet is priced at its
    # own speed and leaves (0.30 < 0.9); counted in vCPUs from 2 (8 / 2) it was taken as 4x slower and kept.
    from provisioner import PerformanceMatrix

    p2, g2 = Market("us-east-1a", "p2.xlarge"), G2
    prices, pred = {p2: 0.09, g2: 0.10}, TablePredictor(tight(g2, 0.10))
    cat = InstanceCatalog.load()
    bet = refund_step_cost_usd(0.9, 0.10, 1.0, 3600.0, **KW)
    assert bet / refund_step_cost_usd(0.0, 0.09, 1.0, 3600.0, **KW) == pytest.approx(0.2996, abs=1e-4)
    gpus = guarded(prices, pred, margin=0.1, reference_cores=1.0,
                   performance=PerformanceMatrix.from_catalog(cat, ["g2.2xlarge", "p2.xlarge"], units="gpus"))
    c = gpus.choose("t", NOW, resume_step=5)
    assert c.market == g2 and c.expected_step_cost_usd == pytest.approx(bet)
    assert gpus.honest_seconds_per_step(np.ones((1, 2))).tolist() == [[1.0, 1.0]]  # 1 GPU each: the reference
