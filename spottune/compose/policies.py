"""Policies: named sets of the fields that wire an orchestrator (chooser, predictor, θ, hop, max price, stopper, ...).

A policy is data (:class:`Policy`). ``spottune simulate`` compares the named ones (the table below);
``spottune run`` executes the policy of its spec, :func:`spec_policy`. Both are built by the same function,
:func:`spottune.compose.orchestrators.policy_orchestrator`, so a simulated policy and a run of the same fields build
the same orchestrator. Where the two callers wire differently, the difference is a field of the policy with each
caller's value (:attr:`Policy.launch_retry_s`, :attr:`Policy.guard_overhead`, :attr:`Policy.guard_budget_cap`,
:attr:`Policy.max_failures`, :attr:`Policy.failover`). Every simulated policy sees the same trials, the same price
replay and the same seeds (a baseline is another object, not a flag).

=========================  ==========================================================================
name                       recipe
=========================  ==========================================================================
spottune-<θ>[-<pred>]      SpotTune with predictor <pred> (default ``auto``; ``revpred``, ``tributary``, ``constant``,
[-<objective>]             ``hindsight``, ``none``, ``calibrated``, ``online-hazard``),
                           EarlyCurve at θ and the plateau rule. Objective ``refund`` (market and max
                           price from the ladder by expected USD per useful step; by default
                           ``provisioner.GuardedProvisioner``: spot-restart's choice unless another
                           beats it by the margin, no hourly hop, no failover, design R12) or ``paper``
                           (Eq 2, D1 max price, hourly hop); without the suffix, ``spottune simulate
                           --objective`` (default refund).
                           ``spottune-0.7``, ``spottune-0.7-paper``, ``spottune-0.7-constant-paper``,
                           θ sweep.
single-cheapest            one instance per trial of the cheapest type (lowest on-demand price in the
                           pool), in its cheapest zone at launch; max price = the on-demand price (what
                           a careful user bids: AWS's default max price; design E14), relaunch from the
                           last checkpoint after a revocation, no hop, θ = 1, no early stopping (D9).
single-fastest             the same on the fastest type (fewest seconds per step, speed model).
single-cheapest-           single-cheapest as the paper assumes it (§IV-A4: a max price "much higher
never-revoked              than its market price such that it would not be revoked"): 10x the highest
                           recorded price, so it pays every price spike. Not in the default list.
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
                           (:mod:`spottune._pruning`). ``optuna-sha-r3-rf4``: min_resource and reduction
                           factor given. The suffix ``-seeded`` (``optuna-sha-seeded``,
                           ``optuna-hyperband-r1-rf3-seeded``) starts the mirrored Optuna study from the
                           study's previous runs as COMPLETE trials, never launched nor billed (decision ES22).
seer                       SEER as published (SoCC'21, Algorithm 1, eta 4, nu 2): its plan for the run's
                           deadline and budget (``spottune simulate --deadline --budget-usd``), brackets
                           on the cheapest-per-vCPU type with P[i] vCPUs, elimination by the current value,
                           survivors re-sorted across brackets (:mod:`spottune.planning._brackets`).
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
from dataclasses import dataclass, fields, replace
from typing import Any

from provisioner import DEFAULT_EXCLUSION_S
from spottune._pruning import PRUNERS
from spottune.backends.aws._build import exclusion_s
from spottune.compose.provisioning import DEFAULT_RESTART_MARGIN, GUARD_OVERHEADS
from spottune.errors import ConfigError
from spottune.experiment import (BARRIER_STOPPERS, DEFAULT_STOPPER, OBJECTIVES, PREDICTOR_KINDS, PROVISIONINGS, STOPPERS,
                                 ExperimentSpec, check_predictive_rungs, parse_predictive_options)
from spottune.orchestrator import OrchestratorConfig
from spottune.orchestrator._config import check_rungs
from spottune.planning._brackets import LAUNCH_RETRY_S
from spottune.planning._elastic import SCHEDULES

__all__ = ["CHOOSERS", "DEFAULT_POLICIES", "ELASTIC", "FIXED", "NEVER_REVOKED_FACTOR", "PROVISIONINGS", "THETA_SWEEP",
           "Policy", "get_policy", "guarded", "parse_policies", "spec_policy"]

#: The predictor kinds a policy may name (:data:`spottune.experiment.PREDICTOR_KINDS`).
KINDS = PREDICTOR_KINDS
#: The orchestrator's own defaults (:class:`spottune.orchestrator.OrchestratorConfig`).
_ORCHESTRATOR_DEFAULTS = {f.name: f.default for f in fields(OrchestratorConfig)}

CHOOSERS = ("spottune", "cheapest-market", "fixed-cheapest", "fixed-fastest", "bracket-type")
#: ``single-cheapest-never-revoked``'s max price = this x the highest price of the whole history (the paper's
#: assumption, §IV-A4); the default single-spot baselines bid the on-demand price (design E14).
NEVER_REVOKED_FACTOR = 10.0


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
        D1 (current + U[0.00001, 0.2] USD/h), :data:`NEVER_REVOKED_FACTOR` times the highest recorded price (the
        paper's never-revoked single-spot baseline, §IV-A4), or the on-demand price (USD/h; AWS's default max price,
        design E14).
    capacity : {"spot", "on-demand"}
        On-demand: never revoked, billed at the on-demand price.
    pruner : {"median", "sha", "hyperband"} or None
        Optuna pruner that stops trials.
    pruner_settings : (int, int) or None
        SHA's or Hyperband's ``(min_resource, reduction_factor)`` (policy ``optuna-sha-r3-rf4``); None: the module
        settings of :func:`spottune._pruning.make_pruner`.
    seeded : bool, default False
        With ``pruner``: the mirrored Optuna study starts from the study's previous runs, each a COMPLETE trial whose
        rung values the pruner compares new trials with (policy ``optuna-sha-r3-rf4-seeded``;
        :class:`spottune._pruning.OptunaStopRule` ``previous_runs``, decision ES22).
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
        choice for ``exclusion_s`` and relaunch at once elsewhere (:class:`provisioner.MarketExclusions`, design
        E12); False: ask again after the back-off (the single-spot baselines and ``spot-restart``, whose
        next choice elsewhere can cost far more; ``spot-restart-failover`` is SkyPilot's failover).
    exclusion_s : float, default :data:`provisioner.DEFAULT_EXCLUSION_S` (1,800 s)
        With ``failover``: seconds a refusing market is left out (``spottune run --backend aws``: ``aws.exclusion_s``).
    launch_retry_s : float, default :data:`spottune.planning.LAUNCH_RETRY_S` (300 s)
        Back-off after a refused launch, seconds (:attr:`spottune.orchestrator.OrchestratorConfig.launch_retry_s`);
        :func:`spec_policy` keeps the orchestrator's own default (60 s), which ``spottune run`` has always used.
    max_failures : int, default 2
        Retries of a failing trainable before FAILED (:attr:`spottune.orchestrator.OrchestratorConfig.max_failures`;
        the spec's ``max_failures`` in :func:`spec_policy`).
    guard_overhead : {"fixed", "checkpoint-transfer"}, default "fixed"
        With a deadline, how the deadline guard counts a launch's seconds that do not train besides the boot
        (:data:`spottune.compose.provisioning.GUARD_OVERHEADS`): the simulated policies count a fixed 60 s,
        ``spottune run`` (:func:`spec_policy`) the pool's slowest checkpoint restore.
    guard_budget_cap : bool, default True
        With a deadline and a budget, the deadline guard's stable option is the fastest type whose on-demand hour
        fits ``budget_usd / top_k``, else the cheapest type on demand (DB11); :func:`spec_policy` sets False
        (``spottune run``'s guard has no such cap).
    restart_margin : float in [0, 1] or None, default None
        SpotTune chooser with objective ``refund`` only: :class:`provisioner.GuardedProvisioner` with this margin
        (spot-restart's choice unless another candidate's step cost is below ``1 − margin`` times its; decision R12);
        None: the unguarded :class:`provisioner.RefundProvisioner`. :func:`get_policy` sets
        :data:`spottune.compose.provisioning.DEFAULT_RESTART_MARGIN` and no hourly hop for provisioning ``spottune``.
    max_concurrent_trials : int or None, default None
        At most this many trials hold an instance or are launching at once, the others wait in trial order
        (:attr:`spottune.orchestrator.OrchestratorConfig.max_concurrent_trials`, design D14; ``spottune simulate
        --max-concurrent-trials``); None: every trial at once. Refused for the elastic schedules, which plan their own
        parallelism.

    Raises
    ------
    ConfigError
        On an unknown chooser, predictor, max price, capacity, objective, stopper, schedule, guard overhead or
        pruner, θ outside (0, 1], rungs that do not fit θ, ``seeded`` without a pruner, or ``max_concurrent_trials``
        that is not an integer >= 1 or is given to an elastic schedule.
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
    seeded: bool = False
    objective: str = "refund"
    stopper: str = DEFAULT_STOPPER
    rungs: tuple[tuple[float, int], ...] = ()
    predictive_options: Mapping[str, Any] | None = None
    schedule: str | None = None
    failover: bool = True
    exclusion_s: float = DEFAULT_EXCLUSION_S
    launch_retry_s: float = LAUNCH_RETRY_S
    max_failures: int = _ORCHESTRATOR_DEFAULTS["max_failures"]
    guard_overhead: str = "fixed"
    guard_budget_cap: bool = True
    restart_margin: float | None = None
    max_concurrent_trials: int | None = None

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
        if self.restart_margin is not None and not (
                self.chooser == "spottune" and self.objective == "refund" and 0.0 <= self.restart_margin <= 1.0):
            raise ConfigError(f"policy {self.name}: restart_margin {self.restart_margin!r} needs the SpotTune chooser, "
                              "objective refund and a fraction in [0, 1]")
        if self.guard_overhead not in GUARD_OVERHEADS:
            raise ConfigError(f"policy {self.name}: guard_overhead is {self.guard_overhead!r}, but must be one of "
                              f"{GUARD_OVERHEADS}")
        n = self.max_concurrent_trials
        if n is not None and not (isinstance(n, int) and not isinstance(n, bool) and n >= 1 and self.schedule is None):
            raise ConfigError(f"policy {self.name}: max_concurrent_trials is {n!r}, but must be an integer >= 1"
                              + (" and is refused for an elastic schedule (it plans its own parallelism)"
                                 if self.schedule is not None else ""))
        if self.pruner is not None and self.pruner not in PRUNERS:
            raise ConfigError(f"policy {self.name}: pruner is {self.pruner!r}, but must be one of {PRUNERS}")
        if self.seeded and self.pruner is None:
            raise ConfigError(f"policy {self.name}: seeded needs an Optuna pruner")
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


#: The single-spot baselines bid the on-demand price (AWS's default max price, what a careful user bids; design
#: E14): a spike above it revokes them, and they relaunch from the last checkpoint when the price is back under it.
_SINGLE = dict(predictor="none", theta=1.0, hourly_hop=False, early_curve=False, max_price="on-demand",
               failover=False)
#: spot-restart's provisioning: the cheapest market at each launch, max price = on-demand, no hop, no predictor
_RESTART_PROVISIONING = dict(chooser="cheapest-market", predictor="none", hourly_hop=False, max_price="on-demand")
_RESTART = dict(theta=1.0, early_curve=False, **_RESTART_PROVISIONING)
FIXED: dict[str, Policy] = {p.name: p for p in [
    Policy(name="single-cheapest", description="Single-Spot Cheapest: cheapest type, max price = on-demand, restart "
           "from checkpoint after a revocation, no hop, θ=1", chooser="fixed-cheapest", **_SINGLE),
    Policy(name="single-fastest", description="Single-Spot Fastest: fastest type, max price = on-demand, restart "
           "from checkpoint after a revocation, no hop, θ=1", chooser="fixed-fastest", **_SINGLE),
    Policy(name="single-cheapest-never-revoked", description="Single-Spot Cheapest as the paper assumes it: max price "
           "10x the highest recorded price, never revoked by price, no hop, θ=1", chooser="fixed-cheapest",
           **{**_SINGLE, "max_price": "never-revoked"}),
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

#: Suffix of an Optuna policy whose mirrored study starts from the study's previous runs (decision ES22).
SEEDED_SUFFIX = "-seeded"
_OPTUNA = re.compile(r"^optuna-(?P<kind>sha|hyperband)-r(?P<r>\d+)-rf(?P<rf>\d+)$")
_SPOTTUNE = re.compile(r"^spottune-(?P<theta>[01](?:\.\d+)?)(?:-(?P<pred>[a-z][a-z-]*?))?(?:-(?P<obj>refund|paper))?$")


def get_policy(name: str, objective: str = "refund", stopper: str = DEFAULT_STOPPER,
               rungs: str | Sequence[tuple[float, int]] = (), provisioning: str = "spottune",
               predictive_options: Mapping[str, Any] | str | None = None,
               max_concurrent_trials: int | None = None) -> Policy:
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
        learned from the study's previous runs, docs/design/earlycurve.md §8.19; ``paper``: EarlyCurve at θ, as
        published). A name with the ``-paper`` suffix is the paper's design throughout: its stopper is ``paper``
        whatever this says.
    rungs : str or sequence of (float, int), default ()
        Synchronous barriers before θ of the ``spottune-<θ>...`` policies with stopper ``barrier`` or ``hparams`` and θ < 1
        (:attr:`Policy.rungs`); other policies ignore them.
    provisioning : {"spottune", "refund-hop", "restart"}, default "spottune"
        ``spottune``: the SpotTune-provisioned policies with objective ``refund`` keep spot-restart's choice unless
        another candidate beats it by the margin, without hourly hops (:attr:`Policy.restart_margin`, decision R12);
        ``refund-hop``: the refund objective's choice unguarded, with hourly hops (the default before 2026-11-29);
        ``restart`` gives the SpotTune-provisioned policies (``spottune-<θ>...``, ``optuna-...``) spot-restart's
        provisioning instead (cheapest market at each launch, max price = on-demand, no hourly hop, no predictor;
        :data:`PROVISIONINGS`); ``restart-failover`` the same with ``spot-restart-failover``'s failover after a
        capacity refusal (design E12); the other policies keep their own.
    predictive_options : mapping or str, optional
        Settings of the ``spottune-<θ>...`` policies with stopper ``predictive`` and θ < 1
        (:attr:`Policy.predictive_options`); other policies ignore them, as θ = 1 ignores ``rungs``.
    max_concurrent_trials : int or None, default None
        Trials at once, every policy (:attr:`Policy.max_concurrent_trials`, design D14); None: all.

    Returns
    -------
    Policy
        The named policy with these settings applied.

    Raises
    ------
    ConfigError
        If the name, the objective or the provisioning is unknown, the rungs do not fit the policy's θ, or
        ``max_concurrent_trials`` is refused (:class:`Policy`).
    """
    if provisioning not in PROVISIONINGS:
        raise ConfigError(f"provisioning is {provisioning!r}, but must be one of {', '.join(PROVISIONINGS)}")
    policy = with_provisioning(_named_policy(name, objective, stopper, rungs, predictive_options), provisioning)
    return policy if max_concurrent_trials is None else replace(policy, max_concurrent_trials=max_concurrent_trials)


