"""The one builder of an orchestrator from a policy: :func:`policy_orchestrator`.

``spottune run`` (:func:`spottune.compose.build`, the policy :func:`~spottune.compose.policies.spec_policy` of its
spec) and ``spottune simulate`` (:func:`assemble`, a named policy on a study's recorded curves) both call
:func:`policy_orchestrator`: the chooser (SpotTune's provisioner, the cheapest market or a fixed type, with its
max-price rule and failover), the orchestrator's configuration, the early stopping and the deadline guard are
wired here and nowhere else. The SEER-family policies (``chooser="bracket-type"``) are elastic schedules executed by
:class:`spottune.planning.BracketOrchestrator` (:func:`assemble`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from earlycurve import FinalMetricPredictor
from provisioner import (CheapestMarketChooser, FixedMaxPrice, FixedTypeChooser, InstanceCatalog, MarketChooser,
                         MarketExclusions, MaxPriceRule, MaxPriceSource, Pool)
from revpred.protocol import RevocationPredictor
from spotmarket import Billing, RevocationModel
from spotmarket.prices import Market, PriceHistory
from spottune._early_stop import early_stopping, hparams_predictor
from spottune._pruning import OptunaStopRule, make_pruner
from spottune.backends.sim import SimSettings
from spottune.backends.sim._oracle import NeverRevoked, OnDemandBilling
from spottune.compose.policies import NEVER_REVOKED_FACTOR, Policy
from spottune.compose.provisioning import curve_model, deadline_guard, make_provisioner
from spottune.errors import ConfigError
from spottune.experiment import DEFAULT_JOB_TIME_VALUE_USD_PER_HOUR
from spottune.orchestrator import Orchestrator, OrchestratorConfig, StopRule
from spottune.planning import (ELASTIC_DELTA_USD_PER_HOUR, RESTORE_CHECKPOINT_S, ElasticSchedule, bracket_orchestrator,
                               grid_schedule, hyperband_schedule, plan_run, resources, seer_schedule)
from spottune.planning._plan import SEER_ETA
from spottune.speed import DEFAULT_BOOT_S, seconds_per_step

__all__ = ["LEAN_THETA", "Assembly", "StudyLike", "assemble", "elastic_schedule", "fixed_types", "policy_orchestrator"]

#: θ of ``seer-lean``'s θ-top-k candidate: the θ of the reference SpotTune policy (``spottune-0.7``), not tuned.
LEAN_THETA = 0.7


class StudyLike(Protocol):
    """What :func:`assemble` reads of a study (:class:`spottune.evaluation.Study`)."""

    trial_ids: list[str]
    configs: dict[str, dict[str, Any]]
    metric: str
    mode: str
    max_steps: int
    reference_seconds_per_step: dict[str, float]
    checkpoint_size_mb: float
    extra: dict[str, Any]


@dataclass(slots=True)
class Assembly:
    """What one run needs: the orchestrator and the market rules it is replayed under.

    Attributes
    ----------
    orchestrator : spottune.orchestrator.Orchestrator
    revocation_model : spotmarket.RevocationModel
        The replay's revocation rule (:class:`spottune.evaluation.NeverRevoked` for on-demand capacity).
    billing : spotmarket.Billing
        The replay's billing rule (:class:`spottune.evaluation.OnDemandBilling` for on-demand capacity).
    chooser : MarketChooser
        The orchestrator's chooser (inside the deadline guard when there is one).
    stop_rule : StopRule or None
    note : str
        The fixed type of a ``fixed-*`` chooser, or the schedule of an elastic policy.
    """

    orchestrator: Orchestrator
    revocation_model: RevocationModel
    billing: Billing
    chooser: MarketChooser
    stop_rule: StopRule | None = None
    note: str = ""


def fixed_types(catalog: InstanceCatalog, markets: Sequence[Market]) -> dict[str, str]:
    """``{"cheapest": type, "fastest": type}`` of the pool: lowest on-demand price; fewest seconds/step.

    Ties: the type name. Speed from :func:`spottune.speed.seconds_per_step` (vCPUs, ECU).

    Parameters
    ----------
    catalog : provisioner.InstanceCatalog
        On-demand prices (USD/hour), vCPUs and ECU of the types.
    markets : sequence of Market
        The pool (non-empty; its first market's region prices the types).

    Returns
    -------
    dict of str to str
        ``cheapest`` and ``fastest`` instance types (the paper's single-spot baselines, §IV-A4).
    """
    types = sorted({m.instance_type for m in markets})
    region = markets[0].region
    od = {t: catalog.on_demand_usd_per_hour(t, region) for t in types}
    sps = {t: seconds_per_step(1.0, catalog[t].vcpus, catalog[t].ecu) for t in types}
    return {"cheapest": min(types, key=lambda t: (od[t], t)), "fastest": min(types, key=lambda t: (sps[t], t))}


def _max_price_rule(policy: Policy, history: PriceHistory, markets: Sequence[Market]) -> MaxPriceSource:
    if policy.max_price == "never-revoked":
        top = max(float(np.max(history[m].prices)) for m in markets)
        return FixedMaxPrice(NEVER_REVOKED_FACTOR * top)
    if policy.max_price == "on-demand":
        return MaxPriceRule(delta_low_usd_per_hour=1e6, delta_high_usd_per_hour=1e6, cap_at_on_demand=True)
    return MaxPriceRule()


def policy_orchestrator(policy: Policy, *, trial_ids: Sequence[str], configs: Mapping[str, Mapping[str, Any]],
                        max_steps: int, metric: str, mode: str, top_k: int, history: PriceHistory,
                        catalog: InstanceCatalog, pool: Pool, markets: Sequence[Market],
                        revocation_model: RevocationModel, billing: Billing, predictor: RevocationPredictor | None,
                        seed: int, boot_s: float, checkpoint_size_mb: float, reference_seconds_per_step: float | None,
                        priced_boot_s: float | None = None, start_s: float | None = None,
                        deadline_s: float | None = None, budget_usd: float | None = None, deadline_rule: str = "slack",
                        time_value_usd_per_hour: float = 0.0,
                        job_time_value_usd_per_hour: float = DEFAULT_JOB_TIME_VALUE_USD_PER_HOUR,
                        speed_model: str = "pooled",
                        learned: Callable[[OrchestratorConfig], FinalMetricPredictor | None] | None = None,
                        previous_runs: Sequence[tuple[Any, Any, float, Mapping[str, Any]]] | None = None) -> Assembly:
    """The orchestrator of a (non-elastic) policy: chooser, configuration, early stopping and deadline guard.

    Parameters
    ----------
    policy : Policy
        Its ``chooser`` is not ``bracket-type`` (elastic policies: :func:`assemble`).
    trial_ids : sequence of str
        The trials, in launch order.
    configs : mapping
        trial_id -> configuration (stopper ``hparams`` ranks by it).
    max_steps : int
        ``S_max``, steps.
    metric : str
    mode : {"min", "max"}
    top_k : int
    history : spotmarket.prices.PriceHistory
        Spot prices, USD per instance-hour.
    catalog : provisioner.InstanceCatalog
    pool : provisioner.Pool
    markets : sequence of Market
        The pool resolved on the history.
    revocation_model : spotmarket.RevocationModel
    billing : spotmarket.Billing
    predictor : RevocationPredictor or None
        Used only by the SpotTune chooser (``policy.uses_predictor``), which refuses None.
    seed : int
        Seeds the max-price draws and the stoppers (``numpy.random.default_rng(seed)``).
    boot_s : float
        Launch-to-training latency, seconds: what the deadline guard counts.
    checkpoint_size_mb : float
        Checkpoint size, MB (the refund objective's checkpoint times; the guard's ``checkpoint-transfer`` overhead).
    reference_seconds_per_step : float or None
        Seconds per step on the 2-vCPU reference instance (None: the refund objective's default prior κ = 1; the
        deadline guard needs a number).
    priced_boot_s : float, optional
        The boot the refund objective prices, seconds (default ``boot_s``; ``spottune run`` prices none on the
        ``local`` backend, whose workers start at once).
    start_s : float, optional
        The run's start, seconds since the epoch (UTC); needed with a deadline.
    deadline_s : float, optional
        Seconds after the start: a SpotTune chooser is wrapped in the deadline guard
        (:func:`spottune.compose.provisioning.deadline_guard`, overhead ``policy.guard_overhead``).
    budget_usd : float, optional
        With ``policy.guard_budget_cap``, caps the guard's stable option at ``budget_usd / top_k`` USD/hour (DB11).
    deadline_rule : {"slack", "uniform"}, default "slack"
    time_value_usd_per_hour, job_time_value_usd_per_hour : float
        The refund objective's values of a trial's and of the job's wall-clock hour, USD/hour.
    speed_model : {"pooled", "cores"}, default "pooled"
    learned : callable (OrchestratorConfig) -> FinalMetricPredictor or None, optional
        The final-metric predictor learned from earlier runs, for the configuration's barriers: a run's curve file
        (``stopper_curves``), or a study's previous runs (stopper ``hparams``). With stopper ``hparams`` it also
        ranks the rungs (with ``configs``).
    previous_runs : sequence of (steps, loss, max_steps, hyperparameters), optional
        Finished previous runs of the search space, in loss scale (:attr:`spottune.evaluation.Study.extra`
        ``previous_runs``): a ``seeded`` Optuna policy's mirrored study starts from them as COMPLETE trials, never
        launched nor billed (:class:`spottune._pruning.OptunaStopRule`, decision ES22); other policies ignore them.

    Returns
    -------
    Assembly

    Raises
    ------
    ConfigError
        A SpotTune chooser without a predictor, a deadline without a start, or a ``seeded`` policy without
        previous runs.
    """
    rng = np.random.default_rng(seed)
    rule = _max_price_rule(policy, history, markets)
    note = ""
    # the driver reports capacity refusals (CapacityRefused); a chooser with exclusions skips those markets (E12)
    exclusions = MarketExclusions(policy.exclusion_s) if policy.failover else None
    if policy.chooser == "spottune":
        if predictor is None:
            raise ConfigError(f"policy {policy.name} needs a revocation predictor")
        chooser = make_provisioner(history, catalog, pool, predictor, seed, max_price_rule=rule,
                                   objective=policy.objective, boot_s=boot_s if priced_boot_s is None else priced_boot_s,
                                   time_value_usd_per_hour=time_value_usd_per_hour,
                                   job_time_value_usd_per_hour=job_time_value_usd_per_hour, speed_model=speed_model,
                                   checkpoint_size_mb=float(checkpoint_size_mb),
                                   reference_seconds_per_step=reference_seconds_per_step, exclusions=exclusions,
                                   restart_margin=policy.restart_margin)
    elif policy.chooser == "cheapest-market":
        chooser = CheapestMarketChooser(history, catalog, pool, rng, max_price_rule=rule, exclusions=exclusions)
    else:
        itype = fixed_types(catalog, markets)[policy.chooser.removeprefix("fixed-")]
        chooser = FixedTypeChooser(itype, history, catalog, pool, rng, max_price_rule=rule, exclusions=exclusions)
        note = itype
    if policy.capacity == "on-demand":
        revocation_model, billing = NeverRevoked(), OnDemandBilling(catalog)
    config = OrchestratorConfig(max_steps=max_steps, theta=policy.theta, top_k=top_k, metric=metric, mode=mode,
                                max_failures=policy.max_failures, hourly_hop=policy.hourly_hop,
                                launch_retry_s=policy.launch_retry_s, rungs=policy.rungs,
                                max_concurrent_trials=policy.max_concurrent_trials)
    stop_rule, ranking = None, {}
    if policy.pruner is not None:
        if policy.seeded and not previous_runs:
            raise ConfigError(f"policy {policy.name} starts from previous runs of the search space, and there are none")
        seeds = [(steps, loss) for steps, loss, *_ in previous_runs or ()] if policy.seeded else []
        stop_rule = OptunaStopRule(make_pruner(policy.pruner, max_steps, *(policy.pruner_settings or ())),
                                   list(trial_ids), max_steps, previous_runs=seeds)
    if policy.early_curve:
        at_theta = learned(config) if learned is not None else None
        if policy.stopper == "hparams" and at_theta is not None:  # docs/design/earlycurve.md §8.19
            ranking = {"rung_predictor": at_theta, "configs": dict(configs)}
        fmp, plateau, rank_rule = early_stopping(policy.stopper, max_steps, config.theta_steps, top_k, seed,
                                                 final_predictor=at_theta, predictive=policy.predictive_options)
        stop_rule = stop_rule if rank_rule is None else rank_rule  # a policy with a pruner has no EarlyCurve
    else:
        fmp, plateau = curve_model(max_steps, False)
    if deadline_s is not None and policy.chooser == "spottune":
        if start_s is None:
            raise ConfigError("a deadline needs the run's start time")
        od = [catalog.on_demand_usd_per_hour(m.instance_type, m.region) for m in markets]
        cap = max(budget_usd / top_k, min(od)) if policy.guard_budget_cap and budget_usd is not None else None
        chooser = deadline_guard(chooser, catalog, markets, start_s=start_s, deadline_s=deadline_s,
                                 max_steps=max_steps, reference_seconds_per_step=reference_seconds_per_step,
                                 boot_s=boot_s, checkpoint_size_mb=checkpoint_size_mb, overhead=policy.guard_overhead,
                                 rule=deadline_rule, max_stable_usd_per_hour=cap)
    orch = Orchestrator(list(trial_ids), config, chooser, predictor=fmp, plateau_rule=plateau, stop_rule=stop_rule,
                        **ranking)
    return Assembly(orchestrator=orch, revocation_model=revocation_model, billing=billing, chooser=chooser,
                    stop_rule=stop_rule, note=note)


def _study_reference(study: StudyLike) -> float:
    """The study's mean seconds per step on the reference instance (its trials' recorded speeds)."""
    return float(np.mean(list(study.reference_seconds_per_step.values())))


def assemble(policy: Policy, *, study: StudyLike, history: PriceHistory, catalog: InstanceCatalog, pool: Pool,
             markets: Sequence[Market], revocation_model: RevocationModel, billing: Billing,
             predictor: RevocationPredictor | None, seed: int, top_k: int = 3, boot_s: float | None = None,
             start_s: float | None = None, deadline_s: float | None = None, budget_usd: float | None = None,
             deadline_rule: str = "slack", window_s: float = 4 * 86400.0, time_value_usd_per_hour: float = 0.0,
             job_time_value_usd_per_hour: float = DEFAULT_JOB_TIME_VALUE_USD_PER_HOUR,
             speed_model: str = "pooled") -> Assembly:
    """Build the orchestrator (and market rules) of ``policy`` for one simulated run on ``study``.

    Parameters
    ----------
    policy : Policy
    study : spottune.evaluation.Study
        Trials, configurations, metric, mode, S_max, recorded speeds and checkpoint size; stopper ``hparams`` learns
        from its ``extra["previous_runs"]``.
    history : spotmarket.prices.PriceHistory
        Spot prices, USD per instance-hour.
    catalog : provisioner.InstanceCatalog
    pool : provisioner.Pool
    markets : list of Market
        The pool resolved on the history.
    revocation_model : spotmarket.RevocationModel
        The replay's spot revocation rule (legacy or modern).
    billing : spotmarket.Billing
        Spot billing.
    predictor : RevocationPredictor or None
        Used only by the SpotTune chooser (``policy.uses_predictor``).
    seed : int
        Seeds the max-price draws (``numpy.random.default_rng(seed)``).
    top_k : int
    boot_s : float, optional
        The replay's launch-to-training latency, seconds (default :data:`spottune.speed.DEFAULT_BOOT_S`, the
        simulator's default).
    start_s : float, optional
        The run's start, seconds since the epoch (needed with a deadline or an elastic schedule).
    deadline_s : float, optional
        Seconds from the start. SpotTune-provisioned policies are wrapped in
        :class:`spottune.planning.DeadlineGuard` (rule ``deadline_rule``); elastic schedules plan for it.
    budget_usd : float, optional
        The budget elastic schedules plan for (the hard cap itself is the backend's ``budget_usd``).
    deadline_rule : {"slack", "uniform"}
    window_s : float
        Price window before the start that gives the expected prices of the plans, seconds.
    time_value_usd_per_hour, job_time_value_usd_per_hour, speed_model
        As :func:`policy_orchestrator`.

    Returns
    -------
    Assembly

    Raises
    ------
    ConfigError
        An elastic policy without a deadline and a budget, or whose schedule does not fit them; see also
        :func:`policy_orchestrator`.
    """
    if boot_s is None:
        boot_s = DEFAULT_BOOT_S
    if policy.schedule is not None:
        return _assemble_elastic(policy, study=study, history=history, catalog=catalog, pool=pool, markets=markets,
                                 revocation_model=revocation_model, billing=billing,
                                 rng=np.random.default_rng(seed), top_k=top_k, boot_s=boot_s, start_s=start_s,
                                 deadline_s=deadline_s, budget_usd=budget_usd, window_s=window_s)

    def learned(config: OrchestratorConfig) -> FinalMetricPredictor | None:
        """Stopper ``hparams``' predictor, fitted on the study's previous runs (``spottune simulate`` refuses a study
        without them before any run)."""
        if policy.stopper != "hparams" or not config.barriers:
            return None
        keys = {k for c in study.configs.values() for k in c}
        return hparams_predictor(study.extra.get("previous_runs") or [], config.barrier_fractions, seed, keys)

    return policy_orchestrator(
        policy, trial_ids=study.trial_ids, configs=study.configs, max_steps=study.max_steps, metric=study.metric,
        mode=study.mode, top_k=top_k, history=history, catalog=catalog, pool=pool, markets=markets,
        revocation_model=revocation_model, billing=billing, predictor=predictor, seed=seed, boot_s=boot_s,
        checkpoint_size_mb=float(getattr(study, "checkpoint_size_mb", 1.0)),
        reference_seconds_per_step=_study_reference(study), start_s=start_s, deadline_s=deadline_s,
        budget_usd=budget_usd, deadline_rule=deadline_rule, time_value_usd_per_hour=time_value_usd_per_hour,
        job_time_value_usd_per_hour=job_time_value_usd_per_hour, speed_model=speed_model, learned=learned,
        previous_runs=study.extra.get("previous_runs") if policy.seeded else None)


def elastic_schedule(kind: str, *, study: StudyLike, history: PriceHistory, catalog: InstanceCatalog,
                     markets: Sequence[Market], start_s: float, deadline_s: float, budget_usd: float, boot_s: float,
                     window_s: float, top_k: int = 3,
                     step_time_cov: float = 0.0) -> tuple[ElasticSchedule, dict[float, str]]:
    """``(schedule, types)``: the elastic schedule ``kind`` for a deadline (s) and a budget (USD), in
    seconds and vCPUs (the budget in vCPU-seconds at the expected price, DB2; SEER's plan and the lean plan as
    ``spottune run`` prints them, :func:`spottune.planning.plan_run`), and the instance type of each vCPU count.

    Parameters
    ----------
    kind : {"seer", "seer-lean", "e-hyperband", "e-grid"}
        SEER's plan (Dunlap et al., SoCC'21, Algorithms 2-3), the cost-lean plan (decision DB15; SEER's when no
        lean candidate fits), E-Hyperband or E-Grid (SEER §4).
    study : StudyLike
        The trials, ``max_steps`` and the seconds per step on the reference instance.
    history : spotmarket.prices.PriceHistory
        Spot prices, USD per instance-hour; the expected price is their mean over ``window_s`` before ``start_s``.
    catalog : provisioner.InstanceCatalog
        vCPUs and on-demand prices of the types.
    markets : sequence of Market
        The pool.
    start_s : float
        Start, seconds since the epoch (UTC).
    deadline_s : float
        Seconds from the start by which the study must end.
    budget_usd : float
        Dollar budget, USD.
    boot_s : float
        Launch-to-training latency, seconds (decision D11).
    window_s : float
        Seconds of price history before the start that set the expected price.
    top_k : int, default 3
        Trials the lean plan keeps at its last barrier.
    step_time_cov : float, default 0.0
        Coefficient of variation of the step times the plan allows for.

    Returns
    -------
    schedule : spottune.planning.ElasticSchedule
        Brackets of rounds in seconds and vCPUs.
    types : dict of float to str
        vCPU count -> the instance type that runs it.

    Raises
    ------
    ConfigError
        If the deadline and the budget do not fit the schedule.
    """
    ref = _study_reference(study)
    common = dict(deadline_s=deadline_s, budget_usd=budget_usd, history=history, catalog=catalog, markets=markets,
                  start_s=start_s, window_s=window_s, reference_seconds_per_step=ref, boot_s=boot_s)
    res = resources(**common)
    n = len(study.trial_ids)
    if kind in ("seer", "seer-lean"):
        plan = plan_run(**common, n_requested=n, max_steps=study.max_steps if kind == "seer-lean" else None,
                        top_k=top_k, theta=LEAN_THETA, overhead_s=boot_s + RESTORE_CHECKPOINT_S,
                        step_time_cov=step_time_cov, hourly_hop=True, delta_usd_per_hour=ELASTIC_DELTA_USD_PER_HOUR)
        if plan.seer is None:
            raise ConfigError(f"seer: deadline {deadline_s:g} s and budget {budget_usd:g} USD fit no round")
        if kind == "seer" or plan.lean is None:  # no lean candidate fits: SEER's plan (Fact 1 in its own model)
            sched = seer_schedule(plan.seer)
            return sched, {p: res.instance_type(p) for b in sched.brackets for p in b.resources}
        return plan.lean.schedule, plan.lean.type_map
    sched = (hyperband_schedule(deadline_s, res.budget_vcpu_s, eta=SEER_ETA, p_min=res.p_min, t_min=res.t_min,
                                max_trials=n) if kind == "e-hyperband" else
             grid_schedule(deadline_s, res.budget_vcpu_s, p_min=res.p_min, p_max=res.p_max, t_min=res.t_min,
                           max_trials=n))
    return sched, {p: res.instance_type(p) for b in sched.brackets for p in b.resources}


def _assemble_elastic(policy: Policy, *, study: StudyLike, history: PriceHistory, catalog: InstanceCatalog, pool: Pool,
                      markets: Sequence[Market], revocation_model: RevocationModel, billing: Billing,
                      rng: np.random.Generator, top_k: int, boot_s: float, start_s: float | None,
                      deadline_s: float | None, budget_usd: float | None, window_s: float) -> Assembly:
    """The orchestrator of an elastic policy (:func:`spottune.planning.bracket_orchestrator`)."""
    if deadline_s is None or budget_usd is None or start_s is None:
        raise ConfigError(f"policy {policy.name} needs a deadline and a budget (--deadline, --budget-usd)")
    schedule, types = elastic_schedule(policy.schedule, study=study, history=history, catalog=catalog,
                                       markets=markets, start_s=start_s, deadline_s=deadline_s, budget_usd=budget_usd,
                                       boot_s=boot_s, window_s=window_s, top_k=top_k,
                                       step_time_cov=SimSettings().step_time_cov)
    orch, chooser, note = bracket_orchestrator(
        schedule, types, study.trial_ids, history=history, catalog=catalog, pool=pool, rng=rng,
        max_steps=study.max_steps, metric=study.metric, mode=study.mode, top_k=top_k,
        reference_seconds_per_step=study.reference_seconds_per_step.__getitem__, boot_s=boot_s,
        predictive=policy.early_curve, step_time_cov=SimSettings().step_time_cov, hourly_hop=policy.hourly_hop)
    return Assembly(orchestrator=orch, revocation_model=revocation_model, billing=billing, chooser=chooser, note=note)
