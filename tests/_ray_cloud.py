"""Test harness of the ray backend: a multi-node Ray cluster on 127.0.0.1 and the spot cloud under it.

:func:`spot_cluster` starts one ``ray.cluster_utils.Cluster`` (head without CPUs or markets, one worker
node per market: market A by its custom resource ``market:r3.large/us-east-1a``, market B by the labels
``ray.io/market-type``, ``ray.io/availability-zone``, ``ray.io/instance-type``; fast GCS health checks so
that a node lost without a drain is marked dead in about a second, as Ray's own tests do).

:class:`SpotCloud` plays the cloud and the autoscaler from the replayed market, as ``tests/_aws_host.py``
plays EC2: :meth:`SpotCloud.follow` asks the market's revocation model when each market's spot capacity
is revoked (the notice and the termination times, engine seconds) and, on the backend's clock, at the
notice drains every node of that market with ``DRAIN_NODE_REASON_PREEMPTION`` and a deadline (the
termination time, but never less than :data:`MIN_NOTICE_WALL_S` wall seconds away), at the deadline
removes the nodes, then adds a fresh node of that market (the autoscaler's replacement).
:meth:`SpotCloud.lose` removes a market's node without a drain (a host failure). ``Cluster.add_node``
only works on the main thread (it installs signal handlers), so the test runs the backend on a thread and
the main thread serves the cloud's node requests (:meth:`SpotCloud.serve`).
"""

from __future__ import annotations

import contextlib
import math
import os
import queue
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from spottune.backends.ray import market_resource
from tests.test_worker_process import Walk

ROOT = Path(__file__).resolve().parents[1]
#: Wall seconds between a drain and the node's removal, at least (the checkpoint must fit in it on a
#: loaded 2-core machine; 120 s at 1,200x would be 0.1 s).
MIN_NOTICE_WALL_S = 1.0


class Crash(Walk):
    """``Walk`` whose process dies at step ``exit_at`` (``os._exit``: the actor dies, its node lives on)."""

    def step(self):
        if self.iteration + 1 == self.config.get("exit_at"):
            os._exit(3)
        return super().step()


def node_args(market: Any, by: str) -> dict[str, Any]:
    """``Cluster.add_node`` arguments of a node of ``market`` offered by ``resource`` or ``labels``."""
    if by == "resource":
        return {"num_cpus": 1, "resources": {market_resource(market.instance_type, market.availability_zone): 4}}
    return {"num_cpus": 1, "labels": {"ray.io/market-type": "spot", "ray.io/availability-zone": market.availability_zone,
                                      "ray.io/instance-type": market.instance_type}}


@contextlib.contextmanager
def spot_cluster(markets: dict[Any, str]) -> Iterator["SpotCloud"]:
    """A head and one worker node per market (``{market: "resource" | "labels"}``); yields the cloud."""
    import ray
    from ray.cluster_utils import Cluster

    # the segments import the test workload (tests.test_worker_process:Walk) in the Ray workers, which inherit
    # the environment of the nodes started here
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), saved or "") if p)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "include_dashboard": False,
        "_system_config": {"health_check_period_ms": 200, "health_check_failure_threshold": 3,
                           "health_check_initial_delay_ms": 0}})
    cloud = SpotCloud(cluster, markets)
    try:
        for market, by in markets.items():
            cloud.nodes[market] = [cluster.add_node(**node_args(market, by))]
        ray.init(address=cluster.address, log_to_driver=False)
        cluster.wait_for_nodes()
        yield cloud
    finally:
        ray.shutdown()
        cluster.shutdown()
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


