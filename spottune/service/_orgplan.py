"""The runner's org plan: the org budget split among the teams' running studies by max-min fairness on demands
learned online, and the team that gets a freed slot by ease.ml's HYBRID rule (decisions SV11, SV12). Pure: no clock,
no I/O; the runner stores what it returns.

Each time a study starts, :meth:`OrgPlan.allocate` runs one round of :class:`spottune.scheduling.OnlineFairShare`
(efficient mode) with each team's load = its running studies, this one included; the new study's cap is its team's
allocation divided by that load (USD/hour), and the round's accounting is ``U, O, M, loss`` of
:func:`spottune.scheduling.round_loss` against the demands the round was run on (the learned ones: load times the
team's current probe). When a study ends, :meth:`OrgPlan.observe` feeds its reward (the share of its trials on track)
back as met / not met against :data:`ON_TRACK_THRESHOLD`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from spottune.scheduling import (FREEZE_ROUNDS, BinarySearchDemand, FairShareRound, HybridTeamPicker, OnlineFairShare,
                                 TeamBound, TeamPick, round_loss)

__all__ = ["ON_TRACK_THRESHOLD", "OrgPlan", "StudyGrant", "TeamBounds", "reward_of"]

#: A team's demand counts as met when at least this share of its study's trials were on track (τ, SV11).
ON_TRACK_THRESHOLD = 0.95


def reward_of(states: list[str]) -> float | None:
    """A study's reward: the share of its trials that ended on track (``finished`` or ``stopped_early``).

    Parameters
    ----------
    states : list of str
        The trials' final states (:meth:`spottune.ResultGrid.get_dataframe`'s ``state`` column).

    Returns
    -------
    float or None
        In [0, 1]; None for a study without trials (it teaches nothing).
    """
    if not states:
        return None
    return sum(s in ("finished", "stopped_early") for s in states) / len(states)


@dataclass(frozen=True, slots=True, kw_only=True)
class StudyGrant:
    """What a starting study gets.

    Attributes
    ----------
    max_usd_per_hour : float
        Its cap: the team's allocation divided by the team's running studies, this one included (USD/hour).
    round : FairShareRound
        The fair-share round it was computed in (kept to learn from the study's reward).
    loads : dict of str to float
        The loads (running studies per team) of that round.
    accounting : dict of str to float
        ``unallocated``, ``over_allocated``, ``unmet``, ``loss`` of the round (USD/hour).
    utility : dict of str to dict
        Per team, ``useful`` = min(allocation, demand) and ``entitled`` = min(entitled share of the budget, demand):
        what the team got of what it needed, against the entitlement-only split (USD/hour; SV14).
    """

    max_usd_per_hour: float
    round: FairShareRound
    loads: dict[str, float]
    accounting: dict[str, float]
    utility: dict[str, dict[str, float]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TeamBounds:
    """A team's guaranteed minimum and cap on its share of the org budget (USD/hour; None: none; SV14)."""

    min_usd_per_hour: float | None = None
    max_usd_per_hour: float | None = None


class OrgPlan:
    """The fair split of the org budget and the team pick, kept across rounds.

    Parameters
    ----------
    freeze_rounds : int, default 10
        ease.ml's s, for :class:`spottune.scheduling.HybridTeamPicker`.
    """

    def __init__(self, *, freeze_rounds: int = FREEZE_ROUNDS):
        self.picker = HybridTeamPicker(freeze_rounds=freeze_rounds)
        self.fair: OnlineFairShare | None = None
        self._key: tuple | None = None
        self._restored: dict[str, BinarySearchDemand] = {}

    def _fair_share(self, budget: float, entitlements: Mapping[str, float]) -> OnlineFairShare:
        key = (budget, tuple(sorted(entitlements.items())))
        if self.fair is None or key != self._key:  # a new team or budget: new mechanism, learned intervals kept
            old = self.fair
            self.fair = OnlineFairShare(entitlements, capacity_usd_per_hour=budget, theta_max_usd_per_hour=budget)
            kept = dict(self._restored)
            if old is not None:
                kept.update(old.searches)
                self.fair.hour = old.hour
            for team, search in kept.items():
                if team in self.fair.searches and search.theta_max == budget:
                    self.fair.searches[team] = search
            self._key = key
        return self.fair

    def _round(self, budget: float, entitlements: Mapping[str, float], loads: dict[str, float],
               bounds: Mapping[str, TeamBounds] | None) -> tuple[FairShareRound, dict[str, float], dict[str, dict]]:
        fair = self._fair_share(budget, entitlements)
        bounds = bounds or {}
        fair.minimums = {t: b.min_usd_per_hour for t, b in bounds.items() if b.min_usd_per_hour is not None}
        fair.caps = {t: b.max_usd_per_hour for t, b in bounds.items() if b.max_usd_per_hour is not None}
        rnd = fair.allocate(loads)  # refuses a team without an entitlement
        teams = list(fair.entitlements)
        loss = round_loss([rnd.demands.get(t, 0.0) for t in teams], [rnd.allocations[t] for t in teams], budget)
        total = sum(fair.entitlements.values())
        utility = {t: {"useful": min(rnd.allocations[t], rnd.demands.get(t, 0.0)),
                       "entitled": min(fair.entitlements[t] / total * budget, rnd.demands.get(t, 0.0))} for t in teams}
        return rnd, {"unallocated": loss.unallocated, "over_allocated": loss.over_allocated, "unmet": loss.unmet,
                     "loss": loss.loss}, utility

    def rebalance(self, budget_usd_per_hour: float, entitlements: Mapping[str, float], running: Mapping[str, int],
                  bounds: Mapping[str, TeamBounds] | None = None) -> StudyGrant:
        """The hourly round (SV14): the org budget split afresh among the teams' running studies.

        Parameters
        ----------
        budget_usd_per_hour : float
            The org budget, > 0 (USD/hour).
        entitlements : mapping of str to float
            Every team's entitlement, > 0.
        running : mapping of str to int
            Running studies per team.
        bounds : mapping of str to TeamBounds, optional
            Teams' guaranteed minimums and caps.

        Returns
        -------
        StudyGrant
            Its ``max_usd_per_hour`` is 0; a running study of team ``t`` gets ``round.allocations[t] / loads[t]``.

        Raises
        ------
        spottune.errors.ConfigError
            On a budget <= 0.
        """
        loads = {t: float(n) for t, n in running.items()}
        rnd, accounting, utility = self._round(budget_usd_per_hour, entitlements, loads, bounds)
        return StudyGrant(max_usd_per_hour=0.0, round=rnd, loads={t: loads.get(t, 0.0) for t in rnd.allocations},
                          accounting=accounting, utility=utility)

    def allocate(self, budget_usd_per_hour: float, entitlements: Mapping[str, float], running: Mapping[str, int],
                 team: str, bounds: Mapping[str, TeamBounds] | None = None) -> StudyGrant:
        """One fair-share round for a study of ``team`` that starts now.

        Parameters
        ----------
        budget_usd_per_hour : float
            The org budget, > 0 (USD/hour).
        entitlements : mapping of str to float
            Every team's entitlement, > 0.
        running : mapping of str to int
            Running studies per team, the starting one excluded.
        team : str
            The starting study's team.
        bounds : mapping of str to TeamBounds, optional
            Teams' guaranteed minimums and caps (SV14).

        Returns
        -------
        StudyGrant

        Raises
        ------
        spottune.errors.ConfigError
            On a budget <= 0 or an unknown team.
        """
        loads = {t: float(n) for t, n in running.items()}
        loads[team] = loads.get(team, 0.0) + 1.0
        rnd, accounting, utility = self._round(budget_usd_per_hour, entitlements, loads, bounds)
        loads = {t: loads.get(t, 0.0) for t in rnd.allocations}
        return StudyGrant(max_usd_per_hour=rnd.allocations[team] / loads[team], round=rnd, loads=loads,
                          accounting=accounting, utility=utility)

    def observe(self, grant: StudyGrant, team: str, reward: float | None) -> None:
        """Learn from a study that ended: its reward met the threshold or not (deterministic feedback).

        Parameters
        ----------
        grant : StudyGrant
            What :meth:`allocate` gave the study.
        team : str
        reward : float or None
            :func:`reward_of` the study; None teaches nothing.
        """
        if reward is None or self.fair is None or team not in self.fair.entitlements:
            return
        self.fair.observe(grant.round, {t: grant.loads.get(t, 0.0) for t in self.fair.entitlements},
                          {team: reward >= ON_TRACK_THRESHOLD})

    def learned(self) -> dict[str, dict[str, float]]:
        """Every team's learned unit demand, to store: ``{team: {low, high, theta_max, probes}}`` (USD/hour)."""
        searches = dict(self._restored)
        if self.fair is not None:
            searches.update(self.fair.searches)
        return {t: {"low": s.low, "high": s.high, "theta_max": s.theta_max, "probes": s.probes}
                for t, s in searches.items()}

    def restore(self, learned: Mapping[str, Mapping[str, float]]) -> None:
        """Continue from learned unit demands (what :meth:`learned` returned, e.g. read back from the store).

        An interval is used while the org budget equals its ``theta_max`` (as when the budget changes, SV11).
        """
        for team, d in learned.items():
            search = BinarySearchDemand(d["theta_max"])
            search.low, search.high, search.probes = float(d["low"]), float(d["high"]), int(d["probes"])
            self._restored[team] = search
        self.fair, self._key = None, None  # rebuilt at the next round, from these

    def demand_interval(self, team: str) -> tuple[float, float] | None:
        """The team's learned unit demand ``(low, high)``, USD/hour per running study (the stored one until the next
        round), or None before any round."""
        if self.fair is not None and team in self.fair.searches:
            return self.fair.interval(team)
        search = self._restored.get(team)
        return (search.low, search.high) if search is not None else None

    def pick(self, teams: list[str], results: Mapping[str, list[float]]) -> TeamPick:
        """The team whose queued study takes a freed slot (ease.ml GREEDY, HYBRID fall-back to round robin).

        A team's bound is built from its finished studies' results, larger is better (SV12): ``best`` is the mean
        of its last results (None before the first), ``ucb = best + sqrt(2 ln(N) / n)`` with ``n`` its results and
        ``N`` all teams' (UCB1's bonus, since a study's result carries no GP posterior the runner could share).

        Parameters
        ----------
        teams : list of str
            The teams with a queued study (not empty).
        results : mapping of str to list of float
            Per team, its finished studies' rewards in order, each in [0, 1].

        Returns
        -------
        spottune.scheduling.TeamPick
        """
        total = sum(len(results.get(t, [])) for t in teams)
        bounds = {}
        for t in teams:
            seen = results.get(t, [])
            if not seen:
                bounds[t] = TeamBound(ucb=1.0, best=None)
                continue
            best = float(sum(seen) / len(seen))
            bounds[t] = TeamBound(ucb=best + math.sqrt(2 * math.log(max(total, 1)) / len(seen)), best=best)
        return self.picker.pick(bounds)
