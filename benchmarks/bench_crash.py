"""Crash cost: what a ``kill -9`` of the orchestrator at a random moment costs once the run is resumed.

For each backend, one uninterrupted run, then ``--crashes`` runs each killed once at a seeded random moment and
resumed to the end (``spottune resume``). Per crash:

- ``cost_ratio``: the resumed run's total cost ÷ the uninterrupted run's (local: ÷ the mean of its uninterrupted
  runs, whose spread is reported too: a local run's timing follows the wall clock);
- ``steps_redone``: steps trained again after the resume that had already been reported (journaled) before the
  crash (``MetricReported`` events after the crash for a step at or below the trial's last journaled step);
- ``steps_redone_from_confirmed``: what a relaunch of every running trial from its last *confirmed* checkpoint
  would have redone (the rule before the workers saved on their own when their driver died: decision CS4);
- ``worker_saves``: the trials the resume continued from a checkpoint their worker saved after the crash.

Backends:

- ``sim``: the crash is an exception raised by the journal's fault hook before a seeded random record (the process
  state after it is lost; the resume reads only the files), as ``tests/test_crash_resume.py`` does. The simulator
  resumes by deterministic re-execution (CS3), so the resumed run is the uninterrupted one.
- ``local``: a real ``spottune run --backend local`` SIGKILLed once a seeded random number of steps has been
  journaled, its workers left behind, then ``spottune resume``.
- ``aws``: the aws backend on a moto server with the tests' harness playing the EC2 hosts (``tests/_aws_host.py``:
  agents and workers are real local processes). The orchestrator crashes in-process before a seeded random
  journal record (its clean-up disabled: a ``kill -9`` runs none; its lease renewal stops), stays down for a
  seeded choice of no time (the resume adopts the live instances) or until every agent has found the lease
  stale, saved and powered off (the resume continues from those saves; the lease object is aged rather than
  waited out), then a new backend resumes the journal to the end. ``downtime`` says which; ``lease_steps`` is
  one lease period in steps; ``cost_ratio_downtime_billed`` adds what the instances alive at the crash cost
  while it was down (the resumed engine clock restarts where the journal stopped, so that time is billed in
  neither ratio otherwise).

- ``ray``: the same with ``spottune run --backend ray`` on a Ray cluster that outlives the driver (a head and one
  node per market on 127.0.0.1, ``ray.cluster_utils.Cluster``, started by this process): the killed driver's
  segment actors (named, detached) go on training until ``spottune resume`` releases them (decision RY11). Per
  crash also ``actors`` (what became of each live actor) and ``lease_steps`` (one lease period in steps of the
  fastest instance: the bound on the steps redone).

Usage: ``python benchmarks/bench_crash.py [--crashes 10] [--seed 0] [--backends sim local aws ray]`` ->
``benchmarks/results/crash.json`` (the backends not run are kept from the stored file); ``--markdown`` prints the
table of the stored JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common  # noqa: E402,F401  (puts the project root on sys.path)
import numpy as np  # noqa: E402

from _common import ROOT, run_or_print  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "crash.json"
#: The sim experiment (the crash-safety tests' spec).
SIM_SPEC = dict(workload="logreg", search_space={"lr": {"grid_search": [0.01, 0.05, 0.2, 0.8]},
                                                 "l2": {"grid_search": [0.0, 0.01]}},
                max_steps=40, theta=0.5, top_k=2, predictor="constant",
                instance_types=["r3.large", "c3.xlarge", "m3.medium"], availability_zones=["us-east-1a", "us-east-1b"],
                seed=7)
#: The local experiment: 4 trials of 60 steps, θ 0.5, top-2, on two markets of one zone, at 900x wall time.
LOCAL_SPEC = dict(workload="logreg", search_space={"lr": {"grid_search": [0.01, 0.05, 0.2, 0.8]}}, max_steps=60,
                  theta=0.5, top_k=2, instance_types=["r3.large", "c3.xlarge"], availability_zones=["us-east-1b"],
                  predictor="none")
TIME_SCALE = 900


class _Crash(Exception):
    pass


def _redone(records_before: list[dict], records_after: list[dict]) -> tuple[int, int]:
    """(steps reported again after the crash, steps a relaunch from the last confirmed checkpoint would redo)."""
    reported: dict[str, int] = {}
    confirmed: dict[str, int] = {}
    running: dict[str, bool] = {}
    for rec in records_before:
        e = rec.get("e") if rec.get("k") == "event" else None
        if e is None:
            continue
        t = e.get("trial_id")
        if e["type"] == "MetricReported":
            reported[t] = e["step"]
        elif e["type"] == "CheckpointSaved":
            confirmed[t], running[t] = e["step"], False
        elif e["type"] == "TrialLaunched":
            running[t] = True
        elif e["type"] == "SegmentEnded" and e["reason"] == "provider":
            running[t] = False
    again = sum(1 for rec in records_after if rec.get("k") == "event" and rec["e"]["type"] == "MetricReported"
                and rec["e"]["step"] <= reported.get(rec["e"]["trial_id"], 0))
    would = sum(max(0, reported.get(t, 0) - confirmed.get(t, 0)) for t, on in running.items() if on)
    return again, would


def bench_sim(crashes: int, seed: int) -> dict:
    from spottune.compose import run
    from spottune.experiment import ExperimentSpec
    from spottune.journal import JOURNAL_FILE, open_run, read_journal
    from spottune.results import write_results

    def once(folder: Path, fault=None, resume: bool = False) -> dict:
        folder.mkdir(parents=True, exist_ok=True)
        spec, journal, records = open_run(folder) if resume else open_run(folder, ExperimentSpec(**SIM_SPEC))
        journal.fault = fault
        try:
            return run(spec, output=folder, journal=journal, resume=records)
        finally:
            journal.close()

    with tempfile.TemporaryDirectory(prefix="bench-crash-sim-") as tmp:
        ref_dir = Path(tmp) / "ref"
        ref = write_results(ref_dir, once(ref_dir))
        n_records = len(read_journal(ref_dir / JOURNAL_FILE))
        points = sorted(np.random.default_rng(seed).choice(np.arange(2, n_records - 1), crashes, replace=False))
        rows = []
        for i, n in enumerate(int(p) for p in points):
            folder = Path(tmp) / f"c{i}"

            def fault(pos, record, n=n):
                if pos == n:
                    raise _Crash(n)
            try:
                once(folder, fault)
            except _Crash:
                pass
            before = read_journal(folder / JOURNAL_FILE)
            t0 = time.perf_counter()
            summary = write_results(folder, once(folder, resume=True))
            after = read_journal(folder / JOURNAL_FILE)[len(before):]
            again, _ = _redone(before, after)  # the simulator re-executes: no relaunch from a confirmed checkpoint
            rows.append({"crash_record": n, "of_records": n_records, "resume_s": round(time.perf_counter() - t0, 3),
                         "cost_usd": summary["total_cost_usd"],
                         "cost_ratio": summary["total_cost_usd"] / ref["total_cost_usd"],
                         "jct_ratio": summary["jct_h"] / ref["jct_h"], "steps_redone": again,
                         "same_top_k": [t["trial_id"] for t in summary["top_k"]] == [t["trial_id"] for t in ref["top_k"]]})
    return {"spec": SIM_SPEC, "uninterrupted_cost_usd": [ref["total_cost_usd"]], "crashes": rows}


def _cli(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", "from spottune.cli import main; main()", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=ROOT)


def _cli_crashes(tmp: Path, spec: dict, run_args: list[str], crashes: int, seed: int, uninterrupted: int) -> dict:
    """``uninterrupted`` runs, then ``crashes`` runs SIGKILLed at a seeded random number of journaled steps and
    resumed; the rows of :func:`bench_local` and :func:`bench_ray`."""
    import yaml

    from spottune.journal import JOURNAL_FILE, read_journal

    cfg = tmp / "spec.yaml"
    cfg.write_text(yaml.safe_dump(spec, sort_keys=False))
    run_args = ["run", "--config", str(cfg), *run_args, "--time-scale", str(TIME_SCALE), "--no-progress"]
    refs, steps_total = [], []
    for i in range(uninterrupted):
        out = tmp / f"ref{i}"
        done = _cli(*run_args, "--output", str(out))
        if done.returncode != 0:
            raise RuntimeError(done.stderr)
        refs.append(json.loads((out / "summary.json").read_text()))
        steps_total.append(sum(1 for r in read_journal(out / JOURNAL_FILE)
                               if r["k"] == "event" and r["e"]["type"] == "MetricReported"))
    ref_cost = statistics.mean(s["total_cost_usd"] for s in refs)
    ref_jct = statistics.mean(s["jct_h"] for s in refs)
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(crashes):
        k = int(rng.integers(2, int(0.9 * min(steps_total))))  # crash once k steps are journaled
        out = tmp / f"c{i}"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        proc = subprocess.Popen([sys.executable, "-c", "from spottune.cli import main; main()", *run_args,
                                 "--output", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env=env, cwd=ROOT, start_new_session=True)
        journal = out / JOURNAL_FILE
        deadline = time.monotonic() + 300
        while proc.poll() is None and time.monotonic() < deadline:
            text = journal.read_text() if journal.exists() else ""
            if text.count('"type":"MetricReported"') >= k:
                break
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)  # the orchestrator only: its workers are left behind
        proc.wait()
        if (out / "summary.json").exists():
            raise RuntimeError(f"crash {i}: the run finished before it was killed")
        before = read_journal(journal)
        t0 = time.perf_counter()
        done = _cli("resume", str(out), "--no-progress")
        if done.returncode != 0:
            raise RuntimeError(done.stderr)
        resume_s = time.perf_counter() - t0
        summary = json.loads((out / "summary.json").read_text())
        after = read_journal(journal)[len(before):]
        again, would = _redone(before, after)
        (entry,) = summary["settings"]["resumes"]
        row = {"crash_after_steps": k, "resume_wall_s": round(resume_s, 2),
               "cost_usd": summary["total_cost_usd"], "cost_ratio": summary["total_cost_usd"] / ref_cost,
               "jct_ratio": summary["jct_h"] / ref_jct, "steps_redone": again,
               "steps_redone_from_confirmed": would, "worker_saves": entry.get("worker_saves", {}),
               "restart_rows": sum(1 for row in (out / "ledger.csv").read_text().splitlines()[1:]
                                   if ",restart," in row),
               "top_k": [t["trial_id"] for t in summary["top_k"]]}
        if "killed_workers" in entry:
            row["killed_workers"] = len(entry["killed_workers"])
        if "actors" in entry:
            row["actors"] = entry["actors"]
        rows.append(row)
    return {"spec": spec, "time_scale": TIME_SCALE, "uninterrupted_cost_usd": [s["total_cost_usd"] for s in refs],
            "uninterrupted_jct_hours": [s["jct_h"] for s in refs],
            "uninterrupted_top_k": [[t["trial_id"] for t in s["top_k"]] for s in refs], "crashes": rows}


def bench_local(crashes: int, seed: int, uninterrupted: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-crash-local-") as tmp:
        return _cli_crashes(Path(tmp), LOCAL_SPEC, ["--backend", "local"], crashes, seed, uninterrupted)


def bench_ray(crashes: int, seed: int, uninterrupted: int) -> dict:
    """The local experiment on a Ray cluster on 127.0.0.1 that outlives each killed driver: a head without CPUs
    and one node per market of the spec (its custom resource ``market:<type>/<zone>``, 4 segments each)."""
    import ray
    from ray.cluster_utils import Cluster

    from provisioner import InstanceCatalog
    from spottune.backends.ray import market_resource
    from spottune.backends.ray._transport import MIN_LEASE_WALL_S
    from spottune.experiment import RayOptions
    from spottune.speed import seconds_per_step
    from spottune.workloads import get_workload

    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), saved or "") if p)  # the nodes import spottune
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    try:
        for itype in LOCAL_SPEC["instance_types"]:
            for zone in LOCAL_SPEC["availability_zones"]:
                cluster.add_node(num_cpus=1, resources={market_resource(itype, zone): 4})
        cluster.wait_for_nodes()
        with tempfile.TemporaryDirectory(prefix="bench-crash-ray-") as tmp:
            out = _cli_crashes(Path(tmp), LOCAL_SPEC, ["--backend", "ray", "--ray-address", cluster.address],
                               crashes, seed, uninterrupted)
    finally:
        ray.shutdown()
        cluster.shutdown()
    lease_wall_s = max(MIN_LEASE_WALL_S, RayOptions().lease_s / TIME_SCALE)
    catalog = InstanceCatalog.load()  # the fastest instance of the spec: the most steps in one lease
    sps = min(seconds_per_step(get_workload(LOCAL_SPEC["workload"]).reference_seconds_per_step, catalog[t].vcpus,
                               catalog[t].ecu) for t in LOCAL_SPEC["instance_types"])
    out.update(lease_wall_s=lease_wall_s, lease_steps=int(lease_wall_s * TIME_SCALE // sps))
    return out


#: The aws experiment: 3 trials of ``Walk``, 36 steps of 120 s (no pruning), one market (flat 0.02 USD/h, no
#: revocation), at 500x wall time; the lease is 5,000 engine s (10 wall s, about 42 steps).
AWS_SPEC = dict(workload="tests.test_worker_process:Walk", trials={"t0": 0.02, "t1": 0.05, "t2": 0.01}, max_steps=36,
                theta=1.0, top_k=2, reference_seconds_per_step=120.0, time_scale=500.0, lease_s=5000.0,
                market="us-east-1a r3.large", price_usd_per_hour=0.02, max_price_usd_per_hour=0.10)


class _OneMarket:
    """The aws benchmark's chooser: always market A at max price 0.10 USD/h (a ``provisioner`` chooser's interface)."""

    observes_instances = False

    def __init__(self, market):
        self.market = market

    def exclude(self, market, now_s, reason):
        pass

    def excluded(self, now_s):
        return {}

    def observe(self, market, launch_s, end_s, interrupted):
        pass

    def signal(self, market, time_s, kind, value):
        pass

    def choose(self, trial_id, now_s):
        from types import SimpleNamespace

        return SimpleNamespace(market=self.market, max_price_usd_per_hour=AWS_SPEC["max_price_usd_per_hour"])

    def choose_many(self, ids, now_s):
        return [self.choose(t, now_s) for t in ids]

    def record_segment(self, *args):
        pass


def bench_aws(crashes: int, seed: int, uninterrupted: int) -> dict:
    import boto3

    from spotmarket import Billing
    from spotmarket.prices import Market
    from spottune.backends.aws import AwsBackend, AwsClients, AwsSettings
    from spottune.journal import JOURNAL_FILE, Journal, read_journal
    from spottune.orchestrator import Orchestrator, OrchestratorConfig
    from tests._aws_host import Ec2Hosts, moto_server
    from tests._wait import wait_until
    from tests.test_sim_backend import T0, history

    spec = AWS_SPEC
    market = Market(*spec["market"].split())
    trials = {t: ({"lr": lr}, 200 + i) for i, (t, lr) in enumerate(spec["trials"].items())}
    key = "5eed" * 16  # the experiment's checkpoint key (spottune run keeps it in the results folder)

    class _Crash(Exception):
        pass

    def backend(url, folder, exp, journal):
        orch = Orchestrator(list(trials), OrchestratorConfig(max_steps=spec["max_steps"], theta=spec["theta"],
                                                             top_k=spec["top_k"], metric="loss"), _OneMarket(market))
        s = AwsSettings(experiment=exp, bucket="spottune-bench", store_url=str(folder / "store"), endpoint_url=url,
                        storage_options={"endpoint_url": url}, time_scale=spec["time_scale"], pace_steps=True,
                        poll_s=5.0, describe_every_s=60.0, lease_s=spec["lease_s"], linger_s=20_000.0,
                        max_steps=spec["max_steps"], reference_seconds_per_step=spec["reference_seconds_per_step"],
                        max_wall_s=120.0, checkpoint_key=key)
        b = AwsBackend(orch, Billing(), spec["workload"], trials, lambda _: (2, 6.5), T0, s,
                       clients=AwsClients.create(s))
        b.journal, journal.sync_intents = journal, True
        return orch, b

    def usd(record) -> float:
        return float(sum(row.charged_usd for row in record.ledger))

    def final(orch) -> dict:
        return {t: [tr.step, tr.last_loss()] for t, tr in sorted(orch.trials.items())}

    rows, refs = [], []
    with tempfile.TemporaryDirectory(prefix="bench-crash-aws-") as tmp, moto_server(history()) as url:
        boto3.client("s3", endpoint_url=url).create_bucket(Bucket="spottune-bench")
        n_records = []
        for i in range(uninterrupted):
            folder, exp = Path(tmp) / f"ref{i}", f"bench-ref{i}"
            folder.mkdir()
            orch, b = backend(url, folder, exp, Journal(folder / JOURNAL_FILE, spec={"bench": exp}))
            hosts = Ec2Hosts(url, exp, workload=spec["workload"], store="", log_dir=folder, warm=3)
            hosts.attach(b.ec2)
            hosts.start()
            try:
                record = b.run()
            finally:
                b.journal.close()
                hosts.stop()
            refs.append({"cost_usd": usd(record), "final": final(orch)})
            n_records.append(len(read_journal(folder / JOURNAL_FILE)))
        ref_cost = statistics.mean(r["cost_usd"] for r in refs)
        rng = np.random.default_rng(seed)
        for i in range(crashes):
            n = int(rng.integers(5, int(0.9 * min(n_records))))
            down = "past the lease" if rng.random() < 0.5 else "none"
            folder, exp = Path(tmp) / f"c{i}", f"bench-c{i}"
            folder.mkdir()
            path = folder / JOURNAL_FILE

            crash_at = []

            def fault(pos, record, n=n):
                if pos == n:
                    crash_at.append(time.perf_counter())
                    raise _Crash(n)

            _, crashed = backend(url, folder, exp, Journal(path, spec={"bench": exp}, fault=fault))
            crashed.transport.sweep = lambda: None  # a killed process cleans nothing up
            hosts = Ec2Hosts(url, exp, workload=spec["workload"], store="", log_dir=folder, warm=3)
            hosts.attach(crashed.ec2)
            hosts.start()
            try:
                try:
                    crashed.run()
                    raise RuntimeError(f"crash {i}: the run finished before record {n}")
                except _Crash:
                    pass
                crashed.journal.close()
                t_down = crash_at[0]  # the crashed process's threads were still stopping after it
                if down != "none":  # the lease runs out: aged at once rather than waited for (agents check it)
                    crashed.control.put_json(crashed.control.key("lease.json"),
                                             {"renewed_at": 0.0, "valid_s": crashed.settings.wall(spec["lease_s"])})
                    wait_until(lambda: hosts.booted and hosts.running() == [], 60, interval_s=0.1,
                               what="every agent finds the lease stale, saves and powers off")
                before = read_journal(path, repair=True)
                journal = Journal(path, replay=before)
                orch, resumed = backend(url, folder, exp, journal)
                resumed.resume(before)
                hosts.attach(resumed.ec2)
                t0 = time.perf_counter()
                record = resumed.run()
                journal.close()
                hosts.settle()
                left = hosts.running()
            finally:
                hosts.stop()
            after = read_journal(path)[len(before):]
            again, would = _redone(before, after)
            entry = record.meta["resumes"][-1]
            # what the instances alive at the crash cost while it was down (the resumed clock restarts where the
            # journal stopped, so that time is billed in neither run: added here, at the market's price)
            alive = ({r["instance_id"] for r in before if r["k"] == "outcome" and r["op"] == "launch" and r["fulfilled"]}
                     - {r["id"] for r in before if r["k"] == "billed"})
            down_usd = len(alive) * (t0 - t_down) * spec["time_scale"] * spec["price_usd_per_hour"] / 3600.0
            rows.append({"crash_record": n, "downtime": down, "down_wall_s": round(t0 - t_down, 2),
                         "resume_wall_s": round(time.perf_counter() - t0, 2), "cost_usd": usd(record),
                         "cost_ratio": usd(record) / ref_cost, "alive_at_crash": len(alive),
                         "cost_ratio_downtime_billed": (usd(record) + down_usd) / ref_cost, "steps_redone": again,
                         "steps_redone_from_confirmed": would, "kept": len(entry.get("kept", [])),
                         "worker_saves": entry.get("worker_saves", {}),
                         "restart_rows": sum(1 for row in record.ledger if row.reason == "restart"),
                         "same_final_metrics": final(orch) == refs[0]["final"], "left_running": len(left)})
    return {"spec": spec, "lease_steps": spec["lease_s"] / spec["reference_seconds_per_step"],
            "uninterrupted_cost_usd": [r["cost_usd"] for r in refs],
            "uninterrupted_same_final_metrics": all(r["final"] == refs[0]["final"] for r in refs), "crashes": rows}


def run(args: argparse.Namespace) -> dict:
    t0 = time.perf_counter()
    out = {"crashes_per_backend": args.crashes, "seed": args.seed, "backends": {}}
    if "sim" in args.backends:
        out["backends"]["sim"] = bench_sim(args.crashes, args.seed)
    if "local" in args.backends:
        out["backends"]["local"] = bench_local(args.crashes, args.seed, args.uninterrupted)
    if "aws" in args.backends:
        out["backends"]["aws"] = bench_aws(args.crashes, args.seed, args.uninterrupted)
    if "ray" in args.backends:
        t1 = time.perf_counter()
        out["backends"]["ray"] = bench_ray(args.crashes, args.seed, args.uninterrupted)
        out["backends"]["ray"]["wall_s"] = round(time.perf_counter() - t1, 1)
    for b in out["backends"].values():
        b["summary"] = _summary(b["crashes"])
        by_downtime = {}
        for r in b["crashes"]:
            by_downtime.setdefault(r.get("downtime"), []).append(r)
        if len(by_downtime) > 1 or None not in by_downtime:
            b["summary_by_downtime"] = {k: _summary(v) for k, v in by_downtime.items()}
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    if args.out.exists():  # keep the stored backends not run now (with the provenance of their run)
        old = json.loads(args.out.read_text())
        for name, b in old.get("backends", {}).items():
            if name not in out["backends"]:
                b.setdefault("provenance", old.get("provenance"))
                b.setdefault("crashes_per_backend", old.get("crashes_per_backend"))
                out["backends"][name] = b
        order = ["sim", "local", "aws", "ray"]
        out["backends"] = dict(sorted(out["backends"].items(), key=lambda kv: order.index(kv[0])))
    return out


def _summary(rows: list[dict]) -> dict:
    ratios = [r["cost_ratio"] for r in rows]
    return {"crashes": len(rows), "cost_ratio_median": statistics.median(ratios), "cost_ratio_max": max(ratios),
            "steps_redone_total": sum(r["steps_redone"] for r in rows),
            "steps_redone_max": max(r["steps_redone"] for r in rows),
            "steps_redone_from_confirmed_total": sum(r["steps_redone_from_confirmed"] for r in rows)
            if all("steps_redone_from_confirmed" in r for r in rows) else None,
            **({"cost_ratio_downtime_billed_median": statistics.median(r["cost_ratio_downtime_billed"] for r in rows),
                "cost_ratio_downtime_billed_max": max(r["cost_ratio_downtime_billed"] for r in rows)}
               if all("cost_ratio_downtime_billed" in r for r in rows) else {})}


def _lease(b: dict) -> str:
    lease = b.get("lease_steps")
    return "-" if lease is None else f"{lease:.0f}"


def markdown(r: dict) -> str:
    lines = ["| backend | crashes | resumed ÷ uninterrupted cost: median (max) | steps redone: total (max per crash) "
             "| from the last confirmed checkpoint it would be | one lease period, steps |",
             "| --- | --- | --- | --- | --- | --- |"]
    for name, b in r["backends"].items():
        parts = [(name, b["summary"])]
        parts += [(f"{name}, down: {k}", v) for k, v in b.get("summary_by_downtime", {}).items()]
        for label, s in parts:
            lines.append(f"| {label} | {len(b['crashes']) if label == name else s['crashes']} | "
                         f"{s['cost_ratio_median']:.2f}x ({s['cost_ratio_max']:.2f}x) | "
                         f"{s['steps_redone_total']} ({s['steps_redone_max']}) | "
                         f"{'-' if s['steps_redone_from_confirmed_total'] is None else s['steps_redone_from_confirmed_total']} "
                         f"| {_lease(b) if label == name else ''} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--crashes", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--uninterrupted", type=int, default=2, help="uninterrupted local, aws and ray runs (the cost's reference)")
    p.add_argument("--backends", "--backend", nargs="+", default=["sim", "local", "aws", "ray"],
                   choices=["sim", "local", "aws", "ray"])
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--markdown", action="store_true", help="print the table of the stored JSON")
    return run_or_print(p.parse_args(argv), run, markdown)


if __name__ == "__main__":
    sys.exit(main())
