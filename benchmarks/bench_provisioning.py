"""What SpotTune's provisioner buys, with the stopper held fixed: ``spottune-0.7`` and ``spottune-1.0`` under
SpotTune's provisioning and under spot-restart's (``spottune simulate --provisioning spottune|restart``) ->
``benchmarks/results/provisioning.json``; and what its speed model buys (``--speed-model pooled|cores``).

The refund-aware provisioning work compares SpotTune with baselines that also differ in early stopping (single-spot and spot-restart train
every trial to S_max), so a cost ratio there mixes the provisioner's effect with θ's. Here only the provisioning
differs: the same policy, study, starts and seeds, run once with the default provisioning (the refund objective's
market and max price, the ``auto`` predictor, hourly hops) and once with spot-restart's (the cheapest market at each
launch, max price = on-demand, no hop, relaunch after a revocation). At θ = 1 the restart-provisioned run is the
``spot-restart`` baseline itself.

The arm ``cores`` (``spottune-0.7`` only) is SpotTune's provisioning with the spec's speed model (``--speed-model cores``:
each trial's row is ``κ_h / cores_i`` until measured, and rescaled from its own measured cells only) instead of the
default ``pooled`` one (:class:`provisioner.PooledSpeedMatrix`: speed ratios between types learned from all trials;
design R9).

The arm ``speed-oracle`` (``spottune-0.7`` only) is a diagnosis, not a policy: SpotTune's provisioning with its
performance matrix told the simulator's own speed ratios between instance types (``spottune.speed``)
instead of the paper's cores rule (``T[h][i] = κ_h / cores_i``, which assumes that speed grows linearly
with vCPUs). A trial's measured cells are kept; its unmeasured ones follow its measured ones by the true ratios. It
bounds what a better speed prior could save; no deployable provisioner knows these ratios in advance.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_provisioning.py [--starts 10] [--jobs 2]`` (about 13 min on
two cores); ``--markdown`` prints the table from the JSON. ``--tuning`` runs ``spottune``, ``cores`` and ``speed-oracle``
on the tuning starts between the evaluation ones (:func:`spottune.evaluation.tuning_starts`, 18 for 10) of three cases
-> ``provisioning_tuning.json``: the default speed model was chosen there.
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
#: (workload, market mode): The refund-aware provisioning work's workloads and modes
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
    from spottune.speed import seconds_per_step

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


#: arm -> (policies, simulate keyword arguments, speed oracle patched in)
ARMS = {"spottune": (POLICIES, {"provisioning": "spottune"}, False),
        "cores": (POLICIES[:1], {"provisioning": "spottune", "speed_model": "cores"}, False),
        "restart": (POLICIES, {"provisioning": "restart"}, False),
        "speed-oracle": (POLICIES[:1], {"provisioning": "spottune", "speed_model": "cores"}, True)}
TUNING_CASES = (("digits-mlp", "legacy"), ("opda-alexnet", "legacy"), ("digits-mlp", "modern"))
TUNING_ARMS = ("spottune", "cores", "speed-oracle")


def run(args) -> dict:
    from spotmarket.prices import to_timestamp
    from spottune.cli._simulate import simulate_all
    from spottune.evaluation import default_starts, tuning_starts
    from spottune.evaluation._runner import environment

    cases, arms = (TUNING_CASES, TUNING_ARMS) if args.tuning else (CASES, tuple(ARMS))
    rows = []
    for workload, mode in cases:
        times = None
        if args.tuning:
            env = environment(workload, 0, mode, None, None)
            starts = tuning_starts(default_starts(env["history"], env["markets"], args.starts))
            times = ",".join(to_timestamp(s).isoformat() for s in starts)
        for arm in arms:
            policies, kwargs, oracle = ARMS[arm]
            policies = POLICIES[:1] if args.tuning else policies
            with tempfile.TemporaryDirectory() as d, (speed_oracle() if oracle else contextlib.nullcontext()):
                table = simulate_all(workload, ",".join(policies), args.starts, mode, Path(d), jobs=args.jobs,
                                     progress=False, start_times=times, **kwargs)
            rows += [{"workload": workload, "market_mode": mode, "provisioning": arm, "policy": r["policy"],
                      "start": r["start"], "error": r["error"] if isinstance(r["error"], str) else "",
                      **{m: float(r[m]) for m in METRICS}} for r in table.to_dict("records")]
            print(f"{workload} {mode} {arm}: done", file=sys.stderr, flush=True)
    summary = {}
    for workload, mode in cases:
        for policy in POLICIES:
            mean = {}
            for arm in arms:
                rs = [r for r in rows if (r["workload"], r["market_mode"], r["provisioning"], r["policy"])
                      == (workload, mode, arm, policy)]
                if rs:
                    mean[arm] = {"n": len(rs), "errors": sum(bool(r["error"]) for r in rs),
                                 **{m: sum(r[m] for r in rs) / len(rs) for m in METRICS}}
            if len(mean) < len(arms) - 2:  # spottune-1.0 has only the spottune and restart arms
                continue
            base = mean["restart" if "restart" in mean else "cores"]  # on tuning starts: against the spec's model
            summary[f"{workload} {mode} {policy}"] = {
                **mean, **{f"{arm}_cost_ratio": m["cost_usd"] / base["cost_usd"] for arm, m in mean.items()},
                **{f"{arm}_jct_ratio": m["jct_h"] / base["jct_h"] for arm, m in mean.items()}}
    return {"config": {"starts": args.starts, "tuning": args.tuning, "cases": cases, "arms": arms,
                       "ratios_against": "cores" if args.tuning else "restart", "jobs": args.jobs},
            "rows": rows, "summary": summary}


def markdown(r: dict) -> str:
    arms, base = r["config"]["arms"], r["config"]["ratios_against"]
    lines = [f"| workload, mode, policy | {' | '.join(arms)} |", "| --- |" + " --- |" * len(arms),
             f"| (USD / JCT h / refunded share; USD and JCT ÷ {base}'s) |" + " |" * len(arms)]
    for key, v in r["summary"].items():
        cells = [f"{v[a]['cost_usd']:.3f} / {v[a]['jct_h']:.2f} / {v[a]['refunded_share']:.0%} "
                 f"({v[a + '_cost_ratio']:.2f}, {v[a + '_jct_ratio']:.2f})" if a in v else "" for a in arms]
        lines.append(f"| {key} | {' | '.join(cells)} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--starts", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None, help=f"default {OUT.name}, or provisioning_tuning.json with --tuning")
    ap.add_argument("--tuning", action="store_true", help="the speed-model arms on the tuning starts (choose there)")
    ap.add_argument("--markdown", action="store_true", help="print the table from the JSON and exit")
    args = ap.parse_args(argv)
    args.out = args.out or (OUT.with_name("provisioning_tuning.json") if args.tuning else OUT)
    return run_or_print(args, run, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
