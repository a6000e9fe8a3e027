"""An experiment built from its spec and run: :func:`build`, :func:`run`, :func:`dry_run`.

:func:`build` assembles every part of an :class:`~spottune.experiment.ExperimentSpec`: the market
(:mod:`spottune.compose.market`), the revocation predictor (:mod:`spottune.compose.predictors`), the orchestrator of
the spec's policy (:func:`spottune.compose.orchestrators.policy_orchestrator` of
:func:`spottune.compose.policies.spec_policy`), or the executed plan (:mod:`spottune.compose.plans`), and the backend.
The aws and ray backends' own parts come from :mod:`spottune.backends.aws._build` and :mod:`spottune.backends.ray._build`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from earlycurve import FinalMetricPredictor
from spotmarket import Billing
from spotmarket.prices import load_history, to_seconds
from spottune._early_stop import learned_final_predictor
from spottune.backends import (Driver, LocalBackend, LocalSettings, Progress, SimBackend, SimSettings,
                               TrainableCurves)
from spottune.backends.aws._build import aws_backend, live_market, on_demand_from_api
from spottune.backends.aws._safety import plan as launch_plan
from spottune.backends.ray._build import pool_markets, ray_backend
from spottune.compose.market import DAY_S, MarketSetup, build_market, check_start, gap_warnings
from spottune.compose.orchestrators import policy_orchestrator
from spottune.compose.plans import executed_schedule, plan_orchestrator, plan_spec
from spottune.compose.policies import spec_policy
from spottune.compose.predictors import make_predictor
from spottune.errors import ConfigError
from spottune.experiment import ExperimentSpec, TrialSpec
from spottune.checkpoint._secrets import experiment_key
from spottune.journal import Journal
from spottune.orchestrator import Orchestrator, OrchestratorConfig
from spottune.planning import RunPlan

__all__ = ["Experiment", "build", "check_supported", "dry_run", "run", "store_url"]

def store_url(spec: ExperimentSpec, folder: str | Path) -> str:
    """Where the local backend's workers checkpoint: ``storage_path``, or ``<folder>/checkpoints``.

    A plain folder is made absolute (the workers are separate processes); URLs (``s3://``,
    ``file://``) are used as they are, with ``spec.storage_options``.

    Parameters
    ----------
    spec : ExperimentSpec
        Its ``storage_path`` (None: the results folder's ``checkpoints``).
    folder : str or pathlib.Path
        The run's results folder.

    Returns
    -------
    str
        An absolute folder path or a URL.
    """
    path = spec.storage_path
    if path is None:
        return str((Path(folder) / "checkpoints").resolve())
    return path if "://" in path else str(Path(path).expanduser().resolve())


@dataclass(slots=True)
class Experiment:
    """An experiment built from a spec, ready to run (:meth:`run`).

    Attributes
    ----------
    spec : ExperimentSpec
    market : MarketSetup
    start_s : float
        Start, seconds since the epoch (UTC).
    trials : list of TrialSpec
    predictor_desc : str
    orchestrator : spottune.orchestrator.Orchestrator
        Or a :class:`spottune.planning.BracketOrchestrator` when the spec executes a plan.
    backend : spottune.backends.Driver
        The sim, local, aws or ray backend.
    curves : TrainableCurves or None
        The sim backend's curves (None for the local backend).
    configs : dict
        trial_id -> configuration.
    plan : spottune.planning.RunPlan or None
        The plan of a run with both a deadline and a budget (executed when ``spec.executes_plan``).
    """

    spec: ExperimentSpec
    market: MarketSetup
    start_s: float
    trials: list[TrialSpec]
    predictor_desc: str
    orchestrator: Orchestrator
    backend: Driver
    curves: TrainableCurves | None = None
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    plan: RunPlan | None = None

    def run(self) -> dict[str, Any]:
        """Run the backend to the end; returns what :func:`spottune.results.write_results` reads.

        Returns
        -------
        dict
            ``orchestrator``, ``record`` (RunRecord), ``curves``, ``spec``, ``opts`` (``spec.to_dict()``),
            ``workload``, ``configs`` (trial_id -> config), ``predictor_desc``.
        """
        spec, orch = self.spec, self.orchestrator
        workload = spec.get_workload()
        if hasattr(self.backend.progress, "attach"):  # a spottune.results.ResultsJournal: written as the run goes
            self.backend.progress.attach(self.backend.record, self.configs)
        if hasattr(self.backend.progress, "bind_backend"):  # a caller that moves the caps as the run goes (SV14)
            self.backend.progress.bind_backend(self.backend)
        record = self.backend.run()
        record.meta.update(workload=workload.name, market_mode=spec.market_mode, predictor=self.predictor_desc,
                           theta=orch.config.theta, top_k=orch.config.top_k, max_steps=spec.max_steps, seed=spec.seed,
                           start=spec.start.isoformat(), start_s=self.start_s,
                           markets=[str(m) for m in self.market.markets], metric=spec.metric, mode=spec.mode,
                           n_trials=len(self.trials), spec=spec.to_dict())
        if self.plan is not None:
            record.meta.update(deadline_mode=spec.deadline_mode, plan=self.plan.render(mode=spec.deadline_mode),
                               plan_executed=spec.executes_plan)
        if spec.executes_plan:  # what ran: per bracket, per round, the trials; and the planned round ends
            schedule = executed_schedule(self.plan, spec.deadline_mode)[0]
            ends = np.cumsum(schedule.brackets[0].durations)
            record.meta.update(plan_rounds=[[list(r) for r in rounds] for rounds in orch.members],
                               plan_round_ends_s=[float(x) for x in ends], plan_executed_name=schedule.name)
        return {"orchestrator": orch, "record": record, "curves": self.curves, "spec": spec, "opts": spec.to_dict(),
                "workload": workload, "configs": self.configs, "predictor_desc": self.predictor_desc}


def check_supported(spec: ExperimentSpec) -> None:
    """Refuse, at once, what this build cannot run.

    Parameters
    ----------
    spec : ExperimentSpec
        The experiment to check; nothing is built.

    Raises
    ------
    ConfigError
        On a backend other than ``sim``, ``local``, ``aws`` and ``ray``, ``aws`` without ``aws.bucket``, or
        an executed plan (``spec.executes_plan``) on a backend other than ``sim`` (decision DB14).
    """
    if spec.backend not in ("sim", "local", "aws", "ray"):
        raise ConfigError(f"backend is {spec.backend!r}, but this build runs only sim, local, aws and ray")
    if spec.backend == "aws" and not spec.aws.get("bucket"):
        raise ConfigError("backend aws needs aws.bucket (an S3 bucket for checkpoints and control objects; "
                          "docs/guide/aws.md)")
    if spec.executes_plan and spec.backend != "sim":
        raise ConfigError("--deadline with --budget-usd executes a plan on the sim backend only; use "
                          "--deadline-mode guard")


def build(spec: ExperimentSpec, *, progress: Progress | None = None, output: str | Path | None = None,
          log_fn: Callable[[str], None] | None = None, live_start_s: float | None = None,
          dry_run: bool = False) -> Experiment:
    """Build every part of ``spec``: market, predictor, provisioner, curve model, orchestrator, backend.

    Parameters
    ----------
    spec : ExperimentSpec
    progress : callable (now_s, orchestrator, usd) -> None, optional
        Called by the backend after every delivered event (USD spent so far).
    output : str or Path, optional
        The run's results folder. The local backend keeps its checkpoints (when ``storage_path`` is
        None) in ``<output>/checkpoints/`` and its worker logs in ``<output>/workers/``; without
        ``output`` a new temporary folder is used (and left for inspection).
    log_fn : callable (str) -> None, optional
        Told before RevPred is trained (minutes, once per data and window; cached afterwards), and given the warnings
        of :func:`gap_warnings` when the replayed prices have a collection gap near the start.
    live_start_s : float, optional
        aws with live prices: the start of the run being resumed (its journaled ``ExperimentStarted``), so
        the provisioner sees the prices it saw then; default: now.
    dry_run : bool, default False
        Built to be looked at (:func:`dry_run`), never run: the aws backend does not require ``aws.image`` and
        ``aws.ami``.

    Returns
    -------
    Experiment
        Every part built and wired, nothing launched yet; :meth:`Experiment.run` runs it.

    Raises
    ------
    ConfigError
        On a backend this build cannot run (``aws``), or a start without ``train_days`` of history
        before it.
    """
    check_supported(spec)
    seed = spec.seed
    spec.get_workload()  # an unknown workload fails before the prices are loaded
    live = None
    if spec.backend == "aws":
        live = live_market(spec, now_s=live_start_s)  # (history, now) from the EC2 API, or None: the replayed trace
    history, pool, offered = None if live is None else live[0], None, None
    if spec.backend == "ray":  # the chooser's pool: the markets the cluster offers (decision RY2)
        history = load_history(spec.prices)
        pool, offered = pool_markets(spec, history)
    api = on_demand_from_api(spec, log_fn=log_fn) if live is not None else None  # the Price List API, cached
    market = build_market(spec.prices, market_mode=spec.market_mode, seed=seed,
                          instance_types=spec.instance_types, availability_zones=spec.availability_zones,
                          history=history, markets=pool, resources=spec.resources,
                          on_demand_prices=spec.on_demand_prices, api_prices=api)
    start_s = float(to_seconds(spec.start)) if live is None else live[1]
    check_start(market, start_s, spec.train_days, live=live is not None)
    if live is None and log_fn is not None:
        for note in gap_warnings(market, start_s):
            log_fn(note)
    plan = plan_spec(spec, market, start_s)  # deadline and budget: an infeasible request is refused before training
    trials = spec.trials()
    if spec.executes_plan:  # DB14: SEER's printed plan, executed (no revocation predictor needed)
        orch = plan_orchestrator(spec, market, plan, [t.trial_id for t in trials])
        desc = "none (the plan's bracket types, max price current + 0.01 USD/h)"
    else:
        orch, desc = _algorithm_1(spec, market, start_s, log_fn)
    parts = (orch, market.history, market.revocation_model, Billing(spec.billing))
    curves = None
    if spec.backend == "sim":
        # make_trainable passes the spec's max_steps, so LR schedules scale with max_steps
        curves = TrainableCurves({t.trial_id: (lambda t=t: spec.make_trainable(t)) for t in trials})
        backend = SimBackend(*parts, curves, market.facts, start_s,
                                  SimSettings(boot_s=spec.boot_s, step_time_cov=spec.step_time_cov, seed=seed),
                                  progress=progress)
    elif spec.backend == "aws":
        backend = aws_backend(spec, orch, Billing(spec.billing), trials, market, start_s, live=live is not None,
                              output=output, progress=progress, dry_run=dry_run)
    elif spec.backend == "ray":
        folder = Path(output) if output is not None else Path(tempfile.mkdtemp(prefix="spottune-run-"))
        backend = ray_backend(spec, orch, Billing(spec.billing), trials, market, start_s, offered=offered,
                              store_url=store_url(spec, folder), progress=progress,
                              checkpoint_key=experiment_key(folder))
    else:
        folder = Path(output) if output is not None else Path(tempfile.mkdtemp(prefix="spottune-run-"))
        settings = LocalSettings(store_url=store_url(spec, folder), storage_options=dict(spec.storage_options),
                                 time_scale=spec.time_scale, max_steps=spec.max_steps,
                                 checkpoint_keep=spec.checkpoint_keep, log_dir=str(folder / "workers"),
                                 checkpoint_key=experiment_key(folder), heartbeat_wall_s=spec.heartbeat_s,
                                 missed_beats=spec.missed_beats)
        backend = LocalBackend(*parts, spec.workload, {t.trial_id: (t.config, t.seed) for t in trials}, market.facts,
                               start_s, settings, progress=progress)
    # one guard for every backend (ReplayDriver's, decision DB5); the aws backend has it from its settings too
    backend.budget_usd, backend.max_usd_per_hour = spec.budget_usd, spec.max_usd_per_hour
    return Experiment(spec=spec, market=market, start_s=start_s, trials=trials, predictor_desc=desc,
                      orchestrator=orch, backend=backend, curves=curves,
                      configs={t.trial_id: t.config for t in trials}, plan=plan)


def _algorithm_1(spec: ExperimentSpec, market: MarketSetup, start_s: float,
                 log_fn: Callable[[str], None] | None) -> tuple[Orchestrator, str]:
    """SpotTune's orchestrator (Algorithm 1: θ barrier, top-k, EarlyCurve) of :func:`spottune.compose.spec_policy`,
    with its predictor and provisioner, inside the deadline guard when ``spec.deadline`` is set; and the predictor's
    one-line note."""
    seed = spec.seed
    predictor, desc = make_predictor(spec.predictor, market, start_s - spec.train_days * DAY_S, start_s, seed,
                                     log_fn=log_fn, fallback=True)
    trials = spec.trials()
    wl = spec.get_workload()

    def learned(config: OrchestratorConfig) -> FinalMetricPredictor | None:
        """The final-metric predictor fitted on the curve file ``spec.stopper_curves``, or None without one."""
        if not spec.stopper_curves:
            return None
        return learned_final_predictor(spec.stopper_curves, seed, spec.stopper, config.barrier_fractions,
                                       spec.max_steps, {k for t in trials for k in t.config})

    asm = policy_orchestrator(
        spec_policy(spec), trial_ids=[t.trial_id for t in trials], configs={t.trial_id: t.config for t in trials},
        max_steps=spec.max_steps, metric=spec.metric, mode=spec.mode, top_k=spec.top_k, history=market.history,
        catalog=market.catalog, pool=market.pool, markets=market.markets, revocation_model=market.revocation_model,
        billing=Billing(spec.billing), predictor=predictor, seed=seed, boot_s=spec.boot_s,
        priced_boot_s=spec.boot_s if spec.backend in ("sim", "aws", "ray") else 0.0,
        checkpoint_size_mb=wl.checkpoint_size_mb,
        reference_seconds_per_step=getattr(wl.trainable, "reference_seconds_per_step", None), start_s=start_s,
        deadline_s=spec.deadline, budget_usd=spec.budget_usd, time_value_usd_per_hour=spec.time_value_usd_per_hour,
        job_time_value_usd_per_hour=spec.job_time_value_usd_per_hour, speed_model=spec.speed_model, learned=learned)
    return asm.orchestrator, desc


def dry_run(spec: ExperimentSpec, *, log_fn: Callable[[str], None] | None = None) -> str:
    """What ``spec`` would launch first (every trial's market and max price, the hourly cost bound), as text;
    nothing is launched (the aws backend reads prices only). See :func:`spottune.backends.aws.plan`.

    Parameters
    ----------
    spec : ExperimentSpec
        The experiment; it is built (prices loaded, predictor trained or read from the cache) but not run.
    log_fn : callable (str) -> None, optional
        As in :func:`build`.

    Returns
    -------
    str
        One line per trial (market, max price USD/hour), the bound on the first hour's cost, USD, the caps'
        verdicts, and for the aws backend with live prices a note naming ``aws.image`` / ``aws.ami`` if missing.

    Raises
    ------
    ConfigError
        As :func:`build`.
    """
    exp = build(spec, log_fn=log_fn, dry_run=True)
    p = launch_plan(exp.orchestrator.chooser, [t.trial_id for t in exp.trials], exp.start_s,
             steps_left=spec.theta * spec.max_steps)
    text = p.render(max_usd_per_hour=spec.max_usd_per_hour, budget_usd=spec.budget_usd)
    missing = [f"aws.{k}" for k in ("image", "ami") if spec.backend == "aws" and spec.aws.get("live_prices", True)
               and not spec.aws.get(k)]
    if missing:  # a dry run needs neither (it launches nothing); say so before the real run refuses
        text += f"\nnote: a real run needs {' and '.join(missing)} (the worker image in ECR, a host AMI with Docker)"
    return text


def run(spec: ExperimentSpec, *, progress: Progress | None = None, output: str | Path | None = None,
        log_fn: Callable[[str], None] | None = None, journal: Journal | None = None,
        resume: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """:func:`build` ``spec`` and run it; returns :meth:`Experiment.run`'s dict (nothing is written).

    ``journal`` (a :class:`spottune.journal.Journal`) records the run; with ``resume`` (the records of
    a killed run's journal, which ``journal`` then replays) the backend's :meth:`~spottune.backends.Driver.resume`
    hook continues that run instead of starting afresh.

    Parameters
    ----------
    spec : ExperimentSpec
        The experiment.
    progress, output, log_fn
        As in :func:`build`.
    journal : spottune.journal.Journal, optional
        Records every event and action of the run (crash safety); None: no journal.
    resume : list of dict, optional
        The records of a killed run's journal (:func:`spottune.journal.read_journal`); None: a fresh run.

    Returns
    -------
    dict
        ``orchestrator``, ``record`` (RunRecord), ``curves``, ``spec``, ``opts``, ``workload``, ``configs``,
        ``predictor_desc``: see :meth:`Experiment.run`.

    Raises
    ------
    ConfigError
        As :func:`build`.
    """
    started = next((r["e"]["time_s"] for r in resume or () if r["k"] == "event"), None)  # ExperimentStarted
    exp = build(spec, progress=progress, output=output, log_fn=log_fn, live_start_s=started)
    if journal is not None:  # the driver journals; a replay recalls the predictor's journaled answers
        exp.backend.journal = journal
        journal.sync_intents = spec.backend != "sim"  # real side effects: fsync before each one
    if resume is not None:
        exp.backend.resume(resume)
    return exp.run()
