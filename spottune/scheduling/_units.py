"""Units of work that survive failed workers: Cerebro's pending queue Q, in-flight queue Q' and heartbeats.

Nakandala, Zhang, Kumar, "Cerebro: a data system for optimized deep learning model selection" (PVLDB 13(11),
2020), Section 5 [T]: a unit moves Q -> Q' when dispatched and leaves Q' when it succeeds; the unit of a failed
worker goes back to Q. Failure is detected by heartbeats; "only the very last checkpointed model is needed".
Here a unit is one (trial, segment) of spottune (decision SV4). Pure: time comes in as ``now_s`` arguments.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from spottune.errors import SpottuneError

__all__ = ["StaleUnit", "Unit", "UnitQueues"]


class StaleUnit(SpottuneError, RuntimeError):
    """A worker reported on a unit it no longer holds (declared dead and re-queued): the report is refused."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Unit:
    """One (trial, segment): train ``trial_id`` from ``start_step`` to ``end_step``.

    Attributes
    ----------
    trial_id : str
    start_step, end_step : int
        Steps; the unit's work is ``end_step - start_step``.
    """

    trial_id: str
    start_step: int
    end_step: int

    @property
    def unit_id(self) -> str:
        """``<trial>:<start>-<end>``."""
        return f"{self.trial_id}:{self.start_step}-{self.end_step}"


