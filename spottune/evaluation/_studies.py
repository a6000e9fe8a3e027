"""The trials an evaluation replays: every configuration's full curve, computed (or read) once.

Three kinds of study, all with every curve known to ``max_steps`` (the ground truth of top-k accuracy):

- **built-in workloads** (``digits-mlp``, ``logreg``, ``linreg``, ``linear-svm``, ``gbt``): each
  configuration is really trained to ``max_steps`` once and its per-step metrics are cached on disk
  (``<cache>/curves/<workload>-seed<seed>-<max_steps>.json``). The trainable API guarantees that a
  resumed trial reproduces the uninterrupted curve, so replaying the cached curve is what
  :class:`~spottune.backends.TrainableCurves` would compute, at no training cost;
- **recorded studies** (``opda-alexnet``, ``opda-convnext``): 16 configurations sampled with the seed
  from the complete curves (length == ``epochs``, no NaN) of ``data/learning_curves/
  opda_*_tuning.jsonl.gz`` (CC BY-SA 4.0, N. Lourie). Metric ``loss = 1 − top_1`` (min).
  ``cakelab-resnet32``: 16 curves sampled the same way from the complete curves (last recorded step ≥ 98 % of the
  file's largest, as :func:`earlycurve.evaluation.load_cakelab`) of ``data/learning_curves/
  cakelab_resnet32_cifar10_curves.csv.gz`` (ResNet-32 on CIFAR-10, 45 cluster settings). Metric
  ``loss = 1 − accuracy`` (min); 16 progress steps by default (its recorded points after step 0, every 4,000
  iterations), as the step benchmarks' grid.
- **random-search built-in studies** (``builtin-digits-mlp``, ``builtin-logreg``, ``builtin-linear-svm``): 16
  configurations sampled with the seed from the 128 random-search curves of ``data/learning_curves/builtin/
  builtin_<workload>_curves.csv.gz`` (the workload's grid widened into a random search and really trained,
  ``benchmarks/builtin_curves.py``), on 50 progress steps as the step benchmarks' grid. Each
  configuration runs at the workload's speed (its ``reference_seconds_per_step`` x ``max_steps`` / S_max per progress
  step) and checkpoint size; the metric is the workload's (all three minimise).

[I] Recorded configurations train for different numbers of epochs (20–100). Each is replayed on a
common grid of ``max_steps`` (default 50) *progress steps*: step k is the point k/S_max through the
configuration's own schedule, its metrics linearly interpolated between recorded epochs, and its
seconds per step = the recorded total ``time`` / S_max (cakelab: the curve's ``wall_time`` from its first to its
last point / S_max). That recorded hardware is the reference
instance of the speed model (``spottune.speed``), so each trial keeps its own recorded speed, scaled
per instance type like every workload.
"""

from __future__ import annotations

import functools
import gzip
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from spottune.backends import RecordedCurves
from spottune.cache import cache_dir
from spotmarket.data import data_dir
from spotmarket.errors import DataNotFoundError
from spottune.errors import ConfigError

#: Recorded studies: name -> (file, checkpoint size in MB [I: fp32 weights + SGD momentum]; None: the workload's).
RECORDED: dict[str, tuple[str, float | None]] = {
    "opda-alexnet": ("opda_alexnet_imagenet_tuning.jsonl.gz", 490.0),  # 61 M parameters x 4 B x 2
    "opda-convnext": ("opda_convnext-tiny_imagenet_tuning.jsonl.gz", 230.0),  # 28.6 M parameters x 4 B x 2
    "cakelab-resnet32": ("cakelab_resnet32_cifar10_curves.csv.gz", 3.7),  # 0.46 M parameters x 4 B x 2
}
#: Random-search built-in studies: name -> the built-in workload whose recorded curves it samples.
RANDOM_SEARCH = {f"builtin-{w}": w for w in ("digits-mlp", "logreg", "linear-svm")}
RECORDED.update({name: (f"builtin/builtin_{w}_curves.csv.gz", None) for name, w in RANDOM_SEARCH.items()})
RECORDED_STEPS = 50
#: S_max of a recorded study when not given: :data:`RECORDED_STEPS`, or the study's own recorded points.
RECORDED_DEFAULT_STEPS = {"cakelab-resnet32": 16}
N_CONFIGS = 16
#: The halves of a recorded study's curves (``"opda-alexnet@tuning"``, ``"opda-alexnet@test"``; :func:`load_study`).
HALVES = ("tuning", "test")


