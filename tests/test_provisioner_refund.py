"""The refund-aware objective (decision R1): hand-computed USD per useful step, the max-price ladder, q(H)."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy.integrate import quad

from provisioner import (
    DELTA_LADDER_USD_PER_HOUR,
    InstanceCatalog,
    Pool,
    Provisioner,
    ProvisionerConfigError,
    RefundProvisioner,
    RefundStepCost,
    decision_horizon_s,
    expected_paid_usd,
    expected_segment_s,
    expected_useful_steps,
    refund_step_cost_usd,
    revocation_within,
    step_cost_usd,
)
from revpred.protocol import ConstantRevocation
from spotmarket.prices import Market, PriceHistory

T0 = pd.Timestamp("2017-05-05T00:00Z").value / 1e9
NOW = T0 + 2 * 3600.0
R4A = Market("us-east-1a", "r4.large")
R4B = Market("us-east-1b", "r4.large")
M4 = Market("us-east-1a", "m4.4xlarge")


def history(prices: dict) -> PriceHistory:
    """Flat prices (USD/hour) from T0 for a day."""
    rows = [(t, m, p) for m, p in prices.items() for t in (T0, T0 + 86400)]
    return PriceHistory(pd.DataFrame({
        "timestamp": pd.to_datetime([t for t, _, _ in rows], unit="s", utc=True),
        "availability_zone": [m.availability_zone for _, m, _ in rows],
        "instance_type": [m.instance_type for _, m, _ in rows],
        "product_description": "Linux/UNIX", "price": [p for _, _, p in rows]}))


class TablePredictor:
    """p from a function of (market, max price); records every call."""

    def __init__(self, fn):
        self.fn, self.calls = fn, []

    def predict_proba(self, markets, times_s, max_prices_usd_per_hour):
        b = np.broadcast_to(np.asarray(max_prices_usd_per_hour, dtype=float), (len(markets),))
        self.calls.append((list(markets), times_s, b.copy()))
        return np.array([self.fn(m, x) for m, x in zip(markets, b)], dtype=float)


def chooser(prices, predictor, **kw):
    return RefundProvisioner(history(prices), InstanceCatalog.load(), predictor, Pool(), np.random.default_rng(0),
                             **kw)


# -- the formulas --------------------------------------------------------------------------------------
def test_q_scales_with_the_horizon_by_a_constant_hazard():
    assert revocation_within(0.75, 1800.0) == pytest.approx(0.5)  # 1 - 0.25 ** 0.5
    assert revocation_within(0.19, 1800.0) == pytest.approx(0.1)  # 1 - 0.81 ** 0.5
    assert revocation_within(0.3, 3600.0) == pytest.approx(0.3)
    assert revocation_within(0.3, 0.0) == 0.0 and revocation_within(0.0, 3600.0) == 0.0
    assert revocation_within(1.0, 60.0) == 1.0
    assert revocation_within(0.5, 900.0) == pytest.approx(1 - 2 ** -0.25)
    with pytest.raises(ProvisionerConfigError):
        revocation_within(1.5, 60.0)


def test_two_markets_exact_usd_per_useful_step():
    # boot 100 s, restore 20 s, checkpoint 10 s, notice 120 s, H = 3600 s.
    kw = dict(boot_s=100.0, restore_s=20.0, checkpoint_s=10.0, notice_s=120.0)
    # Market B: p = 0, 0.20 USD/h, 1 s/step: pays the hour, 3600 - 130 s of steps.
    assert expected_paid_usd(0.0, 0.20, 3600.0) == pytest.approx(0.20)
    assert expected_useful_steps(0.0, 1.0, 3600.0, **kw) == pytest.approx(3470.0)
    assert refund_step_cost_usd(0.0, 0.20, 1.0, 3600.0, **kw) == pytest.approx(0.20 / 3470.0)
    # Market A: p = 0.5, 0.10 USD/h, 2 s/step. Survives the hour with 1/2: pays 0.05 USD, keeps 3470 / 2 = 1735
    # steps. Revoked at the notice τ < 3600 (S(t) = 2^(-t/3600)): keeps floor((τ - 120) / 2) steps (boot +
    # restore; the notice-time checkpoint saves them), i.e. sum over k = 1..1740 of P(120 + 2k <= τ < 3600).
    revoked = sum(2 ** (-(120 + 2 * k) / 3600) - 0.5 for k in range(1, 1741))
    lam = math.log(2) / 3600  # close to the continuous ∫ (τ - 120) / 2 dF less half a step per revocation
    cont = quad(lambda t: lam * math.exp(-lam * t) * (t - 120) / 2, 120, 3600)[0]
    assert revoked == pytest.approx(cont - 0.5 * (2 ** (-120 / 3600) - 0.5), abs=0.01)
    assert revoked == pytest.approx(368.87, abs=0.01)  # by hand: 738.227 / 2 - 0.5 * 0.4772
    steps_a = 0.5 * 1735 + revoked
    assert expected_paid_usd(0.5, 0.10, 3600.0) == pytest.approx(0.05)
    assert expected_useful_steps(0.5, 2.0, 3600.0, **kw) == pytest.approx(steps_a)
    cost_a = refund_step_cost_usd(0.5, 0.10, 2.0, 3600.0, **kw)
    assert cost_a == pytest.approx(0.05 / steps_a) == pytest.approx(0.05 / 1236.37, rel=1e-5)
    assert cost_a < refund_step_cost_usd(0.0, 0.20, 1.0, 3600.0, **kw) == pytest.approx(5.7637e-5, rel=1e-4)
    # a step longer than what the hour leaves gives nothing: the hop (or a notice) loses the step in progress
    assert expected_useful_steps(0.0, 3500.0, 3600.0, **kw) == 0.0
    assert refund_step_cost_usd(0.0, 0.01, 3500.0, 3600.0, **kw) == math.inf
    # Eq 2 would value A at (1 - 0.5) * 0.10 * 2 / 3600 = 2.78e-5: it ignores overheads and the lost half hour
    assert step_cost_usd(0.5, 0.10, 2.0) == pytest.approx(2.7778e-5, rel=1e-4)
    # a checkpoint longer than the notice loses the revoked segment's work
    assert expected_useful_steps(0.5, 2.0, 3600.0, boot_s=100.0, restore_s=20.0, checkpoint_s=130.0,
                                 notice_s=120.0) == pytest.approx(0.5 * 1675)


def test_eq2_is_the_limit_without_overheads_or_revocations():
    assert refund_step_cost_usd(0.0, 0.036, 2.0, 3600.0) == pytest.approx(step_cost_usd(0.0, 0.036, 2.0))


def test_our_own_end_before_a_revocation_is_paid():
    # θ pause at H = 1800 s in a market revoked with p = 0.5 per hour: only a revocation in the first half
    # hour (q = 1 - 0.5 ** 0.5) is free; otherwise we end the run and pay 1800 s at 0.10 USD/h.
    assert expected_paid_usd(0.5, 0.10, 1800.0) == pytest.approx(0.5 ** 0.5 * 0.10 * 0.5)
    # Eq 1 would count (1 - p) * P̄ = 0.05 USD for the hour as if every revocation in it were refunded
    assert expected_paid_usd(0.5, 0.10, 1800.0) > (1 - 0.5) * 0.10 * 0.5


def test_horizon_is_the_next_planned_stop_capped_at_the_hop():
    assert decision_horizon_s(100, 2.0, boot_s=120.0, restore_s=3.0, checkpoint_s=3.0) == pytest.approx(326.0)
    assert decision_horizon_s(10_000, 2.0, boot_s=120.0) == 3600.0
    assert decision_horizon_s(np.inf, 2.0) == 3600.0


def test_bad_overheads_are_refused():
    for kw in ({"boot_s": -1.0}, {"checkpoint_s": {"r4.large": math.nan}}, {"deltas_usd_per_hour": ()},
               {"deltas_usd_per_hour": (0.0,)}):
        with pytest.raises(ProvisionerConfigError):
            RefundStepCost(**kw)
    with pytest.raises(ProvisionerConfigError, match="m4.4xlarge"):
        RefundStepCost(checkpoint_s={"r4.large": 1.0}).checkpoint_seconds("m4.4xlarge")


def test_the_segment_lasts_until_our_end_or_the_termination_after_a_notice():
    # W = min(τ + 120, H): p = 0.75 per hour, λ = ln 4 / 3600; E[W] = 120 + (1 - 4^(-3480/3600)) / λ
    lam = math.log(4) / 3600
    assert expected_segment_s(0.75, 3600.0, 120.0) == pytest.approx(120 + (1 - 4 ** (-3480 / 3600)) / lam)
    direct = quad(lambda t: min(t + 120.0, 3600.0) * lam * math.exp(-lam * t), 0, 50 * 3600)[0]
    assert expected_segment_s(0.75, 3600.0, 120.0) == pytest.approx(direct, rel=1e-6)
    assert expected_segment_s(0.0, 1234.0) == 1234.0  # never revoked: the whole horizon
    assert expected_segment_s(0.9, 100.0, 120.0) == 100.0  # a horizon inside the notice: always H
    assert expected_segment_s(1.0, 3600.0, 120.0) == 120.0  # revoked at launch: the notice only


def test_a_value_of_time_adds_the_segment_hours_to_the_usd():
    kw = dict(boot_s=100.0, restore_s=20.0, checkpoint_s=10.0, notice_s=120.0)
    steps = expected_useful_steps(0.5, 2.0, 3600.0, **kw)
    hours = expected_segment_s(0.5, 3600.0, 120.0) / 3600
    got = refund_step_cost_usd(0.5, 0.10, 2.0, 3600.0, time_value_usd_per_hour=0.4, **kw)
    assert got == pytest.approx((0.05 + 0.4 * hours) / steps)
    # v = 0 is today's objective, bit for bit
    assert refund_step_cost_usd(0.5, 0.10, 2.0, 3600.0, time_value_usd_per_hour=0.0, **kw) == 0.05 / steps
    for bad in (-0.1, math.nan, math.inf, True):
        with pytest.raises(ProvisionerConfigError, match="time_value_usd_per_hour"):
            RefundStepCost(time_value_usd_per_hour=bad)


def test_a_weibull_hazard_shape_front_loads_the_hours_revocations():
    # q(H) = 1 - (1 - p)^((H/3600)^k): k = 0.5, p = 0.75, a quarter hour -> 1 - 0.25^0.5 = 0.5 (k = 1 gives 1 - 0.25^0.25)
    assert revocation_within(0.75, 900.0, 0.5) == pytest.approx(0.5)
    assert revocation_within(0.75, 3600.0, 0.5) == pytest.approx(0.75)  # the hour's p whatever the shape
    assert revocation_within(0.75, 0.0, 0.5) == 0.0
    assert expected_paid_usd(0.75, 0.10, 900.0, 0.5) == pytest.approx(0.5 * 0.10 / 4)
    # p = 0.5: the steps kept against the sum itself, Σ_j S(a + jT) with S(x) = 0.5^((x/3600)^0.5), a = 150 s, T = 2 s
    S = lambda x: 0.5 ** ((x / 3600) ** 0.5)  # noqa: E731
    K = int((3600 - 150) // 2)
    brute = sum(S(150 + 2 * j) - S(3600) for j in range(1, K + 1)) + S(3600) * K
    assert expected_useful_steps(0.5, 2.0, 3600.0, boot_s=150.0, hazard_shape=0.5) == pytest.approx(brute, rel=1e-6)
    assert brute < expected_useful_steps(0.5, 2.0, 3600.0, boot_s=150.0)  # earlier notices keep fewer steps
    # E[W] = 120 + integral of S over [0, H - 120]
    direct = 120.0 + quad(S, 0, 3480.0)[0]
    assert expected_segment_s(0.5, 3600.0, 120.0, 0.5) == pytest.approx(direct, rel=1e-9)
    assert expected_segment_s(0.0, 1234.0, 120.0, 0.5) == 1234.0 and expected_segment_s(1.0, 3600.0, 120.0, 0.5) == 120.0
    # coarse steps (K = 5) are summed exactly; a shape next to 1 agrees with the constant hazard's closed form
    coarse = sum(S(150 + 600 * j) for j in range(1, 6))
    assert expected_useful_steps(0.5, 600.0, 3600.0, boot_s=150.0, hazard_shape=0.5) == pytest.approx(coarse, rel=1e-12)
    # just above 256 steps an hour (K = 265) the midpoint integral is within 0.1 % of the sum (docstring's claim)
    for p, k in ((0.999, 0.588), (0.6, 0.3)):
        c = -math.log1p(-p)
        exact = sum(math.exp(-c * ((150 + 13.0 * j) / 3600) ** k) for j in range(1, 266))
        assert expected_useful_steps(p, 13.0, 3600.0, boot_s=150.0, hazard_shape=k) == pytest.approx(exact, rel=1e-3)
    for t in (600.0, 60.0, 2.0):
        assert expected_useful_steps(0.9, t, 3600.0, boot_s=150.0, hazard_shape=1 + 1e-9) == pytest.approx(
            expected_useful_steps(0.9, t, 3600.0, boot_s=150.0), rel=1e-6)
    # the objective threads it through, the value of time included
    kw = dict(boot_s=150.0, checkpoint_s=0.0)
    assert refund_step_cost_usd(0.5, 0.10, 2.0, 3600.0, hazard_shape=0.5, **kw) == pytest.approx(
        expected_paid_usd(0.5, 0.10, 3600.0, 0.5) / brute, rel=1e-6)
    assert refund_step_cost_usd(0.5, 0.10, 2.0, 3600.0, hazard_shape=0.5, time_value_usd_per_hour=0.4, **kw) == pytest.approx(
        (expected_paid_usd(0.5, 0.10, 3600.0, 0.5) + 0.4 * direct / 3600) / brute, rel=1e-6)
    for bad in (0.0, 0.01, -1.0, 25.0, math.nan, math.inf, True):
        with pytest.raises(ProvisionerConfigError, match="hazard_shape"):
            RefundStepCost(hazard_shape=bad)
        with pytest.raises(ProvisionerConfigError, match="hazard_shape"):
            revocation_within(0.5, 60.0, bad)


def test_the_chooser_prices_with_the_objectives_hazard_shape():
    pred = TablePredictor(lambda m, b: 0.9 if m == R4A and b <= 0.02 + 0.001 + 1e-12 else 0.0)
    kw = dict(boot_s=120.0, restore_s=2.0, checkpoint_s=2.0)
    for v in (0.0, 0.05):
        obj = RefundStepCost(boot_s=120.0, checkpoint_s=2.0, hazard_shape=0.6, time_value_usd_per_hour=v)
        c = chooser({R4A: 0.02, R4B: 0.05}, pred, objective=obj).choose("t", NOW, steps_left=None, resume_step=5)
        assert c.market == R4A and c.expected_step_cost_usd == pytest.approx(
            refund_step_cost_usd(0.9, 0.02, 0.5, 3600.0, hazard_shape=0.6, time_value_usd_per_hour=v, **kw))
        assert c.expected_step_cost_usd > refund_step_cost_usd(0.9, 0.02, 0.5, 3600.0, time_value_usd_per_hour=v, **kw)


# -- the chooser -----------------------------------------------------------------------------------------
def test_a_value_of_time_moves_a_trial_from_a_slow_refunded_market_to_a_fast_one():
    # r4.large@1a: 0.02 USD/h, T = 1 / 2 = 0.5 s/step, revoked with p = 0.75 per hour at every rung.
    # m4.4xlarge@1a: 0.30 USD/h, T = 1 / 16 = 0.0625 s/step, never revoked. No boot, restore or checkpoint.
    pred = TablePredictor(lambda m, b: 0.75 if m == R4A else 0.0)
    hist = {R4A: 0.02, M4: 0.30}
    # slow: survives the hour with 1/4 (pays 0.005 USD, 7200 steps); revoked at τ it keeps floor(τ / 0.5) steps
    steps_slow = 0.25 * 7200 + sum(0.25 ** (0.5 * k / 3600) - 0.25 for k in range(1, 7201))
    # by hand: 1800 + E[τ; τ < H] / 0.5 - 0.75 / 2 = 1800 + (1 - 0.25 · (1 + ln 4)) · 3600 / ln 4 / 0.5 - 0.375
    assert steps_slow == pytest.approx(3894.90, abs=0.01)
    hours_slow = (120 + 3600 * (1 - 0.25 ** (3480 / 3600)) / math.log(4)) / 3600  # E[min(τ + 120, 3600)]
    assert hours_slow == pytest.approx(2036.93 / 3600, abs=1e-5)  # 120 + 0.73817 · 2596.85 s
    slow = lambda v: (0.005 + v * hours_slow) / steps_slow  # noqa: E731
    fast = lambda v: (0.30 + v * 1.0) / 57600  # noqa: E731  (3600 / 0.0625 steps, one hour)
    for v, market, cost in ((0.0, R4A, slow(0.0)), (0.030, R4A, slow(0.030)), (0.031, M4, fast(0.031)), (1.0, M4, fast(1.0))):
        c = chooser(hist, pred, objective=RefundStepCost(time_value_usd_per_hour=v)).choose("t", NOW)
        assert c.market == market, v
        assert c.expected_step_cost_usd == pytest.approx(cost, rel=1e-9)
    assert slow(0.0) == pytest.approx(1.28373e-6, rel=1e-5) and fast(0.0) == pytest.approx(5.2083e-6, rel=1e-4)
    # the break-even value of time: (0.30 / 57600 - 0.005 / steps) / (hours / steps - 1 / 57600) = 0.030683 USD/h
    assert (0.30 / 57600 - 0.005 / steps_slow) / (hours_slow / steps_slow - 1 / 57600) == pytest.approx(0.030683, abs=1e-6)
    # the job's value of time V is shared by the trials still heading to the same stop (R11): V = 0.4 USD per
    # job-hour is 0.4 / 16 = 0.025 USD per trial-hour (below the break-even: slow) for one of 16 fresh trials,
    # 0.4 / 2 = 0.2 for one of two stragglers, and the whole 0.4 for a trial alone or of unknown company (fast)
    job = chooser(hist, pred, objective=RefundStepCost(job_time_value_usd_per_hour=0.4))
    got = job.choose_many(["a", "b", "c"], NOW, heading=[16, 2, None])
    assert [c.market for c in got] == [R4A, M4, M4]
    assert [c.expected_step_cost_usd for c in got] == pytest.approx([slow(0.025), fast(0.2), fast(0.4)], rel=1e-9)
    both = chooser(hist, pred, objective=RefundStepCost(time_value_usd_per_hour=0.01, job_time_value_usd_per_hour=0.32))
    assert both.choose("a", NOW, heading=16).expected_step_cost_usd == pytest.approx(slow(0.03), rel=1e-9)  # v + V / n
    with pytest.raises(ProvisionerConfigError, match="heading is"):
        job.choose("a", NOW, heading=0)
    for bad in (-0.1, math.nan, math.inf, True):
        with pytest.raises(ProvisionerConfigError, match="job_time_value_usd_per_hour"):
            RefundStepCost(job_time_value_usd_per_hour=bad)


def test_a_zero_value_of_time_is_todays_chooser():
    pred = TablePredictor(lambda m, b: 0.3 if m == R4A and b < 0.03 else 0.05)
    hist = {R4A: 0.02, R4B: 0.05, M4: 0.30}
    obj = dict(boot_s=120.0, checkpoint_s=2.0)
    today = chooser(hist, pred, objective=RefundStepCost(**obj)).choose_many(["a", "b"], NOW, [100, None], [0, 40])
    zero = chooser(hist, pred, objective=RefundStepCost(time_value_usd_per_hour=0.0, **obj)).choose_many(
        ["a", "b"], NOW, [100, None], [0, 40])
    assert [c.to_dict() for c in zero] == [c.to_dict() for c in today]


def test_a_cheap_market_at_a_tight_max_price_beats_a_dear_safe_one():
    # Two zones of one type (same T = 0.5 s/step prior): r4.large@1a at 0.02 USD/h is revoked with p = 0.9
    # at the tight rungs (δ <= 0.001), p = 0 above; @1b at 0.05 USD/h is never revoked.
    pred = TablePredictor(lambda m, b: 0.9 if m == R4A and b <= 0.02 + 0.001 + 1e-12 else 0.0)
    obj = RefundStepCost(boot_s=120.0, checkpoint_s=2.0)
    ch = chooser({R4A: 0.02, R4B: 0.05}, pred, objective=obj)
    c = ch.choose("t", NOW, steps_left=None, resume_step=5)
    assert c.market == R4A and c.max_price_usd_per_hour == pytest.approx(0.0201)  # tightest rung, lowest b
    assert c.p_revocation == 0.9
    kw = dict(boot_s=120.0, restore_s=2.0, checkpoint_s=2.0)
    tight = refund_step_cost_usd(0.9, 0.02, 0.5, 3600.0, **kw)
    assert c.expected_step_cost_usd == pytest.approx(tight)
    # it beats both the safe rungs of the same market and the dearer market (p = 0): 0.02 * 0.5 / 3600 / (3476 / 3600)
    assert tight < refund_step_cost_usd(0.0, 0.02, 0.5, 3600.0, **kw) == pytest.approx(0.02 * 0.5 / 3476.0)
    dear = c.explanation.candidates[1]
    assert dear.market == R4B and dear.step_cost_usd == pytest.approx(0.05 * 0.5 / 3476.0)
    assert dear.max_price_usd_per_hour == pytest.approx(0.0501)  # p = 0 everywhere: ties go to the lowest b


def test_the_ladder_is_queried_in_one_vectorised_call():
    pred = TablePredictor(lambda m, b: 0.1)
    ch = chooser({R4A: 0.02, M4: 0.30}, pred)
    choices = ch.choose_many(["a", "b", "c"], NOW, [10, 20, None], [0, 3, None])
    assert len(choices) == 3 and len(pred.calls) == 1 and ch.predictor_calls == 1
    markets, times, b = pred.calls[0]
    assert times == NOW and len(markets) == 2 * (len(DELTA_LADDER_USD_PER_HOUR) + 1)
    # row-major (market, rung): the pool is sorted (m4.4xlarge before r4.large), on-demand last
    expect = [0.30 + d for d in DELTA_LADDER_USD_PER_HOUR] + [0.8] + [0.02 + d for d in DELTA_LADDER_USD_PER_HOUR] + [0.13]
    assert markets == [M4] * 9 + [R4A] * 9
    np.testing.assert_allclose(b, expect)


def test_the_plan_sets_the_horizon_and_the_restore():
    # r4.large prior: 1 s·core / 2 cores = 0.5 s/step; 100 steps left, fresh trial (no restore), ckpt 3 s
    ch = chooser({R4A: 0.02}, ConstantRevocation(0.5), objective=RefundStepCost(boot_s=120.0, checkpoint_s=3.0))
    top = ch.choose("t", NOW, steps_left=100, resume_step=0).explanation.candidates[0]
    assert top.horizon_s == pytest.approx(120.0 + 50.0 + 3.0)
    assert top.expected_usd == pytest.approx(0.5 ** (173.0 / 3600) * 0.02 * 173.0 / 3600)
    resumed = ch.choose("t", NOW, steps_left=100, resume_step=40).explanation.candidates[0]
    assert resumed.horizon_s == pytest.approx(176.0)  # + a 3 s restore
    unknown = ch.choose("t", NOW).explanation.candidates[0]
    assert unknown.horizon_s == 3600.0


def test_a_free_market_does_not_go_to_the_dearest_fastest_type():
    # p = 1 everywhere (an oracle that knows every market will be revoked): Eq 2 calls every hour free, ties
    # at 0 and takes the fastest type, m4.4xlarge at 0.30 USD/h. The refund objective still prices the
    # survival chance and the steps a revoked run keeps, and takes the cheap r4.large.
    hist = {R4A: 0.02, M4: 0.30}
    paper = Provisioner(history(hist), InstanceCatalog.load(), ConstantRevocation(1.0), Pool(), np.random.default_rng(0))
    assert paper.choose("t", NOW).market == M4
    refund = chooser(hist, ConstantRevocation(1.0), objective=RefundStepCost(boot_s=120.0, checkpoint_s=2.0))
    assert refund.choose("t", NOW).market == R4A


def test_paper_objective_is_eq2_unchanged():
    from spottune.compose import make_provisioner

    hist = history({R4A: 0.02, M4: 0.30})
    cat, pred = InstanceCatalog.load(), ConstantRevocation(0.4)
    built = make_provisioner(hist, cat, Pool(), pred, 7, objective="paper")
    direct = Provisioner(hist, cat, pred, Pool(), np.random.default_rng(7))
    assert type(built) is Provisioner and built.objective.name == "eq2"
    a, b = built.choose("t", NOW), direct.choose("t", NOW)
    assert a.to_dict() == b.to_dict()
    for cand in a.explanation.candidates:
        assert cand.step_cost_usd == pytest.approx((1 - 0.4) * cand.mean_price_usd_per_hour * cand.seconds_per_step / 3600)
    assert type(make_provisioner(hist, cat, Pool(), pred, 7)) is RefundProvisioner  # refund is the default


def test_the_calibrated_predictor_gets_the_selection_ceiling():
    # design R6: the refund objective prices min(p, 0.6) of the calibrated predictor, every other p up to 0.999
    from provisioner import P_CAP
    from revpred.calibrated import CalibratedRevocation
    from spottune.compose import CALIBRATED_P_CAP, make_provisioner

    hist, cat = history({R4A: 0.02, M4: 0.30}), InstanceCatalog.load()
    assert make_provisioner(hist, cat, Pool(), CalibratedRevocation(hist, [R4A, M4]), 7).p_cap == CALIBRATED_P_CAP == 0.6
    assert make_provisioner(hist, cat, Pool(), ConstantRevocation(0.9), 7).p_cap == P_CAP == 0.999


def test_orchestrator_passes_the_plan_to_a_horizon_planning_chooser():
    from spottune.orchestrator import ExperimentStarted, Orchestrator, OrchestratorConfig

    class Recorder:
        plans_horizon = True

        def __init__(self):
            self.inner = chooser({R4A: 0.02}, ConstantRevocation(0.0))
            self.calls = []

        def choose(self, trial_id, now_s, **plan):
            self.calls.append(plan)
            return self.inner.choose(trial_id, now_s, **plan)

        def choose_many(self, trial_ids, now_s):
            return [self.choose(t, now_s) for t in trial_ids]

        def record_segment(self, *args):
            return 0.5

    rec = Recorder()
    Orchestrator(["t0", "t1", "t2"], OrchestratorConfig(max_steps=10, theta=0.5), rec).handle(ExperimentStarted(time_s=NOW))
    assert rec.calls == [{"steps_left": 5, "resume_step": 0, "heading": 3}] * 3  # all three head to the θ barrier


def test_spec_and_defaults():
    from spottune.backends import SimSettings
    from spottune.speed import DEFAULT_BOOT_S
    from spottune.errors import ConfigError
    from spottune.evaluation._runner import Task
    from spottune.experiment import ExperimentSpec

    assert DEFAULT_BOOT_S == 120.0 == SimSettings().boot_s == ExperimentSpec().boot_s
    assert Task(workload="w", policy="p", start_index=0, start_s=0.0, market_mode="legacy", seed=0, train_lo_s=0.0,
                train_hi_s=1.0).boot_s == DEFAULT_BOOT_S
    assert ExperimentSpec().objective == "refund" and ExperimentSpec(objective="paper").objective == "paper"
    with pytest.raises(ConfigError, match="objective is 'eq2', but must be one of refund, paper"):
        ExperimentSpec(objective="eq2")
    assert ExperimentSpec().time_value_usd_per_hour == 0.0 == RefundStepCost().time_value_usd_per_hour
    assert ExperimentSpec().job_time_value_usd_per_hour == 0.01 and RefundStepCost().job_time_value_usd_per_hour == 0.0
    with pytest.raises(ConfigError, match="job_time_value_usd_per_hour is -1.0, but must be a finite number"):
        ExperimentSpec(job_time_value_usd_per_hour=-1)
    with pytest.raises(ProvisionerConfigError, match=r"heading is \[0.5\], but must count at least the trial itself"):
        RefundStepCost(job_time_value_usd_per_hour=1.0).trial_time_value([0.5])
    with pytest.raises(ConfigError, match="time_value_usd_per_hour is -1.0, but must be a finite number"):
        ExperimentSpec(time_value_usd_per_hour=-1)
    from spottune.compose import make_provisioner

    built = make_provisioner(history({R4A: 0.02}), InstanceCatalog.load(), Pool(), ConstantRevocation(0.0), 0,
                             time_value_usd_per_hour=0.5)
    assert built.objective.time_value_usd_per_hour == 0.5


def test_the_specs_value_of_the_jobs_time_reaches_the_chooser():
    from spottune.compose import build
    from spottune.experiment import ExperimentSpec

    small = dict(predictor="constant", max_steps=20, instance_types=["m3.medium", "r3.large"])
    for given, want in (({}, 0.01), ({"job_time_value_usd_per_hour": 0.05}, 0.05)):
        chooser = build(ExperimentSpec(**small, **given)).orchestrator.chooser
        assert chooser.objective.job_time_value_usd_per_hour == want


def test_speed_model_setting_picks_the_performance_matrix():
    # design R9: the refund objective learns speed ratios across trials by default; "cores" is the spec's matrix,
    # and the paper objective keeps it whatever the setting
    from provisioner import PerformanceMatrix, PooledSpeedMatrix
    from spottune.compose import make_provisioner
    from spottune.errors import ConfigError
    from spottune.experiment import ExperimentSpec

    hist, cat, pred = history({R4A: 0.02, M4: 0.30}), InstanceCatalog.load(), ConstantRevocation(0.1)
    pooled = make_provisioner(hist, cat, Pool(), pred, 0, reference_seconds_per_step=30.0)
    assert type(pooled.performance) is PooledSpeedMatrix and pooled.performance.reference_cores == 2
    assert pooled.performance.seconds_per_step("t", "r4.large") == pytest.approx(30.0)  # the declared reference speed
    cores = make_provisioner(hist, cat, Pool(), pred, 0, reference_seconds_per_step=30.0, speed_model="cores")
    assert type(cores.performance) is PerformanceMatrix and cores.performance.seconds_per_step("t", "r4.large") == 30.0
    assert type(make_provisioner(hist, cat, Pool(), pred, 0, objective="paper").performance) is PerformanceMatrix
    with pytest.raises(ConfigError, match="speed_model is 'linear', but must be one of pooled, cores"):
        make_provisioner(hist, cat, Pool(), pred, 0, speed_model="linear")
    assert ExperimentSpec().speed_model == "pooled" and ExperimentSpec(speed_model="cores").speed_model == "cores"
    with pytest.raises(ConfigError, match="speed_model is 'linear', but must be one of pooled, cores"):
        ExperimentSpec(speed_model="linear")
