"""One trial segment on one instance: restore, train, report, and checkpoint when told or warned.

Run as ``python -m spottune.backends.local.worker --trial t03 --workload digits-mlp --config '{"lr": 0.1, ...}'
--seed 7 --store s3://bucket/prefix --imds-url http://169.254.169.254 --until-step 210``. The same
program runs in a local process (local backend, IMDS emulator) and on a real EC2 spot instance
(Dockerfile image, real IMDS).

Lifecycle:

1. Build the trainable (``setup``) and restore the checkpoint at ``--resume-step`` (0: fresh start;
   -1: the newest intact one) from the store, or the newest intact earlier one if that one is missing
   or corrupt; print ``ready``. The restored version is pinned: this segment's save never prunes it.
2. Train. Each step first waits ``--step-wall-s`` seconds (the simulated step time on this instance
   type divided by the backend's time scale; 0 = full speed), then computes the step and prints its
   metrics. Waiting first means a checkpoint request that arrives during a step discards that step
   cleanly (nothing to roll back), as the driver contract requires.
3. A background thread polls ``<imds-url>/latest/meta-data/spot/instance-action`` every ``--poll-s``
   seconds (AWS recommends 5 s). On a notice the worker checkpoints at once (reason
   ``revocation``) and exits: it does not wait for the orchestrator's round trip.
4. Commands arrive as JSON lines on stdin: ``{"cmd": "checkpoint", "reason": "hop"}`` (save, then
   exit) and ``{"cmd": "exit"}``. SIGTERM means "checkpoint and exit" too. At ``--until-step``
   training pauses and the worker waits for a command.
5. **The driver is gone** (EOF on stdin, or its end of stdout closed: the orchestrator died): a worker
   that trained since its restore saves a checkpoint at once (reason ``lease``, as the AWS agent's
   does when the orchestrator's lease goes stale), then exits 0; one that has nothing new exits
   without saving. Every checkpoint's metadata holds the metrics of each step of its segment
   (``metrics``: ``[[step, {name: value}], ...]``, and ``restored_step``), so a resumed run continues
   from a save the dead orchestrator never confirmed and reports the steps it never journaled from
   there (decision CS4): a crash redoes at most the step in flight.

Every report is one JSON object per line on stdout, with an ``event`` key (typed in
:mod:`spottune.backends.local._messages`; the handlers of one segment are :class:`_Segment`'s methods):

=============  ===============================================================================
``ready``      ``step`` (restored step), ``version`` (checkpoint version or null), ``restore_s``; and
               ``requested_step``, ``lost_steps`` if the checkpoint at ``--resume-step`` was missing or
               corrupt and an earlier one (or a fresh start) was restored instead
``metric``     ``step`` (1-based, across segments), ``metrics`` (name -> float)
``notice``     ``action``, ``time`` (from IMDS)
``checkpoint`` ``step``, ``version``, ``reason``, ``save_s`` (wall seconds to save and verify)
``idle``       ``step``: reached ``--until-step``, waiting for a command
``failed``     ``during`` (setup, restore, step, checkpoint), ``error`` (one line)
``exit``       ``code``
``standby``    ``pid``, ``warm_up_s``: a ``--standby`` worker is warm and waits for ``{"argv": [...]}``
``beat``       ``step``: every ``--heartbeat-s`` wall seconds while a segment runs (from its start, before the
               restore), so that the driver can tell a silent worker from a dead one (decision SV4)
=============  ===============================================================================

Exit codes: 0 after a checkpoint, an exit command or the driver's end; 1 if the trainable or the store failed
(after a ``failed`` line); 2 on bad arguments.

``--standby`` starts a pre-warmed worker that waits for its arguments on stdin (:func:`standby`); the
local backend keeps a pool of them so that launching a segment costs milliseconds of wall time, not
the second or more of Python imports that the accelerated clock would turn into simulated boot time.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from typing import Any, TextIO

from spottune.backends.local._messages import (
    Beat,
    CheckpointCommand,
    Command,
    Exited,
    ExitCommand,
    Failed,
    Idle,
    Metric,
    Notice,
    Ready,
    Report,
    Saved,
    SegmentCommand,
    Standby,
    decode_command,
    encode,
)
from spottune.backends.local.imds import DEFAULT_IMDS_URL, ImdsClient

__all__ = ["main", "parse_args", "run", "standby"]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the worker's command line (see the module docstring).

    A ``--checkpoint-key-file`` is read and its key put in ``$SPOTTUNE_CHECKPOINT_KEY`` for the store.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments without the program name (None: ``sys.argv[1:]``).

    Returns
    -------
    argparse.Namespace
        ``config`` and ``storage_options`` as dicts (``--storage-options-file`` merged over the latter);
        ``resume_step``, ``until_step`` and ``max_steps`` in steps; ``step_wall_s`` and ``poll_s`` in wall
        seconds.

    Raises
    ------
    SystemExit
        Exit code 2, with the usage line on stderr, on bad arguments: a missing required one, ``--config`` or
        ``--storage-options`` not a JSON object, an unreadable options or key file (or not a key), a negative
        ``--until-step`` or ``--step-wall-s``, or ``--poll-s`` not positive.
    """
    p = argparse.ArgumentParser(prog="python -m spottune.backends.local.worker", description="Run one trial segment.")
    p.add_argument("--trial", required=True, help="trial id (checkpoint key)")
    p.add_argument("--workload", required=True, help="built-in workload name or 'module:Class'")
    p.add_argument("--config", default="{}", help="hyperparameter configuration, JSON")
    p.add_argument("--seed", type=int, default=0, help="trial seed (Trainable.rng)")
    p.add_argument("--max-steps", type=int, default=None, help="the trial's S_max, given to the trainable")
    p.add_argument("--store", required=True, help="checkpoint store URL: folder, file://, s3://, memory://")
    p.add_argument("--storage-options", default="{}",
                   help="fsspec options for --store, JSON, without credentials: those come from "
                        "--storage-options-file, $SPOTTUNE_STORAGE_SECRETS (JSON, merged in) or the AWS "
                        "credential chain")
    p.add_argument("--storage-options-file", default=None,
                   help="a JSON file (mode 0600) of fsspec options for --store, merged over --storage-options")
    p.add_argument("--checkpoint-key-file", default=None,
                   help="a file (mode 0600) holding the experiment's checkpoint key (hex); default "
                        "$SPOTTUNE_CHECKPOINT_KEY")
    p.add_argument("--keep", type=int, default=2, help="checkpoint versions kept per trial")
    p.add_argument("--resume-step", type=int, default=-1,
                   help="restore the checkpoint taken at this step; 0 = fresh start; -1 = newest (default)")
    p.add_argument("--until-step", type=int, required=True, help="pause training at this step and wait")
    p.add_argument("--step-wall-s", type=float, default=0.0, help="wall seconds per step (pacing); 0 = full speed")
    p.add_argument("--imds-url", default=DEFAULT_IMDS_URL, help="IMDS root; 'none' disables polling")
    p.add_argument("--poll-s", type=float, default=5.0, help="wall seconds between IMDS polls")
    p.add_argument("--instance-id", default="", help="for the checkpoint metadata and logs")
    p.add_argument("--heartbeat-s", type=float, default=0.0,
                   help="wall seconds between two 'beat' reports while the segment runs; 0 = none (default)")
    args = p.parse_args(argv)
    for name in ("config", "storage_options"):
        try:
            value = json.loads(getattr(args, name))
        except ValueError as exc:
            p.error(f"--{name.replace('_', '-')} is not valid JSON: {exc}")
        if not isinstance(value, dict):
            p.error(f"--{name.replace('_', '-')} must be a JSON object")
        setattr(args, name, value)
    if args.storage_options_file:
        try:
            args.storage_options = {**args.storage_options, **_options_file(args.storage_options_file)}
        except (OSError, ValueError) as exc:
            p.error(f"--storage-options-file: {exc}")
    if args.checkpoint_key_file:
        from spottune.checkpoint._secrets import CHECKPOINT_KEY_ENV, checkpoint_key

        try:
            with open(args.checkpoint_key_file) as fh:
                raw = fh.read().strip()
            checkpoint_key({CHECKPOINT_KEY_ENV: raw})
        except Exception as exc:  # unreadable, or not a key
            p.error(f"--checkpoint-key-file: {exc}")
        os.environ[CHECKPOINT_KEY_ENV] = raw  # read by the store and by function-API checkpoints
    if args.until_step < 0 or args.step_wall_s < 0 or args.poll_s <= 0 or not args.heartbeat_s >= 0:
        p.error("--until-step, --step-wall-s and --heartbeat-s must be >= 0 and --poll-s > 0")
    return args


