"""What SpotTune's provisioner buys, with the stopper held fixed: ``spottune-0.7`` and ``spottune-1.0`` under
SpotTune's provisioning and under spot-restart's (``spottune simulate --provisioning spottune|restart``) on both
shipped traces (us-east-1 2015 and eu-west-1 2021-08), three workloads and both market modes ->
``benchmarks/results/provisioning.json``.

Only the provisioning differs: the same policy, study, starts and seeds, run once with the default provisioning
(:class:`provisioner.GuardedProvisioner`: spot-restart's choice unless another market and max price beat it by the
margin, no hourly hop; decision R12) and once with spot-restart's (the cheapest market at each launch, max price =
on-demand, no hop). At θ = 1 the restart-provisioned run is the ``spot-restart`` baseline itself. Each cell reports
the ratio of mean costs (SpotTune's ÷ restart's) with a paired bootstrap interval over the starts (the same start
resampled in both arms), JCT ÷ restart's beside it, and the pooled ratio (geometric mean of the cells' ratios, each
cell's starts resampled).

The arm ``restart-failover`` (2026-11-29) runs the same policy under ``spottune simulate --provisioning
restart-failover`` (spot-restart with SkyPilot's failover after a capacity refusal, design E12); the summary gives
every other arm's ratio to it as well (``<arm> vs restart-failover``). ``--starts-from FILE`` runs each cell on exactly
the starts of an earlier run's rows (a new arm beside stored ones; ``--merge`` then joins them).

The arm ``reference`` (``spottune-0.7`` only) is the same objective told what it cannot know: hindsight revocation
probabilities (predictor ``hindsight``) and the simulator's true speed ratios between instance types (the speed
oracle below; the honest-speed rule off). The gap between ``spottune`` and ``reference`` is what estimation costs.
``--gap`` splits it on the tuning starts (``--indices`` picks some): ``speeds`` is ``spottune-0.7`` told only the true
speeds (the estimated p), ``hindsight-p`` only the hindsight p (honest speeds) -> ``provisioning_gap.json``.

``--tuning`` runs the grid ``--margins`` x ``--shrinks`` x ``--variants`` (plain, robust: the robust-p test) x
``--probes`` (probe segments in flight on unmeasured types, decision R13) of the
guarded provisioner (``spottune-0.7``) and restart on the tuning starts between the evaluation ones
(:func:`spottune.evaluation.tuning_starts` of the ``--starts`` evaluation starts; ``--indices`` picks some) ->
``provisioning_margin_tuning.json`` with :func:`select`'s choice; the defaults were chosen there (docs/design/decisions.md,
R12: ``--starts 20 --indices 0,6,12,18,25,31``). Nothing is chosen on the evaluation starts.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_provisioning.py --starts 20 --jobs 2`` (the full size:
12 cells x 20 starts x 5 runs; about an hour on two cores); ``--cases`` picks cells (``trace:workload:mode``, comma-
separated), ``--markdown`` prints the table from the JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, run_or_print  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "provisioning.json"
#: trace name -> ``spottune simulate --prices`` (None: the default, us-east-1 2015)
TRACES = {"us-east-1_2015": None, "eu-west-1_2021-08": str(ROOT / "data" / "spot_prices" / "eu-west-1_2021-08.csv.gz")}
WORKLOADS = ("digits-mlp", "opda-alexnet", "gbt")
MODES = ("legacy", "modern")
#: (trace, workload, market mode): every cell of the benchmark
CASES = tuple((t, w, m) for t in TRACES for w in WORKLOADS for m in MODES)
POLICIES = ("spottune-0.7", "spottune-1.0")
METRICS = ("cost_usd", "jct_h", "refunded_share", "top3", "instances", "hops", "revocations")
MARGINS = (0.0, 0.1, 0.25)
SHRINKS = (0.5,)
#: two tuning candidates whose pooled tuning ratios differ by less than this are tied (:func:`select`)
TIE = 0.01
#: a tuning candidate with a cell's cost ratio above this on the tuning starts is not eligible (:func:`select`)
CELL_LIMIT = 1.02


@contextlib.contextmanager
def speed_oracle():
    """Patch :class:`provisioner.PerformanceMatrix` so that its unmeasured cells follow the simulator's speed model,
    and turn the guarded provisioner's honest-speed rule off (the reference arm; module docstring). Worker processes
    forked inside the block inherit the patch."""
    import numpy as np

    from provisioner import GuardedProvisioner, InstanceCatalog, PerformanceMatrix
    from spottune.speed import seconds_per_step

    catalog = InstanceCatalog.load()
    prior, rescale = PerformanceMatrix._prior, PerformanceMatrix._rescale
    honest = GuardedProvisioner.honest_seconds_per_step

    def shape(self):  # seconds per step of each column relative to the 2-vCPU reference, as the simulator runs it
        return np.array([seconds_per_step(1.0, catalog[t].vcpus, catalog[t].ecu) for t in self.instance_types])

    def true_prior(self, trial_id):
        return self._kappa.get(trial_id, self.kappa_s) / 2.0 * shape(self)  # κ = 2 T_ref

    def true_rescale(self, trial_id):
        row, mask = self._rows[trial_id], self._measured[trial_id]
        if not mask.any():
            row[:] = true_prior(self, trial_id)
            return
        ref = float(np.exp(np.mean(np.log(row[mask] / shape(self)[mask]))))
        row[~mask] = ref * shape(self)[~mask]

    PerformanceMatrix._prior, PerformanceMatrix._rescale = true_prior, true_rescale
    GuardedProvisioner.honest_seconds_per_step = lambda self, T, leaving=True: T
    try:
        yield
    finally:
        PerformanceMatrix._prior, PerformanceMatrix._rescale = prior, rescale
        GuardedProvisioner.honest_seconds_per_step = honest


@contextlib.contextmanager
def margin(value: float | None, shrink: float | None = None, robust: bool | None = None, probes: int | None = None):
    """Set the guarded provisioner's margin (p shrinkage, robust-p test, probes in flight) of the policies built inside
    the block (forked workers inherit them); None keeps the default."""
    from spottune.compose import policies, provisioning

    old = (policies.DEFAULT_RESTART_MARGIN, provisioning.GUARD_P_SHRINK, provisioning.GUARD_ROBUST_P,
           provisioning.GUARD_PROBES)
    policies.DEFAULT_RESTART_MARGIN = old[0] if value is None else float(value)
    provisioning.GUARD_P_SHRINK = old[1] if shrink is None else float(shrink)
    provisioning.GUARD_ROBUST_P = old[2] if robust is None else bool(robust)
    provisioning.GUARD_PROBES = old[3] if probes is None else int(probes)
    try:
        yield
    finally:
        (policies.DEFAULT_RESTART_MARGIN, provisioning.GUARD_P_SHRINK, provisioning.GUARD_ROBUST_P,
         provisioning.GUARD_PROBES) = old


VARIANTS = ("plain", "robust")


def tuning_arm(m: float, w: float, robust: bool = False, probes: int = 0) -> str:
    """The name of the tuning candidate of margin ``m``, p shrinkage ``w``, the robust-p test and ``probes`` probe
    segments in flight: ``m<m>-w<w>`` (``-robust``) (``-probe<n>``)."""
    return f"m{m:g}-w{w:g}" + ("-robust" if robust else "") + (f"-probe{probes}" if probes else "")


def grid(margins, shrinks, variants, probes=(0,)) -> list[tuple[float, float, bool, int]]:
    """The tuning candidates (margin, shrinkage, robust, probes) of the grid."""
    return [(m, w, v == "robust", n) for n in probes for v in variants for m in margins for w in shrinks]


def select(summary: dict, candidates: list[tuple], policy: str = "spottune-0.7") -> dict:
    """The guarded provisioner's (margin, p shrinkage) chosen on the tuning starts, by the rule fixed before the
    grid ran (docs/design/decisions.md, R12):

    1. eligible: the candidates whose cost ratio to restart stays <= :data:`CELL_LIMIT` in every tuning cell (no
       harm; none eligible: all are);
    2. among them the smallest pooled cost ratio (geometric mean of the cells' ratios);
    3. candidates within :data:`TIE` of it are tied; a tie goes to the more conservative: the larger margin, then
       the larger shrinkage, then the robust-p test, then fewer probes (decision R13's rule, fixed before its grid).

    Parameters
    ----------
    summary : dict
        :func:`summarise`'s output over the tuning rows.
    candidates : list of (float, float), (float, float, bool) or (float, float, bool, int)
        The (margin, shrinkage[, robust[, probes]]) settings of the grid.
    policy : str, default "spottune-0.7"

    Returns
    -------
    dict
        ``margin``, ``shrink``, ``robust``, ``probes``, ``pooled`` (the chosen one's pooled ratio) and ``table``: per
        candidate its pooled ratio, worst cell ratio and eligibility.
    """
    table = {}
    for m, w, *rest in candidates:
        robust = bool(rest and rest[0])
        probes = int(rest[1]) if len(rest) > 1 else 0
        arm = tuning_arm(m, w, robust, probes)
        pooled = summary["pooled"].get(f"{arm} {policy}")
        cells = [v[arm]["cost_ratio"] for k, v in summary["cells"].items() if k.endswith(policy) and arm in v]
        if pooled is None or not cells:
            continue
        table[arm] = {"margin": m, "shrink": w, "robust": robust, "probes": probes, "pooled": pooled["cost_ratio"],
                      "worst_cell": max(cells)}
    eligible = [a for a, v in table.items() if v["worst_cell"] <= CELL_LIMIT] or list(table)
    for a, v in table.items():
        v["eligible"] = a in eligible
    best = min(table[a]["pooled"] for a in eligible)
    tied = [a for a in eligible if table[a]["pooled"] <= best + TIE]
    chosen = max(tied, key=lambda a: (table[a]["margin"], table[a]["shrink"], table[a]["robust"], -table[a]["probes"]))
    return {"margin": table[chosen]["margin"], "shrink": table[chosen]["shrink"], "robust": table[chosen]["robust"],
            "probes": table[chosen]["probes"],
            "pooled": table[chosen]["pooled"], "table": table}


#: arm -> (policies, simulate keyword arguments, speed oracle patched in)
ARMS = {"spottune": (POLICIES, {"provisioning": "spottune"}, False),
        "restart": (POLICIES, {"provisioning": "restart"}, False),
        "restart-failover": (POLICIES, {"provisioning": "restart-failover"}, False),
        "reference": (("spottune-0.7-hindsight",), {"provisioning": "spottune", "speed_model": "cores"}, True),
        # the reference's two parts, apart (``--gap``): true speeds with the estimated p, hindsight p with honest speeds
        "speeds": (("spottune-0.7",), {"provisioning": "spottune", "speed_model": "cores"}, True),
        "hindsight-p": (("spottune-0.7-hindsight",), {"provisioning": "spottune"}, False)}


#: The arms every other arm is compared with: spot-restart (each arm's ratio) and SkyPilot's failover (``... vs
#: restart-failover``), the same stopper in every arm.
BASES = ("restart", "restart-failover")


def _starts_from(path: Path) -> dict[tuple[str, str, str], str]:
    """(trace, workload, mode) -> the comma-separated starts of that cell's rows in an earlier run's JSON
    (``--starts-from``: a new arm on exactly the starts of the stored ones)."""
    cells: dict = {}
    for r in json.loads(path.read_text())["rows"]:
        cells.setdefault((r["trace"], r["workload"], r["market_mode"]), set()).add(r["start"])
    return {k: ",".join(sorted(v)) for k, v in cells.items()}


def _starts(trace: str, workload: str, mode: str, n: int, tuning: bool, indices: str = "") -> str:
    from spotmarket.prices import to_timestamp
    from spottune.evaluation import default_starts, tuning_starts
    from spottune.evaluation._runner import environment

    env = environment(workload, 0, mode, TRACES[trace], None)
    starts = default_starts(env["history"], env["markets"], n)
    if tuning:
        starts = tuning_starts(starts)
    if indices:  # a part of the starts (a run continued in pieces; --merge joins them)
        starts = [starts[int(i)] for i in indices.split(",")]
    return ",".join(to_timestamp(s).isoformat() for s in starts)


def run(args) -> dict:
    from spottune.cli._simulate import simulate_all

    if args.merge:  # rows of several runs (e.g. one arm each), summarised together
        parts = [json.loads(Path(f).read_text()) for f in args.merge.split(",")]
        rows = [r for part in parts for r in part["rows"]]
        arms = list(dict.fromkeys(a for part in parts for a in part["config"]["arms"]))
        cases = [c for part in parts for c in part["config"].get("cases", [])]
        earlier = [m for part in parts for m in part["config"].get("merged") or []]  # a merged file's own parts
        config = {**parts[0]["config"], "arms": arms, "cases": cases,
                  "merged": earlier + [Path(f).name for f in args.merge.split(",")]}
        summary = summarise(rows, arms)
        sel = {}
        if config.get("tuning"):
            sel = {"selection": select(summary, [c for part in parts for c in grid(
                part["config"]["margins"], part["config"].get("shrinks") or [0.5],
                part["config"].get("variants") or ["plain"], part["config"].get("probes") or [0])])}
        return {"config": config, "rows": rows, "summary": summary, **sel}
    cases = [tuple(c.split(":")) for c in args.cases.split(",")] if args.cases else list(CASES)
    pols = tuple(args.policies.split(","))
    if args.tuning:
        arms = {**{tuning_arm(*c): (POLICIES[:1], {"provisioning": "spottune"}, False, c)
                   for c in grid(args.margins, args.shrinks, args.variants, args.probes)},
                "restart": (POLICIES[:1], {"provisioning": "restart"}, False, None)}
        if "reference" in args.arms.split(","):  # the hindsight reference beside the grid (diagnosis)
            arms["reference"] = (*ARMS["reference"], None)
    else:
        arms = {a: (tuple(p for p in v[0] if p.replace("-hindsight", "") in pols), *v[1:], (None, None, None))
                for a, v in ARMS.items() if a in args.arms.split(",")}
    rows = []
    stored = _starts_from(args.starts_from) if args.starts_from else None
    for trace, workload, mode in cases:
        times = stored[(trace, workload, mode)] if stored else \
            _starts(trace, workload, mode, args.starts, args.tuning or args.gap, args.indices)
        for arm, (policies, kwargs, oracle, m) in arms.items():
            with tempfile.TemporaryDirectory() as d, (speed_oracle() if oracle else contextlib.nullcontext()), \
                    margin(*(m or (None, None, None))):
                table = simulate_all(workload, ",".join(policies), args.starts, mode, Path(d), jobs=args.jobs,
                                     progress=False, start_times=times, prices=TRACES[trace], **kwargs)
            rows += [{"trace": trace, "workload": workload, "market_mode": mode, "provisioning": arm,
                      "policy": r["policy"].replace("-hindsight", ""), "start": r["start"],
                      "error": r["error"] if isinstance(r["error"], str) else "",
                      **{k: float(r[k]) for k in METRICS}} for r in table.to_dict("records")]
            print(f"{trace} {workload} {mode} {arm}: done", file=sys.stderr, flush=True)
            args.out.with_suffix(".partial.json").write_text(json.dumps({"config": {"arms": list(arms)}, "rows": rows}))
    summary = summarise(rows, list(arms))
    return {"config": {"starts": args.starts, "tuning": args.tuning, "gap": args.gap, "cases": cases, "arms": list(arms), "policies": pols,
                       "starts_from": str(args.starts_from) if args.starts_from else None,
                       "jobs": args.jobs, "margins": list(args.margins) if args.tuning else None,
                       "shrinks": list(args.shrinks) if args.tuning else None,
                       "variants": list(args.variants) if args.tuning else None,
                       "probes": list(args.probes) if args.tuning else None, "indices": args.indices},
            "rows": rows, "summary": summary, **({"selection": select(
                summary, grid(args.margins, args.shrinks, args.variants, args.probes))} if args.tuning else {})}


def summarise(rows: list[dict], arms: list[str]) -> dict:
    """Per (trace, workload, mode, policy) and arm: the ratio of mean cost to restart's with a paired bootstrap
    interval over the starts, and the ratio of mean JCT; with a ``restart-failover`` arm also each other arm's ratio
    to it (key ``<arm> vs restart-failover``); ``pooled``: per arm and policy, the geometric mean of the cells' cost
    ratios with its interval (each cell's starts resampled together)."""
    import numpy as np

    from _common import bootstrap_interval

    cells: dict = {}
    for r in rows:
        cells.setdefault((r["trace"], r["workload"], r["market_mode"], r["policy"]), {}) \
            .setdefault(r["provisioning"], {})[r["start"]] = r
    out, logs = {}, {}
    # the pooled intervals against restart draw from one stream (as before the failover arm); every comparison that
    # involves the failover arm from another, so adding it moves no earlier figure
    rngs = {False: np.random.default_rng(0), True: np.random.default_rng(1)}
    for key, by_arm in cells.items():
        entry = {}
        comparisons = [(arm, arm, "restart") for arm in by_arm if arm != "restart"] + \
            [(f"{arm} vs restart-failover", arm, "restart-failover") for arm in by_arm if arm not in BASES]
        for label, arm, base_arm in comparisons:
            base, runs = by_arm.get(base_arm), by_arm[arm]
            if not base:
                continue
            common = sorted(set(runs) & set(base))
            pair = np.array([[runs[s]["cost_usd"], base[s]["cost_usd"], runs[s]["jct_h"], base[s]["jct_h"]]
                             for s in common if not runs[s]["error"] and not base[s]["error"]])
            if len(pair) == 0:
                continue
            ratio = pair[:, 0].mean() / pair[:, 1].mean()
            lo, hi = bootstrap_interval(pair[:, :2], lambda m: m[:, 0] / m[:, 1])
            entry[label] = {"n": len(pair), "base": base_arm, "cost_usd": pair[:, 0].mean(), "restart_cost_usd": pair[:, 1].mean(),
                          "cost_ratio": ratio, "cost_ratio_ci": [lo, hi], "jct_ratio": pair[:, 2].mean() / pair[:, 3].mean()}
            idx = rngs["restart-failover" in (arm, base_arm)].integers(0, len(pair), size=(2000, len(pair)))
            boot = pair[idx, 0].mean(axis=1) / pair[idx, 1].mean(axis=1)
            logs.setdefault((label, key[3]), []).append((np.log(ratio), np.log(boot)))
        if entry:
            out[" ".join(key)] = entry
    pooled = {}
    for (arm, policy), items in logs.items():
        point = float(np.exp(np.mean([a for a, _ in items])))
        boot = np.exp(np.mean([b for _, b in items], axis=0))
        lo, hi = np.percentile(boot, [2.5, 97.5])
        pooled[f"{arm} {policy}"] = {"cells": len(items), "cost_ratio": point, "cost_ratio_ci": [float(lo), float(hi)]}
    return {"cells": out, "pooled": pooled}


def markdown(r: dict) -> str:
    arms = list(dict.fromkeys(a for v in r["summary"]["cells"].values() for a in v))

    def head(a):
        base = "restart-failover" if a.endswith(" vs restart-failover") else "restart"
        return f"{a.removesuffix(' vs restart-failover')}: cost ÷ {base} [95 % CI], JCT ÷ {base} (starts)"

    lines = ["| trace, workload, mode, policy | " + " | ".join(head(a) for a in arms) + " |",
             "| --- |" + " --- |" * len(arms)]
    for key, v in r["summary"]["cells"].items():
        cells = [f"{v[a]['cost_ratio']:.2f} [{v[a]['cost_ratio_ci'][0]:.2f}, {v[a]['cost_ratio_ci'][1]:.2f}], "
                 f"{v[a]['jct_ratio']:.2f} ({v[a]['n']})" if a in v else "" for a in arms]
        lines.append(f"| {key} | {' | '.join(cells)} |")
    for key, v in r["summary"]["pooled"].items():
        lines.append(f"| pooled {key} ({v['cells']} cells) | {v['cost_ratio']:.2f} "
                     f"[{v['cost_ratio_ci'][0]:.2f}, {v['cost_ratio_ci'][1]:.2f}] |" + " |" * (len(arms) - 1))
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--starts", type=int, default=20, help="evaluation starts per cell (tuning: 2 (n - 1) between them)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--cases", default="", help="trace:workload:mode,... (default: all 12 cells)")
    ap.add_argument("--arms", default="spottune,restart,reference",
                    help=f"comma-separated, among {','.join(ARMS)}")
    ap.add_argument("--policies", default=",".join(POLICIES), help="policies of the evaluation arms")
    ap.add_argument("--indices", default="", help="comma-separated indices of the starts to run (default: all)")
    ap.add_argument("--starts-from", type=Path, default=None,
                    help="an earlier run's JSON: run each cell on exactly its starts (a new arm beside stored ones)")
    ap.add_argument("--merge", default="", help="comma-separated JSON files of earlier runs: summarise their rows")
    ap.add_argument("--margins", type=lambda t: tuple(float(x) for x in t.split(",")), default=MARGINS)
    ap.add_argument("--shrinks", type=lambda t: tuple(float(x) for x in t.split(",")), default=SHRINKS,
                    help="p shrinkages of the tuning grid (with --margins)")
    ap.add_argument("--probes", type=lambda t: tuple(int(x) for x in t.split(",")), default=(0,),
                    help="probe segments in flight of the tuning grid (decision R13; 0 = none)")
    ap.add_argument("--variants", type=lambda t: tuple(t.split(",")), default=VARIANTS[:1],
                    help="guard tests of the tuning grid: plain (the margin at p'), robust (also at w = 0 and 1)")
    ap.add_argument("--out", type=Path, default=None, help=f"default {OUT.name}, or provisioning_margin_tuning.json with --tuning")
    ap.add_argument("--tuning", action="store_true", help="the margins on the tuning starts (choose there)")
    ap.add_argument("--gap", action="store_true",
                    help="where the gap to the reference lies, on the tuning starts: arms spottune, restart, speeds "
                         "(true speeds), hindsight-p and reference -> provisioning_gap.json")
    ap.add_argument("--markdown", action="store_true", help="print the table from the JSON and exit")
    args = ap.parse_args(argv)
    args.out = args.out or (OUT.with_name("provisioning_margin_tuning.json") if args.tuning else
                            OUT.with_name("provisioning_gap.json") if args.gap else OUT)
    return run_or_print(args, run, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
