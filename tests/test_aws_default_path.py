"""``spottune run --backend aws --dry-run`` with the default settings (live prices) against a moto server.

The server (:func:`tests._aws_host.moto_server`) serves ``describe_spot_price_history`` from the shipped 2015
trace moved forward so that it ends ten minutes before now: r3.large and c3.xlarge with their recorded prices,
and m3.medium at a constant 0.0081 USD/h (a calm market: no revocation at any max price). The default path reads
``train_days`` of live prices before now and starts now; nothing is launched.
"""

from __future__ import annotations

import time

import boto3
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from spotmarket.prices import PriceHistory, load_history
from spottune.backends.aws._build import LIVE_HOLD_S, live_market
from spottune.cli import cli
from spottune.compose.market import build_market, check_start
from spottune.experiment import ExperimentSpec
from tests._aws_host import REGION, moto_server

pytestmark = pytest.mark.server

CALM_USD_PER_HOUR = 0.0081


def _recent_trace() -> PriceHistory:
    """The last 8 days of the 2015 trace (r3.large, c3.xlarge, m3.medium) ending 10 minutes ago; m3.medium flat."""
    table = load_history("us-east-1_2015.csv.gz").table
    table = table[table["instance_type"].isin(["r3.large", "c3.xlarge", "m3.medium"])].copy()
    end = table["timestamp"].max()
    table = table[table["timestamp"] > end - pd.Timedelta(days=8)]
    table["timestamp"] += pd.Timestamp.now(tz="UTC") - pd.Timedelta(minutes=10) - end
    table.loc[table["instance_type"] == "m3.medium", "price"] = CALM_USD_PER_HOUR
    return PriceHistory(table.reset_index(drop=True))


@pytest.fixture(scope="module")
def endpoint():
    with moto_server(_recent_trace()) as url:
        yield url


def _dry_run(tmp_path, endpoint, instance_types, *extra):
    cfg = tmp_path / "aws.yaml"
    cfg.write_text("workload: logreg\nsearch_space: {lr: {grid_search: [0.01, 0.02, 0.05, 0.2]}}\nmax_steps: 12\n"
                   f"instance_types: [{', '.join(instance_types)}]\n"
                   f"aws: {{bucket: my-bucket, endpoint_url: '{endpoint}'}}\n")
    return CliRunner().invoke(cli, ["run", "--config", str(cfg), "--backend", "aws", "--dry-run", *extra])


@pytest.mark.slow  # trains the default (calibrated) predictor on 4 days of prices of r3.large's 3 zones
def test_the_default_dry_run_plans_on_live_prices(tmp_path, endpoint):
    result = _dry_run(tmp_path, endpoint, ["r3.large"], "--budget-usd", "0.01")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "dry run: nothing is launched"
    rows = [ln.split() for ln in lines if ln.startswith("t0")]
    assert [r[0] for r in rows] == ["t00", "t01", "t02", "t03"]
    assert all(r[1].split("/")[1] == "r3.large" for r in rows)
    first = float(rows[0][-1])
    assert f"--budget-usd 0.01: the run would stop at its start: launch {1 if first > 0.01 else 2} of 4" in result.output


def test_a_calm_market_gives_a_plan(tmp_path, endpoint):
    """Constant prices: the calibrated model cannot be trained (one class of labels); the constant hazard plans."""
    result = _dry_run(tmp_path, endpoint, ["m3.medium"])
    assert result.exit_code == 0, result.output
    rows = [ln.split() for ln in result.output.splitlines() if ln.startswith("t0")]
    assert len(rows) == 4 and all(r[1].endswith("/m3.medium/Linux/UNIX") for r in rows)
    assert all(float(r[-1]) > CALM_USD_PER_HOUR for r in rows)
    assert result.output.splitlines()[-1] == ("note: a real run needs aws.image and aws.ami (the worker image in ECR, "
                                              "a host AMI with Docker)")


def test_the_live_start_is_the_history_end_for_any_now(endpoint):
    """The start is now as a nanosecond timestamp stores it (the float round trip may move now by up to a
    microsecond either way); the prices read then stay in force for LIVE_HOLD_S after it (AWS17), so the start
    check passes and a relaunch later in the run finds a price."""
    ec2 = boto3.client("ec2", endpoint_url=endpoint, region_name=REGION)
    spec = ExperimentSpec(backend="aws", instance_types=("m3.medium",), train_days=1.0,
                          aws={"bucket": "b", "endpoint_url": endpoint})
    wall = time.time() - 60.0
    for now in wall + np.random.default_rng(7).uniform(0.0, 1.0, 20):
        history, start = live_market(spec, ec2=ec2, now_s=float(now))
        assert history.end_s - start == pytest.approx(LIVE_HOLD_S, abs=1e-6) and abs(start - now) < 1e-6
        market = build_market(None, market_mode="legacy", seed=0, instance_types=["m3.medium"], history=history)
        check_start(market, start, 1.0, live=True)
        assert all(history[m].price_at(start + 3600.0) == history[m].price_at(start) for m in history.markets)
