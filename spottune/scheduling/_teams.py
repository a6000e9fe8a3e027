"""Which team's study gets the next slot: ease.ml's GREEDY rule with the HYBRID fall-back to round robin.

Li, Zhong, Liu, Wu, Zhang, "ease.ml: towards multi-tenant resource sharing for machine learning workloads"
(arXiv 1708.07308), Algorithm 2 and Section 4.3 [T] (decision SV5). Each round a team reports the largest upper
confidence bound ``ucb`` among its untried configurations and its best value so far ``best`` (larger is better).
Its empirical confidence gap is ``gap = min(ucb, min over earlier rounds of (best + gap)) - best``; the candidate set
is the teams whose gap is at least the mean gap, and GREEDY picks the candidate with the largest gap. GREEDY can
"freeze": when the candidate set stays the same and the total gap (the empirical regret) does not drop for
``freeze_rounds`` rounds in a row (s = 10 in the paper), HYBRID switches to round robin for good. Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from spottune.errors import ConfigError

__all__ = ["FREEZE_ROUNDS", "HybridTeamPicker", "TeamBound", "TeamPick"]

#: ease.ml's s: stagnant rounds before HYBRID falls back to round robin [T].
FREEZE_ROUNDS = 10


@dataclass(frozen=True, slots=True, kw_only=True)
class TeamBound:
    """What a team with work reports for one round (its study's metric, larger is better).

    Attributes
    ----------
    ucb : float
        Largest upper confidence bound ``mu + sqrt(beta) * sigma`` over its untried configurations.
    best : float or None
        Best value observed so far; None before its first result (such a team is served first).
    """

    ucb: float
    best: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TeamPick:
    """The round's decision.

    Attributes
    ----------
    team : str
    rule : {"first-visit", "greedy", "round-robin"}
    candidates : tuple of str
        GREEDY's candidate set this round (empty for a first visit).
    stagnant_rounds : int
        Consecutive rounds with the same candidate set and no drop of the total gap, this one included.
    """

    team: str
    rule: str
    candidates: tuple[str, ...] = ()
    stagnant_rounds: int = 0


class HybridTeamPicker:
    """GREEDY team picking with the HYBRID fall-back (ease.ml).

    Parameters
    ----------
    freeze_rounds : int, default :data:`FREEZE_ROUNDS`
        Stagnant rounds after which round robin takes over, >= 1.

    Attributes
    ----------
    switched : bool
        True once round robin has taken over.
    """

    def __init__(self, *, freeze_rounds: int = FREEZE_ROUNDS):
        if not (isinstance(freeze_rounds, int) and freeze_rounds >= 1):
            raise ConfigError(f"freeze_rounds is {freeze_rounds!r}, but must be an integer >= 1")
        self.freeze_rounds = freeze_rounds
        self.switched = False
        self.stagnant = 0
        self._cap: dict[str, float] = {}  # min over earlier rounds of best + gap
        self._last_candidates: tuple[str, ...] | None = None
        self._last_total: float | None = None
        self._last_team: str | None = None

    def _round_robin(self, teams: list[str]) -> str:
        if self._last_team is None:
            return teams[0]
        later = [t for t in teams if t > self._last_team]
        return later[0] if later else teams[0]

    def pick(self, bounds: Mapping[str, TeamBound]) -> TeamPick:
        """The team that gets the next slot among the teams with work.

        Parameters
        ----------
        bounds : mapping of str to TeamBound
            One entry per team that has an untried configuration.

        Returns
        -------
        TeamPick

        Raises
        ------
        ConfigError
            If ``bounds`` is empty or holds a non-finite bound.
        """
        if not bounds:
            raise ConfigError("bounds is empty: no team has work to pick")
        teams = sorted(bounds)
        for t in teams:
            b = bounds[t]
            if not math.isfinite(b.ucb) or (b.best is not None and not math.isfinite(b.best)):
                raise ConfigError(f"bounds[{t!r}] is {b!r}, but must hold finite numbers")
        if self.switched:
            choice = TeamPick(team=self._round_robin(teams), rule="round-robin", stagnant_rounds=self.stagnant)
            self._last_team = choice.team
            return choice
        unseen = [t for t in teams if bounds[t].best is None]
        if unseen:
            self._last_team = unseen[0]
            return TeamPick(team=unseen[0], rule="first-visit")
        gaps = {}
        for t in teams:
            best = float(bounds[t].best)  # type: ignore[arg-type]
            gaps[t] = min(bounds[t].ucb, self._cap.get(t, math.inf)) - best
            self._cap[t] = min(self._cap.get(t, math.inf), best + gaps[t])
        mean = sum(gaps.values()) / len(gaps)
        candidates = tuple(t for t in teams if gaps[t] >= mean)
        total = sum(gaps.values())
        if (self._last_candidates == candidates and self._last_total is not None
                and total >= self._last_total):
            self.stagnant += 1
        else:
            self.stagnant = 0
        self._last_candidates, self._last_total = candidates, total
        team = max(candidates, key=lambda t: (gaps[t], -teams.index(t)))
        self._last_team = team
        if self.stagnant >= self.freeze_rounds:
            self.switched = True
        return TeamPick(team=team, rule="greedy", candidates=candidates, stagnant_rounds=self.stagnant)
