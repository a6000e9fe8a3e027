"""One trial segment as a Ray actor: the local backend's worker loop, fed through two in-memory pipes.

:class:`SegmentActor` runs :func:`spottune.backends.local.worker.run` (restore from the checkpoint store,
train, report; checkpoint when told or when the node's IMDS shows the interruption notice) on a thread of
its own, with a queue as its stdin and another as its stdout. Nothing of the worker is copied: the reports
are the worker's JSON lines (:mod:`spottune.backends.local._messages`), the commands too.

- :meth:`SegmentActor.run` is a **streaming** method (a generator; ``num_returns="streaming"``): it yields
  the node id the actor runs on, then every report line, and ends when the worker loop returns.
- :meth:`SegmentActor.command` takes one command line (``{"cmd": "checkpoint", "reason": ...}``) on the
  actor's **second concurrency slot** (``max_concurrency=4``) while ``run`` streams.

- :meth:`SegmentActor.renew` renews the driver's **lease** (decision R11). The actor is a named detached actor
  (it outlives its driver); when no renewal has come for ``lease_wall_s`` wall seconds (the driver died), the
  actor closes its worker loop's stdin: the worker saves a ``lease`` checkpoint if it trained since its
  restore (as the local worker does at EOF on stdin), and the actor then ends its own process, so nothing
  of a dead run holds the node. :meth:`SegmentActor.release` does the same at once (a resumed driver takes
  the save, then ends the actor with ``ray.kill``).

The actor is created with ``max_restarts=0``: a dead segment is never restarted by Ray; the orchestrator
decides what follows. ``ray.remote`` is applied on first use (:func:`segment_actor`), so importing this
module needs no Ray.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

__all__ = ["NAMESPACE", "SegmentActor", "actor_name", "segment_actor"]

_END = object()
#: The Ray namespace of every segment actor (named and detached: :func:`actor_name`).
NAMESPACE = "spottune"
#: Wall seconds an actor whose lease ran out waits for its worker's ``lease`` save before it ends anyway.
LEASE_SAVE_WALL_S = 60.0


def actor_name(run_tag: str, instance_id: str) -> str:
    """The name of the segment actor of ``instance_id`` in the run ``run_tag`` (in :data:`NAMESPACE`).

    Parameters
    ----------
    run_tag : str
        The run's tag (hex, from its checkpoint key and store: ``RayActorTransport.run_tag``).
    instance_id : str
        The segment's instance id (``i-00001``, ...).

    Returns
    -------
    str
        ``"<run tag>/<instance id>"``.
    """
    return f"{run_tag}/{instance_id}"


class _Stdin:
    """The worker's stdin: lines put by :meth:`SegmentActor.command`; None is EOF."""

    def __init__(self) -> None:
        self.q: queue.Queue[str | None] = queue.Queue()

    def __iter__(self) -> Iterator[str]:
        while True:
            line = self.q.get()
            if line is None:
                return
            yield line


class _Stdout:
    """The worker's stdout: every complete line goes to a queue the streaming method yields from."""

    def __init__(self, q: queue.Queue[Any]):
        self.q = q
        self._buf = ""

    def write(self, text: str) -> int:
        self._buf += text
        *lines, self._buf = self._buf.split("\n")
        for line in lines:
            if line:
                self.q.put(line)
        return len(text)

    def flush(self) -> None:
        pass


