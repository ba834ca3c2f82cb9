r"""Closed-form baselines: isolated (Themis/Gavel) and proportional allocations.

* ``isolated``: :math:`x^{iso}_{jk} = (C_k/n)/s_j` on types with :math:`C_k \ge s_j`, each
  row divided by :math:`\max(1, \sum_k x^{iso}_{jk})` — every job gets a 1/n slice of every
  type. Feasible: :math:`\sum_j s_j x^{iso}_{jk} \le C_k`.
* ``proportional``: every job gets the same fraction of each usable type in proportion to
  its size, scaled so the cluster is not oversubscribed:
  :math:`X_{jk} = (C_k / \sum_l C_l)\,\min(1, \sum_l C_l / \sum_i s_i)` where usable.
  (Gavel's proportional *throughput* :math:`p_j` uses the unscaled fractions and is a
  normalizer, not an allocation.)

The objective of both is the total throughput ``(T * X).sum()``.

Examples
--------
>>> import hetsched as hs
>>> jobs = hs.JobSet([[2.0, 1.0]] * 4, gpu_types=["v100", "k80"])
>>> hs.solve("isolated", jobs, hs.Cluster({"v100": 2, "k80": 2})).X[0].tolist()
[0.5, 0.5]
"""

from __future__ import annotations

import numpy as np

from ..inputs.cluster import Cluster
from ..inputs.jobs import JobSet
from ..solvers.context import SolveContext
from .base import Policy, PolicyOutcome, register_policy
from .common import isolated_allocation, usable_mask

__all__ = ["Isolated", "Proportional"]


class _ClosedForm(Policy):
    def allocation(self, jobs: JobSet, cluster: Cluster) -> np.ndarray:
        raise NotImplementedError

    def objective_of(self, X: np.ndarray, jobs: JobSet, cluster: Cluster) -> float:
        """Total throughput of ``X``, counting multiplicities."""
        return float((jobs.multiplicity[:, None] * jobs.throughputs * X).sum())

    def solve(self, jobs: JobSet, cluster: Cluster, ctx: SolveContext) -> PolicyOutcome:
        X = self.allocation(jobs, cluster)
        return PolicyOutcome(X=X, objective=self.objective_of(X, jobs, cluster), status="optimal",
                             message=f"{self.name}: closed form")


@register_policy
class Isolated(_ClosedForm):
    """Each job gets 1/n of every GPU type (divided by its scale factor)."""

    name = "isolated"

    def allocation(self, jobs: JobSet, cluster: Cluster) -> np.ndarray:
        """:math:`x^{iso}`, zeroed where the job has no throughput."""
        cap = cluster.capacities(jobs.gpu_types)
        return isolated_allocation(jobs, cap) * (jobs.throughputs > 0)


@register_policy
class Proportional(_ClosedForm):
    """Each job gets the same capacity-proportional fraction of every usable type."""

    name = "proportional"

    def allocation(self, jobs: JobSet, cluster: Cluster) -> np.ndarray:
        """Proportional split scaled to fit the cluster."""
        cap = cluster.capacities(jobs.gpu_types)
        total = cap.sum()
        demand = float((jobs.multiplicity * jobs.scale_factors).sum())
        frac = cap / total * min(1.0, total / demand)
        mask = usable_mask(jobs.throughputs, jobs.scale_factors, cap)
        return np.where(mask, frac[None, :], 0.0)
