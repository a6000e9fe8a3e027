"""Market replay: the vectorised queries the provisioner and the simulator ask, and whole-run replays.

:class:`MarketReplay` ties a price history, a :class:`~spotmarket.RevocationModel` and a
:class:`~spotmarket.Billing` together. It is stateless apart from caches, so the same requests
always give the same ledger (decision M11).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from spotmarket.errors import PriceDataError
from spotmarket.prices import Market
from spotmarket.errors import MarketError
from spotmarket._billing import Billing, Charge
from spotmarket._ledger import EndedBy, LedgerRow
from spotmarket._prices import Prices, as_prices, series_of
from spotmarket._revocation import Revocation, RevocationBatch, RevocationModel

MEAN_PRICE_WINDOW_S = 3600.0
"""Eq 1's P̄: the mean price over the last hour (SpotTune paper, Eq 1)."""

MarketArg = Market | str | Sequence[Market | str]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRequest:
    """One launch to replay: where, when, until when the user means to keep it, at what max price.

    Attributes
    ----------
    market : Market
    instance_id : str
        Unique per launch.
    launch_s : float
        Seconds since the epoch (UTC).
    planned_end_s : float
        When the user will stop it if the provider does not first (e.g. ``launch_s + 3600`` for the
        hourly hop of SpotTune's Algorithm 1), seconds since the epoch.
    max_price_usd_per_hour : float, optional
        Max price b, USD per instance-hour (required by the legacy model).
    trial_id : str, optional
    user_reason : str, default "hourly-hop"
        Ledger reason when the user ends it (``hourly-hop``, ``finished``, ``stopped``).
    """

    market: Market
    instance_id: str
    launch_s: float
    planned_end_s: float
    max_price_usd_per_hour: float | None = None
    trial_id: str | None = None
    user_reason: str = "hourly-hop"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOutcome:
    """The provider's answer to a launch, and the bill once the run ended.

    Attributes
    ----------
    revocation : Revocation
    row : LedgerRow or None
        None when the launch was refused (nothing ran, nothing is billed).
    """

    revocation: Revocation
    row: LedgerRow | None


def _as_market(m: Market | str) -> Market:
    return Market.parse(m) if isinstance(m, str) else m


def _grouped(market: MarketArg, n: int, fn: Callable[[Market, np.ndarray], None]) -> None:
    """Call ``fn(market, index)`` once per distinct market; ``index`` selects its queries."""
    if isinstance(market, Market | str):
        fn(_as_market(market), np.arange(n))
        return
    ms = [_as_market(m) for m in market]
    if len(ms) != n:
        raise MarketError(f"got {len(ms)} markets for {n} queries")
    codes: dict[Market, list[int]] = {}
    for i, m in enumerate(ms):
        codes.setdefault(m, []).append(i)
    for m, idx in codes.items():
        fn(m, np.asarray(idx))


