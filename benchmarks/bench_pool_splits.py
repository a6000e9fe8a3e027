"""The early-stopping target's misses on several pool splits: selection noise or a limit of Predictive ASHA? (docs/design/earlycurve.md §8.9)

``bench_predictive_stop.py`` meets the target (test top-3 ≥ 0.95 at ≤ 0.8× the best-configured SHA/ASHA/Hyperband)
on 4 of 6 sets with ONE pool split (``--seed 0``). This driver re-runs its comparison on several pool splits
(``--seeds``; ``split_pool`` permutes the pool with ``default_rng([seed, 0])``, so every seed is another split and
other studies) and reuses its pieces: ours = ``bench_predictive_stop.grid()`` (252 settings of
``PredictiveStopping``), peers = ``bench_early_stopping.peer_grids`` (Ray's ASHA rule, Optuna's SHA and Hyperband,
library defaults included), the same replay (4 workers, studies of 16).

Per (data set, seed) every setting of every family is replayed on ``--tuning`` tuning studies (default 120; the
first 80 are ``bench_predictive_stop``'s, as ``sample_studies`` seeds study i with ``[seed, 1, i]``) and on the 40
test studies; per-study metrics are cached in ``--cache`` (npz, not committed). Then, for each CHOICE RULE (fixed
before any of the new splits was run, applied alike to ours and to the union of the peers' grids; each reuses
``choose_best`` with its own accuracy score in place of the mean tuning top-3):

- ``mean80``: mean top-3 on the first 80 tuning studies ≥ 0.95 (``bench_predictive_stop``'s rule, reproduced);
- ``mean_all``: the same on all ``--tuning`` tuning studies;
- ``se_all``: mean − one standard error (sd / √n over all tuning studies) ≥ 0.95;
- ``blocks40``: top-3 ≥ 0.95 on each disjoint block of 40 tuning studies (3 blocks of the default 120; the minimum
  block mean).

the cheapest setting that passes is chosen (else the highest score, then the lowest cost), and its TEST top-3 and
cost are reported per split and pooled over splits (40 test studies per split), with our cost ÷ the best peer's.

**Frontier (post hoc: on the test studies, never used to choose)**: per family, the lowest test cost among settings
with test top-3 ≥ 0.95, per split and pooled (each setting's test studies of all splits together). If ours is
≤ 0.8× the peers' there, the rule family can meet the target and the miss is the choice; if not, it cannot.

Also per set: a last-value "ceiling" (test studies: share with a true top-3 among the m lowest at a rung step) and
the cheapest single synchronous last-value rung reaching 0.95 on test (post hoc).

    # replay and cache (12-20 min per AlexNet split on a shared core; at most two such processes at once)
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_pool_splits.py --datasets opda-alexnet --seeds 0,1,2 --collect-only
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_pool_splits.py --datasets cakelab-resnet32 --seeds 0,1,2,3,4 --collect-only
    # analysis of what is cached (seconds), writes the JSON; then the tables from it
    .venv/bin/python benchmarks/bench_pool_splits.py --datasets opda-alexnet,cakelab-resnet32,opda-convnext,builtin-digits-mlp --cached-only
    .venv/bin/python benchmarks/bench_pool_splits.py --markdown
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_predictive_stop import BUILTIN_CURVES, BUILTIN_FILES, PEERS, ROOT, SETS, TARGET, _make, grid  # noqa: E402

from earlycurve.evaluation import find_datasets, split_pool  # noqa: E402
from earlycurve.evaluation._stopping import StudyPool, choose_best, evaluate_stopper, sample_studies  # noqa: E402
from _common import write_json  # noqa: E402  (benchmarks/ is the script's folder: results JSONs carry their provenance)

OUT = ROOT / "benchmarks" / "results" / "early_stopping_pool_splits.json"
CACHE = ROOT / "benchmarks" / "results" / "pool_splits_runs"
METRICS = ("top1", "top3", "regret", "cost")
N_BENCH = 80  # bench_predictive_stop's tuning studies
BLOCK = 40  # studies per block of the blocks40 rule
LEVELS = (0.9, 0.925, 0.95, 0.975, 1.0)  # top-3 levels of the frontier table
STEP_FRACTIONS = (0.04, 0.06, 0.1, 0.2, 0.3, 0.5)  # the grid's rung fractions, for ceiling()
RULES = ("mean80", "mean_all", "se_all", "blocks40")


def candidates(n_steps: int) -> dict[str, dict[str, callable]]:
    """Family -> setting name -> stopper factory: ``ours`` (the 252-setting grid) and each peer of ``PEERS``."""
    from bench_early_stopping import peer_grids

    out = {"ours": {nm: _make(kw) for nm, kw in grid().items()}}
    pg = peer_grids(n_steps)
    return out | {p: pg[p] for p in PEERS}


def collect(ds: str, seed: int, args) -> Path:
    """Replay every setting on the tuning and test studies of one pool split; per-study metrics to an npz."""
    path = _cache(ds, seed, args)
    if path.exists():
        return path
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore")
    _, n = SETS[ds]
    pool = StudyPool.from_curves(_curves(ds, args), n)
    tun, test = sample_studies(pool, n_tuning=args.tuning, n_test=args.test, size=16, seed=seed)
    names, fams, rows_t, rows_s = [], [], [], []
    t0 = time.time()
    for fam, settings in candidates(n).items():
        if args.quick:
            settings = dict(list(settings.items())[:: max(1, len(settings) // 12)])
        for nm, make in settings.items():
            names.append(nm)
            fams.append(fam)
            rows_t.append([[r[m] for m in METRICS] for r in evaluate_stopper(tun, make, args.workers)])
            rows_s.append([[r[m] for m in METRICS] for r in evaluate_stopper(test, make, args.workers)])
        print(f"{ds} seed {seed}: {fam} {len(settings)} settings, {time.time() - t0:.0f} s", flush=True)
    args.cache.mkdir(parents=True, exist_ok=True)
    half = split_pool(pool, seed)["tuning"]
    np.savez_compressed(path, names=np.array(names), families=np.array(fams), tuning=np.array(rows_t), test=np.array(rows_s),
                        tuning_half=half)
    return path


def scores(tun: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Rule -> (accuracy score, mean tuning cost) per setting; ``tun`` has shape (settings, studies, METRICS)."""
    top3, cost = tun[:, :, 1], tun[:, :, 3]
    n = top3.shape[1]
    blocks = [np.arange(i, i + BLOCK) for i in range(0, n - BLOCK + 1, BLOCK)]
    return {"mean80": (top3[:, :N_BENCH].mean(1), cost[:, :N_BENCH].mean(1)),
            "mean_all": (top3.mean(1), cost.mean(1)),
            "se_all": (top3.mean(1) - top3.std(1, ddof=1) / np.sqrt(n), cost.mean(1)),
            "blocks40": (np.min([top3[:, b].mean(1) for b in blocks], axis=0), cost.mean(1))}


