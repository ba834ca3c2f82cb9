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
2. The groups the duals name are frozen at once and the level LP is re-solved: if it
   rises, no other group was stuck (one LP instead of the slack LPs below; under
   hierarchical fairness most levels are a single such group). If it does not rise,
   degenerate duals named only some of the stuck groups, and the rest R are settled by
   slack LPs:
   fix :math:`t = t^\star`, give each job in R a slack :math:`0 \le \sigma_j \le \delta t^\star`
   (:math:`\mathrm{share}_j - t - \sigma_j \ge 0`, :math:`\delta = 10^{-4}`) and maximize
   :math:`\sum_{j\in R}\sigma_j`. The small cap makes the LP raise *all* jobs that can rise
   together by :math:`\delta t^\star`, not just the cheapest ones.
   Jobs with :math:`\sigma_j > 0` can rise. If none can, every job in R is stuck
   (a job that could rise alone would make the sum positive); otherwise the ones that rose
   leave R and the LP is repeated on the rest.

3. Own caps: job j's share never exceeds :math:`u_j = \max_k a_{jk}` (its whole time on its
   best type). When :math:`t^\star` is the lowest active cap, every job whose cap the
   level can still reach is frozen at its cap at once: c is *reachable* when all active
   jobs can hold :math:`\min(u_j, c)` together (then capacity stops the level no lower than
   c); that is monotone in c and tested by one LP (rows with :math:`u_j \le c` ask for
   :math:`t\,u_j/c`), so a binary search over the distinct caps replaces one level (two
   LPs) per cap. On distinct jobs of a lightly loaded cluster most levels are caps.

Stuck jobs are frozen at :math:`t^\star` less a small numerical margin (row
:math:`\mathrm{share}_f \ge t^\star - \epsilon`, :math:`\epsilon` = 1e-9 relative plus the
solver's measured violation times the row's coefficients; see :func:`water_fill`) and the next
level is solved; every level freezes at least one job, so there are at most n levels. Every LP is the same model changed in place (costs, bounds, a
coefficient per frozen row) and re-solved from the previous basis (HiGHS dual simplex;
primal simplex right after a freeze on duals alone, whose last point stays feasible, and
whenever dual simplex calls the program infeasible); the first one uses IPX with
crossover when large. Identical jobs are merged by the
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
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import ValidationError, show
from ..inputs.cluster import Cluster
from ..inputs.jobs import JobSet
from ..solvers.base import SolverOutput
from ..solvers.context import SolveContext
from ..solvers.fallback import accepted_violation
from ..solvers.registry import choose_auto
from ..validation import check_int, check_real
from .base import Policy, PolicyOutcome, register_policy
from .builder import ProgramBuilder
from .common import STAGE2_RELATIVE_SLACK, add_base_rows, retry_exact
from .max_min_fairness import normalized_share_coefficients

__all__ = ["MaxMinFairnessWaterFilling"]

#: A level is re-imposed this many times the worst level lift the solver's violations allow
#: below itself (see :meth:`_LevelModel.margin`).
MARGIN_FACTOR = 4.0

#: HiGHS ``simplex_strategy`` values: dual simplex (its default) and primal simplex.
SIMPLEX_DUAL, SIMPLEX_PRIMAL = 1, 4

#: A dual simplex run after more than this many level-row coefficients moved (a cap probe,
#: :func:`_cap_search`) uses Devex edge weights: HiGHS drops its dual steepest-edge weights
#: when the matrix changes and recomputes them from scratch, one BTRAN per row. On water
#: filling 8,192 x 3 hard (16,387 rows) that took 2.1-2.7 s of probes that then needed 7-226
#: simplex iterations; with Devex the same probes took 0.2-0.8 s and the whole solve 44-49 s
#: instead of 59-92 s (same optimum, same 15 LPs; seed 1: 21.8 instead of 37.7 s).
#: Hierarchical 2,048 x 3 and water filling 2,048 x 3 (4,107 rows) did not move beyond
#: run-to-run noise. Devex on *every* run was tried too: it slowed hierarchical seeds 0/1
#: from 6.2 to 10.6 s and 6.8 to 15.7 s.
DEVEX_AFTER_MOVED_COEFFICIENTS = 1_000

#: How far :meth:`_Fill.relax_frozen` widens margins: a frozen group's margin becomes at least
#: this many times the one it was frozen with (first widening), or grows this many times
#: (every widening after a cold re-solve failed too).
RELAX_FACTOR = 100.0

