"""Decision time of the service's pure schedulers per slot (decisions SV2-SV6) -> ``benchmarks/results/scheduler.json``.

One slot's decisions at 1,000 pending units of 20 teams: the hour's max-min fair split (``max_min_fair``, 20 teams),
the team pick (``HybridTeamPicker.pick``, 20 teams), a unit's dispatch and completion (``UnitQueues``, 1,000 pending
units of 1,000 trials, 8 workers) and the next configuration of one study (``CostAwareGPUCB.suggest``: 1,000 arms
with 3 hyperparameters, 20 results, a GP fitted by maximum likelihood). Each is the median (and minimum) of
``--repeats`` calls on a 2-core machine shared with other work.

Run: ``.venv/bin/python benchmarks/bench_scheduler.py [--repeats 50]`` (under a minute); ``--markdown`` prints the
table from the JSON.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, run_or_print, timed  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "scheduler.json"


def run(args: argparse.Namespace) -> dict:
    import numpy as np

    from spottune.scheduling import CostAwareGPUCB, HybridTeamPicker, TeamBound, Unit, UnitQueues, max_min_fair

    rng = np.random.default_rng(0)
    teams = [f"team{i:02d}" for i in range(20)]
    e, d = rng.uniform(0.5, 2.0, 20), rng.uniform(0.0, 2.0, 20)
    rows = {}
    med, low, _ = timed(lambda: max_min_fair(e, d, 10.0), args.repeats)
    rows["max_min_fair, 20 teams"] = (med, low)

    bounds = {t: TeamBound(ucb=float(u), best=float(b)) for t, u, b in
              zip(teams, rng.uniform(0.8, 1.0, 20), rng.uniform(0.5, 0.8, 20))}
    med, low, _ = timed(lambda: HybridTeamPicker().pick(bounds), args.repeats)  # a greedy round, not round robin
    rows["HybridTeamPicker.pick, 20 teams"] = (med, low)

    queues = UnitQueues(heartbeat_period_s=10.0)
    for i in range(1000):
        queues.submit(Unit(trial_id=f"t{i:04d}", start_step=0, end_step=100))
    for w in range(7):
        queues.dispatch(f"w{w}", 0.0)
    clock = [0.0]

    def slot():
        clock[0] += 1.0
        unit = queues.dispatch("w7", clock[0])
        queues.complete("w7", unit, clock[0], checkpoint=f"ck/{unit.trial_id}")
        queues.submit(Unit(trial_id=unit.trial_id, start_step=100, end_step=200))
        queues.expire(clock[0])

    med, low, _ = timed(slot, args.repeats)
    rows["UnitQueues dispatch + complete + expire, 1,000 pending"] = (med, low)

    arms = rng.uniform(0, 1, (1000, 3))
    cost = rng.uniform(0.1, 1.0, 1000)
    tried = list(range(20))
    values = list(-((arms[tried] - 0.5) ** 2).sum(axis=1))
    gp = CostAwareGPUCB()
    med, low, _ = timed(lambda: gp.suggest(arms, cost, tried, values), max(3, args.repeats // 10))
    rows["CostAwareGPUCB.suggest, 1,000 arms, 20 results"] = (med, low)
    return {"repeats": args.repeats,
            "rows": [{"decision": k, "median_ms": 1000 * m, "min_ms": 1000 * lo} for k, (m, lo) in rows.items()]}


def markdown(r: dict) -> str:
    lines = ["| decision | median ms | min ms |", "| --- | ---: | ---: |"]
    lines += [f"| {row['decision']} | {row['median_ms']:.3f} | {row['min_ms']:.3f} |" for row in r["rows"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--markdown", action="store_true", help="print the table of the stored JSON")
    return run_or_print(ap.parse_args(argv), run, markdown)


if __name__ == "__main__":
    sys.exit(main())