def _options_file(path: str) -> dict[str, Any]:
    """The JSON object in ``path`` (storage options handed over in a file, never on a command line).

    Raises
    ------
    OSError
        If the file cannot be read.
    ValueError
        If it is not a JSON object.
    """
    with open(path) as fh:
        value = json.load(fh)
    if not isinstance(value, dict):
        raise ValueError(f"{path} does not hold a JSON object")
    return value


class _Out:
    """Report writer (thread-safe, flushed per line): one :mod:`._messages` report per line.

    If the reader is gone (a broken pipe: the driver died), reports are dropped from then on, ``broken``
    is set and ``on_broken`` is called (the segment then saves and exits, as at EOF on stdin).
    """

    def __init__(self, stream: TextIO, on_broken: Any = None):
        self.stream = stream
        self.lock = threading.Lock()
        self.broken = False
        self.on_broken = on_broken

    def __call__(self, report: Report) -> None:
        line = encode(report)
        with self.lock:
            if self.broken:
                return
            try:
                self.stream.write(line + "\n")
                self.stream.flush()
            except (BrokenPipeError, OSError, ValueError):
                self.broken = True
                _silence(self.stream)
        if self.broken and self.on_broken is not None:
            self.on_broken()


def _silence(stream: TextIO) -> None:
    """Point a broken output stream's descriptor at /dev/null, so that nothing fails when it is flushed at exit."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, stream.fileno())
        os.close(fd)
    except (OSError, ValueError, AttributeError):  # not a real file (a test's StringIO)
        pass


def _one_line(exc: BaseException) -> str:
    from spottune.checkpoint._secrets import redact

    return redact(f"{type(exc).__name__}: {exc}".replace("\n", " "))[:500]


def _print_exc() -> None:
    """The current traceback to stderr (the worker's log), URL user information redacted."""
    from spottune.checkpoint._secrets import redact

    print(redact(traceback.format_exc()), file=sys.stderr, end="", flush=True)


class _Signals:
    """Everything that can interrupt training, gathered by helper threads; ``wake`` is set on news.

    One per process: the stdin reader and the SIGTERM handler outlive a segment (a standby worker
    runs several). :meth:`new_segment` resets the per-segment parts.
    """

    def __init__(self) -> None:
        self.wake = threading.Event()
        self.commands: queue.Queue[Command | None] = queue.Queue()
        self.notice: Any = None
        self.sigterm = False
        self.orphaned = False  #: the driver is gone (its end of stdout closed)
        self.stop_polling = threading.Event()
        self._reading = False

    def start(self, stdin: TextIO) -> "_Signals":
        """Start the stdin reader (once) and, on the main thread, the SIGTERM handler."""
        if not self._reading:
            self._reading = True
            threading.Thread(target=self.read_commands, args=(stdin,), daemon=True, name="commands").start()
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGTERM, self._on_sigterm)
        return self

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        self.sigterm = True
        self.wake.set()

    def driver_gone(self) -> None:
        """The driver's end of stdout closed (it died): wake the segment, which saves and exits."""
        self.orphaned = True
        self.wake.set()

    def new_segment(self) -> None:
        """Forget the previous segment's notice and IMDS poller."""
        self.stop_polling.set()
        self.stop_polling = threading.Event()
        self.notice = None
        self.wake.clear()

    def read_commands(self, stream: TextIO) -> None:
        for line in stream:
            line = line.strip()
            if not line:
                continue
            try:
                cmd = decode_command(line)
            except ValueError:  # not a command: ignore it, as a real instance ignores garbage
                continue
            self.commands.put(cmd)
            self.wake.set()
        self.commands.put(None)  # EOF: the driver is gone
        self.wake.set()

    def poll_imds(self, client: ImdsClient, interval_s: float, stop: threading.Event) -> None:
        last_error = ""
        while not stop.is_set():
            try:
                action = client.instance_action()
            except (OSError, ValueError) as exc:  # unreachable, garbled or refused (401): log, try again next time
                error = _one_line(exc)
                if error != last_error:  # every new error once, not 20 lines a second
                    print(f"spottune worker: IMDS poll failed: {error}", file=sys.stderr, flush=True)
                last_error = error
                action = None
            if action is not None and not stop.is_set():
                self.notice = action
                self.wake.set()
                return
            stop.wait(interval_s)


