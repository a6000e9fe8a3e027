"""Deadline and budget in the simulator (issue 17): spottune with ``deadline`` + ``budget_usd`` vs unconstrained.

Workload ``opda-alexnet`` (recorded curves, as ``bench_simulate``), the 2015 us-east-1 trace, legacy and modern
market modes, policy ``spottune`` (refund objective, auto predictor). Per mode:

1. unconstrained spottune on every start (``--tune`` tuning starts, then ``--starts`` test starts, spread
   over the trace by :func:`spottune.evaluation.default_starts`, tuning starts first);
2. the deadline D and budget B are set on the tuning starts only: D = ``--deadline-factor`` x the median
   unconstrained JCT, B = ``--budget-factor`` x the median unconstrained cost;
3. on the test starts, spottune with D (:class:`spottune.planning.DeadlineGuard`, rule ``slack`` and the
   ``uniform`` anchor) and B (the hard cap of the sim backend).

Reports per (mode, variant): deadline met share, budget violations, cost / unconstrained cost (median, max),
top-1 regret (mean; the best trial so far when the budget stopped the run), runs the budget stopped, and
the share that met the deadline *and* finished (a run the budget stopped ends early, so "met" alone flatters it). Writes ``benchmarks/results/bench_deadline.json``.

Not done (issue 17): SEER / E-Hyperband / E-Grid as simulate policies, so the "regret no worse than SEER
at equal budget" target is not measured.

Usage: ``python benchmarks/bench_deadline.py [--starts 20] [--tune 5]``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path

import _common  # noqa: F401  (puts the project on sys.path)

OUT = Path(__file__).resolve().parent / "results" / "bench_deadline.json"
WORKLOAD = "opda-alexnet"


def one(task, variant, deadline_s=None, budget=None):
    from spotmarket import Billing
    from spottune.backends import SimBackend, SimSettings
    from spottune.evaluation._policies import assemble, get_policy
    from spottune.evaluation._runner import _predictor, environment
    from spottune.planning import DeadlineGuard
    from spottune.results import _ledger_frame, _top_k

    policy = get_policy("spottune-0.7", task.objective)
    env = environment(task.workload, task.seed, task.market_mode, task.prices, task.max_steps)
    study, market = env["study"], env["market"]
    asm = assemble(policy, study=study, history=env["history"], catalog=env["catalog"], pool=env["pool"],
                   markets=env["markets"], revocation_model=env["revocations"], billing=Billing(task.billing),
                   predictor=_predictor(env, policy.predictor, task), seed=task.seed, boot_s=task.boot_s)
    orch = asm.orchestrator
    if deadline_s is not None:
        ref = statistics.mean(study.reference_seconds_per_step.values())
        from spottune.backends._speed import seconds_per_step

        orch.chooser = DeadlineGuard(
            orch.chooser, start_s=task.start_s, deadline_s=task.start_s + deadline_s, max_steps=study.max_steps,
            markets=env["markets"], seconds_per_step=lambda t: seconds_per_step(ref, *market.facts(t)),
            overhead_s=task.boot_s + 60.0, rule=variant,
            on_demand_usd_per_hour=lambda m: market.catalog.on_demand_usd_per_hour(m.instance_type, m.region))
    backend = SimBackend(orch, env["history"], asm.revocation_model, asm.billing, study.sim_curves(),
                         market.facts, task.start_s, SimSettings(boot_s=task.boot_s, seed=task.seed))
    backend.budget_usd = budget
    record = backend.run()
    ledger = _ledger_frame(record)
    cost = float(ledger["charged_usd"].sum())
    jct_s = (record.end_s - record.start_s) if record.end_s is not None else math.nan
    top = _top_k(orch, record)
    truth, ranking = study.final(), study.ranking()
    sign = 1.0 if study.mode == "min" else -1.0
    return {"mode": task.market_mode, "variant": variant, "start_index": task.start_index, "cost_usd": cost,
            "jct_h": jct_s / 3600.0, "regret": sign * (truth[top[0]] - truth[ranking[0]]) if top else math.nan,
            "budget_stopped": bool(record.meta.get("budget_exhausted")),
            "switches": len(getattr(orch.chooser, "switches", []))}


FIGURE = Path(__file__).resolve().parents[1] / "docs" / "figures" / "deadline_met_vs_cost.png"


def figure(data: dict, path: Path = FIGURE) -> None:
    """Deadline met vs cost: each test run's JCT / deadline against its cost / the budget, per mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = list(data["settings"])
    fig, axes = plt.subplots(1, len(modes), figsize=(5.5 * len(modes), 4.5), squeeze=False)
    marks = {"unconstrained": ("o", "tab:gray"), "slack": ("s", "tab:blue"), "uniform": ("^", "tab:orange")}
    for ax, mode in zip(axes[0], modes):
        for variant, (m, c) in marks.items():
            rs = [r for r in data["runs"] if r["mode"] == mode and r["variant"] == variant]
            ax.scatter([r["cost_usd"] / r["budget_usd"] for r in rs], [r["jct_h"] / r["deadline_h"] for r in rs],
                       marker=m, color=c, label=variant, alpha=0.8)
            stopped = [r for r in rs if r["budget_stopped"]]
            ax.scatter([r["cost_usd"] / r["budget_usd"] for r in stopped],
                       [r["jct_h"] / r["deadline_h"] for r in stopped], marker="x", color="k", s=25)
        ax.axhline(1.0, color="k", lw=0.8, ls="--")
        ax.axvline(1.0, color="r", lw=0.8, ls="--")
        ax.set_xlabel("cost / budget")
        ax.set_ylabel("JCT / deadline (<= 1: met)")
        ax.set_title(f"{mode}: D {data['settings'][mode]['deadline_h']:.2f} h, B {data['settings'][mode]['budget_usd']:.2f} USD")
    axes[0][0].legend(title="x: stopped by the budget")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--plot-only", action="store_true", help="Redraw the figure from the JSON.")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--starts", type=int, default=20)
    ap.add_argument("--tune", type=int, default=5)
    ap.add_argument("--deadline-factor", type=float, default=1.0)
    ap.add_argument("--budget-factor", type=float, default=1.3)
    ap.add_argument("--modes", default="legacy,modern")
    args = ap.parse_args()
    if args.plot_only:
        figure(json.loads(args.out.read_text()))
        return
    from spottune.evaluation._runner import DAY_S, TRAIN_DAYS, Task, default_starts, environment

    t0 = time.perf_counter()
    rows, settings = [], {}
    for mode in args.modes.split(","):
        env = environment(WORKLOAD, 0, mode, None, None)
        starts = default_starts(env["history"], env["markets"], args.tune + args.starts)
        lo = min(starts) - TRAIN_DAYS * DAY_S
        tasks = [Task(workload=WORKLOAD, policy="spottune-0.7", start_index=i, start_s=s, market_mode=mode, seed=0,
                      train_lo_s=lo, train_hi_s=min(starts)) for i, s in enumerate(starts)]
        free = []
        for t in tasks:
            free.append(one(t, "unconstrained"))
            print(f"{mode} start {t.start_index}: unconstrained {time.perf_counter() - t0:.0f} s", flush=True)
        tune = free[: args.tune]
        D = args.deadline_factor * statistics.median(r["jct_h"] for r in tune) * 3600.0
        B = args.budget_factor * statistics.median(r["cost_usd"] for r in tune)
        settings[mode] = {"deadline_h": D / 3600.0, "budget_usd": B}
        for t, f in zip(tasks[args.tune:], free[args.tune:]):
            rows.append({**f, "deadline_h": D / 3600.0, "budget_usd": B})
            for rule in ("slack", "uniform"):
                r = one(t, rule, D, B)
                rows.append({**r, "deadline_h": D / 3600.0, "budget_usd": B, "cost_ratio": r["cost_usd"] / f["cost_usd"]})
        print(f"{mode}: done in {time.perf_counter() - t0:.0f} s", flush=True)
    summary = []
    for mode in settings:
        for variant in ("unconstrained", "slack", "uniform"):
            rs = [r for r in rows if r["mode"] == mode and r["variant"] == variant]
            regrets = [r["regret"] for r in rs if not math.isnan(r["regret"])]
            ratios = [r["cost_ratio"] for r in rs if "cost_ratio" in r]
            summary.append({
                "mode": mode, "variant": variant, "runs": len(rs),
                "deadline_met": sum(r["jct_h"] * 3600.0 <= r["deadline_h"] * 3600.0 + 1e-6 for r in rs) / len(rs),
                "met_and_finished": sum(r["jct_h"] <= r["deadline_h"] + 1e-9 and not r["budget_stopped"]
                                        for r in rs) / len(rs),
                "budget_violations": sum(r["cost_usd"] > r["budget_usd"] + 1e-9 for r in rs),
                "budget_stopped": sum(r["budget_stopped"] for r in rs),
                "cost_ratio_median": statistics.median(ratios) if ratios else None,
                "cost_ratio_max": max(ratios) if ratios else None,
                "regret_mean": statistics.mean(regrets) if regrets else None,
                "regret_undefined": len(rs) - len(regrets),
                "switches_mean": statistics.mean(r["switches"] for r in rs)})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"workload": WORKLOAD, "tune_starts": args.tune, "test_starts": args.starts,
                               "deadline_factor": args.deadline_factor, "budget_factor": args.budget_factor,
                               "settings": settings, "summary": summary, "runs": rows,
                               "wall_s": time.perf_counter() - t0}, indent=1))
    figure(json.loads(args.out.read_text()), FIGURE if args.out == OUT else args.out.with_suffix(".png"))
    print(f"{'mode':7} {'variant':13} {'met':>5} {'fin':>5} {'viol':>4} {'stop':>4} {'cost x med':>10} {'max':>6} {'regret':>8}")
    for s in summary:
        f = lambda x, d=3: "-" if x is None else f"{x:.{d}f}"  # noqa: E731
        print(f"{s['mode']:7} {s['variant']:13} {s['deadline_met']:5.2f} {s['met_and_finished']:5.2f} {s['budget_violations']:4d} "
              f"{s['budget_stopped']:4d} {f(s['cost_ratio_median'], 2):>10} {f(s['cost_ratio_max'], 2):>6} "
              f"{f(s['regret_mean'], 4):>8}")


if __name__ == "__main__":
    main()
