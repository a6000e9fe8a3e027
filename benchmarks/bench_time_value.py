"""The refund objective's value of time, chosen on tuning starts: ``benchmarks/results/time_value.json``.

``spottune-0.7`` (refund objective, ``auto`` predictor, θ 0.7) is run with
``RefundStepCost.time_value_usd_per_hour = v`` set on the built provisioner (bench_curse's machinery:
:func:`bench_curse.run_one`, the same replays as ``benchmarks/bench_cost.py``), each paired with the v = 0 run
of the same start. The reference policies of the cost targets (``spot-restart`` and ``spot-restart-failover``
in modern mode, ``single-cheapest`` in legacy) come from bench_cost's table of the same starts and seed
(``benchmarks/results/cost_tuning_runs/`` for the tuning starts, ``cost_runs/`` for the evaluation starts;
run ``bench_cost.py [--tuning] --policies spot-restart,spot-restart-failover`` first where they are missing).
A ratio is the larger of the ratios to the references (the target must hold against each).

The rule, fixed in docs/design/evaluation.md before any run on an evaluation start: on the 18 tuning starts of
digits-mlp modern, choose the smallest v of :data:`GRID` whose mean JCT ÷ the reference's mean JCT ≤ 0.5 with
cost ÷ the reference's ≤ 0.8 and top-3 = 1 on every start; if none meets both, the v (with top-3 = 1 on every
start) with the smallest ``max(JCT ratio / 0.5, cost ratio / 0.8)``. Since design E12 (failover) the rows are
measured afresh (the earlier ones are in git history).

``--per job`` sets the job's value of time V instead (``RefundStepCost.job_time_value_usd_per_hour``, design R11:
each trial pays V / n, n the trials still heading to its next stop), on :data:`GRID_JOB`. Its rule, fixed in
docs/design/evaluation.md before any run on an evaluation start (:func:`choose_job`): on the 18 tuning starts of digits-mlp,
the smallest V that meets both legacy targets (cost ≤ 0.5x and JCT ≤ 0.5x single-cheapest) with top-3 = 1 on every
start, and in modern mode keeps the targets that v = 0 meets there (cost ≤ 0.8x both spot-restarts, JCT ≤ 0.5x
``spot-restart``) with top-3 = 1 on every start; if no V does, 0 (off).

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_time_value.py --starts tuning|evaluation
[--per trial|job] [--values JSON] [--workload w] [--mode legacy|modern] [--jobs 2]``; rows go to
``benchmarks/results/time_value_runs/<set>-<workload>-<mode>.csv`` (a rerun only runs the missing (setting, start)
pairs); the summary to the JSON's ``<set>-<workload>-<mode>`` (``-job`` appended with ``--per job``).
"""

from __future__ import annotations

import argparse
import json
import math
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import bench_cost
import bench_curse
from _common import write_json  # noqa: E402  (benchmarks/ is the script's folder: results JSONs carry their provenance)

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "time_value.json"
RUNS = ROOT / "benchmarks" / "results" / "time_value_runs"
#: Values of time tried on the tuning starts, USD per trial-hour (0 = today's dollars-only objective).
GRID = [0.0, 0.003, 0.005, 0.01, 0.03, 0.1, 0.3, 1.0]
#: Values of the job's time tried on the tuning starts, USD per job-hour (design R11).
GRID_JOB = [0.0, 0.01, 0.03, 0.1, 0.3, 1.0]
#: The objective's field each ``--per`` sets.
FIELD = {"trial": "time_value_usd_per_hour", "job": "job_time_value_usd_per_hour"}
#: The refund-aware provisioning work's reference policies and targets per market mode: (policies, cost ratio ≤, JCT ratio ≤). In modern
#: mode both spot-restarts (without and with failover, design E12) are references and a ratio is the larger of
#: the two (the target must hold against each).
TARGETS = {"modern": (bench_cost.RESTARTS, 0.8, 0.5), "legacy": (("single-cheapest",), 0.5, 0.5)}


def setting(v: float, mode: str, per: str = "trial") -> dict:
    """bench_curse's setting of a value of time (per trial-hour, or per job-hour with ``per="job"``) on top of the
    mode's default provisioner (v = 0: the default): in legacy mode the calibrated predictor's ceiling on p (design
    R6), which bench_curse's ``{}`` switches off."""
    from spottune.compose import CALIBRATED_P_CAP

    base = {"p_cap": CALIBRATED_P_CAP} if mode == "legacy" else {}
    return base if v == 0 else {**base, FIELD[per]: float(v)}


