"""Step-function semantics of PriceSeries / PriceHistory: exact hand-computed values, then properties."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from revpred.errors import PriceDataError
from spotmarket.prices import Market, PriceHistory, PriceSeries, to_seconds, to_timestamp

T0 = to_seconds("2017-04-26T00:00:00Z")
M = Market("us-east-1a", "r4.large")


@pytest.fixture
def series() -> PriceSeries:
    # 0.10 from T0, 0.30 from T0+600 s, 0.20 from T0+1800 s; history ends at T0+3600 s
    return PriceSeries(M, [T0, T0 + 600, T0 + 1800], [0.10, 0.30, 0.20], end_s=T0 + 3600)


def test_price_at_around_a_change(series: PriceSeries) -> None:
    assert series.price_at(T0) == 0.10
    assert series.price_at(T0 + 599.999) == 0.10  # just before the change
    assert series.price_at(T0 + 600) == 0.30  # at the change: the new price is in force
    assert series.price_at(T0 + 600.001) == 0.30
    assert series.price_at(T0 + 3600) == 0.20  # the end of the history is still known
    np.testing.assert_array_equal(series.price_at([T0, T0 + 1799, T0 + 1800]), [0.10, 0.30, 0.20])


@pytest.mark.parametrize("t_s", [T0 - 0.001, T0 - 86400, T0 + 3600.001, np.nan])
def test_price_outside_the_history_is_an_error(series: PriceSeries, t_s: float) -> None:
    with pytest.raises(PriceDataError, match="is unknown; the history covers"):
        series.price_at(t_s)


def test_cost_and_mean_across_two_changes(series: PriceSeries) -> None:
    # run T0+300 .. T0+2400: 300 s at 0.10, 1200 s at 0.30, 600 s at 0.20 (USD per hour)
    usd_s_per_h = 510.0  # 300 * 0.10 + 1200 * 0.30 + 600 * 0.20, by hand
    assert series.cost_usd(T0 + 300, T0 + 2400) == pytest.approx(usd_s_per_h / 3600, rel=1e-12)
    assert series.mean_price(T0 + 300, T0 + 2400) == pytest.approx(usd_s_per_h / 2100, rel=1e-12)
    assert series.cost_usd(T0 + 600, T0 + 600) == 0.0
    assert series.mean_price(T0 + 700, T0 + 700) == 0.30  # zero width: the price at that instant
    np.testing.assert_allclose(series.cost_usd([T0, T0 + 600], [T0 + 600, T0 + 1800]), [60 / 3600, 360 / 3600])
    with pytest.raises(PriceDataError, match="cannot end before it starts"):
        series.cost_usd(T0 + 10, T0 + 5)
    with pytest.raises(PriceDataError, match="is unknown"):
        series.cost_usd(T0 - 1, T0 + 5)


def test_next_above(series: PriceSeries) -> None:
    assert series.next_above(T0, 0.25) == T0 + 600
    assert series.next_above(T0, 0.15) == T0 + 600
    assert series.next_above(T0 + 600, 0.25) == np.inf  # strictly after t; 0.20 at T0+1800 is not above
    assert series.next_above(T0 + 600, 0.15) == T0 + 1800
    assert series.next_above(T0, 0.30) == np.inf  # "exceeds" is strict
    np.testing.assert_array_equal(series.next_above([T0, T0, T0 + 1000], [0.05, 0.5, 0.1]),
                                  [T0 + 600, np.inf, T0 + 1800])


def test_changes_between_counts_raw_changes() -> None:
    s = PriceSeries(M, [0, 10, 20, 30], [1.0, 1.0, 2.0, 1.0], end_s=40)
    assert s.n_changes == 2  # the repeated 1.0 at t=10 is a record but not a change
    np.testing.assert_array_equal(s.changes_between([0, 0, 10, 20], [40, 19, 20, 20]), [2, 0, 1, 0])


def test_minute_grid_ffill_vs_linear() -> None:
    s = PriceSeries(M, [T0, T0 + 90, T0 + 210], [1.0, 2.0, 4.0], end_s=T0 + 300)
    ffill = s.minute_grid()
    linear = s.minute_grid(method="linear")
    assert list(ffill.index) == [to_timestamp(T0 + 60 * k) for k in range(6)]
    assert str(ffill.index.tz) == "UTC"
    np.testing.assert_allclose(ffill.to_numpy(), [1, 1, 2, 2, 4, 4])
    np.testing.assert_allclose(linear.to_numpy(), [1, 1 + 60 / 90, 2.5, 3.5, 4, 4])
    with pytest.raises(PriceDataError, match="grid method 'cubic' is unknown"):
        s.minute_grid(method="cubic")


def _table(rows: list[tuple[str, str, str, float]]) -> pd.DataFrame:
    return pd.DataFrame({
        "timestamp": pd.to_datetime([r[0] for r in rows], utc=True),
        "region": [r[1][:-1] for r in rows],
        "availability_zone": [r[1] for r in rows],
        "instance_type": [r[2] for r in rows],
        "product_description": "Linux/UNIX",
        "price": [r[3] for r in rows],
    })


def test_history_grid_marks_unknown_prices_as_nan() -> None:
    h = PriceHistory(_table([
        ("2017-04-26 00:00:00", "us-east-1a", "r4.large", 0.03),
        ("2017-04-26 00:02:30", "us-east-1b", "r4.large", 0.05),
        ("2017-04-26 00:04:00", "us-east-1a", "r4.large", 0.04),
    ]))
    assert len(h) == 2 and h.end_s == to_seconds("2017-04-26T00:04:00Z")
    grid = h.minute_grid()
    assert list(grid.columns) == ["us-east-1a/r4.large/Linux/UNIX", "us-east-1b/r4.large/Linux/UNIX"]
    np.testing.assert_allclose(grid.iloc[:, 0], [0.03, 0.03, 0.03, 0.03, 0.04])
    np.testing.assert_allclose(grid.iloc[:, 1], [np.nan, np.nan, np.nan, 0.05, 0.05])
    assert h.price_at("us-east-1b/r4.large", to_seconds("2017-04-26T00:03:00Z")) == 0.05
    with pytest.raises(PriceDataError, match="not in the price data"):
        h["us-east-1c/r4.large"]
    d = h.describe()
    assert list(d["records"]) == [2, 1] and list(d["changes"]) == [1, 0]


def test_history_rejects_two_prices_at_one_instant() -> None:
    with pytest.raises(PriceDataError, match="two different prices"):
        PriceHistory(_table([("2017-04-26 00:00:00", "us-east-1a", "r4.large", 0.03),
                             ("2017-04-26 00:00:00", "us-east-1a", "r4.large", 0.04)]))


# -- properties ---------------------------------------------------------------------------------------------
@st.composite
def series_and_queries(draw):
    n = draw(st.integers(1, 40))
    gaps = draw(st.lists(st.integers(1, 5000), min_size=n, max_size=n))
    times = T0 + np.cumsum(gaps).astype(float)
    prices = np.array(draw(st.lists(st.floats(0, 20, allow_nan=False, allow_subnormal=False), min_size=n, max_size=n)))
    end = times[-1] + draw(st.integers(0, 5000))
    q = draw(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1), st.floats(0, 21)), min_size=1, max_size=20))
    a = np.array([x for x, _, _ in q])
    b = np.array([y for _, y, _ in q])
    lo = times[0] + np.minimum(a, b) * (end - times[0])
    hi = times[0] + np.maximum(a, b) * (end - times[0])
    return PriceSeries(M, times, prices, end_s=end), lo, hi, np.array([z for _, _, z in q])


@settings(max_examples=100, deadline=None)
@given(series_and_queries())
def test_cost_nonnegative_and_mean_within_range(case) -> None:
    s, lo, hi, _ = case
    cost = s.cost_usd(lo, hi)
    assert np.all(cost >= 0)
    mean = s.mean_price(lo, hi)
    for m, a, b in zip(mean, lo, hi):
        i0 = np.searchsorted(s.times_s, a, side="right") - 1
        i1 = np.searchsorted(s.times_s, b, side="right") - 1
        in_force = s.prices[i0:i1 + 1]
        assert in_force.min() - 1e-9 <= m <= in_force.max() + 1e-9
    np.testing.assert_allclose(cost, mean * (hi - lo) / 3600.0, rtol=1e-9, atol=1e-12)


@settings(max_examples=100, deadline=None)
@given(series_and_queries())
def test_next_above_and_price_at_match_brute_force(case) -> None:
    s, lo, _, b = case
    got = s.next_above(lo, b)
    for t, bid, g in zip(lo, b, got):
        later = [ti for ti, p in zip(s.times_s, s.prices) if ti > t and p > bid]
        assert g == (later[0] if later else np.inf)
    expected = [s.prices[[i for i, ti in enumerate(s.times_s) if ti <= t][-1]] for t in lo]
    np.testing.assert_array_equal(s.price_at(lo), expected)


@settings(max_examples=60, deadline=None)
@given(series_and_queries())
def test_minute_grids_match_the_step_function(case) -> None:
    s, lo, _, _ = case
    grid = s.minute_grid(start_s=float(lo[0]))
    t = grid.index.asi8 / 1e9
    np.testing.assert_array_equal(grid.to_numpy(), s.price_at(t) if t.size else [])
    linear = s.minute_grid(start_s=float(lo[0]), method="linear").to_numpy()
    assert np.all(linear >= s.prices.min() - 1e-12) and np.all(linear <= s.prices.max() + 1e-12)


@pytest.mark.parametrize("bad", ["garbage", "nan", None, float("nan"), float("inf")])
def test_to_seconds_rejects_bad_times_with_price_data_error(bad):
    with pytest.raises(PriceDataError):
        to_seconds(bad)


def test_to_seconds_reads_a_naive_time_as_utc():
    assert to_seconds("2017-04-26T00:00") == T0


def _two_markets(times_a, times_b) -> PriceHistory:
    rows = [(t, "us-east-1a") for t in times_a] + [(t, "us-east-1b") for t in times_b]
    return PriceHistory(pd.DataFrame({
        "timestamp": pd.to_datetime([T0 + t for t, _ in rows], unit="s", utc=True),
        "availability_zone": [z for _, z in rows], "instance_type": "m3.medium",
        "product_description": "Linux/UNIX", "price": 0.01 + 0.001 * np.arange(len(rows))}))


def test_collection_gaps_are_silences_of_every_market() -> None:
    # a: records at 0, 600, 9000; b: 300, 4000, 9300. Merged: 0, 300, 600, 4000, 9000, 9300 (the threshold alone)
    hist = _two_markets([0, 600, 9000], [300, 4000, 9300])
    assert hist.collection_gaps(3000.0, median_ratio=0) == [(T0 + 600, T0 + 4000), (T0 + 4000, T0 + 9000)]
    assert hist.collection_gaps(4000.0, median_ratio=0) == [(T0 + 4000, T0 + 9000)]  # 3400 s is not longer than 4000 s
    assert hist.collection_gaps(5000.0, median_ratio=0) == []  # exactly 5000 s is not longer than 5000 s
    # one market alone is silent longer than both together
    assert hist.collection_gaps(3000.0, [Market("us-east-1a", "m3.medium")], median_ratio=0) == [(T0 + 600, T0 + 9000)]


def test_collection_gaps_must_also_be_long_against_the_median_interval() -> None:
    # both markets record every 60 s (merged: every 30 s) for 10 h, then both are silent for 3 h, then go on for 1 h
    a = [*range(0, 36_000, 60), *range(46_800, 50_400, 60)]
    b = [t + 30 for t in a]
    hist = _two_markets(a, b)
    silence = (T0 + 35_970, T0 + 46_800)
    assert hist.collection_gaps() == [silence]  # 3.0 h > max(2 h, 300 x 30 s = 2.5 h)
    assert hist.collection_gaps(median_ratio=400) == []  # 400 x 30 s = 3.3 h
    assert hist.collection_gaps(3600.0, median_ratio=0) == [silence]
    # market a alone: a median of 60 s, so the bar is 300 x 60 s = 5 h and its 3 h silence is ordinary
    assert hist.collection_gaps(markets="us-east-1a/m3.medium") == []


def test_collection_gaps_count_from_when_every_market_has_a_price() -> None:
    # b starts at 5000: a's silence 600 .. 9000 began before b had a price; from 5000 on, 5000 .. 9000 is silent
    hist = _two_markets([0, 600, 9000], [5000, 9300])
    assert hist.collection_gaps(3000.0, median_ratio=0) == [(T0 + 5000, T0 + 9000)]
    assert hist.collection_gaps(3000.0, "us-east-1a/m3.medium", median_ratio=0) == [(T0 + 600, T0 + 9000)]  # by name
    assert hist.collection_gaps(3000.0, Market("us-east-1b", "m3.medium"), median_ratio=0) == [(T0 + 5000, T0 + 9300)]


@pytest.mark.parametrize("bad", [0.0, -1.0, np.nan, np.inf, None, "soon"])
def test_collection_gaps_reject_a_bad_length(bad) -> None:
    with pytest.raises(PriceDataError, match="min_s"):
        _two_markets([0], [1]).collection_gaps(bad)


@pytest.mark.parametrize("bad", [-1.0, np.nan, None, "many"])
def test_collection_gaps_reject_a_negative_ratio(bad) -> None:
    with pytest.raises(PriceDataError, match="median_ratio"):
        _two_markets([0], [1]).collection_gaps(median_ratio=bad)


def test_collection_gaps_reject_no_markets_and_unknown_ones() -> None:
    hist = _two_markets([0], [1])
    with pytest.raises(PriceDataError, match="no markets"):
        hist.collection_gaps(3600.0, markets=[])
    with pytest.raises(PriceDataError, match="not in the price data"):
        hist.collection_gaps(3600.0, markets=["us-east-1c/m3.medium"])


def test_collection_gaps_example_runs() -> None:
    import doctest

    import spotmarket.prices._history as module

    (test,) = [t for t in doctest.DocTestFinder().find(module.PriceHistory.collection_gaps, globs=vars(module))
               if t.examples]
    runner = doctest.DocTestRunner()
    runner.run(test)
    assert runner.summarize(verbose=False) == (0, len(test.examples))  # (failed, attempted)


def test_the_2015_trace_has_two_long_collection_gaps() -> None:
    from spotmarket.prices import load_history

    hist = load_history("us-east-1_2015.csv.gz")
    assert hist.collection_gaps() == hist.collection_gaps(10 * 3600.0)  # the default bar: max(2 h, 300 x 67 s)
    gaps = hist.collection_gaps(10 * 3600.0)
    assert [(to_timestamp(a).isoformat(), to_timestamp(b).isoformat()) for a, b in gaps] == [
        ("2015-04-10T03:45:34+00:00", "2015-04-10T16:52:55+00:00"),
        ("2015-06-09T15:44:23+00:00", "2015-06-12T00:09:14+00:00")]
