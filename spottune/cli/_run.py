"""``spottune run`` and ``spottune report``: the main job, end to end (issue 6).

``spottune run`` with no arguments runs the default experiment: workload ``digits-mlp`` (16 configs),
the 15 markets of ``us-east-1_2015``, the RevPred predictor (trained on the window before the start on
first use, then cached), the simulator backend in legacy market mode, θ = 0.7, top-k = 3, start
2015-05-05 00:00 UTC. Options may also come from a YAML file (``--config``; keys are the long option
names with ``_``), and flags given on the command line override it.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import numpy as np

from spottune.errors import ConfigError

DEFAULTS: dict[str, Any] = {
    "workload": "digits-mlp", "theta": 0.7, "top_k": 3, "max_steps": None, "prices": None,
    "start": "2015-05-05T00:00Z", "instance_types": None, "zones": None, "backend": "sim",
    "market_mode": "legacy", "predictor": "revpred", "train_days": 4.0, "seed": 0, "max_failures": 2,
    "boot_s": 0.0, "step_time_cov": 0.05, "billing": "second", "output": None, "progress": True,
}


def _options(ctx: click.Context, config: str | None) -> dict[str, Any]:
    """Defaults < YAML file < flags given on the command line."""
    opts = dict(DEFAULTS)
    if config:
        import yaml

        try:
            data = yaml.safe_load(Path(config).read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"--config {config}: {exc}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"--config {config}: must be a mapping of option names to values")
        for key, value in data.items():
            key = str(key).replace("-", "_")
            if key not in DEFAULTS:
                raise ConfigError(f"--config {config}: unknown option {key!r} (known: {', '.join(sorted(DEFAULTS))})")
            opts[key] = value
    for key, value in ctx.params.items():
        if key in DEFAULTS and ctx.get_parameter_source(key) is click.core.ParameterSource.COMMANDLINE:
            opts[key] = value
    for key in ("instance_types", "zones"):
        if isinstance(opts[key], str):
            opts[key] = [v.strip() for v in opts[key].split(",") if v.strip()]
    return opts


def _predictor(kind: str, history: Any, markets: list, start_s: float, train_days: float, seed: int) -> tuple[Any, str]:
    """The revocation predictor for Eq 1, and a one-line description."""
    from revpred.baselines import ConstantHazard
    from revpred.protocol import ConstantRevocation

    if kind == "none":
        return ConstantRevocation(0.0), "p = 0 (no revocation prediction)"
    note = ""
    if kind == "revpred":
        try:
            return _revpred(history, markets, start_s - train_days * 86400.0, start_s, seed)
        except ImportError as exc:  # RevPred's training or store not importable in this build
            kind, note = "constant", f"RevPred unavailable ({exc}); "
    if kind != "constant":
        raise ConfigError(f"--predictor is {kind!r}, but must be revpred, constant or none")
    # constant hazard fitted on the window before the start: share of hours whose price rose above
    # b = price + 0.1 USD/h (the mean of D1's U[0.00001, 0.2]) within the hour, per market
    rates = {}
    lo = start_s - train_days * 86400.0
    for m in markets:
        s = history[m]
        t = np.arange(max(lo, s.start_s), start_s - 3600.0, 600.0)
        if t.size == 0:
            rates[m] = 0.0
            continue
        b = np.asarray(s.price_at(t)) + 0.1
        rates[m] = float(np.mean(np.asarray(s.next_above(t, b)) <= t + 3600.0))
    desc = f"{note}constant hazard per market fitted on {train_days:g} days before the start"
    return ConstantHazard.from_rates(rates), desc


#: The default run trains a lighter RevPred than ``revpred train`` (spec §1.7 sizes: stride 1-5 min,
#: LSTM 3x64) to meet the 8-minute ``make run`` budget on 2 cores: 10-minute stride, hidden 32, 4 epochs.
RUN_REVPRED = {"stride_min": 10, "epochs": 4, "hidden_size": 32, "validation_days": 0.5, "n_threads": 1}


def cache_dir() -> Path:
    """``$SPOTTUNE_CACHE`` or ``~/.cache/spottune``."""
    import os

    return Path(os.environ.get("SPOTTUNE_CACHE") or Path.home() / ".cache" / "spottune")


def _revpred(history: Any, markets: list, lo_s: float, hi_s: float, seed: int) -> tuple[Any, str]:
    """RevPred trained on ``[lo_s, hi_s]`` for ``markets``, cached by (data, markets, window, settings)."""
    import hashlib
    import json

    from revpred.store import load_model_set, save_model_set
    from revpred.training import TrainConfig, train_markets

    config = TrainConfig(seed=seed, **RUN_REVPRED)
    first = {str(m): [float(history[m].times_s[0]), float(history[m].times_s[-1]), len(history[m])] for m in markets}
    key = hashlib.sha256(json.dumps([first, lo_s, hi_s, config.to_dict()], sort_keys=True, default=str).encode())
    path = cache_dir() / "revpred" / key.hexdigest()[:16]
    desc = f"RevPred trained on {(hi_s - lo_s) / 86400:g} days before the start ({path})"
    from revpred.store import INDEX

    if (path / INDEX).exists():
        try:
            return load_model_set(path, history, markets).predictor("revpred"), desc + ", cached"
        except Exception:  # a stale or partial cache is retrained  # noqa: BLE001
            pass
    click.echo(f"training RevPred for {len(markets)} markets (cached afterwards in {path}) ...", err=True)
    model_set = train_markets(history, markets, lo_s, hi_s, config, kinds=("revpred",))
    save_model_set(path, model_set)
    return model_set.predictor("revpred"), desc


def run_experiment(opts: dict[str, Any], progress: Any = None) -> dict[str, Any]:
    """Build every part from the options, run the backend, return what ``spottune.results`` needs.

    Returns
    -------
    dict
        ``orchestrator``, ``record`` (RunRecord), ``curves``, ``opts``, ``workload``, ``configs``,
        ``predictor_desc``.
    """
    from earlycurve import EarlyCurve, is_plateau
    from provisioner import InstanceCatalog, Pool, Provisioner
    from revpred.prices import load_history, to_seconds
    from spottune.backends import SimBackend, SimSettings, TrainableCurves
    from spottune.market import Billing, LegacyBidRevocation, ModernHazardRevocation
    from spottune.orchestrator import Orchestrator, OrchestratorConfig
    from spottune.trainable import trial_seed
    from spottune.workloads import get_workload

    if opts["backend"] != "sim":
        raise ConfigError(f"--backend {opts['backend']!r} is not available in this build; use --backend sim")
    if opts["market_mode"] not in ("legacy", "modern"):
        raise ConfigError(f"--market-mode is {opts['market_mode']!r}, but must be legacy or modern")
    seed = int(opts["seed"])
    workload = get_workload(opts["workload"])
    max_steps = int(opts["max_steps"] or workload.max_steps)
    history = load_history(opts["prices"])
    start_s = to_seconds(opts["start"])
    catalog = InstanceCatalog.load()
    pool = Pool(instance_types=opts["instance_types"], availability_zones=opts["zones"])
    markets = pool.resolve(history, catalog)
    predictor, predictor_desc = _predictor(opts["predictor"], history, markets, start_s, float(opts["train_days"]), seed)
    provisioner = Provisioner(history, catalog, predictor, pool, np.random.default_rng(seed))
    configs = workload.configs(seed)
    trial_ids = [f"t{i:02d}" for i in range(len(configs))]
    orch = Orchestrator(
        trial_ids,
        OrchestratorConfig(max_steps=max_steps, theta=float(opts["theta"]), top_k=int(opts["top_k"]),
                           metric=workload.metric, mode=workload.mode, max_failures=int(opts["max_failures"])),
        provisioner,
        predictor=EarlyCurve(max_steps),
        plateau_rule=lambda steps, values, smax: is_plateau(steps, values, smax),
    )
    curves = TrainableCurves({t: (lambda c=c, i=i: workload.make(c, seed=trial_seed(seed, i)))
                              for i, (t, c) in enumerate(zip(trial_ids, configs))})
    if opts["market_mode"] == "legacy":
        revocations = LegacyBidRevocation(history)
    else:
        revocations = ModernHazardRevocation(None, seed, history=history)

    def facts(instance_type: str) -> tuple[int, float | None]:
        spec = catalog[instance_type]
        return spec.vcpus, spec.ecu

    backend = SimBackend(orch, history, revocations, Billing(opts["billing"]), curves, facts, start_s,
                         SimSettings(boot_s=float(opts["boot_s"]), step_time_cov=float(opts["step_time_cov"]), seed=seed),
                         progress=progress)
    record = backend.run()
    record.meta.update(workload=workload.name, market_mode=opts["market_mode"], predictor=predictor_desc,
                       theta=orch.config.theta, top_k=orch.config.top_k, max_steps=max_steps, seed=seed,
                       start=str(opts["start"]), start_s=start_s, markets=[str(m) for m in markets], metric=workload.metric,
                       mode=workload.mode)
    return {"orchestrator": orch, "record": record, "curves": curves, "opts": opts, "workload": workload,
            "configs": dict(zip(trial_ids, configs)), "predictor_desc": predictor_desc}


class _Bar:
    """tqdm bar over planned steps, with simulated time, trial states and dollars so far."""

    def __init__(self, total_steps: int, start_s: float, enabled: bool):
        from tqdm import tqdm

        self.bar = tqdm(total=total_steps, unit="step", disable=not enabled, dynamic_ncols=True)
        self.start_s = start_s
        self.done = 0
        self.calls = 0

    def __call__(self, now_s: float, orch: Any, usd: float) -> None:
        self.calls += 1
        steps = sum(tr.step for tr in orch.trials.values())
        if steps != self.done:
            self.bar.update(max(0, steps - self.done))
            self.done = steps
        if self.calls % 50 == 0 or orch.done:
            from spottune.orchestrator import TrialState as S

            c = orch.counts()
            self.bar.set_postfix_str(
                f"sim {(now_s - self.start_s) / 3600:5.1f} h | run {c[S.RUNNING] + c[S.CHECKPOINTING] + c[S.LAUNCHING]}"
                f" paused {c[S.PAUSED_AT_THETA]} done {c[S.FINISHED] + c[S.STOPPED_EARLY] + c[S.FAILED]} | ${usd:.3f}",
                refresh=False)

    def close(self) -> None:
        self.bar.close()


@click.command("run", help="Tune a workload on (simulated) spot capacity: Algorithm 1 of SpotTune end to end.")
@click.option("--config", type=click.Path(exists=True, dir_okay=False), help="YAML file of options (flags override).")
@click.option("--workload", default=DEFAULTS["workload"], show_default=True, help="Built-in workload name.")
@click.option("--theta", type=float, default=DEFAULTS["theta"], show_default=True, help="Early-shutdown rate θ in (0, 1].")
@click.option("--top-k", "top_k", type=int, default=DEFAULTS["top_k"], show_default=True, help="Models to keep.")
@click.option("--max-steps", type=int, default=None, help="S_max (default: the workload's).")
@click.option("--prices", default=None, help="Price file path or name (default: us-east-1_2015.csv.gz).")
@click.option("--start", default=DEFAULTS["start"], show_default=True, help="Simulation start, UTC.")
@click.option("--instance-types", default=None, help="Comma-separated instance types (default: all in the prices).")
@click.option("--zones", default=None, help="Comma-separated availability zones (default: all).")
@click.option("--backend", type=click.Choice(["sim", "local"]), default="sim", show_default=True)
@click.option("--market-mode", type=click.Choice(["legacy", "modern"]), default="legacy", show_default=True,
              help="legacy: 2017 price > max-price revocations; modern: capacity hazard model.")
@click.option("--predictor", type=click.Choice(["revpred", "constant", "none"]), default="revpred", show_default=True,
              help="Revocation predictor for Eq 1.")
@click.option("--train-days", type=float, default=DEFAULTS["train_days"], show_default=True,
              help="Predictor training window before --start, days.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--max-failures", type=int, default=DEFAULTS["max_failures"], show_default=True)
@click.option("--boot-s", type=float, default=0.0, show_default=True, help="Instance boot latency, seconds (D11).")
@click.option("--step-time-cov", type=float, default=0.05, show_default=True, help="Step-time noise (COV).")
@click.option("--billing", type=click.Choice(["second", "hour"]), default="second", show_default=True)
@click.option("--output", type=click.Path(file_okay=False), default=None, help="Results folder (default results/<timestamp>/).")
@click.option("--progress/--no-progress", default=True, show_default=True)
@click.pass_context
def run(ctx: click.Context, config: str | None, **_: Any) -> None:
    from spottune.report import render_report
    from spottune.results import write_results

    opts = _options(ctx, config)
    from spottune.orchestrator import OrchestratorConfig

    OrchestratorConfig(max_steps=int(opts["max_steps"] or 1), theta=float(opts["theta"]), top_k=int(opts["top_k"]),
                       max_failures=int(opts["max_failures"]))  # checked at once, before any loading
    out = Path(opts["output"] or Path("results") / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ"))
    from spottune.workloads import get_workload

    wl = get_workload(opts["workload"])
    max_steps = int(opts["max_steps"] or wl.max_steps)
    theta, k, n = float(opts["theta"]), int(opts["top_k"]), wl.n_configs()
    planned = n * math.ceil(theta * max_steps) + min(k, n) * (max_steps - math.ceil(theta * max_steps))
    from revpred.prices import to_seconds

    bar = _Bar(planned, to_seconds(opts["start"]), bool(opts["progress"]))
    try:
        result = run_experiment(opts, progress=bar)
    finally:
        bar.close()
    write_results(out, result)
    click.echo(render_report(out, plots=True))
    click.echo(f"results: {out}")


@click.command("report", help="Re-render the results table and plots of a results folder.")
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option("--plots/--no-plots", default=True, show_default=True)
def report(directory: str, plots: bool) -> None:
    from spottune.report import render_report

    click.echo(render_report(Path(directory), plots=plots))
