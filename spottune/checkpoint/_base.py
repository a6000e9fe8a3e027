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
  every file's SHA-256 (and the manifest's own checksum). A bad version is skipped with a warning and
  the previous one is used; if versions exist but none is intact, :class:`~spottune.errors.CheckpointError`
  is raised. A trial that never saved restores nothing (``None``).
- **Retention.** After a new version is verified and published, versions beyond the newest ``keep``
  are deleted (manifest first, then data). So the previous good version always outlives the write of
  its successor.
- **One writer per trial.** A trial runs on one instance at a time; concurrent saves of the *same*
  trial are not supported. Readers may run at any time.
"""

from __future__ import annotations

import abc
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spottune.trainable import Trainable

__all__ = ["CheckpointInfo", "CheckpointStore", "FileEntry"]


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One file of a checkpoint: its SHA-256 (hex) and size in bytes."""

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


class CheckpointStore(abc.ABC):
    """Versioned checkpoints of many trials under one root (see the module docstring for the contract)."""

    #: Versions kept per trial after a successful save (>= 1).
    keep: int

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
            Only consider versions taken at this step (the orchestrator's ``Launch.resume_step``, in
            case a newer checkpoint was published that the orchestrator never confirmed).

        Returns
        -------
        info : CheckpointInfo or None
            The restored version (``skipped_versions`` lists corrupt newer ones), or None if the trial
            has no published version.

        Raises
        ------
        CheckpointError
            If published versions exist but none is intact (at ``step``, if given).
        """

    @abc.abstractmethod
    def latest_good(self, trial_id: str, *, step: int | None = None) -> CheckpointInfo | None:
        """The newest intact version (at ``step``, if given), checked by reading every file; like
        :meth:`restore` without copying."""

    @abc.abstractmethod
    def versions(self, trial_id: str) -> list[CheckpointInfo]:
        """Published versions, oldest first, from their manifests (files not checked)."""

    @abc.abstractmethod
    def delete(self, trial_id: str) -> None:
        """Remove every version and leftover of the trial."""

    # -- Trainable helpers --------------------------------------------------------------------------
    def save_trainable(self, trial_id: str, trainable: Trainable,
                       metadata: Mapping[str, Any] | None = None) -> CheckpointInfo:
        """``trainable.save()`` into a temporary folder, then :meth:`save` it at ``trainable.iteration``."""
        with tempfile.TemporaryDirectory(prefix=f"spottune-{trial_id}-") as tmp:
            trainable.save(tmp)
            return self.save(trial_id, tmp, step=trainable.iteration, metadata=metadata)

    def restore_trainable(self, trial_id: str, trainable: Trainable, *,
                          step: int | None = None) -> CheckpointInfo | None:
        """Restore the newest intact version (at ``step``, if given) into ``trainable``; None (and no
        change) if the trial has no checkpoint."""
        with tempfile.TemporaryDirectory(prefix=f"spottune-{trial_id}-") as tmp:
            info = self.restore(trial_id, Path(tmp) / "ckpt", step=step)
            if info is not None:
                trainable.restore(Path(tmp) / "ckpt")
            return info
