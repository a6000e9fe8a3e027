"""The runner's org plan: the org budget's max-min fair split with demands learned from the teams' rewards, the
team pick by ease.ml's GREEDY rule, and several studies at once, each capped at its share (SV8, SV11, SV12)."""

from __future__ import annotations

import json
import threading

from sqlalchemy import select

from spottune.service._orgplan import OrgPlan, reward_of
from spottune.service._runner import StudyRunner
from spottune.service._store import OrgRound, Store, Study, Team, hash_token
from tests._wait import wait_until


def test_each_starting_study_gets_its_teams_fair_share_divided_by_its_running_studies():
    plan, ents = OrgPlan(), {"a": 1.0, "b": 1.0}
    first = plan.allocate(4.0, ents, {}, "a")  # a's first probe: half the upper bound 4.0
    assert (first.max_usd_per_hour, first.round.demands) == (2.0, {"a": 2.0, "b": 0.0})
    assert first.accounting == {"unallocated": 2.0, "over_allocated": 0.0, "unmet": 0.0, "loss": 0.0}
    second = plan.allocate(4.0, ents, {"a": 1}, "b")
    assert (second.max_usd_per_hour, second.round.allocations) == (2.0, {"a": 2.0, "b": 2.0})
    third = plan.allocate(4.0, ents, {"a": 1, "b": 1}, "a")  # a asks 2 x 2.0: its half of 4.0, split in two
    assert (third.max_usd_per_hour, third.round.allocations) == (1.0, {"a": 2.0, "b": 2.0})
    assert third.accounting == {"unallocated": 0.0, "over_allocated": 0.0, "unmet": 2.0, "loss": 0.0}
    plan.observe(first, "a", 1.0)  # on track at 2.0 per study: a's unit demand is at most 2.0
    assert plan.demand_interval("a") == (0.0, 2.0)
    assert plan.allocate(4.0, ents, {}, "a").max_usd_per_hour == 1.0
    plan.observe(plan.allocate(4.0, ents, {}, "a"), "a", 0.5)  # not on track at 1.0: at least 1.0
    assert plan.demand_interval("a") == (1.0, 2.0)
    assert plan.allocate(4.0, ents, {}, "a").max_usd_per_hour == 1.5
    assert plan.demand_interval("b") == (0.0, 4.0)


def test_a_new_team_or_budget_keeps_the_intervals_learned_at_the_same_budget():
    plan = OrgPlan()
    plan.observe(plan.allocate(4.0, {"a": 1.0}, {}, "a"), "a", 1.0)
    assert plan.allocate(4.0, {"a": 1.0, "c": 3.0}, {}, "a").max_usd_per_hour == 1.0
    assert plan.demand_interval("a") == (0.0, 2.0)
    assert plan.allocate(8.0, {"a": 1.0, "c": 3.0}, {}, "a").max_usd_per_hour == 4.0  # a new bound: learnt anew


def test_the_reward_is_the_share_of_trials_on_track():
    assert reward_of(["finished", "stopped_early", "failed", "finished"]) == 0.75
    assert reward_of([]) is None


def test_the_team_pick_visits_every_team_then_goes_greedy_on_the_results():
    plan = OrgPlan()
    assert (plan.pick(["a", "b"], {}).team, plan.pick(["a", "b"], {}).rule) == ("a", "first-visit")
    # N = 3 results: a's bonus sqrt(2 ln 3 / 2) = 1.048 < b's sqrt(2 ln 3) = 1.482, so b's gap is larger
    pick = plan.pick(["a", "b"], {"a": [1.0, 1.0], "b": [0.5]})
    assert (pick.team, pick.rule, pick.candidates) == ("b", "greedy", ("b",))


class _Grid:  # what summarise reads of a ResultGrid
    summary = {"total_cost_usd": 0.5}

    def get_best_result(self):
        raise LookupError("no best")

    def get_dataframe(self):
        import pandas as pd

        return pd.DataFrame({"state": ["finished", "finished"]})


