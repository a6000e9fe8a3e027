"""Which configuration next: cost-aware GP-UCB (``search: gp-ucb``, decision SV13) against random search and Optuna's
TPE, in USD to reach a regret of 0.01, on recorded studies priced in the simulator -> ``benchmarks/results/search.json``.

**Studies.** Each seed draws a study of ``--configs`` (default 64) configurations from a recorded pool with
:func:`spottune.evaluation._studies.load_study` (``opda-alexnet:64``, ...): the opda studies (AlexNet and ConvNeXt-tiny
on ImageNet, metric ``loss = 1 - top_1``), cakelab ResNet-32 on CIFAR-10 (``loss = 1 - accuracy``) and the built-in
workloads' random searches (digits-mlp and logreg: validation cross-entropy, linear-svm: validation hinge). A study's
configurations are the candidates, as ``search: gp-ucb`` takes the search space's generated configurations.

**Price.** Each trial's USD is what the simulator charges it in one ``spot-restart`` replay of the whole study (all
trials to ``max_steps``, cheapest market at each launch, max price = on-demand, no hop; the 2015 us-east-1 trace in
legacy mode from 2015-05-05, 120 s boot), computed once per study and summed over the trials a method runs, in the
order it runs them: a method's trials are priced as if run alone on that provisioning, not re-simulated in sequence
(cheap; the trials' speeds differ by up to ~10x within a study, so the order of magnitude is the trial's own).

**Methods**, each until the study's regret is at most the target (every method gets there: at worst it runs every
candidate):

- ``random``: the candidates in a random order (``numpy.random.default_rng(seed)``), Ray Tune's default search;
- ``gp-ucb``: :func:`spottune.scheduling.search_sequentially`, ``mu + sqrt(beta_t / c) sigma`` with ``c`` the
  trial's predicted USD: its recorded seconds per step on the reference instance x ``max_steps`` x one USD per second
  for every trial (only ratios of ``c`` matter, SV6), so a slow configuration is predicted dear. Features: the
  hyperparameters (identifiers such as ``iteration``, ``curve_id``, ``config_id`` left out; cakelab's are two
  categorical settings, one-hot);
- ``gp-ucb-c1``: the same with ``c = 1`` (plain GP-UCB; the lesion);
- ``tpe``: Optuna's ``TPESampler(seed=seed)`` at its defaults (10 random start-up trials, independent sampling) over
  the candidates' ranges (a float hyperparameter log-scaled when positive and spanning more than a factor of 10, as
  the GP's encoding; a string categorical). Its suggestion runs the nearest untried candidate (Euclidean on the
  encoded features, each scaled to [0, 1]); TPE is told that candidate's own values and result (the asked trial is
  marked failed, which TPE ignores).

**Measure.** Regret after a trial = the best final value found so far - the study's best final value (all minimise).
For the accuracy studies (opda, cakelab) in the metric's units, so 0.01 is one accuracy point; for the built-in sets,
whose losses have no common scale, normalised by the study's median final value - its best (0.01 = 1 % of the way
from a typical configuration to the best). Reported: mean USD (and trials) to regret <= ``--target`` per method, and
the ratio of means GP-UCB / random and GP-UCB / TPE with a 95 % paired bootstrap interval over the seeds (studies).

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_search.py [--sets a,b] [--seeds 10] [--configs 64]``
(about 5 min on two cores); ``--markdown`` prints the tables from the JSON.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, bootstrap_interval, run_or_print  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "search.json"
SETS = ("opda-alexnet", "opda-convnext", "cakelab-resnet32", "builtin-digits-mlp", "builtin-logreg",
        "builtin-linear-svm")
METHODS = ("random", "gp-ucb", "gp-ucb-c1", "tpe")
#: Keys of a recorded configuration that name it rather than describe it.
IDENTIFIERS = ("iteration", "curve_id", "config_id")
START = "2015-05-05T00:00Z"
ACCURACY_SETS = ("opda-alexnet", "opda-convnext", "cakelab-resnet32")


def price_trials(name: str, seed: int):
    """The study and each trial's USD in one spot-restart replay of all its trials (charged USD, refunds excluded)."""
    import pandas as pd

    from spotmarket.prices import to_seconds
    from spottune.compose import get_policy
    from spottune.evaluation._runner import Task, environment, replay
    from spottune.results import _ledger_frame

    env = environment(name, seed, "legacy", None, None)
    study = env["study"]
    start = float(to_seconds(pd.Timestamp(START)))
    task = Task(workload=name, policy="spot-restart", start_index=0, start_s=start, market_mode="legacy", seed=seed,
                train_lo_s=start - 4 * 86400.0, train_hi_s=start, top_k=1)
    _, record, _ = replay(task, get_policy("spot-restart"), env, study)
    ledger = _ledger_frame(record)
    usd = ledger.groupby("trial_id")["charged_usd"].sum()
    return study, np.array([float(usd.get(t, 0.0)) for t in study.trial_ids])


