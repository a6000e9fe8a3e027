"""``digits-mlp``: a torch MLP on scikit-learn's 8x8 digits, SGD with a step-decay learning rate.

Stands in for the paper's ResNet/CIFAR-10 job (Table II): validation cross-entropy, multi-stage
learning curves from the learning-rate drops, 16 configurations.

- Data: ``load_digits`` (1,797 images, 64 features, 10 classes), fixed 80/20 train/validation split,
  features standardised.
- Model: 64 -> ``hidden`` -> ReLU -> 10, PyTorch default initialisation seeded from the trial's rng.
- One step = 4 minibatches of ``batch_size`` samples drawn with replacement from ``self.rng``, then
  the validation cross-entropy on all 359 validation images. Real cost about 2 ms of CPU per step.
- Learning rate: ``lr`` multiplied by 0.1 after 30 % and again after 60 % of ``max_steps`` (300), so
  a curve has three stages.
- [I] D13 grid (invented; the paper's is lost): ``lr`` in {0.05, 0.1, 0.2, 0.4} x ``hidden`` in
  {32, 128} x ``batch_size`` in {8, 32}, plain SGD (no momentum: with momentum 0.9 the larger rates
  diverge). Small batches and large rates leave SGD noise that each decay removes, which is what
  makes the stages visible.
- Simulated costs: 60 s per step on the 2-vCPU reference instance (a trial is 5 h there, long enough
  to meet hourly hops and revocations), checkpoint 100 MB (a ResNet-50-sized model with optimizer
  state). The real checkpoint is about 10-45 KB.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from spottune.trainable import Trainable
from spottune.workloads._data import load
from spottune.workloads._registry import Workload

MAX_STEPS = 300
MINIBATCHES_PER_STEP = 4
DECAY_AT = (0.3, 0.6)  # fractions of max_steps
DECAY_GAMMA = 0.1


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """Run torch single-threaded inside the block, then restore the process setting.

    [I] A 64-128-10 MLP is far too small for intra-op parallelism: on a 2-core machine under load,
    2 threads made a step 10-50x slower (40-270 ms vs 4-5 ms) from OpenMP spin-waiting. Restoring
    the previous count keeps other torch users in the process (RevPred) unaffected; a toggle costs
    about 0.3 us.
    """
    import torch

    previous = torch.get_num_threads()
    if previous != 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if previous != 1:
            torch.set_num_threads(previous)


class DigitsMLP(Trainable):
    """Torch MLP on digits; ``config`` keys: ``lr``, ``hidden``, ``batch_size``, optional ``momentum``
    and ``weight_decay``. The decay milestones follow ``self.max_steps`` (default 300)."""

    reference_seconds_per_step = 60.0
    checkpoint_size_mb = 100.0

    def setup(self, config: dict[str, Any]) -> None:
        import torch

        data = load("digits")
        self._X_train = torch.as_tensor(data.X_train, dtype=torch.float32)
        self._y_train = torch.as_tensor(data.y_train)
        self._X_val = torch.as_tensor(data.X_val, dtype=torch.float32)
        self._y_val = torch.as_tensor(data.y_val)
        hidden = int(config.get("hidden", 64))
        init_seed = int(self.rng.integers(2**31))
        with torch.random.fork_rng(devices=[]):  # keep the global torch RNG untouched
            torch.manual_seed(init_seed)
            self.model = torch.nn.Sequential(torch.nn.Linear(64, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 10))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=float(config.get("lr", 0.1)),
                                         momentum=float(config.get("momentum", 0.0)),
                                         weight_decay=float(config.get("weight_decay", 0.0)))
        max_steps = int(self.max_steps or config.get("max_steps", MAX_STEPS))
        milestones = sorted({max(1, int(round(f * max_steps))) for f in DECAY_AT})
        self.scheduler = torch.optim.lr_scheduler.MultiStepLR(self.optimizer, milestones=milestones, gamma=DECAY_GAMMA)
        self.batch_size = int(config.get("batch_size", 32))

    def step(self) -> dict[str, float]:
        with _one_thread():
            return self._step()

    def _step(self) -> dict[str, float]:
        import torch
        from torch.nn.functional import cross_entropy

        n = len(self._X_train)
        lr = self.optimizer.param_groups[0]["lr"]
        self.model.train()
        train_loss = 0.0
        for _ in range(MINIBATCHES_PER_STEP):
            idx = torch.from_numpy(self.rng.integers(0, n, self.batch_size))
            self.optimizer.zero_grad()
            loss = cross_entropy(self.model(self._X_train[idx]), self._y_train[idx])
            loss.backward()
            self.optimizer.step()
            train_loss += loss.item() / MINIBATCHES_PER_STEP
        self.scheduler.step()
        self.model.eval()
        with torch.no_grad():
            logits = self.model(self._X_val)
            val_loss = cross_entropy(logits, self._y_val).item()
            val_acc = (logits.argmax(dim=1) == self._y_val).float().mean().item()
        return {"val_cross_entropy": val_loss, "val_accuracy": val_acc, "train_loss": train_loss, "lr": lr}

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        import torch

        torch.save({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                    "scheduler": self.scheduler.state_dict()}, os.path.join(checkpoint_dir, "model.pt"))

    def load_checkpoint(self, checkpoint_dir: str) -> None:
        import torch

        state = torch.load(os.path.join(checkpoint_dir, "model.pt"), weights_only=True)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])


WORKLOAD = Workload(
    name="digits-mlp",
    trainable=DigitsMLP,
    metric="val_cross_entropy",
    mode="min",
    max_steps=MAX_STEPS,
    search_space={"lr": {"grid_search": [0.05, 0.1, 0.2, 0.4]},
                  "hidden": {"grid_search": [32, 128]},
                  "batch_size": {"grid_search": [8, 32]}},
    description="torch MLP on digits, SGD with step decay, validation cross-entropy (stands in for ResNet/CIFAR-10)",
)
