"""Events a driver (backend) feeds into the orchestrator: small frozen values, data and no behaviour.

Every event carries ``time_s`` (engine seconds: seconds since the Unix epoch, UTC, float) and the
orchestrator reads time only from events. Events about one instance carry the driver's
``instance_id``; an event about an instance the trial has already left (for example the provider
terminating a revoked instance after its checkpoint was saved and a new one was launched) is a benign
race that changes nothing (the ``PREVIOUS_INSTANCE`` rows of the transition table).

Three more events carry facts for the orchestrator's models rather than for a trial (:data:`MODEL_EVENTS`):
a launch refused for capacity (:class:`CapacityRefused`), an instance run that is over and billed
(:class:`InstanceEnded`) and a capacity signal of the cloud (:class:`MarketSignal`). The orchestrator hands
them to its market chooser (:class:`provisioner.LearningChooser`); they change no trial and produce no action.
A driver delivers each one at once, when the fact arises, and journals it as the driver record that holds its
data (the launch outcome, the ``billed`` record, the ``signal`` outcome); it is not written to ``events.jsonl``
(the launch's error, the ledger row and ``meta["signals"]`` hold the same data).

Source: SpotTune Algorithm 1 (the paper's §III-A: a revocation notice, a finished job, an hour on one instance).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeAlias

from spotmarket.prices import Market


class CheckpointReason(enum.StrEnum):
    """Why a checkpoint is taken; part of the transition key, like h11's ``(Response, _SWITCH_CONNECT)``."""

    REVOCATION = "revocation"  #: the provider's 2-minute notice arrived: save, then relaunch elsewhere
    HOP = "hop"  #: one hour on the instance without revocation: save, terminate, re-provision
    THETA = "theta"  #: the trial reached θ·max_steps: save and pause until the barrier
    END = "end"  #: the trial reached its target steps: save and finish
    PLATEAU = "plateau"  #: the curve is flat (the paper's plateau rule, §III-C): save and finish early


class EndReason(enum.StrEnum):
    """Who ended an instance (ledger vocabulary: the provider's end is refundable in the first hour)."""

    PROVIDER = "provider"  #: revoked / interrupted by the cloud
    USER = "user"  #: terminated on our :class:`~spottune.orchestrator.Terminate` action


_EVENT = dict(frozen=True, slots=True, kw_only=True)


@dataclass(**_EVENT)
class ExperimentStarted:
    """The driver is ready; the orchestrator launches every trial. Sent exactly once, first.

    Parameters
    ----------
    time_s : float
        Engine seconds of the start (the driver's clock): JCT counts from here.
    """

    time_s: float


@dataclass(**_EVENT)
class TrialLaunched:
    """An instance was fulfilled, booted and restored the trial's last checkpoint; training starts now.

    Parameters
    ----------
    time_s : float
        Engine seconds when training can start (after boot and restore).
    trial_id : str
    instance_id : str
        Driver-assigned, unique for the whole experiment.
    market : spotmarket.prices.Market
        The market of the instance.
    started_s : float
        Engine seconds when the instance started (billing start, <= ``time_s``).
    restored_step : int or None
        Set when the instance restored an *earlier* step than the Launch's ``resume_step`` (that
        checkpoint was missing or corrupt and the store fell back to the newest good earlier one, or
        to a fresh start, 0); the trial continues from it and the difference counts as lost steps.
    """

    time_s: float
    trial_id: str
    instance_id: str
    market: Market
    started_s: float
    restored_step: int | None = None


@dataclass(**_EVENT)
class LaunchFailed:
    """The spot request was not fulfilled (price above the max price, no capacity); no instance exists.

    Parameters
    ----------
    time_s : float
        Engine seconds of the event (the driver's clock; virtual time in the simulator).
    trial_id : str
        The trial.
    error : str, default ""
        The cloud's or the replay's reason, for the log.
    """

    time_s: float
    trial_id: str
    error: str = ""


@dataclass(**_EVENT)
class MetricReported:
    """The trial completed ``step`` steps in total (counted from 0, across segments) and reports metrics.

    Parameters
    ----------
    time_s : float
        Engine seconds of the event (the driver's clock; virtual time in the simulator).
    trial_id : str
        The trial.
    instance_id : str
        The instance (driver-assigned, unique in the experiment).
    step : int
        Steps the trial has completed in total.
    metrics : mapping of str to float
        What ``Trainable.step`` returned at that step.
    """

    time_s: float
    trial_id: str
    instance_id: str
    step: int
    metrics: Mapping[str, float] = field(default_factory=dict)


@dataclass(**_EVENT)
class RevocationNotice:
    """The provider will terminate the instance at ``deadline_s`` (legacy and modern: ``time_s + 120``).

    Parameters
    ----------
    time_s : float
        Engine seconds of the event (the driver's clock; virtual time in the simulator).
    trial_id : str
        The trial.
    instance_id : str
        The instance (driver-assigned, unique in the experiment).
    deadline_s : float
        Engine seconds of the termination (the notice comes 120 s before it).
    """

    time_s: float
    trial_id: str
    instance_id: str
    deadline_s: float


@dataclass(**_EVENT)
class HourElapsed:
    """The instance has run for one full hour (3600 s after ``started_s``) without revocation.

    Parameters
    ----------
    time_s : float
        Engine seconds of the event (the driver's clock; virtual time in the simulator).
    trial_id : str
        The trial.
    instance_id : str
        The instance (driver-assigned, unique in the experiment).
    """

    time_s: float
    trial_id: str
    instance_id: str


