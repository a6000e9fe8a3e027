"""The optimizer's-curse corrections of the refund objective, measured: ``benchmarks/results/curse.json``.

``spottune-0.7`` (refund objective, ``auto`` predictor, θ 0.7) is run on the same replays as
``benchmarks/bench_cost.py`` with :class:`provisioner.RefundProvisioner`'s corrections set on the built
provisioner (``p_shrink``, ``p_prior``, ``max_trials_per_candidate``; docs/design/provisioner.md), each paired with
the uncorrected run of the same start. The uncorrected reference ``{}`` also switches off the ceiling on p
(``p_cap``, design R6) that ``make_provisioner`` sets for the calibrated predictor, so ``{"p_cap": 0.6}`` is
legacy mode's default today. ``p_prior: "empirical"`` is the market's own empirical rate over the
28 days before the start (:func:`spottune.compose.empirical_rate_predictor`). ``feature_set`` (not a
correction) trains the calibrated predictor on another set of columns (:data:`revpred.ladder_features.FEATURE_SETS`,
docs/design/revpred.md "Sharper features"); ``given_capacity`` picks modern mode's online-hazard prior (design P8);
``--reference '{"p_cap": 0.6}'`` pairs every setting with today's default instead of ``{}``, and ``--tag`` keeps
such a comparison in its own rows file and summary key. A rows file keeps its rows across code changes: the
modern-mode ``{}`` rows written before 2026-11-27 (``tuning-digits-mlp-modern*.csv``,
``evaluation-digits-mlp-modern.csv``) ran with the launch-time prior, so pair new modern settings with
``{"given_capacity": false}`` or ``true`` explicitly, or delete those files. Every setting runs without the job's
value of time (design R11, the default since 2026-11-27; all rows before it ran without one), unless it sets
``job_time_value_usd_per_hour`` itself (``{"job_time_value_usd_per_hour": 0.01}`` on top is today's default).

Settings are chosen on the **tuning** starts (:func:`spottune.evaluation.tuning_starts`, between the
evaluation starts, never overlapping an evaluation replay) and then reported on the evaluation starts
(:func:`spottune.evaluation.default_starts`, bench_cost's 10). The rule, fixed before any corrected run on an
evaluation start, is in docs/design/evaluation.md ("Optimizer's curse").

Run: ``.venv/bin/python benchmarks/bench_curse.py --starts tuning|evaluation [--settings JSON] [--workload w]
[--mode legacy|modern] [--first N] [--jobs 2] [--reliability] [--reference JSON] [--tag T]``; rows go to
``benchmarks/results/curse_runs/<set>-<workload>-<mode>[-<tag>].csv``
(a rerun only runs the (setting, start) pairs missing there) and the summary to ``benchmarks/results/curse.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from _common import write_json  # noqa: E402  (benchmarks/ is the script's folder: results JSONs carry their provenance)

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "curse.json"
RUNS = ROOT / "benchmarks" / "results" / "curse_runs"
POLICY = "spottune-0.7"
#: The candidates of the tuning rule (docs/design/evaluation.md), plus the uncorrected reference ``{}``.
CANDIDATES = [{}, {"p_shrink": 0.25}, {"p_shrink": 0.5}, {"p_shrink": 0.75}, {"p_shrink": 0.5, "p_prior": 0.0},
              {"max_trials_per_candidate": 2}, {"max_trials_per_candidate": 4},
              {"p_shrink": 0.5, "max_trials_per_candidate": 4},
              {"p_shrink": 0.25, "p_prior": "empirical"}, {"p_shrink": 0.5, "p_prior": "empirical"},
              {"p_shrink": 0.75, "p_prior": "empirical"}, {"p_shrink": 1.0, "p_prior": "empirical"},
              {"p_cap": 0.6}, {"p_cap": 0.7}, {"p_cap": 0.8}]
CAP_WINDOW_S = 600.0


def _key(setting: dict) -> str:
    return json.dumps(setting, sort_keys=True)


def _configure(chooser, setting: dict, env: dict, start_s: float) -> None:
    """Set the correction attributes of a built RefundProvisioner (validated like its constructor).

    ``time_value_usd_per_hour`` and ``job_time_value_usd_per_hour`` (``benchmarks/bench_time_value.py``) replace the
    objective's values of time and ``hazard_shape`` its Weibull shape of the revocation time
    (``provisioner.RefundStepCost``, validated by it).
    """
    import dataclasses

    from provisioner._curse import LaunchLedger, check_correction
    from provisioner._refund_provisioner import P_CAP

    for name in ("time_value_usd_per_hour", "job_time_value_usd_per_hour", "hazard_shape"):
        if name in setting:
            chooser.objective = dataclasses.replace(chooser.objective, **{name: float(setting[name])})

    prior = setting.get("p_prior")
    if prior == "empirical":
        key = ("empirical", start_s)
        if key not in env["predictors"]:
            from spottune.compose import CALIBRATED_HISTORY_DAYS, DAY_S, empirical_rate_predictor

            first = max(float(env["history"][m].start_s) for m in env["markets"])
            env["predictors"][key] = empirical_rate_predictor(
                env["market"], max(first, start_s - CALIBRATED_HISTORY_DAYS * DAY_S), start_s)
        prior = env["predictors"][key]
    cap = setting.get("max_trials_per_candidate")
    p_cap = setting.get("p_cap", P_CAP)
    check_correction(setting.get("p_shrink", 0.0), prior, cap, CAP_WINDOW_S, p_cap)
    chooser.p_shrink = float(setting.get("p_shrink", 0.0))
    chooser.p_cap = float(p_cap)
    chooser.p_prior = prior
    chooser.ledger = None if cap is None else LaunchLedger(cap, CAP_WINDOW_S)


def launches(log: list[dict]) -> list[dict]:
    """Per instance of a run: the chosen candidate's p, horizon H, q(H) and whether the provider revoked it.

    q(H) = 1 − (1 − p)^(H/3600) is what the objective expects before our own end (p capped at 0.999).
    """
    pending, out = {}, {}
    for r in log:
        if r["type"] == "Launch" and isinstance(r.get("explanation"), dict) and r["explanation"].get("candidates"):
            c = r["explanation"]["candidates"][0]
            pending[r["trial_id"]] = {"market": r["market"], "p": c["p_revocation"], "horizon_s": c.get("horizon_s"),
                                      "delta": round(r["max_price_usd_per_hour"] - c["current_price_usd_per_hour"], 6),
                                      "revoked": 0}
        elif r["type"] == "TrialLaunched" and r["trial_id"] in pending:
            out[r["instance_id"]] = pending.pop(r["trial_id"])
        elif r["type"] == "RevocationNotice" and r["instance_id"] in out:
            out[r["instance_id"]]["revoked"] = 1
    for v in out.values():
        if v["p"] is not None and v["horizon_s"] is not None:
            v["q"] = 1.0 - (1.0 - min(v["p"], 0.999)) ** (v["horizon_s"] / 3600.0)
    return list(out.values())


def reliability(rows: list[dict]) -> list[dict]:
    """Chosen candidates binned by q(H): mean q against the share the provider revoked (the optimizer's curse)."""
    edges = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0 + 1e-12]
    out = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        sel = [r for r in rows if "q" in r and lo <= r["q"] < hi]
        if sel:
            out.append({"q_bin": f"[{lo:.1f}, {min(hi, 1.0):.1f})", "instances": len(sel),
                        "mean_q": float(np.mean([r["q"] for r in sel])),
                        "mean_p": float(np.mean([r["p"] for r in sel])),
                        "revoked_share": float(np.mean([r["revoked"] for r in sel]))})
    return out


