"""Early-stopping evaluation on recorded learning curves: studies, asynchronous replay, top-k metrics.

No training: every configuration's curve is recorded to its end, so any stopping
rule can be replayed and judged against the true final losses.

- **Grid** (:class:`StudyPool`): each recorded curve is put on a common grid of ``n_steps`` progress
  steps, step ``s`` being the point ``s / n_steps`` through the configuration's own run (``np.interp``
  between recorded points, the first value before the first point). opda configurations train 20–100
  epochs; on the grid every configuration costs ``n_steps`` to train fully (the same convention as
  ``spottune.evaluation._studies``, [I]).
- **Studies** (:func:`sample_studies`): the pool is split once, with a seed, into disjoint TUNING and
  TEST halves of configurations; each study draws ``size`` configurations without replacement from
  one half with its own seed (``default_rng([seed, study])``). Settings are chosen on tuning studies
  and reported on test studies, which contain none of the tuning configurations.
- **Replay** (:func:`replay`): ``workers`` trials run at once, launched in study order; every step
  of every trial takes one time unit, and reports are processed in (time, trial) order. A stopper
  sees ``launch``, then ``report(trial, step, loss)`` after each step ``< n_steps`` (True = stop),
  then ``complete(trial, loss)`` at ``n_steps``. This is how Optuna and Ray Tune see an
  asynchronous study with a fixed worker pool.
- **Metrics** (:func:`study_metrics`): the method's pick is the trial with the lowest final loss
  among those it trained to the end (what a user would deploy). ``top1``: the pick is the study's
  true best; ``top3``: the pick's true rank is ≤ 3; ``regret``: final loss of the pick minus the
  best final loss (loss units; for ``loss = 1 − accuracy`` this is accuracy points);
  ``cost``: steps trained ÷ (trials × ``n_steps``), i.e. 1.0 = train everything; ``steps``: steps
  trained. A study where nothing was trained to the end has no pick: top-1/top-3 count as misses,
  regret is NaN (excluded from its mean) and a warning is issued.

[I] EarlyCurve's older "top-3 recall" (true best among the predicted top-3, all trained to the end)
equals ``top1`` here for a method that trains its predicted top-3 to the end.
"""

from __future__ import annotations

import heapq
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from earlycurve.errors import InvalidCurveError
from earlycurve.evaluation._datasets import CurveSet, RecordedCurve

__all__ = [
    "StudyPool",
    "Study",
    "sample_studies",
    "split_pool",
    "replay",
    "study_metrics",
    "summarize",
    "choose_best",
    "Stopper",
    "METRICS",
    "evaluate_stopper",
    "tune_and_report",
    "grid_steps",
]

METRICS = ("top1", "top3", "regret", "cost", "steps")


def grid_steps(curve_set: CurveSet, cap: int = 50) -> int:
    """Progress steps of the study grid: the median number of recorded points per curve, at most ``cap``, at least 2."""
    n = int(np.median([len(c.steps) for c in curve_set.curves])) if curve_set.curves else 2
    return max(2, min(cap, n))



@dataclass(frozen=True, slots=True, kw_only=True)
class StudyPool:
    """Recorded curves of one data set on a common progress grid.

    Attributes
    ----------
    name : str
    curve_ids : tuple of str
    grid : ndarray of shape (n_curves, n_steps)
        Loss at progress steps 1 .. n_steps; ``grid[:, -1]`` is the true final loss.
    n_steps : int
    """

    name: str
    curve_ids: tuple[str, ...]
    grid: np.ndarray
    n_steps: int

    @classmethod
    def from_curves(cls, curve_set: CurveSet | Sequence[RecordedCurve], n_steps: int, name: str | None = None) -> StudyPool:
        """Put every curve of a set on ``n_steps`` progress steps (module docstring).

        Parameters
        ----------
        curve_set : CurveSet or sequence of RecordedCurve
        n_steps : int
            Progress steps of the grid (≥ 2); step s is s / n_steps through each curve's own run.
        name : str, optional
            Default: the set's name.

        Returns
        -------
        StudyPool

        Raises
        ------
        InvalidCurveError
            ``n_steps < 2`` or no curve.
        """
        curves = curve_set.curves if isinstance(curve_set, CurveSet) else tuple(curve_set)
        if n_steps < 2:
            raise InvalidCurveError(f"n_steps is {n_steps!r}, but must be >= 2")
        if not curves:
            raise InvalidCurveError("no curve to build a study pool from")
        frac = np.arange(1, n_steps + 1) / n_steps
        grid = np.array([np.interp(frac * c.max_steps, c.steps, c.values) for c in curves])
        grid[:, -1] = [c.final for c in curves]
        label = name or (curve_set.name if isinstance(curve_set, CurveSet) else "curves")
        return cls(name=label, curve_ids=tuple(c.curve_id for c in curves), grid=grid, n_steps=int(n_steps))


