"""Calibration of ``online-hazard`` on the provisioner's own queries in modern mode
-> ``benchmarks/results/calibration_modern.json`` and the table printed for docs/design/revpred.md ("Modern mode").

Modern mode ends a run at the earliest of its own capacity lifetime, the market's next capacity event and, with a max
price, the price crossing of the 2015 trace. The queries are ``eval_calibration.py``'s: all 15 markets, a decision
time every ``--stride`` minutes, ``b = price + delta`` for each delta of the ladder and ``b = on-demand``. Each query
is one fresh instance (its own id, so its own lifetime draw) launched at t; a launch the model refuses (capacity
outage, price) is left out, as in the legacy labels (in modern mode that is 43 % of the queries, refused for
capacity); ``y = 1`` iff its interruption notice falls in [t, t + 1 h] (the legacy labels' crossing is the notice too).

Periods (disjoint, in time order): ``baselines`` 2015-06-20 .. 07-15 (the rates of ``constant`` and ``empirical``,
and ``earlier``: both priors scored there, with the price predictor of the 28 days before it, the period the choice
between them was checked on), ``test`` 2015-07-15 .. 08-31 (every other score). Predictors:

- ``online-hazard (prior)``: what a run starts with (``spottune.compose.make_predictor("online-hazard")``: the
  gamma prior from the traces combined with the calibrated price predictor trained on the 28 days before the test
  start), its prior's first-hour q for a fulfilled launch (``spotmarket.fulfilled_p_le_1h``, the default since
  2026-11-27);
- ``online-hazard (prior, launch-time q)``: the same with the traces' q for a launch at a time independent of the
  market's events (``p_le_1h_target``, the default before);
- ``online-hazard (updated)``: the same, fed in time order with the outcome of every earlier query at the on-demand
  rung whose hour has ended, as the replay driver feeds a run's ended instances (``observe`` with the termination time,
  revoked iff the provider ended it for capacity): far more observations than one run makes;
- ``calibrated (price only)``: the price predictor alone (legacy mode's predictor, blind to capacity);
- ``constant`` / ``empirical``: the baseline period's share revoked per market / per market and rung.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/eval_calibration_modern.py`` (about 40 s on one core).
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

from revpred.calibration_report import constant_baseline, empirical_baseline, score  # noqa: E402
from revpred.ladder import ON_DEMAND, ladder_queries  # noqa: E402
from spotmarket.prices import to_seconds  # noqa: E402
from _common import write_json  # noqa: E402  (benchmarks/ is the script's folder: results JSONs carry their provenance)

ROOT = Path(__file__).resolve().parents[1]
PERIODS = {"baselines": ("2015-06-20", "2015-07-15"), "test": ("2015-07-15", "2015-08-31")}
TARGET_ECE = 0.03
HOUR_S, DAY_S = 3600.0, 86400.0


def modern_labels(model, queries) -> dict[str, np.ndarray]:
    """Per query row under ``model`` (one fresh instance per row, id ``q<index>``, so a row keeps its draw in a subset
    of the frame): ``fulfilled``, ``y`` (notice within
    the hour), ``capacity`` (the provider ends it for capacity, not price) and ``termination_s`` (inf: never; nan:
    refused)."""
    n = len(queries)
    out = {"fulfilled": np.zeros(n, bool), "y": np.zeros(n, int), "capacity": np.zeros(n, bool),
           "termination_s": np.full(n, np.nan)}
    for i, (idx, m, t, b) in enumerate(zip(queries.index, queries["market"], queries["t"].to_numpy(),
                                           queries["b"].to_numpy())):
        r = model.revocation(m, float(t), instance_id=f"q{idx}", max_price_usd_per_hour=float(b))
        if r.fulfilled:
            within = r.notice_s <= t + HOUR_S
            out["fulfilled"][i], out["y"][i], out["termination_s"][i] = True, int(within), r.termination_s
            out["capacity"][i] = str(r.cause) not in ("price", "none")
    return out


def updated_p(online, frame) -> np.ndarray:
    """``online``'s p of every row of ``frame`` (time order), after observing each earlier on-demand-rung row whose
    hour has ended by the row's decision time."""
    obs = frame[frame["rung"] == ON_DEMAND].sort_values("t")
    obs_t, k = obs["t"].to_numpy(), 0
    out = np.empty(len(frame))
    for t, idx in frame.groupby("t").indices.items():
        while k < len(obs) and obs_t[k] + HOUR_S <= t:
            row = obs.iloc[k]  # OnlineHazard counts an event only within its horizon (the first hour)
            end = min(float(row["termination_s"]), float(row["t"]) + 2 * HOUR_S)
            online.observe(row["market"], float(row["t"]), end, bool(row["capacity"]))
            k += 1
        sub = frame.iloc[idx]
        out[idx] = online.predict_proba(list(sub["market"]), float(t), sub["b"].to_numpy())
    return out


