"""Ledger rows: validation, table and CSV forms."""

import math

import pandas as pd
import pytest

from spotmarket.prices import Market
from spottune.errors import MarketError
from spotmarket import LEDGER_COLUMNS, EndedBy, LedgerRow, ledger_frame, ledger_rows, read_ledger_csv, write_ledger_csv

M = Market("us-east-1a", "r3.large")


def row(**kw):
    base = dict(market=M, instance_id="i-1", trial_id="t1", start_s=1.43e9, end_s=1.43e9 + 3599.5,
                ended_by="provider", reason="price", billed_s=0.0, charged_usd=0.0, refunded_usd=0.1 / 3,
                max_price_usd_per_hour=0.2)
    base.update(kw)
    return LedgerRow(**base)


def test_row_coerces_and_is_frozen():
    r = row()
    assert r.ended_by is EndedBy.PROVIDER and r.duration_s == 3599.5
    with pytest.raises(AttributeError):
        r.charged_usd = 1.0  # type: ignore[misc]


@pytest.mark.parametrize(("kw", "msg"), [
    (dict(ended_by="aws"), "ended_by"),
    (dict(end_s=1.0), "end >= start"),
    (dict(charged_usd=-0.01), "charged_usd"),
    (dict(refunded_usd=math.nan), "refunded_usd"),
])
def test_row_validation(kw, msg):
    with pytest.raises(MarketError, match=msg):
        row(**kw)


def test_frame_and_csv_round_trip(tmp_path):
    rows = [row(), row(instance_id="i-2", trial_id=None, ended_by="user", reason="hourly-hop", billed_s=600.0,
                       charged_usd=0.0123456789012345, refunded_usd=0.0, max_price_usd_per_hour=None)]
    frame = ledger_frame(rows)
    assert tuple(frame.columns) == LEDGER_COLUMNS
    assert frame["market"].tolist() == ["us-east-1a/r3.large/Linux/UNIX"] * 2
    assert math.isnan(frame["max_price_usd_per_hour"].iloc[1])
    assert ledger_rows(frame) == rows
    path = tmp_path / "ledger.csv"
    write_ledger_csv(rows, path)
    assert read_ledger_csv(path) == rows  # floats round-trip exactly, None stays None
    assert pd.read_csv(path).shape == (2, len(LEDGER_COLUMNS))


def test_empty_ledger():
    assert ledger_frame([]).empty and ledger_rows(ledger_frame([])) == []
