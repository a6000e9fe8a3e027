"""The default stopper: EarlyCurve at θ (``paper``) or the last value at θ (``barrier``)? (docs/design/earlycurve.md §8.11)

Both are Algorithm 1's θ barrier with the user's θ and top-k, so they cost the same steps; they differ only in how
the trials that continue are ranked: EarlyCurve's predicted final value (paper settings, Eq 4-7) or the last
observed value. The early-stopping work asks for the new rule by default and ``--stopper paper`` for the faithful one; this
measures whether that change costs the user accuracy, on every curve set the project ships or records:
the three recorded sets (data/learning_curves) and the built-in workloads' random-search curves
(data/learning_curves/builtin/builtin_*_curves.csv.gz, benchmarks/results/digits_curves.csv, workload_digits-mlp_curves.csv).

Per set and θ ∈ {0.3, 0.5, 0.7, 0.9}: ``--studies`` seeded studies of 16
(``earlycurve.evaluation._compare.barrier_rows``, the same studies for both methods), top-k 3; top-1 / top-3 /
regret means, and the paired difference barrier − paper per study (mean ± s.e.). Nothing is tuned (both run at the user's θ), so every study is a test study.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_default_stopper.py   # ~5 min; JSON + table
    .venv/bin/python benchmarks/bench_default_stopper.py --markdown  # the table from the JSON
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BUILTIN_CURVES, ROOT, run_or_print  # noqa: E402  (benchmarks/ is the script's folder)

from earlycurve.evaluation import find_datasets  # noqa: E402
from earlycurve.evaluation._compare import barrier_rows  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "default_stopper.json"
EXTRA = (BUILTIN_CURVES / "builtin_digits-mlp_curves.csv.gz", BUILTIN_CURVES / "builtin_logreg_curves.csv.gz",
         BUILTIN_CURVES / "builtin_linear-svm_curves.csv.gz", ROOT / "benchmarks" / "results" / "digits_curves.csv",
         ROOT / "benchmarks" / "results" / "workload_digits-mlp_curves.csv")
THETAS = (0.3, 0.5, 0.7, 0.9)
METRICS = ("top1", "top3", "regret")


def paired(a: list[dict], b: list[dict], metric: str) -> dict[str, float]:
    """Mean of ``metric`` under each method and of the per-study difference b − a, with its standard error."""
    x = np.array([r[metric] for r in a], dtype=float)
    y = np.array([r[metric] for r in b], dtype=float)
    d = y - x
    return {"paper": float(x.mean()), "barrier": float(y.mean()), "diff": float(d.mean()),
            "se": float(d.std(ddof=1) / np.sqrt(d.size)) if d.size > 1 else float("nan")}


def run(args: argparse.Namespace) -> dict:
    sets = find_datasets(ROOT / "data" / "learning_curves",
                         digits=[f for f in EXTRA if f.exists()])
    out = {"config": {"studies": args.studies, "study_size": 16, "top_k": 3, "seed": args.seed, "thetas": THETAS},
           "sets": {}}
    t0 = time.perf_counter()
    for name, cs in sets.items():
        out["sets"][name] = {"n_curves": len(cs.curves), "thetas": {}}
        for theta in THETAS:
            rows = {m: barrier_rows(cs, m, theta=theta, top_k=3, n_studies=args.studies, seed=args.seed)
                    for m in ("paper", "last-value")}
            out["sets"][name]["thetas"][f"{theta:g}"] = {m: paired(rows["paper"], rows["last-value"], m)
                                                         for m in METRICS}
        print(f"{name}: {time.perf_counter() - t0:.0f} s", flush=True)
    out["seconds"] = time.perf_counter() - t0
    return out


def markdown(res: dict) -> str:
    lines = ["| set | θ | top-1 paper / barrier | top-3 paper / barrier | barrier − paper, top-3 (± s.e.) | regret paper / barrier |",
             "| --- | --- | --- | --- | --- | --- |"]
    for name, s in res["sets"].items():
        for theta, r in s["thetas"].items():
            t1, t3, rg = r["top1"], r["top3"], r["regret"]
            lines.append(f"| {name} | {theta} | {t1['paper']:.3f} / {t1['barrier']:.3f} | {t3['paper']:.3f} / "
                         f"{t3['barrier']:.3f} | {t3['diff']:+.3f} ± {t3['se']:.3f} | {rg['paper']:.4f} / {rg['barrier']:.4f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--studies", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--markdown", action="store_true", help="print the table of --out and exit")
    return run_or_print(ap.parse_args(argv), run, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