def main(argv=None) -> int:
    from spottune.compose import build_market, make_predictor

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stride", type=int, default=60, help="minutes between decision times")
    ap.add_argument("--seed", type=int, default=0, help="seed of the modern model's draws")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "calibration_modern.json"))
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    S = {k: (to_seconds(a), to_seconds(b)) for k, (a, b) in PERIODS.items()}
    setup = build_market(None, market_mode="modern", seed=args.seed)
    markets, model = list(setup.markets), setup.revocation_model
    od = {m: setup.catalog[m.instance_type].on_demand(m.region) for m in markets}
    t0 = time.perf_counter()
    queries, frames = {}, {}
    for name, (lo, hi) in S.items():
        queries[name] = q = ladder_queries(setup.history, markets, lo, hi, stride_min=args.stride, on_demand=od)
        lab = modern_labels(model, q)
        ok = lab.pop("fulfilled")
        frames[name] = q.assign(**lab)[ok]
    test = frames["test"]
    n_refused = len(queries["test"]) - len(test)
    label_s = time.perf_counter() - t0

    def priors(lo_s: float) -> dict:
        """Both priors, with the price predictor of the 28 days before ``lo_s`` (trained once, cached on disk)."""
        return {name: make_predictor("online-hazard", setup, lo_s - 28 * DAY_S, lo_s, args.seed, given_capacity=g)[0]
                for name, g in (("online-hazard (prior)", None), ("online-hazard (prior, launch-time q)", False))}

    def queried(frame):
        return list(frame["market"]), frame["t"].to_numpy(), frame["b"].to_numpy()

    early = frames["baselines"]
    earlier = {name: score(early["y"].to_numpy(), pred.fresh().predict_proba(*queried(early)), name)
               for name, pred in priors(S["baselines"][0]).items()}
    test_priors = priors(S["test"][0])
    online, price_only = test_priors["online-hazard (prior)"], test_priors["online-hazard (prior)"].price_predictor
    ms, t, b = queried(test)
    preds = {**{name: pred.fresh().predict_proba(ms, t, b) for name, pred in test_priors.items()},
             "online-hazard (updated)": updated_p(online.fresh(), test),
             "calibrated (price only)": price_only.predict_proba(ms, t, b),
             "constant": constant_baseline(frames["baselines"], test),
             "empirical": empirical_baseline(frames["baselines"], test)}
    y = test["y"].to_numpy()
    scores = {name: score(y, p, name) for name, p in preds.items()}
    # why the prior's level is off: the on-demand rung's share revoked within the hour (price crossings are rare there)
    # among the launches the model fulfils, and the same draws with outages off (every launch fulfilled), against the
    # traces' first-hour share the model is calibrated to
    from spotmarket import ModernHazardRevocation

    od_rung = queries["test"][queries["test"]["rung"] == ON_DEMAND]  # same indices, so the same draws
    no_outages = ModernHazardRevocation(model.calibration, args.seed, history=setup.history, outages=False)
    level = {"on_demand_rung_fulfilled": test.loc[test["rung"] == ON_DEMAND, "y"].mean(),
             "on_demand_rung_without_outages": modern_labels(no_outages, od_rung)["y"].mean(),
             "traces_first_hour_share": float(np.mean([model.calibration.lifetime(m).p_le_1h_target for m in markets]))}
    baselines = ("constant", "empirical")
    out = {"periods": PERIODS, "stride_min": args.stride, "seed": args.seed, "n_test": int(len(test)),
           "n_refused": n_refused, "share_revoked": float(y.mean()),
           "share_capacity_within_hour": float((test["capacity"] & (test["y"] == 1)).mean()),
           "label_s": round(label_s, 1), "scores": scores, "earlier_period_scores": earlier,
           "level": {k: float(v) for k, v in level.items()},
           "targets": {name: {"ece": s["ece"], "ece_met": bool(s["ece"] <= TARGET_ECE),
                              "brier_below_every_baseline": bool(all(s["brier"] < scores[b_]["brier"] for b_ in baselines))}
                       for name, s in scores.items() if name not in baselines}}
    write_json(Path(args.out), out, indent=1, default=float)
    print(f"test queries {len(test)} ({n_refused} refused, left out), revoked {y.mean():.3f}")
    print("| predictor | mean p | Brier | log loss | ECE (equal-width) | ECE (equal-count) | ROC AUC |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, s in scores.items():
        auc = "undefined" if math.isnan(s["roc_auc"]) else f"{s['roc_auc']:.3f}"
        print(f"| {name} | {s['mean_p']:.3f} | {s['brier']:.4f} | {s['log_loss']:.3f} | {s['ece']:.4f} | "
              f"{s['ece_quantile']:.4f} | {auc} |")
    print("level:", {k: round(float(v), 3) for k, v in level.items()})
    print("earlier period (baselines, 2015-06-20 .. 07-15):",
          {name: {k: round(v[k], 4) for k in ("mean_p", "brier", "ece")} for name, v in earlier.items()},
          f"revoked {early['y'].mean():.3f}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
