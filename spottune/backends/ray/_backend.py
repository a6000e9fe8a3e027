"""The Ray backend: every trial segment is a Ray actor on a node of its spot market, in an existing cluster.

spottune never launches a node here: the cluster's autoscaler does (docs/guide/ray.md). The driver contract is
:mod:`spottune.backends._base`'s; the instance lifecycle table, the report handlers (``ready``, ``metric``,
``checkpoint``, ``failed``), the deferral of notices before ``ready`` and the single-threaded queue loop are
the local backend's (:class:`spottune.backends.local.LocalBackend`, subclassed as the aws backend does);
only the effects differ (docs/design/decisions.md R1-R8):

- **Markets are node types** (:mod:`._cluster`): the markets the cluster offers (custom resource
  ``market:<type>/<zone>`` or the labels ``ray.io/market-type``, ``ray.io/availability-zone``,
  ``ray.io/instance-type``) are the chooser's pool; a ``Launch`` for a market the cluster does not offer
  is answered ``LaunchFailed``.
- **Launch** = a :class:`~._actor.SegmentActor` (``max_restarts=0``, ``max_concurrency=2``) pinned to a
  node of the chosen market by its resource or a ``label_selector``; billing starts at the ``Launch``
  (the autoscaler starts a node if none is free), ``TrialLaunched`` at the worker's ``ready``.
- **Reports** stream from the actor's generator method (one reader thread per segment); **commands**
  (``Checkpoint``) go to its second concurrency slot; ``Terminate`` is ``ray.kill``.
- **Ends**: a watcher thread polls the GCS every ``watch_s`` for draining nodes (deadline) and dead
  nodes. A drain becomes ``RevocationNotice`` (deadline = the drain's) for every segment on the node; the
  node's death (or an ``ActorDiedError`` with ``preempted``, or "its node has died") ends them as
  ``provider``; any other actor death is ``SegmentFailed``.
- **Billing**: one ledger row per segment at the market's price (the replayed history, or
  :attr:`RaySettings.prices`); node time per market is in ``meta["nodes"]``. Every USD figure is an
  estimate (``meta["billing"]``).
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spotmarket import HOUR_S, Cause
from spottune.backends._base import Progress, RunRecord
from spottune.backends._replay import ReplayDriver
from spottune.speed import seconds_per_step
from spottune.backends.local._backend import LocalBackend, Phase, _Instance
from spottune.backends.local._clock import ScaledClock
from spottune.backends.local._messages import CheckpointCommand, Exited, decode_report, encode
from spottune.backends.local._pool import segment_argv
from spottune.backends.ray._cluster import (OfferedMarket, cluster_markets, connect, draining_nodes, import_ray, node_markets,
                                            placement)
from spottune.backends.ray._settings import RaySettings
from spottune.checkpoint._secrets import CHECKPOINT_KEY_ENV, split_secrets, worker_env
from spottune.errors import BackendError
from spottune.orchestrator import EndReason, Launch, LaunchFailed, Orchestrator, Terminate

__all__ = ["NODE_LOST", "PREEMPTED", "RayBackend"]

#: Ledger reason of a segment whose node was drained for preemption, then ended: a capacity interruption
#: (``spotmarket.Cause.CAPACITY``, so an online revocation predictor learns from it).
PREEMPTED = str(Cause.CAPACITY)
#: Ledger reason of a segment whose node was lost without a drain (no notice; the steps since the last
#: checkpoint are lost).
NODE_LOST = "node-lost"

log = logging.getLogger(__name__)
_MIN_WALL_S = 0.05
_ACTIVE = (Phase.BOOTING, Phase.RUNNING, Phase.CHECKPOINTING)


@dataclass(slots=True, kw_only=True)
class _RayInstance(_Instance):
    actor: Any = None
    node_id: str = ""
    notified: bool = False  # RevocationNotice sent (or deferred)
    killed: bool = False  # ray.kill sent
    key: str = ""  # "<type>/<zone>"


@dataclass(slots=True)
class _Node:
    node_id: str
    markets: list[str]
    up_s: float
    end_s: float | None = None
    drain_deadline_s: float | None = None
    death: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class RayBackend(LocalBackend):
    """Run every trial segment as a Ray actor on a node of its market (see the module docstring).

    Parameters
    ----------
    orchestrator : Orchestrator
    history : spotmarket.prices.PriceHistory
        Prices (USD per instance-hour) of the markets; billed unless :attr:`RaySettings.prices` names one.
    billing : spotmarket.Billing
    workload : str
        Built-in workload name or ``"module:Class"`` importable on every node of the cluster.
    trials : mapping trial_id -> (config, seed)
    instance_facts : callable instance_type -> (vcpus, ecu or None)
    start_s : float
        Engine time at the start, seconds since the epoch (UTC).
    settings : RaySettings
    markets : sequence of OfferedMarket, optional
        The markets the cluster offers (default: read from the cluster when :meth:`run` connects).
    progress : callable, optional

    Raises
    ------
    BackendError
        If a trial has no configuration, the store is ``memory://``, or Ray is not installed (one line:
        ``pip install 'spottune[ray]'``).
    """

    name = "ray"

    def __init__(self, orchestrator: Orchestrator, history: Any, billing: Any, workload: str,
                 trials: Mapping[str, tuple[Mapping[str, Any], int]],
                 instance_facts: Callable[[str], tuple[int, float | None]], start_s: float, settings: RaySettings,
                 *, markets: Sequence[OfferedMarket] | None = None, progress: Progress | None = None):
        from spottune.workloads import get_workload

        missing = set(orchestrator.trials) - set(trials)
        if missing:
            raise BackendError(f"ray backend: no configuration for trials {sorted(missing)}")
        if settings.store_url.startswith("memory://"):
            raise BackendError("ray backend: the segments run in other processes: use a folder or s3:// store")
        self._ray = import_ray()
        ReplayDriver.__init__(self, orchestrator, history, None, billing, instance_facts, start_s, progress)
        self.clock = ScaledClock(start_s, settings.time_scale)
        self.workload = workload
        self.trials = {t: (dict(c), int(s)) for t, (c, s) in trials.items()}
        self.start_s = float(start_s)
        self.settings = settings
        #: The experiment's checkpoint key (hex), handed to every segment actor.
        self.checkpoint_key = settings.checkpoint_key or worker_env({})[1][CHECKPOINT_KEY_ENV]
        self.ref_sps = float(settings.reference_seconds_per_step or get_workload(workload).reference_seconds_per_step)
        self._q: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self._resumed = None
        self.markets: dict[str, OfferedMarket] = {m.key: m for m in markets or ()}
        self._markets_given = markets is not None
        self._nodes: dict[str, _Node] = {}
        self._on_node: dict[str, set[str]] = {}
        self._seen: set[tuple[str, str]] = set()  # what the watcher reported: ("up"|"drain"|"dead", node id)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.record.meta.update(time_scale=settings.time_scale, store=settings.store_url,
                                reference_seconds_per_step=self.ref_sps, ray_address=settings.address,
                                imds_url=settings.imds_url, watch_s=settings.watch_s,
                                billing="estimate", price_table=sorted(settings.prices))

    def resume(self, records: list[dict[str, Any]]) -> None:
        """Not supported: a killed ray run cannot be continued (its actors died with their driver's job).

        Raises
        ------
        BackendError
            Always ("the ray backend cannot resume a run"; docs/guide/ray.md, what is left out).
        """
        raise BackendError("the ray backend cannot resume a run (docs/guide/ray.md)")

    # -- the run --------------------------------------------------------------------------------------
    def discover_markets(self) -> list[OfferedMarket]:
        """Connect to the cluster (unless this process already is) and read the markets it offers.

        Raises
        ------
        BackendError
            If the cluster cannot be reached, or it offers no market.
        """
        connect(self.settings.address, log_to_driver=self.settings.log_to_driver)
        if not self._markets_given:
            self.markets = {m.key: m for m in cluster_markets()}
        if not self.markets:
            raise BackendError("ray backend: the Ray cluster offers no spot market (a node resource "
                               "'market:<instance type>/<zone>' or the labels ray.io/market-type: spot, "
                               "ray.io/availability-zone, ray.io/instance-type; docs/guide/ray.md)")
        self.record.meta["markets_offered"] = {k: m.by for k, m in sorted(self.markets.items())}
        return list(self.markets.values())

    def run(self) -> RunRecord:
        """Drive the orchestrator to the end on the Ray cluster (see the module docstring).

        Raises
        ------
        BackendError
            If the cluster cannot be reached or offers no market, the price history ends first, or the run
            takes longer than ``max_wall_s``. Every actor of the run is killed on the way out.
        """
        s = self.settings
        self.discover_markets()
        try:
            self.clock.start()
            self._look()  # the nodes at the start
            th = threading.Thread(target=self._watch, daemon=True, name="ray-watch")
            th.start()
            self._threads.append(th)
            give_up = time.monotonic() + s.max_wall_s
            self._start()
            self._serve(give_up, float(self.history.end_s) if self.history is not None else None)
            self._close_leftovers(self.now_s())
        finally:
            self._stop.set()
            for th in self._threads:
                th.join(timeout=10)
            self.clock.stop()
            for inst in self._instances.values():
                self._kill_actor(inst)
        self._bill_nodes()
        self.record.meta["worker"] = {iid: inst.stats for iid, inst in self._instances.items()}
        return self.record

    def _handle(self, item: tuple[Any, ...]) -> None:
        kind, *args = item
        handler = {"placed": self._on_placed, "died": self._on_died, "lost": self._on_lost, "drain": self._on_drain,
                   "node_up": self._on_node_up, "node_dead": self._on_node_dead}.get(kind)
        if handler is None:
            super()._handle(item)
        else:
            handler(*args)

    # -- watching the cluster (a thread: it only enqueues) ------------------------------------------------
    def _watch(self) -> None:
        wait = max(_MIN_WALL_S, self.settings.wall(self.settings.watch_s))
        while not self._stop.wait(wait):
            try:
                self._look()
            except Exception as exc:  # noqa: BLE001 - a GCS hiccup: log, look again next time
                log.warning("ray backend: watching the cluster failed: %s: %s", type(exc).__name__, exc)

    def _look(self) -> None:
        """One look at the GCS: new nodes, new draining nodes, dead nodes (each reported once, in that order)."""
        seen = self._seen
        for node in self._ray.nodes():
            nid = node["NodeID"]
            if node.get("Alive", False):
                if ("up", nid) not in seen:
                    seen.add(("up", nid))
                    self._q.put(("node_up", nid, node_markets(node)))
            elif ("dead", nid) not in seen:
                seen.add(("dead", nid))
                self._q.put(("node_dead", nid, f"{node.get('DeathReason', '')} {node.get('DeathReasonMessage', '')}"))
        drains = draining_nodes()
        seen_wall = time.time()
        for nid, deadline_ms in drains.items():
            if ("drain", nid) not in seen:
                seen.add(("drain", nid))
                self._q.put(("drain", nid, int(deadline_ms), seen_wall))

    def _on_node_up(self, nid: str, markets: list[tuple[str, str, str]]) -> None:
        if nid not in self._nodes:
            self._nodes[nid] = _Node(nid, [f"{t}/{z}" for t, z, _ in markets], self.now_s())
            for itype, zone, by in markets:  # a node of a market not offered at the start: offered from now on
                self.markets.setdefault(f"{itype}/{zone}", OfferedMarket(itype, zone, by, 1))

    def _on_drain(self, nid: str, deadline_ms: int, seen_wall: float) -> None:
        node = self._nodes.get(nid)
        if node is None or node.drain_deadline_s is not None or node.end_s is not None:
            return
        now = self.now_s()
        s = self.settings
        left_wall = deadline_ms / 1000.0 - time.time() if deadline_ms > 0 else s.wall(s.notice_s)
        node.drain_deadline_s = now + max(0.0, left_wall) * s.time_scale
        node.extra.update(drain_seen_s=now, drain_seen_wall=seen_wall, deadline_ms=deadline_ms)
        for iid in sorted(self._on_node.get(nid, ())):
            self._notice(self._instances[iid], node)

    def _notice(self, inst: _RayInstance, node: _Node) -> None:
        """The node of ``inst`` is being drained: ``RevocationNotice`` with the drain's deadline."""
        if inst.notified or not inst.alive or inst.gone:
            return
        now = self.now_s()
        inst.notified = True
        inst.notice_s, inst.termination_s = now, max(now, float(node.drain_deadline_s))
        inst.reason = PREEMPTED
        inst.stats.update(notice_s=now, drain_seen_wall=node.extra.get("drain_seen_wall"))
        self._send_or_defer(inst, inst.revocation_notice(now))

    def _on_seen(self, inst: _RayInstance, report: Any) -> None:
        """The segment saw the spot notice on its node's IMDS (``ray.imds_url``; it checkpoints on its own):
        ``RevocationNotice`` with IMDS's deadline, as on the aws backend (a real cluster's autoscaler may not
        drain a node the cloud reclaims)."""
        self._notice_from_worker(inst, report)
        if inst.notified and not inst.reason:
            inst.reason = PREEMPTED

    def _on_node_dead(self, nid: str, why: str) -> None:
        node = self._nodes.get(nid)
        if node is None or node.end_s is not None:
            return
        node.end_s, node.death = self.now_s(), why.strip()
        for iid in sorted(self._on_node.get(nid, ())):
            inst = self._instances[iid]
            self._provider_end(inst, inst.reason or (PREEMPTED if node.drain_deadline_s is not None else NODE_LOST))

    # -- effects --------------------------------------------------------------------------------------
    def _launch(self, action: Launch) -> None:
        s, t = self.settings, self.now_s()
        m = action.market
        key = f"{m.instance_type}/{m.availability_zone}"
        offered = self.markets.get(key)
        if offered is None:
            error = f"the Ray cluster offers no node of market {key}"
            if self.journal is not None:
                self.journal.outcome("launch", action.trial_id, instance_id="", fulfilled=False, time_s=t, error=error)
            self._post(LaunchFailed(time_s=t, trial_id=action.trial_id, error=error))
            return
        iid = self._next_instance_id()
        vcpus, ecu = self.instance_facts(m.instance_type)
        sps = seconds_per_step(self.ref_sps, vcpus, ecu)
        config, seed = self.trials[action.trial_id]
        public, _ = split_secrets(dict(s.storage_options))  # credentials never leave this process
        argv = ["--workload", self.workload, "--store", s.store_url,
                *segment_argv(trial_id=action.trial_id, instance_id=iid, config=config, seed=seed,
                              resume_step=action.resume_step, until_step=action.target_steps,
                              step_wall_s=sps / s.time_scale if s.pace_steps else 0.0, imds_url=s.imds_url,
                              poll_wall_s=max(_MIN_WALL_S, s.wall(s.poll_s)), max_steps=s.max_steps,
                              keep=s.checkpoint_keep)]
        from spottune.backends.ray._actor import segment_actor

        actor = segment_actor().options(num_cpus=s.num_cpus, **placement(offered)).remote()
        # storage options and the key are method arguments (Ray's object store), never a command line
        stream = actor.run.options(num_returns="streaming").remote(argv, public, self.checkpoint_key)
        if self.journal is not None:
            self.journal.outcome("launch", action.trial_id, instance_id=iid, fulfilled=True, time_s=float(t),
                                 notice_s=math.inf, termination_s=math.inf, cause="")
        inst = _RayInstance(instance_id=iid, trial_id=action.trial_id, market=m, max_price=action.max_price_usd_per_hour,
                            started_s=t, notice_s=math.inf, termination_s=math.inf, seconds_per_step=sps, vcpus=vcpus,
                            step=action.resume_step, saved_step=action.resume_step, resume_step=action.resume_step,
                            actor=actor, key=key)
        inst.stats.update(trial=action.trial_id, market=key, launch_wall_s=self.clock.wall_s())
        self._instances[iid] = inst
        reader = threading.Thread(target=self._read, args=(inst, stream), daemon=True, name=f"ray-{iid}")
        reader.start()
        self._timer(t + HOUR_S, "hour", inst)

    def _read(self, inst: _RayInstance, stream: Any) -> None:
        """Reader thread of one segment: the node id, every report, then the end (or the actor's death)."""
        ray = self._ray
        code, first = 0, True
        try:
            for ref in stream:
                item = ray.get(ref)
                if first:
                    first = False
                    self._q.put(("placed", inst, str(item)))
                    continue
                try:
                    report = decode_report(item)
                except ValueError:
                    continue
                if isinstance(report, Exited):
                    code = int(report.code)
                self._q.put(("line", inst, report))
        except Exception as exc:  # noqa: BLE001 - RayActorError and its kin: the handler sorts them out
            self._q.put(("died", inst, exc))
            return
        self._q.put(("eof", inst, code))

    def _on_placed(self, inst: _RayInstance, nid: str) -> None:
        inst.node_id = nid
        inst.stats.update(node=nid, placed_wall_s=self.clock.wall_s())
        self._on_node.setdefault(nid, set()).add(inst.instance_id)
        node = self._nodes.get(nid)
        if node is None:
            self._nodes[nid] = node = _Node(nid, [inst.key], self.now_s())
        if node.end_s is not None:
            self._provider_end(inst, NODE_LOST)
        elif node.drain_deadline_s is not None:
            self._notice(inst, node)

    def _on_died(self, inst: _RayInstance, exc: BaseException) -> None:
        """The actor of ``inst`` died or became unreachable: a provider end if its node went, else a failure."""
        msg = " ".join(str(exc).split())[:500]
        inst.stats.setdefault("died", f"{type(exc).__name__}: {msg}")
        if not inst.alive or inst.gone or inst.killed:
            return  # already ended (its node's death came first, or our ray.kill)
        node = self._nodes.get(inst.node_id)
        if (getattr(exc, "preempted", False) or "node has died" in msg
                or (node is not None and (node.end_s is not None or node.drain_deadline_s is not None))):
            self._provider_end(inst, PREEMPTED if getattr(exc, "preempted", False) or inst.notified else NODE_LOST)
            return
        if type(exc).__name__ == "ActorUnavailableError":  # the node may be lost: its death decides, or the timeout
            s = self.settings
            self._at(self.now_s() + s.lost_after_s * s.time_scale, ("lost", inst, msg))
            return
        if inst.phase in _ACTIVE:
            self._failed(inst, f"actor died: {type(exc).__name__}: {msg}")

    def _on_lost(self, inst: _RayInstance, msg: str) -> None:
        if inst.alive and not inst.gone and inst.phase in _ACTIVE:
            self._failed(inst, f"actor unreachable for {self.settings.lost_after_s:g} s: {msg}")

    def _provider_end(self, inst: _RayInstance, reason: str) -> None:
        """The cloud took the node of ``inst``: it ends as ``provider`` (billed to the node's end)."""
        if not inst.alive or inst.gone:
            return
        inst.reason = reason
        inst.termination_s = min(inst.termination_s, self.now_s())
        inst.stats["provider_end"] = reason
        self._on_termination(inst)

    def _command(self, inst: _RayInstance, cmd: CheckpointCommand) -> None:
        """The command goes to the actor's second concurrency slot (its worker loop's stdin)."""
        if inst.actor is not None and not inst.killed:
            inst.actor.command.remote(encode(cmd))

    def _kill_actor(self, inst: _RayInstance) -> None:
        if inst.actor is not None and not inst.killed:
            inst.killed = True
            try:
                self._ray.kill(inst.actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already dead with its node
                pass

    def _kill(self, inst: _RayInstance) -> None:
        if inst.phase is Phase.RECYCLED:
            return
        inst.to("kill")
        self._kill_actor(inst)

    _release = _kill

    def _terminate(self, action: Terminate) -> None:
        inst = self._instances[action.instance_id]
        self._kill(inst)
        self._end(inst, self.now_s(), "user", str(action.reason))
        self._q.put(("ended", inst, EndReason.USER))

    def _on_ended(self, inst: _RayInstance, reason: EndReason) -> None:
        self._segment_gone(inst, reason)

    def _close_leftovers(self, end_s: float) -> None:
        """After ``ExperimentFinished``: a revoked and saved segment is billed to its node's deadline (the
        provider ends it), any other one to now (we end it); every actor is killed."""
        for inst in list(self._instances.values()):
            if inst.alive:
                self._kill(inst)
                if inst.notified:
                    self._end(inst, min(inst.termination_s, end_s), "provider", inst.reason)
                else:
                    self._end(inst, end_s, "user", "finished")
        self.record.meta["usd"] = self.usd

    # -- prices and node time ------------------------------------------------------------------------------
    def _series(self, market: Any) -> Any:
        """The prices of ``market``: the price table's constant one if it names it, else the history's."""
        key = f"{market.instance_type}/{market.availability_zone}"
        if key in self.settings.prices:
            from spotmarket.prices import PriceSeries

            return PriceSeries(market, [0.0], [float(self.settings.prices[key])], end_s=math.inf)
        if self.history is None or market not in self.history:
            raise BackendError(f"ray backend: no price for market {key}: give it in the price table (ray.prices)")
        return self.history[market]

    def _price_series(self, inst: Any, end_s: float) -> Any:
        return self._series(inst.market)

    def _bill_nodes(self) -> None:
        """``meta["nodes"]``: every market node seen during the run, its time in the run and what that node
        time costs at its market's prices (an estimate of the cluster's bill; spottune's segments are the ledger)."""
        end = self.record.end_s if self.record.end_s is not None else self.now_s()
        by_key = {f"{m.instance_type}/{m.availability_zone}": m for m in (self.history.markets if self.history else [])}
        rows, total = [], 0.0
        for node in self._nodes.values():
            if not node.markets:
                continue
            key = node.markets[0]
            lo, hi = max(node.up_s, self.start_s), min(node.end_s if node.end_s is not None else end, end)
            usd = None
            market = by_key.get(key)
            if market is None and key in self.settings.prices:
                from spotmarket.prices import Market

                itype, _, zone = key.partition("/")
                market = Market(zone, itype)
            if market is not None and hi > lo:
                usd = float(self._series(market).cost_usd(lo, hi))
                total += usd
            rows.append({"node_id": node.node_id, "market": key, "start_s": lo, "end_s": hi,
                         "seconds": max(0.0, hi - lo), "usd": usd, "drained": node.drain_deadline_s is not None,
                         "death": node.death})
        self.record.meta["nodes"] = rows
        self.record.meta["node_usd"] = total
