"""The agent on a spot instance: one trial segment, wrapped for the cloud.

Run as ``python -m spottune.backends.aws.agent --segment s3://bucket/prefix/<experiment>/segments/<launch>.json``
(the worker image's entry point; the user data passes the segment). It:

1. reads the segment description from S3 (:meth:`spottune.backends.aws._channel.Control.put_segment`);
2. starts the existing worker, ``python -m spottune.backends.local.worker`` (:mod:`spottune.backends.local.worker`),
   with the segment's arguments: the worker restores from the S3 checkpoint store, trains, polls IMDSv2
   ``spot/instance-action`` and checkpoints on its own at an interruption notice, exactly as in the local
   backend;
3. relays every report line of the worker to the experiment's SQS FIFO queue (:class:`~._channel.Outbox`,
   deduplicated by launch id and sequence number), then its exit code;
4. polls IMDSv2 ``events/recommendations/rebalance`` (an early hint, relayed once; read once before the worker
   starts too, so that a hint posted while the host booted reaches the orchestrator before the worker's first
   report, which may be the notice) and the segment's command object in S3 (``checkpoint``, ``exit``: handed
   to the worker's stdin);
5. checks the orchestrator's lease in S3 at every poll: if it is stale (the orchestrator died), it tells a
   worker still training to checkpoint (reason ``lease``) and waits for the save at most
   ``lease_save_wall_s`` (default 60 s), then kills the worker and exits with code 3: the user data then
   powers the host off (``InstanceInitiatedShutdownBehavior=terminate``), so no orphan keeps billing (the
   dead-man switch) and at most ``lease_save_wall_s`` is spent on the save;
6. after the worker has exited, waits up to ``linger_wall_s`` to be terminated (by the orchestrator after a
   hop, by EC2 after a notice: leaving a revoked instance to the provider keeps its first hour refundable),
   then exits 0 and the host powers off.

``$SPOTTUNE_IMDS_URL`` overrides the IMDS root (``http://169.254.169.254``; the tests' emulator path).
AWS credentials come from the instance profile (the standard chain); none is written anywhere.

**Trust boundary.** The segment comes from the bucket, which every instance of the experiment may write
(docs/security.md): it is data, never code. The workload the worker imports is the one the user data
names (``--workload``, ``$SPOTTUNE_WORKLOAD``: set by the orchestrator at launch, not writable through
the bucket); a segment that asks for another one is refused (exit code :data:`REFUSED_EXIT_CODE`,
reported to the queue) before any worker starts. The storage options and the checkpoint key
(``$SPOTTUNE_CHECKPOINT_KEY``, from the user data) reach the worker in files of mode 0600, never on
its command line.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import signal
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any

from spottune.backends.aws._channel import Control, Outbox
from spottune.backends.local._messages import (CheckpointCommand, Exited, Saved, SegmentCommand, Standby,
                                               decode_report, encode)
from spottune.backends.local.imds import DEFAULT_IMDS_URL, ImdsClient
# (at the top, not where they are used: a standby agent pays every import before its segment arrives)
from spottune.backends.local.worker import parse_args
from spottune.checkpoint._secrets import CHECKPOINT_KEY_ENV, write_private

__all__ = ["Agent", "LEASE_EXIT_CODE", "REFUSED_EXIT_CODE", "main", "standby"]

#: Exit code of an agent that stopped because the orchestrator's lease went stale.
LEASE_EXIT_CODE = 3
#: Exit code of an agent that refused its segment (a workload the user data does not name, bad arguments).
REFUSED_EXIT_CODE = 2
_REBALANCE_PATH = "/latest/meta-data/events/recommendations/rebalance"


class Agent:
    """One segment on one instance (see the module docstring).

    Parameters
    ----------
    segment : dict
        The segment description: ``launch``, ``trial``, ``queue_url``, ``bucket``, ``root``, ``worker_argv``,
        ``poll_wall_s``, ``linger_wall_s``.
    control : Control
    outbox : Outbox
    imds_url : str
    python : str
        Interpreter of the worker.
    workload : str, optional
        The only workload the worker may import (the experiment's, from the user data); default
        ``$SPOTTUNE_WORKLOAD``. Without one every segment is refused.
    """

    def __init__(self, segment: dict[str, Any], control: Control, outbox: Outbox, imds_url: str,
                 python: str = sys.executable, workload: str | None = None):
        self.seg, self.control, self.outbox, self.imds_url, self.python = segment, control, outbox, imds_url, python
        self.workload = workload if workload is not None else os.environ.get("SPOTTUNE_WORKLOAD", "")
        self.proc: subprocess.Popen | None = None
        self.exited = threading.Event()
        self.saved: int | None = None  # the step of the worker's last published checkpoint
        self._cmd_seq = 0

    def _relay(self) -> None:
        """Reader thread: every report line of the worker to the queue, then its exit code."""
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                report = decode_report(line)
            except ValueError:
                continue  # a stray print of user code
            if isinstance(report, Exited):  # the segment is over (a warm worker would wait for the next one)
                self.outbox.send("exit", report.code)
                self.exited.set()
                return
            if isinstance(report, Saved):
                self.saved = report.step
            if not isinstance(report, Standby):
                self.outbox.send("report", line.strip())
        self.outbox.send("exit", self.proc.wait())
        self.exited.set()

    def _commands(self) -> None:
        got = self.control.get_command(self.seg["launch"])
        if got is None or got[0] <= self._cmd_seq or self.exited.is_set():
            return
        self._cmd_seq, line = got
        self._write(line)

    def _write(self, line: str) -> None:
        try:
            assert self.proc is not None and self.proc.stdin is not None
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass

    def _save_before_shutdown(self, limit_wall_s: float) -> None:
        """A worker still training is told to checkpoint (reason ``lease``); wait for it at most ``limit_wall_s``."""
        if self.exited.is_set() or self.proc is None or self.proc.poll() is not None:
            return
        before = self.saved
        self._write(encode(CheckpointCommand(reason="lease")))
        deadline = time.monotonic() + limit_wall_s
        while self.saved == before and not self.exited.is_set() and time.monotonic() < deadline:
            time.sleep(0.02)
        print(f"spottune agent: saved step {self.saved} before powering off" if self.saved != before else
              f"spottune agent: no checkpoint within {limit_wall_s:g} s; powering off", file=sys.stderr, flush=True)

    def run(self, warm: subprocess.Popen | None = None) -> int:
        """Run the segment; returns the agent's exit code (0, or :data:`LEASE_EXIT_CODE`).

        ``warm``: a worker already started with ``--standby`` and warm (:func:`standby`); it is handed the
        segment's arguments instead of a new process being started.

        Parameters
        ----------
        warm : subprocess.Popen, optional
            See above; None: a new worker process.

        Returns
        -------
        int
            0, :data:`LEASE_EXIT_CODE` (the lease was lost) or :data:`REFUSED_EXIT_CODE` (the segment asks for
            another workload).
        """
        argv = [*self.seg["worker_argv"], "--imds-url", self.imds_url]
        refusal = self._refusal(argv)
        if refusal:
            print(f"spottune agent: {refusal}", file=sys.stderr, flush=True)
            self.outbox.send("exit", REFUSED_EXIT_CODE)
            if warm is not None and warm.poll() is None:
                warm.kill()
                warm.wait()
            return REFUSED_EXIT_CODE
        private = tempfile.mkdtemp(prefix="spottune-agent-")  # mode 0700; the files in it 0600
        try:
            return self._run([*argv, *self._private_files(private)], warm)
        finally:
            shutil.rmtree(private, ignore_errors=True)

    def _refusal(self, argv: list[str]) -> str:
        """Why the segment's worker arguments are refused ("" if they are not): a workload other than the
        user data's, or arguments the worker would not accept."""
        if not self.workload:
            return "no workload named by the user data ($SPOTTUNE_WORKLOAD); refusing the segment"
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                args = parse_args(argv)
        except SystemExit:
            why = " ".join(err.getvalue().split())[-300:]
            return f"the segment's worker arguments are invalid ({why}); refusing it"
        if args.workload != self.workload:
            return (f"the segment asks for workload {args.workload!r}, but the experiment runs {self.workload!r}; "
                    "refusing it (the segment comes from the bucket, the workload from the user data)")
        return ""

    def _private_files(self, folder: str) -> list[str]:
        """Write the segment's storage options and the checkpoint key to 0600 files in ``folder``; the
        worker arguments that name them."""
        options = os.path.join(folder, "storage-options.json")
        write_private(options, json.dumps(dict(self.seg.get("storage_options") or {})))
        out = ["--storage-options-file", options]
        key = os.environ.get(CHECKPOINT_KEY_ENV)
        if key:
            write_private(os.path.join(folder, "checkpoint.key"), key)
            out += ["--checkpoint-key-file", os.path.join(folder, "checkpoint.key")]
        return out

    def _relay_rebalance(self, imds: ImdsClient) -> bool:
        """Send IMDS's rebalance recommendation to the queue if it is posted; True once sent."""
        try:
            body = imds.get(_REBALANCE_PATH)
        except (OSError, ValueError):
            return False
        if body is None:
            return False
        self.outbox.send("rebalance", body)
        return True

    def _run(self, argv: list[str], warm: subprocess.Popen | None) -> int:
        imds = ImdsClient(self.imds_url)
        rebalance_sent = self._relay_rebalance(imds)  # before the worker can report a notice
        if warm is None:
            self.proc = subprocess.Popen([self.python, "-m", "spottune.backends.local.worker", *argv],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        else:
            self.proc = warm
            self._write(encode(SegmentCommand(argv)))
        if threading.current_thread() is threading.main_thread():  # host shutdown: let the worker save first
            signal.signal(signal.SIGTERM, lambda *_: self.proc.send_signal(signal.SIGTERM))
        threading.Thread(target=self._relay, daemon=True, name="relay").start()
        poll = float(self.seg.get("poll_wall_s", 5.0))
        lease_every = float(self.seg.get("lease_check_wall_s", poll))
        linger_until: float | None = None
        next_lease = 0.0
        try:
            while True:
                if time.monotonic() >= next_lease and self.control.lease_stale():
                    print("spottune agent: the orchestrator's lease is stale; stopping the worker and powering off",
                          file=sys.stderr, flush=True)
                    self._save_before_shutdown(float(self.seg.get("lease_save_wall_s", 60.0)))
                    return LEASE_EXIT_CODE
                next_lease = max(next_lease, time.monotonic()) + lease_every if time.monotonic() >= next_lease else next_lease
                self._commands()
                rebalance_sent = rebalance_sent or self._relay_rebalance(imds)
                if self.exited.is_set():
                    if linger_until is None:
                        linger_until = time.monotonic() + float(self.seg.get("linger_wall_s", 600.0))
                    elif time.monotonic() > linger_until:
                        return 0
                time.sleep(poll)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


def standby(workload: str, store: str, python: str = sys.executable) -> subprocess.Popen:
    """A warm worker (``--standby``: imports done, dataset loaded, store opened), as on a host booted from a
    baked image; returns once it is warm.

    Parameters
    ----------
    workload : str
        The experiment's workload.
    store : str
        The checkpoint store's URL.
    python : str, default ``sys.executable``
        The interpreter.

    Returns
    -------
    subprocess.Popen
        The worker, waiting on stdin for its segment.

    Raises
    ------
    RuntimeError
        If the worker exits before it is warm.
    """
    proc = subprocess.Popen([python, "-m", "spottune.backends.local.worker", "--standby", "--workload", workload,
                             "--store", store], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    assert proc.stdout is not None
    for line in proc.stdout:
        try:
            if isinstance(decode_report(line), Standby):
                return proc
        except ValueError:
            continue
    raise RuntimeError(f"the standby worker exited with code {proc.wait()}")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m spottune.backends.aws.agent`` (and of the worker image).

    Parameters
    ----------
    argv : sequence of str, optional
        Command-line arguments (``--segment``, ``--imds-url``, ``--workload``, ``--standby``); None:
        ``sys.argv[1:]``.

    Returns
    -------
    int
        The process's exit code.
    """
    from spottune.backends.aws._session import client

    p = argparse.ArgumentParser(prog="python -m spottune.backends.aws.agent", description="Run one trial segment.")
    p.add_argument("--segment", default=os.environ.get("SPOTTUNE_SEGMENT"), help="s3:// URL of the segment")
    p.add_argument("--imds-url", default=os.environ.get("SPOTTUNE_IMDS_URL", DEFAULT_IMDS_URL))
    p.add_argument("--workload", default=os.environ.get("SPOTTUNE_WORKLOAD"),
                   help="the experiment's workload, the only one a segment may ask for (default $SPOTTUNE_WORKLOAD)")
    p.add_argument("--standby", nargs=2, metavar=("WORKLOAD", "STORE"),
                   help="warm a worker first, print {\"event\": \"standby\"}, then read the segment URL on stdin "
                        "(or a JSON object: segment, and env with SPOTTUNE_WORKLOAD and SPOTTUNE_CHECKPOINT_KEY)")
    args = p.parse_args(argv)
    region = os.environ.get("AWS_DEFAULT_REGION") or os.environ.get("AWS_REGION") or "us-east-1"
    s3, sqs = client("s3", region=region), client("sqs", region=region)
    warm = None
    if args.standby:
        warm = standby(*args.standby)
        args.workload = args.workload or args.standby[0]  # the host was warmed for the experiment's workload
        print(encode(Standby(pid=os.getpid())), flush=True)
        line = sys.stdin.readline().strip()
        if line.startswith("{"):  # a booted host's user data: the segment and what it hands the agent
            doc = json.loads(line)
            args.segment = str(doc.get("segment", ""))
            env = {k: str(v) for k, v in dict(doc.get("env") or {}).items()
                   if k in ("SPOTTUNE_WORKLOAD", "SPOTTUNE_CHECKPOINT_KEY")}
            os.environ.update(env)
            args.workload = env.get("SPOTTUNE_WORKLOAD", args.workload)
        else:
            args.segment = line
    if not args.segment:
        p.error("--segment (or $SPOTTUNE_SEGMENT) is required")
    try:
        bucket, key = Control.split(args.segment)
    except ValueError as exc:
        p.error(str(exc))
    seg = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    control = Control(s3, seg["bucket"], seg["root"])
    outbox = Outbox(sqs, seg["queue_url"], seg["launch"], seg["trial"])
    return Agent(seg, control, outbox, args.imds_url, workload=args.workload or "").run(warm)


if __name__ == "__main__":
    sys.exit(main())
