"""One stage of a learning curve: the sublinear family of Eq 4, fitted by bounded least squares.

``y(g) = 1 / (a·g² + b·g + c) + d`` with ``a, b, d ≥ 0`` and ``c ≥ c_min > 0`` (the paper's Eq 4–6).
``g`` is the number of steps since the stage began, so ``g = 0`` is the stage's first point.

Fitting runs in a scaled space (``u = g / G``, ``z = y / Y`` with ``G`` the stage's last ``g`` and
``Y`` the largest ``|y|``) so that the solver sees parameters of order one whatever the step count
and the metric's units; the parameters are mapped back exactly (non-negativity is preserved).
The start point comes from a few non-negative linear solves of ``1 / (z − D) = A·u² + B·u + C`` over
a grid of ``D``; ``scipy.optimize.least_squares`` (``method="trf"``, analytic Jacobian) then polishes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares, nnls
from scipy.stats import norm

from earlycurve.errors import CurveFitError, InvalidCurveError, NotFittedError, TooFewPointsError

__all__ = ["CurveFitter", "CurveParams", "curve"]

N_PARAMS = 4
_D_GRID = (0.0, 0.5, 0.8, 0.9, 0.95, 0.98, 0.995)  # fractions of min(z) tried as the start for D
_C_MIN_SCALED = 1e-6  # [I] floor on c in scaled units: y(0) − d is at most 1e6 × max|y|
_LOWER = np.array([0.0, 0.0, _C_MIN_SCALED, 0.0])  # bounds of (A, B, C, D) in scaled units
_LOSSES = ("linear", "soft_l1", "huber", "cauchy", "arctan")
_INTERVALS = ("jacobian", "bootstrap", "none")


@dataclass(frozen=True, slots=True, kw_only=True)
class CurveParams:
    """Coefficients of Eq 4, in the caller's units.

    Attributes
    ----------
    a : float
        Coefficient of ``g²``, in 1 / (metric unit · step²); ``a ≥ 0``.
    b : float
        Coefficient of ``g``, in 1 / (metric unit · step); ``b ≥ 0``.
    c : float
        Constant term, in 1 / metric unit; ``c > 0``. ``1/c + d`` is the value at ``g = 0``.
    d : float
        Asymptote (the value as ``g → ∞``), in metric units; ``d ≥ 0``.
    """

    a: float
    b: float
    c: float
    d: float

    def __post_init__(self) -> None:
        for name in ("a", "b", "c", "d"):
            value = getattr(self, name)
            if not np.isfinite(value) or value < 0:
                raise InvalidCurveError(f"CurveParams.{name} is {value!r}, but must be finite and >= 0")
        if self.c <= 0:
            raise InvalidCurveError(f"CurveParams.c is {self.c!r}, but must be > 0")

    def as_array(self) -> np.ndarray:
        """Return ``[a, b, c, d]`` as an ndarray of shape (4,).

        Returns
        -------
        ndarray of shape (4,)
        """
        return np.array([self.a, self.b, self.c, self.d])


def curve(g: np.ndarray | float, params: CurveParams) -> np.ndarray:
    """Evaluate Eq 4 at stage-local steps.

    Parameters
    ----------
    g : array-like of shape (n_steps,) or float
        Steps since the stage began (``k − l_s``, Eq 5), ``g ≥ 0``.
    params : CurveParams
        Coefficients in the caller's units.

    Returns
    -------
    y : ndarray of shape (n_steps,)
        Predicted metric, in the caller's units.
    """
    g = np.atleast_1d(np.asarray(g, dtype=float))
    return 1.0 / (params.a * g * g + params.b * g + params.c) + params.d


def _scaled_model(theta: np.ndarray, u: np.ndarray) -> np.ndarray:
    A, B, C, D = theta
    return 1.0 / ((A * u + B) * u + C) + D


def _scaled_jac(theta: np.ndarray, u: np.ndarray) -> np.ndarray:
    A, B, C, _ = theta
    q = (A * u + B) * u + C
    inv_q2 = -1.0 / (q * q)
    jac = np.empty((u.size, N_PARAMS))
    jac[:, 0] = inv_q2 * u * u
    jac[:, 1] = inv_q2 * u
    jac[:, 2] = inv_q2
    jac[:, 3] = 1.0
    return jac


def _initial_guess(u: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Best of a few linearised solves: for fixed D, ``1/(z − D)`` is linear in (A, B, C)."""
    z_min = float(z.min())
    design = np.column_stack([u * u, u, np.ones_like(u)])
    best, best_cost = None, np.inf
    for frac in _D_GRID:
        D = frac * z_min if z_min > 0 else 0.0
        gap = z - D
        if np.any(gap <= 0):
            continue
        weight = gap * gap  # first-order error propagation of dz into d(1/(z − D))
        coef, _ = nnls(design * weight[:, None], weight / gap)
        coef[2] = max(coef[2], _C_MIN_SCALED)
        theta = np.array([coef[0], coef[1], coef[2], D])
        cost = float(np.sum((_scaled_model(theta, u) - z) ** 2))
        if cost < best_cost:
            best, best_cost = theta, cost
    if best is None:  # all values <= 0: a flat curve at the mean, D absorbs the level
        best = np.array([0.0, 0.0, 1.0, max(float(z.mean()) - 1.0, 0.0)])
    return best


