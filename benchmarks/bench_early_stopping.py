"""Early stopping against SHA/ASHA/Hyperband/Median/Wilcoxon at their best, on recorded curves.

Writes ``benchmarks/results/early_stopping.json`` and prints the markdown table of
``docs/design/earlycurve.md`` §"Against SHA/ASHA at their best". Usage (from the project root)::

    .venv/bin/python benchmarks/bench_early_stopping.py [--data data/learning_curves] [--tuning 20]
        [--test 20] [--size 16] [--workers 4] [--seed 0] [--datasets opda-alexnet,...] [--quick]

Per data set (``earlycurve.evaluation._stopping`` documents the grid, the studies and the metrics):
every method is replayed on TUNING studies for each setting of its grid; the setting reported is
chosen on the tuning studies only (:func:`choose_best`: cheapest with mean top-3 ≥ 0.95, else most
accurate), and reported on the TEST studies (disjoint configurations). Library defaults are reported
too. Methods:

- ``asha`` (Ray's rule, reimplemented), ``sha``, ``hyperband``, ``median``, ``wilcoxon`` (real Optuna);
- ``full`` (train everything), ``earlycurve-paper`` (θ 0.7, keep 3, EarlyCurve paper settings),
  ``last-value@0.7`` (same cost), ``last-value-oneshot`` (θ and keep chosen on tuning);
- ``ours-last`` / ``ours-ensemble``: the rank-confidence rule with last value / the Domhan ensemble as
  the point prediction (bias and σ per rung measured on the tuning configurations);
  ``ours-neighbours10`` / ``ours-neighbours25``: μ and σ per trial from the 10 / 25 most similar
  tuning curves (:class:`NeighbourBeliefs`). Rungs, ε and a σ scale (0 = deterministic) chosen on
  tuning; ``ours`` is the best of these on tuning (same criterion as the peers).

Also ``predictor_recall``: on the test studies, share where the true best is among the predicted
top-3 at each rung, for last value, the ensemble and EarlyCurve (paper).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
import optuna

from earlycurve import EarlyCurve, ParametricEnsemble
from earlycurve.evaluation import find_datasets
from earlycurve.evaluation._stoppers import (
    ASHAStopper,
    BeliefTable,
    NeighbourBeliefs,
    OptunaStopper,
    RankConfidenceStopper,
    asha_rungs,
    one_shot_steps,
)
from earlycurve.evaluation._stopping import (
    Stopper,
    StudyPool,
    choose_best,
    evaluate_stopper,
    sample_studies,
    split_pool,
    study_metrics,
    summarize,
    tune_and_report,
)

from _common import write_json  # noqa: E402  (benchmarks/ is the script's folder: results JSONs carry their provenance)

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "early_stopping.json"
#: data set -> progress steps of its grid (opda: as spottune.evaluation._studies.RECORDED_STEPS; cakelab:
#: its 16 recorded points after step 0).
N_STEPS = {"opda-alexnet": 50, "opda-convnext": 50, "cakelab-resnet32": 16}
RF = (2, 3, 4)
RUNG_SETS = ((0.05, 0.1, 0.2), (0.05, 0.1, 0.2, 0.4), (0.1, 0.2, 0.4, 0.7), (0.1, 0.3, 0.5, 0.7), (0.2, 0.4, 0.7),
             (0.3, 0.5, 0.7))
EPSILONS = (0.01, 0.05, 0.1, 0.2, 0.3, 0.5)
SIGMA_SCALES = (0.0, 0.1, 0.25, 0.5, 1.0)  # 0: deterministic (ε then does not matter; run once)
NEIGHBOURS = (10, 25)
TARGET = 0.95


def _resources(n_steps: int) -> list[int]:
    return sorted({r for r in (1, 2, 3, 5, 8, 12, 16) if r < n_steps // 2} | {max(1, n_steps // 8)})


def _rungs(fracs, n_steps: int) -> tuple[int, ...]:
    return tuple(sorted({min(n_steps - 1, max(1, int(round(f * n_steps)))) for f in fracs}))


def peer_grids(n_steps: int) -> dict[str, dict[str, callable]]:
    """Method -> setting name -> stopper factory; the first setting of each is the library default."""
    R = n_steps
    res = _resources(R)
    P = optuna.pruners
    grids: dict[str, dict] = {}

    def sha_every(min_r, rf):
        steps = {int(min_r * rf**k) for k in range(12)} | {R}
        return lambda s: s in steps

    grids["asha"] = {"default grace_period=1 rf=4": lambda: ASHAStopper(R)}
    grids["sha"] = {"default min_resource=auto rf=4": lambda: OptunaStopper(lambda: P.SuccessiveHalvingPruner())}
    grids["hyperband"] = {"default min_resource=1 max_resource=auto rf=3": lambda: OptunaStopper(lambda: P.HyperbandPruner())}
    for r in res:
        for rf in RF:
            grids["asha"][f"grace_period={r} rf={rf}"] = lambda r=r, rf=rf: ASHAStopper(R, r, rf)
            grids["sha"][f"min_resource={r} rf={rf}"] = lambda r=r, rf=rf: OptunaStopper(
                lambda: P.SuccessiveHalvingPruner(min_resource=r, reduction_factor=rf), sha_every(r, rf))
            grids["hyperband"][f"min_resource={r} max_resource={R} rf={rf}"] = lambda r=r, rf=rf: OptunaStopper(
                lambda: P.HyperbandPruner(min_resource=r, max_resource=R, reduction_factor=rf))
    grids["median"] = {"default n_startup_trials=5 n_warmup_steps=0": lambda: OptunaStopper(lambda: P.MedianPruner())}
    for st in (3, 5):
        for w in sorted({int(f * R) for f in (0.1, 0.2, 0.3, 0.5)}):
            grids["median"][f"n_startup_trials={st} n_warmup_steps={w}"] = lambda st=st, w=w: OptunaStopper(
                lambda: P.MedianPruner(n_startup_trials=st, n_warmup_steps=w))
    grids["wilcoxon"] = {"default p_threshold=0.1 n_startup_steps=2": lambda: OptunaStopper(lambda: P.WilcoxonPruner())}
    for p in (0.05, 0.2):
        grids["wilcoxon"][f"p_threshold={p} n_startup_steps=2"] = lambda p=p: OptunaStopper(lambda: P.WilcoxonPruner(p_threshold=p))
    return grids


def _one_shot(studies, score_fn, at_step: int, keep: int) -> list[dict]:
    rows = []
    for s in studies:
        scores = np.array([score_fn(int(i), at_step) for i in s.ids])
        rows.append(study_metrics(s, one_shot_steps(s, scores, at_step, keep)))
    return rows


def run_dataset(curve_set, n_steps: int, args) -> dict:
    t0 = time.time()
    pool = StudyPool.from_curves(curve_set, n_steps)
    tuning, test = sample_studies(pool, n_tuning=args.tuning, n_test=args.test, size=args.size, seed=args.seed)
    halves = split_pool(pool, args.seed)
    out = {"n_curves": int(pool.grid.shape[0]), "n_steps": n_steps, "counts": curve_set.counts, "methods": {}}
    W = args.workers
    # peers
    for method, grid in peer_grids(n_steps).items():
        if args.quick:
            grid = dict(list(grid.items())[:4])
        ts = time.time()
        out["methods"][method] = tune_and_report(grid, tuning, test, workers=W, target_top3=TARGET)
        print(f"  {method}: {len(grid)} settings, {time.time() - ts:.0f} s", flush=True)
    # baselines
    full = summarize(evaluate_stopper(test, Stopper, W))
    out["methods"]["full"] = {"best": {"setting": "train every trial to the end", "test": full}}
    m07 = int(round(0.7 * n_steps))
    ec = EarlyCurve(n_steps)
    ec_cache: dict = {}

    def ec_score(i, at):
        if (i, at) not in ec_cache:
            ec_cache[i, at] = ec.predict_final(np.arange(1, at + 1, dtype=float), pool.grid[i, :at], n_steps).value
        return ec_cache[i, at]

    def lv_score(i, at):
        return pool.grid[i, at - 1]

    out["methods"]["earlycurve-paper"] = {"best": {"setting": "theta=0.7 keep=3 (paper settings)",
                                                   "test": summarize(_one_shot(test, ec_score, m07, 3))}}
    out["methods"]["last-value@0.7"] = {"best": {"setting": "theta=0.7 keep=3", "test": summarize(_one_shot(test, lv_score, m07, 3))}}
    lv_grid = {f"theta={f} keep={k}": (int(round(f * n_steps)), k) for f in (0.1, 0.2, 0.3, 0.5, 0.7, 0.9) for k in (1, 2, 3, 4, 6, 8)}
    lv_tuned = {name: summarize(_one_shot(tuning, lv_score, at, k)) for name, (at, k) in lv_grid.items()}
    lv_best = choose_best(lv_tuned, target_top3=TARGET)
    out["methods"]["last-value-oneshot"] = {"best": {"setting": lv_best, "tuning": lv_tuned[lv_best],
                                                     "test": summarize(_one_shot(test, lv_score, *lv_grid[lv_best]))}}
    # ours
    all_rungs = sorted({r for fr in RUNG_SETS for r in _rungs(fr, n_steps)})
    ens = ParametricEnsemble()
    points = {
        "last": lambda head, R: float(head[-1]),
        "ensemble": lambda head, R: ens.predict_final(np.arange(1, head.size + 1, dtype=float), head, R).value,
    }
    tables = {}
    for pname, fn in points.items():
        ts = time.time()
        tables[pname] = BeliefTable(pool.grid, fn, all_rungs, halves["tuning"])
        print(f"  beliefs {pname}: {time.time() - ts:.0f} s", flush=True)
    for nn in NEIGHBOURS:
        tables[f"neighbours{nn}"] = NeighbourBeliefs(pool.grid, all_rungs, halves["tuning"], n_neighbours=nn)
    ours_tuned = {}
    for pname, table in tables.items():
        ts = time.time()
        grid = {}
        for fr in RUNG_SETS:
            rungs = _rungs(fr, n_steps)
            for eps in EPSILONS:
                for sc in SIGMA_SCALES if eps == EPSILONS[-1] else SIGMA_SCALES[1:]:
                    grid[f"predictor={pname} rungs={list(rungs)} eps={eps} sigma_scale={sc}"] = (
                        lambda table=table, rungs=rungs, eps=eps, sc=sc: RankConfidenceStopper(
                            table, rungs, eps, k=3, sigma_scale=sc, seed=args.seed))
        res = tune_and_report(grid, tuning, test, workers=W, target_top3=TARGET)
        out["methods"][f"ours-{pname}"] = res
        ours_tuned[pname] = res["best"]["tuning"]
        print(f"  ours-{pname}: {len(grid)} settings, {time.time() - ts:.0f} s", flush=True)
    pick = choose_best(ours_tuned, target_top3=TARGET)
    out["methods"]["ours"] = {"best": dict(out["methods"][f"ours-{pick}"]["best"])}
    # the chosen rungs, epsilon and sigma scale with last value as the belief (honest against last value)
    setting = out["methods"]["ours"]["best"]["setting"]
    rungs = tuple(json.loads(setting.split("rungs=")[1].split(" eps=")[0]))
    eps = float(setting.split("eps=")[1].split(" ")[0])
    sc = float(setting.split("sigma_scale=")[1])
    out["methods"]["ours-last@ours-setting"] = {"best": {
        "setting": f"predictor=last rungs={list(rungs)} eps={eps} sigma_scale={sc}",
        "test": summarize(evaluate_stopper(test, lambda: RankConfidenceStopper(tables["last"], rungs, eps, k=3, sigma_scale=sc,
                                                                                seed=args.seed), W))}}
    # predictor-level recall at each rung (test studies)
    recall = {}
    for r in all_rungs:
        row = {}
        for pname, scorer in (("last", lambda i, r=r: tables["last"].belief(i, r)[0]),
                              ("ensemble", lambda i, r=r: tables["ensemble"].belief(i, r)[0]),
                              ("neighbours25", lambda i, r=r: tables["neighbours25"].belief(i, r)[0]),
                              ("earlycurve-paper", lambda i, r=r: ec_score(i, r))):
            hits = []
            for s in test:
                scores = np.array([scorer(int(i)) for i in s.ids])
                hits.append(float(np.argmin(s.finals) in np.argsort(scores, kind="stable")[:3]))
            row[pname] = float(np.mean(hits))
        recall[f"{r / n_steps:.2f}"] = row
    out["predictor_recall_top3"] = recall
    out["seconds"] = round(time.time() - t0, 1)
    return out


PEERS = ("asha", "sha", "hyperband", "median", "wilcoxon")


def verdict(results: dict) -> dict:
    """Per data set: the best peer (chosen on tuning, like every setting: :func:`choose_best` over each
    peer's best setting) against ``ours``, on the test studies; ``cost_ratio`` = ours / best peer."""
    out = {}
    for ds, res in results["datasets"].items():
        m = res["methods"]
        tuned = {p: m[p]["best"]["tuning"] for p in PEERS if p in m}
        if not tuned or "ours" not in m:
            continue
        peer = choose_best(tuned, target_top3=TARGET)
        tp, to = m[peer]["best"]["test"], m["ours"]["best"]["test"]
        out[ds] = {"best_peer": peer, "peer_setting": m[peer]["best"]["setting"], "ours_setting": m["ours"]["best"]["setting"],
                   "peer_test_top3": tp["top3"]["mean"], "ours_test_top3": to["top3"]["mean"],
                   "peer_test_top1": tp["top1"]["mean"], "ours_test_top1": to["top1"]["mean"],
                   "peer_test_cost": tp["cost"]["mean"], "ours_test_cost": to["cost"]["mean"],
                   "cost_ratio": to["cost"]["mean"] / tp["cost"]["mean"]}
    return out


def markdown(results: dict) -> str:
    lines = []
    if results.get("verdict"):
        lines.append("| data set | best peer (chosen on tuning) | its test top-1 / top-3 / cost | ours (chosen on tuning) | "
                     "test top-1 / top-3 / cost | cost ours ÷ peer |")
        lines.append("| --- | --- | --- | --- | --- | --- |")
        for ds, v in results["verdict"].items():
            lines.append(f"| {ds} | {v['best_peer']}: {v['peer_setting']} | {v['peer_test_top1']:.2f} / {v['peer_test_top3']:.2f} / "
                         f"{v['peer_test_cost']:.3f} | {v['ours_setting']} | {v['ours_test_top1']:.2f} / {v['ours_test_top3']:.2f} / "
                         f"{v['ours_test_cost']:.3f} | {v['cost_ratio']:.2f} |")
    for ds, res in results["datasets"].items():
        lines.append(f"\n**{ds}** ({res['n_curves']} complete curves, grid of {res['n_steps']} steps; "
                     f"{results['config']['tuning']} tuning / {results['config']['test']} test studies of "
                     f"{results['config']['size']}, {results['config']['workers']} workers)\n")
        lines.append("| method | setting (chosen on tuning) | top-1 | top-3 | regret | cost (× full) |")
        lines.append("| --- | --- | --- | --- | --- | --- |")
        for name, m in res["methods"].items():
            for label in ("default", "best"):
                if label not in m or (label == "default" and name.startswith("ours")):  # ours has no library default
                    continue
                t = m[label]["test"]
                tag = f"{name} ({label})" if "default" in m else name
                lines.append(f"| {tag} | {m[label]['setting']} | {t['top1']['mean']:.2f} | {t['top3']['mean']:.2f} | "
                             f"{t['regret']['mean']:.4f} ± {t['regret']['sd']:.4f} | {t['cost']['mean']:.3f} ± {t['cost']['sd']:.3f} |")
        lines.append("")
        lines.append("Top-3 recall of the final-loss prediction at each rung (test studies): " + "; ".join(
            f"{k}: " + ", ".join(f"{p} {v:.2f}" for p, v in row.items()) for k, row in res["predictor_recall_top3"].items()))
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT / "data" / "learning_curves")
    ap.add_argument("--tuning", type=int, default=40)
    ap.add_argument("--test", type=int, default=40)
    ap.add_argument("--size", type=int, default=16)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--datasets", default=",".join(N_STEPS))
    ap.add_argument("--quick", action="store_true", help="first 4 settings of each peer grid (smoke test)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sets = find_datasets(args.data)
    results = {"config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()} | {"target_top3": TARGET},
               "datasets": {}}
    for ds in args.datasets.split(","):
        print(ds, flush=True)
        results["datasets"][ds] = run_dataset(sets[ds], N_STEPS[ds], args)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_json(args.out, results, indent=1, default=float)
    results["verdict"] = verdict(results)
    write_json(args.out, results, indent=1, default=float)
    print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
