"""The checkpoint store contract: atomic, versioned, verified checkpoints per trial.

Contract (every implementation, tested by one suite over all of them):

- **Versions.** Each :meth:`CheckpointStore.save` of a trial creates a new version ``1, 2, 3, ...``.
  A version is *published* when its manifest exists; only published versions are ever restored.
- **Atomic publish.** The files are uploaded first, then read back and checked against their
  SHA-256, and only then is the manifest written, in one atomic step (an atomic rename on a local
  file system, a single PUT on S3). A writer that dies at any point before that leaves the previous
  published versions untouched and the half-written files invisible; the next save of the trial
  deletes them.
- **Verified restore.** :meth:`CheckpointStore.restore` and :meth:`CheckpointStore.latest_good` check
  every file's SHA-256 (and the manifest's own checksum; with a checkpoint key, its HMAC). A restore
  writes nothing outside its destination: a version naming a file outside it (absolute, ``..``, through
  a link) is bad. A bad version is skipped with a warning and
  the previous one is used; if versions exist but none is intact, :class:`~spottune.errors.CheckpointError`
  is raised. A trial that never saved restores nothing (``None``).
- **Retention.** After a new version is verified and published, versions beyond the newest ``keep``
  are deleted (manifest first, then data), **except the pinned one**: the version a restore returned
  (the step the orchestrator confirmed and resumed from) or one given to :meth:`CheckpointStore.pin`
  is never deleted by this store object's saves, so a version published but never confirmed (its
  writer killed right after publishing) can never push the confirmed one out. The previous good
  version always outlives the write of its successor.
- **Fallback.** A restore at a pinned ``step`` whose version is missing or corrupt falls back to the
  newest intact version at an earlier step (``requested_step`` and ``lost_steps`` say so), or to a
  fresh start (``None``) if there is none; it does not fail.
- **Outages.** Transient storage errors (connection refused or reset, timeouts) are retried with
  bounded exponential backoff (:class:`RetryPolicy`); when the retries are used up
  :class:`StoreUnavailable` (a :class:`~spottune.errors.CheckpointError`) says the store is
  unreachable. An unreachable store is never mistaken for a corrupt version. :meth:`CheckpointStore.probe`
  is a one-request health check for callers that must pause work while the store is down.
- **One writer per trial.** A trial runs on one instance at a time; concurrent saves of the *same*
  trial are not supported. Readers may run at any time.
"""

from __future__ import annotations

import abc
import os
import random
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spottune.errors import CheckpointError

if TYPE_CHECKING:  # an annotation only: the trainable signs its own checkpoints with this package's key
    from spottune.trainable import Trainable

