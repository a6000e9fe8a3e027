"""Checkpoint store over fsspec: a local folder (``file://``), S3 (``s3://``) or ``memory://``.

Layout under the root URL::

    <root>/<trial_id>/data/v00000007-<token>/<files...>   uploaded first (invisible until published)
    <root>/<trial_id>/manifests/v00000007.json             written last = the publish step

The ``<token>`` (random hex) keeps a crashed writer's leftovers apart from a later write of the same
version number. The manifest holds the step, the SHA-256 and size of every file, and a SHA-256 of
its own body; with a checkpoint key (``key=``) also an HMAC-SHA256 of its body under that key, and a
store with a key refuses a manifest without a valid one (anyone who can write the store can recompute
a plain SHA-256, not the HMAC). A restore writes only below its destination: a file name that is
absolute, holds ``..``, a backslash or a NUL, or resolves outside the destination (through a link),
and a link in a folder store's data, make the version corrupt, and the previous one is used.
Publishing is one atomic operation: ``os.rename`` of a temporary manifest on a local file system, one
PUT on S3 (S3 never exposes a partially written object).
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import shutil
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

import fsspec

from spottune.checkpoint._secrets import redact
from spottune.checkpoint._base import CheckpointInfo, CheckpointStore, FileEntry, RetryPolicy, StoreHealth, StoreUnavailable
from spottune.errors import CheckpointError, ConfigError

__all__ = ["FsspecCheckpointStore", "is_transient", "open_store"]

log = logging.getLogger(__name__)

FORMAT = 1
_CHUNK = 4 * 1024 * 1024
_MANIFEST_RE = re.compile(r"^v(\d{8})\.json$")
_DATA_RE = re.compile(r"^v(\d{8})-[0-9a-f]+$")
_TRIAL_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
_DATA_REL_RE = re.compile(r"^data/v\d{8}-[0-9a-f]+$")


def _sha256_file(fh: Any) -> tuple[str, int]:
    h = hashlib.sha256()
    n = 0
    while chunk := fh.read(_CHUNK):
        h.update(chunk)
        n += len(chunk)
    return h.hexdigest(), n


def _canonical(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def _body_digest(body: Mapping[str, Any]) -> str:
    return hashlib.sha256(_canonical(body)).hexdigest()


def _body_hmac(body: Mapping[str, Any], key: bytes) -> str:
    return hmac.new(key, b"spottune-manifest\n" + _canonical(body), hashlib.sha256).hexdigest()


def _safe_rel(rel: str) -> bool:
    """Whether a manifest's file name is a plain relative POSIX path that stays below its folder."""
    if not rel or "\\" in rel or "\0" in rel or rel.startswith("/") or re.match(r"^[A-Za-z]:", rel):
        return False
    return all(part not in ("", ".", "..") for part in rel.split("/"))


class _Corrupt(Exception):
    """A version failed verification; the message says why (internal)."""


_T = TypeVar("_T")
_TRANSIENT_ERRNOS = {errno.ECONNREFUSED, errno.ECONNRESET, errno.ECONNABORTED, errno.ETIMEDOUT, errno.EHOSTUNREACH,
                     errno.ENETUNREACH, errno.ENETDOWN, errno.EAGAIN, errno.EPIPE,
                     # s3fs' translations of S3's "please try again" answers: 500 InternalError -> EREMOTEIO,
                     # 503 SlowDown and 409 OperationAborted -> EBUSY (s3fs/errors.py); a store that was just
                     # restarted answers 500 for a while, which must not look like a corrupt version
                     getattr(errno, "EREMOTEIO", errno.EIO), errno.EBUSY}


