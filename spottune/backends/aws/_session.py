"""boto3 clients of the AWS backend, with botocore's retry policy (throttling backs off)."""

from __future__ import annotations

from typing import Any

__all__ = ["client", "retry_config"]


def retry_config(max_attempts: int = 8) -> Any:
    """botocore ``Config`` with the ``standard`` retry mode: up to ``max_attempts`` attempts in all, exponential
    backoff with full jitter (base 1 s, cap 20 s) on throttling (``RequestLimitExceeded``, ``Throttling``...)
    and transient errors. Source: https://boto3.amazonaws.com/v1/documentation/api/latest/guide/retries.html
    """
    from botocore.config import Config

    return Config(retries={"mode": "standard", "total_max_attempts": int(max_attempts)}, connect_timeout=10,
                  read_timeout=30)


def client(service: str, *, region: str, endpoint_url: str | None = None, max_attempts: int = 8) -> Any:
    """A boto3 client of ``service`` (``ec2``, ``s3``, ``sqs``) in ``region``; credentials from the standard chain."""
    import boto3

    return boto3.client(service, region_name=region, endpoint_url=endpoint_url, config=retry_config(max_attempts))
