"""Orchestrator extensions for the evaluation: no hourly hop, and an external stop rule (pruning)."""

from __future__ import annotations

import pytest

from spottune.errors import ConfigError, InvalidAction
from spottune.orchestrator import (
    TRANSITIONS,
    Checkpoint,
    CheckpointReason,
    CheckpointSaved,
    EndReason,
    ExperimentFinished,
    ExperimentStarted,
    HourElapsed,
    Launch,
    MetricReported,
    Orchestrator,
    OrchestratorConfig,
    SegmentEnded,
    Stop,
    Terminate,
    TerminateReason,
    TrialLaunched,
    TrialState,
    WakeUp,
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


# -- max_concurrent_trials (design D14) ---------------------------------------------------------------------------
def _launched(acts):
    return [a.trial_id for a in acts if isinstance(a, Launch)]


def _train(orch, tid, instance, steps, t, loss=1.0):
    """``tid`` (on ``instance``, launched) reports steps 1..steps at t, t+1, ...; returns the last actions."""
    orch.handle(TrialLaunched(time_s=t, trial_id=tid, instance_id=instance, market=A, started_s=t))
    acts = []
    for k in range(orch.trials[tid].checkpoint_step + 1, steps + 1):
        acts = orch.handle(MetricReported(time_s=t + k, trial_id=tid, instance_id=instance, step=k,
                                          metrics={"loss": loss + 1.0 / k}))
    return acts


def _save(orch, tid, instance, reason, step, t):
    return orch.handle(CheckpointSaved(time_s=t, trial_id=tid, instance_id=instance, reason=reason, step=step))


def test_max_concurrent_trials_launches_the_waiting_trials_in_order_as_slots_free(fake_chooser):
    orch = Orchestrator(["t0", "t1", "t2"], OrchestratorConfig(max_steps=2, theta=1.0, max_concurrent_trials=2),
                        fake_chooser, stop_rule=StopAt("t1", 1))
    assert _launched(orch.handle(ExperimentStarted(time_s=0.0))) == ["t0", "t1"]
    assert orch.trials["t2"].state is TrialState.PENDING and orch.waiting == ["t2"]
    # t1 is pruned at step 1: its slot goes to t2 at once
    acts = _train(orch, "t1", "i1", 1, 10.0)
    assert [type(a) for a in acts] == [Terminate, Launch] and _launched(acts) == ["t2"] and orch.waiting == []
    # t0 ends: nothing waits, nothing launches
    assert [type(a) for a in _train(orch, "t0", "i0", 2, 20.0)] == [Checkpoint]
    assert [type(a) for a in _save(orch, "t0", "i0", CheckpointReason.END, 2, 30.0)] == [Terminate]
    # the run finishes when t2 ends
    _train(orch, "t2", "i2", 2, 40.0, loss=0.5)
    acts = _save(orch, "t2", "i2", CheckpointReason.END, 2, 50.0)
    assert [type(a) for a in acts] == [Terminate, ExperimentFinished] and orch.top_k == ("t2", "t0")


def test_max_concurrent_trials_frees_a_slot_at_a_barrier_and_queues_the_kept_trials(fake_chooser):
    # 3 trials, one slot, θ barrier at step 1 keeping 2: each trial pauses at the barrier (no instance) and the next
    # one launches; after the barrier the two kept trials run one after the other, in trial order
    orch = Orchestrator(["t0", "t1", "t2"], OrchestratorConfig(max_steps=4, theta=0.25, top_k=2, max_concurrent_trials=1),
                        fake_chooser)
    assert _launched(orch.handle(ExperimentStarted(time_s=0.0))) == ["t0"]
    losses = {"t0": 0.5, "t1": 0.1, "t2": 0.3}
    for n, tid in enumerate(["t0", "t1", "t2"]):
        assert [type(a) for a in _train(orch, tid, f"i{n}", 1, 10.0 * n, losses[tid])] == [Checkpoint]
        acts = _save(orch, tid, f"i{n}", CheckpointReason.THETA, 1, 10.0 * n + 5)
        if tid != "t2":
            assert [type(a) for a in acts] == [Terminate, Launch] and _launched(acts) == [f"t{n + 1}"]
    # the barrier: t1 and t2 kept (lowest losses), t0 stopped; one slot, so only t1 launches
    assert [type(a) for a in acts] == [Terminate, Stop, Launch] and _launched(acts) == ["t1"]
    assert orch.waiting == ["t2"] and orch.trials["t2"].state is TrialState.KEPT
    assert orch.handle(WakeUp(time_s=26.0, trial_id="t2")) == []  # a waiting trial launches only for a slot
    _train(orch, "t1", "i3", 4, 30.0, 0.1)
    acts = _save(orch, "t1", "i3", CheckpointReason.END, 4, 40.0)
    assert [type(a) for a in acts] == [Terminate, Launch] and _launched(acts) == ["t2"]
    assert orch.waiting == [] and orch.trials["t2"].state is TrialState.LAUNCHING


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_max_concurrent_trials_must_be_a_positive_integer(bad):
    with pytest.raises(ConfigError, match="max_concurrent_trials"):
        OrchestratorConfig(max_steps=10, max_concurrent_trials=bad)
