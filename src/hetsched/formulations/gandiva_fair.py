r"""Gandiva_fair (Chaudhary et al., EuroSys'20): per-user fair shares of every GPU type, then
trades between users that all gain, written as linear programs.

Math
----
Users u hold tickets :math:`w_u`; user u's fair share of type k is
:math:`F_{uk} = C_k\,w_u / \sum_v w_v` GPUs (only users with jobs count: idle users' shares
are redistributed, as in Gandiva_fair). A job's value per unit of time on type k is its
normalized throughput :math:`a_{jk} = s_j T_{jk} / p_j` (Gavel's normalization,
:math:`p_j = \sum_k T_{jk} C_k / \sum_k C_k`: throughput relative to a proportional slice
of the whole cluster, so values of different models are comparable). A user's utility is
:math:`U_u(X) = \sum_{j \in u} \sum_k a_{jk} X_{jk}`.

1. *Untraded* utility — each user alone in its fair share (one LP, separable by user):

   .. math:: U^0_u = \max \sum_{j\in u} a_j \cdot X_j
      \ \text{s.t.}\ \sum_k X_{jk} \le 1,\ \sum_{j \in u} s_j X_{jk} \le F_{uk}

   (and, when jobs state host CPU/memory, the same share of each type's CPU/memory).
2. *Trade* — the most total value such that nobody loses:

   .. math:: \max \sum_u U_u(X) \ \text{s.t. base rows},\ U_u(X) \ge U^0_u\ \forall u.

3. *Split* (``split_gains=True``) — among allocations within :math:`10^{-9}` of that total,
   maximize the smallest relative gain :math:`g`, :math:`U_u(X) \ge (1+g) U^0_u`; used
   when :math:`g > 10^{-6}`, otherwise step 2's allocation stands.
4. *Within users* (``balance_users=True``) — each user keeps its GPUs of every type (as
   traded) and its utility; its jobs' values are made as even as possible:
   :math:`\max \sum_u t_u` s.t. :math:`a_j \cdot X_j \ge t_u\ \forall j \in u`,
   :math:`\sum_{j\in u} s_j X_{jk} \le G_{uk}`, :math:`U_u(X) \ge U_u`. (Gandiva_fair
   time-slices a user's jobs; an LP optimum of step 2 alone may give a user's whole share to
   a few of its jobs.)

When step 2 gains nothing over :math:`\sum_u U^0_u` the untraded allocation of step 1 is
returned: with identical speedups no trade happens.

Relation to the second-price rule
---------------------------------
Gandiva_fair trades between two GPU generations: the user with the highest speedup (new
over old) buys new-GPU share from the user with the lowest, paying in old-GPU share at an
exchange rate set by the second-highest speedup (a Vickrey-style price, so the buyer's own
bid does not set its price); a trade at a rate strictly between the two users' speedups
leaves both better off, and trades repeat while such pairs exist. The LP keeps the two
properties the rule is built for — individual rationality (constraint
:math:`U_u \ge U^0_u`) and moving fast GPUs to the users that speed up most
(efficiency) — and finds the efficient end point of all such trades at once, for any
number of types and users, instead of a sequence of pairwise trades. The duals of its
capacity rows are per-GPU prices; their ratio is an exchange rate between types that lies
between the speedups of the marginal buyer and seller, as the second price does. The LP
does not reproduce the pairwise rule's split of the gain (the price), only an efficient
and individually rational outcome; ``split_gains`` picks the one that shares gains evenly.

In numpy: ``U = np.bincount(user, weights=(a * X).sum(1))``; objective ``(a * X).sum()``.

Examples
--------
Two users with opposite preferences both gain by swapping their halves:

>>> import hetsched as hs
>>> jobs = hs.JobSet([[1.0, 3.0], [3.0, 1.0]], gpu_types=["k80", "v100"], entities=["ann", "bob"])
>>> res = hs.solve("gandiva_fair", jobs, hs.Cluster({"k80": 1, "v100": 1}))
>>> res.X.round(6).tolist()
[[0.0, 1.0], [1.0, 0.0]]
>>> res.extra["fair_utility"].round(6).tolist(), res.extra["utility"].round(6).tolist()
([1.0, 1.0], [1.5, 1.5])
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
from .base import Policy, PolicyOutcome, register_policy
from .builder import ProgramBuilder
from .common import add_base_rows, proportional_throughput, usable_mask
from .resources import host_fit_mask, resource_terms
from .users import (
    UserGroups,
    check_ticket_map,
    user_groups,
    user_type_rows,
    within_user_program,
)

__all__ = ["GandivaFair"]

log = logging.getLogger(__name__)

#: Relative slack on the untraded utilities and on the stage-2 optimum (solver tolerance).
RELATIVE_SLACK = 1e-9


@register_policy
class GandivaFair(Policy):
    """Fair share of every GPU type per user (tickets), then trades from which nobody loses.

    Up to four LPs (module docstring): each user alone in its share, the best trade,
    the trade's gain split evenly, and each user's GPUs spread over its jobs.

    Parameters
    ----------
    tickets : Mapping[user, float], optional
        A user's tickets set its fair share of each GPU type; positive. Users are
        ``JobSet.entities``, or the jobs themselves (named by id) without entities.
        Default: 1 per user (job weights when each job is its own user).
    allow_absent_users : bool, default False
        Allow ``tickets`` to name users with no job (idle users; their share is
        redistributed). False treats such names as an error.
    split_gains : bool, default True
        Solve a third LP that shares the gain of trading evenly (max-min relative gain)
        among the efficient allocations.
    balance_users : bool, default True
        Solve a last LP that spreads each user's GPUs over its jobs (max-min of job values
        within the user), keeping every user's GPUs per type and utility.

    Notes
    -----
    ``extra``: ``users``, ``fair_utility`` (:math:`U^0`), ``utility``, ``gpus`` and
    ``fair_gpus`` (GPUs of each type per user, traded and untraded, shape (users, types)),
    ``traded`` (bool), ``prices`` (capacity-row duals of the trade LP, when the backend
    gives duals).
    """

    name = "gandiva_fair"
    reads = ("entities",)
    aggregatable = False
    tickets: Mapping[Any, float] | None = None
    allow_absent_users: bool = False
    split_gains: bool = True
    balance_users: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        check_ticket_map(self.tickets, "tickets")

    # ---------------------------------------------------------------- pieces
    def coefficients(self, jobs: JobSet, cluster: Cluster) -> np.ndarray:
        """Normalized throughput ``a[j, k] = s_j T[j, k] / p_j`` on usable pairs (0 elsewhere)."""
        cap = cluster.capacities(jobs.gpu_types)
        mask = usable_mask(jobs.throughputs, jobs.scale_factors, cap)
        p = proportional_throughput(jobs.throughputs, cap)
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = np.where(p > 0, jobs.scale_factors / p, 0.0)
        return np.where(mask, jobs.throughputs * scale[:, None], 0.0)

    def users(self, jobs: JobSet) -> UserGroups:
        """The users of ``jobs`` and their tickets."""
        return user_groups(jobs, self.tickets, name="tickets", allow_absent=self.allow_absent_users)

    def objective_of(self, X: np.ndarray, jobs: JobSet, cluster: Cluster) -> float:
        """Total normalized throughput :math:`\\sum_u U_u(X)`."""
        return float((self.coefficients(jobs, cluster) * X).sum())

    def untraded_program(self, jobs: JobSet, cluster: Cluster) -> LinearProgram:
        """Stage 1: every user alone in its fair share of each type (separable by user)."""
        g = self.users(jobs)
        a = self.coefficients(jobs, cluster)
        cap = cluster.capacities(jobs.gpu_types)
        b = ProgramBuilder()
        usable = (a > 0) & host_fit_mask(jobs, cluster)   # as the base rows of the later stages
        X = b.add_allocation(usable, cost=a[usable])
        b.add_rows(rows=X.job, cols=X.cols, vals=1.0, lb=-np.inf, ub=1.0, n_rows=jobs.n_jobs)
        user_type_rows(b, X, g, jobs.scale_factors.astype(float), g.share[:, None] * cap[None, :])
        for _, demand, rcap in resource_terms(jobs, cluster):
            user_type_rows(b, X, g, jobs.scale_factors * demand, g.share[:, None] * rcap[None, :])
        return b.build(sense="max", x_index=X.x_index, name=f"{self.name}:untraded")

    def trade_program(self, jobs: JobSet, cluster: Cluster, fair_utility: np.ndarray, *,
                      total: float | None = None) -> LinearProgram:
        """Stage 2 (``total`` None): max total value with every user at or above ``fair_utility``.

        Stage 3 (``total`` given): max g with total value >= ``total`` and
        ``U_u >= (1 + g) fair_utility_u``. ``meta``: ``cap_row`` (first capacity row),
        ``g`` (index of g, stage 3).
        """
        g = self.users(jobs)
        a = self.coefficients(jobs, cluster)
        cap = cluster.capacities(jobs.gpu_types)
        b = ProgramBuilder()
        usable = a > 0
        X = b.add_allocation(usable, cost=a[usable] if total is None else 0.0)
        _, r_cap = add_base_rows(b, X, jobs, cap, cluster=cluster)
        floor = fair_utility * (1 - RELATIVE_SLACK)
        user = g.inverse[X.job]
        vals = a[X.job, X.gpu]
        meta: dict[str, Any] = {"cap_row": r_cap}
        if total is None:
            b.add_rows(rows=user, cols=X.cols, vals=vals, lb=floor, ub=np.inf, n_rows=g.n_users)
            return b.build(sense="max", x_index=X.x_index, name=f"{self.name}:trade", meta=meta)
        gv = b.add_vars(1, lb=0.0, ub=np.inf, cost=1.0)
        b.add_rows(rows=np.concatenate([user, np.arange(g.n_users)]),
                   cols=np.concatenate([X.cols, np.full(g.n_users, gv)]),
                   vals=np.concatenate([vals, -fair_utility]), lb=floor, ub=np.inf, n_rows=g.n_users)
        b.add_rows(rows=np.zeros(X.size, dtype=np.int64), cols=X.cols, vals=vals,
                   lb=total * (1 - RELATIVE_SLACK), ub=np.inf, n_rows=1)
        meta["g"] = gv
        return b.build(sense="max", x_index=X.x_index, name=f"{self.name}:split", meta=meta)

    def balance_program(self, jobs: JobSet, cluster: Cluster, gpus: np.ndarray, utility: np.ndarray) -> LinearProgram:
        """Step 4: max sum_u t_u with every job's value >= t_u, each user within ``gpus[u, k]``
        GPUs of each type and at ``utility[u]`` or more (see :func:`.users.within_user_program`)."""
        return within_user_program(jobs, cluster, self.users(jobs), self.coefficients(jobs, cluster), gpus, utility,
                                   slack=RELATIVE_SLACK, name=f"{self.name}:within_users")

    # ----------------------------------------------------------------- solve
    def solve(self, jobs: JobSet, cluster: Cluster, ctx: SolveContext) -> PolicyOutcome:
        g = self.users(jobs)
        a = self.coefficients(jobs, cluster)
        with ctx.building():
            lp1 = self.untraded_program(jobs, cluster)
        out1 = ctx.run(lp1)
        if not out1.success:
            return self.outcome(lp1, out1, jobs, cluster)
        X1 = lp1.extract_X(out1.x)
        U0 = self._utility(X1, a, g)
        extra: dict[str, Any] = {"users": g.labels, "fair_utility": U0, "fair_gpus": self._gpus(X1, jobs, g)}
        with ctx.building():
            lp2 = self.trade_program(jobs, cluster, U0)
        out2 = ctx.run(lp2)
        if not out2.success:
            return PolicyOutcome(
                X=X1, objective=self.objective_of(X1, jobs, cluster), status=out1.status,
                message=f"trade LP ended {out2.status!r} ({out2.message}); returning the untraded fair shares",
                extra={**extra, "utility": U0, "gpus": extra["fair_gpus"], "traded": False,
                       "trade_status": out2.status})
        X2 = lp2.extract_X(out2.x)
        total2 = float((a * X2).sum())
        if out2.row_dual is not None:
            r = lp2.meta["cap_row"]
            extra["prices"] = np.abs(out2.row_dual[r:r + jobs.n_types])
        if total2 <= U0.sum() * (1 + 1e-7) + 1e-12:
            X, traded, how = X1, False, "no trade improves on the fair shares"
        else:
            X, traded, how = X2, True, f"trading raises total value from {U0.sum():.6g} to {total2:.6g}"
            if self.split_gains and g.n_users > 1:
                with ctx.building():
                    lp3 = self.trade_program(jobs, cluster, U0, total=total2)
                out3 = ctx.run(lp3)
                if out3.success and float(out3.x[lp3.meta["g"]]) > 1e-6:
                    X = lp3.extract_X(out3.x)
                    how += f"; every user gains at least {float(out3.x[lp3.meta['g']]):.3%}"
                elif not out3.success:
                    how += f"; split LP ended {out3.status!r}, keeping the trade LP's split"
        if self.balance_users:
            with ctx.building():
                lp4 = self.balance_program(jobs, cluster, self._gpus(X, jobs, g), self._utility(X, a, g))
            out4 = ctx.run(lp4)
            if out4.success:
                X = lp4.extract_X(out4.x)
            else:
                how += f"; within-user LP ended {out4.status!r}, keeping the unbalanced split"
        U = self._utility(X, a, g)
        extra.update({"utility": U, "gpus": self._gpus(X, jobs, g), "traded": traded})
        return PolicyOutcome(X=X, objective=self.objective_of(X, jobs, cluster), status="optimal",
                             message=f"gandiva_fair: {g.n_users} user(s); {how}", extra=extra)

    @staticmethod
    def _utility(X: np.ndarray, a: np.ndarray, g: UserGroups) -> np.ndarray:
        return np.bincount(g.inverse, weights=(a * X).sum(axis=1), minlength=g.n_users)

    @staticmethod
    def _gpus(X: np.ndarray, jobs: JobSet, g: UserGroups) -> np.ndarray:
        used = X * jobs.scale_factors[:, None]
        out = np.zeros((g.n_users, jobs.n_types))
        np.add.at(out, g.inverse, used)
        return out
