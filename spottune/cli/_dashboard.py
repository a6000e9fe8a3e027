"""``spottune dashboard DIR``: a live page of one results folder (docs/guide/dashboard.md, :mod:`spottune.dashboard`)."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("dashboard", help="Serve a live page of one results folder: trials and learning curves with the "
               "θ barrier, the instances per trial, the dollars charged and refunded. It updates every second "
               "while a run writes the folder, and works offline.")
@click.argument("folder", type=click.Path(file_okay=False))
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8050, show_default=True, type=click.IntRange(0, 65535), help="Port (0: a free one).")
def dashboard(folder: str, host: str, port: int) -> None:
    from spottune.dashboard._app import DashboardServer
    from spottune.errors import ConfigError

    path = Path(folder)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{folder!r} is not a results folder (not a directory)")
    path.mkdir(parents=True, exist_ok=True)  # a run may be about to write it
    server = DashboardServer(path, host=host, port=port)
    click.echo(f"dashboard of {path}: http://{host}:{port}/ (Ctrl-C stops)", err=True)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
