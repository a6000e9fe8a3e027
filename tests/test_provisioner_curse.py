"""Optimizer's-curse corrections of the refund-aware choice: shrunk p (exact values) and the diversification cap."""

import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from provisioner import LaunchLedger, ProvisionerConfigError, RefundStepCost, refund_step_cost_usd, shrink_p

sys.path.insert(0, str(Path(__file__).parent))
from test_provisioner_refund import M4, NOW, R4A, R4B, TablePredictor, chooser  # noqa: E402

# p by market, the same at every max-price rung: the round's pool mean at every rung is (0.8 + 0.2 + 0.5) / 3 = 0.5
P = {R4A: 0.8, R4B: 0.2, M4: 0.5}
PRICES = {R4A: 0.02, R4B: 0.021, M4: 0.30}


def test_shrink_p_hand_computed():
    p = np.array([[0.8, 0.1, np.nan], [0.2, 0.0, 0.3], [0.5, 0.5, np.nan]])
    ok = ~np.isnan(p)
    # rung means over launchable markets: (0.8 + 0.2 + 0.5) / 3 = 0.5; (0.1 + 0 + 0.5) / 3 = 0.2; 0.3 (one market)
    out = shrink_p(p, ok, 0.25)
    expect = np.array([[0.75 * 0.8 + 0.25 * 0.5, 0.75 * 0.1 + 0.25 * 0.2, np.nan],
                       [0.75 * 0.2 + 0.25 * 0.5, 0.75 * 0.0 + 0.25 * 0.2, 0.3],
                       [0.5, 0.75 * 0.5 + 0.25 * 0.2, np.nan]])
    np.testing.assert_allclose(out, expect)
    assert out[0, 0] == pytest.approx(0.725) and out[1, 1] == pytest.approx(0.05)
    np.testing.assert_allclose(shrink_p(p, ok, 0.5, prior=0.1), np.where(ok, 0.5 * p + 0.05, np.nan))
    np.testing.assert_array_equal(shrink_p(p, ok, 0.0), p)  # w = 0: unchanged, NaN kept
    np.testing.assert_allclose(shrink_p(p, ok, 1.0)[:, 0], [0.5, 0.5, 0.5])


def test_the_objective_prices_the_shrunk_p():
    pred = TablePredictor(lambda m, b: P[m])
    ch = chooser(PRICES, pred, p_shrink=0.5)
    by_market = {c.market: c for c in ch.choose("t", NOW).explanation.candidates}
    for m, p in P.items():
        c = by_market[m]
        shrunk = 0.5 * p + 0.5 * 0.5  # R4A 0.65, R4B 0.35, M4 0.5
        assert c.p_revocation == p and c.p_objective == pytest.approx(shrunk)
        assert c.step_cost_usd == pytest.approx(refund_step_cost_usd(shrunk, c.mean_price_usd_per_hour,
                                                                      c.seconds_per_step, c.horizon_s))
    assert by_market[R4A].p_objective == pytest.approx(0.65) and by_market[R4B].p_objective == pytest.approx(0.35)
    off = chooser(PRICES, pred).choose("t", NOW).explanation.candidates[0]
    assert off.p_objective is None and "p_objective" not in off.to_dict()


def test_a_prior_predictor_gives_each_candidate_its_own_base_rate():
    # the market's base rate from a second predictor: r4.large@1a 0.3, @1b 0.1, m4 0.0 at every rung
    base = TablePredictor(lambda m, b: {R4A: 0.3, R4B: 0.1, M4: 0.0}[m])
    pred = TablePredictor(lambda m, b: P[m])
    ch = chooser(PRICES, pred, p_shrink=0.25, p_prior=base)
    by_market = {c.market: c for c in ch.choose("t", NOW).explanation.candidates}
    assert by_market[R4A].p_objective == pytest.approx(0.75 * 0.8 + 0.25 * 0.3)  # 0.675
    assert by_market[R4B].p_objective == pytest.approx(0.75 * 0.2 + 0.25 * 0.1)  # 0.175
    assert by_market[M4].p_objective == pytest.approx(0.75 * 0.5)  # 0.375
    # the prior is asked the same questions, in one call per round
    assert len(base.calls) == 1 and base.calls[0][0] == pred.calls[0][0]
    np.testing.assert_array_equal(base.calls[0][2], pred.calls[0][2])
    assert ch.predictor_calls == 2


def test_shrinkage_can_change_the_choice():
    # r4.large@1a at 0.10 USD/h with p = 0.8 beats @1b at 0.05 USD/h with p = 0 (same type, same T); with
    # every p pulled to 0 only the price is left and @1b wins.
    pred = TablePredictor(lambda m, b: {R4A: 0.8, R4B: 0.0}[m])
    prices = {R4A: 0.10, R4B: 0.05}
    assert chooser(prices, pred).choose("t", NOW).market == R4A  # (1 - 0.8) * 0.10 < 0.05
    assert chooser(prices, pred, p_shrink=1.0, p_prior=0.0).choose("t", NOW).market == R4B  # p' = 0: price only