def with_provisioning(policy: Policy, provisioning: str) -> Policy:
    """``policy`` with ``provisioning`` (:data:`spottune.experiment.PROVISIONINGS`) when SpotTune provisions it
    (chooser ``spottune``); any other policy unchanged.

    Parameters
    ----------
    policy : Policy
    provisioning : {"spottune", "refund-hop", "restart", "restart-failover"}
        ``spottune``: :func:`guarded`; ``refund-hop``: as it is; ``restart``: spot-restart's provisioning;
        ``restart-failover``: spot-restart-failover's (the same with SkyPilot's failover, design E12).

    Returns
    -------
    Policy
    """
    if provisioning in ("restart", "restart-failover") and policy.chooser == "spottune":
        failover = provisioning == "restart-failover"
        return replace(policy, **_RESTART_PROVISIONING, failover=failover,
                       description=f"{policy.description}; spot-restart{'-failover' if failover else ''} provisioning")
    return guarded(policy) if provisioning == "spottune" else policy


def guarded(policy: Policy) -> Policy:
    """``policy`` with SpotTune's default provisioning when it has the SpotTune chooser and objective ``refund``:
    :class:`provisioner.GuardedProvisioner` at :data:`spottune.compose.provisioning.DEFAULT_RESTART_MARGIN`, no
    hourly hop, and spot-restart's handling of a capacity refusal (ask again after the back-off, no failover: a
    failover leaves restart's market without pricing the move); decision R12. Any other policy unchanged.

    Parameters
    ----------
    policy : Policy

    Returns
    -------
    Policy
    """
    if policy.chooser != "spottune" or policy.objective != "refund" or policy.restart_margin is not None:
        return policy
    return replace(policy, restart_margin=DEFAULT_RESTART_MARGIN, hourly_hop=False, failover=False,
                   description=f"{policy.description}; restart unless beaten by {DEFAULT_RESTART_MARGIN:.0%}, no hop")