__all__ = ["CheckpointInfo", "CheckpointStore", "FileEntry", "RetryPolicy", "StoreHealth", "StoreMonitor",
           "StoreUnavailable"]


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One file of a checkpoint: its SHA-256 (hex) and size in bytes.

    Parameters
    ----------
    sha256 : str
        64 hex digits.
    size_bytes : int
        Bytes.
    """

    sha256: str
    size_bytes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointInfo:
    """A published checkpoint version.

    Attributes
    ----------
    trial_id : str
    version : int
        1, 2, 3, ... per trial.
    step : int
        Training steps done when the checkpoint was taken.
    files : mapping of str to FileEntry
        Relative POSIX path -> checksum and size.
    size_bytes : int
        Total size of the files, bytes.
    created_utc : str
        ISO-8601 UTC time the manifest was written (wall clock of the writer; informative only).
    metadata : mapping
        Whatever the writer attached (e.g. ``{"reason": "revocation"}``).
    location : str
        URL of the version's data folder.
    skipped_versions : tuple of int
        Newer versions that were found corrupt and skipped to reach this one (restore/latest_good only).
    requested_step : int or None
        The step a restore asked for (``step=``), if this version is an earlier fallback; else None.
    lost_steps : int
        ``requested_step - step`` for a fallback (steps to redo), else 0.
    """

    trial_id: str
    version: int
    step: int
    files: Mapping[str, FileEntry]
    size_bytes: int
    created_utc: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    location: str = ""
    skipped_versions: tuple[int, ...] = ()
    requested_step: int | None = None
    lost_steps: int = 0


class StoreUnavailable(CheckpointError):
    """The checkpoint store could not be reached, even after the retries of its :class:`RetryPolicy`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """Bounded exponential backoff for transient storage errors.

    Attempt ``i`` (0-based) that fails is followed by a sleep of
    ``min(max_delay_s, base_delay_s * factor**i) * (1 + jitter * u)``, ``u`` uniform in [-1, 1] from a
    ``random.Random(seed)``; after ``attempts`` failures the error is raised. The longest possible
    total sleep is :attr:`max_total_s`.

    Parameters
    ----------
    attempts : int, default 6
        Tries per operation (>= 1); 1 disables retrying.
    base_delay_s : float, default 0.2
        First backoff, wall seconds.
    factor : float, default 2.0
        Growth per attempt.
    max_delay_s : float, default 4.0
        Cap of one backoff, wall seconds.
    jitter : float, default 0.0
        Relative jitter in [0, 1); 0 = none (deterministic sleeps).
    seed : int, default 0
        Seed of the jitter.

    Raises
    ------
    ConfigError
        Unless ``attempts`` is an integer >= 1, ``base_delay_s`` >= 0, ``factor`` >= 1, ``max_delay_s`` >= 0 and
        0 <= ``jitter`` < 1.
    """

    attempts: int = 6
    base_delay_s: float = 0.2
    factor: float = 2.0
    max_delay_s: float = 4.0
    jitter: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        from spottune.errors import ConfigError

        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int) or self.attempts < 1:
            raise ConfigError(f"retry attempts is {self.attempts!r}, but must be an integer >= 1")
        if not (self.base_delay_s >= 0 and self.factor >= 1 and self.max_delay_s >= 0 and 0 <= self.jitter < 1):
            raise ConfigError(f"retry policy {self!r} needs base_delay_s >= 0, factor >= 1, max_delay_s >= 0, "
                              "0 <= jitter < 1")

    def delays(self) -> list[float]:
        """The ``attempts - 1`` sleeps between attempts, wall seconds (same seed: same list).

        Returns
        -------
        list of float
            ``attempts - 1`` sleeps, seconds.
        """
        rng = random.Random(self.seed)
        out = []
        for i in range(self.attempts - 1):
            d = min(self.max_delay_s, self.base_delay_s * self.factor ** i)
            out.append(d * (1.0 + self.jitter * rng.uniform(-1.0, 1.0)) if self.jitter else d)
        return out

    @property
    def max_total_s(self) -> float:
        """Upper bound of the total sleep of one operation, wall seconds."""
        return sum(min(self.max_delay_s, self.base_delay_s * self.factor ** i) * (1.0 + self.jitter)
                   for i in range(self.attempts - 1))


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreHealth:
    """Result of :meth:`CheckpointStore.probe`: one request, no retries.

    Attributes
    ----------
    ok : bool
        The store answered (an empty or missing root counts as reachable).
    latency_s : float
        Wall seconds the probe took.
    error : str
        One line saying why the store is unreachable; ``""`` when ``ok``.
    checked_at : float
        ``time.time()`` of the probe (UTC epoch seconds).
    """

    ok: bool
    latency_s: float
    error: str = ""
    checked_at: float = 0.0