class SpotCloud:
    """The spot cloud and the autoscaler of one cluster (see the module docstring).

    Attributes
    ----------
    nodes : dict market -> list of ray node handles
        The live nodes of each market.
    drains : list of dict
        One per drained node: ``node_id``, ``market``, ``wall`` (``time.time()`` of the drain call),
        ``deadline_ms``, ``deadline_s`` (the deadline on the backend's engine clock), ``removed_wall``.
    """

    def __init__(self, cluster: Any, markets: dict[Any, str]):
        self.cluster = cluster
        self.by = dict(markets)
        self.nodes: dict[Any, list[Any]] = {}
        self.drains: list[dict[str, Any]] = []
        self.lost: list[str] = []  # ids of the nodes lost without a drain
        self.errors: list[BaseException] = []
        self._threads: list[threading.Thread] = []
        self._adds: queue.Queue[Any] = queue.Queue()  # markets that need a fresh node (added on the main thread)

    def serve(self, fn: Any) -> Any:
        """Run ``fn()`` on a thread while this (main) thread adds the nodes the cloud asks for; returns its result."""
        out: dict[str, Any] = {}

        def body() -> None:
            try:
                out["value"] = fn()
            except BaseException as exc:  # noqa: BLE001 - raised again below
                out["error"] = exc

        th = threading.Thread(target=body, daemon=True, name="backend")
        th.start()
        while th.is_alive() or not self._adds.empty():
            try:
                market = self._adds.get(timeout=0.02)
            except queue.Empty:
                continue
            self.nodes[market] = [self.cluster.add_node(**node_args(market, self.by[market]))]
        if "error" in out:
            raise out["error"]
        return out["value"]

    def follow(self, backend: Any, revocation_model: Any, max_price: float, after_step: int = 0) -> None:
        """Put each market's revocation (``revocation_model`` at the backend's start, ``max_price``) on the
        backend's clock once :meth:`backend.run` has started it.

        ``after_step`` > 0: a market's drain also waits until every trial has reported that step (it trains on
        a placed actor), so that a segment whose boot outlasted the notice time on a loaded machine is still
        drained mid-training instead of being placed on the fresh node (the deadline is then the minimum,
        :data:`MIN_NOTICE_WALL_S`)."""

        def trained() -> bool:
            trials = backend.orchestrator.trials.values()
            if backend.orchestrator.done:
                raise AssertionError(f"the run ended before every trial reached step {after_step}")
            return all(tr.step >= after_step for tr in trials)

        def preempt_when_trained(market: Any, termination_s: float, clock: Any) -> None:
            while not trained():
                time.sleep(0.005)
            self.preempt(market, termination_s, clock)

        def arm() -> None:
            clock = backend.clock
            while clock._wall0 is None:  # run() starts the clock
                time.sleep(0.01)
            for market in self.by:
                rev = revocation_model.revocation(market, backend.start_s, instance_id="cloud",
                                                  max_price_usd_per_hour=max_price)
                if rev.fulfilled and math.isfinite(rev.notice_s):
                    clock.call_at(rev.notice_s, self._spawn, preempt_when_trained, market, rev.termination_s, clock)

        self._spawn(arm)

    def _spawn(self, fn: Any, *args: Any) -> None:
        def body() -> None:
            try:
                fn(*args)
            except BaseException as exc:  # noqa: BLE001 - the test reads them
                self.errors.append(exc)

        th = threading.Thread(target=body, daemon=True)
        th.start()
        self._threads.append(th)

    def preempt(self, market: Any, termination_s: float, clock: Any, replace: bool = True) -> None:
        """Drain every node of ``market`` for preemption with a deadline, remove them at it, add a fresh one
        (``replace``; False: no autoscaler brings the market back)."""
        import ray
        from ray.core.generated import autoscaler_pb2

        gcs = ray._raylet.GcsClient(address=self.cluster.address)
        left = max(MIN_NOTICE_WALL_S, (termination_s - clock.engine_s()) / clock.time_scale)
        deadline_ms = int((time.time() + left) * 1000)
        nodes, rows = self.nodes[market], []
        for node in nodes:
            ok, why = gcs.drain_node(node.node_id, autoscaler_pb2.DrainNodeReason.Value("DRAIN_NODE_REASON_PREEMPTION"),
                                     "spot interruption", deadline_ms)
            assert ok, why
            rows.append({"node_id": node.node_id, "market": market, "wall": time.time(), "deadline_ms": deadline_ms,
                         "deadline_s": clock.engine_s() + (deadline_ms / 1000 - time.time()) * clock.time_scale})
        time.sleep(max(0.0, deadline_ms / 1000 - time.time()))
        for node, row in zip(nodes, rows):
            self.cluster.remove_node(node)
            row["removed_wall"] = time.time()
        self.drains += rows
        self.nodes[market] = []
        if replace:
            self._adds.put(market)

    def drain_after(self, backend: Any, market: Any, trial_id: str, step: int) -> None:
        """Once ``trial_id`` has reported ``step``, :meth:`preempt` ``market`` at once (deadline
        :data:`MIN_NOTICE_WALL_S`) without a replacement node: the market is gone for the rest of the run."""

        def watch() -> None:
            trial = backend.orchestrator.trials[trial_id]
            while trial.step < step:
                if backend.orchestrator.done:
                    raise AssertionError(f"{trial_id} never reached step {step}")
                time.sleep(0.005)
            clock = backend.clock
            self.preempt(market, clock.engine_s(), clock, replace=False)

        self._spawn(watch)

    def restore(self, market: Any) -> None:
        """Main thread: give ``market`` a node again (after :meth:`drain_after`), for the module's next tests."""
        if not self.nodes.get(market):
            self.nodes[market] = [self.cluster.add_node(**node_args(market, self.by[market]))]

    def lose_after(self, backend: Any, market: Any, trial_id: str, step: int) -> None:
        """Once ``trial_id`` has reported ``step`` (read from the backend's orchestrator), :meth:`lose` the node
        of ``market``: mid-training whatever the machine's load (a fixed engine time could fall before the
        segment's boot ended or after it finished)."""

        def watch() -> None:
            trial = backend.orchestrator.trials[trial_id]
            while trial.step < step:
                if backend.orchestrator.done:
                    raise AssertionError(f"{trial_id} never reached step {step}")
                time.sleep(0.005)
            self.lost.append(self.lose(market))

        self._spawn(watch)

    def lose(self, market: Any) -> str:
        """Remove the node of ``market`` without a drain (a host failure); a fresh one follows. Returns its id."""
        node = self.nodes[market][0]
        self.cluster.remove_node(node, allow_graceful=False)
        self.nodes[market] = []
        self._adds.put(market)
        return node.node_id

    def join(self) -> None:
        for th in self._threads:
            th.join(timeout=30)
        self._threads.clear()