def test_studies_run_at_once_one_per_team_at_least_each_capped_at_its_share(tmp_path):
    # tune is replaced by a function that waits for the test's word: the runner's slots and caps are under test,
    # and real simulator runs would end before the test could look at them
    store = Store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    store.set_org_budget(4.0)
    with store.session.begin() as s:
        teams = [Team(name=n, entitlement=1.0, token_sha256=hash_token(n)) for n in ("a", "b")]
        s.add_all(teams)
        s.flush()
        for team, name, cap in ((teams[0], "a1", None), (teams[0], "a2", None), (teams[1], "b1", 0.5)):
            spec = {"workload": "linreg"} | ({"max_usd_per_hour": cap} if cap else {})
            s.add(Study(team_id=team.id, name=name, spec_json=json.dumps(spec), state="queued", cancel_requested=False))
    seen: dict[str, float] = {}
    go = {n: threading.Event() for n in ("1", "2", "3")}

    def tune(spec, *, output, progress):
        sid = output.name
        seen[sid] = spec["max_usd_per_hour"]
        assert go[sid].wait(10)
        return _Grid()

    runner = StudyRunner(store, tmp_path, tune=tune, poll_s=0.01, max_studies=1)  # b1 starts beyond the one slot
    runner.start()
    try:
        wait_until(lambda: len(seen) == 2, 10, what="two studies run")
        assert seen == {"1": 2.0, "3": 0.5}  # a1, then b1 (b has none running; its own cap is lower), not a2
        assert runner._next(full=True) is None  # a2 waits: a runs one already and the slot is taken
        go["1"].set()  # a1 ends on track at 2.0 per study: a's next probe is 1.0
        wait_until(lambda: "2" in seen, 10, what="a2 runs")
        assert seen["2"] == 1.0
        go["2"].set(), go["3"].set()
        wait_until(lambda: runner.results == {"a": [1.0, 1.0], "b": [1.0]} and not runner._running, 10)
    finally:
        for e in go.values():
            e.set()
        runner.stop()
    # a2 was on track at 1.0: a's demand is at most 1.0; b1 ran under its own lower cap and taught nothing
    assert (runner.plan.demand_interval("a"), runner.plan.demand_interval("b")) == ((0.0, 1.0), (0.0, 4.0))
    with store.session() as s:
        rounds = list(s.scalars(select(OrgRound).order_by(OrgRound.id)))
        assert [(r.study_id, json.loads(r.allocations_json), r.unallocated, r.unmet) for r in rounds] == [
            (1, {"a": 2.0, "b": 0.0}, 2.0, 0.0), (3, {"a": 2.0, "b": 2.0}, 0.0, 0.0),
            (2, {"a": 1.0, "b": 2.0}, 1.0, 0.0)]
        assert [s.get(Study, i).max_usd_per_hour for i in (1, 2, 3)] == [2.0, 1.0, 0.5]
        assert {s.get(Study, i).state for i in (1, 2, 3)} == {"finished"}
    store.engine.dispose()


