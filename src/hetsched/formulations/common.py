r"""Pieces every allocation program shares.

Base constraints (Gavel, OSDI'20, §3.1), with :math:`\mu_j` the multiplicity of row j
(1 unless identical jobs were merged into one class):

.. math::

    X_{jk} \ge 0, \qquad \sum_k X_{jk} \le 1, \qquad \sum_j \mu_j s_j X_{jk} \le C_k.

Reference throughputs:

* proportional :math:`p_j = \sum_k T_{jk} C_k / \sum_k C_k`;
* isolated :math:`x^{iso}_{jk} = (C_k / n) / s_j`, each row divided by
  :math:`\max(1, \sum_k x^{iso}_{jk})`, and :math:`iso_j = \sum_k T_{jk} x^{iso}_{jk}`
  (n counts every job, multiplicities included).
"""

from __future__ import annotations

import numpy as np

from ..jobs import JobSet
from .builder import AllocationVars, ProgramBuilder

__all__ = [
    "usable_mask",
    "add_base_rows",
    "proportional_throughput",
    "isolated_allocation",
    "isolated_throughput",
    "throughput_rows",
]


def usable_mask(T: np.ndarray, scale_factors: np.ndarray, capacities: np.ndarray) -> np.ndarray:
    """(n, m) bool: job j can run on type k (T > 0 and at least s_j GPUs of type k)."""
    return (T > 0) & (capacities[None, :] >= scale_factors[:, None])


def add_base_rows(b: ProgramBuilder, X: AllocationVars, jobs: JobSet, capacities: np.ndarray) -> tuple[int, int]:
    """Add ``sum_k X[j,k] <= 1`` (one row per job) and the capacity rows (one per type).

    Returns the first row index of the job rows and of the capacity rows.
    """
    n, m = X.mask.shape
    cols = X.cols
    r_jobs = b.add_rows(rows=X.job, cols=cols, vals=1.0, lb=-np.inf, ub=1.0, n_rows=n)
    load = (jobs.multiplicity * jobs.scale_factors).astype(float)[X.job]
    r_cap = b.add_rows(rows=X.gpu, cols=cols, vals=load, lb=-np.inf, ub=capacities, n_rows=m)
    return r_jobs, r_cap


def throughput_rows(X: AllocationVars, coeff: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """COO triplets (rows=job, cols=var, vals=coeff[j,k]) of ``sum_k coeff[j,k] X[j,k]``."""
    return X.job, X.cols, coeff[X.job, X.gpu]


def proportional_throughput(T: np.ndarray, capacities: np.ndarray) -> np.ndarray:
    """:math:`p_j = \\sum_k T_{jk} C_k / \\sum_k C_k` (0 for an empty cluster)."""
    total = capacities.sum()
    if total <= 0:
        return np.zeros(T.shape[0])
    return T @ capacities / total


def isolated_allocation(jobs: JobSet, capacities: np.ndarray) -> np.ndarray:
    """Themis/Gavel isolated allocation :math:`x^{iso}` (feasible: capacity and rows hold)."""
    n_total = max(jobs.n_total, 1)
    x = np.broadcast_to(capacities / n_total, (jobs.n_jobs, capacities.shape[0])) / jobs.scale_factors[:, None]
    x = x * (capacities[None, :] >= jobs.scale_factors[:, None])
    rows = x.sum(axis=1)
    return x / np.maximum(1.0, rows)[:, None]


def isolated_throughput(jobs: JobSet, capacities: np.ndarray, T: np.ndarray | None = None) -> np.ndarray:
    """:math:`iso_j = \\sum_k T_{jk} x^{iso}_{jk}`."""
    T = jobs.throughputs if T is None else T
    return (T * isolated_allocation(jobs, capacities)).sum(axis=1)
