r"""Minimize makespan (Gavel's ``min_total_duration``) with one LP.

Math
----
.. math::

    \min_X \max_j \frac{R_j}{\sum_k T_{jk} X_{jk}}
    \;=\; 1 / \max_{X,u}\, u \quad\text{s.t.}\quad
    \sum_k \frac{T_{jk}}{R_j\,\sigma} X_{jk} \ge v,\; u = \sigma v,\ \text{base constraints},

with :math:`\sigma = \min_j \max_k T_{jk} / R_j` (an upper bound on u, so
:math:`v \in (0, 1]` and the LP is well scaled: unscaled, u is about 1e-6 and solvers stop
early). Gavel bisects over about six LPs and stops within 5 %; one LP is exact.

In numpy: ``makespan = (R / (T * X).sum(1)).max()``.

Examples
--------
>>> import hetsched as hs
>>> jobs = hs.JobSet([[1.0], [1.0]], gpu_types=["v100"], steps_remaining=[100.0, 300.0])
>>> round(hs.solve("min_makespan", jobs, hs.Cluster({"v100": 1})).objective, 6)
400.0
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cluster import Cluster
from ..jobs import JobSet
from ..program import LinearProgram
from .base import Policy, register_policy
from .builder import ProgramBuilder
from .common import add_base_rows, usable_mask

__all__ = ["MinMakespan"]


@register_policy
@dataclass(frozen=True, kw_only=True)
class MinMakespan(Policy):
    """Minimize the time until the last job finishes at the allocation's rates.

    Needs ``steps_remaining``. The objective is the makespan in seconds (when throughputs
    are steps/s).
    """

    name = "min_makespan"
    requires = ("steps_remaining",)
    reads = ("steps_remaining",)

    def formulate(self, jobs: JobSet, cluster: Cluster) -> LinearProgram:
        cap = cluster.capacities(jobs.gpu_types)
        mask = usable_mask(jobs.throughputs, jobs.scale_factors, cap)
        T = np.where(mask, jobs.throughputs, 0.0)
        R = jobs.steps_remaining
        sigma = float((T.max(axis=1) / R).min())
        b = ProgramBuilder()
        X = b.add_allocation(mask)
        v = b.add_vars(1, lb=0.0, ub=np.inf, cost=1.0)
        add_base_rows(b, X, jobs, cap)
        n = jobs.n_jobs
        coef = T[X.job, X.gpu] / (R[X.job] * sigma)
        b.add_rows(
            rows=np.concatenate([X.job, np.arange(n)]),
            cols=np.concatenate([X.cols, np.full(n, v)]),
            vals=np.concatenate([coef, -np.ones(n)]),
            lb=0.0, ub=np.inf, n_rows=n,
        )
        return b.build(sense="max", x_index=X.x_index, name=self.name, meta={"v": v, "sigma": sigma})

    def objective_of(self, X: np.ndarray, jobs: JobSet, cluster: Cluster) -> float:
        """Makespan ``max_j R_j / thr_j(X)`` (inf when some job gets no throughput)."""
        thr = (jobs.throughputs * X).sum(axis=1)
        with np.errstate(divide="ignore"):
            return float(np.max(jobs.steps_remaining / thr))