@dataclass(frozen=True, slots=True, kw_only=True)
class Study:
    """A set of trials with their full curves (ground truth) and simulation facts.

    Attributes
    ----------
    name : str
    trial_ids : list of str
    configs : dict trial_id -> dict
    curves : dict trial_id -> list of dict
        ``curves[t][k - 1]`` = metrics after k steps, for k = 1 .. max_steps.
    metric : str
    mode : {"min", "max"}
    max_steps : int
    reference_seconds_per_step : dict trial_id -> float
        Seconds per step on the reference instance (2 vCPUs, 6.5 ECU), per trial.
    checkpoint_size_mb : float
        MB (10**6 bytes).
    extra : dict
        ``previous_runs`` (recorded opda and built-in random-search studies): the pool's complete curves this study
        did not sample, as ``(steps, loss, max_steps, hyperparameters)`` on its progress grid; stopper ``hparams``
        learns its ranking from them (leave-study-out: a study never learns from its own trials).
    """

    name: str
    trial_ids: list[str]
    configs: dict[str, dict[str, Any]]
    curves: dict[str, list[dict[str, float]]]
    metric: str
    mode: str
    max_steps: int
    reference_seconds_per_step: dict[str, float]
    checkpoint_size_mb: float
    source: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def final(self) -> dict[str, float]:
        """Each trial's metric at ``max_steps`` (user direction): the ground truth of top-k accuracy.

        Returns
        -------
        dict of str to float
            Trial id -> final metric value.
        """
        return {t: float(self.curves[t][self.max_steps - 1][self.metric]) for t in self.trial_ids}

    def ranking(self) -> list[str]:
        """Trial ids, truly best first (ties by id).

        Returns
        -------
        list of str
            All trial ids.
        """
        fin = self.final()
        sign = 1.0 if self.mode == "min" else -1.0
        return sorted(self.trial_ids, key=lambda t: (sign * fin[t], t))

    def sim_curves(self) -> "StudyCurves":
        """Metrics source for :class:`~spottune.backends.SimBackend` (per-trial reference speed).

        Returns
        -------
        StudyCurves
            The recorded curves, the trials' seconds per step on the reference instance and the checkpoint size (MB).
        """
        return StudyCurves(self.curves, self.reference_seconds_per_step, self.checkpoint_size_mb)


class StudyCurves(RecordedCurves):
    """:class:`RecordedCurves` with a per-trial reference speed (``reference_seconds_per_step_of``)."""

    def __init__(self, curves: Mapping[str, list], per_trial_s: Mapping[str, float], checkpoint_size_mb: float):
        mean = float(np.mean(list(per_trial_s.values())))
        super().__init__(curves, reference_seconds_per_step=mean, checkpoint_size_mb=checkpoint_size_mb)
        self._per_trial = dict(per_trial_s)

    def reference_seconds_per_step_of(self, trial_id: str) -> float:
        """Seconds per step of ``trial_id`` on the reference instance."""
        return self._per_trial[trial_id]


def learning_curves_dir() -> Path:
    """Folder of the recorded learning curves (:func:`spotmarket.data.data_dir`, ``learning_curves``)."""
    try:
        return data_dir("learning_curves")
    except DataNotFoundError as exc:
        raise ConfigError(f"recorded learning curves: {exc}") from None


def list_studies() -> list[str]:
    """Every workload name ``spottune simulate`` accepts.

    Returns
    -------
    list of str
        The built-in workloads, then the recorded studies, each sorted.
    """
    from spottune.workloads import list_workloads

    return list_workloads() + sorted(RECORDED)