def features(study) -> list[dict]:
    """The candidates' hyperparameters without identifiers or constants."""
    configs = [{k: v for k, v in study.configs[t].items() if k not in IDENTIFIERS} for t in study.trial_ids]
    keep = [k for k in configs[0] if len({repr(c.get(k)) for c in configs}) > 1]
    return [{k: c.get(k) for k in keep} for c in configs]


def order_random(values, cost, configs, seed: int, reached) -> list[int]:
    return [int(i) for i in np.random.default_rng(seed).permutation(len(values))]


def order_gpucb(values, cost, configs, seed: int, reached, cost_aware: bool = True) -> list[int]:
    from spottune.scheduling import search_sequentially

    order: list[int] = []

    def run(r: int, k: int):
        if reached(order):
            return None
        order.append(k)
        return float(values[k])

    search_sequentially(configs, run, trial_budget=len(values), mode="min", cost_usd=cost, cost_aware=cost_aware,
                        random_state=seed)
    return order


def order_tpe(values, cost, configs, seed: int, reached) -> list[int]:
    import optuna
    from optuna.distributions import CategoricalDistribution, FloatDistribution
    from optuna.trial import TrialState, create_trial

    from spottune.scheduling import encode_configs

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dists = {}
    for key in configs[0]:
        col = [c[key] for c in configs]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in col):
            lo, hi = float(min(col)), float(max(col))
            dists[key] = FloatDistribution(lo, hi, log=lo > 0 and hi / lo > 10)
        else:
            dists[key] = CategoricalDistribution(sorted(set(map(str, col))))
    study = optuna.create_study(direction="minimize", sampler=optuna.samplers.TPESampler(seed=seed))
    x = encode_configs(configs)
    lo, span = x.min(axis=0), np.ptp(x, axis=0)
    span[span == 0] = 1.0
    scaled = (x - lo) / span
    order: list[int] = []
    while not reached(order) and len(order) < len(values):
        trial = study.ask(dists)
        point = {k: (trial.params[k] if isinstance(dists[k], FloatDistribution) else
                     next(c[k] for c in configs if str(c[k]) == trial.params[k])) for k in dists}
        study.tell(trial, state=TrialState.FAIL)
        p = (encode_configs(configs + [point])[-1] - lo) / span
        d = ((scaled - p) ** 2).sum(axis=1)
        d[order] = np.inf
        k = int(np.argmin(d))
        order.append(k)
        params = {key: (float(configs[k][key]) if isinstance(dists[key], FloatDistribution) else str(configs[k][key]))
                  for key in dists}
        study.add_trial(create_trial(params=params, distributions=dists, value=float(values[k])))
    return order


ORDERS = {"random": order_random, "gp-ucb": order_gpucb,
          "gp-ucb-c1": lambda *a: order_gpucb(*a, cost_aware=False), "tpe": order_tpe}


def one_study(name: str, seed: int, target: float) -> dict:
    study, usd = price_trials(name, seed)
    final = study.final()
    values = np.array([final[t] for t in study.trial_ids])
    best = float(values.min())
    scale = 1.0 if name in ACCURACY_SETS else float(np.median(values) - best) or 1.0
    configs = features(study)
    predicted = np.array([study.reference_seconds_per_step[t] * study.max_steps for t in study.trial_ids])

    def reached(order: list[int]) -> bool:
        return bool(order) and (values[order].min() - best) / scale <= target + 1e-12

    row = {"set": name, "seed": seed, "configs": len(values), "best": best, "regret_scale": scale,
           "trial_usd_mean": float(usd.mean()), "trial_usd_cv": float(usd.std() / usd.mean()) if usd.mean() else 0.0}
    for method in METHODS:
        t0 = time.perf_counter()
        order = ORDERS[method](values, predicted, configs, seed, reached)
        n = next(i + 1 for i in range(len(order)) if reached(order[: i + 1]))
        row[method] = {"usd": float(usd[order[:n]].sum()), "trials": n, "wall_s": time.perf_counter() - t0}
    return row


