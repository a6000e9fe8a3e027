"""On-demand prices from the AWS Price List API (``pricing.get_products``), cached on disk.

A live aws run asks it for the Linux, shared-tenancy, no-pre-installed-software on-demand price of each pool type in
the run's region; the answers are kept in ``$SPOTTUNE_CACHE/on_demand_prices.json`` (``spottune.cache.cache_dir``)
for :data:`CACHE_DAYS` days, so a second run asks nothing. Offline (or when the API refuses), the catalog's bundled
tables and ``--on-demand-prices FILE`` answer (docs/design/decisions.md IC1). The Price List API has endpoints in
us-east-1 (and ap-south-1, eu-central-1) only; the region of the *prices* is the ``regionCode`` filter.
Reference: https://docs.aws.amazon.com/aws-cost-management/latest/APIReference/API_pricing_GetProducts.html.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["CACHE_DAYS", "CACHE_FILE", "PRICING_REGION", "get_on_demand_prices", "parse_product"]

#: Region of the Price List API endpoint used.
PRICING_REGION = "us-east-1"
#: File name of the cache under ``spottune.cache.cache_dir()``.
CACHE_FILE = "on_demand_prices.json"
#: Days a cached price is used before it is asked again (AWS changes list prices rarely).
CACHE_DAYS = 7.0


def _filters(instance_type: str, region: str) -> list[dict[str, str]]:
    fixed = {"instanceType": instance_type, "regionCode": region, "operatingSystem": "Linux", "tenancy": "Shared",
             "preInstalledSw": "NA", "capacitystatus": "Used"}
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in fixed.items()]


def parse_product(item: str | dict[str, Any]) -> tuple[str, float] | None:
    """(instance type, on-demand USD per hour) of one ``PriceList`` entry, or None when it has no hourly USD price.

    Parameters
    ----------
    item : str or dict
        One entry of ``get_products``'s ``PriceList`` (a JSON string: ``product.attributes.instanceType`` and
        ``terms.OnDemand.<offer>.priceDimensions.<rate>.pricePerUnit.USD`` with ``unit`` ``Hrs``).

    Returns
    -------
    tuple of (str, float) or None
        The type and its price, USD per instance-hour (the first positive hourly rate).
    """
    doc = json.loads(item) if isinstance(item, str) else item
    itype = ((doc.get("product") or {}).get("attributes") or {}).get("instanceType")
    for offer in ((doc.get("terms") or {}).get("OnDemand") or {}).values():
        for dim in (offer.get("priceDimensions") or {}).values():
            usd = (dim.get("pricePerUnit") or {}).get("USD")
            if itype and usd is not None and str(dim.get("unit", "")).lower().startswith("hr") and float(usd) > 0:
                return str(itype), float(usd)
    return None


def _read_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_cache(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".prices-")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1, sort_keys=True)
    os.replace(tmp, path)  # atomic: a concurrent run reads the old or the new file, never half of one


def get_on_demand_prices(instance_types: Iterable[str], region: str, *, pricing: Any = None,
                         cache_path: str | os.PathLike[str] | None = None, now_s: float | None = None,
                         max_age_days: float = CACHE_DAYS) -> dict[str, float]:
    """Linux on-demand prices of ``instance_types`` in ``region`` from the Price List API, through the cache.

    Parameters
    ----------
    instance_types : iterable of str
        E.g. the pool's types.
    region : str
        Region of the prices, e.g. ``us-east-1``.
    pricing : botocore client, optional
        A ``pricing`` client; default: a new one in :data:`PRICING_REGION` (called only for types not cached).
    cache_path : path, optional
        Default ``spottune.cache.cache_dir() / CACHE_FILE``.
    now_s : float, optional
        Now, seconds since the epoch (for the cache's age); default the wall clock.
    max_age_days : float
        A cached price older than this is asked again.

    Returns
    -------
    dict
        Type -> USD per instance-hour, for the types the API prices (a type it does not price is left out).

    Raises
    ------
    botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError
        As the API answers (no credentials, access denied, no network); the caller falls back to the bundled tables.
    """
    from spottune.cache import cache_dir

    now = time.time() if now_s is None else float(now_s)
    path = Path(cache_path) if cache_path is not None else cache_dir() / CACHE_FILE
    cache = _read_cache(path)
    out: dict[str, float] = {}
    missing = []
    for it in dict.fromkeys(instance_types):
        hit = cache.get(f"{region}/{it}")
        if isinstance(hit, dict) and now - float(hit.get("fetched_s", 0)) < max_age_days * 86400.0:
            if hit.get("usd_per_hour") is not None:
                out[it] = float(hit["usd_per_hour"])
            continue
        missing.append(it)
    if not missing:
        return out
    if pricing is None:
        from spottune.backends.aws._session import client

        pricing = client("pricing", region=PRICING_REGION)
    for it in missing:
        price = None
        for page in pricing.get_paginator("get_products").paginate(ServiceCode="AmazonEC2",
                                                                   Filters=_filters(it, region)):
            for item in page.get("PriceList", []):
                got = parse_product(item)
                if got is not None and got[0] == it:
                    price = got[1] if price is None else min(price, got[1])
        cache[f"{region}/{it}"] = {"usd_per_hour": price, "fetched_s": now, "source": "pricing.get_products"}
        if price is not None:
            out[it] = price
    _write_cache(path, cache)
    return out
