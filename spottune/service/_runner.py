"""The study runner: a background thread of the server that runs queued studies through :func:`spottune.tune`.

Up to ``max_studies`` studies at once, each on its own thread, and at least one per team with work (decision SV8):
a team with a queued study and none running starts one even when the slots are taken. A freed slot goes to such a
team if there is one, picked among those by ease.ml's GREEDY rule with the HYBRID
fall-back to round robin (:class:`spottune.service._orgplan.OrgPlan`, SV12). With an org budget set, the starting
study's ``max_usd_per_hour`` is its team's max-min fair allocation divided by the team's running studies, on
demands learned from the teams' rewards (SV11); each such round is stored with its accounting. A study whose trial
budget is smaller than its search space tries that many configurations, picked by cost-aware GP-UCB
(:mod:`spottune.service._budgeted`, SV10). A study runs exactly as ``spottune run`` would run its spec, in
``<data dir>/studies/<id>`` (on aws and ray with the org's settings written into the spec first, SV16); cancelling
a running study stops it at its next event. A study left ``running`` by a killed server is continued from its
journal (``tune(resume=...)``) when the runner starts again.

Every ``round_period_s`` (default an hour) of the server's clock, a round re-splits the org budget among the teams
with running studies and moves each running study's cap to its team's new allocation divided by the team's running
studies (SV14). The study's backend reads the cap at its next launch: the runner hands it to the backend from the
study's progress callback (``bind_backend``). The teams' learned demands are stored after each lesson and read back
at start, so a restarted server continues from them.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select

from spottune.service._orgplan import OrgPlan, StudyGrant, TeamBounds, reward_of
from spottune.service._store import Org, OrgRound, Store, Study, Team

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
        summary["trial_states"] = [str(x) for x in grid.get_dataframe()["state"]]
    except Exception:  # noqa: BLE001  (a grid without trials: no states, the study teaches the fair share nothing)
        summary["trial_states"] = []
    try:
        best = grid.get_best_result()
        summary["best"] = {"trial_id": best.trial_id, "config": best.config, "value": best.value,
                           "metric": best.metric, "usd": best.usd}
    except Exception:  # noqa: BLE001  (no finished trial: no best, the summary says so)
        summary["best"] = None
    return summary


class _StudyProgress:
    """A study's progress callback: stops it when cancelled or when the server stops, and hands the study's current
    cap (``runner.caps``, USD/hour) to its backend, which checks it at every launch (SV14)."""

    def __init__(self, runner: StudyRunner, study_id: int):
        self.runner, self.study_id = runner, study_id
        self.backend: Any = None

    def bind_backend(self, backend: Any) -> None:
        """Called once by the run with its backend (:class:`spottune.backends.Driver`)."""
        self.backend = backend
        self._apply_cap()

    def _apply_cap(self) -> None:
        cap = self.runner.caps.get(self.study_id)
        if self.backend is not None and cap is not None and self.backend.max_usd_per_hour != cap:
            self.backend.max_usd_per_hour = cap

    def __call__(self, *_: Any) -> None:
        runner = self.runner
        if runner._stop.is_set():
            raise StudyCancelled("the server is stopping")
        with runner._lock:
            cancelled = self.study_id in runner._cancel
        if cancelled:
            raise StudyCancelled(f"study {self.study_id} was cancelled")
        self._apply_cap()


class StudyRunner:
    """Runs the store's queued studies, up to ``max_studies`` at once (and one per team with work), from a daemon
    thread.

    Parameters
    ----------
    store : Store
    data_dir : str or Path
        Studies write their results folders under ``data_dir/studies/<id>``.
    tune : callable, optional
        The run function (default :func:`spottune.tune`); its keywords are ``output``, ``progress`` and ``resume``.
    poll_s : float, default 0.2
        Wall seconds between two looks at the queue when idle.
    max_studies : int, default 4
        Studies run at once (slots), >= 1; a team with work and no running study starts one beyond them.
    plan : OrgPlan, optional
        The fair split and team pick (a fresh one by default); it continues from the learned demands in the store.
    round_period_s : float, default 3600.0
        Wall seconds of the server between two rounds of the org budget over the running studies (SV14).
    cloud : AwsServing or RayServing, optional
        The org's settings of a cloud backend (:mod:`spottune.service._cloud`, SV16): each run's spec gets them
        (``cloud.study_spec``) before it starts; a resume reads the spec its folder kept.
    """

    def __init__(self, store: Store, data_dir: str | Path, *, tune: Callable[..., Any] | None = None,
                 poll_s: float = 0.2, max_studies: int = 4, plan: OrgPlan | None = None,
                 round_period_s: float = 3600.0, cloud: Any = None):
        self.store, self.data_dir, self.poll_s = store, Path(data_dir), poll_s
        self.cloud = cloud
        self.max_studies = max(1, int(max_studies))
        self.plan = plan if plan is not None else OrgPlan()
        learned = store.learned_demands()
        if learned:
            self.plan.restore(learned)
        self.round_period_s = float(round_period_s)
        #: Each running study's current cap, USD/hour (what its backend checks at its next launch).
        self.caps: dict[int, float] = {}
        self._tune = tune
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._cancel: set[int] = set()
        self._lock = threading.Lock()
        self._running: dict[int, threading.Thread] = {}
        self._grants: dict[int, tuple[str, StudyGrant]] = {}
        #: Per team, its finished studies' rewards in order (what the team pick learns from).
        self.results: dict[str, list[float]] = {}
        self.thread = threading.Thread(target=self._loop, name="spottune-study-runner", daemon=True)

    def start(self) -> None:
        """Start the thread (it first continues the studies a killed server left running)."""
        self.thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask the thread to stop after the current study's next event, and wait for it."""
        self._stop.set()
        self._wake.set()
        self.thread.join(timeout_s)
        for t in list(self._running.values()):
            t.join(timeout_s)

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
        if self.cloud is None:
            return self._tune
        base, cloud, studies = self._tune, self.cloud, self.data_dir / "studies"

        def tune_in_cloud(spec: Any = None, /, **kw: Any) -> Any:  # each run (a budgeted study's rounds too) its own
            if spec is None:
                return base(**kw)
            return base(cloud.study_spec(spec, kw["output"], studies), **kw)

        return tune_in_cloud

    def _next(self, full: bool = False) -> int | None:
        """Claim the next queued study for a free slot (its id), or None: nothing queued, or an org budget of 0.

        With ``full`` (every one of the ``max_studies`` slots taken), only a team with no running study may start one:
        each team with work runs at least one study."""
        with self.store.session.begin() as s:
            rows = s.execute(select(Study, Team.name).join(Team).where(Study.state == "queued")
                             .order_by(Study.id)).all()
            budget = s.get(Org, 1).budget_usd_per_hour  # type: ignore[union-attr]
            if not rows or budget == 0:
                return None
            running: dict[str, int] = {}
            for (name,) in s.execute(select(Team.name).join(Study).where(Study.state == "running")).all():
                running[name] = running.get(name, 0) + 1
            queued = sorted({name for _, name in rows})
            idle = [t for t in queued if running.get(t, 0) == 0]
            if full and not idle:
                return None
            with self._lock:
                team = self.plan.pick(idle or queued, self.results).team
                study = next(st for st, name in rows if name == team)
                if budget is not None:
                    entitlements, bounds = self._terms(s)
                    grant = self.plan.allocate(budget, entitlements, running, team, bounds)
                    own = json.loads(study.spec_json).get("max_usd_per_hour")
                    study.max_usd_per_hour = min(grant.max_usd_per_hour, own) if own else grant.max_usd_per_hour
                    self.caps[study.id] = study.max_usd_per_hour
                    if not own or own >= grant.max_usd_per_hour:  # it runs at the grant: its reward teaches about it
                        self._grants[study.id] = (team, grant)
                    s.add(OrgRound(study_id=study.id, budget_usd_per_hour=budget,
                                   allocations_json=json.dumps(grant.round.allocations),
                                   demands_json=json.dumps(grant.round.demands),
                                   utility_json=json.dumps(grant.utility), **grant.accounting))
            study.state = "running"
            study.started_utc = datetime.now(UTC)
            study.output = str(self.data_dir / "studies" / str(study.id))
            return study.id

    @staticmethod
    def _terms(s: Any) -> tuple[dict[str, float], dict[str, TeamBounds]]:
        """Every team's entitlement, and the minimums and caps of those that have one."""
        entitlements, bounds = {}, {}
        for name, ent, lo, hi in s.execute(select(Team.name, Team.entitlement, Team.min_usd_per_hour,
                                                  Team.max_usd_per_hour)).all():
            entitlements[name] = ent
            if lo is not None or hi is not None:
                bounds[name] = TeamBounds(lo, hi)
        return entitlements, bounds

    def rebalance(self) -> dict[int, float] | None:
        """One hourly round (SV14): split the org budget among the teams with running studies, move each running
        study's cap to its team's allocation divided by the team's running studies (or the spec's own cap, if
        lower), and store the round (``study_id`` None).

        Returns
        -------
        dict of int to float or None
            The running studies' new caps (USD/hour); None when no budget > 0 is set or nothing runs.
        """
        with self.store.session.begin() as s:
            budget = s.get(Org, 1).budget_usd_per_hour  # type: ignore[union-attr]
            rows = s.execute(select(Study, Team.name).join(Team).where(Study.state == "running")).all()
            if not budget or not rows:
                return None
            running = Counter(name for _, name in rows)
            caps: dict[int, float] = {}
            with self._lock:
                entitlements, bounds = self._terms(s)
                grant = self.plan.rebalance(budget, entitlements, running, bounds)
                for study, team in rows:
                    share = grant.round.allocations[team] / grant.loads[team]
                    own = json.loads(study.spec_json).get("max_usd_per_hour")
                    caps[study.id] = study.max_usd_per_hour = min(share, own) if own else share
                    if not own or own >= share:  # it runs at the share: its reward teaches about it
                        self._grants[study.id] = (team, StudyGrant(max_usd_per_hour=share, round=grant.round,
                                                                   loads=grant.loads, accounting=grant.accounting,
                                                                   utility=grant.utility))
                    else:
                        self._grants.pop(study.id, None)
                self.caps.update(caps)
            s.add(OrgRound(study_id=None, budget_usd_per_hour=budget,
                           allocations_json=json.dumps(grant.round.allocations),
                           demands_json=json.dumps(grant.round.demands), utility_json=json.dumps(grant.utility),
                           **grant.accounting))
        return caps

    def _progress(self, study_id: int) -> _StudyProgress:
        return _StudyProgress(self, study_id)

    def run_one(self, study_id: int, resume: bool) -> None:
        """Run (or continue) one claimed study and record how it ended."""
        with self.store.session.begin() as s:
            study = s.get(Study, study_id)
            spec, out, budget = json.loads(study.spec_json), Path(study.output), study.trial_budget
            if study.max_usd_per_hour is not None:  # the fair-share cap (SV11), moved by each round (SV14)
                spec["max_usd_per_hour"] = study.max_usd_per_hour
                self.caps[study_id] = study.max_usd_per_hour
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
        try:
            learned = self._learn(study_id, state, summary)
        finally:  # the row last: its team counts as idle from then on, and its next study is granted on what this taught
            with self.store.session.begin() as s:
                study = s.get(Study, study_id)
                study.state, study.ended_utc = state, datetime.now(UTC)
                study.summary_json = json.dumps(summary) if summary is not None else None
                study.error = error
        if learned is not None:  # a restarted server continues from it (SV14)
            self.store.save_learned_demands(learned)
        self._wake.set()  # a slot is free

    def _learn(self, study_id: int, state: str, summary: dict[str, Any] | None) -> Any:
        """Forget an ended study's cap and grant; a finished one's reward goes to its team's results and, if it ran at
        its grant, to the plan. Returns the plan's learned demands when they changed, else None."""
        learned = None
        with self._lock:
            self._cancel.discard(study_id)
            self.caps.pop(study_id, None)
            granted = self._grants.pop(study_id, None)
            if state == "finished" and summary is not None:
                if "tried" in summary:  # a trial-budget study: a tried configuration without a value was not on track
                    states = ["finished" if r["value"] is not None else "failed" for r in summary["tried"]]
                else:
                    states = summary.get("trial_states", [])
                reward = reward_of(states)
                if reward is not None:
                    with self.store.session() as s:
                        team = s.scalar(select(Team.name).join(Study).where(Study.id == study_id))
                    self.results.setdefault(team, []).append(reward)
                    if granted is not None:
                        self.plan.observe(granted[1], granted[0], reward)
                        learned = self.plan.learned()
        return learned

    def _launch(self, study_id: int, resume: bool) -> None:
        thread = threading.Thread(target=self.run_one, args=(study_id, resume), name=f"spottune-study-{study_id}",
                                  daemon=True)
        self._running[study_id] = thread
        thread.start()

    def _loop(self) -> None:
        with self.store.session() as s:  # studies a killed server left running continue first, each on a thread
            left = list(s.scalars(select(Study.id).where(Study.state == "running").order_by(Study.id)))
        for study_id in left:
            self._launch(study_id, True)
        next_round = time.monotonic() + self.round_period_s
        while not self._stop.is_set():
            if time.monotonic() >= next_round:
                next_round += self.round_period_s
                try:
                    self.rebalance()
                except Exception as exc:  # noqa: BLE001  (a failed round is logged; caps stay as they were)
                    log.warning("fair-share round failed: %s", _one_line(exc))
            for study_id, thread in list(self._running.items()):
                if not thread.is_alive():
                    del self._running[study_id]
            claimed = self._next(full=len(self._running) >= self.max_studies)
            if claimed is None:
                self._wake.wait(max(0.0, min(self.poll_s, next_round - time.monotonic())))
                self._wake.clear()
                continue
            self._launch(claimed, False)
