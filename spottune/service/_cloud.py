"""What the org sets for studies served on a cloud backend (``spottune serve --backend aws|ray``; decision SV16).

Teams share one cloud account and one hourly budget (the fair-share caps every launch is checked against, SV11 and
SV14). A tenant's spec says what to tune and how (workload, search space, pool, stopper, per-run timings); where it
runs and where its checkpoints live are the org's:

- :class:`AwsServing`: the checkpoint store (``--storage-path s3://bucket/prefix``; each study gets
  ``<storage path>/studies/<id>/``), the region, the worker image, the host AMI, the instance profile, subnets and
  security groups, and a test endpoint. :meth:`AwsServing.study_spec` writes them into each study's spec, with the
  study's own experiment name (the ``spottune:experiment`` tag and SQS queue); :meth:`AwsServing.refusal` refuses a
  tenant spec that names any of them.
- :class:`RayServing`: the cluster address, connected to once at the server's start (one Ray connection per
  process, shared by every study's driver thread), and optionally a shared checkpoint store.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spottune.errors import ConfigError

__all__ = ["AWS_ORG_KEYS", "AWS_TENANT_KEYS", "AwsServing", "RAY_ORG_KEYS", "RayServing", "experiment_name"]

#: ``aws`` keys of a spec the org sets on the service (a tenant spec naming one is refused).
AWS_ORG_KEYS = ("bucket", "prefix", "experiment", "region", "endpoint_url", "image", "ami", "instance_profile",
                "subnets", "security_groups", "live_prices")
#: ``aws`` keys a tenant may set: the run's own timings.
AWS_TENANT_KEYS = ("lease_s", "lease_save_s", "linger_s", "exclusion_s", "describe_every_s", "report_timeout_s")
#: ``ray`` keys of a spec the org sets on the service: the cluster, the price table the runs are billed at, and
#: whether the nodes are EC2 instances.
RAY_ORG_KEYS = ("address", "prices", "imds_url")


def _split_s3(url: str) -> tuple[str, str]:
    """``s3://bucket/prefix`` -> (bucket, prefix without slashes at either end)."""
    if not url.startswith("s3://"):
        raise ConfigError(f"--storage-path is {url!r}, but --backend aws needs s3://BUCKET/PREFIX (EC2 instances "
                          "cannot reach the server's folders)")
    bucket, _, prefix = url[len("s3://"):].partition("/")
    if not bucket:
        raise ConfigError(f"--storage-path is {url!r}, but names no bucket: give s3://BUCKET/PREFIX")
    return bucket, prefix.strip("/")


def experiment_name(storage_path: str, study: str) -> str:
    """The experiment name of a served study: ``study-<study>-<8 hex digits of SHA-256 of s3://BUCKET/PREFIX>``.

    It is the ``spottune:experiment`` tag of the study's instances and names its SQS queue, both account-wide, and
    every instance with the tag is terminated at the run's end: the digest keeps two servers of one account (two
    storage paths) from ending each other's instances.

    Parameters
    ----------
    storage_path : str
        The org's ``s3://bucket/prefix``.
    study : str
        The study's folder under ``<data dir>/studies`` (its id; ``<id>/trial-<r>-c<k>`` for a round of a
        trial-budget study), ``/`` becoming ``-``.

    Returns
    -------
    str
    """
    bucket, prefix = _split_s3(storage_path)  # one digest for every spelling of the path (slashes at the ends)
    digest = hashlib.sha256(f"s3://{bucket}/{prefix}".encode()).hexdigest()[:8]
    return f"study-{study.replace('/', '-')}-{digest}"


def _study_of(output: str | Path, studies_dir: Path) -> str:
    """The study folder of ``output`` relative to ``studies_dir`` (``"7"``, ``"7/trial-000-c3"``)."""
    try:
        return Path(output).resolve().relative_to(studies_dir.resolve()).as_posix()
    except ValueError:
        raise ConfigError(f"output {str(output)!r} is not under the service's studies folder {str(studies_dir)!r}") \
            from None


