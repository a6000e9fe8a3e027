"""Paper scenarios as event scripts (SpotTune Algorithm 1): revocation, preemption vs failure,
hourly hop, θ barrier with top-k, plateau, launch retry, determinism."""

from __future__ import annotations

import pytest

from spottune.errors import ConfigError
from spottune.orchestrator import (
    Checkpoint,
    CheckpointReason,
    CheckpointSaved,
    EndReason,
    ExperimentFinished,
    ExperimentStarted,
    HourElapsed,
    Launch,
    LaunchFailed,
    MetricReported,
    Orchestrator,
    OrchestratorConfig,
    RevocationNotice,
    ScheduleWakeUp,
    SegmentEnded,
    SegmentFailed,
    Stop,
    Terminate,
    TerminateReason,
    TrialLaunched,
    TrialState,
    WakeUp,
)
from earlycurve import FinalMetricPredictor, Prediction
from tests._fakes import A, FakeChooser


class Script:
    """A hand-driven 'driver': feeds events with increasing time and keeps every action."""

    def __init__(self, trials=("t0",), chooser=None, **cfg):
        self.chooser = chooser or FakeChooser()
        cfg.setdefault("max_steps", 10)
        predictor = cfg.pop("predictor", None)
        ranking = {k: cfg.pop(k) for k in ("rung_predictor", "configs") if k in cfg}
        self.orch = Orchestrator(list(trials), OrchestratorConfig(**cfg), self.chooser, predictor=predictor, **ranking)
        self.t = 0.0
        self.n = 0
        self.log = []

    def __call__(self, cls, dt=1.0, **kw):
        self.t += dt
        ev = cls(time_s=self.t, **kw)
        acts = self.orch.handle(ev)
        self.log.append((ev, acts))
        return acts

    def start(self):
        self.t = 0.0
        acts = self.orch.handle(ExperimentStarted(time_s=0.0))
        self.log.append((None, acts))
        return acts

    def launched(self, trial="t0"):
        self.n += 1
        iid = f"i{self.n}"
        self(TrialLaunched, trial_id=trial, instance_id=iid, market=A, started_s=self.t)
        return iid

    def steps(self, trial, iid, upto, f=lambda k: 1.0 / k, dt=10.0):
        acts = []
        for k in range(self.orch.trials[trial].step + 1, upto + 1):
            acts = self(MetricReported, dt=dt, trial_id=trial, instance_id=iid, step=k, metrics={self.orch.config.metric: f(k)})
        return acts

    def state(self, trial="t0"):
        return self.orch.trials[trial].state


def test_revocation_checkpoints_then_relaunches_and_keeps_refund():
    s = Script()
    assert [type(a) for a in s.start()] == [Launch]
    i1 = s.launched()
    s.steps("t0", i1, 3)
    acts = s(RevocationNotice, trial_id="t0", instance_id=i1, deadline_s=s.t + 121)
    assert acts == [Checkpoint(trial_id="t0", instance_id=i1, reason=CheckpointReason.REVOCATION)]
    assert s.state() is TrialState.CHECKPOINTING
    acts = s(CheckpointSaved, trial_id="t0", instance_id=i1, reason=CheckpointReason.REVOCATION, step=3)
    # relaunch at once; never Terminate a revoked instance ourselves (the provider's end is refunded)
    assert [type(a) for a in acts] == [Launch] and acts[0].resume_step == 3
    assert s.state() is TrialState.LAUNCHING
    i2 = s.launched()
    assert s(SegmentEnded, trial_id="t0", instance_id=i1, steps_done=3, reason=EndReason.PROVIDER) == []
    assert s.state() is TrialState.RUNNING
    tr = s.orch.trials["t0"]
    assert (tr.revocations, tr.failures, tr.lost_steps, tr.instance_id) == (1, 0, 0, i2)
    # launched at 1 s, step 3 reported at 31 s, notice at 32 s: speed is measured to the last finished step, not
    # to the notice (the unfinished step's second would make the step time 31 / 3 s instead of 30 / 3)
    assert s.chooser.segments == [("t0", "r3.large", 30.0, 3)]


