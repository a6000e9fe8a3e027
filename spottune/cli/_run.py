"""``spottune run`` and ``spottune report``: the main job, end to end (issue 6).

``spottune run`` with no arguments runs the default experiment, ``ExperimentSpec()``: workload
``digits-mlp`` (16 configs), the 15 markets of ``us-east-1_2015``, the RevPred predictor (trained on the
window before the start on first use, then cached), the simulator backend in legacy market mode,
θ = 0.7, top-k = 3, start 2015-05-05 00:00 UTC.

``--config FILE`` reads an experiment spec (YAML, :meth:`spottune.experiment.ExperimentSpec.from_yaml`;
example: ``examples/digits_mlp.yaml``), and flags given on the command line override it
(:meth:`~spottune.experiment.ExperimentSpec.with_overrides`): spec defaults < file < flags. The spec is
the one source of truth for defaults and validation; the options below only show its defaults.
``--output`` and ``--progress`` belong to the command, not to the experiment, so they are not spec keys.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import numpy as np

from spottune.errors import ConfigError
from spottune.experiment import ExperimentSpec

#: Options of ``spottune run`` that only steer the command (everything else is an ExperimentSpec field).
CLI_ONLY = ("config", "output", "progress")


def _default(name: str) -> str:
    """An ExperimentSpec default as ``--help`` shows it (the spec is the source; click's own default is None)."""
    if name == "start_utc":
        from spottune.experiment import DEFAULT_START_UTC

        return DEFAULT_START_UTC.strftime("%Y-%m-%dT%H:%MZ")
    f = {f.name: f for f in dataclasses.fields(ExperimentSpec)}[name]
    return str(f.default)


def _spec(ctx: click.Context, config: str | None) -> ExperimentSpec:
    """The experiment: spec defaults < the ``--config`` YAML file < flags given on the command line.

    Unset flags are None, which :meth:`ExperimentSpec.with_overrides` ignores.

    Raises
    ------
    ConfigError
        On an unreadable file, an unknown key or an invalid value (one line, exit code 2).
    """
    spec = ExperimentSpec.from_yaml(config) if config else ExperimentSpec()
    return spec.with_overrides(**{k: v for k, v in ctx.params.items() if k not in CLI_ONLY})


def spec_from_options(opts: Mapping[str, Any]) -> ExperimentSpec:
    """An ExperimentSpec from a dict of ``spottune run`` options (the old ``run_experiment(opts)`` form).

    CLI-only keys (``output``, ``progress``, ``config``) and None values are dropped; the rest are spec
    keys or their aliases (``start``, ``zones``, ``trainable``, ...).
    """
    return ExperimentSpec.from_dict({k: v for k, v in opts.items() if k not in CLI_ONLY and v is not None})


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


def _revpred(history: Any, markets: list, lo_s: float, hi_s: float, seed: int) -> tuple[Any, str]:
    """RevPred trained on ``[lo_s, hi_s]`` for ``markets``, cached by (data, markets, window, settings, code)."""
    from revpred.store import load_model_set, save_model_set
    from revpred.training import TrainConfig, train_markets
    from spottune.cache import LIGHT_REVPRED, model_set_dir

    config = TrainConfig(seed=seed, **LIGHT_REVPRED)
    path = model_set_dir("revpred", history, markets, lo_s, hi_s, config)
    desc = f"RevPred trained on {(hi_s - lo_s) / 86400:g} days before the start ({path})"
    from revpred.store import INDEX

    if (path / INDEX).exists():
        try:
            return load_model_set(path, history, markets).predictor("revpred"), desc + ", cached"
        except Exception as exc:  # a stale or partial cache is retrained  # noqa: BLE001
            logging.getLogger(__name__).warning("cached RevPred models in %s are unusable (%s: %s); retraining",
                                                path, type(exc).__name__, exc)
    click.echo(f"training RevPred for {len(markets)} markets (cached afterwards in {path}) ...", err=True)
    model_set = train_markets(history, markets, lo_s, hi_s, config, kinds=("revpred",))
    save_model_set(path, model_set)
    return model_set.predictor("revpred"), desc


def run_experiment(spec: ExperimentSpec | Mapping[str, Any], progress: Any = None, *,
                   output: str | Path | None = None) -> dict[str, Any]:
    """Build every part from the experiment spec, run its backend, return what ``spottune.results`` needs.

    Parameters
    ----------
    spec : ExperimentSpec or mapping
        The experiment; a mapping of ``spottune run`` options is read with :func:`spec_from_options`.
    progress : callable (now_s, orchestrator, usd) -> None, optional
        Called after every delivered event.
    output : str or Path, optional
        The run's results folder. The local backend keeps its checkpoints (when ``storage_path`` is
        None) in ``<output>/checkpoints/`` and its worker logs in ``<output>/workers/``; without
        ``output`` a new temporary folder is used (and left for inspection).

    Returns
    -------
    dict
        ``orchestrator``, ``record`` (RunRecord), ``curves`` (TrainableCurves; None for the local
        backend), ``spec``, ``opts`` (``spec.to_dict()``), ``workload``, ``configs``, ``predictor_desc``.

    Raises
    ------
    ConfigError
        On an invalid spec or a backend this build cannot run (``aws``).
    """
    from earlycurve import EarlyCurve, is_plateau
    from provisioner import InstanceCatalog, Pool, Provisioner
    from spotmarket.prices import load_history, to_seconds
    from spotmarket import Billing, LegacyBidRevocation, ModernHazardRevocation
    from spottune.orchestrator import Orchestrator, OrchestratorConfig

    if not isinstance(spec, ExperimentSpec):
        spec = spec_from_options(spec)
    if spec.backend not in ("sim", "local"):
        raise ConfigError(f"backend is {spec.backend!r}, but this build runs only sim and local")
    seed = spec.seed
    workload = spec.get_workload()
    history = load_history(spec.prices)
    start_s = to_seconds(spec.start)
    catalog = InstanceCatalog.load()
    pool = Pool(instance_types=spec.instance_types, availability_zones=spec.availability_zones)
    markets = pool.resolve(history, catalog)
    _check_start(history, markets, start_s, spec.train_days)
    predictor, predictor_desc = _predictor(spec.predictor, history, markets, start_s, spec.train_days, seed)
    provisioner = Provisioner(history, catalog, predictor, pool, np.random.default_rng(seed))
    trials = spec.trials()
    trial_ids = [t.trial_id for t in trials]
    orch = Orchestrator(
        trial_ids,
        OrchestratorConfig(max_steps=spec.max_steps, theta=spec.theta, top_k=spec.top_k, metric=spec.metric,
                           mode=spec.mode, max_failures=spec.max_failures),
        provisioner,
        predictor=EarlyCurve(spec.max_steps),
        plateau_rule=lambda steps, values, smax: is_plateau(steps, values, smax),
    )
    if spec.market_mode == "legacy":
        revocations = LegacyBidRevocation(history)
    else:
        revocations = ModernHazardRevocation(None, seed, history=history)

    def facts(instance_type: str) -> tuple[int, float | None]:
        it = catalog[instance_type]
        return it.vcpus, it.ecu

    parts = (orch, history, revocations, Billing(spec.billing))
    curves = None
    if spec.backend == "sim":
        from spottune.backends import SimBackend, SimSettings, TrainableCurves

        # make_trainable passes the spec's max_steps, so LR schedules scale with --max-steps
        curves = TrainableCurves({t.trial_id: (lambda t=t: spec.make_trainable(t)) for t in trials})
        backend: Any = SimBackend(*parts, curves, facts, start_s,
                                  SimSettings(boot_s=spec.boot_s, step_time_cov=spec.step_time_cov, seed=seed),
                                  progress=progress)
    else:
        backend = _local_backend(spec, output, parts, trials, facts, start_s, progress)
    if hasattr(progress, "attach"):  # a spottune.results.ResultsJournal: results are written as the run goes
        progress.attach(backend.record, {t.trial_id: t.config for t in trials})
    record = backend.run()
    record.meta.update(workload=workload.name, market_mode=spec.market_mode, predictor=predictor_desc,
                       theta=orch.config.theta, top_k=orch.config.top_k, max_steps=spec.max_steps, seed=seed,
                       start=spec.start.isoformat(), start_s=start_s, markets=[str(m) for m in markets],
                       metric=spec.metric, mode=spec.mode, n_trials=len(trials), spec=spec.to_dict())
    return {"orchestrator": orch, "record": record, "curves": curves, "spec": spec, "opts": spec.to_dict(),
            "workload": workload, "configs": {t.trial_id: t.config for t in trials},
            "predictor_desc": predictor_desc}


def _check_start(history: Any, markets: list, start_s: float, train_days: float) -> None:
    """The start must leave ``train_days`` of price history of every pool market before it, inside the history.

    Raises
    ------
    ConfigError
        Naming the start and the recorded range.
    """
    from spotmarket.prices import to_timestamp

    first = max(history[m].start_s for m in markets)
    lo, hi = first + train_days * 86400.0, history.end_s
    if not lo <= start_s < hi:
        raise ConfigError(
            f"start is {to_timestamp(start_s)}, but must lie in [{to_timestamp(lo)}, {to_timestamp(hi)}): every "
            f"pool market has prices from {to_timestamp(first)} to {to_timestamp(hi)}, and RevPred trains on the "
            f"{train_days:g} days before the start"
        )


def store_url(spec: ExperimentSpec, folder: str | Path) -> str:
    """Where the local backend's workers checkpoint: ``storage_path``, or ``<folder>/checkpoints``.

    A plain folder is made absolute (the workers are separate processes); URLs (``s3://``,
    ``file://``) are used as they are, with ``spec.storage_options``.
    """
    path = spec.storage_path
    if path is None:
        return str((Path(folder) / "checkpoints").resolve())
    return path if "://" in path else str(Path(path).expanduser().resolve())


def _local_backend(spec: ExperimentSpec, output: str | Path | None, parts: tuple, trials: list, facts: Any,
                   start_s: float, progress: Any) -> Any:
    """The local backend of ``spec``: checkpoints and worker logs under ``output`` (or a new temp folder)."""
    import tempfile

    from spottune.backends import LocalBackend, LocalSettings

    folder = Path(output) if output is not None else Path(tempfile.mkdtemp(prefix="spottune-run-"))
    settings = LocalSettings(store_url=store_url(spec, folder), storage_options=dict(spec.storage_options),
                             time_scale=spec.time_scale, max_steps=spec.max_steps, checkpoint_keep=spec.checkpoint_keep,
                             log_dir=str(folder / "workers"))
    return LocalBackend(*parts, spec.workload, {t.trial_id: (t.config, t.seed) for t in trials}, facts, start_s,
                        settings, progress=progress)


class _Bar:
    """tqdm bar over planned steps, with simulated time, trial states and dollars so far."""

    def __init__(self, total_steps: int, start_s: float, enabled: bool):
        self.total_steps, self.enabled = total_steps, enabled
        self.bar: Any = None  # drawn at the first report, so set-up errors print alone
        self.start_s = start_s
        self.done = 0
        self.calls = 0

    def __call__(self, now_s: float, orch: Any, usd: float) -> None:
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=self.total_steps, unit="step", disable=not self.enabled, dynamic_ncols=True)
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
        if self.bar is not None:
            self.bar.close()


