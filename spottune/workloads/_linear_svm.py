"""``linear-svm``: a linear soft-margin SVM on breast_cancer by subgradient SGD; validation hinge loss.

Stands in for the paper's SVM job on synthetic data (Table II; the paper varied kernels, here the
kernel is linear and the grid varies the step size and the regularisation).

- Data: ``load_breast_cancer``, labels mapped to -1/+1, fixed 80/20 split, standardised.
- Objective: mean hinge ``max(0, 1 - y (x.w + b))`` + ``l2``/2 ||w||^2; metric: mean validation hinge.
- [I] D13 grid (invented): ``lr`` in {0.0003, 0.001, 0.003, 0.01} x ``l2`` in {0.0001, 0.001, 0.01, 0.1};
  batch 32, 4 minibatches per step. Real cost about 0.1 ms per step.
- Simulated costs: 20 s per step on the 2-vCPU reference instance (a trial is 2.8 h there);
  checkpoint 0.1 MB.
"""

from __future__ import annotations

import numpy as np

from spottune.workloads._data import Split
from spottune.workloads._linear import LinearSGD
from spottune.workloads._registry import Workload


class LinearSVM(LinearSGD):
    """Linear SVM, hinge loss, labels in {-1, +1}."""

    dataset = "breast_cancer"
    reference_seconds_per_step = 20.0
    checkpoint_size_mb = 0.1

    def prepare(self, data: Split) -> Split:
        pm = lambda y: np.where(y == 1, 1.0, -1.0)  # noqa: E731
        return Split(data.X_train, pm(data.y_train), data.X_val, pm(data.y_val))

    def grad(self, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
        active = (y * (X @ self.w + self.b) < 1.0).astype(float) * y
        return -(X.T @ active) / len(y), float(-active.mean())

    def metrics(self) -> dict[str, float]:
        d = self.data
        margin = d.y_val * (d.X_val @ self.w + self.b)
        return {"val_hinge": float(np.mean(np.maximum(0.0, 1.0 - margin))),
                "val_accuracy": float(np.mean(margin > 0))}


WORKLOAD = Workload(
    name="linear-svm",
    trainable=LinearSVM,
    metric="val_hinge",
    mode="min",
    max_steps=500,
    search_space={"lr": {"grid_search": [0.0003, 0.001, 0.003, 0.01]},
                  "l2": {"grid_search": [0.0001, 0.001, 0.01, 0.1]}},
    description="linear SVM on breast_cancer, SGD, validation hinge loss (stands in for SVM/synthetic)",
)