def test_preemption_before_checkpoint_rolls_back_and_counts_lost_steps_not_failures():
    s = Script(max_failures=0)
    s.start()
    i1 = s.launched()
    s.steps("t0", i1, 2)
    s(HourElapsed, trial_id="t0", instance_id=i1)
    s(CheckpointSaved, trial_id="t0", instance_id=i1, reason=CheckpointReason.HOP, step=2)
    i2 = s.launched()
    s.steps("t0", i2, 5)
    s(RevocationNotice, trial_id="t0", instance_id=i2, deadline_s=s.t + 120)
    # the checkpoint is too slow: the provider kills the instance first
    acts = s(SegmentEnded, dt=120, trial_id="t0", instance_id=i2, steps_done=5, reason=EndReason.PROVIDER)
    assert [type(a) for a in acts] == [Launch] and acts[0].resume_step == 2
    tr = s.orch.trials["t0"]
    assert (tr.lost_steps, tr.failures, tr.revocations, tr.step, tr.steps) == (3, 0, 1, 2, [1, 2])
    # ... and a preemption with no notice at all
    i3 = s.launched()
    s.steps("t0", i3, 4)
    acts = s(SegmentEnded, trial_id="t0", instance_id=i3, steps_done=4, reason=EndReason.PROVIDER)
    assert [type(a) for a in acts] == [Launch]
    assert (tr.lost_steps, tr.failures, tr.revocations) == (5, 0, 2)
    # the failure budget (0) is intact: the first failure is the one that fails the trial
    i4 = s.launched()
    acts = s(SegmentFailed, trial_id="t0", instance_id=i4, error="boom")
    assert s.state() is TrialState.FAILED
    assert isinstance(acts[0], Terminate) and acts[0].reason is TerminateReason.FAILURE
    # each segment's speed is measured from its training start to its last reported step (steps every 10 s): the
    # hop, the notice and the unannounced end each came 1 s after a step, which is not counted; the failed segment
    # finished no step and is not recorded
    assert s.chooser.segments == [("t0", "r3.large", 20.0, 2), ("t0", "r3.large", 30.0, 3), ("t0", "r3.large", 20.0, 2)]


def test_hourly_hop_checkpoints_terminates_and_reprovisions():
    s = Script()
    s.start()
    i1 = s.launched()
    s.steps("t0", i1, 4)
    acts = s(HourElapsed, trial_id="t0", instance_id=i1)
    assert acts == [Checkpoint(trial_id="t0", instance_id=i1, reason=CheckpointReason.HOP)]
    acts = s(CheckpointSaved, trial_id="t0", instance_id=i1, reason=CheckpointReason.HOP, step=4)
    assert [type(a) for a in acts] == [Terminate, Launch]
    assert acts[0].reason is TerminateReason.HOP and acts[1].resume_step == 4
    assert s.orch.trials["t0"].hops == 1
    # the user-terminated instance reports its end later: a no-op
    assert s(SegmentEnded, trial_id="t0", instance_id=i1, steps_done=4, reason=EndReason.USER) == []


def test_hop_checkpoint_overtaken_by_notice_leaves_termination_to_provider():
    s = Script()
    s.start()
    i1 = s.launched()
    s.steps("t0", i1, 2)
    s(HourElapsed, trial_id="t0", instance_id=i1)
    assert s(RevocationNotice, trial_id="t0", instance_id=i1, deadline_s=s.t + 120) == []
    acts = s(CheckpointSaved, trial_id="t0", instance_id=i1, reason=CheckpointReason.HOP, step=2)
    assert [type(a) for a in acts] == [Launch]


