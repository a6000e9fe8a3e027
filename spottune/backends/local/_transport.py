"""The process transport: each segment's worker is an OS process on this machine, the market a replay.

:class:`ProcessTransport` is the local backend's :class:`~spottune.backends._transport.WorkerTransport`:

- **launch**: the injected revocation model decides fulfilment, notice and termination times, as in the
  simulator (:meth:`spottune.backends._replay.ReplayDriver._new_instance`); a fulfilled launch hands the
  segment to a warm worker of the pool (:mod:`spottune.backends.local._pool`), or starts one. The notice,
  the termination and the hourly tick go on the driver's clock.
- **command**: a ``CheckpointCommand`` line on the worker's stdin.
- **kill**: SIGKILL, then wait until the worker's output has been read.
- **watch**: the pool's reader threads enqueue every stdout line and the process end; the pool is warmed
  before the clock starts, and the IMDS emulator (:class:`spottune.backends.local.imds.ImdsEmulator`) is
  served. At a replayed notice the emulator is flipped for that instance (the worker sees it at its next
  poll) and ``RevocationNotice`` is sent.
- **recycle**: at the hourly hop a saved segment's process goes back to the warm pool.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spotmarket import Cause
from spottune.backends._worker_driver import LazyStore, Phase, WorkerDriver, WorkerInstance, orphan_save
from spottune.backends.local._messages import CheckpointCommand, Notice
from spottune.backends.local._pool import Worker, WorkerPool, kill_leftover_workers, segment_argv
from spottune.backends.local.imds import ImdsEmulator
from spottune.orchestrator import CapacityRefused, EndReason, Launch, LaunchFailed

__all__ = ["ProcessInstance", "ProcessTransport"]

_MIN_POLL_WALL_S = 0.05  # never poll the emulator more often than 20 times a second
#: Wall seconds a resume gives the workers of the killed run to finish the checkpoint they save on their own
#: when their driver dies, before it kills them.
ORPHAN_SAVE_WALL_S = 10.0


@dataclass(slots=True, kw_only=True)
class ProcessInstance(WorkerInstance):
    """A :class:`WorkerInstance` whose worker is a process of the pool (``worker``; None once recycled).

    Parameters
    ----------
    worker : Worker or None, default None
        The pool's worker process; the other fields are :class:`WorkerInstance`'s.
    """

    worker: Worker | None = None

    def output_tail(self) -> str:
        """The end of the worker process's stderr log.

        Returns
        -------
        str
            "" without a worker.
        """
        return self.worker.tail() if self.worker else ""


class ProcessTransport:
    """Worker processes on this machine against a replayed market (see the module docstring).

    Parameters
    ----------
    settings : LocalSettings
        The local backend's settings (store, time scale, polling, pool, log folder).
    workload : str
        Built-in workload name or ``"module:Class"`` importable by the worker processes.
    spares : int
        Spare warm workers kept during the run (0: every segment starts cold).
    """

    name = "local"

    def __init__(self, settings: Any, workload: str, spares: int):
        self.settings = settings
        self.spares = spares
        self.driver: WorkerDriver | None = None
        self.imds = ImdsEmulator()
        self.pool = WorkerPool(python=settings.python, workload=workload, store_url=settings.store_url,
                               storage_options=settings.storage_options, spares=spares,
                               on_line=lambda inst, msg: self.driver.enqueue(("line", inst, msg)),
                               on_eof=lambda inst, code: self.driver.enqueue(("eof", inst, code)),
                               on_spawn=self._spawned, checkpoint_key=settings.checkpoint_key)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._store: Any = None  # opened by a resume, to find the checkpoints workers saved when the driver died
        self._saves: dict[str, Any] = {}  # instance id -> the checkpoint its worker saved on its own (a resume)

    def bind(self, driver: WorkerDriver) -> None:
        """Keep the driver (its queue, clock, records and replayed prices).

        Parameters
        ----------
        driver : WorkerDriver
            The driver.
        """
        self.driver = driver

    @property
    def end_s(self) -> float:
        """The end of the replayed price history (engine seconds)."""
        return float(self.driver.history.end_s)

    # -- the run --------------------------------------------------------------------------------------
    def open(self) -> None:
        log_dir = self.settings.log_dir
        if log_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="spottune-local-")
            log_dir = self._tmp.name
        Path(log_dir).mkdir(parents=True, exist_ok=True)
        self.pool.log_dir = Path(log_dir)

    def watch(self) -> None:
        d, pool = self.driver, self.pool
        # one warm worker per trial for the first launches, plus the spares, all warm before the clock starts
        warm_s = pool.warm_up(len(d.trials) + self.spares if pool.enabled else 0, self.settings.standby_timeout_s)
        d.record.meta.update(standby_workers=self.spares, pool_warm_up_wall_s=round(warm_s, 3))
        self.imds.start()

    def stop(self) -> None:
        self.pool.stop_all()

    def close(self) -> None:
        self.imds.stop()
        if self._tmp is not None:
            self._tmp.cleanup()

    def close_leftovers(self) -> None:
        """The provider ends the instances still alive (revoked and saved ones) by the price history's end."""
        self.driver.provider_ends_leftovers(self.end_s)

    def handle(self, kind: str, args: list[Any]) -> bool:
        """A ``notice`` item (the replayed market's notice timer): the IMDS emulator tells the worker,
        ``RevocationNotice`` tells the orchestrator.

        Parameters
        ----------
        kind : str
            The queue item's kind.
        args : list
            Its arguments.

        Returns
        -------
        bool
            False for a kind this transport does not enqueue.
        """
        if kind != "notice":
            return False
        self._on_notice(*args)
        return True

    def _on_notice(self, inst: ProcessInstance) -> None:
        """The replayed market's notice: the emulator tells the worker, ``RevocationNotice`` tells the orchestrator."""
        if not inst.alive or inst.gone:
            return
        self.imds.notify(inst.instance_id, time_s=inst.termination_s)
        self.driver.send_or_defer(inst, inst.revocation_notice(self.driver.now_s()))

    # -- effects --------------------------------------------------------------------------------------
    def launch(self, action: Launch) -> None:
        """Register the instance with the IMDS emulator and start its segment on a pooled worker or a new process.

        Parameters
        ----------
        action : spottune.orchestrator.Launch
            The trial, market, max price (USD/hour), the step to resume and the target step.
        """
        d = self.driver
        t = d.now_s()
        inst = d.market_instance(action, t, ProcessInstance, resume_step=action.resume_step)
        if inst is None:
            return
        s = self.settings
        url = self.imds.register(inst.instance_id, instance_type=inst.market.instance_type,
                                 availability_zone=inst.market.availability_zone)
        config, seed = d.trials[inst.trial_id]
        argv = segment_argv(trial_id=inst.trial_id, instance_id=inst.instance_id, config=config, seed=seed,
                            resume_step=action.resume_step, until_step=action.target_steps,
                            step_wall_s=inst.seconds_per_step / s.time_scale, imds_url=url,
                            poll_wall_s=max(_MIN_POLL_WALL_S, s.poll_s / s.time_scale), max_steps=s.max_steps,
                            keep=s.checkpoint_keep, heartbeat_wall_s=s.heartbeat_wall_s or 0.0)
        inst.worker, warm = self.pool.segment(inst, argv)
        inst.stats.update(worker=inst.worker.name, warm=warm, spawn_wall_s=d.clock.wall_s())

    def command(self, inst: ProcessInstance, cmd: CheckpointCommand) -> None:
        """Write ``cmd`` to the worker process's stdin.

        Parameters
        ----------
        inst : ProcessInstance
            The instance.
        cmd : CheckpointCommand
            The checkpoint to take.
        """
        self.pool.command(inst.worker, cmd)

    def kill(self, inst: ProcessInstance) -> None:
        """SIGKILL the worker process (if any) and wait until its output is read.

        Parameters
        ----------
        inst : ProcessInstance
            The instance.
        """
        if inst.worker is not None:
            self.pool.stop(inst.worker)

    def recycle(self, inst: ProcessInstance) -> bool:
        """At an hourly hop, give a saved standby worker back to the pool instead of killing it.

        Parameters
        ----------
        inst : ProcessInstance
            The instance.

        Returns
        -------
        bool
            True if the worker was kept.
        """
        w = inst.worker
        if (w is not None and w.standby_mode and inst.phase is Phase.SAVED
                and w.proc.poll() is None and w.owner is inst):
            inst.to("recycle")  # the hourly hop: the process goes back to the pool
            inst.worker = None
            self.pool.recycle(w)
            return True
        return False

    def seen_notice(self, inst: ProcessInstance, report: Notice) -> None:
        """The replay already sent ``RevocationNotice``: only when the worker saw it is noted.

        Parameters
        ----------
        inst : ProcessInstance
            The instance.
        report : Notice
            The worker's report (IMDS's action and time).
        """
        inst.stats["notice_seen_s"] = self.driver.now_s()

    def ended(self, inst: ProcessInstance) -> None:
        """Unregister the instance from the IMDS emulator.

        Parameters
        ----------
        inst : ProcessInstance
            The instance.
        """
        self.imds.unregister(inst.instance_id)

    def next_instance_id(self) -> str:
        """The driver's next sequential id.

        Returns
        -------
        str
        """
        return self.driver.sequential_id()

    def price_series(self, inst: ProcessInstance, end_s: float) -> Any:
        """The replayed prices of the instance's market.

        Parameters
        ----------
        inst : ProcessInstance
            The instance.
        end_s : float
            Engine seconds of its end.

        Returns
        -------
        spotmarket.prices.PriceSeries
            USD per instance-hour.
        """
        return self.driver.history[inst.market]

    # -- crash safety ---------------------------------------------------------------------------------
    def _spawned(self, worker: Worker) -> None:
        """Journal every worker process started (its PID), so a resume can find it if we die."""
        journal = self.driver.journal
        if journal is not None:
            owner = getattr(worker.owner, "instance_id", None)
            journal.outcome("spawn", worker.name, pid=worker.proc.pid, instance_id=owner)

    def resume(self, records: list[dict[str, Any]]) -> None:
        """Continue a killed run: kill its leftover workers, replay its journal, then relaunch (decision CS4).

        1. Every worker process the journal names (``spawn`` outcomes) that still runs, and is a spottune
           worker of this store (its command line says so: a reused PID is left alone), is SIGKILLed, after
           :data:`ORPHAN_SAVE_WALL_S` wall seconds in which it may finish the checkpoint it saves on its own
           when its driver dies (a ``lease`` save). Adopting them is impossible: their stdin and stdout were
           pipes to the dead process.
        2. The journaled events are delivered again to the fresh orchestrator; each returned action is
           checked against the journaled one (:class:`~spottune.errors.JournalMismatch`); launches, billed
           runs (ledger rows, and their ``InstanceEnded`` delivered again), capacity refusals (their
           ``CapacityRefused``), checkpoint steps and pending wake-ups
           rebuild the driver's state (:meth:`WorkerDriver.replay_journal`).
        3. The driver's run then restarts the clock at the last journaled time (the replayed market stood
           still while the process was down), or later by the steps a worker trained after its last
           journaled report before it saved them (at its instance's speed: they took engine time),
           re-arms the pending wake-ups and the provider ends of instances the trials had left, and ends
           every instance whose worker was killed: billed as ended by the user (reason ``restart``). A running trial whose worker saved its steps when the
           driver died continues from that checkpoint (:meth:`WorkerDriver.adopt_orphan_save`: the steps
           the journal lacks are reported from the checkpoint's metadata, then the save is confirmed);
           any other is reported as ``LaunchFailed`` (still booting) or ``SegmentEnded(provider)``, so
           that it relaunches from its last confirmed checkpoint (the steps since are lost). Either way
           the orchestrator counts one interruption (:meth:`reconcile`).

        Parameters
        ----------
        records : list of dict
            The killed run's journal (:func:`spottune.journal.read_journal`).

        Raises
        ------
        BackendError
            If the driver has no journal, or the journal holds a record out of order.
        """
        d = self.driver
        killed = kill_leftover_workers(records, self.settings.store_url, grace_s=ORPHAN_SAVE_WALL_S)
        d.replay_journal()
        self._saves, stop_s = d.worker_saves(records, self._orphan_save, d.log_s)
        d.log_s = stop_s
        d.restart_clock(stop_s)  # the replayed market resumes where it stood when the last worker stopped
        d.note_resume({"at_s": d.log_s, "records": d.journal.n, "killed_workers": killed},
                      journal=False)  # journaled by reconcile(), with the checkpoints it took over

    def reconcile(self) -> None:
        """After a resume, on the driver thread with the clock running: see :meth:`resume`, step 3."""
        d = self.driver
        d.rearm_wakeups()
        d.post_lost_events(d.now_s())
        entry = d.record.meta["resumes"][-1]  # filled as it goes: a delivered step can launch (and crash) at once
        taken: dict[str, int] = entry.setdefault("worker_saves", {})  # trial -> the step its worker saved
        for inst in list(d.instances.values()):
            if not inst.alive:
                continue
            tr = d.orchestrator.trials[inst.trial_id]
            inst.phase = Phase.KILLED  # its worker died with us (or was killed by resume())
            if inst.launched and tr.instance_id != inst.instance_id and math.isfinite(inst.termination_s):
                d.timer(inst.termination_s, "terminate", inst)  # left by its trial: the provider ends it
                inst.phase = Phase.SAVED
                continue
            saved = self._saves.get(inst.instance_id)
            if saved is not None and d.adopt_orphan_save(inst, saved.step, saved.metadata.get("metrics")):
                taken[inst.trial_id] = saved.step
                if inst.alive and tr.instance_id != inst.instance_id and inst.notice_s <= d.now_s() \
                        and math.isfinite(inst.termination_s):  # noticed by the market: the provider ends it
                    d.timer(inst.termination_s, "terminate", inst)
                    inst.phase = Phase.SAVED
                else:
                    d.end(inst, d.now_s(), "user", "restart")
                continue
            d.end(inst, d.now_s(), "user", "restart")
            if inst.launched:
                d.post(inst.segment_ended(d.now_s(), EndReason.PROVIDER))
            else:
                d.post(LaunchFailed(time_s=d.now_s(), trial_id=inst.trial_id, error="orchestrator restarted"))
        d.journal.resumed(entry)

    def _orphan_save(self, inst: ProcessInstance) -> Any:
        """The checkpoint the worker of ``inst`` saved on its own when the driver died (:func:`orphan_save`), or None."""
        if self._store is None:
            self._store = LazyStore(self.settings.store_url, self.settings.storage_options, self.pool.checkpoint_key)
        return orphan_save(self._store, inst, self.driver.record.meta)

    def replay_launch(self, rec: dict[str, Any], action: Launch) -> None:
        """Rebuild the instance of a journaled fulfilled launch (its worker died with the killed run).

        Parameters
        ----------
        rec : dict
            The journaled launch ``outcome``.
        action : spottune.orchestrator.Launch
            The launch it answered.
        """
        from spottune.speed import seconds_per_step

        d = self.driver
        vcpus, ecu = d.instance_facts(action.market.instance_type)
        iid = rec["instance_id"]
        d.instances[iid] = ProcessInstance(
            instance_id=iid, trial_id=action.trial_id, market=action.market, max_price=action.max_price_usd_per_hour,
            started_s=float(rec["time_s"]), notice_s=float(rec["notice_s"]), termination_s=float(rec["termination_s"]),
            seconds_per_step=seconds_per_step(d.ref_sps, vcpus, ecu), vcpus=vcpus, reason=str(rec["cause"]),
            step=action.resume_step, saved_step=action.resume_step, resume_step=action.resume_step)

    def replay_refused(self, rec: dict[str, Any], action: Launch) -> None:
        """A capacity refusal excluded its market (outside ``handle``): the replay excludes it again.

        Parameters
        ----------
        rec : dict
            The journaled launch ``outcome`` (not fulfilled).
        action : spottune.orchestrator.Launch
            The launch it answered.
        """
        if rec.get("cause") == Cause.REFUSED_CAPACITY:
            self.driver.inform(CapacityRefused(time_s=float(rec["time_s"]), market=action.market, reason=rec["cause"]))

    def replay_event(self, event: Any) -> None:
        """Nothing to update: a replayed instance's notice and termination come from its launch record.

        Parameters
        ----------
        event : spottune.orchestrator.Event
            The replayed event.
        """

