"""Value checks of parsed records, each error naming the file and the line (or record).

A failed check raises :class:`~spotmarket.errors.PriceDataError` for the first bad record, saying how many
more there are and where the next one is. Blank lines are dropped (and counted) before the checks.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from spotmarket.errors import PriceDataError
from spotmarket.prices._layouts import _Raw

_FAST_TIME_FORMAT = "%Y-%m-%d %H:%M:%S%z"
_HAS_OFFSET = r"(?:[zZ]|[+-]\d\d:?\d\d)$"


def _fail(path: Path, raw: _Raw, mask: np.ndarray, what: Callable[[int], str]) -> None:
    bad = np.flatnonzero(mask)
    if bad.size:
        i = int(bad[0])
        more = f" ({bad.size - 1} more such records, e.g. {raw.line_of(int(bad[1]))})" if bad.size > 1 else ""
        raise PriceDataError(f"{path}: {raw.line_of(i)}: {what(i)}{more}")


def _codes(path: Path, raw: _Raw, s: pd.Series, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes and sorted, stripped unique values of a string column; missing values raise."""
    codes, uniques = pd.factorize(s)
    stripped = np.array([str(u).strip() for u in uniques], dtype=object)
    values, inverse = np.unique(np.append(stripped, ""), return_inverse=True)
    empty_code = inverse[-1]
    codes = np.where(codes < 0, empty_code, inverse[:-1][np.maximum(codes, 0)])
    _fail(path, raw, codes == empty_code, lambda i: f"missing value in column {name!r}")
    values = np.delete(values, empty_code)  # drop the "" slot so codes index real values only
    codes = codes - (codes > empty_code)
    return codes.astype(np.int64), values


def _parse_times(path: Path, raw: _Raw, s: pd.Series) -> tuple[np.ndarray, int]:
    """Int64 nanoseconds since the epoch (UTC) and the number of timestamps without an offset."""
    try:
        t = pd.to_datetime(s, format=_FAST_TIME_FORMAT, utc=True)
        if not t.isna().any():  # "" parses as NaT here
            return _to_ns(path, raw, t, s), 0
    except (ValueError, TypeError, OverflowError):
        pass
    values = s.to_numpy(dtype=object)
    _fail(path, raw, np.array([str(v).strip() == "" for v in values]), lambda i: "missing value in column 'timestamp'")
    t = pd.to_datetime(s, format="ISO8601", utc=True, errors="coerce")
    _fail(path, raw, t.isna().to_numpy(), lambda i: f"timestamp {values[i]!r} is not a date and time")
    naive = int((~s.str.strip().str.contains(_HAS_OFFSET, regex=True)).sum())
    return _to_ns(path, raw, t, s), naive


def _to_ns(path: Path, raw: _Raw, t: pd.Series, s: pd.Series) -> np.ndarray:
    lo, hi = pd.Timestamp("1970-01-01", tz="UTC"), pd.Timestamp("2200-01-01", tz="UTC")
    if t.min() < lo or t.max() >= hi:
        _fail(path, raw, ((t < lo) | (t >= hi)).to_numpy(),
              lambda i: f"timestamp {s.iloc[i]!r} is outside 1970 .. 2200 (not a spot price record)")
    return t.to_numpy(dtype="datetime64[ns]").view("int64")


#: Largest believable spot price, USD per instance-hour. The dearest EC2 instances list at about 220 USD/h
#: on demand, and bidding-era spot prices peaked at 10x on demand; anything above this is a unit error.
MAX_PRICE_USD_PER_HOUR = 10_000.0


def _parse_prices(path: Path, raw: _Raw, s: pd.Series) -> np.ndarray:
    """Float64 USD per hour; non-numeric, non-finite, negative and absurd (> MAX_PRICE_USD_PER_HOUR) prices raise."""
    if s.dtype == np.float64:
        p = s.to_numpy()
        shown = lambda i: repr(str(p[i]))  # noqa: E731
    else:
        text = s.to_numpy(dtype=object)
        _fail(path, raw, np.array([str(v).strip() == "" for v in text]), lambda i: "missing value in column 'price'")
        p = pd.to_numeric(s.str.strip(), errors="coerce").to_numpy(dtype=np.float64)
        shown = lambda i: repr(text[i])  # noqa: E731
    _fail(path, raw, ~np.isfinite(p), lambda i: f"price {shown(i)} is not a number (USD per hour)")
    _fail(path, raw, p < 0, lambda i: f"price {shown(i)} is negative")
    _fail(path, raw, p > MAX_PRICE_USD_PER_HOUR, lambda i: f"price {shown(i)} is above {MAX_PRICE_USD_PER_HOUR:,.0f} "
          "USD per hour, far more than any EC2 instance has ever cost (a unit or parsing error?)")
    return p


def _drop_blank_lines(raw: _Raw) -> int:
    frame = raw.frame
    ts = frame["timestamp"]
    if ts.dtype == np.float64 or not (ts == "").any():
        return 0
    blank = np.ones(len(frame), dtype=bool)
    for c in frame.columns:
        blank &= (frame[c] == "").to_numpy() if frame[c].dtype != np.float64 else frame[c].isna().to_numpy()
    if not blank.any():
        return 0
    keep = np.flatnonzero(~blank)
    raw.frame = frame.iloc[keep].reset_index(drop=True)
    old = raw.line_of
    raw.line_of = lambda i: old(int(keep[i]))
    return int(blank.sum())
