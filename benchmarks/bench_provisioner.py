"""Benchmark: one provisioning round, 15 markets of the 2015 us-east-1 trace × 16 trials.

Target: under 50 ms per round including the prediction with the constant predictor.
Compared in the same run with a naive baseline that loops over trials and markets and calls the
predictor once per (trial, market). Both use the same max-price draws and must pick the same markets.

Usage::

    .venv/bin/python benchmarks/bench_provisioner.py [--rounds 100] [--out benchmarks/results/provisioner.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np
import pandas as pd

from _common import ROOT, TRACE, load_2015, run_times, write_json  # puts the project on sys.path

from provisioner import InstanceCatalog, Pool, Provisioner, step_cost_usd  # noqa: E402
from revpred.protocol import ConstantRevocation  # noqa: E402

N_TRIALS = 16
TARGET_MS = 50.0


def naive_round(prov: Provisioner, trial_ids, now_s: float, rng: np.random.Generator):
    """Per-trial, per-market loop: the straightforward implementation, one predictor call per pair."""
    picks = []
    for h in trial_ids:
        deltas = rng.uniform(0.00001, 0.2, size=len(prov.markets))  # same stream as MaxPriceRule
        best = None
        for j, m in enumerate(prov.markets):
            s = prov.history[m]
            if not (s.start_s <= now_s <= s.end_s):
                continue
            current = s.price_at(now_s)
            mean = s.mean_price(max(now_s - 3600.0, s.start_s), now_s)
            b = current + deltas[j]
            p = float(prov.predictor.predict_proba([m], now_s, [b])[0])
            t = prov.performance.seconds_per_step(h, m.instance_type)
            cost = step_cost_usd(p, mean, t)
            key = (cost, t, current, j)
            if best is None or key < best[0]:
                best = (key, m)
        picks.append(best[1])
    return picks


def timed(fn, repeats: int) -> list[float]:
    """Wall time of each call, milliseconds."""
    return [s * 1e3 for s in run_times(fn, repeats)[0]]


def summary(ms: list[float]) -> dict:
    s = sorted(ms)
    return {
        "median_ms": round(statistics.median(s), 3),
        "p95_ms": round(s[min(len(s) - 1, int(0.95 * len(s)))], 3),
        "min_ms": round(s[0], 3),
        "max_ms": round(s[-1], 3),
        "n": len(s),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=100, help="decision times sampled over the trace")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "provisioner.json")
    args = ap.parse_args()

    t0 = time.perf_counter()
    history, loader = load_2015()
    load_s = time.perf_counter() - t0
    catalog = InstanceCatalog.load()
    predictor = ConstantRevocation(0.3)
    trials = [f"t{i:02d}" for i in range(N_TRIALS)]

    t0 = time.perf_counter()
    prov = Provisioner(history, catalog, predictor, Pool(), np.random.default_rng(0))
    construct_ms = (time.perf_counter() - t0) * 1e3
    assert len(prov.markets) == 15, prov.markets

    # decision times: whole hours spread over the part of the trace where all 15 markets have prices
    start = max(s.start_s for s in history) + 3600.0
    hours = np.random.default_rng(1).integers(0, int((history.end_s - start) // 3600), size=args.rounds)
    times = (np.ceil(start / 3600.0) + hours) * 3600.0

    # measured T for half of the trials, so rows differ (as after the first segments)
    for k, h in enumerate(trials[: N_TRIALS // 2]):
        prov.record_segment(h, "c3.xlarge", seconds=600.0 + 10 * k, steps=1000)
        prov.record_segment(h, "g2.2xlarge", seconds=200.0 + 5 * k, steps=1000)

    prov.choose_many(trials, float(times[0]))  # warm-up (sparse tables, caches)
    it = iter(times.tolist())
    vec = timed(lambda: prov.choose_many(trials, next(it)), len(times))
    it = iter(times.tolist())
    vec_json = timed(lambda: json.dumps([c.to_dict() for c in prov.choose_many(trials, next(it))], allow_nan=False), len(times))

    it = iter(times.tolist())
    single = timed(lambda: prov.choose("t00", next(it)), len(times))

    naive_times = times[: max(5, len(times) // 5)]
    rng_n = np.random.default_rng(7)
    it = iter(naive_times.tolist())
    naive = timed(lambda: naive_round(prov, trials, next(it), rng_n), len(naive_times))

    # agreement: same draws in both implementations -> same markets
    agree = 0
    for t in naive_times.tolist():
        prov.rng = np.random.default_rng(int(t))
        v = [c.market for c in prov.choose_many(trials, t)]
        n = naive_round(prov, trials, t, np.random.default_rng(int(t)))
        agree += int(v == n)

    vec_s, naive_s = summary(vec), summary(naive)
    result = {
        "benchmark": "provisioner: one provisioning round (choose_many), 15 markets x 16 trials",
        "data": str(TRACE.relative_to(ROOT.parent)),
        "loader": loader,
        "predictor": "revpred.protocol.ConstantRevocation(0.3)",
        "objective": "eq2",
        "markets": len(prov.markets),
        "trials": N_TRIALS,
        "rounds": len(times),
        "target_ms": TARGET_MS,
        "vectorised": vec_s,
        "vectorised_with_json_explanations": summary(vec_json),
        "single_trial_choose": summary(single),
        "naive_loop": naive_s,
        "speedup_median": round(naive_s["median_ms"] / vec_s["median_ms"], 1),
        "naive_agrees_on_all_picks": agree == len(naive_times),
        "meets_target": vec_s["p95_ms"] < TARGET_MS,
        "provisioner_construct_ms": round(construct_ms, 2),
        "trace_load_s": round(load_s, 2),
        "machine": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "pandas": pd.__version__,
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_json(args.out, result, indent=2)
    print(json.dumps(result, indent=2))
    return 0 if result["meets_target"] and result["naive_agrees_on_all_picks"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