class MarketReplay:
    """Replay of spot markets: prices, revocations and bills.

    Parameters
    ----------
    prices : PriceHistory, mapping of Market -> PriceSeries, or list of PriceSeries
        USD per instance-hour, step functions.
    model : RevocationModel
        :class:`LegacyBidRevocation` (paper, 2017) or :class:`ModernHazardRevocation` (today).
    billing : Billing, optional
        Default ``Billing("second")`` (per-second billing, decision M3).

    Notes
    -----
    Every query method takes one market, or a sequence of markets with one entry per query (queries
    are then grouped by market and answered in input order).
    """

    def __init__(self, prices: Prices | Sequence, model: RevocationModel, billing: Billing | None = None):
        self.prices = as_prices(prices)
        self.model = model
        self.billing = Billing() if billing is None else billing

    def mean_price_last_hour(self, market: MarketArg, t_s: ArrayLike) -> np.ndarray:
        """Time-weighted mean market price over ``[t - 3600 s, t]`` (Eq 1's P̄).

        Parameters
        ----------
        market : Market or sequence of Market (shape (m,))
        t_s : array of shape (m,)
            Seconds since the epoch (UTC).

        Returns
        -------
        ndarray of shape (m,)
            USD per instance-hour.

        Raises
        ------
        MarketError
            If the hour before t is not fully inside the recorded history.
        """
        t = np.atleast_1d(np.asarray(t_s, dtype=float))
        out = np.empty(t.shape)

        def one(m: Market, idx: np.ndarray) -> None:
            try:
                out[idx] = series_of(self.prices, m).mean_price(t[idx] - MEAN_PRICE_WINDOW_S, t[idx])
            except PriceDataError as err:
                raise MarketError(str(err)) from err

        _grouped(market, t.size, one)
        return out

    def next_revocation(self, market: MarketArg, launch_s: ArrayLike, max_price_usd_per_hour: ArrayLike | None = None,
                        instance_ids: Sequence[str] | None = None) -> RevocationBatch:
        """Notice and termination times for many launches (vectorised for the legacy model).

        Parameters
        ----------
        market : Market or sequence of Market (shape (m,))
        launch_s : array of shape (m,)
            Seconds since the epoch (UTC).
        max_price_usd_per_hour : float or array of shape (m,), optional
            USD per instance-hour (required by the legacy model).
        instance_ids : sequence of str (m,), optional

        Returns
        -------
        RevocationBatch
            Arrays of shape (m,); termination ``inf`` = not revoked within the history.
        """
        t = np.atleast_1d(np.asarray(launch_s, dtype=float))
        b = None if max_price_usd_per_hour is None else np.broadcast_to(
            np.asarray(max_price_usd_per_hour, dtype=float), t.shape)
        ids = None if instance_ids is None else list(instance_ids)
        fulfilled = np.zeros(t.shape, dtype=bool)
        notice = np.full(t.shape, np.nan)
        term = np.full(t.shape, np.nan)
        cause = np.empty(t.shape, dtype="<U16")

        def one(m: Market, idx: np.ndarray) -> None:
            r = self.model.batch(m, t[idx], None if b is None else b[idx],
                                 None if ids is None else [ids[i] for i in idx])
            fulfilled[idx], notice[idx], term[idx], cause[idx] = r.fulfilled, r.notice_s, r.termination_s, r.cause

        _grouped(market, t.size, one)
        return RevocationBatch(fulfilled=fulfilled, notice_s=notice, termination_s=term, cause=cause)

    def run_cost(self, market: MarketArg, start_s: ArrayLike, end_s: ArrayLike,
                 ended_by: EndedBy | str | ArrayLike = EndedBy.USER) -> Charge:
        """Bills of many runs (vectorised): :meth:`Billing.charge` grouped by market.

        Parameters
        ----------
        market : Market or sequence of Market (shape (m,))
        start_s, end_s : array of shape (m,)
            Seconds since the epoch (UTC).
        ended_by : {"provider", "user"} or array of shape (m,)

        Returns
        -------
        Charge
            Arrays of shape (m,): ``billed_s`` (s), ``charged_usd``, ``refunded_usd`` (USD).
        """
        s, e, who = np.broadcast_arrays(np.atleast_1d(np.asarray(start_s, dtype=float)),
                                        np.atleast_1d(np.asarray(end_s, dtype=float)),
                                        np.asarray(ended_by, dtype=str))
        billed, charged, refunded = (np.empty(s.shape) for _ in range(3))

        def one(m: Market, idx: np.ndarray) -> None:
            c = self.billing.charge(series_of(self.prices, m), s[idx], e[idx], who[idx])
            billed[idx], charged[idx], refunded[idx] = c.billed_s, c.charged_usd, c.refunded_usd

        _grouped(market, s.size, one)
        return Charge(billed, charged, refunded)

    def run(self, request: RunRequest) -> RunOutcome:
        """Replay one launch: ask the model, end the run (provider or user, whichever is first), bill it.

        The provider ends it if its termination is strictly before ``planned_end_s``; otherwise the
        user does, at ``planned_end_s`` (decision M6).

        Parameters
        ----------
        request : RunRequest
            Market, launch time, planned end (seconds since the epoch), max price (USD/hour), ids.

        Returns
        -------
        RunOutcome
            The model's :class:`Revocation` and the billed :class:`LedgerRow` (None if the launch was refused).

        Raises
        ------
        MarketError
            If the planned end is before the launch, or the model cannot answer the query.
        """
        if not request.planned_end_s >= request.launch_s:
            raise MarketError(f"run {request.instance_id}: planned end {request.planned_end_s} is before "
                              f"launch {request.launch_s}")
        market = _as_market(request.market)
        rev = self.model.revocation(market, request.launch_s, instance_id=request.instance_id,
                                    max_price_usd_per_hour=request.max_price_usd_per_hour)
        if not rev.fulfilled:
            return RunOutcome(revocation=rev, row=None)
        if rev.termination_s < request.planned_end_s:
            end, who, reason = rev.termination_s, EndedBy.PROVIDER, str(rev.cause)
        else:
            end, who, reason = float(request.planned_end_s), EndedBy.USER, request.user_reason
        row = self.billing.bill(series_of(self.prices, market), request.launch_s, end, who,
                                instance_id=request.instance_id, trial_id=request.trial_id, reason=reason,
                                max_price_usd_per_hour=request.max_price_usd_per_hour)
        return RunOutcome(revocation=rev, row=row)

    def replay(self, requests: Iterable[RunRequest]) -> list[LedgerRow]:
        """:meth:`run` each request in order; the ledger of the fulfilled ones (refusals have no row).

        Parameters
        ----------
        requests : iterable of RunRequest

        Returns
        -------
        list of LedgerRow
            In request order.

        Raises
        ------
        MarketError
            As :meth:`run`.
        """
        rows = []
        for req in requests:
            row = self.run(req).row
            if row is not None:
                rows.append(row)
        return rows
