"""The orchestrator's models change only through ``handle()``: model events reach the chooser, drivers never touch it.

- an ast check over ``spottune/backends/``: no driver reaches the orchestrator's models (``.chooser``,
  ``.predictor``, ``.rung_predictor``, ``.exclusions``, also not through ``getattr``);
- ``CapacityRefused``, ``InstanceEnded`` and ``MarketSignal`` fed to ``handle()`` reach a real chooser's exclusions
  and revocation predictor, return no action and change no trial; a chooser that does not learn ignores them;
- the simulator delivers them: every billed instance run reaches an online predictor once, with its ledger times;
- the final-metric predictor's answers of one ``handle()`` are taken by the driver, and recalled ones are not
  computed again.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import spottune.backends
from earlycurve import Prediction
from provisioner import CheapestMarketChooser, InstanceCatalog, LearningChooser, MarketExclusions, Pool
from spotmarket import Billing, LegacyBidRevocation
from spottune.backends import SimBackend, SimSettings, TrainableCurves
from spottune.orchestrator import (
    CapacityRefused,
    CheckpointReason,
    CheckpointSaved,
    ExperimentStarted,
    InstanceEnded,
    Launch,
    MarketSignal,
    MetricReported,
    Orchestrator,
    OrchestratorConfig,
    TrialLaunched,
    TrialState,
    prediction_key,
)
from tests._fakes import FakeChooser
from tests.test_sim_backend import A, B, FACTS, T0, Quadratic, history

#: What belongs to the orchestrator's models; a driver reaches none of it.
MODEL_ATTRIBUTES = {"chooser", "predictor", "rung_predictor", "exclusions"}


def model_reaches(source: str, name: str) -> list[str]:
    """``name:line reaches .attr`` for every attribute access (or getattr/hasattr/setattr by name) of a model."""
    out = []
    for node in ast.walk(ast.parse(source, filename=name)):
        if isinstance(node, ast.Attribute) and node.attr in MODEL_ATTRIBUTES:
            out.append((node.lineno, f"{name}:{node.lineno} reaches .{node.attr}"))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "hasattr", "setattr", "delattr") and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and node.args[1].value in MODEL_ATTRIBUTES):
            out.append((node.lineno, f"{name}:{node.lineno} reaches .{node.args[1].value}"))
    return [text for _, text in sorted(out)]


def test_no_driver_reaches_the_orchestrators_models():
    folder = Path(spottune.backends.__file__).parent
    files = sorted(folder.rglob("*.py"))
    assert len(files) >= 20  # sim, local, aws, ray and the shared modules
    problems = [p for path in files for p in model_reaches(path.read_text(), str(path.relative_to(folder)))]
    assert problems == []


def test_the_check_catches_a_driver_that_calls_a_model():
    bad = ("def _end(self, inst):\n"
           "    self.orchestrator.chooser.predictor.observe(inst.market, 0.0, 1.0, False)\n"
           "    fn = getattr(getattr(self.orchestrator, 'chooser', None), 'predictor', None)\n"
           "    self.exclusions.exclude(inst.market, 0.0, 'x')\n")
    assert model_reaches(bad, "bad.py") == [
        "bad.py:2 reaches .chooser", "bad.py:2 reaches .predictor",
        "bad.py:3 reaches .chooser", "bad.py:3 reaches .predictor",
        "bad.py:4 reaches .exclusions",
    ]
    assert model_reaches("self.orchestrator.handle(event)\nself.orchestrator.trials\n", "ok.py") == []


class Recorder:
    """A revocation predictor (p = 0) that records what it is told: an online one that also takes signals."""

    def __init__(self):
        self.observed, self.signals = [], []

    def predict_proba(self, markets, times_s, max_prices_usd_per_hour):
        return np.zeros(len(markets))

    def observe(self, market, launch_s, end_s, revoked):
        self.observed.append((market, launch_s, end_s, revoked))

    def signal(self, market, time_s, kind, value):
        self.signals.append((market, time_s, kind, value))


def _chooser(predictor=None, exclusions=None, hours=24):
    return CheapestMarketChooser(history(hours=hours), InstanceCatalog.load(), Pool(), np.random.default_rng(0),
                                 predictor=predictor, exclusions=exclusions)


def test_model_events_through_handle_reach_the_choosers_models():
    predictor, exclusions = Recorder(), MarketExclusions(600.0)
    chooser = _chooser(predictor, exclusions)
    assert isinstance(chooser, LearningChooser)
    orch = Orchestrator(["t0", "t1"], OrchestratorConfig(max_steps=10, theta=1.0, top_k=1), chooser)
    # a signal may come before the start (AWS's placement scores are read first)
    assert orch.handle(MarketSignal(time_s=T0 - 1.0, market=B, kind="placement_score", value=3.0)) == []
    launches = orch.handle(ExperimentStarted(time_s=T0))
    assert [a.market for a in launches] == [A, A]  # A is the cheapest
    before = {t: (tr.state, tr.failures, tr.revocations) for t, tr in orch.trials.items()}

    assert orch.handle(CapacityRefused(time_s=T0 + 5.0, market=A, reason="InsufficientInstanceCapacity")) == []
    assert exclusions.active(T0 + 5.0) == {A: f"excluded after InsufficientInstanceCapacity until {T0 + 605.0:.0f} s"}
    assert orch.observes_instances
    assert orch.handle(InstanceEnded(time_s=T0 + 900.0, trial_id="t0", instance_id="i-1", market=B,
                                     started_s=T0 + 100.0, interrupted=True)) == []
    assert predictor.observed == [(B, T0 + 100.0, T0 + 900.0, True)]
    assert predictor.signals == [(B, T0 - 1.0, "placement_score", 3.0)]
    assert {t: (tr.state, tr.failures, tr.revocations) for t, tr in orch.trials.items()} == before

    # the refusal fails t0 over at once: its market is excluded, so the next choice is B
    from spottune.orchestrator import LaunchFailed

    acts = orch.handle(LaunchFailed(time_s=T0 + 5.0, trial_id="t0", error="InsufficientInstanceCapacity"))
    assert [(type(a), a.market) for a in acts] == [(Launch, B)]


def test_a_chooser_that_does_not_learn_ignores_model_events():
    chooser = FakeChooser()
    assert not isinstance(chooser, LearningChooser)
    orch = Orchestrator(["t0"], OrchestratorConfig(max_steps=10, theta=1.0, top_k=1), chooser)
    orch.handle(ExperimentStarted(time_s=0.0))
    for event in (CapacityRefused(time_s=1.0, market=A, reason="x"), MarketSignal(time_s=1.0, market=A, kind="k", value=1.0),
                  InstanceEnded(time_s=2.0, trial_id="t0", instance_id="i", market=A, started_s=0.0)):
        assert orch.handle(event) == []
    assert not orch.observes_instances and orch.trials["t0"].state is TrialState.LAUNCHING


def test_a_predictor_that_does_not_learn_is_not_told():
    chooser = _chooser(predictor=None)
    orch = Orchestrator(["t0"], OrchestratorConfig(max_steps=10, theta=1.0, top_k=1), chooser)
    assert isinstance(chooser, LearningChooser) and not orch.observes_instances
    assert orch.handle(InstanceEnded(time_s=2.0, trial_id="t0", instance_id="i", market=A, started_s=0.0)) == []
    assert chooser.excluded(0.0) == {}  # built without exclusions: a refusal is not remembered
    orch.handle(CapacityRefused(time_s=1.0, market=A, reason="x"))
    assert chooser.excluded(1.0) == {}


def test_the_simulator_tells_the_orchestrator_of_every_billed_run():
    """Every ledger row reaches the online predictor once, as an InstanceEnded with the row's start and end; the
    event log holds no model event (the ledger holds the data)."""
    hist = history(1800.0, hours=24)
    predictor = Recorder()
    chooser = CheapestMarketChooser(hist, InstanceCatalog.load(), Pool(), np.random.default_rng(0), predictor=predictor)
    orch = Orchestrator(["t0", "t1"], OrchestratorConfig(max_steps=60, theta=1.0, top_k=1), chooser)
    curves = TrainableCurves({t: (lambda i=i: Quadratic({"lr": 0.05}, seed=i)) for i, t in enumerate(["t0", "t1"])})
    sim = SimBackend(orch, hist, LegacyBidRevocation(hist), Billing(), curves, FACTS.__getitem__, T0, SimSettings(seed=0))
    rec = sim.run()
    assert orch.done and len(rec.ledger) >= 2
    rows = sorted((str(r.market), r.start_s, r.end_s) for r in rec.ledger)
    seen = sorted((str(m), s, e) for m, s, e, _ in predictor.observed)
    assert seen == rows
    assert not {"CapacityRefused", "InstanceEnded", "MarketSignal"} & {r["type"] for r in rec.log}


class Counting:
    """A final-metric predictor that counts its fits and answers the last value."""

    def __init__(self):
        self.calls = 0

    def predict_final(self, steps, values, max_steps):
        self.calls += 1
        return Prediction(value=float(values[-1]), low=float(values[-1]), high=float(values[-1]))


def _to_barrier(orch, recall=None):
    """Start two trials, run each to θ (2 of 4 steps) and save: the last save ranks both at the barrier."""
    orch.handle(ExperimentStarted(time_s=0.0))
    for i, t in enumerate(("t0", "t1")):
        orch.handle(TrialLaunched(time_s=1.0, trial_id=t, instance_id=f"i{i}", market=A, started_s=0.0))
        for step in (1, 2):
            orch.handle(MetricReported(time_s=1.0 + step, trial_id=t, instance_id=f"i{i}", step=step,
                                       metrics={"loss": 1.0 / (step + i)}))
    orch.handle(CheckpointSaved(time_s=5.0, trial_id="t0", instance_id="i0", reason=CheckpointReason.THETA, step=2))
    assert orch.take_predictions() == ()  # no barrier yet
    return orch.handle(CheckpointSaved(time_s=5.0, trial_id="t1", instance_id="i1", reason=CheckpointReason.THETA,
                                       step=2), recall=recall)


def test_the_predictors_answers_are_taken_by_the_driver_and_recalled_on_replay():
    predictor = Counting()
    orch = Orchestrator(["t0", "t1"], OrchestratorConfig(max_steps=4, theta=0.5, top_k=1), FakeChooser(),
                        predictor=predictor)
    _to_barrier(orch)
    answers = orch.take_predictions()
    assert predictor.calls == 2 and [a.error for a in answers] == [None, None]
    assert answers[0].key == prediction_key(np.array([1.0, 2.0]), np.array([1.0, 0.5]), 4, {})
    assert orch.take_predictions() == ()  # taken once

    journaled = {a.key: {"k": "memo", "key": a.key, "p": {"type": "Prediction", "value": 9.0, "low": 9.0,
                                                             "high": 9.0}} for a in answers}
    asked = []

    def recall(index, key):
        asked.append(index)
        return journaled.get(key)

    again = Counting()
    fresh = Orchestrator(["t0", "t1"], OrchestratorConfig(max_steps=4, theta=0.5, top_k=1), FakeChooser(),
                         predictor=Counting())
    replayed = Orchestrator(["t0", "t1"], OrchestratorConfig(max_steps=4, theta=0.5, top_k=1), FakeChooser(),
                            predictor=again)
    _to_barrier(replayed, recall=recall)
    assert again.calls == 0 and asked == [0, 1]  # both answers read back, in order
    assert [a.recalled is not None and a.prediction.value for a in replayed.take_predictions()] == [9.0, 9.0]
    _to_barrier(fresh, recall=lambda index, key: None)  # nothing journaled: computed
    assert fresh.predictor.calls == 2


def test_a_recalled_error_is_a_predictor_error():
    predictor = Counting()
    orch = Orchestrator(["t0", "t1"], OrchestratorConfig(max_steps=4, theta=0.5, top_k=1), FakeChooser(),
                        predictor=predictor)
    acts = _to_barrier(orch, recall=lambda index, key: {"k": "memo", "key": key, "error": "ValueError: no fit"})
    answers = orch.take_predictions()
    assert predictor.calls == 0 and [a.error for a in answers] == ["ValueError: no fit"] * 2
    assert [(type(a), a.trial_id) for a in acts if isinstance(a, Launch)] == [(Launch, "t1")]  # ranked by last value
    assert orch.trials["t1"].predicted_loss == pytest.approx(1 / 3) and orch.trials["t1"].prediction is None
