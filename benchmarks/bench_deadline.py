"""Deadline and budget in the simulator: spottune under ``deadline`` + ``budget_usd`` vs unconstrained
spottune and the SEER family (SEER as published, SEER with predictive elimination, E-Hyperband, E-Grid).

Workloads ``digits-mlp`` (and ``opda-alexnet`` with ``--workloads``), the 2015 us-east-1 trace, legacy and modern
market modes, every run through :func:`spottune.evaluation.run_task` (the same replay, billing, boot latency
and budget cap for every policy). Per (workload, mode):

1. ``--tune`` tuning starts, then ``--starts`` test starts, spread over the trace by
   :func:`spottune.evaluation.default_starts` (tuning starts first: the tuning period precedes the test period);
2. unconstrained ``spottune-0.7`` on the tuning starts; the deadline D = ``--deadline-factor`` x their median
   JCT and the budget B = ``--budget-factor`` x their median cost (the rule, fixed before any test run);
3. on the tuning starts, our candidates (SpotTune with :class:`spottune.planning.DeadlineGuard` rule
   ``slack`` or ``uniform``, and SEER's plan executed with predictive elimination, ``seer-predictive``; all
   under D and the hard cap B); **ours** is the candidate that met the deadline and finished (not stopped
   by the budget) on the most tuning starts, then the lower mean top-1 regret, then the lower mean cost;
4. on the test starts: unconstrained spottune, both candidates and the SEER family, all at D and B.

Reports per (workload, mode, policy) on the test starts: deadline met share (JCT <= D), the share that met
it *and* finished (a run the budget stopped ends early, so "met" alone flatters it), budget violations
(cost > B), runs the budget stopped, cost / unconstrained cost of the same start (median, max, share
<= 1.3) and over the starts (mean cost / mean unconstrained cost), top-1 regret (mean; the best trial so far when the budget stopped the run), and per start the
share where ours is no worse than SEER / E-Hyperband, and SEER-predictive no worse than SEER (F-S2).
Writes ``benchmarks/results/bench_deadline.json`` and ``docs/figures/deadline_met_vs_cost.png``.

Runs go to ``--jobs`` single-process lanes, each start always to the same lane, so the per-start revocation
predictor (trained on the days before the start) is trained once per start and mode.

Usage: ``python benchmarks/bench_deadline.py [--starts 20] [--tune 5] [--workloads digits-mlp] [--jobs 2]
[--test-shift 0.5 --out benchmarks/results/bench_deadline_fresh.json]`` (``--test-shift``: fresh test starts).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import _common  # noqa: F401  (puts the project on sys.path)
from _common import write_json  # noqa: E402  (benchmarks/ is the script's folder: results JSONs carry their provenance)

OUT = Path(__file__).resolve().parent / "results" / "bench_deadline.json"
FIGURE = Path(__file__).resolve().parents[1] / "docs" / "figures" / "deadline_met_vs_cost.png"
#: Our policy: SpotTune θ 0.7 with the constant revocation predictor. The default predictor (``auto``) is
#: trained per start on the days before it (~15 s alone, 10x a run): 50 starts x 2 modes would not fit the
#: bench's time budget on a shared 2-core machine (``--reference spottune-0.7`` runs it).
REFERENCE = "spottune-0.7-constant"
CANDIDATES = ("slack", "uniform")  #: DeadlineGuard rules of ours
BASELINES = ("seer", "seer-predictive", "seer-lean", "e-hyperband", "e-grid")
COST_TARGET = 1.3


def _label(policy: str, rule: str | None) -> str:
    return f"{policy}+{rule}" if rule else policy


def runs_at_start(jobs: list[dict]) -> list[dict]:
    """Run ``jobs`` (same workload, mode and start) in this process; one result row each."""
    from spottune.evaluation import Task, run_task
    from spottune.evaluation._runner import environment

    out = []
    for j in jobs:
        envs = [environment(w, 0, j["mode"], None, None) for w in j["share_with"]]
        for e in envs[1:]:  # one market per mode: the predictors do not depend on the workload
            e["predictors"] = envs[0]["predictors"]
        task = Task(workload=j["workload"], policy=j["policy"], start_index=j["start_index"], start_s=j["start_s"],
                    market_mode=j["mode"], seed=0, train_lo_s=j["lo"], train_hi_s=j["hi"],
                    deadline_s=j.get("deadline_s"), budget_usd=j.get("budget_usd"),
                    deadline_rule=j.get("rule") or "slack", shuffle_trials=j.get("shuffle", True))
        row, wall = run_task(task)
        out.append({"workload": j["workload"], "mode": j["mode"], "start_index": j["start_index"],
                    "phase": j["phase"], "policy": _label(j["policy"], j.get("rule")),
                    "deadline_h": (j.get("deadline_s") or math.nan) / 3600.0, "budget_usd": j.get("budget_usd"),
                    "cost_usd": row["cost_usd"], "jct_h": row["jct_h"], "regret": row["regret"],
                    "budget_stopped": bool(row["budget_stopped"] == 1.0), "note": row["note"], "error": row["error"],
                    "wall_s": wall})
    return out


class Lanes:
    """``n`` single-process executors; start ``i`` always runs in lane ``i % n`` (its predictor cache)."""

    def __init__(self, n: int):
        self.pools = [ProcessPoolExecutor(max_workers=1) for _ in range(n)]

    def map(self, groups: dict[tuple, list[dict]]) -> list[dict]:
        futs = [self.pools[key[-1] % len(self.pools)].submit(runs_at_start, jobs) for key, jobs in groups.items()]
        return [r for f in futs for r in f.result()]

    def close(self) -> None:
        for p in self.pools:
            p.shutdown()


def _group(jobs: list[dict]) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = {}
    for j in jobs:
        out.setdefault((j["mode"], j["workload"], j["start_index"]), []).append(j)
    return out


def _mean(xs):
    xs = [x for x in xs if x is not None and not math.isnan(x)]
    return statistics.mean(xs) if xs else None


def candidates(reference: str = REFERENCE) -> list[str]:
    """Our candidates: SpotTune under each deadline-guard rule, SEER's plan executed with predictive
    elimination (the deadline-and-budget work item: is executing the plan needed?) and the cost-lean plan (DB15)."""
    return [_label(reference, r) for r in CANDIDATES] + ["seer-predictive", "seer-lean"]


def choose_ours(rows: list[dict], reference: str = REFERENCE, free: dict | None = None) -> str:
    """The candidate with the most tuning starts that met the deadline *and* finished (not stopped by the
    budget), then the most tuning starts with cost <= 1.3 x the unconstrained run of the same start (``free``:
    start -> unconstrained cost; added with DB15, before any test run), then the lower mean top-1 regret, then
    the lower mean cost."""
    free = free or {}

    def key(label):
        rs = [r for r in rows if r["policy"] == label and not r["error"]]
        ok = sum(r["jct_h"] <= r["deadline_h"] + 1e-9 and not r["budget_stopped"] for r in rs)
        cheap = sum(r["start_index"] in free and r["cost_usd"] <= COST_TARGET * free[r["start_index"]] + 1e-9
                    for r in rs)
        return (-ok, -cheap, _mean([r["regret"] for r in rs]) or math.inf,
                _mean([r["cost_usd"] for r in rs]) or math.inf)
    return min(candidates(reference), key=key)


def summarise(rows: list[dict], ours: str, reference: str = REFERENCE) -> list[dict]:
    """Per policy, over the test starts of one (workload, mode) (module docstring)."""
    free = {r["start_index"]: r for r in rows if r["policy"] == reference}
    by = {}
    for r in rows:
        by.setdefault(r["policy"], {})[r["start_index"]] = r
    out = []
    for pol, rs in by.items():
        ok = [r for r in rs.values() if not r["error"]]
        paired = [(r["cost_usd"], free[i]["cost_usd"]) for i, r in rs.items() if not r["error"] and i in free]
        ratios = [c / f for c, f in paired if f > 0]
        regrets = [r["regret"] for r in ok if not math.isnan(r["regret"])]
        constrained = pol != reference
        s = {"policy": pol, "ours": pol == ours, "runs": len(rs), "errors": len(rs) - len(ok),
             "deadline_met": (sum(r["jct_h"] <= r["deadline_h"] + 1e-9 for r in ok) / len(ok)) if ok else None,
             "met_and_finished": (sum(r["jct_h"] <= r["deadline_h"] + 1e-9 and not r["budget_stopped"] for r in ok)
                                  / len(ok)) if ok else None,
             "budget_violations": sum(r["cost_usd"] > r["budget_usd"] + 1e-9 for r in ok) if constrained else None,
             "budget_stopped": sum(r["budget_stopped"] for r in ok),
             "cost_ratio_median": statistics.median(ratios) if ratios else None,
             "cost_ratio_max": max(ratios) if ratios else None,
             "cost_ratio_share_ok": (sum(x <= COST_TARGET + 1e-9 for x in ratios) / len(ratios)) if ratios else None,
             # the mean over the starts: total cost / total unconstrained cost of the same starts
             "cost_ratio_of_means": (sum(c for c, _ in paired) / sum(f for _, f in paired)) if ratios else None,
             "cost_usd_mean": _mean([r["cost_usd"] for r in ok]), "jct_h_mean": _mean([r["jct_h"] for r in ok]),
             "regret_mean": _mean(regrets), "regret_undefined": len(ok) - len(regrets)}
        for base in ("seer", "e-hyperband"):
            if base in by and pol != base:
                pairs = [(r["regret"], by[base][i]["regret"]) for i, r in rs.items() if i in by[base]]
                pairs = [(a, b) for a, b in pairs if not (math.isnan(a) or math.isnan(b))]
                s[f"regret_le_{base}"] = (sum(a <= b + 1e-12 for a, b in pairs) / len(pairs)) if pairs else None
        out.append(s)
    return out


def evaluate(rows: list[dict], settings: dict, ref: str) -> tuple[dict, dict]:
    """(ours, summary) per ``workload/mode``; unconstrained runs are measured against the same D and B."""
    for r in rows:
        st = settings[f"{r['workload']}/{r['mode']}"]
        if r["policy"] == ref:
            r["deadline_h"], r["budget_usd"] = st["deadline_h"], st["budget_usd"]
    chosen, summary = {}, {}
    for key in settings:
        mine = [r for r in rows if f"{r['workload']}/{r['mode']}" == key]
        free = {r["start_index"]: r["cost_usd"] for r in mine if r["phase"] == "tune" and r["policy"] == ref}
        chosen[key] = choose_ours([r for r in mine if r["phase"] == "tune" and r["policy"] != ref], ref, free)
        summary[key] = summarise([r for r in mine if r["phase"] == "test"], chosen[key], ref)
    return chosen, summary


def figure(data: dict, path: Path = FIGURE) -> None:
    """Deadline met share against median cost / unconstrained cost, one point per policy, per (workload, mode)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = list(data["settings"])
    fig, axes = plt.subplots(1, len(keys), figsize=(5.6 * len(keys), 6.2), squeeze=False)
    style = {"seer": ("v", "tab:red"), "seer-predictive": ("^", "tab:purple"), "seer-lean": ("*", "tab:brown"),
             "e-hyperband": ("D", "tab:green"),
             "e-grid": ("P", "tab:olive"), data["reference"]: ("o", "tab:gray")}
    for ax, key in zip(axes[0], keys):
        for s in data["summary"][key]:
            if s["cost_ratio_median"] is None or s["deadline_met"] is None:
                continue
            m, c = style.get(s["policy"], ("s", "tab:blue") if s["policy"].endswith("+slack") else ("X", "tab:cyan"))
            ax.scatter([s["cost_ratio_median"]], [s["met_and_finished"]], marker=m, color=c, s=70,
                       edgecolors="k" if s["ours"] else c, linewidths=1.5,
                       label=s["policy"] + (" (ours)" if s["ours"] else ""))
            ax.scatter([s["cost_ratio_median"]], [s["deadline_met"]], marker=m, facecolors="none", edgecolors=c, s=70)
        ax.axhline(0.95, color="k", lw=0.8, ls="--")
        ax.axvline(COST_TARGET, color="r", lw=0.8, ls="--")
        st = data["settings"][key]
        ax.set_title(f"{key}: D {st['deadline_h']:.2f} h, B {st['budget_usd']:.2f} USD", fontsize=9)
        ax.set_xlabel("median cost / unconstrained spottune cost")
        ax.set_ylabel("share of test starts (filled: met and finished;\nhollow: JCT <= D)")
        ax.set_ylim(-0.05, 1.05)
    for ax in axes[0]:
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def figure_path(out: Path) -> Path:
    """``docs/figures/deadline_met_vs_cost.png`` for ``bench_deadline.json``, ``deadline_<x>_met_vs_cost.png`` for
    ``bench_deadline_<x>.json``."""
    return FIGURE.with_name(out.stem.removeprefix("bench_") + "_met_vs_cost.png")


