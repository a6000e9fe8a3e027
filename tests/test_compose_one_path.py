"""One wiring path: ``spottune run`` and ``spottune simulate`` build the same orchestrator for the same spec.

``spottune run`` builds :func:`spottune.compose.build` (the policy :func:`spottune.compose.spec_policy` of its spec);
``spottune simulate`` builds :func:`spottune.compose.assemble` (a named policy on a study). Both end in
:func:`spottune.compose.policy_orchestrator`. The tests compare the whole object graph of the two orchestrators
(classes and every attribute of the orchestrator, its configuration, chooser, deadline guard, provisioner, objective,
performance matrix, max-price rule, exclusions, predictors and stop rule); the market and the revocation predictor are
given to both as the same objects.
"""

from __future__ import annotations

import dataclasses
from types import FunctionType, MethodType, SimpleNamespace

import numpy as np
import pytest

from spotmarket import Billing
from spottune import compose
from spottune.compose import Policy, get_policy, spec_policy
from spottune.experiment import ExperimentSpec

SMALL = dict(workload="logreg", search_space={"lr": {"grid_search": [0.01, 0.05, 0.2, 0.8]}}, max_steps=40,
             theta=0.5, top_k=2, predictor="constant", instance_types=["r3.large", "c3.xlarge"],
             availability_zones=["us-east-1a"], seed=7)
#: The fields in which ``spottune run`` has always wired differently from the simulated ``spottune-<θ>`` policies.
RUN_FIELDS = ("launch_retry_s", "guard_overhead", "guard_budget_cap")


def describe(obj, common, depth=0):
    """A comparable tree of ``obj``: its class and every attribute, recursively; ``common`` objects by their name."""
    if id(obj) in common:
        return ("common", common[id(obj)])
    if obj is None or isinstance(obj, (bool, int, float, str, np.integer, np.floating)):
        return obj
    if isinstance(obj, (list, tuple, set, frozenset)):
        items = [describe(x, common, depth + 1) for x in obj]
        return sorted(items, key=repr) if isinstance(obj, (set, frozenset)) else items
    if isinstance(obj, dict):
        return {repr(k): describe(v, common, depth + 1) for k, v in obj.items()}
    if isinstance(obj, np.ndarray):
        return ("array", obj.tolist())
    if isinstance(obj, np.random.Generator):
        return ("rng", obj.bit_generator.state)
    if isinstance(obj, (FunctionType, MethodType)):
        return ("function", obj.__qualname__)
    assert depth < 12, type(obj)
    fields = dict(vars(obj)) if hasattr(obj, "__dict__") else {}
    for cls in type(obj).__mro__:
        for name in getattr(cls, "__slots__", ()):
            if hasattr(obj, name) and name != "__weakref__":
                fields[name] = getattr(obj, name)
    return (f"{type(obj).__module__}.{type(obj).__qualname__}",
            {k: describe(v, common, depth + 1) for k, v in sorted(fields.items())})


def _run(spec):
    return compose.build(spec)


def _simulated(spec, exp, policy):
    """``policy`` assembled as ``spottune simulate`` does, on a study of the spec's trials and the run's market."""
    return compose.assemble(policy, **_kwargs(spec, exp), deadline_s=spec.deadline, budget_usd=spec.budget_usd,
                            time_value_usd_per_hour=spec.time_value_usd_per_hour,
                            job_time_value_usd_per_hour=spec.job_time_value_usd_per_hour, speed_model=spec.speed_model)


def _predictor(exp):
    chooser = exp.orchestrator.chooser
    return getattr(chooser, "inner", chooser).predictor


def _common_parts(exp):
    m = exp.market
    return {id(m.history): "history", id(m.catalog): "catalog", id(m.pool): "pool",
            id(m.revocation_model): "revocation model", id(_predictor(exp)): "predictor",
            **{id(x): f"market {x}" for x in m.markets}}


def _named(spec):
    return get_policy(f"spottune-{spec.theta:g}-{spec.predictor}", spec.objective, spec.stopper, spec.rungs,
                      predictive_options=spec.predictive_options, max_concurrent_trials=spec.max_concurrent_trials)


SPECS = {
    "deadline and rungs": dict(deadline="6h", rungs="0.2:3"),
    "paper objective and stopper": dict(objective="paper", stopper="paper"),
    "rank stopper, cores speed model, time value": dict(stopper="rank", speed_model="cores",
                                                        time_value_usd_per_hour=0.5),
    "two trials at once": dict(max_concurrent_trials=2),
}


