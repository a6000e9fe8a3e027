"""``logreg``: logistic regression on breast_cancer by minibatch SGD; validation cross-entropy.

Stands in for the paper's LoR/Epsilon job (Table II; S_max = 1000 as in the paper's refund example).

- Data: ``load_breast_cancer`` (569 samples, 30 features, 2 classes), fixed 80/20 split, standardised.
- [I] D13 grid (invented): ``lr`` in {0.001, 0.003, 0.01, 0.03} x ``l2`` in {0, 0.001, 0.01, 0.1};
  batch 32, 4 minibatches per step. Real cost about 0.1 ms per step.
- Simulated costs: 12 s per step on the 2-vCPU reference instance (a full-batch pass over Epsilon's
  400k x 2,000 matrix; a trial is 3.3 h there); checkpoint 0.1 MB.
"""

from __future__ import annotations

import numpy as np

from spottune.workloads._linear import LinearSGD
from spottune.workloads._registry import Workload

EPS = 1e-12


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


class LogReg(LinearSGD):
    """Binary logistic regression; ``y`` in {0, 1}."""

    dataset = "breast_cancer"
    reference_seconds_per_step = 12.0
    checkpoint_size_mb = 0.1

    def grad(self, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
        r = _sigmoid(X @ self.w + self.b) - y
        return X.T @ r / len(y), float(r.mean())

    def metrics(self) -> dict[str, float]:
        d = self.data
        p = np.clip(_sigmoid(d.X_val @ self.w + self.b), EPS, 1 - EPS)
        ce = -np.mean(d.y_val * np.log(p) + (1 - d.y_val) * np.log(1 - p))
        acc = np.mean((p > 0.5) == (d.y_val == 1))
        return {"val_cross_entropy": float(ce), "val_accuracy": float(acc)}


WORKLOAD = Workload(
    name="logreg",
    trainable=LogReg,
    metric="val_cross_entropy",
    mode="min",
    max_steps=1000,
    search_space={"lr": {"grid_search": [0.001, 0.003, 0.01, 0.03]},
                  "l2": {"grid_search": [0.0, 0.001, 0.01, 0.1]}},
    description="logistic regression on breast_cancer, SGD, validation cross-entropy (stands in for LoR/Epsilon)",
)
