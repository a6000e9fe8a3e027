"""Trial states and the one explicit transition table (h11 "Rule 1": every transition lives here).

The machine, one trial at a time (actions we send are keyed like events we receive)::

    PENDING --Launch--> LAUNCHING --TrialLaunched--> RUNNING
       ^                    |LaunchFailed                |  MetricReported / RevocationNotice / HourElapsed: stay
       +--------------------+                            |  (the policy answers with Checkpoint(reason))
                                                         v
                              (Checkpoint, reason) --> CHECKPOINTING
    CHECKPOINTING --(CheckpointSaved, revocation)--> PREEMPTED    --Launch--> LAUNCHING
                  --(CheckpointSaved, hop)-------->  HOPPING      --(Terminate, hop), Launch
                  --(CheckpointSaved, theta)------>  PAUSED_AT_THETA --(Terminate, theta); then at the
                                                                   barrier Kept or (Stop, not_top_k)
                  --(CheckpointSaved, end|plateau)-> FINISHED     --(Terminate, end)
    RUNNING | CHECKPOINTING --(SegmentEnded, provider)--> PREEMPTED   (killed before a checkpoint finished:
                                                                       resume from the last good one)
                            --(SegmentFailed, retry)----> PENDING     (trainable raised, budget left)
                            --(SegmentFailed, give_up)--> FAILED
    PAUSED_AT_THETA --Kept--> KEPT --Launch--> LAUNCHING   (kept at the barrier; a WakeUp retries a launch
                                                            that found no market)
    PAUSED_AT_THETA | KEPT --(Stop, not_top_k)--> STOPPED_EARLY
    RUNNING --(Terminate, prune)--> STOPPED_EARLY     (an external stop rule, e.g. an Optuna pruner)

A hop or revocation checkpoint that already holds the target step (the last step finished as the checkpoint
began) is marked ``end`` or ``theta``, not ``hop``/``revocation``: the trial is done with this segment, and
relaunching it would have nothing to do. A ``MetricReported`` during ``CHECKPOINTING`` keeps its
curve point: that step is in the checkpoint being saved.

``Kept`` is the policy's decision at a barrier (a rung's ``keep`` or θ's top-k): no driver sends or receives
it, but it is keyed in the table like the events and actions, so that a trial kept and waiting for its relaunch
is a state of its own (KEPT), not a paused trial with a flag.

Markers refine a trigger where its type alone does not decide: the checkpoint / terminate reason, who
ended a segment, and two guards computed beside the table from data: the failure budget (``RETRY`` while
``failures <= max_failures``, else ``GIVE_UP``) and ``PREVIOUS_INSTANCE`` for an event about an instance
the trial already left. The latter is a benign cloud race (the provider terminates a revoked instance
after its checkpoint was saved and a new one launched) and is an explicit self-loop in every state, not
a ``try`` in a driver. Preemptions (``SegmentEnded``/provider, revocation checkpoints) never touch the
failure budget; only ``SegmentFailed`` does.

The table says what is legal and where it leads; the policy (``_policy.py``, Algorithm 1) says what to do.
"""

from __future__ import annotations

import enum

from spottune.errors import InvalidAction, UnexpectedEvent
from spottune.orchestrator._actions import (
    TRIAL_ACTIONS,
    Checkpoint,
    Launch,
    Stop,
    StopReason,
    Terminate,
    TerminateReason,
)
from spottune.orchestrator._events import (
    INSTANCE_EVENTS,
    CheckpointReason,
    CheckpointSaved,
    EndReason,
    HourElapsed,
    LaunchFailed,
    MetricReported,
    RevocationNotice,
    SegmentEnded,
    SegmentFailed,
    TrialLaunched,
    WakeUp,
)


