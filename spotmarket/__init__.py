"""Market replay: spot revocations and billing, in seconds on a UTC timeline (decisions M1-M13).

* :class:`Billing` bills a run per second (or per hour, the pre-2017 rule) with the provider refund;
  every run becomes a :class:`LedgerRow`.
* :class:`RevocationModel` says when EC2 revokes a launch: :class:`LegacyBidRevocation` (the paper's
  2017 price > max-price rule) or :class:`ModernHazardRevocation` (capacity interruptions with a
  decreasing hazard, correlated within a market, calibrated from real traces by
  :func:`calibrate_from_traces`).
* :class:`MarketReplay` answers the vectorised queries the provisioner and simulator need (mean
  price over the last hour, next revocation, run cost) and replays whole runs into a ledger.

Design decisions: ``docs/design/decisions.md``, section "Market replay".
"""

from spotmarket._billing import FREE_WINDOW_S, Billing, Charge
from spotmarket._calibration import HazardCalibration, HazardSplit, WeibullLifetime, split_hazard
from spotmarket._fitting import calibrate_from_traces, co_interruption_share, fit_weibull, kaplan_meier_cdf
from spotmarket._ledger import (
    LEDGER_COLUMNS,
    EndedBy,
    LedgerRow,
    ledger_frame,
    ledger_rows,
    read_ledger_csv,
    write_ledger_csv,
)
from spotmarket._legacy import LegacyBidRevocation
from spotmarket._modern import BLOCK_S, ModernHazardRevocation, fulfilled_p_le_1h
from spotmarket._replay import MEAN_PRICE_WINDOW_S, MarketReplay, RunOutcome, RunRequest
from spotmarket._revocation import NOTICE_LEAD_S, Cause, Revocation, RevocationBatch, RevocationModel
from spotmarket._seeding import keyed_rng, stable_hash
from spotmarket._units import HOUR_S

__all__ = [
    "BLOCK_S",
    "Billing",
    "Cause",
    "Charge",
    "EndedBy",
    "FREE_WINDOW_S",
    "HOUR_S",
    "HazardCalibration",
    "HazardSplit",
    "LEDGER_COLUMNS",
    "LedgerRow",
    "LegacyBidRevocation",
    "MEAN_PRICE_WINDOW_S",
    "MarketReplay",
    "ModernHazardRevocation",
    "NOTICE_LEAD_S",
    "Revocation",
    "RevocationBatch",
    "RevocationModel",
    "RunOutcome",
    "RunRequest",
    "WeibullLifetime",
    "calibrate_from_traces",
    "co_interruption_share",
    "fit_weibull",
    "fulfilled_p_le_1h",
    "kaplan_meier_cdf",
    "keyed_rng",
    "ledger_frame",
    "ledger_rows",
    "read_ledger_csv",
    "split_hazard",
    "stable_hash",
    "write_ledger_csv",
]
