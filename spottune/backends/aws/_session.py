"""boto3 clients of the AWS backend, with botocore's retry policy (throttling backs off; capacity does not).

botocore's ``standard`` retry mode retries throttling (``RequestLimitExceeded``, ``Throttling``, ...) and
transient errors, which include every HTTP 500. EC2 answers ``InsufficientInstanceCapacity`` with HTTP 500,
so botocore would retry a capacity refusal up to ``max_attempts`` times, with backoff, in the same market:
time lost, and the answer is the same. For the EC2 client the retry condition is therefore "standard, except
a capacity code" (:data:`spottune.backends.aws._launch.CAPACITY_CODES`): a capacity refusal comes back at once,
becomes ``LaunchFailed`` and excludes the market (decision AWS3).
"""

from __future__ import annotations

from typing import Any

__all__ = ["client", "no_capacity_retries", "retry_config"]


def retry_config(max_attempts: int = 8) -> Any:
    """botocore ``Config`` with the ``standard`` retry mode: up to ``max_attempts`` attempts in all, exponential
    backoff with full jitter (base 1 s, cap 20 s) on throttling (``RequestLimitExceeded``, ``Throttling``...)
    and transient errors. Source: https://boto3.amazonaws.com/v1/documentation/api/latest/guide/retries.html

    Parameters
    ----------
    max_attempts : int, default 8
        Attempts in all, the first included.

    Returns
    -------
    botocore.config.Config
        With a 10 s connect and a 30 s read timeout.
    """
    from botocore.config import Config

    return Config(retries={"mode": "standard", "total_max_attempts": int(max_attempts)}, connect_timeout=10,
                  read_timeout=30)


class _UnlessCapacity:
    """A botocore retry checker: ``inner``'s answer, but never retry a capacity error code."""

    def __init__(self, inner: Any):
        self.inner = inner

    def is_retryable(self, context: Any) -> bool:
        from spottune.backends.aws._launch import CAPACITY_CODES

        return context.get_error_code() not in CAPACITY_CODES and self.inner.is_retryable(context)


def no_capacity_retries(ec2: Any, max_attempts: int = 8) -> Any:
    """Replace the ``standard`` retry handler of the EC2 client ``ec2`` by one that does not retry capacity
    errors (module doc); returns ``ec2``. Built from botocore's own parts (``botocore.retries.standard``: the
    same conditions, backoff and retry quota), registered under botocore's id so that it replaces the default.

    Parameters
    ----------
    ec2 : botocore.client.BaseClient
        An EC2 client.
    max_attempts : int, default 8
        Attempts in all, the first included.

    Returns
    -------
    botocore.client.BaseClient
        ``ec2``, changed in place.
    """
    from botocore.retries import quota, standard

    events = ec2.meta.events
    name = ec2.meta.service_model.service_id.hyphenize()
    retry_quota = standard.RetryQuotaChecker(quota.RetryQuota())
    handler = standard.RetryHandler(
        retry_policy=standard.RetryPolicy(
            retry_checker=_UnlessCapacity(standard.StandardRetryConditions(max_attempts=int(max_attempts))),
            retry_backoff=standard.ExponentialBackoff()),
        retry_event_adapter=standard.RetryEventAdapter(), retry_quota=retry_quota)
    events.unregister(f"needs-retry.{name}", unique_id=f"retry-config-{name}")
    events.register(f"after-call.{name}", retry_quota.release_retry_quota)
    events.register(f"needs-retry.{name}", handler.needs_retry, unique_id=f"retry-config-{name}")
    return ec2


def client(service: str, *, region: str, endpoint_url: str | None = None, max_attempts: int = 8) -> Any:
    """A boto3 client of ``service`` (``ec2``, ``s3``, ``sqs``) in ``region``; credentials from the standard chain.
    The EC2 client does not retry capacity errors (:func:`no_capacity_retries`).

    Parameters
    ----------
    service : str
        The AWS service.
    region : str
        E.g. ``us-east-1``.
    endpoint_url : str, optional
        Another endpoint (a test server such as moto); None: AWS.
    max_attempts : int, default 8
        Attempts in all, the first included.

    Returns
    -------
    botocore.client.BaseClient
    """
    import boto3

    c = boto3.client(service, region_name=region, endpoint_url=endpoint_url, config=retry_config(max_attempts))
    return no_capacity_retries(c, max_attempts) if service == "ec2" else c
