"""The ``local`` backend: every trial segment is a real worker process on this machine.

What only it uses lives here: the backend (:class:`LocalBackend`), the accelerated wall clock, the worker
pool, the worker process (``python -m spottune.backends.local.worker``) and the instance-metadata (IMDS)
emulator and client the worker polls for the interruption notice. The backend is imported on first use
(PEP 562): a worker process needs none of the orchestrator's imports.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LocalBackend", "LocalSettings"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from spottune.backends.local import _backend

    value = getattr(_backend, name)
    globals()[name] = value
    return value
