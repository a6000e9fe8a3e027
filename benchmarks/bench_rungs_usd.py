"""Issue 13's first target in USD inside ``spottune simulate``: the stoppers chosen on tuning studies (split 0,
docs/earlycurve.md §8.10 and §8.12) against Optuna's SHA and Hyperband at their own split-0 picks, on many sampled
studies -> ``benchmarks/results/rungs_usd.json``.

A recorded study of ``spottune simulate`` is 16 configurations sampled from the recorded pool with the run's seed, so
seeds 0..n-1 give n different studies (curves that cross differently), each replayed on the 2015 us-east-1 trace
(legacy mode, the default provisioning and predictor, 120 s boot) from one of two fixed starts (even seeds the first,
odd the second), for every policy alike. The settings are not chosen here:

- ``rungs``: the one choice over predictive ASHA ∪ barrier ∪ two rungs (§8.12, ``union_split0_two_rung``): opda-alexnet
  ``--rungs 0.06:6 --theta 0.15 --top-k 2``, opda-convnext ``--rungs 0.1:6 --theta 0.2 --top-k 2``;
- ``barrier``: the same θ and top-k without the rung (§8.10's barrier pick on AlexNet);
- Optuna's ``SuccessiveHalvingPruner`` and ``HyperbandPruner`` through the real library at ``bench_predictive_stop``'s
  split-0 picks (its JSON, the same 50-step grid as S_max here), as ``optuna-sha-r<min_resource>-rf<rf>`` policies,
  and SHA at ``spottune simulate``'s own setting (``optuna-sha``: S_max // 27, rf 3). Ray Tune's ASHA, the best peer
  of the step benchmarks on these sets, has no ``spottune simulate`` policy.

``top-3`` is the step benchmarks' (the returned trial is among the true top 3), computed from the row's
``chosen_best``; ``spottune simulate``'s own ``top3`` column (the true best is among the models kept) is shown
as "true best kept": with ``--top-k 2`` it asks more than the step benchmarks do. Every policy runs on SpotTune's provisioning (market and max price), so the differences are the stoppers'. The
studies are drawn from the whole recorded pool, half of which the split-0 tuning studies drew from: a mild overlap.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_rungs_usd.py [--seeds 20] [--jobs 2]`` (about 10 min on two
cores); ``--markdown`` prints the tables from the JSON.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, run_or_print  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "rungs_usd.json"
STARTS = ("2015-05-05T00:00Z", "2015-06-20T00:00Z")
#: workload -> (ours' policy, --rungs, --top-k, the peers' policies)
SETS = {
    "opda-alexnet": ("spottune-0.15", "0.06:6", 2, ("optuna-sha-r6-rf3", "optuna-hyperband-r2-rf3", "optuna-sha")),
    "opda-convnext": ("spottune-0.2", "0.1:6", 2, ("optuna-sha-r5-rf2", "optuna-hyperband-r3-rf3", "optuna-sha")),
}
METRICS = ("cost_usd", "jct_h", "top1", "pick_top3", "top3", "regret", "steps_executed")


def run(args) -> dict:
    from spottune.cli._simulate import simulate_all
    from spottune.evaluation._studies import load_study

    rows = []
    for workload in args.workloads.split(","):
        ours, rungs, top_k, peers = SETS[workload]
        for seed in range(args.seeds):
            start, top3 = STARTS[seed % 2], load_study(workload, seed).ranking()[:3]
            for label, policies, r in (("rungs", ",".join((ours, *peers)), rungs), ("barrier", ours, None)):
                with tempfile.TemporaryDirectory() as d:
                    table = simulate_all(workload, policies, 1, "legacy", Path(d), seed=seed, jobs=args.jobs,
                                         progress=False, start_times=start, rungs=r, top_k=top_k)
                for row in table.to_dict("records"):
                    name = f"{row['policy']} --rungs {r}" if row["policy"] == ours and r else row["policy"]
                    rows.append({"workload": workload, "seed": seed, "start": start, "policy": name,
                                 "error": row["error"] if isinstance(row["error"], str) else "",
                                 "pick_top3": float(row["chosen_best"] in top3),
                                 **{m: float(row[m]) for m in METRICS if m != "pick_top3"}})
    summary = {}
    for workload in args.workloads.split(","):
        ours = f"{SETS[workload][0]} --rungs {SETS[workload][1]}"
        by = {}
        for r in rows:
            if r["workload"] == workload:
                by.setdefault(r["policy"], []).append(r)
        base = {r["seed"]: r["cost_usd"] for r in by[ours]}
        summary[workload] = {}
        for policy, rs in by.items():
            x = {m: np.array([r[m] for r in rs]) for m in METRICS}
            diff = np.array([base[r["seed"]] - r["cost_usd"] for r in rs])  # ours minus this policy, paired by study
            summary[workload][policy] = {
                "n": len(rs), "errors": sum(bool(r["error"]) for r in rs),
                **{m: float(np.nanmean(v)) for m, v in x.items()},
                "cost_usd_sd": float(np.std(x["cost_usd"], ddof=1)),
                "ours_cost_ratio": float(np.mean(list(base.values())) / np.mean(x["cost_usd"])),
                "ours_minus_this_usd": float(diff.mean()), "ours_minus_this_se": float(diff.std(ddof=1) / np.sqrt(len(diff)))}
    return {"config": {"seeds": args.seeds, "starts": list(STARTS), "market_mode": "legacy", "sets": SETS,
                       "jobs": args.jobs}, "rows": rows, "summary": summary}


def markdown(r: dict) -> str:
    lines = []
    for workload, s in r["summary"].items():
        lines += [f"**{workload}** ({r['config']['seeds']} studies, legacy)", "",
                  "| policy | USD (mean ± sd) | JCT h | steps | top-1 | top-3 (pick in the true top 3) | true best kept "
                  "| regret | ours ÷ this (USD) | ours − this, paired USD |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for policy, v in s.items():
            lines.append(f"| {policy} | {v['cost_usd']:.3f} ± {v['cost_usd_sd']:.3f} | {v['jct_h']:.2f} | "
                         f"{v['steps_executed']:.0f} | {v['top1']:.2f} | {v['pick_top3']:.2f} | {v['top3']:.2f} | {v['regret']:.4f} | "
                         f"{v['ours_cost_ratio']:.2f} | {v['ours_minus_this_usd']:+.3f} ± {v['ours_minus_this_se']:.3f} |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20, help="studies per set (seeds 0..n-1)")
    ap.add_argument("--workloads", default=",".join(SETS))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--markdown", action="store_true", help="print the tables from the JSON and exit")
    return run_or_print(ap.parse_args(argv), run, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