def test_theta_pauses_every_trial_then_keeps_top_k():
    losses = {"t0": 4.0, "t1": 1.0, "t2": 3.0, "t3": 2.0}
    s = Script(trials=tuple(losses), max_steps=10, theta=0.5, top_k=2)
    assert len(s.start()) == 4
    inst = {t: s.launched(t) for t in losses}
    for i, t in enumerate(losses):
        acts = s.steps(t, inst[t], 5, f=lambda k, t=t: losses[t] + 1.0 / k)
        assert acts == [Checkpoint(trial_id=t, instance_id=inst[t], reason=CheckpointReason.THETA)]
        acts = s(CheckpointSaved, trial_id=t, instance_id=inst[t], reason=CheckpointReason.THETA, step=5)
        if i < 3:
            assert s.state(t) is TrialState.PAUSED_AT_THETA
            assert [type(a) for a in acts] == [Terminate]  # barrier: nobody continues before all paused
    # the last pause passes the barrier: top-2 (t1, t3) relaunch at step 5 towards max_steps, others stop
    launches = {a.trial_id: a for a in acts if isinstance(a, Launch)}
    stops = {a.trial_id for a in acts if isinstance(a, Stop)}
    assert set(launches) == {"t1", "t3"} and stops == {"t0", "t2"}
    assert all(a.resume_step == 5 and a.target_steps == 10 for a in launches.values())
    assert s.state("t0") is TrialState.STOPPED_EARLY
    for t in ("t3", "t1"):
        iid = s.launched(t)
        acts = s.steps(t, iid, 10, f=lambda k, t=t: losses[t] + 1.0 / k)
        assert acts == [Checkpoint(trial_id=t, instance_id=iid, reason=CheckpointReason.END)]
        acts = s(CheckpointSaved, trial_id=t, instance_id=iid, reason=CheckpointReason.END, step=10)
    assert isinstance(acts[-1], ExperimentFinished)
    assert acts[-1].top_k == ("t1", "t3") and s.orch.done
    assert acts[-1].metrics["t1"] == pytest.approx(1.1)


def test_plateau_finishes_early_is_ranked_but_not_continued():
    flat = lambda st, v, m: len(v) >= 3 and abs(v[-1] - v[-3]) < 1e-9  # noqa: E731
    s = Script(trials=("a", "b"), max_steps=10, theta=0.5, top_k=1)
    s.orch.plateau_rule = flat
    s.start()
    ia, ib = s.launched("a"), s.launched("b")
    acts = s.steps("a", ia, 3, f=lambda k: 0.5)
    assert acts == [Checkpoint(trial_id="a", instance_id=ia, reason=CheckpointReason.PLATEAU)]
    acts = s(CheckpointSaved, trial_id="a", instance_id=ia, reason=CheckpointReason.PLATEAU, step=3)
    assert s.state("a") is TrialState.FINISHED and s.orch.trials["a"].plateaued
    s.steps("b", ib, 5, f=lambda k: 1.0 + 1.0 / k)
    acts = s(CheckpointSaved, trial_id="b", instance_id=ib, reason=CheckpointReason.THETA, step=5)
    # a (0.5, plateaued) beats b (~1.2): nothing continues, the experiment ends at the barrier
    assert [type(x) for x in acts] == [Terminate, Stop, ExperimentFinished]
    assert acts[-1].top_k == ("a",)


def test_mode_max_ranks_by_one_minus_accuracy_and_theta_one_uses_finals():
    s = Script(trials=("a", "b"), max_steps=3, theta=1.0, top_k=1, metric="acc", mode="max")
    s.start()
    for t, acc in (("a", 0.6), ("b", 0.9)):
        iid = s.launched(t)
        acts = s.steps(t, iid, 3, f=lambda k, acc=acc: acc)
        assert acts[0].reason is CheckpointReason.END
        acts = s(CheckpointSaved, trial_id=t, instance_id=iid, reason=CheckpointReason.END, step=3)
    assert acts[-1].top_k == ("b",) and acts[-1].metrics == {"b": pytest.approx(0.9)}


def test_a_diverged_trial_with_nan_loss_is_ranked_last():
    s = Script(trials=("a", "b"), max_steps=3, theta=1.0, top_k=1)
    s.start()
    for t, loss in (("a", float("nan")), ("b", 0.9)):
        iid = s.launched(t)
        s.steps(t, iid, 3, f=lambda k, loss=loss: loss)
        acts = s(CheckpointSaved, trial_id=t, instance_id=iid, reason=CheckpointReason.END, step=3)
    # a bare tuple sort leaves (nan, "a") first, since nothing compares less than NaN
    assert acts[-1].top_k == ("b",) and acts[-1].metrics == {"b": pytest.approx(0.9)}


