"""Loaders for the recorded learning curves in ``data/learning_curves`` and our digits curves.

Every loader returns a :class:`CurveSet` of complete curves as a **loss** (lower is better) plus
counts of what it skipped and why. See ``data/learning_curves/README.md`` for the sources.

- opda AlexNet / ConvNeXt-tiny (ImageNet): loss = 1 − top-1, one point per epoch at
  ``step = epoch + 1`` (epochs completed), ``max_steps = epochs``. Skipped: diverged
  (``nan_train_loss``, which includes every empty curve), incomplete (length ≠ ``epochs``).
- cakelab ResNet-32 (CIFAR-10, step decay): loss = 1 − accuracy, ``max_steps`` = the curve's last
  step. Skipped: truncated curves (last step < 98 % of the file's largest step, i.e. revoked runs).
  A repeated step keeps its first row (``lr_case1`` repeats step 32002 with the same value).
- digits (``benchmarks/digits_curves.py``, also ``--workload digits-mlp``): loss = validation
  cross-entropy, ``max_steps`` from the file.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from earlycurve.errors import InvalidCurveError

__all__ = [
    "RecordedCurve",
    "CurveSet",
    "load_opda",
    "load_cakelab",
    "load_digits_csv",
    "find_datasets",
    "csv_dataset_name",
    "DATASET_FILES",
]

DATASET_FILES = {
    "opda-alexnet": "opda_alexnet_imagenet_tuning.jsonl.gz",
    "opda-convnext": "opda_convnext-tiny_imagenet_tuning.jsonl.gz",
    "cakelab-resnet32": "cakelab_resnet32_cifar10_curves.csv.gz",
    "digits-mlp": "digits_curves.csv",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedCurve:
    """One complete recorded curve.

    Attributes
    ----------
    curve_id : str
        Identifier within its data set.
    group : str
        Grouping for calibration splits (opda: the data set; cakelab: the cluster setting).
    steps : ndarray of shape (n_points,)
        Training steps (epochs for opda), strictly increasing.
    values : ndarray of shape (n_points,)
        Loss at those steps.
    max_steps : float
        ``S_max``; the final value is ``values[-1]`` at ``steps[-1] == max_steps`` (opda, digits) or
        the last recorded step (cakelab).
    """

    curve_id: str
    group: str
    steps: np.ndarray
    values: np.ndarray
    max_steps: float

    @property
    def final(self) -> float:
        """True final loss, ``values[-1]``."""
        return float(self.values[-1])

    def head(self, theta: float) -> tuple[np.ndarray, np.ndarray]:
        """Observations up to ``theta · max_steps`` (at least the first one).

        Parameters
        ----------
        theta : float
            Fraction of ``max_steps`` observed, in (0, 1].

        Returns
        -------
        steps, values : ndarray of shape (n_seen,) each
        """
        n = max(int(np.searchsorted(self.steps, theta * self.max_steps * (1 + 1e-12), side="right")), 1)
        return self.steps[:n], self.values[:n]


@dataclass(frozen=True, slots=True, kw_only=True)
class CurveSet:
    """Complete curves of one data set and the counts of skipped ones.

    Attributes
    ----------
    name : str
        Data set name (a key of ``DATASET_FILES``).
    curves : tuple of RecordedCurve
    counts : dict of str to int
        ``total``, ``used`` and one entry per skip reason.
    """

    name: str
    curves: tuple[RecordedCurve, ...]
    counts: dict = field(default_factory=dict)


def load_opda(path: Path, name: str = "opda") -> CurveSet:
    """Load an opda tuning file (``*.jsonl.gz``); see the module docstring for the rules.

    Parameters
    ----------
    path : Path
        The file.
    name : str
        Data-set name (also the curves' ``group``).

    Returns
    -------
    curve_set : CurveSet
        Complete curves as a loss, with ``counts`` of what was skipped.
    """
    path = Path(path)
    curves, counts = [], {"total": 0, "diverged": 0, "empty": 0, "incomplete": 0}
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            rec = json.loads(line)
            counts["total"] += 1
            points = rec["learning_curve"]
            if rec["nan_train_loss"]:
                counts["diverged"] += 1
                continue
            if not points:
                counts["empty"] += 1
                continue
            top1 = np.array([np.nan if p["top_1"] is None else p["top_1"] for p in points], dtype=float)
            epochs = np.array([p["epoch"] for p in points], dtype=float)
            if len(points) != rec["epochs"] or not np.all(np.isfinite(top1)):
                counts["incomplete"] += 1
                continue
            curves.append(
                RecordedCurve(
                    curve_id=f"{name}#{rec['iteration']}",
                    group=name,
                    steps=epochs + 1.0,
                    values=1.0 - top1,
                    max_steps=float(rec["epochs"]),
                )
            )
    counts["used"] = len(curves)
    return CurveSet(name=name, curves=tuple(curves), counts=counts)


def load_cakelab(path: Path, name: str = "cakelab-resnet32", complete_fraction: float = 0.98) -> CurveSet:
    """Load the cakelab CSV; see the module docstring for the rules.

    Parameters
    ----------
    path : Path
        The file.
    name : str
        Data-set name (the curves' ``group`` is ``experiment/setting`` instead).
    complete_fraction : float, default=0.98
        A curve is complete when its last step reaches this fraction of the file's largest step.

    Returns
    -------
    curve_set : CurveSet
        Complete curves as a loss, with ``counts`` of what was skipped.
    """
    table = pd.read_csv(path)
    last = float(table["step"].max())
    curves, counts = [], {"total": 0, "truncated": 0, "repeated_steps": 0}
    for cid, rows in table.groupby("curve_id", sort=False):
        counts["total"] += 1
        rows = rows.sort_values("step", kind="stable")
        dedup = rows.drop_duplicates("step", keep="first")
        counts["repeated_steps"] += len(rows) - len(dedup)
        steps = dedup["step"].to_numpy(dtype=float)
        if steps[-1] < complete_fraction * last:
            counts["truncated"] += 1
            continue
        curves.append(
            RecordedCurve(
                curve_id=str(cid),
                group=f"{rows['experiment'].iloc[0]}/{rows['setting'].iloc[0]}",
                steps=steps,
                values=1.0 - dedup["accuracy"].to_numpy(dtype=float),
                max_steps=float(steps[-1]),
            )
        )
    counts["used"] = len(curves)
    return CurveSet(name=name, curves=tuple(curves), counts=counts)


def load_digits_csv(path: Path, name: str = "digits-mlp") -> CurveSet:
    """Load a curve CSV written by ``benchmarks/digits_curves.py`` (columns ``config_id, step,
    max_steps, val_loss``).

    Parameters
    ----------
    path : Path
        The file.
    name : str
        Data-set name (also the curves' ``group``).

    Returns
    -------
    curve_set : CurveSet
        Complete curves as a loss, with ``counts`` of what was skipped.
    """
    table = pd.read_csv(path)
    curves, counts = [], {"total": 0, "diverged": 0}
    for cid, rows in table.groupby("config_id", sort=True):
        counts["total"] += 1
        rows = rows.sort_values("step")
        values = rows["val_loss"].to_numpy(dtype=float)
        if not np.all(np.isfinite(values)):
            counts["diverged"] += 1
            continue
        curves.append(
            RecordedCurve(
                curve_id=str(cid),
                group=name,
                steps=rows["step"].to_numpy(dtype=float),
                values=values,
                max_steps=float(rows["max_steps"].iloc[0]),
            )
        )
    counts["used"] = len(curves)
    return CurveSet(name=name, curves=tuple(curves), counts=counts)


_LOADERS = {"opda-alexnet": load_opda, "opda-convnext": load_opda, "cakelab-resnet32": load_cakelab, "digits-mlp": load_digits_csv}


def csv_dataset_name(path: Path) -> str:
    """Data-set name of a curve CSV: ``digits_curves.csv`` -> ``digits-mlp``,
    ``workload_digits-mlp_curves.csv`` -> ``workload-digits-mlp``."""
    path = Path(path)
    if path.name == DATASET_FILES["digits-mlp"]:
        return "digits-mlp"
    return path.name.removesuffix(".csv").removesuffix("_curves").replace("_", "-")


def find_datasets(path: Path, digits: Path | Sequence[Path] | None = None) -> dict[str, CurveSet]:
    """Load every known data set found in a directory (or one file).

    Parameters
    ----------
    path : Path
        ``data/learning_curves`` (or any directory holding the files of ``DATASET_FILES``),
        or a single one of those files.
    digits : Path or sequence of Path or None, default=None
        Curve CSVs in the ``benchmarks/digits_curves.py`` format that live elsewhere
        (``benchmarks/results/digits_curves.csv``, ``workload_digits-mlp_curves.csv``), named by
        :func:`csv_dataset_name`.

    Returns
    -------
    sets : dict of str to CurveSet
        The files of ``DATASET_FILES`` in that order, then the extra CSVs.

    Raises
    ------
    InvalidCurveError
        ``path`` does not exist or holds none of the known files, or an extra CSV is missing.
    """
    path = Path(path)
    if not path.exists():
        raise InvalidCurveError(f"curve data path {str(path)!r} does not exist")
    found: dict[str, Path] = {}
    for name, filename in DATASET_FILES.items():
        candidate = path / filename if path.is_dir() else path
        if candidate.is_file() and candidate.name == filename:
            found[name] = candidate
    if not found:
        raise InvalidCurveError(f"{str(path)!r} holds none of the known curve files {sorted(DATASET_FILES.values())}")
    sets = {name: _LOADERS[name](found[name], name) for name in DATASET_FILES if name in found}
    extra = [] if digits is None else [digits] if isinstance(digits, (str, Path)) else list(digits)
    for csv in extra:
        if not Path(csv).is_file():
            raise InvalidCurveError(f"curve file {str(csv)!r} does not exist")
        name = csv_dataset_name(csv)
        sets[name] = load_digits_csv(Path(csv), name)
    return sets
