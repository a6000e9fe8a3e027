"""The driver contract: what every backend (sim, local, aws, ray) owes the orchestrator.

A driver is a thin I/O shell around :class:`spottune.orchestrator.Orchestrator`::

    for action in orchestrator.handle(event):
        self._apply(action)

It turns actions into effects (request an instance, stop training and save, terminate, set a timer)
and effects into events. **It never decides**: if a driver "knew" to relaunch, sim and aws would
disagree. Events it must emit, per trial, in this order:

1. ``ExperimentStarted`` once, before anything else (no trial id).
2. For each ``Launch``: exactly one of ``TrialLaunched`` (instance fulfilled, booted and restored to
   ``resume_step``; ``time_s`` = training start, ``started_s`` = billing start) or ``LaunchFailed``
   (no instance exists; nothing is billed). A fulfilled instance that dies before it is ready is
   reported as ``LaunchFailed`` and billed as a provider-ended run.
3. While training: one ``MetricReported`` per completed step, ``step`` counting from 1 across
   segments (after a resume at step s the next report is s + 1).
4. At any time while the instance lives: ``RevocationNotice`` (at most once per instance,
   ``deadline_s`` = termination time), ``HourElapsed`` (once, 3600 s after ``started_s``), and
   ``SegmentFailed`` if the trainable raised (training on that instance stops).
5. For each ``Checkpoint``: stop training at once (a step in flight is discarded), then either
   ``CheckpointSaved`` with the same reason and the saved step, or, if the instance is terminated
   first, ``SegmentEnded(reason=provider)``; the store keeps the previous good checkpoint.
6. ``SegmentEnded`` exactly once per fulfilled instance, when it is gone: ``provider`` for a
   revocation or interruption, ``user`` for our ``Terminate``. A revoked instance whose checkpoint
   was saved is left running until the provider ends it (its first hour stays refundable).
7. ``WakeUp`` at ``at_s`` for every ``ScheduleWakeUp``.

Events carry engine time ``time_s`` (float seconds since the epoch, UTC); a driver delivers them in
non-decreasing time order, ties in the order they were caused. Every event and action is recorded
(:func:`log_record`) for ``events.jsonl``; every instance run becomes one ledger row.
"""

from __future__ import annotations

import abc
import dataclasses
import enum
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spottune.orchestrator import Orchestrator


def _plain(value: Any) -> Any:
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:  # the common cases first, exact types
        return value
    if kind is float:
        return value if math.isfinite(value) else None
    if kind is dict:
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "instance_type") and hasattr(value, "availability_zone"):
        return str(value)  # a Market
    if hasattr(value, "item"):
        return _plain(value.item())  # numpy scalar
    return str(value)


def log_record(kind: str, item: Any, now_s: float) -> dict[str, Any]:
    """One ``events.jsonl`` line: ``{"t": now_s, "kind": "event"|"action", "type": ..., fields...}``.

    Parameters
    ----------
    kind : {"event", "action"}
        What ``item`` is.
    item : dataclass
        An orchestrator event or action.
    now_s : float
        Time of the record, seconds since the epoch (UTC; virtual time in the simulator).

    Returns
    -------
    dict
        JSON-ready: the fields of ``item`` as plain values.
    """
    out: dict[str, Any] = {"t": float(now_s), "kind": kind, "type": type(item).__name__}
    for f in dataclasses.fields(item):
        out[f.name] = _plain(getattr(item, f.name))
    return out


@dataclass(slots=True, kw_only=True)
class RunRecord:
    """What a driver hands to ``spottune.results`` after a run.

    Attributes
    ----------
    start_s, end_s : float
        Experiment start and the time of ``ExperimentFinished`` (JCT = end − start), engine seconds.
    log : list of dict
        Every event and action, in order (:func:`log_record`).
    ledger : list of LedgerRow
        One per instance run (``spotmarket.LedgerRow``).
    instance_steps : dict instance_id -> (steps_executed, steps_lost)
        Steps each instance ran, and how many of them were lost (no checkpoint before it died).
    meta : dict
        Backend settings for ``summary.json``.
    """

    start_s: float
    end_s: float | None = None
    log: list[dict[str, Any]] = field(default_factory=list)
    ledger: list[Any] = field(default_factory=list)
    instance_steps: dict[str, tuple[int, int]] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)


#: ``progress(now_s, orchestrator, dollars_so_far)`` callback signature.
Progress = Callable[[float, Orchestrator, float], None]


class Driver(abc.ABC):
    """Base class of the backends: one abstract method, :meth:`run`; the contract is the module doc.

    Crash safety (``docs/design/decisions.md`` "Crash safety"): when :attr:`journal` is set (a
    :class:`spottune.journal.Journal`), the driver records every delivered event and returned action,
    an ``intent`` before every side effect and its ``outcome`` after it. :meth:`resume` is the
    backend's hook to continue a killed run from its journal.
    """

    orchestrator: Orchestrator
    #: The run's :class:`spottune.journal.Journal`, or None (nothing is journaled).
    journal: Any = None

    def resume(self, records: list[dict[str, Any]]) -> None:
        """Prepare to continue a killed run whose journal holds ``records``; :meth:`run` then continues it.

        Called on a freshly built driver (same spec, same seed) whose :attr:`journal` replays
        ``records`` (:class:`spottune.journal.Journal` with ``replay=``). A backend must (1) rebuild the
        orchestrator's state from the journaled events (the replay checks every action), (2) reconcile
        what really exists with what the journal says: leftover worker processes or cloud instances
        (found by the ids and PIDs in the ``intent``/``outcome`` records) adopted or ended, intents
        without an outcome resolved, (3) deliver what happened while the run was down, in time order.

        Parameters
        ----------
        records : list of dict
            The journal (:func:`spottune.journal.read_journal`).

        Raises
        ------
        spottune.errors.BackendError
            Default: this backend cannot resume a run.
        """
        from spottune.errors import BackendError

        raise BackendError(f"the {getattr(self, 'name', type(self).__name__)} backend cannot resume a run")

    @abc.abstractmethod
    def run(self) -> RunRecord:
        """Drive the orchestrator from ``ExperimentStarted`` to ``ExperimentFinished``.

        Returns
        -------
        RunRecord
            Start and end (JCT = end − start, seconds), every event and action, the ledger (one row per
            instance run: market, start, end, who ended it, USD charged and refunded), the steps of each
            instance and the run's meta.

        Raises
        ------
        spottune.errors.BackendError
            If the effects cannot be carried out (price history ends, no event left to deliver).
        """
