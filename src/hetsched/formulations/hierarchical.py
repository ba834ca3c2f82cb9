r"""Hierarchical max-min fairness (Gavel §4.2): weighted fairness across entities, fairness
or FIFO within each entity.

Math
----
Entities e (users, teams) with weights :math:`W_e` own jobs (``JobSet(entities=...)``).
With :math:`u_j(X) = s_j\,\mathrm{thr}_j(X) / p_j` (the normalized share without the job's
own weight) and :math:`\mu_j` the multiplicity of row j, an entity's share is
:math:`E_e(X) = \sum_{j \in e} \mu_j u_j(X)`.

1. **Across entities**: water filling (lexicographic max-min) of :math:`E_e / W_e`. An
   entity that cannot use its share (its jobs saturate) is frozen and the rest keep rising:
   its spare share flows to the others.
2. **Within entities**, every entity keeps :math:`E_e \ge E_e^\star (1 - 10^{-7})` and

   * ``intra="fairness"``: water filling of the jobs' weighted shares :math:`u_j / w_j`;
   * ``intra="fifo"``: by arrival rank r = 0, 1, ... (``arrival_times``, else row order),
     maximize :math:`\sum_{j:\,\mathrm{rank}_j = r} \mu_j u_j` with every earlier rank kept at
     what it got: each entity's oldest job takes all it can use before the next one gets any.

The objective reported is :math:`\min_e E_e / W_e`; ``extra["entity_shares"]`` maps each
entity to :math:`E_e / W_e`.

Examples
--------
Two entities on 3 GPUs of one type, "a" with weight 2 and one job, "b" with weight 1 and two
jobs. Weighted shares 2 : 1 would give "a" 2 GPUs, but its single job can use only one, so
"a" is frozen at 1 GPU and its spare share flows to "b", which takes the other two:

>>> import hetsched as hs
>>> jobs = hs.JobSet([[1.0]] * 3, gpu_types=["g"], entities=["a", "b", "b"])
>>> pol = hs.policies.HierarchicalMaxMinFairness(entity_weights={"a": 2.0, "b": 1.0})
>>> hs.solve(pol, jobs, hs.Cluster({"g": 3})).X[:, 0].round(6).tolist()
[1.0, 1.0, 1.0]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any

import numpy as np

from ..errors import MissingFieldError, ValidationError, show
from ..inputs.cluster import Cluster
from ..inputs.jobs import JobSet
from ..solvers.context import SolveContext
from ..validation import check_choice, check_mapping, check_real
from .base import Policy, PolicyOutcome, register_policy
from .builder import ProgramBuilder
from .common import add_base_rows, retry_exact
from .max_min_fairness import normalized_share_coefficients
from .water_filling import water_fill

__all__ = ["HierarchicalMaxMinFairness"]

#: Entity totals are kept within this relative slack of their water-filling level while the
#: jobs inside are filled (1e-9, the slack of job levels, left too little room: HiGHS then
#: declared some of the within-entity LPs infeasible).
TOTALS_RELATIVE_SLACK = 1e-7

#: How jobs share their entity's allocation (``intra``).
INTRA_CHOICES = ("fairness", "fifo")


@register_policy
class HierarchicalMaxMinFairness(Policy):
    """Weighted max-min fairness across entities; fairness or FIFO within each.

    Parameters
    ----------
    entity_weights : Mapping, optional
        Entity -> positive weight; every entity that owns a job must be named (default:
        weight 1 for all). Entities with no jobs are ignored (said in the message).
    intra : {"fairness", "fifo"}, default "fairness"
        How an entity's share is divided among its jobs.
    heterogeneity_aware : bool, default True
        As in :class:`~hetsched.formulations.max_min_fairness.MaxMinFairness`.
    """

    name = "hierarchical_max_min_fairness"
    requires = ("entities",)
    reads = ("entities", "arrival_times")
    entity_weights: Mapping[Any, float] | None = field(default=None, hash=False)
    intra: str = "fairness"
    heterogeneity_aware: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.entity_weights is not None:
            check_mapping(self.entity_weights, "entity_weights", rule="a mapping entity -> positive weight or None")
            for k, v in self.entity_weights.items():
                check_real(v, f"entity_weights[{show(k)}]", low=0.0, low_open=True, rule="a positive number")
        check_choice(self.intra, "intra", INTRA_CHOICES, rule="'fairness' or 'fifo'")

    def _entities(self, jobs: JobSet) -> tuple[np.ndarray, np.ndarray, list[Any], list[Any]]:
        """(entity code per row, weight per entity, entity labels, ignored entities)."""
        if jobs.entities is None:
            raise MissingFieldError(
                f"policy {self.name!r} needs job field `entities`; pass JobSet(..., entities=...)."
            )
        check_choice(self.intra, "intra", INTRA_CHOICES, rule="'fairness' or 'fifo'")
        labels, codes = np.unique(jobs.entities.astype(str), return_inverse=True)
        originals = [jobs.entities[np.flatnonzero(codes == i)[0]] for i in range(len(labels))]
        weights = np.ones(len(labels))
        ignored: list[Any] = []
        if self.entity_weights is not None:
            given = {str(k): (k, v) for k, v in self.entity_weights.items()}
            for k, v in self.entity_weights.items():  # checked at construction; a mapping may change since
                check_real(v, f"entity_weights[{show(k)}]", low=0.0, low_open=True, rule="a positive number")
            missing = [originals[i] for i, lab in enumerate(labels) if lab not in given]
            if missing:
                raise ValidationError(
                    f"`entity_weights` must name every entity that owns a job; missing {missing[:10]}."
                )
            weights = np.array([float(given[lab][1]) for lab in labels])
            ignored = [k for lab, (k, _) in given.items() if lab not in set(labels)]
        return codes.astype(np.int64), weights, originals, ignored

    def base_shares(self, jobs: JobSet, cluster: Cluster) -> np.ndarray:
        """``u`` coefficients: normalized share without the job's own weight."""
        a = normalized_share_coefficients(jobs, cluster.capacities(jobs.gpu_types), self.heterogeneity_aware)
        return a * jobs.weights[:, None]

    def entity_shares(self, X: np.ndarray, jobs: JobSet, cluster: Cluster) -> dict[Any, float]:
        """:math:`E_e / W_e` for every entity."""
        codes, weights, originals, _ = self._entities(jobs)
        u = (jobs.multiplicity[:, None] * self.base_shares(jobs, cluster) * X).sum(axis=1)
        totals = np.bincount(codes, weights=u, minlength=len(weights))
        return {e: float(v) for e, v in zip(originals, totals / weights)}

    def objective_of(self, X: np.ndarray, jobs: JobSet, cluster: Cluster) -> float:
        """Smallest weighted entity share."""
        return float(min(self.entity_shares(X, jobs, cluster).values()))

    def solve(self, jobs: JobSet, cluster: Cluster, ctx: SolveContext) -> PolicyOutcome:
        # chained LPs (entity floors, then levels or FIFO ranks): an inexact backend's failure re-runs with HiGHS
        return retry_exact(ctx, lambda: self._solve(jobs, cluster, ctx), what=self.name)

    def _solve(self, jobs: JobSet, cluster: Cluster, ctx: SolveContext) -> PolicyOutcome:
        codes, weights, originals, ignored = self._entities(jobs)
        u = self.base_shares(jobs, cluster)
        mu_u = jobs.multiplicity[:, None] * u
        inter = water_fill(mu_u, jobs, cluster, ctx, name=f"{self.name}:entities",
                           group_of=codes, group_weight=weights)
        note = f"; entities with no jobs ignored: {ignored}" if ignored else ""
        if inter.status != "optimal":
            return inter.outcome(lambda X: self.objective_of(X, jobs, cluster))
        level = inter.group_levels * weights
        # the floors water filling held the entities at (level less its numerical margin,
        # which the inter-entity X meets) and a relative slack on top: the within-entity
        # LPs start from a program the inter-entity solution certifies feasible
        floors = np.minimum(level - TOTALS_RELATIVE_SLACK * np.abs(level), inter.group_floors * weights)
        totals = (codes, mu_u, floors)
        if self.intra == "fairness":
            a = normalized_share_coefficients(jobs, cluster.capacities(jobs.gpu_types), self.heterogeneity_aware)
            intra = water_fill(a, jobs, cluster, ctx, name=f"{self.name}:jobs", totals=totals)
            X, status, message = intra.X, intra.status, intra.message
        else:
            X, status, message = self._fifo(jobs, cluster, ctx, codes, mu_u, floors)
        objective = self.objective_of(X, jobs, cluster) if status == "optimal" else float("nan")
        return PolicyOutcome(
            X=X, objective=objective, status=status,
            message=f"entities: {inter.message}; within: {message}{note}",
            extra={"entity_shares": self.entity_shares(X, jobs, cluster) if status == "optimal" else {},
                   "ignored_entities": ignored},
        )

    def _fifo(self, jobs: JobSet, cluster: Cluster, ctx: SolveContext, codes: np.ndarray,
              mu_u: np.ndarray, floors: np.ndarray) -> tuple[np.ndarray, str, str]:
        """Rank-by-rank LPs: each entity's r-th oldest job maximizes its share given ranks < r."""
        n, m = mu_u.shape
        arrival = jobs.arrival_times if jobs.has("arrival_times") else np.arange(n, dtype=float)
        order = np.lexsort((np.arange(n), arrival, codes))
        rank = np.empty(n, dtype=np.int64)
        starts = np.r_[0, np.flatnonzero(np.diff(codes[order])) + 1]
        rank[order] = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
        cap = cluster.capacities(jobs.gpu_types)
        achieved = np.full(n, np.nan)
        X = np.full((n, m), np.nan)
        for r in range(int(rank.max()) + 1 if n else 0):
            with ctx.building():
                b = ProgramBuilder()
                cost = np.where(rank[:, None] == r, mu_u, 0.0)
                V = b.add_allocation(mu_u > 0, cost=cost[mu_u > 0])
                add_base_rows(b, V, jobs, cap, cluster=cluster)
                b.add_rows(rows=codes[V.job], cols=V.cols, vals=mu_u[V.job, V.gpu], lb=floors, ub=np.inf,
                           n_rows=len(floors))
                done = np.flatnonzero(rank < r)
                if done.size:
                    pos = np.full(n, -1)
                    pos[done] = np.arange(done.size)
                    keep = pos[V.job] >= 0
                    floor = achieved[done] - TOTALS_RELATIVE_SLACK * np.abs(achieved[done]) - 1e-12
                    b.add_rows(rows=pos[V.job][keep], cols=V.cols[keep], vals=mu_u[V.job, V.gpu][keep],
                               lb=floor, ub=np.inf, n_rows=done.size)
                lp = b.build(sense="max", x_index=V.x_index, name=f"{self.name}:fifo_rank{r}")
            out = ctx.run(lp)
            if not out.success:
                return X, out.status, f"FIFO rank {r} ended {out.status!r}"
            X = lp.extract_X(out.x)
            now = (mu_u * X).sum(axis=1)
            achieved[rank == r] = now[rank == r]
        return X, "optimal", f"FIFO by arrival, {int(rank.max()) + 1 if n else 0} rank LP(s)"
