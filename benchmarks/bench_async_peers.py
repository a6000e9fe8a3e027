"""The asynchronous peers with fewer workers than trials: Optuna's SHA and Hyperband, **tuned and tested with 4 trials
at once** inside ``spottune simulate`` (``--max-concurrent-trials 4``, design D14), against ours as
docs/design/earlycurve.md §8.18 ran it (every trial at once) and ours with 4 workers too ->
``benchmarks/results/rungs_usd_async.json``.

With every trial launched at once an asynchronous pruner judges each trial against the others' values at the same
rung as they arrive, so the first trials to reach a rung are kept by default. With 4 workers for 16 trials the later
trials meet the rung values of the earlier ones, which is how asynchronous successive halving is meant to run (ASHA,
Li et al. 2020; Optuna with n workers; Ray Tune's ``max_concurrent_trials``).

Per set (``bench_rungs_usd.run``, the §8.16 rule at N workers, ``--provisioning refund-hop``: the provisioning §8.18's
stored rows were run with, checked by replaying one stored row, ``bench_peer_grid.check_replay``):

- **tuning at N workers**, the same rule for every method: the peers' SHA and Hyperband grids and ours' candidates on
  the 24 tuning studies, the lowest mean USD with mean top-3 >= 0.95;
- **test at N workers** on §8.18's 20 test studies: the picks, the step benchmarks' peer picks, ``optuna-sha`` and
  §8.18's own peer picks and bar (tuned with every trial at once), re-tested at N workers;
- **the bar at N workers**: the cheapest peer row tested at N workers with test top-3 >= 0.95; compared with ours at
  N workers and with §8.18's stored ours (every trial at once), USD, JCT and top-3 with its exact 95 % interval
  (``_common.rate_interval``).

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_async_peers.py --workloads opda-alexnet --out A.json``
(one set per run; tuning and test 20-40 min on two shared cores; ``--no-tune`` tests §8.18's picks at N workers
instead, a few minutes), then ``--merge A.json,B.json --out
benchmarks/results/rungs_usd_async.json``; ``--markdown`` prints the table from the JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, rate_interval, run_or_print  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "rungs_usd_async.json"
STORED = ROOT / "benchmarks" / "results" / "rungs_usd_r11_retest.json"
WORKERS = 4


def _cell(rows: list[dict], policy: str) -> dict:
    """Mean USD and JCT (hours) of ``policy``'s rows, its top-3 count and exact 95 % interval."""
    rs = [r for r in rows if r["policy"] == policy]
    hits = int(round(sum(r["pick_top3"] for r in rs)))
    return {"policy": policy, "n": len(rs), "cost_usd": float(np.mean([r["cost_usd"] for r in rs])),
            "jct_h": float(np.mean([r["jct_h"] for r in rs])), "top3_hits": hits,
            "top3_ci95": list(rate_interval(hits, len(rs)))}


def retest(ns: SimpleNamespace, stored: dict) -> dict:
    """``--no-tune``: §8.18's picks (ours, SHA, Hyperband; tuned with every trial at once) and the step benchmarks'
    peer picks and ``optuna-sha``, tested at ``ns.max_concurrent_trials`` workers on the test studies; the same keys
    as ``bench_rungs_usd.run``'s output (no tuning rows)."""
    import bench_rungs_usd as bru

    test = [(seed, bru.STARTS[seed % 2]) for seed in range(ns.test_seed0, ns.test_seed0 + ns.seeds)]
    out = {"config": {"provisioning": ns.provisioning, "max_concurrent_trials": ns.max_concurrent_trials,
                      "seeds": ns.seeds, "tune_seeds": 0, "tuned": "no: §8.18's picks re-tested"},
           "candidates": {}, "picks": {}, "tuning": {}, "tuning_rows": [], "rows": [], "target": {}}
    for w in ns.workloads.split(","):
        picks = stored["picks"][w]
        cand = stored["candidates"][w][picks["ours"]]["candidate"]
        peers = list(dict.fromkeys([picks["sha"], picks["hyperband"], *bru.SETS[w][1], "optuna-sha"]))
        rows = bru._ours_rows([(w, seed, start, tuple(cand), None, ns.provisioning, ns.max_concurrent_trials, False)
                               for seed, start in test], ns.jobs)
        rows += [x for seed, start in test for x in bru._rows(w, seed, start, peers, ns.jobs, provisioning=ns.provisioning,
                                                              max_concurrent_trials=ns.max_concurrent_trials)]
        out["picks"][w], out["candidates"][w] = picks, {picks["ours"]: stored["candidates"][w][picks["ours"]]}
        out["rows"] += rows
        out["target"][w] = {"ours": {"policy": picks["ours"]}}
    return out