def _named_policy(name: str, objective: str, stopper: str, rungs: str | Sequence[tuple[float, int]],
                  predictive_options: Mapping[str, Any] | str | None = None) -> Policy:
    if objective not in OBJECTIVES:
        raise ConfigError(f"objective is {objective!r}, but must be one of {', '.join(OBJECTIVES)}")
    base = name.removesuffix(SEEDED_SUFFIX)
    if base != name and (base in FIXED and FIXED[base].pruner is not None or _OPTUNA.match(base)):
        policy = _named_policy(base, objective, stopper, rungs, predictive_options)  # decision ES22
        return replace(policy, name=name, seeded=True,
                       description=f"{policy.description}, seeded with the study's previous runs")
    if name in FIXED:
        fixed = FIXED[name]
        return replace(fixed, objective=objective) if fixed.chooser == "spottune" else fixed
    m = _OPTUNA.match(name)
    if m:  # a peer at given settings, e.g. optuna-sha-r3-rf4 (the peers at their best)
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
                      f"optuna-sha|hyperband-r<min_resource>-rf<reduction factor> or one of {', '.join(FIXED)} (an "
                      f"optuna-... policy may end in {SEEDED_SUFFIX})")


def parse_policies(text: str, objective: str = "refund", stopper: str = DEFAULT_STOPPER,
                   rungs: str | Sequence[tuple[float, int]] = (), provisioning: str = "spottune",
                   predictive_options: Mapping[str, Any] | str | None = None,
                   max_concurrent_trials: int | None = None) -> list[Policy]:
    """Comma-separated policy names (``default`` = :data:`DEFAULT_POLICIES`), duplicates dropped.

    ``objective`` is the default objective of SpotTune policies without a suffix, ``stopper`` and ``rungs`` their
    early stopping (with ``predictive_options``), ``provisioning`` that of the SpotTune-provisioned policies
    (:func:`get_policy`).

    Parameters
    ----------
    text : str
        Comma-separated names (``spottune simulate --policies``); ``default`` and ``theta-sweep`` expand to
        their lists.
    objective, stopper, rungs, provisioning, predictive_options, max_concurrent_trials
        As in :func:`get_policy`.

    Returns
    -------
    list of Policy
        In the order first named.

    Raises
    ------
    ConfigError
        If no name is given, or as :func:`get_policy`.
    """
    names: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        for n in (DEFAULT_POLICIES if part == "default" else THETA_SWEEP if part == "theta-sweep" else [part]):
            if n and n not in names:
                names.append(n)
    if not names:
        raise ConfigError("--policies is empty")
    return [get_policy(n, objective, stopper, rungs, provisioning, predictive_options, max_concurrent_trials)
            for n in names]


