"""Adapters that give other tuners SpotTune's early-stopping rule.

- :mod:`spottune.integrations.optuna`: ``EarlyCurvePruner``, an Optuna ``BasePruner``;
- :mod:`spottune.integrations.ray`: ``EarlyCurveScheduler``, a Ray Tune ``TrialScheduler``
  (needs the optional extra ``spottune[ray]``; Ray is imported only when the class is used).

Both wrap :class:`earlycurve.RankConfidenceStopping` and depend on nothing else of spottune.
Submodules are not imported here, so ``import spottune.integrations`` never needs Ray.
"""
