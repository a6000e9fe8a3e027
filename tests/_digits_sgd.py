"""A real small workload for the tuner-adapter tests: scikit-learn's SGD logistic regression on the
bundled digits data, validation accuracy after each epoch (one epoch = one step). Deterministic."""

from __future__ import annotations

import functools

import numpy as np

EPOCHS = 20


@functools.lru_cache(maxsize=1)
def _data():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    return train_test_split(X / 16.0, y, test_size=0.3, random_state=0)


@functools.lru_cache(maxsize=None)
def accuracy_curve(alpha: float, eta0: float, epochs: int = EPOCHS) -> tuple[float, ...]:
    """Validation accuracy after each of ``epochs`` epochs of SGD (log loss, constant learning rate ``eta0``)."""
    from sklearn.linear_model import SGDClassifier

    Xtr, Xva, ytr, yva = _data()
    clf = SGDClassifier(loss="log_loss", alpha=alpha, learning_rate="constant", eta0=eta0, random_state=0)
    out = []
    for _ in range(epochs):
        clf.partial_fit(Xtr, ytr, classes=np.arange(10))
        out.append(float(clf.score(Xva, yva)))
    return tuple(out)
