"""The ``aws`` backend: every trial segment on an EC2 spot instance, launched with boto3.

:class:`AwsBackend` (the driver), :class:`AwsSettings`, the agent that runs on each instance
(``python -m spottune.backends.aws.agent``), instance discovery by tag (:func:`find_instances`, reusable by
a reconcile step) and :func:`cleanup` (``spottune cleanup EXPERIMENT``), and AWS's capacity signals
(:func:`placement_scores`). Guide: docs/guide/aws.md.
Names are imported on first use (the agent on an instance needs none of the driver's imports).
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "AwsBackend": "_backend", "AwsClients": "_backend", "AwsSettings": "_settings",
    "TaggedInstance": "_discovery", "cleanup": "_discovery", "ended_by": "_discovery", "find_instances": "_discovery",
    "LaunchRefused": "_launch", "launch_request": "_launch", "parse_user_data": "_launch", "user_data": "_launch",
    "CapExceeded": "_safety", "Plan": "_safety", "check_caps": "_safety", "plan": "_safety",
    "placement_scores": "_signals", "read_placement_scores": "_signals",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
