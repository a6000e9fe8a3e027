"""Knobs of the Ray backend (:class:`RaySettings`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RaySettings"]


@dataclass(slots=True)
class RaySettings:
    """Where the Ray cluster is and how the Ray backend runs its segments on it.

    Parameters
    ----------
    store_url : str
        Checkpoint store root every segment restores from and saves to: ``s3://bucket/prefix`` on a real
        cluster (the nodes are other machines), a folder when every node shares this machine (tests).
    address : str, default "auto"
        Ray cluster address for ``ray.init``: ``auto`` (the cluster this machine belongs to, ``ray start``),
        ``HOST:PORT`` of the head's GCS, or ``ray://HOST:10001`` (Ray Client). Ignored when this process is
        already connected (``ray.is_initialized()``).
    storage_options : mapping, default {}
        fsspec options of ``store_url`` (no credentials: the nodes' instance profile grants S3).
    time_scale : float, default 1.0
        Engine seconds per wall second. 1 on a real cluster; large in tests, where the market is replayed
        faster and every segment waits ``seconds_per_step / time_scale`` wall seconds per step.
    pace_steps : bool, default False
        Tests only: pace the steps as the local backend does (on a real cluster a step takes what it takes).
    prices : mapping market -> float, optional
        A price table, USD per instance-hour, keyed ``"<instance type>/<zone>"`` (e.g.
        ``{"m5.large/us-east-1a": 0.035}``); a market in it is billed at that constant price instead of
        the replayed price history.
    imds_url : str, default "none"
        IMDS root a segment polls for the spot interruption notice (``http://169.254.169.254`` on EC2
        nodes); ``none``: no polling (a laptop, or any cluster whose nodes are not EC2 instances).
    poll_s : float, default 5.0
        Engine seconds between a segment's IMDS polls (AWS recommends 5 s).
    watch_s : float, default 1.0
        Engine seconds between two looks at the cluster's nodes (draining, dead); the wall interval is
        ``watch_s / time_scale`` but never below 0.05 s.
    notice_s : float, default 120.0
        Engine seconds between a drain without deadline and the node's end, assumed for the deadline of
        the ``RevocationNotice`` (AWS gives two minutes).
    lost_after_s : float, default 60.0
        Wall seconds an actor may stay unreachable (``ActorUnavailableError``) while its node is still
        alive in the GCS before the segment is failed (a node lost without a drain is marked dead by
        the GCS's health checks, about 15 s with Ray's defaults).
    num_cpus : float, default 0.0
        CPUs each segment actor reserves besides its market (0: the market resource alone limits how
        many segments share a node).
    max_steps, checkpoint_keep, reference_seconds_per_step
        As :class:`spottune.backends.LocalSettings`.
    max_wall_s : float, default 86400.0
        Give up (``BackendError``) after this many wall seconds.
    log_to_driver : bool, default False
        Forward the actors' stdout and stderr to this process (Ray's ``log_to_driver``); they are always
        in the nodes' Ray logs (``/tmp/ray/session_latest/logs``).
    checkpoint_key : str, optional
        The experiment's checkpoint key (hex, at least 32 digits), handed to each segment actor as a
        method argument (never on a command line, never in the store); it authenticates the store's
        manifests and function-API pickles. Default: the driver's ``$SPOTTUNE_CHECKPOINT_KEY`` if set,
        else a new random key per run (the composition root passes
        :func:`spottune.checkpoint._secrets.experiment_key`, kept in the results folder).
    """

    store_url: str
    address: str = "auto"
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    time_scale: float = 1.0
    pace_steps: bool = False
    prices: Mapping[str, float] = field(default_factory=dict)
    imds_url: str = "none"
    poll_s: float = 5.0
    watch_s: float = 1.0
    notice_s: float = 120.0
    lost_after_s: float = 60.0
    num_cpus: float = 0.0
    max_steps: int | None = None
    checkpoint_keep: int = 2
    reference_seconds_per_step: float | None = None
    max_wall_s: float = 86400.0
    log_to_driver: bool = False
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
