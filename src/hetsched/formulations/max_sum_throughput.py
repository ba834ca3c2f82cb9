r"""Maximize total throughput (Gavel's ``max_sum_throughput_perf``), optionally per dollar
and under SLOs.

Math
----
With :math:`c_{jk} = T_{jk}` (or :math:`T_{jk} / \mathrm{price}_k` when
``normalize_by_cost``):

.. math::

    \max_X \sum_j \mu_j \sum_k c_{jk} X_{jk}
    \quad\text{s.t. base constraints and, when SLOs are given,}\quad
    \sum_k T_{jk} X_{jk} \ge R_j / \mathrm{slo}_j .

Each SLO row is divided by the job's best throughput :math:`\max_k T_{jk}` (coefficients at
most 1, right-hand side the share of time the SLO needs), which keeps it well scaled however
large :math:`T\,\mathrm{slo}/R` is.

When the SLOs cannot all be met the status is "infeasible" and ``extra["infeasible_jobs"]``
names jobs that cannot meet theirs: jobs that cannot even alone
(:math:`R_j/\mathrm{slo}_j > \max_k T_{jk}`), otherwise the jobs left short by an elastic
LP that minimizes the total relative shortfall :math:`\sum_j \mu_j v_j`,
:math:`\sum_k (T_{jk}\,\mathrm{slo}_j/R_j) X_{jk} + v_j \ge 1`. SLOs are never dropped.

In numpy: ``objective = (mu[:, None] * c * X).sum()``.

Examples
--------
>>> import hetsched as hs
>>> jobs = hs.JobSet([[4.0, 1.0], [2.0, 1.0]], gpu_types=["v100", "k80"])
>>> round(hs.solve("max_sum_throughput", jobs, hs.Cluster({"v100": 1, "k80": 1})).objective, 6)
5.0
"""

from __future__ import annotations

import numpy as np

from ..errors import MissingFieldError
from ..inputs.cluster import Cluster
from ..inputs.jobs import JobSet
from ..solvers.context import SolveContext
from ..solvers.program import LinearProgram
from .base import Policy, PolicyOutcome, register_policy
from .builder import ProgramBuilder
from .common import add_base_rows, throughput_rows, usable_mask
from .spaces.space import SpaceOptions

__all__ = ["MaxSumThroughput"]

#: Relative SLO shortfall above which the elastic LP names a job.
SHORTFALL_TOL = 1e-7


