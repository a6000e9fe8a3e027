"""spotmarket.prices readers: every layout, every bad input (file and line named), duplicates, properties.

All inputs are small files written in tmp_path; the real traces are covered in test_prices_cli.py.
"""

from __future__ import annotations

import gzip
import json
import lzma
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from revpred.errors import PriceDataError
from spotmarket.prices import CANONICAL_COLUMNS, LoadReport, load_report, read_prices, records_to_table, write_prices

RECORDS = [  # (timestamp UTC, availability zone, instance type, product description, price USD/h), unsorted
    ("2017-04-26 00:07:30+00:00", "us-east-1a", "r4.large", "Linux/UNIX", 0.033),
    ("2017-04-26 00:00:10+00:00", "us-east-1a", "r4.large", "Linux/UNIX", 0.0321),
    ("2017-04-26 00:05:00+00:00", "us-east-1b", "m4.2xlarge", "Linux/UNIX", 0.12),
]


def canonical(records) -> pd.DataFrame:
    df = pd.DataFrame(records, columns=["timestamp", "availability_zone", "instance_type", "product_description", "price"])
    df["timestamp"] = pd.to_datetime(df["timestamp"], utc=True, format="ISO8601").astype("datetime64[ns, UTC]")
    df["region"] = df["availability_zone"].str[:-1]
    df = df[CANONICAL_COLUMNS].sort_values(["timestamp", "availability_zone", "instance_type", "product_description"])
    for c in ["region", "availability_zone", "instance_type", "product_description"]:
        df[c] = df[c].astype("str")
    return df.reset_index(drop=True)


def iso(ts: str, sep: str = " ", z: bool = False) -> str:
    t = pd.Timestamp(ts)
    text = t.isoformat(sep=sep)
    if z:  # the CLI's form: milliseconds and "Z" (keep finer digits when there are any)
        text = text.replace("+00:00", "Z") if t.microsecond else text.replace("+00:00", ".000Z")
    return text


def pacific(ts: str) -> str:
    return (pd.Timestamp(ts) - pd.Timedelta(hours=7)).strftime("%Y-%m-%dT%H:%M:%S-0700")


def api(r, ts_z: bool = True) -> dict:
    return {"AvailabilityZone": r[1], "InstanceType": r[2], "ProductDescription": r[3],
            "SpotPrice": f"{r[4]:.6f}", "Timestamp": iso(r[0], "T", z=ts_z)}


def render(layout: str, records) -> str:
    """Text of a file in ``layout`` holding ``records``."""
    if layout == "canonical":
        lines = ["timestamp,region,availability_zone,instance_type,product_description,price"]
        lines += [f"{t},{az[:-1]},{az},{it},{pd_},{p!r}" for t, az, it, pd_, p in records]
    elif layout == "kaggle":
        lines = [f"{t},{it},{pd_},{az},{p!r}" for t, az, it, pd_, p in records]
    elif layout == "os-csv":
        assert all(r[3] == "Linux/UNIX" for r in records)
        lines = ["datetime,instance_type,os,region,availability_zone,price"]
        lines += [f"{t},{it},Linux,{az[:-1]},{az},{p!r}" for t, az, it, pd_, p in records]
    elif layout == "ec2-tools-csv":
        lines = ["record_type,price,timestamp,instance_type,product_description,availability_zone,timestamp_utc"]
        lines += [f"SPOTINSTANCEPRICE,{p:.6f},{pacific(t)},{it},{pd_},{az},{t}" for t, az, it, pd_, p in records]
    elif layout == "ec2-tools-text":
        lines = [f"SPOTINSTANCEPRICE\t{p:.6f}\t{pacific(t)}\t{it}\t{pd_}\t{az}" for t, az, it, pd_, p in records]
    elif layout == "aws-json":  # what the CLI prints
        return json.dumps({"SpotPriceHistory": [api(r) for r in records]}, indent=4) + "\n"
    elif layout == "aws-json-boto3":  # json.dump(boto3 response, default=str), datetimes as str()
        resp = {"SpotPriceHistory": [{**api(r), "Timestamp": pd.Timestamp(r[0]).to_pydatetime()} for r in records],
                "NextToken": "", "ResponseMetadata": {"HTTPStatusCode": 200}}
        return json.dumps(resp, default=str)
    elif layout == "aws-json-lines":
        return "".join(json.dumps(api(r)) + "\n" for r in records)
    elif layout == "aws-json-pages":
        return json.dumps([{"SpotPriceHistory": [api(r)]} for r in records])
    elif layout == "aws-text":
        lines = [f"SPOTPRICEHISTORY\t{az}\t{it}\t{pd_}\t{p:.6f}\t{iso(t, 'T')}" for t, az, it, pd_, p in records]
    elif layout == "aws-text-truncated":
        lines = ["eyJ2IjoiMiIsImMiOiJ0b2tlbiJ9"] + render("aws-text", records).splitlines()
    elif layout == "aws-csv":  # pd.DataFrame(resp["SpotPriceHistory"]).to_csv(): with the index column
        return pd.DataFrame([api(r) for r in records]).to_csv()
    elif layout == "csv":  # aliases, tab-separated, naive-free
        lines = ["az\tinstance_type\tproduct\tspot_price\ttime"]
        lines += [f"{az}\t{it}\t{pd_}\t{p}\t{iso(t, 'T', z=True)}" for t, az, it, pd_, p in records]
    else:  # pragma: no cover
        raise AssertionError(layout)
    return "\n".join(lines) + "\n"