class CheckpointStore(abc.ABC):
    """Versioned checkpoints of many trials under one root (see the module docstring for the contract)."""

    #: Versions kept per trial after a successful save (>= 1), plus the pinned one (see :meth:`pin`).
    keep: int

    @abc.abstractmethod
    def pin(self, trial_id: str, version: int | None) -> None:
        """Protect ``version`` of the trial (the one the orchestrator confirmed) from this object's pruning.

        :meth:`restore` pins the version it returns, so a worker that resumed from the confirmed step
        never deletes it, however many unconfirmed versions it publishes. ``None`` removes the pin.

        Parameters
        ----------
        trial_id : str
            The trial (a path-safe id such as ``t03``).
        version : int or None
            The version to keep; None removes the pin.
        """

    @abc.abstractmethod
    def probe(self) -> StoreHealth:
        """Check that the store answers (one listing of the root, no retries); never raises.

        Returns
        -------
        StoreHealth
            Whether the store answered, and the error and latency (seconds) of the request.
        """

    @abc.abstractmethod
    def save(self, trial_id: str, local_dir: str | os.PathLike[str], *, step: int,
             metadata: Mapping[str, Any] | None = None) -> CheckpointInfo:
        """Upload every file under ``local_dir`` as the trial's next version, verify it, publish it.

        Parameters
        ----------
        trial_id : str
            Trial id (letters, digits, ``-``, ``_``, ``.``).
        local_dir : path
            Folder written by :meth:`spottune.trainable.Trainable.save` (any folder works).
        step : int
            Steps done at this checkpoint (>= 0).
        metadata : mapping, optional
            JSON-serialisable data stored in the manifest.

        Returns
        -------
        info : CheckpointInfo
            The published version.

        Raises
        ------
        CheckpointError
            If an uploaded file does not read back with the same checksum (nothing is published).
        StoreUnavailable
            If the store stays unreachable through the retries (nothing is published).
        """

    @abc.abstractmethod
    def restore(self, trial_id: str, local_dir: str | os.PathLike[str], *,
                step: int | None = None) -> CheckpointInfo | None:
        """Download the newest intact version into ``local_dir`` (created if needed; must be empty).

        Parameters
        ----------
        trial_id : str
        local_dir : path
        step : int, optional
            The confirmed step to resume from (the orchestrator's ``Launch.resume_step``): versions
            taken after it were never confirmed and are ignored. If no intact version is at ``step``
            (missing or corrupt), the newest intact version at an earlier step is restored instead,
            with ``requested_step`` and ``lost_steps`` set and a warning logged; if there is none,
            None (a fresh start, ``step`` steps lost). The restored version is pinned (:meth:`pin`).

        Returns
        -------
        info : CheckpointInfo or None
            The restored version (``skipped_versions`` lists corrupt newer ones), or None if the trial
            has no usable version (none published; with ``step``: none intact at or before it).

        Raises
        ------
        CheckpointError
            Without ``step``: if published versions exist but none is intact.
        StoreUnavailable
            If the store stays unreachable through the retries.
        """

    @abc.abstractmethod
    def latest_good(self, trial_id: str, *, step: int | None = None) -> CheckpointInfo | None:
        """The newest intact version (at ``step``, if given), checked by reading every file; like
        :meth:`restore` without copying.

        Parameters
        ----------
        trial_id : str
            The trial (a path-safe id such as ``t03``).
        step : int, optional
            Only a version at this step (with :meth:`restore`'s fallback to older ones).

        Returns
        -------
        CheckpointInfo or None
            None if no intact version exists.
        """

    @abc.abstractmethod
    def versions(self, trial_id: str) -> list[CheckpointInfo]:
        """Published versions, oldest first, from their manifests (files not checked).

        Parameters
        ----------
        trial_id : str
            The trial (a path-safe id such as ``t03``).

        Returns
        -------
        list of CheckpointInfo
            Empty when the trial has none.
        """

    @abc.abstractmethod
    def delete(self, trial_id: str) -> None:
        """Remove every version and leftover of the trial.

        Parameters
        ----------
        trial_id : str
            The trial (a path-safe id such as ``t03``).
        """

    @abc.abstractmethod
    def retain(self, trial_id: str, keep: int) -> list[int]:
        """Delete every version of the trial but its ``keep`` newest (a driver's prune once a newer save is
        confirmed: the version a segment restored is pinned only in that segment's process; decision SV4).

        Parameters
        ----------
        trial_id : str
            The trial (a path-safe id such as ``t03``).
        keep : int
            Versions kept, >= 1.

        Returns
        -------
        list of int
            The versions deleted, oldest first.

        Raises
        ------
        ConfigError
            If ``keep`` < 1.
        """

    # -- Trainable helpers --------------------------------------------------------------------------
    def save_trainable(self, trial_id: str, trainable: Trainable,
                       metadata: Mapping[str, Any] | None = None) -> CheckpointInfo:
        """``trainable.save()`` into a temporary folder, then :meth:`save` it at ``trainable.iteration``.

        Parameters
        ----------
        trial_id : str
            The trial (a path-safe id such as ``t03``).
        trainable : spottune.trainable.Trainable
            The trainable to save.
        metadata : mapping, optional
            Stored in the version's manifest.

        Returns
        -------
        CheckpointInfo
            The published version.
        """
        with tempfile.TemporaryDirectory(prefix=f"spottune-{trial_id}-") as tmp:
            trainable.save(tmp)
            return self.save(trial_id, tmp, step=trainable.iteration, metadata=metadata)

    def restore_trainable(self, trial_id: str, trainable: Trainable, *,
                          step: int | None = None) -> CheckpointInfo | None:
        """Restore the newest intact version (at ``step``, if given, with :meth:`restore`'s fallback)
        into ``trainable``; None (and no change) if there is nothing to restore.

        Parameters
        ----------
        trial_id : str
            The trial (a path-safe id such as ``t03``).
        trainable : spottune.trainable.Trainable
            A freshly set-up trainable of the same configuration; :meth:`Trainable.restore` is called on it.
        step : int, optional
            The step to restore (the orchestrator's confirmed checkpoint); None: the newest.

        Returns
        -------
        CheckpointInfo or None
            The version restored (possibly older than ``step`` after a fallback), or None.
        """
        with tempfile.TemporaryDirectory(prefix=f"spottune-{trial_id}-") as tmp:
            info = self.restore(trial_id, Path(tmp) / "ckpt", step=step)
            if info is not None:
                trainable.restore(Path(tmp) / "ckpt")
            return info


