"""One spot instance per segment: the ``run_instances`` request, its user data, and refusals.

The provisioner's choice (market = instance type x availability zone, max price in USD per
instance-hour) becomes exactly one ``run_instances`` call (:func:`launch_request`):

- ``InstanceMarketOptions``: spot, one-time, ``MaxPrice``, interruption behaviour ``terminate``;
- ``Placement``: the availability zone (``SubnetId`` too when a subnet is configured for it);
- ``MetadataOptions``: IMDSv2 required (``HttpTokens=required``), hop limit 2 (a container on a bridge
  network reaches IMDS through one more hop);
- ``InstanceInitiatedShutdownBehavior=terminate``: the agent's ``shutdown`` ends the billing;
- ``IamInstanceProfile``: the worker role (S3 and SQS; docs/guide/aws.md);
- tags ``spottune:experiment``, ``spottune:trial``, ``spottune:launch`` on the instance and its volumes;
- user data (:func:`user_data`): a shell script that runs the worker image's agent for this segment,
  then powers the host off, whatever the agent's exit code. It names the experiment's workload (the
  agent refuses a segment that asks for another) and holds the experiment's checkpoint key: the user
  data is readable only from the instance itself (IMDS) and by principals allowed
  ``ec2:DescribeInstanceAttribute``, not by writers of the bucket.

A refused launch raises :class:`LaunchRefused` with the AWS error code (``InsufficientInstanceCapacity``,
``SpotMaxPriceTooLow``, ``RequestLimitExceeded`` after botocore's retries, ...). Sources: EC2 API
reference ``RunInstances``; "Spot Instance interruptions" and "Instance metadata options" user guides.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["CAPACITY_CODES", "TAG_EXPERIMENT", "TAG_LAUNCH", "TAG_TRIAL", "LaunchRefused", "launch",
           "launch_request", "parse_user_data", "user_data", "user_data_trust"]

TAG_EXPERIMENT = "spottune:experiment"
TAG_TRIAL = "spottune:trial"
TAG_LAUNCH = "spottune:launch"
#: Error codes that mean "no spot capacity in this market now": the market is excluded for a while.
CAPACITY_CODES = frozenset({"InsufficientInstanceCapacity", "InsufficientCapacity", "MaxSpotInstanceCountExceeded",
                            "SpotCapacityNotAvailable", "Unsupported", "InsufficientFreeAddressesInSubnet"})
_SEGMENT_LINE = re.compile(r"^SPOTTUNE_SEGMENT=(\S+)$", re.M)
_KEY_LINE = re.compile(r"^export SPOTTUNE_CHECKPOINT_KEY=([0-9a-f]+)$", re.M)
_WORKLOAD_LINE = re.compile(r"^export SPOTTUNE_WORKLOAD=(\S+)$", re.M)
_USER_DATA_LIMIT = 16 * 1024  # bytes, before base64 (EC2 limit)


class LaunchRefused(RuntimeError):
    """``run_instances`` failed: ``code`` is the AWS error code, ``message`` its text."""

    def __init__(self, code: str, message: str = ""):
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code
        self.message = message


def user_data(*, image: str, segment_url: str, region: str, workload: str | None = None,
              checkpoint_key: str | None = None) -> str:
    """The instance's first-boot script: run the agent of one segment in the worker image, then power off.

    ``SPOTTUNE_SEGMENT=<s3 url>`` is on a line of its own (:func:`parse_user_data` reads it back). With
    ``workload`` (the spec's) and ``checkpoint_key`` (hex), ``export SPOTTUNE_WORKLOAD=...`` and
    ``export SPOTTUNE_CHECKPOINT_KEY=...`` lines hand them to the agent's container through its
    environment (``docker run -e NAME``: the values are not on the host's command lines);
    :func:`user_data_trust` reads them back.

    Parameters
    ----------
    image : str
        The worker image (ECR URI).
    segment_url : str
        S3 URL of the segment's description.
    region : str
        The AWS region (for the ECR login).
    workload : str, optional
        The spec's workload name.
    checkpoint_key : str, optional
        The experiment's checkpoint key, at least 32 lowercase hex digits.

    Returns
    -------
    str
        A bash script.

    Raises
    ------
    ValueError
        If ``checkpoint_key`` is not at least 32 lowercase hex digits, or the script exceeds EC2's 16 KB
        user-data limit.
    """
    q = shlex.quote
    if checkpoint_key is not None and not re.fullmatch(r"[0-9a-f]{32,}", checkpoint_key):
        raise ValueError("the checkpoint key must be at least 32 lowercase hex digits")
    exports = ([f"export SPOTTUNE_WORKLOAD={q(workload)}"] if workload else []) + (
        [f"export SPOTTUNE_CHECKPOINT_KEY={checkpoint_key}"] if checkpoint_key else [])
    env = "".join(f" -e {name}" for name in ("SPOTTUNE_WORKLOAD", "SPOTTUNE_CHECKPOINT_KEY")
                  if any(line.startswith(f"export {name}=") for line in exports))
    script = "\n".join([
        "#!/bin/bash",
        "# spottune worker host: one trial segment, then power off (InstanceInitiatedShutdownBehavior=terminate)",
        f"SPOTTUNE_SEGMENT={q(segment_url)}",
        *exports,
        "set -u",
        f"aws ecr get-login-password --region {q(region)} | docker login --username AWS --password-stdin "
        f"{q(image.split('/')[0])} || true",
        f"docker run --rm --network host -e AWS_DEFAULT_REGION={q(region)} -e SPOTTUNE_SEGMENT=\"$SPOTTUNE_SEGMENT\"{env} "
        f"{q(image)} --segment \"$SPOTTUNE_SEGMENT\"",
        "shutdown -h now",
        "",
    ])
    if len(script.encode()) > _USER_DATA_LIMIT:
        raise ValueError(f"user data is {len(script.encode())} bytes, but EC2 allows {_USER_DATA_LIMIT}")
    return script


def parse_user_data(script: str) -> str:
    """The segment URL in a script of :func:`user_data`.

    Parameters
    ----------
    script : str
        A user-data script.

    Returns
    -------
    str
        The segment's S3 URL.

    Raises
    ------
    ValueError
        If the script has no ``SPOTTUNE_SEGMENT=`` line.
    """
    m = _SEGMENT_LINE.search(script)
    if m is None:
        raise ValueError("not a spottune user-data script (no SPOTTUNE_SEGMENT= line)")
    return shlex.split(m.group(1))[0]


def user_data_trust(script: str) -> dict[str, str]:
    """The workload and checkpoint key a script of :func:`user_data` hands the agent, as environment
    variables (``SPOTTUNE_WORKLOAD``, ``SPOTTUNE_CHECKPOINT_KEY``; absent ones left out).

    Parameters
    ----------
    script : str
        A user-data script.

    Returns
    -------
    dict of str to str
        Variable name -> value.
    """
    out = {}
    if (m := _WORKLOAD_LINE.search(script)) is not None:
        out["SPOTTUNE_WORKLOAD"] = shlex.split(m.group(1))[0]
    if (m := _KEY_LINE.search(script)) is not None:
        out["SPOTTUNE_CHECKPOINT_KEY"] = m.group(1)
    return out


def launch_request(*, instance_type: str, availability_zone: str, max_price_usd_per_hour: float, ami: str,
                   instance_profile: str, tags: Mapping[str, str], user_data_script: str,
                   subnet_id: str | None = None, security_groups: Sequence[str] = ()) -> dict[str, Any]:
    """The keyword arguments of ``ec2.run_instances`` for one spot instance (see the module docstring).

    Parameters
    ----------
    instance_type, availability_zone : str
        The market.
    max_price_usd_per_hour : float
        The spot request's max price, USD per instance-hour (sent with 5 decimals).
    ami : str
        The host image (Docker installed).
    instance_profile : str
        The IAM instance profile's name.
    tags : mapping of str to str
        Tags of the instance and its volumes.
    user_data_script : str
        :func:`user_data`'s script.
    subnet_id : str, optional
        The subnet; None: the zone's default.
    security_groups : sequence of str, default ()
        Security group ids.

    Returns
    -------
    dict
        One-time spot instance, terminated on interruption and on shutdown; IMDSv2 tokens required.
    """
    tag_list = [{"Key": k, "Value": str(v)} for k, v in tags.items()]
    req: dict[str, Any] = {
        "ImageId": ami,
        "InstanceType": instance_type,
        "MinCount": 1,
        "MaxCount": 1,
        "InstanceMarketOptions": {"MarketType": "spot", "SpotOptions": {
            "MaxPrice": f"{max_price_usd_per_hour:.5f}", "SpotInstanceType": "one-time",
            "InstanceInterruptionBehavior": "terminate"}},
        "Placement": {"AvailabilityZone": availability_zone},
        "MetadataOptions": {"HttpTokens": "required", "HttpPutResponseHopLimit": 2, "HttpEndpoint": "enabled"},
        "InstanceInitiatedShutdownBehavior": "terminate",
        "IamInstanceProfile": ({"Arn": instance_profile} if instance_profile.startswith("arn:")
                               else {"Name": instance_profile}),
        "UserData": user_data_script,
        "TagSpecifications": [{"ResourceType": "instance", "Tags": tag_list},
                              {"ResourceType": "volume", "Tags": tag_list}],
    }
    if subnet_id:
        req["SubnetId"] = subnet_id
    if security_groups:
        req["SecurityGroupIds"] = list(security_groups)
    return req


def launch(ec2: Any, request: Mapping[str, Any]) -> str:
    """Call ``run_instances``; returns the instance id.

    Parameters
    ----------
    ec2 : botocore client
        An EC2 client.
    request : mapping
        :func:`launch_request`'s keyword arguments.

    Returns
    -------
    str
        The instance id.

    Raises
    ------
    LaunchRefused
        With the AWS error code, if EC2 refused (after botocore's retries for throttling).
    """
    from botocore.exceptions import ClientError

    try:
        out = ec2.run_instances(**request)
    except ClientError as exc:
        err = exc.response.get("Error", {})
        raise LaunchRefused(str(err.get("Code", "ClientError")), str(err.get("Message", ""))) from None
    return str(out["Instances"][0]["InstanceId"])
