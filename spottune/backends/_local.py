"""The local backend: real worker processes, real checkpoints, a spot market replayed on a fast wall clock.

Each trial segment is a real OS process, ``python -m spottune.worker`` (:mod:`spottune.worker`), that
restores from the checkpoint store (a folder or S3 through fsspec), trains, reports metrics as JSON
lines on its stdout, and polls ``/latest/meta-data/spot/instance-action`` on the backend's own IMDS
emulator (:class:`spottune.imds.ImdsEmulator`), exactly as it would poll the real IMDS on EC2.

The driver contract is the one of :mod:`spottune.backends._base`; the differences from the simulator
are only in where effects come from (the [I] decisions of this backend):

- **Clock.** Engine time = ``start_s + (wall seconds since start) * time_scale``. Every timed effect
  (revocation notice, termination, the hourly tick ``HourElapsed``, ``ScheduleWakeUp``) is a date job
  on an APScheduler ``BackgroundScheduler``, at the wall time its engine time maps to. Jobs and the
  workers' output threads only enqueue; one thread (the caller of :meth:`LocalBackend.run`) talks to
  the orchestrator, so it stays single-threaded.
- **Launch.** The injected revocation model decides fulfilment, notice and termination times, as in
  the simulator. A fulfilled launch starts a worker at once; its real start-up (imports, restore) is
  the instance's boot time, scaled by ``time_scale``. ``TrialLaunched`` is sent when the worker
  prints ``ready``. Step pacing: a step takes ``speed.seconds_per_step(...) / time_scale`` wall
  seconds (the worker sleeps the rest), or longer if the real step is slower.
- **Revocation.** At the notice time the backend flips the emulator for that instance (the worker
  sees it at its next poll, checkpoints on its own and exits) and sends ``RevocationNotice``; the
  orchestrator's ``Checkpoint`` reaches the worker on stdin, whichever comes first wins. At the
  termination time the worker process is killed (SIGKILL) if still alive; a checkpoint not finished
  by then is lost and the store keeps the previous good version.
- **Checkpoint.** ``Checkpoint`` actions become ``{"cmd": "checkpoint"}`` on the worker's stdin;
  ``CheckpointSaved`` is sent when the worker reports the published, verified version. Real
  checkpoint and restore times are measured (``meta["worker"]``), not modelled.
- **Terminate.** Kills the worker (the instance is gone) and bills up to now.
- **Billing** and the ledger are the simulator's (:class:`spottune.market.Billing`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler

from spottune.backends._base import Driver, Progress, RunRecord, log_record
from spottune.errors import BackendError
from spottune.imds import ImdsEmulator
from spottune.orchestrator import (
    Action,
    Checkpoint,
    CheckpointSaved,
    EndReason,
    ExperimentFinished,
    ExperimentStarted,
    HourElapsed,
    Launch,
    LaunchFailed,
    MetricReported,
    Orchestrator,
    RevocationNotice,
    ScheduleWakeUp,
    SegmentEnded,
    SegmentFailed,
    Stop,
    Terminate,
    TrialLaunched,
    WakeUp,
)
from spottune.speed import seconds_per_step

__all__ = ["LocalBackend", "LocalSettings"]

HOUR_S = 3600.0
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
        fsspec options for ``store_url`` (passed to every worker as JSON).
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
        Interpreter that runs ``-m spottune.worker``.
    standby_workers : int, optional
        Spare pre-started workers (``--standby``: imports done, dataset loaded) kept warm during the
        run; default ``min(4, number of trials)``; 0 starts every segment cold. Before the clock
        starts, one warm worker per trial (for the first launches) plus the spares are prepared. After an hourly hop
        (a clean checkpoint, then our ``Terminate``) the worker process is recycled into the pool
        instead of killed; a provider termination always kills it. [I] Without warm workers, a
        worker's 1-10 s of Python start-up (torch, scikit-learn) would become 0.5-5 simulated hours
        of boot at ``time_scale`` 1,800, and no revocation in the first half hour could be observed.
    standby_timeout_s : float, default 300.0
        Wall seconds to wait for the pool to warm up before the clock starts.
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


@dataclass(slots=True, eq=False)
class _Worker:
    """One worker process, pre-started in standby or started for a segment."""

    name: str
    proc: subprocess.Popen
    log_path: Path
    standby_mode: bool = False  # started with --standby: reusable after a clean segment
    standby: threading.Event = field(default_factory=threading.Event)
    reader: threading.Thread | None = None
    inst: Any = None  # the _Instance it runs, once assigned


@dataclass(slots=True)
class _Instance:
    instance_id: str
    trial_id: str
    market: Any
    max_price: float
    started_s: float
    notice_s: float
    termination_s: float
    seconds_per_step: float
    resume_step: int
    reason: str
    worker: _Worker | None = None
    step: int = 0
    saved_step: int = 0
    unconfirmed_save: int | None = None  # a save the worker made on its own (IMDS notice)
    segment_saved: bool = False  # the worker reported a checkpoint in this segment (it then stops)
    executed: int = 0
    alive: bool = True  # billed and ended once False
    gone: bool = False  # the worker process has been killed (its queued output still counts)
    ready: bool = False
    failed: bool = False
    killed: bool = False
    pending: Checkpoint | None = None
    deferred: list[Any] = field(default_factory=list)  # notice / hour events that fired before ready
    stats: dict[str, Any] = field(default_factory=dict)


class LocalBackend(Driver):
    """Run every trial segment as a real worker process against a market replayed on the wall clock.

    Parameters
    ----------
    orchestrator : Orchestrator
    history : revpred.prices.PriceHistory
        Prices (USD per instance-hour) of every market the provisioner may choose.
    revocation_model : spottune.market.RevocationModel
        ``revocation(market, launch_s, instance_id=..., max_price_usd_per_hour=...) -> Revocation``.
    billing : spottune.market.Billing
    workload : str
        Built-in workload name or ``"module:Class"`` importable by the worker processes.
    trials : mapping trial_id -> (config, seed)
        The configuration and seed of each of the orchestrator's trials.
    instance_facts : callable instance_type -> (vcpus, ecu or None)
    start_s : float
        Experiment start, engine seconds since the epoch (UTC).
    settings : LocalSettings
    progress : callable (now_s, orchestrator, usd) -> None, optional
    """

    def __init__(self, orchestrator: Orchestrator, history: Any, revocation_model: Any, billing: Any, workload: str,
                 trials: Mapping[str, tuple[Mapping[str, Any], int]],
                 instance_facts: Callable[[str], tuple[int, float | None]], start_s: float,
                 settings: LocalSettings, progress: Progress | None = None):
        from spottune.workloads import get_workload

        missing = set(orchestrator.trials) - set(trials)
        if missing:
            raise BackendError(f"local backend: no configuration for trials {sorted(missing)}")
        if not settings.time_scale > 0:
            raise BackendError(f"time_scale is {settings.time_scale!r}, but must be > 0")
        if settings.store_url.startswith("memory://"):
            raise BackendError("the local backend's workers are separate processes: use a folder or s3:// store")
        self.orchestrator = orchestrator
        self.history = history
        self.revocation_model = revocation_model
        self.billing = billing
        self.workload = workload
        self.trials = {t: (dict(c), int(s)) for t, (c, s) in trials.items()}
        self.instance_facts = instance_facts
        self.start_s = float(start_s)
        self.settings = settings
        self.progress = progress
        wl = get_workload(workload)
        self.ref_sps = float(settings.reference_seconds_per_step or wl.reference_seconds_per_step)
        self.record = RunRecord(start_s=self.start_s)
        self.usd = 0.0
        self._q: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self._instances: dict[str, _Instance] = {}
        self._checkpoint_step: dict[str, int] = {t: 0 for t in orchestrator.trials}
        self._last_s = self.start_s
        self._wall0 = 0.0
        self._sched: BackgroundScheduler | None = None
        self._imds = ImdsEmulator()
        self._log_dir = Path(settings.log_dir) if settings.log_dir else None
        self._workers: list[_Worker] = []
        self._pool: list[_Worker] = []
        self._n_workers = 0
        n = settings.standby_workers
        self._spares = min(4, len(self.trials)) if n is None else max(0, int(n))
        self._started_pool = self._spares > 0
        self.record.meta.update(backend="local", time_scale=settings.time_scale, store=settings.store_url,
                                reference_seconds_per_step=self.ref_sps, poll_s=settings.poll_s)

    # -- clock --------------------------------------------------------------------------------------
    def now_s(self) -> float:
        """Engine seconds now (never earlier than the last delivered event)."""
        t = self.start_s + (time.monotonic() - self._wall0) * self.settings.time_scale
        return max(t, self._last_s)

    def _at(self, t_s: float, item: tuple[Any, ...]) -> None:
        """Enqueue ``item`` when engine time reaches ``t_s`` (an APScheduler date job)."""
        delay_wall = max(0.0, (t_s - self.now_s()) / self.settings.time_scale)
        run_date = datetime.now(timezone.utc) + timedelta(seconds=delay_wall)
        assert self._sched is not None
        self._sched.add_job(self._q.put, "date", run_date=run_date, args=[item], misfire_grace_time=None)

    # -- the loop -----------------------------------------------------------------------------------
    def run(self) -> RunRecord:
        import tempfile

        tmp = None
        if self._log_dir is None:
            tmp = tempfile.TemporaryDirectory(prefix="spottune-local-")
            self._log_dir = Path(tmp.name)
        self._log_dir.mkdir(parents=True, exist_ok=True)
        self._sched = BackgroundScheduler(timezone=timezone.utc, job_defaults={"coalesce": False, "max_instances": 1000})
        try:
            self._warm_pool()
            self._imds.start()
            self._sched.start()
            self._wall0 = time.monotonic()
            give_up = self._wall0 + self.settings.max_wall_s
            self._deliver(ExperimentStarted(time_s=self.start_s))
            end_s = float(self.history.end_s)
            while not self.orchestrator.done:
                if time.monotonic() > give_up:
                    raise BackendError(f"the local run did not finish within {self.settings.max_wall_s:.0f} wall "
                                       f"seconds (engine time {(self.now_s() - self.start_s) / 3600:.1f} h)")
                if self.now_s() > end_s:
                    raise BackendError(f"the price history ends at {end_s:.0f} s before the experiment finished")
                try:
                    item = self._q.get(timeout=0.2)
                except queue.Empty:
                    continue
                self._handle(item)
            for inst in list(self._instances.values()):  # revoked-and-saved instances: the provider ends them
                if inst.alive:
                    self._kill(inst)
                    self._end(inst, min(inst.termination_s, end_s), "provider", inst.reason or "price")
        finally:
            for worker in self._workers:
                self._stop_worker(worker)
            if self._sched.running:
                self._sched.shutdown(wait=False)
            self._imds.stop()
            if tmp is not None:
                tmp.cleanup()
        self.record.meta["usd"] = self.usd
        self.record.meta["worker"] = {iid: inst.stats for iid, inst in self._instances.items()}
        return self.record

    def _warm_pool(self) -> None:
        """Start the standby workers and wait until every one has warmed up (before the clock starts)."""
        # one warm worker per trial for the first launches, plus the spares, all warm before the clock starts
        n = len(self.trials) + self._spares if self._started_pool else 0
        t0 = time.monotonic()
        for _ in range(n):
            self._spawn_standby()
        deadline = t0 + self.settings.standby_timeout_s
        for worker in list(self._pool):
            while not worker.standby.wait(0.1):
                if worker.proc.poll() is not None:
                    tail = worker.log_path.read_text(errors="replace")[-400:]
                    raise BackendError(f"a standby worker exited with code {worker.proc.returncode}: {tail}")
                if time.monotonic() > deadline:
                    raise BackendError(f"standby workers not ready after {self.settings.standby_timeout_s:.0f} s")
        self.record.meta["standby_workers"] = self._spares
        self.record.meta["pool_warm_up_wall_s"] = round(time.monotonic() - t0, 3)

    def _deliver(self, event: Any) -> None:
        self._last_s = max(self._last_s, float(event.time_s))
        self.record.log.append(log_record("event", event, self._last_s))
        for action in self.orchestrator.handle(event):
            self.record.log.append(log_record("action", action, self._last_s))
            self._apply(action)
        if self.progress is not None:
            self.progress(self._last_s, self.orchestrator, self.usd)

    def _handle(self, item: tuple[Any, ...]) -> None:
        kind = item[0]
        if kind == "event":
            self._deliver(item[1])
        elif kind == "line":
            self._on_line(item[1], item[2])
        elif kind == "eof":
            self._on_eof(item[1], item[2])
        elif kind == "notice":
            self._on_notice(item[1])
        elif kind == "hour":
            inst = item[1]
            if inst.alive and not inst.gone:
                self._send_or_defer(inst, HourElapsed(time_s=self.now_s(), trial_id=inst.trial_id,
                                                      instance_id=inst.instance_id))
        elif kind == "terminate":
            self._on_termination(item[1])
        elif kind == "ended":
            self._on_ended(item[1], item[2])
        elif kind == "wake":
            self._deliver(WakeUp(time_s=max(self.now_s(), item[2]), trial_id=item[1]))
        else:  # pragma: no cover - a driver bug
            raise BackendError(f"local backend: unknown queue item {kind!r}")

    def _apply(self, action: Action) -> None:
        match action:
            case Launch():
                self._launch(action)
            case Checkpoint():
                self._checkpoint(action)
            case Terminate():
                inst = self._instances[action.instance_id]
                w = inst.worker
                if (w is not None and w.standby_mode and inst.segment_saved and not inst.failed
                        and w.proc.poll() is None and w.inst is inst):
                    self._recycle(inst)
                else:
                    self._kill(inst)
                self._end(inst, self.now_s(), "user", str(action.reason))
                self._q.put(("ended", inst, EndReason.USER))
            case ScheduleWakeUp():
                self._at(action.at_s, ("wake", action.trial_id, action.at_s))
            case Stop():
                pass
            case ExperimentFinished():
                self.record.end_s = self._last_s
            case _:
                raise BackendError(f"local backend cannot carry out {type(action).__name__}")

    # -- effects ------------------------------------------------------------------------------------
    def _launch(self, action: Launch) -> None:
        t = self.now_s()
        iid = f"i-{len(self._instances) + 1:05d}"
        rev = self.revocation_model.revocation(action.market, t, instance_id=iid,
                                               max_price_usd_per_hour=action.max_price_usd_per_hour)
        if not rev.fulfilled:
            self._q.put(("event", LaunchFailed(time_s=t, trial_id=action.trial_id, error=str(rev.cause))))
            return
        vcpus, ecu = self.instance_facts(action.market.instance_type)
        inst = _Instance(iid, action.trial_id, action.market, action.max_price_usd_per_hour, t, float(rev.notice_s),
                         float(rev.termination_s), seconds_per_step(self.ref_sps, vcpus, ecu), action.resume_step,
                         str(rev.cause), step=action.resume_step, saved_step=action.resume_step)
        self._instances[iid] = inst
        self._spawn(inst, action)
        if math.isfinite(inst.notice_s):
            self._at(inst.notice_s, ("notice", inst))
        if math.isfinite(inst.termination_s):
            self._at(inst.termination_s, ("terminate", inst))
        if t + HOUR_S < inst.termination_s:
            self._at(t + HOUR_S, ("hour", inst))

    def _spawn_worker(self, argv: list[str]) -> _Worker:
        """Start ``python -m spottune.worker <argv>`` with its reader thread."""
        assert self._log_dir is not None
        self._n_workers += 1
        name = f"w{self._n_workers:05d}"
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join([root, os.getcwd()] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        log_path = self._log_dir / f"{name}.log"
        with open(log_path, "wb") as stderr:
            proc = subprocess.Popen([self.settings.python, "-m", "spottune.worker", *argv], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=stderr, env=env, text=True, bufsize=1)
        worker = _Worker(name, proc, log_path)
        worker.reader = threading.Thread(target=self._read, args=(worker,), daemon=True, name=f"worker-{name}")
        worker.reader.start()
        self._workers.append(worker)
        return worker

    def _spawn_standby(self) -> _Worker:
        s = self.settings
        worker = self._spawn_worker(["--standby", "--workload", self.workload, "--store", s.store_url,
                                     "--storage-options", json.dumps(dict(s.storage_options))])
        worker.standby_mode = True
        self._pool.append(worker)
        return worker

    def _take_from_pool(self) -> _Worker | None:
        """A live pooled worker, warm ones first."""
        self._pool = [w for w in self._pool if w.proc.poll() is None]
        for w in self._pool:
            if w.standby.is_set():
                self._pool.remove(w)
                return w
        return self._pool.pop(0) if self._pool else None

    def _recycle(self, inst: _Instance) -> None:
        """The segment ended cleanly: detach the worker (it prints ``standby`` again) and pool it."""
        w = inst.worker
        assert w is not None
        inst.gone = True
        inst.worker = None
        w.inst = None
        w.standby.clear()
        self._pool.insert(0, w)
        while len(self._pool) > self._spares:  # keep the pool small: drop cold ones first
            cold = [x for x in self._pool if not x.standby.is_set() and x is not w]
            victim = cold[-1] if cold else self._pool[-1]
            self._pool.remove(victim)
            self._stop_worker(victim)

    def _segment_argv(self, inst: _Instance, action: Launch, imds_url: str) -> list[str]:
        s = self.settings
        config, seed = self.trials[inst.trial_id]
        argv = ["--trial", inst.trial_id, "--workload", self.workload, "--config", json.dumps(config),
                "--seed", str(seed), "--store", s.store_url, "--storage-options", json.dumps(dict(s.storage_options)),
                "--keep", str(s.checkpoint_keep), "--resume-step", str(action.resume_step),
                "--until-step", str(action.target_steps), "--step-wall-s", repr(inst.seconds_per_step / s.time_scale),
                "--imds-url", imds_url, "--poll-s", repr(max(_MIN_POLL_WALL_S, s.poll_s / s.time_scale)),
                "--instance-id", inst.instance_id]
        if s.max_steps is not None:
            argv += ["--max-steps", str(s.max_steps)]
        return argv

    def _spawn(self, inst: _Instance, action: Launch) -> None:
        url = self._imds.register(inst.instance_id, instance_type=inst.market.instance_type,
                                  availability_zone=inst.market.availability_zone)
        argv = self._segment_argv(inst, action, url)
        worker = self._take_from_pool() if self._started_pool else None
        if worker is not None:
            worker.inst = inst
            inst.worker = worker
            inst.stats.update(worker=worker.name, warm=worker.standby.is_set())
            self._command(inst, {"argv": argv})
            if len(self._pool) < self._spares:
                self._spawn_standby()  # refill the pool
        else:
            worker = self._spawn_worker(argv)
            worker.inst = inst
            inst.worker = worker
            inst.stats.update(worker=worker.name, warm=False)
        inst.stats["spawn_wall_s"] = time.monotonic() - self._wall0

    def _read(self, worker: _Worker) -> None:
        """Reader thread: every stdout line of the worker becomes a queue item, then EOF."""
        assert worker.proc.stdout is not None
        for line in worker.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue  # stray print from user code
            if not isinstance(msg, dict):
                continue
            if msg.get("event") == "standby":
                worker.standby.set()
            elif worker.inst is not None:
                self._q.put(("line", worker.inst, msg))
        code = worker.proc.wait()
        if worker.inst is not None:
            self._q.put(("eof", worker.inst, code))

    def _command(self, inst: _Instance, cmd: Mapping[str, Any]) -> bool:
        """Write a command to the instance's worker; False if it is gone."""
        w = inst.worker
        if w is None or w.proc.poll() is not None or w.proc.stdin is None:
            return False
        try:
            w.proc.stdin.write(json.dumps(dict(cmd)) + "\n")
            w.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def _kill(self, inst: _Instance) -> None:
        """SIGKILL the worker (the instance is gone) and wait until its output has been read."""
        inst.gone = True
        if inst.worker is None:
            return
        inst.killed = True
        self._stop_worker(inst.worker)

    @staticmethod
    def _stop_worker(worker: _Worker) -> None:
        if worker.proc.poll() is None:
            worker.proc.kill()
        worker.proc.wait()
        if worker.reader is not None and worker.reader is not threading.current_thread():
            worker.reader.join(timeout=10)
        for stream in (worker.proc.stdin, worker.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass

    def _checkpoint(self, action: Checkpoint) -> None:
        inst = self._instances[action.instance_id]
        if inst.unconfirmed_save is not None and inst.unconfirmed_save == inst.step:
            step, inst.unconfirmed_save = inst.unconfirmed_save, None  # already saved on the IMDS notice
            self._q.put(("event", CheckpointSaved(time_s=self.now_s(), trial_id=inst.trial_id,
                                                  instance_id=inst.instance_id, reason=action.reason, step=step)))
            return
        inst.pending = action
        self._command(inst, {"cmd": "checkpoint", "reason": str(action.reason)})
        # if the worker is already gone, its end (failure, termination) answers instead

    def _send_or_defer(self, inst: _Instance, event: Any) -> None:
        if inst.ready:
            self._deliver(event)
        else:
            inst.deferred.append(event)

    # -- worker reports -----------------------------------------------------------------------------
    def _on_line(self, inst: _Instance, msg: Mapping[str, Any]) -> None:
        kind = msg.get("event")
        if not inst.alive and kind != "checkpoint":
            return
        now = self.now_s()
        if kind == "ready":
            if int(msg.get("step", -1)) != inst.resume_step:
                raise BackendError(f"trial {inst.trial_id}: worker restored step {msg.get('step')}, "
                                   f"but the Launch asked for step {inst.resume_step}")
            inst.ready = True
            inst.stats.update(ready_wall_s=time.monotonic() - self._wall0, restore_s=msg.get("restore_s"),
                              restored_version=msg.get("version"))
            self._deliver(TrialLaunched(time_s=now, trial_id=inst.trial_id, instance_id=inst.instance_id,
                                        market=inst.market, started_s=inst.started_s))
            for event in inst.deferred:
                if not inst.gone:
                    self._deliver(dataclasses.replace(event, time_s=self.now_s()))
            inst.deferred.clear()
        elif kind == "metric":
            inst.step = int(msg["step"])
            inst.executed += 1
            metrics = {str(k): float(v) for k, v in dict(msg.get("metrics") or {}).items()}
            self._deliver(MetricReported(time_s=now, trial_id=inst.trial_id, instance_id=inst.instance_id,
                                         step=inst.step, metrics=metrics))
        elif kind == "checkpoint":
            if not inst.alive:
                return  # published too late: the orchestrator rolls back; the store keeps it as unconfirmed
            step = int(msg["step"])
            inst.segment_saved = True
            inst.saved_step = step
            self._checkpoint_step[inst.trial_id] = step
            inst.stats.setdefault("save_s", []).append(msg.get("save_s"))
            if inst.pending is not None:
                action, inst.pending = inst.pending, None
                self._deliver(CheckpointSaved(time_s=now, trial_id=inst.trial_id, instance_id=inst.instance_id,
                                              reason=action.reason, step=step))
            else:
                inst.unconfirmed_save = step
        elif kind == "notice":
            inst.stats["notice_seen_s"] = now
        elif kind == "failed":
            inst.failed = True
            inst.stats["failed"] = msg.get("during")
            error = f"{msg.get('during', '?')}: {msg.get('error', '')}"
            if not inst.ready:  # setup or restore raised: the trainable failed on this instance
                inst.ready = True
                self._deliver(TrialLaunched(time_s=now, trial_id=inst.trial_id, instance_id=inst.instance_id,
                                            market=inst.market, started_s=inst.started_s))
            self._deliver(SegmentFailed(time_s=self.now_s(), trial_id=inst.trial_id, instance_id=inst.instance_id,
                                        error=error))

    def _on_eof(self, inst: _Instance, returncode: int) -> None:
        inst.stats["returncode"] = returncode
        if inst.killed or inst.failed or not inst.alive or returncode == 0:
            return
        assert self._log_dir is not None
        tail = inst.worker.log_path.read_text(errors="replace")[-400:].replace("\n", " ") if inst.worker else ""
        error = f"worker exited with code {returncode}: {tail}"
        inst.failed = True
        if not inst.ready:
            inst.ready = True
            self._deliver(TrialLaunched(time_s=self.now_s(), trial_id=inst.trial_id, instance_id=inst.instance_id,
                                        market=inst.market, started_s=inst.started_s))
        self._deliver(SegmentFailed(time_s=self.now_s(), trial_id=inst.trial_id, instance_id=inst.instance_id,
                                    error=error))

    def _on_notice(self, inst: _Instance) -> None:
        if not inst.alive or inst.gone:
            return
        self._imds.notify(inst.instance_id, time_s=inst.termination_s)
        self._send_or_defer(inst, RevocationNotice(time_s=self.now_s(), trial_id=inst.trial_id,
                                                   instance_id=inst.instance_id, deadline_s=inst.termination_s))

    def _on_termination(self, inst: _Instance) -> None:
        if not inst.alive or inst.gone:
            return
        self._kill(inst)  # its remaining output is now queued ahead of the "ended" item
        self._q.put(("ended", inst, EndReason.PROVIDER))

    def _on_ended(self, inst: _Instance, reason: EndReason) -> None:
        self._imds.unregister(inst.instance_id)
        if reason is EndReason.PROVIDER:
            self._end(inst, inst.termination_s, "provider", inst.reason)
        if reason is EndReason.PROVIDER and not inst.ready:
            self._deliver(LaunchFailed(time_s=self.now_s(), trial_id=inst.trial_id, error="terminated while booting"))
            return
        self._deliver(SegmentEnded(time_s=self.now_s(), trial_id=inst.trial_id, instance_id=inst.instance_id,
                                   steps_done=inst.step, reason=reason))

    def _end(self, inst: _Instance, t: float, ended_by: str, reason: str) -> None:
        """The instance is gone: bill it, count its steps (lost = run but never checkpointed)."""
        if not inst.alive:
            return
        inst.alive = False
        row = self.billing.bill(self.history[inst.market], inst.started_s, t, ended_by, instance_id=inst.instance_id,
                                reason=reason, trial_id=inst.trial_id, max_price_usd_per_hour=inst.max_price)
        self.record.ledger.append(row)
        self.usd += row.charged_usd
        lost = max(0, inst.step - self._checkpoint_step[inst.trial_id]) if inst.step > inst.saved_step else 0
        self.record.instance_steps[inst.instance_id] = (inst.executed, lost)
