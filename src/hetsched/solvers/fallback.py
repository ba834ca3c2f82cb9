"""The exact fallback: when another backend fails on a program, HiGHS solves it.

Project rule: a solver failure inside one strategy falls back to the next exact one. The
exact backend is HiGHS (simplex, or IPX with crossover for large LPs: a vertex within its
1e-9 feasibility tolerance). :meth:`hetsched.solvers.context.SolveContext.run` asks
:func:`fallback_reason` after every program another backend solved, and re-solves the
program with HiGHS (without the user's backend options, which belong to the other backend)
when it names a reason:

* the backend raised :class:`~hetsched.errors.SolverError` (e.g. cvxpy's "Solver 'CLARABEL'
  failed");
* it ended "numerical_error" or "unknown";
* it ended "iteration_limit" on its own default iteration cap (no user options given);
* it declared the program "infeasible", "unbounded" or "infeasible_or_unbounded": an
  interior-point verdict on a badly scaled program is re-checked by HiGHS (the HiGHS
  verdict is kept);
* it returned an "optimal" point that breaks a row or bound of the program by more than
  :data:`FEASIBILITY_TOL`, relative to ``max(1, |bound|)`` (interior-point methods stop on
  relative residuals: with throughputs, weights and times across their documented ranges a
  share row can be missed by 1e-4 while the residual looks small).

A time limit is not a failure: "time_limit" is kept.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import SolverOutput
from .program import LinearProgram
from .registry import capabilities, highs_options

__all__ = ["EXACT_BACKEND", "FEASIBILITY_TOL", "accepted_violation", "exact_options", "fallback_reason",
           "scaled_violation"]

#: The backend programs fall back to.
EXACT_BACKEND = "highs"

#: Largest row / bound violation (relative to ``max(1, |bound|)``) accepted from a backend
#: other than HiGHS before the program is re-solved exactly; 10x below the certificate's 1e-6,
#: so a point the certificate would reject is re-solved first.
FEASIBILITY_TOL = 1e-7

_VERDICTS = ("infeasible", "unbounded", "infeasible_or_unbounded")


def accepted_violation(solver: str) -> float:
    """The largest row / bound violation a point returned by backend ``solver`` may carry
    after :func:`fallback_reason` let it through: :data:`FEASIBILITY_TOL` for backends that
    return interior points (``capabilities.interior_point``: Clarabel, cvxpy), 1e-9 (HiGHS'
    feasibility tolerance as hetsched sets it) for simplex backends."""
    return FEASIBILITY_TOL if capabilities(solver).interior_point else 1e-9


def exact_options(lp: LinearProgram) -> dict[str, Any]:
    """HiGHS options of the fallback: dual simplex, or IPX with crossover for large LPs
    (:func:`~hetsched.solvers.registry.highs_options`)."""
    return highs_options(lp)


#: Entries per block of :func:`scaled_violation`'s passes: its temporaries stay a few MB and
#: are reused from the heap, where whole-vector temporaries (about 1 GB per call at 10^6 x 10)
#: were fresh memory every call, and their page faults cost about a second of system time.
VIOLATION_BLOCK = 1 << 18


def scaled_violation(lp: LinearProgram, x: np.ndarray, *, block: int = VIOLATION_BLOCK) -> float:
    """Largest violation of a row or column bound of ``lp`` by ``x``, each divided by
    ``max(1, |bound|)`` (0 when feasible; inf when ``x`` is not finite). Computed ``block``
    entries at a time (the same numbers)."""
    x = np.asarray(x, dtype=float)
    if not all(np.isfinite(x[s:s + block]).all() for s in range(0, x.size, block)):
        return float("inf")
    worst = 0.0
    ax = lp.A @ x if lp.n_rows else np.zeros(0)
    for value, lb, ub in ((ax, lp.row_lb, lp.row_ub), (x, lp.col_lb, lp.col_ub)):
        lb = np.asarray(lb, dtype=float)
        ub = np.asarray(ub, dtype=float)
        for s in range(0, value.size, block):
            v, lo, hi = value[s:s + block], lb[s:s + block], ub[s:s + block]
            with np.errstate(invalid="ignore"):
                below = np.where(np.isfinite(lo), (lo - v) / np.maximum(1.0, np.abs(lo)), 0.0)
                above = np.where(np.isfinite(hi), (v - hi) / np.maximum(1.0, np.abs(hi)), 0.0)
            worst = max(worst, float(below.max()), float(above.max()))
    return worst


def fallback_reason(lp: LinearProgram, out: SolverOutput, *, user_options: bool) -> str | None:
    """Why ``out`` (a backend's answer to ``lp``) should be re-solved by :data:`EXACT_BACKEND`,
    or None when it stands (see the module docstring).

    ``user_options``: whether the user passed backend options (then an iteration limit may
    be theirs and is kept).
    """
    if out.backend == EXACT_BACKEND:
        return None
    who = f"{out.backend} ({out.message})" if out.message else out.backend
    if out.status in ("numerical_error", "unknown"):
        return f"{who} ended {out.status!r}"
    if out.status == "iteration_limit" and not user_options:
        return f"{who} hit its iteration limit"
    if out.status in _VERDICTS:
        return f"{who} declared the program {out.status!r}; re-checked"
    if out.success and out.has_solution and not lp.is_mip:
        v = scaled_violation(lp, out.x)
        if v > FEASIBILITY_TOL:
            return f"{who} returned a point violating the program by {v:.3g} (> {FEASIBILITY_TOL:g})"
    return None
