"""Predictive ASHA (``earlycurve.PredictiveStopping``) against SHA/ASHA/Hyperband at their best.

Same pool split, replay and selection rule as ``bench_early_stopping.py`` (``docs/design/earlycurve.md`` §6):
per data set the pool is split once (seed 0) into TUNING and TEST configurations; 80 tuning studies
(the first 40 are §6's) and §6's 40 test studies of 16, 4 workers. Every setting is chosen on the
tuning studies (cheapest with mean top-3 ≥ 0.95, else most accurate) and reported on the test studies.

- **Peers** (Ray's ASHA rule, Optuna's SHA and Hyperband): their grids of
  ``bench_early_stopping.peer_grids`` tuned on the SAME 80 tuning studies as ours, for every set (the
  recorded opda and cakelab sets, and the built-in family: random-search curves of spottune's workloads,
  ``benchmarks/builtin_curves.py``). The best peer of a set is the :func:`choose_best` of the three
  peers' best settings, on tuning. §6's choice (40 tuning studies) is kept in the JSON for reference.
- **Ours**: a grid of rung fractions × keep_first × keep × slope × bound (``GRID``). Reported: the
  setting chosen per data set (as the peers are), ONE setting shared by every set (the cheapest mean
  cost ÷ best peer on tuning whose top-3 reaches 0.95 on every set, else the highest worst-set top-3; the shipped
  ``PREDICTIVE_DEFAULTS``), and two ablations of the shared setting: ``slope=0, bound off`` (ASHA +
  re-judging only, ranks by the last value) and ``slope=0`` (last value at the same rungs; the check
  against the last value at every rung).
- **Fully parallel** (16 workers, how ``spottune run``/``simulate`` train a study): ours (shared
  setting) and the reimplemented ASHA re-tuned at 16 workers on the tuning studies (Optuna's SHA and
  Hyperband were not re-run at 16 workers).
- **Predictor recall** at θ ∈ {0.3, 0.5, 0.7, 0.9}: on the test studies, the share where the true best
  is among the 3 lowest scores, for the last value and the shared setting's slope score
  ``y(θ) + slope · (y(θ) − y(θ/2))``.

``--score learned`` (§8.8, design ES15) re-runs only the sets of ``--datasets`` (default AlexNet, cakelab and
ConvNeXt as a check where the target is met) with the rung score replaced by a
:class:`earlycurve.ResidualCurvePredictor` fitted on that set's TUNING half only (``split_pool``, seed as above;
its θs are the grid's rung fractions and ``RESIDUAL_THETAS``). The learned settings (``LEARNED_GRID``: the
rung fractions × keep_first × keep × bound of ``GRID``) are added as extra candidates to the 252 slope settings,
whose tuning figures are read from ``early_stopping_predictive.json`` (as is the best peer); rows of sets already
in the output and not re-run are kept (same configuration only); the per-set choice
is re-made over the union by the same rule and reported on the same test studies, next to the learned-only
choice and the rule fixed in advance against the winner's curse (cheapest with tuning top-3 ≥ 0.975, over
the union). Writes ``benchmarks/results/early_stopping_learned.json``.

Writes ``benchmarks/results/early_stopping_predictive.json``::

    .venv/bin/python benchmarks/builtin_curves.py                     # the built-in family's curves, 3 min
    .venv/bin/python benchmarks/bench_predictive_stop.py              # about 27 min on one shared core
    .venv/bin/python benchmarks/bench_predictive_stop.py --markdown   # the tables of docs/design/earlycurve.md §8
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_predictive_stop.py --score learned   # §8.8, a few min
    .venv/bin/python benchmarks/bench_predictive_stop.py --score learned --markdown
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from _common import BUILTIN_CURVES, write_json  # noqa: E402  (benchmarks/ is the script's folder)
from earlycurve import RESIDUAL_THETAS, ResidualCurvePredictor
from earlycurve._online_stop import rungs_for
from earlycurve.evaluation import find_datasets, split_pool
from earlycurve.evaluation._stoppers import ASHAStopper, OnlineRankStopper, PredictiveStopper
from earlycurve.evaluation._stopping import StudyPool, choose_best, evaluate_stopper, replay, sample_studies, summarize, tune_and_report

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "early_stopping_predictive.json"
OUT_LEARNED = ROOT / "benchmarks" / "results" / "early_stopping_learned.json"
LEARNED_SETS = "opda-alexnet,cakelab-resnet32,opda-convnext"
#: Fixed before any test result of the learned score was seen (§8.6's stricter rule): the cheapest setting
#: whose tuning top-3 reaches this, over the union of the slope and learned grids.
ROBUST_TARGET = 0.975
PEERS_JSON = ROOT / "benchmarks" / "results" / "early_stopping.json"
#: data set -> (family, grid steps)
SETS = {"opda-alexnet": ("opda", 50), "opda-convnext": ("opda", 50), "cakelab-resnet32": ("cakelab", 16),
        "builtin-digits-mlp": ("built-in", 50), "builtin-logreg": ("built-in", 50), "builtin-linear-svm": ("built-in", 50)}
BUILTIN_FILES = {"builtin-digits-mlp": "builtin_digits-mlp_curves.csv.gz", "builtin-logreg": "builtin_logreg_curves.csv.gz",
                 "builtin-linear-svm": "builtin_linear-svm_curves.csv.gz"}
PEERS = ("asha", "sha", "hyperband")
FRACTIONS = ((0.04, 0.1), (0.04, 0.2), (0.06, 0.3), (0.1, 0.3), (0.04, 0.1, 0.3), (0.1, 0.3, 0.5), (0.2, 0.5))
KEEP_FIRST = (0.375, 0.5, 0.75)
KEEP = (0.125, 0.25, 0.5)
SLOPES = (0.0, 1.0)
BOUNDS = (0, 1)  # bound_k; 0 = off
GUARDS = (1,)
BOUND_QUANTILE = 0.1
THETAS = (0.3, 0.5, 0.7, 0.9)
TARGET = 0.95


def grid() -> dict[str, dict]:
    out = {}
    for fr, kf, k, sl, bk, g in itertools.product(FRACTIONS, KEEP_FIRST, KEEP, SLOPES, BOUNDS, GUARDS):
        out[name(fr, kf, k, sl, bk, g)] = dict(fractions=fr, keep_first=kf, keep=k, slope=sl, bound_k=bk,
                                               bound_quantile=BOUND_QUANTILE, guard=g)
    return out


def name(fr, kf, k, sl, bk, g=1) -> str:
    return f"fractions={list(fr)} keep_first={kf} keep={k} slope={sl} bound_k={bk} guard={g}"


def _make(kw: dict):
    return lambda: PredictiveStopper(**kw)


def _means(s: dict) -> dict:
    return {m: s[m]["mean"] for m in ("top1", "top3", "regret", "cost")}


def peers_for(ds: str, studies, n_steps: int, workers: int) -> dict:
    """Per peer: its grid tuned on the tuning studies (``tune_and_report``), best and default reported on test."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_early_stopping import peer_grids

    out = {}
    for p, g in peer_grids(n_steps).items():
        if p not in PEERS:
            continue
        t0 = time.time()
        r = tune_and_report(g, studies[0], studies[1], workers=workers, target_top3=TARGET)
        out[p] = {"tuning": r["tuning"], "best": r["best"], "default": r["default"]}
        print(f"  {ds} {p}: {len(g)} settings, {time.time() - t0:.0f} s", flush=True)
    return out