EXPECTED_LAYOUT = {"aws-json-boto3": "aws-json", "aws-json-lines": "aws-json", "aws-json-pages": "aws-json",
                   "aws-text-truncated": "aws-text"}
ALL_RENDERINGS = ["canonical", "kaggle", "os-csv", "ec2-tools-csv", "ec2-tools-text", "aws-json", "aws-json-boto3",
                  "aws-json-lines", "aws-json-pages", "aws-text", "aws-text-truncated", "aws-csv", "csv"]


def write(tmp_path: Path, text: str | bytes, name: str = "prices.csv", compress: str | None = None) -> Path:
    data = text.encode() if isinstance(text, str) else text
    if compress == "gzip":
        data = gzip.compress(data)
    elif compress == "xz":
        data = lzma.compress(data)
    path = tmp_path / name
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("layout", ALL_RENDERINGS)
def test_every_layout_reads_to_the_canonical_table(tmp_path: Path, layout: str) -> None:
    df = read_prices(write(tmp_path, render(layout, RECORDS)))
    pd.testing.assert_frame_equal(df, canonical(RECORDS))
    report = load_report(df)
    assert report.layout == EXPECTED_LAYOUT.get(layout, layout)
    assert (report.records_read, report.duplicates_dropped, report.records_kept) == (3, 0, 3)
    assert df.attrs["duplicates_dropped"] == 0


@pytest.mark.parametrize("compress", ["gzip", "xz"])
def test_compression_is_detected_from_the_bytes(tmp_path: Path, compress: str) -> None:
    path = write(tmp_path, render("kaggle", RECORDS), name="no-suffix", compress=compress)
    pd.testing.assert_frame_equal(read_prices(path), canonical(RECORDS))


def test_os_label_mapping_and_truncation_are_reported(tmp_path: Path) -> None:
    report = load_report(read_prices(write(tmp_path, render("os-csv", RECORDS))))
    assert any("'Linux' read as product description 'Linux/UNIX'" in n for n in report.notes)
    report = load_report(read_prices(write(tmp_path, render("aws-text-truncated", RECORDS))))
    assert any("line 1 (the NextToken" in n for n in report.notes)


def test_timestamp_utc_is_used_in_the_ec2_tools_layout(tmp_path: Path) -> None:
    text = render("ec2-tools-csv", RECORDS).replace("-0700", "-0900")  # the local column is not read
    report = load_report(df := read_prices(write(tmp_path, text)))
    pd.testing.assert_frame_equal(df, canonical(RECORDS))
    assert report.ignored_columns == ("record_type", "timestamp")