def print_table(data: dict) -> None:
    """The summary, one line per (workload/mode, policy); ``*`` marks ours."""
    summary = data["summary"]
    f = lambda x, d=2: "-" if x is None else f"{x:.{d}f}"  # noqa: E731
    print(f"{'workload/mode':20} {'policy':22} {'met':>5} {'fin':>5} {'viol':>4} {'stop':>4} {'cost x':>6} "
          f"{'max':>5} {'<=1.3':>5} {'mean x':>6} {'regret':>7} {'<=seer':>6} {'<=ehb':>6} {'err':>3}")
    for key, ss in summary.items():
        for s in ss:
            print(f"{key:20} {s['policy'] + ('*' if s['ours'] else ''):22} {f(s['deadline_met'])!s:>5} "
                  f"{f(s['met_and_finished']):>5} {s['budget_violations'] if s['budget_violations'] is not None else '-':>4} "
                  f"{s['budget_stopped']:>4} {f(s['cost_ratio_median']):>6} {f(s['cost_ratio_max']):>5} "
                  f"{f(s['cost_ratio_share_ok']):>5} {f(s.get('cost_ratio_of_means')):>6} {f(s['regret_mean'], 4):>7} {f(s.get('regret_le_seer')):>6} "
                  f"{f(s.get('regret_le_e-hyperband')):>6} {s['errors']:>3}")