def best_peer(peers: dict) -> str:
    return choose_best({p: peers[p]["best"]["tuning"] for p in peers}, target_top3=TARGET)


def choose_common(tuned: dict[str, dict[str, dict]], peer_cost: dict[str, float]) -> str:
    """The cheapest mean (tuning cost ÷ best peer's tuning cost) whose tuning top-3 ≥ TARGET on every set,
    else the best worst-set top-3."""
    names = list(next(iter(tuned.values())))
    worst = {n: min(t[n]["top3"] for t in tuned.values()) for n in names}
    ratio = {n: float(np.mean([tuned[ds][n]["cost"] / peer_cost[ds] for ds in tuned])) for n in names}
    ok = [n for n in names if worst[n] >= TARGET - 1e-12]
    return min(ok, key=lambda n: (ratio[n], names.index(n))) if ok else min(names, key=lambda n: (-worst[n], ratio[n]))


def recall(test, kw: dict) -> dict:
    """Top-3 recall at each θ of the last value and of the slope score (test studies)."""
    out = {}
    for th in THETAS:
        hits = {"last_value": [], "slope_score": []}
        for s in test:
            n = s.curves.shape[1]
            r = max(1, int(round(th * n)))
            y = s.curves[:, r - 1]
            y0 = s.curves[:, max(1, r - max(1, r // 2)) - 1]
            best = int(np.argmin(s.finals))
            for label, score in (("last_value", y), ("slope_score", y + kw["slope"] * (y - y0))):
                hits[label].append(float(best in np.argsort(score, kind="stable")[:3]))
        out[f"{th:.1f}"] = {k: float(np.mean(v)) for k, v in hits.items()}
    return out


def where_cost_goes(test, make, workers: int) -> dict:
    """Mean steps trained (÷ n_steps) by the first wave (the first ``workers`` trials launched) and by the
    others, and the mean number of trials trained to the end, over the test studies."""
    first, rest, full = [], [], []
    for s in test:
        steps = replay(s, make(), workers) / s.curves.shape[1]
        first.append(steps[:workers].mean())
        rest.append(steps[workers:].mean())
        full.append(float(np.sum(steps >= 1)))
    return {"first_wave": float(np.mean(first)), "others": float(np.mean(rest)), "trained_to_end": float(np.mean(full))}


def run(args) -> dict:
    warnings.filterwarnings("ignore")
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sets = find_datasets(args.data, digits=[BUILTIN_CURVES / f for f in BUILTIN_FILES.values()
                                            if (BUILTIN_CURVES / f).exists()])
    recorded = json.loads(PEERS_JSON.read_text())["datasets"]
    settings = grid()
    if args.quick:
        settings = dict(list(settings.items())[:: max(1, len(settings) // 12)])
    out = {"config": {"tuning": args.tuning, "test": args.test, "workers": args.workers, "seed": args.seed,
                      "grid_size": len(settings), "target_top3": TARGET, "bound_quantile": BOUND_QUANTILE},
           "datasets": {}}
    studies, tuned, peer_cost = {}, {}, {}
    for ds in args.datasets.split(","):
        family, n = SETS[ds]
        key = ds.removeprefix("builtin-") if ds.startswith("builtin-") else ds
        cs = sets.get(ds) or sets.get(key)
        if cs is None:
            print(f"{ds}: no curves, skipped (run benchmarks/builtin_curves.py)", flush=True)
            continue
        pool = StudyPool.from_curves(cs, n)
        st = sample_studies(pool, n_tuning=args.tuning, n_test=args.test, size=16, seed=args.seed)
        studies[ds] = st
        peers = peers_for(ds, st, n, args.workers)
        bp = best_peer(peers)
        peer_cost[ds] = peers[bp]["best"]["tuning"]["cost"]["mean"]
        t0 = time.time()
        tuned[ds] = {nm: _means(summarize(evaluate_stopper(st[0], _make(kw), args.workers))) for nm, kw in settings.items()}
        print(f"{ds}: {len(settings)} settings of ours on tuning, {time.time() - t0:.0f} s", flush=True)
        out["datasets"][ds] = {"family": family, "n_curves": int(pool.grid.shape[0]), "n_steps": n, "counts": cs.counts,
                               "peers": {p: {"setting": peers[p]["best"]["setting"], "tuning": _means(peers[p]["best"]["tuning"]),
                                             "test": peers[p]["best"]["test"]} for p in PEERS},
                               "best_peer": bp, "tuning": tuned[ds]}
        if ds in recorded:  # §6's peers (tuned on the first 40 of these tuning studies), for reference
            v = recorded[ds]
            out["datasets"][ds]["peers_40_tuning_studies"] = {p: {"setting": v["methods"][p]["best"]["setting"],
                                                                  "test_cost": v["methods"][p]["best"]["test"]["cost"]["mean"],
                                                                  "test_top3": v["methods"][p]["best"]["test"]["top3"]["mean"]}
                                                              for p in PEERS}
    common = choose_common(tuned, peer_cost)
    out["common"] = common
    for ds, row in out["datasets"].items():
        tun, test = studies[ds]
        own = choose_best({nm: {m: {"mean": v} for m, v in s.items()} for nm, s in tuned[ds].items()}, target_top3=TARGET)
        kw = settings[common]
        variants = {"per_set": (own, settings[own]), "common": (common, kw),
                    "common_slope0_nobound": (name(kw["fractions"], kw["keep_first"], kw["keep"], 0.0, 0, kw["guard"]),
                                              kw | {"slope": 0.0, "bound_k": 0}),
                    "common_slope0": (name(kw["fractions"], kw["keep_first"], kw["keep"], 0.0, kw["bound_k"], kw["guard"]),
                                      kw | {"slope": 0.0})}
        row["ours"] = {}
        for label, (nm, k) in variants.items():
            row["ours"][label] = {"setting": nm, "tuning": tuned[ds].get(nm) or _means(summarize(evaluate_stopper(tun, _make(k), args.workers))),
                                  "test": summarize(evaluate_stopper(test, _make(k), args.workers))}
        pc = row["peers"][row["best_peer"]]["test"]["cost"]["mean"]
        row["cost_ratio"] = {label: v["test"]["cost"]["mean"] / pc for label, v in row["ours"].items()}
        # fully parallel: ours (shared) and ASHA re-tuned at 16 workers
        n = row["n_steps"]
        res = sorted({r for r in (1, 2, 3, 5, 8, 12, 16) if r < n // 2} | {max(1, n // 8)})
        asha_grid = {"default grace_period=1 rf=4": lambda n=n: ASHAStopper(n)} | {
            f"grace_period={r} rf={rf}": (lambda r=r, rf=rf, n=n: ASHAStopper(n, r, rf)) for r in res for rf in (2, 3, 4)}
        a16 = tune_and_report(asha_grid, tun, test, workers=16, target_top3=TARGET)
        row["fully_parallel"] = {"asha": {"setting": a16["best"]["setting"], "test": a16["best"]["test"]},
                                 "ours_common": {"setting": common, "test": summarize(evaluate_stopper(test, _make(kw), 16))}}
        row["fully_parallel"]["cost_ratio"] = (row["fully_parallel"]["ours_common"]["test"]["cost"]["mean"]
                                               / a16["best"]["test"]["cost"]["mean"])
        row["predictor_recall_top3"] = recall(test, kw)
        # where the cost goes (test studies, 4 workers): the shipped rank rule, the best ASHA, ours
        asha_set = row["peers"]["asha"]["setting"]
        g = dict(x.split("=") for x in asha_set.replace("default ", "").split())
        row["cost_split"] = {
            "rank (shipped)": where_cost_goes(test, OnlineRankStopper, args.workers),
            f"asha {asha_set}": where_cost_goes(test, lambda g=g, n=n: ASHAStopper(n, float(g["grace_period"]), float(g["rf"])), args.workers),
            "ours (shared)": where_cost_goes(test, _make(kw), args.workers),
            "ours (shared), retro=False": where_cost_goes(test, _make(kw | {"retro": False}), args.workers)}
    return out


def learned_grid() -> dict[str, dict]:
    """The learned-score candidates: ``GRID``'s rung fractions × keep_first × keep × bound, score ``learned``."""
    out = {}
    for fr, kf, k, bk, g in itertools.product(FRACTIONS, KEEP_FIRST, KEEP, BOUNDS, GUARDS):
        out[f"fractions={list(fr)} keep_first={kf} keep={k} score=learned bound_k={bk} guard={g}"] = dict(
            fractions=fr, keep_first=kf, keep=k, score="learned", bound_k=bk, bound_quantile=BOUND_QUANTILE, guard=g)
    return out


def fit_learned(pool: StudyPool, seed: int) -> ResidualCurvePredictor:
    """``ResidualCurvePredictor`` (constructor defaults but its θs and ``n_se=1``, the default when §8.8 was measured)
    fitted on the pool's TUNING half only, with a model at every rung fraction of ``FRACTIONS`` on this grid (and
    ``RESIDUAL_THETAS``)."""
    n = pool.n_steps
    rung_thetas = {r / n for fr in FRACTIONS for r in rungs_for(n, fr)}
    rows = split_pool(pool, seed)["tuning"]
    steps = np.arange(1, n + 1)
    model = ResidualCurvePredictor(thetas=sorted(rung_thetas | set(RESIDUAL_THETAS)), n_se=1.0, random_state=seed)
    return model.fit([(steps, pool.grid[i], n) for i in rows])


def rung_recall(test, model, n: int) -> dict:
    """Top-3 recall (test studies) of the last value, the slope score (slope 1) and the learned score at every
    rung of the grid and at ``THETAS``: the share of studies whose true best is among the 3 lowest scores."""
    cuts = sorted({r for fr in FRACTIONS for r in rungs_for(n, fr)} | {max(1, int(round(t * n))) for t in THETAS})
    out = {}
    for r in cuts:
        hits = {"last_value": [], "slope_score": [], "learned": []}
        steps = np.arange(1, r + 1)
        for s in test:
            y = s.curves[:, r - 1]
            y0 = s.curves[:, max(1, r - max(1, r // 2)) - 1]
            lr = np.array([model.predict_final(steps, c[:r], n).value for c in s.curves])
            best = int(np.argmin(s.finals))
            for label, score in (("last_value", y), ("slope_score", y + (y - y0)), ("learned", lr)):
                hits[label].append(float(best in np.argsort(score, kind="stable")[:3]))
        out[str(r)] = {"theta": r / n, "alpha": model.alpha_[model.theta_model(r / n)]} | {k: float(np.mean(v)) for k, v in hits.items()}
    return out


def run_learned(args) -> dict:
    """``--score learned``: the learned rung score as extra candidates, on the sets of ``args.datasets`` (module docstring)."""
    warnings.filterwarnings("ignore")
    sets = find_datasets(args.data, digits=[BUILTIN_CURVES / f for f in BUILTIN_FILES.values()
                                            if (BUILTIN_CURVES / f).exists()])
    base = json.loads(args.base.read_text())
    if base["config"]["seed"] != args.seed or base["config"]["tuning"] != args.tuning or base["config"]["test"] != args.test:
        raise SystemExit(f"{args.base} was made with another seed or study counts; re-run it first")
    slope = grid()
    learned = learned_grid()
    if args.quick:
        learned = dict(list(learned.items())[:: max(1, len(learned) // 12)])
    out = {"config": {"tuning": args.tuning, "test": args.test, "workers": args.workers, "seed": args.seed,
                      "learned_grid_size": len(learned), "slope_grid_size": len(slope), "target_top3": TARGET,
                      "robust_target_top3": ROBUST_TARGET, "base": args.base.name}, "datasets": {}}
    for ds in args.datasets.split(","):
        family, n = SETS[ds]
        key = ds.removeprefix("builtin-") if ds.startswith("builtin-") else ds
        cs = sets.get(ds) or sets.get(key)
        row0 = base["datasets"].get(ds)
        if cs is None or row0 is None:
            print(f"{ds}: no curves or no slope results, skipped", flush=True)
            continue
        pool = StudyPool.from_curves(cs, n)
        tun, test = sample_studies(pool, n_tuning=args.tuning, n_test=args.test, size=16, seed=args.seed)
        t0 = time.time()
        model = fit_learned(pool, args.seed)
        fit_s = time.time() - t0
        t0 = time.time()
        tuned_l = {nm: _means(summarize(evaluate_stopper(tun, _make(kw | {"predictor": model}), args.workers)))
                   for nm, kw in learned.items()}
        print(f"{ds}: fit {fit_s:.1f} s; {len(learned)} learned settings on tuning, {time.time() - t0:.0f} s", flush=True)
        tuned = row0["tuning"] | tuned_l
        wrap = lambda names: {nm: {m: {"mean": v} for m, v in tuned[nm].items()} for nm in names}  # noqa: E731
        choices = {"per_set_slope": choose_best(wrap(slope), target_top3=TARGET),
                   "per_set_learned_only": choose_best(wrap(learned), target_top3=TARGET),
                   "per_set_union": choose_best(wrap(list(slope) + list(learned)), target_top3=TARGET),
                   "robust_union": choose_best(wrap(list(slope) + list(learned)), target_top3=ROBUST_TARGET)}
        pc = row0["peers"][row0["best_peer"]]["test"]["cost"]["mean"]
        row = {"family": family, "n_steps": n, "best_peer": row0["best_peer"],
               "best_peer_setting": row0["peers"][row0["best_peer"]]["setting"],
               "best_peer_test": {m: row0["peers"][row0["best_peer"]]["test"][m]["mean"] for m in ("top1", "top3", "regret", "cost")},
               "alpha": {f"{t:.4f}": model.alpha_[t] for t in model.thetas}, "tuning_learned": tuned_l, "choices": {}}
        for label, nm in choices.items():
            kw = (learned[nm] | {"predictor": model}) if nm in learned else slope[nm]
            te = summarize(evaluate_stopper(test, _make(kw), args.workers))
            row["choices"][label] = {"setting": nm, "score": "learned" if nm in learned else "slope", "tuning": tuned[nm],
                                     "test": {m: te[m]["mean"] for m in ("top1", "top3", "regret", "cost")},
                                     "test_sd": {m: te[m]["sd"] for m in ("top3", "cost")}, "cost_ratio": te["cost"]["mean"] / pc}
        # the slope choice must reproduce the base JSON (same studies, same rule): a check of the replay
        ref = row0["ours"]["per_set"]
        row["per_set_slope_matches_base"] = bool(ref["setting"] == choices["per_set_slope"]
                                                 and abs(ref["test"]["cost"]["mean"] - row["choices"]["per_set_slope"]["test"]["cost"]) < 1e-9)
        row["recall_top3"] = rung_recall(test, model, n)
        out["datasets"][ds] = row
    return out


def frontier(r: dict, base: dict) -> list[str]:
    """Tuning studies only: the lowest mean tuning cost reaching each tuning top-3 level, slope vs learned grids."""
    levels = (0.9, TARGET, ROBUST_TARGET, 1.0)
    lines = ["**Tuning studies only: lowest mean cost whose tuning top-3 reaches the level, slope grid / learned grid**", "",
             "| data set | " + " | ".join(f"top-3 ≥ {x}" for x in levels) + " |", "| --- |" + " --- |" * len(levels)]
    for ds, row in r["datasets"].items():
        sl, lr = base["datasets"][ds]["tuning"], row["tuning_learned"]
        low = lambda d, x: min((v["cost"] for v in d.values() if v["top3"] >= x - 1e-12), default=float("nan"))  # noqa: E731
        lines.append(f"| {ds} | " + " | ".join(f"{low(sl, x):.3f} / {low(lr, x):.3f}" for x in levels) + " |")
    return lines


def markdown_learned(r: dict, base: dict | None = None) -> str:
    f = lambda s: f"{s['top1']:.2f} / {s['top3']:.2f} / {s['cost']:.3f}"  # noqa: E731
    labels = ("per_set_slope", "per_set_learned_only", "per_set_union", "robust_union")
    lines = ["| data set | best peer: test top-1 / top-3 / cost | " + " | ".join(
        f"{x}: test top-1 / top-3 / cost (tuning top-3) | ÷ peer" for x in labels) + " |", "| --- | --- |" + " --- | --- |" * len(labels)]
    for ds, row in r["datasets"].items():
        c = row["choices"]
        lines.append(f"| {ds} | {row['best_peer']} {row['best_peer_setting']}: {f(row['best_peer_test'])} | " + " | ".join(
            f"{f(c[x]['test'])} ({c[x]['tuning']['top3']:.3f}) | {c[x]['cost_ratio']:.2f}" for x in labels) + " |")
    lines += [""] + [f"- {ds} {x}: `{row['choices'][x]['setting']}`" for ds, row in r["datasets"].items() for x in labels]
    lines += ["", "**Top-3 recall at rung steps (test studies): last value / slope score / learned [alpha]**", ""]
    for ds, row in r["datasets"].items():
        lines.append(f"- {ds}: " + "; ".join(f"step {k} (θ {v['theta']:.3f}): {v['last_value']:.2f} / {v['slope_score']:.2f} / "
                                            f"{v['learned']:.2f} [{v['alpha']:g}]" for k, v in row["recall_top3"].items()))
    if base is not None:
        lines += [""] + frontier(r, base)
    return "\n".join(lines)


def markdown(r: dict) -> str:
    f = lambda s: f"{s['top1']['mean']:.2f} / {s['top3']['mean']:.2f} / {s['cost']['mean']:.3f}"  # noqa: E731
    lines = [f"Shared setting (chosen on tuning, every set): `{r['common']}`, bound quantile {r['config']['bound_quantile']}.", "",
             "| family | data set | best peer (chosen on tuning): test top-1 / top-3 / cost | ours, shared setting | ÷ peer | "
             "ours, per-set setting | ÷ peer | shared, slope 0 (last value) | ÷ peer | shared, slope 0, no bound | ÷ peer |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for ds, row in r["datasets"].items():
        p = row["peers"][row["best_peer"]]
        o, c = row["ours"], row["cost_ratio"]
        lines.append(f"| {row['family']} | {ds} | {row['best_peer']} {p['setting']}: {f(p['test'])} | {f(o['common']['test'])} | "
                     f"{c['common']:.2f} | {f(o['per_set']['test'])} | {c['per_set']:.2f} | {f(o['common_slope0']['test'])} | "
                     f"{c['common_slope0']:.2f} | {f(o['common_slope0_nobound']['test'])} | {c['common_slope0_nobound']:.2f} |")
    lines += ["", "Per-set settings: " + "; ".join(f"{ds}: `{row['ours']['per_set']['setting']}`" for ds, row in r["datasets"].items()),
              "", "**Fully parallel (16 workers)**", "",
              "| data set | ASHA re-tuned at 16 workers: test top-1 / top-3 / cost | ours, shared setting | ÷ ASHA |",
              "| --- | --- | --- | --- |"]
    for ds, row in r["datasets"].items():
        fp = row["fully_parallel"]
        lines.append(f"| {ds} | {fp['asha']['setting']}: {f(fp['asha']['test'])} | {f(fp['ours_common']['test'])} | {fp['cost_ratio']:.2f} |")
    lines += ["", "**Where the cost goes (test studies, 4 workers): steps ÷ n of the first 4 trials launched / of the "
              "other 12 / trials trained to the end**", "", "| data set | " + " | ".join(next(iter(r["datasets"].values()))["cost_split"]) + " |",
              "| --- |" + " --- |" * len(next(iter(r["datasets"].values()))["cost_split"])]
    for ds, row in r["datasets"].items():
        lines.append(f"| {ds} | " + " | ".join(f"{v['first_wave']:.2f} / {v['others']:.2f} / {v['trained_to_end']:.1f}"
                                              for v in row["cost_split"].values()) + " |")
    lines += ["", "**Top-3 recall of the ranking score at θ (test studies): last value / slope score**", "",
              "| data set | " + " | ".join(f"θ {t}" for t in THETAS) + " |", "| --- |" + " --- |" * len(THETAS)]
    for ds, row in r["datasets"].items():
        rc = row["predictor_recall_top3"]
        lines.append(f"| {ds} | " + " | ".join(f"{rc[f'{t:.1f}']['last_value']:.2f} / {rc[f'{t:.1f}']['slope_score']:.2f}"
                                              for t in THETAS) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT / "data" / "learning_curves")
    ap.add_argument("--datasets", default=None, help="comma-separated sets (default: all; with --score learned: "
                    f"{LEARNED_SETS})")
    ap.add_argument("--score", choices=("slope", "learned"), default="slope",
                    help="learned: add the learned rung score as extra candidates on --datasets (§8.8)")
    ap.add_argument("--base", type=Path, default=OUT, help="with --score learned: the slope run's JSON")
    ap.add_argument("--tuning", type=int, default=80)
    ap.add_argument("--test", type=int, default=40)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="every ~12th setting of our grid (smoke test)")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--markdown", action="store_true", help="print the tables from the JSON and exit")
    args = ap.parse_args(argv)
    learned = args.score == "learned"
    args.datasets = args.datasets or (LEARNED_SETS if learned else ",".join(SETS))
    args.out = args.out or (OUT_LEARNED if learned else OUT)
    md = (lambda r: markdown_learned(r, json.loads(args.base.read_text()))) if learned else markdown
    if args.markdown:
        print(md(json.loads(args.out.read_text())))
        return 0
    r = run_learned(args) if learned else run(args)
    if learned and args.out.exists():  # keep the rows of sets not re-run (same configuration only)
        old = json.loads(args.out.read_text())
        if old["config"] == r["config"]:
            r["datasets"] = old["datasets"] | r["datasets"]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_json(args.out, r, indent=1, default=float)
    print(md(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
