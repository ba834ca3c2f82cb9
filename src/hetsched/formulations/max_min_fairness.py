r"""Max-min fairness over normalized throughput (Gavel's LAS policy, "perf" variant).

Math
----
With :math:`\tilde T = T` (heterogeneity-aware) or :math:`\tilde T = \mathbb 1[T>0]`
(agnostic), proportional throughput :math:`p_j = \sum_k \tilde T_{jk} C_k / \sum_k C_k`
and normalized share

.. math::

    \mathrm{share}_j(X) = \frac{s_j \sum_k \tilde T_{jk} X_{jk}}{w_j\, p_j},

stage 1 solves

.. math::

    t^\star = \max_{X, t}\ t \quad \text{s.t.}\quad \mathrm{share}_j(X) \ge t\ \ \forall j,
    \qquad \text{base constraints.}

The optimum is often *pinned* by one saturated job, and then the rest of X is arbitrary
(a solver may leave most of the cluster idle). Stage 2 (on by default) therefore maximizes
:math:`\sum_j \mu_j\,\mathrm{share}_j(X)` subject to :math:`\mathrm{share}_j(X) \ge
t^\star (1 - 10^{-9})`: same minimum, no idle capacity that some job could use.

In numpy, for an allocation ``X``::

    share = s * (Tt * X).sum(1) / (w * p);  objective = share.min()

Examples
--------
>>> import hetsched as hs
>>> jobs = hs.JobSet([[2.0, 1.0], [1.0, 1.0]], gpu_types=["fast", "slow"])
>>> res = hs.solve("max_min_fairness", jobs, hs.Cluster({"fast": 1, "slow": 1}))
>>> round(res.objective, 6)
1.0
"""

from __future__ import annotations

import numpy as np

from ..inputs.cluster import Cluster
from ..inputs.jobs import JobSet
from ..solvers.context import SolveContext
from ..solvers.program import LinearProgram
from .base import Policy, PolicyOutcome, register_policy
from .common import level_program, proportional_throughput, solve_levels, usable_mask
from .spaces.space import SpaceOptions

__all__ = ["MaxMinFairness", "normalized_share_coefficients"]


def normalized_share_coefficients(jobs: JobSet, capacities: np.ndarray, heterogeneity_aware: bool) -> np.ndarray:
    """``a[j, k]`` with ``share_j = sum_k a[j, k] X[j, k]`` (0 where job j cannot use type k)."""
    mask = usable_mask(jobs.throughputs, jobs.scale_factors, capacities)
    Tt = jobs.throughputs if heterogeneity_aware else (jobs.throughputs > 0).astype(float)
    p = proportional_throughput(Tt, capacities)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(p > 0, jobs.scale_factors / (jobs.weights * p), 0.0)
    return np.where(mask, Tt * scale[:, None], 0.0)


@register_policy
class MaxMinFairness(SpaceOptions, Policy):
    """Maximize the minimum normalized share (Gavel's ``max_min_fairness_perf``).

    Parameters
    ----------
    heterogeneity_aware : bool, default True
        When False, every usable type counts as throughput 1 (Gavel's agnostic LAS); the
        result still reports the real effective throughputs of the X chosen.
    second_stage : bool, default True
        After finding the max-min level, maximize total normalized share at that level
        so no capacity is left idle that a job could use.
    packing, placement_sensitivity : optional
        Space sharing (:class:`~hetsched.formulations.spaces.packing.Packing`) and consolidated /
        unconsolidated rows (:class:`~hetsched.formulations.spaces.placement_sensitivity.PlacementSensitivity`);
        see :mod:`hetsched.formulations.spaces.space`. A pair member's share counts its pair
        throughput (agnostic variant: its relative speed).
    """

    name = "max_min_fairness"
    heterogeneity_aware: bool = True
    second_stage: bool = True

    def coefficients(self, jobs: JobSet, cluster: Cluster) -> np.ndarray:
        """Normalized-share coefficients ``a`` (see module docstring)."""
        return normalized_share_coefficients(jobs, cluster.capacities(jobs.gpu_types), self.heterogeneity_aware)

    def formulate(self, jobs: JobSet, cluster: Cluster, *, floor: float | None = None) -> LinearProgram:
        """Stage 1 (``floor`` None): max t. Stage 2: max total share with every share >= floor."""
        a = self.coefficients(jobs, cluster)
        return level_program(jobs, cluster.capacities(jobs.gpu_types), a, floor=floor, name=self.name, cluster=cluster,
                             space=self.allocation_space(jobs, cluster))

    def objective_of(self, X: np.ndarray, jobs: JobSet, cluster: Cluster) -> float:
        """Minimum normalized share of ``X``."""
        return _min_share(self.coefficients(jobs, cluster), X)

    def solve(self, jobs: JobSet, cluster: Cluster, ctx: SolveContext) -> PolicyOutcome:
        by_class = self.solve_by_class(jobs, cluster, ctx)  # packing / placement sensitivity: exact classes
        if by_class is not None:
            return by_class
        a = self.coefficients(jobs, cluster)
        with ctx.building():
            space = self.allocation_space(jobs, cluster)
        # the objective from the same ``a`` (its build is 0.3 s of a 10^6-job solve, twice more)
        outcome, _ = solve_levels(self, jobs, cluster, ctx, a, second_stage=self.second_stage, name=self.name,
                                  space=space, objective_of=lambda X: _min_share(a, X))
        return outcome


def _min_share(a: np.ndarray, X: np.ndarray) -> float:
    """Minimum normalized share ``min_j sum_k a[j, k] X[j, k]`` (NaN without jobs)."""
    return float((a * X).sum(axis=1).min()) if a.shape[0] else float("nan")