def test_failures_retry_then_fail_without_stopping_others():
    s = Script(trials=("bad", "good"), max_steps=4, theta=1.0, top_k=1, max_failures=1)
    s.start()
    ib, ig = s.launched("bad"), s.launched("good")
    acts = s(SegmentFailed, trial_id="bad", instance_id=ib, error="ValueError")
    assert [type(a) for a in acts] == [Terminate, Launch] and s.orch.trials["bad"].failures == 1
    ib2 = s.launched("bad")
    acts = s(SegmentFailed, trial_id="bad", instance_id=ib2, error="ValueError")
    assert [type(a) for a in acts] == [Terminate] and s.state("bad") is TrialState.FAILED
    s.steps("good", ig, 4)
    acts = s(CheckpointSaved, trial_id="good", instance_id=ig, reason=CheckpointReason.END, step=4)
    assert acts[-1] == ExperimentFinished(time_s=s.t, top_k=("good",), metrics={"good": 0.25})


def test_launch_failure_and_no_market_back_off_with_a_timer():
    s = Script(chooser=FakeChooser(fail=1), launch_retry_s=30.0)
    assert s.start() == [ScheduleWakeUp(trial_id="t0", at_s=30.0)]
    assert s.state() is TrialState.PENDING
    acts = s(WakeUp, dt=30.0, trial_id="t0")
    assert [type(a) for a in acts] == [Launch]
    acts = s(LaunchFailed, trial_id="t0", error="capacity-not-available")
    assert acts == [ScheduleWakeUp(trial_id="t0", at_s=s.t + 30.0)]
    assert [type(a) for a in s(WakeUp, dt=30.0, trial_id="t0")] == [Launch]


def test_missing_metric_is_a_config_error_and_changes_nothing():
    s = Script()
    s.start()
    iid = s.launched()
    with pytest.raises(ConfigError, match="no metric 'loss'"):
        s(MetricReported, trial_id="t0", instance_id=iid, step=1, metrics={"acc": 1.0})
    assert s.orch.trials["t0"].steps == []


@pytest.mark.parametrize("bad", [dict(theta=0.0), dict(theta=1.5), dict(top_k=0), dict(mode="up"), dict(max_steps=0),
                                 dict(max_failures=-1)])
def test_config_is_checked_at_once(bad):
    with pytest.raises(ConfigError):
        OrchestratorConfig(**{"max_steps": 10, **bad})


@pytest.mark.parametrize(("theta", "max_steps", "expected"),
                         [(0.07, 100, 7), (0.7, 10, 7), (0.75, 10, 8), (0.001, 10, 1), (0.999, 10, 10), (1.0, 10, 10)])
def test_theta_steps_is_ceil_without_float_noise(theta, max_steps, expected):
    # 0.07 * 100 == 7.000000000000001 in floats; a bare ceil would give 8
    assert OrchestratorConfig(max_steps=max_steps, theta=theta).theta_steps == expected


def test_same_script_same_actions():
    def run():
        s = Script(trials=("a", "b"), max_steps=6, theta=0.5, top_k=1)
        s.start()
        for t in ("a", "b"):
            iid = s.launched(t)
            s.steps(t, iid, 3, f=lambda k, t=t: (2.0 if t == "a" else 1.0) / k)
            s(CheckpointSaved, trial_id=t, instance_id=iid, reason=CheckpointReason.THETA, step=3)
        return s.log

    assert run() == run()


# -- no lost work (docs/design/decisions.md, "No lost work") --------------------------------------------------


