"""Spot billing rules: who ended a run and how long it ran decide what it costs.

Two granularities (decisions M3-M4; AWS, "Billing for interrupted Spot Instances",
https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/billing-for-interrupted-spot-instances.html):

``"second"`` (the paper's model and AWS today for Linux/Windows, per-second since 2 Oct 2017)
    Cost = exact integral of the market price (not the max price) over the run, i.e. each second at
    the price in force during it (:meth:`spotmarket.prices.PriceSeries.cost_usd`).
    * ended by the user: pays every second, at any length;
    * ended by the provider and shorter than 3600 s: free; ``refunded_usd`` is what it would have cost;
    * ended by the provider after >= 3600 s: pays every second (no refund).

``"hour"`` (the historical pre-October-2017 rule; today's SUSE row of AWS's billing table)
    The run is cut into instance-hours ``[start + 3600 k, start + 3600 (k + 1))``. Each started hour
    costs the market price in force at its start, for a full hour ("the Spot price that's in effect at
    the beginning of each instance-hour", AWS; decision M4).
    * ended by the user: every started hour is charged in full, the partial last hour included
      (``ceil(d / 3600)`` hours);
    * ended by the provider: only completed hours are charged (``floor(d / 3600)``); the interrupted
      partial hour is free (refunded). A provider interruption within the first hour is therefore free.

Boundary [I]: "within the first hour" means duration ``d < 3600`` s, strictly. A provider termination at
exactly 3600 s pays, as does one at 3601 s; one at 3599 s is free.

``refunded_usd`` is always defined so that ``charged_usd + refunded_usd`` equals the bill of the same
run had the user ended it. AWS's 60-second minimum for per-second billing is not modelled (the paper
does not model it either).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from spotmarket.errors import PriceDataError
from spotmarket.prices import PriceSeries
from spotmarket.errors import MarketError
from spotmarket._ledger import EndedBy, LedgerRow
from spotmarket._units import HOUR_S

FREE_WINDOW_S = HOUR_S
"""A provider termination with run length strictly below this is refunded in full (decision M3)."""

Granularity = Literal["second", "hour"]


@dataclass(frozen=True, slots=True)
class Charge:
    """What one run (or each of many runs) costs.

    Attributes
    ----------
    billed_s : float or ndarray of shape (m,)
        Seconds charged (whole hours in hourly billing; 0 for a refunded run).
    charged_usd : float or ndarray of shape (m,)
        USD charged.
    refunded_usd : float or ndarray of shape (m,)
        USD waived by the provider (``charged + refunded`` = the user-ended bill).
    """

    billed_s: float | np.ndarray
    charged_usd: float | np.ndarray
    refunded_usd: float | np.ndarray


def _provider_mask(ended_by: object) -> np.ndarray:
    """``ended_by`` values (str, EndedBy, or an array of them) -> boolean array, True = provider."""
    values = np.asarray(ended_by, dtype=str)
    ok = (values == EndedBy.PROVIDER.value) | (values == EndedBy.USER.value)
    if not np.all(ok):
        raise MarketError(f"ended_by is {str(values[~ok].ravel()[0])!r}, but must be 'provider' or 'user'")
    return values == EndedBy.PROVIDER.value


class Billing:
    """Spot billing rules (decisions M3-M5; AWS's "Billing for interrupted Spot Instances").

    Parameters
    ----------
    granularity : {"second", "hour"}, default "second"
        ``"second"``: per-second at the market price (the paper, AWS since Oct 2017).
        ``"hour"``: the historical hourly rule (price at the start of each instance-hour; the user pays a
        partial hour in full; a provider-interrupted partial hour is free). See the module docstring.
    refund_first_hour : bool, default True
        Apply the provider-interruption refund (per-second: a run shorter than 3600 s is free; hourly:
        the interrupted partial hour is free). False makes provider-ended runs pay like user-ended ones
        (an ablation: "what if there were no refund").

    Raises
    ------
    MarketError
        If ``granularity`` is neither ``"second"`` nor ``"hour"``.

    Examples
    --------
    >>> from spotmarket.prices import Market, PriceSeries
    >>> s = PriceSeries(Market("us-east-1a", "r3.large"), [0.0], [0.36], end_s=1e6)
    >>> Billing().charge(s, 0.0, 600.0, "user").charged_usd   # 600 s at 0.36 USD/h
    0.06
    >>> Billing().charge(s, 0.0, 3599.0, "provider").charged_usd
    0.0
    """

    def __init__(self, granularity: Granularity = "second", *, refund_first_hour: bool = True):
        if granularity not in ("second", "hour"):
            raise MarketError(f"billing granularity is {granularity!r}, but must be 'second' or 'hour'")
        self.granularity = granularity
        self.refund_first_hour = bool(refund_first_hour)

    def __repr__(self) -> str:
        return f"Billing({self.granularity!r}, refund_first_hour={self.refund_first_hour})"

    def charge(self, series: PriceSeries, start_s: ArrayLike, end_s: ArrayLike,
               ended_by: EndedBy | str | ArrayLike) -> Charge:
        """Bill one run or many runs of one market (vectorised).

        Parameters
        ----------
        series : PriceSeries
            The market's price history (USD per instance-hour, step function).
        start_s, end_s : float or array of shape (m,)
            Launch and termination, seconds since the epoch (UTC); broadcast together.
        ended_by : {"provider", "user"} or array of those, shape (m,)

        Returns
        -------
        Charge
            Floats for scalar input, arrays of shape (m,) otherwise.

        Raises
        ------
        MarketError
            If a run ends before it starts, lies outside the recorded price history, or ``ended_by``
            is not ``provider``/``user``.
        """
        s, e, provider = np.broadcast_arrays(np.asarray(start_s, dtype=float), np.asarray(end_s, dtype=float),
                                             _provider_mask(ended_by))
        scalar = s.ndim == 0
        s, e, provider = (np.atleast_1d(a).ravel() for a in (s, e, provider))
        d = e - s
        if np.any(~(d >= 0)):
            i = int(np.flatnonzero(~(d >= 0))[0])
            raise MarketError(f"market {series.market}: run [{s[i]}, {e[i]}] ends before it starts")
        refund = provider & self.refund_first_hour
        try:
            if self.granularity == "second":
                full = np.atleast_1d(series.cost_usd(s, e))
                free = refund & (d < FREE_WINDOW_S)
                charged = np.where(free, 0.0, full)
                refunded = np.where(free, full, 0.0)
                billed = np.where(free, 0.0, d)
            else:
                charged, refunded, billed = self._hourly(series, s, e, d, refund)
        except PriceDataError as err:
            raise MarketError(str(err)) from err
        if scalar:
            return Charge(float(billed[0]), float(charged[0]), float(refunded[0]))
        return Charge(billed, charged, refunded)

    @staticmethod
    def _hourly(series: PriceSeries, s: np.ndarray, e: np.ndarray, d: np.ndarray,
                refund: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        started = np.ceil(d / HOUR_S).astype(np.int64)       # user pays every started hour
        completed = np.floor(d / HOUR_S).astype(np.int64)
        n_charged = np.where(refund, completed, started)
        run = np.repeat(np.arange(s.size), started)
        first = np.repeat(np.cumsum(started) - started, started)
        k = np.arange(run.size) - first                                  # hour index within its run
        hour_price = np.atleast_1d(series.price_at(s[run] + HOUR_S * k)) if run.size else np.empty(0)
        charged_hour = k < n_charged[run]
        charged = np.bincount(run, weights=np.where(charged_hour, hour_price, 0.0), minlength=s.size)
        refunded = np.bincount(run, weights=np.where(charged_hour, 0.0, hour_price), minlength=s.size)
        return charged, refunded, n_charged * HOUR_S

    def bill(self, series: PriceSeries, start_s: float, end_s: float, ended_by: EndedBy | str, *,
             instance_id: str, reason: str, trial_id: str | None = None,
             max_price_usd_per_hour: float | None = None) -> LedgerRow:
        """Bill one run and return its ledger row.

        Parameters
        ----------
        series : PriceSeries
            The run's market (USD per instance-hour).
        start_s, end_s : float
            Launch and termination, seconds since the epoch (UTC).
        ended_by : {"provider", "user"}
        instance_id : str
        reason : str
            E.g. ``price``, ``capacity``, ``capacity-event``, ``hourly-hop``, ``finished``, ``stopped``.
        trial_id : str, optional
        max_price_usd_per_hour : float, optional
            Recorded only; billing uses the market price, never the max price (SpotTune paper, Eq 1).

        Returns
        -------
        LedgerRow
        """
        c = self.charge(series, float(start_s), float(end_s), ended_by)
        return LedgerRow(market=series.market, instance_id=instance_id, trial_id=trial_id, start_s=float(start_s),
                         end_s=float(end_s), ended_by=EndedBy.coerce(ended_by), reason=reason, billed_s=c.billed_s,
                         charged_usd=c.charged_usd, refunded_usd=c.refunded_usd,
                         max_price_usd_per_hour=None if max_price_usd_per_hour is None else float(max_price_usd_per_hour))
