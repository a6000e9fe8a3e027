"""Event scripts for the trial transition table: one test per row, one per illegal trigger."""

from __future__ import annotations

import pytest

from spottune.errors import IllegalTransition, InvalidAction, UnexpectedEvent
from spottune.orchestrator import (
    EVENT_TYPES,
    INSTANCE_EVENTS,
    TRANSITIONS,
    TRIAL_ACTIONS,
    Checkpoint,
    CheckpointReason,
    CheckpointSaved,
    EndReason,
    ExperimentStarted,
    HourElapsed,
    Kept,
    Launch,
    LaunchFailed,
    Marker,
    MetricReported,
    Orchestrator,
    OrchestratorConfig,
    RevocationNotice,
    SegmentEnded,
    SegmentFailed,
    Stop,
    StopReason,
    Terminate,
    TerminateReason,
    TrialLaunched,
    TrialState,
    WakeUp,
    next_state,
)
from tests._fakes import A, FakeChooser

MARKET = A


def _markers(trigger):
    if trigger in (CheckpointSaved, Checkpoint):
        return list(CheckpointReason)
    if trigger is Terminate:
        return list(TerminateReason)
    if trigger is Stop:
        return list(StopReason)
    if trigger is SegmentEnded:
        return list(EndReason) + [Marker.PREVIOUS_INSTANCE]
    if trigger is SegmentFailed:
        return [Marker.RETRY, Marker.GIVE_UP, Marker.PREVIOUS_INSTANCE]
    if trigger in INSTANCE_EVENTS:
        return [None, Marker.PREVIOUS_INSTANCE]
    return [None]


TRIGGERS = [t for t in EVENT_TYPES if t is not ExperimentStarted] + list(TRIAL_ACTIONS) + [Kept]
ALL = [(t, m) for t in TRIGGERS for m in _markers(t)]
ROWS = [(state, key, target) for state, row in TRANSITIONS.items() for key, target in row.items()]


def _legal(state, trigger, marker):
    row = TRANSITIONS[state]
    if marker is not None and (trigger, marker) in row:
        return True
    return marker is not Marker.PREVIOUS_INSTANCE and trigger in row


def test_every_state_has_a_row_and_terminal_helpers():
    assert set(TRANSITIONS) == set(TrialState)
    assert {s for s in TrialState if s.is_terminal()} == {TrialState.STOPPED_EARLY, TrialState.FINISHED, TrialState.FAILED}
    assert {s for s in TrialState if s.awaits_relaunch()} == {TrialState.PREEMPTED, TrialState.HOPPING}
    assert len(TrialState) == 11


def test_a_kept_trial_is_a_state_of_its_own():
    """Kept at a barrier and waiting for its launch: KEPT, reached only from PAUSED_AT_THETA by the policy's Kept."""
    assert [s for s in TrialState if Kept in TRANSITIONS[s]] == [TrialState.PAUSED_AT_THETA]
    assert next_state("t0", TrialState.PAUSED_AT_THETA, Kept) is TrialState.KEPT
    assert next_state("t0", TrialState.KEPT, Launch) is TrialState.LAUNCHING
    assert next_state("t0", TrialState.KEPT, WakeUp) is TrialState.KEPT
    assert Launch not in TRANSITIONS[TrialState.PAUSED_AT_THETA]  # a paused trial launches only once kept
    with pytest.raises(InvalidAction):
        next_state("t0", TrialState.RUNNING, Kept)


@pytest.mark.parametrize(("state", "key", "target"), ROWS, ids=[f"{s}-{k if isinstance(k, type) else k[0].__name__ + ':' + str(k[1])}" for s, k, _ in ROWS])
def test_table_row(state, key, target):
    trigger, marker = (key, None) if isinstance(key, type) else key
    assert next_state("t0", state, trigger, marker) is target


ILLEGAL = [(s, t, m) for s in TrialState for (t, m) in ALL if not _legal(s, t, m)]


@pytest.mark.parametrize(("state", "trigger", "marker"), ILLEGAL, ids=[f"{s}-{t.__name__}-{m}" for s, t, m in ILLEGAL])
def test_illegal_trigger_raises_and_names_fault(state, trigger, marker):
    expected = InvalidAction if trigger in TRIAL_ACTIONS or trigger is Kept else UnexpectedEvent
    with pytest.raises(expected) as info:
        next_state("t7", state, trigger, marker)
    assert "trial t7" in str(info.value) and str(state).upper() in str(info.value)
    assert info.value.trial_id == "t7" and isinstance(info.value, IllegalTransition)


