"""What the Ray backend reads from the cluster: Ray itself (imported lazily), its markets and its nodes.

**Markets are node types** (docs/design/decisions.md RY1). A node offers the spot market ``<instance type>/<zone>``
when it has

- the custom resource ``market:<instance type>/<zone>`` (e.g. ``market:m5.large/us-east-1a``; its
  quantity is the number of trial segments the node takes at once), placement by that resource; or
- the labels ``ray.io/market-type: spot``, ``ray.io/availability-zone: <zone>`` and
  ``ray.io/instance-type: <instance type>``, placement by ``label_selector``.

:func:`offered_markets` reads them from ``ray.nodes()``; :func:`placement` turns a market into the actor
options that pin a segment to such a node. Draining nodes and their deadlines come from the GCS
(:func:`draining_nodes`, Ray's ``get_draining_nodes``: the only place a drain shows before the node dies;
``ray.nodes()`` does not show it).
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from spottune.errors import BackendError

__all__ = ["LABEL_INSTANCE_TYPE", "LABEL_MARKET_TYPE", "LABEL_ZONE", "RESOURCE_PREFIX", "MISSING_RAY",
           "OfferedMarket", "cluster_markets", "connect", "configured_markets", "draining_nodes", "import_ray", "market_resource", "node_markets", "offered_markets", "placement"]

#: Custom resource name prefix of a market: ``market:<instance type>/<zone>``.
RESOURCE_PREFIX = "market:"
#: Ray's default node label keys for the capacity type and the zone, and the instance type's.
LABEL_MARKET_TYPE = "ray.io/market-type"
LABEL_ZONE = "ray.io/availability-zone"
LABEL_INSTANCE_TYPE = "ray.io/instance-type"
#: The one line a missing Ray gives (the CLI exits 2 with it).
MISSING_RAY = "backend ray needs Ray: pip install 'spottune[ray]'"


def import_ray() -> Any:
    """The ``ray`` module.

    Returns
    -------
    module
        ``ray``.

    Raises
    ------
    BackendError
        :data:`MISSING_RAY` if Ray is not installed.
    """
    try:
        import ray
    except ImportError:
        raise BackendError(MISSING_RAY) from None
    return ray


def connect(address: str = "auto", *, log_to_driver: bool = False) -> Any:
    """Connect this process to the Ray cluster at ``address`` (unless it already is); returns ``ray``.

    Parameters
    ----------
    address : str, default "auto"
        As :func:`ray.init`'s (``auto``: the local cluster, else ``ray://host:port`` or ``host:port``).
    log_to_driver : bool, default False
        Forward the workers' output to this process.

    Returns
    -------
    module
        ``ray``, connected.

    Raises
    ------
    BackendError
        :data:`MISSING_RAY`, or one line naming the address if the cluster cannot be reached (a ``host:port`` or
        ``ray://host:port`` that accepts no TCP connection within :data:`CONNECT_TIMEOUT_S` fails at once: Ray's own
        client retries a dead address for minutes).
    """
    ray = import_ray()
    if not ray.is_initialized():
        _check_reachable(address)
        try:
            ray.init(address=address, log_to_driver=log_to_driver, include_dashboard=False, configure_logging=False)
        except Exception as exc:  # noqa: BLE001 - ConnectionError, RuntimeError, ValueError: one line
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise BackendError(f"ray backend: cannot connect to the Ray cluster at {address!r}: "
                               f"{type(exc).__name__}: {first}") from None
    return ray


#: Seconds :func:`connect` waits for a TCP connection to a ``host:port`` address before it gives up.
CONNECT_TIMEOUT_S = 5.0


def _check_reachable(address: str) -> None:
    """Raise :class:`BackendError` (one line) if ``address`` names a ``host:port`` (optionally ``ray://``) that accepts
    no TCP connection within :data:`CONNECT_TIMEOUT_S`; other addresses (``auto``, ``local``) are left to Ray."""
    hostport = address.removeprefix("ray://")
    host, sep, port = hostport.rpartition(":")
    if not sep or not host or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise BackendError(f"ray backend: cannot connect to the Ray cluster at {address!r}: nothing answers at "
                           f"{hostport} ({type(exc).__name__}: {exc.strerror or exc})") from None


def market_resource(instance_type: str, availability_zone: str) -> str:
    """The custom resource of a market: ``market:<instance type>/<zone>``.

    Parameters
    ----------
    instance_type : str
        E.g. ``m5.large``.
    availability_zone : str
        E.g. ``us-east-1a``.

    Returns
    -------
    str
        The resource name.
    """
    return f"{RESOURCE_PREFIX}{instance_type}/{availability_zone}"


@dataclass(frozen=True, slots=True)
class OfferedMarket:
    """A spot market the cluster offers: ``(instance_type, availability_zone)`` and how it is offered.

    ``by`` is ``resource`` (a node has the custom resource :func:`market_resource`) or ``labels`` (a node
    has the three labels); ``nodes`` is the number of live nodes offering it.

    Parameters
    ----------
    instance_type : str
        E.g. ``m5.large``.
    availability_zone : str
        E.g. ``us-east-1a``.
    by : {"resource", "labels"}
        How its nodes offer it.
    nodes : int
        Live nodes offering it.
    """

    instance_type: str
    availability_zone: str
    by: str
    nodes: int

    @property
    def key(self) -> str:
        """``<instance type>/<zone>``, the key of :attr:`RaySettings.prices`."""
        return f"{self.instance_type}/{self.availability_zone}"


def node_markets(node: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(instance type, zone, by) of every market one ``ray.nodes()`` entry offers.

    Parameters
    ----------
    node : mapping
        One entry of ``ray.nodes()`` (its ``Resources`` and ``Labels``).

    Returns
    -------
    list of tuple of (str, str, str)
        ``by`` is ``resource`` or ``labels``; a market offered both ways is listed once, by resource.
    """
    out = []
    for name in node.get("Resources", {}) or {}:
        if name.startswith(RESOURCE_PREFIX) and "/" in name:
            itype, _, zone = name[len(RESOURCE_PREFIX):].partition("/")
            if itype and zone:
                out.append((itype, zone, "resource"))
    labels = node.get("Labels", {}) or {}
    if str(labels.get(LABEL_MARKET_TYPE, "")).lower() == "spot" and labels.get(LABEL_ZONE) \
            and labels.get(LABEL_INSTANCE_TYPE):
        key = (str(labels[LABEL_INSTANCE_TYPE]), str(labels[LABEL_ZONE]))
        if key not in {(t, z) for t, z, _ in out}:
            out.append((*key, "labels"))
    return out


def offered_markets(nodes: Iterable[Mapping[str, Any]]) -> list[OfferedMarket]:
    """The spot markets the live nodes of ``nodes`` (``ray.nodes()``) offer, sorted by (type, zone).

    A market offered both ways is placed by its resource.

    Parameters
    ----------
    nodes : iterable of mapping
        ``ray.nodes()``; dead nodes are skipped.

    Returns
    -------
    list of OfferedMarket
        Sorted by (instance type, zone). ``nodes`` counts the live nodes offering each.
    """
    found: dict[tuple[str, str], list[str]] = {}
    for node in nodes:
        if not node.get("Alive", False):
            continue
        for itype, zone, by in node_markets(node):
            found.setdefault((itype, zone), []).append(by)
    return [OfferedMarket(t, z, "resource" if "resource" in bys else "labels", len(bys))
            for (t, z), bys in sorted(found.items())]


def placement(market: OfferedMarket) -> dict[str, Any]:
    """Actor options that pin a segment to a node of ``market``.

    Parameters
    ----------
    market : OfferedMarket
        A market the cluster offers.

    Returns
    -------
    dict
        ``resources`` (one unit of the market's resource) or ``label_selector`` (the three labels).
    """
    if market.by == "resource":
        return {"resources": {market_resource(market.instance_type, market.availability_zone): 1}}
    return {"label_selector": {LABEL_MARKET_TYPE: "spot", LABEL_ZONE: market.availability_zone,
                               LABEL_INSTANCE_TYPE: market.instance_type}}


def configured_markets(config: Any) -> list[OfferedMarket]:
    """The markets of the autoscaler's node types (``autoscaler_pb2.ClusterConfig``; None: no autoscaler).

    A node type (``node_group_configs``) whose resources name a market and whose ``max_count`` is not 0
    offers it even while none of its nodes runs (the autoscaler starts one when a segment asks for it).

    Parameters
    ----------
    config : autoscaler_pb2.ClusterConfig or None
        The autoscaler's configuration from the GCS.

    Returns
    -------
    list of OfferedMarket
        Sorted by (instance type, zone). ``nodes`` is 0.
    """
    if config is None:
        return []
    found = {}
    for group in config.node_group_configs:
        if group.max_count == 0:
            continue
        for name in group.resources:
            if name.startswith(RESOURCE_PREFIX) and "/" in name:
                itype, _, zone = name[len(RESOURCE_PREFIX):].partition("/")
                if itype and zone:
                    found[(itype, zone)] = OfferedMarket(itype, zone, "resource", 0)
    return [found[k] for k in sorted(found)]


def autoscaler_markets() -> list[OfferedMarket]:
    """The markets the connected cluster's autoscaler node types offer (:func:`configured_markets` of the GCS's
    cluster config; empty without an autoscaler).

    Returns
    -------
    list of OfferedMarket
        Sorted by (instance type, zone); ``nodes`` is 0.
    """
    from ray._private import state

    try:
        config = state.state.get_cluster_config()
    except Exception:  # noqa: BLE001 - no autoscaler state in this cluster
        config = None
    return configured_markets(config)


def cluster_markets() -> list[OfferedMarket]:
    """Every market the connected cluster offers: its live nodes' (:func:`offered_markets`) and its
    autoscaler's node types' (:func:`configured_markets`, from the GCS), sorted by (type, zone).

    A market offered by resource anywhere is placed by its resource.

    Returns
    -------
    list of OfferedMarket
        Sorted by (instance type, zone).
    """
    import ray
    from ray._private import state

    live = {(m.instance_type, m.availability_zone): m for m in offered_markets(ray.nodes())}
    for m in autoscaler_markets():
        key = (m.instance_type, m.availability_zone)
        if key not in live or live[key].by != "resource":
            live[key] = OfferedMarket(m.instance_type, m.availability_zone, "resource", live[key].nodes if key in live else 0)
    return [live[k] for k in sorted(live)]


def draining_nodes() -> dict[str, int]:
    """Node id (hex) -> drain deadline (ms since the epoch; 0: none) of every node being drained.

    Ray's ``ray._private.state.state.get_draining_nodes`` (a GCS call; private API of Ray 2.60, the
    one this project pins).

    Returns
    -------
    dict of str to int
        Empty when no node is draining.
    """
    from ray._private import state

    return dict(state.state.get_draining_nodes())
