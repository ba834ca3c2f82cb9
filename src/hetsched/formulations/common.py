r"""Pieces every allocation program shares.

Base constraints (Gavel, OSDI'20, §3.1), with :math:`\mu_j` the multiplicity of row j
(1 unless identical jobs were merged into one class):

.. math::

    X_{jk} \ge 0, \qquad \sum_k X_{jk} \le 1, \qquad \sum_j \mu_j s_j X_{jk} \le C_k.

Reference throughputs:

* proportional :math:`p_j = \sum_k T_{jk} C_k / \sum_k C_k`;
* isolated :math:`x^{iso}_{jk} = (C_k / n) / s_j`, each row divided by
  :math:`\max(1, \sum_k x^{iso}_{jk})`, and :math:`iso_j = \sum_k T_{jk} x^{iso}_{jk}`
  (n counts every job, multiplicities included).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse as sp

from ..inputs.jobs import (  # the usable-GPU rule lives with the jobs (inputs use it too)
    JobSet,
    usable_mask,
)
from ..solvers.program import LinearProgram
from .builder import AllocationVars, ProgramBuilder
from .level_matrix import level_rows_csr
from .resources import add_resource_rows

__all__ = [
    "add_base_rows",
    "isolated_allocation",
    "isolated_throughput",
    "proportional_throughput",
    "retry_exact",
    "throughput_rows",
    "usable_mask",
]


def add_base_rows(b: ProgramBuilder, X: AllocationVars, jobs: JobSet, capacities: np.ndarray, *,
                  cluster=None, resources: bool = True) -> tuple[int, int]:
    """Add ``sum_k X[j,k] <= 1`` (one row per job) and the capacity rows (one per type).

    With ``resources`` (default) and jobs that state ``cpus_per_gpu`` / ``mem_per_gpu``,
    also the host-resource rows of :func:`~hetsched.formulations.resources.add_resource_rows`
    (they need ``cluster``; no rows and no effect when the jobs state no such demand).
    Returns the first row index of the job rows and of the capacity rows.
    """
    if not isinstance(X, AllocationVars):  # an allocation space with pair / unconsolidated rows (.space)
        return X.add_base_rows(b, jobs, capacities, cluster=cluster, resources=resources)
    n, m = X.mask.shape
    cols = X.cols
    r_jobs = b.add_rows(rows=X.job, cols=cols, vals=1.0, lb=-np.inf, ub=1.0, n_rows=n)
    load = (jobs.multiplicity * jobs.scale_factors).astype(float)[X.job]
    r_cap = b.add_rows(rows=X.gpu, cols=cols, vals=load, lb=-np.inf, ub=capacities, n_rows=m)
    if resources:
        add_resource_rows(b, X, jobs, cluster)
    return r_jobs, r_cap


def throughput_rows(X: AllocationVars, coeff: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """COO triplets (rows=job, cols=var, vals=coeff[j,k]) of ``sum_k coeff[j,k] X[j,k]``."""
    if not isinstance(X, AllocationVars):  # an allocation space: coeff times each member's relative speed
        return X.throughput_rows(coeff)
    return X.job, X.cols, coeff[X.job, X.gpu]


def proportional_throughput(T: np.ndarray, capacities: np.ndarray) -> np.ndarray:
    """:math:`p_j = \\sum_k T_{jk} C_k / \\sum_k C_k` (0 for an empty cluster)."""
    total = capacities.sum()
    if total <= 0:
        return np.zeros(T.shape[0])
    return T @ capacities / total


def isolated_allocation(jobs: JobSet, capacities: np.ndarray) -> np.ndarray:
    """Themis/Gavel isolated allocation :math:`x^{iso}` (feasible: capacity and rows hold)."""
    return isolated_allocation_arrays(jobs.scale_factors, capacities, jobs.n_total)


def isolated_allocation_arrays(scale_factors: np.ndarray, capacities: np.ndarray, n_total: int) -> np.ndarray:
    """:func:`isolated_allocation` from gang sizes alone (``n_total`` jobs share the cluster)."""
    s = np.asarray(scale_factors)
    x = np.broadcast_to(capacities / max(int(n_total), 1), (s.shape[0], capacities.shape[0])) / s[:, None]
    x = x * (capacities[None, :] >= s[:, None])
    rows = x.sum(axis=1)
    return x / np.maximum(1.0, rows)[:, None]


def isolated_throughput(jobs: JobSet, capacities: np.ndarray, T: np.ndarray | None = None) -> np.ndarray:
    """:math:`iso_j = \\sum_k T_{jk} x^{iso}_{jk}`."""
    T = jobs.throughputs if T is None else T
    return (T * isolated_allocation(jobs, capacities)).sum(axis=1)


def level_program(
    jobs: JobSet,
    capacities: np.ndarray,
    a: np.ndarray,
    *,
    floor: float | None = None,
    name: str = "level",
    meta: dict | None = None,
    cluster=None,
    space=None,
):
    r"""The max-min "level" LP shared by max-min fairness, makespan and finish-time fairness.

    With ``floor`` None (stage 1):

    .. math:: \max_{X, t}\ t \quad\text{s.t.}\quad \sum_k a_{jk} X_{jk} \ge t\ \ \forall j,\ \text{base}.

    With a ``floor`` (stage 2): :math:`t` is fixed at ``floor`` and the objective becomes
    :math:`\max \sum_j \mu_j \sum_k a_{jk} X_{jk}`, which keeps the level and spends every
    unit of capacity some job can still use. Variables exist where ``a > 0``.
    ``meta["t"]`` is the index of t.

    With a ``space`` (:class:`~hetsched.formulations.spaces.space.AllocationSpace`: pair and/or
    unconsolidated rows) the variables are the space's and each member's coefficient is
    ``a`` times its relative speed; the result is a
    :class:`~hetsched.formulations.spaces.space.SpaceProgram` (``meta["level_rows"]``: first level row).
    """
    if space is None:
        return _level_program_direct(jobs, capacities, a, floor=floor, name=name, meta=meta, cluster=cluster)
    # an allocation space (pairs, unconsolidated variables): assembled by the builder
    b = ProgramBuilder()
    cost = None if floor is None else jobs.multiplicity[:, None] * a
    X = space.add_to(b, cost=0.0 if cost is None else space.values(cost))
    if floor is None:
        t = b.add_vars(1, lb=0.0, ub=np.inf, cost=1.0)
    else:
        t = b.add_vars(1, lb=floor, ub=floor, cost=0.0)
    add_base_rows(b, X, jobs, capacities, resources=False)
    n = jobs.n_jobs
    l_rows, l_cols, l_vals = throughput_rows(X, a)
    r_level = b.add_rows(
        rows=np.concatenate([l_rows, np.arange(n)]),
        cols=np.concatenate([l_cols, np.full(n, t)]),
        vals=np.concatenate([l_vals, -np.ones(n)]),
        lb=0.0, ub=np.inf, n_rows=n,
    )
    resources = add_resource_rows(b, X, jobs, cluster)  # after the level rows: [jobs | capacity | level | host]
    stage = "stage1" if floor is None else "stage2"
    lp = b.build(sense="max", x_index=X.x_index, name=f"{name}:{stage}", meta={
        "t": t,
        # read by hetsched.solvers.structured (solver="structured"); rows are [jobs | capacity | level]
        "structure": {"kind": "level", "a": a, "load": (jobs.multiplicity * jobs.scale_factors).astype(float),
                      "capacities": capacities, "floor": floor, "rows": (0, n, n + capacities.shape[0]),
                      "resources": resources},
        **(meta or {}),
    })
    return X.program(lp, level_rows=r_level)


def _level_program_direct(jobs: JobSet, capacities: np.ndarray, a: np.ndarray, *, floor, name, meta, cluster):
    """:func:`level_program` without a space, its matrix assembled directly in CSR
    (:mod:`.level_matrix`); host-resource rows appended below. The same program."""
    n, m = a.shape
    usable = a > 0
    X = AllocationVars(usable, 0)
    t = X.size
    load = (jobs.multiplicity * jobs.scale_factors).astype(float)
    main = level_rows_csr(X, load, a, t)
    side = ProgramBuilder.appending(t + 1, main.shape[0])
    resources = add_resource_rows(side, X, jobs, cluster)  # below the level rows: [jobs | capacity | level | host]
    extra, extra_lb, extra_ub = side.row_block()
    A = main if extra.shape[0] == 0 else sp.vstack([main, extra], format="csr")
    c = np.zeros(t + 1)
    col_lb, col_ub = np.zeros(t + 1), np.full(t + 1, np.inf)
    if floor is None:
        c[t] = 1.0
    else:
        c[:t] = (jobs.multiplicity[:, None] * a)[usable]
        col_lb[t] = col_ub[t] = floor
    row_lb = np.concatenate([np.full(n + m, -np.inf), np.zeros(n), extra_lb])
    row_ub = np.concatenate([np.ones(n), np.asarray(capacities, dtype=float), np.full(n, np.inf), extra_ub])
    stage = "stage1" if floor is None else "stage2"
    return LinearProgram(c=c, A=A, row_lb=row_lb, row_ub=row_ub, col_lb=col_lb, col_ub=col_ub, x_index=X.x_index,
                         sense="max", name=f"{name}:{stage}", meta={
                             "t": t,
                             # read by hetsched.solvers.structured (solver="structured")
                             "structure": {"kind": "level", "a": a, "load": load, "capacities": capacities,
                                           "floor": floor, "rows": (0, n, n + m), "resources": resources},
                             **(meta or {}),
                         })


def stage2_program(lp1, jobs: JobSet, a: np.ndarray, floor: float, *, meta: dict | None = None):
    r"""Stage 2 of :func:`level_program` from its stage 1 ``lp1`` (built without a ``space``):
    the same rows and matrix (shared, not copied), t fixed at ``floor`` and the objective
    :math:`\sum_j \mu_j \sum_k a_{jk} X_{jk}`. Equal to ``level_program(..., floor=floor)``."""
    t = int(lp1.meta["t"])
    c = np.zeros(lp1.n_vars)
    if lp1.x_block_start == 0:       # X[j, k] is variable j m + k: no index arrays
        c[: a.size] = (jobs.multiplicity[:, None] * a).reshape(-1)
    else:
        usable = lp1.x_index >= 0
        c[lp1.x_index[usable]] = (jobs.multiplicity[:, None] * a)[usable]
    col_lb, col_ub = lp1.col_lb.copy(), lp1.col_ub.copy()
    col_lb[t] = col_ub[t] = floor
    base = {k: v for k, v in lp1.meta.items() if k != "structured_warm"}
    structure = {**base["structure"], "floor": floor}
    name = lp1.name.removesuffix(":stage1")
    return dataclasses.replace(lp1, c=c, col_lb=col_lb, col_ub=col_ub, name=f"{name}:stage2",
                               meta={**base, "structure": structure, **(meta or {})})


#: Relative slack on a stage-1 level used as the floor of stage 2.
STAGE2_RELATIVE_SLACK = 1e-9


def _warm_meta(out) -> dict | None:
    """Stage 1's structured prices for stage 2 (``meta["structured_warm"]``), when it has them."""
    warm = out.info.get("warm") if isinstance(out.info, dict) else None
    return None if warm is None else {"structured_warm": warm}


