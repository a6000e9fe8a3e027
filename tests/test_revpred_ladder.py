"""The provisioner's ladder queries: exact legacy labels on hand-made price series, and features without leakage."""

from __future__ import annotations

import numpy as np
import pytest

from revpred.errors import RevPredError
from revpred.ladder import ON_DEMAND, check_ladder, ladder_queries
from revpred.ladder_features import FEATURES, LadderFeatures
from spotmarket.prices import Market, PriceSeries

M = Market("us-east-1a", "r3.large")
LADDER = (0.0001, 0.001, 0.01, 0.1)


def series(times, prices, end):
    return {M: PriceSeries(M, times, prices, end_s=end)}


def labels(frame, t):
    rows = frame[frame["t"] == t].sort_values("rung")
    return dict(zip(rows["rung"], rows["y"]))


def test_labels_match_hand_computed_crossings():
    # 0.1 from 0; 0.1005 at 10000 s; 0.13 at 12000 s; 0.1 at 20000 s; history ends at 30000 s
    hist = series([0.0, 10000.0, 12000.0, 20000.0], [0.1, 0.1005, 0.13, 0.1], 30000.0)
    q = ladder_queries(hist, [M], 7200.0, 30000.0, stride_min=60, ladder=LADDER, on_demand={M: 0.12})
    # decision times: 118 min of history first, label hours inside the window (t <= 26400)
    assert sorted(set(q["t"])) == [7200.0, 10800.0, 14400.0, 18000.0, 21600.0, 25200.0]
    # rise 0.0005 in (7200, 10800]: only delta 0.0001 is crossed; on-demand 0.12 is not
    assert labels(q, 7200.0) == {ON_DEMAND: 0, 0: 1, 1: 0, 2: 0, 3: 0}
    # rise 0.0295 in (10800, 14400]: deltas up to 0.01 crossed, 0.1 not; 0.13 > on-demand 0.12
    assert labels(q, 10800.0) == {ON_DEMAND: 1, 0: 1, 1: 1, 2: 1, 3: 0}
    # no record in the hour, then a fall: nothing crossed; on-demand 0.12 < price 0.13 is refused
    assert labels(q, 14400.0) == {0: 0, 1: 0, 2: 0, 3: 0}
    assert labels(q, 18000.0) == {0: 0, 1: 0, 2: 0, 3: 0}
    assert labels(q, 21600.0) == {ON_DEMAND: 0, 0: 0, 1: 0, 2: 0, 3: 0}
    assert q.attrs["refused"] == 2
    row = q[(q["t"] == 10800.0) & (q["rung"] == 2)].iloc[0]
    assert row["price"] == 0.1005 and row["b"] == pytest.approx(0.1105)


def test_a_record_exactly_one_hour_later_counts_and_one_second_later_does_not():
    hist = series([0.0, 10800.0], [0.1, 0.25], 20000.0)
    q = ladder_queries(hist, [M], 7200.0, 20000.0, stride_min=60, ladder=LADDER)
    assert labels(q, 7200.0) == {0: 1, 1: 1, 2: 1, 3: 1}  # crossing at t + 3600 exactly
    hist = series([0.0, 10801.0], [0.1, 0.25], 20000.0)
    q = ladder_queries(hist, [M], 7200.0, 20000.0, stride_min=60, ladder=LADDER)
    assert labels(q, 7200.0) == {0: 0, 1: 0, 2: 0, 3: 0}


@pytest.mark.parametrize("bad", [(), (0.1, 0.01), (0.0, 0.1), (0.1, float("nan"))])
def test_bad_ladder_is_refused(bad):
    with pytest.raises(RevPredError, match="ladder"):
        check_ladder(bad)


def test_features_at_t_never_read_prices_after_t():
    rng = np.random.default_rng(0)
    times = np.arange(0.0, 20 * 86400.0, 300.0)
    prices = 0.1 + 0.01 * rng.random(times.size)
    t = np.full(4, 10 * 86400.0 + 123.0)
    b = 0.1 + np.array([0.0001, 0.001, 0.005, 0.02])
    base = LadderFeatures(series(times, prices, times[-1]), LADDER, {M: 0.175}, ["r3.large"], ["us-east-1a"])
    changed = prices.copy()
    changed[times > t[0]] = 5.0  # the future spikes
    other = LadderFeatures(series(times, changed, times[-1]), LADDER, {M: 0.175}, ["r3.large"], ["us-east-1a"])
    X0, X1 = base.transform([M] * 4, t, b), other.transform([M] * 4, t, b)
    assert X0.shape == (4, len(FEATURES))
    np.testing.assert_array_equal(X0, X1)
    cross = X0[:, FEATURES.index("cross_week")]
    assert np.all(np.diff(cross) <= 0) and cross[0] > 0  # the crossing share falls as delta grows