class _Segment:
    """One segment's state and its handlers; :meth:`loop` dispatches whatever woke the worker.

    Each handler returns the exit code when the segment ends, or None to go on.
    """

    def __init__(self, args: argparse.Namespace, out: _Out, sig: _Signals):
        self.args, self.out, self.sig = args, out, sig
        self.stop_polling = sig.stop_polling
        self.trainable: Any = None
        self.store: Any = None
        self.due = 0.0
        self.idle_reported = False
        self.restored = 0  # the step restored: a lease save is made only past it
        self.reported: list[list[Any]] = []  # [step, metrics] of every step of this segment (a lease save's metadata)

    # -- start and end ------------------------------------------------------------------------------
    def start(self) -> int | None:
        """Open the store, build the trainable, restore; report ``Ready`` (or ``Failed``)."""
        from spottune.checkpoint import open_store
        from spottune.checkpoint._secrets import storage_options_from_env, store_key
        from spottune.workloads import get_workload

        args = self.args
        try:
            self.store = open_store(args.store, storage_options_from_env(args.storage_options), keep=args.keep,
                                    key=store_key())
            self.trainable = get_workload(args.workload).make(args.config, seed=args.seed, max_steps=args.max_steps)
        except Exception as exc:  # the user's setup() or a bad workload: report, never a traceback only
            return self.fail("setup", exc)
        t0 = time.monotonic()
        try:
            info = None
            if args.resume_step != 0:
                step = None if args.resume_step < 0 else args.resume_step
                info = self.store.restore_trainable(args.trial, self.trainable, step=step)
        except Exception as exc:
            return self.fail("restore", exc)
        step = self.restored = self.trainable.iteration
        fallback = args.resume_step > 0 and step < args.resume_step  # the store fell back (missing/corrupt)
        self.out(Ready(step=step, version=None if info is None else info.version,
                       restore_s=round(time.monotonic() - t0, 6), pid=os.getpid(),
                       requested_step=args.resume_step if fallback else None,
                       lost_steps=args.resume_step - step if fallback else None))
        if args.imds_url.lower() != "none":
            threading.Thread(target=self.sig.poll_imds, args=(ImdsClient(args.imds_url), args.poll_s, self.stop_polling),
                             daemon=True, name="imds-poll").start()
        self.due = time.monotonic() + args.step_wall_s
        return None

    def finish(self, code: int) -> int:
        self.stop_polling.set()
        if self.trainable is not None:
            try:
                self.trainable.cleanup()
            except Exception:
                _print_exc()
        self.out(Exited(code=code))
        return code

    def fail(self, during: str, exc: BaseException) -> int:
        _print_exc()
        self.out(Failed(during=during, error=_one_line(exc)))
        return self.finish(1)

    def checkpoint(self, reason: str) -> int:
        t = time.monotonic()
        # the segment's metrics: a driver that died before it saw them (or this save) reports them from here
        metadata: dict[str, Any] = {"reason": reason, "instance_id": self.args.instance_id,
                                    "restored_step": self.restored, "metrics": self.reported}
        try:
            info = self.store.save_trainable(self.args.trial, self.trainable, metadata=metadata)
        except Exception as exc:
            return self.fail("checkpoint", exc)
        self.out(Saved(step=info.step, version=info.version, reason=reason, save_s=round(time.monotonic() - t, 6)))
        return self.finish(0)

    # -- handlers, in priority order ----------------------------------------------------------------
    def on_notice(self) -> int | None:
        notice = self.sig.notice
        if notice is None:
            return None
        self.out(Notice(action=notice.action, time=notice.time_utc))
        return self.checkpoint("revocation")  # at once: no round trip to the orchestrator

    def on_sigterm(self) -> int | None:
        return self.checkpoint("sigterm") if self.sig.sigterm else None

    def on_driver_gone(self) -> int | None:
        """The driver died (EOF on stdin, or its end of stdout closed): save what it may not have seen, then exit."""
        if self.trainable.iteration > self.restored:
            return self.checkpoint("lease")
        return self.finish(0)

    def on_orphaned(self) -> int | None:
        return self.on_driver_gone() if self.sig.orphaned else None

    def on_command(self) -> int | None:
        try:
            cmd = self.sig.commands.get_nowait()
        except queue.Empty:
            return None
        match cmd:
            case None:  # EOF: the driver is gone
                self.sig.commands.put(None)  # keep the EOF visible to a standby loop
                return self.on_driver_gone()
            case CheckpointCommand(reason=reason):
                return self.checkpoint(reason)
            case ExitCommand():
                return self.finish(0)
        return None  # a command that means nothing during a segment

    def on_idle(self) -> int | None:
        """At ``--until-step`` the worker waits for a command (reported once)."""
        if not self.idle_reported:
            self.out(Idle(step=self.trainable.iteration))
            self.idle_reported = True
        self.sig.wake.wait(1.0)
        self.sig.wake.clear()
        return None

    def on_step(self) -> int | None:
        """Wait out the step's wall time (a request arriving meanwhile discards it), then train one step."""
        wait = self.due - time.monotonic()
        if wait > 0:
            self.sig.wake.wait(wait)
            self.sig.wake.clear()
            return None
        try:
            metrics = self.trainable.train()
        except Exception as exc:
            return self.fail("step", exc)
        self.reported.append([self.trainable.iteration, metrics])
        self.out(Metric(step=self.trainable.iteration, metrics=metrics))
        self.due = max(self.due + self.args.step_wall_s, time.monotonic() - self.args.step_wall_s)
        return None

    def loop(self) -> int:
        while True:
            for handler in (self.on_notice, self.on_sigterm, self.on_orphaned, self.on_command):
                code = handler()
                if code is not None:
                    return code
            at_end = self.trainable.iteration >= self.args.until_step
            code = self.on_idle() if at_end else self.on_step()
            if code is not None:
                return code


