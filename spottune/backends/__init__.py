"""Backends (drivers): thin I/O shells that carry out the orchestrator's actions and report events.

The contract (which events, in which order) is the docstring of :mod:`spottune.backends._base`.
``sim`` replays a spot market on a virtual clock; ``local`` runs every trial segment as a real worker
process against the same market replayed on an accelerated wall clock.
"""

from spottune.backends._base import Driver, Progress, RunRecord, log_record
from spottune.backends.local import LocalBackend, LocalSettings
from spottune.backends.sim import RecordedCurves, SimBackend, SimSettings, TrainableCurves, TrialFailure

__all__ = [
    "Driver",
    "LocalBackend",
    "LocalSettings",
    "Progress",
    "RecordedCurves",
    "RunRecord",
    "SimBackend",
    "SimSettings",
    "TrainableCurves",
    "TrialFailure",
    "log_record",
]
