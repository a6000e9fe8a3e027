"""``linreg``: linear regression on diabetes by minibatch SGD; validation MSE.

Stands in for the paper's LiR/YearPredictionMSD job (Table II).

- Data: ``load_diabetes`` (442 samples, 10 features), fixed 80/20 split, features standardised.
  The model is fit to the standardised target; the reported ``val_mse`` is in the original units
  (squared disease-progression score; the null model scores about 5,900 on this split).
- [I] D13 grid (invented): ``lr`` in {0.001, 0.003, 0.01, 0.03} x ``l2`` in {0, 0.01, 0.1, 1.0};
  batch 16, 4 minibatches per step. Real cost about 0.1 ms per step.
- Simulated costs: 20 s per step on the 2-vCPU reference instance (a pass over YearPredictionMSD's
  463k x 90 matrix; a trial is 2.8 h there); checkpoint 0.01 MB.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from spottune.workloads._data import Split
from spottune.workloads._linear import LinearSGD
from spottune.workloads._registry import Workload


class LinReg(LinearSGD):
    """Least-squares linear regression on the standardised target."""

    dataset = "diabetes"
    reference_seconds_per_step = 20.0
    checkpoint_size_mb = 0.01

    def setup(self, config: dict[str, Any]) -> None:
        config = {"batch_size": 16, **config}
        super().setup(config)

    def prepare(self, data: Split) -> Split:
        self.y_mean = float(data.y_train.mean())
        self.y_std = float(data.y_train.std())
        scale = lambda y: (y - self.y_mean) / self.y_std  # noqa: E731
        return Split(data.X_train, scale(data.y_train), data.X_val, scale(data.y_val))

    def grad(self, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
        r = X @ self.w + self.b - y
        return 2.0 * X.T @ r / len(y), float(2.0 * r.mean())

    def metrics(self) -> dict[str, float]:
        d = self.data
        r = d.X_val @ self.w + self.b - d.y_val
        return {"val_mse": float(np.mean(r * r) * self.y_std**2)}


WORKLOAD = Workload(
    name="linreg",
    trainable=LinReg,
    metric="val_mse",
    mode="min",
    max_steps=500,
    search_space={"lr": {"grid_search": [0.001, 0.003, 0.01, 0.03]},
                  "l2": {"grid_search": [0.0, 0.01, 0.1, 1.0]}},
    description="linear regression on diabetes, SGD, validation MSE (stands in for LiR/YearPredictionMSD)",
)
