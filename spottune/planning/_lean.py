"""The cost-lean plan under a deadline and a budget (decision DB15): the cheapest feasible plan, not
the one that spends the budget.

SEER's plan (:mod:`spottune.planning._seer`) maximises the trials and the training that fit the deadline ``T``
and the budget ``B``: it spends B. With a finite study (fewer trials than B affords, DB3) that buys training
nobody asked for. The lean plan runs the same trials and picks, among candidate schedules, the one with the
**lowest expected cost** whose expected finish, with the noise reserve of every round
(:func:`spottune.planning.reserve_steps`, DB13), is within ``T`` and whose expected spend and peak commitment
under the hard cap (DB5: the spend so far plus one hour of every live instance at its max price) are within B.
Candidates, every one running all ``n`` trials:

- ``theta-top-k``: SpotTune's Algorithm 1 as a plan: all trials to the rung ``ceil(theta S_max)``, then the
  ``top_k`` best by predicted final value to ``S_max`` (two rounds);
- ``one-round``: all trials to ``S_max``, no elimination;
- each with one **instance class per round**, every combination of the pool's classes (one per vCPU count:
  the cheapest per step), so a round moves to faster capacity only when the deadline needs it;
- ``seer``: SEER's own schedule (optional), priced in the same model, a candidate when it meets the same quality
  floor (next paragraph), so the lean plan never costs more than SEER's plan when SEER's plan is one.

When no candidate to ``S_max`` fits, the same shapes to the largest tenth of ``S_max`` that fits (the θ rung
scaled alike): the budget then buys the most training, not the least.

**Quality floor**: every candidate trains every trial to at least ``ceil(theta S_max)`` steps before it
eliminates any (SpotTune's θ barrier: EarlyCurve's predicted final value is trusted from there on, F-S2) and
trains at least one trial to ``S_max`` (the model the user tunes for). Without it the cheapest plan would be the
one that trains least: SEER's plan with a first round of a few steps and η = 4 is cheaper, and on
``opda-alexnet`` (modern) it kept 2 of 16 trials after a first round of about 1 h (regret 0.12, bench_deadline).

A round of ``d`` planned steps on a class with ``s`` seconds per step needs ``overhead + (d + reserve(d) + 1) s``
seconds (boot, restore and checkpoint; the noise reserve; one step for the floor of the wall-clock target)
and costs ``live x (overhead + d s) x price / 3600`` USD (billed per second, the expected price). The wall-clock
round durations are the needed ones stretched in proportion to fill ``T`` (a revoked trial has time to
relaunch); the rungs cap the steps, so the stretch costs nothing when nothing goes wrong.

Units: seconds, steps, USD, USD per instance-hour, vCPUs.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from spotmarket import HOUR_S
from spottune.errors import ConfigError
from spottune.planning._elastic import Bracket, ElasticSchedule, reserve_steps

__all__ = ["InstanceClass", "LeanPlan", "lean_plan", "schedule_cost_usd"]

_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class InstanceClass:
    """An instance type a round can run on.

    Attributes
    ----------
    instance_type : str
    vcpus : int
    seconds_per_step : float
        The workload's seconds per step on this type.
    usd_per_hour : float
        Expected spot price, USD per instance-hour (the mean over the window before the start, DB2).
    usd_per_hour_high : float or None
        A high price (the 90th percentile over the same window) for the hard cap's commitment; None: the
        expected price.
    """

    instance_type: str
    vcpus: int
    seconds_per_step: float
    usd_per_hour: float
    usd_per_hour_high: float | None = None

    @property
    def high(self) -> float:
        """USD per instance-hour the commitment counts: ``max(usd_per_hour, usd_per_hour_high)``."""
        return self.usd_per_hour if self.usd_per_hour_high is None else max(self.usd_per_hour, self.usd_per_hour_high)

    @property
    def usd_per_step(self) -> float:
        return self.seconds_per_step * self.usd_per_hour / HOUR_S


@dataclass(frozen=True, slots=True)
class LeanPlan:
    """The chosen candidate (module doc).

    Attributes
    ----------
    name : {"theta-top-k", "one-round", "seer"}
    schedule : ElasticSchedule
        Named ``seer-lean``; durations in seconds (stretched to the deadline), resources in vCPUs, rungs in steps
        (None for ``seer``).
    types : tuple of (vCPUs, instance type)
        The instance type of each resource count of the schedule.
    cost_usd : float
        Expected cost at the expected prices.
    finish_s : float
        Seconds from the start the plan needs (with the noise reserve), <= the deadline.
    commitment_usd : float
        Peak of spend so far + one hour of every live instance at its expected price + delta (the hard cap, DB5).
    considered : tuple of (name, cost_usd, finish_s, feasible)
        The cheapest combination of classes of every candidate to S_max (for the printed plan).
    target_steps : int
        Steps the plan trains its best trials to: S_max, or when no candidate to S_max fits, the largest tenth of
        it that does (``ceil(S_max x j / 10)``, j = 9..1; the θ rung scaled alike).
    """

    name: str
    schedule: ElasticSchedule
    types: tuple[tuple[float, str], ...]
    cost_usd: float
    finish_s: float
    commitment_usd: float
    considered: tuple[tuple[str, float, float, bool], ...] = ()
    target_steps: int = 0

    @property
    def type_map(self) -> dict[float, str]:
        """vCPUs -> instance type (what :func:`spottune.planning._brackets.bracket_orchestrator` takes)."""
        return dict(self.types)

    @property
    def rungs(self) -> tuple[int, ...] | None:
        return self.schedule.brackets[0].rungs if self.name != "seer" else None


def _launches(train_s: float, overhead_s: float, hourly_hop: bool) -> int:
    """Launches of one trial in a round of ``train_s`` training seconds: 1, or with hourly hops one per
    instance-hour of which ``overhead_s`` is not training."""
    if not hourly_hop or overhead_s >= HOUR_S:
        return 1
    return max(1, math.ceil(train_s / (HOUR_S - overhead_s) - _EPS))


def _need_s(steps: int, c: InstanceClass, overhead_s: float, cov: float, hourly_hop: bool = False) -> float:
    train = (steps + reserve_steps(steps, cov) + 1) * c.seconds_per_step
    return _launches(train, overhead_s, hourly_hop) * overhead_s + train


def _billed_s(steps: int, c: InstanceClass, overhead_s: float, hourly_hop: bool) -> float:
    """Seconds one trial of a round of ``steps`` steps is billed: its launches' overheads and its training."""
    train = steps * c.seconds_per_step
    return _launches(train, overhead_s, hourly_hop) * overhead_s + train