def choose(names: list[str], idx: np.ndarray, acc: np.ndarray, cost: np.ndarray) -> int:
    """``choose_best`` over the settings ``idx`` with ``acc`` as the accuracy score; returns the chosen index."""
    summ = {names[i]: {"top3": {"mean": float(acc[i])}, "cost": {"mean": float(cost[i])}} for i in idx}
    return names.index(choose_best(summ, target_top3=TARGET))


def frontier(top3: np.ndarray, cost: np.ndarray, idx: np.ndarray, level: float = TARGET) -> dict:
    """The lowest mean cost among settings ``idx`` whose mean top-3 ≥ ``level`` (NaN if none), and that setting."""
    ok = [i for i in idx if top3[i] >= level - 1e-12]
    if not ok:
        return {"cost": float("nan"), "index": None, "best_top3": float(max(top3[i] for i in idx))}
    i = min(ok, key=lambda i: cost[i])
    return {"cost": float(cost[i]), "index": int(i), "top3": float(top3[i])}


def _curves(ds: str, args):
    """The curve set of ``ds`` (recorded, or the built-in family's files as ``bench_predictive_stop`` reads them)."""
    sets = find_datasets(args.data, digits=[BUILTIN_CURVES / f for f in BUILTIN_FILES.values()
                                            if (BUILTIN_CURVES / f).exists()])
    return sets.get(ds) or sets[ds.removeprefix("builtin-")]


def _cache(ds: str, seed: int, args) -> Path:
    return args.cache / f"{ds}_seed{seed}_t{args.tuning}.npz"


