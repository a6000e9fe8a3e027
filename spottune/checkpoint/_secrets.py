"""Keeping secrets out of command lines, results and logs, and authenticating pickled checkpoints.

- **Storage credentials.** fsspec ``storage_options`` may hold credentials (``key``, ``secret``,
  ``token``, ``client_kwargs.aws_secret_access_key`` ..., and the user information of a URL such as
  ``http://user:password@host``). :func:`split_secrets` separates them from the rest (a URL with user
  information is public without it). Storage options never go on a command line: the local pool
  writes them to a file only its user can read (mode 0600) and names the file
  (``--storage-options-file``); the AWS agent does the same with the public part it reads from its
  segment; a Ray actor gets them as a method argument. With no credentials in the options, s3fs uses
  the standard AWS credential chain (environment, profile, instance role).
- **Redaction.** :func:`redact` replaces every secret-looking value in nested data, and the user
  information of every ``scheme://user[:password]@host`` URL in a string, by ``"***"``; results,
  events and logs go through it. :func:`redacted_fields` finds what a redaction removed.
- **Checkpoint authentication.** Pickle runs code when it loads. Where a checkpoint must be a pickle
  (the function API's arbitrary ``state``), :func:`sign` prefixes it with an HMAC-SHA256 keyed by the
  experiment's secret (:data:`CHECKPOINT_KEY_ENV`, never written to the store) and :func:`verify`
  refuses, before anything is unpickled, a file whose tag does not match. The same key authenticates
  the store's manifests (:class:`spottune.checkpoint.FsspecCheckpointStore` ``key=``) wherever it is set
  (:func:`store_key`); :func:`experiment_key` makes the driver's key and keeps it in the results folder,
  never in the store.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
from collections.abc import Mapping
from typing import Any

from spottune.errors import CheckpointError

__all__ = ["CHECKPOINT_KEY_ENV", "KEY_FILE", "STORAGE_SECRETS_ENV", "checkpoint_key", "experiment_key",
           "has_userinfo", "is_secret_name", "redact", "redacted_fields", "sign", "split_secrets", "store_key",
           "storage_options_from_env", "verify", "worker_env", "write_private"]

#: Environment variable holding the secret part of the storage options, JSON (see :func:`split_secrets`).
STORAGE_SECRETS_ENV = "SPOTTUNE_STORAGE_SECRETS"
#: Environment variable holding the experiment's checkpoint HMAC key (hex, 32 bytes).
CHECKPOINT_KEY_ENV = "SPOTTUNE_CHECKPOINT_KEY"

REDACTED = "***"
_SECRET_EXACT = {"key", "secret", "token", "password", "passwd", "pwd", "access_key", "secret_key",
                 "aws_access_key_id", "aws_secret_access_key", "aws_session_token", "session_token",
                 "account_key", "sas_token", "client_secret", "credentials", "api_key", "auth"}
_SECRET_PART = ("secret", "password", "token", "credential", "private_key", "access_key", "api_key")
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/?#@\s]+)@")
#: File of the experiment's checkpoint key (hex) in the driver's results folder, mode 0600 (:func:`experiment_key`).
KEY_FILE = "checkpoint.key"
_MAGIC = b"SPOTTUNE-HMAC-SHA256\n"
_PROCESS_KEY = secrets.token_bytes(32)


def is_secret_name(name: object) -> bool:
    """Whether an option or field named ``name`` holds a credential (``key``, ``secret``, ``*token*`` ...).

    Parameters
    ----------
    name : object
        An option or field name (compared in lower case).

    Returns
    -------
    bool
    """
    n = str(name).lower()
    return n in _SECRET_EXACT or any(p in n for p in _SECRET_PART)


def has_userinfo(text: object) -> bool:
    """Whether ``text`` is a string holding a URL with user information (``scheme://user[:password]@host``).

    Parameters
    ----------
    text : object
        Any value; only a string can hold such a URL.

    Returns
    -------
    bool
    """
    return isinstance(text, str) and _URL_USERINFO.search(text) is not None


def split_secrets(options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split storage options into (public, secret) nested dicts; merging them back gives ``options``.

    Secret: values under secret-looking names (:func:`is_secret_name`) and strings holding a URL with
    user information; the public part keeps such a URL without its user information.

    Parameters
    ----------
    options : mapping
        fsspec storage options (nested).

    Returns
    -------
    public : dict
        Safe to write to argv, logs and results.
    secret : dict
        For the environment only (:data:`STORAGE_SECRETS_ENV`).
    """
    public: dict[str, Any] = {}
    secret: dict[str, Any] = {}
    for k, v in options.items():
        if is_secret_name(k):
            secret[k] = v
        elif has_userinfo(v):
            secret[k] = v
            public[k] = _URL_USERINFO.sub(lambda m: m["scheme"], v)
        elif isinstance(v, Mapping):
            pub, sec = split_secrets(v)
            public[k] = pub
            if sec:
                secret[k] = sec
        else:
            public[k] = v
    return public, secret


def _merge(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out


def storage_options_from_env(public: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``public`` options plus the secret ones from :data:`STORAGE_SECRETS_ENV` (if set).

    Parameters
    ----------
    public : mapping
        The public storage options (from argv).
    environ : mapping of str to str, optional
        The environment to read; default ``os.environ``.

    Returns
    -------
    dict
        The full storage options.

    Raises
    ------
    CheckpointError
        If the variable is set but is not a JSON object.
    """
    raw = (os.environ if environ is None else environ).get(STORAGE_SECRETS_ENV)
    if not raw:
        return dict(public)
    try:
        secret = json.loads(raw)
    except ValueError:
        secret = None
    if not isinstance(secret, dict):
        raise CheckpointError(f"${STORAGE_SECRETS_ENV} is not a JSON object")
    return _merge(public, secret)


def checkpoint_key(environ: Mapping[str, str] | None = None) -> bytes:
    """The HMAC key of this experiment: :data:`CHECKPOINT_KEY_ENV` (hex), else a random per-process key.

    Without the variable, checkpoints written by this process can be read back only by this process
    (a worker of another experiment, or of nobody, cannot forge or replay them).

    Parameters
    ----------
    environ : mapping of str to str, optional
        The environment to read; default ``os.environ``.

    Returns
    -------
    bytes
        The key, at least 16 bytes.

    Raises
    ------
    CheckpointError
        If the variable is set but is not hex of at least 16 bytes.
    """
    raw = (os.environ if environ is None else environ).get(CHECKPOINT_KEY_ENV)
    if not raw:
        return _PROCESS_KEY
    try:
        key = bytes.fromhex(raw)
    except ValueError:
        key = b""
    if len(key) < 16:
        raise CheckpointError(f"${CHECKPOINT_KEY_ENV} must be at least 32 hex digits")
    return key


def store_key(environ: Mapping[str, str] | None = None) -> bytes | None:
    """The key that authenticates checkpoint manifests: :data:`CHECKPOINT_KEY_ENV` if set, else None.

    Parameters
    ----------
    environ : mapping of str to str, optional
        The environment to read; default ``os.environ``.

    Returns
    -------
    bytes or None
        The key, or None when the variable is not set.

    Raises
    ------
    CheckpointError
        If the variable is set but is not hex of at least 16 bytes.
    """
    env = os.environ if environ is None else environ
    return checkpoint_key(env) if env.get(CHECKPOINT_KEY_ENV) else None


def write_private(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to a new file only its owner can read and write (mode 0600 from its creation).

    Parameters
    ----------
    path : str or os.PathLike
        A file that must not exist yet.
    text : str
        Its content.

    Raises
    ------
    FileExistsError
        If ``path`` exists.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)


def experiment_key(folder: str | os.PathLike[str]) -> str:
    """The experiment's checkpoint key (64 hex digits) for a run whose results are in ``folder``.

    :data:`CHECKPOINT_KEY_ENV` if the driver's environment sets it; else the key kept in
    ``<folder>/checkpoint.key`` (:data:`KEY_FILE`, mode 0600) by an earlier start of the same run, so
    that a resumed run reads its own checkpoints; else a new random key, written there. The key stays
    on the driver's machine: it is never written to the checkpoint store.

    Parameters
    ----------
    folder : str or os.PathLike
        The run's results folder (created if missing).

    Returns
    -------
    str
        The key as hex.

    Raises
    ------
    CheckpointError
        If the variable or the file holds something else than hex of at least 16 bytes.
    """
    raw = os.environ.get(CHECKPOINT_KEY_ENV)
    if raw:
        checkpoint_key({CHECKPOINT_KEY_ENV: raw})
        return raw
    path = os.path.join(os.fspath(folder), KEY_FILE)
    try:
        with open(path) as fh:
            raw = fh.read().strip()
    except FileNotFoundError:
        os.makedirs(os.fspath(folder), exist_ok=True)
        raw = secrets.token_hex(32)
        write_private(path, raw + "\n")
        return raw
    try:
        checkpoint_key({CHECKPOINT_KEY_ENV: raw})
    except CheckpointError:
        raise CheckpointError(f"{path} is not a checkpoint key (hex of at least 16 bytes)") from None
    return raw


def worker_env(storage_options: Mapping[str, Any], key_hex: str | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """What a driver gives a worker process: (public storage options for its argv, extra environment).

    The environment holds the secret storage options (:data:`STORAGE_SECRETS_ENV`, only if there are
    any) and the experiment's checkpoint key (:data:`CHECKPOINT_KEY_ENV`; ``key_hex``, else the driver's
    own :data:`CHECKPOINT_KEY_ENV` if set, so that a resumed run can read its function-API checkpoints
    (``spottune resume``), else a new random one).

    Parameters
    ----------
    storage_options : mapping
        The experiment's fsspec storage options.
    key_hex : str, optional
        The experiment's checkpoint key, hex (:func:`experiment_key`).

    Returns
    -------
    public : dict
        Storage options without secrets.
    env : dict of str to str
        Variables to add to the worker's environment.
    """
    public, secret = split_secrets(storage_options)
    env = {CHECKPOINT_KEY_ENV: key_hex or os.environ.get(CHECKPOINT_KEY_ENV) or secrets.token_hex(32)}
    if secret:
        env[STORAGE_SECRETS_ENV] = json.dumps(secret)
    return public, env


def redact(value: Any) -> Any:
    """A copy of ``value`` (nested dicts, lists, strings) with secrets replaced by ``"***"``.

    Values under secret-looking keys (:func:`is_secret_name`) are replaced whatever they are; in
    strings, the user information of a ``scheme://user[:password]@host`` URL is replaced
    (``scheme://***@host``).

    Parameters
    ----------
    value : object
        Plain data (mappings, lists, tuples, strings, numbers).

    Returns
    -------
    object
        The redacted copy; ``value`` is unchanged.
    """
    if isinstance(value, Mapping):
        return {k: (REDACTED if is_secret_name(k) and v not in (None, "", {}) else redact(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact(v) for v in value)
    if isinstance(value, str):
        return _URL_USERINFO.sub(lambda m: f"{m['scheme']}{REDACTED}@", value)
    return value


def redacted_fields(value: Any, prefix: str = "") -> list[str]:
    """Dotted names of the strings in nested ``value`` that hold a redacted part (``"***"``), in order.

    Parameters
    ----------
    value : object
        Plain data, as :func:`redact` returns it.
    prefix : str, default ""
        Prepended to every name.

    Returns
    -------
    list of str
        E.g. ``["storage_options.key"]``.
    """
    if isinstance(value, Mapping):
        return [n for k, v in value.items() for n in redacted_fields(v, f"{prefix}{k}.")]
    if isinstance(value, (list, tuple)):
        return [n for i, v in enumerate(value) for n in redacted_fields(v, f"{prefix}{i}.")]
    return [prefix.rstrip(".")] if isinstance(value, str) and REDACTED in value else []


def sign(payload: bytes, key: bytes | None = None) -> bytes:
    """``payload`` prefixed with a magic line and its HMAC-SHA256 tag (hex) under ``key`` (default :func:`checkpoint_key`).

    Parameters
    ----------
    payload : bytes
        The bytes to authenticate (a pickled state).
    key : bytes, optional
        The HMAC key.

    Returns
    -------
    bytes
        The signed blob, for :func:`verify`.
    """
    tag = hmac.new(key or checkpoint_key(), payload, hashlib.sha256).hexdigest().encode()
    return _MAGIC + tag + b"\n" + payload


def verify(blob: bytes, what: str, key: bytes | None = None) -> bytes:
    """The payload of a :func:`sign`-ed blob, after checking its tag in constant time.

    Parameters
    ----------
    blob : bytes
        A signed blob (:func:`sign`).
    what : str
        The file's name, for the error message.
    key : bytes, optional
        The HMAC key; default :func:`checkpoint_key`.

    Returns
    -------
    bytes
        The payload.

    Raises
    ------
    CheckpointError
        If the blob is not signed or its tag does not match (tampered, or written by another
        experiment); the payload is never returned then, so it is never unpickled.
    """
    if not blob.startswith(_MAGIC):
        raise CheckpointError(f"{what} is not an authenticated spottune checkpoint (no HMAC); refusing to unpickle it")
    rest = blob[len(_MAGIC):]
    tag, sep, payload = rest.partition(b"\n")
    expected = hmac.new(key or checkpoint_key(), payload, hashlib.sha256).hexdigest().encode()
    if not sep or not hmac.compare_digest(tag, expected):
        raise CheckpointError(f"{what} failed its HMAC check (tampered, or written by another experiment); "
                              "refusing to unpickle it")
    return payload
