"""Market rules of the baselines, and the hindsight revocation predictor.

- :class:`HindsightPredictor` (formerly ``OraclePredictor``): a :class:`~revpred.protocol.RevocationPredictor` that asks the replay's own
  revocation model what will happen: p = 1 if an instance launched now in that market at that max price
  is refused or terminated by the provider within the next hour (the refund window, run length
  < 3600 s), else 0: perfect p in Eq 2. It is NOT a lower bound on cost: Eq 2 ignores that the user's
  own hop forfeits the refund, and boot, restore and lost steps, so it can cost more than SpotTune with
  RevPred. The lower bound is :mod:`spottune.evaluation._lower_bound`.
- :class:`NeverRevoked`: a revocation model under which every launch is fulfilled and never ended by
  the provider (on-demand capacity).
- :class:`OnDemandBilling`: bills every run at the catalog's on-demand price of its instance type,
  per second, with no refund (on-demand instances have none).

[I] In legacy mode the hindsight p is exact: the bid rule does not depend on the instance. In modern mode it
knows the market-wide capacity events, outages and price crossings, but not each instance's own
lifetime draw, which is keyed on the instance id the simulator assigns at launch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from spotmarket.prices import Market, PriceSeries
from spotmarket import HOUR_S, Billing
from spotmarket._revocation import Cause, Revocation


class HindsightPredictor:
    """Revocation probabilities that know the future of the replay (0 or 1).

    Parameters
    ----------
    revocation_model : spotmarket.RevocationModel
        The same model the simulator replays (``LegacyBidRevocation`` or ``ModernHazardRevocation``).
    horizon_s : float, default=3600.0
        The refund window, seconds: p = 1 iff the provider terminates within it.

    Examples
    --------
    >>> hindsight = HindsightPredictor(revocation_model("legacy", history, seed=0))  # spottune.compose  # doctest: +SKIP
    >>> hindsight.predict_proba([market], t_s, [0.05])  # doctest: +SKIP
    array([1.])
    """

    def __init__(self, revocation_model: Any, horizon_s: float = HOUR_S):
        self.revocation_model = revocation_model
        self.horizon_s = float(horizon_s)

    def predict_proba(self, markets: Sequence[Market], times_s: ArrayLike,
                      max_prices_usd_per_hour: ArrayLike) -> np.ndarray:
        """P(revoked within the hour) in {0, 1}.

        Parameters
        ----------
        markets : sequence of Market, length n
        times_s : float or array of shape (n,)
            Decision (launch) times, seconds since the epoch (UTC).
        max_prices_usd_per_hour : float or array of shape (n,)
            Max price b of each query, USD per instance-hour.

        Returns
        -------
        p : ndarray of shape (n,)
            1.0 where the launch is refused or terminated by the provider before ``t + horizon_s``.
        """
        n = len(markets)
        t = np.broadcast_to(np.asarray(times_s, dtype=float), (n,))
        b = np.broadcast_to(np.asarray(max_prices_usd_per_hour, dtype=float), (n,))
        out = np.zeros(n)
        for i, m in enumerate(markets):
            rev = self.revocation_model.revocation(m, float(t[i]), instance_id="hindsight-probe",
                                                   max_price_usd_per_hour=float(b[i]))
            if not rev.fulfilled or rev.termination_s - float(t[i]) < self.horizon_s:
                out[i] = 1.0
        return out


#: Deprecated name of :class:`HindsightPredictor` (it is not an oracle of the cheapest schedule).
OraclePredictor = HindsightPredictor


class NeverRevoked:
    """Revocation model of on-demand capacity: always fulfilled, never ended by the provider."""

    def revocation(self, market: Market, launch_s: float, *, instance_id: str,
                   max_price_usd_per_hour: float | None = None) -> Revocation:
        """A fulfilled launch with ``notice_s = termination_s = inf`` (cause ``none``).

        Parameters
        ----------
        market : spotmarket.prices.Market
            The launch's market.
        launch_s : float
            Launch time, seconds since the epoch (UTC).
        instance_id : str
            The instance.
        max_price_usd_per_hour : float, optional
            Ignored (nothing revokes the instance).

        Returns
        -------
        spotmarket.Revocation
            Never revoked.
        """
        return Revocation(market=market, instance_id=instance_id, launch_s=float(launch_s), cause=Cause.NONE,
                          notice_s=math.inf, termination_s=math.inf)


class OnDemandBilling:
    """Per-second billing at the on-demand price of the instance type; no refund.

    Parameters
    ----------
    catalog : provisioner.InstanceCatalog
        Gives ``on_demand_usd_per_hour(instance_type, region)``, USD per instance-hour.
    """

    def __init__(self, catalog: Any):
        self.catalog = catalog
        self._billing = Billing("second", refund_first_hour=False)
        self._series: dict[Market, PriceSeries] = {}

    def __repr__(self) -> str:
        return "OnDemandBilling()"

    def flat_series(self, series: PriceSeries) -> PriceSeries:
        """The market's on-demand price as a constant series over the spot series' span.

        Parameters
        ----------
        series : spotmarket.prices.PriceSeries
            The market's spot prices.

        Returns
        -------
        spotmarket.prices.PriceSeries
            One record at the on-demand price, USD per instance-hour (cached per market).
        """
        m = series.market
        if m not in self._series:
            price = float(self.catalog.on_demand_usd_per_hour(m.instance_type, m.region))
            self._series[m] = PriceSeries(m, [float(series.start_s)], [price], end_s=float(series.end_s))
        return self._series[m]

    def bill(self, series: PriceSeries, start_s: float, end_s: float, ended_by: str, **kwargs: Any) -> Any:
        """Ledger row of one run at the on-demand price (see :meth:`spotmarket.Billing.bill`).

        Parameters
        ----------
        series : spotmarket.prices.PriceSeries
            The market's spot prices (only their market and span are used).
        start_s, end_s : float
            The run, seconds since the epoch (UTC).
        ended_by : str
            ``provider`` or ``user``.
        **kwargs
            As in :meth:`spotmarket.Billing.bill`.

        Returns
        -------
        spotmarket.LedgerRow
            The run billed per second at the on-demand price (USD/hour), no refund.
        """
        return self._billing.bill(self.flat_series(series), start_s, end_s, ended_by, **kwargs)
