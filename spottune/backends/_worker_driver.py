"""The worker driver: the lifecycle the local, aws and ray backends share, around a transport.

Each of those backends runs every trial segment in a real worker (``spottune.backends.local.worker``'s loop:
restore, train, report JSON lines, checkpoint when told or on the IMDS notice). They differ only in how a
worker is reached: a process, an EC2 instance, a Ray actor. That part is the backend's transport
(:class:`spottune.backends._transport.WorkerTransport`); everything else is :class:`WorkerDriver`:

- **the queue loop** (:meth:`WorkerDriver.run`): timers (APScheduler date jobs on the accelerated wall clock,
  :class:`spottune.backends.local._clock.ScaledClock`) and the transport's threads only enqueue; one thread
  (the caller of ``run``) takes items off the queue and talks to the orchestrator, so it stays
  single-threaded;
- **the instance phases** (:data:`TRANSITIONS`, one explicit table like the orchestrator's);
- **the worker's reports** (:mod:`spottune.backends.local._messages`): ``ready`` becomes ``TrialLaunched``
  (notices and hourly ticks that came earlier are delivered after it), ``metric`` ``MetricReported``,
  ``saved`` ``CheckpointSaved`` (or an unconfirmed save the next ``Checkpoint`` confirms), ``failed`` or an
  unclean exit ``SegmentFailed``;
- **the ends**: a provider end is billed to its termination and reported ``SegmentEnded(provider)`` (or
  ``LaunchFailed`` before ``ready``); a ``Terminate`` kills the worker (or recycles it), bills to now and
  reports ``SegmentEnded(user)``;
- **units of work** (decision SV4, Cerebro's Q and Q'; :class:`spottune.scheduling.UnitQueues`, the driver's
  :attr:`WorkerDriver.units`): a fulfilled launch puts its (trial, segment) unit in Q; the worker takes it into
  Q' with its first report (it joins by its first heartbeat); every report is a heartbeat, and a worker started
  with ``--heartbeat-s`` also sends ``beat``. A worker that misses ``missed_beats`` beats of ``heartbeat_wall_s``
  (when the transport asks for heartbeats), or whose process is SIGKILLed under it, is lost
  (:meth:`WorkerDriver.worker_lost`): it is killed, its instance billed to now (reason :data:`WORKER_LOST`) and
  ended as ``SegmentEnded(provider)``, so its unit goes back to Q and the trial relaunches from its latest
  checkpoint; its later reports are stale and dropped. A save completes the unit and counts its steps once;
- **crash safety**: the journal replay that rebuilds the driver's state (:meth:`WorkerDriver.replay_journal`).

Delivery, launch caps and billing are :class:`spottune.backends._replay.ReplayDriver`'s, shared with the
simulator.

**Instance lifecycle** (:data:`TRANSITIONS`)::

    BOOTING --ready--> RUNNING --checkpoint--> CHECKPOINTING --saved--> SAVED --recycle--> RECYCLED
       |                  |  +---saved (on its own, at the notice)----->  |
       +--failed--> FAILED <--failed--+---------------------------------+  (SAVED never fails)
    any phase but RECYCLED --kill--> KILLED (output already written is still read: KILLED self-loops)
"""

from __future__ import annotations

import dataclasses
import enum
import queue
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from spottune.backends._base import Progress, RunRecord
from spottune.backends._replay import Instance, ReplayDriver
from spottune.backends._transport import WorkerTransport
from spottune.backends.local._clock import ScaledClock
from spottune.backends.local._messages import CheckpointCommand, Failed, Metric, Notice, Ready, Report, Saved
from spottune.errors import BackendError
from spottune.scheduling import Unit, UnitQueues
from spottune.journal import decode_event
from spottune.orchestrator import (CapacityRefused, Checkpoint, EndReason, Launch, LaunchFailed, MarketSignal,
                                   Orchestrator, Terminate)

__all__ = ["TRANSITIONS", "WORKER_LOST", "Phase", "WorkerDriver", "WorkerInstance", "driver_attribute", "journaled_report", "orphan_save"]


class Phase(enum.Enum):
    """Where one instance's worker is (see :data:`TRANSITIONS`)."""

    BOOTING = "booting"  #: spawned (or handed a segment), setting up and restoring
    RUNNING = "running"  #: reported ready: training
    CHECKPOINTING = "checkpointing"  #: told to checkpoint; the save is in flight
    SAVED = "saved"  #: reported a published checkpoint (told to, or on its own at the notice); then exits
    FAILED = "failed"  #: the trainable or the store failed (a ``Failed`` report or a non-zero exit)
    KILLED = "killed"  #: killed: the instance is gone (its output already queued still counts)
    RECYCLED = "recycled"  #: a clean segment's process went back to the warm pool (the hourly hop)


_P = Phase
#: The one table of the instance lifecycle: (phase, trigger) -> next phase. Triggers: ``ready``,
#: ``checkpoint`` (a Checkpoint command sent), ``saved``, ``failed``, ``kill``, ``recycle``. A pair that is
#: not here is a driver bug (``BackendError``). Output a worker wrote before it was killed is read after
#: the kill, hence the ``KILLED`` self-loops.
TRANSITIONS: dict[tuple[Phase, str], Phase] = {
    (_P.BOOTING, "ready"): _P.RUNNING,
    (_P.BOOTING, "failed"): _P.FAILED,  # setup or restore raised
    (_P.BOOTING, "kill"): _P.KILLED,  # terminated while booting
    (_P.RUNNING, "checkpoint"): _P.CHECKPOINTING,
    (_P.RUNNING, "saved"): _P.SAVED,  # saved on its own at the IMDS notice or SIGTERM: unconfirmed until asked
    (_P.RUNNING, "failed"): _P.FAILED,
    (_P.RUNNING, "kill"): _P.KILLED,
    (_P.CHECKPOINTING, "saved"): _P.SAVED,
    (_P.CHECKPOINTING, "failed"): _P.FAILED,
    (_P.CHECKPOINTING, "kill"): _P.KILLED,  # the provider was faster: the save is lost
    (_P.SAVED, "checkpoint"): _P.SAVED,  # the orchestrator asks for the save the worker already made
    (_P.SAVED, "recycle"): _P.RECYCLED,
    (_P.SAVED, "kill"): _P.KILLED,
    (_P.FAILED, "checkpoint"): _P.FAILED,  # its end answers instead
    (_P.FAILED, "kill"): _P.KILLED,
    (_P.KILLED, "ready"): _P.KILLED,
    (_P.KILLED, "checkpoint"): _P.KILLED,
    (_P.KILLED, "saved"): _P.KILLED,
    (_P.KILLED, "failed"): _P.KILLED,
    (_P.KILLED, "kill"): _P.KILLED,
}


#: Ledger reason of an instance whose worker was lost (missed heartbeats, or SIGKILLed under the driver): the
#: driver ends it (decision SV4).
WORKER_LOST = "worker-lost"


