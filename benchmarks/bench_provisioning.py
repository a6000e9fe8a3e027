"""What SpotTune's provisioner buys, with the stopper held fixed: ``spottune-0.7`` and ``spottune-1.0`` under
SpotTune's provisioning and under spot-restart's (``spottune simulate --provisioning spottune|restart``) ->
``benchmarks/results/provisioning.json``.

Issue 12 compares SpotTune with baselines that also differ in early stopping (single-spot and spot-restart train
every trial to S_max), so a cost ratio there mixes the provisioner's effect with θ's. Here only the provisioning
differs: the same policy, study, starts and seeds, run once with the default provisioning (the refund objective's
market and max price, the ``auto`` predictor, hourly hops) and once with spot-restart's (the cheapest market at each
launch, max price = on-demand, no hop, relaunch after a revocation). At θ = 1 the restart-provisioned run is the
``spot-restart`` baseline itself.

A third arm, ``speed-oracle`` (``spottune-0.7`` only), is a diagnosis, not a policy: SpotTune's provisioning with its
performance matrix told the simulator's own speed ratios between instance types (``spottune.backends._speed``)
instead of the spec's cores rule (``T[h][i] = κ_h / cores_i``, SpotTune §1.4, which assumes that speed grows linearly
with vCPUs). A trial's measured cells are kept; its unmeasured ones follow its measured ones by the true ratios. It
bounds what a better speed prior could save; no deployable provisioner knows these ratios in advance.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_provisioning.py [--starts 10] [--jobs 2]`` (about 10 min on
two cores); ``--markdown`` prints the table from the JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, run_or_print  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "provisioning.json"
#: (workload, market mode): issue 12's workloads and modes
CASES = (("digits-mlp", "legacy"), ("opda-alexnet", "legacy"), ("gbt", "legacy"), ("digits-mlp", "modern"),
         ("opda-alexnet", "modern"), ("gbt", "modern"))
POLICIES = ("spottune-0.7", "spottune-1.0")
METRICS = ("cost_usd", "jct_h", "refunded_share", "top3", "instances", "hops", "revocations")


@contextlib.contextmanager
def speed_oracle():
    """Patch :class:`provisioner.PerformanceMatrix` so that its unmeasured cells follow the simulator's speed model
    (module docstring; a diagnosis). Worker processes forked inside the block inherit the patch."""
    import numpy as np

    from provisioner import InstanceCatalog, PerformanceMatrix
    from spottune.backends._speed import seconds_per_step

    catalog = InstanceCatalog.load()
    prior, rescale = PerformanceMatrix._prior, PerformanceMatrix._rescale

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
    try:
        yield
    finally:
        PerformanceMatrix._prior, PerformanceMatrix._rescale = prior, rescale


def run(args) -> dict:
    from spottune.cli._simulate import simulate_all

    rows = []
    for workload, mode in CASES:
        for provisioning in ("spottune", "restart", "speed-oracle"):
            oracle = provisioning == "speed-oracle"
            with tempfile.TemporaryDirectory() as d, (speed_oracle() if oracle else contextlib.nullcontext()):
                table = simulate_all(workload, POLICIES[0] if oracle else ",".join(POLICIES), args.starts, mode,
                                     Path(d), jobs=args.jobs, progress=False,
                                     provisioning="spottune" if oracle else provisioning)
            rows += [{"workload": workload, "market_mode": mode, "provisioning": provisioning, "policy": r["policy"],
                      "start": r["start"], "error": r["error"] if isinstance(r["error"], str) else "",
                      **{m: float(r[m]) for m in METRICS}} for r in table.to_dict("records")]
            print(f"{workload} {mode} {provisioning}: done", file=sys.stderr, flush=True)
    summary = {}
    for workload, mode in CASES:
        for policy in POLICIES:
            mean = {}
            for provisioning in ("spottune", "restart", "speed-oracle"):
                rs = [r for r in rows if (r["workload"], r["market_mode"], r["provisioning"], r["policy"])
                      == (workload, mode, provisioning, policy)]
                if not rs:
                    continue
                mean[provisioning] = {"n": len(rs), "errors": sum(bool(r["error"]) for r in rs),
                                      **{m: sum(r[m] for r in rs) / len(rs) for m in METRICS}}
            s, r = mean["spottune"], mean["restart"]
            summary[f"{workload} {mode} {policy}"] = {**mean, "cost_ratio": s["cost_usd"] / r["cost_usd"],
                                                      "jct_ratio": s["jct_h"] / r["jct_h"]}
            if "speed-oracle" in mean:
                o = mean["speed-oracle"]
                summary[f"{workload} {mode} {policy}"].update(oracle_cost_ratio=o["cost_usd"] / r["cost_usd"],
                                                              oracle_jct_ratio=o["jct_h"] / r["jct_h"])
    return {"config": {"starts": args.starts, "cases": CASES, "policies": POLICIES, "jobs": args.jobs},
            "rows": rows, "summary": summary}


def markdown(r: dict) -> str:
    lines = ["| workload, mode, policy | SpotTune provisioning: USD / JCT h / refunded | spot-restart's: USD / JCT h "
             "| USD ratio | JCT ratio | speed oracle: USD / JCT h / refunded | its USD ratio | its JCT ratio |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for key, v in r["summary"].items():
        s, p, o = v["spottune"], v["restart"], v.get("speed-oracle")
        oracle = (f"{o['cost_usd']:.3f} / {o['jct_h']:.2f} / {o['refunded_share']:.0%} | {v['oracle_cost_ratio']:.2f} | "
                  f"{v['oracle_jct_ratio']:.2f}") if o else "| |"
        lines.append(f"| {key} | {s['cost_usd']:.3f} / {s['jct_h']:.2f} / {s['refunded_share']:.0%} | "
                     f"{p['cost_usd']:.3f} / {p['jct_h']:.2f} | {v['cost_ratio']:.2f} | {v['jct_ratio']:.2f} | {oracle} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--starts", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--markdown", action="store_true", help="print the table from the JSON and exit")
    return run_or_print(ap.parse_args(argv), run, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