def run(args) -> dict:
    import bench_rungs_usd as bru
    from bench_peer_grid import PROVISIONING, check_replay

    if args.merge:  # runs of single sets, joined; a set's --no-tune run is keyed "<set> (re-tested)"
        names = args.merge.split(",")
        parts = [json.loads(Path(f).read_text()) for f in names]

        def key(part: dict, w: str) -> str:
            return w if part["config"].get("retuned_at_workers", True) else f"{w} (re-tested)"

        stored = json.loads(args.stored.read_text())
        for part in parts:
            for w, st in part["sets"].items():
                st.update(intervals(w, st, part["rows"], stored))
        return {"config": {"parts": {Path(f).name: {**part["config"], "provenance": part.get("provenance")}
                                     for f, part in zip(names, parts)}},
                **{k: {key(part, w): v for part in parts for w, v in part[k].items()}
                   for k in ("candidates", "picks", "tuning", "sets")},
                "tuning_rows": [r for part in parts for r in part["tuning_rows"]],
                "rows": [{**r, "part": Path(f).name} for f, part in zip(names, parts) for r in part["rows"]]}

    stored = json.loads(args.stored.read_text())
    workloads = args.workloads.split(",")
    for w in workloads:
        check_replay(w, stored)
    ns = SimpleNamespace(workloads=args.workloads, seeds=args.seeds, test_seed0=0, tune_seeds=args.tune_seeds, jobs=args.jobs,
                         reuse=[], retest=[], keep_picks=False, halves=False, provisioning=PROVISIONING,
                         extra_candidates="", hparams=None,
                         max_concurrent_trials=args.workers)
    r = retest(ns, stored) if args.no_tune else bru.run(ns)
    sets = {}
    for w in workloads:
        rows = [x for x in r["rows"] if x["workload"] == w]
        studies = sorted({(x["seed"], x["start"]) for x in rows})
        before = stored["target"][w]["ours"]
        # §8.18's peer picks and bar (tuned with every trial at once), re-tested at N workers on the same studies
        again = [p for p in dict.fromkeys([before["peer"], stored["picks"][w]["sha"], stored["picks"][w]["hyperband"]])
                 if p not in {x["policy"] for x in rows}]
        new = [x for seed, start in studies for x in bru._rows(w, seed, start, again, args.jobs, provisioning=PROVISIONING,
                                                                max_concurrent_trials=args.workers)] if again else []
        r["rows"] += new
        rows += new
        peers = sorted({x["policy"] for x in rows if not x["policy"].startswith("spottune-")})
        table = {p: _cell(rows, p) for p in peers}
        ok = {p: v for p, v in table.items() if v["top3_hits"] >= bru.TARGET_TOP3 * v["n"] - 1e-9}
        bar = min(ok, key=lambda p: ok[p]["cost_usd"]) if ok else None
        ours_n = _cell(rows, r["target"][w]["ours"]["policy"])
        stored_rows = [x for x in stored["rows"] if x["workload"] == w]
        ours_all = _cell(stored_rows, before["policy"])
        bar_all = _cell(stored_rows, before["peer"])
        bar_cost = ok[bar]["cost_usd"] if bar else float("nan")
        sets[w] = {"workers": args.workers, "retuned_at_workers": not args.no_tune, "picks_at_workers": r["picks"][w], "picks_all_at_once": stored["picks"][w],
                   "retested_all_at_once_settings": again, "peers": table, "bar": bar,
                   "bar_cell": ok.get(bar), "ours_at_workers": ours_n, "ours_all_at_once": ours_all,
                   "bar_all_at_once": bar_all,
                   "ratio_ours_all_at_once": ours_all["cost_usd"] / bar_cost,
                   "ratio_ours_at_workers": ours_n["cost_usd"] / bar_cost,
                   "ratio_all_at_once_stored": before["ratio"]}
        sets[w].update(intervals(w, sets[w], rows, stored))
    r["config"] = {**r["config"], "stored": str(args.stored.relative_to(ROOT)), "workers": args.workers,
                   "retuned_at_workers": not args.no_tune}
    r["sets"] = sets
    for k in ("summary", "target"):
        r.pop(k, None)  # per-policy figures are in sets[w]["peers"]; the bar here is sets[w]["bar"]
    return r


