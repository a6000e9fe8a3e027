"""``spottune prices info|fetch``: counts on the real traces, one-line errors, fetch against a moto server."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
import pytest

from spotmarket.prices import load_report, read_prices
from spottune.cli import main

PRICES = Path(__file__).resolve().parents[1] / "data" / "spot_prices"
TRACE_2015 = PRICES / "us-east-1_2015.csv.gz"
TRACE_2021 = PRICES / "eu-west-1_2021-08.csv.gz"


def run(args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    """Run the console entry point in-process: (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["spottune", *args])
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_info_on_the_2015_trace(capsys, monkeypatch) -> None:
    code, out, _ = run(["prices", "info", str(TRACE_2015), "--json"], capsys, monkeypatch)
    assert code == 0
    info = json.loads(out)
    assert info["records_read"] == 274_099 and info["records_kept"] == 274_099
    assert info["n_markets"] == 15 and len(info["markets"]) == 15
    assert info["duplicates_dropped"] == 0 and info["filtered_out"] == {}
    assert info["layout"] == "os-csv" and info["product_descriptions"] == ["Linux/UNIX"]
    assert sum(m["records"] for m in info["markets"]) == 274_099
    r3 = next(m for m in info["markets"] if m["market"] == "us-east-1a/r3.large/Linux/UNIX")
    assert r3["max_usd_per_hour"] == 1.55 and r3["price_changes"] <= r3["records"] - 1
    assert info["first_utc"] == "2015-03-11T10:34:42+00:00" and info["last_utc"] == "2015-08-31T23:59:13+00:00"
    code, out, _ = run(["prices", "info", "us-east-1_2015.csv.gz"], capsys, monkeypatch)  # bare name: located
    assert code == 0 and "274,099 read" in out and "markets:     15 " in out


def test_info_on_the_2021_trace_shows_read_and_kept(capsys, monkeypatch) -> None:
    code, out, _ = run(["prices", "info", str(TRACE_2021), "--json"], capsys, monkeypatch)
    info = json.loads(out)
    assert code == 0 and info["records_read"] == 242_031
    assert info["filtered_out"] == {"Linux/UNIX": 3615, "Red Hat Enterprise Linux": 3615, "SUSE Linux": 3615,
                                    "Windows": 3509}
    assert info["records_kept"] == 242_031 - 14_354 == sum(m["records"] for m in info["markets"])
    assert all(p.endswith("(Amazon VPC)") for p in info["product_descriptions"])
    code, out, _ = run(["prices", "info", str(TRACE_2021), "--product-description", "all"], capsys, monkeypatch)
    assert code == 0
    assert "242,031 read, 0 exact duplicates dropped, 0 filtered out by product description, 242,031 kept" in out
    assert "markets:     4,712 " in out and "more markets" in out


def test_info_errors_are_one_line_exit_2(tmp_path: Path, capsys, monkeypatch) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("2017-04-26 00:00:10+00:00,r4.large,Linux/UNIX,us-east-1a,0.03\n"
                   "2017-04-26 00:01:10+00:00,r4.large,Linux/UNIX,us-east-1a,-0.03\n")
    for args, message in [
        (["prices", "info", str(bad)], f"error: {bad}: line 2: price '-0.03' is negative"),
        (["prices", "info", "no-such-file.csv"], "error: price file 'no-such-file.csv' not found; looked in:"),
        (["prices", "info", str(tmp_path / "x" / "y.csv")], "does not exist"),
        (["prices", "fetch", "--region", "us-east-1", "--instance-types", "r4.large", "--days", "91",
          "--out", str(tmp_path / "o.csv")], "error: Invalid value for '--days': 91 days is outside (0, 90]"),
        (["prices", "fetch", "--region", "us-east-1", "--instance-types", " , ", "--days", "1",
          "--out", str(tmp_path / "o.csv")], "give at least one instance type"),
        (["prices", "fetch", "--region", "us-east-1", "--days", "1", "--out", "o.csv"], "Missing option '--instance-types'"),
    ]:
        code, out, err = run(args, capsys, monkeypatch)
        assert code == 2, args
        assert err.count("\n") == 1 and err.startswith("error: ") and message in err, err
        assert "Traceback" not in err
    assert not (tmp_path / "o.csv").exists()