@dataclass(frozen=True, slots=True, kw_only=True)
class Study:
    """One sampled study.

    Attributes
    ----------
    index : int
        Study number within its split.
    split : {"tuning", "test"}
    ids : ndarray of shape (size,)
        Row indices into the pool's grid, in launch order.
    curves : ndarray of shape (size, n_steps)
    """

    index: int
    split: str
    ids: np.ndarray
    curves: np.ndarray

    @property
    def finals(self) -> np.ndarray:
        """True final losses, shape (size,)."""
        return self.curves[:, -1]


def split_pool(pool: StudyPool, seed: int = 0) -> dict[str, np.ndarray]:
    """Disjoint ``"tuning"`` and ``"test"`` halves of the pool's rows (sorted), from ``default_rng([seed, 0])``.

    Parameters
    ----------
    pool : StudyPool
    seed : int, default 0

    Returns
    -------
    dict of str -> ndarray of int
        ``"tuning"`` and ``"test"`` row indices (decision ES2).
    """
    return split_indices(pool.grid.shape[0], seed)


def split_indices(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Disjoint ``"tuning"`` and ``"test"`` halves of ``range(n)`` (sorted), from ``default_rng([seed, 0])``.

    :func:`split_pool` on a pool of ``n`` curves; ``spottune simulate``'s recorded studies ``<set>@tuning`` and
    ``<set>@test`` sample from the same halves of the set's curves (decision ES2).

    Parameters
    ----------
    n : int
        Curves, >= 0.
    seed : int, default 0

    Returns
    -------
    dict of str -> ndarray of int
        ``"tuning"`` (``n // 2`` indices) and ``"test"`` (the rest).
    """
    perm = np.random.default_rng([seed, 0]).permutation(n)
    return {"tuning": np.sort(perm[: n // 2]), "test": np.sort(perm[n // 2:])}


def sample_studies(pool: StudyPool, *, n_tuning: int, n_test: int, size: int = 16, seed: int = 0) -> tuple[list[Study], list[Study]]:
    """Seeded TUNING and TEST studies from disjoint halves of the pool (module docstring).

    Parameters
    ----------
    pool : StudyPool
    n_tuning, n_test : int
        Studies per split, each ≥ 1.
    size : int, default=16
        Configurations per study; each half must hold at least ``size`` curves.
    seed : int, default=0

    Returns
    -------
    tuning, test : list of Study

    Raises
    ------
    InvalidCurveError
        Too few curves for ``size`` in a half, or ``n_tuning``/``n_test``/``size`` < 1.
    """
    if min(n_tuning, n_test, size) < 1:
        raise InvalidCurveError(f"n_tuning {n_tuning}, n_test {n_test} and size {size} must be >= 1")
    halves = split_pool(pool, seed)
    if min(len(h) for h in halves.values()) < size:
        raise InvalidCurveError(f"pool {pool.name!r} has {pool.grid.shape[0]} curves: too few for two halves "
                                f"of studies of {size}")
    out = {}
    for split, count, code in (("tuning", n_tuning, 1), ("test", n_test, 2)):
        studies = []
        for i in range(count):
            ids = np.random.default_rng([seed, code, i]).choice(halves[split], size=size, replace=False)
            studies.append(Study(index=i, split=split, ids=ids, curves=pool.grid[ids]))
        out[split] = studies
    return out["tuning"], out["test"]


class Stopper:
    """What :func:`replay` drives; subclasses override what they need (default: never stop)."""

    def reset(self, study: Study) -> None:
        """A new study begins.

        Parameters
        ----------
        study : Study
            The study about to be replayed.
        """

    def launch(self, trial: int) -> None:
        """Trial ``trial`` (row of ``study.curves``) starts.

        Parameters
        ----------
        trial : int
            Row of ``study.curves``.
        """

    def report(self, trial: int, step: int, loss: float) -> bool:
        """Loss after ``step`` steps (``step < n_steps``); return True to stop the trial now.

        Parameters
        ----------
        trial : int
            Row of ``study.curves``.
        step : int
            Grid steps trained so far, 1 .. n_steps - 1.
        loss : float
            The curve's value there (lower is better).

        Returns
        -------
        bool
            True to stop the trial.
        """
        return False

    def complete(self, trial: int, loss: float) -> None:
        """The trial reached ``n_steps`` with final loss ``loss``.

        Parameters
        ----------
        trial : int
            Row of ``study.curves``.
        loss : float
            Final loss.
        """


def replay(study: Study, stopper: Stopper, workers: int = 4) -> np.ndarray:
    """Run a stopper over a study with ``workers`` parallel workers (module docstring).

    Parameters
    ----------
    study : Study
    stopper : Stopper
        Reset at the start; asked at every step.
    workers : int, default 4
        Parallel workers; trials launch in study order as workers free up (decision ES4).

    Returns
    -------
    steps : ndarray of shape (size,), int
        Steps each trial was trained (``n_steps`` = trained to the end).

    Raises
    ------
    InvalidCurveError
        If ``workers < 1``.
    """
    if workers < 1:
        raise InvalidCurveError(f"workers is {workers!r}, but must be >= 1")
    curves = study.curves
    n, n_steps = curves.shape
    stopper.reset(study)
    steps = np.zeros(n, dtype=int)
    events: list[tuple[int, int, int]] = []  # (time, trial, step)
    next_trial = 0

    def start(now: int) -> None:
        nonlocal next_trial
        if next_trial < n:
            stopper.launch(next_trial)
            heapq.heappush(events, (now + 1, next_trial, 1))
            next_trial += 1

    for _ in range(min(workers, n)):
        start(0)
    while events:
        now, trial, step = heapq.heappop(events)
        steps[trial] = step
        loss = float(curves[trial, step - 1])
        if step >= n_steps:
            stopper.complete(trial, loss)
            start(now)
        elif stopper.report(trial, step, loss):
            start(now)
        else:
            heapq.heappush(events, (now + 1, trial, step + 1))
    return steps


def study_metrics(study: Study, steps: np.ndarray, *, completed: np.ndarray | None = None) -> dict[str, float]:
    """Top-1, top-3, regret, cost and steps of one replayed study (module docstring).

    Parameters
    ----------
    study : Study
    steps : ndarray of shape (size,)
        Steps trained per trial.
    completed : ndarray of bool, optional
        Trials trained to the end; default ``steps == n_steps``.

    Returns
    -------
    dict of str -> float
        ``cost`` (share of the study's full training), ``steps``, ``top1``, ``top3``, ``regret`` (NaN and 0
        accuracies when no trial finished).
    """
    finals = study.finals
    n, n_steps = study.curves.shape
    done = steps >= n_steps if completed is None else np.asarray(completed, dtype=bool)
    out = {"cost": float(np.sum(steps) / (n * n_steps)), "steps": float(np.sum(steps))}
    if not np.any(done):
        warnings.warn(f"study {study.split}#{study.index}: no trial trained to the end, no pick", stacklevel=2)
        return out | {"top1": 0.0, "top3": 0.0, "regret": float("nan")}
    pick = np.flatnonzero(done)[np.argmin(finals[done])]
    rank = int(np.sum(finals < finals[pick]))  # 0 = best
    return out | {"top1": float(rank == 0), "top3": float(rank < 3), "regret": float(finals[pick] - finals.min())}


def summarize(rows: Sequence[Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """Spread over studies: per metric ``mean``, ``sd`` (ddof 1), ``q25``, ``median``, ``q75``, ``n``.

    NaN values (a study without a pick) are left out of that metric.

    Parameters
    ----------
    rows : sequence of mapping
        :func:`study_metrics` rows.

    Returns
    -------
    dict of str -> dict of str -> float
        Metric -> statistic -> value.
    """
    out = {}
    for m in METRICS:
        x = np.array([r[m] for r in rows if m in r], dtype=float)
        x = x[np.isfinite(x)]
        if x.size == 0:
            out[m] = {"mean": float("nan"), "sd": float("nan"), "q25": float("nan"), "median": float("nan"),
                      "q75": float("nan"), "n": 0}
            continue
        q25, med, q75 = np.percentile(x, [25, 50, 75])
        out[m] = {"mean": float(x.mean()), "sd": float(x.std(ddof=1)) if x.size > 1 else 0.0,
                  "q25": float(q25), "median": float(med), "q75": float(q75), "n": int(x.size)}
    return out


def choose_best(summaries: Mapping[str, Mapping[str, Mapping[str, float]]], *, target_top3: float = 0.95) -> str:
    """The setting to report: the cheapest (mean cost) whose mean top-3 accuracy reaches ``target_top3``;
    if none does, the most accurate (mean top-3, then lower cost). Ties: first in the mapping.

    Parameters
    ----------
    summaries : mapping of setting name to :func:`summarize` output, **on tuning studies only**.
    target_top3 : float, default 0.95

    Returns
    -------
    str
        The chosen setting's name.

    Raises
    ------
    InvalidCurveError
        If ``summaries`` is empty.
    """
    if not summaries:
        raise InvalidCurveError("no setting to choose from")
    names = list(summaries)
    ok = [s for s in names if summaries[s]["top3"]["mean"] >= target_top3 - 1e-12]
    if ok:
        return min(ok, key=lambda s: (summaries[s]["cost"]["mean"], names.index(s)))
    return min(names, key=lambda s: (-summaries[s]["top3"]["mean"], summaries[s]["cost"]["mean"], names.index(s)))


def evaluate_stopper(studies: Sequence[Study], make: Callable[[], Stopper], workers: int = 4) -> list[dict[str, float]]:
    """Replay a fresh stopper (``make()``) on each study; one :func:`study_metrics` row per study.

    Parameters
    ----------
    studies : sequence of Study
    make : callable () -> Stopper
    workers : int, default 4

    Returns
    -------
    list of dict
        One :func:`study_metrics` row per study.
    """
    rows = []
    for study in studies:
        steps = replay(study, make(), workers)
        rows.append(study_metrics(study, steps))
    return rows


def tune_and_report(grid: Mapping[str, Callable[[], Stopper]], tuning: Sequence[Study], test: Sequence[Study], *,
                    workers: int = 4, target_top3: float = 0.95) -> dict:
    """Choose a method's setting on TUNING studies, report the library default and the choice on TEST studies.

    Parameters
    ----------
    grid : mapping of setting name to stopper factory
        The first entry is the library default.
    tuning, test : sequence of Study
        Disjoint (:func:`sample_studies`); the choice (:func:`choose_best`) sees ``tuning`` only.
    workers : int, default 4
    target_top3 : float, default 0.95
        As :func:`choose_best`.

    Returns
    -------
    result : dict
        ``grid_size``; ``tuning`` (setting -> mean top1/top3/regret/cost on tuning); ``default`` and
        ``best``: ``setting``, ``tuning`` and ``test`` (:func:`summarize`).

    Raises
    ------
    InvalidCurveError
        If ``grid`` is empty.
    """
    if not grid:
        raise InvalidCurveError("empty settings grid")
    tuned = {name: summarize(evaluate_stopper(tuning, make, workers)) for name, make in grid.items()}
    best = choose_best(tuned, target_top3=target_top3)
    out = {"grid_size": len(grid),
           "tuning": {k: {m: v[m]["mean"] for m in ("top1", "top3", "regret", "cost")} for k, v in tuned.items()}}
    for label, name in (("default", next(iter(grid))), ("best", best)):
        out[label] = {"setting": name, "tuning": tuned[name], "test": summarize(evaluate_stopper(test, grid[name], workers))}
    return out
