"""Billing, hand-computed (decisions M3-M5; AWS's "Billing for interrupted Spot Instances")."""

import numpy as np
import pytest

from spotmarket.prices import Market, PriceSeries
from spotmarket.errors import MarketError
from spotmarket import Billing, EndedBy, LedgerRow

T0 = 1_430_000_000.0  # 2015-04-25T22:13:20Z: real epoch magnitudes, to catch float trouble
M = Market("us-east-1a", "r3.large")
# 0.36 USD/h = 1e-4 USD/s from T0, 0.72 USD/h = 2e-4 USD/s from T0+1000, 0.18 USD/h = 5e-5 USD/s from T0+2500
SERIES = PriceSeries(M, [T0, T0 + 1000, T0 + 2500], [0.36, 0.72, 0.18], end_s=T0 + 100_000)
EXACT = dict(abs=1e-12)


def bill(start, end, who, **kw):
    return Billing(**kw).charge(SERIES, T0 + start, T0 + end, who)


def test_run_across_two_price_changes_pays_each_second_at_its_price():
    c = bill(500, 3000, "user")
    # 500 s at 1e-4 + 1500 s at 2e-4 + 500 s at 5e-5
    assert c.charged_usd == pytest.approx(0.05 + 0.30 + 0.025, **EXACT)
    assert (c.billed_s, c.refunded_usd) == (2500.0, 0.0)


def test_provider_ends_at_3599_s_is_free_and_refunds_what_it_would_have_cost():
    c = bill(0, 3599, "provider")
    assert (c.charged_usd, c.billed_s) == (0.0, 0.0)
    assert c.refunded_usd == pytest.approx(0.1 + 0.3 + 1099 * 5e-5, **EXACT)


def test_provider_ends_at_3601_s_pays_all_3601_s():
    c = bill(0, 3601, "provider")
    assert c.charged_usd == pytest.approx(0.1 + 0.3 + 1101 * 5e-5, **EXACT)
    assert (c.billed_s, c.refunded_usd) == (3601.0, 0.0)


def test_provider_ends_at_exactly_3600_s_pays():  # [I] "first hour" = d < 3600 strictly
    c = bill(0, 3600, "provider")
    assert c.charged_usd == pytest.approx(0.1 + 0.3 + 1100 * 5e-5, **EXACT)
    assert c.refunded_usd == 0.0


def test_user_ends_at_600_s_pays_600_s():
    c = bill(0, 600, "user")
    assert c.charged_usd == pytest.approx(600 * 1e-4, **EXACT)
    assert (c.billed_s, c.refunded_usd) == (600.0, 0.0)


def test_user_ends_at_3599_s_pays_every_second():
    assert bill(0, 3599, "user").charged_usd == pytest.approx(0.1 + 0.3 + 1099 * 5e-5, **EXACT)


def test_no_refund_option_makes_the_provider_run_pay():
    c = bill(0, 3599, "provider", refund_first_hour=False)
    assert c.charged_usd == pytest.approx(0.45495, **EXACT)
    assert c.refunded_usd == 0.0


def test_billing_uses_the_market_price_not_the_max_price():
    row = Billing().bill(SERIES, T0, T0 + 600, "user", instance_id="i-1", reason="finished",
                         max_price_usd_per_hour=5.0)
    assert row.charged_usd == pytest.approx(0.06, **EXACT)
    assert row.max_price_usd_per_hour == 5.0


# -- hourly granularity: price at the start of each instance-hour ----------------------------------------
@pytest.mark.parametrize(("start", "end", "who", "charged", "refunded", "billed"), [
    (0, 600, "user", 0.36, 0.0, 3600),           # partial first hour charged as a full hour
    (0, 3599, "provider", 0.0, 0.36, 0),         # interrupted in the first hour: free
    (0, 3601, "user", 0.36 + 0.18, 0.0, 7200),   # hours start at T0 (0.36) and T0+3600 (0.18)
    (0, 3601, "provider", 0.36, 0.18, 3600),     # completed hour paid, partial hour free
    (0, 7200, "user", 0.36 + 0.18, 0.0, 7200),   # exactly two hours
    (0, 7200, "provider", 0.36 + 0.18, 0.0, 7200),
    (1500, 6500, "user", 0.72 + 0.18, 0.0, 7200),  # hour starts T0+1500 (0.72), T0+5100 (0.18)
    (0, 0, "user", 0.0, 0.0, 0),                 # zero-length run costs nothing
])
def test_hourly_billing(start, end, who, charged, refunded, billed):
    c = bill(start, end, who, granularity="hour")
    assert c.charged_usd == pytest.approx(charged, **EXACT)
    assert c.refunded_usd == pytest.approx(refunded, **EXACT)
    assert c.billed_s == billed


def test_vectorised_charge_equals_scalar_calls():
    rng = np.random.default_rng(3)
    s = T0 + rng.uniform(0, 50_000, 200)
    e = s + rng.uniform(0, 9000, 200)
    who = rng.choice(["user", "provider"], 200)
    for granularity in ("second", "hour"):
        b = Billing(granularity)
        vec = b.charge(SERIES, s, e, who)
        for i in range(200):
            one = b.charge(SERIES, s[i], e[i], str(who[i]))
            assert (vec.billed_s[i], vec.charged_usd[i], vec.refunded_usd[i]) == pytest.approx(
                (one.billed_s, one.charged_usd, one.refunded_usd), rel=1e-12, abs=1e-15)


def test_bill_returns_a_ledger_row():
    row = Billing().bill(SERIES, T0, T0 + 3599, EndedBy.PROVIDER, instance_id="i-7", trial_id="t1", reason="price",
                         max_price_usd_per_hour=0.4)
    assert isinstance(row, LedgerRow)
    assert (row.market, row.instance_id, row.trial_id, row.ended_by, row.reason) == (M, "i-7", "t1", "provider", "price")
    assert (row.start_s, row.end_s, row.duration_s, row.billed_s, row.charged_usd) == (T0, T0 + 3599, 3599, 0.0, 0.0)
    assert row.refunded_usd == pytest.approx(0.45495, **EXACT)


def test_errors_name_the_value_and_the_rule():
    with pytest.raises(MarketError, match="granularity is 'minute'"):
        Billing("minute")
    with pytest.raises(MarketError, match="ended_by is 'aws'"):
        bill(0, 10, "aws")
    with pytest.raises(MarketError, match="ends before it starts"):
        bill(10, 0, "user")
    with pytest.raises(MarketError, match="unknown"):
        Billing().charge(SERIES, T0 - 10, T0 + 10, "user")  # before the first record
    with pytest.raises(MarketError, match="unknown"):
        Billing().charge(SERIES, T0, T0 + 200_000, "user")  # after the end of the history
