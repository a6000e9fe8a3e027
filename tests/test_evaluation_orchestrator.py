"""Orchestrator extensions for the evaluation: no hourly hop, and an external stop rule (pruning)."""

from __future__ import annotations

import pytest

from spottune.errors import InvalidAction
from spottune.orchestrator import (
    TRANSITIONS,
    Checkpoint,
    EndReason,
    ExperimentStarted,
    HourElapsed,
    Launch,
    MetricReported,
    Orchestrator,
    OrchestratorConfig,
    SegmentEnded,
    Terminate,
    TerminateReason,
    TrialLaunched,
    TrialState,
    next_state,
)
from tests._fakes import A, StopAt


def _start(orch):
    acts = orch.handle(ExperimentStarted(time_s=0.0))
    for i, a in enumerate(acts):
        assert isinstance(a, Launch)
        orch.handle(TrialLaunched(time_s=1.0, trial_id=a.trial_id, instance_id=f"i{i}", market=A, started_s=0.0))


def test_no_hourly_hop_ignores_hour_elapsed(fake_chooser):
    orch = Orchestrator(["t0"], OrchestratorConfig(max_steps=10, theta=1.0, hourly_hop=False), fake_chooser)
    _start(orch)
    assert orch.handle(HourElapsed(time_s=3600.0, trial_id="t0", instance_id="i0")) == []
    assert orch.trials["t0"].state is TrialState.RUNNING and orch.trials["t0"].hops == 0


def test_hourly_hop_default_still_checkpoints(fake_chooser):
    orch = Orchestrator(["t0"], OrchestratorConfig(max_steps=10, theta=1.0), fake_chooser)
    _start(orch)
    orch.handle(MetricReported(time_s=10.0, trial_id="t0", instance_id="i0", step=1, metrics={"loss": 1.0}))
    acts = orch.handle(HourElapsed(time_s=3600.0, trial_id="t0", instance_id="i0"))
    assert [type(a) for a in acts] == [Checkpoint]


def test_stop_rule_terminates_now_and_stops_early(fake_chooser):
    rule = StopAt("t1", 3)
    orch = Orchestrator(["t0", "t1"], OrchestratorConfig(max_steps=10, theta=1.0), fake_chooser, stop_rule=rule)
    _start(orch)
    for k in (1, 2):
        assert orch.handle(MetricReported(time_s=10.0 * k, trial_id="t1", instance_id="i1", step=k,
                                          metrics={"loss": 1.0})) == []
    acts = orch.handle(MetricReported(time_s=30.0, trial_id="t1", instance_id="i1", step=3, metrics={"loss": 1.0}))
    assert acts == [Terminate(trial_id="t1", instance_id="i1", reason=TerminateReason.PRUNE)]
    tr = orch.trials["t1"]
    assert tr.state is TrialState.STOPPED_EARLY and tr.pruned_at == 3 and tr.instance_id is None
    # the driver's SegmentEnded(user) for the terminated instance is a benign PREVIOUS_INSTANCE self-loop
    assert orch.handle(SegmentEnded(time_s=31.0, trial_id="t1", instance_id="i1", steps_done=3,
                                    reason=EndReason.USER)) == []
    assert tr.state is TrialState.STOPPED_EARLY
    # the other trial runs to the end; the experiment then finishes with it as the only result
    for k in range(1, 11):
        acts = orch.handle(MetricReported(time_s=40.0 + k, trial_id="t0", instance_id="i0", step=k,
                                          metrics={"loss": 1.0 / k}))
    assert ("t0", 10) in rule.calls  # the final step is passed on too
    assert [type(a) for a in acts] == [Checkpoint]


def test_prune_is_legal_only_while_running():
    assert TRANSITIONS[TrialState.RUNNING][(Terminate, TerminateReason.PRUNE)] is TrialState.STOPPED_EARLY
    for state in (TrialState.PENDING, TrialState.CHECKPOINTING, TrialState.PAUSED_AT_THETA):
        with pytest.raises(InvalidAction):
            next_state("t0", state, Terminate, TerminateReason.PRUNE)
