"""The Trainable API: what a user writes so that spottune can train, stop, move and resume a trial.

Two forms, both in the style of Ray Tune:

**Class API** (like ``ray.tune.Trainable``). Subclass :class:`Trainable` and implement four methods:

- ``setup(config)``: build the model and load the data for one hyperparameter configuration;
- ``step() -> dict``: run one training step (a few minibatches, an epoch, one boosting round ...) and
  return its metrics, e.g. ``{"val_loss": 0.31}``;
- ``save_checkpoint(checkpoint_dir)``: write everything needed to continue into the folder;
- ``load_checkpoint(checkpoint_dir)``: read it back (called on a fresh instance after ``setup``).

spottune calls the framework methods :meth:`Trainable.train`, :meth:`Trainable.save` and
:meth:`Trainable.restore`, which wrap the four above and also store the step counter and the trial's
random number generator ``self.rng`` (a seeded ``numpy.random.Generator``). **Determinism contract**:
if every random draw after ``setup`` comes from ``self.rng`` (or from generators that
``save_checkpoint`` stores), a trial that is checkpointed and resumed any number of times produces
exactly the same metric curve as an uninterrupted run with the same seed on the same CPU.

**Function API**: :func:`from_function` turns a step function ``fn(config, state, rng) -> metrics`` that
mutates a picklable ``state`` dict into a Trainable; spottune pickles ``state`` for checkpoints, so
no checkpoint code is needed. Because unpickling runs code, ``state.pkl`` carries an HMAC-SHA256 keyed
by the experiment's secret (``$SPOTTUNE_CHECKPOINT_KEY``, given to workers through the environment
and never stored with the checkpoints; :mod:`spottune.checkpoint._secrets`); a file that fails the
check is refused with :class:`~spottune.errors.CheckpointError` and never unpickled.

Two class attributes describe the workload to the simulator and the provisioner:

- ``reference_seconds_per_step``: simulated seconds one step takes on the **reference instance**, a
  2-vCPU general-purpose instance (m4.large / r3.large class; 2 vCPUs, 8-15 GiB). Instance-speed models
  scale it by vCPUs (:mod:`spottune.speed`). It is what the paper's workloads would take, not what the small
  stand-in models here take on a laptop.
- ``checkpoint_size_mb``: simulated checkpoint size in MB (1 MB = 10**6 bytes), used by the simulator's
  checkpoint/restore time model (size / bandwidth). The real files written by ``save_checkpoint`` may
  be smaller.

A third says what one trial needs (:func:`parse_resources`; Ray's ``resources_per_trial`` /
``tune.with_resources`` names, EC2 attribute-based selection's habit):

- ``resources``: ``{"cpu": 2, "gpu": 1, "memory_gib": 8}`` (each optional); the pool keeps the instance types
  with at least that many vCPUs, GPUs and GiB of memory, and with ``gpu`` > 0 the speed prior of a type not yet
  measured counts its GPUs, not its vCPUs (docs/design/decisions.md IC2, IC3). The experiment spec's
  ``resources`` overrides it.

See ``docs/guide/trainable.md`` for a worked example.
"""

from __future__ import annotations

import abc
import json
import math
import os
import pickle
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from spottune.errors import CheckpointError, ConfigError

__all__ = ["FRAMEWORK_STATE_FILE", "RESOURCE_KEYS", "Trainable", "from_function", "parse_resources", "trial_seed"]

#: Keys of a resource declaration: vCPUs, GPUs, memory in GiB (Ray's ``cpu`` / ``gpu``; Ray's ``memory`` is in
#: bytes, so the unit is named here).
RESOURCE_KEYS = ("cpu", "gpu", "memory_gib")