@dataclass(frozen=True, kw_only=True)
class AwsServing:
    """The org's settings of the aws backend on the service (decision SV16).

    Parameters
    ----------
    storage_path : str
        ``s3://bucket/prefix``: study ``<id>`` keeps its checkpoints in ``<storage_path>/studies/<id>/checkpoints``
        and its control objects (segments, commands, lease) in ``<storage_path>/studies/<id>/<experiment>/``.
    storage_endpoint_url : str, optional
        S3 endpoint of the checkpoint store (an S3-compatible server); None: AWS's. Credentials come from the
        standard chain (the server's environment, the instances' profile), never from a spec.
    region : str, default "us-east-1"
    endpoint_url : str, optional
        AWS endpoint of EC2, S3 (control objects) and SQS (a moto server in tests); None: AWS's.
    image : str, optional
        Worker image URI (ECR); required (as ``aws.image`` of ``spottune run``).
    ami : str, optional
        Host AMI with Docker; required.
    instance_profile : str, default "spottune-worker"
        The instance profile every study's instances run as (docs/guide/service.md: it must reach
        ``<storage_path>/studies/*``).
    subnets : mapping zone -> subnet id, default {}
    security_groups : sequence of str, default ()

    Raises
    ------
    ConfigError
        On a storage path that is not ``s3://BUCKET/...``, or a missing image or AMI.
    """

    storage_path: str
    storage_endpoint_url: str | None = None
    region: str = "us-east-1"
    endpoint_url: str | None = None
    image: str | None = None
    ami: str | None = None
    instance_profile: str = "spottune-worker"
    subnets: Mapping[str, str] = field(default_factory=dict)
    security_groups: Sequence[str] = ()

    def __post_init__(self) -> None:
        _split_s3(self.storage_path)
        missing = [f"--aws-{k}" for k in ("image", "ami") if not getattr(self, k)]
        if missing:
            raise ConfigError(f"--backend aws needs {' and '.join(missing)} (the worker image in ECR, a host AMI with "
                              "Docker; docs/guide/aws.md)")

    def refusal(self, spec: Any) -> str | None:
        """Why a tenant may not run ``spec`` on this server's aws backend, or None.

        Parameters
        ----------
        spec : spottune.experiment.ExperimentSpec

        Returns
        -------
        str or None
            One line naming the field and the rule.
        """
        named = [k for k in AWS_ORG_KEYS if k in spec.aws]
        if named:
            return (f"aws.{named[0]} is {spec.aws[named[0]]!r}, but on the service the org sets "
                    f"{', '.join('aws.' + k for k in AWS_ORG_KEYS)}; a study may set only "
                    f"{', '.join('aws.' + k for k in AWS_TENANT_KEYS)}")
        if spec.storage_options:
            return "storage_options is set, but on the service the org sets the checkpoint store and its options"
        return None

    def study_spec(self, spec: Mapping[str, Any], output: str | Path, studies_dir: Path) -> dict[str, Any]:
        """``spec`` with the org's settings for the study whose results folder is ``output``.

        Parameters
        ----------
        spec : mapping
            The tenant's spec keys (as submitted; :meth:`refusal` passed).
        output : str or Path
            The run's results folder, under ``studies_dir``.
        studies_dir : Path
            ``<data dir>/studies``.

        Returns
        -------
        dict
            The keys to run: ``storage_path``, ``storage_options`` and the ``aws`` org keys set.
        """
        study = _study_of(output, studies_dir)
        bucket, prefix = _split_s3(self.storage_path)
        root = f"{prefix}/studies/{study}" if prefix else f"studies/{study}"
        aws = {k: v for k, v in dict(spec.get("aws") or {}).items() if k in AWS_TENANT_KEYS}
        aws.update(bucket=bucket, prefix=root, experiment=experiment_name(self.storage_path, study),
                   region=self.region, image=self.image, ami=self.ami, instance_profile=self.instance_profile,
                   subnets=dict(self.subnets), security_groups=list(self.security_groups), live_prices=True)
        if self.endpoint_url:
            aws["endpoint_url"] = self.endpoint_url
        options = {"endpoint_url": self.storage_endpoint_url} if self.storage_endpoint_url else {}
        return {**spec, "aws": aws, "storage_path": f"s3://{bucket}/{root}/checkpoints", "storage_options": options}


@dataclass(frozen=True, kw_only=True)
class RayServing:
    """The org's settings of the ray backend on the service (decision SV16).

    Parameters
    ----------
    address : str, default "auto"
        The cluster (``ray.init``'s address), connected to once by :meth:`connect` at the server's start.
    storage_path : str, optional
        A checkpoint store every node reaches (``s3://bucket/prefix``; study ``<id>`` uses
        ``<storage_path>/studies/<id>``); None: the study's results folder, which only a cluster on the server's
        machine reaches.
    storage_endpoint_url : str, optional
        S3 endpoint of that store; None: AWS's.
    """

    address: str = "auto"
    storage_path: str | None = None
    storage_endpoint_url: str | None = None

    def connect(self) -> None:
        """Connect this process to the cluster (one connection, shared by every study's thread).

        Raises
        ------
        spottune.errors.BackendError
            Without Ray, or when the cluster cannot be reached (one line).
        """
        from spottune.backends.ray._cluster import connect

        connect(self.address)

    def refusal(self, spec: Any) -> str | None:
        """Why a tenant may not run ``spec`` on this server's ray backend, or None (one line naming the field)."""
        named = [k for k in RAY_ORG_KEYS if k in spec.ray]
        if named:
            return (f"ray.{named[0]} is {spec.ray[named[0]]!r}, but on the service the org sets "
                    f"{', '.join('ray.' + k for k in RAY_ORG_KEYS)}")
        if spec.storage_options:
            return "storage_options is set, but on the service the org sets the checkpoint store and its options"
        return None

    def study_spec(self, spec: Mapping[str, Any], output: str | Path, studies_dir: Path) -> dict[str, Any]:
        """``spec`` with the org's cluster address and, if set, the study's part of the shared store."""
        out = {**spec, "ray": {**dict(spec.get("ray") or {}), "address": self.address}}
        if self.storage_path is not None:
            study = _study_of(output, studies_dir)
            out["storage_path"] = f"{self.storage_path.rstrip('/')}/studies/{study}"
            out["storage_options"] = {"endpoint_url": self.storage_endpoint_url} if self.storage_endpoint_url else {}
        return out
