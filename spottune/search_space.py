"""Search spaces in Ray Tune's vocabulary, from Python or from YAML.

A search space is a (possibly nested) mapping from hyperparameter names to either a constant or a
*domain*:

============================  ===================================  ==================================
Python                        YAML / JSON                          meaning
============================  ===================================  ==================================
``grid_search([1, 2, 3])``    ``{"grid_search": [1, 2, 3]}``       every value, crossed with other grids
``choice(["a", "b"])``        ``{"choice": ["a", "b"]}``           one value, uniformly at random
``uniform(0.0, 1.0)``         ``{"uniform": [0.0, 1.0]}``          float in [lo, hi)
``loguniform(1e-4, 1e-1)``    ``{"loguniform": [1e-4, 1e-1]}``     float, log-uniform in [lo, hi)
``randint(1, 10)``            ``{"randint": [1, 10]}``             int in [lo, hi) (hi excluded, as Ray)
============================  ===================================  ==================================

:func:`generate_configs` follows Ray's semantics: the cartesian product of all ``grid_search`` values is
repeated ``num_samples`` times, and every random domain is drawn anew for each configuration, so the
number of configurations is ``num_samples * prod(len(grid) for each grid)``. Draws come from one
``numpy.random.Generator`` seeded with ``seed``, in a fixed order (grid combinations in order, keys in
insertion order), so the same space, ``num_samples`` and ``seed`` always give the same list.

Example
-------
>>> space = {"lr": grid_search([0.01, 0.1]), "wd": loguniform(1e-5, 1e-3), "depth": 3}
>>> configs = generate_configs(space, num_samples=2, seed=0)
>>> len(configs), configs[0]["lr"], configs[0]["depth"]
(4, 0.01, 3)
"""

from __future__ import annotations

import copy
import difflib
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from spottune.errors import ConfigError

__all__ = [
    "Choice",
    "Domain",
    "GridSearch",
    "LogUniform",
    "RandInt",
    "Uniform",
    "choice",
    "count_configs",
    "generate_configs",
    "grid_search",
    "has_domain",
    "loguniform",
    "parse_space",
    "randint",
    "space_to_dict",
    "uniform",
]


def _is_number(x: object) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def _plain(x: Any) -> Any:
    """numpy scalars -> Python scalars, so configs serialise to JSON and YAML."""
    if isinstance(x, np.generic):
        return x.item()
    return x


@dataclass(frozen=True, slots=True)
class GridSearch:
    """Every value in ``values``, crossed with the other grids (Ray's ``tune.grid_search``).

    Parameters
    ----------
    values : tuple
        The grid's values, in order.

    Raises
    ------
    ConfigError
        If ``values`` is not a non-empty tuple.
    """

    values: tuple[Any, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.values, tuple) or len(self.values) == 0:
            raise ConfigError(f"grid_search is {self.values!r}, but must be a non-empty list of values")


@dataclass(frozen=True, slots=True)
class Choice:
    """One of ``values``, uniformly at random (Ray's ``tune.choice``).

    Parameters
    ----------
    values : tuple
        The values to draw from.

    Raises
    ------
    ConfigError
        If ``values`` is not a non-empty tuple.
    """

    values: tuple[Any, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.values, tuple) or len(self.values) == 0:
            raise ConfigError(f"choice is {self.values!r}, but must be a non-empty list of values")

    def sample(self, rng: np.random.Generator) -> Any:
        """One value; consumes one draw of ``rng``.

        Parameters
        ----------
        rng : numpy.random.Generator
            The configuration generator's seeded generator.

        Returns
        -------
        object
            One of ``values`` (a plain Python value).
        """
        return _plain(self.values[int(rng.integers(len(self.values)))])


def _check_finite_bounds(kind: str, lo: object, hi: object) -> None:
    """Raise ``ConfigError`` unless both bounds of a ``kind`` distribution are finite numbers."""
    if not (_is_number(lo) and _is_number(hi)) or not (math.isfinite(lo) and math.isfinite(hi)):  # type: ignore[arg-type]
        raise ConfigError(f"{kind} is [{lo!r}, {hi!r}], but both bounds must be finite numbers")