@dataclass(slots=True, kw_only=True)
class WorkerInstance(Instance):
    """An :class:`~spottune.backends._replay.Instance` whose steps run in a worker (a transport adds its handles).

    Attributes
    ----------
    phase : Phase
        Where its worker is (:data:`TRANSITIONS`).
    launched : bool
        ``TrialLaunched`` was delivered (the orchestrator knows the instance).
    resume_step : int
        The step the ``Launch`` asked the worker to restore.
    fallback_step : int or None
        The earlier step the store fell back to, if the worker restored one.
    notified : bool
        A ``RevocationNotice`` learnt from the worker or the cloud was sent (or deferred); at most one.
    unconfirmed_save : int or None
        A step the worker saved on its own (the IMDS notice), confirmed by the next ``Checkpoint``.
    pending : Checkpoint or None
        The ``Checkpoint`` action the worker's next save answers.
    deferred : list of events
        ``RevocationNotice`` / ``HourElapsed`` that came before ``ready``, delivered after it.
    stats : dict
        What ``meta["worker"]`` records of it (wall times, restore and save seconds, exit code).
    """

    phase: Phase = Phase.BOOTING
    launched: bool = False
    resume_step: int = 0
    fallback_step: int | None = None
    notified: bool = False
    unconfirmed_save: int | None = None
    pending: Checkpoint | None = None
    deferred: list[Any] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)

    def to(self, trigger: str) -> None:
        """Apply ``trigger`` by :data:`TRANSITIONS`.

        Parameters
        ----------
        trigger : {"ready", "checkpoint", "saved", "failed", "kill", "recycle"}
            What happened to the worker (a report, a command sent, or the driver's own effect).

        Raises
        ------
        BackendError
            If the table has no such transition (the phase is left unchanged).
        """
        nxt = TRANSITIONS.get((self.phase, trigger))
        if nxt is None:
            raise BackendError(f"instance {self.instance_id} of trial {self.trial_id}: "
                               f"can't handle {trigger!r} in phase {self.phase.name}")
        self.phase = nxt

    @property
    def gone(self) -> bool:
        """The worker no longer runs this instance (killed or recycled).

        Returns
        -------
        bool
            True in phase ``KILLED`` or ``RECYCLED``.
        """
        return self.phase in (Phase.KILLED, Phase.RECYCLED)

    def output_tail(self) -> str:
        """The end of what the worker wrote to its log, for a failure message.

        Returns
        -------
        str
            The log's last lines; "" here and for a transport that keeps no log (a transport's subclass overrides it).
        """
        return ""


