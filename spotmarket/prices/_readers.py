"""Read spot price history from every common layout into the canonical table, and write it back.

The layout is detected from the content (never from the file name); plain, gzip, xz and bz2 files are
detected by their magic bytes. The supported layouts (``LAYOUTS``) are described in ``_layouts``, which
detects and parses them; ``_validate`` checks the values. This module builds the canonical table.

Rules: nothing is dropped silently. Exact duplicate records (same instant, market and price,
after parsing) are dropped and counted; two different prices for one market at one instant are an error.
Product-description filtering is explicit and counted, see :func:`read_prices`. Every error names the file
and the line.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path

import numpy as np
import pandas as pd

from spotmarket.errors import PriceDataError
from spotmarket.prices._history import CANONICAL_COLUMNS
from spotmarket.prices._layouts import _OS_TO_PRODUCT, _frame_from_records, _parse, _Raw, _read_bytes
from spotmarket.prices._validate import _codes, _drop_blank_lines, _parse_prices, _parse_times

#: ``product_description`` value that keeps every product description.
ALL_PRODUCTS = "all"
VPC_SUFFIX = " (Amazon VPC)"


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadReport:
    """What :func:`read_prices` read, kept and dropped (``df.attrs["load_report"]``).

    Attributes
    ----------
    path : str
    layout : str
        One of ``LAYOUTS``.
    records_read : int
        Price records in the file (lines or JSON records, not counting a header or blank lines).
    duplicates_dropped : int
        Exact duplicate records dropped (same instant, market and price).
    filtered_out : dict of str to int
        Records dropped by the product-description filter, per product description.
    records_kept : int
        Rows of the returned table: ``records_read - duplicates_dropped - sum(filtered_out)``.
    blank_lines : int
        Empty lines skipped (not records).
    timestamps_assumed_utc : int
        Records whose timestamp had no UTC offset and was read as UTC (AWS reports UTC).
    ignored_columns : tuple of str
        Columns of the file that the canonical table does not use.
    notes : tuple of str
        Every other choice the reader made, in words.
    """

    path: str
    layout: str
    records_read: int
    duplicates_dropped: int
    filtered_out: dict[str, int] = field(default_factory=dict)
    records_kept: int
    blank_lines: int = 0
    timestamps_assumed_utc: int = 0
    ignored_columns: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def n_filtered(self) -> int:
        """Records dropped by the product-description filter, all descriptions together."""
        return sum(self.filtered_out.values())

    def summary(self) -> str:
        """One human-readable paragraph.

        Returns
        -------
        str
            What was read, dropped, filtered and kept, and the reader's notes.
        """
        parts = [f"{self.path}: layout {self.layout}; {self.records_read:,} records read, "
                 f"{self.duplicates_dropped:,} exact duplicates dropped"]
        if self.filtered_out:
            what = ", ".join(f"{k!r} {v:,}" for k, v in sorted(self.filtered_out.items()))
            parts.append(f"{self.n_filtered:,} filtered out by product description ({what})")
        parts.append(f"{self.records_kept:,} kept")
        text = "; ".join(parts) + "."
        extra = list(self.notes)
        if self.blank_lines:
            extra.append(f"{self.blank_lines} blank lines skipped")
        if self.timestamps_assumed_utc:
            extra.append(f"{self.timestamps_assumed_utc:,} timestamps without offset read as UTC")
        if self.ignored_columns:
            extra.append(f"ignored columns: {', '.join(self.ignored_columns)}")
        return text + ("" if not extra else " " + " ".join(e.rstrip(".") + "." for e in extra))


# -- the canonical table ------------------------------------------------------------------------------
def _select_products(present: set[str], product_description: object) -> tuple[set[str], str | None]:
    """Product descriptions to keep and a note, given the ``product_description`` argument."""
    if product_description is None:
        drop = {p for p in present if not p.endswith(VPC_SUFFIX) and p + VPC_SUFFIX in present}
        if not drop:
            return present, None
        return present - drop, (
            "EC2-Classic product descriptions " + ", ".join(repr(p) for p in sorted(drop))
            + " dropped because their '(Amazon VPC)' twins are present (the default; "
            "product_description='all' keeps them)")
    if product_description == ALL_PRODUCTS:
        return present, None
    wanted = {product_description} if isinstance(product_description, str) else {str(p) for p in product_description}
    return present & wanted, f"kept product descriptions {sorted(wanted)} only"


def _canonical(path: Path, raw: _Raw, product_description: object) -> tuple[pd.DataFrame, LoadReport]:
    n_blank = _drop_blank_lines(raw)
    frame = raw.frame
    n = len(frame)
    if n == 0:
        raise PriceDataError(f"{path}: the file is empty (no price records)")
    notes = list(raw.notes)
    az, az_u = _codes(path, raw, frame["availability_zone"], "availability_zone")
    it, it_u = _codes(path, raw, frame["instance_type"], "instance_type")
    pr, pr_u = _codes(path, raw, frame["product_description"], "product_description")
    if "region" in frame.columns:
        rg, rg_u = _codes(path, raw, frame["region"], "region")
    t_ns, naive = _parse_times(path, raw, frame["timestamp"])
    price = _parse_prices(path, raw, frame["price"])
    if raw.product_from_os:
        mapped = np.array([_OS_TO_PRODUCT.get(p, p) for p in pr_u], dtype=object)
        for k in np.flatnonzero(mapped != pr_u):
            notes.append(f"OS label {pr_u[k]!r} read as product description {mapped[k]!r} "
                         f"({int((pr == k).sum()):,} records; EC2-Classic vs VPC was not recorded)")
        pr_u, remap = np.unique(mapped, return_inverse=True)
        pr = remap[pr]
    az_region = np.array([a[:-1] if a[-1:].isalpha() else a for a in az_u], dtype=object)
    if "region" in frame.columns:
        pairs = np.unique(rg * len(az_u) + az)
        for pair in pairs:
            r, a = rg_u[pair // len(az_u)], az_u[pair % len(az_u)]
            if not a.startswith(r):
                i = int(np.flatnonzero((rg == pair // len(az_u)) & (az == pair % len(az_u)))[0])
                raise PriceDataError(f"{path}: {raw.line_of(i)}: availability zone {a!r} is not in region {r!r}")
        region_u, region = rg_u, rg
    else:
        region_u, region = np.unique(az_region, return_inverse=True)
        region = region[az]
    # sort by (timestamp, AZ, type, product, price): duplicates and conflicts become neighbours
    order = np.lexsort((price, pr, it, az, t_ns))
    ts, az_s, it_s, pr_s, p_s = t_ns[order], az[order], it[order], pr[order], price[order]
    same_key = np.zeros(n, dtype=bool)
    same_key[1:] = (ts[1:] == ts[:-1]) & (az_s[1:] == az_s[:-1]) & (it_s[1:] == it_s[:-1]) & (pr_s[1:] == pr_s[:-1])
    dup = same_key.copy()
    dup[1:] &= p_s[1:] == p_s[:-1]
    conflict = same_key & ~dup
    if conflict.any():
        j = int(np.flatnonzero(conflict)[0])
        a, b = sorted((int(order[j - 1]), int(order[j])))
        market = f"{az_u[az_s[j]]}/{it_u[it_s[j]]}/{pr_u[pr_s[j]]}"
        raise PriceDataError(
            f"{path}: {raw.line_of(a)} and {raw.line_of(b)}: market {market} has two different prices at "
            f"{pd.Timestamp(int(ts[j]), tz='UTC')}: {price[a]!r} and {price[b]!r} USD/h"
        )
    n_dup = int(dup.sum())
    keep_products, note = _select_products({str(p) for p in pr_u}, product_description)
    if not keep_products:
        raise PriceDataError(f"{path}: no records with product description {product_description!r}; "
                             f"the file has {[str(p) for p in pr_u]}")
    if note:
        notes.append(note)
    keep_code = np.array([p in keep_products for p in pr_u])
    dropped = np.bincount(pr_s[~dup & ~keep_code[pr_s]], minlength=len(pr_u))
    filtered_out = {str(pr_u[c]): int(k) for c, k in enumerate(dropped) if k}
    sel = ~dup & keep_code[pr_s]
    rows = order[sel]

    def strings(uniques: np.ndarray, codes: np.ndarray) -> pd.Series:
        return pd.Series(pd.Categorical.from_codes(codes, categories=pd.Index(uniques, dtype="str"))).astype("str")

    table = pd.DataFrame({
        "timestamp": pd.DatetimeIndex(ts[sel].view("datetime64[ns]")).tz_localize("UTC"),
        "region": strings(region_u, region[rows]),
        "availability_zone": strings(az_u, az_s[sel]),
        "instance_type": strings(it_u, it_s[sel]),
        "product_description": strings(pr_u, pr_s[sel]),
        "price": p_s[sel],
    })
    report = LoadReport(path=str(path), layout=raw.layout, records_read=n, duplicates_dropped=n_dup,
                        filtered_out=filtered_out, records_kept=len(table), blank_lines=n_blank,
                        timestamps_assumed_utc=naive, ignored_columns=raw.ignored_columns, notes=tuple(notes))
    table.attrs["load_report"] = report
    table.attrs["duplicates_dropped"] = n_dup
    return table, report


def read_prices(path: str | PathLike[str], *, product_description: str | Sequence[str] | None = None) -> pd.DataFrame:
    """Read a spot price file of any supported layout into the canonical table.

    Parameters
    ----------
    path : str or path-like
        A price file: plain, gzip, xz or bz2; the layout is detected from the content (``LAYOUTS``).
    product_description : str, sequence of str, or None, default None
        Which product descriptions to keep. ``None``: all, except that an EC2-Classic description
        (``"Linux/UNIX"``) is dropped when its ``"(Amazon VPC)"`` twin is also in the file (the two are
        separate markets with separate prices; the VPC one is what today's instances run in). ``"all"``:
        keep everything. A string or a list: keep exactly those. Dropped records are counted per
        description in the report.

    Returns
    -------
    pandas.DataFrame
        Columns ``CANONICAL_COLUMNS``: ``timestamp`` (datetime64[ns, UTC], the time the price took
        effect), ``region``, ``availability_zone``, ``instance_type``, ``product_description`` (str) and
        ``price`` (float64, USD per instance-hour); sorted by (timestamp, availability_zone, instance_type,
        product_description); index ``0..n-1``. ``df.attrs["load_report"]`` is a :class:`LoadReport`,
        ``df.attrs["duplicates_dropped"]`` the number of exact duplicate records dropped.

    Raises
    ------
    PriceDataError
        Naming the file and the line: the file is missing, damaged or empty; the layout is unknown;
        columns are missing; a value is missing; a timestamp does not parse; a price is not a finite
        number or is negative; a row has too many fields; one market has two different prices at one
        instant; the product filter leaves nothing.

    Examples
    --------
    >>> df = read_prices("data/spot_prices/us-east-1_2015.csv.gz")  # doctest: +SKIP
    >>> df.attrs["load_report"].records_read                                  # doctest: +SKIP
    274099
    """
    p = Path(path)
    raw = _parse(p, _read_bytes(p))
    table, _ = _canonical(p, raw, product_description)
    return table


def load_report(table: pd.DataFrame) -> LoadReport:
    """The :class:`LoadReport` of a table returned by :func:`read_prices`.

    Parameters
    ----------
    table : pandas.DataFrame
        A table returned by :func:`read_prices` (the report rides in ``table.attrs``).

    Returns
    -------
    LoadReport

    Raises
    ------
    PriceDataError
        If the table did not come from :func:`read_prices` (pandas keeps ``attrs`` through most
        operations, but not all).
    """
    report = table.attrs.get("load_report")
    if not isinstance(report, LoadReport):
        raise PriceDataError("this price table carries no load report (it was not made by read_prices)")
    return report


def write_prices(table: pd.DataFrame, path: str | PathLike[str]) -> Path:
    """Write a canonical table as CSV (gzip if the name ends in ``.gz``) that :func:`read_prices` reads back.

    Parameters
    ----------
    table : pandas.DataFrame
        Canonical columns (``CANONICAL_COLUMNS``); ``timestamp`` tz-aware, ``price`` USD per hour.
    path : str or path-like

    Returns
    -------
    pathlib.Path
        The path written.

    Raises
    ------
    PriceDataError
        If a canonical column is missing or the timestamps are not tz-aware.
    """
    missing = [c for c in CANONICAL_COLUMNS if c not in table.columns]
    if missing:
        raise PriceDataError(f"cannot write prices to {path}: columns {missing} are missing")
    ts = table["timestamp"]
    if not isinstance(ts.dtype, pd.DatetimeTZDtype):
        raise PriceDataError(f"cannot write prices to {path}: 'timestamp' must be tz-aware UTC, not {ts.dtype}")
    out = table[CANONICAL_COLUMNS].copy()
    out["timestamp"] = ts.dt.tz_convert("UTC")
    p = Path(path)
    compression = {"method": "gzip", "mtime": 0} if p.name.endswith(".gz") else None
    out.to_csv(p, index=False, compression=compression, lineterminator="\n")
    return p


def records_to_table(records: Iterable[dict], *, source: str = "<records>") -> pd.DataFrame:
    """Canonical table from API records, as boto3's ``describe_spot_price_history`` returns them.

    Parameters
    ----------
    records : iterable of dict
        Keys ``AvailabilityZone, InstanceType, ProductDescription, SpotPrice, Timestamp`` (or their
        canonical names); ``Timestamp`` a tz-aware ``datetime`` (boto3) or an ISO-8601 string,
        ``SpotPrice`` USD per hour as a string or number.
    source : str
        Name used in error messages.

    Returns
    -------
    pandas.DataFrame
        Canonical table as from :func:`read_prices`, every product description kept.

    Raises
    ------
    PriceDataError
        As :func:`read_prices`, naming "record N".
    """
    recs = list(records)
    if not recs:
        raise PriceDataError(f"{source}: no price records")
    frame, ignored = _frame_from_records(Path(source), recs)
    raw = _Raw(frame, lambda i: f"record {i + 1}", "aws-json", ignored_columns=tuple(ignored))
    table, _ = _canonical(Path(source), raw, ALL_PRODUCTS)
    return table