"""Shared base of the linear workloads (``logreg``, ``linreg``, ``linear-svm``): minibatch SGD in NumPy."""

from __future__ import annotations

import os
from typing import Any, ClassVar

import numpy as np

from spottune.trainable import Trainable
from spottune.workloads._data import Split, load

MINIBATCHES_PER_STEP = 4


class LinearSGD(Trainable):
    """A linear model ``X @ w + b`` trained by minibatch SGD with L2 regularisation.

    ``config`` keys: ``lr`` (step size), ``l2`` (L2 coefficient, on ``w`` only), optional
    ``batch_size`` (default 32). One step = 4 minibatches drawn with replacement from ``self.rng``,
    then the validation metric. Weights start at zero. Subclasses give the dataset, the loss gradient
    and the metrics.
    """

    dataset: ClassVar[str]

    def setup(self, config: dict[str, Any]) -> None:
        self.data: Split = self.prepare(load(self.dataset))
        self.lr = float(config.get("lr", 0.01))
        self.l2 = float(config.get("l2", 0.0))
        self.batch_size = int(config.get("batch_size", 32))
        self.w = np.zeros(self.data.X_train.shape[1])
        self.b = 0.0

    def prepare(self, data: Split) -> Split:
        """Hook to transform the targets once (e.g. labels to +-1); default: unchanged."""
        return data

    def grad(self, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
        """Gradient of the mean data loss over the batch with respect to (w, b)."""
        raise NotImplementedError

    def metrics(self) -> dict[str, float]:
        """Validation (and training) metrics after the step."""
        raise NotImplementedError

    def step(self) -> dict[str, float]:
        X, y = self.data.X_train, self.data.y_train
        for _ in range(MINIBATCHES_PER_STEP):
            idx = self.rng.integers(0, len(X), self.batch_size)
            gw, gb = self.grad(X[idx], y[idx])
            self.w -= self.lr * (gw + self.l2 * self.w)
            self.b -= self.lr * gb
        return self.metrics()

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        np.savez(os.path.join(checkpoint_dir, "weights.npz"), w=self.w, b=np.array(self.b))

    def load_checkpoint(self, checkpoint_dir: str) -> None:
        with np.load(os.path.join(checkpoint_dir, "weights.npz"), allow_pickle=False) as f:
            self.w = f["w"].copy()
            self.b = float(f["b"])