def run(args: argparse.Namespace, stdin: TextIO | None = None, stdout: TextIO | None = None,
        signals: _Signals | None = None) -> int:
    """Run one segment (see the module docstring): restore, train to ``--until-step``, report, checkpoint when
    told or warned.

    Failures of the trainable or the store are reported on ``stdout`` (a ``failed`` line), not raised.

    Parameters
    ----------
    args : argparse.Namespace
        The segment's arguments (:func:`parse_args`).
    stdin : text stream, optional
        Where commands arrive, one JSON line each (None: ``sys.stdin``).
    stdout : text stream, optional
        Where reports go, one JSON line each (None: ``sys.stdout``).
    signals : _Signals, optional
        The process's command reader and SIGTERM handler, shared by the segments of a standby worker
        (None: new ones).

    Returns
    -------
    int
        The exit code: 0 after a checkpoint, an exit command or the driver's end; 1 if the trainable or
        the store failed.
    """
    sig = (signals or _Signals()).start(stdin or sys.stdin)
    sig.new_segment()
    segment = _Segment(args, _Out(stdout or sys.stdout, on_broken=sig.driver_gone), sig)
    done = threading.Event()
    if getattr(args, "heartbeat_s", 0.0) > 0:
        threading.Thread(target=_beat, args=(segment, args.heartbeat_s, done), daemon=True, name="beat").start()
    try:
        code = segment.start()
        return code if code is not None else segment.loop()
    finally:
        done.set()


