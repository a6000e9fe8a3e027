"""Deadline and budget glue: the plan of a run with both (:func:`plan_spec`) and its execution (:func:`plan_orchestrator`).

``spottune run --deadline --budget-usd`` prints the plan of :func:`spottune.planning.plan_run`; with
``--deadline-mode plan`` or ``seer`` the run executes it (:func:`executed_schedule`) with a
:class:`spottune.planning.BracketOrchestrator`. With ``--deadline-mode guard`` (the default) the run is SpotTune's
inside the deadline guard (:func:`spottune.compose.provisioning.deadline_guard`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from spotmarket.prices import to_seconds
from spottune.compose.market import DAY_S, MarketSetup, build_market
from spottune.errors import ConfigError
from spottune.experiment import ExperimentSpec
from spottune.planning import (ELASTIC_DELTA_USD_PER_HOUR, RESTORE_CHECKPOINT_S, BracketOrchestrator, ElasticSchedule,
                               RunPlan, bracket_orchestrator, plan_run, seer_schedule)

__all__ = ["executed_schedule", "first_round_commitment_usd", "plan_orchestrator", "plan_spec"]


def plan_orchestrator(spec: ExperimentSpec, market: MarketSetup, plan: RunPlan | None,
                      trial_ids: Sequence[str]) -> BracketOrchestrator:
    """The printed plan executed: the ``seer-lean`` (``deadline_mode="plan"``) or ``seer-predictive``
    (``deadline_mode="seer"``) orchestrator of ``spottune simulate`` on ``plan``.

    The schedule is :func:`executed_schedule` of the printed plan (one source: what is printed is what runs), each
    round on the plan's instance types, rounds ending at the plan's wall-clock times after the start less a noise
    reserve of ``spec.step_time_cov``, elimination by EarlyCurve's predicted final value, the answer the best of the
    last round (:func:`spottune.planning.bracket_orchestrator`, decisions DB7, DB9, DB13, DB14, DB15).

    Parameters
    ----------
    spec : ExperimentSpec
    market : MarketSetup
    plan : spottune.planning.RunPlan
        A feasible plan (:func:`plan_spec`).
    trial_ids : sequence of str
        The experiment's trials, in sampling order.

    Returns
    -------
    spottune.planning.BracketOrchestrator

    Raises
    ------
    ConfigError
        If the plan has no round (not feasible).
    """
    if plan is None or plan.seer is None:
        raise ConfigError("the deadline and the budget fit no round of SEER's plan")
    schedule, types, hop = executed_schedule(plan, spec.deadline_mode)
    ref = spec.get_workload().reference_seconds_per_step
    orch, _, _ = bracket_orchestrator(
        schedule, types, trial_ids, history=market.history, catalog=market.catalog, pool=market.pool,
        rng=np.random.default_rng(spec.seed), max_steps=spec.max_steps, metric=spec.metric, mode=spec.mode,
        top_k=spec.top_k, reference_seconds_per_step=lambda _tid: ref, boot_s=spec.boot_s, predictive=True,
        step_time_cov=spec.step_time_cov, hourly_hop=hop)
    return orch


def executed_schedule(plan: RunPlan, deadline_mode: str) -> tuple[ElasticSchedule, dict[float, str], bool]:
    """(schedule, vCPUs -> instance type, hourly relaunches) that ``deadline_mode`` executes: ``plan``, the lean plan
    (DB15; SEER's brackets when no lean candidate fits); ``seer``, SEER's brackets without hops (DB14).

    Parameters
    ----------
    plan : spottune.planning.RunPlan
        The run's plan (:func:`plan_spec`), with SEER's brackets.
    deadline_mode : {"plan", "seer"}
        Which of the plan's schedules runs.

    Returns
    -------
    schedule : spottune.planning.ElasticSchedule
        The brackets that run, in seconds and vCPUs.
    types : dict of float to str
        vCPU count -> instance type.
    hourly : bool
        Whether the trials are relaunched at every hour boundary (the lean plan's hop).
    """
    if deadline_mode == "plan" and plan.lean is not None:
        return plan.lean.schedule, plan.lean.type_map, True
    return (seer_schedule(plan.seer), {float(p): t for p, t in zip(plan.seer.parallelism, plan.instance_types)},
            deadline_mode == "plan")


def plan_spec(spec: ExperimentSpec, market: MarketSetup | None = None, start_s: float | None = None) -> RunPlan | None:
    """The plan of a run with both ``deadline`` and ``budget_usd`` (:func:`spottune.planning.plan_run`), or None.

    The expected prices come from the ``train_days`` before the start.

    Parameters
    ----------
    spec : ExperimentSpec
        The experiment; without both ``deadline`` and ``budget_usd`` there is no plan.
    market : MarketSetup, optional
        The replayed market; None: built from ``spec`` (prices loaded).
    start_s : float, optional
        Start, seconds since the epoch (UTC); needed with ``market``, else ``spec.start``.

    Returns
    -------
    spottune.planning.RunPlan or None
        The plan (SEER's and the lean one, their USD and seconds), or None without a deadline and a budget.

    Raises
    ------
    ConfigError
        One line: bad input (see :func:`~spottune.planning.plan_run`), or an infeasible request, saying
        what is feasible ("at most 12 trials by 6 h within 40 USD ...").
    """
    if spec.deadline is None or spec.budget_usd is None:
        return None
    if market is None:
        market = build_market(spec.prices, market_mode=spec.market_mode, seed=spec.seed,
                              instance_types=spec.instance_types, availability_zones=spec.availability_zones,
                              resources=spec.resources, on_demand_prices=spec.on_demand_prices)
        start_s = float(to_seconds(spec.start))
    wl = spec.get_workload()
    plan = plan_run(deadline_s=spec.deadline, budget_usd=spec.budget_usd, history=market.history,
                    catalog=market.catalog, markets=market.markets, start_s=float(start_s),
                    window_s=spec.train_days * DAY_S, reference_seconds_per_step=wl.reference_seconds_per_step,
                    boot_s=spec.boot_s, n_requested=spec.n_trials, max_steps=spec.max_steps, top_k=spec.top_k,
                    theta=spec.theta, overhead_s=spec.boot_s + RESTORE_CHECKPOINT_S, step_time_cov=spec.step_time_cov,
                    hourly_hop=True, delta_usd_per_hour=ELASTIC_DELTA_USD_PER_HOUR)
    if not plan.feasible:
        raise ConfigError(plan.refusal())
    if spec.executes_plan:
        first = first_round_commitment_usd(plan, market, float(start_s), spec.deadline_mode)
        if first > spec.budget_usd:
            n0 = sum(b.live[0] for b in executed_schedule(plan, spec.deadline_mode)[0].brackets)
            raise ConfigError(f"the plan starts {n0} trials at once, and the budget cap counts an hour of each at its "
                              f"max price: {first:.3f} USD, more than the budget of {spec.budget_usd:g} USD; give at least "
                              f"--budget-usd {math.ceil(first * 1000) / 1000:g}, fewer trials, or "
                              "--deadline-mode guard")
    return plan


def first_round_commitment_usd(plan: RunPlan, market: MarketSetup, start_s: float, deadline_mode: str = "seer") -> float:
    """USD the budget cap commits when an executed plan's first round has launched: one hour of every trial
    of the round at its max price (DB5), the cheapest zone's price at ``start_s`` plus
    ``ELASTIC_DELTA_USD_PER_HOUR`` per instance type (DB9). The cap stops a run whose commitment exceeds the
    budget before it trains, so such a plan is refused (DB14). ``deadline_mode`` says which schedule runs
    (:func:`executed_schedule`).

    Parameters
    ----------
    plan : spottune.planning.RunPlan
        The run's plan.
    market : MarketSetup
        The replayed market (prices at ``start_s``).
    start_s : float
        Start, seconds since the epoch (UTC).
    deadline_mode : {"plan", "seer"}, default "seer"
        Which schedule runs.

    Returns
    -------
    float
        USD committed once the first round has launched.
    """
    schedule, types, _ = executed_schedule(plan, deadline_mode)
    total = 0.0
    for b in schedule.brackets:
        itype = types[float(b.resources[0])]
        price = min(float(market.history[m].price_at(start_s)) for m in market.markets if m.instance_type == itype)
        total += b.live[0] * (price + ELASTIC_DELTA_USD_PER_HOUR)
    return total
