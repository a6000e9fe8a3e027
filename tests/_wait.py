"""Waiting on a condition instead of a fixed wall-clock sleep.

A fixed ``time.sleep(0.3)`` before an assertion is a guess at how long something takes: too short on a loaded
machine (the test flakes), too long everywhere else (the suite crawls). :func:`wait_until` polls the condition
itself and returns as soon as it holds; its timeout is only the point at which the test gives up.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout_s: float, *, interval_s: float = 0.01, what: str = "") -> T:
    """Call ``predicate`` until it returns a truthy value, and return that value.

    Parameters
    ----------
    predicate : callable
        Called with no argument, first at once, then every ``interval_s``.
    timeout_s : float
        Wall seconds after which the wait fails.
    interval_s : float
        Wall seconds between two calls.
    what : str
        The awaited condition, for the failure message (default: the predicate's name).

    Returns
    -------
    The first truthy value ``predicate`` returned.

    Raises
    ------
    AssertionError
        If ``predicate`` returned no truthy value within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout_s:g} s: {what or getattr(predicate, '__name__', repr(predicate))}")
        time.sleep(interval_s)