def test_vpc_twin_preferred_by_default_and_counted(tmp_path: Path) -> None:
    recs = RECORDS + [
        ("2017-04-26 00:00:10+00:00", "us-east-1a", "r4.large", "Linux/UNIX (Amazon VPC)", 0.0400),
        ("2017-04-26 00:01:00+00:00", "us-east-1a", "r4.large", "Windows", 0.5),  # no VPC twin: kept
    ]
    path = write(tmp_path, render("aws-json", recs))
    df = read_prices(path)
    report = load_report(df)
    assert set(df["product_description"]) == {"Linux/UNIX (Amazon VPC)", "Windows"}
    assert report.filtered_out == {"Linux/UNIX": 3}
    assert (report.records_read, report.records_kept, report.n_filtered) == (5, 2, 3)
    assert "dropped because their '(Amazon VPC)' twins" in report.summary()
    assert len(read_prices(path, product_description="all")) == 5
    only = read_prices(path, product_description="Linux/UNIX")
    assert list(only["product_description"].unique()) == ["Linux/UNIX"]
    assert load_report(only).filtered_out == {"Linux/UNIX (Amazon VPC)": 1, "Windows": 1}
    assert len(read_prices(path, product_description=["Windows", "Linux/UNIX"])) == 4
    with pytest.raises(PriceDataError, match=r"no records with product description 'SUSE Linux'; the file has"):
        read_prices(path, product_description="SUSE Linux")


def test_exact_duplicates_dropped_and_counted(tmp_path: Path) -> None:
    lines = render("kaggle", RECORDS).splitlines()
    # line 4: same as line 1; line 5: same record as line 2 written differently (still an exact duplicate)
    lines += [lines[0], "2017-04-26T00:00:10Z,r4.large,Linux/UNIX,us-east-1a,0.03210"]
    df = read_prices(write(tmp_path, "\n".join(lines) + "\n"))
    pd.testing.assert_frame_equal(df, canonical(RECORDS))
    assert df.attrs["duplicates_dropped"] == 2
    report = load_report(df)
    assert (report.records_read, report.duplicates_dropped, report.records_kept) == (5, 2, 3)


def test_blank_lines_are_skipped_and_line_numbers_stay_true(tmp_path: Path) -> None:
    text = "\n" + render("canonical", RECORDS).replace("\n", "\n\n", 1)  # blank line 1 and after the header
    report = load_report(read_prices(write(tmp_path, text)))
    assert report.blank_lines == 1 and report.records_read == 3
    bad = text.splitlines()
    bad[5] = bad[5].replace("0.12", "-0.12")
    with pytest.raises(PriceDataError, match=r"prices.csv: line 6: price '-0.12' is negative"):
        read_prices(write(tmp_path, "\n".join(bad) + "\n"))


def test_naive_timestamps_are_read_as_utc_and_counted(tmp_path: Path) -> None:
    text = render("kaggle", RECORDS).replace("+00:00", "", 2)
    df = read_prices(write(tmp_path, text))
    pd.testing.assert_frame_equal(df, canonical(RECORDS))
    assert load_report(df).timestamps_assumed_utc == 2


def test_report_is_a_frozen_value(tmp_path: Path) -> None:
    report = load_report(read_prices(write(tmp_path, render("kaggle", RECORDS))))
    assert isinstance(report, LoadReport)
    with pytest.raises(AttributeError):
        report.records_read = 0  # type: ignore[misc]
    with pytest.raises(PriceDataError, match="no load report"):
        load_report(pd.DataFrame())


# -- bad input: one clear error naming the file and the line ------------------------------------------------
def _canonical_lines() -> list[str]:
    return render("canonical", RECORDS).splitlines()


