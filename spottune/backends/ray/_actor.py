"""One trial segment as a Ray actor: the local backend's worker loop, fed through two in-memory pipes.

:class:`SegmentActor` runs :func:`spottune.backends.local.worker.run` (restore from the checkpoint store,
train, report; checkpoint when told or when the node's IMDS shows the interruption notice) on a thread of
its own, with a queue as its stdin and a list of kept lines as its stdout. Nothing of the worker is copied: the reports
are the worker's JSON lines (:mod:`spottune.backends.local._messages`), the commands too.

- :meth:`SegmentActor.run` is a **streaming** method (a generator; ``num_returns="streaming"``): it yields
  the node id the actor runs on, then every report line, and ends when the worker loop returns.
- :meth:`SegmentActor.command` takes one command line (``{"cmd": "checkpoint", "reason": ...}``) on the
  actor's **second concurrency slot** (``max_concurrency=5``) while ``run`` streams.

- :meth:`SegmentActor.renew` renews the driver's **lease** (decision RY11). The actor is a named detached actor
  (it outlives its driver); when no renewal has come for ``lease_wall_s`` wall seconds (the driver died), the
  actor closes its worker loop's stdin: the worker saves a ``lease`` checkpoint if it trained since its
  restore (as the local worker does at EOF on stdin), and the actor then ends its own process, so nothing
  of a dead run holds the node. :meth:`SegmentActor.release` does the same at once (a resumed driver takes
  the save, then ends the actor with ``ray.kill``).
- The actor **keeps every report line since the last one the driver acknowledged** (``renew(acked)``: the
  number of lines the driver has handled). A resumed driver re-attaches to an actor still on its segment:
  :meth:`SegmentActor.take_over` renews the lease and says whether the worker still runs;
  :meth:`SegmentActor.attach` streams like ``run`` from the first line kept (the stream of the dead driver's
  ``run`` ends); the driver drops by step the lines its journal already holds.

The actor is created with ``max_restarts=0``: a dead segment is never restarted by Ray; the orchestrator
decides what follows. ``ray.remote`` is applied on first use (:func:`segment_actor`), so importing this
module needs no Ray.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

__all__ = ["NAMESPACE", "SegmentActor", "actor_name", "segment_actor"]

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


class _Lines:
    """The worker's report lines since the last acknowledged one, numbered from 1 (line ``seq`` is
    ``kept[seq - first]``); each streaming call follows them on its own cursor."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.kept: list[str] = []
        self.first = 1
        self.ended = False
        self.step: int | None = None  # the last ``metric`` report's step

    def put(self, line: str) -> None:
        if '"metric"' in line:
            try:
                msg = json.loads(line)
                if msg.get("event") == "metric":
                    self.step = int(msg["step"])
            except (ValueError, KeyError, TypeError):
                pass
        with self.cond:
            self.kept.append(line)
            self.cond.notify_all()

    def close(self) -> None:
        with self.cond:
            self.ended = True
            self.cond.notify_all()

    def ack(self, acked: int) -> None:
        """Forget lines ``1..acked`` (the driver handled them)."""
        with self.cond:
            drop = min(len(self.kept), acked - self.first + 1)
            if drop > 0:
                del self.kept[:drop]
                self.first += drop

    def follow(self, current: Any) -> Iterator[tuple[int, str]]:
        """Yield ``(seq, line)`` from the first kept line while ``current()``, until the worker loop returned."""
        nxt = self.first
        while True:
            with self.cond:
                while (nxt >= self.first + len(self.kept) and not self.ended and current()):
                    self.cond.wait(1.0)
                if not current():
                    return
                nxt = max(nxt, self.first)
                if nxt >= self.first + len(self.kept):
                    return  # ended, every line sent
                item = (nxt, self.kept[nxt - self.first])
            nxt += 1
            yield item


class _Stdout:
    """The worker's stdout: every complete line goes to the kept lines the streaming methods follow."""

    def __init__(self, lines: _Lines):
        self.lines = lines
        self._buf = ""

    def write(self, text: str) -> int:
        self._buf += text
        *lines, self._buf = self._buf.split("\n")
        for line in lines:
            if line:
                self.lines.put(line)
        return len(text)

    def flush(self) -> None:
        pass


