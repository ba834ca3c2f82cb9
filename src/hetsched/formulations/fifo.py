"""Heterogeneity-aware FIFO: in arrival order, each job takes its fastest type that still
has room for its whole gang. Not an LP; same signature.

With ``backfill=True`` (default) a job that fits nowhere is passed over and later, smaller
jobs are still admitted. With ``backfill=False`` admission stops at the first job that fits
nowhere: Gavel's ``fifo_perf`` (``scheduler/policies/fifo.py``, ``get_allocation``, which
breaks out of its job loop there), and Blox's FIFO.

In numpy terms: ``X[j, k] = 1`` for the chosen type, 0 elsewhere; jobs not admitted get a
zero row. The objective is the total throughput ``(T * X).sum()``.

Examples
--------
>>> import hetsched as hs
>>> jobs = hs.JobSet([[4.0, 1.0], [3.0, 2.0]], gpu_types=["v100", "k80"], arrival_times=[1.0, 0.0])
>>> hs.solve("fifo", jobs, hs.Cluster({"v100": 1, "k80": 1})).X.tolist()
[[0.0, 1.0], [1.0, 0.0]]
"""

from __future__ import annotations

import numpy as np

from ..inputs.cluster import Cluster
from ..inputs.jobs import JobSet
from ..solvers.context import SolveContext
from .base import Policy, PolicyOutcome, register_policy

__all__ = ["Fifo"]


@register_policy
class Fifo(Policy):
    """First come, first served on the fastest type with room (ties: earlier column).

    Parameters
    ----------
    backfill : bool, default True
        Admit later jobs past one that fits nowhere (False: stop there, as Gavel's
        ``fifo_perf``).
    """

    name = "fifo"
    reads = ("arrival_times",)
    aggregatable = False
    backfill: bool = True

    def objective_of(self, X: np.ndarray, jobs: JobSet, cluster: Cluster) -> float:
        """Total throughput of ``X``."""
        return float((jobs.multiplicity[:, None] * jobs.throughputs * X).sum())

    def solve(self, jobs: JobSet, cluster: Cluster, ctx: SolveContext) -> PolicyOutcome:
        free = cluster.capacities(jobs.gpu_types)
        T, s = jobs.throughputs, jobs.scale_factors
        order = np.argsort(jobs.arrival_times, kind="stable") if jobs.has("arrival_times") else np.arange(jobs.n_jobs)
        X = np.zeros((jobs.n_jobs, jobs.n_types))
        smallest = int(s.min())
        placed = 0
        for j in order:
            if free.max() < smallest:
                break
            room = (T[j] > 0) & (free >= s[j])
            if not room.any():
                if not self.backfill:
                    break
                continue
            k = int(np.argmax(np.where(room, T[j], -1.0)))
            X[j, k] = 1.0
            free[k] -= s[j]
            placed += 1
        return PolicyOutcome(X=X, objective=self.objective_of(X, jobs, cluster), status="optimal",
                             message=f"fifo placed {placed} of {jobs.n_jobs} jobs")