def summarise(rows: list[dict]) -> dict:
    out = {}
    for name in dict.fromkeys(r["set"] for r in rows):
        mine = [r for r in rows if r["set"] == name]
        usd = np.array([[r[m]["usd"] for m in METHODS] for r in mine])
        trials = np.array([[r[m]["trials"] for m in METHODS] for r in mine])
        i = {m: METHODS.index(m) for m in METHODS}
        s = {"studies": len(mine), "usd": dict(zip(METHODS, usd.mean(axis=0).tolist())),
             "trials": dict(zip(METHODS, trials.mean(axis=0).tolist())),
             "trial_usd_mean": float(np.mean([r["trial_usd_mean"] for r in mine]))}
        for other in ("random", "tpe", "gp-ucb-c1"):
            ratio = float(usd[:, i["gp-ucb"]].mean() / usd[:, i[other]].mean())
            ci = bootstrap_interval(usd[:, [i["gp-ucb"], i[other]]], lambda m: m[:, 0] / m[:, 1])
            s[f"gp-ucb/{other}"] = {"ratio": ratio, "ci95": list(ci),
                                    "wins": int((usd[:, i["gp-ucb"]] < usd[:, i[other]]).sum()),
                                    "losses": int((usd[:, i["gp-ucb"]] > usd[:, i[other]]).sum())}
        out[name] = s
    return out


def run(args: argparse.Namespace) -> dict:
    sets = args.sets.split(",") if args.sets else list(SETS)
    rows = []
    for name in sets:
        for seed in range(args.seeds):
            rows.append(one_study(f"{name}:{args.configs}", seed, args.target) | {"set": name})
            r = rows[-1]
            print(f"{name} seed {seed}: " + ", ".join(f"{m} {r[m]['usd']:.3f} USD/{r[m]['trials']}"
                                                      for m in METHODS), file=sys.stderr)
    return {"target_regret": args.target, "configs": args.configs, "seeds": args.seeds, "start": START,
            "pricing": "spot-restart replay of all the study's trials, legacy 2015 us-east-1, charged USD per trial",
            "summary": summarise(rows), "rows": rows}


def markdown(r: dict) -> str:
    lines = [f"USD (trials) to regret <= {r['target_regret']:g}, mean over {r['seeds']} studies of {r['configs']} "
             "configurations per set; ratio of means with a 95 % paired bootstrap interval, and the studies where "
             "GP-UCB costs less / more.", "",
             "| set | mean USD of a trial | random | TPE | GP-UCB c = 1 | GP-UCB | GP-UCB / random | GP-UCB / TPE | "
             "GP-UCB / (c = 1) |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, s in r["summary"].items():
        cell = lambda m: f"{s['usd'][m]:.3f} ({s['trials'][m]:.1f})"  # noqa: E731
        ratio = lambda o: (f"{s[o]['ratio']:.2f} [{s[o]['ci95'][0]:.2f}, {s[o]['ci95'][1]:.2f}] "  # noqa: E731
                           f"{s[o]['wins']}/{s[o]['losses']}")
        lines.append(f"| {name} | {s['trial_usd_mean']:.3f} | {cell('random')} | {cell('tpe')} | {cell('gp-ucb-c1')} "
                     f"| {cell('gp-ucb')} | {ratio('gp-ucb/random')} | {ratio('gp-ucb/tpe')} | "
                     f"{ratio('gp-ucb/gp-ucb-c1')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default=None, help=f"comma-separated, of {', '.join(SETS)} (default all)")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--configs", type=int, default=64)
    ap.add_argument("--target", type=float, default=0.01)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--markdown", action="store_true", help="print the table of the stored JSON")
    return run_or_print(ap.parse_args(argv), run, markdown)


if __name__ == "__main__":
    sys.exit(main())
