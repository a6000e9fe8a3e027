"""Knobs of the AWS backend (:class:`AwsSettings`)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spottune.experiment import AwsOptions

__all__ = ["AwsSettings"]


@dataclass(slots=True, kw_only=True)
class AwsSettings(AwsOptions):
    """Where and how the AWS backend launches its spot instances.

    The experiment spec's ``aws`` options are the fields of :class:`spottune.experiment.AwsOptions` (``bucket``,
    ``image``, ``ami``, ``instance_profile``, ``region``, ``experiment``, ``subnets``, ``security_groups``,
    ``prefix``, ``endpoint_url``, ``live_prices``, ``lease_s``, ``lease_save_s``, ``linger_s``, ``exclusion_s``,
    ``describe_every_s``, ``report_timeout_s``), which this class extends with what the driver sets; every field
    is a keyword.

    Parameters
    ----------
    bucket, experiment, and the other fields of :class:`spottune.experiment.AwsOptions`
        As documented there (``experiment`` and ``bucket`` are required here).
    store_url : str
        Checkpoint store (``s3://bucket/prefix``) the workers restore from and save to (a folder only
        when the "instances" share this machine, as in the tests).
    storage_options : mapping, default {}
        fsspec options of ``store_url`` (no credentials: the instance profile grants S3).
    time_scale : float, default 1.0
        Engine seconds per wall second; 1 on AWS, large in tests (the market is replayed faster).
    pace_steps : bool, default False
        Tests only: a worker waits ``seconds_per_step / time_scale`` wall seconds per step, as in the
        local backend (on AWS a step takes what it takes).
    poll_s : float, default 5.0
        Engine seconds between IMDS polls and command checks of an agent (AWS recommends 5 s).
    max_usd_per_hour, budget_usd : float, optional
        Caps checked before every launch: the sum of the max prices of the running instances plus the
        new one (USD/hour), and the USD spent plus accrued so far.
    max_attempts : int, default 8
        botocore retry attempts (``standard`` mode: exponential backoff with jitter on throttling).
    max_steps, checkpoint_keep, reference_seconds_per_step
        As :class:`spottune.backends.LocalSettings`.
    max_wall_s : float, default 86400.0
        Give up (``BackendError``) after this many wall seconds.
    python : str
        Interpreter of the agent's worker (``sys.executable``; the image's python on AWS).
    checkpoint_key : str, optional
        The experiment's checkpoint key (hex, at least 32 digits), handed to each instance in its user
        data (never in the bucket); the workers authenticate the store's manifests and function-API
        pickles with it. Default: the driver's ``$SPOTTUNE_CHECKPOINT_KEY`` if set, else a new random key
        per run (the composition root passes :func:`spottune.checkpoint._secrets.experiment_key`, kept
        in the results folder so that a resume reads the checkpoints).
    """

    store_url: str
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    time_scale: float = 1.0
    pace_steps: bool = False
    poll_s: float = 5.0
    max_usd_per_hour: float | None = None
    budget_usd: float | None = None
    max_attempts: int = 8
    max_steps: int | None = None
    checkpoint_keep: int = 2
    reference_seconds_per_step: float | None = None
    max_wall_s: float = 86400.0
    python: str = sys.executable
    log_dir: str | None = None
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

    @property
    def key_root(self) -> str:
        """S3 key folder of this experiment's control objects."""
        return f"{self.prefix.strip('/')}/{self.experiment}"
