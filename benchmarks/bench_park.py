"""What keeping an instance alive after our own stop would save ("keep an instance that is likely to be
revoked before its hour ends"): ``benchmarks/results/park.json``.

The refund rule makes a run free when the provider ends it within its first 3600 s,
and a run we end ourselves pays every second. The refund objective already prices this for the hourly hop (it plans
the horizon up to the trial's next stop). This bench asks about the other user ends: a trial that reaches its θ
barrier, finishes, or is pruned mid-hour terminates its instance at once. *Parking* would keep that instance, idle,
until either the provider revokes it (then the whole run is free) or its first hour is about to end (then we end it
and pay the idle time too).

Counterfactual on ``spottune-0.7``'s own ledgers (legacy mode, the default provisioner and predictor, bench_cost's
replays), for every run we ended (reason ``theta``, ``end``, ``prune``) before 3600 s, with A = what it paid:

- parked, it is free iff the market price rises above its max price early enough for the termination (the crossing
  plus the 120 s notice lead, ``spotmarket.LegacyBidRevocation``'s rule) to fall before launch + 3600 s; otherwise it
  pays A plus the idle time to launch + 3600 s at the market's prices;
- **oracle**: park exactly the runs that become free (an upper bound on what parking can save);
- **rule**: park when the calibrated predictor's p at the stop (its one-hour revocation probability at the run's max
  price), spread at a constant hazard over the time left for a crossing that still ends the run in its first hour
  (3600 s − run time − the 120 s notice lead), makes parking cheaper in expectation: q > idle / (A + idle). Twice:
  with the predictor's own p (``rule``), and with the ceiling min(p, 0.6) that ``spottune-0.7``'s argmin prices
  (``rule_capped``, design R6; with flat prices idle / (A + idle) is about the share of the hour left, and q from
  p ≤ 0.6 stays below it, so this rule keeps almost none by construction);
- **always**: park every such run.

Second-order effects are left out (a parked instance holds no trial, so nothing else changes in the replay).

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_park.py [--workloads digits-mlp,gbt] [--starts tuning]``
(a few minutes on two cores).
"""

from __future__ import annotations

import argparse
import json
import platform
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from _common import write_json  # noqa: E402  (benchmarks/ is the script's folder: results JSONs carry their provenance)

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "park.json"
POLICY = "spottune-0.7"
USER_STOPS = ("theta", "end", "prune")


def _stopped_runs(task: tuple[str, str, int]) -> tuple[float, list[dict]]:
    """(the run's cost, one dict per run it ended itself before 3600 s) for one start."""
    import spottune.evaluation._runner as R
    from provisioner import P_CAP
    from spotmarket import NOTICE_LEAD_S, Billing
    from spottune.compose import CALIBRATED_P_CAP, make_predictor
    from spottune.results import _ledger_frame

    workload, which, i = task
    warnings.simplefilter("ignore")
    captured = {}
    measure = R.measure

    def keep_ledger(t, policy, study, orch, record):
        captured["ledger"] = _ledger_frame(record)
        return measure(t, policy, study, orch, record)

    env = R.environment(workload, 0, "legacy", None, None)
    evaluation, starts = _starts(env, which)
    start = starts[i]
    lo = min(evaluation) - R.TRAIN_DAYS * R.DAY_S
    R.measure = keep_ledger  # run_task returns the table row only; the ledger is taken where the row is made
    try:
        row, _ = R.run_task(R.Task(workload=workload, policy=POLICY, start_index=i, start_s=start, market_mode="legacy",
                                   seed=0, train_lo_s=lo, train_hi_s=min(evaluation)))
    finally:
        R.measure = measure
    predictor = make_predictor("calibrated", env["market"], start - R.TRAIN_DAYS * R.DAY_S, start, 0)[0]
    billing, out = Billing("second"), []
    for r in captured["ledger"].itertuples():
        ran = r.end_s - r.start_s
        if r.ended_by != "user" or r.reason not in USER_STOPS or ran >= 3600.0:
            continue
        series = env["history"][r.market]
        hour_end = r.start_s + 3600.0
        free = float(series.next_above(r.end_s, r.max_price_usd_per_hour)) + NOTICE_LEAD_S < hour_end
        idle = float(billing.charge(series, r.end_s, hour_end, "user").charged_usd)
        p = min(float(predictor.predict_proba([r.market], r.end_s, r.max_price_usd_per_hour)[0]), P_CAP)
        left = max(3600.0 - ran - NOTICE_LEAD_S, 0.0) / 3600.0
        q, q_capped = 1.0 - (1.0 - p) ** left, 1.0 - (1.0 - min(p, CALIBRATED_P_CAP)) ** left
        out.append({"paid": float(r.charged_usd), "parked": 0.0 if free else float(r.charged_usd) + idle,
                    "free": free, "rule": q * (r.charged_usd + idle) > idle,
                    "rule_capped": q_capped * (r.charged_usd + idle) > idle})
    return float(row["cost_usd"]), out


def _starts(env: dict, which: str) -> tuple[list[float], list[float]]:
    """(bench_cost's 10 evaluation starts, the starts of ``which``: those or the tuning starts between them), seconds."""
    from spottune.evaluation import default_starts, tuning_starts

    evaluation = default_starts(env["history"], env["markets"], 10)
    return evaluation, evaluation if which == "evaluation" else tuning_starts(evaluation)


def summarise(costs: list[float], runs: list[dict]) -> dict:
    """One workload's figures from its runs' costs (USD) and its mid-hour user-stopped runs: USD saved by each rule
    (oracle, ``rule``, ``rule_capped``, always), also as a share of the total cost."""
    paid = np.array([r["paid"] for r in runs])
    parked = np.array([r["parked"] for r in runs])
    rules = {k: np.array([r[k] for r in runs]) for k in ("rule", "rule_capped")}
    total = float(sum(costs))
    saving = {"oracle": float((paid - np.minimum(parked, paid)).sum()),
              **{k: float((paid - np.where(v, parked, paid)).sum()) for k, v in rules.items()},
              "always": float((paid - parked).sum())}
    return {"starts": len(costs), "total_cost_usd": total, "user_stopped_runs": len(runs),
            "user_stopped_paid_usd": float(paid.sum()), "share_free_if_parked": float(np.mean([r["free"] for r in runs])),
            "share_parked": {k: float(v.mean()) for k, v in rules.items()}, "saving_usd": saving,
            "saving_share_of_cost": {k: v / total for k, v in saving.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default="digits-mlp,gbt")
    ap.add_argument("--starts", choices=["tuning", "evaluation"], default="tuning")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    from spottune.evaluation._runner import environment

    result = {"machine": platform.machine(), "python": platform.python_version(), "policy": POLICY,
              "start_set": args.starts, "workloads": {}}
    for workload in args.workloads.split(","):
        n = len(_starts(environment(workload, 0, "legacy", None, None), args.starts)[1])
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            res = list(pool.map(_stopped_runs, [(workload, args.starts, i) for i in range(n)]))
        result["workloads"][workload] = summarise([c for c, _ in res], [r for _, rs in res for r in rs])
        print(workload, json.dumps(result["workloads"][workload]), flush=True)
    write_json(OUT, result, indent=1)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
