"""Loaders for recorded learning curves: ``data/learning_curves``, our digits curves, and any file in a
documented layout (``LAYOUTS``, detected from the content by :func:`detect_layout`; the file name
does not matter; ``docs/design/earlycurve.md`` §"Curve files").

Every loader returns a :class:`CurveSet` of complete curves as a **loss** (lower is better) plus
counts of what it skipped and why, and raises :class:`~earlycurve.errors.InvalidCurveError` (naming the
file and line) on a file it cannot read. See ``data/learning_curves/README.md`` for the sources.

- long CSV ``config_id, step, value[, max_steps]``: ``value`` is the loss; ``max_steps`` per
  configuration, else the file's largest step. Skipped: diverged (non-finite), incomplete.

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

import csv
import gzip
import io
import json
import zlib
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
    "dataset_name",
    "detect_layout",
    "load_curves",
    "load_long_csv",
    "LAYOUTS",
    "DATASET_FILES",
]

#: Keys of an opda record that are not hyperparameters.
_OPDA_NOT_HYPERPARAMETERS = frozenset({"iteration", "nan_train_loss", "learning_curve"})

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
    config : dict
        The run's hyperparameters where the file records them (opda: every key but ``iteration``,
        ``nan_train_loss`` and ``learning_curve``; a long CSV: its columns beyond ``config_id, step, value,
        max_steps``, the configuration's first row); empty otherwise.
    """

    curve_id: str
    group: str
    steps: np.ndarray
    values: np.ndarray
    max_steps: float
    config: dict = field(default_factory=dict)

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
    """Load an opda tuning file (JSON lines, plain or gzip); see the module docstring for the rules.

    Each line is one configuration: ``{"iteration": ..., "epochs": N, "nan_train_loss": bool,
    "learning_curve": [{"epoch": 0, "top_1": ...}, ...]}`` (``iteration`` and ``nan_train_loss`` are
    optional; other keys are ignored).

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

    Raises
    ------
    InvalidCurveError
        Naming the file and the line: not JSON, not an object, a missing key, a malformed point.
    """
    path = Path(path)
    text = _read_text(path)
    curves, counts = [], {"total": 0, "diverged": 0, "empty": 0, "incomplete": 0}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}: line {number}"
        try:
            rec = json.loads(line)
        except ValueError as exc:
            raise InvalidCurveError(f"{where} is not JSON ({exc})") from None
        if not isinstance(rec, dict):
            raise InvalidCurveError(f"{where} is a JSON {type(rec).__name__}, but must be an object with "
                                    "'epochs' and 'learning_curve'")
        for key in ("learning_curve", "epochs"):
            if key not in rec:
                raise InvalidCurveError(f"{where} lacks the key {key!r} (opda layout: 'epochs' and "
                                        "'learning_curve' of {{'epoch', 'top_1'}} points)")
        points, n_epochs = rec["learning_curve"], rec["epochs"]
        if not isinstance(points, list) or not isinstance(n_epochs, int) or isinstance(n_epochs, bool) or n_epochs < 1:
            raise InvalidCurveError(f"{where}: 'learning_curve' must be a list and 'epochs' an integer >= 1, not "
                                    f"{type(points).__name__} and {n_epochs!r}")
        counts["total"] += 1
        if rec.get("nan_train_loss"):
            counts["diverged"] += 1
            continue
        if not points:
            counts["empty"] += 1
            continue
        try:
            top1 = np.array([np.nan if p["top_1"] is None else p["top_1"] for p in points], dtype=float)
            epochs = np.array([p["epoch"] for p in points], dtype=float)
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidCurveError(f"{where}: a learning_curve point lacks a numeric 'epoch' or 'top_1' "
                                    f"({type(exc).__name__}: {exc})") from None
        if len(points) != n_epochs or not np.all(np.isfinite(top1)) or not np.all(np.diff(epochs) > 0):
            counts["incomplete"] += 1
            continue
        curves.append(
            RecordedCurve(
                curve_id=f"{name}#{rec.get('iteration', number)}",
                group=name,
                steps=epochs + 1.0,
                values=1.0 - top1,
                max_steps=float(n_epochs),
                config={k: v for k, v in rec.items() if k not in _OPDA_NOT_HYPERPARAMETERS},
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
    table = _read_csv(path, ("curve_id", "step", "accuracy"), numeric=("step", "accuracy"))
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
                group=(f"{rows['experiment'].iloc[0]}/{rows['setting'].iloc[0]}"
                       if {"experiment", "setting"} <= set(rows.columns) else name),
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
    table = _read_csv(path, ("config_id", "step", "max_steps", "val_loss"), numeric=("step", "max_steps", "val_loss"))
    _check_steps(path, table)
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


def load_long_csv(path: Path, name: str = "curves") -> CurveSet:
    """Load a long curve CSV: one row per (configuration, step), columns ``config_id, step, value`` and
    optionally ``max_steps``; any other column is a hyperparameter of the configuration (its first row's value,
    :attr:`RecordedCurve.config`).

    ``value`` is a loss (lower is better). ``max_steps`` is the configuration's ``S_max`` (its first
    row's value); without the column it is the largest step in the file. Skipped: diverged curves (a
    non-finite value) and incomplete ones (last step below ``max_steps``). Refused: a configuration's step given
    twice and a step past its ``max_steps`` (:class:`InvalidCurveError`).

    Parameters
    ----------
    path : Path
        The file (plain or gzip).
    name : str
        Data-set name (also the curves' ``group``).

    Returns
    -------
    curve_set : CurveSet
        Complete curves, with ``counts`` of what was skipped.
    """
    table = _read_csv(path, ("config_id", "step", "value"), numeric=("step", "value", "max_steps"))
    _check_steps(path, table)
    file_max = float(table["step"].max())
    hyper = [c for c in table.columns if c not in ("config_id", "step", "value", "max_steps")]
    curves, counts = [], {"total": 0, "diverged": 0, "incomplete": 0}
    for cid, rows in table.groupby("config_id", sort=False):
        counts["total"] += 1
        rows = rows.sort_values("step", kind="stable").drop_duplicates("step", keep="first")
        steps = rows["step"].to_numpy(dtype=float)
        values = rows["value"].to_numpy(dtype=float)
        max_steps = float(rows["max_steps"].iloc[0]) if "max_steps" in rows.columns else file_max
        if not np.all(np.isfinite(values)):
            counts["diverged"] += 1
            continue
        if not (np.isfinite(max_steps) and max_steps > 0) or steps[-1] < max_steps:
            counts["incomplete"] += 1
            continue
        curves.append(RecordedCurve(curve_id=str(cid), group=name, steps=steps, values=values, max_steps=max_steps,
                                    config={k: _scalar(rows[k].iloc[0]) for k in hyper if rows[k].iloc[0].strip()}))
    counts["used"] = len(curves)
    return CurveSet(name=name, curves=tuple(curves), counts=counts)


#: Curve file layouts, detected from the content (``docs/design/earlycurve.md`` §"Curve files"):
#: layout -> (what identifies it, loader).
LAYOUTS = {
    "opda-jsonl": ("JSON lines, one object per configuration with 'epochs' and 'learning_curve'", load_opda),
    "long-csv": ("CSV with columns config_id, step, value[, max_steps]", load_long_csv),
    "cakelab-csv": ("CSV with columns curve_id, step, accuracy[, experiment, setting]", load_cakelab),
    "digits-csv": ("CSV with columns config_id, step, max_steps, val_loss", load_digits_csv),
}
_CSV_SIGNATURES = (
    ("long-csv", {"config_id", "step", "value"}),
    ("digits-csv", {"config_id", "step", "max_steps", "val_loss"}),
    ("cakelab-csv", {"curve_id", "step", "accuracy"}),
)
_SUFFIXES = (".csv.gz", ".jsonl.gz", ".json.gz", ".csv", ".jsonl", ".json", ".gz")


def _read_bytes(path: Path) -> bytes:
    """The file's bytes, gunzipped if they start with the gzip magic."""
    try:
        data = Path(path).read_bytes()
    except IsADirectoryError:
        raise InvalidCurveError(f"{path}: is a folder, not a curve file") from None
    except OSError as exc:
        raise InvalidCurveError(f"{path}: cannot read the curve file ({exc.strerror or exc})") from None
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise InvalidCurveError(f"{path}: compressed file is damaged ({exc})") from None
    return data


def _read_text(path: Path) -> str:
    data = _read_bytes(path)
    if not data.strip():
        raise InvalidCurveError(f"{path}: the file is empty (no learning curves)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InvalidCurveError(f"{path}: line {line} is not UTF-8 text") from None


def _scalar(text: str) -> float | str:
    """A CSV field as a number where it reads as one, else the stripped text (a categorical hyperparameter)."""
    try:
        return float(text)
    except ValueError:
        return text.strip()


def _read_csv(path: Path, required: Sequence[str], numeric: Sequence[str] = ()) -> pd.DataFrame:
    """A curve CSV as a DataFrame: every row complete, the ``required`` columns present, ``numeric`` ones numbers.

    Raises
    ------
    InvalidCurveError
        Naming the file, and the line or column: a row with too few or too many fields (a truncated
        file), a missing column, a value that is not a number.
    """
    text = _read_text(path)
    rows = list(csv.reader(io.StringIO(text)))
    header = [h.strip() for h in rows[0]]
    missing = [c for c in required if c not in header]
    if missing:
        raise InvalidCurveError(f"{path}: no column(s) {', '.join(missing)} in the header {header}; "
                                f"curve files: {'; '.join(d for d, _ in LAYOUTS.values())}")
    for number, row in enumerate(rows[1:], start=2):
        if row and len(row) != len(header):
            raise InvalidCurveError(f"{path}: line {number} has {len(row)} field(s), but the header has "
                                    f"{len(header)} (a truncated or damaged file)")
    body = [r for r in rows[1:] if r]
    if not body:
        raise InvalidCurveError(f"{path}: the file has a header but no rows (no learning curves)")
    table = pd.DataFrame(body, columns=header)
    for col in numeric:
        if col not in table.columns:
            continue
        values = pd.to_numeric(table[col].str.strip().replace({"": "nan"}), errors="coerce")
        bad = values.isna() & ~table[col].str.strip().str.lower().isin(["nan", "", "inf", "-inf"])
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise InvalidCurveError(f"{path}: line {i + 2}: {col} {table[col].iloc[i]!r} is not a number")
        table[col] = values.astype(float)
        if col == "step" and values.isna().any():
            i = int(np.flatnonzero(values.isna().to_numpy())[0])
            raise InvalidCurveError(f"{path}: line {i + 2}: step is missing")
    return table


def _check_steps(path: Path, table: pd.DataFrame) -> None:
    """Refuse a (config_id, step) given twice (which row would count?) and a step past the row's ``max_steps``.

    Raises
    ------
    InvalidCurveError
        Naming the file, the line, the configuration and the step.
    """
    twice = table.duplicated(["config_id", "step"], keep="first").to_numpy()
    if twice.any():
        i = int(np.flatnonzero(twice)[0])
        raise InvalidCurveError(f"{path}: line {i + 2}: config_id {table['config_id'].iloc[i]!r} has step "
                                f"{table['step'].iloc[i]:g} twice; give one row per configuration and step")
    if "max_steps" in table.columns:
        past = (table["step"] > table["max_steps"]).to_numpy()
        if past.any():
            i = int(np.flatnonzero(past)[0])
            raise InvalidCurveError(f"{path}: line {i + 2}: config_id {table['config_id'].iloc[i]!r} has step "
                                    f"{table['step'].iloc[i]:g}, past its max_steps {table['max_steps'].iloc[i]:g}")


def detect_layout(path: Path) -> str:
    """The layout of a curve file (a key of ``LAYOUTS``), from its content.

    Parameters
    ----------
    path : Path
        A curve file (``.gz`` allowed).

    Returns
    -------
    str
        E.g. ``"opda-jsonl"`` or a CSV layout's key.

    Raises
    ------
    InvalidCurveError
        If the file is unreadable, damaged, empty, or in none of the layouts.
    """
    text = _read_text(path)
    first = next(line for line in text.splitlines() if line.strip()).strip()
    if first.startswith("{"):
        return "opda-jsonl"
    header = {h.strip() for h in next(csv.reader([first]))}
    for layout, needs in _CSV_SIGNATURES:
        if needs <= header:
            return layout
    raise InvalidCurveError(f"{path}: not a curve file in a known layout (first line {first[:80]!r}); "
                            f"curve files: {'; '.join(d for d, _ in LAYOUTS.values())}")


def dataset_name(path: Path) -> str:
    """Data-set name of a curve file: a bundled file's name (``DATASET_FILES``), else from the file name:
    ``workload_digits-mlp_curves.csv`` -> ``workload-digits-mlp``.

    Parameters
    ----------
    path : Path

    Returns
    -------
    str
    """
    path = Path(path)
    for name, filename in DATASET_FILES.items():
        if path.name == filename:
            return name
    stem = path.name
    for suffix in _SUFFIXES:
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    return stem.removesuffix("_curves").replace("_", "-") or "curves"


def load_curves(path: Path, name: str | None = None) -> CurveSet:
    """Load any curve file whose layout :func:`detect_layout` recognises.

    Parameters
    ----------
    path : Path
    name : str, optional
        Data-set name; default :func:`dataset_name`.

    Returns
    -------
    CurveSet

    Raises
    ------
    InvalidCurveError
        If the file is unreadable, in no known layout, or holds an invalid curve.
    """
    layout = detect_layout(path)
    return LAYOUTS[layout][1](Path(path), name or dataset_name(path))


def csv_dataset_name(path: Path) -> str:
    """Data-set name of a curve CSV: ``digits_curves.csv`` -> ``digits-mlp``,
    ``workload_digits-mlp_curves.csv`` -> ``workload-digits-mlp``.

    Parameters
    ----------
    path : Path

    Returns
    -------
    str
        As :func:`dataset_name`.
    """
    return dataset_name(path)


def _curve_files(folder: Path) -> list[Path]:
    """The bundled files of ``DATASET_FILES`` in a folder (in that order), then every other curve-like file."""
    known = [folder / f for f in DATASET_FILES.values() if (folder / f).is_file()]
    others = sorted(p for p in folder.iterdir() if p.is_file() and p not in known and not p.name.startswith(".")
                    and p.name.endswith(_SUFFIXES))
    return known + others


def find_datasets(path: Path, digits: Path | Sequence[Path] | None = None) -> dict[str, CurveSet]:
    """Load every curve file in a folder, or one file, whatever its name (the layout is detected).

    Parameters
    ----------
    path : Path
        ``data/learning_curves`` (or any folder of curve files: ``*.csv``, ``*.jsonl``, optionally
        ``.gz``), or a single curve file in any layout of ``LAYOUTS``.
    digits : Path or sequence of Path or None, default=None
        More curve files that live elsewhere (``benchmarks/results/digits_curves.csv``,
        ``workload_digits-mlp_curves.csv``), named by :func:`dataset_name`.

    Returns
    -------
    sets : dict of str to CurveSet
        The bundled files in ``DATASET_FILES`` order, then the other files, then the extra ones.

    Raises
    ------
    InvalidCurveError
        ``path`` does not exist or holds no curve file, a file is in no known layout or is damaged,
        or an extra file is missing.
    """
    path = Path(path)
    if not path.exists():
        raise InvalidCurveError(f"curve data path {str(path)!r} does not exist")
    files = _curve_files(path) if path.is_dir() else [path]
    if not files:
        raise InvalidCurveError(f"{str(path)!r} holds none of the known curve files {sorted(DATASET_FILES.values())} "
                                "and no other curve file (*.csv, *.jsonl, optionally .gz)")
    extra = [] if digits is None else [digits] if isinstance(digits, (str, Path)) else list(digits)
    for csv_path in extra:
        if not Path(csv_path).is_file():
            raise InvalidCurveError(f"curve file {str(csv_path)!r} does not exist")
    sets: dict[str, CurveSet] = {}
    for f in [*files, *map(Path, extra)]:
        name = dataset_name(f)
        while name in sets:
            name += "+"
        sets[name] = load_curves(f, name)
    return sets
