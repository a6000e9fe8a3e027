"""The oracle predictor, on-demand capacity and billing, on hand-made price series."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from provisioner import InstanceCatalog
from spotmarket.prices import Market, PriceHistory
from spottune.evaluation import NeverRevoked, OnDemandBilling, OraclePredictor
from spotmarket import LegacyBidRevocation

A = Market("us-east-1a", "r3.large")
T0 = pd.Timestamp("2015-05-05T00:00Z").value / 1e9


def _history():
    # 0.02 USD/h, a spike to 0.30 at T0 + 1800 s, back to 0.02 at T0 + 2400 s; then calm for a day
    table = pd.DataFrame({
        "timestamp": pd.to_datetime([T0 - 3600, T0 + 1800, T0 + 2400, T0 + 86400], unit="s", utc=True),
        "availability_zone": "us-east-1a", "instance_type": "r3.large", "product_description": "Linux/UNIX",
        "price": [0.02, 0.30, 0.02, 0.02]})
    return PriceHistory(table)


def test_oracle_is_exact_on_a_hand_made_series():
    oracle = OraclePredictor(LegacyBidRevocation(_history()))
    t = np.array([T0, T0, T0 + 1500, T0 + 2400, T0 - 3000])
    b = np.array([0.10, 0.50, 0.10, 0.10, 0.10])
    # spike 1800 s after T0 above b=0.10: notice at +1800, termination +1920 < 3600 -> 1
    # b=0.50 is never crossed -> 0; launch at +2400 is after the spike -> 0
    # launch at T0-3000: notice at T0+1800 = 4800 s after launch -> terminated after the first hour -> 0
    p = oracle.predict_proba([A] * 5, t, b)
    assert p.tolist() == [1.0, 0.0, 1.0, 0.0, 0.0]


def test_oracle_refused_launch_counts_as_revoked():
    oracle = OraclePredictor(LegacyBidRevocation(_history()))
    assert oracle.predict_proba([A], T0 + 2000, 0.10).tolist() == [1.0]  # price 0.30 > b at launch


def test_never_revoked():
    rev = NeverRevoked().revocation(A, T0, instance_id="i-1", max_price_usd_per_hour=0.0)
    assert rev.fulfilled and not rev.revoked and math.isinf(rev.termination_s)


def test_on_demand_billing_hand_computed():
    billing = OnDemandBilling(InstanceCatalog.load())
    series = _history()[A]
    row = billing.bill(series, T0, T0 + 5400.0, "provider", instance_id="i-1", reason="x", trial_id="t0")
    # r3.large on-demand in us-east-1 (2015 regional file): 0.175 USD/h; 1.5 h, no refund even if ended by provider
    assert row.charged_usd == pytest.approx(0.175 * 1.5)
    assert row.refunded_usd == 0.0
    short = billing.bill(series, T0, T0 + 600.0, "provider", instance_id="i-2", reason="x")
    assert short.charged_usd == pytest.approx(0.175 / 6)