def is_transient(exc: BaseException) -> bool:
    """Whether a storage error may go away by itself (connection refused/reset, timeouts, 5xx).

    Missing files, permissions and bad data are not transient. Used by the retry loop.

    Parameters
    ----------
    exc : BaseException
        What a storage call raised (fsspec, s3fs, botocore, aiohttp or the OS).

    Returns
    -------
    bool
        True: retry the call after a backoff (:class:`RetryPolicy`).
    """
    if isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError, _Corrupt)):
        return False
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    if isinstance(exc, OSError) and exc.errno in _TRANSIENT_ERRNOS:
        return True
    names = {c.__name__ for c in type(exc).__mro__}
    if names & {"EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError", "ConnectionClosedError",
                "ClientConnectionError", "ServerDisconnectedError", "FSTimeoutError", "HTTPClientError",
                "IncompleteRead", "ResponseParserError", "ClientPayloadError"}:
        return True
    text = str(exc)
    return any(s in text for s in ("Could not connect", "Connection refused", "ServiceUnavailable", "SlowDown",
                                   "InternalError", "503", "502", "500 "))


class FsspecCheckpointStore(CheckpointStore):
    """Atomic, versioned, verified checkpoints on any fsspec file system.

    Parameters
    ----------
    url : str
        Root: a folder path, ``file:///abs/path``, ``s3://bucket/prefix`` or ``memory://name``.
    storage_options : mapping, optional
        Passed to fsspec; for S3 e.g. ``{"endpoint_url": "http://127.0.0.1:8333", "key": ...,
        "secret": ...}``. Directory listings are never cached (``use_listings_cache=False`` for S3),
        because other processes write the same store.
    keep : int, default 2
        Versions kept per trial after a successful save (>= 1).
    verify_after_write : bool, default True
        Read every uploaded file back and compare its SHA-256 before publishing. With False only
        the sizes are compared (cheaper on slow links).
    retry : RetryPolicy, optional
        Backoff for transient storage errors (default :class:`RetryPolicy()`, at most about 10 s of
        sleeps per operation). For S3, s3fs' own retries are turned off and botocore's too unless
        ``config_kwargs`` sets them, so this policy alone bounds the time an outage takes to surface.
    key : bytes, optional
        The experiment's checkpoint key (at least 16 bytes; :func:`spottune.checkpoint._secrets.checkpoint_key`).
        With a key every manifest written carries an HMAC-SHA256 of its body, and a manifest read
        without a valid one (none, or another key's) is a corrupt version: skipped, the previous one
        used. None (the default): manifests are written without an HMAC and any HMAC read is ignored.

    Raises
    ------
    ConfigError
        If the URL's protocol is unknown, ``keep < 1`` or ``key`` is shorter than 16 bytes.
    """

    def __init__(self, url: str, storage_options: Mapping[str, Any] | None = None, *, keep: int = 2,
                 verify_after_write: bool = True, retry: RetryPolicy | None = None, key: bytes | None = None):
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
            raise ConfigError(f"keep is {keep!r}, but must be an integer >= 1")
        if key is not None and (not isinstance(key, bytes) or len(key) < 16):
            raise ConfigError("the checkpoint key must be bytes, at least 16 of them")
        options = dict(storage_options or {})
        if "://" not in url:
            url = os.path.abspath(os.path.expanduser(url))
        protocol = url.split("://", 1)[0] if "://" in url else "file"
        if protocol in ("s3", "s3a"):
            options.setdefault("use_listings_cache", False)
            config = dict(options.get("config_kwargs") or {})
            config.setdefault("retries", {"max_attempts": 1, "mode": "standard"})
            config.setdefault("connect_timeout", 2)
            config.setdefault("read_timeout", 20)
            options["config_kwargs"] = config
        try:
            self.fs, root = fsspec.core.url_to_fs(url, **options)
        except (ValueError, ImportError) as exc:
            raise ConfigError(f"storage_path is {url!r}, but it cannot be opened: {exc}") from None
        if protocol in ("s3", "s3a") and hasattr(self.fs, "retries"):
            self.fs.retries = 1  # s3fs' own retry loop (5 tries) off: self.retry alone decides
        self.url = url
        self.root = root.rstrip("/")
        self.keep = keep
        self.verify_after_write = verify_after_write
        self.retry = retry if retry is not None else RetryPolicy()
        self.key = key
        self._pins: dict[str, int] = {}
        self._local = "file" in (self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,))

    def __repr__(self) -> str:
        return f"FsspecCheckpointStore({self.url!r}, keep={self.keep})"

    # -- paths --------------------------------------------------------------------------------------
    def _trial(self, trial_id: str) -> str:
        if not isinstance(trial_id, str) or not _TRIAL_RE.match(trial_id) or trial_id in (".", ".."):
            raise CheckpointError(f"trial id {trial_id!r} is not usable in a path (letters, digits, - _ . only)")
        return f"{self.root}/{trial_id}"

    def _call(self, what: str, fn: Callable[[], _T]) -> _T:
        """Run one storage operation, retrying transient errors (:attr:`retry`).

        Raises
        ------
        StoreUnavailable
            After the last attempt failed with a transient error.
        """
        delays = self.retry.delays()
        t0 = time.monotonic()
        for attempt in range(len(delays) + 1):
            try:
                return fn()
            except Exception as exc:
                if not is_transient(exc):
                    raise
                if attempt == len(delays):
                    raise StoreUnavailable(redact(
                        f"checkpoint store {self.url} is unreachable: {what} failed {attempt + 1} times over "
                        f"{time.monotonic() - t0:.1f} s ({type(exc).__name__}: {str(exc)[:200]})")) from None
                log.warning("checkpoint store %s: %s failed (%s: %s); retry %d/%d in %.2f s", redact(self.url), what,
                            type(exc).__name__, redact(str(exc)[:200]), attempt + 1, len(delays), delays[attempt])
                time.sleep(delays[attempt])
        raise AssertionError("unreachable")  # pragma: no cover

    def _ls(self, path: str) -> list[str]:
        def ls() -> list[str]:
            try:
                self.fs.invalidate_cache(path)
                return [p.rstrip("/").rsplit("/", 1)[-1] for p in self.fs.ls(path, detail=False)]
            except FileNotFoundError:
                return []
        return self._call(f"listing {path}", ls)

    def probe(self) -> StoreHealth:
        t0 = time.monotonic()
        try:
            self.fs.invalidate_cache(self.root)
            try:
                self.fs.ls(self.root, detail=False)
            except FileNotFoundError:
                pass  # a store nobody has written to yet is reachable
        except Exception as exc:
            return StoreHealth(ok=False, latency_s=time.monotonic() - t0, checked_at=time.time(),
                               error=redact(f"checkpoint store {self.url} is unreachable ({type(exc).__name__}: "
                                            f"{str(exc)[:200]})"))
        return StoreHealth(ok=True, latency_s=time.monotonic() - t0, checked_at=time.time())

    def pin(self, trial_id: str, version: int | None) -> None:
        self._trial(trial_id)
        if version is None:
            self._pins.pop(trial_id, None)
        else:
            self._pins[trial_id] = int(version)

    def _url(self, path: str) -> str:
        return self.fs.unstrip_protocol(path)

    # -- manifests ----------------------------------------------------------------------------------
    def _manifest_versions(self, trial_id: str) -> list[int]:
        names = self._ls(f"{self._trial(trial_id)}/manifests")
        return sorted(int(m.group(1)) for n in names if (m := _MANIFEST_RE.match(n)))

    def _read_manifest(self, trial_id: str, version: int) -> CheckpointInfo:
        path = f"{self._trial(trial_id)}/manifests/v{version:08d}.json"
        try:
            doc = json.loads(self._call(f"reading {path}", lambda: self.fs.cat_file(path)))
            body, digest = doc["body"], doc["sha256"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise _Corrupt(f"manifest {path} is unreadable ({type(exc).__name__}: {exc})") from None
        if not isinstance(body, dict) or _body_digest(body) != digest:
            raise _Corrupt(f"manifest {path} does not match its own checksum")
        if self.key is not None:
            tag = doc.get("hmac")
            if not isinstance(tag, str):
                raise _Corrupt(f"manifest {path} is not authenticated (no HMAC), but this store has a checkpoint key")
            if not hmac.compare_digest(tag.encode(), _body_hmac(body, self.key).encode()):
                raise _Corrupt(f"manifest {path} failed its HMAC check (tampered, or written with another key)")
        try:
            files = {str(k): FileEntry(str(v["sha256"]), int(v["size_bytes"])) for k, v in body["files"].items()}
            unsafe = sorted(k for k in body["files"] if not isinstance(k, str) or not _safe_rel(k))
            if unsafe or not isinstance(body["data"], str) or not _DATA_REL_RE.match(body["data"]):
                raise _Corrupt(f"manifest {path} names a path outside its version's folder "
                               f"({unsafe[:3] if unsafe else body['data']!r}); refusing it")
            return CheckpointInfo(trial_id=trial_id, version=int(body["version"]), step=int(body["step"]),
                                  files=files, size_bytes=sum(f.size_bytes for f in files.values()),
                                  created_utc=str(body["created_utc"]), metadata=dict(body.get("metadata") or {}),
                                  location=self._url(f"{self._trial(trial_id)}/{body['data']}"))
        except (KeyError, TypeError, ValueError) as exc:
            raise _Corrupt(f"manifest {path} lacks a field ({exc})") from None

    def _data_path(self, info: CheckpointInfo) -> str:
        return self.fs._strip_protocol(info.location)

    def _check_version(self, info: CheckpointInfo, dest: Path | None) -> None:
        """Read every file, compare SHA-256 and size; with ``dest`` also write the files there (never
        outside it: see the module docstring)."""
        base = self._data_path(info)
        root = os.path.realpath(dest) if dest is not None else ""
        for rel, entry in info.files.items():
            src = f"{base}/{rel}"
            if self._local and os.path.islink(src):
                raise _Corrupt(f"version {info.version}: file {rel} is a link; refusing it")

            def read(src: str = src, rel: str = rel) -> tuple[str, int]:
                with self.fs.open(src, "rb") as fh:
                    if dest is None:
                        return _sha256_file(fh)
                    target = dest / rel
                    target.parent.mkdir(parents=True, exist_ok=True)
                    if os.path.commonpath([root, os.path.realpath(target.parent)]) != root:
                        raise _Corrupt(f"version {info.version}: file {rel} resolves outside {dest}; refusing it")
                    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
                    with os.fdopen(fd, "wb") as out:
                        return _sha256_file(_Tee(fh, out))
            try:
                digest, size = self._call(f"reading {src}", read)
            except FileNotFoundError:
                raise _Corrupt(f"version {info.version}: file {rel} is missing") from None
            except OSError as exc:
                raise _Corrupt(f"version {info.version}: file {rel} is unreadable ({exc})") from None
            if digest != entry.sha256 or size != entry.size_bytes:
                raise _Corrupt(f"version {info.version}: file {rel} has sha256 {digest[:12]}.../{size} B, "
                               f"manifest says {entry.sha256[:12]}.../{entry.size_bytes} B")

    def _newest_good(self, trial_id: str, dest: Path | None, step: int | None = None) -> CheckpointInfo | None:
        """The newest intact version (with ``step``: at it, else the newest intact one before it)."""
        versions = self._manifest_versions(trial_id)
        skipped: list[int] = []
        reasons: list[str] = []
        for version in reversed(versions):
            try:
                info = self._read_manifest(trial_id, version)
                if step is not None and info.step > step:
                    continue  # published after the confirmed step: never confirmed, ignore
                if dest is not None:
                    _clear(dest)
                self._check_version(info, dest)
            except _Corrupt as exc:
                log.warning("checkpoint of trial %s: %s; falling back to the previous version", trial_id, exc)
                skipped.append(version)
                reasons.append(str(exc))
                continue
            if skipped:
                info = dataclasses.replace(info, skipped_versions=tuple(skipped))
            if step is not None and info.step < step:
                log.warning("checkpoint of trial %s: no intact version at step %d (%s); falling back to version "
                            "%d at step %d, %d steps lost", trial_id, step, "; ".join(reasons) or "missing",
                            info.version, info.step, step - info.step)
                info = dataclasses.replace(info, requested_step=step, lost_steps=step - info.step)
            return info
        if step is not None:
            if versions or step > 0:
                log.warning("checkpoint of trial %s: no intact version at or before step %d among versions %s%s; "
                            "starting afresh, %d steps lost", trial_id, step, versions,
                            ": " + "; ".join(reasons) if reasons else "", step)
            if dest is not None:
                _clear(dest)
            return None
        if versions:
            raise CheckpointError(f"trial {trial_id}: no intact checkpoint among versions {versions}: " + "; ".join(reasons))
        return None

    # -- public API ---------------------------------------------------------------------------------
    def versions(self, trial_id: str) -> list[CheckpointInfo]:
        out = []
        for v in self._manifest_versions(trial_id):
            try:
                out.append(self._read_manifest(trial_id, v))
            except _Corrupt as exc:
                log.warning("checkpoint of trial %s: %s", trial_id, exc)
        return out

    def latest_good(self, trial_id: str, *, step: int | None = None) -> CheckpointInfo | None:
        return self._newest_good(trial_id, None, step)

    def restore(self, trial_id: str, local_dir: str | os.PathLike[str], *, step: int | None = None) -> CheckpointInfo | None:
        dest = Path(local_dir)
        if dest.exists() and any(dest.iterdir()):
            raise CheckpointError(f"restore target {dest} is not empty")
        info = self._newest_good(trial_id, dest, step)
        if info is not None:
            self.pin(trial_id, info.version)
        return info

    def save(self, trial_id: str, local_dir: str | os.PathLike[str], *, step: int,
             metadata: Mapping[str, Any] | None = None) -> CheckpointInfo:
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise CheckpointError(f"step is {step!r}, but must be an integer >= 0")
        src = Path(local_dir)
        if not src.is_dir():
            raise CheckpointError(f"checkpoint folder {src} does not exist")
        trial = self._trial(trial_id)
        local_files = sorted(p for p in src.rglob("*") if p.is_file())
        entries: dict[str, FileEntry] = {}
        for p in local_files:
            with open(p, "rb") as fh:
                entries[p.relative_to(src).as_posix()] = FileEntry(*_sha256_file(fh))
        existing = self._manifest_versions(trial_id)
        version = (existing[-1] if existing else 0) + 1
        data_rel = f"data/v{version:08d}-{secrets.token_hex(6)}"
        data = f"{trial}/{data_rel}"
        # 1. upload (invisible: no manifest yet)
        for rel in entries:
            self._put(str(src / rel), f"{data}/{rel}")
        # 2. verify what the store now holds
        for rel, entry in entries.items():
            target = f"{data}/{rel}"
            if self.verify_after_write:
                def read_back(target: str = target) -> tuple[str, int]:
                    with self.fs.open(target, "rb") as fh:
                        return _sha256_file(fh)
                digest, size = self._call(f"reading back {target}", read_back)
            else:
                digest, size = entry.sha256, int(self._call(f"sizing {target}", lambda t=target: self.fs.size(t)))
            if digest != entry.sha256 or size != entry.size_bytes:
                self._rm(data)
                raise CheckpointError(f"trial {trial_id}: uploaded {rel} reads back as sha256 {digest[:12]}... "
                                      f"({size} B), expected {entry.sha256[:12]}... ({entry.size_bytes} B)")
        # 3. publish
        body = {"format": FORMAT, "trial_id": trial_id, "version": version, "step": step, "data": data_rel,
                "files": {k: {"sha256": e.sha256, "size_bytes": e.size_bytes} for k, e in entries.items()},
                "created_utc": datetime.now(timezone.utc).isoformat(), "metadata": dict(metadata or {})}
        signed: dict[str, Any] = {"body": body, "sha256": _body_digest(body)}
        if self.key is not None:
            signed["hmac"] = _body_hmac(body, self.key)
        doc = json.dumps(signed, indent=1).encode()
        self._publish(f"{trial}/manifests/v{version:08d}.json", doc)
        info = self._read_manifest(trial_id, version)
        # 4. retention: older versions beyond `keep` (never the pinned one), and leftovers of crashed writers
        keep = set(self._manifest_versions(trial_id)[-self.keep:]) | {version}
        if trial_id in self._pins:
            keep.add(self._pins[trial_id])
        self._prune(trial_id, keep=keep, current=data_rel)
        return info

    def delete(self, trial_id: str) -> None:
        self._rm(self._trial(trial_id))

    def retain(self, trial_id: str, keep: int) -> list[int]:
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
            raise ConfigError(f"keep is {keep!r}, but must be an integer >= 1")
        versions = self._manifest_versions(trial_id)
        kept, gone = versions[-keep:], versions[:-keep]
        if not gone:
            return []
        try:
            current = self._read_manifest(trial_id, kept[-1]).location.rstrip("/").rsplit("/", 1)[-1]
        except _Corrupt:
            return []  # the newest is unreadable: keep the older ones as its fall-backs
        self._prune(trial_id, keep=set(kept), current=current)
        return gone

    # -- low-level ----------------------------------------------------------------------------------
    def _put(self, local: str, remote: str) -> None:
        if self._local:
            self.fs.makedirs(remote.rsplit("/", 1)[0], exist_ok=True)
        self._call(f"uploading {remote}", lambda: self.fs.put_file(local, remote))

    def _publish(self, path: str, payload: bytes) -> None:
        if self._local:
            parent = path.rsplit("/", 1)[0]
            self.fs.makedirs(parent, exist_ok=True)
            tmp = f"{parent}/.tmp-{secrets.token_hex(6)}"
            with open(tmp, "wb") as fh:
                fh.write(payload)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)  # atomic on POSIX
        else:
            self._call(f"writing {path}", lambda: self.fs.pipe_file(path, payload))  # one PUT: atomic on S3

    def _rm(self, path: str) -> None:
        def rm() -> None:
            try:
                self.fs.rm(path, recursive=True)
            except FileNotFoundError:
                pass
        self._call(f"deleting {path}", rm)

    def _prune(self, trial_id: str, keep: set[int], current: str) -> None:
        trial = self._trial(trial_id)
        kept_data = {current.rsplit("/", 1)[-1]}
        for v in self._manifest_versions(trial_id):
            if v not in keep:
                self._rm(f"{trial}/manifests/v{v:08d}.json")  # unpublish first, then delete the data
                continue
            try:
                kept_data.add(self._read_manifest(trial_id, v).location.rstrip("/").rsplit("/", 1)[-1])
            except _Corrupt:
                pass
        for name in self._ls(f"{trial}/data"):
            if _DATA_RE.match(name) and name not in kept_data:
                self._rm(f"{trial}/data/{name}")
        if self._local:
            for name in self._ls(f"{trial}/manifests"):
                if name.startswith(".tmp-"):
                    self._rm(f"{trial}/manifests/{name}")