def analyse(ds: str, seeds: list[int], args) -> dict:
    if args.cached_only:
        seeds = [s for s in seeds if _cache(ds, s, args).exists()]
    runs = [np.load(collect(ds, s, args)) for s in seeds]
    names = [str(x) for x in runs[0]["names"]]
    fams = np.array([str(x) for x in runs[0]["families"]])
    ours, peers = np.flatnonzero(fams == "ours"), np.flatnonzero(fams != "ours")
    out = {"n_steps": SETS[ds][1], "seeds": seeds, "rules": {}, "frontier": {}}
    halves = [set(r["tuning_half"].tolist()) for r in runs]
    out["tuning_half_overlap_with_seed0"] = [len(h & halves[0]) / len(halves[0]) for h in halves]
    for rule in RULES:
        per = []
        for s, r in zip(seeds, runs):
            acc, cost = scores(r["tuning"])[rule]
            test = r["test"].mean(1)  # (settings, METRICS)
            o, p = choose(names, ours, acc, cost), choose(names, peers, acc, cost)
            per.append({"seed": s, "ours": {"setting": names[o], "tuning_score": float(acc[o]),
                                            "test": dict(zip(METRICS, test[o].tolist()))},
                        "best_peer": {"family": str(fams[p]), "setting": names[p], "tuning_score": float(acc[p]),
                                      "test": dict(zip(METRICS, test[p].tolist()))},
                        "cost_ratio": float(test[o, 3] / test[p, 3])})
        pooled = {who: {m: float(np.mean([x[who]["test"][m] for x in per])) for m in METRICS} for who in ("ours", "best_peer")}
        out["rules"][rule] = {"per_split": per, "pooled": pooled,
                              "pooled_cost_ratio": pooled["ours"]["cost"] / pooled["best_peer"]["cost"],
                              "met_pooled": bool(pooled["ours"]["top3"] >= TARGET - 1e-12
                                                 and pooled["ours"]["cost"] <= 0.8 * pooled["best_peer"]["cost"]),
                              "met_per_split": [bool(x["ours"]["test"]["top3"] >= TARGET - 1e-12 and x["cost_ratio"] <= 0.8)
                                                for x in per]}
    # post hoc frontier on the test studies, per split and pooled; the same on all tuning studies for contrast
    for label, key in (("test (post hoc)", "test"), ("tuning, all studies", "tuning")):
        rows = {}
        for s, r in zip(seeds, runs):
            m = r[key].mean(1)
            rows[str(s)] = _frontier_row(names, fams, m[:, 1], m[:, 3], ours, peers)
        m = np.mean([r[key].mean(1) for r in runs], axis=0)
        rows["pooled"] = _frontier_row(names, fams, m[:, 1], m[:, 3], ours, peers)
        out["frontier"][label] = rows
    out["ceiling"] = ceiling(ds, seeds, args)
    return out


def _frontier_row(names, fams, top3, cost, ours, peers) -> dict:
    fo, fp = frontier(top3, cost, ours), frontier(top3, cost, peers)
    levels = {f"{x}": {"ours": frontier(top3, cost, ours, x)["cost"], "peers": frontier(top3, cost, peers, x)["cost"]}
              for x in LEVELS}
    row = {"ours": fo | {"setting": names[fo["index"]] if fo["index"] is not None else None},
           "peers": fp | {"setting": f"{fams[fp['index']]} {names[fp['index']]}" if fp["index"] is not None else None}}
    row["ratio"] = fo["cost"] / fp["cost"] if fp["cost"] == fp["cost"] else float("nan")
    row["levels"] = levels
    return row


def ceiling(ds: str, seeds: list[int], args) -> dict:
    """Test studies of every split: at each step r (of ``STEP_FRACTIONS``), the share of studies where at least one
    of the true top-3 trials is among the m lowest last values (m = 2, 4, 8 of 16: ``keep`` 0.125, 0.25, 0.5 of a
    synchronous rung), and the share where the true best is. What any last-value rung at r can keep, at best."""
    _, n = SETS[ds]
    pool = StudyPool.from_curves(_curves(ds, args), n)
    test = [t for s in seeds for t in sample_studies(pool, n_tuning=1, n_test=args.test, size=16, seed=s)[1]]
    out = {}
    for r in sorted({max(1, int(round(f * n))) for f in STEP_FRACTIONS}):
        row = {}
        for m in (2, 4, 8):
            kept = [set(np.argsort(t.curves[:, r - 1], kind="stable")[:m]) for t in test]
            top3 = [set(np.argsort(t.finals, kind="stable")[:3]) for t in test]
            row[f"any_top3_in_{m}"] = float(np.mean([bool(k & t3) for k, t3 in zip(kept, top3)]))
            row[f"best_in_{m}"] = float(np.mean([int(np.argmin(t.finals)) in k for k, t in zip(kept, test)]))
        out[str(r)] = {"fraction": r / n} | row
    # one synchronous last-value rung (all 16 to step r, the m lowest to the end), every r and m: the cheapest whose
    # share of test studies with a true top-3 kept reaches TARGET (post hoc; no asynchrony, so a floor for ASHA-like rules)
    best = None
    for r in range(1, n):
        order = [np.argsort(t.curves[:, r - 1], kind="stable") for t in test]
        for m in range(1, 16):
            share = float(np.mean([bool(set(o[:m]) & set(np.argsort(t.finals, kind="stable")[:3])) for o, t in zip(order, test)]))
            cost = (16 * r + m * (n - r)) / (16 * n)
            if share >= TARGET - 1e-12 and (best is None or cost < best["cost"]):
                best = {"step": r, "keep": m, "top3": share, "cost": cost}
    return {"steps": out, "one_rung_floor": best}


