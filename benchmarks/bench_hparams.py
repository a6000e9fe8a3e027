"""Stopper ``hparams`` on the step benchmark (docs/design/earlycurve.md §8.19): ``benchmarks/results/early_stopping_hparams.json``.

The barrier family (θ barrier, and two synchronous rungs, §8.10 and §8.12) ranked at every barrier by
:class:`earlycurve.HyperparameterCurvePredictor` (the final loss from the trial's hyperparameters and its curve so far,
learned from previous runs) against the same settings ranked by the last value, on split 0 of ``bench_barrier``
(``_split0``: 80 tuning and 40 test studies of 16 trials from disjoint halves of the pool).

- **Previous runs.** Tuning studies are scored out of fold: the tuning half's curves in 5 seeded folds, each fold's
  curves predicted by a model fitted on the other four (so no curve is ranked by a model that saw it). Test studies are
  scored by one model fitted on the whole tuning half. The test half is never used for a choice.
- **Settings** (``bench_rungs_usd.our_candidates``' grid: every (θ, keep) of ``BARRIER_THETAS × BARRIER_KEEPS`` and every
  two-rung setting of ``TWO_RUNG_GRID``, rung steps ``ceil(fraction·S_max)`` as ``spottune simulate`` places them):
  mean top-3 (the returned trial among the true top 3) and cost (steps ÷ training every trial) on tuning and test.
- **Candidates** for ``bench_rungs_usd.py --hparams``: the ``K`` cheapest settings in steps with mean tuning top-3 ≥ 0.95
  under the ``hparams`` ranking, as ``spottune-<θ> --rungs … --top-k …`` rows.
- **Fewer previous runs** (``previous_runs_sensitivity``): the ``hparams`` pick's test top-3 with models fitted on 16,
  32 or 64 curves drawn from the tuning half (5 draws each), or the whole half; the cost is the pick's either way.
- **Recall** (the early-stopping work's second target): top-3 recall at θ ∈ {0.3, 0.5, 0.7, 0.9} on the test studies (the truly best
  trial among the 3 lowest scores), the model against the last value; and the guard's choice per θ.

The sets are those whose curve files record hyperparameters: opda AlexNet and ConvNeXt, and the built-in random-search
workloads (cakelab's curves are cluster settings of one configuration, so ``hparams`` does not apply there).

- **Inside simulate** (``--simulate-guard opda-convnext:0.06,0.2``): for ``bench_rungs_usd``'s 24 tuning, 20 test
  and 20 fresh test studies, the number of previous runs ``spottune simulate`` gives each (the pool's curves it did
  not sample) and at which of the USD pick's barriers the guard lets the model rank.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_hparams.py [--sets a,b] [--simulate-guard W:F1,F2]`` (about
2 minutes per set on two cores, 2 more for the simulate guard); ``--markdown`` prints the tables from the JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, run_or_print  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "early_stopping_hparams.json"
SETS = ("opda-convnext", "opda-alexnet", "builtin-digits-mlp", "builtin-logreg", "builtin-linear-svm")
TARGET_TOP3 = 0.95
K = 6
N_FOLDS = 5
RECALL_THETAS = (0.3, 0.5, 0.7, 0.9)
#: previous runs given to the model in the sensitivity check, and draws per size
SENSITIVITY_SIZES = (16, 32, 64, 1000)
SENSITIVITY_DRAWS = 5


def settings(n: int) -> dict[tuple, tuple]:
    """Rung steps ``((step, keep), ...)`` -> candidate ``(policy, rungs text or None, top_k)`` of the barrier grids."""
    from earlycurve.evaluation._barrier import BARRIER_KEEPS, BARRIER_THETAS, TWO_RUNG_GRID
    from spottune.orchestrator._config import steps_at

    out = {}
    for first, theta, keep in ([((), t, k) for t in BARRIER_THETAS for k in BARRIER_KEEPS]
                               + [(((t1, k1),), t2, k2) for t1, k1, t2, k2 in TWO_RUNG_GRID]):
        steps = tuple((steps_at(t, n), kk) for t, kk in (*first, (theta, keep)))
        if all(a[0] < b[0] for a, b in zip(steps, steps[1:])) and steps not in out:
            out[steps] = (f"spottune-{theta:g}", ",".join(f"{t:g}:{kk}" for t, kk in first) or None, keep)
    return out


def scores(pool, configs: list[dict], rows: np.ndarray, fit_rows: np.ndarray, steps: list[int], seed: int) -> dict:
    """Step -> predicted final loss of every pool curve in ``rows`` (NaN elsewhere), by a model fitted on ``fit_rows``;
    and the fitted model."""
    from spottune._early_stop import hparams_predictor

    n = pool.n_steps
    grid = np.arange(1, n + 1, dtype=float)
    model = hparams_predictor([(grid, pool.grid[r], n, configs[r]) for r in fit_rows], [s / n for s in steps], seed)
    out = {}
    for s in steps:
        out[s] = np.full(pool.grid.shape[0], np.nan)
        out[s][rows] = [model.predict_final(grid[:s], pool.grid[r, :s], n, config=configs[r]).value for r in rows]
    return out, model


def previous_runs_sensitivity(pool, configs, halves, test, rungs, seed: int) -> dict:
    """The ``hparams`` pick on the test studies with fewer previous runs: models fitted on ``N`` curves drawn from the
    tuning half (``SENSITIVITY_DRAWS`` seeded draws per N): mean test top-3 and cost, and the share of the pick's
    barriers where the guard let the model rank."""
    from earlycurve.evaluation._barrier import rungs_metrics

    if rungs is None:
        return {}
    rungs = [tuple(r) for r in rungs]
    out = {}
    for n_prev in SENSITIVITY_SIZES:
        top3, used = [], []
        for d in range(SENSITIVITY_DRAWS):
            fit = np.random.default_rng([seed, n_prev, d]).choice(halves["tuning"], size=min(n_prev, len(halves["tuning"])),
                                                                  replace=False)
            sc, model = scores(pool, configs, halves["test"], fit, [s for s, _ in rungs], seed)
            top3.append(np.mean([rungs_metrics(st, rungs, [sc[s][st.ids] for s, _ in rungs])["top3"] for st in test]))
            used.append(np.mean([model.use_model_[model.theta_model(s / pool.n_steps)] for s, _ in rungs]))
            if n_prev >= len(halves["tuning"]):
                break  # every draw is the whole half
        out[str(n_prev)] = {"test_top3_mean": float(np.mean(top3)), "test_top3_min": float(np.min(top3)),
                            "share_of_barriers_ranked_by_the_model": float(np.mean(used)), "draws": len(top3)}
    return out


def one_set(ds: str) -> dict:
    import bench_barrier as bb
    from earlycurve.evaluation._barrier import rungs_metrics
    from earlycurve.evaluation._stopping import split_pool
    from earlycurve.evaluation._datasets import CurveSet

    predictive = json.loads(bb.PREDICTIVE.read_text())
    args = SimpleNamespace(data=ROOT / "data" / "learning_curves")
    pool, tuning, test = bb._split0(ds, predictive, args)
    by_id = {c.curve_id: c.config for c in bb._curves(ds, args).curves}
    configs = [by_id[c] for c in pool.curve_ids]
    halves = split_pool(pool, predictive["config"]["seed"])
    grid = settings(pool.n_steps)
    steps = sorted({s for rungs in grid for s, _ in rungs} | {bb.barrier_step(t, pool.n_steps) for t in RECALL_THETAS})
    seed = 0
    folds = np.random.default_rng([seed, 7]).permutation(len(halves["tuning"])) % N_FOLDS
    oof = {s: np.full(pool.grid.shape[0], np.nan) for s in steps}
    for k in range(N_FOLDS):
        part, _ = scores(pool, configs, halves["tuning"][folds == k], halves["tuning"][folds != k], steps, seed)
        for s in steps:
            oof[s][halves["tuning"][folds == k]] = part[s][halves["tuning"][folds == k]]
    on_test, model = scores(pool, configs, halves["test"], halves["tuning"], steps, seed)

    def figures(studies, sc, rungs) -> dict:
        rows = [rungs_metrics(st, list(rungs), None if sc is None else [sc[s][st.ids] for s, _ in rungs]) for st in studies]
        return {m: float(np.mean([r[m] for r in rows])) for m in ("top3", "cost")}

    table = []
    for rungs, cand in grid.items():
        table.append({"rungs": [list(r) for r in rungs], "candidate": list(cand),
                      "last_value": {"tuning": figures(tuning, None, rungs), "test": figures(test, None, rungs)},
                      "hparams": {"tuning": figures(tuning, oof, rungs), "test": figures(test, on_test, rungs)}})

    def ranked(key: str) -> list[dict]:  # settings with tuning top-3 >= the target, cheapest in steps first
        return sorted((r for r in table if r[key]["tuning"]["top3"] >= TARGET_TOP3 - 1e-12),
                      key=lambda r: r[key]["tuning"]["cost"])

    by_model, by_last = ranked("hparams"), ranked("last_value")
    recall = {}
    for t in RECALL_THETAS:
        s = bb.barrier_step(t, pool.n_steps)
        hit = lambda sc: float(np.mean([st.ids[np.argmin(pool.grid[st.ids, -1])] in st.ids[np.argsort(sc[st.ids], kind="stable")[:3]]
                                        for st in test]))  # noqa: E731
        recall[str(t)] = {"last_value": hit(pool.grid[:, s - 1]), "hparams": hit(on_test[s])}
    pick = by_model[0] if by_model else None
    sensitivity = previous_runs_sensitivity(pool, configs, halves, test, pick["rungs"] if pick else None, seed)
    n = pool.n_steps
    return {"n_steps": n, "previous_runs_sensitivity": sensitivity, "n_tuning_curves": int(len(halves["tuning"])), "n_test_curves": int(len(halves["test"])),
            "guard": {f"{s / n:g}": {"uses_model": model.use_model_[model.theta_model(s / n)],
                                     "cv_recall_last_value": model.cv_recall_[model.theta_model(s / n)][0],
                                     "cv_recall_hparams": model.cv_recall_[model.theta_model(s / n)][1],
                                     "cv_gain_se": model.cv_gain_se_[model.theta_model(s / n)]} for s in steps},
            "settings": table, "pick_last_value": by_last[0] if by_last else None, "pick_hparams": pick,
            "candidates": [r["candidate"] for r in by_model[:K]], "recall": recall}


def simulate_guard(workload: str, fractions: list[float], seeds: list[int]) -> dict:
    """Inside ``spottune simulate`` (``Study.extra["previous_runs"]``: the pool's curves a study did not sample): per
    study seed, how many previous runs it has and at which barrier fractions the guard lets the model rank."""
    from spottune._early_stop import hparams_predictor
    from spottune.evaluation._studies import load_study

    out = {}
    for seed in seeds:
        study = load_study(workload, seed)
        previous = study.extra["previous_runs"]
        model = hparams_predictor(previous, fractions, seed, {k for c in study.configs.values() for k in c})
        out[str(seed)] = {"previous_runs": len(previous), "uses_model": {f"{t:g}": model.use_model_[t] for t in model.thetas}}
    used = {f"{t:g}": sum(v["uses_model"][f"{t:g}"] for v in out.values()) for t in fractions}
    return {"workload": workload, "fractions": fractions, "studies": len(seeds), "studies_where_the_model_ranks": used,
            "per_study": out}


def run(args) -> dict:
    out = {}
    for ds in args.sets.split(","):
        print(f"{ds} ...", file=sys.stderr, flush=True)
        out[ds] = one_set(ds)
    result = {"config": {"split": 0, "target_top3": TARGET_TOP3, "k_candidates": K, "n_folds": N_FOLDS,
                         "recall_thetas": RECALL_THETAS}, "datasets": out}
    if args.simulate_guard:
        workload, fractions = args.simulate_guard.split(":")
        seeds = [*range(100, 124), *range(0, 40)]  # bench_rungs_usd's tuning studies, its test and its fresh ones
        result["simulate_guard"] = simulate_guard(workload, [float(f) for f in fractions.split(",")], seeds)
    return result


def markdown(r: dict) -> str:
    lines = ["| set | ranking | pick (tuning) | tuning top-3 | tuning cost | test top-3 | test cost |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for ds, d in r["datasets"].items():
        for key in ("last_value", "hparams"):
            p = d[f"pick_{key}"]
            if p is None:
                lines.append(f"| {ds} | {key} | none at top-3 ≥ 0.95 | | | | |")
                continue
            c = p["candidate"]
            name = f"{c[0]}{f' --rungs {c[1]}' if c[1] else ''} --top-k {c[2]}"
            lines.append(f"| {ds} | {key} | `{name}` | {p[key]['tuning']['top3']:.3f} | {p[key]['tuning']['cost']:.3f} | "
                         f"{p[key]['test']['top3']:.3f} | {p[key]['test']['cost']:.3f} |")
    lines += ["", "| set | pick of hparams | " + " | ".join(f"top-3 with {k} previous runs (model's share of barriers)"
                                                        for k in ("16", "32", "64", "all")) + " |",
              "| --- | --- |" + " --- |" * 4]
    for ds, d in r["datasets"].items():
        sens = d.get("previous_runs_sensitivity") or {}
        if sens:
            cells = [f"{v['test_top3_mean']:.3f} ({v['share_of_barriers_ranked_by_the_model']:.2f})" for v in sens.values()]
            lines.append(f"| {ds} | {d['pick_hparams']['rungs']} | " + " | ".join(cells) + " |")
    lines += ["", "| set | θ | top-3 recall, last value | top-3 recall, hparams | model used at θ |", "| --- | --- | --- | --- | --- |"]
    for ds, d in r["datasets"].items():
        for t, v in d["recall"].items():
            g = d["guard"].get(f"{float(t):g}", {})
            lines.append(f"| {ds} | {t} | {v['last_value']:.3f} | {v['hparams']:.3f} | {g.get('uses_model', '')} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--simulate-guard", default="",
                    help="WORKLOAD:F1,F2: also record, for bench_rungs_usd's 64 studies of WORKLOAD, where the guard lets "
                         "the model rank at those barrier fractions with the previous runs simulate gives it")
    ap.add_argument("--markdown", action="store_true")
    return run_or_print(ap.parse_args(argv), run, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
