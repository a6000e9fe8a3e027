"""Speed of ``spottune simulate`` -> ``benchmarks/results/simulate.json``.

1. **Evaluation speed**: one recorded study (``opda-alexnet``, 16 configurations, 50 progress steps)
   × 8 policies × 10 starts on the 2015 us-east-1 trace, legacy mode, ``--jobs 2``: wall seconds
   (target < 120 s on 2 cores). Predictors come from the cache (trained once, timed separately).
2. **Scaling**: the simulator alone on synthetic recorded studies of n trials × S steps (policy
   ``spottune-1.0-none``: hourly hops, no predictor cost, and ``spot-restart``), one start; wall time
   against the number of events delivered to the orchestrator, with a least-squares line through the
   origin and its R². Linear in events = constant cost per event.

Run: ``.venv/bin/python benchmarks/bench_simulate.py``.
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import write_json  # noqa: E402  (benchmarks/ is the script's folder: results JSONs carry their provenance)

OUT = Path(__file__).resolve().parent / "results" / "simulate.json"
POLICIES = "spottune-0.7,spottune-1.0,spottune-0.7-constant,single-cheapest,single-fastest,on-demand,spot-restart,optuna-sha"


def speed() -> dict:
    from spottune.cli._simulate import simulate_all

    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        simulate_all("opda-alexnet", POLICIES, 1, "legacy", Path(d) / "warm", jobs=1, progress=False,
                     start_times="2015-05-05T00:00Z")  # trains / caches the predictors once
        warm = time.perf_counter() - t0
        t0 = time.perf_counter()
        table = simulate_all("opda-alexnet", POLICIES, 10, "legacy", Path(d) / "run", jobs=2, progress=False)
        wall = time.perf_counter() - t0
        meta = json.loads((Path(d) / "run" / "meta.json").read_text())
    return {"workload": "opda-alexnet", "policies": POLICIES.split(","), "starts": 10, "runs": len(table),
            "jobs": 2, "wall_s": round(wall, 2), "target_s": 120.0, "meets_target": wall < 120.0,
            "sum_run_wall_s": round(float(sum(meta["run_wall_s"])), 2),
            "median_run_s": round(float(np.median(meta["run_wall_s"])), 3),
            "max_run_s": round(float(max(meta["run_wall_s"])), 3),
            "warm_up_s (first call: predictor cache, history)": round(warm, 2),
            "failed_runs": int((table["error"].fillna("") != "").sum())}


def scaling() -> dict:
    from provisioner import InstanceCatalog, Pool
    from spotmarket.prices import load_history, to_seconds
    from revpred.protocol import ConstantRevocation
    from spottune.backends import SimBackend, SimSettings
    from spottune.evaluation import Study, assemble, get_policy
    from spotmarket import Billing, LegacyBidRevocation

    history = load_history(None)
    catalog = InstanceCatalog.load()
    pool = Pool()
    markets = pool.resolve(history, catalog)
    rev = LegacyBidRevocation(history)
    start = to_seconds("2015-05-05T00:00Z")
    rows = []
    for policy in ("spottune-1.0-none", "spot-restart"):
        for n, steps in [(4, 100), (8, 100), (16, 100), (16, 200), (16, 400), (32, 400), (64, 400)]:
            ids = [f"t{i:02d}" for i in range(n)]
            curves = {t: [{"loss": 0.01 * i + 1.0 / k} for k in range(1, steps + 1)] for i, t in enumerate(ids)}
            study = Study(name="synthetic", trial_ids=ids, configs={t: {} for t in ids}, curves=curves, metric="loss",
                          mode="min", max_steps=steps, reference_seconds_per_step={t: 30.0 for t in ids},
                          checkpoint_size_mb=100.0)
            asm = assemble(get_policy(policy), study=study, history=history, catalog=catalog, pool=pool,
                           markets=markets, revocation_model=rev, billing=Billing(), predictor=ConstantRevocation(0.0),
                           seed=0)
            t0 = time.perf_counter()
            record = SimBackend(asm.orchestrator, history, asm.revocation_model, asm.billing, study.sim_curves(),
                                lambda t: (catalog[t].vcpus, catalog[t].ecu), start, SimSettings()).run()
            wall = time.perf_counter() - t0
            events = sum(1 for r in record.log if r["kind"] == "event")
            rows.append({"policy": policy, "trials": n, "steps": steps, "events": events, "wall_s": round(wall, 4),
                         "us_per_event": round(1e6 * wall / events, 2)})
    fits = {}
    for policy in ("spottune-1.0-none", "spot-restart"):
        x = np.array([r["events"] for r in rows if r["policy"] == policy], dtype=float)
        y = np.array([r["wall_s"] for r in rows if r["policy"] == policy])
        slope = float(x @ y / (x @ x))
        r2 = 1.0 - float(np.sum((y - slope * x) ** 2) / np.sum((y - y.mean()) ** 2))
        fits[policy] = {"us_per_event": round(1e6 * slope, 2), "r2_through_origin": round(r2, 4)}
    return {"rows": rows, "fit": fits}


def main() -> None:
    result = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
              "speed": speed(), "scaling": scaling()}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    write_json(OUT, result, indent=1)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
