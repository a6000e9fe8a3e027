"""spottune: cost-aware hyperparameter tuning on revocable (spot) cloud capacity.

Implements SpotTune (Li et al., ICDCS 2020) and goes beyond it; see ``docs/design/decisions.md``.

The public API::

    import spottune

    grid = spottune.tune(max_steps=60)      # or tune(ExperimentSpec(...)); returns a ResultGrid
    grid.get_dataframe(), grid.get_best_result(), grid.ledger, grid.summary, grid.path

``tune``, :class:`ResultGrid`, :class:`Result` (:mod:`spottune.api`), :class:`ExperimentSpec`
(:mod:`spottune.experiment`), :class:`Trainable` (:mod:`spottune.trainable`) and the search-space
helpers ``grid_search``, ``choice``, ``uniform``, ``loguniform``, ``randint``
(:mod:`spottune.search_space`). Importing spottune does not import torch; a run imports it when its
workload or predictor needs it.
"""

from spottune.api import Result, ResultGrid, tune
from spottune.errors import ConfigError, SpottuneError
from spottune.experiment import ExperimentSpec
from spottune.search_space import choice, grid_search, loguniform, randint, uniform
from spottune.trainable import Trainable

__all__ = [
    "ConfigError", "ExperimentSpec", "Result", "ResultGrid", "SpottuneError", "Trainable", "choice", "grid_search",
    "loguniform", "randint", "tune", "uniform",
]
__version__ = "0.1.0"