def parse_resources(value: Any, what: str = "resources") -> dict[str, float]:
    """Check and normalise a trial's resource declaration.

    Parameters
    ----------
    value : mapping or None
        ``{"cpu": vCPUs, "gpu": GPUs, "memory_gib": GiB}``, each key optional, case-insensitive (Ray's ``CPU`` /
        ``GPU`` too); None or empty: no requirement.
    what : str
        The option's name in error messages.

    Returns
    -------
    dict
        The given keys of :data:`RESOURCE_KEYS` with float values, in that order.

    Raises
    ------
    ConfigError
        If ``value`` is not a mapping, a key is unknown (``memory``: Ray's bytes, say ``memory_gib``), or a value
        is not a finite number >= 0.

    Examples
    --------
    >>> parse_resources({"GPU": 1, "cpu": 4})
    {'cpu': 4.0, 'gpu': 1.0}
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{what} is {value!r}, but must be a mapping with keys among {', '.join(RESOURCE_KEYS)}")
    out: dict[str, float] = {}
    for key, v in value.items():
        k = str(key).lower()
        if k not in RESOURCE_KEYS:
            hint = " (GiB; Ray's memory is in bytes)" if k == "memory" else ""
            raise ConfigError(f"{what} has key {key!r}, but the keys must be among {', '.join(RESOURCE_KEYS)}"
                              + (f"; say memory_gib{hint}" if hint else ""))
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v)) and float(v) >= 0
        if not ok:
            raise ConfigError(f"{what}.{k} is {v!r}, but must be a finite number >= 0")
        out[k] = float(v)
    return {k: out[k] for k in RESOURCE_KEYS if k in out}

#: File the framework writes beside the user's checkpoint files (step counter and RNG state).
FRAMEWORK_STATE_FILE = ".spottune_trainable.json"


def trial_seed(seed: int, index: int) -> int:
    """Seed of trial number ``index`` in an experiment seeded with ``seed``.

    Derived with ``numpy.random.SeedSequence(seed).spawn``-style entropy mixing, so trials get
    independent streams and the same (seed, index) always gives the same value.

    Parameters
    ----------
    seed : int
        Experiment seed (>= 0).
    index : int
        Trial index (>= 0), in the order of :func:`spottune.search_space.generate_configs`.

    Returns
    -------
    seed : int
        A 32-bit unsigned integer.
    """
    return int(np.random.SeedSequence([int(seed), int(index)]).generate_state(1, dtype=np.uint32)[0])


class Trainable(abc.ABC):
    """One trial: a model being trained with one hyperparameter configuration.

    Parameters
    ----------
    config : mapping
        The hyperparameter configuration; stored as ``self.config`` and passed to :meth:`setup`.
    seed : int, default 0
        Seed of ``self.rng``. Use :func:`trial_seed` to give trials independent streams.
    max_steps : int, optional
        The trial's step budget ``S_max``, for trainables whose schedule depends on it (e.g. the
        learning-rate milestones of ``digits-mlp``); available in ``setup`` as ``self.max_steps``.
        spottune does not stop at it by itself; the orchestrator does.

    Attributes
    ----------
    config : dict
        The configuration.
    seed : int
        The seed given at construction.
    rng : numpy.random.Generator
        The trial's random number generator; its state is saved and restored with every checkpoint.
    iteration : int
        Number of steps done so far (0 before the first :meth:`train`).

    Class attributes (override in subclasses)
    -----------------------------------------
    reference_seconds_per_step : float
        Simulated seconds per step on the 2-vCPU reference instance.
    checkpoint_size_mb : float
        Simulated checkpoint size in MB (10**6 bytes).
    resources : mapping
        What one trial needs (:func:`parse_resources`), e.g. ``{"gpu": 1}``; default none.

    Examples
    --------
    >>> class Quadratic(Trainable):
    ...     reference_seconds_per_step = 30.0
    ...     checkpoint_size_mb = 0.001
    ...     def setup(self, config):
    ...         self.x = 5.0
    ...     def step(self):
    ...         self.x -= self.config["lr"] * 2 * self.x + self.rng.normal(0, 0.01)
    ...         return {"loss": self.x ** 2}
    ...     def save_checkpoint(self, checkpoint_dir):
    ...         Path(checkpoint_dir, "x.txt").write_text(repr(self.x))
    ...     def load_checkpoint(self, checkpoint_dir):
    ...         self.x = float(Path(checkpoint_dir, "x.txt").read_text())
    >>> t = Quadratic({"lr": 0.1}, seed=1)
    >>> t.train()["step"]
    1
    """

    reference_seconds_per_step: ClassVar[float] = 10.0
    checkpoint_size_mb: ClassVar[float] = 1.0
    resources: ClassVar[Mapping[str, float]] = {}

    def __init__(self, config: Mapping[str, Any] | None = None, *, seed: int = 0, max_steps: int | None = None):
        self.config: dict[str, Any] = dict(config or {})
        self.seed = int(seed)
        self.max_steps = max_steps
        self.rng = np.random.default_rng(self.seed)
        self.iteration = 0
        self.setup(self.config)

    # -- user hooks ---------------------------------------------------------------------------------
    @abc.abstractmethod
    def setup(self, config: dict[str, Any]) -> None:
        """Build the model and load the data for ``config``; called once by ``__init__``.

        Parameters
        ----------
        config : dict
            One hyperparameter configuration of the search space (name -> value).
        """

    @abc.abstractmethod
    def step(self) -> dict[str, float]:
        """Run one training step and return its metrics (name -> float).

        Returns
        -------
        dict of str to float
            The step's metrics, e.g. ``{"val_loss": 0.31}``; it must hold the experiment's ``metric``.
        """

    @abc.abstractmethod
    def save_checkpoint(self, checkpoint_dir: str) -> None:
        """Write the state needed to continue training into the existing folder ``checkpoint_dir``.

        Parameters
        ----------
        checkpoint_dir : str
            An existing, empty folder; everything written there is uploaded with the checkpoint.
        """

    @abc.abstractmethod
    def load_checkpoint(self, checkpoint_dir: str) -> None:
        """Read back what :meth:`save_checkpoint` wrote; called after ``setup`` on a fresh instance.

        Parameters
        ----------
        checkpoint_dir : str
            A folder holding what :meth:`save_checkpoint` wrote (downloaded from the checkpoint store).
        """

    def cleanup(self) -> None:
        """Release resources; called when the trial's segment ends. Default: nothing."""

    # -- framework methods --------------------------------------------------------------------------
    def train(self) -> dict[str, float]:
        """Run one step; return its metrics plus ``"step"`` (the step number, 1-based).

        Returns
        -------
        metrics : dict
            The dict returned by :meth:`step` with values converted to ``float``, plus ``step`` (int).

        Raises
        ------
        TypeError
            If :meth:`step` does not return a mapping of names to numbers.
        ValueError
            If a metric is NaN or infinite (the trial fails with this reason instead of ranking on it).
        """
        raw = self.step()
        if not isinstance(raw, Mapping):
            raise TypeError(f"{type(self).__name__}.step() returned {type(raw).__name__}, but must return a dict of metrics")
        metrics: dict[str, float] = {}
        for k, v in raw.items():
            try:
                metrics[str(k)] = float(v)
            except (TypeError, ValueError):
                raise TypeError(f"{type(self).__name__}.step() metric {k!r} is {v!r}, but must be a number") from None
            if not math.isfinite(metrics[str(k)]):
                raise ValueError(f"{type(self).__name__}.step() metric {k!r} is {metrics[str(k)]}, but must be a "
                                 f"finite number (training diverged at step {self.iteration + 1}?)")
        self.iteration += 1
        metrics["step"] = self.iteration
        return metrics

    def save(self, checkpoint_dir: str | os.PathLike[str]) -> str:
        """Write a complete checkpoint (user files + step counter + ``self.rng`` state) to a folder.

        Parameters
        ----------
        checkpoint_dir : path
            Folder to write into; created if missing. It should be empty.

        Returns
        -------
        checkpoint_dir : str
        """
        path = Path(checkpoint_dir)
        path.mkdir(parents=True, exist_ok=True)
        self.save_checkpoint(str(path))
        state = {"iteration": self.iteration, "seed": self.seed, "rng": self.rng.bit_generator.state,
                 "class": f"{type(self).__module__}:{type(self).__qualname__}"}
        (path / FRAMEWORK_STATE_FILE).write_text(json.dumps(state))
        return str(path)

    def restore(self, checkpoint_dir: str | os.PathLike[str]) -> None:
        """Continue from a checkpoint written by :meth:`save` (on this or another process).

        Parameters
        ----------
        checkpoint_dir : str or os.PathLike
            A folder written by :meth:`save`.

        Raises
        ------
        CheckpointError
            If the folder holds no readable framework state file (not a spottune checkpoint), or
            the file lacks the step counter or a valid ``rng`` state.
        """
        path = Path(checkpoint_dir)
        try:
            state = json.loads((path / FRAMEWORK_STATE_FILE).read_text())
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"{path} is not a spottune checkpoint: {exc}") from None
        try:  # parse all of it before changing anything
            iteration = int(state["iteration"])
            rng_state = state["rng"]
            bitgen = getattr(np.random, rng_state["bit_generator"])()
            bitgen.state = rng_state
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CheckpointError(f"{path / FRAMEWORK_STATE_FILE} is malformed "
                                  f"({type(exc).__name__}: {exc})") from None
        self.iteration = iteration
        self.rng = np.random.Generator(bitgen)
        self.load_checkpoint(str(path))


