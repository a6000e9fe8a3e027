"""The market's empirical base rate (the curse correction's prior): hand-counted hours."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from spotmarket.prices import Market, PriceHistory
from spottune.compose import empirical_rate_predictor

T0 = pd.Timestamp("2015-05-01T00:00Z").value / 1e9
M = Market("us-east-1a", "r3.large")


def test_share_of_decision_times_whose_price_rose_above_the_offset():
    # 0.02 USD/h for two days, one spike to 0.05 at T0 + 6 h lasting 5 minutes.
    times = [T0, T0 + 21600, T0 + 21900, T0 + 2 * 86400]
    prices = [0.02, 0.05, 0.02, 0.02]
    hist = PriceHistory(pd.DataFrame({
        "timestamp": pd.to_datetime(times, unit="s", utc=True), "availability_zone": M.availability_zone,
        "instance_type": M.instance_type, "product_description": "Linux/UNIX", "price": prices}))
    pred = empirical_rate_predictor(SimpleNamespace(markets=[M], history=hist), T0, T0 + 12 * 3600)
    # decision times every 10 min from T0 + 118 min (7080 s) to T0 + 11 h: 55; those with the spike record in
    # (t, t + 1 h] are t = 7080 + 600 k, k = 19..24: 6 of them, each a rise of 0.03 USD/h
    now = T0 + 30 * 3600
    p = pred.predict_proba([M] * 3, now, np.array([0.02 + 0.001, 0.02 + 0.0299, 0.02 + 0.03]))
    np.testing.assert_allclose(p, [6.5 / 56, 6.5 / 56, 0.5 / 56])
    assert pred.predict_proba([M], now, [0.019])[0] == pytest.approx(1.0)  # below the current price
