"""The Python front door: :func:`tune` runs an experiment and returns a :class:`ResultGrid`.

Example (offline, under a minute on 2 cores with the default predictor; ``predictor="revpred"`` also
trains the paper's LSTM for a few minutes on first use and caches it)::

    import spottune

    grid = spottune.tune(max_steps=60, output="results/demo")
    grid.get_dataframe()          # one row per trial: config/<name>, state, steps, metric, usd, ...
    best = grid.get_best_result()  # the best finished trial (spec's metric and mode)
    best.config, best.value, best.usd
    grid.ledger                   # one row per instance run (USD charged and refunded)
    grid.summary["total_cost_usd"], grid.path

    spottune.ResultGrid.from_path("results/demo")  # reload a written results folder

Names follow Ray Tune (``ResultGrid``, ``get_dataframe``, ``get_best_result``, ``config/<name>``
columns) where the concepts match.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from spottune.errors import ConfigError
from spottune.experiment import ExperimentSpec
from spottune.journal import JOURNAL_FILE, holds_run

__all__ = ["Result", "ResultGrid", "run_rounds", "search_gp_ucb", "tune"]

log = logging.getLogger(__name__)

_INT_COLUMNS = ("steps", "revocations", "hops", "failures", "lost_steps", "instances")
_FLOAT_COLUMNS = ("metric", "predicted", "predicted_low", "predicted_high", "usd", "refunded_usd")
_STR_COLUMNS = ("trial_id", "state", "metric_kind", "markets_used")
_LEDGER_FLOAT = ("start_s", "end_s", "billed_s", "charged_usd", "refunded_usd", "max_price_usd_per_hour")
_LEDGER_INT = ("steps", "lost_steps")
_LEDGER_STR = ("market", "instance_id", "ended_by", "reason")


@dataclass(frozen=True, slots=True)
class Result:
    """One trial of a finished experiment.

    Attributes
    ----------
    trial_id : str
        ``t00``, ``t01``, ...
    config : dict
        Its hyperparameter configuration.
    metric : str
        Name of the ranking metric (the spec's ``metric``).
    value : float
        The trial's metric in the user's direction: the final observed value of a FINISHED trial,
        EarlyCurve's prediction at S_max for one stopped at θ, else the last observed value (see
        ``metric_kind``; definitions in :mod:`spottune.results`). NaN if the trial never reported.
    metric_kind : {"final", "plateau", "predicted", "last"}
    state : str
        Final trial state (``finished``, ``stopped_early``, ``failed``, ...).
    steps : int
        Steps the trial completed.
    usd : float
        USD charged for the trial's instance runs.
    refunded_usd : float
        USD the provider waived (instances revoked within their first hour).
    path : pathlib.Path
        The experiment's results folder.
    """

    trial_id: str
    config: dict[str, Any]
    metric: str
    value: float
    metric_kind: str
    state: str
    steps: int
    usd: float
    refunded_usd: float
    path: Path

    @property
    def metrics(self) -> dict[str, float]:
        """``{metric: value}`` (Ray Tune's ``Result.metrics``)."""
        return {self.metric: self.value}


def _flat(config: Mapping[str, Any], prefix: str = "config/") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in config.items():
        if isinstance(v, Mapping):
            out.update(_flat(v, f"{prefix}{k}/"))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _tidy_trials(frame: pd.DataFrame) -> pd.DataFrame:
    """Fixed dtypes, so a frame computed in memory equals the same frame read back from ``trials.csv``."""
    frame = frame.copy()
    for c in _INT_COLUMNS:
        frame[c] = frame[c].astype("int64")
    for c in _FLOAT_COLUMNS:
        frame[c] = pd.to_numeric(frame[c], errors="coerce").astype("float64")
    for c in _STR_COLUMNS:
        frame[c] = frame[c].fillna("").astype(str)
    frame["selected"] = frame["selected"].astype(bool)
    frame["rank"] = pd.to_numeric(frame["rank"], errors="coerce").astype("Int64")
    frame["config"] = frame["config"].fillna("{}").astype(str)
    return frame.reset_index(drop=True)


def _tidy_ledger(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.copy()
    for c in _LEDGER_FLOAT:
        frame[c] = pd.to_numeric(frame[c], errors="coerce").astype("float64")
    for c in _LEDGER_INT:
        frame[c] = frame[c].astype("int64")
    for c in _LEDGER_STR:
        frame[c] = frame[c].fillna("").astype(str)
    frame["trial_id"] = [None if pd.isna(t) else str(t) for t in frame["trial_id"]]
    frame["refunded"] = frame["refunded"].astype(bool)
    return frame.reset_index(drop=True)


class ResultGrid:
    """The results of one experiment (what :func:`tune` returns; Ray Tune's name).

    Parameters
    ----------
    path : path-like
        The results folder (``trials.csv``, ``ledger.csv``, ``curves.csv``, ``events.jsonl``,
        ``summary.json``; :mod:`spottune.results`).
    trials : pandas.DataFrame
        ``trials.csv``: one row per trial, columns :data:`spottune.results.TRIAL_COLUMNS`.
    ledger : pandas.DataFrame
        ``ledger.csv``: one row per instance run.
    summary : dict
        ``summary.json``.
    curves : pandas.DataFrame, optional
        ``curves.csv``: trial_id, step, value.

    Use :func:`tune` or :meth:`from_path` rather than the constructor. ``len(grid)`` is the number of
    trials; iterating yields one :class:`Result` per trial, in trial order.
    """

    def __init__(self, path: str | Path, trials: pd.DataFrame, ledger: pd.DataFrame, summary: Mapping[str, Any],
                 curves: pd.DataFrame | None = None):
        self._path = Path(path)
        self._trials = _tidy_trials(trials)
        self._ledger = _tidy_ledger(ledger)
        # exactly what summary.json holds (tuples as lists, times as strings), in memory or reloaded
        self._summary = json.loads(json.dumps(dict(summary), default=str))
        self._curves = curves
        settings = self._summary.get("settings", {})
        self.metric: str = settings.get("metric", "metric")
        self.mode: str = settings.get("mode", "min")

    @classmethod
    def from_path(cls, path: str | Path) -> "ResultGrid":
        """Reload a results folder written by :func:`tune` or ``spottune run``.

        Parameters
        ----------
        path : str or pathlib.Path
            The results folder (it holds ``trials.csv``, ``ledger.csv``, ``summary.json``, ``curves.csv``).

        Returns
        -------
        ResultGrid
            The run's trials, ledger, summary and curves as written.

        Raises
        ------
        ConfigError
            If a results file is missing or unreadable (:func:`spottune.results.read_results`).
        """
        from spottune.results import read_results

        data = read_results(Path(path))
        return cls(path, data["trials"], data["ledger"], data["summary"], data["curves"])

    # -- members --------------------------------------------------------------------------------------
    @property
    def path(self) -> Path:
        """The results folder."""
        return self._path

    @property
    def summary(self) -> dict[str, Any]:
        """``summary.json``: ``total_cost_usd``, ``refunded_usd``, ``jct_s`` (seconds), ``top_k``, ``settings``, ..."""
        return dict(self._summary)

    @property
    def ledger(self) -> pd.DataFrame:
        """One row per instance run: market, instance_id, trial_id, start_s / end_s (seconds since the epoch,
        UTC), ended_by, reason, billed_s (seconds), charged_usd, refunded_usd, max_price_usd_per_hour,
        steps, lost_steps, refunded (free run)."""
        return self._ledger.copy()

    @property
    def curves(self) -> pd.DataFrame | None:
        """Every trial's observed curve (trial_id, step, value; user direction), or None if not loaded."""
        return None if self._curves is None else self._curves.copy()

    def get_dataframe(self) -> pd.DataFrame:
        """One row per trial, in trial order.

        Columns: ``trial_id``; one ``config/<name>`` column per hyperparameter (nested keys joined by
        ``/``, as Ray Tune does); then ``state``, ``steps``, ``metric`` (the ranking metric's value,
        user direction), ``metric_kind``, ``predicted`` / ``predicted_low`` / ``predicted_high``
        (EarlyCurve at S_max), ``selected`` (kept at θ), ``rank`` (1 = best of the top-k, else <NA>),
        ``usd`` (USD charged), ``refunded_usd`` (USD waived), ``revocations``, ``hops``,
        ``failures``, ``lost_steps``, ``instances``, ``markets_used`` (``;``-separated).

        Returns
        -------
        pandas.DataFrame
            Shape (n_trials, n_columns), a new frame (changing it leaves the grid unchanged).
        """
        t = self._trials
        configs = pd.DataFrame([_flat(json.loads(c)) for c in t["config"]], index=t.index)
        rest = t.drop(columns=["trial_id", "config"])
        return pd.concat([t[["trial_id"]], configs, rest], axis=1)

    def get_best_result(self, metric: str | None = None, mode: str | None = None) -> Result:
        """The best FINISHED trial (stopped-early trials only have predictions, so they do not compete).

        Parameters
        ----------
        metric : str, optional
            Must be the experiment's ranking metric (the only one recorded per trial); default: it.
        mode : {"min", "max"}, optional
            Default: the experiment's. Ties go to the first trial in trial order.

        Returns
        -------
        Result
            The finished trial with the best final metric value: its id, config, metric value, steps and cost
            (USD).

        Raises
        ------
        ValueError
            On a mode other than ``min`` / ``max``, a metric the run did not record, or no finished
            trial with a metric value.
        """
        mode = self.mode if mode is None else mode
        if mode not in ("min", "max"):
            raise ValueError(f"mode is {mode!r}, but must be 'min' or 'max'")
        if metric is not None and metric != self.metric:
            raise ValueError(f"metric is {metric!r}, but this run recorded only {self.metric!r}")
        t = self._trials
        done = t[(t["state"] == "finished") & t["metric"].notna()]
        if done.empty:
            raise ValueError(f"no finished trial with a {self.metric!r} value in {self._path} "
                             f"(states: {', '.join(sorted(set(t['state']))) or 'no trials'})")
        pos = done["metric"].to_numpy().argmin() if mode == "min" else done["metric"].to_numpy().argmax()
        return self._result(done.index[int(pos)])

    def _result(self, index: Any) -> Result:
        row = self._trials.loc[index]
        return Result(trial_id=row["trial_id"], config=json.loads(row["config"]), metric=self.metric,
                      value=float(row["metric"]), metric_kind=row["metric_kind"], state=row["state"],
                      steps=int(row["steps"]), usd=float(row["usd"]), refunded_usd=float(row["refunded_usd"]),
                      path=self._path)

    def __len__(self) -> int:
        return len(self._trials)

    def __iter__(self) -> Iterator[Result]:
        return (self._result(i) for i in self._trials.index)

    def __getitem__(self, i: int) -> Result:
        return self._result(self._trials.index[i])

    def __repr__(self) -> str:
        cost = self._summary.get("total_cost_usd", math.nan)
        return f"ResultGrid({len(self)} trials, {cost:.4f} USD, path={str(self._path)!r})"


class _ProgressBar:
    """tqdm bar (stderr) over planned steps, with simulated time, trial states and USD so far."""

    def __init__(self, spec: ExperimentSpec):
        from spotmarket.prices import to_seconds

        self.total_steps = spec.planned_steps
        self.start_s = float(to_seconds(spec.start))
        self.bar: Any = None  # drawn at the first report, so set-up errors print alone
        self.done = 0
        self.calls = 0

    def __call__(self, now_s: float, orch: Any, usd: float) -> None:
        if self.bar is None:
            from tqdm import tqdm

            # an executed plan (DB14) trains what fits before each round's end: no total known ahead
            total = None if getattr(orch, "wall_clock", False) else self.total_steps
            self.bar = tqdm(total=total, unit="step", dynamic_ncols=True, file=sys.stderr)
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
                f" paused {c[S.PAUSED_AT_THETA] + c[S.KEPT]} done {c[S.FINISHED] + c[S.STOPPED_EARLY] + c[S.FAILED]} | ${usd:.3f}",
                refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def default_output() -> Path:
    """A new folder ``results/<UTC time>`` (``-2``, ``-3``, ... appended if it exists), relative to the cwd."""
    base = Path("results") / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out, n = base, 1
    while out.exists():
        n += 1
        out = base.with_name(f"{base.name}-{n}")
    return out


class _Undo:
    """Puts an output folder back as a refused run found it: removes what the run created in it, and the folder
    itself (with the parents made for it) if the run created it."""

    def __init__(self, target: Path):
        self.target = target
        top = None  # the highest missing folder of the target's path: the run creates it and all below
        for p in (target, *target.parents):
            if p.exists() or p.is_symlink():
                break
            top = p
        self.top = top
        self.before = None if top is not None or not target.is_dir() else set(os.listdir(target))
        if self.before is not None and not holds_run(target / JOURNAL_FILE):
            self.before.discard(JOURNAL_FILE)  # no run began there: the new run replaces it (spottune.journal.open_run)

    def __call__(self) -> None:
        try:
            if self.top is not None:
                shutil.rmtree(self.top, ignore_errors=True)
            elif self.before is not None:
                for name in set(os.listdir(self.target)) - self.before:
                    path = self.target / name
                    if path.is_dir() and not path.is_symlink():
                        shutil.rmtree(path, ignore_errors=True)
                    else:
                        path.unlink(missing_ok=True)
        except OSError as exc:  # the refusal itself is what the user must see
            log.warning("could not remove what the refused run wrote in %s: %s", self.target, exc)


def _spec(spec: Any, options: Mapping[str, Any]) -> ExperimentSpec:
    if spec is None:
        return ExperimentSpec.from_dict(options)
    if isinstance(spec, Mapping):
        return ExperimentSpec.from_dict({**spec, **options})
    if not isinstance(spec, ExperimentSpec):
        raise ConfigError(f"spec is a {type(spec).__name__}, but must be an ExperimentSpec, a mapping or None")
    return spec.with_overrides(**options) if options else spec


def tune(spec: ExperimentSpec | Mapping[str, Any] | None = None, /, *, output: str | Path | None = None,
         progress: bool | Any = False, resume: str | Path | None = None, **options: Any) -> ResultGrid:
    """Run a tuning experiment on (simulated) spot capacity and write its results folder.

    Parameters
    ----------
    spec : ExperimentSpec or mapping, optional
        The experiment; default ``ExperimentSpec()`` (digits-mlp, 16 configs, the 15 markets of the
        2015 us-east-1 trace, predictor ``auto``, θ = 0.7, top-3, the simulator in legacy market mode).
    output : str or Path, optional
        Results folder, checked before the run (created, a writable folder) and written as the run goes
        (:class:`spottune.results.ResultsJournal`; files of :mod:`spottune.results`). Default: a new
        ``results/<UTC time>`` folder under the current directory, as ``spottune run`` does. A run refused
        before its first event leaves the folder as it found it (removed if the run created it).
    progress : bool or callable, default False
        True draws a progress bar on stderr; a callable ``(now_s, orchestrator, usd) -> None`` is
        called after every event instead.
    resume : str or Path, optional
        Continue the killed (or finished) run of this results folder from its journal
        (:mod:`spottune.journal`, ``docs/design/decisions.md`` "Crash safety") with the spec stored there;
        ``spec``, ``output`` and ``options`` must then be left out. The replayed actions are checked
        against the journaled ones (:class:`spottune.errors.JournalMismatch` on a difference).
    **options
        :class:`~spottune.experiment.ExperimentSpec` fields (``max_steps=60``, ``theta``, ``top_k``,
        ``workload``, ``search_space``, ``backend``, ``predictor``, ``seed``, ``storage_path``, ...);
        with ``spec`` given they override it (None values are ignored). ``search="gp-ucb", trial_budget=n`` runs
        ``n`` of the search space's configurations one after another, each picked by cost-aware GP-UCB
        (:func:`search_gp_ucb`; decision SV13); a killed one continues when run again with the same spec and
        ``output`` (not through ``resume``).

    Notes on the predictor's training and on gaps in the price data near the start go to the
    ``spottune.api`` logger (level WARNING).

    Returns
    -------
    ResultGrid

    Raises
    ------
    ConfigError
        On an unknown option or an invalid value (raised before anything is loaded), an ``output`` or
        ``resume`` that is not a path, a start without enough price history, a backend this build cannot
        run, an ``output`` folder that already holds a run (continue it with ``resume=``), or a ``resume``
        folder without a journal. Price and market errors come from ``spotmarket``
        (:class:`spotmarket.errors.MarketError`).

    Examples
    --------
    >>> grid = tune(max_steps=60, predictor="constant")          # doctest: +SKIP
    >>> grid.get_best_result().config                             # doctest: +SKIP
    """
    from spottune.compose import check_supported, run
    from spottune.journal import open_run
    from spottune.results import ResultsJournal, _ledger_frame, curves_frame, prepare_output, trials_frame, write_results

    for name, value in (("output", output), ("resume", resume)):
        if value is not None and not isinstance(value, (str, os.PathLike)):
            raise ConfigError(f"{name} is {value!r}, but must be a folder path (str or os.PathLike)")
        if isinstance(value, str) and not value.strip():
            raise ConfigError(f"{name} is {value!r}, but must be a folder path, not empty")
    if not (progress is None or isinstance(progress, bool) or callable(progress)):
        raise ConfigError(f"progress is {progress!r}, but must be True, False or a callable (now_s, orchestrator, usd)")
    undo = None
    if resume is not None:
        if spec is not None or output is not None or options:
            raise ConfigError("resume continues a results folder with the spec stored in it: give no spec, "
                              "output or options with it")
        out = Path(resume)
        spec, run_journal, records = open_run(out)
    else:
        spec = _spec(spec, options)
        check_supported(spec)
        target = Path(output) if output is not None else default_output()
        if spec.search == "gp-ucb":
            return search_gp_ucb(spec, target, progress=progress)
        undo = _Undo(target)
        try:
            out = prepare_output(target)  # before any loading or training
            spec, run_journal, records = open_run(out, spec)
        except BaseException:
            undo()
            raise
    check_supported(spec)
    bar = _ProgressBar(spec) if progress is True else None
    journal = ResultsJournal(out, progress=bar if bar is not None else (progress or None))  # written as it goes
    try:
        result = run(spec, progress=journal, output=out, log_fn=log.warning, journal=run_journal, resume=records)
    except BaseException:
        if undo is not None and run_journal.n <= 1:  # refused before the first event: nothing to resume
            journal.close()
            run_journal.close()
            undo()
        raise
    finally:
        journal.close()
        run_journal.close()
        if bar is not None:
            bar.close()
    summary = write_results(out, result)
    ledger = _ledger_frame(result["record"])
    trials = trials_frame(result["orchestrator"], ledger, result.get("configs", {}))
    return ResultGrid(out, trials, ledger, summary, curves_frame(result["orchestrator"]))


# -- search: gp-ucb (decision SV13) -----------------------------------------------------------------------------------

def _round_spec(raw: Mapping[str, Any], config: Mapping[str, Any], **also: Any) -> dict[str, Any]:
    """The spec keys of one round: ``raw`` with the one configuration as its search space and ``top_k = 1``."""
    return {**raw, "search_space": {k: {"grid_search": [v]} for k, v in config.items()}, "num_samples": 1, "top_k": 1,
            "search": "random", "trial_budget": None, "rungs": [], **also}


def run_rounds(raw: Mapping[str, Any], spec: ExperimentSpec, trial_budget: int, out: Path, *, run_one: Any = None,
               progress: Any = False) -> dict[str, Any]:
    """Run ``trial_budget`` of the spec's configurations one after another, each picked by cost-aware GP-UCB from
    the results so far (:func:`spottune.scheduling.search_sequentially`), each a one-trial experiment.

    Round ``r`` runs configuration ``k`` in ``out / "trial-<r:03d>-c<k>"``; a round whose folder holds a
    ``summary.json`` is read back instead of run, so a killed search run again picks the same configurations. On the
    sim backend round ``r`` starts where round ``r - 1`` ended (``start_utc`` + the rounds' JCT), as one machine
    running them in turn would; with ``budget_usd`` each round may spend what the rounds before left, and the search
    ends when nothing is left.

    Parameters
    ----------
    raw : mapping
        The spec's keys as submitted (:meth:`ExperimentSpec.to_dict`; each round runs them with its configuration).
    spec : ExperimentSpec
        The parsed spec: its candidate configurations (:meth:`ExperimentSpec.trials`), metric, mode and seed.
    trial_budget : int
        Configurations to try, >= 1 (capped at the number of candidates).
    out : Path
        The search's folder.
    run_one : callable, optional
        Runs one round, ``run_one(raw, output=..., progress=...)`` returning a :class:`ResultGrid`; default
        :func:`tune`.
    progress : bool or callable, default False
        Passed to each round (as :func:`tune`'s).

    Returns
    -------
    dict
        ``total_cost_usd`` (USD), ``jct_s`` (seconds, the rounds' sum), ``trials_tried``, ``tried`` (per round:
        ``round``, ``index``, ``trial_id``, ``config``, ``value`` (None for a failed trial), ``usd``, ``folder``) and
        ``best`` (``trial_id``, ``config``, ``value``, ``metric``, ``usd``; None when no round finished).

    Raises
    ------
    ConfigError
        On a nested search space, or as a round's :func:`tune` raises it.
    """
    from spottune.results import read_results
    from spottune.scheduling import search_sequentially

    run_one = run_one if run_one is not None else tune
    trials = spec.trials()
    configs = [t.config for t in trials]
    rounds: list[dict[str, Any]] = []
    clock = {"jct_s": 0.0, "usd": 0.0}

    def run(r: int, k: int) -> float | None:
        also: dict[str, Any] = {}
        if spec.budget_usd is not None:
            left = spec.budget_usd - clock["usd"]
            if left <= 0:
                return None
            also["budget_usd"] = left
        if spec.backend == "sim" and clock["jct_s"] > 0:
            also["start_utc"] = (spec.start + pd.Timedelta(seconds=clock["jct_s"])).isoformat()
        folder = out / f"trial-{r:03d}-c{k}"
        if (folder / "summary.json").exists():
            done = read_results(folder)
            frame, summary = done["trials"], done["summary"]
        else:
            shutil.rmtree(folder, ignore_errors=True)
            grid = run_one(_round_spec(raw, configs[k], **also), output=folder, progress=progress)
            frame, summary = grid.get_dataframe(), grid.summary
        value = float(frame["metric"].iloc[0]) if len(frame) and pd.notna(frame["metric"].iloc[0]) else math.nan
        usd = float(summary.get("total_cost_usd", 0.0))
        clock["usd"] += usd
        clock["jct_s"] += float(summary.get("jct_s") or 0.0)
        rounds.append({"round": r, "index": k, "trial_id": trials[k].trial_id, "config": configs[k],
                       "value": value if math.isfinite(value) else None, "usd": usd, "folder": folder.name})
        return value

    search_sequentially(configs, run, trial_budget=trial_budget, mode=spec.mode, random_state=spec.seed)
    finite = [r for r in rounds if r["value"] is not None]
    best = None
    if finite:
        b = (min if spec.mode == "min" else max)(finite, key=lambda r: r["value"])
        best = {"trial_id": b["trial_id"], "config": b["config"], "value": b["value"], "metric": spec.metric,
                "usd": b["usd"]}
    return {"total_cost_usd": clock["usd"], "jct_s": clock["jct_s"], "trials_tried": len(rounds), "tried": rounds,
            "best": best}


#: The spec fields that decide which configurations a search tries, in the order it tries them: a search folder
#: continues only a search of the same (``search.json``; :func:`search_gp_ucb`).
_PICKS = ("workload", "search_space", "num_samples", "seed", "metric", "mode", "max_steps", "search", "trial_budget")
#: Summary counts of the rounds that add up over a search (:func:`search_gp_ucb`).
_ADDED = ("total_cost_usd", "refunded_usd", "steps_executed", "steps_lost", "instances", "revocations", "hops",
          "failures", "events", "actions")


def search_gp_ucb(spec: ExperimentSpec, output: str | Path, *, progress: bool | Any = False) -> ResultGrid:
    """Run a ``search="gp-ucb"`` experiment (:func:`tune` calls this): :func:`run_rounds` over its candidates, then
    one results folder for the whole search.

    ``output`` holds the rounds' folders and, written at the end, ``trials.csv``, ``ledger.csv``, ``curves.csv``
    and ``summary.json`` of the trials that ran (trial ids of the candidates, ``t00`` ...; ledger instance ids
    prefixed by the round, ``r000-``), so :meth:`ResultGrid.from_path`, ``spottune report`` and the dashboard read it
    as any run. The summary adds the rounds' counts and USD, their JCT in sequence, and ``search`` (the rounds: which
    configuration, its value and USD). Running the same spec into the same ``output`` again continues a killed search
(the same workload, search space, ``num_samples``, seed, metric, mode, ``max_steps`` and ``trial_budget``: the fields
of ``search.json``).

    Parameters
    ----------
    spec : ExperimentSpec
        With ``search == "gp-ucb"`` and its ``trial_budget``.
    output : str or Path
        The search's folder (created).
    progress : bool or callable, default False
        As :func:`tune`'s, per round.

    Returns
    -------
    ResultGrid
        One row per configuration tried, in the order tried.

    Raises
    ------
    ConfigError
        A spec whose search is not ``gp-ucb``, an ``output`` that holds another run or search, or as :func:`tune`
        raises for a round.
    """
    from spottune.results import _write_atomic, prepare_output, read_results

    if spec.search != "gp-ucb" or spec.trial_budget is None:
        raise ConfigError(f"search is {spec.search!r}, but search_gp_ucb runs search 'gp-ucb' with a trial_budget")
    out = Path(output)
    marker = out / "search.json"
    settings = spec.to_dict()
    picks = json.loads(json.dumps({k: settings[k] for k in _PICKS}, default=str))
    if out.is_dir() and any(out.iterdir()):
        try:
            same = json.loads(marker.read_text()) == picks
        except (OSError, ValueError):
            same = False
        if not same:
            raise ConfigError(f"output {str(out)!r} already holds files but no search of this spec; give a new "
                              "folder (or the same spec to continue its search)")
    out = prepare_output(out)
    _write_atomic(marker, json.dumps(picks, indent=2) + "\n")
    found = run_rounds(spec.to_dict(include_derived=False), spec, spec.trial_budget, out, progress=progress)
    trials, ledgers, curves = [], [], []
    summary: dict[str, Any] = {k: 0 for k in _ADDED}
    first_settings: dict[str, Any] = {}
    for r in found["tried"]:
        res = read_results(out / r["folder"])
        tid = r["trial_id"]
        trials.append(res["trials"].assign(trial_id=tid))
        ledgers.append(res["ledger"].assign(trial_id=tid, instance_id=f"r{r['round']:03d}-" +
                                            res["ledger"]["instance_id"].astype(str)))
        curves.append(res["curves"].assign(trial_id=tid))
        for k in _ADDED:
            summary[k] += res["summary"].get(k) or 0
        summary["budget_exhausted"] = summary.get("budget_exhausted") or res["summary"].get("budget_exhausted")
        first_settings = first_settings or dict(res["summary"].get("settings") or {})
    steps = summary["steps_executed"]
    t = pd.concat(trials, ignore_index=True) if trials else pd.DataFrame(columns=["trial_id", "state", "steps"])
    best = found["best"]
    summary.update({
        "jct_s": found["jct_s"], "jct_h": found["jct_s"] / 3600.0,
        "share_steps_refunded": (float(sum(float(lg.loc[lg["refunded"], "steps"].sum()) for lg in ledgers)) / steps
                                 if steps and ledgers and all("refunded" in lg for lg in ledgers) else 0.0),
        "top_k": [{"trial_id": best["trial_id"], "metric": best["value"]}] if best else [],
        "settings": {**first_settings, **{k: settings[k] for k in ("metric", "mode", "search", "trial_budget",
                                                                    "num_samples", "seed")},
                     "search_space": settings["search_space"]},
        "search": found,
    })
    if len(t):  # the search keeps one model, the best value found
        t["selected"] = False
        t["rank"] = pd.NA
        if best is not None:
            t.loc[t["trial_id"] == best["trial_id"], ["selected", "rank"]] = [True, 1]
    ledger = pd.concat(ledgers, ignore_index=True) if ledgers else pd.DataFrame()
    curve = pd.concat(curves, ignore_index=True) if curves else pd.DataFrame(columns=["trial_id", "step", "value"])
    _write_atomic(out / "ledger.csv", ledger.to_csv(index=False))
    _write_atomic(out / "trials.csv", t.to_csv(index=False))
    _write_atomic(out / "curves.csv", curve.to_csv(index=False))
    _write_atomic(out / "summary.json", json.dumps(summary, indent=2, default=str) + "\n")
    return ResultGrid.from_path(out)
