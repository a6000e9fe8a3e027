"""Elastic tuning schedules under a deadline and a budget: SEER, E-Hyperband and E-Grid (F-S5).

A schedule is data: brackets of successive-halving rounds, each round with its duration, the trials it
trains and the resources per trial. The simulator executes it with
:class:`spottune.evaluation.BracketOrchestrator`. Units are the caller's, as in :mod:`._seer`: durations
in the unit of the deadline ``T`` (seconds in spottune), budgets in resources x that unit (vCPU-seconds).

- :func:`seer_schedule`: SEER's Algorithm 1 on a :class:`~spottune.planning.SeerPlan`. All brackets share
  the round boundaries; after each round every bracket keeps its best ``floor(N[i]/eta**k)`` trials and the
  survivors are re-sorted by descending loss and dealt to the brackets in order (the best land in the
  brackets with the most resources per trial): ``migrate=True``.
- :func:`hyperband_schedule`: E-Hyperband, SEER's baseline: Hyperband's brackets (Li et al., JMLR 2018,
  Algorithm 1) all run in parallel, at ``p_min`` per trial, each bracket its own successive halving
  (``migrate=False``); R is the largest that fits the deadline and the budget (SEER §4, "E-Hyperband").
- :func:`grid_schedule`: E-Grid, SEER's baseline: T/2 exploring as many trials as B affords at ``p_min``
  each, then T/2 exploiting the best trial at ``p_max`` (SEER §4, "E-Grid Search").

Source: Dunlap et al., "Elastic Hyperparameter Tuning on the Cloud" (SoCC'21), Algorithm 1 and §4.
Adaptations are decisions DB7-DB9 of ``docs/design/decisions.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from spottune.errors import ConfigError
from spottune.planning._seer import SeerPlan, _floor

__all__ = ["Bracket", "ElasticSchedule", "RESERVE_Z", "grid_schedule", "hyperband_schedule", "reserve_steps",
           "seer_schedule"]

SCHEDULES = ("seer", "seer-lean", "e-hyperband", "e-grid")


#: [I] Standard deviations of the summed step-time noise kept free before a wall-clock round's end (DB13).
RESERVE_Z = 2.0


def reserve_steps(steps: int, step_time_cov: float) -> int:
    """Steps held back from a wall-clock round of ``steps`` planned steps so that it ends on time.

    With independent step times of coefficient of variation ``cov``, ``n`` steps take
    ``n * T * (1 + e)``, ``sd(e) = cov / sqrt(n)``: the round overruns by about ``RESERVE_Z * cov * sqrt(n)``
    steps at worst (2 sd: about 2 % of rounds), so that many are held back, rounded up; 0 when ``cov`` is 0.
    SEER's plan assumes known step times (DB13).

    Parameters
    ----------
    steps : int
        Steps planned in the round.
    step_time_cov : float
        Coefficient of variation of one step's time.

    Returns
    -------
    int
        Steps held back, >= 0.
    """
    if steps < 1 or step_time_cov <= 0:
        return 0
    return int(math.ceil(RESERVE_Z * step_time_cov * math.sqrt(steps)))


@dataclass(frozen=True, slots=True)
class Bracket:
    """One bracket of successive halving.

    Attributes
    ----------
    durations : tuple of float
        Duration of each round (time unit of T); every trial of round k trains for ``durations[k]``.
    live : tuple of int
        Trials trained in each round; round k+1 keeps the best ``live[k+1]`` of round k (0: none).
    resources : tuple of float
        Resources per trial in each round (vCPUs in spottune).
    rungs : tuple of int or None
        Cumulative steps a trial may reach by the end of each round (a cap on top of what fits in the
        round's duration; the lean plan's rungs, DB15); None: only the duration limits a round.

    Raises
    ------
    ConfigError
        If the rounds' tuples differ in length or are empty, or the rungs are not increasing from 1.
    """

    durations: tuple[float, ...]
    live: tuple[int, ...]
    resources: tuple[float, ...]
    rungs: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if not (len(self.durations) == len(self.live) == len(self.resources) >= 1):
            raise ConfigError("bracket: durations, live and resources must have the same length >= 1")
        if self.rungs is not None and (len(self.rungs) != len(self.durations)
                                       or any(b <= a for a, b in zip(self.rungs, self.rungs[1:]))
                                       or self.rungs[0] < 1):
            raise ConfigError(f"bracket: rungs must be increasing step counts >= 1, one per round, got {self.rungs}")
        if any(b > a for a, b in zip(self.live, self.live[1:])):
            raise ConfigError(f"bracket: live trials must not grow from round to round, got {self.live}")

    @property
    def rounds(self) -> int:
        return len(self.durations)

    @property
    def spend(self) -> float:
        """Resource-time of the bracket: sum over rounds of live x resources x duration."""
        return float(sum(n * p * d for n, p, d in zip(self.live, self.resources, self.durations)))

    @property
    def finish(self) -> float:
        """End of the last round from the start (time unit of T)."""
        return float(sum(self.durations))


@dataclass(frozen=True, slots=True)
class ElasticSchedule:
    """Brackets run in parallel from the start.

    Attributes
    ----------
    name : {"seer", "seer-lean", "e-hyperband", "e-grid"}
    brackets : tuple of Bracket
        Only brackets with trials (SEER's empty brackets are dropped).
    migrate : bool
        True (SEER): all brackets share the round boundaries; after each round the survivors of every
        bracket are re-sorted by descending loss and dealt to the brackets in order. False: each bracket
        is its own successive halving (E-Hyperband, E-Grid).

    Raises
    ------
    ConfigError
        If no bracket has a trial, or migrating brackets differ in their round durations.
    """

    name: str
    brackets: tuple[Bracket, ...]
    migrate: bool

    def __post_init__(self) -> None:
        if not self.brackets:
            raise ConfigError(f"{self.name}: the schedule has no bracket with a trial")
        if self.migrate and len({b.durations for b in self.brackets}) > 1:
            raise ConfigError(f"{self.name}: migrating brackets must share their round durations")

    @property
    def n_trials(self) -> int:
        """Trials sampled: the first round's live trials over all brackets."""
        return int(sum(b.live[0] for b in self.brackets))

    @property
    def finish(self) -> float:
        """When the last bracket ends (time unit of T), without launch delays or revocations."""
        return max(b.finish for b in self.brackets)

    @property
    def spend(self) -> float:
        """Resource-time of the whole schedule (resources x time unit)."""
        return float(sum(b.spend for b in self.brackets))


def seer_schedule(plan: SeerPlan) -> ElasticSchedule:
    """SEER's Algorithm 1 as a schedule: bracket i trains ``floor(N[i]/eta**(k-1))`` trials in round k.

    Line 8 of the algorithm ("remove the lowest floor(N[i]/eta**k)") is read as *keep* the best
    ``floor(N[i]/eta**k)``, the number round k+1 takes (identical for eta = 2; DB7).

    Parameters
    ----------
    plan : SeerPlan
        SEER's plan (:func:`spottune.planning.seer_plan`).

    Returns
    -------
    ElasticSchedule
        ``seer``: SEER's brackets with trials, sharing the round boundaries (``migrate`` True).
    """
    ks = range(1, plan.rounds + 1)
    brackets = tuple(Bracket(durations=plan.round_durations, live=tuple(plan.live(i, k) for k in ks),
                             resources=(float(p),) * plan.rounds)
                     for i, (n, p) in enumerate(zip(plan.trials, plan.parallelism)) if n > 0)
    return ElasticSchedule(name="seer", brackets=brackets, migrate=True)


def _hyperband_units(s_max: int, eta: float) -> tuple[list[tuple[list[float], list[int]]], float]:
    """Hyperband's brackets for ``R = eta**s_max`` (in units of the smallest resource): per bracket
    s = s_max..0, (round durations, live trials), with ``n = ceil((s_max+1)/(s+1) eta**s)``,
    ``r = R eta**-s``, round j training to ``r eta**j`` in total (checkpoints resume, so a round trains
    the difference) and keeping ``floor(n eta**-j)``; and the resource-time of all brackets at 1 resource."""
    out, spend = [], 0.0
    for s in range(s_max, -1, -1):
        n = math.ceil((s_max + 1) / (s + 1) * eta**s - 1e-9)
        r = eta ** (s_max - s)
        cum = [r * eta**j for j in range(s + 1)]
        durs = [cum[0]] + [b - a for a, b in zip(cum, cum[1:])]
        live = [_floor(n * eta**-j) for j in range(s + 1)]
        out.append((durs, live))
        spend += sum(d * m for d, m in zip(durs, live))
    return out, spend


def hyperband_schedule(T: float, B: float, *, eta: float = 4.0, p_min: float = 1.0, t_min: float = 1.0,
                       max_trials: int | None = None) -> ElasticSchedule:
    """E-Hyperband: Hyperband's brackets in parallel, the largest R within the deadline and the budget.

    ``s_max`` is the largest with a unit ``u = min(T / eta**s_max, B / (p_min spend_units))`` of at least
    ``t_min`` and at most ``max_trials`` trials in all; R = ``eta**s_max`` units of ``u`` (the unit is
    stretched so the schedule uses the whole deadline or budget, DB8).

    Parameters
    ----------
    T : float
        Deadline (time unit).
    B : float
        Budget (resources x time unit).
    eta : float, default 4
    p_min : float
        Resources per trial.
    t_min : float
        Shortest useful round.
    max_trials : int, optional
        Trials available (a finite study); None: no limit.

    Returns
    -------
    ElasticSchedule
        ``e-hyperband``: Hyperband's brackets, each with its own rounds (no migration).

    Raises
    ------
    ConfigError
        If not even one trial of ``t_min`` fits (T < t_min or B < p_min t_min) or on bad parameters.
    """
    if not (T > 0 and B > 0 and t_min > 0 and p_min > 0 and eta > 1):
        raise ConfigError(f"E-Hyperband: need T, B, t_min, p_min > 0 and eta > 1; got T {T:g}, B {B:g}, "
                          f"eta {eta:g}, p_min {p_min:g}, t_min {t_min:g}")
    best = None
    for s_max in range(0, 64):
        brackets, spend = _hyperband_units(s_max, eta)
        n = sum(live[0] for _, live in brackets)
        u = min(T / eta**s_max, B / (p_min * spend))
        if u < t_min * (1 - 1e-12) or (max_trials is not None and n > max_trials):
            break
        best = (brackets, u)
    if best is None:
        raise ConfigError(f"E-Hyperband: deadline {T:g} and budget {B:g} do not fit one trial of {t_min:g}")
    brackets, u = best
    return ElasticSchedule(name="e-hyperband", migrate=False, brackets=tuple(
        Bracket(durations=tuple(d * u for d in durs), live=tuple(live), resources=(float(p_min),) * len(durs))
        for durs, live in brackets))


def grid_schedule(T: float, B: float, *, p_min: float = 1.0, p_max: float = 4.0, t_min: float = 1.0,
                  max_trials: int | None = None) -> ElasticSchedule:
    """E-Grid: T/2 exploring ``n`` trials at ``p_min`` each, then T/2 exploiting the best at ``p_max``.

    ``n = floor((B - p_max T/2) / (p_min T/2))`` (at most ``max_trials``): the trials the budget affords
    once the exploitation is paid.

    Parameters
    ----------
    T : float
        Deadline (time unit; seconds in spottune).
    B : float
        Budget (resources x time unit; vCPU-seconds in spottune).
    p_min, p_max : float, default 1 and 4
        Resources per trial while exploring and while exploiting (vCPUs).
    t_min : float, default 1
        Shortest useful round (time unit).
    max_trials : int, optional
        Trials available (a finite study); None: no limit.

    Returns
    -------
    ElasticSchedule
        ``e-grid``: one bracket of two rounds, ``n`` trials then 1.

    Raises
    ------
    ConfigError
        If T/2 < t_min or the budget does not afford one explored trial and the exploitation.
    """
    if not (T > 0 and B > 0 and t_min > 0 and 0 < p_min <= p_max):
        raise ConfigError(f"E-Grid: need T, B, t_min > 0 and 0 < p_min <= p_max; got T {T:g}, B {B:g}, "
                          f"p_min {p_min:g}, p_max {p_max:g}, t_min {t_min:g}")
    half = T / 2.0
    n = _floor((B - p_max * half) / (p_min * half))
    if max_trials is not None:
        n = min(n, int(max_trials))
    if half < t_min * (1 - 1e-12) or n < 1:
        raise ConfigError(f"E-Grid: deadline {T:g} and budget {B:g} do not fit one explored trial and the "
                          f"exploitation (T/2 >= {t_min:g}, B >= {p_max * half + p_min * half:g})")
    return ElasticSchedule(name="e-grid", migrate=False,
                           brackets=(Bracket(durations=(half, half), live=(n, 1), resources=(float(p_min), float(p_max))),))