class TrialState(enum.StrEnum):
    """Where one trial is. Preemption (PREEMPTED, HOPPING) is distinct from failure (FAILED)."""

    PENDING = "pending"  #: not on an instance; waiting for (re)launch (first start or failure retry)
    LAUNCHING = "launching"  #: a spot request is out; waiting for TrialLaunched or LaunchFailed
    RUNNING = "running"  #: training on an instance
    CHECKPOINTING = "checkpointing"  #: training stopped; saving state to the checkpoint store
    PREEMPTED = "preempted"  #: revoked (checkpoint saved, or lost and rolled back); awaits relaunch
    HOPPING = "hopping"  #: hourly hop: checkpoint saved, instance released; awaits re-provisioning
    PAUSED_AT_THETA = "paused_at_theta"  #: reached θ·max_steps (or a rung); waits for the barrier (decision D12)
    KEPT = "kept"  #: kept at a barrier (a rung's keep or θ's top-k); waits for its launch to the next stop
    STOPPED_EARLY = "stopped_early"  #: ranked outside the top-k at the barrier; terminal
    FINISHED = "finished"  #: reached its target steps or plateaued; terminal
    FAILED = "failed"  #: the trainable failed more than max_failures times; terminal

    def is_terminal(self) -> bool:
        """True for STOPPED_EARLY, FINISHED and FAILED: nothing will happen to the trial any more."""
        return self in _TERMINAL

    def awaits_relaunch(self) -> bool:
        """True for PREEMPTED and HOPPING: left an instance for a reason other than failure or θ."""
        return self in _RELAUNCH


_TERMINAL = frozenset({TrialState.STOPPED_EARLY, TrialState.FINISHED, TrialState.FAILED})
_RELAUNCH = frozenset({TrialState.PREEMPTED, TrialState.HOPPING})


class Kept:
    """The policy's decision at a barrier that a paused trial continues (a trigger of the table, not an event
    or an action: no driver sees it)."""


class Marker(enum.StrEnum):
    """Guard markers computed from data beside the table."""

    PREVIOUS_INSTANCE = "previous_instance"  #: the event is about an instance the trial left
    RETRY = "retry"  #: failure budget not exhausted: failures <= max_failures
    GIVE_UP = "give_up"  #: failure budget exhausted


S = TrialState
_R = CheckpointReason