@click.command("run", help="Tune a workload on (simulated) spot capacity: Algorithm 1 of SpotTune end to end. "
               "Options come from the experiment spec: its defaults < --config FILE < flags.")
@click.option("--config", type=click.Path(exists=True, dir_okay=False),
              help="Experiment spec, YAML (keys: the spec's fields, e.g. examples/digits_mlp.yaml); flags override it.")
@click.option("--workload", default=None, show_default=_default("workload"),
              help="Built-in workload or 'module:Class'.")
@click.option("--num-samples", type=int, default=None,
              help="Repetitions of the search space (default: the workload's).")
@click.option("--theta", type=float, default=None, show_default=_default("theta"),
              help="Early-shutdown rate θ in (0, 1].")
@click.option("--top-k", "top_k", type=int, default=None, show_default=_default("top_k"), help="Models to keep.")
@click.option("--max-steps", type=int, default=None, help="S_max (default: the workload's).")
@click.option("--prices", default=None, show_default=_default("prices"), help="Price file path or dataset name.")
@click.option("--start", default=None, show_default=_default("start_utc"), help="Simulation start, UTC (a time without a zone, e.g. 2015-05-05, is read as UTC, as AWS reports).")
@click.option("--instance-types", default=None, help="Comma-separated instance types (default: all in the prices).")
@click.option("--zones", default=None, help="Comma-separated availability zones (default: all).")
@click.option("--backend", type=click.Choice(["sim", "local"]), default=None, show_default=_default("backend"),
              help="sim: virtual clock; local: real worker processes on an accelerated wall clock.")
