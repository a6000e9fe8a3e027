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