def _round_cost(live: int, steps: int, c: InstanceClass, overhead_s: float, hourly_hop: bool = False) -> float:
    return live * _billed_s(steps, c, overhead_s, hourly_hop) * c.usd_per_hour / HOUR_S


def _round_commit(live: int, steps: int, c: InstanceClass, overhead_s: float, hourly_hop: bool, delta: float) -> float:
    """USD the hard cap (DB5) counts for a round at its last instance-hour: every live trial's earlier hours and its
    current hour at the max price, both at the class's high price (+ ``delta`` for the max price)."""
    hours = max(1, math.ceil(_billed_s(steps, c, overhead_s, hourly_hop) / HOUR_S - _EPS))
    return live * (hours * c.high + delta)


def _commitment(rounds: Sequence[tuple[float, float]]) -> float:
    """The peak of (cost of the rounds before) + the round's commitment; ``rounds`` = (commitment, cost) per round."""
    peak, spent = 0.0, 0.0
    for commit, cost in rounds:
        peak = max(peak, spent + commit)
        spent += cost
    return peak


def schedule_cost_usd(schedule: ElasticSchedule, classes: Mapping[float, InstanceClass], *, max_steps: int,
                      overhead_s: float, step_time_cov: float, delta_usd_per_hour: float = 0.01,
                      hourly_hop: bool = False) -> tuple[float, float, int, int]:
    """(expected cost USD, peak commitment USD, steps reached, first cut) of an elastic schedule executed with
    wall-clock rounds.

    Each round of duration ``d`` trains ``floor((d - overhead) / s) - reserve`` steps (the orchestrator's
    wall-clock target, DB7, DB13), capped by the bracket's rungs and by ``max_steps`` (a trial at ``max_steps``
    is not relaunched); each launch is billed its overhead plus its steps at the class's expected price.
    SEER's migration between brackets is ignored (each bracket's trials are priced as if they stayed). With
    ``hourly_hop`` a round's training time is divided by ``1 + overhead / (3600 - overhead)`` (one relaunch per
    instance-hour) and each launch is billed. *Steps reached*: the most steps a trial of a bracket's last round
    with trials has at its end (``max_steps``: the schedule trains a model to the end). *First cut*: the fewest
    steps at which a bracket eliminates a trial while others go on (``max_steps`` if none).

    Parameters
    ----------
    schedule : ElasticSchedule
        The schedule, in seconds and vCPUs.
    classes : mapping of float to InstanceClass
        vCPU count -> the instance class that runs it (expected USD per instance-hour, seconds per step).
    max_steps : int
        S_max, steps.
    overhead_s : float
        Seconds of each launch not spent training (boot, restore, checkpoint).
    step_time_cov : float
        Coefficient of variation of the step times (:func:`spottune.planning.reserve_steps`).
    delta_usd_per_hour : float, default 0.01
        Max price above the current price, USD/hour (DB9); it sets the commitment.
    hourly_hop : bool, default False
        One relaunch per instance-hour.

    Returns
    -------
    cost_usd : float
        Expected cost, USD.
    peak_commitment_usd : float
        The peak of the spend of the rounds before plus a round's commitment under the hard cap (DB5: every live
    trial's hours at the class's high price, its current hour at the max price), USD.
    steps_reached : int
        See above.
    first_cut : int
        See above.

    Raises
    ------
    KeyError
        If a resource count of the schedule has no class.
    """
    total, rounds, reached, first_cut = 0.0, {}, 0, max_steps
    for b in schedule.brackets:
        cum = 0
        for k, (d, live, p) in enumerate(zip(b.durations, b.live, b.resources)):
            if k > 0 and 0 < live < b.live[k - 1]:
                first_cut = min(first_cut, cum)
            if live < 1:
                break
            c = classes[float(p)]
            train = d - overhead_s
            if hourly_hop and train > 0 and overhead_s < HOUR_S:
                train -= (_launches(train, overhead_s, True) - 1) * overhead_s
            fit = int(math.floor(max(0.0, train) / c.seconds_per_step + _EPS))
            fit -= reserve_steps(fit, step_time_cov)
            cap = max_steps if b.rungs is None else min(max_steps, b.rungs[k])
            steps = max(0, min(fit, cap - cum))
            cum += steps
            cost = _round_cost(live, steps, c, overhead_s, hourly_hop) if steps else 0.0
            commit = _round_commit(live, steps, c, overhead_s, hourly_hop, delta_usd_per_hour) if steps else 0.0
            total += cost
            prev = rounds.get(k, (0.0, 0.0))
            rounds[k] = (prev[0] + commit, prev[1] + cost)
        reached = max(reached, cum)
    return total, _commitment([rounds[k] for k in sorted(rounds)]), reached, first_cut