class SegmentActor:
    """A trial segment on a node of its market (see the module docstring)."""

    def __init__(self, lease_wall_s: float | None = None) -> None:
        self._stdin = _Stdin()
        self._out: queue.Queue[Any] = queue.Queue()
        self._renewed = time.monotonic()
        self._released = threading.Event()
        self._started = False
        self._done = threading.Event()  # the worker loop returned
        if lease_wall_s is not None and lease_wall_s > 0:
            threading.Thread(target=self._watch_lease, args=(float(lease_wall_s),), daemon=True,
                             name="lease").start()

    def _watch_lease(self, lease_wall_s: float) -> None:
        """No renewal for ``lease_wall_s`` wall seconds: the driver is gone; save (stdin EOF), then end the process."""
        every = min(1.0, lease_wall_s / 4)
        while time.monotonic() - self._renewed <= lease_wall_s:
            time.sleep(every)
        self._release()
        self._done.wait(LEASE_SAVE_WALL_S)
        os._exit(0)  # a detached actor outlives its driver: nothing of a dead run may hold the node

    def _release(self) -> None:
        if not self._released.is_set():
            self._released.set()
            self._stdin.q.put(None)  # EOF: the worker saves what it trained (reason "lease") and returns
            if not self._started:
                self._done.set()

    def run(self, argv: Sequence[str], storage_options: Mapping[str, Any] | None = None,
            checkpoint_key: str | None = None) -> Iterator[str]:
        """Yield this node's id, then the worker's report lines for the segment ``argv`` (worker arguments).

        ``storage_options`` (merged over ``--storage-options``) and ``checkpoint_key`` (hex; the actor
        process's ``$SPOTTUNE_CHECKPOINT_KEY``) arrive as method arguments, never on a command line.

        Parameters
        ----------
        argv : sequence of str
            The worker's arguments (:func:`spottune.backends.local.worker.parse_args`).
        storage_options : mapping, optional
            Secret storage options.
        checkpoint_key : str, optional
            The experiment's checkpoint key, hex.

        Yields
        ------
        str
            The node id (hex), then one JSON report line at a time.
        """
        import os

        import ray

        from spottune.backends.local.worker import parse_args, run
        from spottune.checkpoint._secrets import CHECKPOINT_KEY_ENV

        yield ray.get_runtime_context().get_node_id()
        args = parse_args(list(argv))
        args.storage_options = {**args.storage_options, **dict(storage_options or {})}
        if checkpoint_key:
            os.environ[CHECKPOINT_KEY_ENV] = checkpoint_key  # the store and function-API checkpoints read it

        def main() -> None:
            try:
                run(args, stdin=self._stdin, stdout=_Stdout(self._out))  # type: ignore[arg-type]
            finally:
                self._done.set()
                self._out.put(_END)

        self._started = True
        threading.Thread(target=main, daemon=True, name="segment").start()
        while (line := self._out.get()) is not _END:
            yield line

    def command(self, line: str) -> bool:
        """Hand one command line to the worker loop (its stdin).

        Parameters
        ----------
        line : str
            A JSON command line (:mod:`spottune.backends.local._messages`).

        Returns
        -------
        bool
            Always True (a Ray call needs a result to wait on).
        """
        self._stdin.q.put(line)
        return True

    def renew(self) -> bool:
        """The driver is alive: renew its lease (see the module docstring).

        Returns
        -------
        bool
            Always True.
        """
        self._renewed = time.monotonic()
        return True

    def release(self, wait_wall_s: float) -> bool:
        """A resumed driver takes over: the worker saves what it trained since its restore (reason ``lease``)
        and stops; wait for that at most ``wait_wall_s`` wall seconds.

        Parameters
        ----------
        wait_wall_s : float
            Wall seconds to wait for the worker loop to return.

        Returns
        -------
        bool
            True if the worker loop returned (its save, if any, is in the store).
        """
        self._renewed = time.monotonic()
        self._release()
        return self._done.wait(wait_wall_s)


_REMOTE: Any = None


def segment_actor() -> Any:
    """``ray.remote(SegmentActor)`` with ``max_restarts=0`` and ``max_concurrency=4`` (built once): ``run``
    streams on one slot; ``command``, ``renew`` and ``release`` take the others.

    Returns
    -------
    ray.actor.ActorClass
        The remote class; ``.options(...).remote()`` starts an actor.
    """
    global _REMOTE
    if _REMOTE is None:
        import ray

        _REMOTE = ray.remote(max_restarts=0, max_concurrency=4)(SegmentActor)
    return _REMOTE
