"""Workload registry: a named Trainable with its metric, direction, step budget and search space."""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spottune.errors import ConfigError
from spottune.search_space import count_configs, generate_configs, parse_space
from spottune.trainable import Trainable

__all__ = ["Workload", "get_workload", "list_workloads"]

#: Built-in workloads: name -> module defining ``WORKLOAD``. Modules import torch/scikit-learn lazily,
#: so looking a workload up is cheap; the cost is paid when a trial is set up.
_BUILTIN: dict[str, str] = {
    "digits-mlp": "spottune.workloads._digits_mlp",
    "logreg": "spottune.workloads._logreg",
    "linreg": "spottune.workloads._linreg",
    "linear-svm": "spottune.workloads._linear_svm",
    "gbt": "spottune.workloads._gbt",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    """A trainable plus the experiment defaults that go with it.

    Parameters
    ----------
    name : str
        Registry name (``digits-mlp``) or import path (``pkg.module:Class``).
    trainable : type of Trainable
        The class; instantiate with ``trainable(config, seed=...)``.
    metric : str or None
        Name of the metric in ``step()``'s dict that ranks trials; None for a bare custom trainable (the
        experiment must then give it).
    mode : {"min", "max"}
        Whether lower or higher ``metric`` is better.
    max_steps : int or None
        Default ``S_max`` (steps); None for a bare custom trainable.
    search_space : mapping
        Default search space (Python or YAML form); stored parsed (domain objects).
    num_samples : int, default 1
        Default repetitions of the grid.
    description : str
        One line for ``--help`` and reports, incl. the paper workload it stands in for.

    Raises
    ------
    ConfigError
        If ``trainable`` is not a :class:`~spottune.trainable.Trainable` subclass, or the search space does not
        parse.
    """

    name: str
    trainable: type[Trainable]
    metric: str | None
    mode: str = "min"
    max_steps: int | None = None
    search_space: Mapping[str, Any] = field(default_factory=dict)
    num_samples: int = 1
    description: str = ""

    def __post_init__(self) -> None:
        if not (isinstance(self.trainable, type) and issubclass(self.trainable, Trainable)):
            raise ConfigError(f"workload {self.name}: trainable is {self.trainable!r}, but must be a Trainable subclass")
        object.__setattr__(self, "search_space", parse_space(self.search_space))

    @property
    def resources(self) -> dict[str, float]:
        """What one trial needs, from the trainable's ``resources`` (:func:`spottune.trainable.parse_resources`)."""
        from spottune.trainable import parse_resources

        return parse_resources(getattr(self.trainable, "resources", None), f"workload {self.name}: resources")

    @property
    def reference_seconds_per_step(self) -> float:
        """Simulated seconds per step on the 2-vCPU reference instance (from the trainable)."""
        return float(self.trainable.reference_seconds_per_step)

    @property
    def checkpoint_size_mb(self) -> float:
        """Simulated checkpoint size in MB (10**6 bytes; from the trainable)."""
        return float(self.trainable.checkpoint_size_mb)

    def configs(self, seed: int = 0) -> list[dict[str, Any]]:
        """The default search space's configurations (see :func:`spottune.search_space.generate_configs`).

        Parameters
        ----------
        seed : int, default 0
            Seeds the random domains' draws.

        Returns
        -------
        list of dict
            :meth:`n_configs` configurations, in a deterministic order.
        """
        return generate_configs(self.search_space, self.num_samples, seed)

    def n_configs(self) -> int:
        """Number of configurations of the default search space.

        Returns
        -------
        int
            ``num_samples`` times the grid size.
        """
        return count_configs(self.search_space, self.num_samples)

    def make(self, config: Mapping[str, Any], seed: int = 0, max_steps: int | None = None) -> Trainable:
        """A fresh trial of this workload (runs ``setup``); ``max_steps`` defaults to the workload's.

        Parameters
        ----------
        config : mapping
            One hyperparameter configuration.
        seed : int, default 0
            Seeds the trial's ``rng``.
        max_steps : int, optional
            S_max, steps; default: the workload's.

        Returns
        -------
        spottune.trainable.Trainable
            At step 0.
        """
        return self.trainable(config, seed=seed, max_steps=self.max_steps if max_steps is None else max_steps)


def list_workloads() -> list[str]:
    """Names of the built-in workloads, sorted.

    Returns
    -------
    list of str
        E.g. ``digits-mlp``, ``gbt``, ``linear-svm``, ``linreg``, ``logreg``.
    """
    return sorted(_BUILTIN)


def _import(path: str) -> Any:
    module_name, _, attr = path.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"workload {path!r} cannot be imported: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - the user's module raised while importing
        raise ConfigError(f"workload {path!r} cannot be imported: its module raised {type(exc).__name__}: {exc}") from None
    return obj


def get_workload(name: str) -> Workload:
    """Look up a workload by registry name or import path.

    Parameters
    ----------
    name : str
        A built-in name (see :func:`list_workloads`), or ``"pkg.module:attr"`` naming a
        :class:`Workload` object or a :class:`~spottune.trainable.Trainable` subclass. A bare
        trainable gets ``metric=None``, ``max_steps=None`` and an empty search space; the experiment
        spec must supply them.

    Returns
    -------
    workload : Workload

    Raises
    ------
    ConfigError
        If the name is unknown or the import fails; the message lists the built-in names.
    """
    if not isinstance(name, str) or not name:
        raise ConfigError(f"workload is {name!r}, but must be a built-in name or 'module:Class'")
    if name in _BUILTIN:
        return importlib.import_module(_BUILTIN[name]).WORKLOAD
    if ":" not in name:
        close = difflib.get_close_matches(name, list(_BUILTIN), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"workload is {name!r}, but must be one of {', '.join(list_workloads())} "
                          f"or 'module:Class'{hint}")
    obj = _import(name)
    if isinstance(obj, Workload):
        return obj
    if isinstance(obj, type) and issubclass(obj, Trainable):
        return Workload(name=name, trainable=obj, metric=None)
    raise ConfigError(f"workload {name!r} is {type(obj).__name__}, but must be a Workload or a Trainable subclass")
