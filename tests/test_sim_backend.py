"""The simulator driver on synthetic price traces with a tiny trainable (fast, deterministic)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from spotmarket.prices import Market, PriceHistory
from spottune.backends import RecordedCurves, SimBackend, SimSettings, TrainableCurves
from spottune.errors import BackendError
from spotmarket import Billing, LegacyBidRevocation
from spottune.orchestrator import Orchestrator, OrchestratorConfig, TrialState
from spottune.trainable import Trainable

T0 = pd.Timestamp("2015-05-05T00:00Z").value / 1e9
A = Market("us-east-1a", "r3.large")
B = Market("us-east-1b", "c3.xlarge")


class Quadratic(Trainable):
    reference_seconds_per_step = 60.0
    checkpoint_size_mb = 10.0

    def setup(self, config):
        self.x = 5.0

    def step(self):
        if self.iteration + 1 == self.config.get("fail_at"):
            raise RuntimeError("boom")
        self.x -= self.config["lr"] * 2 * self.x + float(self.rng.normal(0, 0.01))
        return {"loss": self.x**2 + 0.1}

    def save_checkpoint(self, d):
        Path(d, "x").write_text(repr(self.x))

    def load_checkpoint(self, d):
        self.x = float(Path(d, "x").read_text())


def history(spike_at_s=None, spike_len_s=600.0, hours=48):
    """Flat 0.02 USD/h in A and 0.05 in B; optionally A spikes to 1.0 for ``spike_len_s``."""
    rows = [(T0 - 86400, A, 0.02), (T0 - 86400, B, 0.05)]
    if spike_at_s is not None:
        rows += [(T0 + spike_at_s, A, 1.0), (T0 + spike_at_s + spike_len_s, A, 0.02)]
    rows.append((T0 + hours * 3600, A, 0.02))
    table = pd.DataFrame({
        "timestamp": pd.to_datetime([r[0] for r in rows], unit="s", utc=True),
        "availability_zone": [r[1].availability_zone for r in rows],
        "instance_type": [r[1].instance_type for r in rows],
        "product_description": "Linux/UNIX",
        "price": [r[2] for r in rows],
    })
    return PriceHistory(table)


@dataclass(frozen=True)
class Choice:
    market: Market
    max_price_usd_per_hour: float


class Fixed:
    """Always market A with b = 0.1 USD/h (the spike to 1.0 revokes it)."""

    def __init__(self, market=A):
        self.market = market
        self.segments = []

    def choose(self, trial_id, now_s):
        return Choice(self.market, 0.1)

    def record_segment(self, *args):
        self.segments.append(args)


FACTS = {"r3.large": (2, 6.5), "c3.xlarge": (4, 14.0)}


def simulate(configs, *, spike_at_s=None, theta=1.0, top_k=1, max_steps=30, size_mb=None, seed=0, cov=0.0,
             max_failures=1, plateau=None):
    hist = history(spike_at_s)
    ids = [f"t{i}" for i in range(len(configs))]
    orch = Orchestrator(ids, OrchestratorConfig(max_steps=max_steps, theta=theta, top_k=top_k,
                                                max_failures=max_failures), Fixed(), plateau_rule=plateau)
    curves = TrainableCurves({t: (lambda c=c, i=i: Quadratic(c, seed=i)) for i, (t, c) in enumerate(zip(ids, configs))})
    sim = SimBackend(orch, hist, LegacyBidRevocation(hist), Billing(), curves, FACTS.__getitem__, T0,
                     SimSettings(step_time_cov=cov, checkpoint_size_mb=size_mb, seed=seed))
    return orch, sim.run(), curves


def test_uninterrupted_run_hops_every_hour_and_pays_every_second():
    orch, rec, _ = simulate([{"lr": 0.05}], max_steps=150)  # 150 steps x 60 s = 2.5 h (+ checkpoints)
    tr = orch.trials["t0"]
    assert tr.state is TrialState.FINISHED and tr.step == 150 and tr.hops == 2
    assert [r.ended_by for r in rec.ledger] == ["user"] * 3
    assert all(r.refunded_usd == 0 and r.charged_usd > 0 for r in rec.ledger)
    # 10 MB on 2 vCPUs: 1 s overhead + 10 / 67.59 s per checkpoint and restore
    assert rec.ledger[0].end_s - rec.ledger[0].start_s == pytest.approx(3600 + 1 + 10 / 67.5893, abs=1e-3)
    assert sum(r.charged_usd for r in rec.ledger) == pytest.approx(0.02 * (rec.end_s - rec.start_s) / 3600, rel=1e-3)
    assert orch.top_k == ("t0",) and rec.end_s is not None


def test_revocation_in_first_hour_is_refunded_checkpointed_and_relaunched():
    orch, rec, _ = simulate([{"lr": 0.05}], spike_at_s=1800.0, max_steps=60)
    tr = orch.trials["t0"]
    assert tr.state is TrialState.FINISHED and tr.revocations == 1 and tr.failures == 0 and tr.lost_steps == 0
    first = rec.ledger[0]
    assert first.ended_by == "provider" and first.charged_usd == 0 and first.refunded_usd > 0
    assert first.end_s == pytest.approx(T0 + 1800 + 120)  # notice at the crossing, termination 120 s later
    kinds = [(r["kind"], r["type"], r.get("reason")) for r in rec.log if r.get("trial_id") == "t0"]
    i = kinds.index(("event", "RevocationNotice", None))
    assert kinds[i + 1] == ("action", "Checkpoint", "revocation")
    assert ("event", "CheckpointSaved", "revocation") in kinds[i:] and ("action", "Launch", None) in kinds[i:]
    assert rec.instance_steps[first.instance_id][1] == 0


def test_checkpoint_too_slow_loses_steps_and_resumes_from_last_good_one():
    # 10 GB on 2 vCPUs needs ~149 s > 120 s: the revocation checkpoint cannot finish
    orch, rec, curves = simulate([{"lr": 0.05}], spike_at_s=1800.0, max_steps=40, size_mb=10_000.0)
    tr = orch.trials["t0"]
    assert tr.state is TrialState.FINISHED and tr.revocations == 1 and tr.failures == 0
    assert tr.lost_steps > 0 and tr.lost_steps == rec.instance_steps[rec.ledger[0].instance_id][1]
    assert tr.steps == list(range(1, 41))  # one point per step on the final timeline
    # same curve as an uninterrupted run of the same seed (no work lost semantically)
    ref = Quadratic({"lr": 0.05}, seed=0)
    expected = [ref.train()["loss"] for _ in range(40)]
    assert np.allclose(tr.losses, expected)


def test_failing_trainable_is_retried_then_failed_without_stopping_others():
    orch, rec, _ = simulate([{"lr": 0.05, "fail_at": 5}, {"lr": 0.05}], max_failures=1, top_k=2)
    bad, good = orch.trials["t0"], orch.trials["t1"]
    assert bad.state is TrialState.FAILED and bad.failures == 2 and bad.revocations == 0
    assert good.state is TrialState.FINISHED and orch.top_k == ("t1",)


def test_theta_barrier_keeps_top_k_in_the_simulator():
    configs = [{"lr": lr} for lr in (0.001, 0.05, 0.01, 0.2)]
    orch, rec, _ = simulate(configs, theta=0.5, top_k=2, max_steps=20)
    states = {t: tr.state for t, tr in orch.trials.items()}
    assert sorted(states.values()).count(TrialState.FINISHED) == 2
    assert sorted(states.values()).count(TrialState.STOPPED_EARLY) == 2
    assert states["t0"] is TrialState.STOPPED_EARLY  # lr 0.001 is by far the worst at θ
    assert set(orch.top_k) <= set(orch.selected)


def test_same_seed_same_run_with_step_noise():
    a = simulate([{"lr": 0.05}, {"lr": 0.1}], spike_at_s=2000.0, cov=0.08, seed=3, max_steps=80)[1]
    b = simulate([{"lr": 0.05}, {"lr": 0.1}], spike_at_s=2000.0, cov=0.08, seed=3, max_steps=80)[1]
    c = simulate([{"lr": 0.05}, {"lr": 0.1}], spike_at_s=2000.0, cov=0.08, seed=4, max_steps=80)[1]
    assert a.log == b.log and a.ledger == b.ledger
    assert a.log != c.log


def test_history_too_short_is_a_backend_error():
    hist = history(hours=1)
    orch = Orchestrator(["t0"], OrchestratorConfig(max_steps=200, theta=1.0), Fixed())
    curves = RecordedCurves({"t0": [{"loss": 1.0 / k} for k in range(1, 201)]})
    sim = SimBackend(orch, hist, LegacyBidRevocation(hist), Billing(), curves, FACTS.__getitem__, T0)
    with pytest.raises(BackendError, match="price history ends"):
        sim.run()
