"""EarlyCurve benchmark: speed targets and prediction quality on recorded curves.

Writes ``benchmarks/results/earlycurve.json``. Usage (from the project root)::

    .venv/bin/python benchmarks/digits_curves.py          # once: records our own curves
    .venv/bin/python benchmarks/digits_curves.py --workload digits-mlp   # the main job's workload
    .venv/bin/python benchmarks/bench_earlycurve.py [--data data/learning_curves]
        [--studies 200] [--seed 0] [--speed-only] [--markdown]

Speed (targets; baselines measured in the same run):

- ``fit_100``: one Eq 4 fit of a 100-point curve (``CurveFitter.fit``), median over real opda
  curves cut to 100 points and over noisy synthetic ones; target < 10 ms. Baseline:
  ``scipy.optimize.curve_fit`` on the same model and bounds with its numerical Jacobian and a naive
  start, as a straightforward implementation would do.
- ``predict_final``: EarlyCurve's whole pipeline (split, plateau, fit, interval) per curve, with
  SLAQ and last value beside it.
- ``rank_100``: :func:`earlycurve.rank_trials` over 100 real trials cut at θ = 0.7; target < 1 s.

Quality: :func:`earlycurve.evaluation.evaluate_set` on every data set with the same arguments as
``spottune curves eval PATH --digits benchmarks/results/digits_curves.csv --digits
benchmarks/results/workload_digits-mlp_curves.csv`` (so the figures match),
and the held-out check of the noisy-curve Eq 7 thresholds on cakelab.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
from scipy.optimize import curve_fit

from earlycurve import SLAQ, CurveFitter, CurveParams, EarlyCurve, LastValue, curve, rank_trials
from earlycurve.evaluation import calibrate_stage_rule, default_predictors, evaluate_set, find_datasets
from _common import write_json  # noqa: E402  (benchmarks/ is the script's folder: results JSONs carry their provenance)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def _timed(fn, repeats: int) -> np.ndarray:
    """Wall-clock seconds of ``repeats`` calls of ``fn``."""
    out = np.empty(repeats)
    for i in range(repeats):
        t0 = time.perf_counter()
        fn()
        out[i] = time.perf_counter() - t0
    return out


def _summary(seconds: np.ndarray) -> dict:
    ms = seconds * 1e3
    return {"median_ms": float(np.median(ms)), "p90_ms": float(np.percentile(ms, 90)), "n": int(ms.size)}


def _model(g, a, b, c, d):
    return 1.0 / (a * g * g + b * g + c) + d


def _naive_curve_fit(g: np.ndarray, y: np.ndarray) -> None:
    curve_fit(_model, g, y, p0=[0.0, 1.0, 1.0, 0.0], bounds=([0, 0, 1e-9, 0], np.inf), method="trf", maxfev=4000)


def speed(sets: dict, seed: int) -> dict:
    """Speed figures (see the module docstring)."""
    rng = np.random.default_rng(seed)
    long_curves = [c for c in sets["opda-convnext"].curves + sets["opda-alexnet"].curves if c.steps.size >= 90][:40]
    real = [(c.steps[:100] - c.steps[0], c.values[:100]) for c in long_curves]
    truth = CurveParams(a=2e-4, b=0.05, c=1.0, d=0.1)
    g = np.arange(100.0)
    synthetic = [(g, curve(g, truth) * (1 + 0.02 * rng.standard_normal(100))) for _ in range(40)]
    out: dict = {}
    for label, batch in (("real", real), ("synthetic", synthetic)):
        out[f"fit_100_{label}"] = _summary(np.concatenate([_timed(lambda g=g, y=y: CurveFitter().fit(g, y), 3) for g, y in batch]))
        naive = []
        for g_, y_ in batch:
            try:
                naive.append(_timed(lambda g_=g_, y_=y_: _naive_curve_fit(g_, y_), 1))
            except RuntimeError:  # curve_fit gave up: count the time it took anyway
                continue
        out[f"baseline_curve_fit_100_{label}"] = _summary(np.concatenate(naive)) if naive else None
    cut = [c.head(0.7) + (c.max_steps,) for c in long_curves]
    for name, predictor in (("earlycurve", EarlyCurve(1)), ("earlycurve-rec", EarlyCurve.recommended(1)), ("slaq", SLAQ()), ("last_value", LastValue())):
        out[f"predict_final_{name}"] = _summary(np.concatenate([_timed(lambda s=s, v=v, m=m: predictor.predict_final(s, v, m), 2) for s, v, m in cut]))
    pool = sets["opda-alexnet"].curves
    idx = rng.choice(len(pool), size=100, replace=False)
    trials = [pool[i].head(0.7) for i in idx]
    limits = [pool[i].max_steps for i in idx]
    for name, predictor in (("earlycurve", EarlyCurve(1)), ("earlycurve-rec", EarlyCurve.recommended(1)), ("slaq", SLAQ()), ("last_value", LastValue())):
        out[f"rank_100_{name}"] = _summary(_timed(lambda p=predictor: rank_trials(trials, p, limits, top_k=3), 3))
    out["targets"] = {
        "fit_100_median_ms_below": 10.0,
        "rank_100_s_below": 1.0,
        "fit_100_met": out["fit_100_real"]["median_ms"] < 10 and out["fit_100_synthetic"]["median_ms"] < 10,
        "rank_100_met": out["rank_100_earlycurve"]["median_ms"] < 1000 and out["rank_100_earlycurve-rec"]["median_ms"] < 1000,
    }
    return out


def markdown(report: dict, theta: float = 0.7) -> str:
    """Markdown tables of the quality results at ``theta`` (for docs/design/earlycurve.md)."""
    lines = []
    for name, result in report["quality"].items():
        errors = {r["predictor"]: r for r in result["errors"] if abs(r["theta"] - theta) < 1e-9}
        sel = {r["predictor"]: r for r in result["selection"] if abs(r["theta"] - theta) < 1e-9}
        lines += [f"**{name}** (θ = {theta}; {result['counts']})", ""]
        lines += ["| predictor | median rel. err | p90 rel. err | interval coverage | top-1 | top-3 recall | regret@1 | regret@3 | overlap recall / kept |", "|---|---|---|---|---|---|---|---|---|"]
        for p, e in errors.items():
            s = sel[p]
            lines.append(
                f"| {p} | {e['median_rel_err']:.4f} | {e['p90_rel_err']:.3f} | {e['coverage']:.2f} | {s['top1']:.3f} | "
                f"{s['topk_recall']:.3f} | {s['regret1']:.4f} | {s['regretk']:.4f} | {s['overlap_recall']:.3f} / {s['overlap_kept']:.1f} |"
            )
        lines.append("")
    return "\n".join(lines)


def sweep_markdown(report: dict, predictors: tuple[str, ...] = ("earlycurve", "earlycurve-rec", "slaq", "last_value")) -> str:
    """Per data set: top-3 recall and median relative error for every θ."""
    lines = []
    for name, result in report["quality"].items():
        thetas = sorted({r["theta"] for r in result["errors"]})
        lines += [f"**{name}**: top-3 recall / median rel. err", "", "| θ | " + " | ".join(predictors) + " |", "|---" * (len(predictors) + 1) + "|"]
        for t in thetas:
            cells = []
            for p in predictors:
                e = next(r for r in result["errors"] if r["predictor"] == p and r["theta"] == t)
                s = next(r for r in result["selection"] if r["predictor"] == p and r["theta"] == t)
                cells.append(f"{s['topk_recall']:.2f} / {e['median_rel_err']:.3f}")
            lines.append(f"| {t:g} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "learning_curves")
    parser.add_argument(
        "--digits", type=Path, nargs="*",
        default=[RESULTS / "digits_curves.csv", RESULTS / "workload_digits-mlp_curves.csv"],
        help="extra curve CSVs (benchmarks/digits_curves.py format); missing ones are skipped",
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "earlycurve.json")
    parser.add_argument("--studies", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--speed-only", action="store_true", help="only re-measure speed; keeps the quality figures in --out")
    parser.add_argument("--markdown", action="store_true", help="print the doc tables from --out and exit")
    args = parser.parse_args()
    if args.markdown:
        report = json.loads(args.out.read_text())
        print(markdown(report))
        print(sweep_markdown(report))
        return
    sets = find_datasets(args.data, [p for p in args.digits if p.is_file()])
    t0 = time.perf_counter()
    report = {"command": "python benchmarks/bench_earlycurve.py", "seed": args.seed}
    if args.speed_only and args.out.is_file():  # refresh the speed figures, keep the quality ones
        report = json.loads(args.out.read_text()) | {"speed_command": "python benchmarks/bench_earlycurve.py --speed-only"}
    report["machine"] = {
        "python": platform.python_version(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "loadavg_1min_before_speed": os.getloadavg()[0],
    }
    report["speed"] = speed(sets, args.seed)
    print(json.dumps(report["speed"], indent=1))
    if not args.speed_only:
        report["calibration_cakelab"] = calibrate_stage_rule(sets["cakelab-resnet32"], theta=0.7, seed=args.seed)
        print("calibration:", report["calibration_cakelab"]["best"], report["calibration_cakelab"]["test"], flush=True)
        predictors = default_predictors(args.seed)
        report["quality"] = {}
        for name, curve_set in sets.items():
            t1 = time.perf_counter()
            report["quality"][name] = evaluate_set(curve_set, predictors, n_studies=args.studies, seed=args.seed)
            print(f"{name}: {time.perf_counter() - t1:.0f} s", flush=True)
    elapsed_key = "speed_elapsed_s" if args.speed_only else "elapsed_s"
    report[elapsed_key] = time.perf_counter() - t0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_json(args.out, report, indent=1)
    print(f"wrote {args.out} in {report[elapsed_key]:.0f} s")
    if "quality" in report:
        print(markdown(report))


if __name__ == "__main__":
    main()