def _with(line_no: int, old: str, new: str) -> str:
    lines = _canonical_lines()
    assert old in lines[line_no - 1]
    lines[line_no - 1] = lines[line_no - 1].replace(old, new)
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("text", "message"), [
    (_with(3, "2017-04-26 00:00:10+00:00", "yesterday"), r"line 3: timestamp 'yesterday' is not a date and time"),
    (_with(2, "2017-04-26 00:07:30", "2017-13-45 00:07:30"), r"line 2: timestamp '2017-13-45 00:07:30\+00:00' is not"),
    (_with(3, "2017-04-26", "3017-04-26"), r"line 3: timestamp '3017-04-26 00:00:10\+00:00' is outside 1970 \.\. 2200"),
    (_with(4, "0.12", "-0.12"), r"line 4: price '-0.12' is negative"),
    (_with(2, "0.033", "abc"), r"line 2: price 'abc' is not a number \(USD per hour\)"),
    (_with(3, "0.0321", "nan"), r"line 3: price 'nan' is not a number"),
    (_with(3, "0.0321", "inf"), r"line 3: price 'inf' is not a number"),
    (_with(4, ",0.12", ","), r"line 4: missing value in column 'price'"),
    (_with(3, ",r4.large,", ",,"), r"line 3: missing value in column 'instance_type'"),
    (_with(2, "2017-04-26 00:07:30+00:00", ""), r"line 2: missing value in column 'timestamp'"),
    (_with(1, ",price", ",cost"), r"line 1: missing columns \['price'\]"),
    (_with(3, ",0.0321", ",0.0321,extra"), r"line 3: expected 6 fields, saw 7"),
    (_with(2, "us-east-1,us-east-1a", "eu-west-1,us-east-1a"), r"line 2: availability zone 'us-east-1a' is not in region 'eu-west-1'"),
    (_with(2, "00:07:30+00:00,us-east-1,us-east-1a,r4.large,Linux/UNIX,0.033", "00:00:10+00:00,us-east-1,us-east-1a,r4.large,Linux/UNIX,0.05"),
     r"line 2 and line 3: market us-east-1a/r4.large/Linux/UNIX has two different prices at 2017-04-26 00:00:10\+00:00"),
    ("", r"the file is empty"),
    ("\n  \n\n", r"the file is empty"),
    ("timestamp,region,availability_zone,instance_type,product_description,price\n", r"the file is empty"),
    ("hello,world\n1,2\n", r"line 1: unknown price file layout \(first line 'hello,world'\)"),
    ("\n\n<html>oops</html>\n", r"line 3: unknown price file layout"),
    ('{"SpotPriceHistory": [\n  {"Timestamp": "2017-04-26T00:00:10Z",\n', r"line 3: invalid JSON"),
    ("[]", r"the file is empty"),
    ("SPOTPRICEHISTORY\tus-east-1a\tr4.large\tLinux/UNIX\t0.1\t2017-04-26T00:00:10Z\nREGIONS\tx\ty\tz\tw\tv\n",
     r"line 2: expected a SPOTPRICEHISTORY record, found 'REGIONS'"),
])
def test_bad_input_names_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text, name="bad.csv")
    with pytest.raises(PriceDataError, match=r"bad\.csv: " + message):
        read_prices(path)


def test_bad_json_record_names_its_line(tmp_path: Path) -> None:
    recs = [api(r) for r in RECORDS]
    recs[1]["SpotPrice"] = "-1"
    text = json.dumps({"SpotPriceHistory": recs}, indent=4)
    # record 2 opens on line 10 of the CLI's 4-space JSON (3 + 7 lines per record)
    with pytest.raises(PriceDataError, match=r"bad\.json: line 10 \(record 2\): price '-1' is negative"):
        read_prices(write(tmp_path, text, name="bad.json"))
    del recs[1]["SpotPrice"]
    recs[1]["InstanceType"] = "r4.large"
    with pytest.raises(PriceDataError, match=r"line 10 \(record 2\): missing value in column 'price'"):
        read_prices(write(tmp_path, json.dumps({"SpotPriceHistory": recs}, indent=4), name="bad.json"))