def markdown(data: dict) -> str:
    """The summary as the table of ``docs/design/evaluation.md``, every policy; ours in bold."""
    f = lambda x, d=2: "–" if x is None else f"{x:.{d}f}"  # noqa: E731
    lines = ["| workload/market | policy | deadline met | met and finished | budget violations | stopped by budget "
             "| cost ÷ unconstrained (median / max / share ≤ 1.3) | mean × | top-1 regret (mean) | regret ≤ SEER "
             "| regret ≤ E-HB |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for key, ss in data["summary"].items():
        for s in ss:
            v = s["budget_violations"]
            lines.append(f"| {key} | {s['policy']}{' **(ours)**' if s['ours'] else ''} | {f(s['deadline_met'])} | "
                         f"{f(s['met_and_finished'])} | {'–' if v is None else v} | {s['budget_stopped']} | "
                         f"{f(s['cost_ratio_median'])} / {f(s['cost_ratio_max'])} / {f(s['cost_ratio_share_ok'])} | "
                         f"{f(s.get('cost_ratio_of_means'))} | {f(s['regret_mean'], 4)} | {f(s.get('regret_le_seer'))} | "
                         f"{f(s.get('regret_le_e-hyperband'))} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--plot-only", action="store_true", help="Redraw the figure from the JSON.")
    ap.add_argument("--markdown", action="store_true", help="Print the JSON's table as in docs/design/evaluation.md.")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--starts", type=int, default=20)
    ap.add_argument("--tune", type=int, default=5)
    ap.add_argument("--deadline-factor", type=float, default=0.8)
    ap.add_argument("--budget-factor", type=float, default=1.3)
    ap.add_argument("--modes", default="legacy,modern")
    ap.add_argument("--workloads", default="digits-mlp")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--no-shuffle", action="store_true",
                    help="Replay the trials in the study's order (default: an order drawn per start, DB16).")
    ap.add_argument("--reference", default=REFERENCE, help="Our SpotTune policy (unconstrained and constrained).")
    ap.add_argument("--test-shift", type=float, default=0.0,
                    help="Move every test start earlier by this fraction of the spacing between starts (whole hours): "
                         "0.5 gives fresh test starts, between the ones the design was revised on.")
    args = ap.parse_args()
    if not 0.0 <= args.test_shift < 1.0:
        ap.error("--test-shift must be in [0, 1)")
    ref = args.reference
    if args.markdown:
        print(markdown(json.loads(args.out.read_text())))
        return
    if args.plot_only:  # recompute the summary from the stored runs and redraw the figure
        data = json.loads(args.out.read_text())
        data["ours"], data["summary"] = evaluate(data["runs"], data["settings"], data["reference"])
        write_json(args.out, data, indent=1)
        figure(data, figure_path(args.out))
        print_table(data)
        return
    from spottune.evaluation._runner import DAY_S, TRAIN_DAYS, default_starts, environment

    t0 = time.perf_counter()
    workloads, modes = args.workloads.split(","), args.modes.split(",")
    plan = {}  # (mode, workload) -> (starts, lo)
    for mode in modes:
        for w in workloads:
            env = environment(w, 0, mode, None, None)
            starts = default_starts(env["history"], env["markets"], args.tune + args.starts)
            if args.test_shift and len(starts) > 1:  # test starts only; the tuning starts (D, B, ours) stay
                shift = args.test_shift * (starts[1] - starts[0])
                starts = starts[:args.tune] + [math.floor((s - shift) / 3600.0) * 3600.0 for s in starts[args.tune:]]
            plan[(mode, w)] = (starts, min(starts) - TRAIN_DAYS * DAY_S)
    lanes = Lanes(args.jobs)

    def job(mode, w, i, phase, policy, **kw):
        starts, lo = plan[(mode, w)]
        return {"mode": mode, "workload": w, "start_index": i, "start_s": starts[i], "lo": lo, "hi": min(starts),
                "phase": phase, "policy": policy, "share_with": [w] + [x for x in workloads if x != w],
                "shuffle": not args.no_shuffle, **kw}

    tune_idx, test_idx = range(args.tune), range(args.tune, args.tune + args.starts)
    rows = lanes.map(_group([job(m, w, i, "tune", ref) for (m, w) in plan for i in tune_idx]))
    print(f"unconstrained tuning runs: {time.perf_counter() - t0:.0f} s", flush=True)
    settings = {}
    for (m, w) in plan:
        tune = [r for r in rows if (r["mode"], r["workload"]) == (m, w)]
        settings[f"{w}/{m}"] = {"deadline_h": args.deadline_factor * statistics.median(r["jct_h"] for r in tune),
                                "budget_usd": args.budget_factor * statistics.median(r["cost_usd"] for r in tune)}
    jobs = []
    for (m, w) in plan:
        st = settings[f"{w}/{m}"]
        kw = {"deadline_s": st["deadline_h"] * 3600.0, "budget_usd": st["budget_usd"]}
        for i in tune_idx:
            jobs += [job(m, w, i, "tune", ref, rule=r, **kw) for r in CANDIDATES]
            jobs += [job(m, w, i, "tune", p, **kw) for p in ("seer-predictive", "seer-lean")]
        for i in test_idx:
            jobs.append(job(m, w, i, "test", ref))
            jobs += [job(m, w, i, "test", ref, rule=r, **kw) for r in CANDIDATES]
            jobs += [job(m, w, i, "test", b, **kw) for b in BASELINES]
    rows += lanes.map(_group(jobs))
    lanes.close()
    chosen, summary = evaluate(rows, settings, ref)
    data = {"reference": ref, "workloads": workloads, "modes": modes, "tune_starts": args.tune, "test_starts": args.starts,
            "deadline_factor": args.deadline_factor, "budget_factor": args.budget_factor, "settings": settings,
            "shuffled": not args.no_shuffle, "test_shift": args.test_shift,
            "ours": chosen, "summary": summary, "runs": rows, "wall_s": time.perf_counter() - t0}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_json(args.out, data, indent=1)
    figure(data, figure_path(args.out))
    print_table(data)
    print(f"ours: {chosen}; wall {data['wall_s']:.0f} s")


if __name__ == "__main__":
    main()
