"""The study runner: a background thread of the server that runs queued studies through :func:`spottune.tune`.

One study at a time (decision SV8); a study whose trial budget is smaller than its search space tries that many
configurations, picked by cost-aware GP-UCB (:mod:`spottune.service._budgeted`, SV10), the next one taken from the teams with queued studies in round-robin order
(ease.ml's fall-back rule; GREEDY needs the studies' GP bounds, which the runner does not compute yet). A study
runs exactly as ``spottune run`` would run its spec, in ``<data dir>/studies/<id>``; cancelling a running study
stops it at its next event. A study left ``running`` by a killed server is continued from its journal
(``tune(resume=...)``) when the runner starts again.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select

from spottune.service._store import Store, Study, Team

__all__ = ["StudyCancelled", "StudyRunner"]

log = logging.getLogger(__name__)


class StudyCancelled(Exception):
    """Raised from a study's progress callback to stop it (the study was cancelled)."""


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:500]


def summarise(grid: Any) -> dict[str, Any]:
    """What the store keeps of a finished study: cost, trials and the best result (JSON-ready)."""
    summary = {k: grid.summary.get(k) for k in ("total_cost_usd", "jct_s", "steps_executed", "revocations") if k in grid.summary}
    try:
        best = grid.get_best_result()
        summary["best"] = {"trial_id": best.trial_id, "config": best.config, "value": best.value,
                           "metric": best.metric, "usd": best.usd}
    except Exception:  # noqa: BLE001  (no finished trial: no best, the summary says so)
        summary["best"] = None
    return summary


class StudyRunner:
    """Runs the store's queued studies, one at a time, on a daemon thread.

    Parameters
    ----------
    store : Store
    data_dir : str or Path
        Studies write their results folders under ``data_dir/studies/<id>``.
    tune : callable, optional
        The run function (default :func:`spottune.tune`); its keywords are ``output``, ``progress`` and ``resume``.
    poll_s : float, default 0.2
        Wall seconds between two looks at the queue when idle.
    """

    def __init__(self, store: Store, data_dir: str | Path, *, tune: Callable[..., Any] | None = None,
                 poll_s: float = 0.2):
        self.store, self.data_dir, self.poll_s = store, Path(data_dir), poll_s
        self._tune = tune
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._cancel: set[int] = set()
        self._lock = threading.Lock()
        self._last_team: str | None = None
        self.thread = threading.Thread(target=self._loop, name="spottune-study-runner", daemon=True)

    def start(self) -> None:
        """Start the thread (it first continues the studies a killed server left running)."""
        self.thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask the thread to stop after the current study's next event, and wait for it."""
        self._stop.set()
        self._wake.set()
        self.thread.join(timeout_s)

    def notify(self) -> None:
        """A study was queued: look now instead of at the next poll."""
        self._wake.set()

    def cancel(self, study_id: int) -> None:
        """Stop the running study ``study_id`` at its next event."""
        with self._lock:
            self._cancel.add(study_id)

    def _tune_fn(self) -> Callable[..., Any]:
        if self._tune is None:
            from spottune.api import tune

            self._tune = tune
        return self._tune

    def _next(self) -> tuple[int, bool] | None:
        """Claim the next study: (id, resume?); a study left running by a killed server comes first."""
        with self.store.session.begin() as s:
            left = s.scalar(select(Study).where(Study.state == "running").order_by(Study.id))
            if left is not None:
                return left.id, True
            rows = s.execute(select(Study, Team.name).join(Team).where(Study.state == "queued")
                             .order_by(Study.id)).all()
            if not rows:
                return None
            teams = sorted({name for _, name in rows})
            later = [t for t in teams if self._last_team is not None and t > self._last_team]
            team = later[0] if later else teams[0]
            study = next(st for st, name in rows if name == team)
            self._last_team = team
            study.state = "running"
            study.started_utc = datetime.now(UTC)
            study.output = str(self.data_dir / "studies" / str(study.id))
            return study.id, False

    def _progress(self, study_id: int) -> Callable[..., None]:
        def check(*_: Any) -> None:
            if self._stop.is_set():
                raise StudyCancelled("the server is stopping")
            with self._lock:
                cancelled = study_id in self._cancel
            if cancelled:
                raise StudyCancelled(f"study {study_id} was cancelled")
        return check

    def run_one(self, study_id: int, resume: bool) -> None:
        """Run (or continue) one claimed study and record how it ended."""
        with self.store.session.begin() as s:
            study = s.get(Study, study_id)
            spec, out, budget = json.loads(study.spec_json), Path(study.output), study.trial_budget
            if study.cancel_requested:
                self.cancel(study_id)
        tune = self._tune_fn()
        state, summary, error = "finished", None, None
        try:
            from spottune.journal import JOURNAL_FILE, holds_run

            from spottune.experiment import ExperimentSpec

            parsed = ExperimentSpec.from_dict(spec)
            if budget is not None and budget < parsed.n_trials:  # GP-UCB picks which configurations run
                from spottune.service._budgeted import run_budgeted

                out.mkdir(parents=True, exist_ok=True)
                summary = run_budgeted(spec, parsed, budget, out, tune=tune, progress=self._progress(study_id))
            elif resume and holds_run(out / JOURNAL_FILE):
                summary = summarise(tune(resume=out, progress=self._progress(study_id)))
            else:
                summary = summarise(tune(spec, output=out, progress=self._progress(study_id)))
        except StudyCancelled as exc:
            if self._stop.is_set() and study_id not in self._cancel:
                return  # the server stops: the study stays running and continues from its journal next start
            state, error = "cancelled", str(exc)
        except Exception as exc:  # noqa: BLE001  (the study fails with a one-line reason; the service lives on)
            log.warning("study %s failed: %s", study_id, _one_line(exc))
            state, error = "failed", _one_line(exc)
        with self.store.session.begin() as s:
            study = s.get(Study, study_id)
            study.state, study.ended_utc = state, datetime.now(UTC)
            study.summary_json = json.dumps(summary) if summary is not None else None
            study.error = error
        with self._lock:
            self._cancel.discard(study_id)

    def _loop(self) -> None:
        while not self._stop.is_set():
            claimed = self._next()
            if claimed is None:
                self._wake.wait(self.poll_s)
                self._wake.clear()
                continue
            self.run_one(*claimed)