#: After a cap probe the solver failed on, the frozen margins are widened to this many times
#: what they were set to (at least) and the probe is run again, once per search: such a probe
#: is feasible at t = 0, so the frozen floors had left no point the solver accepts. On
#: hierarchical 2,048 x 3 hard, seed 0, six probes in a row failed that way, then the level
#: LP after them (dual and primal warm runs, a cold run of 4,600 iterations, a widened cold
#: run): 5.3-6.0 -> 2.5-3.0 CPU-s; seeds 0-7 in all 76.9-79.1 -> 69.0-69.8 s (docs/scaling.md).
#: 10 rather than 100: a widening moves shares (a test fails every other probe).
PROBE_RELAX_FACTOR = 10.0


@register_policy
class MaxMinFairnessWaterFilling(Policy):
    """Lexicographic (water-filling) max-min fairness over normalized shares.

    Parameters
    ----------
    heterogeneity_aware : bool, default True
        As in :class:`~hetsched.formulations.max_min_fairness.MaxMinFairness`.
    rise_tol : float, default 1e-7
        A job whose share can rise by less than ``rise_tol`` times the level is treated as
        stuck at that level; a number in (0, 1), smaller than ``slack_cap``.
    slack_cap : float, default 1e-4
        Cap on each job's slack in the slack LPs, relative to the level (see above); a number
        in (0, 1].
    max_lps : int, default 100000
        Safety cap on LP re-solves (a positive integer); reaching it ends with status
        "iteration_limit". Independently, there are never more levels than jobs.
    """

    name = "max_min_fairness_water_filling"
    heterogeneity_aware: bool = True
    rise_tol: float = 1e-7
    slack_cap: float = 1e-4
    max_lps: int = 100_000

    def __post_init__(self) -> None:
        super().__post_init__()
        check_water_filling_params(self.rise_tol, self.slack_cap, self.max_lps)

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

        def attempt() -> PolicyOutcome:
            fill = water_fill(a, jobs, cluster, ctx, name=self.name, rise_tol=self.rise_tol,
                              slack_cap=self.slack_cap, max_lps=self.max_lps)
            return fill.outcome(lambda X: self.objective_of(X, jobs, cluster))

        # a chain of LPs: an inexact backend's failure re-runs the fill with HiGHS
        return retry_exact(ctx, attempt, what=self.name)


def check_water_filling_params(rise_tol, slack_cap, max_lps) -> None:
    """Validate the numerical parameters of :func:`water_fill` (ValidationError naming the
    parameter, the rule and the value)."""
    check_real(rise_tol, "rise_tol", low=0.0, high=1.0, low_open=True, high_open=True)
    check_real(slack_cap, "slack_cap", low=0.0, high=1.0, low_open=True)
    if rise_tol >= slack_cap:
        raise ValidationError(
            f"`rise_tol` must be smaller than `slack_cap` ({show(slack_cap)}): a rise is only seen "
            f"below the cap; got {show(rise_tol)}."
        )
    check_int(max_lps, "max_lps", low=1)


