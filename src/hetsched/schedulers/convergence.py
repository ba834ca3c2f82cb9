r"""Optimus's convergence model (Peng et al., EuroSys'18, §3.1): the training curve
:math:`l(k) = 1/(\beta_0 k + \beta_1) + \beta_2` fitted to what a job has observed, and the
remaining work it predicts. The method and its choices are described in
:mod:`hetsched.schedulers.optimus`.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..inputs.adaptive import observed_metrics

__all__ = ["ConvergenceFit", "fit_convergence", "observed_metrics", "remaining_from_fit"]

log = logging.getLogger(__name__)

#: Least remaining work (progress) an estimate may give.
_TINY = 1e-9
#: Lowest asymptote the fit may place, in ranges of the points below their lowest (scaled)
#: value: a curve that has not bent yet would otherwise run its asymptote off to -inf.
_ASYMPTOTE_RANGES = 10.0


# ------------------------------------------------------------------ convergence model
@dataclass(frozen=True)
class ConvergenceFit:
    r"""A fitted convergence curve :math:`s \cdot \text{metric} \approx 1/(\beta_0 x + \beta_1) + \beta_2`.

    Attributes
    ----------
    beta0, beta1, beta2 : float
        The coefficients, in the units of the points (progress, sign-adjusted metric).
    sign : float
        +1 for a metric that decreases (loss-like), -1 for one that increases (accuracy-like).
    first_progress, last_progress : float
        Progress of the first and last point fitted.
    n_points : int
        Points fitted.
    rmse : float
        Root-mean-square residual, in the metric's units.
    """

    beta0: float
    beta1: float
    beta2: float
    sign: float
    first_progress: float
    last_progress: float
    n_points: int
    rmse: float

    def curve(self, progress: Any) -> np.ndarray:
        """The fitted metric (in its own direction) at ``progress``."""
        x = np.asarray(progress, dtype=float)
        return self.sign * (1.0 / (self.beta0 * x + self.beta1) + self.beta2)

    def converged_at(self, delta: float) -> float:
        r"""Progress :math:`x^*` where the curve's gap to its asymptote is ``delta`` times its
        gap at the first point (``inf`` when the curve does not decrease, :math:`\beta_0 = 0`)."""
        if not 0.0 < delta < 1.0:
            raise ValidationError(f"`delta` must be a number in (0, 1); got {delta!r}.")
        if self.beta0 <= 0.0:
            return math.inf
        return ((self.beta0 * self.first_progress + self.beta1) / delta - self.beta1) / self.beta0


def _direction(metric: np.ndarray) -> float:
    """+1 when ``metric`` decreases over the points (least-squares slope <= 0), else -1."""
    idx = np.arange(metric.size, dtype=float)
    slope = float(np.polyfit(idx, metric, 1)[0])
    return 1.0 if slope <= 0.0 else -1.0


def fit_convergence(progress: Any, metric: Any, *, sign: float | None = None) -> ConvergenceFit | None:
    r"""Fit Optimus's convergence curve to a job's (progress, metric) points.

    Parameters
    ----------
    progress : array_like
        Increasing positive progress of each point.
    metric : array_like
        The metric at each point (loss-like or accuracy-like).
    sign : {1, -1}, optional
        The metric's direction (+1: it decreases); detected from the points by default.

    Returns
    -------
    ConvergenceFit or None
        None with fewer than 3 points, a constant metric, or a flat best fit (the metric does
        not move the way ``sign`` says).

    Raises
    ------
    ValidationError
        The arrays differ in length, hold non-finite values, or progress is not positive and
        increasing.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.arange(1.0, 11.0) * 100
    >>> f = fit_convergence(x, 1 / (0.002 * x + 0.5) + 0.1)
    >>> round(f.beta0, 6), round(f.beta1, 4), round(f.beta2, 4), f.sign
    (0.002, 0.5, 0.1, 1.0)
    """
    x = np.asarray(progress, dtype=float).reshape(-1)
    y = np.asarray(metric, dtype=float).reshape(-1)
    if x.shape != y.shape:
        raise ValidationError(f"`progress` and `metric` must have the same length; got {x.size} and {y.size}.")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValidationError("`progress` and `metric` must hold finite numbers; got a NaN or infinity.")
    if x.size and (x[0] <= 0 or np.any(np.diff(x) <= 0)):
        raise ValidationError(f"`progress` must be positive and increasing; got {x.tolist()!r}.")
    if x.size < 3:
        return None
    if sign is None:
        s = _direction(y)
    elif not isinstance(sign, (bool, np.bool_)) and sign in (1, -1):
        s = float(sign)
    else:
        raise ValidationError(f"`sign` must be 1, -1 or None; got {sign!r}.")
    v = s * y
    lo, hi = float(v.min()), float(v.max())
    sc = hi - lo
    if sc <= 0:
        return None
    xs = float(x[-1])
    u = x / xs
    z = (v - lo) / sc

    # profile: with a = beta1 / beta0 fixed, z ~ c / (u + a) + b2 is linear in (c >= 0, b2)
    c, a, b2 = _profile_fit(u, z)
    if c <= 0.0:
        return None     # the best curve is flat: nothing to extrapolate
    start = np.array([1.0 / c, a / c, b2])

    def resid(b: np.ndarray) -> np.ndarray:
        return 1.0 / (b[0] * u + b[1]) + b[2] - z

    def jac(b: np.ndarray) -> np.ndarray:
        d = -1.0 / (b[0] * u + b[1]) ** 2
        return np.column_stack([d * u, d, np.ones_like(u)])

    # scipy.optimize is imported here, not with the module: it costs ~0.14 s to load
    from scipy.optimize import least_squares

    best_x, best_cost = start, 0.5 * float(np.sum(resid(start) ** 2))
    try:   # polish the profile's optimum with bounded least squares (Optimus: NNLS on beta0, beta1)
        res = least_squares(resid, start, jac=jac, bounds=([0.0, 0.0, -_ASYMPTOTE_RANGES], [np.inf, np.inf, np.inf]),
                            x_scale="jac", xtol=1e-12, ftol=1e-12, gtol=1e-12, max_nfev=50)
        if np.isfinite(res.cost) and res.cost <= best_cost:
            best_x, best_cost = res.x, float(res.cost)
    except (ValueError, FloatingPointError) as exc:   # pragma: no cover - defensive
        log.debug("convergence fit polish from %s failed: %s", start.tolist(), exc)
    if not (np.all(np.isfinite(best_x)) and best_x[0] > 0):
        return None
    b0, b1, b2 = (float(t) for t in best_x)
    rmse = math.sqrt(2.0 * best_cost / x.size) * sc
    return ConvergenceFit(beta0=b0 / (sc * xs), beta1=b1 / sc, beta2=lo + sc * b2, sign=s,
                          first_progress=float(x[0]), last_progress=xs, n_points=int(x.size), rmse=rmse)


def _profile_fit(u: np.ndarray, z: np.ndarray) -> tuple[float, float, float]:
    """Least squares ``z ~ c / (u + a) + b2`` with ``c >= 0``, ``b2 >= -_ASYMPTOTE_RANGES``:
    closed form in (c, b2) for each offset ``a`` of a geometric grid, the best refined by a
    bounded scalar search on ``log a``. Returns ``(c, a, b2)``."""

    def solve(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        f = 1.0 / (u[None, :] + a[:, None])
        fm, zm = f.mean(axis=1), z.mean()
        df = f - fm[:, None]
        var = (df * df).mean(axis=1)
        c = np.maximum((df * (z - zm)[None, :]).mean(axis=1) / np.where(var > 0, var, 1.0), 0.0)
        c = np.where(var > 0, c, 0.0)
        b2 = zm - c * fm
        low = b2 < -_ASYMPTOTE_RANGES
        if low.any():   # the asymptote at its bound: c alone
            zz = z + _ASYMPTOTE_RANGES
            c_low = np.maximum((f * zz[None, :]).sum(axis=1) / (f * f).sum(axis=1), 0.0)
            c = np.where(low, c_low, c)
            b2 = np.where(low, -_ASYMPTOTE_RANGES, b2)
        cost = ((c[:, None] * f + b2[:, None] - z[None, :]) ** 2).sum(axis=1)
        return c, b2, cost

    grid = np.logspace(-6, 6, 121)
    _, _, cost = solve(grid)
    i = int(np.argmin(cost))
    lo_, hi_ = math.log(grid[max(i - 1, 0)]), math.log(grid[min(i + 1, grid.size - 1)])
    from scipy.optimize import minimize_scalar

    res = minimize_scalar(lambda t: float(solve(np.array([math.exp(t)]))[2][0]), bounds=(lo_, hi_),
                          method="bounded", options={"xatol": 1e-10})
    a = math.exp(float(res.x)) if res.success and res.fun <= cost[i] else float(grid[i])
    c, b2, _ = solve(np.array([a]))
    return float(c[0]), a, float(b2[0])


def remaining_from_fit(fit: ConvergenceFit, progress: float, delta: float, floor: float = _TINY) -> float:
    r"""Remaining work predicted by ``fit`` at ``progress``:
    :math:`\max(\min(x^*, x_\text{last}/\delta) - x, \text{floor})` (see the module
    docstring; ``floor`` is the least remaining work, e.g. the rest of the current epoch)."""
    total = min(fit.converged_at(delta), fit.last_progress / delta)
    return max(total - float(progress), float(floor), _TINY)
