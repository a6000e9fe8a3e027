"""Choose the calibrated predictor's feature set on validation periods only ("sharper").

-> ``benchmarks/results/ladder_feature_selection.json`` and a table for docs/design/revpred.md ("Sharper features").

Candidates (:data:`revpred.ladder_features.FEATURE_SETS`, fixed before any measurement): ``base`` (the 14
columns, the default), ``short`` (+ crossing shares of the past 3 h and 6 h, the past hour's largest rise
relative to delta, log time since the last hour that rose by more than delta), ``calendar`` (+ hour of
day and day of week, sin/cos) and ``short+calendar``.

Two validation protocols, both inside eval_calibration.py's training + calibration periods (2015-04-08 ..
07-15); the held-out test period (07-15 .. 08-31) is never read here:

- **A (long)**: train 2015-04-08 .. 06-01 (20-minute stride), isotonic calibration 06-01 .. 06-20, score
  06-20 .. 07-15 (30-minute stride): eval_calibration's protocol moved one period earlier.
- **B (the provisioner's)**: ``spottune.compose.calibrated_predictor``'s setting: the 28 days before a
  start (21 to train, 7 to calibrate, 10-minute stride), scored on the 7 days after it (30-minute
  stride); starts weekly from 2015-05-06 to 07-08 (10 windows, the last ending at 07-15).

Rule (fixed before measuring): the candidate with the lowest Brier in A is chosen; it replaces ``base`` in
The cost comparison (bench_curse) only if its Brier is below base's in A **and** its mean Brier over the
B windows is below base's. Log loss, ECE and ROC AUC are reported alongside.

Usage: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/select_ladder_features.py`` (about 8 minutes).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import TRACE  # noqa: E402
from benchmarks.eval_calibration import on_demand_prices  # noqa: E402
from revpred.calibrated import CalibratedRevocation  # noqa: E402
from revpred.calibration_report import score  # noqa: E402
from revpred.ladder import ladder_queries  # noqa: E402
from revpred.ladder_features import FEATURE_SETS  # noqa: E402
from spotmarket.prices import load_history, to_seconds  # noqa: E402
from _common import write_json  # noqa: E402  (benchmarks/ is the script's folder: results JSONs carry their provenance)

ROOT = Path(__file__).resolve().parents[1]
DAY_S = 86400.0
LONG = {"training": ("2015-04-08", "2015-06-01"), "calibration": ("2015-06-01", "2015-06-20"),
        "validation": ("2015-06-20", "2015-07-15")}
ROLLING_STARTS = ("2015-05-06", "2015-05-13", "2015-05-20", "2015-05-27", "2015-06-03", "2015-06-10",
                  "2015-06-17", "2015-06-24", "2015-07-01", "2015-07-08")
METRICS = ("brier", "log_loss", "ece", "roc_auc", "mean_p")


def _scores(y, p, name) -> dict:
    s = score(y, p, name)
    return {k: float(s[k]) for k in METRICS}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", nargs="+", default=list(FEATURE_SETS), choices=list(FEATURE_SETS))
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "ladder_feature_selection.json"))
    args = ap.parse_args(argv)
    history = load_history(str(TRACE))
    markets = sorted(history.markets)
    od = on_demand_prices(markets)
    S = {k: (to_seconds(a), to_seconds(b)) for k, (a, b) in LONG.items()}
    out: dict = {"long": {"periods": LONG}, "rolling": {"starts": list(ROLLING_STARTS)}, "timings_s": {}}

    val = ladder_queries(history, markets, *S["validation"], stride_min=30, on_demand=od)
    y = val["y"].to_numpy()
    out["long"]["n_validation"], out["long"]["share_revoked"] = int(y.size), float(y.mean())
    for fs in args.sets:
        t0 = time.perf_counter()
        model = CalibratedRevocation(history, markets, on_demand=od, stride_min=20, feature_set=fs)
        model.fit(*S["training"], *S["calibration"])
        p = model.predict_proba(list(val["market"]), val["t"].to_numpy(), val["b"].to_numpy())
        out["long"][fs] = _scores(y, p, f"A {fs}")
        out["timings_s"][f"long {fs}"] = round(time.perf_counter() - t0, 1)
        print(f"A {fs:15s} " + "  ".join(f"{k} {v:.4f}" for k, v in out["long"][fs].items()), flush=True)

    rolling = {fs: [] for fs in args.sets}
    for start in ROLLING_STARTS:
        s0 = to_seconds(start)
        q = ladder_queries(history, markets, s0, s0 + 7 * DAY_S, stride_min=30, on_demand=od)
        yq = q["y"].to_numpy()
        for fs in args.sets:
            model = CalibratedRevocation.train(history, markets, s0 - 28 * DAY_S, s0, on_demand=od, stride_min=10,
                                               feature_set=fs)
            p = model.predict_proba(list(q["market"]), q["t"].to_numpy(), q["b"].to_numpy())
            rolling[fs].append({"start": start, "n": int(yq.size), **_scores(yq, p, f"B {fs} {start}")})
        print(f"B {start}: " + "  ".join(f"{fs} {rolling[fs][-1]['brier']:.4f}" for fs in args.sets), flush=True)
    for fs in args.sets:
        rows = rolling[fs]
        base = rolling.get("base", rows)
        d = np.array([r["brier"] - b["brier"] for r, b in zip(rows, base)])
        out["rolling"][fs] = {"windows": rows, **{f"mean_{k}": float(np.mean([r[k] for r in rows])) for k in METRICS},
                              "brier_diff_to_base_mean": float(d.mean()),
                              "brier_diff_to_base_se": float(d.std(ddof=1) / np.sqrt(d.size)) if d.size > 1 else None,
                              "windows_better_than_base": int((d < 0).sum())}
    extras = [fs for fs in args.sets if fs != "base"]
    chosen = min(extras, key=lambda fs: out["long"][fs]["brier"]) if extras else None
    if chosen is not None and "base" in args.sets:
        passes = (out["long"][chosen]["brier"] < out["long"]["base"]["brier"]
                  and out["rolling"][chosen]["mean_brier"] < out["rolling"]["base"]["mean_brier"])
        out["decision"] = {"chosen": chosen, "better_than_base_on_validation": bool(passes)}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_json(Path(args.out), out, indent=1)

    print("| feature set | A Brier | A log loss | A ECE | A AUC | B mean Brier | B diff to base (s.e.) | B windows better |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for fs in args.sets:
        a, b = out["long"][fs], out["rolling"][fs]
        se = b["brier_diff_to_base_se"]
        print(f"| {fs} | {a['brier']:.4f} | {a['log_loss']:.4f} | {a['ece']:.4f} | {a['roc_auc']:.4f} | "
              f"{b['mean_brier']:.4f} | {b['brier_diff_to_base_mean']:+.4f} ({se or 0:.4f}) | "
              f"{b['windows_better_than_base']}/{len(b['windows'])} |")
    print(json.dumps(out.get("decision"), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