def markdown(r: dict) -> str:
    lines = []
    for ds, d in r["datasets"].items():
        lines += [f"**{ds}**", "", "| rule | split | ours: setting | test top-3 / cost | best peer: setting | test top-3 / cost | ÷ peer |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for rule, v in d["rules"].items():
            for x in v["per_split"]:
                o, p = x["ours"], x["best_peer"]
                lines.append(f"| {rule} | {x['seed']} | `{o['setting']}` ({o['tuning_score']:.3f}) | {o['test']['top3']:.3f} / "
                             f"{o['test']['cost']:.3f} | {p['family']} `{p['setting']}` ({p['tuning_score']:.3f}) | "
                             f"{p['test']['top3']:.3f} / {p['test']['cost']:.3f} | {x['cost_ratio']:.2f} |")
            po = v["pooled"]
            lines.append(f"| {rule} | pooled | | {po['ours']['top3']:.3f} / {po['ours']['cost']:.3f} | | "
                         f"{po['best_peer']['top3']:.3f} / {po['best_peer']['cost']:.3f} | {v['pooled_cost_ratio']:.2f} |")
        for label, rows in d["frontier"].items():
            lines += ["", f"Frontier, {label}: lowest cost at top-3 ≥ {TARGET}, ours / peers (÷)", "",
                      "| split | ours | peers | ÷ |", "| --- | --- | --- | --- |"]
            for s, f in rows.items():
                fo, fp = f["ours"], f["peers"]
                lines.append(f"| {s} | {fo['cost']:.3f} `{fo['setting']}` | {fp['cost']:.3f} `{fp['setting']}` | {f['ratio']:.2f} |")
        f = d["frontier"]["test (post hoc)"]["pooled"]["levels"]
        g = d["frontier"]["tuning, all studies"]["pooled"]["levels"]
        lines += ["", "Frontier at several top-3 levels, pooled over splits: ours / peers (÷), test (post hoc) | tuning", "",
                  "| level | test | tuning |", "| --- | --- | --- |"]
        for x in f:
            lines.append(f"| {x} | {f[x]['ours']:.3f} / {f[x]['peers']:.3f} ({f[x]['ours'] / f[x]['peers']:.2f}) | "
                         f"{g[x]['ours']:.3f} / {g[x]['peers']:.3f} ({g[x]['ours'] / g[x]['peers']:.2f}) |")
        lines += ["", "Ceiling of a last-value rung (test studies, all splits): share with a true top-3 / the true best among "
                  "the m lowest at step r, m = 2 / 4 / 8", "", "| step (fraction) | any top-3 in m | best in m |", "| --- | --- | --- |"]
        for r, c in d["ceiling"]["steps"].items():
            lines.append(f"| {r} ({c['fraction']:.2f}) | " + " / ".join(f"{c[f'any_top3_in_{m}']:.2f}" for m in (2, 4, 8)) + " | "
                         + " / ".join(f"{c[f'best_in_{m}']:.2f}" for m in (2, 4, 8)) + " |")
        b = d["ceiling"]["one_rung_floor"]
        lines += ["", f"One synchronous last-value rung, cheapest with test top-3 ≥ {TARGET} (post hoc): step {b['step']}, "
                  f"keep {b['keep']}: top-3 {b['top3']:.3f}, cost {b['cost']:.3f}", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT / "data" / "learning_curves")
    ap.add_argument("--datasets", default="opda-alexnet,cakelab-resnet32")
    ap.add_argument("--seeds", default="0,1,2,3,4", help="pool splits (sample_studies/split_pool seeds)")
    ap.add_argument("--tuning", type=int, default=120)
    ap.add_argument("--test", type=int, default=40)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--cache", type=Path, default=CACHE)
    ap.add_argument("--quick", action="store_true", help="every ~12th setting of each family (timing, smoke test)")
    ap.add_argument("--collect-only", action="store_true", help="replay and cache, no analysis")
    ap.add_argument("--cached-only", action="store_true", help="analyse only the seeds already cached, per data set")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--markdown", action="store_true", help="print the tables from the JSON and exit")
    args = ap.parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(args.out.read_text())))
        return 0
    if args.tuning < N_BENCH:
        raise SystemExit(f"--tuning must be >= {N_BENCH}")
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.quick:
        args.cache = args.cache / "quick"
    for ds in args.datasets.split(","):
        for s in seeds:
            if not args.cached_only:
                collect(ds, s, args)
    if args.collect_only:
        return 0
    r = {"config": {"tuning": args.tuning, "test": args.test, "workers": args.workers, "seeds": seeds, "target_top3": TARGET,
                    "rules": list(RULES), "block": BLOCK, "quick": args.quick},
         "datasets": {ds: analyse(ds, seeds, args) for ds in args.datasets.split(",")}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_json(args.out, r, indent=1)
    print(markdown(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