@register_policy
class MaxSumThroughput(SpaceOptions, Policy):
    """Maximize the sum of job throughputs.

    Parameters
    ----------
    normalize_by_cost : bool, default False
        Maximize throughput per dollar, ``T[j,k] / price_k`` (Gavel's cost policy); needs
        ``Cluster(prices=...)``.
    use_slos : bool, default True
        Add ``thr_j >= steps_remaining_j / slos_j`` when the JobSet carries ``slos``
        (which then also needs ``steps_remaining``).
    packing, placement_sensitivity : optional
        Space sharing and consolidated / unconsolidated rows; see
        :mod:`hetsched.formulations.spaces.space` (a pair adds both members' throughputs).
    """

    name = "max_sum_throughput"
    reads = ("steps_remaining", "slos")
    normalize_by_cost: bool = False
    use_slos: bool = True

    def _coefficients(self, jobs: JobSet, cluster: Cluster) -> np.ndarray:
        cap = cluster.capacities(jobs.gpu_types)
        mask = usable_mask(jobs.throughputs, jobs.scale_factors, cap)
        c = jobs.throughputs
        if self.normalize_by_cost:
            price = cluster.price_vector(jobs.gpu_types, needed_by="max_sum_throughput(normalize_by_cost=True)")
            c = c / price[None, :]
        return np.where(mask, c, 0.0)

    def aggregation_fields(self, jobs: JobSet) -> tuple[str, ...]:
        """``steps_remaining`` and ``slos`` matter only when SLO rows are added."""
        return self.reads if (self.use_slos and jobs.has("slos")) else ()

    def _slo_targets(self, jobs: JobSet) -> np.ndarray | None:
        if not (self.use_slos and jobs.has("slos")):
            return None
        if not jobs.has("steps_remaining"):
            raise MissingFieldError(
                "policy 'max_sum_throughput' with `slos` needs job field `steps_remaining`; "
                "pass JobSet(..., steps_remaining=...)."
            )
        return jobs.steps_remaining / jobs.slos

    def formulate(self, jobs: JobSet, cluster: Cluster, *, elastic: bool = False) -> LinearProgram:
        """The LP; ``elastic=True`` builds the SLO-shortfall diagnosis LP instead."""
        cap = cluster.capacities(jobs.gpu_types)
        c = self._coefficients(jobs, cluster)
        mask = usable_mask(jobs.throughputs, jobs.scale_factors, cap)
        b = ProgramBuilder()
        space = self.allocation_space(jobs, cluster)
        if space is None:
            cost = 0.0 if elastic else (jobs.multiplicity[:, None] * c)[mask]
            X = b.add_allocation(mask, cost=cost)
        else:
            X = space.add_to(b, cost=0.0 if elastic else space.values(jobs.multiplicity[:, None] * c))
        finish = (lambda lp: lp) if space is None else X.program
        add_base_rows(b, X, jobs, cap, cluster=cluster)
        target = self._slo_targets(jobs)
        if target is not None:
            n = jobs.n_jobs
            if not elastic:
                # thr_j >= target_j divided by the job's best throughput: coefficients about 1 and a
                # right-hand side (the share of time needed) that may be tiny; a share above every
                # coefficient times 2 (time sums to at most 1) is capped there: still infeasible,
                # and HiGHS fails on right-hand sides near 1e20.
                best = jobs.throughputs.max(axis=1)
                best = np.where(best > 0, best, 1.0)
                s_rows, s_cols, vals = throughput_rows(X, jobs.throughputs / best[:, None])
                row_max = np.ones(n)
                np.maximum.at(row_max, s_rows, vals)
                need = np.minimum(target / best, 2.0 * row_max)
                b.add_rows(rows=s_rows, cols=s_cols, vals=vals, lb=need, ub=np.inf, n_rows=n)
                return finish(b.build(sense="max", x_index=X.x_index, name=self.name, meta=_separable(space)))
            s_rows, s_cols, vals = throughput_rows(X, jobs.throughputs / target[:, None])
            if elastic:
                v = b.add_vars(n, lb=0.0, ub=np.inf, cost=jobs.multiplicity.astype(float))
                rows = np.concatenate([s_rows, np.arange(n)])
                cols = np.concatenate([s_cols, v + np.arange(n)])
                vals = np.concatenate([vals, np.ones(n)])
                b.add_rows(rows=rows, cols=cols, vals=vals, lb=1.0, ub=np.inf, n_rows=n)
                return finish(b.build(sense="min", x_index=X.x_index, name=f"{self.name}:slo_shortfall", meta={"v": v}))
            b.add_rows(rows=s_rows, cols=s_cols, vals=vals, lb=1.0, ub=np.inf, n_rows=n)
        return finish(b.build(sense="max", x_index=X.x_index, name=self.name, meta=_separable(space)))

    def objective_of(self, X: np.ndarray, jobs: JobSet, cluster: Cluster) -> float:
        """Total (cost-normalized) throughput of ``X``, counting multiplicities."""
        return float((jobs.multiplicity[:, None] * self._coefficients(jobs, cluster) * X).sum())

    def solve(self, jobs: JobSet, cluster: Cluster, ctx: SolveContext) -> PolicyOutcome:
        by_class = self.solve_by_class(jobs, cluster, ctx)  # packing / placement sensitivity: exact classes
        if by_class is not None:
            return by_class
        with ctx.building():
            lp = self.formulate(jobs, cluster)
        out = ctx.run(lp)
        target = self._slo_targets(jobs)
        if out.status not in ("infeasible", "infeasible_or_unbounded") or target is None:
            return self.outcome(lp, out, jobs, cluster)
        rows, how = self._diagnose(jobs, cluster, ctx, target)
        ids = [jobs.ids[r] for r in rows[:10]]
        more = "" if len(rows) <= 10 else f" and {len(rows) - 10} more"
        return PolicyOutcome(
            X=np.full(lp.x_index.shape, np.nan),
            objective=float("nan"),
            status="infeasible",
            message=f"SLOs cannot all be met ({how}): jobs {ids}{more}",
            extra={"infeasible_rows": rows},
        )

    def _diagnose(self, jobs: JobSet, cluster: Cluster, ctx: SolveContext, target: np.ndarray) -> tuple[list[int], str]:
        cap = cluster.capacities(jobs.gpu_types)
        mask = usable_mask(jobs.throughputs, jobs.scale_factors, cap)
        best_alone = np.where(mask, jobs.throughputs, 0.0).max(axis=1)
        alone = np.flatnonzero(target > best_alone * (1 + 1e-12))
        if alone.size:
            return alone.tolist(), "even alone on their fastest GPU type"
        with ctx.building():
            lp = self.formulate(jobs, cluster, elastic=True)
        out = ctx.run(lp)
        if not out.has_solution:
            return [], f"shortfall LP ended {out.status!r}"
        v = out.x[lp.meta["v"] : lp.meta["v"] + jobs.n_jobs]
        return np.flatnonzero(v > SHORTFALL_TOL).tolist(), "together; one least-shortfall assignment leaves these short"


def _separable(space) -> dict:
    """``meta`` marking a plain (job, type) program as block-angular: only the capacity
    (and host-resource) rows couple jobs, every other row belongs to one job. ``solver="auto"``
    then tries the exact structured path on large instances (which parses the program and
    hands it to a general solver when it is not of that shape)."""
    return {} if space is not None else {"structure": {"kind": "separable"}}
