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

**Two synchronous rungs** (docs/design/earlycurve.md §8.12; ``spottune run --stopper barrier --rungs θ1:keep1 --theta θ2
--top-k keep2``): every trial trains to θ1·S_max, the keep1 lowest last values to θ2·S_max, the keep2 lowest there
to S_max; grid :data:`earlycurve.evaluation._barrier.TWO_RUNG_GRID` (θ1 ∈ {0.04, 0.06, 0.1} × keep1 ∈ {4, 6, 8} ×
θ2 ∈ {0.15, 0.2, 0.3, 0.5} × keep2 ∈ {2, 3}, fixed before its first run, settings with the θ2 step not after the
θ1 step skipped). Chosen under the same rules and splits as the barrier, alone (``two-rung``) and with it
(``barrier+two-rung``), per data set under ``families``; and in ``union_split0_two_rung`` (predictive ASHA ∪
barrier ∪ two rungs, split 0, mean80, as ``union_split0``).

**Synchronous successive halving** (``sync-sha``), a reference peer: the same 16 trials all train to r, then at each
rung r·η^i < S_max the floor(n/η) (at least 1) of the n survivors with the lowest last value continue, the last
rung's survivors to S_max; r and η from the peers' grids (``bench_early_stopping._resources`` × ``RF``, 24 settings
on 50 steps). Chosen by the same rules on the same tuning studies (``families.sync-sha``; ``sync_sha_split0`` against
``bench_predictive_stop``'s async peers on split 0, mean80). It is what ASHA/SHA would cost if they could pause
trials; what our rungs gain over it is the rung choice, not the synchrony.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_barrier.py --datasets
opda-alexnet,cakelab-resnet32,opda-convnext,builtin-digits-mlp`` (about 90 s); ``--markdown`` prints the tables
from the JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import run_or_print  # noqa: E402
from bench_early_stopping import RF, _resources  # noqa: E402
from bench_pool_splits import METRICS, OUT as SPLITS, RULES, ROOT, SETS, TARGET, _curves, choose, scores  # noqa: E402

from earlycurve.evaluation._barrier import BARRIER_KEEPS as KEEPS, BARRIER_THETAS as THETAS, TWO_RUNG_GRID  # noqa: E402
from earlycurve.evaluation._barrier import barrier_metrics as study_barrier, barrier_step, ranking_scores  # noqa: E402
from earlycurve.evaluation._barrier import rungs_metrics  # noqa: E402
from earlycurve.evaluation._stopping import StudyPool, choose_best, sample_studies  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "early_stopping_barrier.json"
PREDICTIVE = ROOT / "benchmarks" / "results" / "early_stopping_predictive.json"  # bench_predictive_stop, split 0
SIZE = 16  # trials per study
#: families -> the candidate families they choose among (per data set, under ``families`` in the JSON)
GROUPS = {"two-rung": ("two-rung",), "barrier+two-rung": ("barrier", "two-rung"), "sync-sha": ("sync-sha",)}


def settings(n_steps: int) -> dict[str, tuple[int, int]]:
    return {f"theta={t} keep={k}": (barrier_step(t, n_steps), k) for t in THETAS for k in KEEPS}


def two_rung_settings(n_steps: int) -> dict[str, list[tuple[int, int]]]:
    """Name -> rungs ``[(step1, keep1), (step2, keep2)]`` of :data:`TWO_RUNG_GRID` (step2 > step1 only)."""
    out = {}
    for t1, k1, t2, k2 in TWO_RUNG_GRID:
        s1, s2 = barrier_step(t1, n_steps), barrier_step(t2, n_steps)
        if s2 > s1:
            out[f"theta1={t1} keep1={k1} theta2={t2} keep2={k2}"] = [(s1, k1), (s2, k2)]
    return out


def sync_sha_rungs(n_steps: int, min_resource: int, rf: int, size: int = SIZE) -> list[tuple[int, int]]:
    """Synchronous successive halving as rungs: at each step ``min_resource · rf^i < n_steps`` the floor(n/rf) (at
    least 1) of the n survivors continue; rungs stop once one trial is left."""
    rungs, alive, step = [], size, min_resource
    while step < n_steps and alive > 1:
        alive = max(1, alive // rf)
        rungs.append((step, alive))
        step *= rf
    return rungs


def families(n_steps: int) -> dict[str, dict[str, list[tuple[int, int]]]]:
    """Family -> setting name -> synchronous rungs: ``barrier`` (35), ``two-rung``, ``sync-sha`` (the peers' r × η)."""
    return {"barrier": {nm: [sk] for nm, sk in settings(n_steps).items()},
            "two-rung": two_rung_settings(n_steps),
            "sync-sha": {f"sync min_resource={r} rf={rf}": sync_sha_rungs(n_steps, r, rf)
                         for r in _resources(n_steps) for rf in RF}}


def rung_rows(studies, rungs) -> list[list[float]]:
    """METRICS per study under the synchronous ``rungs`` (last-value ranking), shape (studies, METRICS)."""
    return [[m[k] for k in METRICS] for m in (rungs_metrics(st, rungs) for st in studies)]


def rule_table(ds: str, splits: dict, per_seed: dict, names: list[str], idx: np.ndarray, label: str) -> dict:
    """Per RULE: the setting of ``names[idx]`` chosen on each split's tuning studies, its test figures against
    that split's best peer (``bench_pool_splits``), and pooled over the splits; the pick is stored under ``label``."""
    out = {}
    for rule in RULES:
        per = []
        for x in splits["datasets"][ds]["rules"][rule]["per_split"]:
            tun, test = per_seed[x["seed"]]
            acc, cost = scores(tun)[rule]
            o = choose(names, idx, acc, cost)
            t = dict(zip(METRICS, test[o].mean(0).tolist()))
            per.append({"seed": x["seed"], label: {"setting": names[o], "tuning_score": float(acc[o]), "test": t},
                        "best_peer": x["best_peer"], "cost_ratio": t["cost"] / x["best_peer"]["test"]["cost"]})
        pooled = {label: {m: float(np.mean([x[label]["test"][m] for x in per])) for m in METRICS},
                  "best_peer": {m: float(np.mean([x["best_peer"]["test"][m] for x in per])) for m in METRICS}}
        ratio = pooled[label]["cost"] / pooled["best_peer"]["cost"]
        out[rule] = {"per_split": per, "pooled": pooled, "pooled_cost_ratio": ratio,
                     "met_pooled": bool(pooled[label]["top3"] >= TARGET - 1e-12 and ratio <= 0.8),
                     "met_per_split": [bool(x[label]["test"]["top3"] >= TARGET - 1e-12
                                            and x["cost_ratio"] <= 0.8) for x in per]}
    return out


def analyse(ds: str, splits: dict, args) -> dict:
    _, n_steps = SETS[ds]
    fams = families(n_steps)
    names = [nm for g in fams.values() for nm in g]
    family = np.array([f for f, g in fams.items() for _ in g])
    rungs = {nm: r for g in fams.values() for nm, r in g.items()}
    pool = StudyPool.from_curves(_curves(ds, args), n_steps)
    cfg = splits["config"]
    per_seed = {}
    for s in cfg["seeds"]:
        tun, test = sample_studies(pool, n_tuning=cfg["tuning"], n_test=cfg["test"], size=SIZE, seed=s)
        per_seed[s] = tuple(np.array([rung_rows(studies, rungs[nm]) for nm in names])
                            for studies in (tun, test))  # (settings, studies, METRICS)
    idx = {g: np.flatnonzero(np.isin(family, fs)) for g, fs in {"barrier": ("barrier",), **GROUPS}.items()}
    return {"n_steps": n_steps, "rules": rule_table(ds, splits, per_seed, names, idx["barrier"], "barrier"),
            "families": {g: {"rules": rule_table(ds, splits, per_seed, names, idx[g], "ours")} for g in GROUPS}}


def _split0(ds: str, predictive: dict, args):
    """The pool and the tuning and test studies of ``bench_predictive_stop``'s split (80 tuning, 40 test)."""
    _, n_steps = SETS[ds]
    cfg = predictive["config"]
    pool = StudyPool.from_curves(_curves(ds, args), n_steps)
    tun, test = sample_studies(pool, n_tuning=cfg["tuning"], n_test=cfg["test"], size=SIZE, seed=cfg["seed"])
    return pool, tun, test


def _mean(rows) -> dict[str, float]:
    return dict(zip(METRICS, np.mean(rows, axis=0).tolist()))


def union_split0(ds: str, predictive: dict, args, rankings: tuple[str, ...] = ("last-value",),
                 two_rung: bool = False) -> dict:
    """Split 0 under ``bench_predictive_stop``'s own protocol (80 tuning, 40 test studies; the cheapest setting with
    mean tuning top-3 ≥ 0.95): ours = predictive ASHA's 252 settings ∪ the barrier's 35 per ranking at θ (family
    ``barrier``: the last value; ``barrier-paper``: EarlyCurve's prediction) ∪ (``two_rung``) the two-rung grid,
    chosen as one family, against that bench's best peer. A predictive pick's test figures are the bench's (it is
    its per-set choice)."""
    _, n_steps = SETS[ds]
    d = predictive["datasets"][ds]
    grid, two = settings(n_steps), two_rung_settings(n_steps) if two_rung else {}
    pool, tun, test = _split0(ds, predictive, args)
    family = {"last-value": "barrier", "paper": "barrier-paper"}
    scores = {(family[r], t): ranking_scores(pool, r, t) for r in rankings for t in THETAS}

    theta_of = {f"theta={t} keep={k}": t for t in THETAS for k in KEEPS}

    def metrics(studies, fam, nm):
        if fam == "two-rung":
            return _mean(rung_rows(studies, two[nm]))
        (step, keep), s = grid[nm], scores[(fam, theta_of[nm])]
        return _mean([[study_barrier(st, step, keep, s[st.ids])[m] for m in METRICS] for st in studies])

    cands = {(family[r], nm): metrics(tun, family[r], nm) for r in rankings for nm in grid}
    cands |= {("two-rung", nm): metrics(tun, "two-rung", nm) for nm in two}
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


def sync_sha_split0(ds: str, predictive: dict, args) -> dict:
    """Split 0, ``bench_predictive_stop``'s protocol (mean tuning top-3 ≥ 0.95 on its 80 tuning studies, the cheapest;
    ``choose_best``): the synchronous-SHA setting chosen, its test figures, and that bench's async peers' (each
    family's pick on the same studies), with its cost ÷ the best async peer's."""
    _, n_steps = SETS[ds]
    d = predictive["datasets"][ds]
    _, tun, test = _split0(ds, predictive, args)
    grid = families(n_steps)["sync-sha"]
    tuning = {nm: _mean(rung_rows(tun, rungs)) for nm, rungs in grid.items()}
    nm = choose_best({k: {m: {"mean": v[m]} for m in METRICS} for k, v in tuning.items()}, target_top3=TARGET)
    t = _mean(rung_rows(test, grid[nm]))
    peers = {p: {"setting": v["setting"], "test": {m: v["test"][m]["mean"] for m in METRICS}} for p, v in d["peers"].items()}
    best = peers[d["best_peer"]]["test"]
    return {"pick": {"setting": nm, "rungs": grid[nm], "tuning": tuning[nm], "test": t}, "peers": peers,
            "best_peer": d["best_peer"], "cost_ratio": t["cost"] / best["cost"],
            "met": bool(t["top3"] >= TARGET - 1e-12 and t["cost"] <= 0.8 * best["cost"])}


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
        if d.get("families"):
            lines += [f"**{ds}**, other synchronous families (n splits = {len(d['rules']['se_all']['per_split'])})", "",
                      "| family | rule | ours pooled: test top-3 / cost | best peer pooled: test top-3 / cost | ÷ peer "
                      "| met pooled | met per split | settings per split (test top-3) |",
                      "| --- | --- | --- | --- | --- | --- | --- | --- |"]
            for fam, f in d["families"].items():
                for rule, v in f["rules"].items():
                    o, p = v["pooled"]["ours"], v["pooled"]["best_peer"]
                    lines.append(f"| {fam} | {rule} | {o['top3']:.3f} / {o['cost']:.3f} | {p['top3']:.3f} / {p['cost']:.3f} | "
                                 f"{v['pooled_cost_ratio']:.2f} | {'yes' if v['met_pooled'] else 'no'} | "
                                 f"{sum(v['met_per_split'])} of {len(v['met_per_split'])} | "
                                 + "; ".join(f"{x['ours']['setting']} ({x['ours']['test']['top3']:.2f})"
                                             for x in v["per_split"]) + " |")
            lines.append("")
    for key, what in (("union_split0", "predictive ASHA ∪ barrier"),
                      ("union_split0_paper", "predictive ASHA ∪ barrier ∪ barrier ranked by EarlyCurve"),
                      ("union_split0_two_rung", "predictive ASHA ∪ barrier ∪ two rungs")):
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
    if r.get("sync_sha_split0"):
        lines += ["Synchronous successive halving (reference peer), split 0, mean80: its pick against bench_predictive_stop's "
                  "async peers (test top-3 / cost)", "",
                  "| set | sync SHA: setting | test top-3 / cost | asha | sha | hyperband | ÷ best async peer |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for ds, u in r["sync_sha_split0"].items():
            t = u["pick"]["test"]
            peers = " | ".join(f"{u['peers'][p]['test']['top3']:.3f} / {u['peers'][p]['test']['cost']:.3f}"
                               + (" (best)" if p == u["best_peer"] else "") for p in ("asha", "sha", "hyperband"))
            lines.append(f"| {ds} | `{u['pick']['setting']}` | {t['top3']:.3f} / {t['cost']:.3f} | {peers} | {u['cost_ratio']:.2f} |")
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
                    **{k: splits["config"][k] for k in ("tuning", "test", "seeds")},
                    "two_rung_grid": [list(g) for g in TWO_RUNG_GRID],
                    "sync_sha": {"rf": list(RF), "min_resource": {ds: _resources(SETS[ds][1]) for ds in SETS}}},
         "datasets": {ds: analyse(ds, splits, args) for ds in args.datasets.split(",")}}
    predictive = json.loads(PREDICTIVE.read_text())
    r["union_split0"] = {ds: union_split0(ds, predictive, args) for ds in predictive["datasets"]}
    r["union_split0_paper"] = {ds: union_split0(ds, predictive, args, ("last-value", "paper"))
                               for ds in predictive["datasets"]}
    r["union_split0_two_rung"] = {ds: union_split0(ds, predictive, args, two_rung=True) for ds in predictive["datasets"]}
    r["sync_sha_split0"] = {ds: sync_sha_split0(ds, predictive, args) for ds in predictive["datasets"]}
    return r


if __name__ == "__main__":
    raise SystemExit(main())