def load_study(name: str, seed: int = 0, *, max_steps: int | None = None, n_configs: int = N_CONFIGS,
               cache: Path | None = None) -> Study:
    """The study ``name`` (built-in workload or recorded study), curves complete to ``max_steps``.

    Parameters
    ----------
    name : str
        See :func:`list_studies`; a recorded study may name its size, ``"opda-alexnet:64"`` (``n_configs``
        configurations sampled), and a half of its curves to sample from, ``"opda-alexnet@tuning"`` or
        ``"opda-alexnet@test"`` (the step benchmarks' split, decision ES2: studies of the two halves share no
        configuration).
    seed : int
        Seeds the built-in trainables (``trial_seed(seed, i)``) or the sample of recorded configurations.
    max_steps : int, optional
        S_max, steps (default: the workload's; 50 for the opda studies, 16 for cakelab-resnet32).
    n_configs : int
        Configurations sampled from a recorded study (built-in workloads use their search space); a size in
        ``name`` wins.
    cache : Path, optional
        Curve cache folder (default ``cache_dir() / "curves"``).

    Returns
    -------
    Study
        Its trials, complete curves, metric and mode, speeds and checkpoint size.

    Raises
    ------
    ConfigError
        A size that is not an integer >= 2 or larger than the recorded study's complete curves; a half of a study
        that is not recorded, or a half other than :data:`HALVES`.
    """
    full = name
    name, _, half = name.partition("@")
    if half and name.partition(":")[0] not in RECORDED:
        raise ConfigError(f"{full}: only a recorded study has halves of its curves ({', '.join(RECORDED)})")
    if is_study(full) and ":" in name:
        name, size = name.split(":")
        n_configs = int(size)
    if name in RECORDED:
        steps = study_shape(name, max_steps=max_steps)[1]
        loader = _random_search if name in RANDOM_SEARCH else _cakelab if name.startswith("cakelab") else _recorded
        return loader(name, seed, steps, n_configs, half or None)
    return _builtin(name, seed, max_steps, cache)


def study_shape(name: str, seed: int = 0, max_steps: int | None = None) -> tuple[int, int]:
    """(trials, S_max in steps) of the study :func:`load_study` would load, without loading it (a built-in
    workload's curves are trained on first use: settings can be checked against the study first).

    Parameters
    ----------
    name : str
        A name :func:`is_study` accepts.
    seed : int
        As :func:`load_study` (a built-in workload's search space may depend on it).
    max_steps : int, optional
        As :func:`load_study`.

    Returns
    -------
    (int, int)
        The study's trials, and ``max_steps`` when given, else its default S_max (the workload's, or the recorded
        study's).

    Raises
    ------
    ConfigError
        ``name`` is neither a recorded study nor a built-in workload (:func:`spottune.workloads.get_workload`).
    """
    base, _, size = name.partition("@")[0].partition(":")
    if base in RECORDED:
        return int(size or N_CONFIGS), int(max_steps or RECORDED_DEFAULT_STEPS.get(base, RECORDED_STEPS))
    from spottune.workloads import get_workload

    wl = get_workload(base)
    return len(wl.configs(seed)), int(max_steps or wl.max_steps)


def is_study(name: str) -> bool:
    """Whether ``name`` is a study :func:`load_study` reads: one of :func:`list_studies`, or a recorded study with
    a size of at least 2 configurations (``"opda-alexnet:64"``) or one half of its curves (``"opda-alexnet@test"``,
    :data:`HALVES`)."""
    name, at, half = name.partition("@")
    if at and (half not in HALVES or name.partition(":")[0] not in RECORDED):
        return False
    base, sep, size = name.partition(":")
    if not sep:
        return name in list_studies()
    return base in RECORDED and size.isdigit() and int(size) >= 2


def _builtin(name: str, seed: int, max_steps: int | None, cache: Path | None) -> Study:
    from spottune.trainable import trial_seed
    from spottune.workloads import get_workload

    wl = get_workload(name)
    steps = int(max_steps or wl.max_steps)
    configs = wl.configs(seed)
    ids = [f"t{i:02d}" for i in range(len(configs))]
    path = (cache or cache_dir() / "curves") / f"{name}-seed{seed}-{steps}.json"
    curves: dict[str, list[dict[str, float]]] | None = None
    if path.exists():
        try:
            data = json.loads(path.read_text())
            if data.get("configs") == json.loads(json.dumps(configs, default=str)):
                curves = data["curves"]
        except (OSError, ValueError, KeyError):
            curves = None
    if curves is None:
        curves = {}
        for i, (tid, c) in enumerate(zip(ids, configs)):
            trainable = wl.make(c, seed=trial_seed(seed, i), max_steps=steps)
            curves[tid] = [{k: float(v) for k, v in dict(trainable.train()).items()
                            if isinstance(v, (int, float, np.floating, np.integer)) and not isinstance(v, bool)}
                           for _ in range(steps)]
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")  # per process: parallel runs fill the same cache
        tmp.write_text(json.dumps({"workload": name, "seed": seed, "max_steps": steps,
                                   "configs": json.loads(json.dumps(configs, default=str)), "curves": curves}))
        tmp.replace(path)
    ref = float(wl.reference_seconds_per_step)
    return Study(name=name, trial_ids=ids, configs=dict(zip(ids, configs)), curves=curves, metric=str(wl.metric),
                 mode=wl.mode, max_steps=steps, reference_seconds_per_step={t: ref for t in ids},
                 checkpoint_size_mb=float(wl.checkpoint_size_mb), source=f"real training, cached in {path}")