def _classes_by_vcpus(classes: Sequence[InstanceClass]) -> list[InstanceClass]:
    """One class per vCPU count, the cheapest per step (a schedule names resources, not types)."""
    best: dict[int, InstanceClass] = {}
    for c in classes:
        if c.vcpus not in best or (c.usd_per_step, c.instance_type) < (best[c.vcpus].usd_per_step,
                                                                       best[c.vcpus].instance_type):
            best[c.vcpus] = c
    return [best[v] for v in sorted(best)]


def lean_plan(*, n_trials: int, max_steps: int, top_k: int, theta: float, deadline_s: float, budget_usd: float,
              classes: Sequence[InstanceClass], overhead_s: float, step_time_cov: float,
              delta_usd_per_hour: float = 0.01, seer: tuple[ElasticSchedule, Mapping[float, InstanceClass]] | None = None,
              hourly_hop: bool = False) -> LeanPlan:
    """The lowest-expected-cost feasible plan for ``n_trials`` trials (module doc, DB15).

    Parameters
    ----------
    n_trials : int
        Trials of the study, all run (>= 1).
    max_steps : int
        S_max, steps.
    top_k : int
        Trials trained to S_max by ``theta-top-k``.
    theta : float
        The rung of the first round, ``ceil(theta S_max)`` steps, 0 < theta <= 1.
    deadline_s, budget_usd : float
        T (seconds from the start) and B (USD).
    classes : sequence of InstanceClass
        The pool's types (one per vCPU count is kept: the cheapest per step).
    overhead_s : float
        Seconds of a launch not spent training (boot, restore, checkpoint).
    step_time_cov : float
        Step-time noise, for the reserve (DB13).
    delta_usd_per_hour : float, default 0.01
        Max price above the current price (DB9), for the commitment.
    seer : (ElasticSchedule, mapping vCPUs -> InstanceClass), optional
        SEER's schedule and its classes, priced in the same model; a candidate if it meets the quality floor
        (:func:`schedule_cost_usd`: steps reached ``S_max``, first cut at ``ceil(theta S_max)`` or later).
    hourly_hop : bool, default False
        The run checkpoints and relaunches every instance-hour (``seer-lean`` does): every hour of a round
        costs one more ``overhead_s`` in time and money.

    Returns
    -------
    LeanPlan
        ``finish_s <= deadline_s``, ``cost_usd <= budget_usd``, ``commitment_usd <= budget_usd``.

    Raises
    ------
    ConfigError
        On bad parameters, or one line when no candidate fits the deadline and the budget.
    """
    if not (n_trials >= 1 and max_steps >= 1 and top_k >= 1 and 0 < theta <= 1 and deadline_s > 0 and budget_usd > 0
            and overhead_s >= 0 and step_time_cov >= 0 and classes):
        raise ConfigError(f"lean plan: need n_trials, max_steps, top_k >= 1, 0 < theta <= 1, deadline and budget > 0 "
                          f"and at least one class; got n {n_trials}, S {max_steps}, k {top_k}, theta {theta:g}, "
                          f"T {deadline_s:g}, B {budget_usd:g}")
    pool = _classes_by_vcpus(classes)
    r1 = int(math.ceil(theta * max_steps - _EPS))
    args = (n_trials, top_k, theta, deadline_s, budget_usd, pool, overhead_s, step_time_cov, hourly_hop,
            delta_usd_per_hour)
    best, considered = _best_shape(max_steps, *args)
    seer_cand = None
    if seer is not None:
        schedule, by_vcpus = seer
        cost, commit, reached, cut = schedule_cost_usd(schedule, by_vcpus, max_steps=max_steps, overhead_s=overhead_s,
                                                       step_time_cov=step_time_cov,
                                                       delta_usd_per_hour=delta_usd_per_hour, hourly_hop=hourly_hop)
        ok = (schedule.finish <= deadline_s * (1 + _EPS) and cost <= budget_usd and commit <= budget_usd
              and reached >= max_steps and cut >= r1)
        considered.append(("seer", cost, schedule.finish, ok))
        if ok and (best is None or (cost, schedule.finish) < (best[1], best[2])):
            seer_cand = (cost, schedule.finish, commit)
    if seer_cand is not None:
        schedule, by_vcpus = seer
        types = tuple(sorted({(float(p), by_vcpus[float(p)].instance_type) for b in schedule.brackets
                              for p in b.resources}))
        return LeanPlan(name="seer", schedule=ElasticSchedule(name="seer-lean", brackets=schedule.brackets,
                                                              migrate=schedule.migrate),
                        types=types, cost_usd=seer_cand[0], finish_s=seer_cand[1], commitment_usd=seer_cand[2],
                        considered=tuple(considered), target_steps=max_steps)
    target = max_steps
    if best is None:  # the deadline and the budget do not afford S_max: the largest share of it that fits
        for tenths in range(9, 0, -1):
            target = max(1, int(math.ceil(max_steps * tenths / 10 - _EPS)))
            best, _ = _best_shape(target, *args)
            if best is not None:
                break
    if best is None:
        lines = "; ".join(f"{n} {c:.3g} USD in {f / HOUR_S:.3g} h" for n, c, f, _ in considered)
        raise ConfigError(f"no plan of {n_trials} trials to {max(1, math.ceil(max_steps / 10 - _EPS))} steps or more "
                          f"fits {deadline_s / HOUR_S:.3g} h and {budget_usd:g} USD (cheapest to {max_steps} steps: "
                          f"{lines})")
    name, cost, finish, commit, rungs, live, combo, need = best
    stretch = deadline_s / finish
    bracket = Bracket(durations=tuple(x * stretch for x in need), live=tuple(live),
                      resources=tuple(float(c.vcpus) for c in combo), rungs=tuple(rungs))
    types = tuple(sorted({(float(c.vcpus), c.instance_type) for c in combo}))
    return LeanPlan(name=name, schedule=ElasticSchedule(name="seer-lean", brackets=(bracket,), migrate=False),
                    types=types, cost_usd=cost, finish_s=finish, commitment_usd=commit, considered=tuple(considered),
                    target_steps=target)