def test_a_p_ceiling_prices_min_p_cap_and_can_change_the_choice():
    # the same two markets as above: with p capped at 0.4, @1a costs (1 - 0.4) * 0.10 = 0.06 > 0.05 USD/h
    pred = TablePredictor(lambda m, b: {R4A: 0.8, R4B: 0.0}[m])
    prices = {R4A: 0.10, R4B: 0.05}
    ch = chooser(prices, pred, p_cap=0.4)
    by_market = {c.market: c for c in ch.choose("t", NOW).explanation.candidates}
    assert ch.choose("t", NOW).market == R4B
    assert by_market[R4A].p_revocation == 0.8 and by_market[R4A].p_objective == pytest.approx(0.4)
    assert by_market[R4B].p_objective == 0.0  # below the ceiling: unchanged
    c = by_market[R4A]
    assert c.step_cost_usd == pytest.approx(refund_step_cost_usd(0.4, c.mean_price_usd_per_hour, c.seconds_per_step,
                                                                  c.horizon_s))
    assert chooser(prices, pred, p_cap=0.85).choose("t", NOW).market == R4A  # a ceiling above p changes nothing


def test_the_cap_holds_within_a_round_and_its_window():
    pred = TablePredictor(lambda m, b: P[m])
    ids = [f"t{i:02d}" for i in range(16)]
    free = chooser(PRICES, pred).choose_many(ids, NOW)
    assert len({(c.market, c.max_price_usd_per_hour) for c in free}) == 1  # uncapped: all 16 on one candidate
    ch = chooser(PRICES, pred, max_trials_per_candidate=3, cap_window_s=600.0)
    capped = ch.choose_many(ids, NOW)
    n = Counter((c.market, round(c.max_price_usd_per_hour, 9)) for c in capped)
    assert max(n.values()) == 3 and sum(n.values()) == 16 and len(n) == 6  # 5 full candidates and one with 1
    assert capped[0].to_dict() == free[0].to_dict()  # the first trial gets the uncapped best
    # later calls within the window count the earlier choices; the 16th trial's candidate holds 1, so 2 more fit
    later = [ch.choose(f"u{i}", NOW + 300.0) for i in range(3)]
    n2 = Counter((c.market, round(c.max_price_usd_per_hour, 9)) for c in capped + later)
    assert max(n2.values()) == 3
    # after the window, the best candidate is free again
    assert ch.choose("v", NOW + 601.0).to_dict()["max_price_usd_per_hour"] == free[0].max_price_usd_per_hour


def test_a_market_whose_every_rung_is_full_is_skipped_with_the_reason():
    pred = TablePredictor(lambda m, b: P[m])
    ch = chooser({R4A: 0.02}, pred, max_trials_per_candidate=1)
    picks = ch.choose_many([f"t{i}" for i in range(10)], NOW)  # 9 rungs: the 10th trial waives the cap
    assert len({c.max_price_usd_per_hour for c in picks[:9]}) == 9
    assert picks[9].market == R4A and picks[9].max_price_usd_per_hour == picks[0].max_price_usd_per_hour
    ch2 = chooser({R4A: 0.02, R4B: 0.5}, pred, max_trials_per_candidate=1)
    last = ch2.choose_many([f"t{i}" for i in range(10)], NOW)[9]
    assert last.market == R4B
    assert [s.reason for s in last.explanation.skipped if s.market == R4A] == [
        "every max price of this market already holds the cap of trials chosen in the cap's window"]


def test_corrections_are_deterministic():
    def run():
        pred = TablePredictor(lambda m, b: P[m] * (1.0 if b < 0.1 else 0.5))
        ch = chooser(PRICES, pred, p_shrink=0.4, max_trials_per_candidate=2,
                     objective=RefundStepCost(boot_s=120.0, checkpoint_s=2.0))
        out = [c.to_dict() for c in ch.choose_many([f"t{i}" for i in range(12)], NOW, [100] * 12, [0] * 12)]
        out += [ch.choose(f"t{i}", NOW + 60.0 * i, steps_left=50, resume_step=10).to_dict() for i in range(6)]
        return out
    assert run() == run()


def test_ledger_window_zero_counts_the_same_time_only():
    led = LaunchLedger(cap=2, window_s=0.0)
    led.add(10.0, 0, 1)
    led.add(10.0, 0, 1)
    assert led.counts(10.0, (1, 2)).tolist() == [[0, 2]]
    assert led.counts(10.5, (1, 2)).tolist() == [[0, 0]]


@pytest.mark.parametrize("kw", [dict(p_shrink=-0.1), dict(p_shrink=1.5), dict(p_prior=2.0), dict(p_prior="pool"),
                                dict(max_trials_per_candidate=0), dict(max_trials_per_candidate=2.5),
                                dict(max_trials_per_candidate=True), dict(cap_window_s=-1.0),
                                dict(cap_window_s=float("inf")), dict(p_cap=0.0), dict(p_cap=1.0), dict(p_cap=True),
                                dict(p_cap="0.5")])
def test_bad_settings_are_refused(kw):
    with pytest.raises(ProvisionerConfigError):
        chooser(PRICES, TablePredictor(lambda m, b: 0.1), **kw)