class WorkerDriver(ReplayDriver):
    """Drive the orchestrator with every segment in a worker reached through ``transport`` (see the module doc).

    Parameters
    ----------
    orchestrator, history, revocation_model, billing, instance_facts, start_s, progress
        As :class:`~spottune.backends._replay.ReplayDriver` (``history`` and ``revocation_model`` may be None
        when the transport prices and ends instances itself; ``start_s``: engine time of ``ExperimentStarted``,
        seconds since the epoch).
    transport : WorkerTransport
        How segments reach their workers; bound to this driver here.
    trials : mapping trial_id -> (config, seed)
        The configuration and seed of each of the orchestrator's trials.
    time_scale : float
        Simulated seconds per wall-clock second (:class:`~spottune.backends.local._clock.ScaledClock`).
    reference_seconds_per_step : float
        Simulated seconds per step on the reference instance.
    max_wall_s : float
        :meth:`run` gives up (``BackendError``) after this many wall seconds.
    store_monitor : spottune.checkpoint.StoreMonitor, optional
        Launches pause while the checkpoint store is unreachable (:attr:`ReplayDriver.store_monitor`).
    heartbeat_wall_s : float, optional
        Wall seconds between two heartbeats of a live worker (its reports and ``beat`` lines); a worker silent for
        ``missed_beats * heartbeat_wall_s`` is lost (:meth:`worker_lost`). None (default): no heartbeat watch, for a
        transport whose workers do not beat (units are still accounted). Decision SV4.
    missed_beats : int, default 3
        Heartbeats a worker may miss before it is lost.

    Raises
    ------
    spottune.errors.SpottuneError
        If ``heartbeat_wall_s`` is not > 0 or ``missed_beats`` not >= 1 (:class:`~spottune.scheduling.UnitQueues`).
    """

    def __init__(self, orchestrator: Orchestrator, history: Any, revocation_model: Any, billing: Any,
                 instance_facts: Callable[[str], tuple[int, float | None]], start_s: float,
                 progress: Progress | None = None, *, transport: WorkerTransport,
                 trials: Mapping[str, tuple[Mapping[str, Any], int]], time_scale: float,
                 reference_seconds_per_step: float, max_wall_s: float, store_monitor: Any = None,
                 heartbeat_wall_s: float | None = None, missed_beats: int = 3):
        self.name = transport.name
        super().__init__(orchestrator, history, revocation_model, billing, instance_facts, start_s, progress)
        if store_monitor is not None:
            self.store_monitor = store_monitor
        self.transport = transport
        self.clock = ScaledClock(start_s, time_scale)
        self.trials = {t: (dict(c), int(s)) for t, (c, s) in trials.items()}
        self.start_s = float(start_s)
        self.ref_sps = float(reference_seconds_per_step)
        self.max_wall_s = float(max_wall_s)
        self._q: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self._resumed: list[Any] | None = None  # what a resume left for run() to deliver; None: a fresh run
        self._replayed_launches: dict[str, Launch] = {}
        #: Cerebro's Q and Q' of this run's (trial, segment) units, and the workers' heartbeats (wall seconds).
        self.units = UnitQueues(heartbeat_period_s=heartbeat_wall_s or 1.0, missed_beats=missed_beats)
        self.heartbeat_wall_s = heartbeat_wall_s
        self._joined: set[str] = set()  # workers (instance ids) that took their unit
        self._units_meta: dict[str, Any] = {"heartbeat_wall_s": heartbeat_wall_s, "missed_beats": missed_beats,
                                            "lost": [], "requeued": [], "stale_reports": 0, "deleted_versions": {}}
        #: ``prune(trial_id)`` deletes the trial's superseded checkpoint versions once a unit's save completes it
        #: (returns the versions deleted); None: the store's own retention only (a transport sets it).
        self.prune_checkpoints: Callable[[str], list[int]] | None = None
        self.record.meta["units"] = self._units_meta
        transport.bind(self)

    # -- what transports use -------------------------------------------------------------------------
    @property
    def instances(self) -> dict[str, Any]:
        """Every instance of the run by id, alive or not.

        Returns
        -------
        dict of str to WorkerInstance
            Instance id -> its ``WorkerInstance`` (or a transport's subclass); the driver's own dict, not a copy.
        """
        return self._instances

    @property
    def resuming(self) -> bool:
        """The run continues a killed one (:meth:`resume` was called).

        Returns
        -------
        bool
            True once :meth:`replay_journal` has rebuilt the driver's state from the journal.
        """
        return self._resumed is not None

    @property
    def log_s(self) -> float:
        """Engine time of the event being (or last) delivered; a resume may move it on (the setter stores a float).

        Returns
        -------
        float
            Seconds since the epoch (engine time).
        """
        return self._log_s

    @log_s.setter
    def log_s(self, value: float) -> None:
        self._log_s = float(value)

    def now_s(self) -> float:
        """Engine time now, never earlier than the last delivered event.

        Returns
        -------
        float
            Seconds since the epoch: the accelerated clock's engine time, or :attr:`log_s` if that is later.
        """
        return max(self.clock.engine_s(), self._log_s)

    def enqueue(self, item: tuple[Any, ...]) -> None:
        """Put an item on the queue the driver's thread handles (any thread may call this).

        Parameters
        ----------
        item : tuple
            ``(kind, *args)``: a kind the driver handles (``"event"``, ``"line"``, ``"eof"``, ``"hour"``,
            ``"terminate"``, ``"ended"``, ``"wake"``, ``"budget"``) or one the transport's ``handle`` accepts,
            then that handler's arguments (e.g. ``("line", inst, report)``, ``("eof", inst, returncode)``).
        """
        self._q.put(item)

    def at(self, t_s: float, item: tuple[Any, ...]) -> None:
        """Enqueue ``item`` when engine time reaches ``t_s`` (a date job on the accelerated clock).

        Parameters
        ----------
        t_s : float
            Engine time, seconds since the epoch.
        item : tuple
            ``(kind, *args)``, as :meth:`enqueue` takes it.
        """
        self.clock.call_at(t_s, self._q.put, item)

    def post(self, event: Any) -> None:
        """Deliver ``event`` after the one being delivered (it joins the back of the driver's queue).

        Parameters
        ----------
        event : spottune.orchestrator event
            E.g. ``SegmentEnded`` or ``LaunchFailed``; its ``time_s`` is engine time, seconds since the epoch.
        """
        self._post(event)

    def add_instance(self, inst: WorkerInstance) -> None:
        """Register a fulfilled launch's instance and put its hourly tick on the clock, and under a budget its
        hourly budget check (the same one the replayed markets schedule, decision DB5).

        Parameters
        ----------
        inst : WorkerInstance
            The new instance; its first ``hour`` item (and ``budget`` item when :attr:`budget_usd` is set) is due
            at ``inst.started_s`` + 3600 engine seconds.
        """
        from spotmarket import HOUR_S

        self._instances[inst.instance_id] = inst
        self._timer(inst.started_s + HOUR_S, "hour", inst)
        if self.budget_usd is not None:  # after the hourly tick: a hop at the boundary needs no new hour
            self._timer(inst.started_s + HOUR_S, "budget", inst)

    def timer(self, t_s: float, kind: str, inst: WorkerInstance) -> None:
        """At engine time ``t_s``, handle ``kind`` for ``inst``.

        Parameters
        ----------
        t_s : float
            Engine time, seconds since the epoch.
        kind : str
            ``"hour"`` (an ``HourElapsed``), ``"terminate"`` (the provider ends the instance:
            :meth:`provider_ended`) or a kind the transport's ``handle`` accepts.
        inst : WorkerInstance
        """
        self._timer(t_s, kind, inst)

    def market_instance(self, action: Launch, t: float, cls: type[WorkerInstance], **extra: Any) -> Any:
        """Ask the replayed market (the revocation model) for ``action``'s instance at engine time ``t``.

        Parameters
        ----------
        action : Launch
            The orchestrator's launch (market, max price in USD per instance-hour, resume step).
        t : float
            Engine time of the launch, seconds since the epoch.
        cls : type
            The instance class to build: ``WorkerInstance`` or a transport's subclass.
        **extra
            Further fields of ``cls`` (a transport's handles).

        Returns
        -------
        WorkerInstance or None
            The registered instance (a ``cls``), its notice, termination and hourly tick on the clock; or None
            after posting ``LaunchFailed`` (a refusal; a capacity refusal also excludes the market).

        Raises
        ------
        BackendError
            If the checkpoint store has been unreachable for too long.
        """
        inst = self._new_instance(action, t, self.ref_sps, cls, **extra)
        if inst is not None:
            self._schedule_timers(inst, t)
        return inst

    def provider_ends_leftovers(self, end_s: float) -> None:
        """After ``ExperimentFinished`` in a replayed market: the provider ends the instances still alive
        (revoked and saved ones); each worker is killed and its instance billed.

        Parameters
        ----------
        end_s : float
            The run's end, seconds since the epoch: each instance is billed to its termination or ``end_s``,
            whichever is first.
        """
        self._close_leftovers(end_s)

    def sequential_id(self) -> str:
        """The next instance id by the number of instances so far (for a transport without provider ids).

        Returns
        -------
        str
            ``i-00001``, ``i-00002``, ...
        """
        return ReplayDriver._next_instance_id(self)

    # -- clock hooks of ReplayDriver -----------------------------------------------------------------
    def _event_time(self, event: Any) -> float:
        return max(self._log_s, float(event.time_s))

    def _cap_time(self) -> float:
        return self.now_s()  # the clock runs on while an event is delivered: instances start at now_s

    def _post(self, event: Any) -> None:
        self._q.put(("event", event))

    def _timer(self, t_s: float, kind: str, inst: WorkerInstance) -> None:
        self.at(t_s, (kind, inst))

    def _wake_at(self, trial_id: str, at_s: float) -> None:
        self.at(at_s, ("wake", trial_id, at_s))

    def _next_instance_id(self) -> str:
        return self.transport.next_instance_id()

    def _price_series(self, inst: Any, end_s: float) -> Any:
        return self.transport.price_series(inst, end_s)

    # -- the loop -------------------------------------------------------------------------------------
    def run(self) -> RunRecord:
        """Drive the orchestrator from ``ExperimentStarted`` to ``ExperimentFinished`` (or a resume's end).

        The transport is opened and the clock started; a resumed driver (:meth:`replay_journal` done) reconciles
        with the transport instead of starting. The queue is served on the calling thread.

        Returns
        -------
        RunRecord
            The run's record (event log, ledger in USD, steps run and lost per instance); ``meta["worker"]`` maps
            each instance id to its worker stats (wall seconds, restore and save seconds, exit code).

        Raises
        ------
        BackendError
            Past ``max_wall_s`` wall seconds, when engine time passes the transport's ``end_s`` (the price
            history's end), or when the transport cannot start or carry out an effect. The transport's
            workers are stopped and released on the way out.
        """
        t = self.transport
        t.open()
        try:
            t.watch()
            self.clock.start()
            give_up = time.monotonic() + self.max_wall_s
            if self._resumed is None:
                self._start()
            else:
                t.reconcile()
            self._serve(give_up, t.end_s)
            t.close_leftovers()
        finally:
            t.stop()
            self.clock.stop()
            t.close()
        self.record.meta["worker"] = {iid: inst.stats for iid, inst in self._instances.items()}
        self.record.meta["units"] = self.units_summary()
        return self.record

    def _serve(self, give_up: float, end_s: float | None) -> None:
        """The one thread that talks to the orchestrator: handle queued items until the orchestrator is
        done or the driver stopped.

        Raises
        ------
        BackendError
            Past ``give_up`` (``time.monotonic()``), or when engine time passes ``end_s`` (the end of the
            price history; None: no end).
        """
        while not self.orchestrator.done and not self.stopped:
            if time.monotonic() > give_up:
                raise BackendError(f"the {self.name} run did not finish within {self.max_wall_s:.0f} wall "
                                   f"seconds (engine time {(self.now_s() - self.start_s) / 3600:.1f} h)")
            if end_s is not None and self.now_s() > end_s:
                raise BackendError(f"the price history ends at {end_s:.0f} s before the experiment finished")
            try:
                item = self._q.get(timeout=0.2)
            except queue.Empty:
                self._expire_units()
                continue
            self._handle(item)
            if self._q.empty():  # every queued report handled: a silent worker is silent
                self._expire_units()

    # -- units of work (decision SV4) -------------------------------------------------------------------
    def _expire_units(self) -> None:
        """Every worker whose last heartbeat is ``missed_beats * heartbeat_wall_s`` old is lost."""
        if self.heartbeat_wall_s is None:
            return
        n = len(self.units.failed_workers)
        self.units.expire(time.monotonic())
        for worker in self.units.failed_workers[n:]:
            inst = self._instances.get(worker)
            if inst is not None:
                self.worker_lost(inst, f"missed {self.units.missed_beats} heartbeats of {self.heartbeat_wall_s} s")

    def _unit_launched(self, action: Launch, before: set[str]) -> None:
        """A fulfilled launch's unit (resume step to target step) goes to Q, replacing a re-queued one of its trial."""
        for iid, inst in self._instances.items():
            if iid not in before and inst.trial_id == action.trial_id:
                self.units.withdraw(action.trial_id)
                self.units.submit(Unit(trial_id=action.trial_id, start_step=int(action.resume_step),
                                       end_step=max(int(action.resume_step), int(action.target_steps))))

    def _unit_report(self, inst: WorkerInstance) -> bool:
        """A report of ``inst``'s worker is its heartbeat; the first one takes its unit from Q into Q'.

        Returns False (the report is stale: drop it) if the worker was declared lost."""
        worker, now = inst.instance_id, time.monotonic()
        if worker in self.units.failed_workers:
            self._units_meta["stale_reports"] += 1
            return False
        if worker not in self._joined:
            if not inst.alive or inst.gone:
                return True  # the late output of a worker ended before it spoke: it never takes a unit
            self._joined.add(worker)
            self.units.dispatch(worker, now, trial_id=inst.trial_id)
        elif worker in self.units.last_beat_s:
            self.units.heartbeat(worker, now)
        return True

    def _unit_saved(self, inst: WorkerInstance, step: int, version: Any) -> None:
        """A save completes the worker's unit at ``step`` (its steps counted once); the worker is then unwatched."""
        worker = inst.instance_id
        unit = self.units.in_flight.get(worker)
        if unit is not None and unit.start_step <= step <= unit.end_step:
            old = self.units.complete(worker, unit, time.monotonic(), checkpoint=f"{unit.trial_id}@{step}:v{version}",
                                      at_step=step)
            if old is not None and self.prune_checkpoints is not None:
                try:  # superseded: only the latest (checkpoint_keep newest) versions stay
                    gone = self.prune_checkpoints(unit.trial_id)
                except Exception as exc:  # noqa: BLE001 - an unreachable store: the worker's next save prunes
                    self._units_meta.setdefault("prune_errors", []).append(f"{unit.trial_id}: {exc}")
                else:
                    self._units_meta["deleted_versions"][unit.trial_id] = \
                        self._units_meta["deleted_versions"].get(unit.trial_id, 0) + len(gone)
        self.units.leave(worker)

    def worker_lost(self, inst: WorkerInstance, why: str) -> None:
        """The worker of ``inst`` is lost (missed heartbeats, or its process was SIGKILLed under the driver).

        Its unit goes back to Q; the worker is killed (its later reports are stale), the instance billed to now
        as ended by the user (reason :data:`WORKER_LOST`) and ended as ``SegmentEnded(provider)`` (``LaunchFailed``
        before ``ready``), so the orchestrator relaunches the trial from its latest checkpoint (decision SV4).

        Parameters
        ----------
        inst : WorkerInstance
        why : str
            One line, for ``meta["units"]["lost"]``.
        """
        worker = inst.instance_id
        unit = self.units.fail(worker) or next((u for u in self.units.pending if u.trial_id == inst.trial_id
                                                and worker in self._joined), None)
        self._unit_requeued(inst, unit, "lost")
        self._units_meta["lost"].append({"instance_id": worker, "trial_id": inst.trial_id, "why": why,
                                         "unit": None if unit is None else unit.unit_id,
                                         "wall_s": round(self.clock.wall_s(), 3), "time_s": self.now_s()})
        inst.stats["lost"] = why
        if not inst.alive or inst.gone:
            return
        self.kill(inst)  # its output already written is read first, then dropped as stale
        self.end(inst, self.now_s(), "user", WORKER_LOST)
        self._q.put(("ended", inst, EndReason.PROVIDER))

    def _unit_requeued(self, inst: WorkerInstance, unit: Unit | None, why: str) -> None:
        if unit is not None:
            self._units_meta["requeued"].append({"instance_id": inst.instance_id, "unit": unit.unit_id, "why": why})

    def units_summary(self) -> dict[str, Any]:
        """The units' state for the run record (``meta["units"]``).

        Returns
        -------
        dict
            ``steps_done`` (trial -> steps of its completed units, counted once), ``checkpoints`` (trial -> its
            latest checkpoint, ``<trial>@<step>:v<version>``), ``pending`` (unit ids in Q; a trial that ended,
            finished, failed or stopped, has none left), ``in_flight``
            (instance id -> unit id), plus the heartbeat settings, ``lost`` workers, ``requeued`` units (instance,
            unit, why: ``lost``, ``failed``, ``provider`` or ``user``), ``stale_reports`` and ``deleted_versions``
            (trial -> superseded checkpoint versions deleted by :attr:`prune_checkpoints`).
        """
        u = self.units
        for trial_id, tr in self.orchestrator.trials.items():
            if tr.state.is_terminal():  # a failed or stopped trial's unit left in Q will not run
                u.withdraw(trial_id)
        self._units_meta.update(steps_done=dict(u.steps_done), checkpoints=dict(u.checkpoints),
                                pending=[x.unit_id for x in u.pending],
                                in_flight={w: x.unit_id for w, x in u.in_flight.items()})
        return self._units_meta

    def _handle(self, item: tuple[Any, ...]) -> None:
        """One queue item: ``(kind, *args)`` from a timer, a transport's thread or the driver itself."""
        kind, *args = item
        handler = {"event": self._deliver, "line": self.on_report, "eof": self.on_exit, "hour": self._on_hour,
                   "terminate": self.provider_ended, "ended": self._on_ended, "wake": self._on_wake,
                   "budget": self._budget_tick}.get(kind)
        if handler is not None:
            handler(*args)
        elif not self.transport.handle(kind, args):  # pragma: no cover - a driver bug
            raise BackendError(f"{self.name} backend: unknown queue item {kind!r}")

    # -- effects --------------------------------------------------------------------------------------
    def _launch(self, action: Launch) -> None:
        before = set(self._instances)
        self.transport.launch(action)
        self._unit_launched(action, before)

    def _terminate(self, action: Terminate) -> None:
        inst = self._instances[action.instance_id]
        if not self.transport.recycle(inst):  # the hourly hop may keep the worker for another segment
            self.kill(inst)
        self._end(inst, self.now_s(), "user", str(action.reason))
        self._q.put(("ended", inst, EndReason.USER))

    def kill(self, inst: WorkerInstance) -> None:
        """End the worker of ``inst`` (the instance is gone); its output already written is still read.

        Parameters
        ----------
        inst : WorkerInstance
            Left alone once recycled (its process runs another segment).
        """
        if inst.phase is Phase.RECYCLED:
            return  # the process runs another segment now
        inst.to("kill")
        self.transport.kill(inst)

    def _release(self, inst: Any) -> None:
        self.kill(inst)

    def _checkpoint(self, action: Checkpoint) -> None:
        inst = self._instances[action.instance_id]
        if inst.unconfirmed_save is not None and inst.unconfirmed_save == inst.step:
            step, inst.unconfirmed_save = inst.unconfirmed_save, None  # already saved on the IMDS notice
            self._post(inst.checkpoint_saved(self.now_s(), action.reason, step))
            return
        inst.pending = action
        inst.to("checkpoint")
        self.transport.command(inst, CheckpointCommand(reason=str(action.reason)))
        # if the worker is already gone, its end (failure, termination) answers instead

    def send_or_defer(self, inst: WorkerInstance, event: Any) -> None:
        """Deliver ``event`` about ``inst`` now, or after its ``TrialLaunched`` if it is not ready yet.

        Parameters
        ----------
        inst : WorkerInstance
        event : spottune.orchestrator event
            ``RevocationNotice`` or ``HourElapsed`` about ``inst`` (a deferred one is delivered with the time of
            the ``TrialLaunched``).
        """
        if inst.launched:
            self._deliver(event)
        else:
            inst.deferred.append(event)

    def _on_hour(self, inst: WorkerInstance) -> None:
        if inst.alive and not inst.gone:
            self.send_or_defer(inst, inst.hour_elapsed(self.now_s()))

    def _on_wake(self, trial_id: str, at_s: float) -> None:
        self._wake(trial_id, max(self.now_s(), at_s))

    def _launched(self, inst: WorkerInstance) -> None:
        inst.launched = True
        event = inst.trial_launched(self.now_s())
        if inst.fallback_step is not None:
            event = dataclasses.replace(event, restored_step=inst.fallback_step)
        self._deliver(event)

    # -- worker reports -------------------------------------------------------------------------------
    def on_report(self, inst: WorkerInstance, report: Report) -> None:
        """One report of ``inst``'s worker, to its handler; the reports of an instance already billed are dropped.

        Parameters
        ----------
        inst : WorkerInstance
        report : Report
            A line of the worker's stdout, decoded (:mod:`spottune.backends.local._messages`): ``Ready``,
            ``Metric``, ``Saved``, ``Notice`` (the transport's ``seen_notice``) or ``Failed``; ``Idle`` and
            ``Exited`` need no answer (the process end is :meth:`on_exit`).

        Raises
        ------
        BackendError
            If the worker restored another step than the ``Launch`` asked for (other than an earlier good
            checkpoint the store fell back to, reported with ``lost_steps``), or the report does not fit the
            instance's phase (:meth:`WorkerInstance.to`).
        """
        if not self._unit_report(inst):
            return  # its worker was declared lost: the unit is another worker's now (StaleUnit)
        if not inst.alive and not isinstance(report, Saved):
            return
        handler = {Ready: self._on_ready, Metric: self._on_metric, Saved: self._on_saved,
                   Notice: self.transport.seen_notice, Failed: self._on_failed}.get(type(report))
        if handler is not None:  # Idle and Exited need no answer (the process end is on_exit)
            handler(inst, report)

    def _on_ready(self, inst: WorkerInstance, report: Ready) -> None:
        restored = report.step
        if restored != inst.resume_step and not (0 <= restored < inst.resume_step and report.lost_steps is not None):
            raise BackendError(f"trial {inst.trial_id}: worker restored step {restored}, "
                               f"but the Launch asked for step {inst.resume_step}")
        if restored != inst.resume_step:  # the store fell back to an earlier good version
            inst.fallback_step = inst.step = inst.saved_step = restored
            self._checkpoint_step[inst.trial_id] = restored
            inst.stats.update(fallback_from_step=inst.resume_step, fallback_lost_steps=report.lost_steps)
        inst.stats.update(ready_wall_s=self.clock.wall_s(), restore_s=report.restore_s, restored_version=report.version)
        inst.to("ready")
        self._launched(inst)
        for event in inst.deferred:
            if not inst.gone:
                self._deliver(dataclasses.replace(event, time_s=self.now_s()))
        inst.deferred.clear()

    def _on_metric(self, inst: WorkerInstance, report: Metric) -> None:
        inst.step = int(report.step)
        inst.executed += 1
        metrics = {str(k): float(v) for k, v in dict(report.metrics or {}).items()}
        self._deliver(inst.metric_reported(self.now_s(), metrics))

    def _on_saved(self, inst: WorkerInstance, report: Saved) -> None:
        if not inst.alive:
            return  # published too late: the orchestrator rolls back; the store keeps it as unconfirmed
        step = int(report.step)
        inst.to("saved")
        self._unit_saved(inst, step, report.version)
        inst.saved_step = step
        self._checkpoint_step[inst.trial_id] = step
        inst.stats.setdefault("save_s", []).append(report.save_s)
        if inst.pending is not None:
            action, inst.pending = inst.pending, None
            self._deliver(inst.checkpoint_saved(self.now_s(), action.reason, step))
        else:
            inst.unconfirmed_save = step

    def notice_from_worker(self, inst: WorkerInstance, report: Notice) -> None:
        """For transports that learn of an interruption notice only from the worker's IMDS poll (aws, ray; where
        the market is replayed, the replay sends it): ``RevocationNotice`` with IMDS's deadline (two minutes if
        it cannot be read); at most one per instance (``inst.notified``).

        Parameters
        ----------
        inst : WorkerInstance
            Its ``notice_s`` and ``termination_s`` (seconds since the epoch) are set from the notice.
        report : Notice
            The worker's ``notice`` report; ``time``: the termination time from IMDS (ISO 8601, UTC).
        """
        now = self.now_s()
        inst.stats["notice_seen_s"] = now
        if inst.notified or not inst.alive or inst.gone:
            return
        inst.notified = True
        try:
            deadline = datetime.fromisoformat(str(report.time).replace("Z", "+00:00")).timestamp()
        except ValueError:
            deadline = now + 120.0  # AWS: two minutes after the notice
        inst.notice_s, inst.termination_s = now, max(now, deadline)
        self.send_or_defer(inst, inst.revocation_notice(now))

    def _on_failed(self, inst: WorkerInstance, report: Failed) -> None:
        inst.stats["failed"] = report.during
        self.failed(inst, f"{report.during}: {report.error}")

    def failed(self, inst: WorkerInstance, error: str) -> None:
        """The trainable (or the worker) failed on this instance: ``SegmentFailed`` (after ``TrialLaunched`` if the
        worker failed before it was ready).

        Parameters
        ----------
        inst : WorkerInstance
        error : str
            What failed, one line (the worker's ``during: error``, or the exit code and the log's tail).

        Raises
        ------
        BackendError
            If the instance's phase has no ``failed`` transition (``SAVED``, ``FAILED``, ``RECYCLED``:
            :data:`TRANSITIONS`).
        """
        inst.to("failed")
        self._unit_requeued(inst, self.units.leave(inst.instance_id), "failed")
        if not inst.launched:  # setup or restore raised: the trainable failed on this instance
            self._launched(inst)
        self._deliver(inst.segment_failed(self.now_s(), error))

    def on_exit(self, inst: WorkerInstance, returncode: int) -> None:
        """The worker of ``inst`` exited: a failure unless it was clean or already ended.

        Parameters
        ----------
        inst : WorkerInstance
        returncode : int
            The worker's exit code (0: clean; the worker's own codes are 1 after a failure, 2 on bad arguments).

        Raises
        ------
        BackendError
            If the worker of an instance still alive exits non-zero after it reported its save (phase ``SAVED``
            has no ``failed`` transition, :meth:`failed`).
        """
        inst.stats["returncode"] = returncode
        if inst.phase in (Phase.KILLED, Phase.FAILED) or not inst.alive or returncode == 0:
            return
        if returncode == -9:  # SIGKILLed under us (an operator, the OOM killer): the worker is lost, not the trainable
            self.worker_lost(inst, "the worker process was killed (SIGKILL)")
            return
        self.failed(inst, f"worker exited with code {returncode}: {inst.output_tail()}")

    def provider_ended(self, inst: WorkerInstance) -> None:
        """The provider ends ``inst`` now (its termination time): kill its worker, then ``SegmentEnded``.

        Nothing happens if the instance is already billed or its worker is gone.

        Parameters
        ----------
        inst : WorkerInstance
            Billed to ``inst.termination_s`` (seconds since the epoch) once its queued output is read.
        """
        if not inst.alive or inst.gone:
            return
        self.kill(inst)  # its remaining output is now queued ahead of the "ended" item
        self._q.put(("ended", inst, EndReason.PROVIDER))

    def _on_ended(self, inst: WorkerInstance, reason: EndReason) -> None:
        self.transport.ended(inst)
        self._segment_gone(inst, reason)

    def _segment_gone(self, inst: WorkerInstance, reason: EndReason) -> None:
        """The instance is gone: a provider end is billed (to its termination time), then ``SegmentEnded``, or
        ``LaunchFailed`` for one that died before it was ready (the contract, rules 2 and 6)."""
        # a unit still held goes back to Q: the trial resumes it from its latest checkpoint
        self._unit_requeued(inst, self.units.leave(inst.instance_id), str(reason))
        if reason is EndReason.PROVIDER:
            self._end(inst, inst.termination_s, "provider", inst.reason)
        if reason is EndReason.PROVIDER and not inst.launched:
            self._deliver(inst.died_booting(self.now_s()))
        else:
            self._deliver(inst.segment_ended(self.now_s(), reason))

    def end(self, inst: WorkerInstance, t: float, ended_by: str, reason: str) -> None:
        """Bill ``inst`` once (a second call does nothing): a ledger row, its steps run and lost, a ``billed``
        journal record, and an ``InstanceEnded`` for an orchestrator that observes instances.

        Parameters
        ----------
        inst : WorkerInstance
        t : float
            End of billing, seconds since the epoch (engine time).
        ended_by : {"provider", "user"}
            Who ended the instance (the billing rule differs: ``spotmarket.Billing``).
        reason : str
            Why, for the ledger (a ``spotmarket.Cause`` or the ``Terminate`` reason).

        Raises
        ------
        spottune.errors.JournalMismatch
            While the journal is replaying, if the ``billed`` record differs from the journaled one.
        """
        self._end(inst, t, ended_by, reason)

    # -- market signals ---------------------------------------------------------------------------------
    def inform(self, event: Any) -> None:
        """Deliver a model event to the orchestrator, which passes it to its models; a transport never touches
        them itself.

        Parameters
        ----------
        event : spottune.orchestrator event
            ``CapacityRefused``, ``InstanceEnded`` or ``MarketSignal`` (:data:`spottune.orchestrator.MODEL_EVENTS`).

        Raises
        ------
        BackendError
            If the orchestrator answers it with actions (an orchestrator bug).
        """
        self._inform(event)

    def refuse_capacity(self, market: Any, t: float, reason: str) -> None:
        """Journal that ``market`` cannot take a launch now (a ``capacity`` outcome) and hand ``CapacityRefused``
        to the orchestrator (a chooser with exclusions leaves the market out; a resume replays it).

        Parameters
        ----------
        market : spotmarket.prices.Market
        t : float
            Engine time, seconds since the epoch.
        reason : str
            Why, one line (kept as the exclusion's reason).
        """
        if self.journal is not None:
            self.journal.outcome("capacity", str(market), reason=reason, time_s=float(t))
        self._inform(CapacityRefused(time_s=float(t), market=market, reason=reason))

    def signal(self, market: Any, kind: str, value: float, t: float) -> None:
        """Journal one market signal (:mod:`spottune.backends.aws._signals`) and hand it to the predictor (a
        resume replays it from the journal); it is also listed in ``record.meta["signals"]``.

        Parameters
        ----------
        market : spotmarket.prices.Market
        kind : str
            The signal's kind (``spottune.backends.aws._signals``: a placement score or a rebalance
            recommendation).
        value : float
            Its value (a placement score 1..10; 1.0 for a rebalance recommendation).
        t : float
            Engine time of the signal, seconds since the epoch.

        Raises
        ------
        spottune.errors.JournalMismatch
            While the journal is replaying, if the ``signal`` outcome differs from the journaled one.
        """
        if self.journal is not None:
            self.journal.outcome("signal", str(market), signal=kind, value=float(value), time_s=float(t))
        self._apply_signal(market, kind, float(value), float(t))

    def _apply_signal(self, market: Any, kind: str, value: float, t: float) -> None:
        self.record.meta.setdefault("signals", []).append({"market": str(market), "kind": kind, "value": value,
                                                           "t": t})
        self._inform(MarketSignal(time_s=t, market=market, kind=kind, value=value))

    # -- crash safety ---------------------------------------------------------------------------------
    def resume(self, records: list[dict[str, Any]]) -> None:
        """Continue a killed run from its journal: the transport's rule (:meth:`WorkerTransport.resume`), on
        :meth:`replay_journal`.

        Parameters
        ----------
        records : list of dict
            The run's journaled records (:func:`spottune.journal.read_journal`, via
            :func:`spottune.journal.open_run`).

        Raises
        ------
        BackendError
            If the transport cannot continue a run, or the driver has no journal.
        """
        self.transport.resume(records)

    def restart_clock(self, start_s: float) -> None:
        """A resume: the engine clock starts again at ``start_s`` (same time scale).

        Parameters
        ----------
        start_s : float
            Engine time the clock restarts at, seconds since the epoch.
        """
        self.clock = ScaledClock(start_s, self.clock.time_scale)

    def replay_journal(self) -> None:
        """Deliver the journaled events again (actions checked) and rebuild the driver's state from them; leaves
        the pending wake-ups for :meth:`run` and each trial's last journaled ``Launch`` in
        :attr:`replayed_launches`.

        Raises
        ------
        BackendError
            If the driver has no journal, or the journal holds a record out of order.
        spottune.errors.JournalMismatch
            If an action or a billed amount (USD) differs from the journaled one.
        spottune.errors.ConfigError
            If a journaled event is of an unknown type (:func:`spottune.journal.decode_event`).
        """
        journal = self.journal
        if journal is None:
            raise BackendError(f"{self.name} backend: resume needs the run's journal (Journal(replay=records))")
        wakes: list[tuple[str, float]] = []
        launches: dict[str, Any] = {}
        while journal.replaying:
            rec = journal.peek()
            kind = rec["k"]
            if kind == "event":
                self._replay_event(decode_event(rec["e"]), launches, wakes)
            elif kind == "outcome" and rec["op"] == "launch":
                journal.next_record()
                if rec["fulfilled"]:
                    self.transport.replay_launch(rec, launches[rec["id"]])
                else:
                    self.transport.replay_refused(rec, launches[rec["id"]])
            elif kind == "billed":
                journal.next_record()
                self._replay_billed(rec)
            elif kind in ("intent", "outcome"):
                journal.next_record()
                self._replay_record(rec)
            else:
                raise BackendError(f"{self.name} backend: journal record {rec['n']} is an unexpected {kind!r} "
                                   f"(an action without its event)")
        self._resumed = wakes
        self._replayed_launches = launches

    @property
    def replayed_launches(self) -> dict[str, Launch]:
        """After :meth:`replay_journal`: each trial's last journaled ``Launch``.

        Returns
        -------
        dict of str to Launch
            Trial id -> ``Launch`` (empty before a replay).
        """
        return self._replayed_launches

    def _replay_record(self, rec: dict[str, Any]) -> None:
        """Another ``intent``/``outcome`` record met by the replay: a market signal is handed on again."""
        if rec["k"] == "outcome" and rec["op"] == "signal":
            from spotmarket.prices import Market

            self._apply_signal(Market.parse(rec["id"]), rec["signal"], float(rec["value"]), float(rec["time_s"]))
        elif rec["k"] == "outcome" and rec["op"] == "capacity":
            from spotmarket.prices import Market

            self._inform(CapacityRefused(time_s=float(rec["time_s"]), market=Market.parse(rec["id"]),
                                         reason=str(rec["reason"])))


    def _replay_event(self, event: Any, launches: dict[str, Any], wakes: list[tuple[str, float]]) -> None:
        from spottune import orchestrator as ev
        from spottune.backends._base import log_record

        now = self._log_s = self._event_time(event)
        self.record.log.append(log_record("event", event, now))
        actions = self._handle_event(event)
        for action in actions:
            self.record.log.append(log_record("action", action, now))
            if isinstance(action, ev.Checkpoint) and action.instance_id in self._instances:
                self._instances[action.instance_id].pending = action  # answered by a CheckpointSaved, if journaled
            if isinstance(action, ev.Launch):
                launches[action.trial_id] = action
            elif isinstance(action, ev.ScheduleWakeUp):
                wakes.append((action.trial_id, action.at_s))
            elif isinstance(action, ev.ExperimentFinished):
                self.record.end_s = now
        inst = self._instances.get(getattr(event, "instance_id", None))
        match event:
            case ev.WakeUp():
                due = [w for w in wakes if w[0] == event.trial_id]
                if due:
                    wakes.remove(min(due, key=lambda w: w[1]))
            case ev.TrialLaunched():
                inst.launched, inst.phase = True, Phase.RUNNING
                if event.restored_step is not None:
                    inst.step = inst.saved_step = self._checkpoint_step[inst.trial_id] = event.restored_step
            case ev.MetricReported() if inst is not None:
                inst.step = event.step
                inst.executed += 1
            case ev.CheckpointSaved() if inst is not None:
                inst.saved_step = self._checkpoint_step[inst.trial_id] = event.step
                inst.phase = Phase.SAVED
                inst.pending = None
        self.transport.replay_event(event)

    def _replay_billed(self, rec: dict[str, Any]) -> None:
        from spottune.errors import JournalMismatch

        inst = self._instances[rec["id"]]
        inst.alive = False
        # the journaled billing start (a ray segment's placement, else its launch)
        row = self.billing.bill(self._price_series(inst, rec["end_s"]), float(rec["started_s"]), rec["end_s"],
                                rec["ended_by"],
                                instance_id=inst.instance_id, reason=rec["reason"], trial_id=inst.trial_id,
                                max_price_usd_per_hour=inst.max_price)
        if float(row.charged_usd) != rec["charged_usd"]:
            raise JournalMismatch(rec["n"], rec, {**rec, "charged_usd": float(row.charged_usd)})
        self.record.ledger.append(row)
        self.usd += row.charged_usd
        self.record.instance_steps[inst.instance_id] = (int(rec["executed"]), int(rec["lost"]))
        if rec["observed"]:  # the billed record is the journal of an InstanceEnded: delivered again
            self._inform(self._instance_ended(inst, float(rec["end_s"]), bool(rec["interrupted"])))

    def post_lost_events(self, now: float) -> None:
        """Resume: the events a crash lost between an effect and its delivery, posted again.

        An instance billed whose ``SegmentEnded`` was still queued gets it; a trial whose ``Launch`` was
        journaled but never carried out (no instance of it waits) gets ``LaunchFailed``.

        Parameters
        ----------
        now : float
            Engine time of the posted events, seconds since the epoch.
        """
        for inst in self._instances.values():
            if not inst.alive and inst.launched and self.orchestrator.trials[inst.trial_id].instance_id == inst.instance_id:
                self._post(inst.segment_ended(now, EndReason.PROVIDER))
        waiting = {i.trial_id for i in self._instances.values() if i.alive and not i.launched}
        for trial_id, tr in self.orchestrator.trials.items():
            if str(tr.state) == "launching" and trial_id not in waiting:
                self._post(LaunchFailed(time_s=now, trial_id=trial_id, error="orchestrator restarted"))

    def adopt_orphan_save(self, inst: WorkerInstance, step: int, metrics: Any) -> bool:
        """Resume: the worker of ``inst`` saved ``step`` on its own after the orchestrator died (a ``lease`` save,
        :mod:`spottune.backends.local.worker`); the trial continues from there instead of from its last
        confirmed checkpoint.

        The steps the dead orchestrator never journaled (after ``inst.step``, up to ``step``) are delivered as
        ``MetricReported`` from ``metrics`` (one per step, as the worker reported them); then the save answers
        the ``Checkpoint`` in flight at the crash (or one a delivered step asked for), or, for a trial still
        running, a ``RevocationNotice`` (deadline now: the worker is gone) makes the orchestrator ask for it and
        the save answers at once (the unconfirmed save of :meth:`_checkpoint`). The trial then relaunches from
        ``step``; like the rollback it replaces, it counts one interruption for the trial. Billing ``inst`` is the
        caller's (every other instance killed by the crash is billed the same way).

        Parameters
        ----------
        inst : WorkerInstance
            An instance rebuilt by :meth:`replay_journal`.
        step : int
            The step the save holds (steps count from 1 across the trial's segments).
        metrics : sequence of [step, mapping of str to float]
            The save's metadata ``metrics``: ``[[step, {name: value}], ...]``, every step of its segment.

        Returns
        -------
        bool
            True once the save is adopted (also when a delivered step stopped the trial, e.g. a prune). False,
            changing nothing, unless ``inst`` is its trial's running instance (or its checkpointing one, with the
            ``Checkpoint`` journaled), ``step`` is past the trial's confirmed checkpoint and not before
            ``inst.step``, and ``metrics`` holds every step between.
        """
        from spottune.orchestrator import RevocationNotice, TrialState

        tr = self.orchestrator.trials[inst.trial_id]
        if not (inst.alive and inst.launched and tr.instance_id == inst.instance_id
                and (tr.state is TrialState.RUNNING or (tr.state is TrialState.CHECKPOINTING and inst.pending))):
            return False
        step = int(step)
        try:
            by_step = {int(s): {str(k): float(v) for k, v in dict(m).items()} for s, m in metrics or ()}
        except (TypeError, ValueError):
            return False
        if step <= self._checkpoint_step[inst.trial_id] or step < inst.step \
                or any(s not in by_step for s in range(inst.step + 1, step + 1)):
            return False
        now = self.now_s()
        for s in range(inst.step + 1, step + 1):
            if not inst.alive or tr.instance_id != inst.instance_id:
                return True  # a delivered step stopped the trial (a prune): it is done with this instance
            inst.step = s
            inst.executed += 1
            self._deliver(inst.metric_reported(now, by_step[s]))
        if not inst.alive or tr.instance_id != inst.instance_id:
            return True
        inst.saved_step = self._checkpoint_step[inst.trial_id] = step
        if inst.pending is not None:
            action, inst.pending = inst.pending, None
            self._deliver(inst.checkpoint_saved(now, action.reason, step))
        else:
            inst.unconfirmed_save = step
            self._deliver(RevocationNotice(time_s=now, trial_id=inst.trial_id, instance_id=inst.instance_id,
                                           deadline_s=now))
        return True

    def worker_saves(self, records: list[dict[str, Any]], find: Callable[[WorkerInstance], Any], since_s: float,
                     trained_after: Callable[[Any], bool] = lambda info: True) -> tuple[dict[str, Any], float]:
        """Resume: the checkpoints the running trials' workers saved on their own, and when the last of them stopped.

        Parameters
        ----------
        records : list of dict
            The killed run's journal (its ``TrialLaunched`` and ``MetricReported`` events date each instance's
            last journaled report).
        find : callable
            ``find(inst)`` returns the save of ``inst``'s worker (:func:`orphan_save`) or None.
        since_s : float
            The last journaled engine time, seconds since the epoch: the clock restarts there at the earliest.
        trained_after : callable, optional
            ``trained_after(save)`` is True when the steps of ``save`` beyond the journal were trained after the
            worker's last journaled report, so they took engine time (default: every save).

        Returns
        -------
        saves : dict of str to CheckpointInfo
            Instance id -> its worker's save, for every running trial's instance that has one.
        stop_s : float
            Engine time the clock restarts at, seconds since the epoch: ``since_s``, or later by the steps a worker
            trained after its last journaled report (at its instance's speed; decision CS4).
        """
        reported: dict[str, float] = {}
        for rec in records:
            e = rec.get("e") if rec.get("k") == "event" else None
            if e is not None and e.get("type") in ("TrialLaunched", "MetricReported"):
                reported[e["instance_id"]] = float(e["time_s"])
        saves, stop_s = {}, since_s
        for inst in self._instances.values():
            if inst.alive and inst.launched and self.orchestrator.trials[inst.trial_id].instance_id == inst.instance_id:
                info = find(inst)
                if info is None:
                    continue
                saves[inst.instance_id] = info
                if trained_after(info):
                    stop_s = max(stop_s, reported.get(inst.instance_id, since_s)
                                 + max(0, info.step - inst.step) * inst.seconds_per_step)
        return saves, stop_s

    def rearm_wakeups(self) -> None:
        """After a resume, with the clock running: the wake-ups the replay left pending go on the clock again."""
        for trial_id, at_s in self._resumed or ():
            self._wake_at(trial_id, at_s)