@click.option("--market-mode", type=click.Choice(["legacy", "modern"]), default=None,
              show_default=_default("market_mode"),
              help="legacy: 2017 price > max-price revocations; modern: capacity hazard model.")
@click.option("--predictor", type=click.Choice(["revpred", "constant", "none"]), default=None,
              show_default=_default("predictor"), help="Revocation predictor for Eq 1.")
@click.option("--train-days", type=float, default=None, show_default=_default("train_days"),
              help="Predictor training window before --start, days.")
@click.option("--seed", type=int, default=None, show_default=_default("seed"))
@click.option("--max-failures", type=int, default=None, show_default=_default("max_failures"))
@click.option("--boot-s", type=float, default=None, show_default=_default("boot_s"),
              help="Instance boot latency, seconds (D11; sim backend).")
@click.option("--step-time-cov", type=float, default=None, show_default=_default("step_time_cov"),
              help="Step-time noise (COV; sim backend).")
@click.option("--billing", type=click.Choice(["second", "hour"]), default=None, show_default=_default("billing"))
@click.option("--storage-path", default=None,
              help="Local backend's checkpoint store: a folder or s3://bucket/prefix (default: OUTPUT/checkpoints).")
@click.option("--time-scale", type=float, default=None, show_default=_default("time_scale"),
              help="Local backend: simulated seconds per wall-clock second.")
