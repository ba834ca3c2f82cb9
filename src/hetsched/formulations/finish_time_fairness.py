r"""Finish-time fairness (Themis, NSDI'20; Gavel's definition) with LPs only.

Math
----
With :math:`iso_j` the isolated throughput (see :mod:`.common`), :math:`e_j` the
isolated-equivalent time already used (``isolated_time_elapsed``, default 0) and
:math:`t_j` the time since the job started (``time_since_start``, default 0):

.. math::

    \rho_j(X) = \frac{t_j + R_j / \mathrm{thr}_j(X)}{D_j}, \qquad D_j = e_j + R_j / iso_j,
    \qquad \rho^\star = \min_X \max_j \rho_j(X).

For a fixed :math:`\rho` with :math:`\rho D_j > t_j` the condition
:math:`\rho_j(X) \le \rho` is linear: :math:`\mathrm{thr}_j(X) \ge R_j / (\rho D_j - t_j)`.
Each step solves

.. math::

    u^\star(\rho) = \max_{X,u}\, u \quad\text{s.t.}\quad
    \mathrm{thr}_j(X)\,\frac{\rho D_j - t_j}{R_j} \ge u\ \ \forall j,\ \text{base constraints}.

* Any X is achievable, so :math:`\max_j \rho_j(X^\star)` is an upper bound.
* If :math:`u^\star < 1`, every feasible :math:`\rho'` satisfies
  :math:`\rho' \ge \min_j\, [\rho / u^\star - t_j (1/u^\star - 1) / D_j]` (a lower bound
  strictly above :math:`\rho`). With all :math:`t_j = 0` this bound is
  :math:`\rho / u^\star`, exact after one LP.
* The first :math:`\rho` is the single-job bound :math:`\max_j (t_j + R_j / \max_k T_{jk}) / D_j`.
* Next :math:`\rho`: a Newton step on :math:`u^\star(\rho) = 1` whose slope comes from the
  level-row duals :math:`y` (envelope theorem:
  :math:`du^\star/d\rho = \sum_j y_j\, \mathrm{thr}_j(X^\star) D_j / R_j` with
  :math:`\sum_j y_j = 1`), a secant step for backends without duals, bisection whenever a
  step leaves the bracket. Steps are aimed a quarter-tolerance past the root so that the
  last ones land on both sides of it.

Steps stop when ``upper - lower <= rtol * lower``. Gavel solves this as a conic program
built job by job; this needs a handful of LPs.

In numpy: ``rho = (t + R / (T * X).sum(1)) / D;  objective = rho.max()``.

Examples
--------
>>> import hetsched as hs
>>> jobs = hs.JobSet([[1.0], [1.0]], gpu_types=["v100"], steps_remaining=[100.0, 100.0])
>>> round(hs.solve("finish_time_fairness", jobs, hs.Cluster({"v100": 2})).objective, 6)
1.0
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..inputs.cluster import Cluster
from ..inputs.jobs import JobSet
from ..solvers.context import SolveContext
from ..solvers.program import LinearProgram
from ..validation import check_int, check_real
from .base import Policy, PolicyOutcome, register_policy
from .common import (
    STAGE2_RELATIVE_SLACK,
    _warm_meta,
    isolated_throughput,
    level_program,
    usable_mask,
)
from .spaces.space import AllocationSpace, SpaceOptions

__all__ = ["FinishTimeFairness"]


@register_policy
class FinishTimeFairness(SpaceOptions, Policy):
    r"""Minimize the worst finish-time fairness ratio ρ (Themis).

    Parameters
    ----------
    rtol : float, default 1e-7
        Relative gap between the best allocation found and the proven lower bound at which
        the iteration stops.
    max_steps : int, default 60
        Most LPs to solve; reaching it gives status "iteration_limit" with the best X.
    second_stage : bool, default True
        After convergence, keep every job at ρ ≤ ρ* and maximize total normalized progress
        :math:`\sum_j \mu_j a_j(\rho^\star) \cdot X_j` (one more LP), so capacity some job
        can use is not left idle.
    packing, placement_sensitivity : optional
        Space sharing and consolidated / unconsolidated rows; see
        :mod:`hetsched.formulations.spaces.space`. :math:`D_j` stays the isolated (unshared,
        consolidated) reference.
    """

    name = "finish_time_fairness"
    requires = ("steps_remaining",)
    reads = ("steps_remaining", "time_since_start", "isolated_time_elapsed")
    rtol: float = 1e-7
    max_steps: int = 60
    second_stage: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        check_real(self.rtol, "rtol", low=0.0, high=1.0, high_open=True)
        check_int(self.max_steps, "max_steps", low=1)

    def _terms(self, jobs: JobSet, cluster: Cluster) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        cap = cluster.capacities(jobs.gpu_types)
        R = jobs.steps_remaining
        t = jobs.field("time_since_start", 0.0)
        e = jobs.field("isolated_time_elapsed", 0.0)
        D = e + R / isolated_throughput(jobs, cap)
        return R, t, e, D

    def coefficients(self, jobs: JobSet, cluster: Cluster, rho: float) -> np.ndarray:
        """``a[j,k] = T[j,k] (rho D_j - t_j) / R_j`` on usable pairs: ``rho_j(X) <= rho`` iff ``a_j . X >= 1``."""
        cap = cluster.capacities(jobs.gpu_types)
        mask = usable_mask(jobs.throughputs, jobs.scale_factors, cap)
        R, t, _, D = self._terms(jobs, cluster)
        return np.where(mask, jobs.throughputs * ((rho * D - t) / R)[:, None], 0.0)

    def formulate(self, jobs: JobSet, cluster: Cluster, *, rho: float | None = None,
                  floor: float | None = None, space: AllocationSpace | None = None) -> LinearProgram:
        """The LP for level ``rho`` (default: the single-job lower bound); see :func:`level_program`.

        ``space``: the allocation space (default: the policy's, see :meth:`allocation_space`).
        """
        if space is None:
            space = self.allocation_space(jobs, cluster)
        if rho is None:
            rho = self.lower_bound(jobs, cluster, space=space)
        a = self.coefficients(jobs, cluster, rho)
        return level_program(jobs, cluster.capacities(jobs.gpu_types), a, floor=floor,
                             name=f"{self.name}:rho={rho:.9g}", meta={"rho": rho}, cluster=cluster, space=space)

    def lower_bound(self, jobs: JobSet, cluster: Cluster, *, space: AllocationSpace | None = None) -> float:
        """``max_j (t_j + R_j / max_k T_jk) / D_j``: no allocation does better.

        With an allocation space, ``max_k T_jk`` is the best throughput per unit of the job's
        time over its rows (a pair or unconsolidated row may, in principle, be faster).
        """
        cap = cluster.capacities(jobs.gpu_types)
        mask = usable_mask(jobs.throughputs, jobs.scale_factors, cap)
        R, t, _, D = self._terms(jobs, cluster)
        if space is None:
            space = self.allocation_space(jobs, cluster)
        if space is None:
            best = np.where(mask, jobs.throughputs, 0.0).max(axis=1)
        else:
            best = space.best_throughput(jobs.throughputs)
        return float(((t + R / best) / D).max())

    def rho(self, X: np.ndarray, jobs: JobSet, cluster: Cluster) -> np.ndarray:
        """Per-row ρ of allocation ``X`` (inf where a job gets no throughput)."""
        R, t, _, D = self._terms(jobs, cluster)
        thr = (jobs.throughputs * X).sum(axis=1)
        with np.errstate(divide="ignore"):
            return (t + R / thr) / D

    def objective_of(self, X: np.ndarray, jobs: JobSet, cluster: Cluster) -> float:
        """Worst ρ of ``X``."""
        return float(self.rho(X, jobs, cluster).max())

    def solve(self, jobs: JobSet, cluster: Cluster, ctx: SolveContext) -> PolicyOutcome:
        by_class = self.solve_by_class(jobs, cluster, ctx)  # packing / placement sensitivity: exact classes
        if by_class is not None:
            return by_class
        R, t, _, D = self._terms(jobs, cluster)
        n, m = jobs.n_jobs, jobs.n_types
        with ctx.building():
            space = self.allocation_space(jobs, cluster)
        state = _Search(lo=self.lower_bound(jobs, cluster, space=space))

        def evaluate(rho: float) -> tuple[float, float | None] | None:
            """(u*(rho), du*/drho or None); updates bounds and the best X. None on failure."""
            with ctx.building():
                lp = self.formulate(jobs, cluster, rho=rho, space=space)
            out = ctx.run(lp)
            if out.has_solution:
                X = lp.extract_X(out.x)
                report = getattr(lp, "report", None)
                state.offer(X, self.objective_of(X, jobs, cluster),
                            None if report is None else (lambda r=report, x=out.x: r(x, jobs)),
                            warm=_warm_meta(out) if out.success else None)
            if not out.success:
                state.fail(f"LP at rho={rho:.9g} ended {out.status!r} ({out.message})", out.status)
                return None
            u = float(out.x[lp.meta["t"]])
            if 0.0 < u < 1.0:
                # every feasible rho' has min_j (rho D_j - t_j) / (rho' D_j - t_j) <= u
                state.lo = max(state.lo, rho, float(np.min(rho / u - t * (1.0 / u - 1.0) / D)))
            slope = None
            if out.row_dual is not None:
                # envelope theorem: d u*/d rho = sum_j y_j thr_j(X*) D_j / R_j, y = level-row duals
                lv = int(lp.meta.get("level_rows", n + m))
                y = np.abs(out.row_dual[lv : lv + n])
                if y.sum() > 0:
                    thr = (jobs.throughputs * lp.extract_X(out.x)).sum(axis=1)
                    slope = float((y / y.sum()) @ (thr * D / R))
            return u, slope

        # Safeguarded Newton on u*(rho) = 1 (u* increases with rho), secant when the
        # backend gives no duals, bisection when a step leaves the bracket. Each step is
        # aimed a quarter-tolerance past the root so steps alternate sides near the end.
        rho, prev = state.lo, None
        while state.steps < self.max_steps:
            state.steps += 1
            res = evaluate(rho)
            if res is None or state.converged(self.rtol):
                break
            u, slope = res
            if slope is None or slope <= 0:
                slope = (u - prev[1]) / (rho - prev[0]) if prev is not None and rho != prev[0] else None
            prev = (rho, u)
            margin = 0.25 * self.rtol * state.lo
            if slope is not None and slope > 0:
                c = rho + (1.0 - u) / slope + (margin if u < 1.0 else -margin)
            else:
                c = 0.5 * (state.lo + state.hi)
            if not (state.lo + margin <= c <= state.hi - margin):
                c = 0.5 * (state.lo + state.hi)
            rho = c
        outcome = state.outcome(self.rtol, self.max_steps, (jobs.n_jobs, jobs.n_types))
        if not (self.second_stage and outcome.status == "optimal"):
            return outcome
        with ctx.building():
            lp2 = self.formulate(jobs, cluster, rho=state.hi, floor=1.0 - STAGE2_RELATIVE_SLACK, space=space)
            if state.warm is not None:
                # the best allocation meets stage 2's floors (its rho is state.hi): the
                # structured solver's first prices start from it (same variables, same rows)
                lp2 = dataclasses.replace(lp2, meta={**lp2.meta, **state.warm})
        out2 = ctx.run(lp2)
        if not out2.success:
            return PolicyOutcome(X=outcome.X, objective=outcome.objective, status=outcome.status,
                                 message=f"{outcome.message}; stage 2 ended {out2.status!r}, returning the stage-1 allocation",
                                 extra={**outcome.extra, "second_stage_status": out2.status})
        return self.outcome(lp2, out2, jobs, cluster, **outcome.extra, second_stage_status=out2.status)


class _Search:
    """Bounds, best allocation and status of the finish-time-fairness search."""

    def __init__(self, lo: float) -> None:
        self.lo = lo
        self.hi = np.inf
        self.X: np.ndarray | None = None
        self.steps = 0
        self.status: str | None = None
        self.message = ""
        self.describe = None  # callable -> extra of the best X (allocation spaces), or None
        self.warm: dict | None = None  # the structured solver's warm start from the best X's LP, or None

    def offer(self, X: np.ndarray, value: float, describe=None, warm: dict | None = None) -> None:
        if value < self.hi or self.X is None:
            self.hi = min(self.hi, value)
            self.X = X
            self.describe = describe
            self.warm = warm

    def fail(self, message: str, status: str) -> None:
        self.status, self.message = status, message

    def converged(self, rtol: float) -> bool:
        return self.X is not None and self.hi - self.lo <= rtol * self.lo

    def outcome(self, rtol: float, max_steps: int, shape: tuple[int, int]) -> PolicyOutcome:
        bounds = f"rho in [{self.lo:.10g}, {self.hi:.10g}]"
        if self.status is None:
            if self.converged(rtol):
                self.status, self.message = "optimal", f"converged: {bounds}"
            else:
                self.status, self.message = "iteration_limit", f"stopped after {max_steps} steps: {bounds}"
        extra = {"lower_bound": self.lo, "upper_bound": self.hi}
        if self.X is None:
            return PolicyOutcome(X=np.full(shape, np.nan), objective=float("nan"), status=self.status,
                                 message=self.message, extra=extra)
        objective = self.hi
        if self.describe is not None:
            extra.update(self.describe())
        return PolicyOutcome(X=self.X, objective=objective, status=self.status, message=self.message, extra=extra)