class _FunctionTrainable(Trainable):
    """Trainable built by :func:`from_function`; ``state`` is pickled into ``state.pkl``."""

    _step_fn: ClassVar[Callable[..., Mapping[str, float]]]
    _init_fn: ClassVar[Callable[..., dict[str, Any]] | None]

    def setup(self, config: dict[str, Any]) -> None:
        init = type(self)._init_fn
        self.state: dict[str, Any] = init(config, self.rng) if init is not None else {}
        if not isinstance(self.state, dict):
            raise TypeError(f"init function returned {type(self.state).__name__}, but must return a dict")

    def step(self) -> dict[str, float]:
        return dict(type(self)._step_fn(self.config, self.state, self.rng))

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        from spottune.checkpoint._secrets import sign

        payload = pickle.dumps(self.state, protocol=pickle.HIGHEST_PROTOCOL)
        with open(os.path.join(checkpoint_dir, "state.pkl"), "wb") as fh:
            fh.write(sign(payload))

    def load_checkpoint(self, checkpoint_dir: str) -> None:
        """Read ``state.pkl`` back; its HMAC is checked before anything is unpickled.

        Raises
        ------
        CheckpointError
            If the file is not signed with this experiment's key (tampered or foreign).
        """
        from spottune.checkpoint._secrets import verify

        path = os.path.join(checkpoint_dir, "state.pkl")
        with open(path, "rb") as fh:
            payload = verify(fh.read(), path)
        self.state = pickle.loads(payload)


