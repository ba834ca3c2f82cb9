r"""Minimize makespan (Gavel's ``min_total_duration``) with one LP.

Math
----
.. math::

    \min_X \max_j \frac{R_j}{\sum_k T_{jk} X_{jk}}
    \;=\; 1 / \max_{X,u}\, u \quad\text{s.t.}\quad
    \sum_k \frac{T_{jk}}{R_j\,\sigma} X_{jk} \ge v,\; u = \sigma v,\ \text{base constraints},

with :math:`\sigma = \min_j \max_k T_{jk} / R_j` (an upper bound on u, so
:math:`v \in (0, 1]` and the LP is well scaled: unscaled, u is about 1e-6 and solvers stop
early). Gavel bisects over about six LPs and stops within 5 %; one LP is exact. A second
stage (default) keeps the makespan and maximizes total normalized progress, as in
:mod:`.max_min_fairness`, so GPUs are not left idle.

In numpy: ``makespan = (R / (T * X).sum(1)).max()``.

Examples
--------
>>> import hetsched as hs
>>> jobs = hs.JobSet([[1.0], [1.0]], gpu_types=["v100"], steps_remaining=[100.0, 300.0])
>>> res = hs.solve("min_makespan", jobs, hs.Cluster({"v100": 1}))
>>> round(res.objective, 6), res.X.round(6).tolist()  # time split 1:3, so both end at 400 s
(400.0, [[0.25], [0.75]])
"""

from __future__ import annotations

import numpy as np

from ..errors import ValidationError, show
from ..inputs.cluster import Cluster
from ..inputs.jobs import JobSet
from ..solvers.context import SolveContext
from ..solvers.program import LinearProgram
from .base import Policy, PolicyOutcome, register_policy
from .common import level_program, solve_levels, usable_mask
from .spaces.space import SpaceOptions

__all__ = ["RATE_SPREAD_MAX", "MinMakespan"]

#: Largest ratio between the fastest and the slowest job's best rate ``max_k T[j, k] / R_j``
#: accepted. The LP's coefficients span this ratio; measured with the default solver (HiGHS)
#: on random 2-4 job instances (tests/test_policy_params.py repeats a case), it solves up to
#: 1e14 and fails ("model status 'Unknown'") from about 3e14; the limit keeps a margin of 30.
RATE_SPREAD_MAX = 1e13


@register_policy
class MinMakespan(SpaceOptions, Policy):
    r"""Minimize the time until the last job finishes at the allocation's rates.

    Needs ``steps_remaining``. The objective is the makespan in seconds (when throughputs
    are steps/s).

    Parameters
    ----------
    second_stage : bool, default True
        The optimum is pinned by the slowest job and the rest of X is arbitrary (a vertex
        may use a handful of GPUs). Stage 2 keeps the makespan and maximizes total
        normalized progress :math:`\sum_j \mu_j\, thr_j(X) / (R_j \sigma)`.
    packing, placement_sensitivity : optional
        Space sharing and consolidated / unconsolidated rows; see
        :mod:`hetsched.formulations.spaces.space`.
    """

    name = "min_makespan"
    requires = ("steps_remaining",)
    reads = ("steps_remaining",)
    second_stage: bool = True

    def coefficients(self, jobs: JobSet, cluster: Cluster) -> tuple[np.ndarray, float]:
        """``a = T / (R sigma)`` on usable pairs, and ``sigma``."""
        cap = cluster.capacities(jobs.gpu_types)
        mask = usable_mask(jobs.throughputs, jobs.scale_factors, cap)
        T = np.where(mask, jobs.throughputs, 0.0)
        R = jobs.steps_remaining
        rate = T.max(axis=1) / R
        sigma = float(rate.min())
        _check_rate_spread(rate, jobs)
        return T / (R[:, None] * sigma), sigma

    def formulate(self, jobs: JobSet, cluster: Cluster, *, floor: float | None = None) -> LinearProgram:
        a, sigma = self.coefficients(jobs, cluster)
        return level_program(jobs, cluster.capacities(jobs.gpu_types), a, floor=floor, name=self.name,
                             meta={"sigma": sigma}, cluster=cluster, space=self.allocation_space(jobs, cluster))

    def objective_of(self, X: np.ndarray, jobs: JobSet, cluster: Cluster) -> float:
        """Makespan ``max_j R_j / thr_j(X)`` (inf when some job gets no throughput)."""
        thr = (jobs.throughputs * X).sum(axis=1)
        with np.errstate(divide="ignore"):
            return float(np.max(jobs.steps_remaining / thr))

    def solve(self, jobs: JobSet, cluster: Cluster, ctx: SolveContext) -> PolicyOutcome:
        by_class = self.solve_by_class(jobs, cluster, ctx)  # packing / placement sensitivity: exact classes
        if by_class is not None:
            return by_class
        a, _ = self.coefficients(jobs, cluster)
        with ctx.building():
            space = self.allocation_space(jobs, cluster)
        outcome, _ = solve_levels(self, jobs, cluster, ctx, a, second_stage=self.second_stage, name=self.name,
                                  space=space)
        return outcome


def _check_rate_spread(rate: np.ndarray, jobs: JobSet) -> None:
    """Refuse jobs whose best rates (1 / fastest finish time) differ by more than :data:`RATE_SPREAD_MAX`."""
    if rate.size == 0:
        return
    hi, lo = int(np.argmax(rate)), int(np.argmin(rate))
    if rate[lo] > 0 and rate[hi] / rate[lo] > RATE_SPREAD_MAX:
        raise ValidationError(
            f"min_makespan: job {show(jobs.ids[hi])} would finish {rate[hi] / rate[lo]:.3g} times sooner than job "
            f"{show(jobs.ids[lo])} on their fastest GPU types (`throughputs` / `steps_remaining`: "
            f"{rate[hi]:.3g} vs {rate[lo]:.3g} per second); the LP is solved reliably only up to a ratio of "
            f"{RATE_SPREAD_MAX:g}. Drop the nearly finished job or rescale `steps_remaining`."
        )
