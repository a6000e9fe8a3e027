"""``spottune simulate``: every policy on identical replays of one workload, over many starts.

Writes ``<output>/table.csv`` and ``table.json`` (one tidy row per policy × start, columns
``spottune.evaluation.COLUMNS``), ``summary.csv`` (mean and sd over starts) and ``meta.json`` (the
command, tasks and wall times). Runs go to ``--jobs`` worker processes; predictors are trained (or read
from the cache) and the study's curves computed (or read) once, before the workers start.
"""

from __future__ import annotations

import json
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import click

from spottune.errors import ConfigError
from spottune.compose import PROVISIONINGS
from spottune.experiment import (DEFAULT_JOB_TIME_VALUE_USD_PER_HOUR, DEFAULT_STOPPER, OBJECTIVES, SPEED_MODELS, STOPPERS, check_predictive_rungs,
                                 parse_predictive_options)


def _starts(history: Any, markets: list, n: int, explicit: str | None) -> list[float]:
    from spotmarket.prices import to_seconds
    from spottune.evaluation import default_starts

    if explicit:
        return [float(to_seconds(s.strip())) for s in explicit.split(",") if s.strip()]
    return default_starts(history, markets, n)


def _names(text: str | None) -> tuple[str, ...] | None:
    names = tuple(n.strip() for n in (text or "").split(",") if n.strip())
    return names or None