@pytest.mark.process
def test_console_script_error_end_to_end(tmp_path: Path) -> None:
    """The real process: stderr is one line, exit code 2 (the in-process tests above cover the rest)."""
    cmd = [sys.executable, "-c", "from spottune.cli import main; main()", "prices", "info"]
    done = subprocess.run(cmd + [str(tmp_path / "missing.csv")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "missing.csv' does not exist" in done.stderr


# -- fetch against a real moto server --------------------------------------------------------------------------
NOW = datetime.now(timezone.utc).replace(microsecond=0)


def _seeded_history() -> list[dict]:
    """2 types x 3 AZs x 2 products, a price change every ~10 minutes for 5 days, plus one record 95 days old."""
    rows = []
    for k in range(5 * 24 * 6):
        for it_i, it in enumerate(["r4.large", "m4.2xlarge"]):
            for az_i, az in enumerate(["us-east-1a", "us-east-1b", "us-east-1c"]):
                if (k + it_i + az_i) % 2:  # not every market changes every time
                    continue
                for product in ["Linux/UNIX", "Windows"]:
                    rows.append({"Timestamp": NOW - timedelta(minutes=10 * k, seconds=az_i),
                                 "AvailabilityZone": az, "InstanceType": it, "ProductDescription": product,
                                 "SpotPrice": f"{0.03 + 0.001 * (k % 17) + 0.1 * it_i + (0.5 if product == 'Windows' else 0):.6f}"})
    rows.append({"Timestamp": NOW - timedelta(days=95), "AvailabilityZone": "us-east-1a", "InstanceType": "r4.large",
                 "ProductDescription": "Linux/UNIX", "SpotPrice": "9.000000"})
    rows.append({"Timestamp": NOW, "AvailabilityZone": "us-east-1a", "InstanceType": "c5.large",  # not asked for
                 "ProductDescription": "Linux/UNIX", "SpotPrice": "0.020000"})
    rows.sort(key=lambda r: r["Timestamp"], reverse=True)  # the API answers newest first
    return rows


@pytest.fixture
def moto_ec2(monkeypatch: pytest.MonkeyPatch):
    """A real moto HTTP server whose DescribeSpotPriceHistory answers from ``_seeded_history``.

    This is the one mock in the price tests, and why: moto's own answer is fake and not seedable (every
    price "0.00001", every timestamp 2006-01-02, StartTime/EndTime/ProductDescriptions ignored; see
    the dependency notes, §2(b)). So its response handler is replaced in-process, before the server
    thread serves a request, by one that filters the seeded rows the way EC2 does and pages them with
    MaxResults/NextToken. Everything else (HTTP, the EC2 query protocol, botocore's paginator and
    parsing) is real.
    """
    from moto.core.responses import ActionResult
    from moto.ec2.responses.spot_instances import SpotInstances
    from moto.server import ThreadedMotoServer

    seeded = _seeded_history()
    calls: list[dict] = []

    def describe_spot_price_history(self):  # noqa: ANN001 - moto's handler signature
        args = {k: self._get_param(k) for k in ("InstanceTypes", "ProductDescriptions", "StartTime", "EndTime",
                                                 "MaxResults", "NextToken")}
        calls.append(args)
        start = args["StartTime"].replace(tzinfo=timezone.utc)
        end = args["EndTime"].replace(tzinfo=timezone.utc)
        rows = [r for r in seeded if r["InstanceType"] in args["InstanceTypes"]
                and r["ProductDescription"] in args["ProductDescriptions"] and start <= r["Timestamp"] <= end]
        offset, size = int(args["NextToken"] or 0), int(args["MaxResults"] or 1000)
        page = [{**r, "Timestamp": r["Timestamp"].strftime("%Y-%m-%dT%H:%M:%S.000Z")} for r in rows[offset:offset + size]]
        result = {"SpotPriceHistory": page}
        if offset + size < len(rows):
            result["NextToken"] = str(offset + size)
        return ActionResult(result)

    monkeypatch.setattr(SpotInstances, "describe_spot_price_history", describe_spot_price_history)
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(key, value)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://127.0.0.1:{port}", seeded, calls
    finally:
        server.stop()


@pytest.mark.server
def test_fetch_pages_through_and_writes_canonical(tmp_path: Path, moto_ec2, capsys, monkeypatch) -> None:
    endpoint, seeded, calls = moto_ec2
    out = tmp_path / "sub" / "fetched.csv.gz"
    before = datetime.now(timezone.utc)  # not NOW (import time): a loaded machine may run this minutes later
    code, stdout, err = run(["prices", "fetch", "--region", "us-east-1", "--instance-types", "r4.large,m4.2xlarge",
                             "--days", "3", "--product-description", "Linux/UNIX", "--out", str(out),
                             "--endpoint-url", endpoint, "--page-size", "100"], capsys, monkeypatch)
    after = datetime.now(timezone.utc)
    assert code == 0, err
    assert len(calls) > 1 and all(c["MaxResults"] == 100 for c in calls)  # really paginated
    assert calls[1]["NextToken"] == "100"
    start = calls[0]["StartTime"].replace(tzinfo=timezone.utc)
    assert before - timedelta(days=3, seconds=1) <= start <= after - timedelta(days=3) + timedelta(seconds=1)
    expected = [r for r in seeded if r["InstanceType"] in ("r4.large", "m4.2xlarge")
                and r["ProductDescription"] == "Linux/UNIX" and r["Timestamp"] >= start]
    got = read_prices(out)
    assert load_report(got).layout == "canonical"
    assert len(got) == len(expected) > 300 and f"wrote {len(expected):,} records (6 markets, {len(calls)} API pages" in stdout
    want = pd.DataFrame({"timestamp": pd.to_datetime([r["Timestamp"] for r in expected], utc=True),
                         "availability_zone": [r["AvailabilityZone"] for r in expected],
                         "instance_type": [r["InstanceType"] for r in expected],
                         "price": [float(r["SpotPrice"]) for r in expected]})
    want = want.sort_values(["timestamp", "availability_zone", "instance_type"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(got[want.columns].astype({"availability_zone": object, "instance_type": object}),
                                  want.astype({"timestamp": "datetime64[ns, UTC]", "availability_zone": object,
                                               "instance_type": object}))
    assert set(got["region"]) == {"us-east-1"} and set(got["product_description"]) == {"Linux/UNIX"}


@pytest.mark.server
def test_fetch_nothing_found_is_an_error(tmp_path: Path, moto_ec2, capsys, monkeypatch) -> None:
    endpoint, _, _ = moto_ec2
    code, _, err = run(["prices", "fetch", "--region", "us-east-1", "--instance-types", "p3.16xlarge", "--days", "90",
                        "--out", str(tmp_path / "o.csv"), "--endpoint-url", endpoint], capsys, monkeypatch)
    assert code == 2 and err.startswith("error: no spot prices for p3.16xlarge (Linux/UNIX) in us-east-1 since")
    assert not (tmp_path / "o.csv").exists()
