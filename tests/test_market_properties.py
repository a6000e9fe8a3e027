"""Replay invariants, property-tested with hypothesis on random step-function price series."""

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from spotmarket.prices import Market, PriceSeries
from spotmarket import Billing, LegacyBidRevocation, MarketReplay, ModernHazardRevocation, RunRequest

M = Market("us-east-1a", "r3.large")
T0 = 1_430_000_000.0
FAST = settings(max_examples=60, deadline=None)


@st.composite
def series(draw):
    n = draw(st.integers(1, 8))
    gaps = draw(st.lists(st.integers(1, 4000), min_size=n, max_size=n))
    prices = draw(st.lists(st.integers(0, 100_000), min_size=n, max_size=n))  # 1e-4 USD/h steps
    times = T0 + np.cumsum([0] + gaps[:-1]).astype(float)
    return PriceSeries(M, times, np.array(prices) / 1e4, end_s=float(times[-1] + gaps[-1] + 8000))


@st.composite
def runs(draw, s, n_max=6):
    n = draw(st.integers(1, n_max))
    out = []
    for _ in range(n):
        start = draw(st.floats(s.start_s, s.end_s, allow_nan=False))
        length = draw(st.one_of(st.floats(0, s.end_s - start), st.sampled_from([0.0, 3599.0, 3600.0, 3601.0])))
        end = min(start + length, s.end_s)
        out.append((start, end, draw(st.sampled_from(["user", "provider"]))))
    return out


@FAST
@given(st.data(), st.sampled_from(["second", "hour"]))
def test_billing_invariants(data, granularity):
    s = data.draw(series())
    billing = Billing(granularity)
    for start, end, who in data.draw(runs(s)):
        c = billing.charge(s, start, end, who)
        user = billing.charge(s, start, end, "user")
        d = end - start
        assert c.charged_usd >= 0 and c.refunded_usd >= 0 and c.billed_s >= 0  # cost >= 0
        # charged + refunded = what the user-ended run pays
        assert math.isclose(c.charged_usd + c.refunded_usd, user.charged_usd, rel_tol=1e-12, abs_tol=1e-12)
        if c.refunded_usd > 0:  # refunds only for provider-ended runs ...
            assert who == "provider"
            if granularity == "second":  # ... shorter than an hour
                assert d < 3600
            else:  # ... for the interrupted partial hour
                assert d % 3600 != 0
        if granularity == "second":
            full = s.cost_usd(start, end)
            if who == "provider" and d < 3600:  # free, and the refund is the full cost
                assert c.charged_usd == 0 and c.refunded_usd == full
            else:
                assert c.charged_usd == full and c.refunded_usd == 0 and c.billed_s == d


@FAST
@given(st.data())
def test_legacy_revocation_is_the_first_price_above_the_max_price(data):
    s = data.draw(series())
    model = LegacyBidRevocation([s])
    t = data.draw(st.floats(s.start_s, s.end_s, allow_nan=False))
    b = data.draw(st.integers(0, 100_000)) / 1e4
    r = model.revocation(M, t, instance_id="i", max_price_usd_per_hour=b)
    assert r.fulfilled == (s.price_at(t) <= b)
    if not r.fulfilled:
        return
    later = (s.times_s > t)
    above = later & (s.prices > b)
    if above.any():
        t_r = s.times_s[np.argmax(above)]
        assert (r.notice_s, r.termination_s) == (t_r, t_r + 120.0)
        assert np.all(s.prices[later & (s.times_s < t_r)] <= b)  # price stays <= b until the crossing
    else:
        assert r.termination_s == math.inf


@FAST
@given(st.data(), st.sampled_from(["legacy", "modern"]), st.sampled_from(["second", "hour"]))
def test_replaying_twice_gives_identical_ledgers(data, mode, granularity):
    s = data.draw(series())
    reqs = []
    for i, (start, end, _) in enumerate(data.draw(runs(s, n_max=8))):
        reqs.append(RunRequest(market=M, instance_id=f"i-{i}", launch_s=start, planned_end_s=end,
                               max_price_usd_per_hour=data.draw(st.integers(0, 100_000)) / 1e4, trial_id=f"t{i % 3}"))
    seed = data.draw(st.integers(0, 2**31))

    def ledger():
        model = LegacyBidRevocation([s]) if mode == "legacy" else ModernHazardRevocation(None, seed, history=[s])
        rows = MarketReplay([s], model, Billing(granularity)).replay(reqs)
        for r in rows:  # who ended it matches the bill
            assert r.refunded_usd == 0 or r.ended_by == "provider"
        return rows

    assert ledger() == ledger()
