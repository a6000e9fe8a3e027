"""Calibration of revocation probabilities on the provisioner's own queries.

-> benchmarks/results/calibration.json, docs/figures/calibration_reliability.png, and the table printed
   for docs/design/revpred.md ("Calibrated predictor").

Data: the bidding-era trace ``us-east-1_2015.csv.gz``, all 15 markets, on-demand prices from the
provisioner's catalog. Queries: every market, decision times every ``--test-stride`` minutes, max
prices ``price + delta`` for each delta of ``revpred.ladder.DELTA_LADDER_USD_PER_HOUR`` and
``b = on-demand``; exact legacy labels (``spotmarket.LegacyBidRevocation``).

Periods, disjoint and in time order (features may read the week before a period; labels never leave it):

============  ========================  ====================================================
period        dates (UTC)               used for
============  ========================  ====================================================
training      2015-04-08 .. 2015-06-20  the boosted model; the baselines' rates
calibration   2015-06-20 .. 2015-07-15  isotonic calibration
test          2015-07-15 .. 2015-08-31  every score below (held out)
============  ========================  ====================================================

(2015-04-08: one week after the latest first record, d2.8xlarge's 2015-03-31, so the week features
exist.) Predictors: ``calibrated`` (the above), ``calibrated-4d`` (the ``spottune run`` setting: the 4
days before the test start, 3 to train and 1 to calibrate), ``constant`` (training share per market),
``empirical`` (training share per market and delta), ``constant-hazard-D1`` (the ``constant`` kind of
``spottune run``: hazard from D1 max prices on the 4 days before the test start).

``--feature-sets short ...`` adds ``calibrated[short]`` etc.: the ``calibrated`` model on another set of
columns (:data:`revpred.ladder_features.FEATURE_SETS`), same periods, scored and judged by the same targets
(docs/design/revpred.md, "Sharper features"; the set is chosen by ``benchmarks/select_ladder_features.py`` first).

Usage: ``.venv/bin/python benchmarks/eval_calibration.py [--feature-sets NAME ...]`` (about 2 minutes on one core).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import TRACE  # noqa: E402
from revpred.calibrated import CalibratedRevocation  # noqa: E402
from revpred.calibration_report import constant_baseline, empirical_baseline, score  # noqa: E402
from revpred.ladder import DELTA_LADDER_USD_PER_HOUR, ON_DEMAND, ladder_queries  # noqa: E402
from spotmarket.prices import load_history, to_seconds  # noqa: E402
from _common import write_json  # noqa: E402  (benchmarks/ is the script's folder: results JSONs carry their provenance)

ROOT = Path(__file__).resolve().parents[1]
PERIODS = {"training": ("2015-04-08", "2015-06-20"), "calibration": ("2015-06-20", "2015-07-15"),
           "test": ("2015-07-15", "2015-08-31")}
TARGET_ECE = 0.03
DAY_S = 86400.0


def on_demand_prices(markets) -> dict:
    from provisioner import InstanceCatalog

    catalog = InstanceCatalog.load()
    return {m: catalog[m.instance_type].on_demand(m.region) for m in markets}


def _strip(s: dict) -> dict:
    return {k: v for k, v in s.items() if k != "reliability"}


def _fmt(v) -> str:
    return "undefined" if isinstance(v, float) and math.isnan(v) else (f"{v:.4f}" if isinstance(v, float) else str(v))


def reliability_figure(y: np.ndarray, preds: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from revpred.evaluation import reliability_table

    fig, (ax, hx) = plt.subplots(2, 1, figsize=(6, 7), gridspec_kw={"height_ratios": [3, 1]}, sharex=True)
    ax.plot([0, 1], [0, 1], color="grey", lw=1, ls=":", label="perfect")
    for (name, p), mk in zip(preds.items(), "osd^v"):
        rows = [r for r in reliability_table(y, p, 10) if r["n"]]
        ax.plot([r["mean_p"] for r in rows], [r["frac_pos"] for r in rows], marker=mk, label=name)
        hx.hist(p, bins=np.linspace(0, 1, 11), histtype="step", label=name)
    ax.set_ylabel("observed share revoked within the hour")
    ax.set_title("Reliability on held-out queries (2015-07-15 .. 08-31, 15 markets)")
    ax.legend(fontsize=8)
    hx.set_yscale("log")
    hx.set_xlabel("predicted p (10 equal-width bins)")
    hx.set_ylabel("queries")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train-stride", type=int, default=20, help="minutes between training decision times")
    ap.add_argument("--test-stride", type=int, default=30, help="minutes between test decision times")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "calibration.json"))
    ap.add_argument("--feature-sets", nargs="*", default=[], help="extra feature sets of the calibrated model")
    ap.add_argument("--figure", default=str(ROOT / "docs" / "figures" / "calibration_reliability.png"))
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    S = {k: (to_seconds(a), to_seconds(b)) for k, (a, b) in PERIODS.items()}
    history = load_history(str(TRACE))
    markets = sorted(history.markets)
    od = on_demand_prices(markets)
    timings = {}

    t0 = time.perf_counter()
    model = CalibratedRevocation(history, markets, on_demand=od, stride_min=args.train_stride)
    model.fit(*S["training"], *S["calibration"])
    timings["calibrated_fit_s"] = time.perf_counter() - t0
    extra = {}
    for fs in args.feature_sets:
        t0 = time.perf_counter()
        extra[f"calibrated[{fs}]"] = CalibratedRevocation(history, markets, on_demand=od, stride_min=args.train_stride,
                                                          feature_set=fs).fit(*S["training"], *S["calibration"])
        timings[f"calibrated[{fs}]_fit_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    test_lo = S["test"][0]
    short = CalibratedRevocation.train(history, markets, test_lo - 4 * DAY_S, test_lo, on_demand=od, stride_min=10)
    timings["calibrated_4d_fit_s"] = time.perf_counter() - t0

    train = ladder_queries(history, markets, *S["training"], stride_min=args.train_stride, on_demand=od)
    test = ladder_queries(history, markets, *S["test"], stride_min=args.test_stride, on_demand=od)
    y = test["y"].to_numpy()
    ms, t, b = list(test["market"]), test["t"].to_numpy(), test["b"].to_numpy()
    from spottune.compose import constant_hazard

    hazard = constant_hazard(history, markets, test_lo - 4 * DAY_S, test_lo, 0)
    t0 = time.perf_counter()
    preds = {"calibrated": model.predict_proba(ms, t, b)}
    timings["calibrated_predict_s_per_1000"] = (time.perf_counter() - t0) / len(test) * 1000
    preds.update({"calibrated-4d": short.predict_proba(ms, t, b), "constant": constant_baseline(train, test),
                  "empirical": empirical_baseline(train, test), "constant-hazard-D1": hazard.predict_proba(ms, t, b)})
    preds.update({k: v.predict_proba(ms, t, b) for k, v in extra.items()})

    result: dict = {
        "periods": PERIODS, "markets": [str(m) for m in markets], "ladder_usd_per_hour": list(DELTA_LADDER_USD_PER_HOUR),
        "on_demand_usd_per_hour": {str(m): v for m, v in od.items()},
        "train_stride_min": args.train_stride, "test_stride_min": args.test_stride,
        "n_test": int(len(test)), "n_test_pos": int(y.sum()), "refused_on_demand_queries": int(test.attrs["refused"]),
        "binning": "ece: 10 equal-width bins of p on [0, 1]; ece_quantile: 10 equal-count bins; "
                   "log loss with p clipped to [1e-6, 1 - 1e-6]",
        "timings": timings, "pooled": {}, "by_rung": {}, "by_market": {},
    }
    for name, p in preds.items():
        result["pooled"][name] = score(y, p, name)
        result["by_rung"][name] = {
            ("on-demand" if r == ON_DEMAND else f"{DELTA_LADDER_USD_PER_HOUR[r]:g}"):
                _strip(score(y[(test["rung"] == r).to_numpy()], p[(test["rung"] == r).to_numpy()], f"{name} rung {r}"))
            for r in sorted(test["rung"].unique())}
        keys = test["market"].astype(str).to_numpy()
        result["by_market"][name] = {k: _strip(score(y[keys == k], p[keys == k], f"{name} {k}")) for k in sorted(set(keys))}
    baselines = ("constant", "empirical", "constant-hazard-D1")

    def targets(cal: dict) -> dict:
        return {
            "ece_le_0.03": {"value": cal["ece"], "met": cal["ece"] <= TARGET_ECE, "margin": TARGET_ECE - cal["ece"]},
            "brier_below_every_baseline": {
                "value": cal["brier"], "baselines": {k: result["pooled"][k]["brier"] for k in baselines},
                "met": all(cal["brier"] < result["pooled"][k]["brier"] for k in baselines)},
        }

    result["targets"] = targets(result["pooled"]["calibrated"])
    if extra:
        result["feature_sets"] = {k: targets(result["pooled"][k]) for k in extra}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_json(Path(args.out), result, indent=1, default=float)
    reliability_figure(y, {k: preds[k] for k in ("calibrated", "calibrated-4d", "constant", "empirical")}, Path(args.figure))

    print(f"test queries {len(test)}, revoked {int(y.sum())} ({y.mean():.3f})")
    print("| predictor | mean p | Brier | log loss | ECE (10 equal-width) | ECE (10 equal-count) | ROC AUC |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in preds:
        s = result["pooled"][name]
        print(f"| {name} | {s['mean_p']:.4f} | {s['brier']:.4f} | {s['log_loss']:.4f} | {s['ece']:.4f} | "
              f"{s['ece_quantile']:.4f} | {_fmt(s['roc_auc'])} |")
    print(json.dumps(result["targets"], indent=1, default=float))
    if extra:
        print(json.dumps(result["feature_sets"], indent=1, default=float))
    print(json.dumps(timings, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
