"""The orchestrator: SpotTune's Algorithm 1 as a pure (sans-I/O) state machine.

Drivers (``spottune.backends``) feed :mod:`events <spottune.orchestrator._events>` to
:meth:`Orchestrator.handle` and carry out the returned :mod:`actions <spottune.orchestrator._actions>`.
The trial transition table is :data:`TRANSITIONS`. The injected market chooser and final-metric
predictor follow :class:`provisioner.MarketChooser` and :class:`earlycurve.FinalMetricPredictor` (one
definition each, in those packages; :class:`provisioner.HorizonChooser`, :class:`provisioner.LearningChooser` and
:class:`earlycurve.ConfigAwarePredictor` for what some of them also take). The models change only through
:meth:`Orchestrator.handle`: the run's facts for them are model events (:data:`MODEL_EVENTS`).
"""

from spottune.errors import IllegalTransition, InvalidAction, UnexpectedEvent
from spottune.orchestrator._actions import (
    TRIAL_ACTIONS,
    Action,
    Checkpoint,
    ExperimentFinished,
    Launch,
    ScheduleWakeUp,
    Stop,
    StopReason,
    Terminate,
    TerminateReason,
)
from spottune.orchestrator._events import (
    EVENT_TYPES,
    INSTANCE_EVENTS,
    MODEL_EVENTS,
    CapacityRefused,
    CheckpointReason,
    CheckpointSaved,
    EndReason,
    Event,
    ExperimentStarted,
    HourElapsed,
    InstanceEnded,
    LaunchFailed,
    MarketSignal,
    MetricReported,
    RevocationNotice,
    SegmentEnded,
    SegmentFailed,
    TrialLaunched,
    WakeUp,
)
from spottune.orchestrator._config import OrchestratorConfig, StopRule, check_rungs
from spottune.orchestrator._policy import Orchestrator, PredictorAnswer, prediction_key
from spottune.orchestrator._record import TrialRecord
from spottune.orchestrator._state import TRANSITIONS, Kept, Marker, TrialState, next_state

__all__ = [
    "Action", "CapacityRefused", "Checkpoint", "CheckpointReason", "CheckpointSaved", "EVENT_TYPES", "EndReason", "Event",
    "ExperimentFinished", "ExperimentStarted", "HourElapsed", "INSTANCE_EVENTS",
    "IllegalTransition", "InstanceEnded", "InvalidAction", "Kept", "Launch", "LaunchFailed",
    "MODEL_EVENTS", "Marker", "MarketSignal", "MetricReported", "Orchestrator", "OrchestratorConfig", "PredictorAnswer", "RevocationNotice", "ScheduleWakeUp",
    "SegmentEnded", "SegmentFailed", "Stop", "StopReason", "StopRule", "TRANSITIONS", "TRIAL_ACTIONS", "Terminate",
    "TerminateReason", "TrialLaunched", "TrialRecord", "TrialState", "UnexpectedEvent", "WakeUp", "check_rungs", "next_state", "prediction_key",
]