class UnitQueues:
    """Pending units Q, in-flight units Q' (one per worker) and the workers' heartbeats.

    Invariants: a unit is in Q or in Q' or done, never two of these; no two units of one trial are in flight
    (Cerebro's model isolation); a trial's steps are counted once, when its unit completes on the worker that
    holds it; only the latest checkpoint of each trial is kept.

    Parameters
    ----------
    heartbeat_period_s : float
        Seconds between two heartbeats of a live worker, > 0.
    missed_beats : int, default 3
        A worker whose last heartbeat is ``missed_beats * heartbeat_period_s`` seconds old or older is dead.

    Raises
    ------
    SpottuneError
        On a period or a count that is not > 0.
    """

    def __init__(self, *, heartbeat_period_s: float, missed_beats: int = 3):
        if not (math.isfinite(heartbeat_period_s) and heartbeat_period_s > 0):
            raise SpottuneError(f"heartbeat_period_s is {heartbeat_period_s!r}, but must be a finite number > 0")
        if not (isinstance(missed_beats, int) and missed_beats >= 1):
            raise SpottuneError(f"missed_beats is {missed_beats!r}, but must be an integer >= 1")
        self.heartbeat_period_s = float(heartbeat_period_s)
        self.missed_beats = missed_beats
        self.pending: deque[Unit] = deque()
        self.in_flight: dict[str, Unit] = {}  # worker -> unit
        self.last_beat_s: dict[str, float] = {}
        self.steps_done: dict[str, int] = {}
        self.checkpoints: dict[str, str] = {}
        self.failed_workers: list[str] = []

    @property
    def timeout_s(self) -> float:
        """``missed_beats * heartbeat_period_s``: the age of the last heartbeat at which a worker is dead."""
        return self.missed_beats * self.heartbeat_period_s

    def submit(self, unit: Unit) -> None:
        """Append a unit to Q."""
        self.pending.append(unit)

    def heartbeat(self, worker: str, now_s: float) -> None:
        """A live worker (a new one joins by its first heartbeat: Cerebro's scale-out)."""
        if worker in self.failed_workers:
            raise StaleUnit(f"worker {worker}: declared dead at its missed heartbeats; join under a new name")
        self.last_beat_s[worker] = now_s

    def dispatch(self, worker: str, now_s: float, *, trial_id: str | None = None) -> Unit | None:
        """Move the first pending unit whose trial is not in flight from Q to Q' on ``worker``.

        Parameters
        ----------
        worker : str
        now_s : float
            Seconds (the caller's clock): the worker's heartbeat.
        trial_id : str, optional
            Only a unit of this trial (a driver whose orchestrator already chose the trial of the worker).

        Returns
        -------
        Unit or None
            None when the worker is busy, or no pending unit is eligible.

        Raises
        ------
        StaleUnit
            If ``worker`` was declared dead.
        """
        self.heartbeat(worker, now_s)
        if worker in self.in_flight:
            return None
        busy = {u.trial_id for u in self.in_flight.values()}
        for unit in self.pending:
            if unit.trial_id not in busy and trial_id in (None, unit.trial_id):
                self.pending.remove(unit)
                self.in_flight[worker] = unit
                return unit
        return None

    def complete(self, worker: str, unit: Unit, now_s: float, checkpoint: str | None = None, *,
                 at_step: int | None = None) -> str | None:
        """The unit ended on ``worker``: leave Q', count its steps once, keep only its trial's latest checkpoint.

        Parameters
        ----------
        worker : str
        unit : Unit
        now_s : float
            Seconds (the caller's clock).
        checkpoint : str, optional
            Where the trial's checkpoint after this unit is.
        at_step : int, optional
            The step the unit's checkpoint holds, when the unit ended early (a spot notice or an hourly hop
            saves before ``end_step``; the rest is another unit); default ``unit.end_step``.

        Returns
        -------
        str or None
            The trial's previous checkpoint, which the caller deletes (None if there was none or it is unchanged).

        Raises
        ------
        StaleUnit
            If ``worker`` does not hold ``unit`` (it was declared dead and the unit re-queued): nothing changes.
        SpottuneError
            If ``at_step`` is outside ``[unit.start_step, unit.end_step]``.
        """
        if self.in_flight.get(worker) != unit or worker in self.failed_workers:
            raise StaleUnit(f"worker {worker}: does not hold unit {unit.unit_id}; the report is ignored")
        end = unit.end_step if at_step is None else int(at_step)
        if not unit.start_step <= end <= unit.end_step:
            raise SpottuneError(f"unit {unit.unit_id}: completed at step {end}, outside the unit")
        self.last_beat_s[worker] = now_s
        del self.in_flight[worker]
        self.steps_done[unit.trial_id] = self.steps_done.get(unit.trial_id, 0) + end - unit.start_step
        if checkpoint is None:
            return None
        old = self.checkpoints.get(unit.trial_id)
        self.checkpoints[unit.trial_id] = checkpoint
        return old if old != checkpoint else None

    def fail(self, worker: str) -> Unit | None:
        """Declare ``worker`` dead now (its process was seen to end: no need to wait for missed heartbeats).

        Its unit goes to the front of Q, as :meth:`expire` does; a second call changes nothing.

        Parameters
        ----------
        worker : str

        Returns
        -------
        Unit or None
            The re-queued unit (None if the worker held none or was already dead).
        """
        if worker in self.failed_workers:
            return None
        self.failed_workers.append(worker)
        unit = self.in_flight.pop(worker, None)
        if unit is not None:
            self.pending.appendleft(unit)
        return unit

    def leave(self, worker: str) -> Unit | None:
        """``worker`` leaves (its instance ended: a revocation, a hop, a failure): it is no longer watched.

        A unit it still held goes to the front of Q, uncounted: the trial resumes it from its latest checkpoint.

        Parameters
        ----------
        worker : str

        Returns
        -------
        Unit or None
            The re-queued unit, or None.
        """
        self.last_beat_s.pop(worker, None)
        unit = self.in_flight.pop(worker, None)
        if unit is not None:
            self.pending.appendleft(unit)
        return unit

    def withdraw(self, trial_id: str) -> list[Unit]:
        """Take ``trial_id``'s pending units out of Q (a driver replaces a re-queued unit by the range its
        orchestrator relaunches, or drops it for a trial that stopped).

        Parameters
        ----------
        trial_id : str

        Returns
        -------
        list of Unit
            The units taken out, in queue order.
        """
        out = [u for u in self.pending if u.trial_id == trial_id]
        for u in out:
            self.pending.remove(u)
        return out

    def expire(self, now_s: float) -> list[Unit]:
        """Declare dead every worker whose last heartbeat is at least :attr:`timeout_s` old; re-queue its unit.

        Re-queued units go to the front of Q, to resume from their trial's latest checkpoint (:attr:`checkpoints`).

        Returns
        -------
        list of Unit
            The re-queued units, in worker-name order.
        """
        requeued = []
        for worker in sorted(self.last_beat_s):
            if worker in self.failed_workers or now_s - self.last_beat_s[worker] < self.timeout_s:
                continue
            self.failed_workers.append(worker)
            unit = self.in_flight.pop(worker, None)
            if unit is not None:
                requeued.append(unit)
        for unit in reversed(requeued):
            self.pending.appendleft(unit)
        return requeued
