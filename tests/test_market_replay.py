"""MarketReplay: the vectorised queries (mean price, next revocation, run cost) and whole-run replays."""

from pathlib import Path

import numpy as np
import pytest

from spotmarket.prices import Market, PriceHistory, PriceSeries
from spottune.errors import MarketError
from spotmarket import (
    Billing,
    Cause,
    LegacyBidRevocation,
    MarketReplay,
    ModernHazardRevocation,
    RunRequest,
)

T0 = 1_430_000_000.0
A = Market("us-east-1a", "r3.large")
B = Market("us-east-1b", "r3.large")
SA = PriceSeries(A, [T0, T0 + 1000, T0 + 2500], [0.36, 0.72, 0.18], end_s=T0 + 100_000)
SB = PriceSeries(B, [T0, T0 + 5000], [0.1, 0.4], end_s=T0 + 100_000)
PRICE_2015 = Path(__file__).resolve().parents[1] / "data" / "spot_prices" / "us-east-1_2015.csv.gz"


def replay(**kw):
    return MarketReplay([SA, SB], LegacyBidRevocation([SA, SB]), **kw)


def test_mean_price_last_hour_by_hand_and_over_several_markets():
    r = replay()
    # [T0+2600-3600 .. T0+2600] is before the history: unknown
    with pytest.raises(MarketError, match="unknown"):
        r.mean_price_last_hour(A, T0 + 2600)
    # [T0+400, T0+4000]: 600 s at 0.36, 1500 s at 0.72, 1500 s at 0.18 -> mean 0.435
    assert r.mean_price_last_hour(A, T0 + 4000) == pytest.approx([0.435], abs=1e-12)
    got = r.mean_price_last_hour([A, B, A], [T0 + 4000, T0 + 6000, T0 + 9000])
    np.testing.assert_allclose(got, [0.435, (2600 * 0.1 + 1000 * 0.4) / 3600, 0.18], atol=1e-12)


def test_next_revocation_over_several_markets_keeps_input_order():
    r = replay()
    got = r.next_revocation([B, A, B, A], [T0, T0 + 10, T0 + 4000, T0 + 2000], [0.2, 0.5, 0.2, 0.5])
    np.testing.assert_array_equal(got.termination_s, [T0 + 5120, T0 + 1120, T0 + 5120, np.nan])
    np.testing.assert_array_equal(got.cause, ["price", "price", "price", "refused-price"])


def test_run_cost_over_several_markets():
    r = replay()
    c = r.run_cost([A, B], [T0, T0], [T0 + 600, T0 + 600], ["user", "provider"])
    np.testing.assert_allclose(c.charged_usd, [0.06, 0.0])
    np.testing.assert_allclose(c.refunded_usd, [0.0, 600 * 0.1 / 3600])


def test_run_ends_by_provider_or_by_user():
    r = replay()
    out = r.run(RunRequest(market=A, instance_id="i-1", launch_s=T0, planned_end_s=T0 + 3600,
                           max_price_usd_per_hour=0.5, trial_id="t1"))
    assert out.revocation.termination_s == T0 + 1120  # price 0.72 > 0.5 at T0+1000, +120 s notice
    assert (out.row.ended_by, out.row.reason, out.row.end_s, out.row.charged_usd) == ("provider", "price", T0 + 1120, 0.0)
    assert out.row.refunded_usd == pytest.approx(0.1 + 120 * 2e-4)  # the 120 s after the notice at 0.72
    out = r.run(RunRequest(market=A, instance_id="i-2", launch_s=T0, planned_end_s=T0 + 600,
                           max_price_usd_per_hour=0.5, user_reason="finished"))
    assert (out.row.ended_by, out.row.reason, out.row.charged_usd) == ("user", "finished", pytest.approx(0.06))
    refused = r.run(RunRequest(market=A, instance_id="i-3", launch_s=T0 + 1500, planned_end_s=T0 + 2000,
                               max_price_usd_per_hour=0.5))
    assert refused.row is None and refused.revocation.cause == Cause.REFUSED_PRICE
    with pytest.raises(MarketError, match="before launch"):
        r.run(RunRequest(market=A, instance_id="i-4", launch_s=T0 + 10, planned_end_s=T0))


def test_replay_is_repeatable_for_both_models():
    reqs = [RunRequest(market=[A, B][i % 2], instance_id=f"i-{i}", launch_s=T0 + 977.0 * i,
                       planned_end_s=T0 + 977.0 * i + 3600, max_price_usd_per_hour=0.3 + 0.1 * (i % 5))
            for i in range(40)]
    for make in (lambda: LegacyBidRevocation([SA, SB]), lambda: ModernHazardRevocation(None, 9, history=[SA, SB])):
        first = MarketReplay([SA, SB], make(), Billing("hour")).replay(reqs)
        again = MarketReplay([SA, SB], make(), Billing("hour")).replay(reqs)
        assert first == again and len(first) > 0


@pytest.fixture(scope="module")
def history_2015():
    from spotmarket.prices import read_prices
    return PriceHistory(read_prices(PRICE_2015))


def naive_next_above(series, t, b):
    i = int(np.searchsorted(series.times_s, t, side="right"))
    while i < len(series) and series.prices[i] <= b:
        i += 1
    return series.times_s[i] if i < len(series) else np.inf


def test_real_2015_trace_vectorised_queries_match_naive_loops(history_2015):
    h = history_2015
    rng = np.random.default_rng(0)
    markets = h.markets
    n = 400
    which = rng.integers(0, len(markets), n)
    ms = [markets[i] for i in which]
    t = np.array([rng.uniform(h[m].start_s + 3600, h.end_s - 7200) for m in ms]).round()
    b = np.array([h[m].price_at(ti) for m, ti in zip(ms, t)]) + rng.uniform(1e-5, 0.2, n)  # decision D1
    r = MarketReplay(h, LegacyBidRevocation(h))
    got = r.next_revocation(ms, t, b)
    want = np.array([naive_next_above(h[m], ti, bi) for m, ti, bi in zip(ms, t, b)])
    np.testing.assert_array_equal(got.notice_s, want)
    assert got.fulfilled.all()
    legacy = LegacyBidRevocation(h)  # the scalar path (chunked scan) agrees with the vectorised one
    for i in range(60):
        one = legacy.revocation(ms[i], t[i], instance_id="x", max_price_usd_per_hour=b[i])
        assert (one.notice_s, one.termination_s, str(one.cause)) == (got.notice_s[i], got.termination_s[i], got.cause[i])
    # run cost: exact integral vs a per-second sum, on a few runs
    for m, ti in list(zip(ms, t))[:5]:
        d = 1800.0
        per_second = sum(h[m].price_at(ti + k) for k in range(int(d))) / 3600
        assert r.run_cost(m, ti, ti + d).charged_usd[0] == pytest.approx(per_second, rel=1e-12)