@pytest.mark.parametrize("trigger", ["hop", "notice"])
def test_checkpoint_at_the_target_step_finishes_the_trial(trigger):
    """A hop or notice that overlaps the last step: the checkpoint holds the target step, so the trial is
    finished, not relaunched with nothing to do (which looped every hour)."""
    s = Script(max_steps=5, theta=1.0)
    s.start()
    i1 = s.launched()
    s.steps("t0", i1, 4)
    if trigger == "hop":
        acts = s(HourElapsed, trial_id="t0", instance_id=i1)
        reason = CheckpointReason.HOP
    else:
        acts = s(RevocationNotice, trial_id="t0", instance_id=i1, deadline_s=s.t + 120)
        reason = CheckpointReason.REVOCATION
    assert acts == [Checkpoint(trial_id="t0", instance_id=i1, reason=reason)]
    # step 5 completes after the checkpoint request; the checkpoint saves it
    assert s(MetricReported, trial_id="t0", instance_id=i1, step=5, metrics={"loss": 0.2}) == []
    acts = s(CheckpointSaved, trial_id="t0", instance_id=i1, reason=reason, step=5)
    assert not any(isinstance(a, Launch) for a in acts)
    assert s.state() is TrialState.FINISHED
    tr = s.orch.trials["t0"]
    assert (tr.step, tr.checkpoint_step, tr.hops) == (5, 5, 0)
    assert tr.steps == [1, 2, 3, 4, 5] and tr.losses[-1] == 0.2  # the last step kept its metric
    if trigger == "hop":  # ours to end; a noticed instance is left to the provider (first-hour refund)
        assert [(type(a), a.reason) for a in acts if isinstance(a, Terminate)] == [(Terminate, TerminateReason.END)]
    else:
        assert not any(isinstance(a, Terminate) for a in acts)
    assert isinstance(acts[-1], ExperimentFinished)


def test_checkpoint_at_the_theta_step_pauses_the_trial():
    s = Script(trials=("t0", "t1"), max_steps=10, theta=0.5, top_k=1)
    s.start()
    i0, i1 = s.launched("t0"), s.launched("t1")
    s.steps("t0", i0, 4)
    s(HourElapsed, trial_id="t0", instance_id=i0)
    s(MetricReported, trial_id="t0", instance_id=i0, step=5, metrics={"loss": 0.3})
    acts = s(CheckpointSaved, trial_id="t0", instance_id=i0, reason=CheckpointReason.HOP, step=5)
    assert s.state("t0") is TrialState.PAUSED_AT_THETA
    assert [type(a) for a in acts] == [Terminate] and acts[0].reason is TerminateReason.THETA


def test_metric_of_a_step_finished_during_a_checkpoint_is_recorded():
    """A step that completes after the checkpoint request is saved; its metric must be kept too."""
    s = Script(max_steps=10, theta=1.0)
    s.start()
    i1 = s.launched()
    s.steps("t0", i1, 3)
    s(HourElapsed, trial_id="t0", instance_id=i1)
    s(MetricReported, trial_id="t0", instance_id=i1, step=4, metrics={"loss": 0.25})
    s(CheckpointSaved, trial_id="t0", instance_id=i1, reason=CheckpointReason.HOP, step=4)
    i2 = s.launched()
    s.steps("t0", i2, 10)
    tr = s.orch.trials["t0"]
    assert tr.steps == list(range(1, 11))
    assert tr.losses[3] == 0.25
    assert s.state() is TrialState.CHECKPOINTING  # step 10 asked for the end checkpoint


def test_no_hop_before_the_first_step_on_an_instance():
    """A start-up that outlasts the hour (a cold worker under load at a high time scale) used to hop at step
    0, relaunch and hop again, forever: an hour without a step on the instance keeps it instead."""
    s = Script(max_steps=5, theta=1.0)
    s.start()
    i1 = s.launched()
    assert s(HourElapsed, trial_id="t0", instance_id=i1) == []
    assert s.state() is TrialState.RUNNING
    s.steps("t0", i1, 5)
    assert s.state() is TrialState.CHECKPOINTING  # the end checkpoint, on the same instance
    assert s.orch.trials["t0"].hops == 0