def run_one(args: tuple, with_launches: bool = False) -> dict:
    """One replay of ``spottune-0.7`` with a correction setting; the bench_cost columns and the chosen p."""
    setting, start_index, start_s, workload, mode, seed = args
    warnings.simplefilter("ignore")
    np.seterr(all="ignore")
    from spotmarket import Billing
    from spottune.backends import SimBackend, SimSettings
    from spottune.speed import DEFAULT_BOOT_S
    from spottune.compose import assemble, get_policy
    from spottune.evaluation._runner import TRAIN_DAYS, Task, _predictor, default_starts, environment, measure

    t0 = time.perf_counter()
    env = environment(workload, seed, mode, None, None)
    first = default_starts(env["history"], env["markets"], 10)[0]
    task = Task(workload=workload, policy=POLICY, start_index=start_index, start_s=start_s, market_mode=mode, seed=seed,
                train_lo_s=first - TRAIN_DAYS * 86400.0, train_hi_s=first)
    policy = get_policy(POLICY)
    study = env["study"]
    if "feature_set" in setting:  # the calibrated predictor on other columns, trained as _predictor trains it
        from spottune.compose import make_predictor

        width = task.train_hi_s - task.train_lo_s
        key = ("features", setting["feature_set"], start_s)
        if key not in env["predictors"]:
            env["predictors"][key] = make_predictor(policy.predictor, env["market"], start_s - width, start_s, seed,
                                                    feature_set=setting["feature_set"])[0]
        predictor = env["predictors"][key]
        predictor = predictor.fresh() if hasattr(predictor, "fresh") else predictor
    else:
        predictor = _predictor(env, policy.predictor, task)
    if "given_capacity" in setting:  # online-hazard's prior: a fulfilled launch's share or any launch's (design P8)
        from revpred.online_hazard import OnlineHazard

        if not isinstance(predictor, OnlineHazard):
            raise SystemExit(f"given_capacity needs the online-hazard predictor (modern mode), not {type(predictor).__name__}")

        predictor = OnlineHazard.from_calibration(env["revocations"].calibration, predictor.price_predictor,
                                                  given_capacity=bool(setting["given_capacity"]))
    asm = assemble(policy, study=study, history=env["history"], catalog=env["catalog"], pool=env["pool"],
                   markets=env["markets"], revocation_model=env["revocations"], billing=Billing("second"),
                   predictor=predictor, seed=seed, boot_s=DEFAULT_BOOT_S, start_s=start_s,
                   window_s=task.train_hi_s - task.train_lo_s, job_time_value_usd_per_hour=0.0)
    _configure(asm.chooser, setting, env, start_s)
    settings = SimSettings(boot_s=DEFAULT_BOOT_S, seed=seed)
    record = SimBackend(asm.orchestrator, env["history"], asm.revocation_model, asm.billing, study.sim_curves(),
                        env["market"].facts, start_s, settings).run()
    row = measure(task, policy, study, asm.orchestrator, record)
    chosen = [r["explanation"]["candidates"][0]["p_revocation"] for r in record.log
              if r["type"] == "Launch" and isinstance(r.get("explanation"), dict)
              and r["explanation"].get("candidates")]
    chosen = [p for p in chosen if p is not None]
    extra = {"launches": launches(record.log)} if with_launches else {}
    return {**extra, "setting": _key(setting), "start_index": start_index, "start": row["start"], "start_s": start_s,
            **{k: row[k] for k in ("cost_usd", "jct_h", "refunded_share", "revocations", "instances", "top3")},
            "mean_p_chosen": float(np.mean(chosen)) if chosen else math.nan,
            "wall_s": round(time.perf_counter() - t0, 2)}