def journaled_report(inst: WorkerInstance, report: Any) -> bool:
    """A report of an instance kept across a resume that the journal already holds (handled and journaled
    before the crash, then read again: decisions AWS14, R11): its ``ready`` once launched, a step not past
    ``inst.step``, a save already confirmed.

    Parameters
    ----------
    inst : WorkerInstance
        The kept instance, as the journal's replay left it (then as its reports moved it).
    report : Report
        A decoded report of its worker (:mod:`spottune.backends.local._messages`).

    Returns
    -------
    bool
        True if the report must be dropped.
    """
    from spottune.backends.local._messages import Metric, Ready, Saved

    if isinstance(report, Ready):
        return inst.launched
    if isinstance(report, Metric):
        return int(report.step) <= inst.step
    if isinstance(report, Saved):
        return inst.phase is Phase.SAVED and inst.pending is None and int(report.step) <= inst.saved_step
    return False


class LazyStore:
    """The run's checkpoint store, opened at its first call and kept (a resume reads the workers' own saves from it).

    Parameters
    ----------
    url : str
        The store's URL or folder (:func:`spottune.checkpoint.open_store`).
    options : mapping
        fsspec storage options.
    checkpoint_key : str or None
        The experiment's checkpoint key (hex); manifests are authenticated with it.
    """

    def __init__(self, url: str, options: Mapping[str, Any], checkpoint_key: str | None):
        self.url, self.options, self.checkpoint_key = url, options, checkpoint_key
        self._store: Any = None

    def __call__(self) -> Any:
        """The opened store (:class:`spottune.checkpoint.CheckpointStore`); raises as ``open_store`` does."""
        if self._store is None:
            from spottune.checkpoint import open_store
            from spottune.checkpoint._secrets import CHECKPOINT_KEY_ENV, store_key

            self._store = open_store(self.url, self.options, key=store_key({CHECKPOINT_KEY_ENV: self.checkpoint_key}))
        return self._store