def _recorded(name: str, seed: int, steps: int, n: int, half: str | None = None) -> Study:
    fname, size_mb = RECORDED[name]
    path = learning_curves_dir() / fname
    with gzip.open(path, "rt") as fh:
        rows = [json.loads(line) for line in fh]
    in_file = [r for r in rows
               if r["learning_curve"] and not r["nan_train_loss"] and len(r["learning_curve"]) == r["epochs"]]
    complete = sorted(in_file, key=lambda r: r["iteration"])
    ids = [f"t{i:02d}" for i in range(n)]

    def on_grid(r: dict, key: str) -> np.ndarray:
        lc = r["learning_curve"]
        pos = np.arange(1, steps + 1) * len(lc) / steps - 1.0  # fractional 0-based epoch of progress step k
        return np.interp(pos, np.arange(len(lc), dtype=float), np.array([p[key] for p in lc], dtype=float))

    hyper = ("epochs", "batch_size", "lr", "lr_peak_epoch", "momentum", "weight_decay", "label_smoothing")
    curves, configs, speed = {}, {}, {}
    allowed = _half(name, half, [r["iteration"] for r in in_file], [r["iteration"] for r in complete])
    sample = _sample(name, len(complete), n, seed, allowed)
    taken = set(sample)
    for tid, j in zip(ids, sample):
        r = complete[j]
        t1, t5 = on_grid(r, "top_1"), on_grid(r, "top_5")
        curves[tid] = [{"loss": float(1.0 - a), "top_1": float(a), "top_5": float(b)} for a, b in zip(t1, t5)]
        configs[tid] = {k: r[k] for k in ("iteration", *hyper)}
        speed[tid] = float(r["learning_curve"][-1]["time"]) / steps
    previous = [(1.0 - on_grid(r, "top_1"), {k: r[k] for k in hyper})
                for j, r in enumerate(complete) if j not in taken]
    return Study(name=name, trial_ids=ids, configs=configs, curves=curves, metric="loss", mode="min", max_steps=steps,
                 reference_seconds_per_step=speed, checkpoint_size_mb=size_mb,
                 source=f"{path.name}: {n} of {len(complete)} complete curves{_of(half)}, seed {seed}",
                 extra={"previous_runs": _previous_runs(previous, steps)})


def _previous_runs(curves: list[tuple[np.ndarray, dict]], steps: int) -> list[tuple[np.ndarray, np.ndarray, int, dict]]:
    """``(steps, loss, max_steps, hyperparameters)`` per previous run: the recorded curves a study did not sample, on
    its progress grid 1 .. ``steps`` (:attr:`Study.extra` ``previous_runs``, for stopper ``hparams``)."""
    grid = np.arange(1, steps + 1, dtype=float)
    return [(grid, np.asarray(values, dtype=float), steps, config) for values, config in curves]


def _sample(name: str, n_complete: int, n: int, seed: int, allowed: list[int] | None = None) -> list[int]:
    """Indices of the ``n`` complete curves a recorded study of ``seed`` replays, sorted; only from ``allowed`` (a
    half, :func:`_half`) when given."""
    pool = np.arange(n_complete) if allowed is None else np.asarray(allowed, dtype=int)
    if len(pool) < n:
        raise ConfigError(f"{name}: only {len(pool)} complete curves, {n} asked")
    return np.sort(np.random.default_rng(seed).choice(pool, size=n, replace=False)).tolist()


def _of(half: str | None) -> str:
    return "" if half is None else f" (the {half} half)"


def _half(name: str, half: str | None, loader_ids: list[str], ids: list[str]) -> list[int] | None:
    """Positions in ``ids`` (the loader's curves as the study sorts them) of the ``half`` of the set's curves.

    The halves are the step benchmarks' (``earlycurve.evaluation.split_indices`` over the curves in the order the
    curve file's loader returns them, ``loader_ids``; decision ES2), so a study of ``<set>@test`` shares no
    configuration with a study of ``<set>@tuning`` nor with those benchmarks' tuning studies. None: every curve.
    """
    if half is None:
        return None
    if half not in HALVES:
        raise ConfigError(f"{name}@{half}: the half must be one of {', '.join(HALVES)}")
    from earlycurve.evaluation import split_indices

    chosen = {loader_ids[i] for i in split_indices(len(loader_ids))[half]}
    return [j for j, cid in enumerate(ids) if cid in chosen]