class SegmentActor:
    """A trial segment on a node of its market (see the module docstring)."""

    def __init__(self, lease_wall_s: float | None = None) -> None:
        self._stdin = _Stdin()
        self._lines = _Lines()
        self._stream = 0  # the streaming call now served (each run or attach: one more)
        self._owner = 0  # the driver that may start the worker: 0 its launcher, then a resumed driver's token
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
            checkpoint_key: str | None = None, owner: int = 0) -> Iterator[str]:
        """Yield this node's id, then the worker's report lines for the segment ``argv`` (worker arguments).

        ``storage_options`` (merged over ``--storage-options``) and ``checkpoint_key`` (hex; the actor
        process's ``$SPOTTUNE_CHECKPOINT_KEY``) arrive as method arguments, never on a command line. A call
        from a driver that no longer owns the actor (a resumed driver took it over before the worker started),
        or once the worker started, yields nothing.

        Parameters
        ----------
        argv : sequence of str
            The worker's arguments (:func:`spottune.backends.local.worker.parse_args`).
        storage_options : mapping, optional
            Secret storage options.
        checkpoint_key : str, optional
            The experiment's checkpoint key, hex.
        owner : int, default 0
            The calling driver's token (0: the launching driver; a resumed one's from :meth:`take_over`).

        Yields
        ------
        str, then tuple of (int, str)
            The node id (hex), then ``(seq, line)``: one JSON report line at a time, numbered from 1.
        """
        import os

        import ray

        from spottune.backends.local.worker import parse_args, run
        from spottune.checkpoint._secrets import CHECKPOINT_KEY_ENV

        with self._lines.cond:
            if owner != self._owner or self._started or self._released.is_set():
                return
            self._started = True
            self._stream += 1
            mine = self._stream
        yield ray.get_runtime_context().get_node_id()
        args = parse_args(list(argv))
        args.storage_options = {**args.storage_options, **dict(storage_options or {})}
        if checkpoint_key:
            os.environ[CHECKPOINT_KEY_ENV] = checkpoint_key  # the store and function-API checkpoints read it

        def main() -> None:
            try:
                run(args, stdin=self._stdin, stdout=_Stdout(self._lines))  # type: ignore[arg-type]
            finally:
                self._done.set()
                self._lines.close()

        threading.Thread(target=main, daemon=True, name="segment").start()
        yield from self._lines.follow(lambda: self._stream == mine)

    def take_over(self, owner: int) -> dict[str, Any]:
        """A resumed driver asks whether it can keep this segment: the lease is renewed and the driver becomes the
        actor's owner (a ``run`` of an earlier driver not yet started is refused from now on).

        Parameters
        ----------
        owner : int
            The resumed driver's token (positive, larger than any earlier driver's).

        Returns
        -------
        dict
            ``live`` (bool: not released by a lease that ran out or by ``release``), ``started`` (bool: the worker
            loop was started; if not, the owner calls ``run``) and ``step`` (int or None: the worker's last
            reported step, to date the steps it trained while no driver read them).
        """
        self._renewed = time.monotonic()
        with self._lines.cond:
            self._owner = max(self._owner, int(owner))
            return {"live": not self._released.is_set(), "started": self._started, "step": self._lines.step}

    def attach(self) -> Iterator[Any]:
        """Re-attach a resumed driver: yield this node's id, then ``(seq, line)`` from the first line not
        acknowledged (the lines the dead driver read but did not handle, those it never read, then the new
        ones); the stream of any earlier ``run`` or ``attach`` ends.

        Yields
        ------
        str, then tuple of (int, str)
            The node id (hex), then one numbered JSON report line at a time.
        """
        import ray

        self._renewed = time.monotonic()
        with self._lines.cond:
            self._stream += 1
            mine = self._stream
            self._lines.cond.notify_all()
        yield ray.get_runtime_context().get_node_id()
        yield from self._lines.follow(lambda: self._stream == mine)

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

    def renew(self, acked: int = 0) -> bool:
        """The driver is alive: renew its lease and forget the report lines it handled (see the module docstring).

        Parameters
        ----------
        acked : int, default 0
            The number of report lines the driver has handled (they are journaled).

        Returns
        -------
        bool
            Always True.
        """
        self._renewed = time.monotonic()
        self._lines.ack(int(acked))
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
    """``ray.remote(SegmentActor)`` with ``max_restarts=0`` and ``max_concurrency=5`` (built once): ``run``
    streams on one slot (and a resumed driver's ``attach`` on another while the dead driver's ``run`` ends);
    ``command``, ``renew``, ``take_over`` and ``release`` take the others.

    Returns
    -------
    ray.actor.ActorClass
        The remote class; ``.options(...).remote()`` starts an actor.
    """
    global _REMOTE
    if _REMOTE is None:
        import ray

        _REMOTE = ray.remote(max_restarts=0, max_concurrency=5)(SegmentActor)
    return _REMOTE
