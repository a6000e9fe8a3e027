"""spottune: cost-aware hyperparameter tuning on revocable (spot) cloud capacity.

Implements SpotTune (Li et al., ICDCS 2020) and goes beyond it; see ``docs/design.md``.
"""

from spottune.errors import SpottuneError

__all__ = ["SpottuneError"]
__version__ = "0.1.0"
