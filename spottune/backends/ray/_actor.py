"""One trial segment as a Ray actor: the local backend's worker loop, fed through two in-memory pipes.

:class:`SegmentActor` runs :func:`spottune.backends.local.worker.run` (restore from the checkpoint store,
train, report; checkpoint when told or when the node's IMDS shows the interruption notice) on a thread of
its own, with a queue as its stdin and another as its stdout. Nothing of the worker is copied: the reports
are the worker's JSON lines (:mod:`spottune.backends.local._messages`), the commands too.

- :meth:`SegmentActor.run` is a **streaming** method (a generator; ``num_returns="streaming"``): it yields
  the node id the actor runs on, then every report line, and ends when the worker loop returns.
- :meth:`SegmentActor.command` takes one command line (``{"cmd": "checkpoint", "reason": ...}``) on the
  actor's **second concurrency slot** (``max_concurrency=2``) while ``run`` streams.

The actor is created with ``max_restarts=0``: a dead segment is never restarted by Ray; the orchestrator
decides what follows. ``ray.remote`` is applied on first use (:func:`segment_actor`), so importing this
module needs no Ray.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

__all__ = ["SegmentActor", "segment_actor"]

_END = object()


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

    def __init__(self) -> None:
        self._stdin = _Stdin()
        self._out: queue.Queue[Any] = queue.Queue()

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
                self._out.put(_END)

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


_REMOTE: Any = None


def segment_actor() -> Any:
    """``ray.remote(SegmentActor)`` with ``max_restarts=0`` and ``max_concurrency=2`` (built once).

    Returns
    -------
    ray.actor.ActorClass
        The remote class; ``.options(...).remote()`` starts an actor.
    """
    global _REMOTE
    if _REMOTE is None:
        import ray

        _REMOTE = ray.remote(max_restarts=0, max_concurrency=2)(SegmentActor)
    return _REMOTE
