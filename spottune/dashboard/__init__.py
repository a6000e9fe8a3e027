"""The dashboard of one results folder: :func:`snapshot` reads it (pandas), :func:`create_app` serves it (FastAPI).

``spottune dashboard DIR`` (docs/guide/dashboard.md) serves one page that polls :func:`snapshot` as JSON every
second; the reader has no HTTP in it, so another server can reuse it. Decisions DS1-DS3 (docs/design/decisions.md).
"""

from __future__ import annotations

from spottune.dashboard._data import ENDED_BY, ENDED_BY_COLOURS, ended_by, snapshot

__all__ = ["ENDED_BY", "ENDED_BY_COLOURS", "create_app", "ended_by", "snapshot"]


def create_app(folder):  # noqa: ANN001, ANN201 - fastapi is imported only when a server is made
    """A FastAPI app serving the dashboard of one results folder (:func:`spottune.dashboard._app.create_app`).

    Parameters
    ----------
    folder : path
        The results folder (docs/guide/results.md); it may not hold a run yet.

    Returns
    -------
    fastapi.FastAPI
        Routes: ``GET /`` (the page), ``GET /plotly.min.js``, ``GET /api/snapshot`` (:func:`snapshot` as JSON).
    """
    from spottune.dashboard._app import create_app as _create

    return _create(folder)
