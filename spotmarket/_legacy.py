"""The paper's 2017 revocation rule: the instance lives until the market price exceeds the max price.

Decisions M1-M2 (docs/design/decisions.md, "Market replay"):

* a launch at t with max price b is fulfilled iff ``price(t) <= b`` [I];
* ``t_r`` = the first price record strictly after t with ``price(t_r) > b`` (a step function, so this is
  the first instant the price exceeds b);
* **recorded choice [I] ("Market replay" in docs/design/decisions.md): the notice comes at t_r and the termination
  at t_r + 120 s** (``crossing_is="notice"``, the default). This is how EC2 behaved in 2017: the price
  crossed the bid, EC2 marked the instance and terminated it two minutes later. The instance keeps
  running for those 120 s, at the now-higher market price, and EC2 does not take the termination back
  if the price falls again within the 120 s.
* the alternative ``crossing_is="termination"`` puts the termination at t_r and the notice at
  ``max(launch, t_r - 120 s)``. It needs foresight of the price path, so it is only for comparisons
  (e.g. with RevPred labels, which are "price > b within the hour").

With ``notice_lead_s=0`` both choices coincide: notice and termination at t_r.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from spotmarket.errors import PriceDataError
from spotmarket.prices import Market, PriceSeries
from spotmarket.errors import MarketError
from spotmarket._prices import Prices, as_prices, series_of
from spotmarket._revocation import NOTICE_LEAD_S, Cause, Revocation, RevocationBatch, RevocationModel

CrossingIs = Literal["notice", "termination"]


class LegacyBidRevocation(RevocationModel):
    """Paper's 2017 rule: revoked at the first price record above the max price (decision M1).

    Parameters
    ----------
    history : PriceHistory, mapping of Market -> PriceSeries, or list of PriceSeries
        Spot price history (USD per instance-hour, step functions).
    notice_lead_s : float, default 120
        Seconds from notice to termination (EC2's "two minutes before the interruption").
    crossing_is : {"notice", "termination"}, default "notice"
        What happens at the crossing time t_r. ``"notice"`` (decision M1): notice at
        t_r, termination at t_r + ``notice_lead_s``. ``"termination"``: termination at t_r, notice at
        ``max(launch, t_r - notice_lead_s)`` (clairvoyant; for comparisons only).

    Raises
    ------
    MarketError
        If ``crossing_is`` is neither value or ``notice_lead_s`` is negative or not finite.

    Notes
    -----
    ``termination_s`` is ``inf`` if the price never exceeds b before the end of the recorded history.
    A termination can fall up to ``notice_lead_s`` after the end of the history; bill only up to
    ``history.end_s``.

    Examples
    --------
    >>> from spotmarket.prices import Market, PriceSeries
    >>> m = Market("us-east-1a", "r3.large")
    >>> model = LegacyBidRevocation([PriceSeries(m, [0.0, 1000.0], [0.1, 0.5], end_s=5000.0)])
    >>> r = model.revocation(m, 10.0, instance_id="i-1", max_price_usd_per_hour=0.2)
    >>> (r.cause, r.notice_s, r.termination_s)
    (<Cause.PRICE: 'price'>, 1000.0, 1120.0)
    """

    def __init__(self, history: Prices | Sequence[PriceSeries], *, notice_lead_s: float = NOTICE_LEAD_S,
                 crossing_is: CrossingIs = "notice"):
        super().__init__(notice_lead_s=notice_lead_s)
        if crossing_is not in ("notice", "termination"):
            raise MarketError(f"crossing_is is {crossing_is!r}, but must be 'notice' (the default) or 'termination'")
        self.history = as_prices(history)
        self.crossing_is = crossing_is

    def revocation(self, market: Market, launch_s: float, *, instance_id: str,
                   max_price_usd_per_hour: float | None = None) -> Revocation:
        """See :meth:`RevocationModel.revocation`; ``max_price_usd_per_hour`` is required here.

        One launch: a chunked forward scan from the launch (a few µs when the crossing is near) gives
        the same answer as the range-maximum search of :meth:`batch`.

        Parameters
        ----------
        market : Market
        launch_s : float
            Launch time, seconds since the epoch (UTC), inside the recorded history.
        instance_id : str
            Recorded in the answer; the rule is deterministic per (market, time, b).
        max_price_usd_per_hour : float
            Max price b, USD per instance-hour (required).

        Returns
        -------
        Revocation
            ``REFUSED_PRICE`` if ``price(launch) > b``; else notice and termination from the first record above b
            (``inf`` if none before the end of the history).

        Raises
        ------
        MarketError
            If no max price is given, the market is not in the history or ``launch_s`` is outside it.
        """
        if max_price_usd_per_hour is None:
            raise MarketError(f"market {market}: the legacy (2017) rule needs a max price for launch {instance_id!r}")
        series = series_of(self.history, market)
        t, b = float(launch_s), float(max_price_usd_per_hour)
        try:
            price = series.price_at(t)
        except PriceDataError as err:
            raise MarketError(str(err)) from err
        if not price <= b:
            return Revocation(market=market, instance_id=instance_id, launch_s=t, cause=Cause.REFUSED_PRICE,
                              notice_s=math.nan, termination_s=math.nan)
        crossing = _first_above(series, t, b)
        if math.isinf(crossing):
            return Revocation(market=market, instance_id=instance_id, launch_s=t, cause=Cause.NONE,
                              notice_s=math.inf, termination_s=math.inf)
        notice, termination = self._anchor(t, crossing)
        return Revocation(market=market, instance_id=instance_id, launch_s=t, cause=Cause.PRICE,
                          notice_s=float(notice), termination_s=float(termination))

    def _anchor(self, launch_s, crossing_s):
        """(notice, termination) from the crossing time, per ``crossing_is``; floats or arrays."""
        if self.crossing_is == "notice":
            return crossing_s, crossing_s + self.notice_lead_s
        return np.maximum(crossing_s - self.notice_lead_s, launch_s), crossing_s

    def batch(self, market: Market, launch_s: ArrayLike, max_price_usd_per_hour: ArrayLike | None = None,
              instance_ids: Sequence[str] | None = None) -> RevocationBatch:
        """Vectorised revocations of many launches in one market: O(log n) each.

        Parameters
        ----------
        market : Market
        launch_s : array of shape (m,)
            Launch times, seconds since the epoch (UTC), inside the recorded history.
        max_price_usd_per_hour : float or array of shape (m,)
            Max price b per launch, USD per instance-hour (required; no NaN).
        instance_ids : ignored
            The rule is deterministic per (market, time, b).

        Returns
        -------
        RevocationBatch

        Raises
        ------
        MarketError
            If a max price is missing (None or NaN), or a launch time is outside the history.
        """
        if max_price_usd_per_hour is None:
            raise MarketError(f"market {market}: the legacy (2017) rule needs a max price")
        series = series_of(self.history, market)
        t, b = np.broadcast_arrays(np.atleast_1d(np.asarray(launch_s, dtype=float)),
                                   np.atleast_1d(np.asarray(max_price_usd_per_hour, dtype=float)))
        if np.isnan(b).any():
            raise MarketError(f"market {market}: the legacy (2017) rule needs a max price for every launch")
        try:
            fulfilled = np.atleast_1d(series.price_at(t)) <= b
            crossing = np.atleast_1d(series.next_above(t, b))
        except PriceDataError as err:
            raise MarketError(str(err)) from err
        notice, termination = self._anchor(t, crossing)
        revoked = np.isfinite(crossing)
        cause = np.where(fulfilled, np.where(revoked, Cause.PRICE.value, Cause.NONE.value), Cause.REFUSED_PRICE.value)
        return RevocationBatch(fulfilled=fulfilled, notice_s=np.where(fulfilled, notice, np.nan),
                               termination_s=np.where(fulfilled, termination, np.nan), cause=cause)


def _first_above(series: PriceSeries, t_s: float, b: float) -> float:
    """First record time strictly after t with price > b (``inf`` if none): a chunked forward scan."""
    times, prices = series.times_s, series.prices
    start = int(np.searchsorted(times, t_s, side="right"))
    width = 64
    while start < prices.size:
        hit = np.flatnonzero(prices[start:start + width] > b)
        if hit.size:
            return float(times[start + hit[0]])
        start += width
        width *= 8
    return math.inf