def from_function(step_fn: Callable[[dict[str, Any], dict[str, Any], np.random.Generator], Mapping[str, float]],
                  *, init: Callable[[dict[str, Any], np.random.Generator], dict[str, Any]] | None = None,
                  name: str | None = None, reference_seconds_per_step: float = 10.0,
                  checkpoint_size_mb: float = 1.0) -> type[Trainable]:
    """Make a Trainable class from a step function (the function API).

    Parameters
    ----------
    step_fn : callable ``(config, state, rng) -> metrics``
        Runs one step: reads the configuration, updates the picklable ``state`` dict in place, draws any
        randomness from ``rng`` (``numpy.random.Generator``) and returns the metrics dict.
    init : callable ``(config, rng) -> state``, optional
        Builds the initial state; default: an empty dict.
    name : str, optional
        Class name (default: derived from ``step_fn.__name__``).
    reference_seconds_per_step : float, default 10.0
        Simulated seconds per step on the 2-vCPU reference instance.
    checkpoint_size_mb : float, default 1.0
        Simulated checkpoint size in MB.

    Returns
    -------
    cls : type of Trainable
        Instantiate it as ``cls(config, seed=...)``. Checkpoints pickle ``state``; the step counter and
        ``rng`` are saved by the framework, so resumed runs repeat the uninterrupted curve exactly.

    Raises
    ------
    ConfigError
        If ``reference_seconds_per_step`` or ``checkpoint_size_mb`` is not positive.

    Notes
    -----
    The returned class is created at call time, so it cannot be pickled by reference and a worker
    process cannot import it by name. For the local backend, assign it to a module-level name (for
    example ``MyTrainable = from_function(...)`` in ``mypkg/train.py``) and refer to it as
    ``"mypkg.train:MyTrainable"``; ``from_function`` sets ``__module__`` to ``step_fn``'s module for
    that purpose.

    Examples
    --------
    >>> def step(config, state, rng):
    ...     state["x"] = state.get("x", 5.0) * (1 - config["lr"]) + rng.normal(0, 0.01)
    ...     return {"loss": state["x"] ** 2}
    >>> Quad = from_function(step, reference_seconds_per_step=30.0)
    >>> t = Quad({"lr": 0.5}, seed=0)
    >>> m1 = t.train()
    >>> m1["step"], m1["loss"] < 25.0
    (1, True)
    """
    _check_positive("reference_seconds_per_step", reference_seconds_per_step)
    _check_positive("checkpoint_size_mb", checkpoint_size_mb)
    cls_name = name or "".join(p.capitalize() for p in step_fn.__name__.split("_")) + "Trainable"
    cls = type(cls_name, (_FunctionTrainable,), {
        "_step_fn": staticmethod(step_fn),
        "_init_fn": staticmethod(init) if init is not None else None,
        "reference_seconds_per_step": float(reference_seconds_per_step),
        "checkpoint_size_mb": float(checkpoint_size_mb),
        "__module__": getattr(step_fn, "__module__", __name__),
        "__doc__": step_fn.__doc__,
    })
    return cls


def _check_positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigError(f"{name} is {value!r}, but must be a number > 0")
