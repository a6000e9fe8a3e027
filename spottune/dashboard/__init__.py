"""The dashboard of one results folder: :func:`snapshot` reads it (pandas), :func:`create_app` serves it (FastAPI).

``spottune dashboard DIR`` (docs/guide/dashboard.md) serves one page that polls :func:`snapshot` as JSON every
second; the reader has no HTTP in it, so another server can reuse it. Decisions DS1-DS6 (docs/design/decisions.md);
``spottune serve`` serves the same page per study (:mod:`spottune.service._pages`).
"""

from __future__ import annotations

from spottune.dashboard._app import create_app  # FastAPI and uvicorn are imported only when a server is made
from spottune.dashboard._data import ENDED_BY, ENDED_BY_COLOURS, deadline_h, ended_by, prices, rungs, snapshot, step_cost

__all__ = ["ENDED_BY", "ENDED_BY_COLOURS", "create_app", "deadline_h", "ended_by", "prices", "rungs", "snapshot",
           "step_cost"]
