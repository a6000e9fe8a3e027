"""Layout detection and per-layout parsing of spot price files into unvalidated records.

The layout is detected from the content (never from the file name); plain, gzip, xz and bz2 files are
detected by their magic bytes. Supported layouts (``LAYOUTS``):

``canonical``
    CSV with header ``timestamp,region,availability_zone,instance_type,product_description,price``
    (what :func:`write_prices` and ``spottune prices fetch`` write).
``kaggle``
    Kaggle "AWS Spot Pricing Market" CSVs: no header, five fields ``timestamp, instance type,
    product description, availability zone, price``.
``os-csv``
    ``data/spot_prices/us-east-1_2015.csv.gz``: header ``datetime, instance_type, os, region,
    availability_zone, price``. The collector's ``os`` value ``Linux`` is read as product description
    ``Linux/UNIX`` (EC2-Classic vs VPC was not recorded); the report says so.
``ec2-tools-csv``
    ``data/spot_prices/eu-west-1_2021-08.csv.gz``: the legacy ``ec2-describe-spot-price-history``
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

Parsing yields a :class:`_Raw`: string columns and a way to name the line (or record) of each row.
Checking the values and building the canonical table is done by ``_validate`` and ``_readers``.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import re
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from spotmarket.errors import PriceDataError
from spotmarket.prices._history import CANONICAL_COLUMNS

LAYOUTS = ("canonical", "kaggle", "os-csv", "ec2-tools-csv", "ec2-tools-text", "aws-json", "aws-text",
           "aws-csv", "csv")

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
_TIMESTAMP_START = re.compile(r"^\s*\d{4}-\d\d-\d\d[ T]\d\d:\d\d")


def _norm(name: str) -> str:
    return re.sub(r"[\s_\-]", "", str(name)).lower()


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
    except OSError as exc:  # e.g. permission denied
        raise PriceDataError(f"{path}: cannot read the price file ({exc.strerror or exc})") from None
    try:
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        elif data[:6] == b"\xfd7zXZ\x00":
            data = lzma.decompress(data)
        elif data[:3] == b"BZh":
            data = bz2.decompress(data)
    except (OSError, EOFError, lzma.LZMAError, zlib.error, ValueError) as exc:
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
