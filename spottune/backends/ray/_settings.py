"""Knobs of the Ray backend (:class:`RaySettings`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spottune.experiment import RayOptions

__all__ = ["RaySettings"]


@dataclass(slots=True, kw_only=True)
class RaySettings(RayOptions):
    """Where the Ray cluster is and how the Ray backend runs its segments on it.

    The experiment spec's ``ray`` options are the fields of :class:`spottune.experiment.RayOptions` (``address``,
    ``prices``, ``imds_url``, ``poll_s``, ``watch_s``, ``notice_s``, ``lost_after_s``, ``num_cpus``,
    ``log_to_driver``, ``lease_s``, ``place_s``), which this class extends with what the driver sets; every
    field is a keyword.

    Parameters
    ----------
    address, prices, and the other fields of :class:`spottune.experiment.RayOptions`
        As documented there.
    store_url : str
        Checkpoint store root every segment restores from and saves to: ``s3://bucket/prefix`` on a real
        cluster (the nodes are other machines), a folder when every node shares this machine (tests).
    storage_options : mapping, default {}
        fsspec options of ``store_url`` (no credentials: the nodes' instance profile grants S3).
    time_scale : float, default 1.0
        Engine seconds per wall second. 1 on a real cluster; large in tests, where the market is replayed
        faster and every segment waits ``seconds_per_step / time_scale`` wall seconds per step.
    pace_steps : bool, default False
        Tests only: pace the steps as the local backend does (on a real cluster a step takes what it takes).
    max_steps, checkpoint_keep, reference_seconds_per_step
        As :class:`spottune.backends.LocalSettings`.
    max_wall_s : float, default 86400.0
        Give up (``BackendError``) after this many wall seconds.
    checkpoint_key : str, optional
        The experiment's checkpoint key (hex, at least 32 digits), handed to each segment actor as a
        method argument (never on a command line, never in the store); it authenticates the store's
        manifests and function-API pickles. Default: the driver's ``$SPOTTUNE_CHECKPOINT_KEY`` if set,
        else a new random key per run (the composition root passes
        :func:`spottune.checkpoint._secrets.experiment_key`, kept in the results folder).
    """

    store_url: str
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    time_scale: float = 1.0
    pace_steps: bool = False
    max_steps: int | None = None
    checkpoint_keep: int = 2
    reference_seconds_per_step: float | None = None
    max_wall_s: float = 86400.0
    checkpoint_key: str | None = None

    def wall(self, engine_s: float) -> float:
        """Wall seconds of ``engine_s`` engine seconds.

        Parameters
        ----------
        engine_s : float
            A duration in engine seconds.

        Returns
        -------
        float
            ``engine_s / time_scale``.
        """
        return float(engine_s) / self.time_scale
