"""Datasets that ship with scikit-learn, split and standardised once per process (offline)."""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

#: Fixed seed of the train/validation split, so every trial and every process sees the same split.
SPLIT_SEED = 20200707


class Split(NamedTuple):
    """A train/validation split; features standardised with the training mean and std."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_val: np.ndarray
    y_val: np.ndarray


def _split(X: np.ndarray, y: np.ndarray, val_fraction: float) -> Split:
    idx = np.random.default_rng(SPLIT_SEED).permutation(len(X))
    n_val = int(round(val_fraction * len(X)))
    val, train = idx[:n_val], idx[n_val:]
    mean = X[train].mean(axis=0)
    std = X[train].std(axis=0)
    std[std == 0] = 1.0
    Xs = (X - mean) / std
    for a in (Xs, y):
        a.setflags(write=False)
    return Split(Xs[train], y[train], Xs[val], y[val])


@functools.cache
def load(name: str, val_fraction: float = 0.2) -> Split:
    """Load ``digits``, ``breast_cancer`` or ``diabetes`` from scikit-learn's bundled files.

    Parameters
    ----------
    name : {"digits", "breast_cancer", "diabetes"}
    val_fraction : float, default 0.2
        Share of samples held out for validation.

    Returns
    -------
    split : Split
        Read-only float64 features of shape (n_samples, n_features); ``y`` int64 class labels for the
        classification sets, float64 targets for diabetes (disease progression, original units).
    """
    from sklearn import datasets  # imported here: ~1 s, and only workloads need it

    loader = {"digits": datasets.load_digits, "breast_cancer": datasets.load_breast_cancer,
              "diabetes": datasets.load_diabetes}[name]
    bunch = loader()
    X = np.asarray(bunch.data, dtype=np.float64)
    y = np.asarray(bunch.target)
    y = y.astype(np.float64) if name == "diabetes" else y.astype(np.int64)
    return _split(X, y, val_fraction)