def test_the_hourly_round_splits_the_budget_over_running_studies_with_minimums_and_caps():
    from spottune.service._orgplan import TeamBounds

    plan = OrgPlan()
    ents = {"a": 1.0, "b": 1.0, "c": 1.0}
    # probes 2.0 per study (half of 4.0): demands a 4.0, b 4.0; b's minimum 3.0 comes first, a gets the rest
    hour = plan.rebalance(4.0, ents, {"a": 2, "b": 2}, {"b": TeamBounds(min_usd_per_hour=3.0)})
    assert (hour.round.allocations, hour.loads) == ({"a": 1.0, "b": 3.0, "c": 0.0}, {"a": 2.0, "b": 2.0, "c": 0.0})
    assert hour.accounting == {"unallocated": 0.0, "over_allocated": 0.0, "unmet": 4.0, "loss": 0.0}
    # each team's useful USD/hour against the entitlement-only split (a third of 4.0 each, up to the demand)
    assert hour.utility == {"a": {"useful": 1.0, "entitled": 4 / 3}, "b": {"useful": 3.0, "entitled": 4 / 3},
                            "c": {"useful": 0.0, "entitled": 0.0}}
    # a's cap 0.5 holds it below its entitled 2.0: b gets the rest up to its demand, 0.5 stays unallocated
    hour = plan.rebalance(4.0, ents, {"a": 1, "b": 1}, {"a": TeamBounds(max_usd_per_hour=0.5)})
    assert hour.round.allocations == {"a": 0.5, "b": 2.0, "c": 0.0}
    assert hour.accounting == {"unallocated": 1.5, "over_allocated": 0.0, "unmet": 1.5, "loss": 1.5}
    start = plan.allocate(4.0, ents, {"a": 1}, "c", {"c": TeamBounds(max_usd_per_hour=1.0)})
    assert start.max_usd_per_hour == 1.0  # a study start honours the bounds too


def _store_with_teams(tmp_path, budget, teams):
    store = Store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    store.set_org_budget(budget)
    with store.session.begin() as s:
        for name, lo, hi in teams:
            s.add(Team(name=name, entitlement=1.0, token_sha256=hash_token(name), min_usd_per_hour=lo,
                       max_usd_per_hour=hi))
    return store


def _queue(store, team, name, spec=None):
    with store.session.begin() as s:
        tid = s.scalar(select(Team.id).where(Team.name == team))
        study = Study(team_id=tid, name=name, spec_json=json.dumps(spec or {"workload": "linreg"}), state="queued",
                      cancel_requested=False)
        s.add(study)
        s.flush()
        return study.id


class _Backend:  # the attribute a run's backend checks at each launch
    max_usd_per_hour = None


def test_each_round_moves_the_caps_of_running_studies_and_their_backends_read_them(tmp_path):
    # tune is replaced by a function that waits for the test's word (the rounds and caps are under test; a real
    # simulator study would end before the test could look at it); its backend is the attribute holder above
    store = _store_with_teams(tmp_path, 4.0, [("a", None, None), ("b", 3.0, None)])
    a1 = _queue(store, "a", "a1")
    backends = {}
    go = threading.Event()

    def tune(spec, *, output, progress):
        backends[output.name] = backend = _Backend()
        backend.max_usd_per_hour = spec["max_usd_per_hour"]
        progress.bind_backend(backend)
        while not go.is_set():
            progress(0.0, None, 0.0)
            go.wait(0.01)
        return _Grid()

    runner = StudyRunner(store, tmp_path, tune=tune, poll_s=0.01, round_period_s=3600.0)
    runner.start()
    try:
        wait_until(lambda: "1" in backends, 10, what="a1 runs")
        assert backends["1"].max_usd_per_hour == 2.0  # a alone: its first probe, half of 4.0
        b1, b2 = _queue(store, "b", "b1"), _queue(store, "b", "b2")
        runner.notify()
        wait_until(lambda: str(b2) in backends, 10, what="b1 and b2 run")
        # at b2's start b asks 2 x 2.0 and its minimum 3.0 comes first: b2 gets 1.5, a1 keeps its 2.0 till the round
        assert [backends[str(i)].max_usd_per_hour for i in (a1, b1, b2)] == [2.0, 2.0, 1.5]
        assert runner.rebalance() == {a1: 1.0, b1: 1.5, b2: 1.5}  # the round: a 1.0, b 3.0 over two studies
        wait_until(lambda: backends["1"].max_usd_per_hour == 1.0, 10, what="a1's backend reads its lowered cap")
        wait_until(lambda: backends[str(b1)].max_usd_per_hour == 1.5, 10, what="b1's backend reads its cap")
    finally:
        go.set()
        runner.stop()
    with store.session() as s:
        last = s.scalars(select(OrgRound).order_by(OrgRound.id.desc())).first()
        assert (last.study_id, json.loads(last.allocations_json)) == (None, {"a": 1.0, "b": 3.0})
        assert json.loads(last.utility_json) == {"a": {"useful": 1.0, "entitled": 2.0},
                                                 "b": {"useful": 3.0, "entitled": 2.0}}
        assert [s.get(Study, i).max_usd_per_hour for i in (a1, b1, b2)] == [1.0, 1.5, 1.5]
    # each ended on track at its last round's share: a's unit demand is at most 1.0, b's at most 1.5
    assert (runner.plan.demand_interval("a"), runner.plan.demand_interval("b")) == ((0.0, 1.0), (0.0, 1.5))
    store.engine.dispose()