#: Statuses of an always-feasible chain of LPs that :func:`retry_exact` re-runs exactly
#: (a time or iteration limit is kept).
_CHAIN_FAILURES = ("infeasible", "unbounded", "infeasible_or_unbounded", "numerical_error", "unknown")


def retry_exact(ctx, attempt, *, what: str):
    """``attempt()`` (a :class:`~hetsched.formulations.base.PolicyOutcome`); when it ends in one
    of :data:`_CHAIN_FAILURES` on a backend other than the exact fallback,
    run it again with the exact fallback (:meth:`SolveContext.exact`, HiGHS) and say so.

    For strategies whose programs are always feasible but chained (each LP's floors come from
    the previous LP's answer: level loops, FIFO ranks): an inexact answer early in the chain
    can leave a later LP with no solution, which re-checking that one LP cannot repair.
    """
    from ..solvers.fallback import EXACT_BACKEND
    from .base import PolicyOutcome

    first = attempt()
    if first.status not in _CHAIN_FAILURES or ctx.solver == EXACT_BACKEND:
        return first
    solver = ctx.solver
    with ctx.exact():
        again = attempt()
    ctx.fallbacks.append(f"{what}: {solver!r} ended {first.status!r} ({first.message}); re-run with {EXACT_BACKEND}")
    return PolicyOutcome(X=again.X, objective=again.objective, status=again.status,
                         message=f"{again.message} (re-run with {EXACT_BACKEND} after {solver!r} ended "
                                 f"{first.status!r}: {first.message})", extra=again.extra)