@dataclass(frozen=True, slots=True)
class Uniform:
    """A float uniformly in ``[lo, hi)`` (Ray's ``tune.uniform``).

    Parameters
    ----------
    lo, hi : float
        Bounds, in the hyperparameter's units; ``hi`` excluded.

    Raises
    ------
    ConfigError
        Unless both bounds are finite numbers with ``lo < hi``.
    """

    lo: float
    hi: float

    def __post_init__(self) -> None:
        _check_finite_bounds("uniform", self.lo, self.hi)
        if not self.lo < self.hi:
            raise ConfigError(f"uniform is [{self.lo!r}, {self.hi!r}], but must have lo < hi")

    def sample(self, rng: np.random.Generator) -> float:
        """One value; consumes one draw of ``rng``.

        Parameters
        ----------
        rng : numpy.random.Generator
            The configuration generator's seeded generator.

        Returns
        -------
        float
            In ``[lo, hi)``.
        """
        return float(rng.uniform(self.lo, self.hi))


@dataclass(frozen=True, slots=True)
class LogUniform:
    """A float whose logarithm is uniform in ``[log lo, log hi)`` (Ray's ``tune.loguniform``).

    Parameters
    ----------
    lo, hi : float
        Bounds, in the hyperparameter's units; ``hi`` excluded.

    Raises
    ------
    ConfigError
        Unless both bounds are finite numbers with ``0 < lo < hi``.
    """

    lo: float
    hi: float

    def __post_init__(self) -> None:
        _check_finite_bounds("loguniform", self.lo, self.hi)
        if not 0 < self.lo < self.hi:
            raise ConfigError(f"loguniform is [{self.lo!r}, {self.hi!r}], but must have 0 < lo < hi")

    def sample(self, rng: np.random.Generator) -> float:
        """One value; consumes one draw of ``rng``.

        Parameters
        ----------
        rng : numpy.random.Generator
            The configuration generator's seeded generator.

        Returns
        -------
        float
            In ``[lo, hi)``.
        """
        return float(math.exp(rng.uniform(math.log(self.lo), math.log(self.hi))))


@dataclass(frozen=True, slots=True)
class RandInt:
    """An int uniformly in ``[lo, hi)``; ``hi`` is excluded, as in Ray's ``tune.randint``.

    Parameters
    ----------
    lo, hi : int
        Bounds; ``hi`` excluded.

    Raises
    ------
    ConfigError
        Unless both bounds are integers with ``lo < hi``.
    """

    lo: int
    hi: int

    def __post_init__(self) -> None:
        ok = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in (self.lo, self.hi))
        if not ok:
            raise ConfigError(f"randint is [{self.lo!r}, {self.hi!r}], but both bounds must be integers")
        if not self.lo < self.hi:
            raise ConfigError(f"randint is [{self.lo!r}, {self.hi!r}], but must have lo < hi (hi is excluded)")

    def sample(self, rng: np.random.Generator) -> int:
        """One value; consumes one draw of ``rng``.

        Parameters
        ----------
        rng : numpy.random.Generator
            The configuration generator's seeded generator.

        Returns
        -------
        int
            In ``[lo, hi)``.
        """
        return int(rng.integers(self.lo, self.hi))


Domain = GridSearch | Choice | Uniform | LogUniform | RandInt
_RANDOM = (Choice, Uniform, LogUniform, RandInt)


def grid_search(values: Sequence[Any]) -> GridSearch:
    """Every value of ``values``, crossed with the other grids of the space.

    Parameters
    ----------
    values : sequence
        The grid's values (a list, tuple or array; not a string or mapping).

    Returns
    -------
    GridSearch

    Raises
    ------
    ConfigError
        If ``values`` is not a non-empty list of values.
    """
    return GridSearch(_as_tuple("grid_search", values))


def choice(values: Sequence[Any]) -> Choice:
    """One of ``values``, drawn uniformly per configuration.

    Parameters
    ----------
    values : sequence
        The values to draw from (a list, tuple or array; not a string or mapping).

    Returns
    -------
    Choice

    Raises
    ------
    ConfigError
        If ``values`` is not a non-empty list of values.
    """
    return Choice(_as_tuple("choice", values))


def uniform(lo: float, hi: float) -> Uniform:
    """A float drawn uniformly in ``[lo, hi)``, in the units of the hyperparameter.

    Parameters
    ----------
    lo, hi : float
        Bounds, ``lo < hi``.

    Returns
    -------
    Uniform

    Raises
    ------
    ConfigError
        Unless both bounds are finite with ``lo < hi``.
    """
    return Uniform(lo, hi)