def _clear(folder: Path) -> None:
    """Make ``folder`` an existing, empty folder (it only ever holds files this store wrote)."""
    folder.mkdir(parents=True, exist_ok=True)
    for child in folder.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


class _Tee:
    """File-like reader that copies everything it reads into ``out``."""

    def __init__(self, src: Any, out: Any):
        self._src, self._out = src, out

    def read(self, n: int = -1) -> bytes:
        chunk = self._src.read(n)
        if chunk:
            self._out.write(chunk)
        return chunk


def open_store(storage_path: str, storage_options: Mapping[str, Any] | None = None, *, keep: int = 2,
               verify_after_write: bool = True, retry: RetryPolicy | None = None,
               key: bytes | None = None) -> CheckpointStore:
    """Open the checkpoint store at ``storage_path`` (folder, ``file://``, ``s3://`` or ``memory://``).

    Parameters
    ----------
    storage_path : str
        Root URL or folder (relative folders are made absolute).
    storage_options : mapping, optional
        fsspec options (S3: ``endpoint_url``, ``key``, ``secret``, ``client_kwargs`` ...).
    keep : int, default 2
        Versions kept per trial.
    verify_after_write : bool, default True
        Read uploads back and compare checksums before publishing.
    retry : RetryPolicy, optional
        Backoff for transient storage errors (default ``RetryPolicy()``).
    key : bytes, optional
        Checkpoint key: manifests are HMAC-authenticated and unauthenticated ones refused
        (:class:`FsspecCheckpointStore`).

    Returns
    -------
    store : CheckpointStore

    Raises
    ------
    ConfigError
        If the URL's protocol is unknown, ``keep < 1`` or ``key`` is shorter than 16 bytes.
    """
    return FsspecCheckpointStore(storage_path, storage_options, keep=keep, verify_after_write=verify_after_write,
                                 retry=retry, key=key)
