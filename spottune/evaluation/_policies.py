"""Named policies: each a recipe that assembles chooser + predictor + θ + hop/no-hop + max-price rule.

A policy is data (:class:`Policy`); :func:`assemble` turns it, for one study, market mode and start, into
the orchestrator, revocation model and billing rule the simulator runs. The shared parts (market and
its revocation model, predictor, SpotTune provisioner, curve model) come from the composition root,
:mod:`spottune._compose`, as for ``spottune run`` and ``spottune.tune()``. Every policy sees the same
trials, the same price replay and the same seeds (STYLE §2: a baseline is another object, not a flag).

=========================  ==========================================================================
name                       recipe
=========================  ==========================================================================
spottune-<θ>[-<pred>]      SpotTune with predictor <pred> (default ``auto``; ``revpred``, ``tributary``, ``constant``,
[-<objective>]             ``hindsight``, ``none``, ``calibrated``, ``online-hazard``), hourly hop,
                           EarlyCurve at θ and the plateau rule. Objective ``refund`` (market and max
                           price from the ladder by expected USD per useful step,
                           ``provisioner.RefundProvisioner``) or ``paper`` (Eq 2, D1 max price); without
                           the suffix, ``spottune simulate --objective`` (default refund).
                           ``spottune-0.7``, ``spottune-0.7-paper``, ``spottune-0.7-constant-paper``,
                           θ sweep.
single-cheapest            one instance per trial of the cheapest type (lowest on-demand price in the
                           pool), in its cheapest zone at launch; max price 10x the highest recorded
                           price (never revoked by price), no hop, θ = 1, no early stopping (D9).
single-fastest             the same on the fastest type (fewest seconds per step, speed model).
on-demand                  the single-cheapest recipe on on-demand capacity: never revoked, billed per
                           second at the catalog's on-demand price, no refund.
spot-restart               cheapest market at each launch, max price = on-demand price (the default of
                           today's managed spot jobs), relaunch from the last checkpoint after a
                           revocation, no hourly hop, no early stopping; after a capacity refusal it
                           asks again after the back-off (as the single-spot baselines do).
spot-restart-failover      spot-restart that fails over like SkyPilot: a market that refused a launch for
                           capacity is left out for 30 min and the trial relaunches at once in the next
                           cheapest (design E12; every SpotTune policy fails over so).
optuna-median / -sha /     SpotTune's provisioning (RevPred, hop) at θ = 1 without EarlyCurve; stop
optuna-hyperband           decisions by Optuna's MedianPruner / SuccessiveHalvingPruner / HyperbandPruner
                           (:mod:`spottune.evaluation._pruning`).
seer                       SEER as published (SoCC'21, Algorithm 1, eta 4, nu 2): its plan for the run's
                           deadline and budget (``spottune simulate --deadline --budget-usd``), brackets
                           on the cheapest-per-vCPU type with P[i] vCPUs, elimination by the current value,
                           survivors re-sorted across brackets (:mod:`spottune.evaluation._elastic`).
seer-predictive            SEER ranking by EarlyCurve's predicted final value (F-S2).
seer-lean                  the cost-lean plan (DB15): the cheapest of θ barrier + top-k (θ 0.7), one round and
                           SEER's plan, an instance class per round, that meets D with the noise reserve within
                           B; elimination by EarlyCurve's predicted final value.
e-hyperband                SEER's E-Hyperband: Hyperband's brackets in parallel at p_min, R as large as the
                           deadline and budget allow.
e-grid                     SEER's E-Grid: T/2 exploring at p_min, T/2 exploiting the best at p_max.
                           The four: cheapest zone of the bracket's type at launch, relaunch
                           from the last checkpoint after a revocation, no hourly hop, max price current + 0.01
                           USD/h (DB7-DB9).
=========================  ==========================================================================
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from spottune.errors import ConfigError
from spottune.orchestrator._config import check_rungs
from spottune.experiment import (BARRIER_STOPPERS, DEFAULT_JOB_TIME_VALUE_USD_PER_HOUR, DEFAULT_STOPPER, OBJECTIVES, STOPPERS, check_predictive_rungs,
                                 parse_predictive_options)
from spottune.evaluation._elastic import ELASTIC_DELTA_USD_PER_HOUR, LAUNCH_RETRY_S, RESTORE_CHECKPOINT_S
from spottune.evaluation._predictors import KINDS
from spottune.evaluation._pruning import PRUNERS
from spottune.planning._elastic import SCHEDULES

CHOOSERS = ("spottune", "cheapest-market", "fixed-cheapest", "fixed-fastest", "bracket-type")
#: Provisioning of the SpotTune-provisioned policies (``spottune-<θ>``, ``optuna-*``): ``spottune`` (the default: the
#: SpotTune provisioner, hourly hop) or ``restart`` (spot-restart's: cheapest market at each launch, max price = on-demand,
#: no hop), which compares the stoppers on a provisioning that does not depend on when a trial will stop.
PROVISIONINGS = ("spottune", "restart")
NEVER_REVOKED_FACTOR = 10.0  #: single-spot max price = this x the highest price of the whole history


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """One compared policy.

    Parameters
    ----------
    name : str
    description : str
    chooser : {"spottune", "cheapest-market", "fixed-cheapest", "fixed-fastest"}
    predictor : str
        Revocation predictor for Eq 1 (``revpred``, ``tributary``, ``constant``, ``hindsight``, ``none``).
    theta : float
        Early-shutdown rate θ in (0, 1].
    hourly_hop : bool
        Checkpoint and re-provision after each hour on an instance.
    early_curve : bool
        EarlyCurve ranking at θ and the plateau rule; False ranks by the last value and never plateaus.
    max_price : {"d1", "never-revoked", "on-demand"}
        D1 (current + U[0.00001, 0.2] USD/h), far above every recorded price, or the on-demand price.
    capacity : {"spot", "on-demand"}
        On-demand: never revoked, billed at the on-demand price.
    pruner : {"median", "sha", "hyperband"} or None
        Optuna pruner that stops trials.
    pruner_settings : (int, int) or None
        SHA's or Hyperband's ``(min_resource, reduction_factor)`` (policy ``optuna-sha-r3-rf4``); None: the module
        settings of :func:`spottune.evaluation._pruning.make_pruner`.
    objective : {"refund", "paper"}
        SpotTune chooser only: the provisioner's objective (``refund`` ignores ``max_price``: it chooses
        the max price from the ladder).
    stopper : {"paper", "rank", "predictive", "barrier", "hparams"}
        With ``early_curve``: predictive ASHA or the rank-confidence rule at rungs before θ and the last value at θ, or
        EarlyCurve at θ (:func:`spottune._early_stop.early_stopping`).
    rungs : tuple of (float, int), default ()
        Stopper ``barrier`` or ``hparams``: synchronous barriers before θ, ``(fraction, keep)`` (``spottune simulate --rungs``;
        :func:`spottune.orchestrator.check_rungs`; the fractions and the order of the keeps are checked here, the rest
        against the run's top-k and S_max by ``spottune simulate``).
    predictive_options : mapping or None, default None
        Stopper ``predictive``: the rule's settings instead of the shipped defaults (``spottune simulate
        --predictive-options``; :func:`spottune.experiment.parse_predictive_options`).
    schedule : {"seer", "seer-lean", "e-hyperband", "e-grid"} or None
        An elastic schedule planned for the run's deadline and budget (chooser ``bracket-type``);
        ``early_curve`` then ranks each round by EarlyCurve's predicted final value instead of the
        current value.
    failover : bool, default True
        After a launch the market refuses for capacity (modern mode's outages), leave that market out of the
        choice for 30 minutes and relaunch at once elsewhere (:class:`provisioner.MarketExclusions`, design
        E12); False: ask again after the back-off (the single-spot baselines and ``spot-restart``, whose
        next choice elsewhere can cost far more; ``spot-restart-failover`` is SkyPilot's failover).
    """

    name: str
    description: str
    chooser: str = "spottune"
    predictor: str = "auto"
    theta: float = 0.7
    hourly_hop: bool = True
    early_curve: bool = True
    max_price: str = "d1"
    capacity: str = "spot"
    pruner: str | None = None
    pruner_settings: tuple[int, int] | None = None
    objective: str = "refund"
    stopper: str = DEFAULT_STOPPER
    rungs: tuple[tuple[float, int], ...] = ()
    predictive_options: Mapping[str, Any] | None = None
    schedule: str | None = None
    failover: bool = True

    def __post_init__(self) -> None:
        if self.chooser not in CHOOSERS:
            raise ConfigError(f"policy {self.name}: chooser is {self.chooser!r}, but must be one of {CHOOSERS}")
        if self.predictor not in KINDS:
            raise ConfigError(f"policy {self.name}: predictor is {self.predictor!r}, but must be one of {KINDS}")
        if not 0 < self.theta <= 1:
            raise ConfigError(f"policy {self.name}: theta is {self.theta!r}, but must be 0 < theta <= 1")
        if self.max_price not in ("d1", "never-revoked", "on-demand"):
            raise ConfigError(f"policy {self.name}: max_price is {self.max_price!r}")
        if self.capacity not in ("spot", "on-demand"):
            raise ConfigError(f"policy {self.name}: capacity is {self.capacity!r}")
        if self.objective not in OBJECTIVES:
            raise ConfigError(f"policy {self.name}: objective is {self.objective!r}, but must be one of {OBJECTIVES}")
        if self.stopper not in STOPPERS:
            raise ConfigError(f"policy {self.name}: stopper is {self.stopper!r}, but must be one of {STOPPERS}")
        if (self.schedule is None) != (self.chooser != "bracket-type") or self.schedule not in (None, *SCHEDULES):
            raise ConfigError(f"policy {self.name}: schedule {self.schedule!r} needs chooser bracket-type and one of "
                              f"{SCHEDULES}")
        if self.pruner is not None and self.pruner not in PRUNERS:
            raise ConfigError(f"policy {self.name}: pruner is {self.pruner!r}, but must be one of {PRUNERS}")
        if self.rungs and self.stopper not in BARRIER_STOPPERS:
            raise ConfigError(f"policy {self.name}: rungs need stopper barrier or hparams, not {self.stopper!r}")
        try:  # S_max is the run's: simulate_all checks the rung steps against it
            object.__setattr__(self, "predictive_options",
                               parse_predictive_options(self.predictive_options, self.stopper))
            check_predictive_rungs(self.predictive_options, self.theta)
        except ConfigError as e:
            raise ConfigError(f"policy {self.name}: {e}") from None
        try:  # S_max and top-k are the run's: simulate_all checks them; here fractions and the order of keeps
            object.__setattr__(self, "rungs", check_rungs(self.rungs, self.theta, 1, 10**9))
        except ConfigError as e:
            raise ConfigError(f"policy {self.name}: {e}") from None

    @property
    def uses_predictor(self) -> bool:
        """Whether the chooser reads revocation probabilities (only the SpotTune provisioner does)."""
        return self.chooser == "spottune"


_SINGLE = dict(predictor="none", theta=1.0, hourly_hop=False, early_curve=False, max_price="never-revoked",
               failover=False)
#: spot-restart's provisioning: the cheapest market at each launch, max price = on-demand, no hop, no predictor
_RESTART_PROVISIONING = dict(chooser="cheapest-market", predictor="none", hourly_hop=False, max_price="on-demand")
_RESTART = dict(theta=1.0, early_curve=False, **_RESTART_PROVISIONING)
FIXED: dict[str, Policy] = {p.name: p for p in [
    Policy(name="single-cheapest", description="Single-Spot Cheapest: cheapest type, never revoked, no hop, θ=1",
           chooser="fixed-cheapest", **_SINGLE),
    Policy(name="single-fastest", description="Single-Spot Fastest: fastest type, never revoked, no hop, θ=1",
           chooser="fixed-fastest", **_SINGLE),
    Policy(name="on-demand", description="cheapest type on on-demand capacity, no hop, θ=1",
           chooser="fixed-cheapest", capacity="on-demand", **_SINGLE),
    Policy(name="spot-restart", description="cheapest market, max price = on-demand, restart from checkpoint "
           "after a revocation, no hop, no early stopping", failover=False, **_RESTART),
    Policy(name="spot-restart-failover", description="spot-restart that leaves a market refusing for capacity "
           "out for 30 min and relaunches at once in the next cheapest (SkyPilot's failover)", **_RESTART),
    *[Policy(name=f"optuna-{k}", description=f"SpotTune provisioning, θ=1, Optuna {k} pruner",
             theta=1.0, early_curve=False, pruner=k) for k in PRUNERS],
]}
_ELASTIC = dict(chooser="bracket-type", predictor="none", theta=1.0, hourly_hop=False, max_price="d1")
#: SEER-family policies (F-S5): they need the run's deadline and budget.
ELASTIC: dict[str, Policy] = {p.name: p for p in [
    Policy(name="seer", description="SEER as published: plan for D and B, elimination by the current value",
           schedule="seer", early_curve=False, **_ELASTIC),
    Policy(name="seer-predictive", description="SEER, elimination by EarlyCurve's predicted final value (F-S2)",
           schedule="seer", early_curve=True, **_ELASTIC),
    Policy(name="seer-lean", description="the cheapest feasible plan (theta-top-k, one round or SEER's, instance "
           "class per round; DB15), elimination by EarlyCurve's predicted final value",
           schedule="seer-lean", early_curve=True, **{**_ELASTIC, "hourly_hop": True}),
    Policy(name="e-hyperband", description="E-Hyperband: Hyperband's brackets in parallel within D and B",
           schedule="e-hyperband", early_curve=False, **_ELASTIC),
    Policy(name="e-grid", description="E-Grid: T/2 exploring at p_min, T/2 exploiting the best at p_max",
           schedule="e-grid", early_curve=False, **_ELASTIC),
]}
FIXED.update(ELASTIC)

#: The policies of the headline comparison, in display order.
DEFAULT_POLICIES = ("spottune-0.7", "spottune-1.0", "spottune-0.7-revpred-paper", "spottune-0.7-constant",
                    "spottune-0.7-hindsight", "single-cheapest", "single-fastest", "on-demand", "spot-restart",
                    "spot-restart-failover", "optuna-median", "optuna-sha", "optuna-hyperband")
THETA_SWEEP = tuple(f"spottune-{t / 10:.1f}" for t in range(1, 11))

_OPTUNA = re.compile(r"^optuna-(?P<kind>sha|hyperband)-r(?P<r>\d+)-rf(?P<rf>\d+)$")
_SPOTTUNE = re.compile(r"^spottune-(?P<theta>[01](?:\.\d+)?)(?:-(?P<pred>[a-z][a-z-]*?))?(?:-(?P<obj>refund|paper))?$")


def get_policy(name: str, objective: str = "refund", stopper: str = DEFAULT_STOPPER,
               rungs: Any = (), provisioning: str = "spottune", predictive_options: Any = None) -> Policy:
    """The policy called ``name`` (see the module table), provisioned as ``provisioning`` says.

    Parameters
    ----------
    name : str
    objective : {"refund", "paper"}
        Objective of SpotTune-provisioned policies whose name has no objective suffix (and of the Optuna
        policies, which use SpotTune's provisioning).
    stopper : {"paper", "rank", "predictive", "barrier", "hparams"}
        Early stopping of the ``spottune-<θ>...`` policies (``predictive``: predictive ASHA; ``rank``: the rank-confidence rule;
        ``barrier``: the last value's top-k at θ, no rungs; ``hparams``: ``barrier`` ranked by the final loss
        learned from the study's previous runs, docs/design/earlycurve.md §8.19; ``paper``: EarlyCurve at θ, as published). A name
        with the ``-paper`` suffix is the paper's design throughout: its stopper is ``paper`` whatever this says.
    rungs : str or sequence of (float, int), default ()
        Synchronous barriers before θ of the ``spottune-<θ>...`` policies with stopper ``barrier`` or ``hparams`` and θ < 1
        (:attr:`Policy.rungs`); other policies ignore them.
    provisioning : {"spottune", "restart"}, default "spottune"
        ``restart`` gives the SpotTune-provisioned policies (``spottune-<θ>...``, ``optuna-...``) spot-restart's
        provisioning instead (cheapest market at each launch, max price = on-demand, no hourly hop, no predictor;
        :data:`PROVISIONINGS`); the other policies keep their own.
    predictive_options : mapping or str, optional
        Settings of the ``spottune-<θ>...`` policies with stopper ``predictive`` and θ < 1
        (:attr:`Policy.predictive_options`); other policies ignore them, as θ = 1 ignores ``rungs``.

    Raises
    ------
    ConfigError
        If the name, the objective or the provisioning is unknown, or the rungs do not fit the policy's θ.
    """
    if provisioning not in PROVISIONINGS:
        raise ConfigError(f"provisioning is {provisioning!r}, but must be one of {', '.join(PROVISIONINGS)}")
    policy = _named_policy(name, objective, stopper, rungs, predictive_options)
    if provisioning == "restart" and policy.chooser == "spottune":
        policy = replace(policy, **_RESTART_PROVISIONING, failover=False,
                         description=f"{policy.description}; spot-restart provisioning")
    return policy


def _named_policy(name: str, objective: str, stopper: str, rungs: Any, predictive_options: Any = None) -> Policy:
    if objective not in OBJECTIVES:
        raise ConfigError(f"objective is {objective!r}, but must be one of {', '.join(OBJECTIVES)}")
    if name in FIXED:
        fixed = FIXED[name]
        return replace(fixed, objective=objective) if fixed.chooser == "spottune" else fixed
    m = _OPTUNA.match(name)
    if m:  # a peer at given settings, e.g. optuna-sha-r3-rf4 (issue 13: the peers at their best)
        r, rf = int(m["r"]), int(m["rf"])
        if r < 1 or rf < 2:
            raise ConfigError(f"policy {name!r}: min_resource must be >= 1 and the reduction factor >= 2")
        return replace(FIXED[f"optuna-{m['kind']}"], name=name, objective=objective, pruner_settings=(r, rf),
                       description=f"SpotTune provisioning, θ=1, Optuna {m['kind']} pruner, min_resource {r}, rf {rf}")
    m = _SPOTTUNE.match(name)
    if m:
        theta, pred, obj = float(m["theta"]), m["pred"], m["obj"]
        if obj is None and pred in OBJECTIVES:  # spottune-0.7-paper: the suffix is the objective
            pred, obj = None, pred
        if obj == "paper":  # the paper's design: Eq 2, the D1 max price and EarlyCurve at θ (design ES18)
            stopper = "paper"
        pred, obj = pred or "auto", obj or objective
        if pred == "oracle":
            raise ConfigError(f"policy {name!r}: the 'oracle' predictor is now called 'hindsight' (perfect p in Eq 2; "
                              f"not a lower bound, see the lower_bound_usd column); use "
                              f"{name.replace('oracle', 'hindsight')}")
        if pred not in KINDS:
            raise ConfigError(f"policy {name!r}: predictor {pred!r} must be one of {', '.join(KINDS)}")
        if obj not in OBJECTIVES:
            raise ConfigError(f"policy {name!r}: objective {obj!r} must be one of {', '.join(OBJECTIVES)}")
        rungs = check_rungs(rungs, theta, 1, 10**9) if stopper in BARRIER_STOPPERS and theta < 1 else ()
        at = "".join(f" {f:g}:{k}" for f, k in rungs)
        options = parse_predictive_options(predictive_options, stopper) if stopper == "predictive" and theta < 1 else None
        return Policy(name=name, description=f"SpotTune θ={theta:g}, predictor {pred}, objective {obj}, stopper {stopper}"
                      + (f", rungs{at}" if rungs else "") + (f", settings {options}" if options else ""), theta=theta,
                      predictor=pred, objective=obj, stopper=stopper, rungs=rungs, predictive_options=options)
    raise ConfigError(f"policy {name!r} is unknown; use spottune-<θ>[-{'|'.join(KINDS)}][-{'|'.join(OBJECTIVES)}], "
                      f"optuna-sha|hyperband-r<min_resource>-rf<reduction factor> or one of {', '.join(FIXED)}")


def parse_policies(text: str, objective: str = "refund", stopper: str = DEFAULT_STOPPER,
                   rungs: Any = (), provisioning: str = "spottune", predictive_options: Any = None) -> list[Policy]:
    """Comma-separated policy names (``default`` = :data:`DEFAULT_POLICIES`), duplicates dropped.

    ``objective`` is the default objective of SpotTune policies without a suffix, ``stopper`` and ``rungs`` their
    early stopping (with ``predictive_options``), ``provisioning`` that of the SpotTune-provisioned policies
    (:func:`get_policy`)."""
    names: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        for n in (DEFAULT_POLICIES if part == "default" else THETA_SWEEP if part == "theta-sweep" else [part]):
            if n and n not in names:
                names.append(n)
    if not names:
        raise ConfigError("--policies is empty")
    return [get_policy(n, objective, stopper, rungs, provisioning, predictive_options) for n in names]


def fixed_types(catalog: Any, markets: list) -> dict[str, str]:
    """``{"cheapest": type, "fastest": type}`` of the pool: lowest on-demand price; fewest seconds/step.

    Ties: the type name. Speed from :func:`spottune.backends._speed.seconds_per_step` (vCPUs, ECU).
    """
    from spottune.backends._speed import seconds_per_step

    types = sorted({m.instance_type for m in markets})
    region = markets[0].region
    od = {t: catalog.on_demand_usd_per_hour(t, region) for t in types}
    sps = {t: seconds_per_step(1.0, catalog[t].vcpus, catalog[t].ecu) for t in types}
    return {"cheapest": min(types, key=lambda t: (od[t], t)), "fastest": min(types, key=lambda t: (sps[t], t))}


@dataclass(slots=True)
class Assembly:
    """What one simulated run needs: the orchestrator and the market rules it is replayed under."""

    orchestrator: Any
    revocation_model: Any
    billing: Any
    chooser: Any
    stop_rule: Any = None
    note: str = ""


def assemble(policy: Policy, *, study: Any, history: Any, catalog: Any, pool: Any, markets: list,
             revocation_model: Any, billing: Any, predictor: Any, seed: int, top_k: int = 3,
             boot_s: float | None = None, start_s: float | None = None, deadline_s: float | None = None,
             budget_usd: float | None = None, deadline_rule: str = "slack",
             window_s: float = 4 * 86400.0, time_value_usd_per_hour: float = 0.0,
             job_time_value_usd_per_hour: float = DEFAULT_JOB_TIME_VALUE_USD_PER_HOUR,
             speed_model: str = "pooled") -> Assembly:
    """Build the orchestrator (and market rules) of ``policy`` for one run.

    Parameters
    ----------
    policy : Policy
    study : spottune.evaluation.Study
        Trials, metric, mode and S_max.
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
        The replay's launch-to-training latency, seconds, priced by the ``refund`` objective (default
        :data:`spottune.backends._speed.DEFAULT_BOOT_S`, the simulator's default).
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
    time_value_usd_per_hour : float, default 0
        SpotTune chooser with the ``refund`` objective: value of a trial's wall-clock hour, USD per
        trial-hour (:attr:`provisioner.RefundStepCost.time_value_usd_per_hour`).
    job_time_value_usd_per_hour : float, default :data:`spottune.experiment.DEFAULT_JOB_TIME_VALUE_USD_PER_HOUR`
        The same chooser: value of the job's wall-clock hour, USD per job-hour, shared by the trials heading to
        the same stop (R11).
    speed_model : {"pooled", "cores"}, default "pooled"
        SpotTune chooser with the ``refund`` objective: its performance matrix (design R9).

    Raises
    ------
    ConfigError
        An elastic policy without a deadline and a budget, or whose schedule does not fit them.
    """
    from provisioner import CheapestMarketChooser, FixedMaxPrice, FixedTypeChooser, MarketExclusions, MaxPriceRule
    from spottune._compose import curve_model, make_provisioner
    from spottune.evaluation._oracle import NeverRevoked, OnDemandBilling
    from spottune.evaluation._pruning import OptunaStopRule, make_pruner
    from spottune.orchestrator import Orchestrator, OrchestratorConfig

    rng = np.random.default_rng(seed)
    if boot_s is None:
        from spottune.backends._speed import DEFAULT_BOOT_S

        boot_s = DEFAULT_BOOT_S
    if policy.schedule is not None:
        return _assemble_elastic(policy, study=study, history=history, catalog=catalog, pool=pool, markets=markets,
                                 revocation_model=revocation_model, billing=billing, rng=rng, top_k=top_k,
                                 boot_s=boot_s, start_s=start_s, deadline_s=deadline_s, budget_usd=budget_usd,
                                 window_s=window_s)
    if policy.max_price == "never-revoked":
        top = max(float(np.max(history[m].prices)) for m in markets)
        rule = FixedMaxPrice(NEVER_REVOKED_FACTOR * top)
    elif policy.max_price == "on-demand":
        rule = MaxPriceRule(delta_low_usd_per_hour=1e6, delta_high_usd_per_hour=1e6, cap_at_on_demand=True)
    else:
        rule = MaxPriceRule()
    note = ""
    # the driver reports capacity refusals (CapacityRefused); a chooser with exclusions skips those markets (E12)
    exclusions = MarketExclusions() if policy.failover else None
    if policy.chooser == "spottune":
        if predictor is None:
            raise ConfigError(f"policy {policy.name} needs a revocation predictor")
        chooser = make_provisioner(history, catalog, pool, predictor, seed, max_price_rule=rule,
                                   objective=policy.objective, boot_s=boot_s, time_value_usd_per_hour=time_value_usd_per_hour,
                                   job_time_value_usd_per_hour=job_time_value_usd_per_hour, speed_model=speed_model,
                                   checkpoint_size_mb=float(getattr(study, "checkpoint_size_mb", 1.0)),
                                   reference_seconds_per_step=float(np.mean(list(study.reference_seconds_per_step.values()))),
                                   exclusions=exclusions)
    elif policy.chooser == "cheapest-market":
        chooser = CheapestMarketChooser(history, catalog, pool, rng, max_price_rule=rule, exclusions=exclusions)
    else:
        itype = fixed_types(catalog, markets)[policy.chooser.removeprefix("fixed-")]
        chooser = FixedTypeChooser(itype, history, catalog, pool, rng, max_price_rule=rule, exclusions=exclusions)
        note = itype
    if policy.capacity == "on-demand":
        revocation_model, billing = NeverRevoked(), OnDemandBilling(catalog)
    config = OrchestratorConfig(max_steps=study.max_steps, theta=policy.theta, top_k=top_k, metric=study.metric,
                                mode=study.mode, hourly_hop=policy.hourly_hop, launch_retry_s=LAUNCH_RETRY_S,
                                rungs=policy.rungs)
    stop_rule, ranking = None, {}
    if policy.pruner is not None:
        stop_rule = OptunaStopRule(make_pruner(policy.pruner, study.max_steps, *(policy.pruner_settings or ())),
                                   study.trial_ids, study.max_steps)
    if policy.early_curve:
        from spottune._early_stop import early_stopping

        learned = None
        if policy.stopper == "hparams" and config.barriers:  # docs/design/earlycurve.md §8.19
            learned = _hparams(study, config.barrier_fractions, seed)
            ranking = {"rung_predictor": learned, "configs": study.configs}
        fmp, plateau, rank_rule = early_stopping(policy.stopper, study.max_steps, config.theta_steps, top_k, seed,
                                                 final_predictor=learned, predictive=policy.predictive_options)
        stop_rule = stop_rule if rank_rule is None else rank_rule  # a policy with a pruner has no EarlyCurve
    else:
        fmp, plateau = curve_model(study.max_steps, False)
    if deadline_s is not None and policy.chooser == "spottune":
        chooser = _guard(chooser, study=study, catalog=catalog, markets=markets, start_s=start_s,
                         deadline_s=deadline_s, boot_s=boot_s, rule=deadline_rule, budget_usd=budget_usd, top_k=top_k)
    orch = Orchestrator(study.trial_ids, config, chooser, predictor=fmp, plateau_rule=plateau, stop_rule=stop_rule,
                        **ranking)
    return Assembly(orchestrator=orch, revocation_model=revocation_model, billing=billing, chooser=chooser,
                    stop_rule=stop_rule, note=note)


def _hparams(study: Any, barriers: Sequence[float], seed: int) -> Any:
    """Stopper ``hparams``' predictor, fitted on the study's previous runs (:attr:`Study.extra` ``previous_runs``;
    ``spottune simulate`` refuses a study without them before any run)."""
    from spottune._early_stop import hparams_predictor

    keys = {k for c in study.configs.values() for k in c}
    return hparams_predictor(study.extra.get("previous_runs") or [], barriers, seed, keys)


def _guard(chooser: Any, *, study: Any, catalog: Any, markets: list, start_s: float | None, deadline_s: float,
           boot_s: float, rule: str, budget_usd: float | None = None, top_k: int = 3) -> Any:
    """``chooser`` inside :class:`spottune.planning.DeadlineGuard` for a deadline ``deadline_s`` after the start.

    With a budget, the stable option is the fastest type whose on-demand hour fits ``budget_usd / top_k``
    (the top-k must be able to finish on it together), else the cheapest type on demand (DB11)."""
    from spottune.backends._speed import seconds_per_step
    from spottune.planning import DeadlineGuard

    if start_s is None:
        raise ConfigError("a deadline needs the run's start time")
    ref = float(np.mean(list(study.reference_seconds_per_step.values())))
    od = lambda m: catalog.on_demand_usd_per_hour(m.instance_type, m.region)  # noqa: E731
    cap = None if budget_usd is None else max(budget_usd / top_k, min(od(m) for m in markets))
    return DeadlineGuard(
        chooser, start_s=start_s, deadline_s=start_s + deadline_s, max_steps=study.max_steps, markets=markets,
        seconds_per_step=lambda t: seconds_per_step(ref, catalog[t].vcpus, catalog[t].ecu),
        overhead_s=boot_s + RESTORE_CHECKPOINT_S, rule=rule, on_demand_usd_per_hour=od, max_stable_usd_per_hour=cap)


#: θ of ``seer-lean``'s θ-top-k candidate: the θ of the reference SpotTune policy (``spottune-0.7``), not tuned.
LEAN_THETA = 0.7


def elastic_schedule(kind: str, *, study: Any, history: Any, catalog: Any, markets: list, start_s: float,
                     deadline_s: float, budget_usd: float, boot_s: float, window_s: float, top_k: int = 3,
                     step_time_cov: float = 0.0) -> tuple[Any, dict[float, str]]:
    """``(schedule, types)``: the elastic schedule ``kind`` for a deadline (s) and a budget (USD), in
    seconds and vCPUs (the budget in vCPU-seconds at the expected price, DB2; SEER's plan and the lean plan as
    ``spottune run`` prints them, :func:`spottune.planning.plan_run`), and the instance type of each vCPU count.

    Raises
    ------
    ConfigError
        If the deadline and the budget do not fit the schedule.
    """
    from spottune.planning import grid_schedule, hyperband_schedule, plan_run, resources, seer_schedule
    from spottune.planning._plan import SEER_ETA

    ref = float(np.mean(list(study.reference_seconds_per_step.values())))
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


def _assemble_elastic(policy: Policy, *, study: Any, history: Any, catalog: Any, pool: Any, markets: list,
                      revocation_model: Any, billing: Any, rng: Any, top_k: int, boot_s: float, start_s: float | None,
                      deadline_s: float | None, budget_usd: float | None, window_s: float) -> Assembly:
    """The orchestrator of an elastic policy (:func:`spottune.evaluation._elastic.bracket_orchestrator`)."""
    from spottune.backends.sim import SimSettings
    from spottune.evaluation._elastic import bracket_orchestrator

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
