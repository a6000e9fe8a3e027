"""The ``local`` backend: every trial segment is a real worker process on this machine.

What only it uses lives here: the backend (:class:`LocalBackend`), the accelerated wall clock, the worker
pool, the worker process (``python -m spottune.backends.local.worker``) and the instance-metadata (IMDS)
emulator and client the worker polls for the interruption notice.
"""

from spottune.backends.local._backend import LocalBackend, LocalSettings

__all__ = ["LocalBackend", "LocalSettings"]
