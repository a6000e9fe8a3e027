"""The composition package: the one place that builds a run's parts from a spec or a policy.

``spottune run`` (:mod:`spottune.cli._run`), ``spottune.tune()`` (:mod:`spottune.api`), ``spottune simulate``
(:mod:`spottune.evaluation`) and the benchmarks all build through it. One concern per module:

=======================  ========================================================================================
module                   builds
=======================  ========================================================================================
:mod:`.market`           :func:`build_market`: price history (USD per instance-hour), instance catalog, pool, the
                         pool's markets and the revocation model of the market mode (:func:`revocation_model`, the
                         project's only ``legacy | modern`` switch); :func:`check_start`, :func:`gap_warnings`
:mod:`.predictors`       :func:`make_predictor`: the revocation predictor of Eq 1, one of
                         :data:`PREDICTOR_KINDS` (:data:`spottune.experiment.PREDICTOR_KINDS`; a spec may name
                         :data:`spottune.experiment.PREDICTORS`, the others are ``spottune simulate``'s)
:mod:`.provisioning`     :func:`make_provisioner` (SpotTune's market choice, objective ``refund`` or ``paper``),
                         :func:`curve_model`, :func:`deadline_guard`
:mod:`.policies`         :class:`Policy`: a named set of the fields that wire an orchestrator; the named policies
                         of ``spottune simulate`` (:func:`get_policy`) and the policy of a spec (:func:`spec_policy`)
:mod:`.orchestrators`    :func:`policy_orchestrator`, the one builder of a policy's orchestrator (chooser, max-price
                         rule, failover, configuration, early stopping, deadline guard); :func:`assemble`, a policy
                         on a study's recorded curves (``spottune simulate``), elastic schedules included
:mod:`.plans`            deadline and budget: :func:`plan_spec` (the printed plan), :func:`plan_orchestrator` (the
                         plan executed by :class:`spottune.planning.BracketOrchestrator`)
:mod:`.experiment`       :func:`build` (spec -> :class:`Experiment`: market, predictor, orchestrator, backend),
                         :func:`run`, :func:`dry_run`
=======================  ========================================================================================

One wiring path
---------------
A run and a simulated policy differ only in their data: ``spottune run`` executes :func:`spec_policy` of its spec,
``spottune simulate`` the named policies, and both go through :func:`policy_orchestrator`, so the same fields build
the same orchestrator. The places where the two callers have always wired differently are fields of
:class:`Policy`, each with the value that keeps its caller's results: the launch back-off
(:attr:`Policy.launch_retry_s`: 60 s for a run, 300 s for the simulated policies), the deadline guard's overhead
(:attr:`Policy.guard_overhead`: the pool's slowest checkpoint restore for a run, a fixed 60 s for the simulated
policies) and its budget cap (:attr:`Policy.guard_budget_cap`: none for a run, ``budget / top_k`` for the simulated
policies), failover (:attr:`Policy.failover`: on the ``sim`` and ``local`` backends for a run) and
:attr:`Policy.max_failures`. What the learned stoppers learn from is the caller's data: a run's curve file
(``stopper_curves``), a study's previous runs.

Layering: ``spottune.compose`` imports the packages below it (experiment spec, orchestrator, planning, backends,
journal, the stoppers) and is imported only by ``spottune.api``, ``spottune.cli`` and ``spottune.evaluation``.
"""

from spottune.compose.experiment import Experiment, build, check_supported, dry_run, run, store_url
from spottune.compose.market import (DAY_S, GAP_WARNING_S, MarketSetup, build_market, check_start, gap_warnings,
                                     revocation_model)
from spottune.compose.orchestrators import (LEAN_THETA, Assembly, assemble, elastic_schedule, fixed_types,
                                            policy_orchestrator)
from spottune.compose.plans import executed_schedule, first_round_commitment_usd, plan_orchestrator, plan_spec
from spottune.compose.policies import (CHOOSERS, DEFAULT_POLICIES, ELASTIC, FIXED, NEVER_REVOKED_FACTOR, PROVISIONINGS,
                                       THETA_SWEEP, Policy, get_policy, guarded, parse_policies, spec_policy)
from spottune.compose.predictors import (CALIBRATED_HISTORY_DAYS, CALIBRATED_P_CAP, PREDICTOR_KINDS,
                                         calibrated_predictor, constant_hazard, empirical_rate_predictor,
                                         make_predictor, selection_p_cap)
from spottune.compose.provisioning import (DEFAULT_RESTART_MARGIN, GUARD_OVERHEADS, GUARD_P_SHRINK, GUARD_ROBUST_P,
                                           curve_model, deadline_guard, make_provisioner)

__all__ = [
    "CALIBRATED_HISTORY_DAYS", "CALIBRATED_P_CAP", "CHOOSERS", "DAY_S", "DEFAULT_POLICIES", "DEFAULT_RESTART_MARGIN", "ELASTIC", "FIXED",
    "GAP_WARNING_S", "GUARD_OVERHEADS", "GUARD_P_SHRINK", "GUARD_ROBUST_P", "LEAN_THETA", "NEVER_REVOKED_FACTOR", "PREDICTOR_KINDS", "PROVISIONINGS",
    "THETA_SWEEP", "Assembly", "Experiment", "MarketSetup", "Policy", "assemble", "build", "build_market",
    "calibrated_predictor", "check_start", "check_supported", "constant_hazard", "curve_model", "deadline_guard",
    "dry_run", "elastic_schedule", "empirical_rate_predictor", "executed_schedule", "first_round_commitment_usd",
    "fixed_types", "gap_warnings", "get_policy", "guarded", "make_predictor", "make_provisioner", "parse_policies",
    "plan_orchestrator", "plan_spec", "policy_orchestrator", "revocation_model", "run", "selection_p_cap",
    "spec_policy", "store_url",
]