@dataclass(frozen=True, eq=False)
class WaterFill:
    """Result of :func:`water_fill`: X (NaN without a solution), level per group, counters.

    ``group_floors``: the level each frozen group was held at afterwards (its level less the
    numerical margin); X meets them, so they can be re-imposed as rows that stay feasible.
    """

    X: np.ndarray
    group_levels: np.ndarray
    status: str
    message: str
    n_levels: int
    lp_solves: int
    group_floors: np.ndarray | None = None

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

    Termination and numerics
    ------------------------
    Every level freezes at least one group, so there are at most ``n_groups`` levels and at
    most ``n_groups + 1`` LPs per level (each slack LP settles at least one group or ends the
    level); when no group is proven stuck (an inexact solver let every group "rise") the one
    that rose least is frozen. A level :math:`t^\star` is never re-imposed exactly: a solver
    returns points that break bounds and rows by up to its feasibility tolerance, and
    :math:`t^\star` may be inflated by that, so the floor used afterwards (t fixed in the slack
    LPs, frozen rows) is :math:`t^\star` minus a margin covering the measured violation of
    the returned point (see :meth:`_LevelModel.margin`). An LP that is feasible by
    construction and still comes back otherwise is re-solved warm with the frozen margins
    widened to 100 times as set, then cold, then cold with them widened 100 times more,
    before its status is reported (:meth:`_Fill.solve_feasible`). Time runs out: status
    "time_limit".
    """
    check_water_filling_params(rise_tol, slack_cap, max_lps)
    n, m = a.shape
    group_of = np.arange(n) if group_of is None else np.asarray(group_of, dtype=np.int64)
    n_groups = int(group_of.max()) + 1 if n else 0
    weight = np.ones(n_groups) if group_weight is None else np.asarray(group_weight, dtype=float)
    model = _LevelModel(a, jobs, cluster, ctx, name, group_of, weight, totals)
    fill = _Fill(model, ctx, weight, (n, m), rise_tol, slack_cap, max_lps, active=np.ones(n_groups, dtype=bool),
                 group_levels=np.full(n_groups, np.nan), group_margins=np.zeros(n_groups),
                 frozen_margins=np.zeros(n_groups))
    # every level freezes >= 1 group: the loop is bounded by n_groups whatever the solver does
    for _ in range(n_groups):
        if not fill.active.any():
            break
        stopped = _fill_level(fill)
        if stopped is not None:
            return stopped
    return _finish(fill)


@dataclass(eq=False)
class _Fill:
    """Loop state of :func:`water_fill`: the LP model, the parameters, which groups are still
    active, the level and margin each frozen group got, the levels so far, the last solution
    (``last``) and how many LPs were retried."""

    model: _LevelModel
    ctx: SolveContext
    weight: np.ndarray
    shape: tuple[int, int]
    rise_tol: float
    slack_cap: float
    max_lps: int
    active: np.ndarray
    group_levels: np.ndarray
    group_margins: np.ndarray
    frozen_margins: np.ndarray
    levels: list[float] = dataclasses.field(default_factory=list)
    last: SolverOutput | None = None
    retries: int = 0
    #: the last level, when its vertex duals alone froze groups there (no slack LP ran):
    #: the next level LP tells whether other groups are stuck at it too
    open_level: _Level | None = None

    def stop(self, out: SolverOutput | None, status: str, what: str) -> WaterFill:
        """The result when the fill ends early with ``status``: X of ``out`` (NaN without one)."""
        model = self.model
        X = model.lp.extract_X(out.x) if out is not None and out.has_solution else np.full(self.shape, np.nan)
        return WaterFill(X, self.group_levels, status, f"water filling: {what} after {len(self.levels)} level(s)",
                         len(self.levels), model.solves, self.group_levels - self.group_margins)

    def keep(self, out: SolverOutput, what: str) -> WaterFill | None:
        """Keep ``out`` as the last solution; when the LP ``what`` failed, the result that
        ends the fill instead (X of ``out`` if it has one, else of the last solution)."""
        if not out.success:
            return self.stop(out if out.has_solution else self.last, out.status, f"{what} ended {out.status!r}")
        self.last = out
        return None

    def out_of_time(self) -> WaterFill | None:
        """The "time_limit" result (X of the last solution) when no time is left, else None."""
        left = self.ctx.remaining()
        if left is not None and left <= 0:
            return self.stop(self.last, "time_limit", f"time limit of {self.ctx.time_limit}s reached")
        return None

    def solve_feasible(self, relax: Callable[[float, bool], object]) -> SolverOutput:
        """Solve an LP that is feasible by construction. On failure: ``relax(factor, True)``
        (widen its margins to ``factor`` times what they were set to, at least) and retry from
        the basis the first try started from; then cold; then ``relax(factor, False)`` (widen
        them ``factor`` times) and cold. The status reported is the last."""
        model = self.model
        before = model.basis()
        out = model.solve()
        for factor, cold in ((RELAX_FACTOR, False), (None, True), (RELAX_FACTOR, True)):
            if out.success or out.status == "time_limit" or model.solves >= self.max_lps:
                break
            self.retries += 1
            if factor is not None:
                relax(factor, not cold)
            if not cold:
                model.restore_basis(before)
            out = model.solve(cold=cold)
        return out

    def relax_for_probe(self) -> bool:
        """After a cap probe the solver failed on: :meth:`relax_frozen` to
        :data:`PROBE_RELAX_FACTOR` times the frozen margins as set (counted as a retry when
        that widened any). Whether it did."""
        widened = self.relax_frozen(PROBE_RELAX_FACTOR, True)
        self.retries += int(widened)
        return widened

    def relax_frozen(self, factor: float, bounded: bool = False) -> bool:
        """Widen the margins of the frozen groups (their rows drop with them): to at least
        ``factor`` times the margin each was frozen with when ``bounded``, else ``factor``
        times. The bounded form does not compound: a group frozen at a level of 3.6e-6
        (hierarchical, hard family, seed 2) ended 27 % below it after two widenings by 100
        of its 1e-10 margin, where one to 100 times it costs 0.3 %. Whether any widened."""
        frozen = ~self.active & ~np.isnan(self.group_levels)
        if bounded:
            frozen &= self.group_margins < factor * self.frozen_margins
        if not frozen.any():
            return False
        wide = (np.maximum(self.group_margins[frozen], factor * self.frozen_margins[frozen]) if bounded
                else factor * self.group_margins[frozen])
        self.model.freeze(frozen, (self.group_levels[frozen] - wide) * self.weight[frozen])
        self.group_margins[frozen] = wide
        return True

    def freeze(self, groups: np.ndarray, floors: float | np.ndarray, levels: float | np.ndarray,
               margins: float | np.ndarray) -> None:
        """Freeze ``groups`` (boolean mask): their rows keep ``row >= floors * W_g``; record
        their ``levels`` and ``margins``; they leave the active set."""
        self.model.freeze(groups, floors * self.weight[groups])
        self.group_levels[groups] = levels
        self.group_margins[groups] = margins
        self.frozen_margins[groups] = margins
        self.active &= ~groups


@dataclass(eq=False)
class _Level:
    """A level being settled by slack LPs: ``value`` t*, its ``margin`` (widened when a
    slack LP is retried) and the groups found ``stuck`` at it."""

    value: float
    margin: float
    stuck: np.ndarray | None = None

    @property
    def floor(self) -> float:
        """Where the level is re-imposed: its value less the margin."""
        return self.value - self.margin


def _fill_level(fill: _Fill) -> WaterFill | None:
    """One level: solve the level LP, then freeze either every group whose cap it reaches
    (:func:`_cap_search`) or the groups the duals and slack LPs find stuck. Updates ``fill``;
    returns the result when the fill stops here (LP cap, time, a failed LP), else None."""
    model = fill.model
    if model.solves >= fill.max_lps:
        return fill.stop(fill.last, "iteration_limit", f"stopped at {fill.max_lps} LPs")
    stopped = fill.out_of_time()
    if stopped is not None:
        return stopped
    model.level_mode()
    out = fill.solve_feasible(fill.relax_frozen)
    failed = fill.keep(out, f"level LP {len(fill.levels) + 1}")
    if failed is not None:
        return failed
    level = float(out.x[model.t])
    margin = model.margin(out.x, level, fill.active)
    previous, fill.open_level = fill.open_level, None
    capped = _cap_search(model, out, level, margin, fill.active, fill.max_lps, fill.relax_for_probe)
    if capped is not None:
        # the level is some groups' own cap: freeze every group whose cap the level can
        # reach (at its cap, less the margin), all at once instead of one level each
        groups, floors, margins, fill.last = capped
        fill.freeze(groups, floors, model.caps[groups], margins)
        fill.levels.extend(np.unique(model.caps[groups]).tolist())
        return None
    if previous is not None and level <= previous.value + _rise_threshold(fill, previous):
        # the level did not rise after the duals' groups froze: more groups are stuck at
        # it, which the slack LPs now find (the level is already counted)
        lv, new = previous, False
    else:
        lv, new = _Level(level, margin), True
        stuck = _dual_stuck(fill, out)
        if stuck.any():
            # groups with a nonzero vertex dual are stuck (complementary slackness): freeze
            # them without slack LPs; whether others are stuck too, the next level LP shows
            # (it rises unless they are), which costs one LP where slack LPs cost several
            lv.stuck = stuck
            fill.open_level = lv
            model.primal_first = True
    if lv.stuck is None or not new:
        stopped = _slack_lps(fill, out, lv)
        if stopped is not None:
            return stopped
    fill.freeze(lv.stuck, lv.floor, lv.value, lv.margin)
    if new:
        fill.levels.append(lv.value)
    return None


def _rise_threshold(fill: _Fill, lv: _Level) -> float:
    """How far above level ``lv`` a share must get to count as a rise: the solver's
    relative tolerance plus twice the margin (a stuck group's share can reach the margin
    above the floor, i.e. the level)."""
    return fill.rise_tol * max(abs(lv.value), 1e-12) + 2.0 * lv.margin


def _dual_stuck(fill: _Fill, out: SolverOutput) -> np.ndarray:
    """Active groups whose level row has a nonzero vertex dual in ``out`` (none without
    vertex duals): stuck at the level in every optimal solution."""
    model, active = fill.model, fill.active
    if model.vertex_duals and out.row_dual is not None:
        return active & (np.abs(out.row_dual[model.level_rows]) > 1e-9)
    return np.zeros(active.shape[0], dtype=bool)


def _slack_lps(fill: _Fill, out: SolverOutput, lv: _Level) -> WaterFill | None:
    """Which active groups are stuck at level ``lv`` (solved as ``out``): those whose level
    row has a nonzero vertex dual, then those that cannot rise in the slack LPs (see the
    module docstring); when none is proven stuck, those that rose least. Sets ``lv.stuck``
    (and widens ``lv.margin`` when a slack LP is retried); returns the result when the fill
    stops here (time, a failed LP), else None."""
    model, active = fill.model, fill.active
    scale = max(abs(lv.value), 1e-12)
    # a stuck group's slack can reach the margin (t is fixed `margin` below its share):
    # only a rise clearly above it counts
    threshold = _rise_threshold(fill, lv)
    stuck = _dual_stuck(fill, out)
    undecided = active & ~stuck
    rose_by = np.full(active.shape[0], np.inf)
    # small caps: if the undecided groups that can rise can all rise together by `cap`,
    # maximizing the capped sum raises every one of them, so one LP usually settles
    # all of them (a convex combination of single-group raises raises all at once)
    cap = max(fill.slack_cap * scale, 10.0 * threshold)

    def relax_t(factor: float, _bounded: bool) -> None:
        lv.margin *= factor  # the level's own margin: nothing compounds across levels
        model.slack_mode(undecided, cap, lv.floor)

    for _ in range(int(undecided.sum())):  # each slack LP settles >= 1 group or ends
        if not undecided.any():
            break
        stopped = fill.out_of_time()
        if stopped is not None:
            return stopped
        model.slack_mode(undecided, cap, lv.floor)
        out = fill.solve_feasible(relax_t)
        failed = fill.keep(out, f"slack LP at level {len(fill.levels) + 1}")
        if failed is not None:
            return failed
        sigma = out.x[model.s_cols]
        rose = undecided & (sigma > threshold)
        if not rose.any():
            stuck |= undecided
            break
        rose_by[rose] = sigma[rose]
        undecided &= ~rose
    if not stuck.any():
        # t* was optimal, so not every group can rise: the solver was inexact. Freeze
        # the group(s) that rose least, which bounds the number of levels.
        lowest = rose_by[active].min()
        stuck = active & (rose_by <= lowest)
    lv.stuck = stuck
    return None


def _finish(fill: _Fill) -> WaterFill:
    """The result once the level loop ended: every group frozen ("optimal", X of the last
    solution; zeros when there were no groups), else "iteration_limit"."""
    model, group_levels = fill.model, fill.group_levels
    if fill.active.any():  # unreachable: every level freezes a group
        return fill.stop(fill.last, "iteration_limit",
                         f"{int(fill.active.sum())} group(s) left after {fill.active.shape[0]} levels")
    if fill.last is None:  # no groups
        return WaterFill(np.zeros(fill.shape), group_levels, "optimal", "water filling: nothing to fill", 0, 0,
                         group_levels)
    note = f", {fill.retries} retried" if fill.retries else ""
    return WaterFill(model.lp.extract_X(fill.last.x), group_levels, "optimal",
                     f"water filling: {len(fill.levels)} level(s), {model.solves} LP solve(s) ({model.mode}{note})",
                     len(fill.levels), model.solves, group_levels - fill.group_margins)


def _cap_search(model: _LevelModel, out, level: float, margin: float, active: np.ndarray, max_lps: int,
                relax: Callable[[], bool] | None = None):
    r"""Groups frozen at their own caps when the level LP stopped at the lowest active cap.

    A group's level never exceeds its cap :math:`u_g` (every member's whole time on its best
    type). When the level :math:`t^\star` reached the lowest active cap, the groups with
    caps :math:`u_g \le c` are all at their caps in the lexicographic optimum as long as
    every active group can reach :math:`\min(u_g, c)` at once ("c is reachable": then the
    next level that capacity imposes is at least c). Reachability is monotone in c and is
    tested by one always-feasible LP: the rows of groups with :math:`u_g \le c` ask for
    :math:`t u_g / c`, the others for t; c is reachable iff :math:`t^\star \ge c` less the
    margin. A search over the distinct active caps finds the largest reachable one in
    O(log) LPs instead of one level per cap: galloping up from the lowest cap when the last
    search froze few caps (:func:`_gallop_step`), bisecting otherwise, and probing a guess
    after a failed probe (:func:`_binding_cap_guess`) while the guess falls inside the
    bracket (after a wrong guess it bisects once).

    A probe the solver fails on is feasible by construction (t = 0), so the frozen floors or
    the solver are at fault: ``relax()`` widens the frozen margins (the first time in a
    search, :data:`PROBE_RELAX_FACTOR`) and the probe runs again from the same basis; failing
    again (or when nothing widened), it counts as out of reach: no cold re-solve, the next
    probe starts from the basis the failed one started from, and only caps a successful
    probe reached freeze.

    Returns ``(groups, floors, margins, out)`` (``out``: a solution meeting the floors) or
    None when the level is below every active cap (capacity bound it) or time ran out.
    """
    caps = model.caps
    cmin = float(caps[active].min())
    if not (cmin > 0 and level >= cmin - margin):
        return None
    vals = np.unique(caps[active])
    best_i, best_out, best_margin = 0, out, margin
    lo, hi = 1, vals.size - 1
    # when the last search froze few caps, gallop up from the lowest cap (first step: what
    # it froze) until a probe fails; otherwise (and after that) bisect, taking the guesses
    # failed probes give (_binding_cap_guess) while they fall inside the bracket
    step = _gallop_step(model.cap_hint, vals.size)
    gallop, guess = step > 0, None
    try:
        while lo <= hi and model.solves < max_lps:
            guessed = guess is not None and lo <= guess <= hi
            if guessed:
                mid = guess
            elif step:
                mid = min(hi, best_i + step)
            else:
                mid = (lo + hi) // 2
            guess = None
            c = float(vals[mid])
            # every active row is set: a row asked for u_g / c' by an earlier probe is reset
            model.set_level_coefficients(active, np.minimum(caps[active] / c, 1.0))
            before = model.basis()
            probe = model.solve()
            if probe.status == "time_limit":
                return None
            if not probe.success and relax is not None and relax():
                # feasible at t = 0 unless the frozen floors leave no point the solver
                # accepts (the last level LP met them within its tolerance): widen their
                # margins (once per search) and probe again from the same basis
                relax = None
                model.restore_basis(before)
                probe = model.solve()
            if not probe.success:
                # feasible by construction (t = 0), so the solver erred: the probe proves
                # nothing and c counts as out of reach (only caps a probe reached freeze).
                # Its cold re-solves cost 1-3.5 s each on hierarchical 2,048 x 3 hard (IPX
                # with crossover) and often failed too; the next probe starts from the basis
                # this one started from
                model.restore_basis(before)
                hi = mid - 1
                step, guess = 0, None
                continue
            t = float(probe.x[model.t])
            m = model.margin(probe.x, c, active)
            if t >= c - m:
                best_i, best_out, best_margin = mid, probe, m
                lo = mid + 1
                step = 2 * step if (step and gallop) else 0
            else:
                hi = mid - 1
                step = 0
                # after a wrong guess, bisect once: at least every other probe halves the
                # bracket, so a search costs O(log) probes whatever the guesses
                guess = None if guessed else _binding_cap_guess(model, probe, active, c, t, vals)
    finally:
        model.set_level_coefficients(active, np.ones(int(active.sum())))
    model.cap_hint = best_i
    c = float(vals[best_i])
    groups = active & (caps <= c)
    # the solution kept meets row_g >= W_g u_g (t / c) >= W_g u_g (1 - best_margin / c)
    rel = max(best_margin, margin if best_i == 0 else 0.0) / c
    floors = caps[groups] * (1.0 - rel)
    return groups, floors, caps[groups] * rel, best_out


def _gallop_step(hint: int | None, n_caps: int) -> int:
    """First galloping step of a cap search (0: bisect): what the last search froze, when
    that was few of the caps (on distinct jobs under hierarchical fairness most searches
    freeze a handful of 2,000 caps; water filling's first search freezes most of them)."""
    return max(1, hint) if hint is not None and hint < n_caps / 8 else 0


def _binding_cap_guess(model: _LevelModel, probe, active: np.ndarray, c: float, t: float,
                       vals: np.ndarray) -> int | None:
    """After an unreachable probe at c, a guess at the index of the largest reachable cap:
    below the smallest cap among the capped groups whose level rows bind (positive dual:
    such a group held the level down, so caps from its own up are likely out of reach), else
    the largest cap at most the level t the probe reached. None when that is the lowest cap.
    Only a guess: the search keeps its bracket and bisects when a guess falls outside it."""
    idx = np.flatnonzero(active)
    capped = model.caps[idx] <= c
    if probe.row_dual is not None:
        binding = capped & (np.abs(probe.row_dual[model.level_rows[idx]]) > 1e-9)
        if binding.any():
            j = int(np.searchsorted(vals, float(model.caps[idx][binding].min()))) - 1
            return j if j >= 1 else None
    # the level t the probe reached: every group held min(u_g, c) t / c, so caps up to t
    # are the likely reachable ones
    j = int(np.searchsorted(vals, t, side="right")) - 1
    return j if j >= 1 else None


def _simplex_options(strategy: int, devex: bool = False) -> dict:
    """HiGHS options of a warm re-solve with ``strategy``. Primal simplex ends with a dual
    simplex clean-up whose steepest-edge weights HiGHS computes from scratch (one BTRAN per
    row): on hierarchical 2,048 x 3 hard that was 30 % of the run, so primal runs ask for
    Devex weights there (``simplex_dual_edge_weight_strategy`` 1); dual runs keep HiGHS's
    own choice (-1) unless ``devex`` (see :data:`DEVEX_AFTER_MOVED_COEFFICIENTS`)."""
    return {"solver": "simplex", "simplex_strategy": strategy,
            "simplex_dual_edge_weight_strategy": 1 if (strategy == SIMPLEX_PRIMAL or devex) else -1}


class _LevelModel:
    """The water-filling LP, changed between solves.

    Two modes with the same changes: ``"warm"`` (solver "auto" or a backend with the
    ``warm_start`` capability: HiGHS) keeps it loaded
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
        self.weight = weight
        self.ctx = ctx
        lp = self.lp
        # measured on 2,048 unaggregated catalogue jobs (26 levels): warm HiGHS re-solves
        # 76 LPs in 27 s; rebuilt programs through Clarabel ~0.27 s each and more of them
        self.mode = "warm" if ctx.warm_start else "rebuild"
        self.vertex_duals = self.mode == "warm"
        self.solves = 0
        # first solve of the session: what "auto" picks among warm-startable backends
        # (dual simplex; IPX with crossover when large)
        self._first = choose_auto(lp, require=("warm_start",))[1] if self.mode == "warm" else {}
        self.session = ctx.open_session(lp, purpose=f"policy {name!r}") if self.mode == "warm" else None
        self.c, self.col_lb, self.col_ub = lp.c.copy(), lp.col_lb.copy(), lp.col_ub.copy()
        self.row_lb = lp.row_lb.copy()
        self.A = lp.A.copy()
        # position of each level row's t coefficient inside A.data (to zero it on freezing)
        # (level rows are consecutive and each holds t once, so row order is group order)
        row_of_entry = np.repeat(np.arange(self.A.shape[0]), np.diff(self.A.indptr))
        in_level = (row_of_entry >= self.level_rows[0]) & (row_of_entry <= self.level_rows[-1])
        self.t_pos = np.flatnonzero(in_level & (self.A.indices == self.t))
        # per group: sum of |share coefficients| / W_g, what a violation of eps on every
        # variable bound can add to the group's level
        self.level_l1 = np.bincount(group_of[X.job], weights=np.abs(a[X.job, X.gpu]),
                                    minlength=n_groups) / weight
        # the largest violation a returned point may have: HiGHS' feasibility tolerance (warm
        # mode); for other backends what SolveContext.run accepts before re-solving with HiGHS
        # (interior points miss rows by far more than 1e-9: a margin built on 1e-9 left the
        # next slack LP infeasible, the spurious "slack LP ... ended 'infeasible'")
        self.ptol = (float(ctx.options.get("primal_feasibility_tolerance", 1e-9)) if self.mode == "warm"
                     else accepted_violation(ctx.solver))
        # per group: the highest level it can reach at all (every member's whole time on
        # its best type): sum_j max_k a_jk / W_g
        self.caps = np.bincount(group_of, weights=np.where(a > 0, a, 0.0).max(axis=1, initial=0.0),
                                minlength=n_groups) / weight
        #: caps the last cap search froze above the lowest (None before the first search)
        self.cap_hint: int | None = None
        #: the next warm re-solve starts with primal simplex (set after a freeze on duals
        #: alone: the last point still meets every row)
        self.primal_first = False
        #: level-row coefficients moved since the last solve (see DEVEX_AFTER_MOVED_COEFFICIENTS)
        self.moved = 0

    def set_level_coefficients(self, groups: np.ndarray, factor: np.ndarray) -> None:
        """Level rows of ``groups`` (boolean mask) read ``... - W_g factor_g t``: the group is
        asked for ``factor_g`` times the level (1 restores the plain row)."""
        idx = np.flatnonzero(groups)
        vals = -self.weight[idx] * factor
        changed = self.A.data[self.t_pos[idx]] != vals  # only coefficients that move reach the solver
        idx, vals = idx[changed], vals[changed]
        self.A.data[self.t_pos[idx]] = vals
        self.moved += int(idx.size)
        if self.session is not None and idx.size:
            self.session.set_coeffs(self.level_rows[idx], self.t, vals)

    def basis(self):
        """The HiGHS basis of the session (None in rebuild mode)."""
        return self.session.h.getBasis() if self.session is not None else None

    def restore_basis(self, basis) -> None:
        """Start the next warm solve from ``basis`` (from :meth:`basis`; None: nothing to do)."""
        if basis is not None:
            self.session.h.setBasis(basis)

    def violation(self, x: np.ndarray) -> float:
        """Largest bound or row violation of ``x`` in the current program (0 when feasible)."""
        act = self.A @ x
        with np.errstate(invalid="ignore"):
            parts = [self.row_lb - act, act - self.lp.row_ub, self.col_lb - x, x - self.col_ub]
        worst = max((float(np.nanmax(p)) for p in parts if p.size), default=0.0)
        return max(worst, 0.0)

    def margin(self, x: np.ndarray, level: float, active: np.ndarray) -> float:
        """How far below a level ``level`` read off ``x`` it is safe to re-impose it.

        ``x`` breaks bounds and rows by up to ``v`` = :meth:`violation` (taken between 1e-3
        and 1 times ``ptol``: HiGHS' feasibility tolerance in warm mode; in rebuild mode
        :func:`~hetsched.solvers.fallback.accepted_violation` of the backend: 1e-9 for simplex
        backends such as CBC (which prints 8 digits but accepts its own violations), 1e-7 for
        interior-point ones, beyond which :meth:`~hetsched.solvers.context.SolveContext.run` re-solves
        the program with HiGHS), which can
        lift a group's level by up to ``v`` times
        the sum of its coefficients (and ``v / W_g`` through its own row): the margin is
        ``MARGIN_FACTOR`` times that plus the relative slack ``STAGE2_RELATIVE_SLACK``.
        It is kept this small on purpose: a frozen group may end anywhere within its margin,
        and a shift there can move another group's share a hundred times as much. A later
        LP that overshoots a row by the tolerance against a frozen floor can still leave no
        exactly feasible point; :func:`water_fill` then widens the margins and re-solves.
        """
        v = min(max(self.violation(x), 1e-3 * self.ptol), self.ptol)
        spread = float(self.level_l1[active].max()) + 1.0 / float(self.weight[active].min()) if active.any() else 1.0
        return STAGE2_RELATIVE_SLACK * abs(level) + MARGIN_FACTOR * v * spread
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

    def _warm_solve(self, devex: bool = False) -> SolverOutput:
        """Re-solve from the current basis with dual simplex (primal simplex when
        :attr:`primal_first` is set, once); when that ends "infeasible", restore the basis
        it started from and re-solve with the other one. ``devex``: dual simplex with Devex
        edge weights (after a cap probe moved many coefficients,
        :data:`DEVEX_AFTER_MOVED_COEFFICIENTS`).

        The program is feasible by construction. On the hard family, after a group froze
        (its row lost t: the basis turns dual infeasible, the last point stays feasible),
        dual simplex ran 1,000-3,000 iterations into a false "infeasible" on 15 of 40
        level LPs, and the cold re-solve that followed took 0.2-0.3 s each; primal simplex
        from the same basis finished 14 of them in 1-15 iterations (about 3 ms).
        """
        basis = self.basis()
        order = (SIMPLEX_PRIMAL, SIMPLEX_DUAL) if self.primal_first else (SIMPLEX_DUAL, SIMPLEX_PRIMAL)
        self.primal_first = False
        out = self.ctx.rerun(self.session, options=_simplex_options(order[0], devex))
        if out.status != "infeasible":
            return out
        self.restore_basis(basis)
        return self.ctx.rerun(self.session, options=_simplex_options(order[1], devex))

    def solve(self, cold: bool = False):
        """Solve the current program (warm re-solve or fresh program; ``cold``: drop the basis)."""
        self.solves += 1
        if self.session is not None:
            devex, self.moved = self.moved > DEVEX_AFTER_MOVED_COEFFICIENTS, 0
            if self.session.n_runs == 0:
                return self.ctx.rerun(self.session, options={"simplex_strategy": SIMPLEX_DUAL, **self._first})
            if cold:
                self.session.clear_basis()
                return self.ctx.rerun(self.session, options=_simplex_options(SIMPLEX_DUAL))
            return self._warm_solve(devex)
        lp = dataclasses.replace(self.lp, c=self.c.copy(), A=self.A.copy(), col_lb=self.col_lb.copy(),
                                 col_ub=self.col_ub.copy(), row_lb=self.row_lb.copy())
        return self.ctx.run(lp)
