"""SpotTune's own θ barrier with the last value, (θ, keep) chosen on tuning studies, against the peers of
``bench_pool_splits`` on the same pool splits: ``benchmarks/results/early_stopping_barrier.json``.

Algorithm 1's early stopping is one synchronous rung: every trial trains to θ·S_max, waits at the barrier
(checkpointed), and the ``keep`` trials with the lowest **last observed** loss continue to S_max. In steps it
costs ``(16 θ S_max + keep (1 − θ) S_max) / (16 S_max)`` of a full study, whatever the number of workers
(the others work on the rest of the study while a trial waits; spottune checkpoints at the barrier). The
pick and its top-1/top-3/regret are :func:`earlycurve.evaluation._stopping.study_metrics`'s, as for every
stopper of the bench.

The grid, fixed before any run: θ ∈ {0.04, 0.06, 0.1, 0.15, 0.2, 0.3, 0.5} × keep ∈ {2, 3, 4, 5, 6}
(35 settings; each peer's grid has more). The choice rules are ``bench_pool_splits.RULES``, on the same
120 tuning studies of each split; the peers' picks and test figures are read from
``early_stopping_pool_splits.json`` (the same rule, split and test studies), so nothing of theirs is re-run.

Run: ``.venv/bin/python benchmarks/bench_barrier.py [--datasets opda-alexnet,cakelab-resnet32]`` (seconds);
``--markdown`` prints the tables from the JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import run_or_print  # noqa: E402
from bench_pool_splits import METRICS, OUT as SPLITS, RULES, ROOT, SETS, TARGET, _curves, choose, scores  # noqa: E402

from earlycurve.evaluation._barrier import BARRIER_KEEPS as KEEPS, BARRIER_THETAS as THETAS  # noqa: E402
from earlycurve.evaluation._barrier import barrier_metrics as study_barrier, barrier_step, ranking_scores  # noqa: E402
from earlycurve.evaluation._stopping import StudyPool, sample_studies  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "early_stopping_barrier.json"
PREDICTIVE = ROOT / "benchmarks" / "results" / "early_stopping_predictive.json"  # bench_predictive_stop, split 0


def barrier_metrics(study, step: int, keep: int) -> list[float]:
    """METRICS of one study under the barrier at ``step`` (1-based) keeping the ``keep`` lowest last values."""
    m = study_barrier(study, step, keep)
    return [m[k] for k in METRICS]


def settings(n_steps: int) -> dict[str, tuple[int, int]]:
    return {f"theta={t} keep={k}": (barrier_step(t, n_steps), k) for t in THETAS for k in KEEPS}


def analyse(ds: str, splits: dict, args) -> dict:
    _, n_steps = SETS[ds]
    grid = settings(n_steps)
    names = list(grid)
    pool = StudyPool.from_curves(_curves(ds, args), n_steps)
    cfg = splits["config"]
    out = {"n_steps": n_steps, "rules": {}}
    per_seed = {}
    for s in cfg["seeds"]:
        tun, test = sample_studies(pool, n_tuning=cfg["tuning"], n_test=cfg["test"], size=16, seed=s)
        per_seed[s] = tuple(np.array([[barrier_metrics(st, *grid[nm]) for st in studies] for nm in names])
                            for studies in (tun, test))  # (settings, studies, METRICS)
    for rule in RULES:
        per = []
        for x in splits["datasets"][ds]["rules"][rule]["per_split"]:
            tun, test = per_seed[x["seed"]]
            acc, cost = scores(tun)[rule]
            o = choose(names, np.arange(len(names)), acc, cost)
            t = dict(zip(METRICS, test[o].mean(0).tolist()))
            per.append({"seed": x["seed"], "barrier": {"setting": names[o], "tuning_score": float(acc[o]), "test": t},
                        "best_peer": x["best_peer"], "cost_ratio": t["cost"] / x["best_peer"]["test"]["cost"]})
        pooled = {"barrier": {m: float(np.mean([x["barrier"]["test"][m] for x in per])) for m in METRICS},
                  "best_peer": {m: float(np.mean([x["best_peer"]["test"][m] for x in per])) for m in METRICS}}
        ratio = pooled["barrier"]["cost"] / pooled["best_peer"]["cost"]
        out["rules"][rule] = {"per_split": per, "pooled": pooled, "pooled_cost_ratio": ratio,
                              "met_pooled": bool(pooled["barrier"]["top3"] >= TARGET - 1e-12 and ratio <= 0.8),
                              "met_per_split": [bool(x["barrier"]["test"]["top3"] >= TARGET - 1e-12
                                                     and x["cost_ratio"] <= 0.8) for x in per]}
    return out


def union_split0(ds: str, predictive: dict, args, rankings: tuple[str, ...] = ("last-value",)) -> dict:
    """Split 0 under ``bench_predictive_stop``'s own protocol (80 tuning, 40 test studies; the cheapest setting with
    mean tuning top-3 ≥ 0.95): ours = predictive ASHA's 252 settings ∪ the barrier's 35 per ranking at θ (family
    ``barrier``: the last value; ``barrier-paper``: EarlyCurve's prediction), chosen as one family, against that
    bench's best peer. A predictive pick's test figures are the bench's (it is its per-set choice)."""
    _, n_steps = SETS[ds]
    cfg, d = predictive["config"], predictive["datasets"][ds]
    grid = settings(n_steps)
    pool = StudyPool.from_curves(_curves(ds, args), n_steps)
    tun, test = sample_studies(pool, n_tuning=cfg["tuning"], n_test=cfg["test"], size=16, seed=cfg["seed"])
    family = {"last-value": "barrier", "paper": "barrier-paper"}
    scores = {(family[r], t): ranking_scores(pool, r, t) for r in rankings for t in THETAS}

    theta_of = {f"theta={t} keep={k}": t for t in THETAS for k in KEEPS}

    def metrics(studies, fam, nm):
        (step, keep), s = grid[nm], scores[(fam, theta_of[nm])]
        return dict(zip(METRICS, np.mean([[study_barrier(st, step, keep, s[st.ids])[m] for m in METRICS]
                                          for st in studies], axis=0).tolist()))

    cands = {(family[r], nm): metrics(tun, family[r], nm) for r in rankings for nm in grid}
    cands |= {("predictive", nm): v for nm, v in d["tuning"].items()}
    ok = [k for k, v in cands.items() if v["top3"] >= TARGET - 1e-12]
    fam, nm = (min(ok, key=lambda k: cands[k]["cost"]) if ok else
               min(cands, key=lambda k: (-cands[k]["top3"], cands[k]["cost"])))
    if fam != "predictive":
        t = metrics(test, fam, nm)
    else:
        assert nm == d["ours"]["per_set"]["setting"], (ds, nm)
        t = {m: d["ours"]["per_set"]["test"][m]["mean"] for m in METRICS}
    peer = d["peers"][d["best_peer"]]
    p = {m: peer["test"][m]["mean"] for m in METRICS}
    return {"pick": {"family": fam, "setting": nm, "tuning": cands[(fam, nm)], "test": t},
            "best_peer": {"family": d["best_peer"], "setting": peer["setting"], "test": p},
            "cost_ratio": t["cost"] / p["cost"], "met": bool(t["top3"] >= TARGET - 1e-12 and t["cost"] <= 0.8 * p["cost"])}


def markdown(r: dict) -> str:
    lines = []
    for ds, d in r["datasets"].items():
        lines += [f"**{ds}**", "", "| rule | barrier pooled: test top-3 / cost | best peer pooled: test top-3 / cost | ÷ peer "
                  "| met pooled | met per split | barrier settings per split |", "| --- | --- | --- | --- | --- | --- | --- |"]
        for rule, v in d["rules"].items():
            b, p = v["pooled"]["barrier"], v["pooled"]["best_peer"]
            lines.append(f"| {rule} | {b['top3']:.3f} / {b['cost']:.3f} | {p['top3']:.3f} / {p['cost']:.3f} | "
                         f"{v['pooled_cost_ratio']:.2f} | {'yes' if v['met_pooled'] else 'no'} | "
                         f"{sum(v['met_per_split'])} of {len(v['met_per_split'])} | "
                         + "; ".join(f"{x['barrier']['setting']} ({x['barrier']['test']['top3']:.2f})" for x in v["per_split"])
                         + " |")
        lines.append("")
    for key, what in (("union_split0", "predictive ASHA ∪ barrier"),
                      ("union_split0_paper", "predictive ASHA ∪ barrier ∪ barrier ranked by EarlyCurve")):
        if not r.get(key):
            continue
        lines += [f"Split 0, bench_predictive_stop's protocol (mean80), ours = {what} chosen as one family:", "",
                  "| set | pick (family: setting) | test top-3 / cost | best peer: test top-3 / cost | ÷ peer | met |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for ds, u in r[key].items():
            t, p = u["pick"]["test"], u["best_peer"]["test"]
            lines.append(f"| {ds} | {u['pick']['family']}: `{u['pick']['setting']}` | {t['top3']:.3f} / {t['cost']:.3f} | "
                         f"{u['best_peer']['family']} {p['top3']:.3f} / {p['cost']:.3f} | {u['cost_ratio']:.2f} | "
                         f"{'yes' if u['met'] else 'no'} |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT / "data" / "learning_curves")
    ap.add_argument("--datasets", default="opda-alexnet,cakelab-resnet32")
    ap.add_argument("--splits", type=Path, default=SPLITS, help="bench_pool_splits' JSON (the peers' picks)")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--markdown", action="store_true", help="print the tables from the JSON and exit")
    return run_or_print(ap.parse_args(argv), run, markdown)


def run(args) -> dict:
    splits = json.loads(args.splits.read_text())
    r = {"config": {"thetas": list(THETAS), "keeps": list(KEEPS), "target_top3": TARGET, "splits": str(args.splits.name),
                    **{k: splits["config"][k] for k in ("tuning", "test", "seeds")}},
         "datasets": {ds: analyse(ds, splits, args) for ds in args.datasets.split(",")}}
    predictive = json.loads(PREDICTIVE.read_text())
    r["union_split0"] = {ds: union_split0(ds, predictive, args) for ds in predictive["datasets"]}
    r["union_split0_paper"] = {ds: union_split0(ds, predictive, args, ("last-value", "paper"))
                               for ds in predictive["datasets"]}
    return r


if __name__ == "__main__":
    raise SystemExit(main())
