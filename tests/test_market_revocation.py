"""Revocation models: the legacy 2017 rule (exact timing) and the modern hazard model (seeded, correlated)."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest

from spotmarket.prices import Market, PriceSeries
from spotmarket.errors import MarketError
from spotmarket import (
    BLOCK_S,
    Cause,
    HazardCalibration,
    LegacyBidRevocation,
    ModernHazardRevocation,
    RevocationModel,
    WeibullLifetime,
)

T0 = 1_430_000_000.0
M = Market("us-east-1a", "r3.large")
#                    t:  0     100   200   300   400
SERIES = PriceSeries(M, [T0 + x for x in (0, 100, 200, 300, 400)], [0.1, 0.3, 0.15, 0.25, 0.5], end_s=T0 + 1000)


def legacy(**kw):
    return LegacyBidRevocation([SERIES], **kw)


def rev(model, t, b, iid="i-1"):
    return model.revocation(M, T0 + t, instance_id=iid, max_price_usd_per_hour=b)


# -- legacy: decision M1, notice at the crossing t_r, termination at t_r + 120 s -----------------------
@pytest.mark.parametrize(("t", "b", "cause", "notice", "term"), [
    (50, 0.2, Cause.PRICE, 100, 220),     # first record above 0.2 after 50 is at 100
    (200, 0.2, Cause.PRICE, 300, 420),    # launched in a dip; 0.25 > 0.2 at 300
    (50, 0.3, Cause.PRICE, 400, 520),     # 0.3 is not > 0.3: the crossing is the 0.5 at 400
    (100, 0.3, Cause.PRICE, 400, 520),    # launch exactly at a record whose price equals b: fulfilled
    (0, 0.5, Cause.NONE, math.inf, math.inf),  # never above 0.5 within the history
])
def test_legacy_notice_and_termination_times(t, b, cause, notice, term):
    r = rev(legacy(), t, b)
    assert r.fulfilled and r.cause == cause
    assert (r.notice_s - T0, r.termination_s - T0) == (notice, term)
    assert r.revoked == math.isfinite(term)


@pytest.mark.parametrize(("t", "b"), [(150, 0.2), (100, 0.25), (450, 0.4)])
def test_legacy_launch_refused_when_price_above_max_price(t, b):
    r = rev(legacy(), t, b)
    assert not r.fulfilled and r.cause == Cause.REFUSED_PRICE
    assert math.isnan(r.notice_s) and math.isnan(r.termination_s)
    with pytest.raises(MarketError, match="refused"):
        legacy().termination_time(M, T0 + t, b, "i-1")


def test_legacy_alternative_anchor_puts_termination_at_the_crossing():
    model = legacy(crossing_is="termination")
    r = rev(model, 0, 0.4)
    assert (r.notice_s - T0, r.termination_s - T0) == (280, 400)
    r = rev(model, 50, 0.2)  # crossing 50 s after launch: the notice cannot precede the launch
    assert (r.notice_s - T0, r.termination_s - T0) == (50, 100)


def test_legacy_zero_notice_lead():
    r = rev(legacy(notice_lead_s=0), 50, 0.2)
    assert r.notice_s == r.termination_s == T0 + 100


def test_legacy_batch_equals_scalar_calls_and_termination_time():
    model = legacy()
    t = T0 + np.array([0, 50, 99.5, 100, 150, 200, 299, 300, 399, 400, 999])
    b = np.array([0.2, 0.2, 0.3, 0.3, 0.2, 0.2, 0.1, 0.6, 0.26, 0.5, 0.5])
    batch = model.batch(M, t, b)
    for i in range(t.size):
        one = model.revocation(M, t[i], instance_id="x", max_price_usd_per_hour=b[i])
        assert batch.fulfilled[i] == one.fulfilled and batch.cause[i] == one.cause
        np.testing.assert_equal([batch.notice_s[i], batch.termination_s[i]], [one.notice_s, one.termination_s])
        if one.fulfilled:
            assert model.termination_time(M, t[i], b[i], "x") == one.termination_s


def test_legacy_errors():
    with pytest.raises(MarketError, match="needs a max price"):
        legacy().revocation(M, T0, instance_id="i")
    with pytest.raises(MarketError, match="not in the price data"):
        legacy().revocation(Market("us-east-1b", "r3.large"), T0, instance_id="i", max_price_usd_per_hour=1.0)
    with pytest.raises(MarketError, match="unknown"):
        rev(legacy(), -10, 1.0)
    with pytest.raises(MarketError, match="crossing_is"):
        legacy(crossing_is="both")
    with pytest.raises(MarketError, match="notice_lead_s"):
        legacy(notice_lead_s=-1)


def test_models_share_one_small_contract():
    assert issubclass(LegacyBidRevocation, RevocationModel)
    assert issubclass(ModernHazardRevocation, RevocationModel)
    assert RevocationModel.__abstractmethods__ == frozenset({"revocation"})


# -- modern: capacity-driven, seeded, correlated ----------------------------------------------------------
P3 = Market("us-east-1c", "p3.2xlarge")
T23 = 1_682_000_000.0  # 2023-04-20


def launches(n, seed=0):
    rng = np.random.default_rng(seed)
    return T23 + np.sort(rng.uniform(0, 30 * 86400, n))


def answers(model, ts):
    return [model.revocation(P3, t, instance_id=f"i-{i}") for i, t in enumerate(ts)]


def test_modern_same_seed_same_revocations_in_any_query_order():
    ts = launches(60)
    a = answers(ModernHazardRevocation(None, 11), ts)
    model = ModernHazardRevocation(None, 11)
    b = {i: model.revocation(P3, ts[i], instance_id=f"i-{i}") for i in reversed(range(ts.size))}
    assert a == [b[i] for i in range(ts.size)]
    c = answers(ModernHazardRevocation(None, 12), ts)
    assert [r.termination_s for r in a] != [r.termination_s for r in c]


@pytest.mark.process
def test_modern_is_stable_across_processes():
    """Seeds are hashed with BLAKE2b, not hash(): a new process with another PYTHONHASHSEED agrees."""
    code = ("from spotmarket.prices import Market; from spotmarket import ModernHazardRevocation as M;"
            "r = M(None, 5).revocation(Market('us-east-1c', 'p3.2xlarge'), 1682000000.0, instance_id='i-9');"
            "print(repr(r.termination_s), r.cause)")
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    here = ModernHazardRevocation(None, 5).revocation(P3, T23, instance_id="i-9")
    assert out.split() == [repr(here.termination_s), str(here.cause)]


def fully_correlated(outages=False):
    cal = HazardCalibration.default()
    return ModernHazardRevocation(HazardCalibration(lifetimes=cal.lifetimes, correlated_share=1.0,
                                                    outage_log_mean=cal.outage_log_mean, outage_log_sd=0.0),
                                  3, outages=outages)


def test_modern_market_event_terminates_every_running_instance_at_once():
    model = fully_correlated()
    first = model.market_events(P3, T23, T23 + BLOCK_S)[0]
    a = model.revocation(P3, first - 500, instance_id="a")
    b = model.revocation(P3, first - 20, instance_id="b")
    assert a.termination_s == b.termination_s == first
    assert a.cause == b.cause == Cause.CAPACITY_EVENT
    assert (a.notice_s, b.notice_s) == (first - 120, first - 20)  # notice never before the launch
    other = model.revocation(Market("us-east-1f", "p3.2xlarge"), first - 20, instance_id="b")
    assert other.termination_s != first  # another market has its own events


def test_modern_default_calibration_mostly_co_terminates_pairs():
    ts = launches(300, seed=1)
    for correlated, lo, hi in ((True, 0.6, 1.0), (False, 0.0, 0.01)):
        model = ModernHazardRevocation(None, 4, outages=False, correlated=correlated)
        same = [model.revocation(P3, t, instance_id="x").termination_s
                == model.revocation(P3, t, instance_id="y").termination_s for t in ts]
        assert lo <= np.mean(same) <= hi


def test_modern_outage_refuses_launches_until_capacity_returns():
    model = fully_correlated(outages=True)
    outage = math.exp(model.calibration.outage_log_mean)  # sd 0: every outage lasts exactly this
    first = model.market_events(P3, T23, T23 + BLOCK_S)[0]
    r = model.revocation(P3, first + 1, instance_id="late")
    assert not r.fulfilled and r.cause == Cause.REFUSED_CAPACITY
    assert not model.has_capacity(P3, first + outage - 1)
    later = model.market_events(P3, first + 1, first + outage + 1)
    if later.size == 0:  # no further event inside the outage: capacity is back right after it
        assert model.has_capacity(P3, first + outage + 1)


def test_modern_no_launch_into_a_pool_that_is_being_reclaimed():
    """Within the notice lead before a market event, EC2 is reclaiming the pool: launches are refused."""
    model = fully_correlated(outages=True)
    events = model.market_events(P3, T23, T23 + BLOCK_S)
    e = next(x for x in events if model.has_capacity(P3, x - 121))
    ok = model.revocation(P3, e - 121, instance_id="early")
    assert (ok.cause, ok.notice_s, ok.termination_s) == (Cause.CAPACITY_EVENT, e - 120, e)
    late = model.revocation(P3, e - 60, instance_id="late")
    assert late.cause == Cause.REFUSED_CAPACITY
    assert ModernHazardRevocation(model.calibration, 3, outages=False).revocation(
        P3, e - 60, instance_id="late").termination_s == e  # no capacity refusals without outages


def test_modern_notice_is_120_s_before_termination_and_never_before_launch():
    model = ModernHazardRevocation(None, 8)
    for r in answers(model, launches(200, seed=2)):
        if r.fulfilled:
            assert r.launch_s < r.termination_s < math.inf
            assert r.notice_s == max(r.launch_s, r.termination_s - 120.0)
    zero = ModernHazardRevocation(None, 8, notice_lead_s=0)
    assert all(r.notice_s == r.termination_s for r in answers(zero, launches(50)) if r.fulfilled)


def test_modern_max_price_also_revokes():
    quiet = HazardCalibration(lifetimes={("*", "*"): WeibullLifetime(shape=0.6, scale_s=1e12)},
                              correlated_share=0.0, outage_log_mean=0.0, outage_log_sd=0.0)
    model = ModernHazardRevocation(quiet, 1, history=[SERIES])
    r = model.revocation(M, T0 + 50, instance_id="i", max_price_usd_per_hour=0.2)
    assert (r.cause, r.notice_s - T0, r.termination_s - T0) == (Cause.PRICE, 100, 220)
    r = model.revocation(M, T0 + 150, instance_id="i", max_price_usd_per_hour=0.2)
    assert r.cause == Cause.REFUSED_PRICE
    r = model.revocation(M, T0 + 50, instance_id="i")  # no max price: the price does not matter
    assert r.cause == Cause.CAPACITY and r.termination_s > T0 + 1e6
    with pytest.raises(MarketError, match="needs price history"):
        ModernHazardRevocation(quiet, 1).revocation(M, T0, instance_id="i", max_price_usd_per_hour=0.2)


def test_modern_first_hour_revocation_rate_matches_the_traces():
    """Without outages, P(revoked within 1 h) for launches at arbitrary times equals the observed KM value."""
    model = ModernHazardRevocation(None, 21, outages=False)
    ts = T23 + np.random.default_rng(5).uniform(0, 300 * 86400, 3000)
    life = np.array([r.termination_s - r.launch_s for r in answers(model, ts)])
    target = model.calibration.lifetime(P3).p_le_1h_target  # 0.707 (README: KM P(<= 1 h), us-east-1c)
    assert np.mean(life <= 3600) == pytest.approx(target, abs=0.04)


def test_modern_rejects_bad_seed():
    with pytest.raises(MarketError, match="seed"):
        ModernHazardRevocation(None, -1)
