"""The Ray-actor transport: each segment's worker is a Ray actor on a node of its spot market.

:class:`RayActorTransport` is the ray backend's :class:`~spottune.backends._transport.WorkerTransport`
(docs/design/decisions.md RY1-RY8):

- **launch**: a :class:`~._actor.SegmentActor` (``max_restarts=0``, ``max_concurrency=5``) pinned to a node of
  the chosen market by its resource or a ``label_selector`` (:mod:`._cluster`); a market the cluster does not
  offer is answered ``LaunchFailed``. Billing starts when the actor is placed on a node (the hourly tick
  stays at the launch + 1 hour); a launch not placed within ``place_s`` fails and costs nothing (RY7, RY12).
- **command**: the actor's second concurrency slot (its worker loop's stdin).
- **kill**: ``ray.kill``.
- **watch**: one reader thread per segment streams the actor's generator (the node id, then every report, then
  the end or the actor's death); a watcher thread polls the GCS every ``watch_s`` for new, draining and dead
  nodes. A drain becomes ``RevocationNotice`` (deadline = the drain's) for every segment on the node; the
  node's death (or an ``ActorDiedError`` with ``preempted``, or "its node has died") ends them as ``provider``;
  any other actor death is ``SegmentFailed``.
- **prices**: the price table's constant price for a market it names, else the replayed history; node time per
  market goes to ``meta["nodes"]`` (an estimate of the cluster's bill).
- **crash safety** (decision RY11): every actor is named (:func:`~._actor.actor_name`: the run's tag and the
  instance id, namespace ``spottune``) and detached, so it outlives a killed driver; a renewal thread renews
  each live actor's lease every quarter of it (with the number of report lines handled: the actor keeps the
  rest). An actor whose lease runs out saves a ``lease`` checkpoint and ends; :meth:`RayActorTransport.resume`
  finds the killed run's live actors by name and keeps each one still on its trial's segment (it re-attaches
  to its report stream: ``attach``); any other it has save at once (``release``), kills, and continues its
  trial from its worker's save.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from spotmarket import Cause
from spottune.speed import seconds_per_step
from spottune.backends._worker_driver import (LazyStore, Phase, WorkerDriver, WorkerInstance, journaled_report,
                                              orphan_save)
from spottune.backends.local._messages import CheckpointCommand, Exited, Notice, decode_report, encode
from spottune.backends.local._pool import segment_argv
from spottune.backends.ray._cluster import (OfferedMarket, autoscaler_markets, cluster_markets, connect,
                                            draining_nodes, import_ray, node_markets, placement)
from spottune.checkpoint._secrets import CHECKPOINT_KEY_ENV, split_secrets, worker_env
from spottune.errors import BackendError
from spottune.orchestrator import EndReason, Launch, LaunchFailed, RevocationNotice

__all__ = ["NODE_LOST", "PREEMPTED", "ActorInstance", "RayActorTransport"]

#: Ledger reason of a segment whose node was drained for preemption, then ended: a capacity interruption
#: (``spotmarket.Cause.CAPACITY``, so an online revocation predictor learns from it).
PREEMPTED = str(Cause.CAPACITY)
#: Ledger reason of a segment whose node was lost without a drain (no notice; the steps since the last
#: checkpoint are lost).
NODE_LOST = "node-lost"

log = logging.getLogger(__name__)
_MIN_WALL_S = 0.05
#: The wall lease of a segment actor is never shorter (a loaded driver must not lose its own actors).
MIN_LEASE_WALL_S = 10.0
#: The wall bound on a launch's wait for a node is never shorter (a Ray worker start takes 1-2.5 s here).
MIN_PLACE_WALL_S = 10.0
#: Ledger reason of a launch that got no node within ``place_s`` (or whose market's last node went).
UNPLACED = "unplaced"
#: Wall seconds a resume waits for each live actor of the killed run to finish its ``lease`` save.
RELEASE_WALL_S = 30.0
_ACTIVE = (Phase.BOOTING, Phase.RUNNING, Phase.CHECKPOINTING)


@dataclass(slots=True, kw_only=True)
class ActorInstance(WorkerInstance):
    """A :class:`WorkerInstance` whose worker is a Ray actor.

    Attributes
    ----------
    actor : ray.actor.ActorHandle
    node_id : str
        The node it was placed on ("" until the actor reports it).
    killed : bool
        ``ray.kill`` was sent.
    key : str
        Its market, ``"<instance type>/<zone>"``.
    acked : int
        The number of its actor's report lines handled (sent with each renewal: the actor forgets them).
    kept : bool
        A resumed driver kept it (its reports the journal holds are dropped by step).
    """

    actor: Any = None
    node_id: str = ""
    killed: bool = False
    key: str = ""
    acked: int = 0
    kept: bool = False


@dataclass(slots=True)
class _Node:
    node_id: str
    markets: list[str]
    up_s: float
    end_s: float | None = None
    drain_deadline_s: float | None = None
    death: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class RayActorTransport:
    """Segments as Ray actors on the nodes of their markets (see the module docstring).

    Parameters
    ----------
    settings : RaySettings
    workload : str
        Built-in workload name or ``"module:Class"`` importable on every node of the cluster.
    markets : sequence of OfferedMarket, optional
        The markets the cluster offers (default: read from the cluster when the run connects).

    Raises
    ------
    BackendError
        If Ray is not installed (one line: ``pip install 'spottune[ray]'``).
    """

    name = "ray"

    def __init__(self, settings: Any, workload: str, markets: Sequence[OfferedMarket] | None = None):
        self._ray = import_ray()
        self.settings = settings
        self.workload = workload
        #: The experiment's checkpoint key (hex), handed to every segment actor.
        self.checkpoint_key = settings.checkpoint_key or worker_env({})[1][CHECKPOINT_KEY_ENV]
        self.driver: WorkerDriver | None = None
        self.end_s: float | None = None
        self.markets: dict[str, OfferedMarket] = {m.key: m for m in markets or ()}
        self._markets_given = markets is not None
        self._nodes: dict[str, _Node] = {}
        self._on_node: dict[str, set[str]] = {}
        self._seen: set[tuple[str, str]] = set()  # what the watcher reported: ("up"|"drain"|"dead", node id)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._autoscaled: set[str] = set()  # markets the autoscaler's node types offer (they never leave the pool)
        self._saves: dict[str, Any] = {}  # instance id -> its worker's own save, taken over by a resume
        self._hours: set[str] = set()  # instances whose HourElapsed the resumed journal holds
        self._owner = 0  # this driver's token for its actors (a resumed driver's: take_over)
        self._store: Any = None

    @property
    def run_tag(self) -> str:
        """The run's tag in its actors' names: 16 hex digits of SHA-256 over the checkpoint key and the store
        (the same for a resume of the run, which keeps both; the key itself never leaves this process)."""
        return hashlib.sha256(f"{self.checkpoint_key}|{self.settings.store_url}".encode()).hexdigest()[:16]

    @property
    def lease_wall_s(self) -> float:
        """Wall seconds of an actor's lease: ``lease_s / time_scale``, at least :data:`MIN_LEASE_WALL_S`."""
        return max(MIN_LEASE_WALL_S, self.settings.wall(self.settings.lease_s))
    def bind(self, driver: WorkerDriver) -> None:
        """Keep the driver; the price history's end bounds the run.

        Parameters
        ----------
        driver : WorkerDriver
            The driver.
        """
        self.driver = driver
        self.end_s = float(driver.history.end_s) if driver.history is not None else None

    # -- the run --------------------------------------------------------------------------------------
    def discover_markets(self) -> list[OfferedMarket]:
        """Connect to the cluster (unless this process already is) and read the markets it offers.

        Returns
        -------
        list of OfferedMarket
            Sorted by (instance type, zone).

        Raises
        ------
        BackendError
            If the cluster cannot be reached, or it offers no market.
        """
        connect(self.settings.address, log_to_driver=self.settings.log_to_driver)
        if not self._markets_given:
            self.markets = {m.key: m for m in cluster_markets()}
            self._autoscaled = {m.key for m in autoscaler_markets()}
        if not self.markets:
            raise BackendError("ray backend: the Ray cluster offers no spot market (a node resource "
                               "'market:<instance type>/<zone>' or the labels ray.io/market-type: spot, "
                               "ray.io/availability-zone, ray.io/instance-type; docs/guide/ray.md)")
        self.driver.record.meta["markets_offered"] = {k: m.by for k, m in sorted(self.markets.items())}
        return list(self.markets.values())

    def open(self) -> None:
        self.discover_markets()

    def watch(self) -> None:
        self._look()  # the nodes at the start
        for target, name in ((self._watch, "ray-watch"), (self._renew, "ray-lease")):
            th = threading.Thread(target=target, daemon=True, name=name)
            th.start()
            self._threads.append(th)

    def stop(self) -> None:
        self._stop.set()
        for th in self._threads:
            th.join(timeout=10)

    def close(self) -> None:
        for inst in self.driver.instances.values():
            self._kill_actor(inst)

    def close_leftovers(self) -> None:
        """After ``ExperimentFinished``: a revoked and saved segment is billed to its node's deadline (the
        provider ends it), any other one to now (we end it); every actor is killed. Then the node time per
        market goes to ``meta["nodes"]``."""
        d = self.driver
        end_s = d.now_s()
        for inst in list(d.instances.values()):
            if inst.alive:
                d.kill(inst)
                if inst.notified:
                    d.end(inst, min(inst.termination_s, end_s), "provider", inst.reason)
                else:
                    d.end(inst, end_s, "user", "finished")
        d.record.meta["usd"] = d.usd
        self._bill_nodes()

    def handle(self, kind: str, args: list[Any]) -> bool:
        """A queue item of the actors or the cluster (``placed``, ``died``, ``lost``, ``drain``, ``node_up``,
        ``node_dead``).

        Parameters
        ----------
        kind : str
            The queue item's kind.
        args : list
            Its arguments.

        Returns
        -------
        bool
            False for a kind this transport does not enqueue.
        """
        handler = {"placed": self._on_placed, "died": self._on_died, "lost": self._on_lost, "drain": self._on_drain,
                   "node_up": self._on_node_up, "node_dead": self._on_node_dead,
                   "unplaced": self._on_unplaced, "ray_line": self._on_line}.get(kind)
        if handler is None:
            return False
        handler(*args)
        return True

    # -- watching the cluster (a thread: it only enqueues) ------------------------------------------------
    def _watch(self) -> None:
        wait = max(_MIN_WALL_S, self.settings.wall(self.settings.watch_s))
        while not self._stop.wait(wait):
            try:
                self._look()
            except Exception as exc:  # noqa: BLE001 - a GCS hiccup: log, look again next time
                log.warning("ray backend: watching the cluster failed: %s: %s", type(exc).__name__, exc)

    def _renew(self) -> None:
        """Renew the lease of every live actor, every quarter of it (fire and forget)."""
        while not self._stop.wait(self.lease_wall_s / 4):
            try:
                for inst in list(self.driver.instances.values()):
                    if inst.alive and inst.actor is not None and not inst.killed:
                        inst.actor.renew.remote(inst.acked)
            except Exception as exc:  # noqa: BLE001 - a dict resized meanwhile or a dead actor: next time
                log.debug("ray backend: lease renewal: %s: %s", type(exc).__name__, exc)

    def _look(self) -> None:
        """One look at the GCS: new nodes, new draining nodes, dead nodes (each reported once, in that order)."""
        seen, put = self._seen, self.driver.enqueue
        for node in self._ray.nodes():
            nid = node["NodeID"]
            if node.get("Alive", False):
                if ("up", nid) not in seen:
                    seen.add(("up", nid))
                    put(("node_up", nid, node_markets(node)))
            elif ("dead", nid) not in seen:
                seen.add(("dead", nid))
                put(("node_dead", nid, f"{node.get('DeathReason', '')} {node.get('DeathReasonMessage', '')}"))
        drains = draining_nodes()
        seen_wall = time.time()
        for nid, deadline_ms in drains.items():
            if ("drain", nid) not in seen:
                seen.add(("drain", nid))
                put(("drain", nid, int(deadline_ms), seen_wall))

    def _on_node_up(self, nid: str, markets: list[tuple[str, str, str]]) -> None:
        for itype, zone, _ in markets:
            key = f"{itype}/{zone}"
            if key not in self.markets and any(w["market"] == key for w in
                                               self.driver.record.meta.get("markets_withdrawn", ())):
                self.driver.record.meta.setdefault("markets_returned", []).append(
                    {"market": key, "time_s": self.driver.now_s()})
        if nid not in self._nodes:
            self._nodes[nid] = _Node(nid, [f"{t}/{z}" for t, z, _ in markets], self.driver.now_s())
            for itype, zone, by in markets:  # a node of a market not offered at the start: offered from now on
                self.markets.setdefault(f"{itype}/{zone}", OfferedMarket(itype, zone, by, 1))

    def _on_drain(self, nid: str, deadline_ms: int, seen_wall: float) -> None:
        node = self._nodes.get(nid)
        if node is None or node.drain_deadline_s is not None or node.end_s is not None:
            return
        now = self.driver.now_s()
        s = self.settings
        left_wall = deadline_ms / 1000.0 - time.time() if deadline_ms > 0 else s.wall(s.notice_s)
        node.drain_deadline_s = now + max(0.0, left_wall) * s.time_scale
        node.extra.update(drain_seen_s=now, drain_seen_wall=seen_wall, deadline_ms=deadline_ms)
        for iid in sorted(self._on_node.get(nid, ())):
            self._notice(self.driver.instances[iid], node)
        self._withdraw_unserved(node, "its last node is draining")

    def _notice(self, inst: ActorInstance, node: _Node) -> None:
        """The node of ``inst`` is being drained: ``RevocationNotice`` with the drain's deadline."""
        if inst.notified or not inst.alive or inst.gone:
            return
        now = self.driver.now_s()
        inst.notified = True
        inst.notice_s, inst.termination_s = now, max(now, float(node.drain_deadline_s))
        inst.reason = PREEMPTED
        inst.stats.update(notice_s=now, drain_seen_wall=node.extra.get("drain_seen_wall"))
        self.driver.send_or_defer(inst, inst.revocation_notice(now))

    def seen_notice(self, inst: ActorInstance, report: Notice) -> None:
        """The segment saw the spot notice on its node's IMDS (``ray.imds_url``; it checkpoints on its own):
        ``RevocationNotice`` with IMDS's deadline, as on the aws backend (a real cluster's autoscaler may not
        drain a node the cloud reclaims).

        Parameters
        ----------
        inst : ActorInstance
            The instance.
        report : Notice
            The worker's report (IMDS's action and time).
        """
        self.driver.notice_from_worker(inst, report)
        if inst.notified and not inst.reason:
            inst.reason = PREEMPTED

    def _on_node_dead(self, nid: str, why: str) -> None:
        node = self._nodes.get(nid)
        if node is None or node.end_s is not None:
            return
        node.end_s, node.death = self.driver.now_s(), why.strip()
        for iid in sorted(self._on_node.get(nid, ())):
            inst = self.driver.instances[iid]
            self._provider_end(inst, inst.reason or (PREEMPTED if node.drain_deadline_s is not None else NODE_LOST))
        self._withdraw_unserved(node, "its last node died")

    def _withdraw_unserved(self, node: _Node, why: str) -> None:
        """A market of ``node`` that no other live, undrained node offers and no autoscaler node type offers
        leaves the pool: a capacity refusal (journaled) makes a chooser with exclusions go elsewhere, a launch
        there is refused at once, and a launch still waiting for a node there fails now. A node of it that
        comes up later brings it back (:meth:`_on_node_up`)."""
        d = self.driver
        for key in node.markets:
            if key not in self.markets or key in self._autoscaled:
                continue
            if any(n.end_s is None and n.drain_deadline_s is None and key in n.markets for n in self._nodes.values()):
                continue
            from spotmarket.prices import Market

            del self.markets[key]
            itype, _, zone = key.partition("/")
            now = d.now_s()
            d.record.meta.setdefault("markets_withdrawn", []).append({"market": key, "time_s": now, "why": why})
            d.refuse_capacity(Market(zone, itype), now, f"ray: no node of {key} is left ({why})")
            for inst in list(d.instances.values()):
                if inst.key == key and not inst.node_id:
                    self._on_unplaced(inst, f"no node of {key} is left ({why})", refuse=False)
    # -- effects --------------------------------------------------------------------------------------
    def launch(self, action: Launch) -> None:
        """Start the segment's actor on a node of the market (refused at once if the cluster offers none).

        Parameters
        ----------
        action : spottune.orchestrator.Launch
            The trial, market, max price (USD/hour), the step to resume and the target step.
        """
        s, d = self.settings, self.driver
        t = d.now_s()
        m = action.market
        key = f"{m.instance_type}/{m.availability_zone}"
        offered = self.markets.get(key)
        if offered is None:
            error = f"the Ray cluster offers no node of market {key}"
            if d.journal is not None:
                d.journal.outcome("launch", action.trial_id, instance_id="", fulfilled=False, time_s=t, error=error)
            d.refuse_capacity(m, t, f"ray: {error}")
            d.post(LaunchFailed(time_s=t, trial_id=action.trial_id, error=error))
            return
        iid = d.sequential_id()
        vcpus, ecu = d.instance_facts(m.instance_type)
        sps = seconds_per_step(d.ref_sps, vcpus, ecu)
        argv, public = self._segment(action, iid, sps)
        actor = self._new_actor(iid, offered)
        # storage options and the key are method arguments (Ray's object store), never a command line
        stream = actor.run.options(num_returns="streaming").remote(argv, public, self.checkpoint_key)
        if d.journal is not None:
            d.journal.outcome("launch", action.trial_id, instance_id=iid, fulfilled=True, time_s=float(t),
                              notice_s=math.inf, termination_s=math.inf, cause="")
        inst = ActorInstance(instance_id=iid, trial_id=action.trial_id, market=m,
                             max_price=action.max_price_usd_per_hour, started_s=t, notice_s=math.inf,
                             termination_s=math.inf, seconds_per_step=sps, vcpus=vcpus, step=action.resume_step,
                             saved_step=action.resume_step, resume_step=action.resume_step, actor=actor, key=key,
                             billing_start_s=math.inf)  # billed from its placement (_on_placed)
        inst.stats.update(trial=action.trial_id, market=key, launch_wall_s=d.clock.wall_s())
        d.add_instance(inst)
        d.at(t + max(MIN_PLACE_WALL_S, s.wall(s.place_s)) * s.time_scale,
             ("unplaced", inst, f"no node of {key} within {s.place_s:g} s"))
        reader = threading.Thread(target=self._read, args=(inst, stream), daemon=True, name=f"ray-{iid}")
        reader.start()

    def _segment(self, action: Launch, iid: str, sps: float) -> tuple[list[str], dict[str, Any]]:
        """The worker arguments of the segment ``action`` launches as ``iid``, and the public storage options."""
        s, d = self.settings, self.driver
        config, seed = d.trials[action.trial_id]
        public, _ = split_secrets(dict(s.storage_options))  # credentials never leave this process
        argv = ["--workload", self.workload, "--store", s.store_url,
                *segment_argv(trial_id=action.trial_id, instance_id=iid, config=config, seed=seed,
                              resume_step=action.resume_step, until_step=action.target_steps,
                              step_wall_s=sps / s.time_scale if s.pace_steps else 0.0, imds_url=s.imds_url,
                              poll_wall_s=max(_MIN_WALL_S, s.wall(s.poll_s)), max_steps=s.max_steps,
                              keep=s.checkpoint_keep)]
        return argv, public

    def _new_actor(self, iid: str, offered: OfferedMarket) -> Any:
        """A named detached :class:`~._actor.SegmentActor` for ``iid`` on a node of ``offered`` (an actor left
        with that name by a killed run that was never resumed is killed first)."""
        from spottune.backends.ray._actor import NAMESPACE, actor_name, segment_actor

        name = actor_name(self.run_tag, iid)
        options = dict(num_cpus=self.settings.num_cpus, name=name, namespace=NAMESPACE, lifetime="detached",
                       **placement(offered))
        try:
            return segment_actor().options(**options).remote(self.lease_wall_s)
        except ValueError:  # the name is taken
            old = self._find_actor(iid)
            if old is not None:
                self._ray.kill(old, no_restart=True)
            return segment_actor().options(**options).remote(self.lease_wall_s)

    def _find_actor(self, iid: str) -> Any:
        """The live actor named for ``iid`` in this run, or None."""
        from spottune.backends.ray._actor import NAMESPACE, actor_name

        try:
            return self._ray.get_actor(actor_name(self.run_tag, iid), namespace=NAMESPACE)
        except ValueError:
            return None

    def _read(self, inst: ActorInstance, stream: Any) -> None:
        """Reader thread of one segment: the node id, every report, then the end (or the actor's death)."""
        ray, put = self._ray, self.driver.enqueue
        code, first = 0, True
        try:
            for ref in stream:
                item = ray.get(ref)
                if first:
                    first = False
                    put(("placed", inst, str(item)))
                    continue
                seq, line = item
                try:
                    report = decode_report(line)
                except ValueError:
                    report = None
                if isinstance(report, Exited):
                    code = int(report.code)
                put(("ray_line", inst, int(seq), report))
        except Exception as exc:  # noqa: BLE001 - RayActorError and its kin: the handler sorts them out
            put(("died", inst, exc))
            return
        put(("eof", inst, code))

    def _on_line(self, inst: ActorInstance, seq: int, report: Any) -> None:
        """Report line ``seq`` of the actor of ``inst``: handled (one a kept instance's journal holds is dropped),
        then acknowledged with the next renewal."""
        if report is not None and not (inst.kept and journaled_report(inst, report)):
            self.driver.on_report(inst, report)
        inst.acked = max(inst.acked, seq)

    def _on_unplaced(self, inst: ActorInstance, why: str, refuse: bool = True) -> None:
        """The launch of ``inst`` got no node: its actor is killed, it is billed to now (user, ``unplaced``), the market
        is refused for capacity (``refuse``; a chooser with exclusions goes elsewhere), and the trial gets
        ``LaunchFailed``."""
        d = self.driver
        if inst.node_id or not inst.alive or inst.gone:
            return
        now = d.now_s()
        d.kill(inst)
        inst.stats["unplaced"] = why
        d.end(inst, now, "user", UNPLACED)
        if refuse:
            d.refuse_capacity(inst.market, now, f"ray: {why}")
        d.post(LaunchFailed(time_s=now, trial_id=inst.trial_id, error=why))

    def _on_placed(self, inst: ActorInstance, nid: str) -> None:
        if not inst.alive or inst.gone:
            return  # its launch already failed (no node in time)
        inst.node_id = nid
        inst.billing_start_s = self.driver.now_s()  # billed from here (RY7); its hourly tick stays at launch + 1 h
        inst.stats.update(node=nid, placed_wall_s=self.driver.clock.wall_s(), placed_s=inst.billing_start_s)
        self._on_node.setdefault(nid, set()).add(inst.instance_id)
        node = self._nodes.get(nid)
        if node is None:
            self._nodes[nid] = node = _Node(nid, [inst.key], self.driver.now_s())
        if node.end_s is not None:
            self._provider_end(inst, NODE_LOST)
        elif node.drain_deadline_s is not None:
            self._notice(inst, node)

    def _on_died(self, inst: ActorInstance, exc: BaseException) -> None:
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
            self.driver.at(self.driver.now_s() + s.lost_after_s * s.time_scale, ("lost", inst, msg))
            return
        if inst.phase in _ACTIVE:
            self.driver.failed(inst, f"actor died: {type(exc).__name__}: {msg}")

    def _on_lost(self, inst: ActorInstance, msg: str) -> None:
        if inst.alive and not inst.gone and inst.phase in _ACTIVE:
            self.driver.failed(inst, f"actor unreachable for {self.settings.lost_after_s:g} s: {msg}")

    def _provider_end(self, inst: ActorInstance, reason: str) -> None:
        """The cloud took the node of ``inst``: it ends as ``provider`` (billed to the node's end)."""
        if not inst.alive or inst.gone:
            return
        inst.reason = reason
        inst.termination_s = min(inst.termination_s, self.driver.now_s())
        inst.stats["provider_end"] = reason
        self.driver.provider_ended(inst)

    def command(self, inst: ActorInstance, cmd: CheckpointCommand) -> None:
        """The command goes to the actor's second concurrency slot (its worker loop's stdin).

        Parameters
        ----------
        inst : ActorInstance
            The instance.
        cmd : CheckpointCommand
            The checkpoint to take.
        """
        if inst.actor is not None and not inst.killed:
            inst.actor.command.remote(encode(cmd))

    def _kill_actor(self, inst: ActorInstance) -> None:
        if inst.actor is not None and not inst.killed:
            inst.killed = True
            try:
                self._ray.kill(inst.actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already dead with its node
                pass

    def kill(self, inst: ActorInstance) -> None:
        """``ray.kill`` the instance's actor.

        Parameters
        ----------
        inst : ActorInstance
            The instance.
        """
        self._kill_actor(inst)

    def recycle(self, inst: ActorInstance) -> bool:
        """An actor is never reused for another segment.

        Parameters
        ----------
        inst : ActorInstance
            The instance.

        Returns
        -------
        bool
            True if the worker was kept.
        """
        return False

    def ended(self, inst: ActorInstance) -> None:
        """Nothing kept: the actor is killed (it is detached: it would otherwise outlive the run until its lease).

        Parameters
        ----------
        inst : ActorInstance
            The instance.
        """
        self._kill_actor(inst)

    def next_instance_id(self) -> str:
        """The driver's next sequential id.

        Returns
        -------
        str
        """
        return self.driver.sequential_id()

    # -- prices and node time ------------------------------------------------------------------------------
    def _series(self, market: Any) -> Any:
        """The prices of ``market``: the price table's constant one if it names it, else the history's."""
        key = f"{market.instance_type}/{market.availability_zone}"
        history = self.driver.history
        if key in self.settings.prices:
            from spotmarket.prices import PriceSeries

            return PriceSeries(market, [0.0], [float(self.settings.prices[key])], end_s=math.inf)
        if history is None or market not in history:
            raise BackendError(f"ray backend: no price for market {key}: give it in the price table (ray.prices)")
        return history[market]

    def price_series(self, inst: ActorInstance, end_s: float) -> Any:
        """The prices of the instance's market.

        Parameters
        ----------
        inst : ActorInstance
            The instance.
        end_s : float
            Engine seconds of its end.

        Returns
        -------
        spotmarket.prices.PriceSeries
            USD per instance-hour.
        """
        return self._series(inst.market)

    def _bill_nodes(self) -> None:
        """``meta["nodes"]``: every market node seen during the run, its time in the run and what that node
        time costs at its market's prices (an estimate of the cluster's bill; spottune's segments are the ledger)."""
        d = self.driver
        end = d.record.end_s if d.record.end_s is not None else d.now_s()
        by_key = {f"{m.instance_type}/{m.availability_zone}": m for m in (d.history.markets if d.history else [])}
        rows, total = [], 0.0
        for node in self._nodes.values():
            if not node.markets:
                continue
            key = node.markets[0]
            lo, hi = max(node.up_s, d.start_s), min(node.end_s if node.end_s is not None else end, end)
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
        d.record.meta["nodes"] = rows
        d.record.meta["node_usd"] = total

    # -- crash safety ------------------------------------------------------------------------------------
    def resume(self, records: list[dict[str, Any]]) -> None:
        """Continue a killed run: replay its journal, keep its live actors still on their segments, take over the
        others' saves, then relaunch (RY11).

        1. Connect to the cluster; the journaled events are delivered again to the fresh orchestrator
           (:meth:`WorkerDriver.replay_journal`, as on the local backend: decision CS4).
        2. Every instance still alive in the journal whose actor still lives (found by name:
           :func:`~._actor.actor_name`) and is its trial's running segment (booting, training or checkpointing,
           not yet saved) is **kept** unless it was released (``take_over``: its lease renewed, this driver its
           owner): the driver re-attaches to its report stream in :meth:`reconcile`, or starts its worker if
           the dead driver's ``run`` never did (a booting actor). Any other live actor is released: its worker
           saves what it trained since its restore (a ``lease`` checkpoint) and stops, waited for at most
           :data:`RELEASE_WALL_S` wall seconds; then the actor is killed. An actor whose lease already ran out
           saved and ended on its own.
        3. The clock restarts at the last journaled time, or later by the steps a worker trained after its
           last journaled report (they took engine time, at its instance's speed): a save's steps, or a kept
           worker's last reported step. :meth:`reconcile` then re-attaches each kept actor, continues each other
           running trial from its worker's save (:meth:`WorkerDriver.adopt_orphan_save`), or relaunches it from
           its last confirmed checkpoint.

        Parameters
        ----------
        records : list of dict
            The killed run's journal (:func:`spottune.journal.read_journal`).

        Raises
        ------
        BackendError
            If the cluster cannot be reached, the driver has no journal, or the journal holds a record out
            of order.
        """
        d = self.driver
        connect(self.settings.address, log_to_driver=self.settings.log_to_driver)
        d.replay_journal()
        self._owner = time.time_ns() // 1_000_000  # this driver's token: larger than any earlier driver's
        actors: dict[str, str] = {}
        released, kept_steps = [], {}
        for inst in d.instances.values():
            if not inst.alive:
                continue
            actor = self._find_actor(inst.instance_id)
            if actor is None:
                actors[inst.instance_id] = "gone"
                continue
            current = d.orchestrator.trials[inst.trial_id].instance_id == inst.instance_id
            inst.stats["resume_state"] = {"current": current, "phase": inst.phase.name, "notified": inst.notified,
                                          "launched": inst.launched}
            if (current or not inst.launched) and inst.phase is not Phase.SAVED and not inst.notified:
                try:
                    state = self._ray.get(actor.take_over.remote(self._owner), timeout=RELEASE_WALL_S)
                except Exception as exc:  # noqa: BLE001 - it died meanwhile (its lease ran out): release finds out
                    state = {"live": False, "error": type(exc).__name__}
                inst.stats["resume_state"].update(state)
                if state.get("live") and (state.get("started") or not inst.launched):
                    inst.actor, inst.kept = actor, True
                    inst.stats["kept_started"] = bool(state.get("started"))
                    actors[inst.instance_id] = "kept"
                    kept_steps[inst.instance_id] = state.get("step")
                    continue
            released.append((inst.instance_id, actor, actor.release.remote(RELEASE_WALL_S)))
        for iid, actor, ref in released:
            try:
                done = bool(self._ray.get(ref, timeout=RELEASE_WALL_S + 10))
            except Exception as exc:  # noqa: BLE001 - it died meanwhile (its lease ran out): its save is in the store
                done = type(exc).__name__
            actors[iid] = "released" if done is True else f"killed ({done or 'save not finished'})"
            try:
                self._ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self._saves, stop_s = d.worker_saves(records, lambda i: None if i.kept else self._orphan_save(i), d.log_s)
        stop_s = max(stop_s, self._kept_until(records, kept_steps, d.log_s))
        d.log_s = stop_s
        d.restart_clock(stop_s)
        d.note_resume({"at_s": d.log_s, "records": d.journal.n, "actors": actors, "kept": sorted(kept_steps)},
                      journal=False)

    def _kept_until(self, records: list[dict[str, Any]], steps: dict[str, int | None], since_s: float) -> float:
        """Engine time a kept worker's steps beyond the journal end: its last journaled report's time plus those
        steps at its instance's speed (they took engine time while no driver read them; as a save's, CS4)."""
        reported: dict[str, float] = {}
        for rec in records:
            e = rec.get("e") if rec.get("k") == "event" else None
            if e is not None and e.get("type") in ("TrialLaunched", "MetricReported"):
                reported[e["instance_id"]] = float(e["time_s"])
        stop_s = since_s
        for iid, step in steps.items():
            inst = self.driver.instances[iid]
            if step is not None and step > inst.step:
                stop_s = max(stop_s, reported.get(iid, since_s) + (step - inst.step) * inst.seconds_per_step)
        return stop_s

    def _orphan_save(self, inst: ActorInstance) -> Any:
        """The checkpoint the worker of ``inst`` saved on its own (:func:`orphan_save`), or None."""
        if self._store is None:
            self._store = LazyStore(self.settings.store_url, self.settings.storage_options, self.checkpoint_key)
        return orphan_save(self._store, inst, self.driver.record.meta)

    def reconcile(self) -> None:
        """After a resume, on the driver thread with the clock running (see :meth:`resume`, step 3).

        A trial running at the crash continues from its worker's save if there is one (its instance billed to
        now, ended by the user, reason ``restart``); else it relaunches from its last confirmed checkpoint
        (``SegmentEnded(provider)``, or ``LaunchFailed`` for one still booting). An instance its trial had left
        (revoked and saved) is billed to its drain deadline or now, whichever is first. The resume is journaled
        with the trials continued from their workers' saves (``worker_saves``) and what became of each actor.
        """
        d = self.driver
        d.rearm_wakeups()
        d.post_lost_events(d.now_s())
        entry = d.record.meta["resumes"][-1]  # filled as it goes: a delivered step can launch (and crash) at once
        taken: dict[str, int] = entry.setdefault("worker_saves", {})  # trial -> the step its worker saved
        now = d.now_s()  # every actor of the killed run not kept ended by now (the instances are billed to it)
        for inst in list(d.instances.values()):
            if not inst.alive:
                continue
            if inst.kept:
                self._adopt(inst)
                continue
            tr = d.orchestrator.trials[inst.trial_id]
            inst.phase = Phase.KILLED  # its actor was killed by resume() or ended on its own
            inst.killed = True
            if inst.launched and tr.instance_id != inst.instance_id:
                if inst.notified and math.isfinite(inst.termination_s):
                    d.end(inst, min(inst.termination_s, now), "provider", inst.reason)
                else:
                    d.end(inst, now, "user", "restart")
                continue
            saved = self._saves.get(inst.instance_id)
            if saved is not None and d.adopt_orphan_save(inst, saved.step, saved.metadata.get("metrics")):
                taken[inst.trial_id] = saved.step
                d.end(inst, now, "user", "restart")
                continue
            d.end(inst, now, "user", "restart")
            if inst.launched:
                d.post(inst.segment_ended(now, EndReason.PROVIDER))
            else:
                d.post(LaunchFailed(time_s=now, trial_id=inst.trial_id, error="orchestrator restarted"))
        d.journal.resumed(entry)

    def _adopt(self, inst: ActorInstance) -> None:
        """Keep a live actor still on its trial's segment: re-attach to its report stream (from the first line the
        dead driver did not acknowledge; those the journal holds are dropped by step), re-arm its hourly tick
        (unless its ``HourElapsed`` is journaled) and a ``Checkpoint`` in flight (sent again: a worker that
        already saved ignores it, its ``saved`` report answers). Its lease is renewed from now on."""
        from spotmarket import HOUR_S

        d = self.driver
        if inst.instance_id not in self._hours:
            d.timer(inst.started_s + HOUR_S, "hour", inst)
        if inst.pending is not None and inst.phase is Phase.RUNNING:
            inst.to("checkpoint")
            self.command(inst, CheckpointCommand(reason=str(inst.pending.reason)))
        inst.stats.update(trial=inst.trial_id, market=inst.key, kept_wall_s=d.clock.wall_s())
        if inst.stats["kept_started"]:
            stream = inst.actor.attach.options(num_returns="streaming").remote()
        else:  # still booting: the dead driver's run never started the worker; this driver starts it
            argv, public = self._segment(d.replayed_launches[inst.trial_id], inst.instance_id, inst.seconds_per_step)
            stream = inst.actor.run.options(num_returns="streaming").remote(argv, public, self.checkpoint_key,
                                                                            self._owner)
        threading.Thread(target=self._read, args=(inst, stream), daemon=True, name=f"ray-{inst.instance_id}").start()

    def replay_launch(self, rec: dict[str, Any], action: Launch) -> None:
        """Rebuild the instance of a journaled fulfilled launch (its actor is found by name in :meth:`resume`).

        Parameters
        ----------
        rec : dict
            The journaled launch ``outcome``.
        action : spottune.orchestrator.Launch
            The launch it answered.
        """
        d = self.driver
        m = action.market
        vcpus, ecu = d.instance_facts(m.instance_type)
        iid = rec["instance_id"]
        d.instances[iid] = ActorInstance(
            instance_id=iid, trial_id=action.trial_id, market=m, max_price=action.max_price_usd_per_hour,
            started_s=float(rec["time_s"]), notice_s=float(rec["notice_s"]), termination_s=float(rec["termination_s"]),
            seconds_per_step=seconds_per_step(d.ref_sps, vcpus, ecu), vcpus=vcpus, reason=str(rec["cause"]),
            step=action.resume_step, saved_step=action.resume_step, resume_step=action.resume_step,
            key=f"{m.instance_type}/{m.availability_zone}")

    def replay_refused(self, rec: dict[str, Any], action: Launch) -> None:
        """Nothing to rebuild: a market the cluster did not offer answered ``LaunchFailed`` (a journaled event).

        Parameters
        ----------
        rec : dict
            The journaled launch ``outcome`` (not fulfilled).
        action : spottune.orchestrator.Launch
            The launch it answered.
        """

    def replay_event(self, event: Any) -> None:
        """A replayed ``RevocationNotice`` (a drain or IMDS notice) marks its instance noticed, with its deadline.

        Parameters
        ----------
        event : spottune.orchestrator.Event
            The replayed event.
        """
        if type(event).__name__ == "HourElapsed":
            self._hours.add(event.instance_id)
        if isinstance(event, RevocationNotice):
            inst = self.driver.instances.get(event.instance_id)
            if inst is not None and not inst.notified:
                inst.notified = True
                inst.notice_s, inst.termination_s = float(event.time_s), float(event.deadline_s)
                inst.reason = inst.reason or PREEMPTED
