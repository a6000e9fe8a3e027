"""The calibrated predictor's disk cache (design P6): training against loading, each in a fresh process ->
``benchmarks/results/predictor_cache.json``.

What a new ``spottune run`` / ``spottune simulate`` process pays for the default predictor: the default pool of the
2015 us-east-1 trace, the 28 days before the default start (2015-05-05, ``CALIBRATED_HISTORY_DAYS``), seed 0.
``cold`` runs ``spottune.compose.calibrated_predictor`` with an empty ``$SPOTTUNE_CACHE`` (it trains and writes the
entry), ``warm`` the same call in another fresh process on the filled cache (it imports skops and loads). Each
timing covers the call only (the price data and the project are imported before), so skops' import is counted in
``warm``. Cold and warm alternate, ``--repeats`` times each, in the same run; the ratio is of the medians. The warm
answers are checked to equal the cold ones bit for bit on a grid of queries.

Run: ``.venv/bin/python benchmarks/bench_predictor_cache.py [--repeats 3]`` (about 1.5 min on two cores);
``--markdown`` prints the table from the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, run_or_print  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "predictor_cache.json"
START = "2015-05-05T00:00Z"

#: One measurement, in a fresh interpreter: seconds of the call, and a digest of its answers.
_CHILD = """
import hashlib, json, time
import numpy as np
from spotmarket.prices import to_seconds
from spottune.compose import CALIBRATED_HISTORY_DAYS, DAY_S, build_market, calibrated_predictor
market = build_market(None, market_mode="legacy", seed=0)
hi = to_seconds({start!r}); lo = hi - CALIBRATED_HISTORY_DAYS * DAY_S
t0 = time.perf_counter()
pred = calibrated_predictor(market, lo, hi, 0)
seconds = time.perf_counter() - t0
ms = [m for m in market.markets for _ in range(4)]
t = np.full(len(ms), hi + 3600.0)
b = np.array([market.history[m].price_at(hi + 3600.0) + d for m in market.markets for d in (0.0, 0.001, 0.01, 0.1)])
p = pred.predict_proba(ms, t, b)
print(json.dumps({{"seconds": seconds, "digest": hashlib.sha256(p.tobytes()).hexdigest(), "markets": len(market.markets)}}))
"""


def _measure(cache: str) -> dict:
    env = {**os.environ, "SPOTTUNE_CACHE": cache, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", _CHILD.format(start=START)], env=env, check=True, capture_output=True,
                         text=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(args) -> dict:
    cold, warm = [], []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as cache:
            cold.append(_measure(cache))
            warm.append(_measure(cache))
    digests = {r["digest"] for r in cold + warm}
    c, w = statistics.median(r["seconds"] for r in cold), statistics.median(r["seconds"] for r in warm)
    return {"config": {"start": START, "repeats": args.repeats, "markets": cold[0]["markets"], "cpus": os.cpu_count()},
            "cold_s": [r["seconds"] for r in cold], "warm_s": [r["seconds"] for r in warm],
            "cold_median_s": c, "warm_median_s": w, "warm_over_cold": w / c, "same_answers": len(digests) == 1}


def markdown(r: dict) -> str:
    return "\n".join([
        f"Calibrated predictor, {r['config']['markets']} markets, 28 days before {r['config']['start']}, "
        f"{r['config']['repeats']} fresh processes each (medians):", "",
        "| call | seconds | ÷ cold |", "| --- | --- | --- |",
        f"| cold (train, write the entry) | {r['cold_median_s']:.2f} | 1.00 |",
        f"| warm (import skops, load) | {r['warm_median_s']:.2f} | {r['warm_over_cold']:.2f} |", "",
        f"Same answers cold and warm: {'yes' if r['same_answers'] else 'NO'}.", ""])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--markdown", action="store_true", help="print the table from the JSON and exit")
    return run_or_print(ap.parse_args(argv), run, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
