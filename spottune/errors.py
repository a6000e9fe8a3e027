"""The spottune error family (see ``docs/design.md``, "Errors").

Only :mod:`spottune.cli` catches these bases; it turns them into one line and exit code 2.
Each subclass also inherits the built-in it resembles, so ``except ValueError`` still works.
"""


class SpottuneError(Exception):
    """Base class of every error spottune raises on purpose."""


class ConfigError(SpottuneError, ValueError):
    """An experiment option or CLI argument is invalid; the message names the value and the rule."""


class MarketError(SpottuneError, ValueError):
    """A market replay query is invalid (unknown market, time outside the recorded history, ...)."""


class BackendError(SpottuneError, RuntimeError):
    """A backend (sim, local, aws) could not carry out an action."""


class CheckpointError(SpottuneError, RuntimeError):
    """A checkpoint could not be stored or restored intact."""
