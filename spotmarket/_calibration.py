"""Calibrating the modern (capacity-driven) interruption model from real interruption traces.

Source: ``data/interruption_traces/`` (read its README): the SkyPilot "Can't Be Late" traces
(Wu et al., NSDI 2024; github.com/skypilot-org/spot-traces; no licence stated, internal calibration
only, cite the paper). Three things are estimated:

1. **Lifetimes** (time from launch to preemption): a Weibull with shape k < 1 (decreasing hazard),
   fitted by maximum likelihood to the "up" periods of ``skypilot/periods.csv.gz`` (default: AWS,
   family ``preemption``, 1-node traces, i.e. real preemptions of running instances), **including the
   right-censored periods** (the README's "rough fit" drops them; the difference is small). Durations
   are ``ticks * gap_seconds`` (32–34 s ticks here). One (k, scale) per instance type, one for all types
   pooled (key ``"*"``), and a scale per (type, zone) and per zone with the shape held at the type's
   (resp. the pooled) k: zones differ mainly in scale (README §1.8, point 1).
2. **Correlation**: the share of instance losses in the 4-node preemption traces that happen within
   ``co_window_s`` (default one 300 s tick) of another loss in the same cluster. The modern model gives
   that share of the first-hour hazard to market-wide capacity-loss events (correlated failures,
   decision M8; README §1.5 "Multi-node correlation").
3. **Outages**: a lognormal for how long a market stays without capacity after a capacity loss, fitted
   to the interior "down" periods of the same traces (time until a replacement was running), per
   instance type (>= 10 periods) and pooled.

The numbers from the bundled traces are frozen in :meth:`HazardCalibration.default` and recorded in
``docs/design/decisions.md`` ("Market replay"); a test checks them against :func:`calibrate_from_traces`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from spotmarket.prices import Market
from spotmarket.errors import MarketError
from spotmarket._units import HOUR_S

ANY = "*"


@dataclass(frozen=True, slots=True, kw_only=True)
class WeibullLifetime:
    """Weibull lifetime ``S(t) = exp(-(t / scale_s) ** shape)``.

    Attributes
    ----------
    shape : float
        k; k < 1 means a decreasing hazard (an instance that survived its first hour is likely to live
        much longer).
    scale_s : float
        Scale in seconds.
    n_events : int
        Uncensored lifetimes (observed preemptions) it was fitted on.
    n_censored : int
        Right-censored lifetimes (still up at the end of a trace).
    p_le_1h_observed : float
        Kaplan–Meier estimate of P(lifetime <= 1 h) from the same data, for comparison with
        :attr:`p_le_1h`.
    """

    shape: float
    scale_s: float
    n_events: int = 0
    n_censored: int = 0
    p_le_1h_observed: float = float("nan")

    def __post_init__(self) -> None:
        if not (self.shape > 0 and self.scale_s > 0):
            raise MarketError(f"Weibull shape {self.shape} and scale {self.scale_s} s must both be > 0")

    def survival(self, t_s: float | np.ndarray) -> float | np.ndarray:
        """P(lifetime > t), t in seconds.

        Parameters
        ----------
        t_s : float or ndarray
            Instance age, seconds since launch.

        Returns
        -------
        float or ndarray of the same shape
            The Weibull survival ``exp(-(t / scale)^shape)``, in [0, 1].
        """
        return np.exp(-(np.asarray(t_s, dtype=float) / self.scale_s) ** self.shape)

    @property
    def p_le_1h(self) -> float:
        """P(lifetime <= 3600 s) under the fitted Weibull."""
        return float(1.0 - self.survival(HOUR_S))

    @property
    def p_le_1h_target(self) -> float:
        """P(lifetime <= 1 h) the modern model reproduces: the observed (Kaplan–Meier) value if known.

        The Weibull MLE under-predicts it (e.g. 0.554 vs 0.623 for p3.2xlarge), and the first hour
        decides SpotTune's refunds, so the model is pinned to the data there [I].
        """
        return self.p_le_1h_observed if math.isfinite(self.p_le_1h_observed) else self.p_le_1h

    @property
    def median_s(self) -> float:
        """Median lifetime, seconds."""
        return self.scale_s * math.log(2.0) ** (1.0 / self.shape)

    @property
    def mean_s(self) -> float:
        """Mean lifetime, seconds."""
        return self.scale_s * math.gamma(1.0 + 1.0 / self.shape)


@dataclass(frozen=True, slots=True)
class HazardSplit:
    """A lifetime split into an independent per-instance part and a market-wide event stream.

    Attributes
    ----------
    shape : float
        k, shared by both parts.
    instance_scale_s : float
        Scale (s) of each instance's own Weibull lifetime; ``inf`` if all hazard is correlated.
    event_scale_s : float
        Scale (s) of the Weibull inter-arrival times of the market's capacity-loss events (a renewal
        process); ``inf`` if there are none.
    """

    shape: float
    instance_scale_s: float
    event_scale_s: float


def split_hazard(lifetime: WeibullLifetime, correlated_share: float) -> HazardSplit:
    """Split a lifetime so a share of its first-hour hazard comes from market-wide events.

    An instance launched at a time independent of its market's events dies at the earlier of its own
    Weibull lifetime (shape k, scale ``s_i``) and the next market event, whose waiting time is the
    stationary residual of a Weibull(k, ``s_m``) renewal process, ``S_eq(t) = Q(1/k, (t/s_m)^k)`` (``Q`` the
    regularised upper incomplete gamma). With ``H = -log(1 - p)`` the cumulative hazard at one hour,
    ``p`` = :attr:`WeibullLifetime.p_le_1h_target` (the observed P(<= 1 h)), the parts are chosen so that

    * ``(3600/s_i)^k = (1 - rho) H``  and  ``-log S_eq(3600) = rho H``;

    hence P(revoked within the first hour), the quantity that decides SpotTune's refunds (Eq 1),
    equals ``p`` exactly for such a launch. Both parts keep the fitted shape k (decreasing hazard);
    other horizons match only approximately. Launches that must wait out a capacity outage see a
    somewhat lower first-hour hazard (measured in docs/design/decisions.md, "Market replay").

    Parameters
    ----------
    lifetime : WeibullLifetime
    correlated_share : float
        rho in [0, 1].

    Returns
    -------
    HazardSplit

    Raises
    ------
    MarketError
        If ``correlated_share`` is outside [0, 1].
    """
    from scipy import special  # lazy: keeps `import spotmarket` light

    rho = float(correlated_share)
    if not 0.0 <= rho <= 1.0:
        raise MarketError(f"correlated_share is {correlated_share}, but must be in [0, 1]")
    k = lifetime.shape
    h1 = -math.log1p(-lifetime.p_le_1h_target)
    instance_scale = math.inf if rho == 1.0 else HOUR_S / ((1.0 - rho) * h1) ** (1.0 / k)
    if rho == 0.0:
        event_scale = math.inf
    else:
        x = float(special.gammainccinv(1.0 / k, math.exp(-rho * h1)))
        event_scale = HOUR_S / x ** (1.0 / k) if x > 0 else math.inf
    return HazardSplit(k, instance_scale, event_scale)


@dataclass(frozen=True, kw_only=True)
class HazardCalibration:
    """Parameters of :class:`~spotmarket.ModernHazardRevocation`.

    Attributes
    ----------
    lifetimes : mapping of (instance_type, availability_zone) -> WeibullLifetime
        Either part may be ``"*"`` (any). :meth:`lifetime` looks up (type, zone), (type, *),
        (*, zone), (*, *) in that order; (*, *) must exist.
    correlated_share : float
        rho in [0, 1]: share of the first-hour hazard due to market-wide capacity-loss events.
    outage_log_mean, outage_log_sd : float
        Lognormal (mean and sd of log-seconds) of how long a market has no capacity after a
        capacity-loss event; the fallback for types not in ``type_outages``.
    type_outages : mapping of instance_type -> (log_mean, log_sd)
        The same per instance type (outages differ by type: README §1.8, down median 0.40 h for
        p3.2xlarge, 0.15 h for r5.16xlarge).
    source : str
        Where the numbers came from.
    """

    lifetimes: Mapping[tuple[str, str], WeibullLifetime]
    correlated_share: float
    outage_log_mean: float
    outage_log_sd: float
    type_outages: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    source: str = ""
    _cache: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if (ANY, ANY) not in self.lifetimes:
            raise MarketError("a hazard calibration needs a pooled ('*', '*') lifetime as the fallback")
        if not 0.0 <= self.correlated_share <= 1.0:
            raise MarketError(f"correlated_share is {self.correlated_share}, but must be in [0, 1]")
        for name, (mu, sd) in {ANY: (self.outage_log_mean, self.outage_log_sd), **self.type_outages}.items():
            if not (sd >= 0 and math.isfinite(mu)):
                raise MarketError(f"outage lognormal ({mu}, {sd}) for {name!r} is invalid: need a finite mean, sd >= 0")

    def lifetime(self, market: Market) -> WeibullLifetime:
        """The lifetime for a market: (type, zone), else (type, *), else (*, zone), else (*, *).

        Parameters
        ----------
        market : Market

        Returns
        -------
        WeibullLifetime
            The most specific calibrated lifetime (decision M13).
        """
        for key in ((market.instance_type, market.availability_zone), (market.instance_type, ANY),
                    (ANY, market.availability_zone), (ANY, ANY)):
            if key in self.lifetimes:
                return self.lifetimes[key]
        raise AssertionError("unreachable: (*, *) is checked in __post_init__")

    def split(self, market: Market) -> HazardSplit:
        """:func:`split_hazard` of the market's lifetime with :attr:`correlated_share` (cached).

        Parameters
        ----------
        market : Market

        Returns
        -------
        HazardSplit
            The shared shape k and the instance and market-event Weibull scales, seconds (decision M9).
        """
        life = self.lifetime(market)
        key = (life.shape, life.scale_s)
        if key not in self._cache:
            self._cache[key] = split_hazard(life, self.correlated_share)
        return self._cache[key]

    def outage(self, market: Market) -> tuple[float, float]:
        """(log_mean, log_sd) of the outage lognormal for the market's instance type (else the pooled one).

        Parameters
        ----------
        market : Market

        Returns
        -------
        tuple of (float, float)
            Mean and standard deviation of log-seconds of an outage (decision M10).
        """
        return self.type_outages.get(market.instance_type, (self.outage_log_mean, self.outage_log_sd))

    @property
    def outage_median_s(self) -> float:
        """Median outage after a capacity-loss event, pooled over types, seconds."""
        return math.exp(self.outage_log_mean)

    def table(self) -> pd.DataFrame:
        """One row per lifetime key: shape, scale (h), P(<= 1 h) fitted vs observed, counts.

        Returns
        -------
        pandas.DataFrame
            Columns ``instance_type``, ``availability_zone``, ``shape``, ``scale_h``, ``median_h`` (hours),
            ``p_le_1h``, ``p_le_1h_observed``, ``n_events``, ``n_censored``.
        """
        rows = [{"instance_type": it, "availability_zone": az, "shape": w.shape, "scale_h": w.scale_s / HOUR_S,
                 "median_h": w.median_s / HOUR_S, "p_le_1h": w.p_le_1h, "p_le_1h_observed": w.p_le_1h_observed,
                 "n_events": w.n_events, "n_censored": w.n_censored}
                for (it, az), w in sorted(self.lifetimes.items())]
        return pd.DataFrame(rows)

    @classmethod
    def default(cls) -> "HazardCalibration":
        """Numbers fitted by :func:`calibrate_from_traces` on the bundled SkyPilot traces (defaults).

        AWS preemption traces of April 2023 (us-east-1, us-west-2), 1-node: p3.2xlarge (4 zones,
        202 preemptions) and r5.16xlarge (3 zones, 221 preemptions); correlation from the 4-node
        p3.2xlarge traces (600 instance losses). See ``docs/design/decisions.md`` ("Market replay").

        Returns
        -------
        HazardCalibration
            The frozen default calibration (the table "Calibration numbers" of decisions.md).
        """
        return cls(lifetimes={k: WeibullLifetime(shape=v[0], scale_s=v[1], n_events=v[2], n_censored=v[3],
                                                 p_le_1h_observed=v[4]) for k, v in _DEFAULT_LIFETIMES.items()},
                   correlated_share=_DEFAULT_CORRELATED_SHARE, outage_log_mean=_DEFAULT_OUTAGE[0],
                   outage_log_sd=_DEFAULT_OUTAGE[1], type_outages=dict(_DEFAULT_TYPE_OUTAGES), source=_DEFAULT_SOURCE)


# Frozen output of calibrate_from_traces("data/interruption_traces") with the defaults.
# key: (shape, scale_s, n_events, n_censored, p_le_1h_observed)
_DEFAULT_LIFETIMES: dict[tuple[str, str], tuple[float, float, int, int, float]] = {
    ('*', '*'): (0.59745, 4254.91, 423, 5, 0.661215),
    ('*', 'us-east-1b'): (0.59745, 4338.33, 66, 1, 0.641791),
    ('*', 'us-east-1c'): (0.59745, 2136.18, 169, 1, 0.794118),
    ('*', 'us-east-1d'): (0.59745, 15323.4, 27, 1, 0.25),
    ('*', 'us-east-1f'): (0.59745, 3594.57, 60, 0, 0.733333),
    ('*', 'us-west-2b'): (0.59745, 7879.72, 44, 1, 0.488889),
    ('*', 'us-west-2c'): (0.59745, 5769.8, 57, 1, 0.551724),
    ('p3.2xlarge', '*'): (0.617009, 5080.62, 202, 2, 0.622549),
    ('p3.2xlarge', 'us-east-1c'): (0.617009, 3374.36, 41, 0, 0.707317),
    ('p3.2xlarge', 'us-east-1f'): (0.617009, 3700.46, 60, 0, 0.733333),
    ('p3.2xlarge', 'us-west-2b'): (0.617009, 8041.54, 44, 1, 0.488889),
    ('p3.2xlarge', 'us-west-2c'): (0.617009, 5882.74, 57, 1, 0.551724),
    ('r5.16xlarge', '*'): (0.585005, 3585.77, 221, 3, 0.696429),
    ('r5.16xlarge', 'us-east-1b'): (0.585005, 4266.17, 66, 1, 0.641791),
    ('r5.16xlarge', 'us-east-1c'): (0.585005, 1783.87, 128, 1, 0.821705),
    ('r5.16xlarge', 'us-east-1d'): (0.585005, 15203.4, 27, 1, 0.25),
}
_DEFAULT_CORRELATED_SHARE = 0.833333  # 500 of 600 losses
_DEFAULT_OUTAGE = (6.85937, 1.38847)  # log-seconds; median 953 s
_DEFAULT_TYPE_OUTAGES = {"p3.2xlarge": (7.30827, 1.46913), "r5.16xlarge": (6.45313, 1.17438)}  # medians 1493 s, 635 s
_DEFAULT_SOURCE = ("SkyPilot spot-traces (Wu et al., NSDI 2024): AWS preemption 1-node up periods "
                   "(p3.2xlarge, r5.16xlarge; Apr 2023); correlation: 4-node preemption traces, "
                   "500/600 losses within 300 s of another")
