"""The earlycurve error family."""


class EarlyCurveError(Exception):
    """Base class of every error earlycurve raises on purpose."""


class CurveFitError(EarlyCurveError, RuntimeError):
    """The least-squares solver failed; no garbage parameters are returned."""


class TooFewPointsError(EarlyCurveError, ValueError):
    """Fewer points than the model needs."""