def reference(start_set: str, workload: str, mode: str) -> dict:
    """bench_cost's rows of each reference policy on the same starts: policy -> DataFrame indexed by ``start``."""
    import pandas as pd

    folder = "cost_tuning_runs" if start_set == "tuning" else "cost_runs"
    path = ROOT / "benchmarks" / "results" / folder / f"{workload}-{mode}" / "table.csv"
    df = pd.read_csv(path) if path.exists() else None
    out = {}
    for ref in TARGETS[mode][0]:
        if df is None or ref not in set(df["policy"]):
            flag = " --tuning" if start_set == "tuning" else ""
            raise SystemExit(f"no {ref} rows in {path}: run bench_cost.py{flag} --workloads {workload} --modes {mode} "
                             f"--policies {ref}")
        out[ref] = df[df["policy"] == ref].set_index("start")
    return out


def summarise(df, refs: dict, mode: str, kind: str = "trial") -> dict:
    """Per v: means, ratios to the references on the same starts (the larger of each, and which reference it is),
    and the paired cost / JCT change to v = 0."""
    _, cost_t, jct_t = TARGETS[mode]
    base = df[df["setting"] == bench_curse._key(setting(0.0, mode))].set_index("start")
    out = {}
    for key, g in df.groupby("setting", sort=False):
        g = g.set_index("start")
        common = g.index
        for ref in refs.values():
            common = common.intersection(ref.index)
        cost, jct = float(g.loc[common, "cost_usd"].mean()), float(g.loc[common, "jct_h"].mean())
        per = {name: (float(r.loc[common, "cost_usd"].mean()), float(r.loc[common, "jct_h"].mean()))
               for name, r in refs.items()}
        cost_ref = max(per, key=lambda n: cost / per[n][0])  # the binding reference of each ratio
        jct_ref = max(per, key=lambda n: jct / per[n][1])
        rcost, rjct = per[cost_ref][0], per[jct_ref][1]
        paired = g.index.intersection(base.index)
        dc = (g.loc[paired, "cost_usd"] - base.loc[paired, "cost_usd"]).astype(float)
        dj = (g.loc[paired, "jct_h"] - base.loc[paired, "jct_h"]).astype(float)
        se = lambda d: float(d.std(ddof=1) / math.sqrt(len(d))) if len(d) > 1 else None  # noqa: E731
        v = json.loads(key).get(FIELD[kind], 0.0)
        out[str(v)] = {
            "time_value_usd_per_hour": v, "starts": int(len(common)), "cost_usd": cost, "jct_h": jct,
            "refunded_share": float(g.loc[common, "refunded_share"].mean()),
            "top3_min": float(g.loc[common, "top3"].min()),
            "reference": cost_ref, "jct_reference": jct_ref, "reference_cost_usd": rcost, "reference_jct_h": rjct,
            "ratios": {n: {"cost": cost / c, "jct": jct / j} for n, (c, j) in per.items()},
            "cost_ratio": cost / rcost, "jct_ratio": jct / rjct,
            "cost_met": bool(cost / rcost <= cost_t), "jct_met": bool(jct / rjct <= jct_t),
            "paired_cost_diff_usd": float(dc.mean()), "paired_cost_diff_se": se(dc),
            "paired_jct_diff_h": float(dj.mean()), "paired_jct_diff_se": se(dj)}
    return out


def choose(summary: dict, mode: str = "modern") -> float:
    """The rule (docs/design/evaluation.md): the smallest v meeting both targets with top-3 = 1 on every start, else
    the v (top-3 = 1 on every start) with the smallest ``max(JCT ratio / JCT target, cost ratio / cost target)``.
    """
    _, cost_t, jct_t = TARGETS[mode]
    ok = sorted((s for s in summary.values() if s["top3_min"] >= 1.0), key=lambda s: s["time_value_usd_per_hour"])
    both = [s for s in ok if s["cost_met"] and s["jct_met"]]
    if both:
        return both[0]["time_value_usd_per_hour"]
    return min(ok, key=lambda s: (max(s["jct_ratio"] / jct_t, s["cost_ratio"] / cost_t),
                                  s["time_value_usd_per_hour"]))["time_value_usd_per_hour"]