def spec_policy(spec: ExperimentSpec) -> Policy:
    """The policy ``spottune run`` executes for ``spec`` (θ barrier, top-k and early stopping of Algorithm 1, SpotTune's
    provisioner as ``spec.provisioning`` says, :func:`with_provisioning`): the spec's ``predictor``, ``theta``, ``objective``, ``stopper``, ``rungs``,
    ``predictive_options``, ``max_failures`` and ``max_concurrent_trials``, and the fields where a run has always been wired differently from the
    simulated ``spottune-<θ>`` policies: the orchestrator's default launch back-off (60 s), a deadline guard that counts
    the pool's slowest checkpoint restore and has no budget cap, and failover (design E12) on the backends whose
    driver reports capacity refusals (``sim``, ``local``, ``aws`` for ``aws.exclusion_s``, ``ray`` when a market's
    last node goes), kept on ``aws`` and ``ray`` under the guarded default.

    Parameters
    ----------
    spec : ExperimentSpec

    Returns
    -------
    Policy
        Named ``spec``.
    """
    policy = with_provisioning(Policy(name="spec", description=f"spottune run: θ={spec.theta:g}, predictor {spec.predictor}, objective "
                  f"{spec.objective}, stopper {spec.stopper}", predictor=spec.predictor, theta=spec.theta,
                  objective=spec.objective, stopper=spec.stopper, rungs=spec.rungs,
                  predictive_options=spec.predictive_options, failover=spec.backend in ("sim", "local", "aws", "ray"),
                  exclusion_s=exclusion_s(spec) if spec.backend == "aws" else DEFAULT_EXCLUSION_S,
                  launch_retry_s=_ORCHESTRATOR_DEFAULTS["launch_retry_s"], max_failures=spec.max_failures,
                  guard_overhead="checkpoint-transfer", guard_budget_cap=False,
                  max_concurrent_trials=spec.max_concurrent_trials), spec.provisioning)
    # [I] a cloud's refusal for capacity may last: aws and ray fail over whatever the provisioning (the guarded
    # default's "no failover", R12, was measured on the simulator's refusals only)
    return replace(policy, failover=True) if spec.backend in ("aws", "ray") else policy