def _recorded_curves(path: Path, name: str, cakelab: bool = False) -> tuple:
    """The curves of a recorded set's file, in file order (``earlycurve.evaluation.load_cakelab`` with ``cakelab``,
    else ``load_curves``), read once per process while the file is unchanged (:func:`_read_recorded`)."""
    st = path.stat()
    return _read_recorded(str(path), name, cakelab, (st.st_mtime_ns, st.st_size))


@functools.lru_cache(maxsize=8)
def _read_recorded(path: str, name: str, cakelab: bool, stamp: tuple[int, int]) -> tuple:
    """:func:`_recorded_curves`' read, cached on the file's path, name, modification time and size: a benchmark or
    test builds many studies of one file (each seed and half), and parsing the file takes most of a study's time. The
    curves are frozen and their arrays read-only; the studies copy what they keep."""
    from earlycurve.evaluation import load_cakelab, load_curves

    curves = tuple((load_cakelab if cakelab else load_curves)(Path(path), name).curves)
    for c in curves:
        c.steps.setflags(write=False)
        c.values.setflags(write=False)
    return curves


def _cakelab(name: str, seed: int, steps: int, n: int, half: str | None = None) -> Study:
    import pandas as pd

    fname, size_mb = RECORDED[name]
    path = learning_curves_dir() / fname
    in_file = _recorded_curves(path, name, cakelab=True)
    complete = sorted(in_file, key=lambda c: c.curve_id)  # the step benchmarks' rule
    allowed = _half(name, half, [c.curve_id for c in in_file], [c.curve_id for c in complete])
    wall = pd.read_csv(path, usecols=["curve_id", "wall_time"]).groupby("curve_id")["wall_time"]
    span_s = wall.max() - wall.min()
    ids = [f"t{i:02d}" for i in range(n)]
    curves, configs, speed = {}, {}, {}
    for tid, j in zip(ids, _sample(name, len(complete), n, seed, allowed)):
        c = complete[j]
        loss = np.interp(np.arange(1, steps + 1) * c.steps[-1] / steps, c.steps, c.values)
        curves[tid] = [{"loss": float(v), "accuracy": float(1.0 - v)} for v in loss]
        experiment, _, setting = c.group.partition("/")
        configs[tid] = {"curve_id": c.curve_id, "experiment": experiment, "setting": setting}
        speed[tid] = float(span_s[c.curve_id]) / steps
    return Study(name=name, trial_ids=ids, configs=configs, curves=curves, metric="loss", mode="min", max_steps=steps,
                 reference_seconds_per_step=speed, checkpoint_size_mb=size_mb,
                 source=f"{path.name}: {n} of {len(complete)} complete curves{_of(half)}, seed {seed}")


def _random_search(name: str, seed: int, steps: int, n: int, half: str | None = None) -> Study:
    from spottune.workloads import get_workload

    wl = get_workload(RANDOM_SEARCH[name])
    path = learning_curves_dir() / RECORDED[name][0]
    in_file = _recorded_curves(path, name)
    complete = sorted(in_file, key=lambda c: c.curve_id)
    ids = [f"t{i:02d}" for i in range(n)]
    frac = np.arange(1, steps + 1) / steps
    on_grid = lambda c: np.interp(frac * c.max_steps, c.steps, c.values)  # noqa: E731 (the step benchmarks' grid)
    curves, configs = {}, {}
    allowed = _half(name, half, [c.curve_id for c in in_file], [c.curve_id for c in complete])
    sample = _sample(name, len(complete), n, seed, allowed)
    taken = set(sample)
    for tid, j in zip(ids, sample):
        c = complete[j]
        curves[tid] = [{wl.metric: float(v)} for v in on_grid(c)]
        configs[tid] = {"config_id": c.curve_id, **c.config}
    speed = float(wl.reference_seconds_per_step) * wl.max_steps / steps
    previous = [(on_grid(c), dict(c.config)) for j, c in enumerate(complete) if j not in taken]
    return Study(name=name, trial_ids=ids, configs=configs, curves=curves, metric=str(wl.metric), mode=wl.mode,
                 max_steps=steps, reference_seconds_per_step={t: speed for t in ids},
                 checkpoint_size_mb=float(wl.checkpoint_size_mb),
                 source=f"{path.name}: {n} of {len(complete)} random-search curves{_of(half)}, seed {seed}",
                 extra={"previous_runs": _previous_runs(previous, steps)})