def choose_job(legacy: dict, modern: dict) -> float:
    """R11's rule (module docstring) on the tuning summaries of digits-mlp legacy and modern (``--per job``)."""
    ok = []
    for key, s in sorted(legacy.items(), key=lambda kv: kv[1]["time_value_usd_per_hour"]):
        m = modern.get(key)
        if s["time_value_usd_per_hour"] == 0 or m is None:
            continue
        if (s["cost_met"] and s["jct_met"] and s["top3_min"] >= 1.0 and m["top3_min"] >= 1.0 and m["cost_met"]
                and m["ratios"]["spot-restart"]["jct"] <= TARGETS["modern"][2]):
            ok.append(s["time_value_usd_per_hour"])
    return ok[0] if ok else 0.0


def main() -> None:
    import pandas as pd

    from spottune.evaluation import default_starts, tuning_starts
    from spottune.evaluation._runner import environment

    ap = argparse.ArgumentParser()
    ap.add_argument("--starts", choices=["tuning", "evaluation"], required=True)
    ap.add_argument("--values", default=None, help="JSON list of values of time, USD per trial-hour (default GRID)")
    ap.add_argument("--workload", default="digits-mlp")
    ap.add_argument("--mode", choices=["legacy", "modern"], default="modern")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--per", choices=sorted(FIELD), default="trial",
                    help="value of a trial's hour (R7) or of the job's, shared by the trials heading to a stop (R11)")
    args = ap.parse_args()
    grid = GRID_JOB if args.per == "job" else GRID
    values = sorted({0.0, *map(float, json.loads(args.values) if args.values else grid)})
    ref = reference(args.starts, args.workload, args.mode)
    env = environment(args.workload, 0, args.mode, None, None)
    ev = default_starts(env["history"], env["markets"], 10)
    starts = tuning_starts(ev) if args.starts == "tuning" else ev
    name = f"{args.starts}-{args.workload}-{args.mode}"
    path = RUNS / f"{name}.csv"
    done = pd.read_csv(path) if path.exists() else None
    have = set() if done is None else set(zip(done["setting"], done["start_s"]))
    tasks = [(setting(v, args.mode, args.per), i, t, args.workload, args.mode, 0) for v in values
             for i, t in enumerate(starts) if (bench_curse._key(setting(v, args.mode, args.per)), t) not in have]
    if tasks:
        RUNS.mkdir(parents=True, exist_ok=True)
        with ProcessPoolExecutor(args.jobs) as pool:
            for row in pool.map(bench_curse.run_one, tasks):  # each row saved as it comes: a killed run resumes
                new = pd.DataFrame([row])
                done = new if done is None else pd.concat([done, new], ignore_index=True)
                done.to_csv(path, index=False)
    keys = {bench_curse._key(setting(v, args.mode, args.per)) for v in values}
    df = done[done["setting"].isin(keys) & done["start_s"].isin(starts)]
    summary = summarise(df, ref, args.mode, args.per)
    results = json.loads(OUT.read_text()) if OUT.exists() else {}
    entry = name + ("-job" if args.per == "job" else "")
    results[entry] = {"policy": bench_curse.POLICY, "per": args.per, "starts": [float(s) for s in starts],
                      "values": summary}
    if args.starts == "tuning" and args.workload == "digits-mlp" and args.mode == "modern" and args.per == "trial":
        results[entry]["chosen_time_value_usd_per_hour"] = choose(summary, args.mode)
    pair = ("tuning-digits-mlp-legacy-job", "tuning-digits-mlp-modern-job")
    if args.per == "job" and all(k in results for k in pair):
        results["chosen_job_time_value_usd_per_hour"] = choose_job(*(results[k]["values"] for k in pair))
    write_json(OUT, results, indent=1)
    for s in summary.values():
        print(f"v {s['time_value_usd_per_hour']:<5g} cost {s['cost_usd']:.3f} ({s['cost_ratio']:.2f}x {s['reference']})"
              f"  JCT {s['jct_h']:.2f} h ({s['jct_ratio']:.2f}x {s['jct_reference']})  refunded {s['refunded_share']:.2f}"
              f"  top3min {s['top3_min']:.0f}  paired cost {s['paired_cost_diff_usd']:+.3f}"
              f"  JCT {s['paired_jct_diff_h']:+.2f} h")
    if "chosen_time_value_usd_per_hour" in results[entry]:
        print(f"chosen: {results[entry]['chosen_time_value_usd_per_hour']:g} USD per trial-hour")
    if args.per == "job" and args.starts == "tuning" and "chosen_job_time_value_usd_per_hour" in results:
        print(f"chosen (R11): {results['chosen_job_time_value_usd_per_hour']:g} USD per job-hour")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
