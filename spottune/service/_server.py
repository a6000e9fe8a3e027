"""``spottune serve``: the store, the study runner and the HTTP API in one process (uvicorn)."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import uvicorn

from spottune.errors import ConfigError
from spottune.service._app import create_app
from spottune.service._runner import StudyRunner
from spottune.service._store import Store

__all__ = ["BACKENDS", "REFUSED_BACKENDS", "Service", "default_db_url", "team_token_file", "write_secret"]

#: Backends the service runs studies on: the simulator, real worker processes on the server's machine, EC2 spot
#: instances of the org's account (with an S3 checkpoint store and an org budget) and a Ray cluster (one connection
#: shared by every study; decisions SV8, SV16).
BACKENDS = ("sim", "local", "aws", "ray")
#: Backends ``spottune`` has but the service refuses, and why (one line each; decision SV8): none.
REFUSED_BACKENDS: dict[str, str] = {}


def default_db_url(data_dir: str | Path) -> str:
    """``sqlite:///<data_dir>/service.db``: the default store, a SQLite file."""
    return f"sqlite:///{Path(data_dir) / 'service.db'}"


def team_token_file(data_dir: str | Path, team: str) -> Path:
    """``<data_dir>/teams/<team>.token``: where the service writes the token of a team it creates at start."""
    return Path(data_dir) / "teams" / f"{team}.token"


