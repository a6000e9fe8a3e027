"""RevPred speed benchmark -> benchmarks/results/revpred_speed.json.

Measures, on the 2015 us-east-1 trace:

1. **Training one market on a 9-day window** (features + labels + RevPred LSTM) at the default setting,
   target <= 60 s on 2 cores; also the Tributary baseline and all five models together.
2. **Accuracy cost of the stride / epoch / batch choice**: RevPred trained on one market at several
   settings, each scored on the following 3 days (both max-price rules); plus ablations of D3 (linear
   grid), D4 (literal grid Algorithm 2) and D5 (Platt / temperature / no calibration).
3. **Inference for all 15 markets at one decision time** (one provisioning round): target <= 20 ms.
   Timing does not depend on the weights, so the 15 models are trained cheaply (1 epoch, stride 60).

Usage::

    .venv/bin/python benchmarks/bench_revpred.py [--prices PATH] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from revpred.evaluation import evaluate
from spotmarket.prices import Market, load_history, locate_prices, to_seconds
from revpred.training import TrainConfig, train_markets
from _common import write_json  # noqa: E402  (benchmarks/ is the script's folder: results JSONs carry their provenance)

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PRICES = "us-east-1_2015.csv.gz"  # found by spotmarket.prices.locate_prices
TRAIN_START, TRAIN_END = "2015-06-01T00:00Z", "2015-06-10T00:00Z"
TEST_END = "2015-06-13T00:00Z"
MARKET = Market("us-east-1a", "c3.xlarge")  # the busiest series: the hardest case for training time


def _load_avg() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover
        return []


def _score(history, predictor, e, te) -> dict:
    res = evaluate(history, {"m": predictor}, [MARKET], e, te, stride_min=5, train_end_s=e)
    out = {}
    for rule in ("random", "alg2"):
        pooled = res["rules"][rule]["m"]["pooled"]
        out[rule] = {k: pooled[k] for k in ("accuracy", "f1", "roc_auc", "brier", "n_pos", "n")}
    return out


def bench_training(history, settings: list[tuple[int, int, int]]) -> dict:
    s, e, te = to_seconds(TRAIN_START), to_seconds(TRAIN_END), to_seconds(TEST_END)
    out = {"market": str(MARKET), "train_window": [TRAIN_START, TRAIN_END], "test_window": [TRAIN_END, TEST_END],
           "runs": []}
    for stride, epochs, batch in settings:
        cfg = TrainConfig(stride_min=stride, epochs=epochs, batch_size=batch, n_threads=1)
        t0 = time.perf_counter()
        ms = train_markets(history, [MARKET], s, e, cfg, kinds=["revpred"])
        seconds = time.perf_counter() - t0
        fit = ms.fits[MARKET]
        row = {"stride_min": stride, "epochs": epochs, "batch_size": batch, "train_seconds": round(seconds, 2),
               "n_train": fit.models["revpred"].info["n_train"], "best_epoch": fit.models["revpred"].estimator.best_epoch_,
               "load_avg": _load_avg(), **_score(history, ms.predictor("revpred"), e, te)}
        out["runs"].append(row)
        print(f"train stride={stride} epochs={epochs} batch={batch}: {seconds:.1f} s, "
              f"AUC random {row['random']['roc_auc']:.3f} alg2 {row['alg2']['roc_auc']:.3f}", flush=True)
    # all five models at the default setting (RevPred + Tributary LSTMs dominate)
    cfg = TrainConfig(n_threads=1)
    t0 = time.perf_counter()
    ms = train_markets(history, [MARKET], s, e, cfg)
    out["all_models_default"] = {"stride_min": cfg.stride_min, "epochs": cfg.epochs, "batch_size": cfg.batch_size,
                                 "seconds": round(time.perf_counter() - t0, 2),
                                 "per_model_fit_seconds": {k: v.info["fit_seconds"] for k, v in ms.fits[MARKET].models.items()},
                                 "load_avg": _load_avg()}
    print(f"all models, default: {out['all_models_default']['seconds']} s", flush=True)
    out["ablations"] = bench_ablations(history, ms, s, e, te)
    return out


def bench_ablations(history, ms, s, e, te) -> dict:
    """Default RevPred vs: other Eq 3 calibrators (refitted on the same validation day), linear grid (D3),
    literal grid Algorithm 2 (D4), and [I] training on mixed Algorithm 2 / random max prices."""
    from revpred.calibration import make_calibrator
    from revpred.features import make_inputs
    from revpred.training import training_data

    base = TrainConfig(n_threads=1)
    out = {"default": _score(history, ms.predictor("revpred"), e, te)}
    mm = ms.fits[MARKET].models["revpred"]
    data = training_data(history[MARKET], s, e, base)
    Xv = mm.scaler.transform(make_inputs(data.feats[data.val], data.b["alg2"][data.val]))
    o_val, y_val = mm.estimator.predict_raw(Xv), data.y["alg2"][data.val]
    original = mm.estimator.calibrator_
    for kind in ("platt", "temperature", "none"):
        mm.estimator.calibrator_ = make_calibrator(kind).fit(o_val, y_val, mm.estimator.r_p_)
        out[f"calibration_{kind}"] = _score(history, ms.predictor("revpred"), e, te)
    mm.estimator.calibrator_ = original
    for name, cfg in (("grid_linear", TrainConfig(n_threads=1, grid_method="linear")),
                      ("alg2_literal_grid", TrainConfig(n_threads=1, variations="grid")),
                      ("mixed_max_prices", TrainConfig(n_threads=1, revpred_max_prices="mixed"))):
        alt = train_markets(history, [MARKET], s, e, cfg, kinds=["revpred"])
        out[name] = _score(history, alt.predictor("revpred"), e, te)
        out[name]["train_positive_share"] = alt.fits[MARKET].models["revpred"].info["train_positive_share"]
        print(f"ablation {name}: AUC random {out[name]['random']['roc_auc']:.3f} alg2 {out[name]['alg2']['roc_auc']:.3f}",
              flush=True)
    return out


def bench_inference(history, repeats: int) -> dict:
    markets = history.markets
    s, e = to_seconds(TRAIN_START), to_seconds(TRAIN_END)
    ms = train_markets(history, markets, s, e, TrainConfig(stride_min=60, epochs=1, n_threads=1), kinds=["revpred"])
    rp = ms.predictor("revpred")
    rng = np.random.default_rng(0)
    times = e + 3600.0 * rng.uniform(0, 60, repeats)
    rp.predict_proba(markets, times[0], 0.1)  # warm-up
    laps = []
    for t in times:
        b = np.array([history[m].price_at(t) for m in markets]) + rng.uniform(1e-5, 0.2, len(markets))
        t0 = time.perf_counter()
        p = rp.predict_proba(markets, t, b)
        laps.append((time.perf_counter() - t0) * 1e3)
        assert p.shape == (len(markets),)
    laps.sort()
    # several max prices per market in one call (the provisioner may ask for a few)
    many = []
    for t in times[: max(10, repeats // 5)]:
        b = np.repeat([history[m].price_at(t) for m in markets], 4) + rng.uniform(1e-5, 0.2, 4 * len(markets))
        t0 = time.perf_counter()
        rp.predict_proba([m for m in markets for _ in range(4)], t, b)
        many.append((time.perf_counter() - t0) * 1e3)
    out = {"n_markets": len(markets), "repeats": repeats, "torch_threads": 1,
           "ms_median": round(statistics.median(laps), 2), "ms_p95": round(laps[int(0.95 * (len(laps) - 1))], 2),
           "ms_min": round(laps[0], 2), "ms_median_4_prices_per_market": round(statistics.median(many), 2),
           "load_avg": _load_avg()}
    print(f"inference 15 markets: median {out['ms_median']} ms, p95 {out['ms_p95']} ms", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prices", default=DEFAULT_PRICES)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "revpred_speed.json"))
    ap.add_argument("--quick", action="store_true", help="Only the default training setting and 50 inference repeats.")
    args = ap.parse_args()
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    history = load_history(args.prices)
    load_s = time.perf_counter() - t0
    settings = [(5, 8, 64)] if args.quick else [(5, 8, 64), (5, 8, 256), (1, 4, 64), (2, 8, 64), (5, 4, 64),
                                                 (5, 16, 64), (10, 6, 64), (10, 8, 64), (15, 8, 64)]
    result = {
        "benchmark": "revpred_speed",
        "machine": {"python": platform.python_version(), "torch": torch.__version__, "cpus": os.cpu_count(),
                    "note": "shared 2-core machine; other jobs were running (see load_avg)"},
        "prices": str(locate_prices(args.prices)),
        "load_seconds": round(load_s, 2),
        "targets": {"train_one_market_9_days_s": 60, "inference_15_markets_ms": 20},
        "inference": bench_inference(history, 50 if args.quick else 300),
        "training": bench_training(history, settings),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_json(Path(args.out), result, indent=1)
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
