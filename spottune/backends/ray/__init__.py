"""The ``ray`` backend: every trial segment is a Ray actor on a spot node of an existing Ray cluster.

:class:`RayBackend` (the driver), :class:`RaySettings`, the segment actor (:class:`SegmentActor`, the local
backend's worker loop in an actor) and the cluster readers (:func:`cluster_markets`, :func:`offered_markets`,
:func:`market_resource`). Needs the extra ``spottune[ray]``; Ray is imported only when a backend is built
or the cluster is read, so ``import spottune.backends.ray`` works without it. Guide: docs/guide/ray.md.
Names are imported on first use (PEP 562).
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "RayBackend": "_backend", "NODE_LOST": "_backend", "PREEMPTED": "_backend", "RaySettings": "_settings",
    "SegmentActor": "_actor", "segment_actor": "_actor",
    "MISSING_RAY": "_cluster", "OfferedMarket": "_cluster", "cluster_markets": "_cluster",
    "configured_markets": "_cluster", "connect": "_cluster", "draining_nodes": "_cluster", "import_ray": "_cluster",
    "market_resource": "_cluster", "node_markets": "_cluster", "offered_markets": "_cluster", "placement": "_cluster",
    "pool_markets": "_build", "ray_backend": "_build", "settings_from_spec": "_build",
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