def loguniform(lo: float, hi: float) -> LogUniform:
    """A float drawn log-uniformly in ``[lo, hi)``; requires ``0 < lo < hi``.

    Parameters
    ----------
    lo, hi : float
        Bounds, ``0 < lo < hi``.

    Returns
    -------
    LogUniform

    Raises
    ------
    ConfigError
        Unless both bounds are finite with ``0 < lo < hi``.
    """
    return LogUniform(lo, hi)


def randint(lo: int, hi: int) -> RandInt:
    """An int drawn uniformly in ``[lo, hi)`` (``hi`` excluded).

    Parameters
    ----------
    lo, hi : int
        Bounds, ``lo < hi``; ``hi`` excluded.

    Returns
    -------
    RandInt

    Raises
    ------
    ConfigError
        Unless both bounds are integers with ``lo < hi``.
    """
    return RandInt(lo, hi)


def _as_tuple(name: str, values: object) -> tuple[Any, ...]:
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, (Sequence, np.ndarray)):
        raise ConfigError(f"{name} is {values!r}, but must be a non-empty list of values")
    return tuple(_plain(v) for v in values)


def _bounds(name: str, args: object) -> tuple[Any, Any]:
    if isinstance(args, (str, bytes, Mapping)) or not isinstance(args, Sequence) or len(args) != 2:
        raise ConfigError(f"{name} is {args!r}, but must be a list of two bounds [lo, hi]")
    return _plain(args[0]), _plain(args[1])


_PARSERS = {
    "grid_search": lambda a: grid_search(a),
    "choice": lambda a: choice(a),
    "uniform": lambda a: uniform(*_bounds("uniform", a)),
    "loguniform": lambda a: loguniform(*_bounds("loguniform", a)),
    "randint": lambda a: randint(*_bounds("randint", a)),
}


#: Distribution names of other tools (Ray Tune, Optuna, Hyperopt, numpy). A one-key mapping with one of
#: these names is a domain this module does not support, not a nested constant, and is refused.
_OTHER_DISTRIBUTIONS = frozenset({
    "gaussian", "normal", "randn", "qrandn", "lognormal", "qlognormal", "quniform", "qloguniform", "qrandint",
    "lograndint", "qlograndint", "sample_from", "categorical", "discrete_uniform", "int_uniform", "float",
    "int", "beta", "gamma", "exponential", "poisson", "truncnorm", "randrange", "logrange", "linspace",
    "logspace", "range",
})


def has_domain(space: Mapping[str, Any] | None) -> bool:
    """Whether the (parsed or YAML-form) space has at least one grid_search or random domain.

    Parameters
    ----------
    space : mapping or None
        Search space in Python or YAML form.

    Returns
    -------
    bool
        False for a space of constants only (one configuration per sample).

    Raises
    ------
    ConfigError
        If the space does not parse (:func:`parse_space`).
    """
    return any(isinstance(v, (GridSearch, *_RANDOM)) for _, v in _leaves(parse_space(space)))


def _parse_value(path: str, value: Any) -> Any:
    if isinstance(value, _RANDOM + (GridSearch,)):
        return value
    if isinstance(value, Mapping):
        if len(value) == 1:
            (key, args), = value.items()
            if key in _PARSERS:
                try:
                    return _PARSERS[key](args)
                except ConfigError as exc:
                    raise ConfigError(f"search space key {path!r}: {exc}") from None
            if str(key).lower() in _OTHER_DISTRIBUTIONS:
                raise ConfigError(f"search space key {path!r}: {key!r} is not a supported domain "
                                  f"(domains: {', '.join(_PARSERS)})")
            close = difflib.get_close_matches(str(key), list(_PARSERS), n=1, cutoff=0.75)
            if close:
                raise ConfigError(f"search space key {path!r}: {key!r} is not a domain; did you mean {close[0]!r}? "
                                  f"(domains: {', '.join(_PARSERS)})")
        return {str(k): _parse_value(f"{path}.{k}", v) for k, v in value.items()}
    return _plain(value)


def parse_space(space: Mapping[str, Any] | None) -> dict[str, Any]:
    """Turn a search space written in Python or in YAML form into domain objects.

    Parameters
    ----------
    space : mapping or None
        Hyperparameter name -> constant, domain object, YAML-form domain (a mapping with exactly one key
        among ``grid_search``, ``choice``, ``uniform``, ``loguniform``, ``randint``) or a nested mapping.
        None means the empty space (one configuration, ``{}``).

    Returns
    -------
    space : dict
        The same structure with every YAML-form domain replaced by its domain object.

    Raises
    ------
    ConfigError
        If a domain is malformed; the message names the key, the value and the rule.
    """
    if space is None:
        return {}
    if not isinstance(space, Mapping):
        raise ConfigError(f"search space is {space!r}, but must be a mapping of hyperparameter names to values")
    return {str(k): _parse_value(str(k), v) for k, v in space.items()}