@click.option("--output", type=click.Path(file_okay=False), default=None, help="Results folder (default results/<timestamp>/).")
@click.option("--progress/--no-progress", default=True, show_default=True)
@click.pass_context
def run(ctx: click.Context, config: str | None, output: str | None, progress: bool, **_: Any) -> None:
    from spotmarket.prices import to_seconds
    from spottune.errors import BackendError
    from spottune.report import render_report
    from spottune.results import ResultsJournal, no_trial_finished, prepare_output, write_results

    spec = _spec(ctx, config)  # validated at once, before any loading
    out = prepare_output(output or Path("results") / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ"))
    n, k = spec.n_trials, min(spec.top_k, spec.n_trials)
    planned = n * spec.theta_steps + k * (spec.max_steps - spec.theta_steps)
    bar = _Bar(planned, to_seconds(spec.start), progress)
    journal = ResultsJournal(out, progress=bar)
    try:
        result = run_experiment(spec, progress=journal, output=out)
    finally:
        bar.close()
        journal.close()
    write_results(out, result)
    click.echo(render_report(out, plots=True))
    click.echo(f"results: {out}")
    failure = no_trial_finished(result["orchestrator"])
    if failure:
        raise BackendError(f"{failure}; results so far are in {out}")


@click.command("report", help="Re-render the results table and plots of a results folder.")
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option("--plots/--no-plots", default=True, show_default=True)
def report(directory: str, plots: bool) -> None:
    from spottune.report import render_report

    click.echo(render_report(Path(directory), plots=plots))
