"""Backends (drivers): thin I/O shells that carry out the orchestrator's actions and report events.

The contract (which events, in which order) is the docstring of :mod:`spottune.backends._base`.
``sim`` replays a spot market on a virtual clock; ``local`` runs every trial segment as a real worker
process against the same market replayed on an accelerated wall clock; ``aws`` runs every segment on an
EC2 spot instance (:mod:`spottune.backends.aws`); ``ray`` runs every segment as an actor on a spot node of an
existing Ray cluster (:mod:`spottune.backends.ray`, needs ``spottune[ray]``). The last three share one
lifecycle, :class:`spottune.backends._worker_driver.WorkerDriver`, each with its own transport (a process, an
EC2 instance, a Ray actor; the protocol is :class:`spottune.backends._transport.WorkerTransport`).

The names are imported on first use (PEP 562), so that a worker or an agent importing
``spottune.backends.local.worker`` does not import the orchestrator and its scientific stack.
"""

from __future__ import annotations

from spottune._lazy import attach

_WHERE = {
    "Driver": "spottune.backends._base", "Progress": "spottune.backends._base", "RunRecord": "spottune.backends._base",
    "log_record": "spottune.backends._base",
    "LocalBackend": "spottune.backends.local", "LocalSettings": "spottune.backends.local",
    "RayBackend": "spottune.backends.ray", "RaySettings": "spottune.backends.ray",
    "RecordedCurves": "spottune.backends.sim", "SimBackend": "spottune.backends.sim",
    "SimSettings": "spottune.backends.sim", "TrainableCurves": "spottune.backends.sim",
    "TrialFailure": "spottune.backends.sim",
}

__all__ = sorted(_WHERE)
__getattr__, __dir__ = attach(__name__, _WHERE)
