"""The ray backend on a real multi-node Ray cluster on 127.0.0.1 (one per module), against the simulator.

The market is the simulator's scripted one (``tests.test_sim_backend.history``): market A (r3.large in
us-east-1a) at 0.02 USD/h, market B (c3.xlarge in us-east-1b) at 0.05. The cluster has one node of each:
A offered by its custom resource, B by its labels (:mod:`tests._ray_cloud`). The trainable is the NumPy
``Walk`` of ``test_worker_process`` (fast to import in a Ray worker). The hop/θ/failure and the preemption
scenarios also run in the simulator with the same orchestrator, chooser and market, and the final metrics
must be equal bit for bit (a checkpoint and restore repeat the curve exactly; timing differs, so steps at a
hop or a notice may); the node-loss scenario (a process that kills itself cannot run in the simulator's
process) is checked against the uninterrupted curve.

Scenarios: the clean run with hourly hops, the θ barrier with top-1 and a trial that raises (a failure,
never a preemption) in one run; a price spike in A revokes it (the cloud drains A's node for preemption
with a deadline, removes it, adds a fresh one), the segment checkpoints inside the deadline and the trial
relaunches on B's node; a node lost without a drain (provider end, from the last checkpoint).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

pytest.importorskip("ray")
pytestmark = pytest.mark.solo  # `make test` runs it after the parallel tests, alone (pyproject.toml: markers)

from spotmarket import Billing, LegacyBidRevocation  # noqa: E402
from spottune.backends import SimBackend, SimSettings, TrainableCurves  # noqa: E402
from spottune.backends.ray import RayBackend, RaySettings, cluster_markets  # noqa: E402
from spottune.orchestrator import Orchestrator, OrchestratorConfig, TrialState  # noqa: E402
from tests._ray_cloud import spot_cluster  # noqa: E402
from tests.test_sim_backend import FACTS, T0, A, B, Fixed, history  # noqa: E402
from tests.test_worker_process import WORKLOAD, Walk  # noqa: E402

MAX_PRICE = 0.1


@dataclass(frozen=True)
class _Choice:
    market: object
    max_price_usd_per_hour: float


class Cheapest:
    """The cheapest of A and B at the decision time, max price 0.1 USD/h (A's spike moves trials to B)."""

    def __init__(self, hist):
        self.hist = hist

    def choose(self, trial_id, now_s):
        return _Choice(min((A, B), key=lambda m: (self.hist[m].price_at(now_s), str(m))), MAX_PRICE)

    def record_segment(self, *args):
        pass


@pytest.fixture(scope="module")
def cloud():
    with spot_cluster({A: "resource", B: "labels"}) as c:
        yield c


def orchestrator(ids, chooser, *, max_steps, theta=1.0, top_k=1, max_failures=1):
    return Orchestrator(ids, OrchestratorConfig(max_steps=max_steps, theta=theta, top_k=top_k, metric="loss",
                                                max_failures=max_failures), chooser)


def run_both(tmp_path, configs, *, chooser, hist, cloud, follow=False, follow_after_step=0, time_scale=1200.0,
             **config):
    """The same experiment on the Ray cluster and in the simulator: ((orch, record), (orch, record))."""
    ids = sorted(configs)
    seeds = {t: 100 + i for i, t in enumerate(ids)}
    ray_orch = orchestrator(ids, chooser(hist), **config)
    backend = RayBackend(ray_orch, hist, Billing(), WORKLOAD, {t: (configs[t], seeds[t]) for t in ids},
                         FACTS.__getitem__, T0, RaySettings(store_url=str(tmp_path / "store"), time_scale=time_scale,
                                                            pace_steps=True, watch_s=60.0, max_wall_s=60.0,
                                                            place_s=30.0 * time_scale))
    # a launch waits up to 30 wall seconds for its node (a Ray worker's start took over 10 s at load average 17:
    # the default bound's LaunchFailed moved the preempted market's trials away before its spike)
    if follow:
        cloud.follow(backend, LegacyBidRevocation(hist), MAX_PRICE, after_step=follow_after_step)
    t = time.monotonic()
    ray_rec = cloud.serve(backend.run)  # the main thread adds the cloud's fresh nodes
    ray_rec.meta["wall_s"] = time.monotonic() - t
    if follow:
        cloud.join()
        assert cloud.errors == []
    sim_orch = orchestrator(ids, chooser(hist), **config)
    curves = TrainableCurves({t: (lambda t=t: Walk(configs[t], seed=seeds[t])) for t in ids})
    sim_rec = SimBackend(sim_orch, hist, LegacyBidRevocation(hist), Billing(), curves, FACTS.__getitem__, T0,
                         SimSettings(boot_s=0.0, step_time_cov=0.0, checkpoint_overhead_s=0.0)).run()
    return (ray_orch, ray_rec), (sim_orch, sim_rec)


def assert_same_results(ray_orch, sim_orch):
    """Top-k, states, failures and the final metrics equal the simulator's, bit for bit."""
    assert ray_orch.top_k == sim_orch.top_k
    for tid, s in sim_orch.trials.items():
        r = ray_orch.trials[tid]
        assert (r.state, r.failures) == (s.state, s.failures), tid
        if s.state is not TrialState.FAILED:
            assert r.step == s.step and r.losses[-1] == s.losses[-1], tid
            assert r.steps == s.steps and r.losses == s.losses, tid  # the whole final curve


def reported(record, trial_id):
    return [(r["step"], r["metrics"]) for r in record.log
            if r["kind"] == "event" and r["type"] == "MetricReported" and r["trial_id"] == trial_id]


def test_the_cluster_offers_its_markets(cloud):
    offered = {m.key: m.by for m in cluster_markets()}
    assert offered == {"r3.large/us-east-1a": "resource", "c3.xlarge/us-east-1b": "labels"}


def test_the_pool_is_the_offered_markets_of_the_price_history(cloud):
    """A market of the prices that no node (nor node type) offers is not in the chooser's pool; a market the
    autoscaler's node types offer is, even before its first node runs."""
    import pandas as pd
    import ray
    from ray._raylet import GCS_AUTOSCALER_CLUSTER_CONFIG_KEY, GCS_AUTOSCALER_STATE_NAMESPACE
    from ray.core.generated import autoscaler_pb2
    from ray.experimental import internal_kv

    from spotmarket.prices import Market, PriceHistory
    from spottune.backends.ray import pool_markets

    C, D = Market("us-east-1c", "m4.large"), Market("us-east-1d", "m4.xlarge")
    hist = PriceHistory(pd.DataFrame({"timestamp": pd.to_datetime([T0] * 4, unit="s", utc=True),
                                      "availability_zone": [m.availability_zone for m in (A, B, C, D)],
                                      "instance_type": [m.instance_type for m in (A, B, C, D)],
                                      "product_description": "Linux/UNIX", "price": [0.02, 0.05, 0.03, 0.04]}))
    spec = type("Spec", (), {"ray": {}, "prices": "four-markets"})()
    assert pool_markets(spec, hist)[0] == [A, B]
    config = autoscaler_pb2.ClusterConfig()
    group = config.node_group_configs.add(name="m4-large-spot", min_count=0, max_count=4)
    group.resources["market:m4.large/us-east-1c"] = 1
    group.resources["CPU"] = 2
    ns, key = GCS_AUTOSCALER_STATE_NAMESPACE, GCS_AUTOSCALER_CLUSTER_CONFIG_KEY
    internal_kv._internal_kv_put(key, config.SerializeToString(), namespace=ns)
    try:
        markets, offered = pool_markets(spec, hist)
        assert markets == [A, B, C] and {m.key: m.nodes for m in offered}["m4.large/us-east-1c"] == 0
    finally:
        internal_kv._internal_kv_del(key, namespace=ns)
    assert ray.is_initialized()


def test_a_market_the_cluster_does_not_offer_is_refused(tmp_path, cloud):
    from spottune.backends.ray import OfferedMarket
    from spottune.orchestrator import Launch, LaunchFailed

    orch = orchestrator(["t0"], Fixed(), max_steps=10)
    backend = RayBackend(orch, history(), Billing(), WORKLOAD, {"t0": ({"lr": 0.1}, 1)}, FACTS.__getitem__, T0,
                         RaySettings(store_url=str(tmp_path)), markets=[OfferedMarket("r3.large", "us-east-1a",
                                                                                      "resource", 1)])
    backend.transport.launch(Launch(trial_id="t0", market=B, max_price_usd_per_hour=0.1, resume_step=0,
                                    target_steps=10))
    kind, event = backend.driver._q.get_nowait()
    assert kind == "event" and isinstance(event, LaunchFailed)
    assert event.error == "the Ray cluster offers no node of market c3.xlarge/us-east-1b" and not backend.driver.instances


def test_hourly_hops_theta_barrier_top_k_and_a_failing_trial(tmp_path, cloud):
    configs = {"t0": {"lr": 0.02}, "t1": {"lr": 0.05}, "t2": {"lr": 0.05, "fail_at": 5}}
    # 900x: a segment's boot (a Ray worker's start, 1-2.5 wall seconds) stays well inside its first hour
    (orch, rec), (sim_orch, sim) = run_both(tmp_path, configs, chooser=lambda h: Fixed(), hist=history(), cloud=cloud,
                                            max_steps=100, theta=0.5, top_k=1, time_scale=900.0)
    assert_same_results(orch, sim_orch)
    t0, t1, t2 = (orch.trials[t] for t in ("t0", "t1", "t2"))
    assert orch.top_k == ("t1",)  # lr 0.05 is ahead at the θ step (50)
    assert (t1.state, t1.step, t0.state, t0.step) == (TrialState.FINISHED, 100, TrialState.STOPPED_EARLY, 50)
    # 50 steps of 60 s after a boot before θ: the first instances reach their hour (a hop that already holds the
    # θ step counts as the θ checkpoint, so a slow boot can leave one trial without a counted hop)
    assert t0.hops + t1.hops >= 1 and t0.revocations == t1.revocations == 0  # a clean run: hops only
    assert (t2.state, t2.failures, t2.revocations) == (TrialState.FAILED, 2, 0)  # a failure, not a preemption
    assert all(r.ended_by == "user" for r in rec.ledger)  # nothing was revoked
    for tid in ("t0", "t1"):  # every report, across hops and the θ pause, is the uninterrupted curve
        ref = Walk(configs[tid], seed=100 + int(tid[1]))
        expected = {i + 1: ref.train() for i in range(orch.trials[tid].step)}
        assert {s for s, _ in reported(rec, tid)} == set(expected) and all(m == expected[s] for s, m in reported(rec, tid))
    assert rec.meta["billing"] == "estimate" and {n["market"] for n in rec.meta["nodes"]} >= {"r3.large/us-east-1a"}
    for row in rec.ledger:  # each segment billed at A's replayed price, per second, from its launch to its end
        assert row.charged_usd == pytest.approx(0.02 * (row.end_s - row.start_s) / 3600, rel=1e-9)


def test_preemption_checkpoints_in_the_deadline_and_relaunches_on_another_market(tmp_path, cloud):
    configs = {"t0": {"lr": 0.02}, "t1": {"lr": 0.05}}
    # A rises above the max price at 45 min and stays there (a segment's boot, a Ray worker's start, is 1-2.5
    # wall seconds, 10-25 min at 600x, but 5 s and more on a loaded machine); the cloud drains A's node at the
    # notice or, if later, once both trials have reported a step (their actors are placed and training: a drain
    # before the placement would leave them to the fresh node, unrevoked), and removes it 1 wall second (10 min)
    # after the drain. A's price stays up, so the relaunch goes to B however late the drain came.
    hist = history(spike_at_s=2700.0, spike_len_s=6 * 3600.0)
    (orch, rec), (sim_orch, sim) = run_both(tmp_path, configs, chooser=Cheapest, hist=hist, cloud=cloud, follow=True,
                                            follow_after_step=1, max_steps=60, top_k=2, time_scale=600.0)
    assert_same_results(orch, sim_orch)
    drained = {d["node_id"] for d in cloud.drains}
    assert len(drained) == 1
    for tid, tr in orch.trials.items():
        assert tr.state is TrialState.FINISHED and tr.revocations == 1 and tr.failures == 0 and tr.lost_steps == 0
        log = [(r["kind"], r["type"], r.get("reason")) for r in rec.log if r.get("trial_id") == tid]
        i = log.index(("event", "RevocationNotice", None))
        assert log[i + 1] == ("action", "Checkpoint", "revocation")
        assert ("event", "CheckpointSaved", "revocation") in log[i:]
        markets = [r["market"] for r in rec.log if r["kind"] == "action" and r["type"] == "Launch" and r["trial_id"] == tid]
        assert markets[:2] == [str(A), str(B)]  # relaunched on the other market's node
    notices = [r for r in rec.log if r["kind"] == "event" and r["type"] == "RevocationNotice"]
    assert len(notices) == 2  # with the drain's deadline (engine seconds; 0.2 wall s of slack at 600x)
    assert all(abs(n["deadline_s"] - cloud.drains[0]["deadline_s"]) < 0.2 * 600 for n in notices)
    provider = [r for r in rec.ledger if r.ended_by == "provider"]
    assert len(provider) == 2 and all(r.reason == "capacity" for r in provider)
    assert all(r.charged_usd == 0 and r.refunded_usd > 0 for r in provider)  # revoked in the first hour
    launched = {r["instance_id"]: r["started_s"] for r in rec.log if r["kind"] == "event" and r["type"] == "TrialLaunched"}
    # two segments on A, two on B (more when a segment on B reached its hourly hop on a slow machine)
    assert sorted(launched) == sorted(r.instance_id for r in rec.ledger) and len(launched) >= 4
    for row in rec.ledger:  # billed from the actor's placement on its node (decision RY7), not from the launch
        assert row.start_s == rec.meta["worker"][row.instance_id]["placed_s"] > launched[row.instance_id]
    for iid, inst in rec.meta["worker"].items():
        if inst.get("node") in drained:  # the notice came with the drain's deadline, the save before it
            assert inst["notice_s"] < next(r.end_s for r in rec.ledger if r.instance_id == iid)
    lag = [inst["drain_seen_wall"] - d["wall"] for d in cloud.drains for inst in rec.meta["worker"].values()
           if inst.get("node") == d["node_id"] and inst.get("drain_seen_wall")]
    assert lag and max(lag) < 1.0  # the watcher saw the drain within a second (watch_s / time_scale = 50 ms)
    print(f"drain seen after {max(lag):.3f} s; ray run {rec.meta['wall_s']:.1f} s")


class PerTrial:
    """Trial t -> its own market, max price 0.1 USD/h."""

    def __init__(self, markets):
        self.markets = markets

    def choose(self, trial_id, now_s):
        return _Choice(self.markets[trial_id], MAX_PRICE)

    def record_segment(self, *args):
        pass


def test_a_node_lost_without_drain_is_a_provider_end_and_a_dead_actor_a_failure(tmp_path, cloud):
    """t0 on A loses its node at its 10th step without a drain (no notice): a provider end, relaunched from its last
    checkpoint (none: step 0) on A's fresh node; t1 on B kills its own process at step 2: the actor dies on a
    live node, a trial failure (retried once, then FAILED), never a preemption."""
    configs = {"t0": {"lr": 0.02}, "t1": {"lr": 0.05, "exit_at": 2}}
    hist = history()
    orch = orchestrator(sorted(configs), PerTrial({"t0": A, "t1": B}), max_steps=30)
    backend = RayBackend(orch, hist, Billing(), "tests._ray_cloud:Crash",
                         {t: (configs[t], 100 + i) for i, t in enumerate(sorted(configs))}, FACTS.__getitem__, T0,
                         RaySettings(store_url=str(tmp_path / "store"), time_scale=900.0, pace_steps=True,
                                     watch_s=60.0, max_wall_s=60.0, prices={"c3.xlarge/us-east-1b": 0.5},
                                     place_s=30 * 900.0))  # a loaded machine's Ray worker start is no capacity refusal
    cloud.lose_after(backend, A, "t0", 10)
    rec = cloud.serve(backend.run)
    cloud.join()
    assert cloud.errors == [] and len(cloud.lost) == 1
    t0, t1 = orch.trials["t0"], orch.trials["t1"]
    assert (t0.state, t0.revocations, t0.failures) == (TrialState.FINISHED, 1, 0) and t0.lost_steps > 0
    assert (t1.state, t1.failures, t1.revocations) == (TrialState.FAILED, 2, 0)
    lost = [r for r in rec.ledger if r.trial_id == "t0" and r.ended_by == "provider"]
    assert len(lost) == 1 and lost[0].reason == "node-lost"
    assert rec.instance_steps[lost[0].instance_id][1] > 0  # its steps since the last checkpoint are lost
    assert not any(r["type"] == "RevocationNotice" for r in rec.log if r["kind"] == "event")  # no drain: no notice
    workers = rec.meta["worker"].values()
    assert [w.get("provider_end") for w in workers if w["trial"] == "t0"][:1] == ["node-lost"]
    assert all(w["died"].startswith("ActorDiedError") and "provider_end" not in w for w in workers if w["trial"] == "t1")
    for row in rec.ledger:  # B from the price table (0.5 USD/h), A from the replayed history (0.02 USD/h)
        price = 0.5 if row.market == B else 0.02
        assert row.charged_usd + row.refunded_usd == pytest.approx(price * (row.end_s - row.start_s) / 3600, rel=1e-9)
    ref = Walk(configs["t0"], seed=100)  # the relaunch from step 0 repeats the uninterrupted curve
    assert t0.losses == [ref.train()["loss"] for _ in range(30)]
    # the units (decision SV4): the lost node's unit went back to Q and finished once on the fresh node
    units = rec.meta["units"]
    assert {"instance_id": lost[0].instance_id, "unit": "t0:0-30", "why": "provider"} in units["requeued"]
    assert units["steps_done"] == {"t0": 30} and units["pending"] == [] and units["in_flight"] == {}
    nodes = [rec.meta["worker"][i].get("node") for i in t0.instance_ids]  # the node that joined took the unit
    assert nodes[0] == cloud.lost[0] and nodes[-1] not in (None, cloud.lost[0])


class CheapestLearning(Cheapest):
    """:class:`Cheapest` among the markets no capacity refusal excluded (a ``provisioner.LearningChooser``: the
    orchestrator hands it the backend's ``CapacityRefused``)."""

    observes_instances = False

    def __init__(self, hist):
        super().__init__(hist)
        self.out = {}

    def choose(self, trial_id, now_s):
        pool = [m for m in (A, B) if m not in self.out]
        return _Choice(min(pool, key=lambda m: (self.hist[m].price_at(now_s), str(m))), MAX_PRICE)

    def exclude(self, market, now_s, reason):
        self.out[market] = reason

    def excluded(self, now_s):
        return dict(self.out)

    def observe(self, *args):
        pass

    def signal(self, *args):
        pass


@pytest.mark.slow
def test_a_market_whose_last_node_went_leaves_the_pool_and_its_trials_finish_elsewhere(tmp_path, cloud):
    """A's only node is drained mid-segment and removed, and no node replaces it (no autoscaler): A leaves the
    pool at the drain (a journaled capacity refusal), the trials checkpoint and relaunch on B, never on A again,
    and the run ends (no launch waits for a node that will not come)."""
    configs = {"t0": {"lr": 0.02}, "t1": {"lr": 0.05}}
    hist = history()
    chooser = CheapestLearning(hist)
    orch = orchestrator(sorted(configs), chooser, max_steps=40, top_k=2)
    backend = RayBackend(orch, hist, Billing(), WORKLOAD, {t: (configs[t], 100 + i) for i, t in enumerate(sorted(configs))},
                         FACTS.__getitem__, T0, RaySettings(store_url=str(tmp_path / "store"), time_scale=600.0,
                                                            pace_steps=True, watch_s=60.0, max_wall_s=90.0))
    cloud.drain_after(backend, A, "t0", 10)
    try:
        rec = cloud.serve(backend.run)
        cloud.join()
    finally:
        cloud.restore(A)
    assert cloud.errors == [] and len(cloud.drains) >= 1
    for tid, tr in orch.trials.items():
        assert tr.state is TrialState.FINISHED and tr.step == 40, tid
        launches = [r["market"] for r in rec.log if r["kind"] == "action" and r["type"] == "Launch" and r["trial_id"] == tid]
        assert launches[0] == str(A) and launches[-1] == str(B), tid
        assert str(A) not in launches[launches.index(str(B)):], tid  # never back to the market that left
    assert rec.meta["markets_withdrawn"][0]["market"] == "r3.large/us-east-1a"
    assert list(chooser.out) == [A]  # the capacity refusal the backend reported when A's last node drained


def test_spec_and_cli_without_ray_give_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    """``--ray-address`` is the spec's ``ray.address``; bad ``ray`` keys are one ConfigError line; without Ray
    installed ``spottune run --backend ray`` says how to install it (one line, exit 2)."""
    import sys

    from spottune.cli import main
    from spottune.errors import ConfigError
    from spottune.experiment import ExperimentSpec

    spec = ExperimentSpec(backend="ray", ray={"address": "10.0.0.1:6379", "prices": {"m5.large/us-east-1a": 0.035}})
    assert ExperimentSpec.from_dict(spec.to_dict()) == spec
    from spottune.cli._run import _spec

    ctx = type("Ctx", (), {"params": {"backend": "ray", "ray_address": "10.0.0.2:6379", "output": None}})()
    assert _spec(ctx, None).ray == {"address": "10.0.0.2:6379"} and _spec(ctx, None).backend == "ray"
    with pytest.raises(ConfigError, match=r"^ray is .*, but must be a mapping with keys among address, prices"):
        ExperimentSpec(backend="ray", ray={"adress": "auto"})
    with pytest.raises(ConfigError, match=r"^ray.prices is .*'<instance type>/<zone>' -> USD per instance-hour"):
        ExperimentSpec(backend="ray", ray={"prices": {"m5.large": 0.035}})
    monkeypatch.setitem(sys.modules, "ray", None)  # as if spottune[ray] were not installed
    monkeypatch.setattr(sys, "argv", ["spottune", "run", "--backend", "ray", "--ray-address", "10.0.0.1:6379",
                                      "--output", str(tmp_path / "out"), "--no-progress"])
    with pytest.raises(SystemExit) as exit_:
        main()
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and err == ["error: backend ray needs Ray: pip install 'spottune[ray]'"]


def test_spottune_run_on_the_ray_backend_end_to_end(tmp_path, cloud):
    """``spottune run --backend ray --ray-address``: the composition root reads the cluster's markets (the pool
    is A: the only one of the spec's types and zones the cluster offers), the segments run as actors."""
    import json

    import pandas as pd
    from click.testing import CliRunner

    from spottune.cli import cli

    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(f"workload: '{WORKLOAD}'\nmetric: loss\nmode: min\nsearch_space: {{lr: {{grid_search: [0.05]}}}}\nmax_steps: 10\n"
                   "theta: 1.0\ntop_k: 1\ninstance_types: [r3.large, m3.large]\nzones: [us-east-1a]\n"
                   "predictor: none\n")
    out = tmp_path / "res"
    result = CliRunner().invoke(cli, ["run", "--config", str(cfg), "--backend", "ray", "--ray-address",
                                      cloud.cluster.address, "--time-scale", "900", "--no-progress", "--output", str(out)])
    assert result.exit_code == 0, result.output
    trials = pd.read_csv(out / "trials.csv")
    assert list(trials["state"]) == ["finished"] and list(trials["steps"]) == [10]
    summary = json.loads((out / "summary.json").read_text())
    settings = summary["settings"]
    assert settings["backend"] == "ray" and settings["billing"] == "estimate"
    assert settings["markets"] == ["us-east-1a/r3.large/Linux/UNIX"]  # m3.large: no node offers it
    assert set(pd.read_csv(out / "ledger.csv")["market"]) == {"us-east-1a/r3.large/Linux/UNIX"}


def test_the_backend_and_the_ray_tune_scheduler_share_no_code():
    """Decision RY10: neither ``spottune.backends.ray`` nor ``spottune.integrations`` imports the other."""
    from tests.test_package_boundaries import imports_of, project_modules

    modules = project_modules()
    known = set(modules)
    for name, path in modules.items():
        deps = imports_of(name, path.read_text(), known, path.name == "__init__.py")
        if name.startswith("spottune.backends.ray"):
            assert not any(d.startswith("spottune.integrations") for d in deps), name
        if name.startswith("spottune.integrations"):
            assert not any(d.startswith("spottune.backends") for d in deps), name


def _named_actors():
    import ray

    return sorted(a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["namespace"] == "spottune")


@pytest.mark.process
@pytest.mark.slow
def test_a_killed_driver_resumes_from_its_actors_saves(tmp_path, cloud):
    """Decision RY11: ``spottune run --backend ray`` SIGKILLed mid-training leaves its named detached actors
    training; ``spottune resume`` at once keeps them (it re-attaches to their report streams: no ``restart``
    ledger row, no worker save taken); resumed later, after the lease ran out, finds the actors gone after their
    own ``lease`` save and continues each running trial from it. Either way every step is reported exactly once,
    the resume is journaled, no actor is left."""
    import json
    import os
    import signal
    import subprocess
    import sys

    import pandas as pd
    from click.testing import CliRunner

    from spottune.cli import cli
    from spottune.journal import JOURNAL_FILE, read_journal
    from tests._ray_cloud import ROOT
    from tests._wait import wait_until

    spec = (f"workload: '{WORKLOAD}'\nmetric: loss\nmode: min\nsearch_space: {{lr: {{grid_search: [0.05, 0.1]}}}}\n"
            "max_steps: 40\ntheta: 1.0\ntop_k: 1\ninstance_types: [r3.large]\nzones: [us-east-1a]\npredictor: none\n")
    # the released run's lease (40 s wall at 120x) outlasts a slow resume; the other's is the 10 s floor; at 120x
    # an hour is 30 wall seconds, so that a segment rarely hops (a fresh segment has nothing to save) meanwhile
    leases = {"keep": "ray: {lease_s: 4800.0}\n", "lease": ""}
    for case, lease in leases.items():
        (tmp_path / f"{case}.yaml").write_text(spec + lease)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cases = ("keep", "lease")
    procs = {case: subprocess.Popen([sys.executable, "-c", "from spottune.cli import main; main()", "run",
                                     "--config", str(tmp_path / f"{case}.yaml"), "--backend", "ray", "--ray-address",
                                     cloud.cluster.address, "--time-scale", "120", "--no-progress",
                                     "--output", str(tmp_path / case)],
                                    env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for case in cases}  # both runs at once (each has its own key, so its own actor names)

    def both_training(journal):
        lines = journal.read_text().splitlines() if journal.exists() else []
        return all(any('"step":5,"time_s"' in x and f'"trial_id":"{t}"' in x for x in lines) for t in ("t00", "t01"))

    wait_until(lambda: all(both_training(tmp_path / c / JOURNAL_FILE) for c in cases), 120, interval_s=0.005,
               what="both trials of both runs past step 5")
    before = {}
    for case in cases:
        os.kill(procs[case].pid, signal.SIGKILL)
        procs[case].wait()
        before[case] = len(read_journal(tmp_path / case / JOURNAL_FILE))
    assert len(_named_actors()) == 4  # they outlive their drivers
    taken = {}
    for case in cases:
        out = tmp_path / case
        journal = out / JOURNAL_FILE
        if case == "lease":  # no renewal: each saves (reason lease) and ends within the 10 s wall lease
            wait_until(lambda: not _named_actors(), 60, interval_s=0.1, what="the actors' lease ran out")
        result = CliRunner().invoke(cli, ["resume", str(out), "--no-progress"])
        assert result.exit_code == 0, result.output
        assert len(read_journal(journal)) > before[case]
        (entry,) = json.loads((out / "summary.json").read_text())["settings"]["resumes"]
        expect = {"keep": "kept", "lease": "gone"}[case]
        assert list(entry["actors"].values()) == [expect, expect], case  # the two live segments' actors
        assert entry["kept"] == (sorted(entry["actors"]) if case == "keep" else []), case
        restarted = set(pd.read_csv(out / "ledger.csv").query("reason == 'restart'")["instance_id"])
        if case == "keep":  # kept: billed to their segments' ends, not ended by the resume
            assert entry["worker_saves"] == {} and not restarted & set(entry["kept"]), (entry, restarted)
        # a trial whose segment had not trained since its restore (an hourly hop just before) has no save to take
        assert set(entry["worker_saves"]) <= {"t00", "t01"}, case
        taken[case] = entry["worker_saves"]
        steps = {}
        for r in read_journal(journal):
            if r["k"] == "event" and r["e"]["type"] == "MetricReported":
                steps.setdefault(r["e"]["trial_id"], []).append(r["e"]["step"])
        assert steps == {"t00": list(range(1, 41)), "t01": list(range(1, 41))}, case  # none redone, none missing
    assert any(taken.values()), taken  # the trials continued from their workers' saves
    assert _named_actors() == []


def test_two_studies_served_at_once_share_the_servers_ray_connection(tmp_path, cloud):
    """``spottune serve --backend ray``: the server connects once at its start and two teams' studies run at the same
    time in its threads, each its own run (its actors named by its run tag, its own store); a spec naming the org's
    cluster or prices is refused (decision SV16)."""
    import csv
    from datetime import datetime

    from spottune.service import Service, ServiceClient, ServiceError
    from spottune.service._cloud import RayServing

    # 1 trial, 8 steps of 20 s at 80x: 2 wall seconds of paced training each, so the two runs overlap
    study = {"workload": "linreg", "max_steps": 8, "theta": 1.0, "top_k": 1, "instance_types": ["r3.large"],
             "zones": ["us-east-1a"], "predictor": "none", "backend": "ray", "time_scale": 80}
    svc = Service(admin_token="ray-admin", data_dir=tmp_path, port=0, backend="ray",
                  ray=RayServing(address=cloud.cluster.address)).start()
    try:
        with ServiceClient(svc.url, "ray-admin") as admin:
            tokens = {team: admin.create_team(team)["token"] for team in ("vision", "speech")}
        clients = {team: ServiceClient(svc.url, token) for team, token in tokens.items()}
        with pytest.raises(ServiceError) as info:
            clients["vision"].submit({**study, "ray": {"prices": {"r3.large/us-east-1a": 0.0}}}, team="vision",
                                     name="free")
        assert str(info.value) == ("spec: ray.prices is {'r3.large/us-east-1a': 0.0}, but on the service the org sets "
                                   "ray.address, ray.prices, ray.imds_url (HTTP 422)")
        for lr, (team, client) in zip((0.01, 0.05), clients.items()):
            client.submit({**study, "search_space": {"lr": {"grid_search": [lr]}}}, team=team, name=f"{team}-ray")
        done = {team: client.wait(f"{team}-ray", timeout_s=90) for team, client in clients.items()}
        for client in clients.values():
            client.close()
    finally:
        svc.stop()
    assert {team: d["state"] for team, d in done.items()} == {"vision": "finished", "speech": "finished"}, done
    (a0, a1), (b0, b1) = [[datetime.fromisoformat(d[k]) for k in ("started_utc", "ended_utc")] for d in done.values()]
    assert a0 < b1 and b0 < a1  # at the same time
    for d in done.values():
        with open(tmp_path / "studies" / str(d["id"]) / "trials.csv") as f:
            assert [(r["state"], r["steps"]) for r in csv.DictReader(f)] == [("finished", "8")]
        with open(tmp_path / "studies" / str(d["id"]) / "ledger.csv") as f:
            assert {r["market"] for r in csv.DictReader(f)} == {"us-east-1a/r3.large/Linux/UNIX"}