def test_file_level_errors(tmp_path: Path) -> None:
    with pytest.raises(PriceDataError, match=r"missing\.csv: no such price file"):
        read_prices(tmp_path / "missing.csv")
    with pytest.raises(PriceDataError, match="is a directory"):
        read_prices(tmp_path)
    with pytest.raises(PriceDataError, match=r"damaged\.gz: compressed file is damaged"):
        read_prices(write(tmp_path, gzip.compress(b"x" * 100)[:20], name="damaged.gz"))
    with pytest.raises(PriceDataError, match=r"line 3: timestamp 'later' is not a date"):  # error inside gzip
        read_prices(write(tmp_path, _with(3, "2017-04-26 00:00:10+00:00", "later"), name="bad.csv.gz", compress="gzip"))
    with pytest.raises(PriceDataError, match=r"more such records, e.g. line 4"):
        read_prices(write(tmp_path, _with(3, "0.0321", "-1").replace("0.12", "-2")))


def test_unreadable_file_is_a_price_data_error(tmp_path: Path, monkeypatch) -> None:
    path = write(tmp_path, _with(3, "0.0321", "0.0321"))

    def denied(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "read_bytes", denied)
    with pytest.raises(PriceDataError, match="cannot read the price file \\(Permission denied\\)"):
        read_prices(path)


def test_records_to_table_accepts_boto3_records() -> None:
    recs = [{**api(r), "Timestamp": pd.Timestamp(r[0]).to_pydatetime()} for r in RECORDS]
    pd.testing.assert_frame_equal(records_to_table(recs + recs[:1]), canonical(RECORDS))
    with pytest.raises(PriceDataError, match=r"record 2: price 'x' is not a number"):
        records_to_table([recs[0], {**recs[1], "SpotPrice": "x"}])


def test_write_prices_rejects_non_canonical(tmp_path: Path) -> None:
    df = canonical(RECORDS)
    with pytest.raises(PriceDataError, match=r"columns \['price'\] are missing"):
        write_prices(df.drop(columns="price"), tmp_path / "x.csv")
    with pytest.raises(PriceDataError, match="must be tz-aware"):
        write_prices(df.assign(timestamp=df["timestamp"].dt.tz_localize(None)), tmp_path / "x.csv")


# -- properties -------------------------------------------------------------------------------------------
AZS = ["us-east-1a", "us-east-1b", "eu-west-1c"]
TYPES = ["r4.large", "m4.2xlarge", "c5.xlarge"]
PRODUCTS = ["Linux/UNIX", "Windows", "SUSE Linux (Amazon VPC)", "Linux/UNIX (Amazon VPC)"]


@st.composite
def price_records(draw, max_size: int = 25):
    keys = draw(st.lists(st.tuples(st.integers(1_420_070_400, 1_640_995_200), st.sampled_from(AZS),
                                   st.sampled_from(TYPES), st.sampled_from(PRODUCTS)),
                         min_size=1, max_size=max_size, unique=True))
    out = []
    for t, az, it, prod in keys:
        frac = draw(st.sampled_from([0, 0, 0.5, 0.123456]))
        price = draw(st.floats(0, 50, allow_nan=False, allow_subnormal=False))
        out.append((pd.Timestamp(t + frac, unit="s", tz="UTC").isoformat(sep=" "), az, it, prod, price))
    return out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=price_records())
def test_write_then_read_gives_the_same_table(tmp_path: Path, records) -> None:
    expected = canonical(records)
    for name in ("roundtrip.csv", "roundtrip.csv.gz"):
        path = write_prices(expected, tmp_path / name)
        got = read_prices(path, product_description="all")
        pd.testing.assert_frame_equal(got, expected)
        assert got.attrs["duplicates_dropped"] == 0


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=price_records(), layout=st.sampled_from(["kaggle", "aws-json", "aws-json-lines", "aws-text", "aws-csv"]),
       dup_idx=st.lists(st.integers(0, 24), max_size=5))
def test_random_tables_read_alike_in_every_layout(tmp_path: Path, records, layout: str, dup_idx: list[int]) -> None:
    records = [(t, az, it, p, round(price, 6)) for t, az, it, p, price in records]  # the API prints 6 decimals
    dups = [records[i % len(records)] for i in dup_idx]
    got = read_prices(write(tmp_path, render(layout, records + dups)), product_description="all")
    pd.testing.assert_frame_equal(got, canonical(records))
    assert got.attrs["duplicates_dropped"] == len(dups)
    assert got["timestamp"].is_monotonic_increasing