def simulate_all(workload: str, policies: str, starts: int, market_mode: str, output: Path, *, seed: int = 0,
                 theta_sweep: bool = False, jobs: int = 1, start_times: str | None = None,
                 max_steps: int | None = None, prices: str | None = None, progress: bool = True,
                 instance_types: str | None = None, zones: str | None = None, objective: str = "refund",
                 boot_s: float | None = None, stopper: str = DEFAULT_STOPPER, rungs: Any = None, top_k: int = 3,
                 deadline: Any = None,
                 budget_usd: float | None = None, deadline_rule: str = "slack",
                 time_value_usd_per_hour: float = 0.0, provisioning: str = "spottune",
                 speed_model: str = "pooled", predictive_options: Any = None,
                 job_time_value_usd_per_hour: float = DEFAULT_JOB_TIME_VALUE_USD_PER_HOUR,
                 max_concurrent_trials: int | None = None) -> Any:
    """Run every (policy, start, market mode) combination and write the table; returns the DataFrame.

    Parameters
    ----------
    workload : str
        Built-in workload or recorded study (``spottune.evaluation.list_studies()``).
    policies : str
        Comma-separated policy names; ``default`` and ``theta-sweep`` expand to lists.
    starts : int
        Number of start times spread over the price history (ignored with ``start_times``).
    market_mode : {"legacy", "modern", "both"}
    output : Path
    seed : int
    theta_sweep : bool
        Add SpotTune θ = 0.1 … 1.0 (RevPred).
    jobs : int
        Worker processes (1 = in this process).
    start_times : str, optional
        Comma-separated UTC start times instead of spread ones.
    max_steps : int, optional
        S_max override (small runs).
    prices : str, optional
        Price file (default: the 2015 us-east-1 trace).
    instance_types, zones : str, optional
        Comma-separated instance types and availability zones of the pool (default: every one in the
        prices that the instance catalog knows).
    objective : {"refund", "paper"}
        Objective of the SpotTune policies named without an objective suffix (``spottune-0.7-paper`` and
        ``spottune-0.7-refund`` name it).
    boot_s : float, optional
        Launch-to-training latency of every launch, every policy, seconds (default
        :data:`spottune.speed.DEFAULT_BOOT_S`; 0 = the paper's faithful mode).
    stopper : {"paper", "rank", "predictive", "barrier", "hparams"}
        Early stopping of the SpotTune policies: the θ barrier with the last value (default), EarlyCurve at θ,
        the rank-confidence rule or predictive ASHA (both with the last value's top-k at θ), or ``hparams``: the θ
        barrier and its rungs ranked by the final loss predicted from each trial's hyperparameters and curve, learned
        from the study's previous runs (the recorded curves it did not sample; docs/design/earlycurve.md §8.19).
    rungs : str or sequence of (float, int), optional
        With stopper ``barrier`` or ``hparams``: synchronous barriers before θ of the SpotTune policies (``"0.06:6"``;
        :func:`spottune.orchestrator.check_rungs`).
    top_k : int, default 3
        Models every run keeps: the top-k at θ of the SpotTune policies (``top3`` is whether the best of them is
        among the true top 3).
    deadline : str or float, optional
        Deadline after each start (``6h``, ``90min`` or seconds): SpotTune policies run under
        :class:`spottune.planning.DeadlineGuard`, the SEER family (``seer``, ``seer-predictive``, ``seer-lean``,
        ``e-hyperband``, ``e-grid``) plans for it; the table's ``deadline_met``.
    budget_usd : float, optional
        Budget of every run, USD: the sim backend's hard cap for every policy; the SEER family plans for it.
    deadline_rule : {"slack", "uniform"}
        The deadline guard's rule.
    time_value_usd_per_hour : float, default 0
        Value of a trial's wall-clock hour in the ``refund`` objective of the SpotTune policies, USD per
        trial-hour (0 = dollars only; docs/design/decisions.md, R7).
    job_time_value_usd_per_hour : float, default :data:`spottune.experiment.DEFAULT_JOB_TIME_VALUE_USD_PER_HOUR`
        Value of the job's wall-clock hour in the same objective, USD per job-hour, shared by the trials heading to
        the same stop (R11; 0 = off).
    provisioning : {"spottune", "refund-hop", "restart", "restart-failover"}, default "spottune"
        Provisioning of the SpotTune and Optuna policies: the SpotTune provisioner (spot-restart's choice unless another
        beats it by the margin, no hop; design R12), the unguarded refund objective with hourly hops,
        spot-restart's (cheapest market at each launch, max price = on-demand, no hop), which compares stoppers on a
        provisioning that does not depend on when a trial will stop, or spot-restart-failover's (the same with
        SkyPilot's failover after a capacity refusal; :func:`spottune.evaluation.get_policy`).
    speed_model : {"pooled", "cores"}, default "pooled"
        The refund objective's performance matrix (``spottune.experiment.SPEED_MODELS``, design R9).
    predictive_options : mapping or str, optional
        With stopper ``predictive``: the rule's settings instead of the shipped defaults, a mapping or JSON object
        text (:func:`spottune.experiment.parse_predictive_options`); refused with another stopper.
    max_concurrent_trials : int, optional
        At most this many trials of every policy hold an instance or are launching at once; the others wait in trial
        order and launch when a trial ends, is stopped or pauses at a barrier (Ray Tune's ``max_concurrent_trials``;
        design D14). None: every trial at once. Refused for the SEER family (their plans set their parallelism).

    Raises
    ------
    ConfigError
        On bad input (one line), e.g. a SEER-family policy without both a deadline and a budget.
    """
    from tqdm import tqdm

    from spottune.evaluation import Task, make_table, parse_policies, summarise
    from spottune.evaluation._predictors import LEARNED, ensure_model_set
    from spottune.evaluation._runner import TRAIN_DAYS, environment, run_task
    from spottune.evaluation._studies import is_study, list_studies, study_shape

    if not is_study(workload):
        raise ConfigError(f"--workload is {workload!r}, but must be one of {', '.join(list_studies())} "
                          "(a recorded study may name its size, opda-alexnet:64, and a half of its curves, "
                          "opda-alexnet@test)")
    modes = ["legacy", "modern"] if market_mode == "both" else [market_mode]
    for m in modes:
        if m not in ("legacy", "modern"):
            raise ConfigError(f"--market-mode is {market_mode!r}, but must be legacy, modern or both")
    if jobs < 1:
        raise ConfigError(f"--jobs is {jobs}, but must be >= 1")
    from spottune.speed import DEFAULT_BOOT_S

    boot = DEFAULT_BOOT_S if boot_s is None else float(boot_s)
    from spottune.experiment import MAX_BOOT_S

    if not 0 <= boot < MAX_BOOT_S:
        raise ConfigError(f"--boot-s is {boot_s}, but must be a number of seconds with 0 <= boot_s < {MAX_BOOT_S:g} "
                          "(an instance is relaunched every hour, so a longer boot never trains a step)")
    if not (math.isfinite(time_value_usd_per_hour) and time_value_usd_per_hour >= 0):
        raise ConfigError(f"--time-value-usd-per-hour is {time_value_usd_per_hour}, but must be a finite number of "
                          "USD per trial-hour >= 0")
    if not (math.isfinite(job_time_value_usd_per_hour) and job_time_value_usd_per_hour >= 0):
        raise ConfigError(f"--job-time-value-usd-per-hour is {job_time_value_usd_per_hour}, but must be a finite "
                          "number of USD per job-hour >= 0")
    if speed_model not in SPEED_MODELS:
        raise ConfigError(f"--speed-model is {speed_model!r}, but must be one of {', '.join(SPEED_MODELS)}")
    options = parse_predictive_options(predictive_options, stopper)  # refused up front with another stopper
    if max_concurrent_trials is not None and not (isinstance(max_concurrent_trials, int) and max_concurrent_trials >= 1):
        raise ConfigError(f"--max-concurrent-trials is {max_concurrent_trials!r}, but must be an integer >= 1")
    pols = parse_policies(policies + (",theta-sweep" if theta_sweep else ""), objective, stopper, rungs, provisioning,
                          options, max_concurrent_trials)
    from spottune.planning import DEADLINE_RULES, parse_duration

    deadline_s = None if deadline is None else parse_duration(deadline)
    if deadline_s is not None and provisioning in ("restart", "restart-failover"):
        raise ConfigError(f"--deadline needs --provisioning spottune or refund-hop, not {provisioning!r} (the deadline guard works "
                          "through SpotTune's provisioner)")
    if budget_usd is not None and not budget_usd > 0:
        raise ConfigError(f"--budget-usd is {budget_usd:g}, but must be > 0")
    if deadline_rule not in DEADLINE_RULES:
        raise ConfigError(f"--deadline-rule is {deadline_rule!r}, but must be one of {', '.join(DEADLINE_RULES)}")
    elastic = [p.name for p in pols if p.schedule is not None]
    if elastic and (deadline_s is None or budget_usd is None):
        raise ConfigError(f"policies {', '.join(elastic)} need --deadline and --budget-usd")
    from spottune.orchestrator import check_rungs

    # the settings against the study before a built-in workload's curves are trained
    n_trials, s_max = study_shape(workload, seed, max_steps)
    if not 1 <= top_k <= n_trials:
        raise ConfigError(f"--top-k is {top_k}, but must be between 1 and the study's {n_trials} trials")
    for p in pols:
        if p.rungs:
            check_rungs(p.rungs, p.theta, top_k, s_max)
        try:
            check_predictive_rungs(p.predictive_options, p.theta, s_max)
        except ConfigError as e:
            raise ConfigError(f"policy {p.name}: {e}") from None
        if p.pruner_settings and p.pruner_settings[0] >= s_max:
            raise ConfigError(f"policy {p.name}: min_resource {p.pruner_settings[0]} must be below the study's "
                              f"{s_max} steps (else nothing is pruned)")
    types_, zones_ = _names(instance_types), _names(zones)
    env = environment(workload, seed, modes[0], prices, max_steps, types_, zones_)  # loads curves (training them once)
    if any(p.stopper == "hparams" and p.theta < 1 for p in pols) and not env["study"].extra.get("previous_runs"):
        raise ConfigError(f"--stopper hparams learns from previous runs of the search space, and {workload!r} has none "
                          "(the opda and builtin-* random-search studies have them)")
    seeded = [p.name for p in pols if p.seeded]
    if seeded and not env["study"].extra.get("previous_runs"):
        raise ConfigError(f"policies {', '.join(seeded)} start from previous runs of the search space, and "
                          f"{workload!r} has none (the opda and builtin-* random-search studies have them)")
    env["catalog"].check_on_demand(env["markets"])  # the baselines need it: fail now, not after training
    starts_s = _starts(env["history"], env["markets"], starts, start_times)
    hi = min(starts_s)
    lo = hi - TRAIN_DAYS * 86400.0
    if any(p.uses_predictor and p.predictor in LEARNED for p in pols):
        ensure_model_set(env["market"], lo, hi, seed, log=lambda s: click.echo(s, err=True))
    tasks = [Task(workload=workload, policy=p.name, start_index=i, start_s=s, market_mode=m, seed=seed,
                  train_lo_s=lo, train_hi_s=hi, prices=prices, max_steps=max_steps, instance_types=types_, zones=zones_,
                  objective=objective, boot_s=boot, stopper=stopper, rungs=rungs, top_k=top_k, deadline_s=deadline_s, budget_usd=budget_usd,
                  deadline_rule=deadline_rule, time_value_usd_per_hour=float(time_value_usd_per_hour),
                  job_time_value_usd_per_hour=float(job_time_value_usd_per_hour),
                  provisioning=provisioning, speed_model=speed_model, predictive_options=options,
                  max_concurrent_trials=max_concurrent_trials)
             for m in modes for i, s in enumerate(starts_s) for p in pols]
    rows, walls = [None] * len(tasks), [0.0] * len(tasks)
    t0 = time.perf_counter()
    bar = tqdm(total=len(tasks), unit="run", disable=not progress, dynamic_ncols=True, file=sys.stderr)
    if jobs == 1:
        for k, task in enumerate(tasks):
            rows[k], walls[k] = run_task(task)
            bar.update(1)
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(run_task, task): k for k, task in enumerate(tasks)}
            for fut in as_completed(futures):
                k = futures[fut]
                rows[k], walls[k] = fut.result()
                bar.update(1)
    bar.close()
    wall = time.perf_counter() - t0
    table = make_table(rows)
    output.mkdir(parents=True, exist_ok=True)
    table.to_csv(output / "table.csv", index=False)
    (output / "table.json").write_text(table.to_json(orient="records", indent=1) + "\n")
    summarise(table).to_csv(output / "summary.csv", index=False)
    meta = {"argv": sys.argv, "workload": workload, "policies": [p.name for p in pols], "market_modes": modes,
            "starts": sorted(set(table["start"])), "seed": seed, "objective": objective, "boot_s": boot, "stopper": stopper, "rungs": rungs, "predictive_options": options, "top_k": top_k,
            "time_value_usd_per_hour": time_value_usd_per_hour,
            "job_time_value_usd_per_hour": job_time_value_usd_per_hour, "provisioning": provisioning,
            "speed_model": speed_model, "max_concurrent_trials": max_concurrent_trials,
            "policy_objectives": {p.name: p.objective for p in pols if p.uses_predictor},
            "deadline_s": deadline_s, "budget_usd": budget_usd, "deadline_rule": deadline_rule,
            "jobs": jobs, "runs": len(tasks), "wall_s": wall, "run_wall_s": walls,
            "predictor_training_window_s": [lo, hi], "study": env["study"].source, "max_steps": env["study"].max_steps}
    (output / "meta.json").write_text(json.dumps(meta, indent=1, default=str) + "\n")
    return table


