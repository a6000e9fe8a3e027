"""The aws backend's prices on a moto server seeded with the shipped real trace (us-east-1, 2015).

``describe_spot_price_history`` (moto's handler replaced in-process by one that serves the trace as EC2
does, :func:`tests._aws_host.moto_server`) -> :class:`ApiPrices` for the ledger and :func:`live_market` for
the provisioner. Both must give exactly the shipped trace's prices, so a run is billed as the replay bills it.
"""

from __future__ import annotations

import boto3
import numpy as np
import pandas as pd
import pytest

from spotmarket import Billing
from spotmarket.prices import Market, load_history
from spottune.backends.aws._build import LIVE_HOLD_S, live_market
from spottune.backends.aws._prices import ApiPrices
from spottune.experiment import ExperimentSpec
from tests._aws_host import REGION, moto_server

pytestmark = pytest.mark.server

TRACE = load_history("us-east-1_2015.csv.gz")
T = pd.Timestamp("2015-05-05T00:00Z").value / 1e9
M = Market("us-east-1e", "r3.large")


@pytest.fixture(scope="module")
def ec2():
    with moto_server(TRACE) as url:
        yield boto3.client("ec2", endpoint_url=url, region_name=REGION)


def test_api_prices_are_the_trace(ec2):
    lo, hi = T, T + 6 * 3600
    got = ApiPrices(ec2).series(M, lo, hi)
    want = TRACE[M]
    inside = (want.times_s > lo) & (want.times_s <= hi)
    assert got.price_at(lo) == want.price_at(lo)  # the price in force at the start comes along
    np.testing.assert_array_equal(got.times_s[1:], want.times_s[inside])
    np.testing.assert_array_equal(got.prices[1:], want.prices[inside])


@pytest.mark.parametrize(("hours", "ended_by"), [(2.5, "user"), (0.75, "provider"), (3.2, "provider")])
def test_a_run_is_billed_as_on_the_trace(ec2, hours, ended_by):
    start, end = T + 1234.0, T + 1234.0 + hours * 3600
    api = Billing().charge(ApiPrices(ec2).series(M, start, end), start, end, ended_by)
    replay = Billing().charge(TRACE[M], start, end, ended_by)
    # the same prices; the sums differ only in float rounding (a long trace integrates from its own start)
    assert (api.charged_usd, api.refunded_usd) == pytest.approx((replay.charged_usd, replay.refunded_usd), abs=1e-10)
    assert api.billed_s == replay.billed_s
    assert (api.charged_usd == 0.0) == (ended_by == "provider" and hours < 1)  # the first-hour refund


def test_live_market_reads_the_window_before_now(ec2):
    spec = ExperimentSpec(backend="aws", instance_types=("r3.large", "c3.xlarge"), train_days=1.0,
                          aws={"bucket": "b", "endpoint_url": "unused"})
    history, now = live_market(spec, ec2=ec2, now_s=T)
    assert now == T and history.end_s == T + LIVE_HOLD_S  # the prices read now stay in force (AWS17)
    markets = {str(m) for m in history.markets}
    assert markets == {f"{z}/{t}/Linux/UNIX" for z in ("us-east-1a", "us-east-1b", "us-east-1e")
                       for t in ("r3.large", "c3.xlarge")}
    for m in history.markets:
        assert history[m].price_at(T) == TRACE[m].price_at(T)
        assert history[m].price_at(T + LIVE_HOLD_S) == TRACE[m].price_at(T)  # a relaunch later finds a price
        assert history[m].start_s <= T - 86400  # train_days of history (plus 6 h) before the start


def test_a_real_run_needs_an_image_and_an_ami():
    from spottune.backends.aws._build import settings_from_spec
    from spottune.errors import ConfigError

    spec = ExperimentSpec(backend="aws", aws={"bucket": "b", "ami": "ami-1"})
    with pytest.raises(ConfigError, match=r"^backend aws needs aws.image \(the worker image in ECR"):
        settings_from_spec(spec, live=True)
    s = settings_from_spec(spec, live=False, output="results/exp-7")
    assert (s.experiment, s.store_url, s.time_scale, s.pace_steps) == (
        "exp-7", "s3://b/spottune/exp-7/checkpoints", spec.time_scale, True)
