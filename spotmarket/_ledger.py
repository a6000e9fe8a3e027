"""The billing ledger: one frozen row per instance run, and its table / CSV forms.

A *run* is one instance from launch to termination. Whoever ended it decides the bill (decisions M3-M4;
https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/billing-for-interrupted-spot-instances.html), so the row
records it in ``ended_by``.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from os import PathLike

import pandas as pd

from spotmarket.prices import Market
from spotmarket.errors import MarketError


class EndedBy(enum.StrEnum):
    """Who ended a run; this decides whether a refund applies.

    PROVIDER: EC2 interrupted the instance (price above the max price, or capacity).
    USER: we stopped it (hourly hop, trial finished or stopped, experiment over).
    """

    PROVIDER = "provider"
    USER = "user"

    @classmethod
    def coerce(cls, value: object) -> "EndedBy":
        """``"provider"``/``"user"`` (or a member) -> member; anything else raises MarketError."""
        try:
            return cls(value)
        except ValueError:
            raise MarketError(f"ended_by is {value!r}, but must be 'provider' or 'user'") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerRow:
    """One billed instance run.

    Attributes
    ----------
    market : Market
        (availability zone, instance type, product description).
    instance_id : str
        Unique per launch.
    trial_id : str or None
        The trial the instance ran, if any.
    start_s, end_s : float
        Launch and termination, seconds since the Unix epoch (UTC).
    ended_by : EndedBy
        ``provider`` or ``user``.
    reason : str
        Why it ended, e.g. ``price``, ``capacity``, ``capacity-event`` (provider) or ``hourly-hop``,
        ``finished``, ``stopped`` (user).
    billed_s : float
        Seconds charged: the run's length, 0 for a refunded run, whole hours in hourly billing.
    charged_usd : float
        USD charged.
    refunded_usd : float
        USD the run would have cost had the user ended it, and that the provider waived.
        ``charged_usd + refunded_usd`` is always the user-ended bill of the same run.
    max_price_usd_per_hour : float or None
        Max price (the 2017 "bid") in USD per instance-hour; None when none was set.
    """

    market: Market
    instance_id: str
    trial_id: str | None
    start_s: float
    end_s: float
    ended_by: EndedBy
    reason: str
    billed_s: float
    charged_usd: float
    refunded_usd: float
    max_price_usd_per_hour: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "ended_by", EndedBy.coerce(self.ended_by))
        if isinstance(self.market, str):
            object.__setattr__(self, "market", Market.parse(self.market))
        if not (math.isfinite(self.start_s) and math.isfinite(self.end_s) and self.end_s >= self.start_s):
            raise MarketError(
                f"ledger row {self.instance_id}: run [{self.start_s}, {self.end_s}] must be finite and end >= start"
            )
        for name in ("billed_s", "charged_usd", "refunded_usd"):
            value = getattr(self, name)
            if not value >= 0:  # also rejects NaN
                raise MarketError(f"ledger row {self.instance_id}: {name} is {value}, but must be >= 0")

    @property
    def duration_s(self) -> float:
        """Run length in seconds (``end_s - start_s``)."""
        return self.end_s - self.start_s


LEDGER_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(LedgerRow))


def ledger_frame(rows: Iterable[LedgerRow]) -> pd.DataFrame:
    """Ledger rows -> DataFrame with one column per :class:`LedgerRow` field, in field order.

    ``market`` and ``ended_by`` become strings; a missing ``trial_id`` stays None and a missing max
    price becomes NaN. Add ``pd.to_datetime(df.start_s, unit="s", utc=True)`` for UTC timestamps.

    Parameters
    ----------
    rows : iterable of LedgerRow

    Returns
    -------
    pandas.DataFrame
        One row per run, columns :data:`LEDGER_COLUMNS` (times in seconds since the epoch, USD, USD/hour).
    """
    records = []
    for row in rows:
        record = asdict(row)
        record["market"] = str(row.market)
        record["ended_by"] = str(row.ended_by)
        records.append(record)
    frame = pd.DataFrame.from_records(records, columns=list(LEDGER_COLUMNS))
    frame["max_price_usd_per_hour"] = frame["max_price_usd_per_hour"].astype("float64")
    return frame


def ledger_rows(frame: pd.DataFrame) -> list[LedgerRow]:
    """Inverse of :func:`ledger_frame` (validates every row).

    Parameters
    ----------
    frame : pandas.DataFrame
        Columns :data:`LEDGER_COLUMNS` (others are ignored).

    Returns
    -------
    list of LedgerRow

    Raises
    ------
    MarketError
        If a column is missing or a row is invalid.
    """
    missing = [c for c in LEDGER_COLUMNS if c not in frame.columns]
    if missing:
        raise MarketError(f"ledger table lacks columns {missing}")
    rows = []
    for rec in frame[list(LEDGER_COLUMNS)].to_dict("records"):
        trial = rec["trial_id"]
        price = rec["max_price_usd_per_hour"]
        rows.append(LedgerRow(
            market=Market.parse(str(rec["market"])),
            instance_id=str(rec["instance_id"]),
            trial_id=None if pd.isna(trial) else str(trial),
            start_s=float(rec["start_s"]),
            end_s=float(rec["end_s"]),
            ended_by=EndedBy.coerce(rec["ended_by"]),
            reason=str(rec["reason"]),
            billed_s=float(rec["billed_s"]),
            charged_usd=float(rec["charged_usd"]),
            refunded_usd=float(rec["refunded_usd"]),
            max_price_usd_per_hour=None if pd.isna(price) else float(price),
        ))
    return rows


def write_ledger_csv(rows: Iterable[LedgerRow], path: str | PathLike[str]) -> None:
    """Write the ledger as CSV (header = field names; floats round-trip exactly).

    Parameters
    ----------
    rows : iterable of LedgerRow
    path : str or path-like
        The CSV file to write (overwritten).
    """
    ledger_frame(rows).to_csv(path, index=False)


def read_ledger_csv(path: str | PathLike[str]) -> list[LedgerRow]:
    """Read a CSV written by :func:`write_ledger_csv`; an empty ``trial_id`` reads as None.

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    list of LedgerRow

    Raises
    ------
    MarketError
        If a column is missing or a row is invalid.
    """
    frame = pd.read_csv(path, dtype={"market": str, "instance_id": str, "trial_id": str, "ended_by": str, "reason": str},
                        keep_default_na=False, na_values={"trial_id": [""], "max_price_usd_per_hour": [""]})
    return ledger_rows(frame)