def _event(trigger, marker, instance):
    t = 5000.0
    common = dict(time_s=t, trial_id="t0")
    inst = dict(common, instance_id=instance)
    match trigger.__name__:
        case "TrialLaunched":
            return TrialLaunched(**common, instance_id="i-new", market=MARKET, started_s=t)
        case "LaunchFailed":
            return LaunchFailed(**common)
        case "WakeUp":
            return WakeUp(**common)
        case "MetricReported":
            return MetricReported(**inst, step=3, metrics={"loss": 1.0})
        case "RevocationNotice":
            return RevocationNotice(**inst, deadline_s=t + 120)
        case "HourElapsed":
            return HourElapsed(**inst)
        case "CheckpointSaved":
            return CheckpointSaved(**inst, reason=marker, step=3)
        case "SegmentEnded":
            reason = EndReason.PROVIDER if marker is Marker.PREVIOUS_INSTANCE else marker
            return SegmentEnded(**inst, steps_done=3, reason=reason)
        case "SegmentFailed":
            return SegmentFailed(**inst, error="boom")
    raise AssertionError(trigger)


def _orchestrator_in(state, max_failures):
    orch = Orchestrator(["t0", "t1"], OrchestratorConfig(max_steps=10, max_failures=max_failures), FakeChooser())
    orch.handle(ExperimentStarted(time_s=0.0))
    tr = orch.trials["t0"]
    tr.state = state
    tr.instance_ids = ["i-old", "i-cur"]
    # The policy keeps an instance only in RUNNING/CHECKPOINTING; set one everywhere so that the
    # table (not the PREVIOUS_INSTANCE guard) is what rejects each trigger.
    tr.instance_id = "i-cur"
    tr.market = MARKET
    return orch, tr


ILLEGAL_EVENTS = [(s, t, m) for (s, t, m) in ILLEGAL if t in EVENT_TYPES]


@pytest.mark.parametrize(("state", "trigger", "marker"), ILLEGAL_EVENTS,
                         ids=[f"{s}-{t.__name__}-{m}" for s, t, m in ILLEGAL_EVENTS])
def test_illegal_event_through_handle_leaves_trial_unchanged(state, trigger, marker):
    if marker is Marker.PREVIOUS_INSTANCE:
        pytest.skip("PREVIOUS_INSTANCE rows exist in every state")
    if trigger is SegmentFailed and marker is not None:
        max_failures = 5 if marker is Marker.RETRY else 0
    else:
        max_failures = 2
    orch, tr = _orchestrator_in(state, max_failures)
    before = repr(tr)
    with pytest.raises(UnexpectedEvent) as info:
        orch.handle(_event(trigger, marker, "i-cur"))
    assert repr(tr) == before
    assert info.value.trial_id == "t0"


def test_previous_instance_event_is_a_noop_in_every_state():
    for state in TrialState:
        orch, tr = _orchestrator_in(state, 2)
        tr.instance_id = "i-cur" if state in (TrialState.RUNNING, TrialState.CHECKPOINTING) else None
        before = repr(tr)
        for trigger in INSTANCE_EVENTS:
            marker = CheckpointReason.HOP if trigger is CheckpointSaved else Marker.PREVIOUS_INSTANCE
            assert orch.handle(_event(trigger, marker, "i-old")) == []
        assert repr(tr) == before


def test_unknown_instance_is_unexpected():
    orch, tr = _orchestrator_in(TrialState.RUNNING, 2)
    with pytest.raises(UnexpectedEvent, match="unknown instance"):
        orch.handle(HourElapsed(time_s=1.0, trial_id="t0", instance_id="i-nope"))
    assert tr.state is TrialState.RUNNING


def test_unknown_trial_and_double_start_are_unexpected():
    orch, _ = _orchestrator_in(TrialState.RUNNING, 2)
    with pytest.raises(UnexpectedEvent):
        orch.handle(WakeUp(time_s=1.0, trial_id="nope"))
    with pytest.raises(UnexpectedEvent):
        orch.handle(ExperimentStarted(time_s=1.0))


def test_invalid_action_is_a_policy_bug():
    orch, tr = _orchestrator_in(TrialState.FINISHED, 2)
    with pytest.raises(InvalidAction, match="trial t0: can't handle Launch in state FINISHED"):
        orch._launch(tr, 1.0, [])
    assert tr.state is TrialState.FINISHED
