"""The ``sim`` backend: a discrete-event simulator over the market replay on a virtual clock.

What only it uses lives here: the event loop (:class:`SimBackend`) and the sources of metrics it replays
(:class:`TrainableCurves` runs the real trainable; :class:`RecordedCurves` reads recorded learning curves).
"""

from spottune.backends.sim._backend import SimBackend, SimSettings
from spottune.backends.sim._curves import RecordedCurves, TrainableCurves, TrialFailure

__all__ = ["RecordedCurves", "SimBackend", "SimSettings", "TrainableCurves", "TrialFailure"]
