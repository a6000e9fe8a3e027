"""Worker processes of the local backend, and the warm pool that makes launching one cheap.

Each trial segment runs in ``python -m spottune.backends.local.worker`` (:mod:`spottune.backends.local.worker`): JSON-line commands
go in on stdin, JSON-line reports come out on stdout, stderr goes to ``<log_dir>/wNNNNN.log``. A reader
thread per process turns every report into a callback ``on_line(owner, report)`` (a typed report of
:mod:`spottune.backends.local._messages`) and the process's end
into ``on_eof(owner, returncode)``, where ``owner`` is what the process runs now (the backend's
instance record); reports of a process that runs nothing are dropped.

**Warm pool** ([I]). A worker's Python start-up (imports of torch or scikit-learn, the dataset) takes
1-10 s of wall time, which the accelerated clock would turn into 0.5-5 simulated hours of boot at
``time_scale`` 1,800, so no revocation in the first half hour could ever be observed. So the pool
pre-starts ``--standby`` workers (imports done, dataset loaded, store client opened; like a booted
instance from a baked image) that wait for a segment's arguments on stdin. Before the clock starts,
one warm worker per trial plus the spares are started and waited for; later launches take a warm one
(milliseconds) and the pool is refilled up to the spares. After a clean segment (a checkpoint, then
the user's ``Terminate``: the hourly hop) the process is recycled into the pool instead of killed; a
provider termination always kills it (SIGKILL: the instance is gone).

**Leftovers** (crash safety). Every started process is reported to ``on_spawn`` (the run journal records
its PID); a worker saves a checkpoint and exits by itself at EOF on stdin when the driver dies, and
:func:`kill_leftover_workers` SIGKILLs those still running (after a grace period for that save) when a
killed run is resumed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spottune.backends.local._messages import Command, SegmentCommand, Standby, decode_report, encode
from spottune.checkpoint._secrets import CHECKPOINT_KEY_ENV, worker_env, write_private
from spottune.errors import BackendError

__all__ = ["Worker", "WorkerPool", "segment_argv"]


@dataclass(slots=True, eq=False)
class Worker:
    """One worker process, pre-started in standby or started for a segment.

    Attributes
    ----------
    name : str
        ``w00001``, ...; its stderr is ``<log_dir>/<name>.log``.
    proc : subprocess.Popen
    log_path : pathlib.Path
    standby_mode : bool
        Started with ``--standby``: reusable after a clean segment.
    standby : threading.Event
        Set while it is warm and waiting for a segment.
    owner : object or None
        What it runs now (the backend's instance record).
    """

    name: str
    proc: subprocess.Popen
    log_path: Path
    standby_mode: bool = False
    standby: threading.Event = field(default_factory=threading.Event)
    reader: threading.Thread | None = None
    owner: Any = None

    def tail(self, n_chars: int = 400) -> str:
        """The end of its stderr log, on one line.

        Parameters
        ----------
        n_chars : int, default 400
            Characters kept.

        Returns
        -------
        str
            "" if the log cannot be read.
        """
        try:
            return self.log_path.read_text(errors="replace")[-n_chars:].replace("\n", " ")
        except OSError:
            return ""


class WorkerPool:
    """Starts, feeds, recycles and stops worker processes (see the module docstring).

    Parameters
    ----------
    python : str
        Interpreter that runs ``-m spottune.backends.local.worker``.
    workload : str
        Workload the standby workers warm up.
    store_url : str
    storage_options : mapping
        The checkpoint store of every worker (opened ahead of time by the standby ones). They reach
        the workers in a file only this user can read (mode 0600, in a private temporary folder
        removed by :meth:`stop_all`), named by ``--storage-options-file``: never on a command line.
    checkpoint_key : str, optional
        The experiment's checkpoint key (hex), given to every worker in its environment
        (``$SPOTTUNE_CHECKPOINT_KEY``): it signs function-API pickles and authenticates the store's
        manifests. Default: the driver's ``$SPOTTUNE_CHECKPOINT_KEY`` if set, else a new random key.
    spares : int
        Warm workers kept beyond the running ones; 0 starts every segment cold (no pool).
    on_line : callable (owner, msg: dict) -> None
    on_eof : callable (owner, returncode: int) -> None
        Called from the reader threads.
    log_dir : pathlib.Path, optional
        Where the stderr logs go; must be set before the first process starts.
    """

    def __init__(self, *, python: str, workload: str, store_url: str, storage_options: Mapping[str, Any],
                 spares: int, on_line: Callable[[Any, dict[str, Any]], None], on_eof: Callable[[Any, int], None],
                 log_dir: Path | None = None, on_spawn: Callable[["Worker"], None] | None = None,
                 checkpoint_key: str | None = None):
        self.python = python
        self.workload = workload
        self.store_url = store_url
        # storage options go to a 0600 file, never a command line (visible in `ps`, /proc/<pid>/cmdline)
        self._secret_env = {CHECKPOINT_KEY_ENV: worker_env({}, checkpoint_key)[1][CHECKPOINT_KEY_ENV]}
        self._options = json.dumps(dict(storage_options))
        self.checkpoint_key = self._secret_env[CHECKPOINT_KEY_ENV]  # hex: the driver reads the workers' saves with it
        self._options_dir: str | None = None
        self.log_dir = log_dir
        self.spares = max(0, int(spares))
        self.enabled = self.spares > 0
        self._on_line = on_line
        self._on_eof = on_eof
        self._on_spawn = on_spawn  # told every started process (the run journal records its PID)
        self._all: list[Worker] = []
        self._idle: list[Worker] = []
        self._count = 0

    # -- starting -------------------------------------------------------------------------------------
    @property
    def _options_file(self) -> str:
        """The storage-options file (mode 0600 in a mode-0700 temporary folder), written on first use."""
        if self._options_dir is None:
            self._options_dir = tempfile.mkdtemp(prefix="spottune-pool-")
            write_private(os.path.join(self._options_dir, "storage-options.json"), self._options)
        return os.path.join(self._options_dir, "storage-options.json")

    def spawn(self, argv: list[str], owner: Any = None) -> Worker:
        """Start ``python -m spottune.backends.local.worker <argv>`` for ``owner``, with its reader thread.

        Parameters
        ----------
        argv : list of str
            The worker's arguments.
        owner : object, optional
            The instance it runs; None: a pooled standby worker.

        Returns
        -------
        Worker
            The started worker (its stderr goes to ``<log_dir>/w<NNNNN>.log``).

        Raises
        ------
        BackendError
            If the pool has no ``log_dir``.
        """
        if self.log_dir is None:
            raise BackendError("the worker pool has no log_dir")
        self._count += 1
        name = f"w{self._count:05d}"
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        extra = [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []
        env["PYTHONPATH"] = os.pathsep.join([root, os.getcwd(), *extra])
        env.update(self._secret_env)  # the experiment's checkpoint HMAC key
        log_path = self.log_dir / f"{name}.log"
        with open(log_path, "wb") as stderr:
            proc = subprocess.Popen([self.python, "-m", "spottune.backends.local.worker", *argv], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=stderr, env=env, text=True, bufsize=1)
        worker = Worker(name, proc, log_path, owner=owner)
        worker.reader = threading.Thread(target=self._read, args=(worker,), daemon=True, name=f"worker-{name}")
        worker.reader.start()
        self._all.append(worker)
        if self._on_spawn is not None:
            self._on_spawn(worker)
        return worker

    def segment(self, owner: Any, argv: list[str]) -> tuple[Worker, bool]:
        """Start a segment for ``owner``: on a pooled worker (then refill the pool) or a new process.

        Returns the worker and whether it was warm. ``argv`` is :func:`segment_argv`'s; the pool adds
        its workload and store.

        Parameters
        ----------
        owner : object
            The instance the worker runs (its :attr:`Worker.owner`).
        argv : list of str
            See above.

        Returns
        -------
        worker : Worker
            The worker.
        warm : bool
            Whether it had finished its imports and loaded the data.

        Raises
        ------
        BackendError
            As :meth:`spawn`.
        """
        argv = ["--workload", self.workload, "--store", self.store_url, "--storage-options-file", self._options_file,
                *argv]
        worker = self.take(owner) if self.enabled else None
        if worker is None:
            return self.spawn(argv, owner=owner), False
        warm = worker.standby.is_set()
        self.command(worker, SegmentCommand(argv))
        self.refill()
        return worker, warm

    def spawn_standby(self) -> Worker:
        """Start a ``--standby`` worker into the pool.

        Returns
        -------
        Worker
            Not yet warm.
        """
        worker = self.spawn(["--standby", "--workload", self.workload, "--store", self.store_url,
                             "--storage-options-file", self._options_file])
        worker.standby_mode = True
        self._idle.append(worker)
        return worker

    def warm_up(self, n: int, timeout_s: float) -> float:
        """Start ``n`` standby workers and wait until every idle one is warm; returns the wall seconds.

        Parameters
        ----------
        n : int
            Standby workers to start.
        timeout_s : float
            Wall seconds to wait for them.

        Returns
        -------
        float
            Wall seconds until every idle worker was warm.

        Raises
        ------
        BackendError
            If a standby worker exits, or they are not all warm within ``timeout_s``.
        """
        t0 = time.monotonic()
        for _ in range(n):
            self.spawn_standby()
        deadline = t0 + timeout_s
        for worker in list(self._idle):
            while not worker.standby.wait(0.1):
                if worker.proc.poll() is not None:
                    raise BackendError(f"a standby worker exited with code {worker.proc.returncode}: {worker.tail()}")
                if time.monotonic() > deadline:
                    raise BackendError(f"standby workers not ready after {timeout_s:.0f} s")
        return time.monotonic() - t0

    # -- the pool -------------------------------------------------------------------------------------
    def take(self, owner: Any) -> Worker | None:
        """A live pooled worker for ``owner``, warm ones first; None if the pool is empty.

        Parameters
        ----------
        owner : object
            The instance the worker will run.

        Returns
        -------
        Worker or None
        """
        self._idle = [w for w in self._idle if w.proc.poll() is None]
        worker = next((w for w in self._idle if w.standby.is_set()), self._idle[0] if self._idle else None)
        if worker is not None:
            self._idle.remove(worker)
            worker.owner = owner
        return worker

    def refill(self) -> None:
        """Start a standby worker if fewer than ``spares`` are idle."""
        if len(self._idle) < self.spares:
            self.spawn_standby()

    def recycle(self, worker: Worker) -> None:
        """The worker's segment ended cleanly: detach it (it prints ``standby`` again) and pool it.

        Parameters
        ----------
        worker : Worker
            A worker of this pool.
        """
        worker.owner = None
        worker.standby.clear()
        self._idle.insert(0, worker)
        while len(self._idle) > self.spares:  # keep the pool small: drop cold ones first
            cold = [x for x in self._idle if not x.standby.is_set() and x is not worker]
            victim = cold[-1] if cold else self._idle[-1]
            self._idle.remove(victim)
            self.stop(victim)

    # -- talking and stopping -------------------------------------------------------------------------
    @staticmethod
    def command(worker: Worker | None, cmd: Command) -> bool:
        """Write a command (:mod:`._messages`) to the worker's stdin; False if it is gone.

        Parameters
        ----------
        worker : Worker or None
            The segment's worker.
        cmd : Command
            A checkpoint or segment command.

        Returns
        -------
        bool
            True if written.
        """
        if worker is None or worker.proc.poll() is not None or worker.proc.stdin is None:
            return False
        try:
            worker.proc.stdin.write(encode(cmd) + "\n")
            worker.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    @staticmethod
    def stop(worker: Worker) -> None:
        """SIGKILL the process (if alive) and wait until its output has been read.

        Parameters
        ----------
        worker : Worker
            A worker of this pool.
        """
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

    def stop_all(self) -> None:
        """Stop every process this pool started and remove the storage-options file."""
        for worker in self._all:
            self.stop(worker)
        if self._options_dir is not None:
            shutil.rmtree(self._options_dir, ignore_errors=True)
            self._options_dir = None

    def _read(self, worker: Worker) -> None:
        """Reader thread: every stdout line of the worker becomes a callback, then EOF."""
        assert worker.proc.stdout is not None
        for line in worker.proc.stdout:
            try:
                msg = decode_report(line)
            except ValueError:
                continue  # stray print from user code
            if isinstance(msg, Standby):
                worker.standby.set()
            elif worker.owner is not None:
                self._on_line(worker.owner, msg)
        code = worker.proc.wait()
        if worker.owner is not None:
            self._on_eof(worker.owner, code)


def segment_argv(*, trial_id: str, instance_id: str, config: Mapping[str, Any], seed: int, resume_step: int,
                 until_step: int, step_wall_s: float, imds_url: str, poll_wall_s: float, max_steps: int | None,
                 keep: int, heartbeat_wall_s: float = 0.0) -> list[str]:
    """The arguments of one segment, for ``python -m spottune.backends.local.worker`` or a standby worker's ``argv``.

    The workload and the store are the pool's; see :func:`spottune.backends.local.worker.parse_args` for each one.

    Parameters
    ----------
    trial_id, instance_id : str
        The trial and the instance.
    config : mapping
        The trial's hyperparameters (sent as JSON).
    seed : int
        The trial's seed.
    resume_step : int
        The checkpoint step to restore (0: fresh).
    until_step : int
        The step to train to.
    step_wall_s : float
        Wall seconds each step waits first: the simulated step time on the instance type divided by the time scale
        (0: full speed).
    imds_url : str
        The instance's IMDS base URL (the emulator's path for it).
    poll_wall_s : float
        Wall seconds between IMDS polls.
    max_steps : int or None
        S_max, steps.
    keep : int
        Checkpoint versions the store keeps per trial.
    heartbeat_wall_s : float, default 0.0
        Wall seconds between the worker's ``beat`` reports (0: none; decision SV4).

    Returns
    -------
    list of str
    """
    argv = ["--trial", trial_id, "--config", json.dumps(dict(config)), "--seed", str(seed), "--keep", str(keep),
            "--resume-step", str(resume_step), "--until-step", str(until_step), "--step-wall-s", repr(step_wall_s),
            "--imds-url", imds_url, "--poll-s", repr(poll_wall_s), "--instance-id", instance_id]
    if max_steps is not None:
        argv += ["--max-steps", str(max_steps)]
    if heartbeat_wall_s > 0:
        argv += ["--heartbeat-s", repr(float(heartbeat_wall_s))]
    return argv


def _cmdline(pid: int) -> str | None:
    """The command line of a running process (Linux ``/proc``), or None if it is gone or unreadable."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None