def orphan_save(store: Callable[[], Any], inst: WorkerInstance, meta: dict[str, Any], worker_id: str | None = None) -> Any:
    """Resume: the checkpoint the worker of ``inst`` saved on its own when its driver died (a ``lease`` save), or None.

    It is the trial's newest intact version in the store (manifest authenticated with the experiment's key), if
    ``inst``'s worker wrote it (its metadata's ``instance_id``); decision CS4.

    Parameters
    ----------
    store : callable
        Returns the opened checkpoint store (:func:`spottune.checkpoint.open_store`); called here, so that an
        unreachable store is caught like an unreadable one.
    inst : WorkerInstance
        An instance rebuilt by :meth:`WorkerDriver.replay_journal`.
    meta : dict
        The run record's ``meta``: an unreadable store is noted in its ``resume_store_errors``.
    worker_id : str, optional
        The id ``inst``'s worker writes in its saves' metadata (default ``inst.instance_id``; the aws worker writes
        its launch id).

    Returns
    -------
    spottune.checkpoint.CheckpointInfo or None
        The save (its ``step`` and ``metadata``), or None: no save of ``inst``, or the store could not be read
        (the trial then relaunches from its confirmed checkpoint, as without one).
    """
    try:
        info = store().latest_good(inst.trial_id)
    except Exception as exc:  # noqa: BLE001 - unreadable store: relaunch from the confirmed checkpoint
        meta.setdefault("resume_store_errors", []).append(f"{inst.trial_id}: {exc}")
        return None
    if info is None or info.metadata.get("instance_id") != (worker_id or inst.instance_id):
        return None
    return info


def driver_attribute(name: str, doc: str, *, part: str = "driver") -> property:
    """A backend's property that reads and writes attribute ``name`` of its ``part`` (its driver or transport).

    The local, aws and ray backends hold a :class:`WorkerDriver` and a transport (composition); what callers
    read or set on a backend (``record``, ``journal``, ``budget_usd``, ...) lives there.

    Parameters
    ----------
    name : str
        The attribute of the part, e.g. ``"record"``.
    doc : str
        The property's docstring.
    part : str, default "driver"
        The backend's attribute holding it: ``"driver"`` or ``"transport"``.

    Returns
    -------
    property
        A read-write property for the backend's class body.
    """

    def get(self: Any) -> Any:
        return getattr(getattr(self, part), name)

    def put(self: Any, value: Any) -> None:
        setattr(getattr(self, part), name, value)

    return property(get, put, doc=doc)