class StoreMonitor:
    """Is the checkpoint store up? For a driver that must pause launches during an outage.

    :meth:`reachable` probes the store (:meth:`CheckpointStore.probe`) at most once per
    ``min_interval_s`` and remembers the answer; once the store has been unreachable for
    ``give_up_after_s`` wall seconds in a row it raises :class:`StoreUnavailable` instead, so a
    persistent outage ends the run with a clear error rather than churning instances.

    Parameters
    ----------
    store : CheckpointStore
    give_up_after_s : float, default 120.0
        Wall seconds of continuous outage after which :meth:`reachable` raises.
    min_interval_s : float, default 0.5
        Wall seconds between probes (answers in between are cached).
    clock : callable, default ``time.monotonic``
        Wall clock, seconds.

    Attributes
    ----------
    last : StoreHealth or None
        The latest probe.
    down_since : float or None
        Clock time of the first failed probe of the current outage; None while the store is up.
    outages : int
        Outages seen (transitions from up to down).
    """

    def __init__(self, store: "CheckpointStore", *, give_up_after_s: float = 120.0, min_interval_s: float = 0.5,
                 clock: Any = None):
        import time as _time

        self.store = store
        self.give_up_after_s = float(give_up_after_s)
        self.min_interval_s = float(min_interval_s)
        self.clock = clock or _time.monotonic
        self.last: StoreHealth | None = None
        self._last_at = -float("inf")
        self.down_since: float | None = None
        self.outages = 0

    def reachable(self) -> bool:
        """True if the store answers (or answered within ``min_interval_s``); False during an outage.

        Returns
        -------
        bool
            Whether the store is reachable now.

        Raises
        ------
        StoreUnavailable
            If the store has been unreachable for ``give_up_after_s`` seconds or more.
        """
        now = self.clock()
        if self.last is None or now - self._last_at >= self.min_interval_s:
            self.last, self._last_at = self.store.probe(), now
            if self.last.ok:
                self.down_since = None
            elif self.down_since is None:
                self.down_since = now
                self.outages += 1
        if self.down_since is not None and now - self.down_since >= self.give_up_after_s:
            raise StoreUnavailable(f"{self.last.error if self.last else 'checkpoint store is unreachable'}; "
                                   f"unreachable for {now - self.down_since:.1f} s (limit {self.give_up_after_s:g} s), "
                                   "giving up")
        return self.down_since is None