def summarise(df, reference: dict | None = None) -> dict:
    """Per setting: means, and the paired cost difference to the reference run (default ``{}``) of the same start (mean, s.e.)."""
    ref = df[df["setting"] == _key(reference or {})].set_index("start_s")
    out = {}
    for setting, g in df.groupby("setting", sort=False):
        g = g.set_index("start_s")
        common = g.index.intersection(ref.index)
        d = (g.loc[common, "cost_usd"] - ref.loc[common, "cost_usd"]).astype(float)
        out[setting] = {
            "starts": int(len(g)), "cost_usd": float(g["cost_usd"].mean()), "jct_h": float(g["jct_h"].mean()),
            "refunded_share": float(g["refunded_share"].mean()), "revocations": float(g["revocations"].mean()),
            "top3_min": float(g["top3"].min()), "mean_p_chosen": float(g["mean_p_chosen"].mean()),
            "revocations_per_instance": float((g["revocations"] / g["instances"]).mean()),
            "paired_cost_diff_usd": float(d.mean()) if len(d) else None,
            "paired_cost_diff_se": float(d.std(ddof=1) / math.sqrt(len(d))) if len(d) > 1 else None,
            "starts_cheaper": int((d < -1e-9).sum()), "starts_dearer": int((d > 1e-9).sum())}
    return out