def _best_shape(target: int, n_trials: int, top_k: int, theta: float, deadline_s: float, budget_usd: float,
                pool: Sequence[InstanceClass], overhead_s: float, step_time_cov: float, hourly_hop: bool,
                delta: float) -> tuple[tuple | None, list[tuple[str, float, float, bool]]]:
    """The cheapest feasible ``theta-top-k`` / ``one-round`` shape training to ``target`` steps over every combination
    of classes: ((name, cost, finish, commitment, rungs, live, classes, needed seconds per round) or None, and per
    shape its cheapest combination as (name, cost, finish, feasible))."""
    shapes: list[tuple[str, tuple[int, ...], tuple[int, ...]]] = [("one-round", (target,), (n_trials,))]
    r1 = int(math.ceil(theta * target - _EPS))
    if 1 <= r1 < target and top_k < n_trials:
        shapes.insert(0, ("theta-top-k", (r1, target), (n_trials, top_k)))
    best, considered = None, []
    for name, rungs, live in shapes:
        deltas = [rungs[0]] + [b - a for a, b in zip(rungs, rungs[1:])]
        cheapest = None
        for combo in itertools.product(pool, repeat=len(rungs)):
            need = [_need_s(d, c, overhead_s, step_time_cov, hourly_hop) for d, c in zip(deltas, combo)]
            costs = [_round_cost(m, d, c, overhead_s, hourly_hop) for m, d, c in zip(live, deltas, combo)]
            cost, finish = sum(costs), sum(need)
            commit = _commitment([(_round_commit(m, d, c, overhead_s, hourly_hop, delta), x)
                                  for m, d, c, x in zip(live, deltas, combo, costs)])
            ok = finish <= deadline_s and cost <= budget_usd and commit <= budget_usd
            cand = (not ok, cost, finish, commit, combo, need)
            if cheapest is None or cand[:3] < cheapest[:3]:
                cheapest = cand
        considered.append((name, cheapest[1], cheapest[2], not cheapest[0]))
        if not cheapest[0] and (best is None or (cheapest[1], cheapest[2]) < (best[1], best[2])):
            best = (name, cheapest[1], cheapest[2], cheapest[3], rungs, live, cheapest[4], cheapest[5])
    return best, considered
