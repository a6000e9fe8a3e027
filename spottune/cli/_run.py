"""``spottune run`` and ``spottune report``: the main job, end to end.

``spottune run`` with no arguments runs the default experiment, ``ExperimentSpec()``: workload
``digits-mlp`` (16 configs), the 15 markets of ``us-east-1_2015``, the RevPred predictor (trained on the
window before the start on first use, then cached), the simulator backend in legacy market mode,
θ = 0.7, top-k = 3, start 2015-05-05 00:00 UTC.

``--config FILE`` reads an experiment spec (YAML, :meth:`spottune.experiment.ExperimentSpec.from_yaml`;
example: ``examples/digits_mlp.yaml``), and flags given on the command line override it
(:meth:`~spottune.experiment.ExperimentSpec.with_overrides`): spec defaults < file < flags. The spec is
the one source of truth for defaults and validation; the options below only show its defaults.
``--output`` and ``--progress`` belong to the command, not to the experiment, so they are not spec keys.

``spottune resume DIR`` continues a killed run from the journal in ``DIR`` (:mod:`spottune.journal`);
``spottune run`` refuses a folder that already holds a run and points to it.

This module only parses options and prints: the run itself is :func:`spottune.tune` (which writes the
results folder), built by the composition root :mod:`spottune.compose`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from spottune.experiment import OBJECTIVES, PREDICTORS, PROVISIONINGS, SEARCHES, SPEED_MODELS, STOPPERS, ExperimentSpec

#: Options of ``spottune run`` that only steer the command (everything else is an ExperimentSpec field).
CLI_ONLY = ("config", "output", "progress", "dry_run", "ray_address")


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
    spec = spec.with_overrides(**{k: v for k, v in ctx.params.items() if k not in CLI_ONLY})
    address = ctx.params.get("ray_address")
    if address is not None:  # --ray-address is the spec's ray.address
        spec = spec.with_overrides(ray={**spec.ray, "address": address})
    return spec


def spec_from_options(opts: Mapping[str, Any]) -> ExperimentSpec:
    """An ExperimentSpec from a dict of ``spottune run`` options (the old ``run_experiment(opts)`` form).

    CLI-only keys (``output``, ``progress``, ``config``) and None values are dropped; the rest are spec
    keys or their aliases (``start``, ``zones``, ``trainable``, ...).
    """
    return ExperimentSpec.from_dict({k: v for k, v in opts.items() if k not in CLI_ONLY and v is not None})


def run_experiment(spec: ExperimentSpec | Mapping[str, Any], progress: Any = None, *,
                   output: str | Path | None = None) -> dict[str, Any]:
    """Build the experiment with the composition root and run it (:func:`spottune.compose.run`).

    Parameters
    ----------
    spec : ExperimentSpec or mapping
        The experiment; a mapping of ``spottune run`` options is read with :func:`spec_from_options`.
    progress : callable (now_s, orchestrator, usd) -> None, optional
        Called after every delivered event.
    output : str or Path, optional
        The run's results folder (the local backend's checkpoints and worker logs go below it).

    Returns
    -------
    dict
        What :func:`spottune.results.write_results` reads (see :meth:`spottune.compose.Experiment.run`).

    Raises
    ------
    ConfigError
        On an invalid spec or a backend this build cannot run (``aws``).
    """
    from spottune.compose import run as run_spec

    if not isinstance(spec, ExperimentSpec):
        spec = spec_from_options(spec)
    return run_spec(spec, progress=progress, output=output, log_fn=lambda s: click.echo(s, err=True))


@click.command("run", help="Tune a workload on (simulated) spot capacity: Algorithm 1 of SpotTune end to end. "
               "Options come from the experiment spec: its defaults < --config FILE < flags.")
@click.option("--config", type=click.Path(exists=True, dir_okay=False),
              help="Experiment spec, YAML (keys: the spec's fields, e.g. examples/digits_mlp.yaml); flags override it.")
@click.option("--workload", default=None, show_default=_default("workload"),
              help="Built-in workload or 'module:Class'.")
@click.option("--num-samples", type=int, default=None,
              help="Repetitions of the search space (default: the workload's).")
@click.option("--search", type=click.Choice(list(SEARCHES)), default=None, show_default=_default("search"),
              help="random or grid (the same: every configuration of the search space runs) or gp-ucb: those "
                   "configurations are candidates, --trial-budget of them run one after another, each picked by "
                   "cost-aware GP-UCB from the results so far (decision SV13).")
@click.option("--trial-budget", type=int, default=None,
              help="With --search gp-ucb (required there): how many of the candidate configurations run.")
@click.option("--theta", type=float, default=None, show_default=_default("theta"),
              help="Early-shutdown rate θ in (0, 1].")
@click.option("--top-k", "top_k", type=int, default=None, show_default=_default("top_k"), help="Models to keep.")
@click.option("--max-steps", type=int, default=None, help="S_max (default: the workload's).")
@click.option("--prices", default=None, show_default=_default("prices"), help="Price file path or dataset name.")
@click.option("--start", default=None, show_default=_default("start_utc"), help="Simulation start, UTC (a time without a zone, e.g. 2015-05-05, is read as UTC, as AWS reports).")
@click.option("--instance-types", default=None, help="Comma-separated instance types (default: all in the prices).")
@click.option("--zones", default=None, help="Comma-separated availability zones (default: all).")
@click.option("--backend", type=click.Choice(["sim", "local", "aws", "ray"]), default=None,
              show_default=_default("backend"),
              help="sim: virtual clock; local: real worker processes on an accelerated wall clock; "
                   "aws: EC2 spot instances (docs/guide/aws.md); ray: actors on the spot nodes of a Ray cluster (docs/guide/ray.md).")
@click.option("--ray-address", default=None,
              help="Ray backend: the cluster, 'auto' (this machine's, from `ray start`) or HOST:PORT of the head "
                   "(spec key ray.address; default auto).")
@click.option("--market-mode", type=click.Choice(["legacy", "modern"]), default=None,
              show_default=_default("market_mode"),
              help="legacy: 2017 price > max-price revocations; modern: capacity hazard model.")
@click.option("--predictor", type=click.Choice(list(PREDICTORS)), default=None,
              show_default=_default("predictor"), help="Revocation predictor for Eq 1.")
@click.option("--train-days", type=float, default=None, show_default=_default("train_days"),
              help="Predictor training window before --start, days.")
@click.option("--seed", type=int, default=None, show_default=_default("seed"))
@click.option("--max-failures", type=int, default=None, show_default=_default("max_failures"))
@click.option("--max-concurrent-trials", type=int, default=None,
              help="At most N trials hold an instance or are launching at once; the others wait in trial order and "
                   "launch when a trial ends, is stopped or pauses at a barrier (Ray Tune's max_concurrent_trials; "
                   "design D14) [default: every trial at once].")
@click.option("--objective", type=click.Choice(list(OBJECTIVES)), default=None, show_default=_default("objective"),
              help="refund: market and max price by expected USD per useful step over the horizon; paper: Eq 2.")
@click.option("--provisioning", type=click.Choice(list(PROVISIONINGS)), default=None,
              show_default=_default("provisioning"),
              help="spottune: spot-restart's choice unless another market or max price beats it by a margin, no hourly "
                   "hop (design R12); refund-hop: the objective's choice, re-chosen every hour; restart: cheapest market "
                   "at each launch, max price = on-demand; restart-failover: the same, failing over to the next "
                   "market after a capacity refusal.")
@click.option("--time-value-usd-per-hour", type=float, default=None, show_default=_default("time_value_usd_per_hour"),
              help="refund objective: value of a trial's wall-clock hour, USD per trial-hour (minimises (USD + value x "
                   "hours) per useful step; 0 = dollars only).")
@click.option("--job-time-value-usd-per-hour", type=float, default=None,
              show_default=_default("job_time_value_usd_per_hour"),
              help="refund objective: value of the job's wall-clock hour, USD per job-hour, shared by the trials still "
                   "heading to the same stop (each pays value / their number per hour; design R11; 0 = off).")
@click.option("--speed-model", type=click.Choice(list(SPEED_MODELS)), default=None, show_default=_default("speed_model"),
              help="refund objective: speed on instance types a trial has not run on; pooled: speed ratios learned from "
                   "all trials (design R9); cores: the spec's kappa / cores per trial.")
@click.option("--stopper", type=click.Choice(list(STOPPERS)), default=None, show_default=_default("stopper"),
              help="predictive: predictive ASHA at rungs before θ (re-judged every step, optimistic bound), then the "
                   "last value's top-k at θ; rank: stop trials at rungs before θ when unlikely to end in the top-k, then the last value's "
                   "top-k at θ; barrier: no rungs, the last value's top-k at θ (choose θ 0.1-0.2 and --top-k on tuning "
                   "studies, docs/design/earlycurve.md §8.10); hparams: barrier (and --rungs) ranked at every barrier by the final loss "
                   "predicted from each trial's hyperparameters and curve, learned from --stopper-curves (docs/design/earlycurve.md "
                   "§8.19); paper: EarlyCurve at θ only (the published SpotTune). Default barrier (design ES18).")
@click.option("--predictive-options", default=None,
              help="With --stopper predictive: the rule's settings as a JSON object instead of the shipped defaults, "
                   "e.g. '{\"fractions\": [0.1, 0.3, 0.5], \"keep\": 0.25}' (keys fractions, keep_first, keep, slope, "
                   "bound_k, bound_quantile, guard, retro; choose them on tuning studies, docs/design/earlycurve.md §8.15).")
@click.option("--stopper-curves", type=click.Path(exists=True, dir_okay=False), default=None,
              help="With --stopper rank, predictive or barrier: a curve file of finished runs of this workload; the top-k at θ "
                   "is then ranked by a predictor learned from them (earlycurve.ResidualCurvePredictor) instead of the "
                   "last value. Required with --stopper hparams, and then it must record each run's hyperparameters "
                   "(opda JSON lines, or columns beside config_id, step, value, max_steps of a long CSV).")
@click.option("--rungs", default=None,
              help="With --stopper barrier or hparams: synchronous barriers before θ, comma-separated fraction:keep pairs (e.g. "
                   "0.06:6): every trial trains to 6 % of S_max and waits, the 6 lowest last values go on to θ, where "
                   "--top-k continue. Choose them with `spottune curves choose --two-rung` (docs/design/earlycurve.md §8.12).")
@click.option("--boot-s", type=float, default=None, show_default=_default("boot_s"),
              help="Launch-to-training latency, seconds (D11; sim backend; 0 = the paper's faithful mode).")
@click.option("--step-time-cov", type=float, default=None, show_default=_default("step_time_cov"),
              help="Step-time noise (COV; sim backend).")
@click.option("--billing", type=click.Choice(["second", "hour"]), default=None, show_default=_default("billing"))
@click.option("--storage-path", default=None,
              help="Local backend's checkpoint store: a folder or s3://bucket/prefix (default: OUTPUT/checkpoints).")
@click.option("--time-scale", type=float, default=None, show_default=_default("time_scale"),
              help="Local backend: simulated seconds per wall-clock second.")
@click.option("--max-usd-per-hour", type=float, default=None,
              help="AWS backend: cap on the sum of the live instances' max prices, USD/hour, checked before every launch.")
@click.option("--budget-usd", type=float, default=None,
              help="Cap on USD billed plus accrued, checked before every launch; with --deadline, the plan's budget.")
@click.option("--deadline", default=None,
              help="Finish within this long of the start ('6h', '90min', seconds); with --budget-usd the run is "
                   "planned first (SEER) and an infeasible request refused.")
@click.option("--deadline-mode", default=None, show_default=_default("deadline_mode"),
              help="With --deadline and --budget-usd: 'plan' executes the printed cost-lean plan (the cheapest that "
                   "meets the deadline within the budget), 'seer' SEER's printed brackets (both wall-clock rounds, "
                   "elimination by EarlyCurve's prediction; sim backend only), 'guard' runs Algorithm 1 under "
                   "the budget cap and the deadline guard (the plan is only printed).")
@click.option("--on-demand-prices", type=click.Path(dir_okay=False), default=None,
              help="A CSV of on-demand prices (instance_type, region, os, on_demand_price_usd_per_hour; USD per "
                   "instance-hour) that wins over the bundled tables (data/spot_prices/on_demand_*.csv) and, in a live "
                   "aws run, over the AWS Price List API.")
@click.option("--dry-run", is_flag=True, default=False,
              help="Print the first launches (markets, max prices, hourly cost bound), or with --deadline and "
                   "--budget-usd the plan, and launch nothing.")
@click.option("--output", type=click.Path(file_okay=False), default=None, help="Results folder (default results/<timestamp>/).")
@click.option("--progress/--no-progress", default=True, show_default=True)
@click.pass_context
def run(ctx: click.Context, config: str | None, output: str | None, progress: bool, **_: Any) -> None:
    from spottune.api import default_output, tune
    from spottune.errors import BackendError
    from spottune.report import render_report
    from spottune.results import no_trial_finished

    spec = _spec(ctx, config)  # validated at once, before any loading
    if spec.deadline is not None and spec.budget_usd is not None:
        from spottune.compose import check_supported, plan_spec

        check_supported(spec)  # an executed plan on a backend other than sim: refused before the plan is printed

        click.echo(plan_spec(spec).render(mode=spec.deadline_mode))  # refused here (exit 2) if infeasible
        if ctx.params.get("dry_run"):
            return
    if ctx.params.get("dry_run"):
        from spottune.compose import dry_run

        click.echo(dry_run(spec, log_fn=lambda s: click.echo(s, err=True)))
        return
    out = Path(output) if output else default_output()
    grid = tune(spec, output=out, progress=progress)
    click.echo(render_report(out, plots=True))
    click.echo(f"results: {out}")
    failure = no_trial_finished(grid.get_dataframe())
    if failure and not grid.summary.get("budget_exhausted"):  # a budget stop keeps the best trials so far (DB5)
        raise BackendError(f"{failure}; results so far are in {out}")


@click.command("resume", help="Continue a killed run from the journal in its results folder (journal.jsonl): "
               "replay it (every action checked), reconcile the backend, go on to the end.")
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option("--progress/--no-progress", default=True, show_default=True)
def resume(directory: str, progress: bool) -> None:
    from spottune.api import tune
    from spottune.errors import BackendError
    from spottune.report import render_report
    from spottune.results import no_trial_finished

    out = Path(directory)
    grid = tune(resume=out, progress=progress)
    click.echo(render_report(out, plots=True))
    click.echo(f"results: {out}")
    failure = no_trial_finished(grid.get_dataframe())
    if failure and not grid.summary.get("budget_exhausted"):  # a budget stop keeps the best trials so far (DB5)
        raise BackendError(f"{failure}; results so far are in {out}")


@click.command("report", help="Re-render the results table and plots of a results folder.")
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option("--plots/--no-plots", default=True, show_default=True)
def report(directory: str, plots: bool) -> None:
    from spottune.report import render_report

    click.echo(render_report(Path(directory), plots=plots))
