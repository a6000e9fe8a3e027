"""Instances of an experiment found by tag: who ended them, and ``spottune cleanup``.

Identity is the tags (moto answers HTTP 500 to the ``client-token`` and ``instance-lifecycle`` filters, and
tags are what survives an orchestrator restart): :func:`find_instances` lists every instance tagged
``spottune:experiment=<name>``; a reconcile step after a restart can use it as it is.
:func:`ended_by` reads the state reason: ``Server.SpotInstanceTermination`` is the provider, anything
else (our ``TerminateInstances``, the agent's own shutdown) is the user.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from spottune.backends.aws._launch import TAG_EXPERIMENT, TAG_LAUNCH, TAG_TRIAL

__all__ = ["ALIVE_STATES", "PROVIDER_CODE", "TaggedInstance", "cleanup", "ended_by", "find_instances"]

#: The state reason code of a spot interruption by EC2.
PROVIDER_CODE = "Server.SpotInstanceTermination"
#: States in which an instance may still bill.
ALIVE_STATES = ("pending", "running", "stopping", "stopped", "shutting-down")


@dataclass(frozen=True, slots=True)
class TaggedInstance:
    """One instance of an experiment as ``describe_instances`` shows it.

    ``launch_time_s``: seconds since the epoch (UTC); ``reason_code``: ``StateReason.Code`` or "".

    Parameters
    ----------
    instance_id : str
        EC2's id.
    experiment, trial_id, launch_id : str
        The instance's spottune tags ("" when missing).
    state : str
        EC2's state name (``pending``, ``running``, ``shutting-down``, ``terminated`` ...).
    reason_code : str
        See above.
    instance_type, availability_zone : str
        Its market.
    launch_time_s : float
        See above.
    """

    instance_id: str
    experiment: str
    trial_id: str
    launch_id: str
    state: str
    reason_code: str
    instance_type: str
    availability_zone: str
    launch_time_s: float

    @property
    def alive(self) -> bool:
        """Not terminated (it may still bill)."""
        return self.state in ALIVE_STATES


def ended_by(reason_code: str) -> str:
    """``provider`` for a spot interruption (``Server.SpotInstanceTermination``), else ``user``.

    Parameters
    ----------
    reason_code : str
        ``StateReason.Code`` of a terminated instance.

    Returns
    -------
    {"provider", "user"}
        Who ended it, as the ledger says (a provider end is refundable in the first hour).
    """
    return "provider" if reason_code.startswith(PROVIDER_CODE) else "user"


def find_instances(ec2: Any, experiment: str, *, states: Sequence[str] | None = None) -> list[TaggedInstance]:
    """Every instance tagged ``spottune:experiment=<experiment>`` (optionally only in ``states``), by id.

    Parameters
    ----------
    ec2 : botocore client
        An EC2 client of the experiment's region.
    experiment : str
        The experiment's name (the ``spottune:experiment`` tag).
    states : sequence of str, optional
        EC2 state names to keep; None: all.

    Returns
    -------
    list of TaggedInstance
        Sorted by instance id.
    """
    filters = [{"Name": f"tag:{TAG_EXPERIMENT}", "Values": [experiment]}]
    if states:
        filters.append({"Name": "instance-state-name", "Values": list(states)})
    out = []
    for page in ec2.get_paginator("describe_instances").paginate(Filters=filters):
        for res in page.get("Reservations", []):
            for i in res.get("Instances", []):
                tags = {t["Key"]: t["Value"] for t in i.get("Tags", [])}
                out.append(TaggedInstance(
                    instance_id=i["InstanceId"], experiment=tags.get(TAG_EXPERIMENT, ""),
                    trial_id=tags.get(TAG_TRIAL, ""), launch_id=tags.get(TAG_LAUNCH, ""),
                    state=i["State"]["Name"], reason_code=str((i.get("StateReason") or {}).get("Code", "")),
                    instance_type=i.get("InstanceType", ""),
                    availability_zone=(i.get("Placement") or {}).get("AvailabilityZone", ""),
                    launch_time_s=i["LaunchTime"].timestamp() if "LaunchTime" in i else float("nan")))
    return sorted(out, key=lambda x: x.instance_id)


def cleanup(ec2: Any, experiment: str) -> list[TaggedInstance]:
    """Terminate every live instance tagged with ``experiment``; returns those it terminated.

    Parameters
    ----------
    ec2 : botocore client
        An EC2 client of the experiment's region.
    experiment : str
        The experiment's name (the ``spottune:experiment`` tag).

    Returns
    -------
    list of TaggedInstance
        As they were before the call (empty: nothing to terminate).
    """
    live = find_instances(ec2, experiment, states=ALIVE_STATES)
    if live:
        ec2.terminate_instances(InstanceIds=[i.instance_id for i in live])
    return live
