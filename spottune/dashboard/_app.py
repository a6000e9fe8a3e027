"""The dashboard's HTTP layer: one page, Plotly's JS from the ``plotly`` package, and the snapshot as JSON.

Decision DS1 (docs/design/decisions.md): FastAPI serves ``/`` (the page, :file:`page.html`), ``/plotly.min.js`` (the
bundle the ``plotly`` Python package ships; no CDN, works offline), the page's ``style.css`` and ``common.js`` and
``/api/snapshot`` (:func:`snapshot`), which the page polls every second. The page's URLs are relative, so
``spottune serve`` serves the same page under ``/studies/<id>/dashboard/`` (DS5).
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from spottune.dashboard._data import snapshot


def plotly_js_path() -> Path:
    """The ``plotly.min.js`` shipped in the ``plotly`` Python package.

    Returns
    -------
    Path
        ``<site-packages>/plotly/package_data/plotly.min.js``.
    """
    import plotly

    return Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


#: Files the pages load besides Plotly's bundle, from this package, with their media types (decision DS4).
ASSETS = {"style.css": "text/css", "common.js": "text/javascript"}


def page_html(name: str = "page.html") -> str:
    """A page of this package: ``page.html`` (one results folder) or ``org.html`` (the service's org view).

    Every URL in a page is relative (``plotly.min.js``, ``style.css``, ``common.js``, ``api/snapshot``), so the
    same page works at ``/`` of ``spottune dashboard`` and under a prefix of ``spottune serve`` (decision DS5).

    Parameters
    ----------
    name : str
        The file's name.

    Returns
    -------
    str
        The HTML.
    """
    return resources.files("spottune.dashboard").joinpath(name).read_text(encoding="utf-8")


def asset_response(name: str):  # noqa: ANN201 - a starlette Response; imported lazily
    """The response for one of the pages' static files: ``plotly.min.js`` (:func:`plotly_js_path`) or one of
    :data:`ASSETS`.

    Parameters
    ----------
    name : str
        The file's name.

    Returns
    -------
    starlette.responses.Response
        The file, cacheable for a day; 404 for any other name.
    """
    from fastapi.responses import FileResponse, Response

    cache = {"Cache-Control": "max-age=86400"}
    if name == "plotly.min.js":
        return FileResponse(plotly_js_path(), media_type="text/javascript", headers=cache)
    if name in ASSETS:
        path = resources.files("spottune.dashboard").joinpath(name)
        return Response(path.read_bytes(), media_type=ASSETS[name], headers=cache)
    return Response(status_code=404)


def create_app(folder: str | os.PathLike[str]):  # noqa: ANN201 - a FastAPI app; fastapi is imported lazily
    """A FastAPI app serving the dashboard of one results folder.

    Parameters
    ----------
    folder : path
        The results folder (docs/guide/results.md); it may not hold a run yet.

    Returns
    -------
    fastapi.FastAPI
        Routes: ``GET /`` (the page), ``GET /plotly.min.js``, ``/style.css``, ``/common.js`` and
        ``GET /api/snapshot`` (:func:`snapshot` as JSON).
    """
    from fastapi import FastAPI
    from fastapi.responses import HTMLResponse, JSONResponse, Response

    folder = Path(folder)
    page = page_html()
    app = FastAPI(title="spottune dashboard", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/", response_class=HTMLResponse)
    def index() -> HTMLResponse:
        return HTMLResponse(page)

    @app.get("/favicon.ico")
    def favicon() -> Response:
        return Response(status_code=204)

    @app.get("/api/snapshot")
    def api_snapshot() -> JSONResponse:
        return JSONResponse(snapshot(folder), headers={"Cache-Control": "no-store"})

    @app.get("/{name}")
    def asset(name: str) -> Response:
        return asset_response(name)

    return app


class DashboardServer:
    """The dashboard of one results folder served by uvicorn, in this thread (:meth:`run`) or a daemon thread.

    Parameters
    ----------
    folder : path
        The results folder.
    host : str
        Address to listen on (default 127.0.0.1: this machine only).
    port : int
        Port; 0 picks a free one (see :attr:`port` once started).
    """

    def __init__(self, folder: str | os.PathLike[str], host: str = "127.0.0.1", port: int = 8050):
        import uvicorn

        self.host = host
        self.app = create_app(folder)
        self.server = uvicorn.Server(uvicorn.Config(self.app, host=host, port=port, log_level="warning",
                                                    access_log=False))
        self._thread = None

    @property
    def port(self) -> int:
        """The port served (the chosen one when started with port 0)."""
        for server in getattr(self.server, "servers", None) or []:
            for sock in server.sockets:
                return int(sock.getsockname()[1])
        return int(self.server.config.port)

    @property
    def url(self) -> str:
        """``http://host:port/``."""
        return f"http://{self.host}:{self.port}/"

    def run(self) -> None:
        """Serve in this thread until interrupted (Ctrl-C)."""
        self.server.run()

    def start(self, timeout_s: float = 30.0) -> DashboardServer:
        """Serve on a daemon thread; return once it accepts connections.

        Raises
        ------
        ConfigError
            If the server did not start within ``timeout_s`` seconds (e.g. the port is taken).
        """
        from spottune._serving import serve_in_thread

        self._thread = serve_in_thread(self.server, "spottune-dashboard", "the dashboard", self.host, timeout_s)
        return self

    def stop(self) -> None:
        """Stop serving."""
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
