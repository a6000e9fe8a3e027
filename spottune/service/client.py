"""A small Python client of ``spottune serve`` (httpx).

Example::

    from spottune.service.client import ServiceClient

    admin = ServiceClient("http://127.0.0.1:8000", token=ADMIN_TOKEN)
    vision = ServiceClient("http://127.0.0.1:8000", token=admin.create_team("vision")["token"])
    vision.submit("study.yaml", team="vision")      # or a mapping of ExperimentSpec keys
    vision.wait("study")["summary"]["total_cost_usd"]
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import yaml

from spottune.errors import SpottuneError
from spottune.service._store import TERMINAL_STATES

__all__ = ["DEFAULT_URL", "ServiceClient", "ServiceError"]

#: Where the client looks when given no URL and ``SPOTTUNE_URL`` is unset.
DEFAULT_URL = "http://127.0.0.1:8000"


class ServiceError(SpottuneError, RuntimeError):
    """The service refused a request (its one-line reason and HTTP status) or could not be reached.

    Attributes
    ----------
    status : int or None
        The HTTP status; None when the service was not reached.
    """

    def __init__(self, message: str, status: int | None = None):
        self.status = status
        super().__init__(message)


class ServiceClient:
    """Calls the service's HTTP API with one bearer token.

    Parameters
    ----------
    url : str, optional
        Base URL; default ``$SPOTTUNE_URL`` or :data:`DEFAULT_URL`.
    token : str, optional
        A team's token or the admin's; default ``$SPOTTUNE_TOKEN``.
    timeout_s : float, default 30.0
        Seconds per request.
    """

    def __init__(self, url: str | None = None, token: str | None = None, *, timeout_s: float = 30.0):
        self.url = (url or os.environ.get("SPOTTUNE_URL") or DEFAULT_URL).rstrip("/")
        token = token if token is not None else os.environ.get("SPOTTUNE_TOKEN")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout_s)

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            r = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ServiceError(f"cannot reach the service at {self.url}: {exc}") from None
        if r.status_code >= 400:
            try:
                detail = r.json().get("detail", r.text)
            except ValueError:
                detail = r.text
            raise ServiceError(f"{detail} (HTTP {r.status_code})", r.status_code)
        return r.json()

    def health(self) -> dict[str, Any]:
        """``{"ok": True, "backend": ...}``."""
        return self._call("GET", "/v1/health")

    def create_team(self, name: str, entitlement: float = 1.0, *, min_usd_per_hour: float | None = None,
                    max_usd_per_hour: float | None = None) -> dict[str, Any]:
        """Admin: create a team; the answer holds its ``token`` (shown once).

        Parameters
        ----------
        name : str
        entitlement : float, default 1.0
            Its share of the org budget (a weight, > 0).
        min_usd_per_hour, max_usd_per_hour : float, optional
            A guaranteed minimum and a cap on its share of the org budget, USD/hour (decision SV14).

        Returns
        -------
        dict
            ``name``, ``entitlement``, ``min_usd_per_hour``, ``max_usd_per_hour``, ``token``.
        """
        return self._call("POST", "/v1/teams", json={"name": name, "entitlement": entitlement,
                                                       "min_usd_per_hour": min_usd_per_hour,
                                                       "max_usd_per_hour": max_usd_per_hour})

    def update_team(self, name: str, **changes: float | None) -> dict[str, Any]:
        """Admin: change a team's ``entitlement``, ``min_usd_per_hour`` or ``max_usd_per_hour`` (keywords; None removes
        a bound). The next fair-share round uses them (decision SV14).

        Parameters
        ----------
        name : str
            The team.
        **changes : float or None
            ``entitlement`` (a weight, > 0), ``min_usd_per_hour`` / ``max_usd_per_hour`` (USD/hour, >= 0, or None).

        Returns
        -------
        dict
            The team as ``teams()`` lists it.

        Raises
        ------
        ServiceError
            404 for an unknown team, 422 for another key, a bad value or a minimum above the cap (nothing is
            changed), 403 without the admin token.
        """
        return self._call("PATCH", f"/v1/teams/{name}", json=changes)

    def teams(self) -> list[dict[str, Any]]:
        """Admin: the teams and their entitlements."""
        return self._call("GET", "/v1/teams")

    def org(self) -> dict[str, Any]:
        """The org budget (USD/hour) and each active team's share of it."""
        return self._call("GET", "/v1/org")

    def set_org_budget(self, usd_per_hour: float | None) -> dict[str, Any]:
        """Admin: set the org budget, USD/hour (None clears it)."""
        return self._call("PUT", "/v1/org", json={"budget_usd_per_hour": usd_per_hour})

    def submit(self, spec: str | os.PathLike[str] | Mapping[str, Any], *, team: str, name: str | None = None,
               trial_budget: int | None = None) -> dict[str, Any]:
        """Submit a study: an experiment spec (a YAML file or a mapping of its keys) for ``team``.

        Parameters
        ----------
        spec : str, os.PathLike or mapping
            A YAML file of :class:`spottune.experiment.ExperimentSpec` keys, or those keys.
        team : str
        name : str, optional
            Default: the file's stem (required with a mapping).
        trial_budget : int, optional
            Trials the study may run in all.

        Returns
        -------
        dict
            The study as the service stores it (``id``, ``name``, ``state``, ...).

        Raises
        ------
        ServiceError
            On an unreadable file or the service's refusal.
        """
        if not isinstance(spec, Mapping):
            path = Path(spec)
            try:
                data = yaml.safe_load(path.read_text())
            except (OSError, yaml.YAMLError) as exc:
                raise ServiceError(f"study file {str(path)!r} cannot be read: {str(exc).splitlines()[0]}") from None
            if not isinstance(data, Mapping):
                raise ServiceError(f"study file {str(path)!r} holds no mapping of experiment keys")
            name = name or path.stem
            spec = data
        if not name:
            raise ServiceError("name is missing: a study submitted as a mapping needs a name")
        return self._call("POST", "/v1/studies", json={"team": team, "name": name, "spec": dict(spec),
                                                         "trial_budget": trial_budget})

    def studies(self) -> list[dict[str, Any]]:
        """The caller's studies (the admin: every team's)."""
        return self._call("GET", "/v1/studies")

    def study(self, ref: str | int) -> dict[str, Any]:
        """One study, by id or name."""
        return self._call("GET", f"/v1/studies/{ref}")

    def cancel(self, ref: str | int) -> dict[str, Any]:
        """Cancel a queued or running study."""
        return self._call("POST", f"/v1/studies/{ref}/cancel")

    def wait(self, ref: str | int, timeout_s: float = 600.0, poll_s: float = 0.2) -> dict[str, Any]:
        """Poll until the study ends (finished, failed or cancelled) and return it.

        Raises
        ------
        ServiceError
            If it has not ended after ``timeout_s`` seconds.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            study = self.study(ref)
            if study["state"] in TERMINAL_STATES:
                return study
            if time.monotonic() > deadline:
                raise ServiceError(f"study {ref} is still {study['state']} after {timeout_s:g} s")
            time.sleep(poll_s)