def test_hop_after_a_restore_needs_a_step_beyond_the_restored_one():
    s = Script(max_steps=10, theta=1.0)
    s.start()
    i1 = s.launched()
    s.steps("t0", i1, 3)
    assert s(HourElapsed, trial_id="t0", instance_id=i1) == [Checkpoint(trial_id="t0", instance_id=i1,
                                                                        reason=CheckpointReason.HOP)]
    s(CheckpointSaved, trial_id="t0", instance_id=i1, reason=CheckpointReason.HOP, step=3)
    i2 = s.launched()
    assert s(HourElapsed, trial_id="t0", instance_id=i2) == []  # resumed at 3, no step since


def _pause(s, t, iid, step):
    """Report trial ``t`` up to ``step`` (its loss curve from ``s.curve``) and save its barrier checkpoint."""
    acts = s.steps(t, iid, step, f=lambda k, t=t: s.curve[t](k))
    assert acts == [Checkpoint(trial_id=t, instance_id=iid, reason=CheckpointReason.THETA)]
    return s(CheckpointSaved, trial_id=t, instance_id=iid, reason=CheckpointReason.THETA, step=step)


def test_rungs_are_barriers_before_theta_ranked_by_the_last_value():
    # rung at 20 % of 10 = step 2 keeps 3, θ at step 5 keeps the top 1 (ES19, docs/design/earlycurve.md §8.12)
    s = Script(trials=("t0", "t1", "t2", "t3"), max_steps=10, theta=0.5, top_k=1, rungs="0.2:3")
    s.curve = {"t0": lambda k: 1.0 if k <= 2 else 0.1,  # best at θ, kept at the rung (3rd of 4)
               "t1": lambda k: 0.5, "t2": lambda k: 0.6, "t3": lambda k: 2.0}  # t3: last at the rung
    assert s.orch.config.barriers == ((2, 3), (5, 1))
    starts = s.start()
    assert {a.target_steps for a in starts} == {2}
    inst = {t: s.launched(t) for t in s.curve}
    for t in ("t0", "t1", "t2"):
        assert [type(a) for a in _pause(s, t, inst[t], 2)] == [Terminate]
    acts = _pause(s, "t3", inst["t3"], 2)
    launches = {a.trial_id: a for a in acts if isinstance(a, Launch)}
    assert set(launches) == {"t0", "t1", "t2"} and [a.trial_id for a in acts if isinstance(a, Stop)] == ["t3"]
    assert all(a.resume_step == 2 and a.target_steps == 5 for a in launches.values())
    assert not s.orch.selection_done and s.orch.selected == ()
    inst = {t: s.launched(t) for t in launches}
    for t in ("t1", "t0"):
        assert [type(a) for a in _pause(s, t, inst[t], 5)] == [Terminate]  # not yet: t2 still trains
    acts = _pause(s, "t2", inst["t2"], 5)
    assert [(type(a), a.trial_id) for a in acts if not isinstance(a, Terminate)] == [
        (Launch, "t0"), (Stop, "t1"), (Stop, "t2")]
    assert acts[[type(a) for a in acts].index(Launch)].target_steps == 10
    assert s.orch.selection_done and s.orch.selected == ("t0",)
    iid = s.launched("t0")
    s.steps("t0", iid, 10, f=s.curve["t0"])
    acts = s(CheckpointSaved, trial_id="t0", instance_id=iid, reason=CheckpointReason.END, step=10)
    assert isinstance(acts[-1], ExperimentFinished) and acts[-1].top_k == ("t0",)
    assert {t: tr.step for t, tr in s.orch.trials.items()} == {"t0": 10, "t1": 5, "t2": 5, "t3": 2}


class _ShiftByConfig(FinalMetricPredictor):
    """Predicts ``last loss − config["head_start"]``: a hyperparameter-aware predictor in its simplest form."""

    uses_config = True

    def predict_final(self, steps, values, max_steps, config=None):
        y = float(values[-1]) - (config or {}).get("head_start", 0.0)
        return Prediction(value=y, low=y, high=y, n_stages=0, method="shift")


