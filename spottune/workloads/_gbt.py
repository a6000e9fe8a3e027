"""``gbt``: gradient-boosted regression trees on diabetes, one tree per step; validation MSE.

Stands in for the paper's GBTR job on synthetic data (Table II).

- Data: ``load_diabetes``, fixed 80/20 split (features standardised by the shared loader; trees do
  not care). Target in original units.
- Model: least-squares gradient boosting written out over scikit-learn's ``DecisionTreeRegressor``:
  start from the training mean; each step fits one tree of depth ``max_depth`` to the current
  residuals on a random 80 % subsample (drawn from ``self.rng``) and adds ``learning_rate`` times
  its prediction. Training and validation predictions are updated incrementally, so a step costs
  O(1) trees, not O(steps) as ``GradientBoostingRegressor(warm_start=True)`` refits would (measured
  5-12 ms per step with warm start). Checkpoint, with no pickle (loading must not run
  code from the store): ``model.json`` (initial value, learning rate, number of trees), ``pred.npz``
  (cached predictions; ``allow_pickle=False``) and ``trees.skops`` (the trees, skops format, loaded
  trusting only ``DecisionTreeRegressor`` and its ``Tree``, whose node indices are bounds-checked
  before use).
- [I] D13 grid (invented): ``learning_rate`` in {0.02, 0.05, 0.1, 0.2} x ``max_depth`` in {1, 2, 3, 5}.
  Real cost about 1-2 ms per step.
- Simulated costs: 60 s per step on the 2-vCPU reference instance (one tree on a large synthetic set;
  a trial is 3.3 h there); checkpoint 1 MB.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spottune.errors import CheckpointError
from spottune.trainable import Trainable
from spottune.workloads._data import load
from spottune.workloads._registry import Workload


@dataclass
class BoostedTrees:
    """The model: initial value, learning rate, the trees, and cached predictions."""

    init_value: float
    learning_rate: float
    trees: list[Any] = field(default_factory=list)
    pred_train: np.ndarray | None = None
    pred_val: np.ndarray | None = None


class GBT(Trainable):
    """Gradient boosting, one tree per step; ``config``: ``learning_rate``, ``max_depth``, ``subsample``."""

    reference_seconds_per_step = 60.0
    checkpoint_size_mb = 1.0

    def setup(self, config: dict[str, Any]) -> None:
        self.data = load("diabetes")
        # float32 copy of train+val rows for Tree.predict, which skips scikit-learn's per-call input
        # validation (that validation was ~60 % of a step); equal to tree.predict(X) bit for bit.
        self._X_all32 = np.ascontiguousarray(np.vstack([self.data.X_train, self.data.X_val]), dtype=np.float32)
        self.max_depth = int(config.get("max_depth", 3))
        self.subsample = float(config.get("subsample", 0.8))
        init = float(self.data.y_train.mean())
        self.model = BoostedTrees(init, float(config.get("learning_rate", 0.1)),
                                  pred_train=np.full(len(self.data.y_train), init),
                                  pred_val=np.full(len(self.data.y_val), init))

    def step(self) -> dict[str, float]:
        from sklearn.tree import DecisionTreeRegressor

        d, m = self.data, self.model
        n = len(d.y_train)
        idx = np.sort(self.rng.choice(n, size=max(1, int(round(self.subsample * n))), replace=False))
        tree = DecisionTreeRegressor(max_depth=self.max_depth, random_state=int(self.rng.integers(2**31)))
        tree.fit(d.X_train[idx], (d.y_train - m.pred_train)[idx])
        m.trees.append(tree)
        delta = m.learning_rate * tree.tree_.predict(self._X_all32)[:, 0]
        m.pred_train = m.pred_train + delta[:n]
        m.pred_val = m.pred_val + delta[n:]
        r = m.pred_val - d.y_val
        return {"val_mse": float(np.mean(r * r)), "n_trees": float(len(m.trees))}

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        import skops.io as sio

        m = self.model
        with open(os.path.join(checkpoint_dir, "model.json"), "w") as fh:
            json.dump({"init_value": m.init_value, "learning_rate": m.learning_rate, "n_trees": len(m.trees)}, fh)
        with open(os.path.join(checkpoint_dir, "pred.npz"), "wb") as fh:
            np.savez(fh, pred_train=m.pred_train, pred_val=m.pred_val)
        sio.dump(list(m.trees), os.path.join(checkpoint_dir, "trees.skops"))

    def load_checkpoint(self, checkpoint_dir: str) -> None:
        """Read the model back without unpickling anything.

        Raises
        ------
        CheckpointError
            If a file is missing or malformed, holds a type other than the trees, or a tree's node
            indices point outside the tree (a crafted file could otherwise read memory out of bounds).
        """
        import skops.io as sio

        try:
            with open(os.path.join(checkpoint_dir, "model.json")) as fh:
                doc = json.load(fh)
            with np.load(os.path.join(checkpoint_dir, "pred.npz"), allow_pickle=False) as z:
                pred_train, pred_val = z["pred_train"], z["pred_val"]
            trees = sio.load(os.path.join(checkpoint_dir, "trees.skops"), trusted=_TRUSTED)
            model = BoostedTrees(float(doc["init_value"]), float(doc["learning_rate"]), list(trees),
                                 pred_train=pred_train, pred_val=pred_val)
        except CheckpointError:
            raise
        except Exception as exc:  # skops' UntrustedTypesFoundException, OSError, KeyError, ValueError ...
            raise CheckpointError(f"gbt checkpoint in {checkpoint_dir} is unusable: {type(exc).__name__}: "
                                  f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
        n_features = self._X_all32.shape[1]
        if len(model.trees) != int(doc["n_trees"]) or pred_train.shape != (len(self.data.y_train),) \
                or pred_val.shape != (len(self.data.y_val),):
            raise CheckpointError(f"gbt checkpoint in {checkpoint_dir} does not match the data or its own tree count")
        for i, tree in enumerate(model.trees):
            _check_tree(tree, n_features, f"gbt checkpoint in {checkpoint_dir}, tree {i}")
        self.model = model


_TRUSTED = ["sklearn.tree._classes.DecisionTreeRegressor", "sklearn.tree._tree.Tree"]


def _check_tree(tree: Any, n_features: int, what: str) -> None:
    """Refuse a tree whose node indices or features are out of range (scikit-learn does not check them)."""
    from sklearn.tree import DecisionTreeRegressor

    if type(tree) is not DecisionTreeRegressor or not hasattr(tree, "tree_"):
        raise CheckpointError(f"{what} is {type(tree).__name__}, not a fitted DecisionTreeRegressor")
    t = tree.tree_
    n = int(t.node_count)
    left, right, feature = t.children_left, t.children_right, t.feature
    leaf = left == -1
    ok = (n >= 1 and len(left) == len(right) == len(feature) == n and t.value.shape[0] == n
          and np.array_equal(leaf, right == -1)
          and bool(np.all(left[~leaf] > np.arange(n)[~leaf])) and bool(np.all(left[~leaf] < n))
          and bool(np.all(right[~leaf] > np.arange(n)[~leaf])) and bool(np.all(right[~leaf] < n))
          and bool(np.all((feature[~leaf] >= 0) & (feature[~leaf] < n_features)))
          and int(t.n_features) == n_features and int(t.n_outputs) == 1)
    if not ok:
        raise CheckpointError(f"{what}: node indices or features out of range; refusing it")


WORKLOAD = Workload(
    name="gbt",
    trainable=GBT,
    metric="val_mse",
    mode="min",
    max_steps=200,
    search_space={"learning_rate": {"grid_search": [0.02, 0.05, 0.1, 0.2]},
                  "max_depth": {"grid_search": [1, 2, 3, 5]}},
    description="gradient-boosted trees on diabetes, one tree per step, validation MSE (stands in for GBTR/synthetic)",
)
