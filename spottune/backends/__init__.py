"""Backends (drivers): thin I/O shells that carry out the orchestrator's actions and report events.

The contract (which events, in which order) is the docstring of :mod:`spottune.backends._base`.
``sim`` replays a spot market on a virtual clock; ``local`` (``_local.py``) runs real worker processes.
"""

from spottune.backends._base import Driver, Progress, RunRecord, log_record
from spottune.backends._curves import RecordedCurves, TrainableCurves, TrialFailure
from spottune.backends._sim import SimBackend, SimSettings

__all__ = [
    "Driver",
    "Progress",
    "RecordedCurves",
    "RunRecord",
    "SimBackend",
    "SimSettings",
    "TrainableCurves",
    "TrialFailure",
    "log_record",
]
