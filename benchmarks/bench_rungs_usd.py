"""the early-stopping first target in USD inside ``spottune simulate``: our synchronous rungs and Optuna's SHA and Hyperband,
**each chosen inside ``spottune simulate`` on the same tuning studies**, on many sampled test studies ->
``benchmarks/results/rungs_usd.json``.

A recorded study of ``spottune simulate`` is 16 configurations sampled from the recorded pool with the run's seed, so
seeds give different studies (curves that cross differently). Each run replays the 2015 us-east-1 trace (legacy mode,
the default provisioning and predictor, 120 s boot), every policy alike, so the differences are the stoppers'.

- **Tuning.** Seeds 100..100+t-1, replayed from two tuning starts 22+ days away from the test starts. The rule, for
  every method: the lowest mean USD with mean top-3 ≥ 0.95 on the tuning studies (else the highest top-3, then the
  lowest USD).
  - Peers: every setting of Optuna's ``SuccessiveHalvingPruner`` (min_resource × reduction factor, ``SHA_GRID``) and
    ``HyperbandPruner`` (``HB_GRID``) through the real library, as ``optuna-<kind>-r<min_resource>-rf<rf>`` policies.
    Optuna's SHA is asynchronous successive halving, so ASHA's knobs (grace period, reduction factor) are SHA's grid:
    Ray Tune's ASHA has no ``spottune simulate`` policy of its own.
  - Ours: the ``K_CANDIDATES`` cheapest settings *in steps* of the barrier and two-rung grids (docs/design/earlycurve.md
    §8.10, §8.12; distinct rung steps, each at simulate's step ``ceil(θ·S_max)``) among those with mean top-3 ≥ 0.95
    on split 0's 80 step-benchmark tuning studies (``bench_barrier``'s ``_split0``), run as ``spottune-<θ>
    [--rungs θ1:keep1] --top-k keep``; on the sets of ``PREDICTIVE_SETS`` also the ``K_CANDIDATES`` cheapest settings
    in steps of predictive ASHA's grid with mean top-3 ≥ 0.95 on the same 80 studies (``bench_predictive_stop``'s
    JSON, 4 workers), run as ``spottune-0.9 --stopper predictive --predictive-options {...} --top-k 3``: the rule's
    rungs, then a last θ barrier at 90 % (the last value's top-3 recall there is 0.93-1.0 on these sets, §8.3).
- **Test.** Seeds 0..n-1 (``--test-seed0 s``: s..s+n-1) from the two test starts (even seeds the first, odd the second): ours' USD pick, ours' step
  pick (§8.12's ``union_split0_two_rung``), the peers' USD picks, their step-benchmark split-0 picks
  (``bench_predictive_stop``'s JSON, chosen with 4 workers) and SHA at ``spottune simulate``'s own setting
  (``optuna-sha``: S_max // 27, rf 3).

``top-3`` is the step benchmarks' (the returned trial is among the true top 3), computed from the row's
``chosen_best``; the tables give it with the count of studies and its exact (Clopper-Pearson) 95 % interval
(``_common.rate_interval``), since 19 of 20 studies is compatible with a true rate of 0.75. ``target`` holds the early-stopping work's test: each pick of ours against the cheapest peer row with mean test
top-3 ≥ 0.95, including every peer setting that a ``--reuse`` run tested on all the same test studies (a setting
picked with fewer tuning studies keeps its place in the bar). The studies are drawn from the whole recorded pool, half
of which the split-0 tuning studies drew from: a mild overlap.

With ``--provisioning restart`` every compared policy runs on spot-restart's provisioning instead of SpotTune's
(``spottune simulate --provisioning restart``: cheapest market at each launch, max price = on-demand, no hop), the whole
protocol (tuning and test) again: the stoppers compared without the provisioner's choices, which depend on when a
trial will next stop. With ``--retest FILE --keep-picks`` the picks of FILE (made on SpotTune's provisioning) stay and
only the test studies run on spot-restart's (docs/design/earlycurve.md §8.14, ``--out
benchmarks/results/rungs_usd_restart.json``).

The sets: the recorded studies (``opda-alexnet``, ``opda-convnext``, ``cakelab-resnet32``) and the built-in workloads'
random-search studies (``builtin-digits-mlp``, ``builtin-logreg``, ``builtin-linear-svm``: 16 of the 128 curves of
``data/learning_curves/builtin/`` per seed, at the workload's speed), whose peers get the wider ``BUILTIN_GRID``.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_rungs_usd.py [--workloads W1,W2] [--seeds 20] [--tune-seeds 24]
[--jobs 2] [--reuse FILE] [--provisioning restart --out benchmarks/results/rungs_usd_restart.json]`` (with 8 tuning
studies about 40 min on two cores for the recorded sets, 10-15 min per built-in set; with 24 and the 8-study rows
reused, 5-40 min per set; ``--reuse`` takes the rows of an earlier run's JSON, which a replay would reproduce: not
across a change of the provisioner's defaults, e.g. every JSON written before 2026-11-27's design R11 ran without the
job's value of time, so do not mix its rows with new ones);
``--retest FILE`` takes only the tuning rows of an earlier run (its picks stay) and replays every test study, the
peers it tested included, with today's code (docs/design/earlycurve.md §8.18: the picks made before R11, tested with it);
``--markdown`` prints the tables from the JSON. ``--extra-candidates`` adds settings of ours by hand (docs/design/earlycurve.md
§8.17: a first rung at 2 steps on ConvNeXt, added after §8.16's miss), tuned and picked by the same rule as the rest;
``--hparams FILE`` adds ``bench_hparams.py``'s candidates of stopper ``hparams`` (§8.19) the same way.
``--max-concurrent-trials N`` runs every policy, tuning and test, with at most N trials at once (the others wait in
trial order; design D14): the asynchronous peers as they are meant to run with N workers (§8.20,
``bench_async_peers.py``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, run_or_print  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "rungs_usd.json"
STARTS = ("2015-05-05T00:00Z", "2015-06-20T00:00Z")
TUNE_STARTS = ("2015-05-27T12:00Z", "2015-07-12T12:00Z")
TUNE_SEED0 = 100
TARGET_TOP3 = 0.95
SHA_GRID = tuple((r, rf) for r in (1, 2, 3, 4, 6, 8) for rf in (2, 3, 4))
HB_GRID = tuple((r, rf) for r in (1, 2, 3) for rf in (2, 3, 4))
#: The built-in sets' peer grid (SHA and Hyperband alike): the step benchmarks' picks there lie at min_resource 3-16 (past
#: the first learning-rate decay), so min_resource covers the step benchmarks' resource grid
#: (``bench_early_stopping._resources``) and 4.
BUILTIN_GRID = tuple((r, rf) for r in (1, 2, 3, 4, 5, 6, 8, 12, 16) for rf in (2, 3, 4))
K_CANDIDATES = 6
#: Sets whose candidates of ours include predictive ASHA (``--stopper predictive --predictive-options``): the three that
#: §8.13 missed with the barrier family alone (on logreg and linear-svm §8.12's step pick is predictive ASHA)
PREDICTIVE_SETS = ("builtin-logreg", "builtin-linear-svm", "opda-convnext")
#: θ and top-k of the predictive candidates: a last barrier late enough for the last value to rank (module docstring)
PREDICTIVE_THETA, PREDICTIVE_TOP_K = 0.9, 3
#: workload -> (ours' step pick: policy, --rungs, --top-k, or None where §8.12's pick is predictive ASHA (then the
#: predictive candidate with the lowest step cost, which is §8.3's per-set setting); the peers' step-benchmark split-0
#: picks: SHA, Hyperband, ASHA)
SETS = {
    "opda-alexnet": (("spottune-0.15", "0.06:6", 2), ("optuna-sha-r6-rf3", "optuna-hyperband-r2-rf3", "optuna-sha-r3-rf4")),
    "opda-convnext": (("spottune-0.2", "0.1:6", 2), ("optuna-sha-r5-rf2", "optuna-hyperband-r3-rf3", "optuna-sha-r3-rf2")),
    "cakelab-resnet32": (("spottune-0.04", None, 2), ("optuna-sha-r3-rf4", "optuna-hyperband-r1-rf3", "optuna-sha-r1-rf3")),
    "builtin-digits-mlp": (("spottune-0.2", "0.06:6", 2),
                           ("optuna-sha-r5-rf4", "optuna-hyperband-r3-rf4", "optuna-sha-r3-rf3")),
    "builtin-logreg": (None, ("optuna-sha-r16-rf2", "optuna-hyperband-r8-rf4", "optuna-sha-r16-rf2")),
    "builtin-linear-svm": (None, ("optuna-sha-r16-rf2", "optuna-hyperband-r12-rf3", "optuna-sha-r16-rf2")),
}
METRICS = ("cost_usd", "jct_h", "top1", "pick_top3", "top3", "regret", "steps_executed")


def _rows(workload: str, seed: int, start: str, policies: list[str], jobs: int, rungs: str | None = None,
          top_k: int = 3, label: str | None = None, reuse: dict | None = None,
          provisioning: str = "spottune", predictive_options: str | None = None, stopper: str | None = None,
          max_concurrent_trials: int | None = None, halves: bool = False) -> list[dict]:
    """One ``spottune simulate`` call (one study, one start, every policy): a row per policy, named by the policy or,
    for one policy of ours, by ``label``.

    ``reuse`` maps (workload, seed, start, row name) to a stored row of an earlier run of this bench: a replay is
    deterministic for its seed, so a stored row is what the run would give; only the missing policies run.
    ``max_concurrent_trials``: at most that many trials at once (``spottune simulate --max-concurrent-trials``).
    ``halves``: a tuning seed's study samples the tuning half of the set's curves, a test seed's the test half
    (``<set>@tuning`` / ``<set>@test``; the row keeps the set's name)."""
    from spottune.cli._simulate import simulate_all
    from spottune.evaluation._studies import load_study

    names = [label] if label else policies
    stored = [(reuse or {}).get((workload, seed, start, n)) for n in names]
    out = [r for r in stored if r is not None]
    todo = [p for p, r in zip(policies, stored) if r is None]
    if not todo:
        return out
    study = f"{workload}@{'tuning' if seed >= TUNE_SEED0 else 'test'}" if halves else workload
    top3 = load_study(study, seed).ranking()[:3]
    with tempfile.TemporaryDirectory() as d:
        table = simulate_all(study, ",".join(todo), 1, "legacy", Path(d), seed=seed, jobs=jobs, progress=False,
                             start_times=start, rungs=rungs, top_k=top_k, provisioning=provisioning,
                             max_concurrent_trials=max_concurrent_trials,
                             **({"stopper": "predictive", "predictive_options": predictive_options}
                                if predictive_options else {"stopper": stopper} if stopper else {}))
    for row in table.to_dict("records"):
        out.append({"workload": workload, "seed": seed, "start": start, "policy": label or row["policy"],
                    "error": row["error"] if isinstance(row["error"], str) else "",
                    "pick_top3": float(row["chosen_best"] in top3),
                    **{m: float(row[m]) for m in METRICS if m != "pick_top3"}})
    return out


def label(candidate: tuple) -> str:
    """Row name of a setting of ours, ``(policy, rungs, top_k[, predictive options as JSON[, stopper]])``:
    ``spottune-0.15 --rungs 0.06:6 --top-k 2``, ``spottune-0.9 --stopper predictive --predictive-options {...}
    --top-k 3`` or ``spottune-0.2 --rungs 0.04:4 --stopper hparams --top-k 2``."""
    policy, rungs, top_k, *more = candidate
    predictive = f" --stopper predictive --predictive-options {more[0]}" if more and more[0] else ""
    other = f" --stopper {more[1]}" if len(more) > 1 and more[1] else ""
    return f"{policy}{f' --rungs {rungs}' if rungs else ''}{predictive}{other} --top-k {top_k}"


def predictive_candidates(workload: str, k: int = K_CANDIDATES) -> dict[str, dict]:
    """Label -> candidate and step figures of the ``k`` cheapest settings in steps of predictive ASHA's grid with mean
    top-3 >= TARGET_TOP3 on split 0's 80 tuning studies (``bench_predictive_stop``'s JSON), cheapest first."""
    import json
    import re

    import bench_barrier as bb

    tuning = json.loads(bb.PREDICTIVE.read_text())["datasets"][workload]["tuning"]
    ok = sorted((v["cost"], name, v["top3"]) for name, v in tuning.items() if v["top3"] >= TARGET_TOP3 - 1e-12)
    out = {}
    for cost, name, top3 in ok[:k]:  # "fractions=[0.1, 0.3] keep_first=0.75 keep=0.25 slope=1.0 bound_k=0 guard=1"
        options = {key: json.loads(v) for key, v in re.findall(r"(\w+)=(\[[^\]]*\]|\S+)", name)}
        cand = (f"spottune-{PREDICTIVE_THETA:g}", None, PREDICTIVE_TOP_K, json.dumps(options, separators=(",", ":")))
        out[label(cand)] = {"candidate": cand, "step_cost": cost, "step_top3": top3, "setting": name}
    return out


def our_candidates(workload: str, k: int = K_CANDIDATES) -> dict[str, dict]:
    """Label -> candidate and step figures of the ``k`` cheapest barrier and two-rung settings (distinct rung steps)
    with mean top-3 >= TARGET_TOP3 on split 0's 80 step-benchmark tuning studies, cheapest first."""
    import json
    from types import SimpleNamespace

    import bench_barrier as bb
    from earlycurve.evaluation._barrier import BARRIER_KEEPS, BARRIER_THETAS, TWO_RUNG_GRID
    from spottune.orchestrator._config import steps_at  # simulate's rung step, ceil(θ·S_max) (bench_barrier: round)

    n = bb.SETS[workload][1]
    _, tuning, _ = bb._split0(workload, json.loads(bb.PREDICTIVE.read_text()),
                              SimpleNamespace(data=ROOT / "data" / "learning_curves"))
    settings = [((), t, k_) for t in BARRIER_THETAS for k_ in BARRIER_KEEPS]
    settings += [(((t1, k1),), t2, k2) for t1, k1, t2, k2 in TWO_RUNG_GRID]
    found: dict[tuple, dict] = {}
    for first, theta, keep in settings:
        steps = tuple((steps_at(t, n), kk) for t, kk in (*first, (theta, keep)))
        if any(a[0] >= b[0] for a, b in zip(steps, steps[1:])) or steps in found:
            continue
        m = bb._mean(bb.rung_rows(tuning, list(steps)))
        if m["top3"] >= TARGET_TOP3 - 1e-12:
            cand = (f"spottune-{theta:g}", ",".join(f"{t:g}:{kk}" for t, kk in first) or None, keep)
            found[steps] = {"candidate": cand, "step_cost": m["cost"], "step_top3": m["top3"]}
    best = sorted(found.values(), key=lambda v: v["step_cost"])[:k]
    return {label(v["candidate"]): v for v in best}


def extra_candidates(text: str) -> dict[str, dict]:
    """Label -> candidate of settings of ours given by hand (``--extra-candidates``: ``policy rungs top_k`` items
    separated by ``;``, rungs ``-`` for none), tuned and picked by the same rule as the others."""
    out = {}
    for item in filter(None, (x.strip() for x in text.split(";"))):
        parts = item.split()
        if len(parts) != 3 or not parts[0].startswith("spottune-") or not parts[2].isdigit():
            raise ValueError(f"--extra-candidates item {item!r} is not 'spottune-<θ> <rungs or -> <top_k>'")
        policy, rungs, top_k = parts
        cand = (policy, None if rungs == "-" else rungs, int(top_k))
        out[label(cand)] = {"candidate": cand, "step_cost": None, "step_top3": None, "added": "--extra-candidates"}
    return out


def hparams_candidates(path: Path | None, workload: str) -> dict[str, dict]:
    """Label -> candidate of stopper ``hparams`` (docs/design/earlycurve.md §8.19): ``bench_hparams.py``'s ``K`` cheapest
    settings in steps with mean top-3 >= TARGET_TOP3 on split 0's tuning studies under that ranking (``--hparams``)."""
    import json

    if path is None:
        return {}
    d = json.loads(path.read_text())["datasets"].get(workload)
    out = {}
    for policy, rungs, top_k in (d or {}).get("candidates", []):
        cand = (policy, rungs, top_k, None, "hparams")
        out[label(cand)] = {"candidate": cand, "added": f"--hparams {path.name}"}
    return out


def _ours_row(task: tuple) -> list[dict]:
    workload, seed, start, cand, reuse, provisioning, concurrency, halves = task
    options = cand[3] if len(cand) > 3 else None
    stopper = cand[4] if len(cand) > 4 else None
    return _rows(workload, seed, start, [cand[0]], 1, cand[1], cand[2], label(cand), reuse, provisioning, options,
                 stopper, concurrency, halves)


def _ours_rows(tasks: list[tuple], jobs: int) -> list[dict]:
    """:func:`_rows` of one setting of ours per task, ``jobs`` tasks at a time (each a one-policy simulate call)."""
    from concurrent.futures import ProcessPoolExecutor

    if jobs <= 1:
        return [r for t in tasks for r in _ours_row(t)]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        return [r for rs in pool.map(_ours_row, tasks) for r in rs]


def _means(rows: list[dict]) -> dict[str, dict[str, float]]:
    by: dict[str, list[dict]] = {}
    for r in rows:
        by.setdefault(r["policy"], []).append(r)
    return {p: {"n": len(rs), **{m: float(np.nanmean([r[m] for r in rs])) for m in METRICS}} for p, rs in by.items()}


def pick(means: dict[str, dict[str, float]], prefix: str) -> str:
    """The tuning pick among the names starting with ``prefix``: lowest mean USD with mean top-3 >= TARGET_TOP3,
    else the highest top-3, then the lowest USD."""
    cands = {p: v for p, v in means.items() if p.startswith(prefix)}
    ok = {p: v for p, v in cands.items() if v["pick_top3"] >= TARGET_TOP3 - 1e-12}
    if ok:
        return min(ok, key=lambda p: (ok[p]["cost_usd"], p))
    return min(cands, key=lambda p: (-cands[p]["pick_top3"], cands[p]["cost_usd"], p))


def require_tuning_rows(reuse: dict, workload: str, tune: list[tuple], names: list[str]) -> None:
    """Raise SystemExit unless ``reuse`` holds the row of every name in ``names`` on every tuning study ``tune`` of
    ``workload`` (``--keep-picks``: the picks are the earlier run's, so none is replayed here).

    Raises
    ------
    SystemExit
        Naming the first missing row and how many are missing."""
    missing = [(seed, start, n) for seed, start in tune for n in names if (workload, seed, start, n) not in reuse]
    if missing:
        seed, start, n = missing[0]
        raise SystemExit(f"--keep-picks: {len(missing)} tuning rows of {workload} are not in the --retest file "
                         f"(first: {n!r}, seed {seed}, {start})")


def run(args) -> dict:
    import json

    workloads = args.workloads.split(",")
    reuse, retested = {}, {}  # retested: per set, the peers an earlier run (--retest) tested, replayed here
    picks_provisioning = args.provisioning
    for path, tuning_only in [(p, False) for p in args.reuse] + [(p, True) for p in args.retest]:
        old = json.loads(path.read_text())
        if old["config"].get("provisioning", "spottune") != args.provisioning and not (tuning_only and args.keep_picks):
            raise SystemExit(f"{path} was run with another provisioning than {args.provisioning}"
                             + (" (--keep-picks tests its picks on this one)" if tuning_only else ""))
        if old["config"].get("max_concurrent_trials") != args.max_concurrent_trials and not (tuning_only and args.keep_picks):
            raise SystemExit(f"{path} was run with another --max-concurrent-trials than {args.max_concurrent_trials}")
        if old["config"].get("halves", False) != args.halves:
            raise SystemExit(f"{path} drew its studies from {'halves of ' if old['config'].get('halves') else ''}the "
                             f"curve files, this run from {'their halves' if args.halves else 'the whole files'}")
        picks_provisioning = old["config"].get("provisioning", "spottune") if tuning_only else args.provisioning
        for r in old["rows"] + old.get("tuning_rows", []):
            if not (tuning_only and r["seed"] < TUNE_SEED0):
                reuse[(r["workload"], r["seed"], r["start"], r["policy"])] = r
            elif not r["policy"].startswith("spottune-"):
                retested.setdefault(r["workload"], {}).setdefault(r["policy"], set()).add((r["seed"], r["start"]))
    tune = [(TUNE_SEED0 + i, TUNE_STARTS[i % 2]) for i in range(args.tune_seeds)]
    tuning_rows, picks, candidates, rows, roles = [], {}, {}, [], {}
    for workload in workloads:
        predictive = predictive_candidates(workload) if workload in PREDICTIVE_SETS else {}
        candidates[workload] = {**our_candidates(workload), **predictive, **extra_candidates(args.extra_candidates),
                                **hparams_candidates(args.hparams, workload)}
        sha, hb = (BUILTIN_GRID, BUILTIN_GRID) if workload.startswith("builtin-") else (SHA_GRID, HB_GRID)
        grid = [f"optuna-sha-r{r}-rf{rf}" for r, rf in sha] + [f"optuna-hyperband-r{r}-rf{rf}" for r, rf in hb]
        if args.keep_picks:  # the picks stay the earlier run's: no tuning row may be replayed on this provisioning
            require_tuning_rows(reuse, workload, tune, [*grid, *candidates[workload]])
        trows = [r for seed, start in tune
                 for r in _rows(workload, seed, start, grid, args.jobs, reuse=reuse, provisioning=args.provisioning,
                               max_concurrent_trials=args.max_concurrent_trials, halves=args.halves)]
        trows += _ours_rows([(workload, seed, start, c["candidate"], reuse, args.provisioning,
                              args.max_concurrent_trials, args.halves)
                             for c in candidates[workload].values() for seed, start in tune], args.jobs)
        tuning_rows += trows
        means = _means(trows)
        picks[workload] = {"ours": pick(means, "spottune-"), "sha": pick(means, "optuna-sha-r"),
                           "hyperband": pick(means, "optuna-hyperband-r")}
        print(f"{workload}: tuning picks {picks[workload]}", file=sys.stderr, flush=True)
        (step_pick, step_peers), ours = SETS[workload], candidates[workload][picks[workload]["ours"]]["candidate"]
        if step_pick is None and predictive:  # §8.3's per-set setting: the cheapest in steps
            step_pick = next(iter(predictive.values()))["candidate"]
        test = [(seed, STARTS[seed % 2]) for seed in range(args.test_seed0, args.test_seed0 + args.seeds)]
        again = [name for name, done in sorted(retested.get(workload, {}).items()) if set(test) <= done]
        peers = list(dict.fromkeys([picks[workload]["sha"], picks[workload]["hyperband"], *step_peers, "optuna-sha",
                                    *again]))
        roles[workload] = {**{p: "an earlier run's test row, replayed" for p in again}, label(ours): "ours",
                           **{p: "tuned here" for p in peers[:2]},
                           **{p: "step benchmark's pick" for p in peers[2:] if p in step_peers},
                           "optuna-sha": "simulate's default"}
        if step_pick:
            roles[workload].setdefault(label(step_pick), "ours, step pick")
        rows += _ours_rows([(workload, seed, start, c, reuse, args.provisioning, args.max_concurrent_trials,
                             args.halves) for c in dict.fromkeys([ours, step_pick]) if c for seed, start in test],
                           args.jobs)
        rows += [r for seed, start in test
                 for r in _rows(workload, seed, start, peers, args.jobs, reuse=reuse, provisioning=args.provisioning,
                                max_concurrent_trials=args.max_concurrent_trials, halves=args.halves)]
        # a peer setting an earlier run (--reuse) tested on all of these studies keeps its place in the bar
        earlier: dict[str, list[dict]] = {}
        for (w, seed, start, name), r in reuse.items():
            if w == workload and (seed, start) in test and not name.startswith("spottune-") and name not in peers:
                earlier.setdefault(name, []).append(r)
        for name, rs in sorted(earlier.items()):
            if len(rs) == len(test):
                rows += rs
                roles[workload][name] = "an earlier run's test row"
    summary = {}
    for workload in workloads:
        by: dict[str, list[dict]] = {}
        for r in rows:
            if r["workload"] == workload:
                by.setdefault(r["policy"], []).append(r)
        ours = next(p for p, role in roles[workload].items() if role == "ours")
        base = {r["seed"]: r["cost_usd"] for r in by[ours]}
        summary[workload] = {}
        for policy, rs in by.items():
            x = {m: np.array([r[m] for r in rs]) for m in METRICS}
            diff = np.array([base[r["seed"]] - r["cost_usd"] for r in rs])  # ours minus this policy, paired by study
            summary[workload][policy] = {
                "n": len(rs), "errors": sum(bool(r["error"]) for r in rs), "role": roles[workload][policy],
                **{m: float(np.nanmean(v)) for m, v in x.items()},
                "cost_usd_sd": float(np.std(x["cost_usd"], ddof=1)),
                "ours_cost_ratio": float(np.nanmean(list(base.values())) / np.nanmean(x["cost_usd"])),
                "ours_minus_this_usd": float(diff.mean()), "ours_minus_this_se": float(diff.std(ddof=1) / np.sqrt(len(diff)))}
    tuning = {w: _means([r for r in tuning_rows if r["workload"] == w]) for w in workloads}
    return {"config": {"reused_from": [str(p.resolve().relative_to(ROOT)) if p.resolve().is_relative_to(ROOT) else str(p)
                                       for p in args.reuse], "seeds": args.seeds, "test_seed0": args.test_seed0, "tune_seeds": args.tune_seeds, "tune_seed0": TUNE_SEED0,
                       "starts": list(STARTS), "tune_starts": list(TUNE_STARTS), "market_mode": "legacy",
                       "provisioning": args.provisioning, "max_concurrent_trials": args.max_concurrent_trials,
                       "halves": args.halves,
                       "keep_picks": args.keep_picks, "picks_provisioning": picks_provisioning,
                       "target_top3": TARGET_TOP3, "sha_grid": SHA_GRID, "hyperband_grid": HB_GRID,
                       "builtin_grid": BUILTIN_GRID, "k_candidates": K_CANDIDATES, "sets": SETS,
                       "predictive_sets": PREDICTIVE_SETS, "predictive_theta": PREDICTIVE_THETA,
                       "predictive_top_k": PREDICTIVE_TOP_K, "jobs": args.jobs,
                       "extra_candidates": args.extra_candidates,
                       "hparams": None if args.hparams is None else str(args.hparams),
                       "retested_from": [str(p) for p in args.retest]},
            "candidates": candidates, "picks": picks, "tuning": tuning, "tuning_rows": tuning_rows, "rows": rows,
            "summary": summary,
            "target": {w: target(summary[w], [r for r in rows if r["workload"] == w]) for w in workloads}}


def top3_counts(rows: list[dict], policy: str) -> tuple[int, int]:
    """(studies whose pick is in the true top 3, studies) of ``policy`` among ``rows`` (one set's test rows)."""
    hits = [r["pick_top3"] for r in rows if r["policy"] == policy]
    return int(round(sum(hits))), len(hits)


def target(summary: dict[str, dict], rows: list[dict] = ()) -> dict[str, dict]:
    """the early-stopping first target on one set, per pick of ours ("ours", "ours, step pick"): its test USD and top-3, the
    cheapest peer with mean test top-3 >= TARGET_TOP3, the ratio, whether ours reaches the bar at <= 0.8x, and the
    ratio's 95 % bootstrap interval over the test studies in ``rows`` (paired by study; for that peer, taken as
    fixed: the choice of the bar is not resampled). The top-3 rates of ours and of the peer come with their exact 95 %
    interval over the test studies (``top3_hits`` of ``top3_n``, ``top3_ci95``; :func:`_common.rate_interval`): "top-3
    ≥ 0.95" on 19 of 20 studies is compatible with a true rate of 0.75."""
    from _common import bootstrap_interval, rate_interval

    peers = {p: v for p, v in summary.items() if not v["role"].startswith("ours")}
    ok = {p: v for p, v in peers.items() if v["pick_top3"] >= TARGET_TOP3 - 1e-12}
    peer = min(ok, key=lambda p: ok[p]["cost_usd"]) if ok else None
    cost = {(r["policy"], r["seed"]): r["cost_usd"] for r in rows}
    out = {}
    for policy, v in summary.items():
        if v["role"].startswith("ours"):
            ratio = v["cost_usd"] / ok[peer]["cost_usd"] if peer else float("nan")
            seeds = sorted(s for p, s in cost if p == policy and (peer, s) in cost)
            ci = bootstrap_interval([[cost[(policy, s)], cost[(peer, s)]] for s in seeds], lambda m: m[:, 0] / m[:, 1])
            hits, n = top3_counts(rows, policy)
            peer_hits, peer_n = top3_counts(rows, peer) if peer else (0, 0)
            out[v["role"]] = {"policy": policy, "cost_usd": v["cost_usd"], "top3": v["pick_top3"], "peer": peer,
                              "top3_hits": hits, "top3_n": n, "top3_ci95": list(rate_interval(hits, n)),
                              "peer_top3": ok[peer]["pick_top3"] if peer else float("nan"),
                              "peer_top3_ci95": list(rate_interval(peer_hits, peer_n)),
                              "peer_cost_usd": ok[peer]["cost_usd"] if peer else float("nan"), "ratio": ratio,
                              "ratio_ci95": list(ci),
                              "met": bool(peer and v["pick_top3"] >= TARGET_TOP3 - 1e-12 and ratio <= 0.8)}
    return out


def _top3_cell(rows: list[dict], policy: str) -> str:
    """"0.95 (19/20; 0.75-1.00)": the top-3 rate, the count of studies and its exact 95 % interval."""
    from _common import rate_interval

    hits, n = top3_counts(rows, policy)
    if not n:
        return "-"
    lo, hi = rate_interval(hits, n)
    return f"{hits / n:.2f} ({hits}/{n}; {lo:.2f}-{hi:.2f})"


def markdown(r: dict) -> str:
    lines = []
    for workload, s in r["summary"].items():
        rows = [x for x in r.get("rows", []) if x["workload"] == workload]
        lines += [f"**{workload}** ({r['config']['seeds']} test studies, legacy; each method tuned on "
                  f"{r['config']['tune_seeds']} studies: {', '.join(f'{k} {v}' for k, v in r['picks'][workload].items())})", "",
                  "| policy | role | USD (mean ± sd) | JCT h | steps | top-1 | top-3 (pick in the true top 3; studies; "
                  "exact 95 % interval) | regret | ours ÷ this (USD) | ours − this, paired USD |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for policy, v in s.items():
            lines.append(f"| {policy} | {v['role']} | {v['cost_usd']:.3f} ± {v['cost_usd_sd']:.3f} | {v['jct_h']:.2f} | "
                         f"{v['steps_executed']:.0f} | {v['top1']:.2f} | {_top3_cell(rows, policy)} | "
                         f"{v['regret']:.4f} | {v['ours_cost_ratio']:.2f} | "
                         f"{v['ours_minus_this_usd']:+.3f} ± {v['ours_minus_this_se']:.3f} |")
        lines.append("")
        for role, t in r.get("target", {}).get(workload, {}).items():
            lines.append(f"- {role} ({t['policy']}): {t['cost_usd']:.3f} USD at top-3 {_top3_cell(rows, t['policy'])}; "
                         f"cheapest peer at top-3 ≥ {TARGET_TOP3}: {t['peer']} {t['peer_cost_usd']:.3f} USD at top-3 "
                         f"{_top3_cell(rows, t['peer']) if t['peer'] else '-'}; ratio {t['ratio']:.2f}"
                         + (f" (95 % interval {t['ratio_ci95'][0]:.2f}-{t['ratio_ci95'][1]:.2f}, studies resampled)"
                            if all(isinstance(c, float) and np.isfinite(c) for c in t.get("ratio_ci95") or [None])
                            else "") + "; "
                         f"target met: {'yes' if t['met'] else 'no'}")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20, help="test studies per set (seeds 0..n-1)")
    ap.add_argument("--test-seed0", type=int, default=0,
                    help="first test seed: 20 gives studies no earlier run tested (docs/design/earlycurve.md §8.19's fresh check; "
                         "must stay below the tuning seeds' 100)")
    ap.add_argument("--tune-seeds", type=int, default=24,
                    help="tuning studies per set (24 since docs/design/earlycurve.md §8.16; §8.13-§8.15 used 8)")
    ap.add_argument("--workloads", default=",".join(SETS))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--reuse", type=Path, action="append", default=[],
                    help="a JSON of an earlier run whose rows (same study, start and name) are taken instead of "
                         "replayed; repeatable")
    ap.add_argument("--retest", type=Path, action="append", default=[],
                    help="a JSON of an earlier run whose tuning rows are taken (so the picks stay its picks) and whose "
                         "test studies are replayed with today's code, its tested peers included (e.g. the picks made "
                         "before design R11, tested with it); repeatable")
    ap.add_argument("--keep-picks", action="store_true",
                    help="with --retest FILE run on another provisioning: keep FILE's picks, chosen on its tuning rows "
                         "and provisioning, and replay only the test studies on --provisioning (every tuning row must "
                         "be in FILE)")
    from spottune.compose import PROVISIONINGS

    ap.add_argument("--provisioning", choices=PROVISIONINGS, default=PROVISIONINGS[0],
                    help="provisioning of every compared policy (spottune simulate --provisioning); restart isolates "
                         "the stoppers from the provisioner's choices (write it to another --out)")
    ap.add_argument("--extra-candidates", default="",
                    help="settings of ours added to the candidates by hand, tuned and picked by the same rule: "
                         "'policy rungs top_k' items separated by ';' (rungs '-' for none), e.g. "
                         "'spottune-0.2 0.04:6 2'")
    ap.add_argument("--hparams", type=Path, default=None,
                    help="bench_hparams.py's JSON: its candidates of stopper hparams join ours, tuned and picked by "
                         "the same rule (docs/design/earlycurve.md §8.19)")
    ap.add_argument("--max-concurrent-trials", type=int, default=None,
                    help="at most N trials of every policy at once, the others waiting in trial order (spottune "
                         "simulate --max-concurrent-trials; design D14): the asynchronous peers with N workers, "
                         "tuned and tested so (docs/design/earlycurve.md §8.20)")
    ap.add_argument("--halves", action="store_true",
                    help="configuration-disjoint studies: tuning studies from the tuning half of each set's curves, "
                         "test studies from the test half (the step benchmarks' split; spottune simulate --workload "
                         "SET@tuning / SET@test)")
    ap.add_argument("--markdown", action="store_true", help="print the tables from the JSON and exit")
    args = ap.parse_args(argv)
    if args.max_concurrent_trials is not None and args.max_concurrent_trials < 1:
        ap.error(f"--max-concurrent-trials {args.max_concurrent_trials}: must be an integer >= 1")
    if not 0 <= args.test_seed0 <= TUNE_SEED0 - args.seeds:
        ap.error(f"--test-seed0 {args.test_seed0}: the test seeds must lie in 0..{TUNE_SEED0 - 1}, below the tuning seeds")
    if args.hparams is not None and not args.hparams.is_file():
        ap.error(f"--hparams {args.hparams}: no such file")
    try:
        extra_candidates(args.extra_candidates)
    except ValueError as exc:
        ap.error(str(exc))  # one line, exit code 2
    if args.keep_picks and not args.retest:
        ap.error("--keep-picks keeps the picks of a --retest FILE: give one")
    for path in [*args.reuse, *args.retest]:
        if not path.is_file():
            ap.error(f"{path}: no such file (--reuse and --retest take an earlier run's JSON)")
    return run_or_print(args, run, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