class CurveFitter:
    """Fit Eq 4 to the points of one stage (scikit-learn style: ``fit`` returns ``self``).

    The model is meant for a **loss** (lower is better, non-negative). A metric to maximise must be
    converted by the caller first, for example ``1 − accuracy`` (see :func:`earlycurve.to_loss`).

    Parameters
    ----------
    loss : {"linear", "soft_l1", "huber", "cauchy", "arctan"}, default="linear"
        Residual loss handed to ``scipy.optimize.least_squares``. [I] ``"linear"``: a check with
        ``"soft_l1"`` on 100 curves per data set at θ = 0.7 gave the same median error within 0.006
        (see ``docs/design/earlycurve.md``), and ``"linear"`` keeps the Jacobian interval a plain
        Gauss–Newton one.
    f_scale : float, default=0.05
        Residual scale of a robust ``loss``, in units of ``max|y|`` (ignored for ``"linear"``).
    interval : {"jacobian", "bootstrap", "none"}, default="jacobian"
        How :meth:`predict_interval` estimates uncertainty. ``"jacobian"``: delta method with
        ``σ²·(JᵀJ)⁺`` on the free parameters plus the residual variance (a prediction interval for
        a new observation). ``"bootstrap"``: residual bootstrap with ``n_boot`` refits.
    n_boot : int, default=100
        Refits for ``interval="bootstrap"``.
    random_state : int or numpy.random.Generator or None, default=None
        Seed of the bootstrap (``numpy.random.default_rng``); no global RNG is used.

    Attributes
    ----------
    params_ : CurveParams
        Fitted coefficients, in the units of the data passed to :meth:`fit`.
    cost_ : float
        Final ``least_squares`` cost (½ Σ residual², in squared metric units).
    n_points_ : int
        Number of points fitted.
    residual_std_ : float
        ``sqrt(Σ residual² / max(n − p_free, 1))``, in metric units.

    Examples
    --------
    >>> import numpy as np
    >>> g = np.arange(50.0)
    >>> y = 1.0 / (1e-3 * g**2 + 0.05 * g + 2.0) + 0.1
    >>> fitter = CurveFitter().fit(g, y)
    >>> round(fitter.params_.d, 6)
    0.1
    """

    def __init__(
        self,
        *,
        loss: str = "linear",
        f_scale: float = 0.05,
        interval: str = "jacobian",
        n_boot: int = 100,
        random_state: int | np.random.Generator | None = None,
    ) -> None:
        self.loss = loss
        self.f_scale = f_scale
        self.interval = interval
        self.n_boot = n_boot
        self.random_state = random_state

    # -- fitting ---------------------------------------------------------------------------------

    def _check_params(self) -> None:
        if self.loss not in _LOSSES:
            raise InvalidCurveError(f"CurveFitter.loss is {self.loss!r}, but must be one of {_LOSSES}")
        if self.interval not in _INTERVALS:
            raise InvalidCurveError(f"CurveFitter.interval is {self.interval!r}, but must be one of {_INTERVALS}")
        if not self.f_scale > 0:
            raise InvalidCurveError(f"CurveFitter.f_scale is {self.f_scale!r}, but must be > 0")
        if int(self.n_boot) < 2:
            raise InvalidCurveError(f"CurveFitter.n_boot is {self.n_boot!r}, but must be >= 2")

    def _solve(self, u: np.ndarray, z: np.ndarray) -> np.ndarray:
        x0 = _initial_guess(u, z)
        lower = _LOWER
        x0 = np.maximum(x0, lower)
        try:
            res = least_squares(
                lambda th: _scaled_model(th, u) - z,
                x0,
                jac=lambda th: _scaled_jac(th, u),
                bounds=(lower, np.inf),
                method="trf",
                loss=self.loss,
                f_scale=self.f_scale,
                x_scale="jac",
                ftol=1e-8,
                xtol=1e-10,
                gtol=1e-10,
                max_nfev=400,
            )
        except (ValueError, FloatingPointError) as exc:  # pragma: no cover - defensive
            raise CurveFitError(f"least_squares failed on {u.size} points: {exc}") from exc
        if res.status == 0:
            # Ran out of evaluations: accept only if it improved on the start point.
            start_cost = 0.5 * float(np.sum((_scaled_model(x0, u) - z) ** 2))
            if not (np.all(np.isfinite(res.x)) and 0.5 * np.sum(res.fun**2) <= start_cost):
                raise CurveFitError(f"least_squares hit max_nfev on {u.size} points without progress")
        elif res.status < 0 or not np.all(np.isfinite(res.x)):
            raise CurveFitError(f"least_squares failed on {u.size} points: {res.message}")
        return np.maximum(res.x, lower)

    def fit(self, g: np.ndarray, y: np.ndarray) -> CurveFitter:
        """Fit Eq 4 to one stage.

        Parameters
        ----------
        g : array-like of shape (n_points,)
            Steps since the stage began, ``g ≥ 0`` and strictly increasing.
        y : array-like of shape (n_points,)
            Loss at those steps (lower is better), in metric units; finite.

        Returns
        -------
        self : CurveFitter
            Fitted estimator.

        Raises
        ------
        TooFewPointsError
            Fewer than 4 points (Eq 4 has 4 parameters).
        InvalidCurveError
            Shapes differ, a value is not finite, or ``g`` is negative or not increasing.
        CurveFitError
            The solver failed (``status < 0``, or no progress within its budget).
        """
        self._check_params()
        g = np.asarray(g, dtype=float).ravel()
        y = np.asarray(y, dtype=float).ravel()
        if g.shape != y.shape:
            raise InvalidCurveError(f"g has {g.size} points and y has {y.size}; they must match")
        if g.size < N_PARAMS:
            raise TooFewPointsError(f"a stage has {g.size} points, but fitting Eq 4 needs >= {N_PARAMS}")
        if not (np.all(np.isfinite(g)) and np.all(np.isfinite(y))):
            raise InvalidCurveError("g and y must be finite")
        if g[0] < 0 or np.any(np.diff(g) <= 0):
            raise InvalidCurveError("g must be >= 0 and strictly increasing")
        G = float(g[-1])  # > 0: at least 4 strictly increasing steps from g[0] >= 0
        Y = float(np.max(np.abs(y))) or 1.0
        u, z = g / G, y / Y
        theta = self._solve(u, z)
        A, B, C, D = theta
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            mapped = np.array([A / (Y * G * G), B / (Y * G), C / Y, D * Y])
        if not np.all(np.isfinite(mapped)):
            raise CurveFitError(f"parameters overflow when mapped back to the data's units (max|y| = {Y:g})")
        # validated: only now replace the state of a previous fit (a failed refit leaves it intact)
        self._scale = (G, Y)
        self._theta = theta
        self._u = u
        self.params_ = CurveParams(a=float(mapped[0]), b=float(mapped[1]), c=float(mapped[2]), d=float(mapped[3]))
        resid = _scaled_model(theta, u) - z
        self.cost_ = 0.5 * float(np.sum(resid**2)) * Y * Y
        self.n_points_ = int(g.size)
        # Parameters held at a bound count as fixed (their Jacobian columns are dropped).
        self._free = theta > _LOWER * (1 + 1e-9) + 1e-12
        dof = max(g.size - int(self._free.sum()), 1)
        self.residual_std_ = float(np.sqrt(np.sum(resid**2) / dof)) * Y
        self._resid = resid
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "params_"):
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet. Call 'fit' with "
                "appropriate arguments before using this estimator."
            )

    # -- prediction ------------------------------------------------------------------------------

    def predict(self, g: np.ndarray | float) -> np.ndarray:
        """Predicted loss at stage-local steps.

        Parameters
        ----------
        g : array-like of shape (n_steps,) or float
            Steps since the stage began.

        Returns
        -------
        y : ndarray of shape (n_steps,)
            Predicted loss, in the units of the fitted data.
        """
        self._check_fitted()
        return curve(g, self.params_)

    def predict_interval(self, g: np.ndarray | float, *, level: float = 0.9) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Point prediction with a two-sided uncertainty interval.

        Parameters
        ----------
        g : array-like of shape (n_steps,) or float
            Steps since the stage began.
        level : float, default=0.9
            Nominal coverage of the interval, in (0, 1).

        Returns
        -------
        value, low, high : ndarray of shape (n_steps,) each
            Point prediction and interval bounds, in metric units; ``low ≤ value ≤ high``.
            With ``interval="none"`` the bounds equal the point prediction.

        Raises
        ------
        NotFittedError
            If :meth:`fit` has not been called.
        InvalidCurveError
            If ``level`` is outside (0, 1).
        """
        self._check_fitted()
        if not 0 < level < 1:
            raise InvalidCurveError(f"level is {level!r}, but must be 0 < level < 1")
        G, Y = self._scale
        u = np.atleast_1d(np.asarray(g, dtype=float)) / G
        value = _scaled_model(self._theta, u)
        if self.interval == "none":
            half_lo = half_hi = np.zeros_like(value)
        elif self.interval == "jacobian":
            half_lo = half_hi = norm.ppf(0.5 + level / 2) * self._jacobian_std(u)
        else:
            half_lo, half_hi = self._bootstrap_halves(u, value, level)
        return value * Y, (value - half_lo) * Y, (value + half_hi) * Y

    def _jacobian_std(self, u: np.ndarray) -> np.ndarray:
        """Delta-method std of a new observation at ``u`` (scaled units), free parameters only."""
        sigma = self.residual_std_ / self._scale[1]
        free = self._free
        jac = _scaled_jac(self._theta, self._u)[:, free]
        cov = sigma**2 * np.linalg.pinv(jac.T @ jac)
        grad = _scaled_jac(self._theta, u)[:, free]
        var = np.einsum("ij,jk,ik->i", grad, cov, grad) + sigma**2
        return np.sqrt(np.maximum(var, 0.0))

    def _bootstrap_halves(self, u: np.ndarray, value: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng(self.random_state)
        fitted = _scaled_model(self._theta, self._u)
        draws = []
        for _ in range(int(self.n_boot)):
            z_star = fitted + rng.choice(self._resid, size=self._resid.size, replace=True)
            try:
                theta = self._solve(self._u, z_star)
            except CurveFitError:
                continue
            draws.append(_scaled_model(theta, u) + rng.choice(self._resid, size=u.size))
        if len(draws) < 2:
            raise CurveFitError("residual bootstrap: fewer than 2 of the refits succeeded")
        draws = np.asarray(draws)
        lo = np.quantile(draws, 0.5 - level / 2, axis=0)
        hi = np.quantile(draws, 0.5 + level / 2, axis=0)
        return np.maximum(value - lo, 0.0), np.maximum(hi - value, 0.0)
