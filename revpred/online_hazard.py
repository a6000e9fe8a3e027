"""Modern mode: a per-market capacity-interruption hazard learned online from the run (decisions P4, P8).

Today's spot market ends instances for capacity, not only for price
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-interruptions.html; decision M8). A price-crossing
predictor answers the wrong question there. :class:`OnlineHazard` combines the two causes, taken as
independent:

    p = 1 - (1 - p_price) * P(no capacity interruption in the first hour)

- ``p_price`` comes from a price-crossing predictor (e.g. :class:`revpred.calibrated.CalibratedRevocation`;
  a constant 0 when there is none);
- the interruption rate of each market has a **gamma prior** (Gamma(alpha0, beta0), rate per second)
  set so that the prior predictive P(interrupted within the hour) equals a first-hour share from the
  interruption-trace calibration, and whose weight is ``prior_hours`` of pseudo-exposure. The share is the
  traces' ``p_le_1h_target`` (:meth:`spotmarket.HazardCalibration.lifetime`: a launch at a time independent of the
  market's events) or, with ``given_capacity`` (modern mode's default, design P8), the modern model's share for a
  launch that was fulfilled (:func:`spotmarket.fulfilled_p_le_1h`);
- :meth:`observe` adds each ended instance run of the experiment (conjugate gamma-Poisson update):
  the exposure is the run's **first hour** only (``min(end - launch, 1 h)`` seconds) and an event is a
  capacity interruption within that hour. [I] The traces' hazard decreases with age (Weibull shape
  about 0.6), and the predictor is asked about fresh launches, so later hours would bias the rate low.
- ``P(no interruption in 1 h)`` is the posterior predictive ``(beta / (beta + 3600)) ** alpha``
  (the gamma mixture of ``exp(-rate * 3600)``).

Only what has happened is observed: the replay driver calls :meth:`observe` when an instance run
ends (``spottune.backends._replay``), so no future leaks into a prediction.

Source: gamma-Poisson conjugacy (Gelman et al., Bayesian Data Analysis, 3rd ed., §2.6).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike

from revpred.errors import RevPredError
from revpred.labels import HORIZON_S
from revpred.queries import broadcast_queries
from spotmarket.prices import Market

__all__ = ["OnlineHazard"]


class OnlineHazard:
    """Price-crossing p combined with a per-market gamma-Poisson interruption rate updated online.

    Parameters
    ----------
    prior_rate_per_hour : callable Market -> float, mapping Market -> float, or float
        Prior mean of the capacity-interruption rate of a fresh instance, per hour (>= 0).
    price_predictor : RevocationPredictor, optional
        P(price above the max price within the hour); None: 0 (no max price, or a price that never binds).
    prior_hours : float, default 3
        Weight of the prior, hours of pseudo-exposure (beta0 = 3600 * prior_hours seconds). [I]
    horizon_s : float, default 3600
        The question's horizon, seconds (a fresh instance's first hour).

    Raises
    ------
    RevPredError
        If ``prior_hours`` is not a positive finite number or ``horizon_s`` is not > 0.

    Attributes
    ----------
    exposure_s : dict Market -> float
        Observed first-hour exposure, seconds.
    events : dict Market -> int
        Observed capacity interruptions within the first hour.
    """

    def __init__(self, prior_rate_per_hour: Callable[[Market], float] | Mapping[Market, float] | float,
                 price_predictor: object | None = None, *, prior_hours: float = 3.0, horizon_s: float = HORIZON_S):
        if not (prior_hours > 0 and math.isfinite(prior_hours)):
            raise RevPredError(f"prior_hours is {prior_hours}, but must be a positive number of hours")
        if not horizon_s > 0:
            raise RevPredError(f"horizon is {horizon_s} s, but must be > 0")
        self.prior_rate_per_hour = prior_rate_per_hour
        self.price_predictor = price_predictor
        self.prior_hours = float(prior_hours)
        self.horizon_s = float(horizon_s)
        self.exposure_s: dict[Market, float] = {}
        self.events: dict[Market, int] = {}

    @classmethod
    def from_calibration(cls, calibration: object | None = None, price_predictor: object | None = None, *,
                         given_capacity: bool = False, **kwargs) -> "OnlineHazard":
        """Prior from a :class:`spotmarket.HazardCalibration` (None: its ``default()``, the SkyPilot traces).

        The prior mean rate is chosen so that the prior predictive P(interrupted within the horizon)
        equals ``q``: ``alpha0 = -log(1 - q) / log(1 + horizon / beta0)``. ``q`` is the traces' first-hour
        probability ``lifetime(market).p_le_1h_target`` (a launch at a time independent of the market's
        events), or with ``given_capacity`` the same model's probability for a launch that was fulfilled,
        :func:`spotmarket.fulfilled_p_le_1h` (launches are refused in the outages after events and just before
        events, so a fulfilled one is safer; docs/design/revpred.md, modern mode).

        Parameters
        ----------
        calibration : spotmarket.HazardCalibration, optional
            Default: ``HazardCalibration.default()``.
        price_predictor : RevocationPredictor, optional
            As for the constructor.
        given_capacity : bool, default False
            Use the first-hour probability of a fulfilled launch (decision P8) instead of a launch at any time
            (decision P4).
        **kwargs
            ``prior_hours`` and ``horizon_s`` of the constructor.

        Returns
        -------
        OnlineHazard
        """
        from spotmarket import HazardCalibration, fulfilled_p_le_1h

        cal = HazardCalibration.default() if calibration is None else calibration
        hours = float(kwargs.get("prior_hours", 3.0))
        horizon = float(kwargs.get("horizon_s", HORIZON_S))
        first_hour: dict[Market, float] = {}

        def prior(m: Market) -> float:
            if m not in first_hour:
                first_hour[m] = fulfilled_p_le_1h(cal, m) if given_capacity else cal.lifetime(m).p_le_1h_target
            q = min(first_hour[m], 0.999)
            return -math.log1p(-q) / math.log1p(horizon / (3600.0 * hours)) / hours

        return cls(prior, price_predictor, **kwargs)

    def fresh(self) -> "OnlineHazard":
        """A copy with the same prior and price predictor and no observation (one per run).

        Returns
        -------
        OnlineHazard
        """
        return type(self)(self.prior_rate_per_hour, self.price_predictor, prior_hours=self.prior_hours,
                          horizon_s=self.horizon_s)

    # -- learning -------------------------------------------------------------------------------------
    def observe(self, market: Market, launch_s: float, end_s: float, revoked: bool) -> None:
        """Add one ended instance run: launched at ``launch_s``, gone at ``end_s`` (seconds).

        ``revoked``: the provider ended it for capacity (not the user, not a price crossing).

        Parameters
        ----------
        market : Market or str
        launch_s, end_s : float
            Seconds since the epoch (UTC); only the first ``horizon_s`` of the run count as exposure.
        revoked : bool

        Raises
        ------
        RevPredError
            ``end_s`` before ``launch_s`` or a non-finite time.
        """
        if not (math.isfinite(launch_s) and math.isfinite(end_s)) or end_s < launch_s:
            raise RevPredError(f"instance run {launch_s} .. {end_s} s is not a finite interval")
        m = Market.parse(market) if isinstance(market, str) else market
        life = end_s - launch_s
        self.exposure_s[m] = self.exposure_s.get(m, 0.0) + min(life, self.horizon_s)
        self.events[m] = self.events.get(m, 0) + int(bool(revoked) and life <= self.horizon_s)

    def posterior(self, market: Market) -> tuple[float, float]:
        """(alpha, beta): shape and rate (seconds) of the gamma posterior of the market's rate per second.

        Parameters
        ----------
        market : Market

        Returns
        -------
        alpha : float
            Prior shape plus the interruptions observed within the first hour.
        beta : float
            Prior pseudo-exposure plus the observed first-hour exposure, seconds.

        Raises
        ------
        RevPredError
            If the prior mapping lacks the market or its prior rate is negative or not finite.
        """
        prior = self.prior_rate_per_hour
        if callable(prior):
            lam_h = float(prior(market))
        elif isinstance(prior, Mapping):
            if market not in prior:
                raise RevPredError(f"no prior interruption rate for market {market}")
            lam_h = float(prior[market])
        else:
            lam_h = float(prior)
        if not (lam_h >= 0 and math.isfinite(lam_h)):
            raise RevPredError(f"prior interruption rate of {market} is {lam_h} per hour, but must be >= 0")
        beta0 = 3600.0 * self.prior_hours
        alpha0 = lam_h / 3600.0 * beta0
        return alpha0 + self.events.get(market, 0), beta0 + self.exposure_s.get(market, 0.0)

    def capacity_proba(self, market: Market) -> float:
        """P(a capacity interruption within the horizon) for a fresh instance, posterior predictive.

        Parameters
        ----------
        market : Market

        Returns
        -------
        float
            ``1 - (beta / (beta + horizon))^alpha``, in [0, 1].
        """
        alpha, beta = self.posterior(market)
        return float(-np.expm1(alpha * math.log(beta / (beta + self.horizon_s))))

    # -- the protocol ---------------------------------------------------------------------------------
    def predict_proba(self, markets: Sequence[Market], times_s: ArrayLike, max_prices_usd_per_hour: ArrayLike) -> np.ndarray:
        """See :class:`~revpred.protocol.RevocationPredictor`: ``1 - (1 - p_price)(1 - p_capacity)``, shape (n,).

        Non-increasing in the max price whenever ``p_price`` is.

        Parameters
        ----------
        markets : sequence of Market, length n
        times_s : float or array of shape (n,)
            Decision times, seconds since the Unix epoch (UTC). A scalar applies to every query.
        max_prices_usd_per_hour : float or array of shape (n,)
            Max price b of each query, USD per instance-hour.

        Returns
        -------
        p : ndarray of shape (n,), float64 in [0, 1]
            P(revoked within the hour after t at max price b).
        """
        ms, t, b = broadcast_queries(markets, times_s, max_prices_usd_per_hour)
        cap = {m: self.capacity_proba(m) for m in set(ms)}
        p_cap = np.array([cap[m] for m in ms], dtype=np.float64)
        if self.price_predictor is None or not ms:
            return p_cap
        p_price = np.asarray(self.price_predictor.predict_proba(ms, t, b), dtype=np.float64)
        return 1.0 - (1.0 - p_price) * (1.0 - p_cap)
