"""The local backend: real worker processes, real checkpoints, a spot market replayed on a fast wall clock.

Each trial segment is a real OS process, ``python -m spottune.backends.local.worker`` (:mod:`spottune.backends.local.worker`), that
restores from the checkpoint store (a folder or S3 through fsspec), trains, reports metrics as JSON
lines on its stdout, and polls ``/latest/meta-data/spot/instance-action`` on the backend's own IMDS
emulator (:class:`spottune.backends.local.imds.ImdsEmulator`), exactly as it would poll the real IMDS on EC2.

The driver contract is the one of :mod:`spottune.backends._base`; the differences from the simulator
are only in where effects come from (the [I] decisions of this backend):

- **Clock** (:mod:`spottune.backends.local._clock`). Engine time = ``start_s + (wall seconds since start) *
  time_scale``. Every timed effect (revocation notice, termination, the hourly tick ``HourElapsed``,
  ``ScheduleWakeUp``) is an APScheduler date job at the wall time its engine time maps to. Jobs and
  the workers' reader threads only enqueue; one thread (the caller of :meth:`LocalBackend.run`) talks
  to the orchestrator, so it stays single-threaded.
- **Launch.** The injected revocation model decides fulfilment, notice and termination times, as in
  the simulator (:mod:`spottune.backends._replay`). A fulfilled launch hands the segment to a warm
  worker of the pool (:mod:`spottune.backends.local._pool`), or starts one; its real start-up (imports,
  restore) is the instance's boot time, scaled by ``time_scale``. ``TrialLaunched`` is sent when the
  worker prints ``ready``. Step pacing: a step takes ``speed.seconds_per_step(...) / time_scale`` wall
  seconds (the worker sleeps the rest), or longer if the real step is slower.
- **Revocation.** At the notice time the backend flips the emulator for that instance (the worker
  sees it at its next poll, checkpoints on its own and exits) and sends ``RevocationNotice``; the
  orchestrator's ``Checkpoint`` reaches the worker on stdin, whichever comes first wins. At the
  termination time the worker process is killed (SIGKILL) if still alive; a checkpoint not finished
  by then is lost and the store keeps the previous good version.
- **Checkpoint.** ``Checkpoint`` actions become a ``CheckpointCommand`` on the worker's stdin;
  ``CheckpointSaved`` is sent when the worker reports the published, verified version. Real
  checkpoint and restore times are measured (``meta["worker"]``), not modelled.
- **Terminate.** Kills the worker (the instance is gone) and bills up to now.
- **Billing** and the ledger are the simulator's (:class:`spotmarket.Billing`).

**Instance lifecycle** (:data:`TRANSITIONS`, one explicit table like the orchestrator's)::

    BOOTING --ready--> RUNNING --checkpoint--> CHECKPOINTING --saved--> SAVED --recycle--> RECYCLED
       |                  |  +---saved (on its own, at the notice)----->  |
       +--failed--> FAILED <--failed--+---------------------------------+  (SAVED never fails)
    any phase but RECYCLED --kill--> KILLED (output already written is still read: KILLED self-loops)

Worker reports and commands are typed (:mod:`spottune.backends.local._messages`).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import queue
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from spottune.backends._base import Progress, RunRecord
from spottune.backends.local._clock import ScaledClock
from spottune.backends._replay import Instance, ReplayDriver
from spottune.backends.local._messages import CheckpointCommand, Failed, Metric, Notice, Ready, Report, Saved
from spottune.backends.local._pool import Worker, WorkerPool, kill_leftover_workers, segment_argv
from spottune.errors import BackendError
from spotmarket import Cause
from spottune.backends.local.imds import ImdsEmulator
from spottune.journal import decode_event
from spottune.orchestrator import Checkpoint, EndReason, Launch, Orchestrator, Terminate

__all__ = ["LocalBackend", "LocalSettings"]

_MIN_POLL_WALL_S = 0.05  # never poll the emulator more often than 20 times a second


@dataclass(slots=True)
class LocalSettings:
    """Knobs of the local backend.

    Parameters
    ----------
    store_url : str
        Checkpoint store root (folder, ``file://``, ``s3://bucket/prefix``); workers open it themselves,
        so ``memory://`` does not work here.
    storage_options : mapping, default {}
        fsspec options for ``store_url`` (passed to every worker in a mode-0600 file, never on its
        command line).
    time_scale : float, default 600.0
        Simulated seconds per wall-clock second.
    poll_s : float, default 5.0
        Simulated seconds between a worker's IMDS polls (AWS recommends 5 s); the wall interval is
        ``poll_s / time_scale`` but never below 0.05 s.
    max_steps : int, optional
        The trials' ``S_max``, given to every trainable (``Trainable.max_steps``).
    reference_seconds_per_step : float, optional
        Overrides the workload's simulated seconds per step on the reference instance.
    checkpoint_keep : int, default 2
        Versions kept per trial in the store.
    max_wall_s : float, default 3600.0
        Give up (``BackendError``) after this many wall seconds.
    log_dir : str, optional
        Where each worker's stderr goes (``w00001.log``, ...); default: a temporary folder.
    python : str, default ``sys.executable``
        Interpreter that runs ``-m spottune.backends.local.worker``.
    standby_workers : int, optional
        Spare warm workers (:mod:`spottune.backends.local._pool`) kept during the run; default
        ``min(4, number of trials)``; 0 starts every segment cold. Before the clock starts, one warm
        worker per trial plus the spares are prepared.
    standby_timeout_s : float, default 300.0
        Wall seconds to wait for the pool to warm up before the clock starts.
    store_outage_s : float, default 120.0
        Launches pause while the checkpoint store is unreachable; after this many wall seconds of
        continuous outage the run ends with ``BackendError`` ("... is unreachable ...").
    checkpoint_key : str, optional
        The experiment's checkpoint key (hex, at least 32 digits) in every worker's environment: it
        authenticates the store's manifests and function-API pickles. Default: the driver's
        ``$SPOTTUNE_CHECKPOINT_KEY`` if set, else a new random key per run (the composition root passes
        :func:`spottune.checkpoint._secrets.experiment_key`, kept in the results folder).
    """

    store_url: str
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    time_scale: float = 600.0
    poll_s: float = 5.0
    max_steps: int | None = None
    reference_seconds_per_step: float | None = None
    checkpoint_keep: int = 2
    max_wall_s: float = 3600.0
    log_dir: str | None = None
    python: str = sys.executable
    standby_workers: int | None = None
    standby_timeout_s: float = 300.0
    store_outage_s: float = 120.0
    checkpoint_key: str | None = None


class Phase(enum.Enum):
    """Where one instance's worker process is (see :data:`TRANSITIONS`)."""

    BOOTING = "booting"  #: spawned (or handed a segment), setting up and restoring
    RUNNING = "running"  #: reported ready: training
    CHECKPOINTING = "checkpointing"  #: told to checkpoint; the save is in flight
    SAVED = "saved"  #: reported a published checkpoint (told to, or on its own at the notice); then exits
    FAILED = "failed"  #: the trainable or the store failed (a ``Failed`` report or a non-zero exit)
    KILLED = "killed"  #: SIGKILLed: the instance is gone (its output already queued still counts)
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


@dataclass(slots=True, kw_only=True)
class _Instance(Instance):
    phase: Phase = Phase.BOOTING
    launched: bool = False  # TrialLaunched was delivered (the orchestrator knows the instance)
    resume_step: int = 0
    fallback_step: int | None = None  # restored an earlier step than resume_step (store fallback)
    worker: Worker | None = None
    unconfirmed_save: int | None = None  # a save the worker made on its own (IMDS notice)
    pending: Checkpoint | None = None  # the Checkpoint action its save will answer
    deferred: list[Any] = field(default_factory=list)  # notice / hour events that fired before ready
    stats: dict[str, Any] = field(default_factory=dict)

    def to(self, trigger: str) -> None:
        """Apply ``trigger`` by :data:`TRANSITIONS`.

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
        """The worker process no longer runs this instance (killed or recycled)."""
        return self.phase in (Phase.KILLED, Phase.RECYCLED)


class LocalBackend(ReplayDriver):
    """Run every trial segment as a real worker process against a market replayed on the wall clock.

    Parameters
    ----------
    orchestrator, history, revocation_model, billing, instance_facts, start_s, progress
        As :class:`~spottune.backends._replay.ReplayDriver`.
    workload : str
        Built-in workload name or ``"module:Class"`` importable by the worker processes.
    trials : mapping trial_id -> (config, seed)
        The configuration and seed of each of the orchestrator's trials.
    settings : LocalSettings
    """

    name = "local"

    def __init__(self, orchestrator: Orchestrator, history: Any, revocation_model: Any, billing: Any, workload: str,
                 trials: Mapping[str, tuple[Mapping[str, Any], int]],
                 instance_facts: Callable[[str], tuple[int, float | None]], start_s: float,
                 settings: LocalSettings, progress: Progress | None = None):
        from spottune.workloads import get_workload

        missing = set(orchestrator.trials) - set(trials)
        if missing:
            raise BackendError(f"local backend: no configuration for trials {sorted(missing)}")
        if settings.store_url.startswith("memory://"):
            raise BackendError("the local backend's workers are separate processes: use a folder or s3:// store")
        super().__init__(orchestrator, history, revocation_model, billing, instance_facts, start_s, progress)
        self.clock = ScaledClock(start_s, settings.time_scale)
        self.workload = workload
        self.trials = {t: (dict(c), int(s)) for t, (c, s) in trials.items()}
        self.start_s = float(start_s)
        self.settings = settings
        wl = get_workload(workload)
        self.ref_sps = float(settings.reference_seconds_per_step or wl.reference_seconds_per_step)
        self._q: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self._imds = ImdsEmulator()
        n = settings.standby_workers
        self._spares = min(4, len(self.trials)) if n is None else max(0, int(n))
        self._pool = WorkerPool(python=settings.python, workload=workload, store_url=settings.store_url,
                                storage_options=settings.storage_options, spares=self._spares,
                                on_line=lambda inst, msg: self._q.put(("line", inst, msg)),
                                on_eof=lambda inst, code: self._q.put(("eof", inst, code)),
                                on_spawn=self._spawned, checkpoint_key=settings.checkpoint_key)
        self._resumed: list[Any] | None = None  # what resume() left for run() to deliver
        from spottune.checkpoint import StoreMonitor, open_store

        self.store_monitor = StoreMonitor(open_store(settings.store_url, settings.storage_options),
                                          give_up_after_s=settings.store_outage_s)
        self.record.meta.update(time_scale=settings.time_scale, store=settings.store_url,
                                reference_seconds_per_step=self.ref_sps, poll_s=settings.poll_s)

    # -- clock --------------------------------------------------------------------------------------
    def now_s(self) -> float:
        """Engine seconds now (never earlier than the last delivered event)."""
        return max(self.clock.engine_s(), self._log_s)

    def _at(self, t_s: float, item: tuple[Any, ...]) -> None:
        """Enqueue ``item`` when engine time reaches ``t_s``."""
        self.clock.call_at(t_s, self._q.put, item)

    def _event_time(self, event: Any) -> float:
        return max(self._log_s, float(event.time_s))

    def _post(self, event: Any) -> None:
        self._q.put(("event", event))

    def _timer(self, t_s: float, kind: str, inst: _Instance) -> None:
        self._at(t_s, (kind, inst))

    def _wake_at(self, trial_id: str, at_s: float) -> None:
        self._at(at_s, ("wake", trial_id, at_s))

    # -- the loop -----------------------------------------------------------------------------------
    def run(self) -> RunRecord:
        tmp = None
        log_dir = self.settings.log_dir
        if log_dir is None:
            tmp = tempfile.TemporaryDirectory(prefix="spottune-local-")
            log_dir = tmp.name
        Path(log_dir).mkdir(parents=True, exist_ok=True)
        s, pool = self.settings, self._pool
        pool.log_dir = Path(log_dir)
        try:
            # one warm worker per trial for the first launches, plus the spares, all warm before the clock starts
            warm_s = pool.warm_up(len(self.trials) + self._spares if pool.enabled else 0, s.standby_timeout_s)
            self.record.meta.update(standby_workers=self._spares, pool_warm_up_wall_s=round(warm_s, 3))
            self._imds.start()
            self.clock.start()
            give_up = time.monotonic() + s.max_wall_s
            if self._resumed is None:
                self._start()
            else:
                self._reconcile()
            end_s = float(self.history.end_s)
            self._serve(give_up, end_s)
            self._close_leftovers(end_s)  # revoked-and-saved instances: the provider ends them
        finally:
            pool.stop_all()
            self.clock.stop()
            self._imds.stop()
            if tmp is not None:
                tmp.cleanup()
        self.record.meta["worker"] = {iid: inst.stats for iid, inst in self._instances.items()}
        return self.record

    def _serve(self, give_up: float, end_s: float | None) -> None:
        """The one thread that talks to the orchestrator (L1): handle queued items until the orchestrator is
        done or the driver stopped.

        Raises
        ------
        BackendError
            Past ``give_up`` (``time.monotonic()``), or when engine time passes ``end_s`` (the end of the
            price history; None: no end).
        """
        while not self.orchestrator.done and not self.stopped:
            if time.monotonic() > give_up:
                raise BackendError(f"the {self.name} run did not finish within {self.settings.max_wall_s:.0f} wall "
                                   f"seconds (engine time {(self.now_s() - self.start_s) / 3600:.1f} h)")
            if end_s is not None and self.now_s() > end_s:
                raise BackendError(f"the price history ends at {end_s:.0f} s before the experiment finished")
            try:
                item = self._q.get(timeout=0.2)
            except queue.Empty:
                continue
            self._handle(item)

    def _handle(self, item: tuple[Any, ...]) -> None:
        """One queue item: ``(kind, *args)`` from a timer, a reader thread or the driver itself."""
        kind, *args = item
        handler = {"event": self._deliver, "line": self._on_line, "eof": self._on_eof, "notice": self._on_notice,
                   "hour": self._on_hour, "terminate": self._on_termination, "ended": self._on_ended,
                   "wake": self._on_wake, "budget": self._budget_tick}.get(kind)
        if handler is None:  # pragma: no cover - a driver bug
            raise BackendError(f"local backend: unknown queue item {kind!r}")
        handler(*args)

    # -- crash safety (issue 15) ---------------------------------------------------------------------
    def _spawned(self, worker: Worker) -> None:
        """Journal every worker process started (its PID), so a resume can find it if we die."""
        if self.journal is not None:
            owner = getattr(worker.owner, "instance_id", None)
            self.journal.outcome("spawn", worker.name, pid=worker.proc.pid, instance_id=owner)

    def resume(self, records: list[dict[str, Any]]) -> None:
        """Continue a killed run: kill its leftover workers, replay its journal, then relaunch (decision CS4).

        1. Every worker process the journal names (``spawn`` outcomes) that still runs, and is a spottune
           worker of this store (its command line says so: a reused PID is left alone), is SIGKILLed.
           Adopting them is impossible: their stdin and stdout were pipes to the dead process.
        2. The journaled events are delivered again to the fresh orchestrator; each returned action is
           checked against the journaled one (:class:`~spottune.errors.JournalMismatch`); launches, billed
           runs (ledger rows, and their ``InstanceEnded`` delivered again), capacity refusals (their
           ``CapacityRefused``), checkpoint steps and pending wake-ups rebuild the driver's state.
        3. :meth:`run` then restarts the clock at the last journaled time (the replayed market stood
           still while the process was down), re-arms the pending wake-ups and the provider ends of
           instances the trials had left, and ends every instance whose worker was killed: billed as
           ended by the user (reason ``restart``) and reported as ``LaunchFailed`` (still booting) or
           ``SegmentEnded(provider)``, so that the trial relaunches from its last checkpoint (the steps
           since are lost, and the orchestrator counts one interruption).
        """
        killed = kill_leftover_workers(records, self.settings.store_url)
        self._replay_journal()
        self.clock = ScaledClock(self._log_s, self.settings.time_scale)  # the replayed market resumes where it stood
        self.record.meta.setdefault("resumes", []).append({"at_s": self._log_s, "records": self.journal.n,
                                                            "killed_workers": killed})

    def _replay_journal(self) -> None:
        """Resume step 2 (shared with the aws backend): deliver the journaled events again (actions checked)
        and rebuild the driver's state from them; leaves the pending wake-ups in ``self._resumed``."""
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
                    self._replay_launch(rec, launches[rec["id"]])
                else:
                    self._replay_refused(rec, launches[rec["id"]])
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
        self._replayed_launches = launches  # trial id -> its last journaled Launch

    def _replay_refused(self, rec: dict[str, Any], action: Any) -> None:
        """A journaled capacity refusal (its launch outcome) is delivered again as ``CapacityRefused``."""
        if rec.get("cause") == Cause.REFUSED_CAPACITY:
            from spottune.orchestrator import CapacityRefused

            self._inform(CapacityRefused(time_s=float(rec["time_s"]), market=action.market, reason=rec["cause"]))

    def _replay_record(self, rec: dict[str, Any]) -> None:
        """Another ``intent``/``outcome`` record met by the replay (the aws backend's signals); nothing here."""

    def _replay_event(self, event: Any, launches: dict[str, Any], wakes: list[tuple[str, float]]) -> None:
        from spottune import orchestrator as ev
        from spottune.backends._base import log_record

        now = self._log_s = self._event_time(event)
        self.record.log.append(log_record("event", event, now))
        actions = self._handle_event(event)
        for action in actions:
            self.record.log.append(log_record("action", action, now))
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

    def _replay_launch(self, rec: dict[str, Any], action: Any) -> None:
        from spottune.speed import seconds_per_step

        vcpus, ecu = self.instance_facts(action.market.instance_type)
        iid = rec["instance_id"]
        self._instances[iid] = _Instance(
            instance_id=iid, trial_id=action.trial_id, market=action.market, max_price=action.max_price_usd_per_hour,
            started_s=float(rec["time_s"]), notice_s=float(rec["notice_s"]), termination_s=float(rec["termination_s"]),
            seconds_per_step=seconds_per_step(self.ref_sps, vcpus, ecu), vcpus=vcpus, reason=str(rec["cause"]),
            step=action.resume_step, saved_step=action.resume_step, resume_step=action.resume_step)

    def _replay_billed(self, rec: dict[str, Any]) -> None:
        from spottune.errors import JournalMismatch

        inst = self._instances[rec["id"]]
        inst.alive = False
        row = self.billing.bill(self._price_series(inst, rec["end_s"]), inst.started_s, rec["end_s"], rec["ended_by"],
                                instance_id=inst.instance_id, reason=rec["reason"], trial_id=inst.trial_id,
                                max_price_usd_per_hour=inst.max_price)
        if float(row.charged_usd) != rec["charged_usd"]:
            raise JournalMismatch(rec["n"], rec, {**rec, "charged_usd": float(row.charged_usd)})
        self.record.ledger.append(row)
        self.usd += row.charged_usd
        self.record.instance_steps[inst.instance_id] = (int(rec["executed"]), int(rec["lost"]))
        if rec["observed"]:  # the billed record is the journal of an InstanceEnded: delivered again
            self._inform(self._instance_ended(inst, float(rec["end_s"]), bool(rec["interrupted"])))

    def _reconcile(self) -> None:
        """After a resume, on the driver thread with the clock running: see :meth:`resume`, step 3."""
        for trial_id, at_s in self._resumed or ():
            self._wake_at(trial_id, at_s)
        self._post_lost_events(self.now_s())
        for inst in list(self._instances.values()):
            if not inst.alive:
                continue
            tr = self.orchestrator.trials[inst.trial_id]
            inst.phase = Phase.KILLED  # its worker died with us (or was killed by resume())
            if inst.launched and tr.instance_id != inst.instance_id and math.isfinite(inst.termination_s):
                self._timer(inst.termination_s, "terminate", inst)  # left by its trial: the provider ends it
                inst.phase = Phase.SAVED
                continue
            self._end(inst, self.now_s(), "user", "restart")
            if inst.launched:
                self._post(inst.segment_ended(self.now_s(), EndReason.PROVIDER))
            else:
                from spottune.orchestrator import LaunchFailed

                self._post(LaunchFailed(time_s=self.now_s(), trial_id=inst.trial_id, error="orchestrator restarted"))

    def _post_lost_events(self, now: float) -> None:
        """Resume: the events a crash lost between an effect and its delivery, posted again.

        An instance billed whose ``SegmentEnded`` was still queued gets it; a trial whose ``Launch`` was
        journaled but never carried out (no instance of it waits) gets ``LaunchFailed``.
        """
        from spottune.orchestrator import LaunchFailed

        for inst in self._instances.values():
            if not inst.alive and inst.launched and self.orchestrator.trials[inst.trial_id].instance_id == inst.instance_id:
                self._post(inst.segment_ended(now, EndReason.PROVIDER))
        waiting = {i.trial_id for i in self._instances.values() if i.alive and not i.launched}
        for trial_id, tr in self.orchestrator.trials.items():
            if str(tr.state) == "launching" and trial_id not in waiting:
                self._post(LaunchFailed(time_s=now, trial_id=trial_id, error="orchestrator restarted"))

    # -- effects ------------------------------------------------------------------------------------
    def _launch(self, action: Launch) -> None:
        t = self.now_s()
        inst = self._new_instance(action, t, self.ref_sps, _Instance, resume_step=action.resume_step)
        if inst is None:
            return
        self._spawn(inst, action)
        self._schedule_timers(inst, t)

    def _terminate(self, action: Terminate) -> None:
        inst = self._instances[action.instance_id]
        w = inst.worker
        if (w is not None and w.standby_mode and inst.phase is Phase.SAVED
                and w.proc.poll() is None and w.owner is inst):
            inst.to("recycle")  # the hourly hop: the process goes back to the pool
            inst.worker = None
            self._pool.recycle(w)
        else:
            self._kill(inst)
        self._end(inst, self.now_s(), "user", str(action.reason))
        self._q.put(("ended", inst, EndReason.USER))

    def _spawn(self, inst: _Instance, action: Launch) -> None:
        s = self.settings
        url = self._imds.register(inst.instance_id, instance_type=inst.market.instance_type,
                                  availability_zone=inst.market.availability_zone)
        config, seed = self.trials[inst.trial_id]
        argv = segment_argv(trial_id=inst.trial_id, instance_id=inst.instance_id, config=config, seed=seed,
                            resume_step=action.resume_step, until_step=action.target_steps,
                            step_wall_s=inst.seconds_per_step / s.time_scale, imds_url=url,
                            poll_wall_s=max(_MIN_POLL_WALL_S, s.poll_s / s.time_scale), max_steps=s.max_steps,
                            keep=s.checkpoint_keep)
        inst.worker, warm = self._pool.segment(inst, argv)
        inst.stats.update(worker=inst.worker.name, warm=warm, spawn_wall_s=self.clock.wall_s())

    def _kill(self, inst: _Instance) -> None:
        """SIGKILL the worker (the instance is gone) and wait until its output has been read."""
        if inst.phase is Phase.RECYCLED:
            return  # the process runs another segment now
        inst.to("kill")
        if inst.worker is not None:
            self._pool.stop(inst.worker)

    _release = _kill

    def _checkpoint(self, action: Checkpoint) -> None:
        inst = self._instances[action.instance_id]
        if inst.unconfirmed_save is not None and inst.unconfirmed_save == inst.step:
            step, inst.unconfirmed_save = inst.unconfirmed_save, None  # already saved on the IMDS notice
            self._post(inst.checkpoint_saved(self.now_s(), action.reason, step))
            return
        inst.pending = action
        inst.to("checkpoint")
        self._command(inst, CheckpointCommand(reason=str(action.reason)))
        # if the worker is already gone, its end (failure, termination) answers instead

    def _command(self, inst: _Instance, cmd: CheckpointCommand) -> None:
        """Hand ``cmd`` to the worker of ``inst`` (its stdin here; the aws backend writes it to S3)."""
        self._pool.command(inst.worker, cmd)

    def _send_or_defer(self, inst: _Instance, event: Any) -> None:
        if inst.launched:
            self._deliver(event)
        else:
            inst.deferred.append(event)

    def _on_hour(self, inst: _Instance) -> None:
        if inst.alive and not inst.gone:
            self._send_or_defer(inst, inst.hour_elapsed(self.now_s()))

    def _on_wake(self, trial_id: str, at_s: float) -> None:
        self._wake(trial_id, max(self.now_s(), at_s))

    def _launched(self, inst: _Instance) -> None:
        inst.launched = True
        event = inst.trial_launched(self.now_s())
        if inst.fallback_step is not None:
            event = dataclasses.replace(event, restored_step=inst.fallback_step)
        self._deliver(event)

    # -- worker reports -----------------------------------------------------------------------------
    def _on_line(self, inst: _Instance, report: Report) -> None:
        """One report of ``inst``'s worker (:mod:`._messages`), to its handler."""
        if not inst.alive and not isinstance(report, Saved):
            return
        handler = {Ready: self._on_ready, Metric: self._on_metric, Saved: self._on_saved, Notice: self._on_seen,
                   Failed: self._on_failed}.get(type(report))
        if handler is not None:  # Idle and Exited need no answer (the process end is on_eof)
            handler(inst, report)

    def _on_ready(self, inst: _Instance, report: Ready) -> None:
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

    def _on_metric(self, inst: _Instance, report: Metric) -> None:
        inst.step = int(report.step)
        inst.executed += 1
        metrics = {str(k): float(v) for k, v in dict(report.metrics or {}).items()}
        self._deliver(inst.metric_reported(self.now_s(), metrics))

    def _on_saved(self, inst: _Instance, report: Saved) -> None:
        if not inst.alive:
            return  # published too late: the orchestrator rolls back; the store keeps it as unconfirmed
        step = int(report.step)
        inst.to("saved")
        inst.saved_step = step
        self._checkpoint_step[inst.trial_id] = step
        inst.stats.setdefault("save_s", []).append(report.save_s)
        if inst.pending is not None:
            action, inst.pending = inst.pending, None
            self._deliver(inst.checkpoint_saved(self.now_s(), action.reason, step))
        else:
            inst.unconfirmed_save = step

    def _on_seen(self, inst: _Instance, report: Notice) -> None:
        inst.stats["notice_seen_s"] = self.now_s()

    def _notice_from_worker(self, inst: Any, report: Notice) -> None:
        """For drivers that learn of an interruption notice only from the worker's IMDS poll (aws, ray: here the
        replay sends it, L4): ``RevocationNotice`` with IMDS's deadline (two minutes if it cannot be read).
        ``inst`` has a ``notified`` flag (set here; at most one notice per instance)."""
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
        self._send_or_defer(inst, inst.revocation_notice(now))

    def _on_failed(self, inst: _Instance, report: Failed) -> None:
        inst.stats["failed"] = report.during
        self._failed(inst, f"{report.during}: {report.error}")

    def _failed(self, inst: _Instance, error: str) -> None:
        """The trainable (or the worker) failed on this instance: ``SegmentFailed``."""
        inst.to("failed")
        if not inst.launched:  # setup or restore raised: the trainable failed on this instance
            self._launched(inst)
        self._deliver(inst.segment_failed(self.now_s(), error))

    def _on_eof(self, inst: _Instance, returncode: int) -> None:
        inst.stats["returncode"] = returncode
        if inst.phase in (Phase.KILLED, Phase.FAILED) or not inst.alive or returncode == 0:
            return
        tail = inst.worker.tail() if inst.worker else ""
        self._failed(inst, f"worker exited with code {returncode}: {tail}")

    def _on_notice(self, inst: _Instance) -> None:
        if not inst.alive or inst.gone:
            return
        self._imds.notify(inst.instance_id, time_s=inst.termination_s)
        self._send_or_defer(inst, inst.revocation_notice(self.now_s()))

    def _on_termination(self, inst: _Instance) -> None:
        if not inst.alive or inst.gone:
            return
        self._kill(inst)  # its remaining output is now queued ahead of the "ended" item
        self._q.put(("ended", inst, EndReason.PROVIDER))

    def _on_ended(self, inst: _Instance, reason: EndReason) -> None:
        self._imds.unregister(inst.instance_id)
        self._segment_gone(inst, reason)

    def _segment_gone(self, inst: Any, reason: EndReason) -> None:
        """The instance is gone: a provider end is billed (to its termination time), then ``SegmentEnded``, or
        ``LaunchFailed`` for one that died before it was ready (the contract, rules 2 and 6)."""
        if reason is EndReason.PROVIDER:
            self._end(inst, inst.termination_s, "provider", inst.reason)
        if reason is EndReason.PROVIDER and not inst.launched:
            self._deliver(inst.died_booting(self.now_s()))
        else:
            self._deliver(inst.segment_ended(self.now_s(), reason))

