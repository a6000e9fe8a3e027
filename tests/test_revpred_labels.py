"""Algorithm 2, labels at the one-hour boundary, max rise, sample times, class weights (the paper's RevPred)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from revpred.errors import PriceDataError, RevPredError
from revpred.labels import (alg2_max_prices, class_weights, max_rise, price_variation, random_max_prices,
                            revocation_labels, sample_times, trimmed_mean)
from spotmarket.prices import Market, PriceSeries, to_seconds

T = to_seconds("2015-05-04T12:00Z")
MIN = 60.0
M = Market("us-east-1a", "r3.large")


def test_trimmed_mean_exact():
    assert trimmed_mean(np.arange(1, 11)) == pytest.approx(5.5)  # drop 1, 2 and 9, 10
    assert trimmed_mean([5.0, 1.0, 3.0, 100.0, 2.0]) == pytest.approx(np.mean([2.0, 3.0, 5.0]))  # c = 1
    assert trimmed_mean([4.0, 2.0]) == pytest.approx(3.0)  # c = 0
    assert np.isnan(trimmed_mean([]))


def known_hour() -> PriceSeries:
    # price 0.10 in force at t - 60 min, then six change events in the hour before t
    recs = [(-200, 0.10), (-50, 0.11), (-40, 0.13), (-30, 0.12), (-20, 0.16), (-10, 0.15), (-5, 0.25), (120, 0.30)]
    return PriceSeries(M, [T + m * MIN for m, _ in recs], [p for _, p in recs], end_s=T + 300 * MIN)


def test_alg2_on_raw_change_events():
    s = known_hour()
    # |diffs| = .01 .02 .01 .04 .01 .10; n = 6, c = 1: drop one .01 and the .10 -> mean(.01 .01 .02 .04) = .02
    assert price_variation(s, [T])[0] == pytest.approx(0.02)
    assert alg2_max_prices(s, [T])[0] == pytest.approx(0.25 + 0.02)


def test_alg2_literal_grid_is_degenerate_and_floored():
    s = known_hour()
    # 60 grid differences, 54 of them 0; dropping 12 from each end leaves only zeros
    assert price_variation(s, [T], variations="grid")[0] == 0.0
    assert alg2_max_prices(s, [T], variations="grid")[0] == pytest.approx(0.25 + 1e-4)


def test_alg2_literal_grid_trimmed_mean_exact():
    rng = np.random.default_rng(3)
    steps = rng.uniform(-0.01, 0.01, 60)
    prices = 0.5 + np.concatenate([[0.0], np.cumsum(steps)])  # one record per minute, t - 60 .. t
    times = T + MIN * np.arange(-60, 1)
    s = PriceSeries(M, np.concatenate([[T - 200 * MIN], times]), np.concatenate([[0.5], prices]), end_s=T + 7200)
    expected = np.sort(np.abs(steps))[12:48].mean()
    assert price_variation(s, [T], variations="grid")[0] == pytest.approx(expected)
    assert alg2_max_prices(s, [T], variations="grid")[0] == pytest.approx(prices[-1] + expected)


def test_alg2_hour_without_changes_uses_the_tick_floor():
    s = PriceSeries(M, [T - 300 * MIN], [0.2], end_s=T + 7200)
    assert price_variation(s, [T])[0] == 0.0
    assert alg2_max_prices(s, [T])[0] == pytest.approx(0.2001)
    with pytest.raises(RevPredError):
        price_variation(s, [T], variations="signed")


@pytest.mark.parametrize(("offset_s", "expected"), [(3600.0, 1), (3601.0, 0), (3660.0, 0), (1.0, 1)])
def test_label_boundary(offset_s, expected):
    s = PriceSeries(M, [T - 200 * MIN, T + offset_s], [0.10, 0.30], end_s=T + 4 * 3600)
    assert revocation_labels(s, [T], [0.20])[0] == expected
    # the 60th minute counts, the 61st does not
    assert revocation_labels(s, [T], [0.30])[0] == 0  # equal to b is not above b


def test_label_minute_60_vs_61_on_whole_minutes():
    s60 = PriceSeries(M, [T - 200 * MIN, T + 60 * MIN], [0.10, 0.30], end_s=T + 4 * 3600)
    s61 = PriceSeries(M, [T - 200 * MIN, T + 61 * MIN], [0.10, 0.30], end_s=T + 4 * 3600)
    assert revocation_labels(s60, [T], [0.2])[0] == 1
    assert revocation_labels(s61, [T], [0.2])[0] == 0
    assert revocation_labels(s61, [T + MIN], [0.2])[0] == 1


def test_label_needs_the_whole_horizon():
    s = PriceSeries(M, [T - 200 * MIN], [0.1], end_s=T + 1800)
    with pytest.raises(PriceDataError, match="after the end"):
        revocation_labels(s, [T], [0.2])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0.01, 1.0), min_size=3, max_size=30), st.lists(st.floats(0.0, 0.5), min_size=1, max_size=8),
       st.integers(0, 10_000))
def test_max_rise_agrees_with_labels(prices, deltas, seed):
    rng = np.random.default_rng(seed)
    gaps = rng.uniform(30, 1200, len(prices))
    times = T - 3 * 3600 + np.cumsum(gaps)
    s = PriceSeries(M, times, prices, end_s=times[-1] + 7200)
    t = np.linspace(times[0], times[-1], 7)
    rise = max_rise(s, t)
    for d in deltas:
        b = np.asarray(s.price_at(t)) + d
        np.testing.assert_array_equal(revocation_labels(s, t, b), (rise > d).astype(int))


def test_random_max_prices_are_seeded_and_in_range():
    s = known_hour()
    t = np.array([T, T + 60])
    a = random_max_prices(s, t, np.random.default_rng(1))
    b = random_max_prices(s, t, np.random.default_rng(1))
    np.testing.assert_array_equal(a, b)
    delta = a - s.price_at(t)
    assert np.all((delta >= 1e-5) & (delta <= 0.2))


def test_sample_times_keep_labels_inside_the_window():
    s = PriceSeries(M, [T - 86400], [0.1], end_s=T + 86400)
    t = sample_times(s, T, T + 6 * 3600, stride_min=5)
    assert t[0] == T and t[-1] == T + 5 * 3600 and np.all(np.diff(t) == 300)
    early = sample_times(s, T - 86400, T, stride_min=1)
    assert early[0] == T - 86400 + 118 * 60  # needs 118 minutes of history
    with pytest.raises(RevPredError):
        sample_times(s, T, T + 7200, stride_min=0)


def test_class_weights_are_paper_ratio_with_mean_one():
    y = np.array([1] * 20 + [0] * 80)
    w_neg, w_pos = class_weights(y)
    assert w_pos / w_neg == pytest.approx(0.8 / 0.2)  # w_pos = r_n, w_neg = r_p
    assert (20 * w_pos + 80 * w_neg) / 100 == pytest.approx(1.0)
    assert class_weights(np.zeros(5)) == (1.0, 1.0)
