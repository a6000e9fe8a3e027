"""``spottune prices info|fetch``.

``info`` reads a price file of any supported layout and summarises it per market. ``fetch`` collects
history from the EC2 API (``describe_spot_price_history``, paginated) and writes the canonical layout.
Errors are one line on stderr and exit code 2 (``spottune.cli.main``).
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import click
import numpy as np
import pandas as pd

from spotmarket.prices import (
    COLLECTION_GAP_S,
    GAP_MEDIAN_RATIO,
    PriceHistory,
    load_report,
    locate_prices,
    read_prices,
    records_to_table,
    write_prices,
)

#: The EC2 API keeps this many days of spot price history.
MAX_FETCH_DAYS = 90
DEFAULT_FETCH_PRODUCT = "Linux/UNIX"
_SHOWN_MARKETS = 40
#: ``prices info`` reports, per market, stretches without a record of that market longer than this (seconds).
GAP_S = 86400.0
#: AWS region names: us-east-1, eu-west-1, ap-southeast-2, us-gov-west-1, cn-north-1, ...
_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-[0-9]+")


@click.group(help="Inspect and collect spot price history.")
def prices() -> None:
    pass


def _info_dict(history: PriceHistory) -> dict:
    from spotmarket.prices import to_timestamp

    report = load_report(history.table)
    per_market = history.describe()
    markets = []
    for row, s in zip(per_market.itertuples(index=False), history):
        idx = np.flatnonzero(np.diff(s.times_s) > GAP_S)
        gaps = [(float(s.times_s[i]), float(s.times_s[i + 1])) for i in idx]
        longest = max(gaps, key=lambda g: g[1] - g[0]) if gaps else None
        markets.append({
            "market": row.market,
            "availability_zone": s.market.availability_zone,
            "instance_type": s.market.instance_type,
            "product_description": s.market.product_description,
            "first_utc": row.first_utc.isoformat(),
            "last_utc": row.last_utc.isoformat(),
            "records": int(row.records),
            "price_changes": int(row.changes),
            "min_usd_per_hour": row.min_usd_per_hour,
            "median_usd_per_hour": row.median_usd_per_hour,
            "max_usd_per_hour": row.max_usd_per_hour,
            "gaps_over_1_day": len(gaps),
            "longest_gap_days": None if longest is None else (longest[1] - longest[0]) / 86400.0,
            "longest_gap_utc": None if longest is None else [to_timestamp(longest[0]).isoformat(),
                                                             to_timestamp(longest[1]).isoformat()],
        })
    ts = history.table["timestamp"]
    return {
        "path": report.path,
        "layout": report.layout,
        "records_read": report.records_read,
        "duplicates_dropped": report.duplicates_dropped,
        "filtered_out": dict(sorted(report.filtered_out.items())),
        "records_kept": report.records_kept,
        "blank_lines": report.blank_lines,
        "timestamps_assumed_utc": report.timestamps_assumed_utc,
        "ignored_columns": list(report.ignored_columns),
        "notes": list(report.notes),
        "n_markets": len(history),
        "instance_types": sorted({m.instance_type for m in history.markets}),
        "availability_zones": sorted({m.availability_zone for m in history.markets}),
        "product_descriptions": sorted({m.product_description for m in history.markets}),
        "first_utc": ts.min().isoformat(),
        "last_utc": ts.max().isoformat(),
        "collection_gaps_utc": [[to_timestamp(a).isoformat(), to_timestamp(b).isoformat()]
                                for a, b in history.collection_gaps()],
        "markets": markets,
    }


def _print_info(info: dict, all_markets: bool) -> None:
    echo = click.echo
    echo(f"file:        {info['path']}")
    echo(f"layout:      {info['layout']}")
    filtered = sum(info["filtered_out"].values())
    line = (f"records:     {info['records_read']:,} read, {info['duplicates_dropped']:,} exact duplicates dropped, "
            f"{filtered:,} filtered out by product description, {info['records_kept']:,} kept")
    echo(line)
    for product, n in info["filtered_out"].items():
        echo(f"  filtered out: {n:,} x {product!r}")
    echo(f"markets:     {info['n_markets']:,} ({len(info['instance_types'])} instance types x "
         f"{len(info['availability_zones'])} availability zones x {len(info['product_descriptions'])} product "
         f"descriptions: {', '.join(info['product_descriptions'])})")
    echo(f"time range:  {info['first_utc']} .. {info['last_utc']}")
    for note in info["notes"]:
        echo(f"note:        {note}")
    if info["blank_lines"]:
        echo(f"note:        {info['blank_lines']} blank lines skipped")
    if info["timestamps_assumed_utc"]:
        echo(f"note:        {info['timestamps_assumed_utc']:,} timestamps had no offset and were read as UTC")
    if info["ignored_columns"]:
        echo(f"note:        ignored columns: {', '.join(info['ignored_columns'])}")
    gappy = [m for m in info["markets"] if m["gaps_over_1_day"]]
    if gappy:
        worst = max(gappy, key=lambda m: m["longest_gap_days"])
        lo, hi = (t[:16].replace("T", " ") for t in worst["longest_gap_utc"])
        echo(f"gaps:        {len(gappy):,} of {len(info['markets']):,} markets have no record for more than a day "
             f"({sum(m['gaps_over_1_day'] for m in gappy):,} gaps); longest: {worst['market']}, "
             f"{worst['longest_gap_days']:.1f} days ({lo} .. {hi} UTC); the price in force is carried over")
    else:
        echo("gaps:        none longer than a day")
    silences = [(pd.Timestamp(a), pd.Timestamp(b)) for a, b in info["collection_gaps_utc"]]
    if silences:
        lo, hi = max(silences, key=lambda g: g[1] - g[0])
        echo(f"silences:    {len(silences):,} collection gaps (no record in any market for far longer than usual, "
             f"PriceHistory.collection_gaps); longest {(hi - lo).total_seconds() / 3600:.1f} h ({lo:%Y-%m-%d %H:%M} .. "
             f"{hi:%Y-%m-%d %H:%M} UTC): missing data that a replay reads as flat prices")
    else:
        echo("silences:    no collection gap (no record in any market for far longer than usual)")
    shown = info["markets"] if all_markets else info["markets"][:_SHOWN_MARKETS]
    frame = pd.DataFrame([{
        "market": m["market"],
        "first (UTC)": m["first_utc"][:19].replace("T", " "),
        "last (UTC)": m["last_utc"][:19].replace("T", " "),
        "records": m["records"],
        "changes": m["price_changes"],
        "min $/h": m["min_usd_per_hour"],
        "median $/h": m["median_usd_per_hour"],
        "max $/h": m["max_usd_per_hour"],
        "gaps > 1 d": m["gaps_over_1_day"],
        "longest gap (d)": "-" if m["longest_gap_days"] is None else f"{m['longest_gap_days']:.1f}",
    } for m in shown])
    echo("")
    echo(frame.to_string(index=False))
    if len(shown) < len(info["markets"]):
        echo(f"... {len(info['markets']) - len(shown):,} more markets (--all-markets shows them; --json lists all)")


@prices.command("info", help="Summarise a price file: records, markets, time range, price changes and levels, "
                             "gaps of more than a day without a record in a market, and collection gaps: no record "
                             f"in any market for more than {COLLECTION_GAP_S / 3600:g} h and {GAP_MEDIAN_RATIO:g} "
                             "median intervals (missing data a replay reads as flat prices). "
                             "PATH may be a bare file name, looked up as data/spot_prices/README.md describes.")
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@click.option("--product-description", default=None, metavar="TEXT",
              help="Keep only this product description ('all' keeps every one). Default: all, except "
                   "EC2-Classic descriptions whose '(Amazon VPC)' twin is present.")
@click.option("--all-markets", is_flag=True, help=f"List every market (default: the first {_SHOWN_MARKETS}).")
def info(path: str, as_json: bool, product_description: str | None, all_markets: bool) -> None:
    table = read_prices(locate_prices(path), product_description=product_description)
    details = _info_dict(PriceHistory(table))
    if as_json:
        click.echo(json.dumps(details, indent=2))
    else:
        _print_info(details, all_markets)


def _split(values: str) -> list[str]:
    return [v.strip() for v in values.split(",") if v.strip()]


from spottune.backends.aws._prices import fetch_records  # noqa: E402 - one definition, shared with the aws backend


@prices.command("fetch", help="Collect spot price history from the EC2 API (at most 90 days back) and write it "
                              "in the canonical CSV layout (gzip if FILE ends in .gz).")
@click.option("--region", required=True, help="AWS region, e.g. us-east-1.")
@click.option("--instance-types", required=True, help="Comma-separated instance types, e.g. r4.large,m4.2xlarge.")
@click.option("--days", required=True, type=float, help="How many days back from now (0 < N <= 90).")
@click.option("--product-description", "product_descriptions", default=DEFAULT_FETCH_PRODUCT, show_default=True,
              help="Comma-separated product descriptions, e.g. 'Linux/UNIX,Linux/UNIX (Amazon VPC)'.")
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False), help="Output file.")
@click.option("--endpoint-url", default=None, help="EC2 endpoint (e.g. a local moto server); default: AWS.")
@click.option("--page-size", default=1000, show_default=True, type=click.IntRange(5, 1000),
              help="Records per API request.")
def fetch(region: str, instance_types: str, days: float, product_descriptions: str, out: str,
          endpoint_url: str | None, page_size: int) -> None:
    if not 0 < days <= MAX_FETCH_DAYS:
        raise click.BadParameter(
            f"{days:g} days is outside (0, {MAX_FETCH_DAYS}]: the EC2 API keeps only {MAX_FETCH_DAYS} days of "
            "spot price history", param_hint="'--days'")
    types = _split(instance_types)
    products = _split(product_descriptions)
    if not types:
        raise click.BadParameter("give at least one instance type", param_hint="'--instance-types'")
    if not products:
        raise click.BadParameter("give at least one product description", param_hint="'--product-description'")
    if not _REGION.fullmatch(region):
        raise click.BadParameter(f"{region!r} is not an AWS region name such as us-east-1 or eu-west-1",
                                 param_hint="'--region'")
    import boto3  # the CLI is the I/O shell; nothing else in the price layer talks to AWS
    import botocore.exceptions

    end = datetime.now(timezone.utc)
    start = end - timedelta(days=days)
    try:
        client = boto3.client("ec2", region_name=region, endpoint_url=endpoint_url)
        records, pages = fetch_records(client, instance_types=types, product_descriptions=products,
                                       start_utc=start, end_utc=end, page_size=page_size)
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
        raise click.ClickException(f"describe_spot_price_history in {region} failed: {exc}") from None
    if not records:
        raise click.ClickException(
            f"no spot prices for {','.join(types)} ({', '.join(products)}) in {region} since {start:%Y-%m-%d %H:%M} UTC")
    table = records_to_table(records, source=f"describe_spot_price_history({region})")
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_prices(table, path)
    report = load_report(table)
    n_markets = table.groupby(["availability_zone", "instance_type", "product_description"]).ngroups
    click.echo(f"wrote {len(table):,} records ({n_markets} markets, {pages} API pages, "
               f"{report.duplicates_dropped:,} exact duplicates dropped) to {path}")