def solve_levels(policy, jobs: JobSet, cluster, ctx, a: np.ndarray, *, second_stage: bool, name: str,
                 space=None, objective_of=None, **extra):
    """Stage 1 of :func:`level_program` and, when asked, stage 2 at the level found.

    ``space``: an optional :class:`~hetsched.formulations.spaces.space.AllocationSpace` for both stages.
    ``objective_of``: the policy's objective of an X from inputs at hand (see
    :meth:`~hetsched.formulations.base.Policy.outcome`); None: ``policy.objective_of``.

    Returns ``(outcome, level)``; ``level`` is NaN when stage 1 failed. When stage 2 fails
    the stage-1 allocation is returned and the message says so.
    """
    from .base import PolicyOutcome

    cap = cluster.capacities(jobs.gpu_types)
    with ctx.building():
        lp1 = level_program(jobs, cap, a, name=name, cluster=cluster, space=space)
    out1 = ctx.run(lp1)
    first = policy.outcome(lp1, out1, jobs, cluster, objective_of=objective_of, **extra)
    if not out1.success:
        return first, float("nan")
    level = float(out1.x[lp1.meta["t"]])
    if not second_stage:
        return first, level
    floor = level - STAGE2_RELATIVE_SLACK * abs(level)
    warm = _warm_meta(out1)
    with ctx.building():
        if space is None:  # same rows: stage 2 shares stage 1's matrix
            lp2 = stage2_program(lp1, jobs, a, floor, meta=warm)
        else:
            del lp1, out1  # not needed any more: free them before building stage 2's program
            lp2 = level_program(jobs, cap, a, floor=floor, name=name, cluster=cluster, space=space, meta=warm)
    lp1 = out1 = None
    out2 = ctx.run(lp2)
    if not out2.success:
        return PolicyOutcome(
            X=first.X, objective=first.objective, status=first.status,
            message=f"{first.message}; stage 2 ended {out2.status!r}, returning the stage-1 allocation",
            extra={**first.extra, "stage1_level": level, "second_stage_status": out2.status},
        ), level
    return policy.outcome(lp2, out2, jobs, cluster, objective_of=objective_of, stage1_level=level,
                          second_stage_status=out2.status, **extra), level