@click.command("simulate", help="Compare policies (SpotTune, single-spot, on-demand, spot-restart, Optuna pruners, "
                                "SEER family with --deadline and --budget-usd) on identical spot-market replays; "
                                "writes a tidy table.")
@click.option("--workload", default="digits-mlp", show_default=True,
              help="Built-in workload or recorded study (opda-alexnet, opda-convnext, cakelab-resnet32, and the "
                   "random-search built-ins builtin-digits-mlp, builtin-logreg, builtin-linear-svm; with a size, "
                   "opda-alexnet:64: that many configurations sampled, default 16; with a half, opda-alexnet@tuning "
                   "or opda-alexnet@test: sampled from that half of its curves only, so tuning and test studies "
                   "share no configuration).")
@click.option("--policies", default="default", show_default=True,
              help="Comma-separated policy names, or 'default' / 'theta-sweep'.")
@click.option("--starts", type=click.IntRange(min=1), default=10, show_default=True,
              help="Start times spread over the trace.")
@click.option("--start-times", default=None,
              help="Comma-separated UTC start times (instead of --starts); a time without a zone is read as UTC.")
@click.option("--market-mode", type=click.Choice(["legacy", "modern", "both"]), default="legacy", show_default=True)
@click.option("--output", type=click.Path(file_okay=False), required=True, help="Output folder.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--theta-sweep", is_flag=True, help="Add SpotTune θ = 0.1 … 1.0 (paper Fig 8).")
@click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True, help="Worker processes.")
@click.option("--max-steps", type=click.IntRange(min=1), default=None, help="S_max override (small runs), >= 1.")
@click.option("--prices", default=None, help="Price file (default: us-east-1_2015).")
@click.option("--instance-types", default=None,
              help="Comma-separated instance types (default: every type in the prices that the catalog knows).")