def main() -> None:
    import pandas as pd

    from spottune.evaluation import default_starts, tuning_starts
    from spottune.evaluation._runner import environment

    ap = argparse.ArgumentParser()
    ap.add_argument("--starts", choices=["tuning", "evaluation"], required=True)
    ap.add_argument("--settings", default=None, help="JSON list of settings (default: the tuning candidates)")
    ap.add_argument("--workload", default="digits-mlp")
    ap.add_argument("--mode", choices=["legacy", "modern"], default="legacy")
    ap.add_argument("--first", type=int, default=None, help="only the first N starts of the set")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0, help="seed of the replays (noise, predictors); 0 = bench_cost's")
    ap.add_argument("--reference", default="{}", help="JSON setting every other is paired with (default: {})")
    ap.add_argument("--tag", default=None, help="suffix of the rows file and the summary key")
    ap.add_argument("--reliability", action="store_true",
                    help="rerun the settings and bin their chosen candidates' q(H) against the revoked share")
    args = ap.parse_args()
    settings = json.loads(args.settings) if args.settings else CANDIDATES
    reference = json.loads(args.reference)
    if reference not in settings:
        settings = [reference, *settings]
    env = environment(args.workload, 0, args.mode, None, None)
    ev = default_starts(env["history"], env["markets"], 10)
    starts = tuning_starts(ev) if args.starts == "tuning" else ev
    starts = starts[: args.first] if args.first else starts
    name = (f"{args.starts}-{args.workload}-{args.mode}" + (f"-seed{args.seed}" if args.seed else "")
            + (f"-{args.tag}" if args.tag else ""))
    if args.reliability:
        from functools import partial

        tasks = [(s, i, t, args.workload, args.mode, args.seed) for s in settings for i, t in enumerate(starts)]
        with ProcessPoolExecutor(args.jobs) as pool:
            rows = list(pool.map(partial(run_one, with_launches=True), tasks))
        results = json.loads(OUT.read_text()) if OUT.exists() else {}
        results[f"{name}-reliability"] = {
            k: reliability([x for r in rows if r["setting"] == k for x in r["launches"]]) for k in map(_key, settings)}
        write_json(OUT, results, indent=1)
        for k, v in results[f"{name}-reliability"].items():
            print(k)
            for b in v:
                print(f"  q {b['q_bin']}: {b['instances']:5d} instances, mean q {b['mean_q']:.3f}, mean p "
                      f"{b['mean_p']:.3f}, revoked {b['revoked_share']:.3f}")
        return
    path = RUNS / f"{name}.csv"
    done = pd.read_csv(path) if path.exists() else None
    have = set() if done is None else set(zip(done["setting"], done["start_s"]))
    tasks = [(s, i, t, args.workload, args.mode, args.seed) for s in settings for i, t in enumerate(starts)
             if (_key(s), t) not in have]
    if tasks:
        with ProcessPoolExecutor(args.jobs) as pool:
            rows = list(pool.map(run_one, tasks))
        new = pd.DataFrame(rows)
        done = new if done is None else pd.concat([done, new], ignore_index=True)
        RUNS.mkdir(parents=True, exist_ok=True)
        done.to_csv(path, index=False)
    keys = {_key(s) for s in settings}
    df = done[done["setting"].isin(keys) & done["start_s"].isin(starts)]
    results = json.loads(OUT.read_text()) if OUT.exists() else {}
    results[name] = {"policy": POLICY, "starts": [float(s) for s in starts], "reference": reference,
                     "settings": summarise(df, reference)}
    write_json(OUT, results, indent=1)
    for k, v in results[name]["settings"].items():
        print(f"{k:55s} cost {v['cost_usd']:.3f}  diff {v['paired_cost_diff_usd']:+.3f}"
              f" ± {v['paired_cost_diff_se'] or 0:.3f}"
              f"  refunded {v['refunded_share']:.3f}  JCT {v['jct_h']:.2f}  top3min {v['top3_min']:.0f}"
              f"  cheaper/dearer {v['starts_cheaper']}/{v['starts_dearer']}")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