def write_secret(path: str | Path, secret: str) -> None:
    """Write ``secret`` and a newline to ``path``, readable by its owner only (mode 0600 from its creation).

    The file is written beside ``path`` and renamed over it, so a reader sees the old secret or the new one whole.

    Parameters
    ----------
    path : str or Path
    secret : str
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secret + "\n")
    os.replace(tmp, path)


class Service:
    """A configured service: store, runner and app; :meth:`run` serves it, :meth:`start` serves it on a thread.

    Parameters
    ----------
    admin_token : str
    db_url : str, optional
        Default :func:`default_db_url` of ``data_dir``.
    data_dir : str or Path, default "spottune-service"
        The studies' results folders go under ``data_dir/studies``.
    host : str, default "127.0.0.1"
    port : int, default 8000
        0 picks a free port (see :attr:`port` once started).
    org_budget_usd_per_hour : float, optional
        Sets the org budget at start (USD/hour).
    backend : {"sim", "local", "aws", "ray"}, default "sim"
        Where studies run (:data:`BACKENDS`); a study's spec must name the same. ``local``: each trial segment is
        a worker process on this machine (decision SV4 for lost workers); ``aws``: EC2 spot instances of the org's
        account, configured by ``aws``; ``ray``: the Ray cluster of ``ray`` (decision SV16).
    tune : callable, optional
        Replaces :func:`spottune.tune` in the runner.
    max_studies : int, default 4
        Studies run at once; a team with work and no running study starts one beyond them (decision SV8).
    round_period_s : float, default 3600.0
        Wall seconds between two rounds of the org budget over the running studies (decision SV14).
    teams : mapping of str to float, optional
        Teams to create at start if missing, with their entitlements (> 0); the token of each one created is
        written to :func:`team_token_file` (mode 0600). Existing teams are left as they are (decision SV9).
    aws : AwsServing, optional
        The org's settings of the aws backend (checkpoint store, region, image, AMI, instance profile...); required
        with ``backend="aws"``, which also needs an org budget (given, or kept in the database).
    ray : RayServing, optional
        The org's settings of the ray backend (cluster address, optional shared store); default
        ``RayServing()`` (address ``auto``) with ``backend="ray"``. The server connects to the cluster at once.

    Raises
    ------
    ConfigError
        On an unknown backend, a negative budget, a bad team name or entitlement, a database that cannot be
        opened, ``backend="aws"`` without ``aws`` or without an org budget.
    BackendError
        With ``backend="ray"``, when Ray is missing or the cluster cannot be reached.
    """

    def __init__(self, *, admin_token: str, db_url: str | None = None, data_dir: str | Path = "spottune-service",
                 host: str = "127.0.0.1", port: int = 8000, org_budget_usd_per_hour: float | None = None,
                 backend: str = "sim", tune: Any = None, max_studies: int = 4,
                 teams: Mapping[str, float] | None = None, round_period_s: float = 3600.0,
                 aws: Any = None, ray: Any = None):
        if backend in REFUSED_BACKENDS:
            raise ConfigError(f"--backend {backend} is not served: {REFUSED_BACKENDS[backend]}")
        if backend not in BACKENDS:
            raise ConfigError(f"--backend is {backend!r}, but this build serves only {', '.join(BACKENDS)}")
        if org_budget_usd_per_hour is not None and not org_budget_usd_per_hour >= 0:
            raise ConfigError(f"--org-budget-usd-per-hour is {org_budget_usd_per_hour!r}, but must be >= 0")
        self.data_dir = Path(data_dir)
        self.store = Store(db_url or default_db_url(self.data_dir))
        if org_budget_usd_per_hour is not None:
            self.store.set_org_budget(org_budget_usd_per_hour)
        if not round_period_s > 0:
            raise ConfigError(f"--round-period-s is {round_period_s!r}, but must be > 0")
        cloud = self._cloud(backend, aws, ray)
        self.created_teams = self._ensure_teams(teams or {})
        self.runner = StudyRunner(self.store, self.data_dir, tune=tune, max_studies=max_studies,
                                  round_period_s=round_period_s, cloud=cloud)
        self.app = create_app(self.store, admin_token=admin_token, runner=self.runner, backend=backend, cloud=cloud)
        self.server = uvicorn.Server(uvicorn.Config(self.app, host=host, port=port, log_level="warning",
                                                    access_log=False))
        self.host = host
        self._thread: threading.Thread | None = None

    def _cloud(self, backend: str, aws: Any, ray: Any) -> Any:
        """The org's settings of a cloud backend (None for sim and local); connects to the Ray cluster."""
        if backend == "aws":
            if aws is None:
                raise ConfigError("--backend aws needs --storage-path s3://BUCKET/PREFIX, --aws-image and --aws-ami "
                                  "(docs/guide/service.md)")
            from spottune.service._store import Org

            with self.store.session() as s:
                budget = s.get(Org, 1).budget_usd_per_hour  # type: ignore[union-attr]
            if budget is None:
                raise ConfigError("--backend aws needs --org-budget-usd-per-hour (or a budget kept in the database): "
                                  "every study on the org's account runs under its share of it")
            return aws
        if backend == "ray":
            from spottune.service._cloud import RayServing

            ray = ray if ray is not None else RayServing()
            ray.connect()  # once: every study's driver thread shares this process's connection
            return ray
        return None

    def _ensure_teams(self, teams: Mapping[str, float]) -> list[str]:
        from spottune.service._app import _NAME

        for name, entitlement in teams.items():
            if not _NAME.match(name):
                raise ConfigError(f"--team name is {name!r}, but must be letters, digits, '_', '.' or '-' (at most 64, "
                                  "starting with a letter or digit)")
            if not (isinstance(entitlement, (int, float)) and 0 < entitlement < float("inf")):
                raise ConfigError(f"--team {name}={entitlement!r}: the entitlement must be a finite number > 0")
        created = []
        for name, entitlement in teams.items():
            token = self.store.ensure_team(name, float(entitlement))
            if token is not None:
                write_secret(team_token_file(self.data_dir, name), token)
                created.append(name)
        return created

    @property
    def port(self) -> int:
        """The port served (the chosen one when started with port 0)."""
        servers = getattr(self.server, "servers", None) or []
        for server in servers:
            for sock in server.sockets:
                return int(sock.getsockname()[1])
        return int(self.server.config.port)

    @property
    def url(self) -> str:
        """``http://host:port``."""
        return f"http://{self.host}:{self.port}"

    def run(self) -> None:
        """Serve in this thread until interrupted (Ctrl-C), then stop the runner."""
        self.runner.start()
        try:
            self.server.run()
        finally:
            self.runner.stop()

    def start(self, timeout_s: float = 30.0) -> Service:
        """Serve on a daemon thread; return once it accepts connections."""
        from spottune._serving import serve_in_thread

        self.runner.start()
        self._thread = serve_in_thread(self.server, "spottune-serve", "the service", self.host, timeout_s)
        return self

    def stop(self) -> None:
        """Stop serving and the runner (a running study stays ``running`` and continues at the next start)."""
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
        self.runner.stop()
        self.store.engine.dispose()