@click.option("--zones", default=None, help="Comma-separated availability zones (default: all in the prices).")
@click.option("--objective", type=click.Choice(list(OBJECTIVES)), default=OBJECTIVES[0], show_default=True,
              help="Objective of SpotTune policies named without one (spottune-0.7-paper names it): refund = market "
                   "and max price by expected USD per useful step; paper = Eq 2 with the D1 max price.")
@click.option("--boot-s", type=click.FloatRange(min=0), default=None,
              help="Launch-to-training latency of every launch, seconds [default: 120; 0 = the paper's faithful mode].")
@click.option("--time-value-usd-per-hour", type=float, default=0.0, show_default=True,
              help="Value of a trial's wall-clock hour in the refund objective, USD per trial-hour: it minimises "
                   "(USD + value x hours) per useful step, so faster markets win when a refund saves less than the "
                   "time costs (0 = dollars only).")
@click.option("--job-time-value-usd-per-hour", type=float, default=DEFAULT_JOB_TIME_VALUE_USD_PER_HOUR,
              show_default=True,
              help="Value of the job's wall-clock hour in the refund objective, USD per job-hour, shared by the trials "
                   "still heading to the same stop: each pays value / their number per hour (design R11; 0 = off).")
@click.option("--stopper", type=click.Choice(list(STOPPERS)), default=DEFAULT_STOPPER, show_default=True,
              help="Early stopping of the SpotTune policies: predictive = predictive ASHA at rungs before θ "
                   "(re-judged every step, optimistic bound), then the last value's top-k at θ; rank = stop at "
                   "rungs before θ when unlikely to end in the top-k, then the last value's top-k at θ; barrier = "
                   "no rungs, the last value's top-k at θ (the default, design ES18); hparams = barrier ranked at every "
                   "barrier by the final loss learned from the study's previous runs (their hyperparameters and "
                   "curves; opda and built-in random-search studies); paper = EarlyCurve at θ (as published; "
                   "always the stopper of the spottune-<θ>-...-paper policies, the paper's design).")