def test_a_rung_predictor_ranks_the_rungs_with_each_trials_config():
    # by the last value t1 (0.5) and t2 (0.6) would be kept at the rung; the rung predictor gives t0 1.0 - 0.9 = 0.1,
    # t1 0.5 and t2 0.6 - 0.05 = 0.55
    configs = {"t0": {"head_start": 0.9}, "t1": {}, "t2": {"head_start": 0.05}}
    s = Script(trials=("t0", "t1", "t2"), max_steps=10, theta=0.5, top_k=1, rungs="0.2:2",
               rung_predictor=_ShiftByConfig(), configs=configs)
    s.curve = {"t0": lambda k: 1.0, "t1": lambda k: 0.5, "t2": lambda k: 0.6}
    s.start()
    inst = {t: s.launched(t) for t in s.curve}
    _pause(s, "t0", inst["t0"], 2)
    _pause(s, "t1", inst["t1"], 2)
    acts = _pause(s, "t2", inst["t2"], 2)
    assert [(type(a), a.trial_id) for a in acts if not isinstance(a, Terminate)] == [
        (Launch, "t0"), (Launch, "t1"), (Stop, "t2")]
    assert s.orch.trials["t0"].prediction is None  # a rung's prediction is not the θ barrier's


def test_a_kept_trial_waiting_to_relaunch_holds_the_next_barrier():
    chooser = FakeChooser()
    s = Script(trials=("a", "b", "c"), chooser=chooser, max_steps=10, theta=0.5, top_k=1, rungs=[(0.2, 2)])
    s.curve = {"a": lambda k: 1.0, "b": lambda k: 2.0, "c": lambda k: 3.0}
    s.start()
    inst = {t: s.launched(t) for t in s.curve}
    _pause(s, "a", inst["a"], 2)
    _pause(s, "b", inst["b"], 2)
    chooser.fail = 1  # the rung's first relaunch (a) finds no market
    acts = _pause(s, "c", inst["c"], 2)
    assert [type(a) for a in acts if not isinstance(a, Terminate)] == [ScheduleWakeUp, Launch, Stop]
    assert s.state("a") is TrialState.KEPT  # kept at the rung, waiting for a market: a state of its own
    ib = s.launched("b")
    acts = _pause(s, "b", ib, 5)  # b paused at θ, a has not trained: no barrier yet
    assert [type(x) for x in acts] == [Terminate] and not s.orch.selection_done
    acts = s(WakeUp, trial_id="a")
    assert [type(x) for x in acts] == [Launch] and acts[0].resume_step == 2 and acts[0].target_steps == 5
    acts = _pause(s, "a", s.launched("a"), 5)
    assert [(type(x), x.trial_id) for x in acts if not isinstance(x, Terminate)] == [(Launch, "a"), (Stop, "b")]


@pytest.mark.parametrize("rungs, theta, match", [
    ("0.5:6", 0.5, "fractions in"), ("0:6", 0.5, "fractions in"), ("0.2:6", 1.0, "no barrier"),
    ("0.2:3", 0.5, "exceed top_k"), ("0.1:6,0.2:6", 0.5, "keeps that fall"), ("0.2:6,0.1:4", 0.5, "rise"),
    ("0.2", 0.5, "fraction:keep"), ("0.2:6.5", 0.5, "whole keeps"), ("a:b", 0.5, "whole keeps"),
    ("0.21:6,0.29:4", 0.5, r"distinct steps below theta's \(steps \[3, 3, 5\]"),  # both ceil to step 3 of 10
])
def test_bad_rungs_are_refused_with_the_rule(rungs, theta, match):
    with pytest.raises(ConfigError, match=match):
        OrchestratorConfig(max_steps=10, theta=theta, top_k=3, rungs=rungs)


def test_rungs_parse_from_text_or_pairs():
    config = OrchestratorConfig(max_steps=100, theta=0.15, top_k=2, rungs="0.04:8, 0.06:6")
    assert config.rungs == ((0.04, 8), (0.06, 6)) and config.barriers == ((4, 8), (6, 6), (15, 2))
    assert OrchestratorConfig(max_steps=100, rungs=[[0.1, 5]]).rungs == ((0.1, 5),)
    assert OrchestratorConfig(max_steps=100, rungs=[]).barriers == ((70, 3),)
    assert OrchestratorConfig(max_steps=100, theta=1.0).barriers == ()


