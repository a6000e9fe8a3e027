"""Top-3 recall at θ of a curve predictor learned from previous runs, against the last value (issue 13).

The issue's second target: "top-3 recall of the curve predictor ≥ last value's at every θ in {0.3, 0.5,
0.7, 0.9} on every recorded set". The predictor is :class:`earlycurve.ResidualCurvePredictor` (last value +
a ridge residual learned from finished curves, shrinkage chosen by cross-validated recall on the training
pool). Same sets, grids, pool split (seed 0) and 40 TEST studies of 16 as ``bench_predictive_stop.py`` (and
its ``recall``: a study scores 1 when its truly best final is among the 3 lowest scores at step
``round(θ · n)``). Two honest protocols, both trained on TUNING curves only:

- **in-set**: trained on the set's own tuning half (a user re-tuning the same model family);
- **leave-one-family-out** (LOFO): trained on the tuning halves of the *other families* only (opda, cakelab,
  built-in; a new workload).

Three settings of the predictor (``VARIANTS``): the first design without a guard (``residual-0se``), the class
default with the one-standard-error guard (``residual``) and a fixed margin. Per cell, the paired count of test
studies won and lost against the last value. The same is repeated on 4 more pool splits (``--other-seeds``,
new halves and test studies) to show how much of a cell is the split. Also reported on the test half's curves
(split 0): the median relative error ``|ŷ − y| / y`` of the final loss, for the last value, SLAQ
(``earlycurve.SLAQ``) and both protocols; the shipped slope score's recall (``bench_predictive_stop``'s rule)
for reference. Deterministic. Writes ``benchmarks/results/curve_recall.json``::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_curve_recall.py              # about 2 min 10 s on one core
    .venv/bin/python benchmarks/bench_curve_recall.py --markdown                     # the tables of docs/earlycurve.md §8.7
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np

from earlycurve import SLAQ, ResidualCurvePredictor
from earlycurve.evaluation import StudyPool, find_datasets, sample_studies, split_pool

from _common import BUILTIN_CURVES, ROOT, run_or_print  # noqa: E402  (benchmarks/ is the script's folder)
OUT = ROOT / "benchmarks" / "results" / "curve_recall.json"
#: data set -> (family, grid steps), as bench_predictive_stop.SETS
SETS = {"opda-alexnet": ("opda", 50), "opda-convnext": ("opda", 50), "cakelab-resnet32": ("cakelab", 16),
        "builtin-digits-mlp": ("built-in", 50), "builtin-logreg": ("built-in", 50), "builtin-linear-svm": ("built-in", 50)}
BUILTIN_FILES = ("builtin_digits-mlp_curves.csv.gz", "builtin_logreg_curves.csv.gz", "builtin_linear-svm_curves.csv.gz")
THETAS = (0.3, 0.5, 0.7, 0.9)
PROTOCOLS = ("in_set", "lofo")
#: Predictor settings measured (``ResidualCurvePredictor`` keyword arguments). ``residual-0se`` is the design fixed
#: before any test result was seen; the one-standard-error guard (``residual``, the class default since) and the
#: fixed margin were added after its split-0 test results were seen (docs/earlycurve.md §8.7 says so).
VARIANTS = {"residual-0se": {"n_se": 0.0}, "residual": {}, "residual-margin0.05": {"n_se": 0.0, "margin": 0.05}}
PRIMARY = "residual"


def cut(theta: float, n: int) -> int:
    """Grid step at θ, as ``bench_predictive_stop.recall``."""
    return max(1, int(round(theta * n)))


def training(pool: StudyPool, rows: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, int]]:
    steps = np.arange(1, pool.n_steps + 1)
    return [(steps, pool.grid[i], pool.n_steps) for i in rows]


def predict_rows(model, pool: StudyPool, rows: np.ndarray, theta: float) -> np.ndarray:
    """Predicted final loss of every row at θ, shape (len(rows),)."""
    r = cut(theta, pool.n_steps)
    steps = np.arange(1, r + 1)
    return np.array([model.predict_final(steps, pool.grid[i, :r], pool.n_steps).value for i in rows])


def hits(test, score: dict[int, float], k: int = 3) -> np.ndarray:
    """Per test study, 1.0 when its truly best trial is among the ``k`` lowest scores (stable order)."""
    out = []
    for s in test:
        sc = np.array([score[int(i)] for i in s.ids])
        out.append(float(int(np.argmin(s.finals)) in np.argsort(sc, kind="stable")[:k]))
    return np.array(out)


def med_rel_err(pred: np.ndarray, final: np.ndarray) -> float:
    return float(np.median(np.abs(pred - final) / np.abs(final)))


def evaluate(pools: dict[str, StudyPool], seed: int, variants: dict[str, dict], n_test: int, errors: bool = True) -> dict:
    """Per data set: recall, paired wins/losses (and with ``errors`` the median relative errors) at each θ, for
    the last value, the slope score and every variant × protocol, with the pool split and test studies of ``seed``."""
    halves = {ds: split_pool(p, seed) for ds, p in pools.items()}
    tests = {ds: sample_studies(p, n_tuning=1, n_test=n_test, size=16, seed=seed)[1] for ds, p in pools.items()}

    def fit(names: list[str], kw: dict) -> ResidualCurvePredictor:
        curves, groups = [], []
        for ds in names:
            c = training(pools[ds], halves[ds]["tuning"])
            curves += c
            groups += [ds] * len(c)
        return ResidualCurvePredictor(random_state=seed, **kw).fit(curves, groups)

    out = {}
    slaq = SLAQ(interval="none")
    for ds, pool in pools.items():
        fam = SETS[ds][0]
        others = [d for d in pools if SETS[d][0] != fam]
        models = {f"{v}|{p}": fit([ds] if p == "in_set" else others, kw) for v, kw in variants.items() for p in PROTOCOLS}
        rows = halves[ds]["test"]
        final = pool.grid[rows, -1]
        row = {"family": fam, "n_curves": int(pool.grid.shape[0]), "n_steps": pool.n_steps, "lofo_trained_on": others,
               "alpha": {m: {f"{t:.1f}": models[m].alpha_[models[m].theta_model(cut(t, pool.n_steps) / pool.n_steps)]
                             for t in THETAS} for m in models}, "theta": {}}
        for th in THETAS:
            r = cut(th, pool.n_steps)
            last = pool.grid[rows, r - 1]
            half = pool.grid[rows, max(1, r - max(1, r // 2)) - 1]
            preds = {"last_value": last, "slope_score": last + (last - half)}
            preds |= {m: predict_rows(models[m], pool, rows, th) for m in models}
            h = {k: hits(tests[ds], dict(zip(rows.tolist(), v))) for k, v in preds.items()}
            cell = {"recall_top3": {k: float(v.mean()) for k, v in h.items()},
                    # paired against the last value over the test studies: [studies only it hits, studies only the last value hits]
                    "wins_losses": {k: [int(np.sum((v > 0) & (h["last_value"] == 0))), int(np.sum((v == 0) & (h["last_value"] > 0)))]
                                    for k, v in h.items() if k != "last_value"}}
            if errors:
                sl = np.array([slaq.predict_final(np.arange(1, r + 1), pool.grid[i, :r], pool.n_steps).value for i in rows])
                cell["median_rel_err"] = ({"last_value": med_rel_err(last, final), "slaq": med_rel_err(sl, final)}
                                          | {m: med_rel_err(preds[m], final) for m in models})
            row["theta"][f"{th:.1f}"] = cell
        row["meets_target"] = {m: all(row["theta"][f"{t:.1f}"]["recall_top3"][m] >= row["theta"][f"{t:.1f}"]["recall_top3"]["last_value"] - 1e-12
                                      for t in THETAS) for m in models}
        out[ds] = row
    return out


def run(args) -> dict:
    warnings.filterwarnings("ignore")
    sets = find_datasets(args.data, digits=[BUILTIN_CURVES / f for f in BUILTIN_FILES if (BUILTIN_CURVES / f).exists()])
    pools = {}
    for ds in args.datasets.split(","):
        if ds not in sets:
            print(f"{ds}: no curves, skipped (run benchmarks/builtin_curves.py)", flush=True)
            continue
        pools[ds] = StudyPool.from_curves(sets[ds], SETS[ds][1])
    t0 = time.time()
    out = {"config": {"test": args.test, "seed": args.seed, "thetas": THETAS, "variants": VARIANTS, "primary": PRIMARY,
                      "other_split_seeds": args.other_seeds, "families": {ds: SETS[ds][0] for ds in pools}},
           "datasets": evaluate(pools, args.seed, VARIANTS, args.test)}
    out["meets_target"] = {m: all(r["meets_target"][m] for r in out["datasets"].values())
                           for m in next(iter(out["datasets"].values()))["meets_target"]}
    print(f"split seed {args.seed}: {time.time() - t0:.0f} s", flush=True)
    out["other_splits"] = {}
    for sd in args.other_seeds:
        res = evaluate(pools, sd, VARIANTS, args.test, errors=False)
        out["other_splits"][str(sd)] = {ds: {"meets_target": row["meets_target"],
                                             "theta": {t: {k: c[k] for k in ("recall_top3", "wins_losses")} for t, c in row["theta"].items()}}
                                        for ds, row in res.items()}
        print(f"split seed {sd}: {time.time() - t0:.0f} s", flush=True)
    out["seconds"] = time.time() - t0
    return out


def markdown(r: dict) -> str:
    ths = [f"{float(t):.1f}" for t in r["config"]["thetas"]]
    yes = lambda b: "yes" if b else "**no**"  # noqa: E731
    lines = []
    for v in r["config"]["variants"]:
        ins, lofo = f"{v}|in_set", f"{v}|lofo"
        lines += [f"**`{v}` ({r['config']['variants'][v] or 'constructor defaults'}): top-3 recall at θ, 40 test studies of 16: "
                  "last value / in-set / leave-one-family-out; [studies won − lost against the last value, in-set; LOFO]**", "",
                  "| family | data set | " + " | ".join(f"θ {t}" for t in ths) + " | ≥ last value at every θ: in-set / LOFO |",
                  "| --- | --- |" + " --- |" * len(ths) + " --- |"]
        for ds, row in r["datasets"].items():
            cells = []
            for t in ths:
                c, w = row["theta"][t]["recall_top3"], row["theta"][t]["wins_losses"]
                cells.append(f"{c['last_value']:.3f} / {c[ins]:.3f} / {c[lofo]:.3f} [{w[ins][0]}−{w[ins][1]}; {w[lofo][0]}−{w[lofo][1]}]")
            lines.append(f"| {row['family']} | {ds} | " + " | ".join(cells) + f" | {yes(row['meets_target'][ins])} / {yes(row['meets_target'][lofo])} |")
        lines += ["", f"Target met on every set: in-set {yes(r['meets_target'][ins])}, leave-one-family-out {yes(r['meets_target'][lofo])}.", ""]
    for p in (r["config"]["variants"] if r.get("other_splits") else ()):
        ins, lofo = f"{p}|in_set", f"{p}|lofo"
        seeds = [str(r["config"]["seed"]), *r["other_splits"]]
        split = {str(r["config"]["seed"]): r["datasets"]} | r["other_splits"]
        lines += [f"**`{p}` over {len(seeds)} pool splits (seeds {', '.join(seeds)}; each: its own tuning/test halves and 40 test "
                  "studies): mean recall − last value's, in-set / LOFO; [splits where it loses; total studies won − lost], in-set**", "",
                  "| data set | " + " | ".join(f"θ {t}" for t in ths) + " | every cell ≥ last value: splits (in-set / LOFO) |",
                  "| --- |" + " --- |" * len(ths) + " --- |"]
        for ds in r["datasets"]:
            cells = []
            for t in ths:
                c = [split[sd][ds]["theta"][t] for sd in seeds]
                d_in = [x["recall_top3"][ins] - x["recall_top3"]["last_value"] for x in c]
                d_lo = [x["recall_top3"][lofo] - x["recall_top3"]["last_value"] for x in c]
                w = sum(x["wins_losses"][ins][0] for x in c)
                lo = sum(x["wins_losses"][ins][1] for x in c)
                cells.append(f"{np.mean(d_in):+.3f} / {np.mean(d_lo):+.3f} [{sum(d < -1e-12 for d in d_in)}; {w}−{lo}]")
            met = [sum(split[sd][ds]["meets_target"][m] for sd in seeds) for m in (ins, lofo)]
            lines.append(f"| {ds} | " + " | ".join(cells) + f" | {met[0]} / {met[1]} of {len(seeds)} |")
        every = [sum(all(split[sd][ds]["meets_target"][m] for ds in r["datasets"]) for sd in seeds) for m in (ins, lofo)]
        lines += ["", f"Target met on every set: in {every[0]} of {len(seeds)} splits in-set, {every[1]} of {len(seeds)} LOFO.", ""]
    p = r["config"]["primary"]
    ins, lofo = f"{p}|in_set", f"{p}|lofo"
    lines += ["**Slope score (`bench_predictive_stop`'s, for reference): top-3 recall at θ**", "",
              "| data set | " + " | ".join(f"θ {t}" for t in ths) + " |", "| --- |" + " --- |" * len(ths)]
    for ds, row in r["datasets"].items():
        lines.append(f"| {ds} | " + " | ".join(f"{row['theta'][t]['recall_top3']['slope_score']:.3f}" for t in ths) + " |")
    lines += ["", f"**`{p}`: chosen ridge alpha per θ (cross-validated recall on the training pool; inf = no coefficient, "
              "the last value's ranking): in-set / LOFO**", "",
              "| data set | " + " | ".join(f"θ {t}" for t in ths) + " |", "| --- |" + " --- |" * len(ths)]
    for ds, row in r["datasets"].items():
        lines.append(f"| {ds} | " + " | ".join(f"{row['alpha'][ins][t]:g} / {row['alpha'][lofo][t]:g}" for t in ths) + " |")
    lines += ["", f"**Median relative error of the final loss (test half's curves): last value / SLAQ / `{p}` in-set / LOFO**", "",
              "| data set | " + " | ".join(f"θ {t}" for t in ths) + " |", "| --- |" + " --- |" * len(ths)]
    for ds, row in r["datasets"].items():
        e = [row["theta"][t]["median_rel_err"] for t in ths]
        lines.append(f"| {ds} | " + " | ".join(f"{x['last_value']:.3f} / {x['slaq']:.3f} / {x[ins]:.3f} / {x[lofo]:.3f}" for x in e) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT / "data" / "learning_curves")
    ap.add_argument("--datasets", default=",".join(SETS))
    ap.add_argument("--test", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0, help="the pool split and test studies of the main tables (bench_predictive_stop's)")
    ap.add_argument("--other-seeds", type=lambda v: [int(x) for x in v.split(",") if x], default=[1, 2, 3, 4],
                    help="more pool splits for the robustness table")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--markdown", action="store_true", help="print the tables from the JSON and exit")
    return run_or_print(ap.parse_args(argv), run, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
