"""The calibrated predictor's extra feature columns ("sharper") on a hand-made price series."""

from __future__ import annotations

import math

import numpy as np
import pytest

from revpred.errors import RevPredError
from revpred.ladder_features import FEATURE_SETS, FEATURES, LadderFeatures, feature_set
from spotmarket.prices import Market, PriceSeries, to_seconds

M = Market("us-east-1a", "r3.large")
LADDER = (0.001, 0.005, 0.01)
# 0.100 from 0 s; 0.103 at 5000; 0.100 at 9000; 0.110 at 10000; 0.100 at 10500; history ends at 30000 s
TIMES, PRICES = [0.0, 5000.0, 9000.0, 10000.0, 10500.0], [0.100, 0.103, 0.100, 0.110, 0.100]


def features(times=TIMES, prices=PRICES, end=30000.0, name="short+calendar"):
    hist = {M: PriceSeries(M, times, prices, end_s=end)}
    return LadderFeatures(hist, LADDER, None, ["r3.large"], ["us-east-1a"], name)


def col(f, X, name):
    return X[:, f.columns.index(name)]


def test_short_window_columns_by_hand():
    # Grid hours s = 0, 600, ... s; rise(s) = highest record in (s, s + 1 h] - price(s):
    #   s = 0, 600, 1200: no record (-inf); s = 1800 .. 4800: 0.003 (the 5000 s record); s = 5400, 6000:
    #   -0.003 (only the 9000 s fall); s = 6600 .. 8400: 0.110 - 0.103 = 0.007.
    f = features()
    t = np.full(3, 12000.0)
    b = 0.100 + np.array(LADDER)  # price(12000) = 0.100: deltas 0.001, 0.005, 0.01
    X = f.transform([M] * 3, t, b)
    # past 3 h: hours s in [1200, 8400] ended by t, 13 of them; 10 rose > 0.001, 4 > 0.005, none > 0.01
    np.testing.assert_allclose(col(f, X, "cross_3h"), [10 / 13, 4 / 13, 0.0], atol=1e-9)
    # past 6 h: s in [0, 8400], 15 hours
    np.testing.assert_allclose(col(f, X, "cross_6h"), [10 / 15, 4 / 15, 0.0], atol=1e-9)
    # past hour (8400, 12000]: highest record 0.110 over price(8400) = 0.103
    np.testing.assert_allclose(col(f, X, "rise_hour_rel"), np.log((0.007 + 1e-6) / np.array(LADDER)), rtol=1e-9)
    # latest hour with rise > delta: s = 8400 for 0.001 and 0.005 (3600 s ago); none for 0.01 (the 1-week cap)
    np.testing.assert_allclose(col(f, X, "log_since_rise"), np.log1p([3600.0, 3600.0, 7 * 86400.0]), rtol=1e-12)
    # at t = 9600 (hours s <= 6000): 0.001 last crossed at s = 4800; 0.005 never
    X = f.transform([M] * 2, np.full(2, 9600.0), 0.100 + np.array(LADDER[:2]))
    np.testing.assert_allclose(col(f, X, "log_since_rise"), np.log1p([4800.0, 7 * 86400.0]), rtol=1e-12)


def test_the_past_hour_rise_is_zero_when_prices_only_fell_and_never_reads_the_future():
    f = features()
    # (3600, 7200]: the 5000 s record rose 0.003 over price(3600) = 0.100; at t = 9000 the hour (5400, 9000] only fell
    X = f.transform([M] * 2, np.array([7200.0, 9000.0]), np.array([0.103 + 0.001, 0.100 + 0.001]))
    np.testing.assert_allclose(col(f, X, "rise_hour_rel"), np.log([(0.003 + 1e-6) / 0.001, 1e-6 / 0.001]), rtol=1e-6)
    spiked = features(TIMES + [12001.0], PRICES + [5.0])  # a spike just after t changes nothing at t
    t, b = np.full(3, 12000.0), 0.100 + np.array(LADDER)
    np.testing.assert_array_equal(f.transform([M] * 3, t, b), spiked.transform([M] * 3, t, b))


def test_calendar_columns_by_hand():
    t0 = to_seconds("2015-07-13 06:00")  # a Monday, 06:00 UTC
    f = features([t0 - 86400.0], [0.1], t0 + 86400.0)
    X = f.transform([M] * 2, np.array([t0, t0 + 6 * 3600.0]), np.full(2, 0.2))
    np.testing.assert_allclose(col(f, X, "hour_sin"), [1.0, 0.0], atol=1e-12)  # 06:00, 12:00
    np.testing.assert_allclose(col(f, X, "hour_cos"), [0.0, -1.0], atol=1e-12)
    phase = np.array([0.25, 0.5]) / 7  # Monday 00:00 is phase 0
    np.testing.assert_allclose(col(f, X, "dow_sin"), np.sin(2 * math.pi * phase), atol=1e-12)
    np.testing.assert_allclose(col(f, X, "dow_cos"), np.cos(2 * math.pi * phase), atol=1e-12)


def test_every_set_keeps_base_columns_first_and_signs_consistent():
    for name, cols in FEATURE_SETS.items():
        c, sign, cat = feature_set(name)
        assert c[: len(FEATURES)] == FEATURES and c == cols
        assert [c[i] for i in cat] == ["instance_type", "zone"]
    _, sign, _ = feature_set("short")
    assert sign[-4:] == (1, 1, 1, -1)  # three columns fall with b (p may rise with them), one rises
    assert features(name="base").transform([M], np.array([12000.0]), np.array([0.101])).shape == (1, len(FEATURES))
    with pytest.raises(RevPredError, match="feature set"):
        feature_set("nope")


def test_columns_move_the_right_way_when_only_the_max_price_rises():
    rng = np.random.default_rng(0)
    times = np.arange(0.0, 10 * 86400.0, 300.0)
    prices = 0.1 + 0.01 * rng.random(times.size)
    f = features(times, prices, times[-1])
    t = np.floor(rng.uniform(86400.0, 9 * 86400.0, 500))
    b = np.asarray(f.history[M].price_at(t)) + 10 ** rng.uniform(-5, -1, 500)
    d = f.transform([M] * 500, t, b * 1.05) - f.transform([M] * 500, t, b)
    for i, s in enumerate(f.monotone_cst):
        assert s == 0 or np.all(np.nan_to_num(s * d[:, i]) <= 1e-12), f.columns[i]


def test_the_composition_root_passes_the_feature_set_and_keeps_base_by_default():
    from spottune.compose import build_market, make_predictor

    market = build_market(None, market_mode="legacy", seed=0, instance_types=["r3.large"])
    start = to_seconds("2015-05-05")
    base, note = make_predictor("calibrated", market, start - 4 * 86400, start, 0)
    short, note_short = make_predictor("calibrated", market, start - 4 * 86400, start, 0, feature_set="short")
    assert base.features.columns == FEATURES and "features" not in note
    assert short.features.columns == FEATURE_SETS["short"] and "features 'short'" in note_short
    assert short.model_.n_features_in_ == len(FEATURES) + 4
