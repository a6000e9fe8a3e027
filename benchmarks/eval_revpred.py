"""Rolled RevPred evaluation -> benchmarks/results/revpred_eval.json (the RevPred work; tables in docs/design/revpred.md).

Suites:

- ``us``: the bidding-era trace ``us-east-1_2015.csv.gz``, all 15 markets, 5 windows one month apart
  (9 days of training, the next 3 days of test; test windows never overlap their training window).
- ``eu``: the post-2017 trace ``eu-west-1_2021-08.csv.gz``, the six SpotTune instance types in
  eu-west-1a (``Linux/UNIX (Amazon VPC)``), 2 windows.

Each window trains RevPred, the Tributary-style LSTM, logistic regression, the empirical rate and the
constant hazard (and, with ``--with-mixed``, [I] RevPred on mixed Algorithm 2 / random max prices) on
the training window only (``revpred.training.train_markets``, the code behind
``revpred train``), then scores them on the test window with random-delta and Algorithm 2 max prices
(``revpred.evaluation.evaluate``, the code behind ``revpred eval``). Results are pooled over markets
per window; the summary gives mean and standard deviation across windows.

Defaults: training stride 15 min, 6 epochs, batch 64, seed 0; test queries every 5 min (chosen to keep
the full run under ~25 min on a shared 2-core machine; see docs/design/revpred.md for the accuracy cost).
Usage (the full run takes ~20-25 min on a shared 2-core machine; run it in the background)::

    nohup .venv/bin/python benchmarks/eval_revpred.py > benchmarks/results/revpred_eval.log 2>&1 &
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from revpred.cli import build_predictors
from revpred.evaluation import evaluate
from spotmarket.prices import Market, load_history, locate_prices, to_seconds, to_timestamp
from revpred.training import TrainConfig, train_markets
from _common import write_json  # noqa: E402  (benchmarks/ is the script's folder: results JSONs carry their provenance)

ROOT = Path(__file__).resolve().parents[1]
SPOTTUNE_TYPES = ("r4.large", "r3.xlarge", "r4.xlarge", "m4.2xlarge", "r4.2xlarge", "m4.4xlarge")
SUITES = {
    "us": {"prices": "us-east-1_2015.csv.gz", "markets": None,
           "starts": ["2015-04-01", "2015-05-01", "2015-06-01", "2015-07-01", "2015-08-01"]},
    "eu": {"prices": "eu-west-1_2021-08.csv.gz",
           "markets": [f"eu-west-1a/{t}/Linux/UNIX (Amazon VPC)" for t in SPOTTUNE_TYPES],
           "starts": ["2021-08-03", "2021-08-17"]},
}
METRICS = ("accuracy", "f1", "roc_auc", "brier", "base_rate", "mean_p")


def _mean_sd(values: list[float]) -> dict:
    vals = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not vals:
        return {"mean": None, "sd": None, "n": 0}
    return {"mean": statistics.fmean(vals), "sd": statistics.stdev(vals) if len(vals) > 1 else 0.0, "n": len(vals)}


def _merge_reliability(tables: list[list[dict]]) -> list[dict]:
    out = []
    for bins in zip(*tables):
        n = sum(b["n"] for b in bins)
        sp = sum(b["n"] * b["mean_p"] for b in bins if b["n"])
        sy = sum(b["n"] * b["frac_pos"] for b in bins if b["n"])
        out.append({"lo": bins[0]["lo"], "hi": bins[0]["hi"], "n": n,
                    "mean_p": sp / n if n else None, "frac_pos": sy / n if n else None})
    return out


def summarise(windows: list[dict]) -> dict:
    """Mean/sd across windows of pooled metrics; per-market means; wins; merged reliability tables."""
    summary, per_market, wins, reliability = {}, {}, {}, {}
    rules = windows[0]["result"]["rules"]
    for rule, models in rules.items():
        summary[rule], per_market[rule], reliability[rule] = {}, {}, {}
        for name in models:
            pooled = [w["result"]["rules"][rule][name]["pooled"] for w in windows]
            summary[rule][name] = {k: _mean_sd([p.get(k) for p in pooled]) for k in METRICS}
            summary[rule][name]["n_pos"] = sum(p.get("n_pos", 0) for p in pooled)
            summary[rule][name]["n"] = sum(p.get("n", 0) for p in pooled)
            reliability[rule][name] = _merge_reliability([p["reliability"] for p in pooled if "reliability" in p])
            markets = sorted({m for w in windows for m in w["result"]["rules"][rule][name]["markets"]})
            per_market[rule][name] = {
                m: {k: _mean_sd([w["result"]["rules"][rule][name]["markets"].get(m, {}).get(k) for w in windows])["mean"]
                    for k in ("roc_auc", "brier", "f1", "accuracy", "base_rate")}
                for m in markets}
        # which model has the best AUC / Brier per (window, market)
        wins[rule] = {"roc_auc": {}, "brier": {}}
        for w in windows:
            res = w["result"]["rules"][rule]
            for m in next(iter(res.values()))["markets"]:
                for metric, better in (("roc_auc", max), ("brier", min)):
                    vals = {name: res[name]["markets"][m].get(metric) for name in res if name != "revpred_raw"}
                    vals = {k: v for k, v in vals.items() if v is not None and not math.isnan(v)}
                    if vals:
                        best = better(vals, key=vals.get)
                        wins[rule][metric][best] = wins[rule][metric].get(best, 0) + 1
    return {"pooled": summary, "per_market": per_market, "wins": wins, "reliability": reliability}


def run_suite(name: str, spec: dict, args) -> dict:
    history = load_history(spec["prices"])
    markets = [Market.parse(m) for m in spec["markets"]] if spec["markets"] else history.markets
    cfg = TrainConfig(stride_min=args.stride, epochs=args.epochs, seed=args.seed, n_threads=1)
    out = {"prices": str(locate_prices(spec["prices"])), "markets": [str(m) for m in markets], "config": cfg.to_dict(),
           "train_days": args.train_days, "test_days": args.test_days, "test_stride_min": args.test_stride,
           "windows": []}
    for start in spec["starts"][: args.windows]:
        s = to_seconds(f"{start}T00:00Z")
        e = s + args.train_days * 86400.0
        te = e + args.test_days * 86400.0
        t0 = time.perf_counter()
        if args.only_mixed:  # ablation: only RevPred on mixed max prices
            ms = train_markets(history, markets, s, e, replace(cfg, revpred_max_prices="mixed"), kinds=["revpred"])
            predictors = {"revpred_mixed": ms.predictor("revpred")}
        else:
            ms = train_markets(history, markets, s, e, cfg)
            predictors = build_predictors(ms)
        if args.with_mixed and not args.only_mixed:  # [I] RevPred trained on mixed Algorithm 2 / random max prices
            mixed = train_markets(history, markets, s, e, replace(cfg, revpred_max_prices="mixed"), kinds=["revpred"])
            predictors["revpred_mixed"] = mixed.predictor("revpred")
        train_s = time.perf_counter() - t0
        res = evaluate(history, predictors, markets, e, te, stride_min=args.test_stride, seed=args.seed,
                       variations=cfg.variations, grid_method=cfg.grid_method, train_end_s=e)
        window = {"train_start": to_timestamp(s).isoformat(), "train_end": to_timestamp(e).isoformat(),
                  "test_start": to_timestamp(e).isoformat(), "test_end": to_timestamp(te).isoformat(),
                  "train_seconds": round(train_s, 1), "eval_seconds": round(time.perf_counter() - t0 - train_s, 1),
                  "train_info": {str(m): {"positive_share": f.info["positive_share"],
                                          "best_epoch": {k: getattr(v.estimator, "best_epoch_", None) for k, v in f.models.items()}}
                                 for m, f in ms.fits.items()},
                  "result": res}
        out["windows"].append(window)
        p = res["rules"]
        print(f"[{name}] {start}: train {train_s:.0f} s; pooled AUC " + "; ".join(
            f"{rule} {model} {r['pooled'].get('roc_auc', float('nan')):.3f}" for rule in p for model, r in p[rule].items()
            if model in ("revpred", "tributary", "revpred_mixed")), flush=True)
        args.on_window(out)
    out["summary"] = summarise(out["windows"])
    out["reproduce_cli_example"] = (
        f"revpred train --prices {spec['prices']} --all-markets --train-start {spec['starts'][0]}T00:00Z "
        f"--train-end {to_timestamp(to_seconds(spec['starts'][0] + 'T00:00Z') + args.train_days * 86400).isoformat()} "
        f"--out /tmp/m --stride {args.stride} --epochs {args.epochs} --seed {args.seed}; revpred eval ... --stride {args.test_stride}")
    return out


def _clean(o):
    if isinstance(o, dict):
        return {k: _clean(v) for k, v in o.items()}
    if isinstance(o, list):
        return [_clean(v) for v in o]
    if isinstance(o, (float, np.floating)):
        return None if not math.isfinite(float(o)) else float(o)
    if isinstance(o, np.integer):
        return int(o)
    return o


MODEL_ORDER = ("revpred", "revpred_raw", "revpred_mixed", "tributary", "logreg", "empirical", "constant")


def _ms(d: dict | None, nwin: int, digits: int = 3) -> str:
    if not d or d.get("mean") is None:
        return "n/a"
    if d["n"] < 2:
        return f"{d['mean']:.{digits}f} ({d['n']} window)"
    extra = "" if d["n"] == nwin else f" ({d['n']} windows)"
    return f"{d['mean']:.{digits}f} ± {d['sd']:.{digits}f}{extra}"


def _reliability_md(summ: dict, rule: str, models: tuple[str, ...]) -> list[str]:
    rows = ["| p bin | " + " | ".join(f"{m}: n, mean p, observed" for m in models) + " |",
            "| --- |" + " --- |" * len(models)]
    bins = summ["reliability"][rule][models[0]]
    for k, b in enumerate(bins):
        cells = []
        for m in models:
            r = summ["reliability"][rule][m][k]
            cells.append(f"{r['n']}, {r['mean_p']:.3f}, {r['frac_pos']:.3f}" if r["n"] else "0")
        rows.append(f"| {b['lo']:.1f}–{b['hi']:.1f} | " + " | ".join(cells) + " |")
    return rows


def markdown(result: dict) -> str:
    """Markdown tables of a result JSON (what docs/design/revpred.md shows)."""
    lines = []
    for name, suite in result["suites"].items():
        summ = suite["summary"]
        nwin = len(suite["windows"])
        lines.append(f"### {name}: {suite['prices'].split('/')[-1]}, {len(suite['markets'])} markets, {nwin} windows")
        lines.append("")
        for rule in ("random", "alg2"):
            pooled = summ["pooled"][rule]
            anyname = next(iter(pooled))
            lines.append(f"**Test max prices: {rule}** (test queries {pooled[anyname]['n']}, positives "
                         f"{pooled[anyname]['n_pos']}; pooled over markets, mean ± sd over {nwin} windows)")
            lines.append("")
            lines.append("| model | accuracy | F1 | ROC AUC | Brier | mean p | per-market AUC (mean) |")
            lines.append("| --- | --- | --- | --- | --- | --- | --- |")
            for model in [m for m in MODEL_ORDER if m in pooled]:
                r = pooled[model]
                aucs = [v["roc_auc"] for v in summ["per_market"][rule][model].values() if v.get("roc_auc") is not None]
                macro = f"{statistics.fmean(aucs):.3f} ({len(aucs)} mkts)" if aucs else "n/a"
                lines.append(f"| {model} | {_ms(r['accuracy'], nwin)} | {_ms(r['f1'], nwin)} | {_ms(r['roc_auc'], nwin)} | "
                             f"{_ms(r['brier'], nwin)} | {_ms(r['mean_p'], nwin)} | {macro} |")
            base = pooled[anyname]["base_rate"]
            lines.append(f"| (test base rate) | | | | | {_ms(base, nwin)} | |")
            lines.append("")
            wins = summ["wins"][rule]
            lines.append("Best model per (window, market): AUC " + ", ".join(f"{k} {v}" for k, v in sorted(
                wins["roc_auc"].items(), key=lambda kv: -kv[1])) + "; Brier " + ", ".join(
                f"{k} {v}" for k, v in sorted(wins["brier"].items(), key=lambda kv: -kv[1])) + ".")
            lines.append("")
            rel_models = tuple(m for m in ("revpred", "revpred_raw", "revpred_mixed", "tributary", "empirical")
                               if m in pooled)
            if rel_models:
                lines.append(f"Reliability, {rule} max prices (all windows and markets merged):")
                lines.append("")
                lines += _reliability_md(summ, rule, rel_models)
                lines.append("")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", choices=["us", "eu", "all"], default="all")
    ap.add_argument("--stride", type=int, default=15, help="Minutes between training samples.")
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--test-stride", type=int, default=5, help="Minutes between test queries.")
    ap.add_argument("--train-days", type=float, default=9.0)
    ap.add_argument("--test-days", type=float, default=3.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--with-mixed", action="store_true",
                    help="Also train RevPred on mixed Algorithm 2 / random max prices (+1 LSTM per market).")
    ap.add_argument("--only-mixed", action="store_true",
                    help="Ablation: train and score only RevPred on mixed max prices (see docs/design/revpred.md).")
    ap.add_argument("--windows", type=int, default=None, help="Use only the first N start dates of each suite.")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "revpred_eval.json"))
    ap.add_argument("--report", metavar="JSON", help="Only print the markdown tables of an existing result file.")
    args = ap.parse_args()
    if args.report:
        print(markdown(json.loads(Path(args.report).read_text())))
        return
    torch.set_num_threads(1)
    result = {"benchmark": "revpred_eval", "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "load_avg_start": list(os.getloadavg()), "suites": {}}
    outp = Path(args.out)
    outp.parent.mkdir(parents=True, exist_ok=True)

    def checkpoint() -> None:
        write_json(outp, _clean(result), indent=1)

    t0 = time.perf_counter()
    for name in (["us", "eu"] if args.suite == "all" else [args.suite]):
        def on_window(partial: dict, _name: str = name) -> None:
            result["suites"][_name] = partial  # partial results survive an interrupted run
            checkpoint()

        args.on_window = on_window
        result["suites"][name] = run_suite(name, SUITES[name], args)
        checkpoint()
    result["total_seconds"] = round(time.perf_counter() - t0, 1)
    result["load_avg_end"] = list(os.getloadavg())
    checkpoint()
    print(markdown(result))
    print(f"done in {result['total_seconds']:.0f} s -> {outp}")


if __name__ == "__main__":
    main()
