r"""Gittins index of a job from a distribution of job sizes (service), for Tiresias' 2D-Gittins.

For a job that has attained service :math:`a` (Tiresias: GPUs x seconds) and a size
distribution :math:`S` (estimated from past jobs), the Gittins index with quantum
:math:`\Delta` is

.. math::

    G(a, \Delta) = \frac{P(S - a \le \Delta \mid S > a)}{E[\min(S - a, \Delta) \mid S > a]}

(the chance to finish within the next :math:`\Delta` of service, per unit of service
spent), and the Gittins index is :math:`G(a) = \sup_{\Delta > 0} G(a, \Delta)`
(Gittins, 1989; Aalto, Ayesta and Righter, 2009; Tiresias, NSDI'19 §3.2). A higher index
means a higher priority. For a discrete distribution the numerator is a step function and
the denominator increases in :math:`\Delta`, so the supremum is attained at a support
point: :math:`\Delta \in \{s_i - a : s_i > a\}`. A job that has outlived every observed
size gets index 0 (Tiresias' choice: lowest priority).

With prefix sums of the probabilities :math:`P_i` and of :math:`p_i s_i` (:math:`M_i`) over
the sorted support, the index of every job is a vectorized maximum over support points:
numerator :math:`P_k - P_{i_0 - 1}`, denominator
:math:`(M_k - M_{i_0-1}) - a (P_k - P_{i_0-1}) + (s_k - a)(1 - P_k)` for :math:`k \ge i_0`,
the first support point above :math:`a` (the conditional normalization cancels).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ValidationError

__all__ = ["ServiceDistribution", "gittins_index"]


@dataclass(frozen=True, eq=False)
class ServiceDistribution:
    """A discrete distribution of job sizes (service, e.g. GPU-seconds).

    Parameters
    ----------
    values : array-like of float
        Support points (job sizes), positive and finite; repeated values are merged.
    weights : array-like of float, optional
        Non-negative weights (probabilities up to a factor), default equal: the empirical
        distribution of past jobs.

    Raises
    ------
    ValidationError
        Empty ``values``; a non-positive or non-finite size; bad weights.

    Examples
    --------
    >>> d = ServiceDistribution([100.0, 300.0, 100.0])
    >>> d.values.tolist(), d.probabilities.round(4).tolist()
    ([100.0, 300.0], [0.6667, 0.3333])
    """

    values: np.ndarray
    probabilities: np.ndarray

    def __init__(self, values: Any, weights: Any = None) -> None:
        try:
            v = np.asarray(values, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            raise ValidationError(f"`values` must be numeric job sizes; got {values!r:.80}.") from None
        if v.size == 0:
            raise ValidationError("`values` must hold at least one past job size; got an empty distribution.")
        bad = ~np.isfinite(v) | (v <= 0)
        if bad.any():
            raise ValidationError(
                f"`values` must be positive, finite job sizes; got {v[bad][0]!r} ({int(bad.sum())} such value(s))."
            )
        if weights is None:
            w = np.ones_like(v)
        else:
            try:
                w = np.asarray(weights, dtype=float).reshape(-1)
            except (TypeError, ValueError):
                raise ValidationError(f"`weights` must be numeric; got {weights!r:.80}.") from None
            if w.shape != v.shape:
                raise ValidationError(f"`weights` must have the shape of `values` {v.shape}; got {w.shape}.")
            if (~np.isfinite(w) | (w < 0)).any() or w.sum() <= 0:
                raise ValidationError("`weights` must be finite, non-negative and not all zero.")
        uniq, inv = np.unique(v, return_inverse=True)
        p = np.bincount(inv, weights=w, minlength=uniq.size)
        keep = p > 0
        object.__setattr__(self, "values", uniq[keep])
        object.__setattr__(self, "probabilities", p[keep] / p.sum())
        self.values.setflags(write=False)
        self.probabilities.setflags(write=False)

    @classmethod
    def from_samples(cls, samples: Any) -> ServiceDistribution:
        """The empirical distribution of past job sizes."""
        return cls(samples)

    def __repr__(self) -> str:
        return f"ServiceDistribution({self.values.size} support points, mean={float(self.values @ self.probabilities):.6g})"


def gittins_index(attained: Any, distribution: ServiceDistribution, quantum: float | None = None,
                  *, chunk: int = 4096) -> np.ndarray:
    """Gittins index of jobs with attained service ``attained`` (higher = run first).

    Parameters
    ----------
    attained : array-like of float
        Service each job has received (same unit as the distribution), non-negative.
    distribution : ServiceDistribution
        Distribution of total job sizes.
    quantum : float, optional
        Fixed :math:`\\Delta` (the discretized variant of Tiresias' simulator). Default:
        the supremum over :math:`\\Delta` (the Gittins index proper).
    chunk : int
        Jobs per vectorized block (memory ``chunk x support`` floats).

    Returns
    -------
    ndarray
        Index per job; 0 for a job at or beyond the largest size.

    Examples
    --------
    Sizes 1 or 10 with probability 1/2 each. A fresh job: finishing within 1 unit has
    probability 1/2 at expected cost 1, so :math:`G = 1/2`; after 1 unit only size 10 is
    left: :math:`G = 1/9`.

    >>> d = ServiceDistribution([1.0, 10.0])
    >>> gittins_index([0.0, 1.0, 10.0], d).round(6).tolist()
    [0.5, 0.111111, 0.0]
    """
    if not isinstance(distribution, ServiceDistribution):
        raise ValidationError(
            f"`distribution` must be a ServiceDistribution; got {type(distribution).__name__}."
        )
    a = np.asarray(attained, dtype=float).reshape(-1)
    if (~np.isfinite(a) | (a < 0)).any():
        raise ValidationError("`attained` must be finite and non-negative.")
    if quantum is not None:
        q = float(quantum)
        if not np.isfinite(q) or q <= 0:
            raise ValidationError(f"`quantum` must be a positive number; got {quantum!r}.")
    s, p = distribution.values, distribution.probabilities
    P = np.cumsum(p)
    M = np.cumsum(p * s)
    P0 = np.concatenate([[0.0], P])
    M0 = np.concatenate([[0.0], M])
    out = np.zeros(a.size)
    uniq, inv = np.unique(a, return_inverse=True)
    res = np.zeros(uniq.size)
    start = np.searchsorted(s, uniq, side="right")          # first support point > a
    alive = start < s.size
    for lo in range(0, uniq.size, chunk):
        sl = slice(lo, min(lo + chunk, uniq.size))
        au, st, al = uniq[sl], start[sl], alive[sl]
        if quantum is None:
            k = np.arange(s.size)[None, :]
            valid = al[:, None] & (k >= st[:, None])
            base_P = P0[st][:, None]
            base_M = M0[st][:, None]
            num = P[None, :] - base_P
            den = (M[None, :] - base_M) - au[:, None] * num + (s[None, :] - au[:, None]) * (1.0 - P[None, :])
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(valid & (den > 0), num / den, 0.0)
            res[sl] = ratio.max(axis=1) if s.size else 0.0
        else:
            # finish within the quantum: sizes in (a, a + q]
            end = np.searchsorted(s, au + q, side="right")
            num = P0[end] - P0[st]
            den = (M0[end] - M0[st]) - au * num + q * (1.0 - P0[end])
            with np.errstate(divide="ignore", invalid="ignore"):
                res[sl] = np.where(al & (den > 0), num / den, 0.0)
    out[:] = res[inv]
    return out
