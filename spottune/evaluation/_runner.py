"""One simulated run per (workload, policy, start, market mode): build, replay, measure.

Runs are independent and deterministic (their only randomness is seeded), so they can go to worker
processes in any order; each process loads the price history, the study's cached curves and the cached
predictors once (:func:`environment`) and reuses them for every run it gets.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from spotmarket.errors import SpotMarketError
from spotmarket.prices import COLLECTION_GAP_S
from spottune.compose import assemble, build_market, get_policy
from spottune.errors import SpottuneError
from spottune.evaluation._studies import load_study
from spottune.experiment import DEFAULT_JOB_TIME_VALUE_USD_PER_HOUR, DEFAULT_STOPPER

DAY_S = 86400.0
#: Seconds after each default start kept clear of the price data's collection gaps (:func:`default_starts`): two days,
#: longer than a run of the shipped workloads under SpotTune and spot-restart.
GAP_FREE_WINDOW_S = 2 * DAY_S
TRAIN_DAYS = 4.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    """One run to simulate.

    Parameters
    ----------
    workload : str
    policy : str
    start_index : int
    start_s : float
        Experiment start, seconds since the epoch (UTC).
    market_mode : {"legacy", "modern"}
    seed : int
    train_lo_s, train_hi_s : float
        Predictor training window, seconds since the epoch (before the earliest start); the kinds of
        :data:`PER_START` train on a window of the same length ending at ``start_s`` instead.
    prices : str or None
        Price file (default: the 2015 us-east-1 trace).
    max_steps : int or None
        Overrides the study's S_max (small test runs).
    billing : {"second", "hour"}
    objective : {"refund", "paper"}
        Objective of SpotTune policies whose name has no objective suffix.
    boot_s : float
        Launch-to-training latency of every launch, seconds (D11; 0 = the paper's faithful mode).
    stopper : {"paper", "rank", "predictive", "barrier", "hparams"}
        Early stopping of the SpotTune policies (:func:`spottune.evaluation.get_policy`).
    top_k : int, default 3
        Models the run keeps (the top-k at θ of the SpotTune policies).
    rungs : str or tuple of (float, int), default ()
        Their synchronous barriers before θ with stopper ``barrier`` (:attr:`spottune.evaluation.Policy.rungs`).
    predictive_options : mapping or None, default None
        Their settings with stopper ``predictive`` (:attr:`spottune.evaluation.Policy.predictive_options`).
    deadline_s : float or None
        Seconds from the start: SpotTune policies run under :class:`spottune.planning.DeadlineGuard`
        (rule ``deadline_rule``), elastic policies (SEER family) plan for it; the row's ``deadline_met``.
    budget_usd : float or None
        The hard cap of the sim backend (every policy), and the budget elastic policies plan for.
    deadline_rule : {"slack", "uniform"}
    time_value_usd_per_hour : float, default 0
        Value of a trial's wall-clock hour in the ``refund`` objective, USD per trial-hour.
    job_time_value_usd_per_hour : float, default :data:`spottune.experiment.DEFAULT_JOB_TIME_VALUE_USD_PER_HOUR`
        Value of the job's wall-clock hour in the ``refund`` objective, USD per job-hour, shared by the trials
        heading to the same stop (R11).
    provisioning : {"spottune", "refund-hop", "restart"}, default "spottune"
        Provisioning of the SpotTune-provisioned policies (:func:`spottune.evaluation.get_policy`).
    speed_model : {"pooled", "cores"}, default "pooled"
        The refund objective's performance matrix (``spottune.experiment.SPEED_MODELS``, design R9).
    shuffle_trials : bool, default False
        Replay the study's trials in an order drawn per start (``numpy.random.default_rng([seed, start_index])``),
        the same for every policy at that start: a policy that samples the first trials of the study (E-Hyperband,
        E-Grid) does not inherit the file's order (DB16).
    max_concurrent_trials : int or None, default None
        At most this many trials at once, the others waiting in trial order (design D14); None: all at once.
    """

    workload: str
    policy: str
    start_index: int
    start_s: float
    market_mode: str
    seed: int
    train_lo_s: float
    train_hi_s: float
    prices: str | None = None
    max_steps: int | None = None
    billing: str = "second"
    instance_types: tuple[str, ...] | None = None
    zones: tuple[str, ...] | None = None
    objective: str = "refund"
    boot_s: float = 120.0  # spottune.speed.DEFAULT_BOOT_S (a test checks they agree)
    stopper: str = DEFAULT_STOPPER
    rungs: Any = ()
    predictive_options: Any = None
    top_k: int = 3
    deadline_s: float | None = None
    budget_usd: float | None = None
    deadline_rule: str = "slack"
    shuffle_trials: bool = False
    time_value_usd_per_hour: float = 0.0
    job_time_value_usd_per_hour: float = DEFAULT_JOB_TIME_VALUE_USD_PER_HOUR
    provisioning: str = "spottune"
    speed_model: str = "pooled"
    max_concurrent_trials: int | None = None


def default_starts(history: Any, markets: list, n: int, *, train_days: float = TRAIN_DAYS,
                   tail_days: float = 7.0, gap_window_s: float = GAP_FREE_WINDOW_S) -> list[float]:
    """``n`` start times spread evenly over the history, on whole hours (seconds since the epoch), clear of the
    collection gaps of the price data.

    The first start leaves ``train_days`` (+1 day) after the latest first record of any pool market for
    the predictors' training window; the last leaves ``tail_days`` before the end of the history for
    the longest baseline to finish. A start whose first ``gap_window_s`` seconds overlap a collection gap
    (:meth:`spotmarket.prices.PriceHistory.collection_gaps`: hours without a record in any market, which a replay reads
    as flat prices, so nothing is revoked or refunded there) moves to the first whole hour after the gap, as long as
    that stays before the last start; otherwise it stays (and the run's note says how long it spent in the gap).

    Parameters
    ----------
    history : spotmarket.prices.PriceHistory
        The replayed prices.
    markets : list of Market
        The pool.
    n : int
        Number of starts, >= 1.
    train_days : float, default :data:`TRAIN_DAYS`
        Days of history the predictors train on before the first start.
    tail_days : float, default 7.0
        Days left after the last start.
    gap_window_s : float, default :data:`GAP_FREE_WINDOW_S` (2 days)
        Seconds after each start that should be clear of collection gaps (0: starts are not moved).

    Returns
    -------
    list of float
        Start times, seconds since the epoch (UTC), ascending.

    Raises
    ------
    SpottuneError
        If ``n`` < 1 or the history is too short for the window and the tail.
    """
    first = max(float(history[m].start_s) for m in markets) + (train_days + 1.0) * DAY_S
    last = min(float(history[m].end_s) for m in markets) - tail_days * DAY_S
    if n < 1 or last <= first:
        raise SpottuneError(f"cannot place {n} starts in the price history")
    starts = np.linspace(first, last, n) if n > 1 else np.array([first])
    out = [float(math.ceil(s / 3600.0) * 3600.0) for s in starts]
    gaps = history.collection_gaps(COLLECTION_GAP_S) if gap_window_s > 0 else []
    for i, s in enumerate(out):
        moved = s
        for a, b in gaps:  # ascending and disjoint: one pass moves past every gap the window meets
            if moved < b and a < moved + gap_window_s:
                moved = float(math.ceil(b / 3600.0) * 3600.0)
        if moved <= last:
            out[i] = moved
    return sorted(out)



def tuning_starts(evaluation_starts: list[float]) -> list[float]:
    """Tuning starts disjoint from ``evaluation_starts``: a third and two thirds of the way between each pair.

    For consecutive evaluation starts a < b (seconds since the epoch), the whole hours
    ``ceil(a + (b − a) / 3)`` and ``ceil(a + 2 (b − a) / 3)``: 2 (n − 1) starts, each at least a third of
    the spacing from every evaluation start (5.2 days for :func:`default_starts` with n = 10 on the 2015
    trace, longer than any run), so settings chosen on them never see an evaluation replay.

    Parameters
    ----------
    evaluation_starts : list of float
        The evaluation starts, seconds since the epoch (UTC), ascending.

    Returns
    -------
    list of float
        Whole hours, seconds since the epoch (UTC), ascending.

    Raises
    ------
    SpottuneError
        With fewer than two evaluation starts.
    """
    return _between(evaluation_starts, (1 / 3, 2 / 3), "tuning")


def supplementary_starts(evaluation_starts: list[float]) -> list[float]:
    """More test starts, disjoint from the evaluation and the tuning starts: a sixth, a half and five sixths of the way.

    For consecutive evaluation starts a < b (seconds since the epoch), the whole hours ``ceil(a + f (b − a))`` for
    f = 1/6, 1/2, 5/6: 3 (n − 1) starts, each a sixth of the spacing from every evaluation start and every
    :func:`tuning_starts` start (2.58 days for :func:`default_starts` with n = 10 on the 2015 trace; SpotTune's runs
    there take under a day, so a replay of ours that chose a setting on a tuning start never overlaps one of these).
    Fixed on 2026-11-27 to settle verdicts that 10 evaluation starts leave open (docs/design/evaluation.md); no setting is
    chosen on them.

    Parameters
    ----------
    evaluation_starts : list of float
        The evaluation starts, seconds since the epoch (UTC), ascending.

    Returns
    -------
    list of float
        Whole hours, seconds since the epoch (UTC), ascending.

    Raises
    ------
    SpottuneError
        With fewer than two evaluation starts.
    """
    return _between(evaluation_starts, (1 / 6, 1 / 2, 5 / 6), "supplementary")


def _between(evaluation_starts: list[float], fractions: tuple[float, ...], kind: str) -> list[float]:
    """The whole hours ``ceil(a + f (b − a))`` for consecutive evaluation starts a < b and each f of ``fractions``."""
    ev = sorted(float(s) for s in evaluation_starts)
    if len(ev) < 2:
        raise SpottuneError(f"{kind} starts lie between evaluation starts: give at least two")
    return [float(math.ceil((a + f * (b - a)) / 3600.0) * 3600.0) for a, b in zip(ev[:-1], ev[1:]) for f in fractions]


@functools.lru_cache(maxsize=4)
def environment(workload: str, seed: int, market_mode: str, prices: str | None, max_steps: int | None,
                instance_types: tuple[str, ...] | None = None, zones: tuple[str, ...] | None = None) -> dict:
    """Everything shared by the runs of one process: the market (:func:`spottune.compose.build_market`,
    the pool of ``instance_types`` x ``zones``; None: every one of the prices), the study and a predictor cache.

    Keys: ``market`` (MarketSetup), and its ``history``, ``catalog``, ``pool``, ``markets``,
    ``revocations`` (the market mode's revocation model); ``study``; ``predictors`` (filled on use); ``gaps``, the
    collection gaps of the price data, over all its markets, not only the pool's
    (:meth:`spotmarket.prices.PriceHistory.collection_gaps`).
    """
    market = build_market(prices, market_mode=market_mode, seed=seed, instance_types=instance_types,
                          availability_zones=zones)
    study = load_study(workload, seed, max_steps=max_steps)
    return {"market": market, "history": market.history, "catalog": market.catalog, "pool": market.pool,
            "markets": market.markets, "revocations": market.revocation_model, "study": study, "predictors": {},
            "gaps": market.history.collection_gaps(COLLECTION_GAP_S)}  # every market of the data: was the collector down?


def gap_hours(gaps: list[tuple[float, float]], start_s: float, end_s: float) -> float:
    """Hours of ``[start_s, end_s]`` (seconds since the epoch, UTC) inside the collection gaps ``gaps``: disjoint
    ``(a, b)`` pairs in seconds, as :meth:`spotmarket.prices.PriceHistory.collection_gaps` returns them. Returns hours
    (>= 0; 0 for an empty interval)."""
    return sum(max(0.0, min(b, end_s) - max(a, start_s)) for a, b in gaps) / 3600.0


def gap_note(table: Any) -> str | None:
    """One line on the runs that spent time in a collection gap of the price data (their ``note`` says how long), or
    None."""
    n = int(table["note"].fillna("").astype(str).str.contains("collection gap").sum())
    if not n:
        return None
    return (f"warning: {n} of {len(table)} runs spent time in a collection gap of the price data (no record in any of "
            f"its markets for far longer than usual, at least {COLLECTION_GAP_S / 3600:g} h), where the replay reads the "
            "prices as flat, so no price crossing revokes or refunds anything there; see the note column")


#: Predictor kinds trained per start on the history before it (the LSTMs are trained once, before the first).
PER_START = ("auto", "calibrated", "online-hazard")


def _predictor(env: dict, kind: str, task: Task) -> Any:
    from spottune.evaluation._predictors import evaluation_predictor

    lo, hi = task.train_lo_s, task.train_hi_s
    if kind in PER_START:  # seconds to train: each start gets the history just before it, as a user would
        lo, hi = task.start_s - (hi - lo), task.start_s
    key = (kind, lo, hi)
    if key not in env["predictors"]:
        env["predictors"][key] = evaluation_predictor(kind, env["market"], lo, hi, task.seed)
    pred = env["predictors"][key]
    return pred.fresh() if hasattr(pred, "fresh") else pred  # an online model starts each run unlearned


def overhead_seconds(log: list[dict]) -> tuple[float, float]:
    """(checkpoint seconds, restore-and-boot seconds) summed over a run's event log."""
    pending: dict[str, float] = {}
    ckpt = restore = 0.0
    for rec in log:
        typ = rec["type"]
        if typ == "Checkpoint" and rec["kind"] == "action":
            pending[rec["instance_id"]] = rec["t"]
        elif typ == "CheckpointSaved":
            t0 = pending.pop(rec["instance_id"], None)
            if t0 is not None:
                ckpt += rec["t"] - t0
        elif typ == "TrialLaunched":
            restore += rec["time_s"] - rec["started_s"]
    return ckpt, restore


def measure(task: Task, policy: Any, study: Any, orch: Any, record: Any) -> dict[str, Any]:
    """The table row of one finished run (see :data:`spottune.evaluation.COLUMNS`)."""
    from spottune.orchestrator import TrialState
    from spottune.results import _ledger_frame, _top_k, summary_dict

    ledger = _ledger_frame(record)
    summary = summary_dict(orch, record, ledger)
    truth = study.final()
    ranking = study.ranking()
    chosen = list(_top_k(orch, record))  # the best so far when the budget stopped the run
    sign = 1.0 if study.mode == "min" else -1.0
    ckpt_s, restore_s = overhead_seconds(record.log)
    run_s = float((ledger["end_s"] - ledger["start_s"]).sum()) if len(ledger) else 0.0
    train_s = max(run_s - ckpt_s - restore_s, 1e-9)
    cost, jct = float(summary["total_cost_usd"]), summary["jct_h"]
    return {
        "policy": policy.name, "workload": study.name, "market_mode": task.market_mode,
        "start_index": task.start_index, "start": _iso(task.start_s), "seed": task.seed, "theta": policy.theta,
        "predictor": policy.predictor if policy.uses_predictor else "", "cost_usd": cost, "jct_h": jct,
        "pcr": (math.inf if cost <= 0 else 1.0 / (jct * cost)) if jct else math.nan, "pcr_norm": math.nan,
        "top1": float(bool(chosen) and chosen[0] == ranking[0]), "top3": float(ranking[0] in chosen[:3]),
        "regret": sign * (truth[chosen[0]] - truth[ranking[0]]) if chosen else math.nan,
        "refunded_share": float(summary["share_steps_refunded"]), "revocations": int(summary["revocations"]),
        "hops": int(summary["hops"]), "lost_steps": int(summary["steps_lost"]),
        "ckpt_overhead_share": (ckpt_s + restore_s) / train_s, "steps_executed": int(summary["steps_executed"]),
        "instances": int(summary["instances"]), "refunded_usd": float(summary["refunded_usd"]),
        "stopped_early": sum(tr.state is TrialState.STOPPED_EARLY for tr in orch.trials.values()),
        "chosen_best": chosen[0] if chosen else "", "true_best": ranking[0], "note": "", "error": "",
        "deadline_met": (math.nan if task.deadline_s is None or jct is None
                         else float(jct * 3600.0 <= task.deadline_s + 1e-6)),
        "budget_stopped": float(bool(record.meta.get("budget_exhausted"))),
    }


def _iso(t_s: float) -> str:
    from spotmarket.prices import to_timestamp

    return to_timestamp(t_s).strftime("%Y-%m-%dT%H:%MZ")


def trial_order(trial_ids: list[str], seed: int, start_index: int) -> list[str]:
    """``trial_ids`` in the order of start ``start_index`` (``Task.shuffle_trials``, DB16): a permutation drawn from
    ``numpy.random.default_rng([seed, start_index])``, the same for every policy at that start."""
    order = np.random.default_rng([seed, start_index]).permutation(len(trial_ids))
    return [trial_ids[i] for i in order]


def replay(task: Task, policy: Any, env: dict, study: Any) -> tuple[Any, Any, Any]:
    """Assemble ``policy`` for ``task`` on ``env``'s market and ``study`` and replay it on the sim backend: ``(assembly,
    the backend's record, its SimSettings)``; the orchestrator is ``assembly.orchestrator``.

    Raises
    ------
    SpottuneError, SpotMarketError
        As the assembly or the replay raise them (e.g. the price history ends before the run finishes).
    """
    from spottune.backends import SimBackend, SimSettings
    from spotmarket import Billing

    predictor = _predictor(env, policy.predictor, task) if policy.uses_predictor else None
    asm = assemble(policy, study=study, history=env["history"], catalog=env["catalog"], pool=env["pool"],
                   markets=env["markets"], revocation_model=env["revocations"], billing=Billing(task.billing),
                   predictor=predictor, seed=task.seed, top_k=task.top_k, boot_s=task.boot_s, start_s=task.start_s,
                   deadline_s=task.deadline_s, budget_usd=task.budget_usd, deadline_rule=task.deadline_rule,
                   window_s=task.train_hi_s - task.train_lo_s, time_value_usd_per_hour=task.time_value_usd_per_hour,
                   job_time_value_usd_per_hour=task.job_time_value_usd_per_hour, speed_model=task.speed_model)
    settings = SimSettings(boot_s=task.boot_s, seed=task.seed)
    backend = SimBackend(asm.orchestrator, env["history"], asm.revocation_model, asm.billing, study.sim_curves(),
                         env["market"].facts, task.start_s, settings)
    backend.budget_usd = task.budget_usd
    return asm, backend.run(), settings


def run_task(task: Task) -> tuple[dict[str, Any], float]:
    """Simulate one run; returns (table row, wall seconds). A project error becomes the row's ``error``.

    Parameters
    ----------
    task : Task
        One (workload, policy, market mode, start, settings) of ``spottune simulate``.

    Returns
    -------
    row : dict
        The table row (:data:`spottune.evaluation.COLUMNS`): cost (USD), JCT (hours), PCR, top-1 / top-3,
        refunds, revocations ...
    wall_s : float
        Wall seconds the replay took.
    """
    from spottune.evaluation._lower_bound import bound_columns

    t0 = time.perf_counter()
    policy = get_policy(task.policy, task.objective, task.stopper, task.rungs, task.provisioning,
                        task.predictive_options, task.max_concurrent_trials)
    env = environment(task.workload, task.seed, task.market_mode, task.prices, task.max_steps, task.instance_types,
                      task.zones)
    study = env["study"]
    if task.shuffle_trials:
        study = dataclasses.replace(study, trial_ids=trial_order(study.trial_ids, task.seed, task.start_index))
    try:
        asm, record, settings = replay(task, policy, env, study)
        row = measure(task, policy, study, asm.orchestrator, record)
        hours = gap_hours(env["gaps"], task.start_s, record.end_s if record.end_s is not None else task.start_s)
        gap = f"{hours:.2f} h of the run in a collection gap of the prices (read as flat)" if hours > 0 else ""
        row["note"] = "; ".join(n for n in (asm.note, gap) if n)
        row.update(bound_columns(row, market=env["market"], study=study, orchestrator=asm.orchestrator, record=record,
                                 start_s=task.start_s, sim_settings=settings))
    except (SpottuneError, SpotMarketError) as exc:  # e.g. the price history ends before the run finishes
        from spottune.evaluation._table import empty_row

        row = empty_row(policy=policy.name, workload=study.name, market_mode=task.market_mode,
                        start_index=task.start_index, start=_iso(task.start_s), seed=task.seed, theta=policy.theta,
                        error=f"{type(exc).__name__}: {exc}")
    return row, time.perf_counter() - t0