def _beat(segment: "_Segment", every_s: float, done: threading.Event) -> None:
    """Report ``beat`` every ``every_s`` wall seconds until ``done`` (the segment ended)."""
    while not done.wait(every_s):
        trainable = segment.trainable
        segment.out(Beat(step=None if trainable is None else trainable.iteration))


def _warm_up(workload: str, store: str | None, storage_options: dict[str, Any]) -> None:
    """Pay the one-off costs of a segment ahead of time: imports, datasets, the store's client.

    Builds (and throws away) one trainable of the workload with its first default configuration, so
    torch / scikit-learn are imported and the dataset is loaded and cached in this process. Failures
    are written to stderr and otherwise ignored here; the real segment reports them.
    """
    from spottune.checkpoint import open_store
    from spottune.workloads import get_workload

    try:
        wl = get_workload(workload)
        configs = wl.configs() if wl.search_space else [{}]
        wl.make(configs[0]).cleanup()
    except Exception as exc:  # not fatal: the segment that needs it reports the failure on stdout
        print(f"spottune worker: warm-up of workload {workload!r} failed: {_one_line(exc)}", file=sys.stderr)
    if store:
        try:
            from spottune.checkpoint._secrets import storage_options_from_env

            open_store(store, storage_options_from_env(storage_options))
        except Exception as exc:
            print(f"spottune worker: warm-up of store {store!r} failed: {_one_line(exc)}", file=sys.stderr)