def test_rounds_come_on_the_period_of_the_servers_clock(tmp_path):
    store = _store_with_teams(tmp_path, 4.0, [("a", None, None)])
    _queue(store, "a", "a1")
    go = threading.Event()

    def tune(spec, *, output, progress):
        assert go.wait(10)
        return _Grid()

    runner = StudyRunner(store, tmp_path, tune=tune, poll_s=0.01, round_period_s=0.05)
    runner.start()
    try:
        def hourly():
            with store.session() as s:
                return s.scalar(select(OrgRound.id).where(OrgRound.study_id.is_(None)).limit(1))
        wait_until(hourly, 10, what="a round with no starting study")
    finally:
        go.set()
        runner.stop()
    store.engine.dispose()


def test_a_restarted_server_continues_from_the_stored_learned_demands(tmp_path):
    store = _store_with_teams(tmp_path, 4.0, [("a", None, None)])
    _queue(store, "a", "a1")

    def tune(spec, *, output, progress):
        return _Grid()  # on track at 2.0: a's unit demand is at most 2.0

    runner = StudyRunner(store, tmp_path, tune=tune, poll_s=0.01)
    runner.start()
    wait_until(lambda: runner.results == {"a": [1.0]} and not runner._running, 10)
    runner.stop()
    assert store.learned_demands() == {"a": {"low": 0.0, "high": 2.0, "theta_max": 4.0, "probes": 1}}
    store.engine.dispose()
    again = StudyRunner(Store(f"sqlite:///{tmp_path / 'db.sqlite'}"), tmp_path, tune=tune)
    assert again.plan.demand_interval("a") == (0.0, 2.0)  # before any round: the stored interval
    assert again.plan.allocate(4.0, {"a": 1.0}, {}, "a").max_usd_per_hour == 1.0  # probes its middle
    assert again.plan.demand_interval("a") == (0.0, 2.0)
    again.store.engine.dispose()


def test_a_cap_moved_by_a_round_reaches_the_real_simulator_run(tmp_path):
    # the real tune on the simulator: the runner's cap, lowered below any instance's price before the first launch,
    # ends the study's launches as the spec's own cap would
    store = _store_with_teams(tmp_path, 4.0, [("a", None, None)])
    spec = {"workload": "linreg", "search_space": {"lr": {"grid_search": [0.01, 0.05]}}, "max_steps": 8,
            "theta": 1, "top_k": 1, "predictor": "none"}
    study_id = _queue(store, "a", "a1", spec)
    from spottune.api import tune

    def lowered_then_tune(spec, **kwargs):  # the run starts at 2.0; a round lowers its cap before it launches
        assert spec["max_usd_per_hour"] == 2.0
        runner.caps[study_id] = 0.0001
        return tune(spec, **kwargs)

    runner = StudyRunner(store, tmp_path, tune=lowered_then_tune)
    assert runner._next() == study_id
    runner.run_one(study_id, False)
    with store.session() as s:
        study = s.get(Study, study_id)
        assert study.state == "finished"
        assert "exceeds --max-usd-per-hour 0.0001" in json.loads(
            (tmp_path / "studies" / str(study_id) / "summary.json").read_text())["budget_exhausted"]
    store.engine.dispose()