@click.option("--rungs", default=None,
              help="With --stopper barrier or hparams: synchronous barriers before θ of the SpotTune policies, comma-separated "
                   "fraction:keep pairs (e.g. 0.06:6; as `spottune run --rungs`).")
@click.option("--predictive-options", default=None,
              help="With --stopper predictive: the rule's settings as a JSON object (as `spottune run "
                   "--predictive-options`), e.g. '{\"fractions\": [0.1, 0.3, 0.5], \"keep\": 0.25}'.")
@click.option("--top-k", "top_k", type=int, default=3, show_default=True,
              help="Models every run keeps (the top-k at θ of the SpotTune policies).")
@click.option("--deadline", default=None,
              help="Deadline after each start (6h, 90min, seconds): SpotTune policies run under the deadline guard; "
                   "the SEER family (seer, seer-predictive, seer-lean, e-hyperband, e-grid) plans for it.")
@click.option("--budget-usd", type=float, default=None,
              help="Budget of every run, USD: a hard cap for every policy; the SEER family plans for it.")
@click.option("--deadline-rule", type=click.Choice(["slack", "uniform"]), default="slack", show_default=True,
              help="Deadline guard: slack = stable capacity as late as possible; uniform = Can't Be Late's rule.")
@click.option("--provisioning", type=click.Choice(list(PROVISIONINGS)), default=PROVISIONINGS[0], show_default=True,
              help="Provisioning of the SpotTune and Optuna policies: spottune = the SpotTune provisioner (spot-restart's "
                   "choice unless another market and max price beat it by a margin, no hourly hop); refund-hop = the "
                   "refund objective's choice with hourly hops (the default before 2026-11-29); restart = spot-restart's (cheapest market at each launch, max price = on-demand, no hop), to "
                   "compare stoppers on a provisioning that does not depend on when a trial will stop; "
                   "restart-failover = the same with SkyPilot's failover after a capacity refusal.")