@pytest.mark.parametrize("extra", SPECS.values(), ids=SPECS.keys())
def test_run_and_simulate_build_the_same_orchestrator_for_the_same_spec(extra):
    spec = ExperimentSpec(**SMALL, **extra)
    exp = _run(spec)
    named = _named(spec)
    run_policy = spec_policy(spec)
    # the named policy is the spec's policy but for the fields a run has always wired differently
    differ = {f.name for f in dataclasses.fields(Policy) if getattr(named, f.name) != getattr(run_policy, f.name)}
    assert differ == {"name", "description", "launch_retry_s", "guard_overhead", "guard_budget_cap"}
    same = dataclasses.replace(named, **{k: getattr(run_policy, k) for k in RUN_FIELDS})
    sim = _simulated(spec, exp, same)
    common = _common_parts(exp)
    assert describe(sim.orchestrator, common) == describe(exp.orchestrator, common)
    assert type(sim.orchestrator.chooser) is type(exp.orchestrator.chooser)
    assert exp.orchestrator.config.max_concurrent_trials == extra.get("max_concurrent_trials")
    assert sim.revocation_model is exp.backend.revocation_model


def test_the_documented_fields_are_what_differs_between_a_run_and_its_simulated_policy():
    spec = ExperimentSpec(**SMALL, deadline="6h", budget_usd=0.38, deadline_mode="guard")  # cap 0.19 USD/h binds
    exp = _run(spec)
    common = _common_parts(exp)
    run_tree = describe(exp.orchestrator, common)
    sim = _simulated(spec, exp, _named(spec))
    assert describe(sim.orchestrator, common) != run_tree
    # launch back-off 300 s and the guard's fixed 60 s overhead and budget cap: simulate's values
    o = sim.orchestrator
    assert o.config.launch_retry_s == 300.0 and exp.orchestrator.config.launch_retry_s == 60.0
    assert o.chooser.overhead_s == spec.boot_s + 60.0 != exp.orchestrator.chooser.overhead_s
    assert o.chooser.stable_price is not None or o.chooser.stable_market is not None
    for name in RUN_FIELDS:  # each field alone moves the simulated orchestrator towards the run's
        one = dataclasses.replace(_named(spec), **{name: getattr(spec_policy(spec), name)})
        assert describe(_simulated(spec, exp, one).orchestrator, common) != describe(o, common)
    all_three = dataclasses.replace(_named(spec), **{k: getattr(spec_policy(spec), k) for k in RUN_FIELDS})
    assert describe(_simulated(spec, exp, all_three).orchestrator, common) == run_tree


def test_the_check_sees_a_difference_in_the_chooser():
    spec = ExperimentSpec(**SMALL)
    exp = _run(spec)
    common = _common_parts(exp)
    same = dataclasses.replace(_named(spec), **{k: getattr(spec_policy(spec), k) for k in RUN_FIELDS})
    assert describe(_simulated(spec, exp, same).orchestrator, common) == describe(exp.orchestrator, common)
    other = _simulated(spec, exp, dataclasses.replace(same, failover=not same.failover)).orchestrator
    assert describe(other, common) != describe(exp.orchestrator, common)
    other = compose.assemble(same, **_kwargs(spec, exp), speed_model="cores").orchestrator
    assert describe(other, common) != describe(exp.orchestrator, common)


def _kwargs(spec, exp):
    """``assemble``'s keywords for a study of the spec's trials (each at the workload's speed) on the run's market."""
    trials = spec.trials()
    wl = spec.get_workload()
    m = exp.market
    study = SimpleNamespace(trial_ids=[t.trial_id for t in trials], configs={t.trial_id: t.config for t in trials},
                            metric=spec.metric, mode=spec.mode, max_steps=spec.max_steps,
                            reference_seconds_per_step={"t": wl.reference_seconds_per_step},
                            checkpoint_size_mb=wl.checkpoint_size_mb, extra={})
    return dict(study=study, history=m.history, catalog=m.catalog, pool=m.pool, markets=m.markets,
                revocation_model=m.revocation_model, billing=Billing(spec.billing), predictor=_predictor(exp),
                seed=spec.seed, top_k=spec.top_k, boot_s=spec.boot_s, start_s=exp.start_s)


def test_the_spec_names_its_provisioning():
    from spottune.compose.provisioning import DEFAULT_RESTART_MARGIN

    guarded, hop, restart = (spec_policy(ExperimentSpec(provisioning=p)) for p in ("spottune", "refund-hop", "restart"))
    assert (guarded.chooser, guarded.restart_margin, guarded.hourly_hop, guarded.failover) == \
        ("spottune", DEFAULT_RESTART_MARGIN, False, False)
    assert (hop.chooser, hop.restart_margin, hop.hourly_hop, hop.failover) == ("spottune", None, True, True)
    assert (restart.chooser, restart.max_price, restart.hourly_hop, restart.failover) == \
        ("cheapest-market", "on-demand", False, False)
    failover = spec_policy(ExperimentSpec(provisioning="restart-failover"))  # SkyPilot's failover on the sim backend
    assert (failover.chooser, failover.max_price, failover.hourly_hop, failover.failover) == \
        ("cheapest-market", "on-demand", False, True)
    # a cloud's refusal may last: aws and ray fail over under the guarded default too
    assert spec_policy(ExperimentSpec(backend="ray")).failover is True