class HeadingRecorder(FakeChooser):
    """A horizon-planning chooser that records each launch's (trial, heading): the trials still on their way to
    the trial's next stop (design R11)."""

    plans_horizon = True

    def __init__(self):
        super().__init__()
        self.headings = []

    def choose(self, trial_id, now_s, *, steps_left=None, resume_step=None, heading=None):
        self.headings.append((trial_id, heading))
        return super().choose(trial_id, now_s)


def test_the_trials_heading_to_a_stop_share_the_jobs_time():
    chooser = HeadingRecorder()
    s = Script(trials=("t0", "t1", "t2", "t3"), chooser=chooser, max_steps=10, theta=0.5, top_k=2)
    s.curve = {"t0": lambda k: 4.0, "t1": lambda k: 1.0, "t2": lambda k: 3.0, "t3": lambda k: 2.0}
    s.start()
    assert chooser.headings == [(t, 4) for t in s.curve]  # four fresh trials head to the θ barrier
    inst = {t: s.launched(t) for t in s.curve}
    for t in ("t0", "t1", "t2"):
        _pause(s, t, inst[t], 5)
    s.steps("t3", inst["t3"], 3, f=s.curve["t3"])
    s(RevocationNotice, trial_id="t3", instance_id=inst["t3"], deadline_s=s.t + 121)
    s(CheckpointSaved, trial_id="t3", instance_id=inst["t3"], reason=CheckpointReason.REVOCATION, step=3)
    assert chooser.headings[-1] == ("t3", 1)  # the straggler alone holds the barrier: it pays the whole of V
    acts = _pause(s, "t3", s.launched("t3"), 5)
    assert {a.trial_id for a in acts if isinstance(a, Launch)} == {"t1", "t3"}
    assert chooser.headings[-2:] == [("t1", 2), ("t3", 2)]  # the kept two head on to the end together


def test_heading_leaves_out_ended_trials_and_follows_rungs_and_the_end():
    # θ = 1 (no barrier): every live trial heads to the end; a failed trial and a finished one no longer count
    chooser = HeadingRecorder()
    s = Script(trials=("a", "b", "c"), chooser=chooser, max_steps=4, theta=1.0, top_k=1, max_failures=0)
    s.start()
    inst = {t: s.launched(t) for t in ("a", "b", "c")}
    s(SegmentFailed, trial_id="a", instance_id=inst["a"], error="ValueError")
    assert s.state("a") is TrialState.FAILED
    s.steps("b", inst["b"], 4)
    s(CheckpointSaved, trial_id="b", instance_id=inst["b"], reason=CheckpointReason.END, step=4)
    s.steps("c", inst["c"], 2)
    s(RevocationNotice, trial_id="c", instance_id=inst["c"], deadline_s=s.t + 121)
    s(CheckpointSaved, trial_id="c", instance_id=inst["c"], reason=CheckpointReason.REVOCATION, step=2)
    assert chooser.headings == [("a", 3), ("b", 3), ("c", 3), ("c", 1)]  # c is the last one still on its way
    # a rung at step 2 keeps 3 of 4, θ at step 5 keeps 1: the kept trials head on together to each next stop
    chooser = HeadingRecorder()
    s = Script(trials=("t0", "t1", "t2", "t3"), chooser=chooser, max_steps=10, theta=0.5, top_k=1, rungs="0.2:3")
    s.curve = {"t0": lambda k: 0.1, "t1": lambda k: 0.5, "t2": lambda k: 0.6, "t3": lambda k: 2.0}
    s.start()
    inst = {t: s.launched(t) for t in s.curve}
    for t in s.curve:
        _pause(s, t, inst[t], 2)
    assert chooser.headings[4:] == [("t0", 3), ("t1", 3), ("t2", 3)]  # t3 stopped at the rung
    inst = {t: s.launched(t) for t in ("t0", "t1", "t2")}
    for t in ("t0", "t1", "t2"):
        _pause(s, t, inst[t], 5)
    assert chooser.headings[7:] == [("t0", 1)]  # θ keeps one: it alone heads to the end