def standby(argv: Sequence[str], stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """A pre-started, reusable worker (the local backend's warm pool: a booted instance from a baked image).

    ``python -m spottune.backends.local.worker --standby --workload W [--store URL --storage-options JSON]`` warms up
    (:func:`_warm_up`), prints ``{"event": "standby"}`` and waits for a JSON line ``{"argv": [...]}``
    holding a segment's arguments, runs that segment, and, if it ended with exit code 0, prints
    ``standby`` again and waits for the next one (the driver recycles it after an hourly hop). EOF,
    ``{"cmd": "exit"}``, SIGTERM or a failed segment end the process.

    Parameters
    ----------
    argv : sequence of str
        ``--standby --workload W`` and optionally ``--store URL``, ``--storage-options JSON``,
        ``--storage-options-file PATH`` (an unreadable file is logged to stderr and left out).
    stdin : text stream, optional
        Where segment arguments and commands arrive (None: ``sys.stdin``).
    stdout : text stream, optional
        Where reports go (None: ``sys.stdout``).

    Returns
    -------
    int
        The exit code: 0 on EOF, an exit command, SIGTERM or the driver's end; otherwise the code of the
        segment that ended the process (1: the trainable or the store failed).

    Raises
    ------
    SystemExit
        Exit code 2 on bad standby arguments, or on a segment's bad arguments (:func:`parse_args`).
    ValueError
        If ``--storage-options`` is not JSON.
    """
    p = argparse.ArgumentParser(prog="python -m spottune.backends.local.worker --standby")
    p.add_argument("--standby", action="store_true")
    p.add_argument("--workload", required=True)
    p.add_argument("--store", default=None)
    p.add_argument("--storage-options", default="{}")
    p.add_argument("--storage-options-file", default=None)
    pre = p.parse_args(argv)
    stdin = stdin or sys.stdin
    sig = _Signals().start(stdin)
    out = _Out(stdout or sys.stdout, on_broken=sig.driver_gone)
    t0 = time.monotonic()
    options = json.loads(pre.storage_options)
    if pre.storage_options_file:
        try:
            options.update(_options_file(pre.storage_options_file))
        except (OSError, ValueError) as exc:
            print(f"spottune worker: {_one_line(exc)}", file=sys.stderr)
    _warm_up(pre.workload, pre.store, options)
    warm_up_s = round(time.monotonic() - t0, 6)
    while True:
        out(Standby(pid=os.getpid(), warm_up_s=warm_up_s))
        while True:
            if sig.sigterm or sig.orphaned:
                return 0
            try:
                msg = sig.commands.get(timeout=1.0)
            except queue.Empty:
                continue
            if msg is None or isinstance(msg, ExitCommand):
                return 0
            if isinstance(msg, SegmentCommand):
                break
        code = run(parse_args(msg.argv), stdin=stdin, stdout=stdout, signals=sig)
        if code != 0 or sig.sigterm:
            return code
        warm_up_s = 0.0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m spottune.backends.local.worker``: a standby worker with ``--standby``
    (:func:`standby`), else one segment (:func:`run`).

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments without the program name (None: ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit code (0, 1; see the module docstring).

    Raises
    ------
    SystemExit
        Exit code 2 on bad arguments.
    ValueError
        With ``--standby``, if ``--storage-options`` is not JSON.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--standby" in argv:
        return standby(argv)
    return run(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
