"""ConvNeXt's early first rungs on the step benchmark (docs/design/earlycurve.md §8.17): ``benchmarks/results/convnext_rungs.json``.

§8.17 added settings with a first rung at 2 steps to ours' candidates in ``bench_rungs_usd.py`` after §8.16's miss.
This asks the step benchmark's 80 split-0 tuning studies of ``opda-convnext`` (``bench_barrier._split0``, last-value
ranking at each rung, ``earlycurve.evaluation._stoppers.rung_steps``) two questions:

- how accurate are those settings there (top-3: the returned trial among the true top 3)?
- would ranking ours' candidates by **compute time** instead of steps have found them? A trial trained s of n grid
  steps costs s/n of its recorded training time (opda: the curve's last ``time``), and a study's time cost is the time
  its trials trained over the time of training them all; the step cost is the same with every trial's time equal.
- could rungs in compute time (every trial judged after the same seconds, so a slow trial after fewer steps) be
  cheaper at the same accuracy? Only if the slow trials are not the good ones: ``time_vs_final`` gives the Spearman
  correlation of a trial's recorded time with its final loss over the pool, and the share of tuning studies whose
  best trial is among the slower half of its study.

Run: ``.venv/bin/python benchmarks/bench_convnext_rungs.py`` (about 10 s).
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, write_json  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "convnext_rungs.json"
SET = "opda-convnext"
K = 6  # bench_rungs_usd.K_CANDIDATES
TARGET_TOP3 = 0.95
#: §8.17's settings as (grid step, keep) rungs of 50 steps, the last one θ's with its top-k
ADDED = {"spottune-0.3 --rungs 0.04:8,0.1:4 --top-k 2": ((2, 8), (5, 4), (15, 2)),
         "spottune-0.2 --rungs 0.04:6 --top-k 2": ((2, 6), (10, 2)),
         "spottune-0.2 --rungs 0.04:8 --top-k 2": ((2, 8), (10, 2)),
         "spottune-0.2 --rungs 0.1:6 --top-k 2 (§8.16's pick)": ((5, 6), (10, 2))}


def recorded_seconds(curve_ids) -> np.ndarray:
    """Each pool curve's recorded training time (the last point's ``time``), seconds, in the order of ``curve_ids``."""
    from spottune.evaluation._studies import RECORDED, learning_curves_dir

    with gzip.open(learning_curves_dir() / RECORDED[SET][0], "rt") as fh:
        recs = [json.loads(line) for line in fh if line.strip()]
    if not all("iteration" in r for r in recs):  # load_opda falls back to the line number, which this does not
        raise SystemExit(f"{RECORDED[SET][0]}: a record without 'iteration'")
    total = {f"{SET}#{r['iteration']}": r["learning_curve"][-1].get("time") for r in recs if r.get("learning_curve")}
    return np.array([float(total[c]) for c in curve_ids])


def main() -> None:
    import bench_barrier as bb
    from earlycurve.evaluation._barrier import BARRIER_KEEPS, BARRIER_THETAS, TWO_RUNG_GRID
    from earlycurve.evaluation._stoppers import rung_steps
    from spottune.orchestrator._config import steps_at

    n = bb.SETS[SET][1]
    pool, tuning, _ = bb._split0(SET, json.loads(bb.PREDICTIVE.read_text()),
                                 SimpleNamespace(data=ROOT / "data" / "learning_curves"))
    seconds = recorded_seconds(pool.curve_ids)

    def figures(rungs) -> dict:
        m = bb._mean(bb.rung_rows(tuning, list(rungs)))
        time_cost = np.mean([(seconds[st.ids] * rung_steps(st, list(rungs))).sum() / (n * seconds[st.ids].sum())
                             for st in tuning])
        return {"rungs": [list(r) for r in rungs], "top3": m["top3"], "step_cost": m["cost"], "time_cost": float(time_cost)}

    settings = [((), t, k) for t in BARRIER_THETAS for k in BARRIER_KEEPS]
    settings += [(((t1, k1),), t2, k2) for t1, k1, t2, k2 in TWO_RUNG_GRID]
    grid = {}
    for first, theta, keep in settings:  # bench_rungs_usd.our_candidates' grid, each distinct rung steps once
        rungs = tuple((steps_at(t, n), kk) for t, kk in (*first, (theta, keep)))
        if all(a[0] < b[0] for a, b in zip(rungs, rungs[1:])) and rungs not in grid:
            grid[rungs] = figures(rungs)
    ok = [v for v in grid.values() if v["top3"] >= TARGET_TOP3 - 1e-12]
    by_steps = sorted(ok, key=lambda v: v["step_cost"])[:K]
    by_time = sorted(ok, key=lambda v: v["time_cost"])[:K]
    from scipy.stats import spearmanr

    final = pool.grid[:, -1]
    slow_best = [seconds[st.ids][np.argmin(final[st.ids])] >= np.median(seconds[st.ids]) for st in tuning]
    out = {"set": SET, "tuning_studies": len(tuning), "n_steps": n,
           "time_vs_final": {"spearman": float(spearmanr(seconds, final).statistic), "n_curves": int(final.size),
                             "best_in_slower_half": float(np.mean(slow_best))},
           "added_settings": {name: figures(r) for name, r in ADDED.items()},
           "cheapest_by_steps": by_steps, "cheapest_by_time": by_time,
           "same_candidates": sorted(map(str, (v["rungs"] for v in by_steps))) == sorted(map(str, (v["rungs"] for v in by_time)))}
    write_json(OUT, out, indent=1)
    print(json.dumps(out["added_settings"], indent=1), "\nsame candidates by time as by steps:", out["same_candidates"])
    print("recorded time against final loss:", out["time_vs_final"])
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
