"""``spottune curves eval``'s learned-predictor block on the bundled curve sets: ``benchmarks/results/learned_eval.json``.

What the CLI prints with ``--learned`` (the default), for every bundled set: ``earlycurve.evaluation.evaluate_learned``
puts the set on the stoppers' grid, fits ``ResidualCurvePredictor`` on a seeded half and compares its top-3 recall
with the last value's on the other half (200 studies of 16, seed 0). One split per set, unlike
``bench_curve_recall.py``'s 25; it shows what a user sees for a curve file of their own (docs/design/earlycurve.md §7).

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_learned_eval.py`` (about 15 s).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BUILTIN_CURVES, ROOT, write_json  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "learned_eval.json"
THETAS = (0.3, 0.5, 0.7, 0.9)
BUILTIN = ("builtin_digits-mlp_curves.csv.gz", "builtin_logreg_curves.csv.gz", "builtin_linear-svm_curves.csv.gz")


def main() -> int:
    from earlycurve.evaluation import evaluate_learned, find_datasets

    sets = find_datasets(ROOT / "data" / "learning_curves", [BUILTIN_CURVES / f for f in BUILTIN])
    out = {}
    lines = ["| data set | grid steps | " + " | ".join(f"θ {t}" for t in THETAS) + " | ≥ last value at every θ |",
             "| --- | --- |" + " --- |" * len(THETAS) + " --- |"]
    for name, curve_set in sets.items():
        res = evaluate_learned(curve_set, thetas=THETAS)
        recall = {(r["predictor"], r["theta"]): r["topk_recall"] for r in res["selection"]}
        row = {f"{t:g}": {"last_value": recall["last_value", t], "learned": recall["learned", t],
                          "alpha": res["learned"]["alpha"][f"{t:g}"]} for t in THETAS}
        ok = all(v["learned"] >= v["last_value"] - 1e-12 for v in row.values())
        out[name] = {"grid_steps": res["learned"]["grid_steps"], "train_curves": res["learned"]["train_curves"],
                     "test_curves": res["learned"]["test_curves"], "theta": row, "meets_target": ok}
        cells = [f"{v['last_value']:.3f} / {v['learned']:.3f}" + ("" if v["alpha"] is None else f" (α {v['alpha']:g})")
                 for v in row.values()]
        lines.append(f"| {name} | {res['learned']['grid_steps']} | " + " | ".join(cells) + f" | {'yes' if ok else '**no**'} |")
    write_json(OUT, out, indent=1)
    print("\n".join(lines))
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
