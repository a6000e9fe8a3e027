"""The peers given the same previous runs as stopper ``hparams``: Optuna's SHA and Hyperband with their mirrored study
seeded with the pool's runs the study did not sample, re-tuned and tested as ``bench_rungs_usd.py`` does ->
``benchmarks/results/rungs_usd_convnext_seeded.json``.

``bench_rungs_usd.py --hparams`` (``rungs_usd_convnext_hparams.json``, docs/design/earlycurve.md §8.19) compared our
pick with stopper ``hparams``, which learns from the 272 recorded ConvNeXt runs a study did not sample, against peers
that start every study with no run at all. Here every setting of the peers' grids (``SHA_GRID``, ``HB_GRID``) runs as
``optuna-<kind>-r<min_resource>-rf<rf>-seeded`` (decision ES22): the mirrored Optuna study starts with those same
previous runs as COMPLETE trials, so SHA's and Hyperband's rungs compare each new trial with them from the first
report. The protocol is §8.19's: tuning studies (seeds 100.., the tuning starts) in the stored order, the peers' pick
by ``bench_rungs_usd.pick`` (the lowest mean USD with mean top-3 ≥ 0.95), then the stored run's test studies (the
same seeds and starts). The seeded versions of the stored run's tuned peer picks are tested too (the same settings
with and without the previous runs, paired by study).

Ours is not re-run: its tuning pick and test rows are the stored run's. Those rows were run with the provisioning of
2026-11-27 (the refund objective with hourly hops), which is ``--provisioning refund-hop`` today, so every new row
runs with it; before anything else one stored peer row is replayed and the run stops if it differs.

The bar, per set: the cheapest peer with mean test top-3 ≥ 0.95 among the seeded peers (``target_seeded``), and
among the seeded and the stored unseeded peers together (``target_any``); ``bench_rungs_usd.target`` computes both,
with the ratio's bootstrap interval over the test studies and exact intervals of the top-3 rates.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_seeded_peers.py [--tune-seeds 24] [--jobs 2]
[--reuse FILE]`` (ConvNeXt: 1-3 min per tuning study for the 27 settings on two loaded cores, 40 min for 24 studies, 3 min
for the test).
The rows written so far go to ``<out>.partial.json`` after every tuning study; ``--reuse`` of that file (or of a
finished run) takes its rows instead of replaying them. ``--markdown`` prints the tables from the JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, run_or_print, write_json  # noqa: E402
from bench_peer_grid import PROVISIONING, check_replay  # noqa: E402  (the stored rows' provisioning)

OUT = ROOT / "benchmarks" / "results" / "rungs_usd_convnext_seeded.json"
STORED = ROOT / "benchmarks" / "results" / "rungs_usd_convnext_hparams.json"
SUFFIX = "-seeded"


def _summary(rows: list[dict], roles: dict[str, str], ours: str) -> dict[str, dict]:
    """Per policy of one set's test ``rows``: means, role and ours' paired USD difference (``bench_rungs_usd.run``)."""
    from bench_rungs_usd import METRICS

    by: dict[str, list[dict]] = {}
    for r in rows:
        by.setdefault(r["policy"], []).append(r)
    base = {(r["seed"], r["start"]): r["cost_usd"] for r in by[ours]}
    out = {}
    for policy, rs in by.items():
        x = {m: np.array([r[m] for r in rs]) for m in METRICS}
        diff = np.array([base[(r["seed"], r["start"])] - r["cost_usd"] for r in rs])
        out[policy] = {"n": len(rs), "errors": sum(bool(r["error"]) for r in rs), "role": roles[policy],
                       **{m: float(np.nanmean(v)) for m, v in x.items()},
                       "cost_usd_sd": float(np.std(x["cost_usd"], ddof=1)),
                       "ours_cost_ratio": float(np.nanmean(list(base.values())) / np.nanmean(x["cost_usd"])),
                       "ours_minus_this_usd": float(diff.mean()),
                       "ours_minus_this_se": float(diff.std(ddof=1) / np.sqrt(len(diff)))}
    return out


def run(args) -> dict:
    from bench_rungs_usd import BUILTIN_GRID, HB_GRID, SHA_GRID, _means, _rows, pick, target

    stored = json.loads(args.stored.read_text())
    reuse = {}
    for path in args.reuse:
        old = json.loads(path.read_text())
        for r in old.get("tuning_rows", []) + old.get("rows", []):
            reuse[(r["workload"], r["seed"], r["start"], r["policy"])] = r
    tune_all = list(dict.fromkeys((r["seed"], r["start"]) for r in stored["tuning_rows"]))  # in the stored order
    if args.tune_seeds > len(tune_all):
        raise SystemExit(f"--tune-seeds {args.tune_seeds}: the stored run has {len(tune_all)} tuning studies")
    tune = tune_all[:args.tune_seeds]

    def grid(workload: str) -> list[str]:  # bench_rungs_usd's grids: the built-in sets' wider one
        sha, hb = (BUILTIN_GRID, BUILTIN_GRID) if workload.startswith("builtin-") else (SHA_GRID, HB_GRID)
        return ([f"optuna-sha-r{r}-rf{rf}{SUFFIX}" for r, rf in sha]
                + [f"optuna-hyperband-r{r}-rf{rf}{SUFFIX}" for r, rf in hb])

    workloads = args.workloads.split(",")
    out = {"config": {"stored": str(args.stored.resolve().relative_to(ROOT)), "provisioning": PROVISIONING,
                      "tune_seeds": args.tune_seeds, "tuning_studies": tune, "grid": {w: grid(w) for w in workloads},
                      "jobs": args.jobs,
                      "reused_from": [str(p) for p in args.reuse], "target_top3": stored["config"]["target_top3"]},
           "picks": {}, "stored_picks": {}, "tuning": {}, "tuning_rows": [], "rows": [], "summary": {},
           "target_seeded": {}, "target_any": {}}
    partial = args.out.with_suffix(".partial.json")
    for workload in workloads:
        check_replay(workload, stored)
        for seed, start in tune:
            out["tuning_rows"] += _rows(workload, seed, start, grid(workload), args.jobs, reuse=reuse, provisioning=PROVISIONING)
            write_json(partial, out, default=float)
            print(f"{workload} tuning seed {seed}: done", file=sys.stderr, flush=True)
        mine = [r for r in out["tuning_rows"] if r["workload"] == workload]
        means = _means(mine)
        out["tuning"][workload] = means
        out["picks"][workload] = {"sha": pick(means, "optuna-sha-r"), "hyperband": pick(means, "optuna-hyperband-r")}
        # the unseeded peers' picks on the same tuning studies (the stored run's, when they are all of them)
        old = _means([r for r in stored["tuning_rows"] if r["workload"] == workload and (r["seed"], r["start"]) in tune
                      and r["policy"].startswith("optuna-") and r["policy"].count("-") == 3])
        out["stored_picks"][workload] = {"sha": pick(old, "optuna-sha-r"), "hyperband": pick(old, "optuna-hyperband-r"),
                                         "stored_run": stored["picks"][workload]}
        print(f"{workload}: seeded picks {out['picks'][workload]}", file=sys.stderr, flush=True)
        test_rows = [r for r in stored["rows"] if r["workload"] == workload]
        stored_roles = stored["summary"][workload]
        ours = next(p for p, v in stored_roles.items() if v["role"] == "ours")
        test = list(dict.fromkeys((r["seed"], r["start"]) for r in test_rows if r["policy"] == ours))
        peers = list(dict.fromkeys([*out["picks"][workload].values(),
                                    *(f"{stored['picks'][workload][k]}{SUFFIX}" for k in ("sha", "hyperband"))]))
        new = [r for seed, start in test
               for r in _rows(workload, seed, start, peers, args.jobs, reuse=reuse, provisioning=PROVISIONING)]
        out["rows"] += new
        write_json(partial, out, default=float)
        roles = {p: f"stored: {v['role']}" for p, v in stored_roles.items()}
        roles[ours] = "ours"
        roles.update({p: "seeded, tuned here" for p in out["picks"][workload].values()})
        for p in peers:
            roles.setdefault(p, "seeded, the stored run's tuned pick")
        keep = [r for r in test_rows if not r["policy"].startswith("spottune-") or r["policy"] == ours]
        summary = _summary(keep + new, roles, ours)
        out["summary"][workload] = summary
        seeded = {p: v for p, v in summary.items() if p == ours or p.endswith(SUFFIX)}
        out["target_seeded"][workload] = target(seeded, [r for r in keep + new if r["policy"] in seeded])
        out["target_any"][workload] = target(summary, keep + new)
    return out


def markdown(r: dict) -> str:
    from bench_rungs_usd import _top3_cell

    lines = []
    for workload, s in r["summary"].items():
        rows = [x for x in r["rows"] if x["workload"] == workload]
        stored = json.loads((ROOT / r["config"]["stored"]).read_text())
        rows += [x for x in stored["rows"] if x["workload"] == workload]
        lines += [f"**{workload}** (test studies of {r['config']['stored']}; seeded peers tuned on "
                  f"{r['config']['tune_seeds']} studies: {', '.join(f'{k} {v}' for k, v in r['picks'][workload].items())}; "
                  f"unseeded on the same studies: sha {r['stored_picks'][workload]['sha']}, hyperband "
                  f"{r['stored_picks'][workload]['hyperband']})", "",
                  "| policy | role | USD (mean ± sd) | JCT h | steps | top-3 (studies; exact 95 % interval) | regret | "
                  "ours ÷ this (USD) | ours − this, paired USD |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for policy, v in sorted(s.items(), key=lambda kv: kv[1]["cost_usd"]):
            lines.append(f"| {policy} | {v['role']} | {v['cost_usd']:.3f} ± {v['cost_usd_sd']:.3f} | {v['jct_h']:.2f} | "
                         f"{v['steps_executed']:.0f} | {_top3_cell(rows, policy)} | {v['regret']:.4f} | "
                         f"{v['ours_cost_ratio']:.2f} | {v['ours_minus_this_usd']:+.3f} ± {v['ours_minus_this_se']:.3f} |")
        lines.append("")
        for name, key in (("seeded peers", "target_seeded"), ("seeded and unseeded peers", "target_any")):
            for role, t in r[key].get(workload, {}).items():
                ci = t.get("ratio_ci95") or [float("nan")] * 2
                lines.append(f"- bar among the {name}: {t['peer']} {t['peer_cost_usd']:.3f} USD; {role} ({t['policy']}) "
                             f"{t['cost_usd']:.3f} USD: ratio {t['ratio']:.2f} (95 % interval {ci[0]:.2f}-{ci[1]:.2f}, "
                             f"studies resampled); target met: {'yes' if t['met'] else 'no'}")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stored", type=Path, default=STORED,
                    help="bench_rungs_usd.py's JSON whose tuning studies, ours' pick and test rows are used")
    ap.add_argument("--workloads", default="opda-convnext")
    ap.add_argument("--tune-seeds", type=int, default=24, help="the first n tuning studies of the stored run")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--reuse", type=Path, action="append", default=[],
                    help="a JSON of an earlier run of this bench (or its .partial.json) whose rows are taken instead "
                         "of replayed; repeatable")
    ap.add_argument("--markdown", action="store_true", help="print the tables from the JSON and exit")
    args = ap.parse_args(argv)
    for path in [args.stored, *args.reuse]:
        if not args.markdown and not path.is_file():
            ap.error(f"{path}: no such file")
    if args.tune_seeds < 1:
        ap.error("--tune-seeds must be >= 1")
    return run_or_print(args, run, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
