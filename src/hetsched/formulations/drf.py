r"""Weighted dominant resource fairness (Ghodsi et al., NSDI'11) across users, over GPUs of
each type, host CPU cores and host memory, by progressive filling with LPs.

Math
----
Resources: the GPUs of each type k (capacity :math:`C_k`) and, when jobs state them, the
cluster's host CPU cores and memory (:math:`\bar R_r = \sum_k R_{kr}`; per-type capacity
rows still bound each type). A job j running on type k for the fraction :math:`X_{jk}` of
the time holds :math:`s_j X_{jk}` GPUs of type k and :math:`s_j d_{jr} X_{jk}` of resource r,
so its *dominant share* rate there is

.. math:: \delta_{jk} = \max\Big(\frac{s_j}{C_k},\ \max_r \frac{s_j d_{jr}}{\bar R_r}\Big),

and user u's dominant share is :math:`D_u(X) = \sum_{j\in u}\sum_k \delta_{jk} X_{jk}` (the
sum of its jobs' dominant shares: exact DRF when a user's jobs share one dominant resource,
as in the NSDI'11 examples, and linear, which a max over summed resources is not). DRF
(weights :math:`w_u`) is the max-min fair vector of :math:`D_u / w_u`, found by progressive
filling:

1. :math:`t^* = \max t` s.t. :math:`D_u(X) \ge w_u t` for every undecided user, frozen users
   at their levels, base rows (``sum_k X[j,k] <= 1`` caps each job's demand; GPU, CPU and
   memory capacity rows).
2. A user is *frozen* at :math:`w_u t^*` when it cannot rise above it without pushing an
   undecided user below :math:`w t^*` or a frozen user below its level (its demand is met,
   or a resource it needs is exhausted). An LP that maximizes small capped slacks
   :math:`\sigma_u` (:math:`D_u \ge w_u t^* + \sigma_u`) over the candidates names users that
   can rise (:math:`\sigma_u > 0`); they leave the candidate set and the LP is re-solved
   until the best total slack is 0: the remaining candidates cannot rise even alone and
   are frozen. Repeat until every user is frozen (each round freezes at least one user).
3. Among allocations that keep every level, maximize total normalized throughput
   :math:`\sum_j s_j\,\mathrm{thr}_j(X)/p_j` (Gavel's normalization), so leftover capacity
   goes to jobs that use it best.
4. (``balance_users``) Keeping each user's GPUs per type, dominant share and value, make
   its jobs' normalized throughputs as even as possible (max-min within the user).

Users with unmet demand end with equal weighted dominant shares; users whose demand is met
end lower. The objective reported is :math:`\min_u D_u / w_u`.

In numpy: ``D = np.bincount(user, weights=(delta * X).sum(1))``.

Examples
--------
The NSDI'11 example: 9 CPUs and 18 GB; user A's tasks need <1 CPU, 4 GB>, user B's
<3 CPU, 1 GB> (GPUs plentiful). DRF gives A three tasks and B two, both at dominant share 2/3:

>>> import hetsched as hs
>>> jobs = hs.JobSet([[1.0]] * 8, gpu_types=["v100"], entities=["A"] * 4 + ["B"] * 4,
...                  cpus_per_gpu=[1] * 4 + [3] * 4, mem_per_gpu=[4] * 4 + [1] * 4)
>>> cluster = hs.Cluster({"v100": 100}, cpus={"v100": 9}, memory={"v100": 18})
>>> res = hs.solve("drf", jobs, cluster)
>>> res.extra["dominant_share"].round(6).tolist()
[0.666667, 0.666667]
>>> [round(float(x), 6) for x in (res.X[:4].sum(), res.X[4:].sum())]   # tasks of A and B
[3.0, 2.0]
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..inputs.cluster import Cluster
from ..inputs.jobs import JobSet
from ..solvers.context import SolveContext
from ..solvers.program import LinearProgram
from ..validation import check_int
from .base import Policy, PolicyOutcome, register_policy
from .builder import ProgramBuilder
from .common import add_base_rows, proportional_throughput, usable_mask
from .resources import resource_terms
from .users import UserGroups, check_ticket_map, user_groups, within_user_program

__all__ = ["DominantResourceFairness"]

log = logging.getLogger(__name__)

#: Relative slack on frozen levels (solver tolerance).
LEVEL_SLACK = 1e-9
#: A user "can rise" when it gets this much (relative) above the current level.
RISE_TOL = 1e-6


@register_policy
class DominantResourceFairness(Policy):
    """Weighted DRF across users over GPU types, host CPU and host memory (progressive filling).

    Parameters
    ----------
    user_weights : Mapping[user, float], optional
        Positive weight per user (users are ``JobSet.entities``; without entities each job
        is a user, weighted by its job weight). Default 1 per user.
    allow_absent_users : bool, default False
        Allow ``user_weights`` to name users with no job.
    max_rounds : int, default 1000
        Safety cap on filling rounds (each freezes at least one user); reaching it ends
        with status "iteration_limit".
    balance_users : bool, default True
        Last, spread each user's GPUs evenly over its jobs (max-min of normalized job
        throughput within the user), keeping every user's GPUs per type, dominant share and
        total value (:func:`~hetsched.formulations.users.within_user_program`).

    Notes
    -----
    ``extra``: ``users``, ``dominant_share`` (per user), ``levels`` (frozen weighted
    levels), ``rounds``.
    """

    name = "drf"
    reads = ("entities",)
    aggregatable = False
    user_weights: Mapping[Any, float] | None = None
    allow_absent_users: bool = False
    max_rounds: int = 1000
    balance_users: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        check_ticket_map(self.user_weights, "user_weights")
        check_int(self.max_rounds, "max_rounds", low=1)

    def users(self, jobs: JobSet) -> UserGroups:
        """The users of ``jobs`` and their weights."""
        return user_groups(jobs, self.user_weights, name="user_weights", allow_absent=self.allow_absent_users)

    def dominant_rates(self, jobs: JobSet, cluster: Cluster) -> np.ndarray:
        """``delta[j, k]``: dominant share per unit of time of job j on type k (0 where unusable)."""
        cap = cluster.capacities(jobs.gpu_types)
        mask = usable_mask(jobs.throughputs, jobs.scale_factors, cap)
        s = jobs.scale_factors.astype(float)
        with np.errstate(divide="ignore", invalid="ignore"):
            delta = np.where(cap[None, :] > 0, s[:, None] / np.where(cap > 0, cap, 1.0)[None, :], 0.0)
            for _, demand, rcap in resource_terms(jobs, cluster):
                total = float(rcap[cluster.capacities(jobs.gpu_types) > 0].sum())
                if np.isfinite(total) and total > 0:  # (unlimited or absent: no share; rows forbid the rest)
                    delta = np.maximum(delta, (s * demand / total)[:, None])
        return np.where(mask, delta, 0.0)

    def dominant_shares(self, X: np.ndarray, jobs: JobSet, cluster: Cluster) -> np.ndarray:
        """Dominant share of each user under ``X``."""
        g = self.users(jobs)
        return np.bincount(g.inverse, weights=(self.dominant_rates(jobs, cluster) * X).sum(axis=1),
                           minlength=g.n_users)

    def objective_of(self, X: np.ndarray, jobs: JobSet, cluster: Cluster) -> float:
        """Smallest weighted dominant share ``min_u D_u / w_u``."""
        if jobs.n_jobs == 0:
            return float("nan")
        return float((self.dominant_shares(X, jobs, cluster) / self.users(jobs).tickets).min())

    def program(self, jobs: JobSet, cluster: Cluster, floors: np.ndarray, *, level: np.ndarray | None = None,
                slack_caps: np.ndarray | None = None) -> LinearProgram:
        """One filling LP.

        Rows ``D_u(X) - [w_u t] - [sigma_u] >= floors_u`` plus the base rows. Objective:
        ``t`` (``level``: mask of users tied to t), ``sum sigma`` (``slack_caps``: upper
        bounds of the slacks), else total normalized throughput.
        ``meta["aux"]``: index of t or of the first slack.
        """
        g = self.users(jobs)
        delta = self.dominant_rates(jobs, cluster)
        cap = cluster.capacities(jobs.gpu_types)
        usable = delta > 0
        U = g.n_users
        if level is None and slack_caps is None:
            p = proportional_throughput(jobs.throughputs, cap)
            with np.errstate(divide="ignore", invalid="ignore"):
                a = jobs.throughputs * np.where(p > 0, jobs.scale_factors / p, 0.0)[:, None]
            cost = a[usable]
        else:
            cost = 0.0
        b = ProgramBuilder()
        X = b.add_allocation(usable, cost=cost)
        add_base_rows(b, X, jobs, cap, cluster=cluster)
        rows = [g.inverse[X.job]]
        cols = [X.cols]
        vals = [delta[X.job, X.gpu]]
        aux = -1
        if level is not None:
            aux = b.add_vars(1, lb=0.0, ub=np.inf, cost=1.0)
            tied = np.flatnonzero(level)
            rows.append(tied)
            cols.append(np.full(tied.size, aux))
            vals.append(-g.tickets[tied])
        elif slack_caps is not None:
            aux = b.add_vars(U, lb=0.0, ub=slack_caps, cost=1.0)
            rows.append(np.arange(U))
            cols.append(aux + np.arange(U))
            vals.append(-np.ones(U))
        b.add_rows(rows=np.concatenate(rows), cols=np.concatenate(cols), vals=np.concatenate(vals),
                   lb=floors, ub=np.inf, n_rows=U)
        return b.build(sense="max", x_index=X.x_index, name=f"{self.name}:filling", meta={"aux": aux})

    def solve(self, jobs: JobSet, cluster: Cluster, ctx: SolveContext) -> PolicyOutcome:
        g = self.users(jobs)
        U = g.n_users
        w = g.tickets
        frozen = np.zeros(U, dtype=bool)
        levels = np.zeros(U)           # weighted level t of frozen users
        rounds = 0
        last = None
        while not frozen.all():
            if rounds >= self.max_rounds:
                return self._finish(last, jobs, cluster, g, levels, frozen, rounds, "iteration_limit",
                                    f"drf stopped after max_rounds={self.max_rounds} with {int((~frozen).sum())} user(s) undecided")
            rounds += 1
            floors = np.where(frozen, w * levels * (1 - LEVEL_SLACK), 0.0)
            with ctx.building():
                lp = self.program(jobs, cluster, floors, level=~frozen)
            out = ctx.run(lp)
            if not out.success:
                return self._finish((lp, out) if out.has_solution else last, jobs, cluster, g, levels, frozen,
                                    rounds, out.status, f"level LP ended {out.status!r}: {out.message}")
            last = (lp, out)
            t = float(out.x[lp.meta["aux"]])
            base = np.where(frozen, floors, w * t * (1 - LEVEL_SLACK))
            # Which undecided users can rise above t? Capped-slack LPs over a shrinking candidate
            # set C: a user whose slack is positive can rise (not frozen); when the best total
            # slack of C is ~0, no user of C can rise even alone (its slack would be positive).
            eps = RISE_TOL * max(t, 1e-12) * 10
            cand = ~frozen
            while cand.any():
                with ctx.building():
                    lp_s = self.program(jobs, cluster, base, slack_caps=np.where(cand, eps * w, 0.0))
                out_s = ctx.run(lp_s)
                if not out_s.success:
                    log.warning("drf: slack LP ended %r; freezing %d candidate user(s)", out_s.status, int(cand.sum()))
                    break
                sig = out_s.x[lp_s.meta["aux"]:lp_s.meta["aux"] + U]
                up = cand & (sig > 1e-2 * eps * w)
                if not up.any():
                    break
                cand &= ~up
            frozen[cand] = True
            levels[cand] = t
            if not (frozen & (levels == t)).any() and not frozen.all():
                # cannot happen for a convex feasible set; guard against solver noise
                undecided = np.flatnonzero(~frozen)
                frozen[undecided] = True
                levels[undecided] = t
                log.warning("drf: no user froze at level %.6g; freezing the %d undecided user(s)", t, undecided.size)
        floors = w * levels * (1 - LEVEL_SLACK)
        with ctx.building():
            lp = self.program(jobs, cluster, floors)
        out = ctx.run(lp)
        if out.success:
            last = (lp, out)
            status, msg = "optimal", f"drf: {U} user(s), {rounds} filling round(s)"
            if self.balance_users:
                last, note = self._balance(lp, out, jobs, cluster, g, floors, ctx)
                msg += note
        else:
            status = "optimal" if last is not None else out.status
            msg = f"final throughput LP ended {out.status!r}; returning the last filling allocation"
        return self._finish(last, jobs, cluster, g, levels, frozen, rounds, status, msg)

    def _balance(self, lp, out, jobs, cluster, g, floors, ctx):
        """Within-user balancing LP after the final stage (keeps levels, GPUs and value)."""
        X = lp.extract_X(out.x)
        cap = cluster.capacities(jobs.gpu_types)
        p = proportional_throughput(jobs.throughputs, cap)
        with np.errstate(divide="ignore", invalid="ignore"):
            a = jobs.throughputs * np.where(p > 0, jobs.scale_factors / p, 0.0)[:, None]
        delta = self.dominant_rates(jobs, cluster)
        a = np.where(delta > 0, a, 0.0)
        gpus = np.zeros((g.n_users, jobs.n_types))
        np.add.at(gpus, g.inverse, X * jobs.scale_factors[:, None])
        value = np.bincount(g.inverse, weights=(a * X).sum(axis=1), minlength=g.n_users)

        def dominant_floors(b, V):
            b.add_rows(rows=g.inverse[V.job], cols=V.cols, vals=delta[V.job, V.gpu], lb=floors, ub=np.inf,
                       n_rows=g.n_users)

        with ctx.building():
            lp4 = within_user_program(jobs, cluster, g, a, gpus, value, slack=LEVEL_SLACK,
                                      extra_rows=dominant_floors, name=f"{self.name}:within_users")
        out4 = ctx.run(lp4)
        if out4.success:
            return (lp4, out4), ""
        return (lp, out), f"; within-user LP ended {out4.status!r}, keeping the unbalanced split"

    def _finish(self, last, jobs, cluster, g, levels, frozen, rounds, status, message) -> PolicyOutcome:
        if last is None:
            X = np.full((jobs.n_jobs, jobs.n_types), np.nan)
            return PolicyOutcome(X=X, objective=float("nan"), status=status, message=message,
                                 extra={"users": g.labels, "rounds": rounds})
        lp, out = last
        X = lp.extract_X(out.x)
        D = self.dominant_shares(X, jobs, cluster)
        return PolicyOutcome(X=X, objective=float((D / g.tickets).min()), status=status, message=message,
                             extra={"users": g.labels, "dominant_share": D,
                                    "levels": np.where(frozen, levels, np.nan) * g.tickets, "rounds": rounds})
