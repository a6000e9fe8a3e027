"""Today's spot rule: capacity interruptions with a decreasing hazard, correlated within a market.

Decision M8 (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-interruptions.html): split cost (the
price series) from interruption (a hazard process); the price matters only if a max price is set; correlate
failures within a pool. Calibration: :mod:`spotmarket._calibration` (SkyPilot traces, 2023).

The model, per market (availability zone, instance type, product):

* **Market-wide capacity-loss events.** A renewal process with Weibull(k, ``event_scale_s``)
  inter-arrival times (k < 1: bursts of losses, then long quiet spells). Each event terminates
  *every* instance of the market running at that moment, and, unless the market is already out of
  capacity, starts an outage of lognormal length (per instance type): launches in it, and in the
  notice window just before the event, are refused (``REFUSED_CAPACITY``). Losses during an outage
  do not extend it, so outages follow the traces' down-period distribution.
* **Per-instance interruptions.** Each instance also has its own Weibull(k, ``instance_scale_s``)
  lifetime from launch.
* The instance ends at the earlier of the two (and of a price crossing, if a max price is set: notice
  at the crossing, termination ``notice_lead_s`` later, as in the legacy rule).
* The scales come from :func:`~spotmarket.split_hazard`: a share rho of the first-hour hazard
  goes to the market events, and P(revoked within 1 h) equals the fitted Weibull's.
* Notice: ``max(launch, termination - notice_lead_s)`` (decision M8); use ``notice_lead_s=0``
  for a notice that never came (best-effort).

Determinism [I]: time is cut into weekly blocks (``BLOCK_S``). The events of block b of market m come
only from ``(seed, "events", m, b)``: the block starts with a stationary residual wait
(``scale * Gamma(1/k) ** (1/k)``) and then draws Weibull gaps until the block ends. Each instance's
lifetime comes only from ``(seed, "life", m, instance_id, launch_s)``. Answers therefore never depend
on query order, and a replay gives the same revocations in any process. The price of this: the renewal
process restarts (in its stationary state) at each block boundary, and an outage is capped at one block.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np

from spotmarket.errors import PriceDataError
from spotmarket.prices import Market
from spotmarket.errors import MarketError
from spotmarket._calibration import HazardCalibration, HazardSplit
from spotmarket._prices import Prices, as_prices, series_of
from spotmarket._revocation import NOTICE_LEAD_S, Cause, Revocation, RevocationModel
from spotmarket._seeding import keyed_rng, keyed_uniform
from spotmarket._units import HOUR_S

BLOCK_S = 7 * 86400.0
"""Length of one independently seeded block of market events, seconds (one week)."""
MAX_BLOCKS_AHEAD = 520
"""Search at most this many blocks (about 10 years) for the next market event, then give ``inf``."""
_CACHE_BLOCKS = 4096


class ModernHazardRevocation(RevocationModel):
    """Capacity-driven revocations (AWS since late 2017, decision M8), calibrated from real traces.

    Parameters
    ----------
    calibration : HazardCalibration or None
        Lifetimes, correlated share and outages; None = :meth:`HazardCalibration.default` (SkyPilot
        AWS preemption traces, 2023).
    seed : int
        Experiment seed (>= 0). Same seed, same revocations.
    history : PriceHistory, mapping or list of PriceSeries, optional
        Needed only for launches with a max price (price > max price also revokes; decision M8).
    notice_lead_s : float, default 120
        Seconds from notice to termination; 0 = no usable notice.
    outages : bool, default True
        Refuse launches while the market is out of capacity after a capacity-loss event (and in the
        notice window before one); see :meth:`has_capacity`.
    correlated : bool, default True
        False: no market events, every instance has the whole fitted Weibull to itself (independent
        revocations, for ablations).

    Raises
    ------
    MarketError
        If ``seed`` is not an int >= 0 or ``notice_lead_s`` is negative or not finite.

    Examples
    --------
    >>> from spotmarket.prices import Market
    >>> model = ModernHazardRevocation(None, seed=7)
    >>> r = model.revocation(Market("us-east-1c", "p3.2xlarge"), 1.7e9, instance_id="i-1")
    >>> r.fulfilled == (r.cause != "refused-capacity")
    True
    """

    def __init__(self, calibration: HazardCalibration | None, seed: int, *, history: Prices | None = None,
                 notice_lead_s: float = NOTICE_LEAD_S, outages: bool = True, correlated: bool = True):
        super().__init__(notice_lead_s=notice_lead_s)
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise MarketError(f"seed is {seed!r}, but must be an int >= 0")
        self.calibration = HazardCalibration.default() if calibration is None else calibration
        self.seed = int(seed)
        self.history = None if history is None else as_prices(history)
        self.outages = bool(outages)
        self.correlated = bool(correlated)
        self._blocks: OrderedDict[tuple[Market, int], tuple[np.ndarray, np.ndarray]] = OrderedDict()

    # -- the hazard ----------------------------------------------------------------------------------
    def split(self, market: Market) -> HazardSplit:
        """Shape and the two scales used for ``market`` (seconds).

        Parameters
        ----------
        market : Market

        Returns
        -------
        HazardSplit
            The calibration's split; with ``correlated=False`` the whole lifetime and an infinite event scale.
        """
        if self.correlated:
            return self.calibration.split(market)
        life = self.calibration.lifetime(market)
        return HazardSplit(life.shape, life.scale_s, math.inf)

    def _block(self, market: Market, b: int) -> tuple[np.ndarray, np.ndarray]:
        """Event times of block ``b`` of ``market`` and, for each, the latest outage end up to that event.

        Both in seconds since the epoch; the second array is a running maximum, so "is t inside an
        outage" is one binary search.
        """
        key = (market, b)
        hit = self._blocks.get(key)
        if hit is not None:
            self._blocks.move_to_end(key)
            return hit
        split = self.split(market)
        start, end = b * BLOCK_S, (b + 1) * BLOCK_S
        times = np.empty(0)
        if math.isfinite(split.event_scale_s):
            k, scale = split.shape, split.event_scale_s
            rng = keyed_rng(self.seed, "events", market, b)
            first = start + scale * rng.gamma(1.0 / k) ** (1.0 / k)  # stationary residual wait
            chunk = 16 + int(1.5 * BLOCK_S / (scale * math.gamma(1.0 + 1.0 / k)))
            parts, last = [np.array([first])], first
            while last < end:
                more = last + np.cumsum(scale * rng.weibull(k, size=chunk))
                parts.append(more)
                last = more[-1]
            times = np.concatenate(parts)
            times = times[times < end]
        mu, sd = self.calibration.outage(market)
        outage = np.exp(keyed_rng(self.seed, "outages", market, b).normal(mu, sd, size=times.size))
        ends = _outage_ends(times, outage) if self.outages else times.copy()
        self._blocks[key] = (times, ends)
        if len(self._blocks) > _CACHE_BLOCKS:
            self._blocks.popitem(last=False)
        return times, ends

    def market_events(self, market: Market, start_s: float, end_s: float) -> np.ndarray:
        """Times of the market's capacity-loss events in ``[start_s, end_s)``, seconds since the epoch.

        Parameters
        ----------
        market : Market
        start_s, end_s : float
            Window, seconds since the epoch (UTC).

        Returns
        -------
        ndarray of shape (n_events,)
            Event times, ascending.
        """
        parts = []
        for b in range(math.floor(start_s / BLOCK_S), math.floor(end_s / BLOCK_S) + 1):
            times = self._block(market, b)[0]
            parts.append(times[(times >= start_s) & (times < end_s)])
        return np.concatenate(parts)

    def has_capacity(self, market: Market, t_s: float) -> bool:
        """Whether a launch in ``market`` at ``t_s`` can be fulfilled (always True with ``outages=False``).

        False inside an outage after a capacity-loss event, and also while an event is pending within
        the notice lead (``t_s`` in ``[event - notice_lead_s, event)``): EC2 is reclaiming the pool and
        sending interruption notices, so it hands out no new instances from it [I]. Without this, a
        policy that relaunches on the notice would relaunch into the same doomed pool again and again.

        Parameters
        ----------
        market : Market
        t_s : float
            Launch time, seconds since the epoch (UTC).

        Returns
        -------
        bool
        """
        if not self.outages:
            return True
        b = math.floor(t_s / BLOCK_S)
        times, ends = self._block(market, b)
        i = int(np.searchsorted(times, t_s, side="right"))
        covered = float(ends[i - 1]) if i else -math.inf  # ``ends`` is a running max: latest outage end so far
        prev = self._block(market, b - 1)[1]
        if prev.size:
            covered = max(covered, float(prev[-1]))
        if covered > t_s:
            return False
        return not self._next_event(market, t_s) - t_s <= self.notice_lead_s

    def _next_event(self, market: Market, t_s: float) -> float:
        b = math.floor(t_s / BLOCK_S)
        for blk in range(b, b + MAX_BLOCKS_AHEAD):
            times = self._block(market, blk)[0]
            i = int(np.searchsorted(times, t_s, side="right"))
            if i < times.size:
                return float(times[i])
        return math.inf

    # -- the contract --------------------------------------------------------------------------------
    def revocation(self, market: Market, launch_s: float, *, instance_id: str,
                   max_price_usd_per_hour: float | None = None) -> Revocation:
        """See :meth:`RevocationModel.revocation`.

        Order of checks: capacity outage (``REFUSED_CAPACITY``), then price above the max price
        (``REFUSED_PRICE``). A fulfilled launch ends at the earliest of its own lifetime
        (``CAPACITY``), the next market event (``CAPACITY_EVENT``) and, with a max price, the price
        crossing + ``notice_lead_s`` (``PRICE``).

        Parameters
        ----------
        market : Market
        launch_s : float
            Launch time, seconds since the epoch (UTC).
        instance_id : str
            Unique per launch; the instance's own lifetime draw is keyed on it and ``launch_s``.
        max_price_usd_per_hour : float, optional
            Max price ("bid"), USD per instance-hour. Optional: without one only capacity revokes.

        Returns
        -------
        Revocation
            Cause, notice and termination times (seconds since the epoch); NaN times if refused.

        Raises
        ------
        MarketError
            If ``launch_s`` is not finite, a max price is given without price history, or the price is
            unknown at ``launch_s``.
        """
        t = float(launch_s)
        if not math.isfinite(t):
            raise MarketError(f"market {market}: launch time {launch_s} is not finite")
        nan = math.nan

        def refused(cause: Cause) -> Revocation:
            return Revocation(market=market, instance_id=instance_id, launch_s=t, cause=cause, notice_s=nan,
                              termination_s=nan)

        if not self.has_capacity(market, t):
            return refused(Cause.REFUSED_CAPACITY)
        price_term = price_notice = math.inf
        if max_price_usd_per_hour is not None:
            if self.history is None:
                raise MarketError(f"market {market}: a max price needs price history; pass history= to the model")
            series = series_of(self.history, market)
            try:
                if series.price_at(t) > max_price_usd_per_hour:
                    return refused(Cause.REFUSED_PRICE)
                price_notice = float(series.next_above(t, max_price_usd_per_hour))
            except PriceDataError as err:
                raise MarketError(str(err)) from err
            price_term = price_notice + self.notice_lead_s
        split = self.split(market)
        exp1 = -math.log(keyed_uniform(self.seed, "life", market, instance_id, t))  # Exp(1) draw
        own = t + split.instance_scale_s * exp1 ** (1.0 / split.shape) if math.isfinite(split.instance_scale_s) \
            else math.inf
        event = self._next_event(market, t) if math.isfinite(split.event_scale_s) else math.inf
        capacity_term = min(own, event)
        if price_term < capacity_term:
            return Revocation(market=market, instance_id=instance_id, launch_s=t, cause=Cause.PRICE,
                              notice_s=price_notice, termination_s=price_term)
        if not math.isfinite(capacity_term):
            return Revocation(market=market, instance_id=instance_id, launch_s=t, cause=Cause.NONE,
                              notice_s=math.inf, termination_s=math.inf)
        cause = Cause.CAPACITY_EVENT if event <= own else Cause.CAPACITY
        return Revocation(market=market, instance_id=instance_id, launch_s=t, cause=cause,
                          notice_s=max(t, capacity_term - self.notice_lead_s), termination_s=capacity_term)


def _outage_ends(times: np.ndarray, lengths_s: np.ndarray) -> np.ndarray:
    """For each event (times increasing), the latest outage end up to it: a loss in a market that is already out of
    capacity starts no new outage; an outage lasts at most one block. A running maximum, seconds."""
    ends = times.copy()
    covered = -math.inf
    for i, (at, length) in enumerate(zip(times.tolist(), np.minimum(lengths_s, BLOCK_S).tolist())):
        if at >= covered:
            covered = at + length
        ends[i] = covered
    return ends


#: Monte Carlo results of :func:`fulfilled_p_le_1h` by its parameters (markets with the same ones share a value).
_FULFILLED_CACHE: dict[tuple, float] = {}


def fulfilled_p_le_1h(calibration: HazardCalibration, market: Market, *, notice_lead_s: float = NOTICE_LEAD_S,
                      seed: int = 0, n_events: int = 100_000) -> float:
    """P(an instance is interrupted within its first hour | its launch at a random time was fulfilled), under
    :class:`ModernHazardRevocation`'s model of ``calibration`` (outages on, correlated events).

    :func:`~spotmarket.split_hazard` makes P(interrupted within 3600 s) equal the traces' ``q = p_le_1h_target`` for a
    launch at a time independent of the market's events. A launch is refused inside an outage, which follows an
    event (and with a decreasing hazard, k < 1, another event is then likely soon), and in the notice window just
    before an event, so a fulfilled launch is safer. With ``W`` the wait for the market's next event (the instance's
    own lifetime is independent of it and of the refusal, so its survival cancels):

        ``1 − (1 − q) · P(W > 3600 | fulfilled) / P(W > 3600)``

    The ratio is estimated by Monte Carlo on one renewal stream of ``n_events`` events (Weibull gaps, lognormal
    outages, the model's rule that a loss inside an outage starts none) and as many launch times drawn uniformly
    over it, both terms on the same draws. The draws are keyed by the parameters (shape, event scale, outage
    lognormal, notice lead) and ``seed``, not by the market, so markets with the same parameters get the same value
    (cached per parameter set). A test compares it with 6,000 launches under :class:`ModernHazardRevocation`.

    Parameters
    ----------
    calibration : HazardCalibration
        The model's calibration (lifetimes, correlated share, outages).
    market : Market
        Looked up as :meth:`HazardCalibration.lifetime`, :meth:`~HazardCalibration.split` and
        :meth:`~HazardCalibration.outage` do.
    notice_lead_s : float, default NOTICE_LEAD_S
        Seconds before an event in which launches are refused (the model's notice lead, 120 s).
    seed : int, default 0
        Seed of the Monte Carlo draws (not the replay's).
    n_events : int, default 100000
        Events in the simulated stream, and launch times drawn over it.

    Returns
    -------
    float
        In [0, 1]. The traces' ``q`` when the market has no correlated events, when no drawn launch is fulfilled or
        when no drawn wait exceeds the hour.

    Raises
    ------
    MarketError
        ``n_events`` below 1000.
    """
    if n_events < 1000:
        raise MarketError(f"n_events is {n_events}, but must be >= 1000 for a usable estimate")
    q = calibration.lifetime(market).p_le_1h_target
    split = calibration.split(market)
    if not math.isfinite(split.event_scale_s):
        return q
    mu, sd = calibration.outage(market)
    key = (split.shape, split.event_scale_s, mu, sd, float(notice_lead_s), int(seed), int(n_events))
    if key not in _FULFILLED_CACHE:
        rng = keyed_rng(seed, "fulfilled", *key[:5])
        times = np.cumsum(split.event_scale_s * rng.weibull(split.shape, size=n_events))
        ends = _outage_ends(times, np.exp(rng.normal(mu, sd, size=n_events)))
        t = rng.uniform(times[0], times[-1], size=n_events)
        i = np.minimum(np.searchsorted(times, t, side="right"), times.size - 1)
        wait = times[i] - t
        fulfilled = (ends[i - 1] <= t) & (wait > notice_lead_s)
        survive_all = float(np.mean(wait > HOUR_S))
        ratio = float(np.mean(wait[fulfilled] > HOUR_S)) / survive_all if fulfilled.any() and survive_all > 0 else 1.0
        _FULFILLED_CACHE[key] = ratio
    return float(min(1.0, max(0.0, 1.0 - (1.0 - q) * _FULFILLED_CACHE[key])))