@dataclass(**_EVENT)
class CheckpointSaved:
    """A checkpoint requested with reason ``reason`` is complete and verified at ``step``.

    Parameters
    ----------
    time_s : float
        Engine seconds of the event (the driver's clock; virtual time in the simulator).
    trial_id : str
        The trial.
    instance_id : str
        The instance (driver-assigned, unique in the experiment).
    reason : CheckpointReason
        The reason of the :class:`~spottune.orchestrator.Checkpoint` action it answers.
    step : int
        The trial's step count in the checkpoint.
    """

    time_s: float
    trial_id: str
    instance_id: str
    reason: CheckpointReason
    step: int


@dataclass(**_EVENT)
class SegmentEnded:
    """The instance is gone (``reason``: who ended it); ``steps_done`` = the trial's step count then.

    If the trial was still on this instance (no checkpoint saved yet), it resumes from its last good
    checkpoint and ``steps_done - last_checkpoint_step`` steps are lost (counted by the orchestrator).

    Parameters
    ----------
    time_s : float
        Engine seconds of the event (the driver's clock; virtual time in the simulator).
    trial_id : str
        The trial.
    instance_id : str
        The instance (driver-assigned, unique in the experiment).
    steps_done : int
        The trial's step count when the instance ended.
    reason : EndReason
        ``provider`` (revoked or interrupted: refundable in the first hour) or ``user``.
    """

    time_s: float
    trial_id: str
    instance_id: str
    steps_done: int
    reason: EndReason


@dataclass(**_EVENT)
class SegmentFailed:
    """The trainable raised; the worker stopped training. Counts against ``max_failures``.

    Parameters
    ----------
    time_s : float
        Engine seconds of the event (the driver's clock; virtual time in the simulator).
    trial_id : str
        The trial.
    instance_id : str
        The instance (driver-assigned, unique in the experiment).
    error : str, default ""
        The exception the trainable raised, as text.
    """

    time_s: float
    trial_id: str
    instance_id: str
    error: str = ""


@dataclass(**_EVENT)
class WakeUp:
    """A timer the orchestrator asked for with :class:`~spottune.orchestrator.ScheduleWakeUp` fired.

    Parameters
    ----------
    time_s : float
        Engine seconds of the event (the driver's clock; virtual time in the simulator).
    trial_id : str
        The trial.
    """

    time_s: float
    trial_id: str


@dataclass(**_EVENT)
class CapacityRefused:
    """The cloud refused a launch in ``market`` for capacity (EC2's ``InsufficientInstanceCapacity`` and kin, a
    replayed outage's ``refused-capacity``); the chooser leaves the market out for a while (design AWS3, E12).

    Delivered at once, before the launch's :class:`LaunchFailed`, so that every choice made after the refusal
    sees it.

    Parameters
    ----------
    time_s : float
        Engine seconds of the refusal.
    market : spotmarket.prices.Market
    reason : str
        The cloud's error code or the replay's cause.
    """

    time_s: float
    market: Market
    reason: str = ""


@dataclass(**_EVENT)
class InstanceEnded:
    """An instance run is over and billed: what an online revocation model learns from (only the past, so no
    future leaks into a prediction).

    Parameters
    ----------
    time_s : float
        Engine seconds when the instance was gone (the end of its ledger row).
    trial_id, instance_id : str
    market : spotmarket.prices.Market
    started_s : float
        Engine seconds of its billing start.
    interrupted : bool
        The provider ended it for capacity at its termination (not the user, not a price crossing).
    """

    time_s: float
    trial_id: str
    instance_id: str
    market: Market
    started_s: float
    interrupted: bool = False


@dataclass(**_EVENT)
class MarketSignal:
    """A capacity signal of the cloud about ``market`` (``kind``: ``placement_score`` with a Spot placement score
    1..10, ``rebalance`` with 1.0; :mod:`spottune.backends.aws._signals`), for the revocation predictor.

    May arrive before :class:`ExperimentStarted` (the placement scores are read at the start).

    Parameters
    ----------
    time_s : float
        Engine seconds of the event (the driver's clock; virtual time in the simulator).
    market : spotmarket.prices.Market
        Instance type, region and availability zone.
    kind : {"placement_score", "rebalance"}
        The signal.
    value : float
        The Spot placement score (1..10) or 1.0 for a rebalance recommendation.
    """

    time_s: float
    market: Market
    kind: str
    value: float


Event: TypeAlias = (
    ExperimentStarted
    | TrialLaunched
    | LaunchFailed
    | MetricReported
    | RevocationNotice
    | HourElapsed
    | CheckpointSaved
    | SegmentEnded
    | SegmentFailed
    | WakeUp
    | CapacityRefused
    | InstanceEnded
    | MarketSignal
)

#: Every event type, in a stable order (docs and serialisation).
EVENT_TYPES: tuple[type, ...] = (
    ExperimentStarted,
    TrialLaunched,
    LaunchFailed,
    MetricReported,
    RevocationNotice,
    HourElapsed,
    CheckpointSaved,
    SegmentEnded,
    SegmentFailed,
    WakeUp,
)

#: Events for the orchestrator's models, not for a trial (see the module doc); journaled by driver records.
MODEL_EVENTS: tuple[type, ...] = (CapacityRefused, InstanceEnded, MarketSignal)

#: Event types that concern one instance (they carry ``instance_id``).
INSTANCE_EVENTS: tuple[type, ...] = (
    MetricReported,
    RevocationNotice,
    HourElapsed,
    CheckpointSaved,
    SegmentEnded,
    SegmentFailed,
)