def kill_leftover_workers(records: list[dict[str, Any]], store_url: str, timeout_s: float = 10.0,
                          grace_s: float = 0.0) -> list[int]:
    """SIGKILL the worker processes a killed run left behind; returns their PIDs.

    A worker whose driver died saves a checkpoint and exits by itself (:mod:`spottune.backends.local.worker`):
    those still running are first given ``grace_s`` wall seconds to do so; only the ones left are killed.

    Parameters
    ----------
    records : list of dict
        The run's journal (:func:`spottune.journal.read_journal`): ``spawn`` outcomes name every worker PID.
    store_url : str
        The run's checkpoint store: a PID is killed only if its command line is a spottune worker's
        (``spottune.backends.local.worker``) of this store, so that a PID reused by another process is
        left alone.
    timeout_s : float
        Wall seconds to wait for the killed processes to be gone.
    grace_s : float
        Wall seconds to wait for the leftover workers to exit by themselves before killing them.

    Raises
    ------
    BackendError
        If a killed process still runs after ``timeout_s``.
    """
    pids = [int(r["pid"]) for r in records if r.get("k") == "outcome" and r.get("op") == "spawn"]

    def ours(pid: int) -> bool:
        cmd = _cmdline(pid)
        return (cmd is not None and "spottune.backends.local.worker" in cmd and store_url in cmd
                and not _zombie(pid))

    deadline = time.monotonic() + grace_s
    while any(ours(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.02)  # saving the steps their dead driver never confirmed
    killed = []
    for pid in pids:
        if not ours(pid):
            continue
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except ProcessLookupError:
            continue
    deadline = time.monotonic() + timeout_s
    for pid in killed:
        while (cmd := _cmdline(pid)) is not None and "spottune.backends.local.worker" in cmd:
            if _zombie(pid):
                break
            if time.monotonic() > deadline:
                raise BackendError(f"leftover worker process {pid} still runs {timeout_s:g} s after SIGKILL")
            time.sleep(0.02)
    return killed


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False
