"""The experiment spec of docs/guide/aws.md §3, read from the page and run with ``spottune run --backend aws``.

The spec's pool is today's instance types, a GPU type among them (c5.large, m5.large, c5.xlarge, g4dn.xlarge in
three zones). It runs against a moto server (EC2, S3, SQS, IAM; ``tests/_aws_host.py``) whose spot price history is
a scripted trace of those twelve markets, with the agents and workers as local processes. The test changes only
what a test endpoint needs (:data:`TEST_ONLY`): the endpoint and bucket, a replayed trace instead of live prices,
and a small study; everything else (workload, θ, top-k, the pool, the caps, image, AMI, instance profile,
region, experiment) is the page's.
"""

from __future__ import annotations

import json
import re

import boto3
import pandas as pd
import pytest
import yaml

from provisioner import InstanceCatalog
from spotmarket.prices import load_history
from tests._aws_host import ROOT, Ec2Hosts, moto_server

DOC = ROOT / "docs" / "guide" / "aws.md"
START = pd.Timestamp("2026-11-02T00:00Z")
#: Spot prices of the scripted trace, USD per instance-hour (flat but for a small hourly wobble; the chooser
#: then picks by price per useful step).
SPOT = {"c5.large": 0.034, "m5.large": 0.038, "c5.xlarge": 0.068, "g4dn.xlarge": 0.21}
ZONES = {"us-east-1a": 1.0, "us-east-1b": 1.1, "us-east-1c": 1.2}


def docs_spec() -> dict:
    """The YAML block of docs/guide/aws.md that starts with ``# aws.yaml``."""
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    [block] = [b for b in blocks if b.startswith("# aws.yaml")]
    return yaml.safe_load(block)


def trace(path) -> str:
    """Two days of hourly prices of every (type, zone) of :data:`SPOT` x :data:`ZONES`, as a price file."""
    rows = []
    for h in range(48):
        t = START - pd.Timedelta(hours=24) + pd.Timedelta(hours=h)
        for it, p in SPOT.items():
            for az, k in ZONES.items():
                rows.append((t.isoformat(), "us-east-1", az, it, "Linux/UNIX", round(p * k * (1 + 0.02 * (h % 3)), 6)))
    pd.DataFrame(rows, columns=["timestamp", "region", "availability_zone", "instance_type", "product_description",
                                "price"]).to_csv(path, index=False)
    return str(path)


def test_the_docs_pool_is_current_types_with_a_gpu_type():
    spec = docs_spec()
    cat = InstanceCatalog.load()
    assert spec["backend"] == "aws" and spec["instance_types"] == list(SPOT)
    assert [cat[t].gpus for t in spec["instance_types"]] == [0, 0, 0, 1]
    assert [cat[t].on_demand("us-east-1") for t in spec["instance_types"]] == [0.085, 0.096, 0.17, 0.526]


def _dry_run(tmp_path, **extra):
    from click.testing import CliRunner

    from spottune.cli import cli

    spec = docs_spec()
    spec.update(prices=trace(tmp_path / "prices.csv"), start=START.isoformat(), train_days=0.5, predictor="none",
                **extra)
    spec["aws"].update(live_prices=False, endpoint_url="http://127.0.0.1:9")  # a closed port: any call would fail
    cfg = tmp_path / "aws.yaml"
    cfg.write_text(yaml.safe_dump(spec))
    result = CliRunner().invoke(cli, ["run", "--config", str(cfg), "--dry-run"])
    assert result.exit_code == 0, result.output
    return {ln.split()[1].split("/")[1] for ln in result.output.splitlines() if ln.startswith("t0")}


@pytest.mark.slow
def test_a_gpu_trainable_keeps_only_the_gpu_type_of_the_docs_pool(tmp_path):
    """The docs' commented ``resources: {gpu: 1}`` line, switched on: the first launches go to g4dn.xlarge only."""
    assert _dry_run(tmp_path, resources={"gpu": 1}) == {"g4dn.xlarge"}
    assert "g4dn.xlarge" not in _dry_run(tmp_path)  # the CPU trainable takes the cheaper CPU types


#: What the run changes in the page's spec, and nothing else.
#: θ = 1 keeps it to one round of three hosts (the page's 0.7 with top-k 3 of 3 trials stops none and only pauses
#: and relaunches every trial: three more worker processes, which double the test's time; the θ barrier is
#: tested in tests/test_aws_backend.py).
TEST_ONLY = ("prices", "start", "train_days", "predictor", "search_space", "max_steps", "theta", "time_scale",
             "storage_options", "aws.bucket", "aws.endpoint_url", "aws.live_prices", "aws.lease_s")


@pytest.mark.slow
@pytest.mark.process
@pytest.mark.server
def test_the_docs_spec_runs_end_to_end_on_moto(tmp_path):
    from click.testing import CliRunner

    from spottune.cli import cli

    spec = docs_spec()
    path = trace(tmp_path / "prices.csv")
    exp = spec["aws"]["experiment"]
    with moto_server(load_history(path)) as url:
        boto3.client("s3", endpoint_url=url).create_bucket(Bucket="spottune-test")
        # section 2 of the page: the per-experiment instance profile the spec names
        boto3.client("iam", endpoint_url=url).create_instance_profile(InstanceProfileName=spec["aws"]["instance_profile"])
        changed = dict(prices=path, start=START.isoformat(), train_days=0.5, predictor="none",
                       search_space={"lr": {"grid_search": [0.05, 0.1, 0.2]}}, max_steps=4, theta=1.0, time_scale=500.0,
                       storage_options={"endpoint_url": url})
        spec.update(changed)
        spec["aws"].update(bucket="spottune-test", endpoint_url=url, live_prices=False, lease_s=3000.0)
        assert sorted([*changed, *(f"aws.{k}" for k in ("bucket", "endpoint_url", "live_prices", "lease_s"))]) \
            == sorted(TEST_ONLY)
        cfg = tmp_path / "aws.yaml"
        cfg.write_text(yaml.safe_dump(spec))
        hosts = Ec2Hosts(url, exp, workload=spec["workload"], store="", log_dir=tmp_path, warm=3).start()
        try:
            result = CliRunner().invoke(cli, ["run", "--config", str(cfg), "--output", str(tmp_path / "res"),
                                              "--no-progress"])
            hosts.settle()
            assert result.exit_code == 0, result.output
            assert hosts.running() == [] and hosts.errors == []
        finally:
            hosts.stop()
        ec2 = boto3.client("ec2", endpoint_url=url, region_name="us-east-1")
        types = {i["InstanceType"] for r in ec2.describe_instances(
            Filters=[{"Name": "tag:spottune:experiment", "Values": [exp]}])["Reservations"] for i in r["Instances"]}
    assert types and types <= set(SPOT)  # every launch went to a type of the page's pool
    summary = json.loads((tmp_path / "res" / "summary.json").read_text())
    assert summary["settings"]["backend"] == "aws" and summary["settings"]["experiment"] == exp
    df = pd.read_csv(tmp_path / "res" / "trials.csv")
    assert sorted(df["state"]) == ["finished"] * 3 and sorted(df["steps"]) == [4, 4, 4]
    ledger = pd.read_csv(tmp_path / "res" / "ledger.csv")
    assert len(ledger) == 3 and set(ledger["ended_by"]) == {"user"}  # one instance per trial, ended by the run
