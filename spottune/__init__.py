"""spottune: cost-aware hyperparameter tuning on revocable (spot) cloud capacity.

Implements SpotTune (Li et al., ICDCS 2020) and goes beyond it; see ``docs/design/decisions.md``.

The public API::

    import spottune

    grid = spottune.tune(max_steps=60)      # or tune(ExperimentSpec(...)); returns a ResultGrid
    grid.get_dataframe(), grid.get_best_result(), grid.ledger, grid.summary, grid.path

``tune``, :class:`ResultGrid`, :class:`Result` (:mod:`spottune.api`), :class:`ExperimentSpec`
(:mod:`spottune.experiment`), :class:`Trainable` (:mod:`spottune.trainable`) and the search-space
helpers ``grid_search``, ``choice``, ``uniform``, ``loguniform``, ``randint``
(:mod:`spottune.search_space`).

The names are loaded on first use (PEP 562 module ``__getattr__``): importing a submodule, e.g. the
worker process ``spottune.backends.local.worker`` or the EC2 agent, does not pay for the API's imports
(scipy, pandas: the worker starts in 0.10 s instead of 1.58 s; ``benchmarks/bench_startup.py``). Importing spottune does not import torch either; a run
imports it when its workload or predictor needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spottune._lazy import attach

if TYPE_CHECKING:  # what the names are, for type checkers and IDEs; at run time __getattr__ loads them
    from spottune.api import Result, ResultGrid, tune
    from spottune.errors import ConfigError, SpottuneError
    from spottune.experiment import ExperimentSpec
    from spottune.search_space import choice, grid_search, loguniform, randint, uniform
    from spottune.trainable import Trainable

#: public name -> the module that defines it
_API = {
    "ConfigError": "spottune.errors", "SpottuneError": "spottune.errors",
    "ExperimentSpec": "spottune.experiment",
    "Result": "spottune.api", "ResultGrid": "spottune.api", "tune": "spottune.api",
    "Trainable": "spottune.trainable",
    "choice": "spottune.search_space", "grid_search": "spottune.search_space", "loguniform": "spottune.search_space",
    "randint": "spottune.search_space", "uniform": "spottune.search_space",
}

__all__ = sorted(_API)
__version__ = "0.1.0"
__getattr__, __dir__ = attach(__name__, _API)