def intervals(workload: str, s: dict, rows: list[dict], stored: dict) -> dict:
    """95 % bootstrap intervals of the two USD ratios against the bar at N workers (``_common.bootstrap_interval``,
    studies resampled, paired by study; the bar's choice taken as fixed)."""
    from _common import bootstrap_interval

    def by_seed(rs: list[dict], policy: str) -> dict:
        return {r["seed"]: r["cost_usd"] for r in rs if r["workload"] == workload and r["policy"] == policy}

    bar = by_seed(rows, s["bar"])
    out = {}
    for name, mine in (("ratio_ours_at_workers_ci95", by_seed(rows, s["ours_at_workers"]["policy"])),
                       ("ratio_ours_all_at_once_ci95", by_seed(stored["rows"], s["ours_all_at_once"]["policy"]))):
        seeds = sorted(set(mine) & set(bar))
        out[name] = list(bootstrap_interval([[mine[k], bar[k]] for k in seeds],
                                            lambda m: m[:, 0] / m[:, 1]))
    return out


def _fmt(c: dict | None) -> str:
    if not c:
        return "-"
    lo, hi = c["top3_ci95"]
    return (f"{c['policy']}: {c['cost_usd']:.3f} USD, {c['jct_h']:.1f} h, top-3 {c['top3_hits']}/{c['n']} "
            f"({lo:.2f}-{hi:.2f})")


def markdown(r: dict) -> str:
    lines = ["| set | peers' SHA and Hyperband picks, tuned at N workers (re-tested: §8.18's picks) | the bar at N workers: cheapest peer at top-3 ≥ "
             "0.95 | ours at N workers | ours, every trial at once (§8.18) | ours at once ÷ bar at N | ours at N ÷ bar "
             "at N | §8.18's ratio (all at once) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for w, s in r["sets"].items():
        p = s["picks_at_workers"]
        ci = {k: "" if k not in s else f" ({s[k][0]:.2f}-{s[k][1]:.2f})"
              for k in ("ratio_ours_all_at_once_ci95", "ratio_ours_at_workers_ci95")}
        lines.append(f"| {w.removesuffix(' (re-tested)')} (N = {s['workers']}"
                     f"{'' if s.get('retuned_at_workers', True) else ', re-tested'}) | "
                     f"{_fmt(s['peers'].get(p['sha']))}; "
                     f"{_fmt(s['peers'].get(p['hyperband']))} | {_fmt(s['bar_cell'])} | {_fmt(s['ours_at_workers'])} | "
                     f"{_fmt(s['ours_all_at_once'])} | **{s['ratio_ours_all_at_once']:.2f}**"
                     f"{ci['ratio_ours_all_at_once_ci95']} | **{s['ratio_ours_at_workers']:.2f}**"
                     f"{ci['ratio_ours_at_workers_ci95']} | {s['ratio_all_at_once_stored']:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default="opda-alexnet")
    ap.add_argument("--workers", type=int, default=WORKERS, help="trials at once (spottune simulate "
                    "--max-concurrent-trials)")
    ap.add_argument("--tune-seeds", type=int, default=24, help="tuning studies per set (24, as §8.16-§8.18)")
    ap.add_argument("--seeds", type=int, default=20, help="test studies (§8.18's first 20; fewer for a smoke run)")
    ap.add_argument("--stored", type=Path, default=STORED, help="bench_rungs_usd.py's JSON with ours' test rows")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--no-tune", action="store_true", help="test §8.18's picks at N workers instead of tuning every "
                    "method again (a set whose tuning does not fit the time)")
    ap.add_argument("--merge", default="", help="comma-separated JSONs of earlier runs (one set each): join them")
    ap.add_argument("--markdown", action="store_true", help="print the table from the JSON and exit")
    args = ap.parse_args(argv)
    if args.workers < 1:
        ap.error(f"--workers {args.workers}: must be an integer >= 1")
    return run_or_print(args, run, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
