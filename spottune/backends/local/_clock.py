"""The local backend's clock: engine time on an accelerated wall clock, and timed callbacks.

Engine time is ``start_s + (wall seconds since start()) * time_scale`` ([I]: one simulated hour is
``3600 / time_scale`` wall seconds, 6 s at the default 600). A callback due at engine time ``t`` is an
APScheduler date job at the wall time ``t`` maps to, so notices, terminations, hourly ticks and
wake-ups run on a real scheduler thread, as they would against EC2. Callbacks should only enqueue:
whoever owns the orchestrator handles the queue on one thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from spottune.errors import BackendError

__all__ = ["ScaledClock"]


class ScaledClock:
    """Engine seconds from the wall clock, ``time_scale`` times faster, with date jobs.

    Parameters
    ----------
    start_s : float
        Engine time at :meth:`start` (seconds since the epoch, UTC).
    time_scale : float
        Simulated seconds per wall-clock second (> 0).

    Raises
    ------
    BackendError
        If ``time_scale`` <= 0.
    """

    def __init__(self, start_s: float, time_scale: float):
        if not time_scale > 0:
            raise BackendError(f"time_scale is {time_scale!r}, but must be > 0")
        self.start_s = float(start_s)
        self.time_scale = float(time_scale)
        self._wall0: float | None = None
        self._sched: Any = None

    def start(self) -> None:
        """Start the scheduler thread; engine time ``start_s`` is now."""
        from apscheduler.schedulers.background import BackgroundScheduler

        self._sched = BackgroundScheduler(timezone=timezone.utc,
                                          job_defaults={"coalesce": False, "max_instances": 1000})
        self._sched.start()
        self._wall0 = time.monotonic()

    def stop(self) -> None:
        """Stop the scheduler thread; jobs not yet run are dropped."""
        if self._sched is not None and self._sched.running:
            self._sched.shutdown(wait=False)

    def wall_s(self) -> float:
        """Wall seconds since :meth:`start` (0 before it).

        Returns
        -------
        float
            Seconds (monotonic clock).
        """
        return 0.0 if self._wall0 is None else time.monotonic() - self._wall0

    def engine_s(self) -> float:
        """Engine seconds now.

        Returns
        -------
        float
            ``start_s`` + wall seconds since :meth:`start` × ``time_scale``.
        """
        return self.start_s + self.wall_s() * self.time_scale

    def call_at(self, t_s: float, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the scheduler thread when engine time reaches ``t_s`` (at once if past).

        Parameters
        ----------
        t_s : float
            Engine seconds.
        fn : callable
            Called with ``args``.
        *args
            Its arguments.

        Raises
        ------
        BackendError
            If the clock is not started.
        """
        if self._sched is None:
            raise BackendError("the clock is not started")
        delay_wall = max(0.0, (t_s - self.engine_s()) / self.time_scale)
        run_date = datetime.now(timezone.utc) + timedelta(seconds=delay_wall)
        self._sched.add_job(fn, "date", run_date=run_date, args=list(args), misfire_grace_time=None)