def _domain_to_dict(value: Any) -> Any:
    if isinstance(value, GridSearch):
        return {"grid_search": list(value.values)}
    if isinstance(value, Choice):
        return {"choice": list(value.values)}
    if isinstance(value, Uniform):
        return {"uniform": [value.lo, value.hi]}
    if isinstance(value, LogUniform):
        return {"loguniform": [value.lo, value.hi]}
    if isinstance(value, RandInt):
        return {"randint": [value.lo, value.hi]}
    if isinstance(value, Mapping):
        return {k: _domain_to_dict(v) for k, v in value.items()}
    return value


def space_to_dict(space: Mapping[str, Any]) -> dict[str, Any]:
    """The YAML/JSON form of a search space; ``parse_space(space_to_dict(s)) == parse_space(s)``.

    Parameters
    ----------
    space : mapping
        Search space in Python or YAML form.

    Returns
    -------
    dict
        Domains as one-key mappings, e.g. ``{"grid_search": [1, 2]}``; constants unchanged.

    Raises
    ------
    ConfigError
        If the space does not parse (:func:`parse_space`).
    """
    return {k: _domain_to_dict(v) for k, v in parse_space(space).items()}


def _leaves(space: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    out: list[tuple[tuple[str, ...], Any]] = []
    for k, v in space.items():
        if isinstance(v, Mapping):
            out.extend(_leaves(v, prefix + (k,)))
        else:
            out.append((prefix + (k,), v))
    return out


def _assign(config: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    node = config
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value


def count_configs(space: Mapping[str, Any] | None, num_samples: int = 1) -> int:
    """Number of configurations :func:`generate_configs` returns (``num_samples`` × grid size).

    Parameters
    ----------
    space : mapping or None
        Search space in Python or YAML form.
    num_samples : int, default 1
        Repetitions of the grid.

    Returns
    -------
    int
        ``num_samples`` times the product of the grid sizes.

    Raises
    ------
    ConfigError
        If ``num_samples`` is not an integer >= 1 or the space does not parse.
    """
    _check_num_samples(num_samples)
    n = num_samples
    for _, v in _leaves(parse_space(space)):
        if isinstance(v, GridSearch):
            n *= len(v.values)
    return n


def _check_num_samples(num_samples: object) -> None:
    if not isinstance(num_samples, (int, np.integer)) or isinstance(num_samples, bool) or num_samples < 1:
        raise ConfigError(f"num_samples is {num_samples!r}, but must be an integer >= 1")


def generate_configs(space: Mapping[str, Any] | None, num_samples: int = 1, seed: int = 0) -> list[dict[str, Any]]:
    """All configurations of a search space, in a deterministic order.

    Parameters
    ----------
    space : mapping or None
        Search space in Python or YAML form (see :func:`parse_space`).
    num_samples : int, default 1
        How many times the grid is repeated; each repetition draws the random domains anew.
    seed : int, default 0
        Seed of the ``numpy.random.Generator`` that draws every random domain.

    Returns
    -------
    configs : list of dict
        ``num_samples * prod(grid sizes)`` configurations. Grid combinations vary the last grid key
        fastest; nested mappings stay nested. Values are plain Python scalars.

    Raises
    ------
    ConfigError
        If the space is malformed or ``num_samples < 1``.
    """
    _check_num_samples(num_samples)
    leaves = _leaves(parse_space(space))
    grids = [(p, v.values) for p, v in leaves if isinstance(v, GridSearch)]
    rng = np.random.default_rng(seed)
    configs: list[dict[str, Any]] = []
    for _ in range(int(num_samples)):
        for combo in itertools.product(*(vals for _, vals in grids)):
            chosen = dict(zip((p for p, _ in grids), combo))
            config: dict[str, Any] = {}
            for path, v in leaves:
                if isinstance(v, GridSearch):
                    _assign(config, path, _plain(chosen[path]))
                elif isinstance(v, _RANDOM):
                    _assign(config, path, v.sample(rng))
                else:
                    _assign(config, path, copy.deepcopy(v))
            configs.append(config)
    return configs
