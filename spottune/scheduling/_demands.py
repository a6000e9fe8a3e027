"""Learning each team's demand online, then splitting the org budget by max-min fairness every hour.

Kandasamy et al. (arXiv 2012.08648), the deterministic feedback model [R]: a team's reward in an hour is whether
the allocation per unit of load reached its unit demand θ (USD/hour per active trial needed for its trials to be
on track); θ is unknown, below a known ``theta_max``, and found by binary search on the threshold feedback.
Two modes (decision SV3): ``efficient`` (their Algorithm 3: MMF on the current probe every hour, learning from
every hour's feedback) and ``strategy-proof`` (their Algorithm 2: brackets that open with one report-independent
exploration hour per team, where only that team is served, followed by ``2**bracket`` hours of MMF on the
upper bounds, so inflating a report gains nothing once the bound is tight). Pure: no clock, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from spottune.errors import ConfigError
from spottune.scheduling._fairness import max_min_fair

__all__ = ["FAIR_SHARE_MODES", "BinarySearchDemand", "FairShareRound", "NoisyBinarySearchDemand", "OnlineFairShare"]

#: The two mechanisms of :class:`OnlineFairShare`.
FAIR_SHARE_MODES = ("efficient", "strategy-proof")


def _positive(name: str, value: float) -> float:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ConfigError(f"{name} is {value!r}, but must be a finite number > 0")
    return float(value)


class BinarySearchDemand:
    """An interval ``[low, high]`` that holds a unit demand θ, halved by every informative threshold feedback.

    Parameters
    ----------
    theta_max : float
        Known upper bound on θ (USD/hour per unit of load), > 0.
    tolerance : float, optional
        Width below which the search stops probing and answers ``high``; default ``theta_max / 1024``.

    Raises
    ------
    ConfigError
        On a ``theta_max`` or ``tolerance`` that is not a finite number > 0.
    """

    def __init__(self, theta_max: float, tolerance: float | None = None):
        self.theta_max = _positive("theta_max", theta_max)
        self.tolerance = _positive("tolerance", tolerance) if tolerance is not None else self.theta_max / 1024
        self.low, self.high = 0.0, self.theta_max
        self.probes = 0

    @property
    def width(self) -> float:
        """``high - low`` (USD/hour per unit of load)."""
        return self.high - self.low

    def probe(self) -> float:
        """The next value to try: the midpoint while the interval is wider than the tolerance, then ``high``."""
        return (self.low + self.high) / 2 if self.width > self.tolerance else self.high

    def observe(self, per_unit: float, met: bool) -> None:
        """Record that an allocation of ``per_unit`` (USD/hour per unit of load) did (``met``) or did not reach θ.

        Parameters
        ----------
        per_unit : float
            Allocation divided by load.
        met : bool
            Whether the team's reward reached its threshold τ, i.e. ``per_unit >= θ`` in the deterministic model.
        """
        before = (self.low, self.high)
        if met:
            self.high = min(self.high, per_unit)
        else:
            self.low = max(self.low, per_unit)
        self.low = min(self.low, self.high)
        if (self.low, self.high) != before:
            self.probes += 1


class NoisyBinarySearchDemand(BinarySearchDemand):
    """Binary search on noisy rewards: each allocation is repeated until a Hoeffding interval of the mean reward lies
    on one side of the threshold τ (or ``max_samples`` are in), then the interval's end moves there (decision SV3) [I].

    The paper's noisy models use a quasi-MLE (parametric) or an infinite binary tree with monotone confidence bounds
    (nonparametric); this is the simpler sequential test of each midpoint, correct with probability ``1 - delta`` per
    probe when rewards are ``noise_scale``-sub-Gaussian around a non-decreasing f(x) whose threshold crossing is θ.

    Parameters
    ----------
    theta_max : float
        Upper bound on θ (USD/hour per unit of load), > 0.
    threshold : float
        τ, the reward that counts as "met" (e.g. 0.95 of the team's trials on track).
    tolerance : float, optional
        Default ``theta_max / 1024``.
    noise_scale : float, default 0.5
        Sub-Gaussian scale of one reward (0.5 bounds any reward in [0, 1]).
    delta : float, default 0.01
        Error probability per probe.
    max_samples : int, default 200
        Rewards after which a probe is decided by the sign of ``mean - threshold``.
    """

    def __init__(self, theta_max: float, threshold: float, tolerance: float | None = None, *,
                 noise_scale: float = 0.5, delta: float = 0.01, max_samples: int = 200):
        super().__init__(theta_max, tolerance)
        self.threshold = float(threshold)
        self.noise_scale, self.delta, self.max_samples = noise_scale, delta, max_samples
        self._x: float | None = None
        self._sum, self._n = 0.0, 0

    def observe_reward(self, per_unit: float, reward: float) -> None:
        """Record one reward at an allocation of ``per_unit`` (USD/hour per unit of load).

        Rewards are pooled while the allocation stays the same (the probe, or less when contention cut it: a test at
        any point is informative); a new allocation starts a new test. Once a test is decided,
        :meth:`BinarySearchDemand.observe` moves the interval's end to that point.
        """
        if self.width <= self.tolerance or not (self.low < per_unit < self.high):
            return  # decided already, or outside the interval: nothing to learn there
        if self._x is None or not math.isclose(per_unit, self._x, rel_tol=1e-9, abs_tol=1e-12):
            self._x, self._sum, self._n = per_unit, 0.0, 0
        self._sum += float(reward)
        self._n += 1
        mean = self._sum / self._n
        half = self.noise_scale * math.sqrt(2.0 * math.log(2.0 / self.delta) / self._n)
        if abs(mean - self.threshold) > half or self._n >= self.max_samples:
            x, self._x, self._sum, self._n = self._x, None, 0.0, 0
            self.observe(x, mean >= self.threshold)


@dataclass(frozen=True, slots=True, kw_only=True)
class FairShareRound:
    """One hour's split.

    Attributes
    ----------
    hour : int
        0, 1, ... in the order :meth:`OnlineFairShare.allocate` was called.
    allocations : dict of str to float
        USD/hour per team.
    demands : dict of str to float
        The demands MMF was run on (load times the probe or the upper bound), USD/hour; empty in an exploration hour.
    exploring : str or None
        The team served alone in a strategy-proof exploration hour.
    """

    hour: int
    allocations: dict[str, float]
    demands: dict[str, float] = field(default_factory=dict)
    exploring: str | None = None


class OnlineFairShare:
    """The org budget (USD/hour) split each hour among teams by MMF on demands learned from their rewards.

    Parameters
    ----------
    entitlements : mapping of str to float
        Each team's share, > 0 (normalised by the sum).
    capacity_usd_per_hour : float
        The org budget, > 0.
    theta_max_usd_per_hour : float
        Upper bound on any team's unit demand (USD/hour per active trial), > 0.
    mode : {"efficient", "strategy-proof"}, default "efficient"
        See the module docstring (decision SV3).
    tolerance_usd_per_hour : float, optional
        Binary-search tolerance; default ``theta_max / 1024``.
    threshold : float, optional
        With a threshold τ the feedback is noisy: :meth:`observe_rewards` takes each team's reward and each probe is
        decided by :class:`NoisyBinarySearchDemand`'s sequential test. Without, :meth:`observe` takes met / not met.
    minimums_usd_per_hour, caps_usd_per_hour : mapping of str to float, optional
        Per team, a guaranteed minimum and a cap (USD/hour) that every MMF hour honours (``max_min_fair``'s
        ``minimums`` and ``caps``, decision SV13); an exploration hour gives at most the team's cap. Kept in the
        attributes ``minimums`` and ``caps``, which a caller may change between hours.

    Raises
    ------
    ConfigError
        On no team, a bad number or an unknown mode.
    """

    def __init__(self, entitlements: Mapping[str, float], *, capacity_usd_per_hour: float,
                 theta_max_usd_per_hour: float, mode: str = "efficient", tolerance_usd_per_hour: float | None = None,
                 threshold: float | None = None, minimums_usd_per_hour: Mapping[str, float] | None = None,
                 caps_usd_per_hour: Mapping[str, float] | None = None):
        if not entitlements:
            raise ConfigError("entitlements is empty, but must name at least one team")
        if mode not in FAIR_SHARE_MODES:
            raise ConfigError(f"mode is {mode!r}, but must be one of {', '.join(FAIR_SHARE_MODES)}")
        self.entitlements = {t: _positive(f"entitlements[{t!r}]", e) for t, e in sorted(entitlements.items())}
        self.capacity = _positive("capacity_usd_per_hour", capacity_usd_per_hour)
        self.mode = mode
        self.searches: dict[str, BinarySearchDemand] = {
            t: (BinarySearchDemand(theta_max_usd_per_hour, tolerance_usd_per_hour) if threshold is None else
                NoisyBinarySearchDemand(theta_max_usd_per_hour, threshold, tolerance_usd_per_hour))
            for t in self.entitlements}
        self.minimums: dict[str, float] = dict(minimums_usd_per_hour or {})
        self.caps: dict[str, float] = dict(caps_usd_per_hour or {})
        self.hour = 0
        self._plan: list[str | None] = []  # strategy-proof: the coming hours, a team to explore or None
        self._bracket = 0

    def _loads(self, loads: Mapping[str, float]) -> dict[str, float]:
        unknown = sorted(set(loads) - set(self.entitlements))
        if unknown:
            raise ConfigError(f"loads names unknown team {unknown[0]!r}; teams are {', '.join(self.entitlements)}")
        out = {}
        for t in self.entitlements:
            n = loads.get(t, 0.0)
            if not (isinstance(n, (int, float)) and math.isfinite(n) and n >= 0):
                raise ConfigError(f"loads[{t!r}] is {n!r}, but must be a finite number >= 0")
            out[t] = float(n)
        return out

    def _mmf(self, demands: dict[str, float]) -> dict[str, float]:
        teams = list(self.entitlements)
        bounds: dict[str, list[float | None]] = {}
        if self.minimums or self.caps:
            bounds = {"minimums": [self.minimums.get(t) for t in teams], "caps": [self.caps.get(t) for t in teams]}
        alloc = max_min_fair([self.entitlements[t] for t in teams], [demands[t] for t in teams], self.capacity,
                             **bounds)
        return dict(zip(teams, map(float, alloc)))

    def allocate(self, loads: Mapping[str, float]) -> FairShareRound:
        """This hour's allocations for the teams' loads (active trials; a missing team has load 0).

        Parameters
        ----------
        loads : mapping of str to float
            Units of load per team, >= 0.

        Returns
        -------
        FairShareRound

        Raises
        ------
        ConfigError
            On an unknown team or a negative load.
        """
        n = self._loads(loads)
        hour, self.hour = self.hour, self.hour + 1
        if self.mode == "efficient":
            demands = {t: n[t] * self.searches[t].probe() for t in n}
            return FairShareRound(hour=hour, allocations=self._mmf(demands), demands=demands)
        if not self._plan:  # a new bracket: one exploration hour per team, then 2**bracket exploitation hours
            self._plan = [*self.entitlements, *([None] * 2 ** self._bracket)]
            self._bracket += 1
        team = self._plan.pop(0)
        if team is not None:  # report-independent: the probe alone, everyone else gets nothing
            alloc = {t: 0.0 for t in n}
            alloc[team] = min(n[team] * self.searches[team].probe(), self.capacity, self.caps.get(team, math.inf))
            return FairShareRound(hour=hour, allocations=alloc, exploring=team)
        demands = {t: n[t] * self.searches[t].high for t in n}
        return FairShareRound(hour=hour, allocations=self._mmf(demands), demands=demands)

    def observe(self, rnd: FairShareRound, loads: Mapping[str, float], met: Mapping[str, bool]) -> None:
        """Learn from the hour's rewards: ``met[team]`` says whether the team's reward reached its threshold.

        In ``strategy-proof`` mode only the explored team's feedback is used (exploitation hours teach nothing,
        so a misreport there cannot steer the estimate).

        Parameters
        ----------
        rnd : FairShareRound
            What :meth:`allocate` returned for the hour.
        loads : mapping of str to float
            The same loads as given to :meth:`allocate`.
        met : mapping of str to bool
            Teams without an entry teach nothing this hour.
        """
        n = self._loads(loads)
        teams = [rnd.exploring] if self.mode == "strategy-proof" else list(n)
        for t in teams:
            if t is None or t not in met or n[t] <= 0:
                continue
            self.searches[t].observe(rnd.allocations[t] / n[t], bool(met[t]))

    def observe_rewards(self, rnd: FairShareRound, loads: Mapping[str, float], rewards: Mapping[str, float]) -> None:
        """Noisy feedback (an ``OnlineFairShare`` built with a ``threshold``): each team's reward for the hour.

        Parameters
        ----------
        rnd : FairShareRound
        loads : mapping of str to float
        rewards : mapping of str to float
            E.g. the fraction of the team's trials on track; teams without an entry teach nothing.

        Raises
        ------
        ConfigError
            If this mechanism was built without a threshold.
        """
        n = self._loads(loads)
        teams = [rnd.exploring] if self.mode == "strategy-proof" else list(n)
        for t in teams:
            search = self.searches.get(t) if t is not None else None
            if not isinstance(search, NoisyBinarySearchDemand):
                raise ConfigError("observe_rewards needs an OnlineFairShare built with a threshold (noisy feedback)")
            if t in rewards and n[t] > 0:
                search.observe_reward(rnd.allocations[t] / n[t], rewards[t])

    def interval(self, team: str) -> tuple[float, float]:
        """``(low, high)`` of the team's unit demand, USD/hour per unit of load."""
        s = self.searches[team]
        return s.low, s.high