@click.option("--speed-model", type=click.Choice(list(SPEED_MODELS)), default=SPEED_MODELS[0], show_default=True,
              help="Refund objective of the SpotTune policies: speed on instance types a trial has not run on; pooled = "
                   "speed ratios learned from all trials of the run (design R9), cores = the spec's kappa / cores.")
@click.option("--max-concurrent-trials", type=click.IntRange(min=1), default=None,
              help="At most N trials of every policy hold an instance or are launching at once; the others wait in "
                   "trial order and launch when a trial ends, is stopped or pauses at a barrier (as Ray Tune's "
                   "max_concurrent_trials, Optuna with N workers; design D14) [default: every trial at once].")
@click.option("--progress/--no-progress", default=True, show_default=True)
def simulate(workload: str, policies: str, starts: int, start_times: str | None, market_mode: str, output: str,
             seed: int, theta_sweep: bool, jobs: int, max_steps: int | None, prices: str | None,
             instance_types: str | None, zones: str | None, objective: str, boot_s: float | None,
             stopper: str, rungs: str | None, top_k: int, deadline: str | None, budget_usd: float | None, deadline_rule: str,
             time_value_usd_per_hour: float, job_time_value_usd_per_hour: float, provisioning: str, speed_model: str,
             predictive_options: str | None, max_concurrent_trials: int | None, progress: bool) -> None:
    from spottune.evaluation import summarise, to_markdown
    from spottune.evaluation._lower_bound import undefined_ratio_note
    from spottune.evaluation._runner import gap_note

    table = simulate_all(workload, policies, starts, market_mode, Path(output), seed=seed, theta_sweep=theta_sweep,
                         jobs=jobs, start_times=start_times, max_steps=max_steps, prices=prices, progress=progress,
                         instance_types=instance_types, zones=zones, objective=objective, boot_s=boot_s,
                         stopper=stopper, rungs=rungs, top_k=top_k, deadline=deadline, budget_usd=budget_usd, deadline_rule=deadline_rule,
                         time_value_usd_per_hour=time_value_usd_per_hour, provisioning=provisioning,
                         speed_model=speed_model, predictive_options=predictive_options,
                         job_time_value_usd_per_hour=job_time_value_usd_per_hour,
                         max_concurrent_trials=max_concurrent_trials)
    s = summarise(table, ["cost_usd", "jct_h", "pcr_norm", "top3", "refunded_share", "cost_vs_lower_bound"])
    cols = ["market_mode", "policy", "cost_usd_mean", "jct_h_mean", "pcr_norm_mean", "top3_mean",
            "refunded_share_mean", "cost_vs_lower_bound_mean", "n"]
    click.echo(to_markdown(s[cols]))
    for note in (undefined_ratio_note(table), gap_note(table)):
        if note:
            click.echo(note, err=True)
    failed = int((table["error"].fillna("") != "").sum())
    if failed:
        click.echo(f"{failed} run(s) failed; see the error column", err=True)
    click.echo(f"results: {output}")

