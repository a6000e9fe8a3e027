"""Knobs of the AWS backend (:class:`AwsSettings`)."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from provisioner import DEFAULT_EXCLUSION_S

__all__ = ["AwsSettings"]


@dataclass(slots=True)
class AwsSettings:
    """Where and how the AWS backend launches its spot instances.

    Parameters
    ----------
    experiment : str
        The experiment's name: the value of the ``spottune:experiment`` tag of every instance, the SQS
        queue name (``spottune-<experiment>.fifo``) and the S3 folder of its control objects.
    bucket : str
        S3 bucket of the control objects (segments, commands, the lease).
    store_url : str
        Checkpoint store (``s3://bucket/prefix``) the workers restore from and save to (a folder only
        when the "instances" share this machine, as in the tests).
    image : str
        Worker image URI (ECR) the user data runs (``docker run --network host IMAGE``).
    ami : str
        Host AMI with Docker (e.g. the ECS-optimized Amazon Linux 2023 AMI of the region).
    instance_profile : str
        Name (or ARN) of the instance profile the workers run as (S3, SQS; docs/guide/aws.md).
    region : str, default "us-east-1"
    prefix : str, default "spottune"
        S3 key prefix of the control objects.
    endpoint_url : str, optional
        AWS endpoint (a moto server in tests); None: the real AWS endpoints.
    subnets : mapping zone -> subnet id, optional
        Subnet per availability zone (default VPC when absent).
    security_groups : sequence of str, optional
    storage_options : mapping, default {}
        fsspec options of ``store_url`` (no credentials: the instance profile grants S3).
    time_scale : float, default 1.0
        Engine seconds per wall second; 1 on AWS, large in tests (the market is replayed faster).
    pace_steps : bool, default False
        Tests only: a worker waits ``seconds_per_step / time_scale`` wall seconds per step, as in the
        local backend (on AWS a step takes what it takes).
    poll_s : float, default 5.0
        Engine seconds between IMDS polls and command checks of an agent (AWS recommends 5 s).
    describe_every_s : float, default 15.0
        Engine seconds between ``describe_instances`` calls (who ended which instance).
    lease_s : float, default 600.0
        Engine seconds an agent waits after the last renewal of the orchestrator's lease before it shuts
        its instance down (the dead-man switch); the lease is renewed every ``lease_s / 4``.
    lease_save_s : float, default 60.0
        Engine seconds an agent that found the lease stale waits for the checkpoint it asks its worker for,
        before it shuts the instance down anyway.
    linger_s : float, default 600.0
        Engine seconds an agent whose worker has exited waits to be terminated (by us after a hop, by the
        provider after a notice) before it shuts the instance down itself.
    exclusion_s : float, default 1800.0
        Engine seconds a market that refused a launch for capacity stays out of the choice.
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

    experiment: str
    bucket: str
    store_url: str
    image: str = "spottune-worker:latest"
    ami: str = "ami-12c6146b"
    instance_profile: str = "spottune-worker"
    region: str = "us-east-1"
    prefix: str = "spottune"
    endpoint_url: str | None = None
    subnets: Mapping[str, str] = field(default_factory=dict)
    security_groups: Sequence[str] = ()
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    time_scale: float = 1.0
    pace_steps: bool = False
    poll_s: float = 5.0
    describe_every_s: float = 15.0
    lease_s: float = 600.0
    lease_save_s: float = 60.0
    linger_s: float = 600.0
    exclusion_s: float = DEFAULT_EXCLUSION_S
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
