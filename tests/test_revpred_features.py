"""RevPred features on a hand-made price series (the SpotTune paper's RevPred inputs)."""

from __future__ import annotations

import numpy as np
import pytest

from revpred.errors import PriceDataError, RevPredError
from revpred.features import (HISTORY_S, MAX_MINUTES_SINCE_SET, N_INPUTS, FeatureScaler, make_inputs,
                              minute_prices, record_features, split_inputs)
from spotmarket.prices import Market, PriceSeries, to_seconds

T0 = to_seconds("2015-05-04T00:00Z")  # a Monday, 00:00 UTC
MIN = 60.0
MARKET = Market("us-east-1a", "r3.large")


def series(future_price: float = 0.20) -> PriceSeries:
    # minute offsets from T0 -> price; the record at -90 repeats the price (not a change)
    recs = [(-300, 0.10), (-90, 0.10), (-30, 0.12), (-9.5, 0.11), (20, future_price)]
    t = [T0 + m * MIN for m, _ in recs]
    return PriceSeries(MARKET, t, [p for _, p in recs], end_s=T0 + 300 * MIN)


def test_present_record_values():
    f = record_features(series(), [T0])[0]
    price, mean60, n_changes, since, workday, hour = f[-1]
    assert price == pytest.approx(0.11)
    # grid minutes -59..-31 at 0.10 (29), -30..-10 at 0.12 (21), -9..0 at 0.11 (10)
    assert mean60 == pytest.approx((29 * 0.10 + 21 * 0.12 + 10 * 0.11) / 60)
    assert n_changes == 2  # -30 and -9.5; the repeat at -90 is neither inside nor a change
    assert since == pytest.approx(9.5)
    assert workday == 1.0 and hour == 0.0


def test_oldest_history_record_values():
    f = record_features(series(), [T0])[0]
    price, mean60, n_changes, since, workday, hour = f[0]  # minute T0 - 59 = Sunday 23:01 UTC
    assert price == pytest.approx(0.10)
    assert mean60 == pytest.approx(0.10)
    assert n_changes == 0  # the record at -90 repeats the price
    assert since == pytest.approx(300 - 59)
    assert workday == 0.0 and hour == 23.0
    assert f.shape == (60, 6)


def test_minutes_since_set_is_capped():
    s = PriceSeries(MARKET, [T0 - 3 * 86400.0], [0.1], end_s=T0 + 7200)
    assert record_features(s, [T0])[0, -1, 3] == MAX_MINUTES_SINCE_SET


def test_no_look_ahead_for_either_grid_method():
    for method in ("ffill", "linear"):
        a = record_features(series(0.20), [T0], method)
        b = record_features(series(9.99), [T0], method)
        np.testing.assert_array_equal(a, b)


def test_linear_grid_interpolates_only_between_known_records():
    s = series()
    g = minute_prices(s, [T0, T0 + 25 * MIN], "linear")
    # column 118 is t itself; column 118 - k is t - k minutes
    assert g[0, 118 - 20] == pytest.approx(0.12 + (10 / 20.5) * (0.11 - 0.12))
    assert g[0, 118 - 5] == pytest.approx(0.11)  # after the last known record: held flat
    # 25 minutes later the record at +20 is known: T0 - 5 min now interpolates towards it
    col = 118 - 30
    assert g[1, col] == pytest.approx(0.11 + (4.5 / 29.5) * (0.20 - 0.11))
    ff = minute_prices(s, [T0], "ffill")
    assert ff[0, 118 - 20] == pytest.approx(0.12)


def test_needs_history_and_rejects_future_times():
    s = series()
    with pytest.raises(PriceDataError, match="118 minutes"):
        record_features(s, [s.start_s + HISTORY_S - 1])
    with pytest.raises(PriceDataError, match="after the end"):
        record_features(s, [s.end_s + 1])
    with pytest.raises(PriceDataError, match="grid method"):
        minute_prices(s, [T0], "cubic")


def test_inputs_layout_and_delta():
    f = record_features(series(), [T0, T0 + 60])
    X = make_inputs(f, [0.15, 0.30])
    assert X.shape == (2, N_INPUTS)
    hist, present = split_inputs(X)
    np.testing.assert_array_equal(hist, f[:, :-1, :])
    np.testing.assert_array_equal(present[:, :6], f[:, -1, :])
    assert present[0, 6] == pytest.approx(0.15) and present[0, 7] == pytest.approx(0.15 - 0.11)


def test_scaler_uses_training_statistics_and_round_trips():
    rng = np.random.default_rng(0)
    f = record_features(series(), T0 + 60.0 * np.arange(0, 100))
    X = make_inputs(f, f[:, -1, 0] + rng.uniform(1e-4, 0.05, 100))
    sc = FeatureScaler().fit(X[:50])
    Z = sc.transform(X[:50])
    present = Z[:, -8:]
    assert np.allclose(present[:, 6:].mean(axis=0), 0.0, atol=1e-5)  # b and delta: exactly standardised
    assert Z.dtype == np.float32 and np.abs(sc.transform(X)).max() <= sc.clip
    again = FeatureScaler.from_dict(sc.to_dict())
    np.testing.assert_array_equal(again.transform(X), sc.transform(X))
    with pytest.raises(RevPredError):
        sc.transform(X[:, :-1])
