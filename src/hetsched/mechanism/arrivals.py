r"""Shares for jobs that arrive between two solves of the allocation.

Gavel re-solves at most every 1,920 s; a job that arrives in between has no row in X, gets
no GPUs until the next solve and GPUs may sit idle. :func:`carve_shares` gives such jobs a
row at once, carved from the current X, so the planner can run them from the next round
(the caller may instead re-solve immediately; both feed the same planner).

Math
----
With :math:`n_a` active old jobs (a row with a positive entry), :math:`n_+` new jobs and
:math:`f = n_+ / (n_a + n_+)`, every type :math:`k` some new job can use sets aside
:math:`f\,C_k` GPUs for the new jobs. Old rows on that type keep what fits beside it:

.. math::

    X'_{jk} = \alpha_k X_{jk}, \qquad
    \alpha_k = \min\Bigl(1, \frac{(1 - f)\,C_k}{\sum_j s_j X_{jk}}\Bigr)

(idle capacity is used first, so old jobs lose nothing when X left room). New job
:math:`i` gets :math:`f C_k / n_+` GPUs of each type it can use,
:math:`X'_{ik} = f C_k / (n_+ s_i)`, its row scaled down to sum 1 if needed. Rows stay
:math:`\le 1` and every type stays within capacity.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ValidationError
from ..validation import check_integer_array
from .validation import check_allocation_arrays

__all__ = ["carve_shares"]


def carve_shares(
    X: Any,
    scale_factors: Any,
    capacities: Any,
    new_scale_factors: Any,
    *,
    new_usable: Any = None,
    tolerance: float = 1e-6,
    zero_tol: float = 1e-9,
) -> np.ndarray:
    """Extend ``X`` with rows for newly arrived jobs, carved from the current allocation.

    Parameters
    ----------
    X : array-like, shape (n_jobs, n_gpu_types)
        The current allocation (validated like the planner's input).
    scale_factors : array-like of int, shape (n_jobs,)
        Gang sizes of the current jobs.
    capacities : array-like of int, shape (n_gpu_types,)
        Whole GPUs per type.
    new_scale_factors : array-like of int, shape (n_new,)
        Gang sizes of the arriving jobs.
    new_usable : array-like of bool, shape (n_new, n_gpu_types), optional
        Where each new job can run (e.g. ``T_new > 0``); default everywhere its gang fits.
    tolerance, zero_tol : float
        As for :func:`plan_round_arrays`.

    Returns
    -------
    ndarray, shape (n_jobs + n_new, n_gpu_types)
        Old rows (possibly scaled down per type) followed by the new jobs' rows. Append
        the new ids to the old ones in the same order and keep the history as it is: the
        new jobs start with no share, so they run from the next round unless other
        never-served entries are ahead of them.

    Raises
    ------
    ValidationError
        Invalid ``X`` (see the planner); a new job that fits on no type it may use.

    Examples
    --------
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0]])       # two GPUs, both busy
    >>> carve_shares(X, [1, 1], [1, 1], [1]).round(3).tolist()
    [[0.667, 0.0], [0.0, 0.667], [0.333, 0.333]]
    """
    m = np.shape(X)[1] if np.ndim(X) == 2 else 0
    X, s, cap, _, _ = check_allocation_arrays(
        X, scale_factors, capacities, None, [f"type{k}" for k in range(m)], tolerance=tolerance, zero_tol=zero_tol
    )
    s_new = np.asarray(new_scale_factors, dtype=float)
    if s_new.ndim != 1:
        raise ValidationError(f"`new_scale_factors` must be a 1-D array; got shape {s_new.shape}.")
    s_new = check_integer_array(s_new, "new_scale_factors", lambda i: f"new job {i}")
    n_new = s_new.shape[0]
    if n_new == 0:
        return X.copy()
    if new_usable is None:
        usable = np.ones((n_new, m), dtype=bool)
    else:
        usable = np.asarray(new_usable, dtype=bool)
        if usable.shape != (n_new, m):
            raise ValidationError(f"`new_usable` must have shape (n_new, n_gpu_types) = ({n_new}, {m}); got {usable.shape}.")
    usable = usable & (s_new[:, None] <= cap[None, :]) & (cap[None, :] > 0)
    none = ~usable.any(axis=1)
    if none.any():
        i = int(np.flatnonzero(none)[0])
        raise ValidationError(
            f"new job {i} (gang of {int(s_new[i])} GPUs) fits on no GPU type it may use "
            f"(capacities {cap.tolist()}); {int(none.sum())} such job(s)."
        )
    n_active = int((X > zero_tol).any(axis=1).sum())
    f = n_new / (n_active + n_new)
    wanted = usable.any(axis=0)
    used = (X * s[:, None]).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = np.where(used > 0, np.minimum(1.0, (1.0 - f) * cap / used), 1.0)
    alpha = np.where(wanted, alpha, 1.0)
    X_old = X * alpha[None, :]
    X_new = np.where(usable, (f * cap / n_new)[None, :] / s_new[:, None], 0.0)
    rows = X_new.sum(axis=1)
    X_new = X_new / np.maximum(rows, 1.0)[:, None]
    return np.vstack([X_old, X_new])
