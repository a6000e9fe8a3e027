"""Load a price file into a :class:`~revpred.prices.PriceHistory` (the one door RevPred uses).

The project's readers (``revpred.prices._readers.read_prices``, issue 2) are preferred when they exist.
Until then a small fallback reads the two bundled layouts:

- ``us-east-1_2015.csv.gz`` (``datetime, instance_type, os, region, availability_zone, price``): every
  record gets ``product_description = "Linux/UNIX"`` (the collector's ``os = Linux``; see the data README);
- ``eu-west-1_2021-08.csv.gz`` (``record_type, price, timestamp, instance_type, product_description,
  availability_zone, timestamp_utc``).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from revpred.errors import PriceDataError
from revpred.prices import DEFAULT_PRODUCT, PriceHistory


def _fallback_read(path: Path) -> pd.DataFrame:
    try:
        raw = pd.read_csv(path)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise PriceDataError(f"{path}: cannot read as CSV ({exc})") from None
    if {"datetime", "instance_type", "availability_zone", "price"} <= set(raw.columns):
        ts = pd.to_datetime(raw["datetime"], utc=True)
        product = raw["product_description"] if "product_description" in raw else DEFAULT_PRODUCT
    elif {"timestamp_utc", "instance_type", "availability_zone", "price", "product_description"} <= set(raw.columns):
        ts = pd.to_datetime(raw["timestamp_utc"], utc=True)
        product = raw["product_description"]
    else:
        raise PriceDataError(f"{path}: unknown price layout (columns {list(raw.columns)})")
    table = pd.DataFrame(
        {
            "timestamp": ts,
            "region": raw["availability_zone"].astype(str).str[:-1],
            "availability_zone": raw["availability_zone"].astype(str),
            "instance_type": raw["instance_type"].astype(str),
            "product_description": product,
            "price": pd.to_numeric(raw["price"], errors="raise").astype(float),
        }
    )
    return table.drop_duplicates().sort_values("timestamp", kind="stable").reset_index(drop=True)


def read_price_table(path: str | Path) -> pd.DataFrame:
    """Canonical price table of ``path`` (``revpred.prices`` layout; USD per instance-hour, UTC).

    Uses ``revpred.prices._readers.read_prices`` when that module exists, else the fallback above.

    Raises
    ------
    PriceDataError
        If the file is missing or its layout is unknown.
    """
    p = Path(path)
    if not p.is_file():
        raise PriceDataError(f"price file {p} does not exist")
    try:
        from revpred.prices._readers import read_prices  # issue 2
    except ImportError:
        return _fallback_read(p)
    return read_prices(p)


def load_history(path: str | Path) -> PriceHistory:
    """:class:`PriceHistory` of every market in the file at ``path``."""
    return PriceHistory(read_price_table(path))


def resolve_prices_path(path: str | Path | None) -> Path:
    """``--prices`` value, or the project's lookup (``revpred.prices._locate``) when it is omitted.

    Raises
    ------
    PriceDataError
        If no path is given and no lookup is available or it finds nothing.
    """
    if path is not None:
        return Path(path)
    try:
        from revpred.prices import _locate  # issue 2
    except ImportError:
        raise PriceDataError("no --prices PATH given (and no default price lookup is installed)") from None
    for name in ("locate_prices", "find_prices", "locate"):
        fn = getattr(_locate, name, None)
        if callable(fn):
            return Path(fn(None))
    raise PriceDataError("no --prices PATH given")
