"""SpotTune's market chooser, the curve model and the deadline guard around a chooser.

:func:`make_provisioner` builds the chooser of objective ``refund`` or ``paper``; :func:`curve_model` the
final-metric predictor and plateau rule of a run without a stopper; :func:`deadline_guard` wraps a chooser in
:class:`spottune.planning.DeadlineGuard` with the overhead rule :data:`GUARD_OVERHEADS` names.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from earlycurve import EarlyCurve, FinalMetricPredictor, LastValue, is_plateau
from provisioner import (DEFAULT_GUARD_MARGIN, DEFAULT_GUARD_P_SHRINK, GuardedProvisioner, InstanceCatalog,
                         MarketExclusions, MaxPriceSource, PerformanceMatrix, Pool,
                         PooledSpeedMatrix, Provisioner, RefundProvisioner, RefundStepCost)
from revpred.protocol import RevocationPredictor
from spotmarket.prices import Market, PriceHistory
from spottune.backends.sim import SimSettings
from spottune.compose.predictors import selection_p_cap
from spottune.errors import ConfigError
from spottune.experiment import DEFAULT_JOB_TIME_VALUE_USD_PER_HOUR, OBJECTIVES, SPEED_MODELS
from spottune.planning import DeadlineGuard
from spottune.planning._brackets import RESTORE_CHECKPOINT_S
from spottune.speed import DEFAULT_BOOT_S, REFERENCE_GPUS, REFERENCE_VCPUS, seconds_per_step, transfer_seconds

__all__ = ["DEFAULT_RESTART_MARGIN", "GUARD_OVERHEADS", "GUARD_P_SHRINK", "GUARD_PROBES", "GUARD_ROBUST_P", "PlateauRule", "curve_model", "deadline_guard",
           "make_provisioner"]

#: The margin m of SpotTune's default provisioning (:class:`provisioner.GuardedProvisioner`): another candidate than
#: spot-restart's is taken only when its step cost is below (1 − m) times the restart candidate's. Chosen on the
#: tuning starts of both shipped traces (docs/design/decisions.md, R12; ``benchmarks/bench_provisioning.py --tuning``).
DEFAULT_RESTART_MARGIN = DEFAULT_GUARD_MARGIN
#: The guarded provisioner's shrinkage w of p towards the round's mean at the same rung (decision R5's correction,
#: R12): three quarters of the way, so that a refund bet that rests on one market's high p is priced mostly at the
#: pool's rate. Chosen with :data:`DEFAULT_RESTART_MARGIN` on the tuning starts of both shipped traces.
GUARD_P_SHRINK = DEFAULT_GUARD_P_SHRINK
#: Whether the guarded provisioner leaves restart's choice only when the move also wins at the predictor's own p and
#: at the pool's rate (``robust_p`` of :class:`provisioner.GuardedProvisioner`; decision R12).
GUARD_ROBUST_P = False
#: Probe segments the guarded provisioner may have in flight on instance types no trial has measured (``probes`` of
#: :class:`provisioner.GuardedProvisioner`; decision R13).
GUARD_PROBES = 0
#: z of the probe's optimistic speed: the matrix's prediction times ``exp(-z * sigma_type)`` (decision R13).
GUARD_PROBE_Z = 1.0

#: How :func:`deadline_guard` counts the seconds of a launch that do not train, besides the boot:
#: ``checkpoint-transfer``, the slowest checkpoint restore of the pool's instance types (checkpoint bandwidth model,
#: :func:`spottune.speed.transfer_seconds`, plus the simulator's fixed per-checkpoint overhead; what ``spottune run``
#: uses), or ``fixed``, :data:`spottune.planning.RESTORE_CHECKPOINT_S` (60 s, an upper bound on restore and
#: checkpoint; what the ``spottune simulate`` policies use, as the SEER-family plans do).
GUARD_OVERHEADS = ("checkpoint-transfer", "fixed")

#: The plateau rule's signature: ``(steps, values, max_steps) -> bool``.
PlateauRule = Callable[[Sequence[int], Sequence[float], int], bool]


def make_provisioner(history: PriceHistory, catalog: InstanceCatalog, pool: Pool, predictor: RevocationPredictor,
                     seed: int, max_price_rule: MaxPriceSource | None = None, *, objective: str = "refund", boot_s: float | None = None,
                     checkpoint_size_mb: float = 1.0, reference_seconds_per_step: float | None = None,
                     time_value_usd_per_hour: float = 0.0,
                     job_time_value_usd_per_hour: float = DEFAULT_JOB_TIME_VALUE_USD_PER_HOUR,
                     speed_model: str = "pooled",
                     exclusions: MarketExclusions | None = None,
                     restart_margin: float | None = None) -> Provisioner | RefundProvisioner:
    """SpotTune's market chooser over the pool's markets, with the objective ``objective``.

    Parameters
    ----------
    history : spotmarket.prices.PriceHistory
        Spot prices, USD per instance-hour.
    catalog : provisioner.InstanceCatalog
    pool : provisioner.Pool
    predictor : RevocationPredictor
        One-hour revocation probability (:func:`make_predictor`).
    seed : int
        Seeds the max-price draws (``numpy.random.default_rng(seed)``).
    max_price_rule : MaxPriceSource, optional
        ``paper`` only. Default: D1, ``b = price + U[0.00001, 0.2]`` USD/hour (``provisioner.MaxPriceRule()``).
    objective : {"refund", "paper"}, default "refund"
        ``refund``: :class:`provisioner.RefundProvisioner`, the market and max price (ladder) with the
        lowest expected USD per useful step over the decision horizon; ``paper``:
        :class:`provisioner.Provisioner` with Eq 2 and the max-price rule.
    boot_s : float, optional
        ``refund`` only: launch-to-training latency, seconds (default
        :data:`spottune.speed.DEFAULT_BOOT_S`; pass the backend's own value).
    checkpoint_size_mb : float
        ``refund`` only: checkpoint size, MB; write and restore times per instance type come from the
        checkpoint bandwidth model (:func:`spottune.speed.transfer_seconds`, plus the sim's
        fixed per-checkpoint overhead).
    reference_seconds_per_step : float, optional
        ``refund`` only: the workload's declared seconds per step on the 2-vCPU reference instance; sets
        T's prior ``κ = T_ref · 2`` s·core/step (default κ = 1), so that the horizon and the whole-step
        count are right before the first measurement (a step longer than the hour is never chosen). When the
        pool asks for GPUs (``pool.min_gpus`` > 0, a trainable declaring ``gpu``) the reference is one GPU
        and the prior is ``κ / GPUs`` with ``κ = T_ref · 1`` (decisions.md IC3).
    time_value_usd_per_hour : float, default 0
        ``refund`` only: value of a trial's wall-clock hour, USD per trial-hour
        (:attr:`provisioner.RefundStepCost.time_value_usd_per_hour`; docs/design/decisions.md, R7).
    job_time_value_usd_per_hour : float, default :data:`spottune.experiment.DEFAULT_JOB_TIME_VALUE_USD_PER_HOUR`
        ``refund`` only: value of the job's wall-clock hour, USD per job-hour, shared by the trials heading to the
        same stop (:attr:`provisioner.RefundStepCost.job_time_value_usd_per_hour`; R11).
    speed_model : {"pooled", "cores"}, default "pooled"
        ``refund`` only: T's model for the instance types a trial has not run on (``spottune.experiment.SPEED_MODELS``;
        :class:`provisioner.PooledSpeedMatrix` pivoting at the 2-vCPU reference instance, or the per-trial
        ``κ / cores`` rule of :class:`provisioner.PerformanceMatrix`).
    exclusions : provisioner.MarketExclusions, optional
        Where the chooser keeps the markets that refused a launch for capacity; None: none are kept.
    restart_margin : float in [0, 1], optional
        ``refund`` only: :class:`provisioner.GuardedProvisioner` with this margin (spot-restart's choice unless
        another candidate's step cost is below ``1 − restart_margin`` times its; honest speeds, p shrunk by
        :data:`GUARD_P_SHRINK`; decision R12); None: the unguarded :class:`provisioner.RefundProvisioner`.

    Returns
    -------
    provisioner.GuardedProvisioner, provisioner.RefundProvisioner or provisioner.Provisioner
        The chooser the orchestrator asks at every launch for a market and a max price (USD/hour).

    Raises
    ------
    ConfigError
        On an unknown objective or speed model.
    ProvisionerConfigError
        On a negative or non-finite value of time.
    """
    rng = np.random.default_rng(seed)
    if objective == "paper":
        return Provisioner(history, catalog, predictor, pool, rng, max_price_rule=max_price_rule, exclusions=exclusions)
    if objective != "refund":
        raise ConfigError(f"objective is {objective!r}, but must be one of {', '.join(OBJECTIVES)}")
    if speed_model not in SPEED_MODELS:
        raise ConfigError(f"speed_model is {speed_model!r}, but must be one of {', '.join(SPEED_MODELS)}")
    overhead = SimSettings().checkpoint_overhead_s
    types = {m.instance_type for m in pool.resolve(history, catalog)}
    ckpt = {t: transfer_seconds(checkpoint_size_mb, catalog[t].vcpus, overhead) for t in sorted(types)}
    cost = RefundStepCost(boot_s=DEFAULT_BOOT_S if boot_s is None else float(boot_s), checkpoint_s=ckpt,
                          time_value_usd_per_hour=time_value_usd_per_hour,
                          job_time_value_usd_per_hour=job_time_value_usd_per_hour)
    # the prior's units: vCPUs (reference 2, the paper's κ / cores), or GPUs for a trainable that declares GPUs
    # (reference 1 GPU; every pool type has one, the pool's filter saw to that; decisions.md IC3)
    units, ref_units = ("gpus", REFERENCE_GPUS) if pool.min_gpus > 0 else ("vcpus", REFERENCE_VCPUS)
    kappa = {} if reference_seconds_per_step is None else {"kappa_s": ref_units * float(reference_seconds_per_step)}
    perf = (PooledSpeedMatrix.from_catalog(catalog, sorted(types), units=units, reference_cores=ref_units, **kappa)
            if speed_model == "pooled" else PerformanceMatrix.from_catalog(catalog, sorted(types), units=units, **kappa))
    if restart_margin is not None:
        # the guard's honest speed counts the matrix's units: vCPUs from 2, or GPUs from 1 for a GPU trainable
        return GuardedProvisioner(history, catalog, predictor, pool, rng, objective=cost, performance=perf,
                                  p_cap=selection_p_cap(predictor), exclusions=exclusions, margin=restart_margin,
                                  p_shrink=GUARD_P_SHRINK, reference_cores=ref_units, robust_p=GUARD_ROBUST_P,
                                  probes=GUARD_PROBES, probe_z=GUARD_PROBE_Z)
    return RefundProvisioner(history, catalog, predictor, pool, rng, objective=cost, performance=perf,
                             p_cap=selection_p_cap(predictor), exclusions=exclusions)


def curve_model(max_steps: int, early_curve: bool = True) -> tuple[FinalMetricPredictor, PlateauRule | None]:
    """(final-metric predictor, plateau rule) of the orchestrator.

    ``early_curve``: EarlyCurve at S_max = ``max_steps`` steps and :func:`earlycurve.is_plateau`;
    otherwise the last observed value and no plateau rule (None).

    Parameters
    ----------
    max_steps : int
        S_max, steps: where EarlyCurve predicts the final metric.
    early_curve : bool, default True
        EarlyCurve and the plateau rule (the paper's §III-C), or the last value and none.

    Returns
    -------
    predictor : earlycurve.FinalMetricPredictor
        EarlyCurve or :class:`earlycurve.LastValue`.
    plateau_rule : callable (steps, values, max_steps) -> bool, or None
        The plateau rule (decision D8), or None.
    """
    if not early_curve:
        return LastValue(), None
    return EarlyCurve(max_steps), (lambda steps, values, smax: is_plateau(steps, values, smax))


def deadline_guard(chooser: object, catalog: InstanceCatalog, markets: Sequence[Market], *, start_s: float, deadline_s: float, max_steps: int,
                   reference_seconds_per_step: float, boot_s: float, checkpoint_size_mb: float,
                   overhead: str = "checkpoint-transfer", rule: str = "slack",
                   max_stable_usd_per_hour: float | None = None) -> DeadlineGuard:
    """``chooser`` wrapped in :class:`spottune.planning.DeadlineGuard` for a deadline ``deadline_s`` after ``start_s``.

    Parameters
    ----------
    chooser : MarketChooser
    catalog : provisioner.InstanceCatalog
        vCPUs, ECU and on-demand prices (USD/hour) per instance type.
    markets : sequence of Market
        The pool's markets.
    start_s : float
        The run's start, seconds since the epoch (UTC).
    deadline_s : float
        Seconds after ``start_s``.
    max_steps : int
        ``S_max``, steps.
    reference_seconds_per_step : float
        Seconds per step on the 2-vCPU reference instance; each type's speed is
        :func:`spottune.speed.seconds_per_step` of its vCPUs and ECU.
    boot_s : float
        Launch-to-training latency, seconds.
    checkpoint_size_mb : float
        Checkpoint size, MB (overhead ``checkpoint-transfer`` only).
    overhead : {"checkpoint-transfer", "fixed"}, default "checkpoint-transfer"
        The seconds of a launch that do not train: ``boot_s`` plus the rule of :data:`GUARD_OVERHEADS`.
    rule : {"slack", "uniform"}, default "slack"
        :data:`spottune.planning.DEADLINE_RULES`.
    max_stable_usd_per_hour : float, optional
        The most an hour of the stable option may cost, USD/hour (None: no cap).

    Returns
    -------
    spottune.planning.DeadlineGuard

    Raises
    ------
    ConfigError
        On an unknown ``overhead``.
    """
    if overhead == "checkpoint-transfer":
        restore = max(transfer_seconds(checkpoint_size_mb, catalog[m.instance_type].vcpus,
                                       SimSettings().checkpoint_overhead_s) for m in markets)
    elif overhead == "fixed":
        restore = RESTORE_CHECKPOINT_S
    else:
        raise ConfigError(f"guard overhead is {overhead!r}, but must be one of {', '.join(GUARD_OVERHEADS)}")
    ref = float(reference_seconds_per_step)

    def sps(instance_type: str) -> float:
        return seconds_per_step(ref, catalog[instance_type].vcpus, catalog[instance_type].ecu)

    return DeadlineGuard(chooser, start_s=start_s, deadline_s=start_s + deadline_s, max_steps=max_steps,
                         markets=markets, seconds_per_step=sps, overhead_s=boot_s + restore, rule=rule,
                         on_demand_usd_per_hour=lambda m: catalog.on_demand_usd_per_hour(m.instance_type, m.region),
                         max_stable_usd_per_hour=max_stable_usd_per_hour)
