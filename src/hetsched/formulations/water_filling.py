r"""Lexicographic max-min fairness by water filling, with LPs only.

Math
----
With the normalized shares of :mod:`.max_min_fairness`,
:math:`\mathrm{share}_j(X) = \sum_k a_{jk} X_{jk}`, water filling finds the allocation
whose sorted share vector is lexicographically largest (Pareto-efficient, and unique in the
shares). Level by level, with A the jobs not yet frozen and :math:`\ell_f` the levels of
frozen jobs:

.. math::

    t^\star = \max_{X,t}\ t \quad\text{s.t.}\quad \mathrm{share}_j(X) \ge t\ (j \in A),\quad
    \mathrm{share}_f(X) \ge \ell_f\ (f \notin A),\quad \text{base constraints}.

Which active jobs cannot rise above :math:`t^\star`?

1. Complementary slackness: a job whose level row has a positive dual in *some* optimal
   dual solution sits at :math:`t^\star` in *every* optimal primal solution: frozen.
2. Degenerate duals often name only one such job, so the rest R are settled by slack LPs:
   fix :math:`t = t^\star`, give each job in R a slack :math:`0 \le \sigma_j \le \delta t^\star`
   (:math:`\mathrm{share}_j - t - \sigma_j \ge 0`, :math:`\delta = 10^{-4}`) and maximize
   :math:`\sum_{j\in R}\sigma_j`. The small cap makes the LP raise *all* jobs that can rise
   together by :math:`\delta t^\star`, not just the cheapest ones.
   Jobs with :math:`\sigma_j > 0` can rise. If none can, every job in R is stuck
   (a job that could rise alone would make the sum positive); otherwise the ones that rose
   leave R and the LP is repeated on the rest.

Stuck jobs are frozen at :math:`t^\star` (row :math:`\mathrm{share}_f \ge t^\star (1 - 10^{-9})`)
and the next level is solved. Every LP is the same model changed in place (costs, bounds, a
coefficient per frozen row) and re-solved from the previous basis (HiGHS dual/primal
simplex); the first one uses IPX with crossover when large. Identical jobs are merged by the
core's aggregation first; the lexicographic optimum is symmetric, so this is exact.

In numpy, for the final X: ``shares = (a * X).sum(1)``; the objective reported is
``shares.min()`` and ``extra["levels"]`` counts the distinct levels.

Examples
--------
Three identical jobs on two GPUs each get two thirds of a GPU:

>>> import hetsched as hs
>>> jobs = hs.JobSet([[1.0], [1.0], [1.0]], gpu_types=["v100"])
>>> res = hs.solve("max_min_fairness_water_filling", jobs, hs.Cluster({"v100": 2}))
>>> res.X[:, 0].round(6).tolist()
[0.666667, 0.666667, 0.666667]
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ..cluster import Cluster
from ..engine import SolveContext
from ..jobs import JobSet
from ..solvers.registry import AUTO_IPM_MIN_VARS
from .base import Policy, PolicyOutcome, register_policy
from .builder import ProgramBuilder
from .common import STAGE2_RELATIVE_SLACK, add_base_rows
from .max_min_fairness import normalized_share_coefficients

__all__ = ["MaxMinFairnessWaterFilling"]


@register_policy
@dataclass(frozen=True, kw_only=True)
class MaxMinFairnessWaterFilling(Policy):
    """Lexicographic (water-filling) max-min fairness over normalized shares.

    Parameters
    ----------
    heterogeneity_aware : bool, default True
        As in :class:`~hetsched.formulations.max_min_fairness.MaxMinFairness`.
    rise_tol : float, default 1e-7
        A job whose share can rise by less than ``rise_tol`` times the level is treated as
        stuck at that level.
    slack_cap : float, default 1e-4
        Cap on each job's slack in the slack LPs, relative to the level (see above).
    max_lps : int, default 100000
        Safety cap on LP re-solves; reaching it ends with status "iteration_limit".
    """

    name = "max_min_fairness_water_filling"
    heterogeneity_aware: bool = True
    rise_tol: float = 1e-7
    slack_cap: float = 1e-4
    max_lps: int = 100_000

    def coefficients(self, jobs: JobSet, cluster: Cluster) -> np.ndarray:
        """Normalized-share coefficients ``a`` (as for max-min fairness)."""
        return normalized_share_coefficients(jobs, cluster.capacities(jobs.gpu_types), self.heterogeneity_aware)

    def objective_of(self, X: np.ndarray, jobs: JobSet, cluster: Cluster) -> float:
        """Minimum normalized share of ``X``."""
        if jobs.n_jobs == 0:
            return float("nan")
        return float((self.coefficients(jobs, cluster) * X).sum(axis=1).min())

    def solve(self, jobs: JobSet, cluster: Cluster, ctx: SolveContext) -> PolicyOutcome:
        a = self.coefficients(jobs, cluster)
        fill = water_fill(a, jobs, cluster, ctx, name=self.name, rise_tol=self.rise_tol,
                          slack_cap=self.slack_cap, max_lps=self.max_lps)
        return fill.outcome(lambda X: self.objective_of(X, jobs, cluster))


@dataclass(frozen=True, eq=False)
class WaterFill:
    """Result of :func:`water_fill`: X (NaN without a solution), level per group, counters."""

    X: np.ndarray
    group_levels: np.ndarray
    status: str
    message: str
    n_levels: int
    lp_solves: int

    def outcome(self, objective, **extra) -> PolicyOutcome:
        """A :class:`PolicyOutcome` with ``objective(X)`` when X exists."""
        value = objective(self.X) if not np.isnan(self.X).any() else float("nan")
        return PolicyOutcome(X=self.X, objective=value, status=self.status, message=self.message,
                             extra={"levels": self.n_levels, "lp_solves": self.lp_solves, **extra})


def water_fill(
    a: np.ndarray,
    jobs: JobSet,
    cluster: Cluster,
    ctx: SolveContext,
    *,
    name: str,
    group_of: np.ndarray | None = None,
    group_weight: np.ndarray | None = None,
    totals: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    rise_tol: float = 1e-7,
    slack_cap: float = 1e-4,
    max_lps: int = 100_000,
) -> WaterFill:
    r"""Lexicographic max-min of group levels :math:`\sum_{j \in g} a_j \cdot X_j / W_g`.

    Parameters
    ----------
    a : ndarray (n, m)
        Per-job share coefficients.
    group_of : ndarray of int (n,), optional
        Group (level row) of each job; default: every job its own group.
    group_weight : ndarray (n_groups,), optional
        :math:`W_g` (default 1): group g's level row is ``sum_{j in g} a_j . X_j >= W_g t``.
    totals : (group_of, coefficients, floors), optional
        Extra fixed rows ``sum_{j in h} coef_j . X_j >= floor_h`` (e.g. entity totals found
        by an earlier water filling).
    """
    n, m = a.shape
    group_of = np.arange(n) if group_of is None else np.asarray(group_of, dtype=np.int64)
    n_groups = int(group_of.max()) + 1 if n else 0
    weight = np.ones(n_groups) if group_weight is None else np.asarray(group_weight, dtype=float)
    model = _LevelModel(a, jobs, cluster, ctx, name, group_of, weight, totals)
    active = np.ones(n_groups, dtype=bool)
    group_levels = np.full(n_groups, np.nan)
    levels: list[float] = []
    last = None

    def stop(out, status: str, what: str) -> WaterFill:
        X = model.lp.extract_X(out.x) if out is not None and out.has_solution else np.full((n, m), np.nan)
        return WaterFill(X, group_levels, status, f"water filling: {what} after {len(levels)} level(s)",
                         len(levels), model.solves)

    while active.any():
        if model.solves >= max_lps:
            return stop(last, "iteration_limit", f"stopped at {max_lps} LPs")
        model.level_mode()
        out = model.solve()
        if not out.success:
            return stop(out, out.status, f"level LP {len(levels) + 1} ended {out.status!r}")
        last = out
        level = float(out.x[model.t])
        floor = level - STAGE2_RELATIVE_SLACK * abs(level)
        stuck = np.zeros(n_groups, dtype=bool)
        if model.vertex_duals and out.row_dual is not None:
            stuck = active & (np.abs(out.row_dual[model.level_rows]) > 1e-9)
        undecided = active & ~stuck
        # small caps: if the undecided groups that can rise can all rise together by `cap`,
        # maximizing the capped sum raises every one of them, so one LP usually settles
        # all of them (a convex combination of single-group raises raises all at once)
        cap = slack_cap * max(level, 1e-12)
        while undecided.any():
            model.slack_mode(undecided, cap, floor)
            out = model.solve()
            if not out.success:
                return stop(out, out.status, f"slack LP at level {len(levels) + 1} ended {out.status!r}")
            last = out
            rose = undecided & (out.x[model.s_cols] > rise_tol * max(level, 1e-12))
            if not rose.any():
                stuck |= undecided
                break
            undecided &= ~rose
        model.freeze(stuck, floor * weight[stuck])
        group_levels[stuck] = level
        active &= ~stuck
        levels.append(level)
    if last is None:  # no groups
        return WaterFill(np.zeros((n, m)), group_levels, "optimal", "water filling: nothing to fill", 0, 0)
    return WaterFill(model.lp.extract_X(last.x), group_levels, "optimal",
                     f"water filling: {len(levels)} level(s), {model.solves} LP solve(s) ({model.mode})",
                     len(levels), model.solves)


class _LevelModel:
    """The water-filling LP, changed between solves.

    Two modes with the same changes: ``"warm"`` (solver "auto" or "highs") keeps it loaded
    in a HiGHS session and re-solves from the previous basis (the first solve uses IPX with
    crossover when large; vertex duals name stuck groups); ``"rebuild"`` (any other backend)
    applies the changes to arrays and sends a fresh program through ``ctx.run``.
    """

    def __init__(self, a: np.ndarray, jobs: JobSet, cluster: Cluster, ctx: SolveContext, name: str,
                 group_of: np.ndarray, weight: np.ndarray, totals) -> None:
        n_groups = weight.shape[0]
        with ctx.building():
            b = ProgramBuilder()
            usable = a > 0
            if totals is not None:
                usable = usable | (totals[1] > 0)
            X = b.add_allocation(usable)
            self.t = b.add_vars(1, lb=0.0, ub=np.inf, cost=1.0)
            s = b.add_vars(n_groups, lb=0.0, ub=0.0, cost=0.0)
            add_base_rows(b, X, jobs, cluster.capacities(jobs.gpu_types), cluster=cluster)
            g = np.arange(n_groups)
            self.level_rows = b.add_rows(
                rows=np.concatenate([group_of[X.job], g, g]),
                cols=np.concatenate([X.cols, np.full(n_groups, self.t), s + g]),
                vals=np.concatenate([a[X.job, X.gpu], -weight, -np.ones(n_groups)]),
                lb=0.0, ub=np.inf, n_rows=n_groups,
            ) + g
            if totals is not None:
                h_of, coef, floors = totals
                b.add_rows(rows=np.asarray(h_of)[X.job], cols=X.cols, vals=coef[X.job, X.gpu],
                           lb=floors, ub=np.inf, n_rows=len(floors))
            self.lp = b.build(sense="max", x_index=X.x_index, name=name)
        self.s_cols = s + np.arange(n_groups)
        self.ctx = ctx
        lp = self.lp
        large = lp.n_vars >= AUTO_IPM_MIN_VARS
        # measured on 2,048 unaggregated catalogue jobs (26 levels): warm HiGHS re-solves
        # 76 LPs in 27 s; rebuilt programs through Clarabel ~0.27 s each and more of them
        self.mode = "warm" if ctx.solver in ("auto", "highs") else "rebuild"
        self.vertex_duals = self.mode == "warm"
        self.solves = 0
        self._first = {"solver": "ipm", "run_crossover": "on"} if large else {"solver": "simplex"}
        self.session = ctx.open_session(lp, purpose=f"policy {name!r}") if self.mode == "warm" else None
        self.c, self.col_lb, self.col_ub = lp.c.copy(), lp.col_lb.copy(), lp.col_ub.copy()
        self.row_lb = lp.row_lb.copy()
        self.A = lp.A.copy()
        # position of each level row's t coefficient inside A.data (to zero it on freezing)
        # (level rows are consecutive and each holds t once, so row order is group order)
        row_of_entry = np.repeat(np.arange(self.A.shape[0]), np.diff(self.A.indptr))
        in_level = (row_of_entry >= self.level_rows[0]) & (row_of_entry <= self.level_rows[-1])
        self.t_pos = np.flatnonzero(in_level & (self.A.indices == self.t))
    def _costs(self, cols, values) -> None:
        self.c[cols] = values
        if self.session is not None:
            self.session.set_costs(cols, values)

    def _bounds(self, cols, lb, ub) -> None:
        self.col_lb[cols], self.col_ub[cols] = lb, ub
        if self.session is not None:
            self.session.set_col_bounds(cols, lb, ub)

    def level_mode(self) -> None:
        """Objective max t; slacks off."""
        self._costs(np.array([self.t]), 1.0)
        self._costs(self.s_cols, 0.0)
        self._bounds(np.array([self.t]), 0.0, np.inf)
        self._bounds(self.s_cols, 0.0, 0.0)

    def slack_mode(self, undecided: np.ndarray, cap: float, floor: float) -> None:
        """t fixed at ``floor``; maximize the capped slacks of ``undecided`` jobs."""
        self._costs(np.array([self.t]), 0.0)
        self._bounds(np.array([self.t]), floor, floor)
        self._costs(self.s_cols, undecided.astype(float))
        self._bounds(self.s_cols, 0.0, np.where(undecided, cap, 0.0))

    def freeze(self, stuck: np.ndarray, floor: np.ndarray) -> None:
        """Rows of ``stuck`` groups lose t and keep ``row >= floor`` (one floor per stuck group)."""
        rows = self.level_rows[stuck]
        self.A.data[self.t_pos[stuck]] = 0.0
        self.row_lb[rows] = floor
        if self.session is not None:
            self.session.set_coeffs(rows, self.t, 0.0)
            self.session.set_row_bounds(rows, floor, np.inf)

    def solve(self):
        """Solve the current program (warm re-solve or fresh program)."""
        self.solves += 1
        if self.session is not None:
            options = self._first if self.session.n_runs == 0 else {"solver": "simplex"}
            return self.ctx.rerun(self.session, options=options)
        lp = dataclasses.replace(self.lp, c=self.c.copy(), A=self.A.copy(), col_lb=self.col_lb.copy(),
                                 col_ub=self.col_ub.copy(), row_lb=self.row_lb.copy())
        return self.ctx.run(lp)
