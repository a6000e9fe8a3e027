"""Cerebro's unit queues (decision SV4): Q and Q', heartbeats, re-queueing, no double counting, latest checkpoint."""

from __future__ import annotations

import pytest

from spottune.errors import SpottuneError
from spottune.scheduling import StaleUnit, Unit, UnitQueues


def _queues(*units):
    q = UnitQueues(heartbeat_period_s=10.0, missed_beats=3)
    for u in units:
        q.submit(u)
    return q


def test_a_worker_that_misses_n_heartbeats_is_failed_at_n_periods_and_its_unit_requeued():
    u = Unit(trial_id="t0", start_step=0, end_step=10)
    q = _queues(u)
    assert q.dispatch("w1", now_s=0.0) == u
    q.heartbeat("w1", 5.0)
    assert list(q.pending) == [] and q.in_flight == {"w1": u}
    assert q.expire(34.999) == []  # 2.9999 periods after the last beat: still alive
    assert q.expire(35.0) == [u]  # 3 missed beats: failed within N * period of its last heartbeat
    assert list(q.pending) == [u] and q.in_flight == {} and q.failed_workers == ["w1"]
    assert q.expire(100.0) == []  # declared once


def test_a_requeued_unit_runs_elsewhere_and_the_dead_workers_late_report_is_not_counted():
    u = Unit(trial_id="t0", start_step=0, end_step=10)
    q = _queues(u)
    q.dispatch("w1", 0.0)
    q.expire(30.0)
    assert q.dispatch("w2", 31.0) == u  # a new worker joins by its first heartbeat and takes the unit
    with pytest.raises(StaleUnit, match="worker w1: does not hold unit t0:0-10; the report is ignored"):
        q.complete("w1", u, 32.0, checkpoint="ck/t0/1")
    assert q.steps_done == {} and q.checkpoints == {}  # the refused report changed nothing
    assert q.complete("w2", u, 40.0, checkpoint="ck/t0/2") is None
    with pytest.raises(StaleUnit):
        q.complete("w2", u, 41.0)  # twice is refused too
    assert q.steps_done == {"t0": 10}
    with pytest.raises(StaleUnit, match="declared dead"):
        q.heartbeat("w1", 50.0)


def test_only_the_latest_checkpoint_per_trial_is_kept():
    a, b = Unit(trial_id="t0", start_step=0, end_step=5), Unit(trial_id="t0", start_step=5, end_step=10)
    q = _queues(a, b)
    q.dispatch("w1", 0.0)
    assert q.complete("w1", a, 1.0, checkpoint="ck/t0/5") is None
    q.dispatch("w1", 2.0)
    assert q.complete("w1", b, 3.0, checkpoint="ck/t0/10") == "ck/t0/5"  # the caller deletes the old one
    assert q.checkpoints == {"t0": "ck/t0/10"} and q.steps_done == {"t0": 10}


def test_two_units_of_one_trial_never_run_at_once():
    a, b = Unit(trial_id="t0", start_step=0, end_step=5), Unit(trial_id="t0", start_step=5, end_step=10)
    c = Unit(trial_id="t1", start_step=0, end_step=5)
    q = _queues(a, b, c)
    assert q.dispatch("w1", 0.0) == a
    assert q.dispatch("w2", 0.0) == c  # b waits: its trial is in flight
    assert q.dispatch("w3", 0.0) is None
    assert q.dispatch("w1", 0.0) is None  # a busy worker gets nothing more
    q.complete("w1", a, 1.0)
    assert q.dispatch("w3", 1.0) == b


def test_random_failures_lose_no_unit_and_count_every_step_once():
    import numpy as np

    rng = np.random.default_rng(3)
    units = [Unit(trial_id=f"t{i}", start_step=s, end_step=s + 5) for i in range(4) for s in range(0, 20, 5)]
    q = UnitQueues(heartbeat_period_s=1.0, missed_beats=2)
    for u in units[::4]:
        q.submit(u)
    following = {u: units[k + 1] for k, u in enumerate(units) if u.end_step < 20}
    now, workers, serial = 0.0, ["w0", "w1", "w2"], 3
    while len(q.steps_done) < 4 or any(v < 20 for v in q.steps_done.values()):
        now += 1.0
        for w in list(workers):
            if rng.random() < 0.15:  # the worker dies silently; a replacement joins
                workers.remove(w)
                workers.append(f"w{serial}")
                serial += 1
                continue
            unit = q.in_flight.get(w) or q.dispatch(w, now)
            if unit is not None and rng.random() < 0.5:
                q.complete(w, unit, now, checkpoint=f"ck/{unit.trial_id}/{unit.end_step}")
                if unit in following:
                    q.submit(following[unit])
            else:
                q.heartbeat(w, now)
        q.expire(now)
        assert now < 500
    assert q.steps_done == {f"t{i}": 20 for i in range(4)}
    assert q.checkpoints == {f"t{i}": f"ck/t{i}/20" for i in range(4)}
    assert len(q.failed_workers) > 0


def test_bad_settings_are_refused():
    with pytest.raises(SpottuneError, match="heartbeat_period_s is 0, but must be a finite number > 0"):
        UnitQueues(heartbeat_period_s=0)
    with pytest.raises(SpottuneError, match="missed_beats is 0, but must be an integer >= 1"):
        UnitQueues(heartbeat_period_s=1, missed_beats=0)


def test_a_driver_dispatches_by_trial_counts_an_early_save_and_requeues_what_a_leaving_worker_held():
    """The worker driver's use (decision SV4): the orchestrator chose the trial, a notice saves before the unit's
    end, a process seen dead fails at once, a revoked instance's worker leaves, a relaunch replaces its unit."""
    a, b = Unit(trial_id="t0", start_step=0, end_step=10), Unit(trial_id="t1", start_step=0, end_step=10)
    q = _queues(a, b)
    assert q.dispatch("w1", 0.0, trial_id="t1") == b  # not the first in Q: the one of the worker's trial
    assert q.dispatch("w2", 0.0, trial_id="t1") is None  # t1 is in flight
    assert q.dispatch("w2", 0.0, trial_id="t0") == a
    assert q.complete("w1", b, 1.0, checkpoint="ck/t1/4", at_step=4) is None  # saved at 4 of 10: 4 steps
    with pytest.raises(SpottuneError, match="completed at step 11, outside the unit"):
        q.complete("w2", a, 1.0, at_step=11)
    assert q.fail("w2") == a and q.fail("w2") is None  # its process ended: no wait for missed beats
    assert list(q.pending) == [a] and q.failed_workers == ["w2"]
    rest = Unit(trial_id="t1", start_step=4, end_step=10)
    q.submit(rest)
    assert q.dispatch("w3", 2.0, trial_id="t1") == rest
    assert q.leave("w3") == rest and "w3" not in q.last_beat_s  # revoked: back to the front of Q, unwatched
    assert list(q.pending) == [rest, a]
    assert q.withdraw("t1") == [rest] and list(q.pending) == [a]  # its relaunch submits the range it runs
    assert q.expire(1000.0) == [] and q.failed_workers == ["w2", "w1"]  # silent w1 is dead but held no unit
    assert q.steps_done == {"t1": 4} and list(q.pending) == [a]