TRANSITIONS: dict[TrialState, dict[object, TrialState]] = {
    S.PENDING: {
        Launch: S.LAUNCHING,
        WakeUp: S.PENDING,
        (Terminate, TerminateReason.FAILURE): S.PENDING,  # release the failed segment's instance
    },
    S.LAUNCHING: {
        TrialLaunched: S.RUNNING,
        LaunchFailed: S.PENDING,
    },
    S.RUNNING: {
        MetricReported: S.RUNNING,
        RevocationNotice: S.RUNNING,  # the policy answers with Checkpoint(revocation)
        HourElapsed: S.RUNNING,  # the policy answers with Checkpoint(hop)
        **{(Checkpoint, r): S.CHECKPOINTING for r in CheckpointReason},
        (SegmentEnded, EndReason.PROVIDER): S.PREEMPTED,  # no notice, or notice ignored: roll back
        (SegmentFailed, Marker.RETRY): S.PENDING,
        (SegmentFailed, Marker.GIVE_UP): S.FAILED,
        (Terminate, TerminateReason.PRUNE): S.STOPPED_EARLY,  # stop rule: terminate now, no checkpoint
    },
    S.CHECKPOINTING: {
        MetricReported: S.CHECKPOINTING,  # a step that finished as the checkpoint began
        RevocationNotice: S.CHECKPOINTING,  # a late notice: the running checkpoint races the deadline
        HourElapsed: S.CHECKPOINTING,  # the hour ticked during a checkpoint: it ends the segment anyway
        (CheckpointSaved, _R.REVOCATION): S.PREEMPTED,
        (CheckpointSaved, _R.HOP): S.HOPPING,
        (CheckpointSaved, _R.THETA): S.PAUSED_AT_THETA,
        (CheckpointSaved, _R.END): S.FINISHED,
        (CheckpointSaved, _R.PLATEAU): S.FINISHED,
        (SegmentEnded, EndReason.PROVIDER): S.PREEMPTED,  # killed before the checkpoint finished
        (SegmentFailed, Marker.RETRY): S.PENDING,
        (SegmentFailed, Marker.GIVE_UP): S.FAILED,
    },
    S.PREEMPTED: {
        Launch: S.LAUNCHING,
        WakeUp: S.PREEMPTED,
    },
    S.HOPPING: {
        (Terminate, TerminateReason.HOP): S.HOPPING,
        Launch: S.LAUNCHING,
        WakeUp: S.HOPPING,
    },
    S.PAUSED_AT_THETA: {
        (Terminate, TerminateReason.THETA): S.PAUSED_AT_THETA,
        Kept: S.KEPT,  # chosen at the barrier: continue to the next stop
        WakeUp: S.PAUSED_AT_THETA,
        (Stop, StopReason.NOT_TOP_K): S.STOPPED_EARLY,
    },
    S.KEPT: {
        Launch: S.LAUNCHING,
        WakeUp: S.KEPT,  # the policy answers with Launch (a launch that found no market is retried)
        (Stop, StopReason.NOT_TOP_K): S.STOPPED_EARLY,  # a bracket schedule's round ended without it
    },
    S.STOPPED_EARLY: {},
    S.FINISHED: {
        (Terminate, TerminateReason.END): S.FINISHED,
    },
    S.FAILED: {
        (Terminate, TerminateReason.FAILURE): S.FAILED,
    },
}
# Benign races: an event about an instance the trial has already left changes nothing, in every state.
for _row in TRANSITIONS.values():
    for _event_type in INSTANCE_EVENTS:
        _row[(_event_type, Marker.PREVIOUS_INSTANCE)] = None  # type: ignore[assignment]  # filled below
for _state, _row in TRANSITIONS.items():
    for _key, _target in list(_row.items()):
        if _target is None:
            _row[_key] = _state


def describe(trigger: type, marker: object = None) -> str:
    """Human-readable trigger, e.g. ``CheckpointSaved(reason=hop)``."""
    if marker is None:
        return trigger.__name__
    return f"{trigger.__name__}({marker})" if isinstance(marker, Marker) else f"{trigger.__name__}(reason={marker})"


def next_state(trial_id: str, state: TrialState, trigger: type, marker: object = None) -> TrialState:
    """Look up where ``trigger`` (an event or action type, refined by ``marker``) leads from ``state``.

    Tries ``(trigger, marker)`` first, then ``trigger`` alone. Does not change anything.

    Parameters
    ----------
    trial_id : str
        The trial (for the error message).
    state : TrialState
        Its current state.
    trigger : type
        An event or action class (e.g. :class:`~spottune.orchestrator.RevocationNotice`), or :class:`Kept`.
    marker : optional
        The reason that refines it (a :class:`~spottune.orchestrator.CheckpointReason`, ...).

    Returns
    -------
    TrialState
        The state the trial moves to.

    Raises
    ------
    UnexpectedEvent
        If an event is illegal in ``state`` (the driver or the cloud is at fault).
    InvalidAction
        If an action or a policy decision (:class:`Kept`) is illegal in ``state`` (a policy bug).
    """
    row = TRANSITIONS[state]
    if marker is not None and (trigger, marker) in row:
        return row[(trigger, marker)]
    if trigger in row and not (marker is not None and _marker_required(trigger, marker)):
        return row[trigger]
    error = InvalidAction if trigger in TRIAL_ACTIONS or trigger is Kept else UnexpectedEvent
    raise error(trial_id, str(state), describe(trigger, marker))


def _marker_required(trigger: type, marker: object) -> bool:
    """A PREVIOUS_INSTANCE event must match its own row; it never falls back to the plain one."""
    return marker is Marker.PREVIOUS_INSTANCE
