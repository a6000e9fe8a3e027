"""Start a uvicorn server on a daemon thread and wait until it accepts connections (the dashboard, the service)."""

from __future__ import annotations

import threading
import time
from typing import Any

from spottune.errors import ConfigError


def serve_in_thread(server: Any, name: str, what: str, host: str, timeout_s: float) -> threading.Thread:
    """Run ``server.run`` (a ``uvicorn.Server``) on a daemon thread; return it once the server has started.

    Parameters
    ----------
    server : uvicorn.Server
    name : str
        The thread's name.
    what : str
        What is served, for the error (``"the dashboard"``).
    host : str
        The address it binds, for the error.
    timeout_s : float
        Seconds to wait for the start.

    Returns
    -------
    threading.Thread
        The serving thread.

    Raises
    ------
    ConfigError
        If the server did not start within ``timeout_s`` seconds (e.g. the port is taken).
    """
    thread = threading.Thread(target=server.run, name=name, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise ConfigError(f"{what} did not start on {host}:{server.config.port}")
        time.sleep(0.01)
    return thread
