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

__all__ = ["FAIR_SHARE_MODES", "BinarySearchDemand", "FairShareRound", "OnlineFairShare"]

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

    Raises
    ------
    ConfigError
        On no team, a bad number or an unknown mode.
    """

    def __init__(self, entitlements: Mapping[str, float], *, capacity_usd_per_hour: float,
                 theta_max_usd_per_hour: float, mode: str = "efficient", tolerance_usd_per_hour: float | None = None):
        if not entitlements:
            raise ConfigError("entitlements is empty, but must name at least one team")
        if mode not in FAIR_SHARE_MODES:
            raise ConfigError(f"mode is {mode!r}, but must be one of {', '.join(FAIR_SHARE_MODES)}")
        self.entitlements = {t: _positive(f"entitlements[{t!r}]", e) for t, e in sorted(entitlements.items())}
        self.capacity = _positive("capacity_usd_per_hour", capacity_usd_per_hour)
        self.mode = mode
        self.searches = {t: BinarySearchDemand(theta_max_usd_per_hour, tolerance_usd_per_hour)
                         for t in self.entitlements}
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
        alloc = max_min_fair([self.entitlements[t] for t in teams], [demands[t] for t in teams], self.capacity)
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
            alloc[team] = min(n[team] * self.searches[team].probe(), self.capacity)
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

    def interval(self, team: str) -> tuple[float, float]:
        """``(low, high)`` of the team's unit demand, USD/hour per unit of load."""
        s = self.searches[team]
        return s.low, s.high
