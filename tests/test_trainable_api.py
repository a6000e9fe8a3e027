"""The Trainable API: class form, function form, framework state in checkpoints."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from spottune.errors import CheckpointError, ConfigError
from spottune.trainable import FRAMEWORK_STATE_FILE, Trainable, from_function, trial_seed


class Noisy(Trainable):
    reference_seconds_per_step = 30.0
    checkpoint_size_mb = 0.001

    def setup(self, config):
        self.x = float(config.get("x0", 5.0))

    def step(self):
        self.x = self.x * (1 - self.config["lr"]) + self.rng.normal(0, 0.1)
        return {"loss": self.x**2, "n": np.int64(3)}

    def save_checkpoint(self, checkpoint_dir):
        Path(checkpoint_dir, "x.json").write_text(json.dumps(self.x))

    def load_checkpoint(self, checkpoint_dir):
        self.x = json.loads(Path(checkpoint_dir, "x.json").read_text())


def _noisy_step(config, state, rng):
    state["x"] = state["x"] * (1 - config["lr"]) + rng.normal(0, 0.1)
    return {"loss": state["x"] ** 2}


NoisyFn = from_function(_noisy_step, init=lambda config, rng: {"x": float(config.get("x0", 5.0))},
                        reference_seconds_per_step=30.0, checkpoint_size_mb=0.001)


@pytest.mark.parametrize("cls", [Noisy, NoisyFn])
def test_save_restore_continues_the_same_curve(cls, tmp_path):
    ref = cls({"lr": 0.1}, seed=3)
    full = [ref.train()["loss"] for _ in range(30)]
    t = cls({"lr": 0.1}, seed=3)
    got = [t.train()["loss"] for _ in range(10)]
    t.save(tmp_path / "c1")
    t2 = cls({"lr": 0.1}, seed=3)
    t2.restore(tmp_path / "c1")
    assert t2.iteration == 10
    got += [t2.train()["loss"] for _ in range(20)]
    assert got == full


def test_train_adds_step_and_floats():
    m = Noisy({"lr": 0.5}).train()
    assert m["step"] == 1 and type(m["n"]) is float and type(m["loss"]) is float


def test_framework_state_file_holds_iteration_and_rng(tmp_path):
    t = Noisy({"lr": 0.1}, seed=9)
    t.train()
    t.save(tmp_path)
    state = json.loads((tmp_path / FRAMEWORK_STATE_FILE).read_text())
    assert state["iteration"] == 1 and state["rng"]["bit_generator"] == "PCG64" and state["seed"] == 9


def test_restore_from_a_non_checkpoint_raises(tmp_path):
    with pytest.raises(CheckpointError, match="is not a spottune checkpoint"):
        Noisy({"lr": 0.1}).restore(tmp_path)


@pytest.mark.parametrize("state", [{}, {"iteration": 1}, {"iteration": 1, "rng": {"bit_generator": "NoSuchGen"}},
                                   {"iteration": "x", "rng": {}}, []])
def test_restore_from_a_malformed_state_file_raises_and_changes_nothing(tmp_path, state):
    (tmp_path / FRAMEWORK_STATE_FILE).write_text(json.dumps(state))
    t = Noisy({"lr": 0.1}, seed=3)
    t.train()
    with pytest.raises(CheckpointError, match="is malformed"):
        t.restore(tmp_path)
    assert t.iteration == 1


def test_step_must_return_numbers():
    class Bad(Noisy):
        def step(self):
            return {"loss": "high"}

    class Worse(Noisy):
        def step(self):
            return 3.0

    with pytest.raises(TypeError, match="metric 'loss' is 'high', but must be a number"):
        Bad({"lr": 0.1}).train()
    with pytest.raises(TypeError, match="must return a dict of metrics"):
        Worse({"lr": 0.1}).train()


def test_abstract_methods_are_required():
    class Half(Trainable):
        def setup(self, config):
            pass

    with pytest.raises(TypeError):
        Half({})  # type: ignore[abstract]


def test_from_function_attributes_and_validation():
    assert NoisyFn.reference_seconds_per_step == 30.0 and NoisyFn.checkpoint_size_mb == 0.001
    assert NoisyFn.__name__ == "NoisyStepTrainable" and issubclass(NoisyFn, Trainable)
    assert NoisyFn.__module__ == __name__
    with pytest.raises(ConfigError, match="reference_seconds_per_step is 0, but must be a number > 0"):
        from_function(_noisy_step, reference_seconds_per_step=0)
    t = from_function(lambda c, s, r: {"v": len(s)})({})
    assert t.state == {} and t.train()["v"] == 0


def test_function_state_is_pickled(tmp_path):
    t = NoisyFn({"lr": 0.1})
    t.train()
    t.save(tmp_path)
    from spottune.checkpoint._secrets import verify

    assert pickle.loads(verify((tmp_path / "state.pkl").read_bytes(), "state.pkl")) == t.state  # signed (HMAC)


def test_max_steps_is_available_in_setup():
    class Budget(Noisy):
        def setup(self, config):
            super().setup(config)
            self.budget = self.max_steps

    assert Budget({"lr": 0.1}, max_steps=77).budget == 77 and Budget({"lr": 0.1}).budget is None


def test_trial_seed_is_stable_and_distinct():
    seeds = [trial_seed(0, i) for i in range(100)]
    assert len(set(seeds)) == 100 and seeds == [trial_seed(0, i) for i in range(100)]
    assert trial_seed(1, 0) != trial_seed(0, 0) and all(0 <= s < 2**32 for s in seeds)
