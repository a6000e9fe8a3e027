"""The earlycurve error family."""


class EarlyCurveError(Exception):
    """Base class of every error earlycurve raises on purpose."""


class CurveFitError(EarlyCurveError, RuntimeError):
    """The least-squares solver failed; no garbage parameters are returned."""


class TooFewPointsError(EarlyCurveError, ValueError):
    """Fewer points than the model needs."""


class InvalidCurveError(EarlyCurveError, ValueError):
    """A curve or an argument is malformed (non-finite values, unsorted steps, step > max_steps, ...)."""


class NotFittedError(EarlyCurveError, ValueError, AttributeError):
    """A prediction was asked for before any data were fitted or observed."""
