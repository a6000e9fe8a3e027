"""EC2 instance metadata (IMDS): the client a worker polls, and a local emulator the local backend serves.

The **client** (:class:`ImdsClient`) is the code a worker runs on a real EC2 spot instance: it asks
``/latest/meta-data/spot/instance-action`` (404 = no interruption scheduled; 200 = JSON
``{"action": "terminate"|"stop"|"hibernate", "time": "2026-01-01T00:02:00Z"}``), using an IMDSv2
session token (``PUT /latest/api/token``). If the token request fails, that one request falls back
to IMDSv1 (logged) and the token is asked for again on the next one: the fallback is never
permanent. A 401 (tokens required) renews the token and retries once; a second 401 raises
:class:`ImdsUnauthorized`, never swallowed. AWS recommends polling every 5 s.

The **emulator** (:class:`ImdsEmulator`) is a small ``http.server`` in a daemon thread on
127.0.0.1. One emulator serves many emulated instances, each under its own path prefix, so a worker
is given ``--imds-url http://127.0.0.1:PORT/i-00001`` where a real one uses
``http://169.254.169.254``; the client code is the same. (moto's IMDS answers HTTP 500 for
``spot/instance-action``, so it cannot stand in.)
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["DEFAULT_IMDS_URL", "ImdsClient", "ImdsEmulator", "ImdsUnauthorized", "InstanceAction"]

log = logging.getLogger(__name__)

#: The link-local address of the real EC2 instance metadata service.
DEFAULT_IMDS_URL = "http://169.254.169.254"
_ACTION_PATH = "/latest/meta-data/spot/instance-action"
_TOKEN_PATH = "/latest/api/token"


class ImdsUnauthorized(PermissionError):
    """IMDS answered 401 (session tokens are required) even with a freshly requested token."""


@dataclass(frozen=True, slots=True)
class InstanceAction:
    """A scheduled spot interruption: ``action`` (terminate, stop, hibernate) at ``time_utc`` (ISO-8601).

    Parameters
    ----------
    action : str
        ``terminate``, ``stop`` or ``hibernate``.
    time_utc : str
        ISO-8601, e.g. ``2015-05-05T10:02:00Z``.
    """

    action: str
    time_utc: str


class ImdsClient:
    """Poll the instance metadata service for a spot interruption notice.

    Parameters
    ----------
    base_url : str, default "http://169.254.169.254"
        IMDS root (the emulator gives each instance its own prefix, e.g. ``http://127.0.0.1:PORT/i-1``).
    timeout_s : float, default 1.0
        Per-request timeout, wall seconds.
    token_ttl_s : int, default 21600
        IMDSv2 session-token lifetime, seconds (the token is renewed before it expires).
    """

    def __init__(self, base_url: str = DEFAULT_IMDS_URL, *, timeout_s: float = 1.0, token_ttl_s: int = 21600):
        self.base_url = base_url.rstrip("/")
        self.timeout_s = float(timeout_s)
        self.token_ttl_s = int(token_ttl_s)
        self._token: str | None = None
        self._token_expiry_s = 0.0
        #: Requests sent without a token because the token request failed (IMDSv1 fallbacks).
        self.v1_fallbacks = 0

    def _fresh_token(self) -> str | None:
        """A valid IMDSv2 token, or None (logged) if the token request failed: this one request uses IMDSv1."""
        import time

        if self._token is not None and time.monotonic() < self._token_expiry_s:
            return self._token
        self._token = None
        req = urllib.request.Request(self.base_url + _TOKEN_PATH, method="PUT",
                                     headers={"X-aws-ec2-metadata-token-ttl-seconds": str(self.token_ttl_s)})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                token = resp.read().decode()
        except OSError as exc:  # HTTPError, URLError, timeouts
            self.v1_fallbacks += 1
            log.warning("IMDS %s: session token request failed (%s); this request falls back to IMDSv1, "
                        "the token is asked for again next time", self.base_url, exc)
            return None
        self._token = token
        self._token_expiry_s = time.monotonic() + 0.9 * self.token_ttl_s
        return self._token

    def _get_once(self, path: str, token: str | None) -> str | None:
        headers = {"X-aws-ec2-metadata-token": token} if token is not None else {}
        req = urllib.request.Request(self.base_url + path, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                return resp.read().decode()
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise

    def get(self, path: str) -> str | None:
        """GET a metadata path; the body, or None on 404.

        Parameters
        ----------
        path : str
            Absolute path under the base URL, e.g. ``/latest/meta-data/spot/instance-action``.

        Returns
        -------
        str or None
            The body, or None on 404.

        Raises
        ------
        ImdsUnauthorized
            If the service answers 401 (tokens required) twice, the second time with a token
            requested just before (a ``PermissionError``, so an ``OSError``).
        OSError
            If the service cannot be reached or answers with another error (``urllib.error.URLError``).
        """
        try:
            return self._get_once(path, self._fresh_token())
        except urllib.error.HTTPError as exc:
            if exc.code != 401:
                raise
        log.warning("IMDS %s: 401 Unauthorized for %s (session tokens are required); renewing the token and "
                    "retrying", self.base_url, path)
        self._token = None
        token = self._fresh_token()
        try:
            return self._get_once(path, token)
        except urllib.error.HTTPError as exc:
            if exc.code != 401:
                raise
            raise ImdsUnauthorized(f"IMDS {self.base_url}: 401 Unauthorized for {path} even after renewing the "
                                   f"session token ({'no token could be obtained' if token is None else 'token refused'})"
                                   ) from None

    def instance_action(self) -> InstanceAction | None:
        """The pending spot interruption, or None if none is scheduled.

        Returns
        -------
        InstanceAction or None
            The action and its time, or None.

        Raises
        ------
        OSError
            If the service cannot be reached (callers that poll should log and retry).
        ValueError
            If the body is not a JSON object (garbled answer).
        """
        body = self.get(_ACTION_PATH)
        if body is None:
            return None
        doc = json.loads(body)
        if not isinstance(doc, dict):  # a ValueError like a garbled body: pollers retry, not crash
            raise ValueError(f"{_ACTION_PATH} returned {body[:100]!r}, but must be a JSON object")
        return InstanceAction(str(doc.get("action", "terminate")), str(doc.get("time", "")))


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence the access log
        pass

    def _split(self) -> tuple[str, str]:
        path = self.path.split("?", 1)[0]
        if path.startswith("/latest/"):
            return "", path
        _, _, rest = path.partition("/")
        instance, _, sub = rest.partition("/")
        return instance, "/" + sub

    def _send(self, code: int, body: str = "", content_type: str = "text/plain") -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_PUT(self) -> None:  # noqa: N802
        instance, path = self._split()
        if path != _TOKEN_PATH or instance not in self.server.emulator._instances:
            self._send(404, "Not Found")
            return
        if not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
            self._send(400, "Missing TTL header")
            return
        with self.server.emulator._lock:
            fail = self.server.emulator.token_failures > 0
            if fail:
                self.server.emulator.token_failures -= 1
        if fail:
            self._send(self.server.emulator.token_failure_code, "Token service unavailable")
            return
        token = secrets.token_urlsafe(24)
        self.server.emulator._tokens.add(token)
        self._send(200, token)

    def do_GET(self) -> None:  # noqa: N802
        emu = self.server.emulator
        instance, path = self._split()
        with emu._lock:
            state = emu._instances.get(instance)
            emu.requests += 1
        if state is None:
            self._send(404, "Not Found")
            return
        if emu.require_token and self.headers.get("X-aws-ec2-metadata-token") not in emu._tokens:
            self._send(401, "Unauthorized")
            return
        if path == _ACTION_PATH:
            action = state.get("action")
            if action is None:
                self._send(404, "Not Found")
            else:
                self._send(200, json.dumps(action), "application/json")
        elif path == "/latest/meta-data/events/recommendations/rebalance":
            hint = state.get("rebalance")
            if hint is None:
                self._send(404, "Not Found")
            else:
                self._send(200, json.dumps(hint), "application/json")
        elif path == "/latest/meta-data/instance-id":
            self._send(200, instance)
        elif path == "/latest/meta-data/instance-type":
            self._send(200, state.get("instance_type", ""))
        elif path == "/latest/meta-data/placement/availability-zone":
            self._send(200, state.get("availability_zone", ""))
        else:
            self._send(404, "Not Found")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    emulator: "ImdsEmulator"


class ImdsEmulator:
    """A local IMDS for many emulated instances (404 until :meth:`notify` schedules an interruption).

    Parameters
    ----------
    require_token : bool, default False
        Reject GETs without a valid IMDSv2 token (HTTP 401), like ``HttpTokens=required``.
    token_failures : int, default 0
        The first this-many token requests (``PUT /latest/api/token``) fail with ``token_failure_code``
        (a flaky or throttled token endpoint); settable later as an attribute.
    token_failure_code : int, default 403
        HTTP status of those failures.

    Examples
    --------
    >>> with ImdsEmulator() as imds:
    ...     url = imds.register("i-1", instance_type="r3.large", availability_zone="us-east-1a")
    ...     client = ImdsClient(url)
    ...     before = client.instance_action()
    ...     imds.notify("i-1", time_s=1431000000.0)
    ...     after = client.instance_action()
    >>> before is None, after.action, after.time_utc
    (True, 'terminate', '2015-05-07T12:00:00Z')
    """

    def __init__(self, *, require_token: bool = False, token_failures: int = 0, token_failure_code: int = 403):
        self.require_token = require_token
        self.token_failures = int(token_failures)
        self.token_failure_code = int(token_failure_code)
        self._instances: dict[str, dict[str, Any]] = {}
        self._tokens: set[str] = set()
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.requests = 0

    # -- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> "ImdsEmulator":
        """Bind 127.0.0.1 on a free port and serve in a daemon thread.

        Returns
        -------
        ImdsEmulator
            Itself, serving (a second call does nothing).
        """
        if self._server is None:
            self._server = _Server(("127.0.0.1", 0), _Handler)
            self._server.emulator = self
            self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                            name="imds-emulator", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "ImdsEmulator":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Root URL, ``http://127.0.0.1:PORT``."""
        if self._server is None:
            raise RuntimeError("the IMDS emulator is not running; call start() first")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # -- instances ----------------------------------------------------------------------------------
    def register(self, instance_id: str, *, instance_type: str = "", availability_zone: str = "") -> str:
        """Add an emulated instance; returns its IMDS base URL (``<url>/<instance_id>``).

        Parameters
        ----------
        instance_id : str
            Non-empty, without ``/``.
        instance_type : str, default ""
            Answered at ``instance-type``.
        availability_zone : str, default ""
            Answered at ``placement/availability-zone``.

        Returns
        -------
        str
            The instance's IMDS base URL.

        Raises
        ------
        ValueError
            If ``instance_id`` is empty or holds a ``/``.
        """
        if not instance_id or "/" in instance_id:
            raise ValueError(f"instance id {instance_id!r} must be non-empty and contain no '/'")
        with self._lock:
            self._instances[instance_id] = {"action": None, "instance_type": instance_type,
                                            "availability_zone": availability_zone}
        return f"{self.url}/{instance_id}"

    def notify(self, instance_id: str, *, time_s: float, action: str = "terminate") -> None:
        """Schedule an interruption: from now on ``spot/instance-action`` answers 200 with ``action``
        at ``time_s`` (engine seconds since the epoch, UTC; shown as ISO-8601 ``...Z``).

        Parameters
        ----------
        instance_id : str
            A registered instance.
        time_s : float
            The interruption's time, engine seconds since the epoch (UTC).
        action : {"terminate", "stop", "hibernate"}, default "terminate"
            The action announced.
        """
        stamp = datetime.fromtimestamp(float(time_s), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        with self._lock:
            self._instances[instance_id]["action"] = {"action": action, "time": stamp}

    def rebalance(self, instance_id: str, *, time_s: float) -> None:
        """Post a rebalance recommendation: ``events/recommendations/rebalance`` answers 200 with
        ``{"noticeTime": ...}`` (``time_s``: engine seconds since the epoch, UTC) from now on.

        Parameters
        ----------
        instance_id : str
            A registered instance.
        time_s : float
            The recommendation's time, engine seconds since the epoch (UTC).
        """
        stamp = datetime.fromtimestamp(float(time_s), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        with self._lock:
            self._instances[instance_id]["rebalance"] = {"noticeTime": stamp}

    def unregister(self, instance_id: str) -> None:
        """Forget an instance (its URL answers 404 afterwards).

        Parameters
        ----------
        instance_id : str
            The instance (unknown ids are ignored).
        """
        with self._lock:
            self._instances.pop(instance_id, None)
