"""Read spot price history from every common layout into the canonical table, and write it back.

The layout is detected from the content (never from the file name); plain, gzip, xz and bz2 files are
detected by their magic bytes. Supported layouts (``LAYOUTS``):

``canonical``
    CSV with header ``timestamp,region,availability_zone,instance_type,product_description,price``
    (what :func:`write_prices` and ``spottune prices fetch`` write).
``kaggle``
    Kaggle "AWS Spot Pricing Market" CSVs: no header, five fields ``timestamp, instance type,
    product description, availability zone, price``.
``os-csv``
    ``../shared/data/spot_prices/us-east-1_2015.csv.gz``: header ``datetime, instance_type, os, region,
    availability_zone, price``. The collector's ``os`` value ``Linux`` is read as product description
    ``Linux/UNIX`` (EC2-Classic vs VPC was not recorded); the report says so.
``ec2-tools-csv``
    ``../shared/data/spot_prices/eu-west-1_2021-08.csv.gz``: the legacy ``ec2-describe-spot-price-history``
    fields plus ``timestamp_utc``; ``timestamp_utc`` is used, the US-Pacific ``timestamp`` is ignored.
``ec2-tools-text``
    The legacy tool's own tab-separated output: ``SPOTINSTANCEPRICE price timestamp type product az``.
``aws-json``
    ``aws ec2 describe-spot-price-history`` JSON or a boto3 response dumped with ``json.dump(...,
    default=str)``: one or more documents (pages), each ``{"SpotPriceHistory": [...]}``, a list of pages,
    a list of records, or JSON lines.
``aws-text``
    ``aws ec2 describe-spot-price-history --output text``: ``SPOTPRICEHISTORY`` then the fields in the
    CLI's (alphabetical) key order ``AvailabilityZone, InstanceType, ProductDescription, SpotPrice,
    Timestamp``; a bare first line (the ``NextToken`` of a truncated answer) is ignored and noted.
``aws-csv`` / ``csv``
    Any CSV or TSV with a header whose names match the API names (``AvailabilityZone``, ``SpotPrice``,
    ...) or common aliases (``az``, ``spot_price``, ...). Extra columns are ignored and listed.

Rules (issue 2): nothing is dropped silently. Exact duplicate records (same instant, market and price,
after parsing) are dropped and counted; two different prices for one market at one instant are an error.
Product-description filtering is explicit and counted, see :func:`read_prices`. Every error names the file
and the line.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path

import numpy as np
import pandas as pd

from revpred.errors import PriceDataError
from revpred.prices._history import CANONICAL_COLUMNS

LAYOUTS = ("canonical", "kaggle", "os-csv", "ec2-tools-csv", "ec2-tools-text", "aws-json", "aws-text",
           "aws-csv", "csv")

#: ``product_description`` value that keeps every product description.
ALL_PRODUCTS = "all"
VPC_SUFFIX = " (Amazon VPC)"

_REQUIRED = ("timestamp", "availability_zone", "instance_type", "product_description", "price")
# normalized header name (lower case, no '_', '-', ' ') -> canonical column; earlier = preferred
_ALIASES: dict[str, tuple[str, ...]] = {
    "timestamp": ("timestamputc", "timestamp", "datetime", "time"),
    "availability_zone": ("availabilityzone", "az", "zone"),
    "instance_type": ("instancetype", "type"),
    "product_description": ("productdescription", "product", "os", "operatingsystem"),
    "price": ("price", "spotprice", "priceusdperhour"),
    "region": ("region",),
}
_API_NAMES = {"AvailabilityZone", "InstanceType", "ProductDescription", "SpotPrice", "Timestamp"}
# the collectors' OS labels that are not AWS product descriptions
_OS_TO_PRODUCT = {"Linux": "Linux/UNIX"}
_TEXT_FIELDS = {  # tab-separated text layouts: tag -> field names after the tag
    "SPOTPRICEHISTORY": ("aws-text", ("availability_zone", "instance_type", "product_description", "price", "timestamp")),
    "SPOTINSTANCEPRICE": ("ec2-tools-text", ("price", "timestamp", "instance_type", "product_description", "availability_zone")),
}
_FAST_TIME_FORMAT = "%Y-%m-%d %H:%M:%S%z"
_HAS_OFFSET = r"(?:[zZ]|[+-]\d\d:?\d\d)$"
_TIMESTAMP_START = re.compile(r"^\s*\d{4}-\d\d-\d\d[ T]\d\d:\d\d")


def _norm(name: str) -> str:
    return re.sub(r"[\s_\-]", "", str(name)).lower()


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
        """One human-readable paragraph."""
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


@dataclass(slots=True)
class _Raw:
    """Parsed but unvalidated records: string columns (``""`` = missing), one row per record."""

    frame: pd.DataFrame  # columns: _REQUIRED (+ region); price may already be float64
    line_of: Callable[[int], str]  # row position -> "line N"
    layout: str
    product_from_os: bool = False
    ignored_columns: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)


# -- bytes and layout detection ------------------------------------------------------------------------
def _read_bytes(path: Path) -> bytes:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise PriceDataError(f"{path}: no such price file") from None
    except IsADirectoryError:
        raise PriceDataError(f"{path}: is a directory, not a price file") from None
    try:
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        elif data[:6] == b"\xfd7zXZ\x00":
            data = lzma.decompress(data)
        elif data[:3] == b"BZh":
            data = bz2.decompress(data)
    except (OSError, EOFError, lzma.LZMAError, ValueError) as exc:
        raise PriceDataError(f"{path}: compressed file is damaged ({exc})") from None
    if data[:3] == b"\xef\xbb\xbf":
        data = data[3:]
    return data


def _first_line(data: bytes, offset: int = 0, number: int = 1) -> tuple[int, int, int, str]:
    """(1-based line number, start and end byte offsets, text) of the first non-blank line at or after
    ``offset`` (which is on line ``number``); text ``""`` if there is none."""
    while offset < len(data):
        end = data.find(b"\n", offset)
        end = len(data) if end < 0 else end
        line = data[offset:end]
        if line.strip():
            return number, offset, end, line.decode("utf-8", "replace").rstrip("\r")
        offset, number = end + 1, number + 1
    return number, len(data), len(data), ""


def _parse(path: Path, data: bytes) -> _Raw:
    number, offset, end, first = _first_line(data)
    if not first:
        raise PriceDataError(f"{path}: the file is empty (no price records)")
    stripped = first.lstrip()
    if stripped[:1] in ("[", "{"):
        return _parse_json(path, data.decode("utf-8", "replace"))
    tag = stripped.split("\t", 1)[0].strip()
    if tag in _TEXT_FIELDS:
        return _parse_text(path, data, number, offset, tag)
    if "\t" not in first and "," not in first and " " not in stripped.strip():
        nxt_number, nxt_offset, _, nxt = _first_line(data, end + 1, number + 1)
        if nxt.split("\t", 1)[0] == "SPOTPRICEHISTORY":  # truncated `--output text`: its NextToken comes first
            raw = _parse_text(path, data, nxt_number, nxt_offset, "SPOTPRICEHISTORY")
            raw.notes.append(f"line {number} (the NextToken of a truncated CLI answer) ignored: "
                             "the file may not hold the whole history asked for")
            return raw
    sep = "\t" if "\t" in first and "," not in first else ","
    fields = [f.strip().strip('"') for f in first.split(sep)]
    normalized = {_norm(f) for f in fields}
    known = {a for aliases in _ALIASES.values() for a in aliases}
    if normalized & known:
        return _parse_csv(path, data[offset:], number, sep, fields, header=True)
    if len(fields) == 5 and _TIMESTAMP_START.match(fields[0]):
        return _parse_csv(path, data[offset:], number, sep, fields, header=False)
    shown = first if len(first) <= 120 else first[:117] + "..."
    raise PriceDataError(
        f"{path}: line {number}: unknown price file layout (first line {shown!r}); supported: "
        + ", ".join(LAYOUTS)
    )


def _csv_layout(fields: Sequence[str], normalized: set[str]) -> str:
    if set(fields) >= set(CANONICAL_COLUMNS):
        return "canonical"
    if "recordtype" in normalized and "timestamputc" in normalized:
        return "ec2-tools-csv"
    if "os" in normalized and "datetime" in normalized:
        return "os-csv"
    if set(fields) >= _API_NAMES:
        return "aws-csv"
    return "csv"


def _map_header(path: Path, fields: Sequence[str], number: int) -> tuple[dict[int, str], list[str]]:
    """Column position -> canonical name, and ignored column names. Raises on missing columns."""
    by_norm: dict[str, int] = {}
    for i, f in enumerate(fields):
        by_norm.setdefault(_norm(f), i)
    mapping: dict[int, str] = {}
    missing = []
    for canon, aliases in _ALIASES.items():
        pos = next((by_norm[a] for a in aliases if a in by_norm), None)
        if pos is None:
            if canon != "region":
                missing.append(canon)
        else:
            mapping[pos] = canon
    if missing:
        raise PriceDataError(
            f"{path}: line {number}: missing columns {missing} (header has {list(fields)}; need "
            f"{list(_REQUIRED)} or their API names)"
        )
    ignored = [f for i, f in enumerate(fields) if i not in mapping]
    return mapping, ignored


def _read_csv(path: Path, body: bytes, number: int, sep: str, header: bool, price_pos: int | None) -> pd.DataFrame:
    """All fields of ``body`` (which starts at file line ``number``) as strings; the price column as
    float64 when every value parses (the fast path), else as strings too."""
    # the first line (header or first record) fixes the number of fields: longer rows are errors
    kwargs = dict(sep=sep, header=0 if header else None, na_filter=False, skip_blank_lines=False,
                  skipinitialspace=True, engine="c")
    try:
        try:
            if price_pos is None:
                raise ValueError("no fast path")
            ncols = len(next(iter(io.BytesIO(body))).split(sep.encode()))
            dtypes = {i: ("float64" if i == price_pos else "str") for i in range(ncols)}
            return pd.read_csv(io.BytesIO(body), dtype=dtypes, **kwargs)
        except ValueError as exc:
            if isinstance(exc, pd.errors.ParserError):
                raise
            return pd.read_csv(io.BytesIO(body), dtype="str", **kwargs)
    except pd.errors.ParserError as exc:
        match = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", str(exc))
        if match:
            expected, line, saw = (int(g) for g in match.groups())
            raise PriceDataError(f"{path}: line {line + number - 1}: expected {expected} fields, saw {saw}") from None
        raise PriceDataError(f"{path}: not readable as CSV ({' '.join(str(exc).split())})") from None
    except UnicodeDecodeError as exc:
        raise PriceDataError(f"{path}: not UTF-8 text ({exc})") from None


def _parse_csv(path: Path, body: bytes, number: int, sep: str, fields: list[str], header: bool) -> _Raw:
    if header:
        mapping, ignored = _map_header(path, fields, number)
        layout = _csv_layout(fields, {_norm(f) for f in fields})
        first_data = number + 1
    else:
        mapping = dict(enumerate(["timestamp", "instance_type", "product_description", "availability_zone", "price"]))
        ignored, layout, first_data = [], "kaggle", number
    price_pos = next(pos for pos, canon in mapping.items() if canon == "price")
    frame = _read_csv(path, body, number, sep, header, price_pos)
    frame = frame.iloc[:, sorted(mapping)]
    frame.columns = [mapping[i] for i in sorted(mapping)]
    raw = _Raw(frame, lambda i: f"line {first_data + i}", layout, ignored_columns=tuple(ignored))
    if header:
        src = {canon: fields[pos] for pos, canon in mapping.items()}
        raw.product_from_os = _norm(src["product_description"]) in ("os", "operatingsystem")
        if _norm(src["timestamp"]) == "timestamputc" and any(_norm(f) == "timestamp" for f in fields):
            raw.notes.append("timestamps from column 'timestamp_utc'; the local-time column 'timestamp' is ignored")
    return raw


def _parse_text(path: Path, data: bytes, number: int, offset: int, tag: str) -> _Raw:
    layout, names = _TEXT_FIELDS[tag]
    frame = _read_csv(path, data[offset:], number, "\t", False, None)
    if frame.shape[1] != len(names) + 1:
        raise PriceDataError(f"{path}: line {number}: {layout} records have {len(names) + 1} tab-separated fields, "
                             f"found {frame.shape[1]}")
    tags = frame.iloc[:, 0].str.strip()
    wrong = ((tags != tag) & (tags != "")).to_numpy()
    if wrong.any():
        i = int(np.flatnonzero(wrong)[0])
        raise PriceDataError(f"{path}: line {number + i}: expected a {tag} record, found {frame.iloc[i, 0]!r}")
    out = frame.iloc[:, 1:]
    out.columns = list(names)
    return _Raw(out, lambda i: f"line {number + i}", layout)


# -- JSON ------------------------------------------------------------------------------------------------
def _json_documents(path: Path, text: str) -> list[object]:
    decoder = json.JSONDecoder()
    docs, pos = [], 0
    while True:
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        if pos >= len(text):
            return docs
        try:
            doc, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise PriceDataError(f"{path}: line {exc.lineno}: invalid JSON ({exc.msg})") from None
        docs.append(doc)


def _json_records(path: Path, docs: Iterable[object]) -> list[dict]:
    records: list[dict] = []

    def visit(item: object) -> None:
        if isinstance(item, list):
            for el in item:
                visit(el)
        elif isinstance(item, dict) and "SpotPriceHistory" in item:
            visit(item["SpotPriceHistory"])
        elif isinstance(item, dict):
            records.append(item)
        else:
            raise PriceDataError(f"{path}: record {len(records) + 1}: expected a JSON object, found {item!r:.60}")

    for doc in docs:
        visit(doc)
    return records


def _frame_from_records(path: Path, records: list[dict]) -> tuple[pd.DataFrame, list[str]]:
    frame = pd.DataFrame.from_records(records)
    mapping, ignored = _map_header(path, [str(c) for c in frame.columns], 1)
    frame = frame.iloc[:, sorted(mapping)]
    frame.columns = [mapping[i] for i in sorted(mapping)]
    # strings, "" for a missing key, as the CSV readers give them; datetimes (boto3) as ISO strings
    frame = frame.map(lambda v: "" if v is None or (isinstance(v, float) and np.isnan(v))
                      else v.isoformat() if hasattr(v, "isoformat") else str(v))
    return frame, ignored


def _parse_json(path: Path, text: str) -> _Raw:
    records = _json_records(path, _json_documents(path, text))
    if not records:
        raise PriceDataError(f"{path}: the file is empty (no price records in the JSON)")
    frame, ignored = _frame_from_records(path, records)
    starts: list[int] | None = None

    def line_of(i: int) -> str:
        nonlocal starts
        if starts is None:  # records are the innermost JSON objects; find where each one starts
            starts = [m.start() for m in re.finditer(r"\{[^{}\[\]]*\}", text)]
        if len(starts) == len(records):
            return f"line {text.count(chr(10), 0, starts[i]) + 1} (record {i + 1})"
        return f"record {i + 1}"

    return _Raw(frame, line_of, "aws-json", ignored_columns=tuple(ignored))


# -- validation and the canonical table ------------------------------------------------------------------
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


def _parse_prices(path: Path, raw: _Raw, s: pd.Series) -> np.ndarray:
    """Float64 USD per hour; non-numeric, non-finite and negative prices raise."""
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
    return p


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
    >>> df = read_prices("../shared/data/spot_prices/us-east-1_2015.csv.gz")  # doctest: +SKIP
    >>> df.attrs["load_report"].records_read                                  # doctest: +SKIP
    274099
    """
    p = Path(path)
    raw = _parse(p, _read_bytes(p))
    table, _ = _canonical(p, raw, product_description)
    return table


def load_report(table: pd.DataFrame) -> LoadReport:
    """The :class:`LoadReport` of a table returned by :func:`read_prices`.

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
