"""An LP kept loaded in HiGHS and changed in place between solves (warm starts).

Policies that solve a *sequence* of closely related LPs (water filling) modify bounds,
costs and a few coefficients between runs; HiGHS keeps its basis, so each re-solve is a
few simplex iterations instead of a fresh solve.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from .base import SolverOutput, map_status
from .highs import _status_table, apply_options, load_model, new_highs, run_rechecked
from .program import LinearProgram

__all__ = ["HighsSession"]

log = logging.getLogger(__name__)

#: IPX iteration cap of the last-resort cold re-solve: on an LP where simplex ends "Unknown",
#: IPX has also been seen looping for 700,000+ iterations (tens of seconds on 39 rows).
IPM_RETRY_ITERATIONS = 500


class HighsSession:
    """A :class:`~hetsched.solvers.program.LinearProgram` loaded into one ``highspy.Highs`` object.

    Parameters
    ----------
    lp : LinearProgram
        The initial program (continuous).
    options : Mapping, optional
        HiGHS options for every run (e.g. ``{"solver": "ipm"}`` for the first run only can be
        given to :meth:`run` instead).
    """

    def __init__(self, lp: LinearProgram, options: Mapping[str, Any] | None = None) -> None:
        self.lp = lp
        self.h = new_highs()
        apply_options(self.h, options)
        load_model(self.h, lp)
        self.n_runs = 0

    # --------------------------------------------------------------- changes
    def set_col_bounds(self, cols: np.ndarray, lb: Any, ub: Any) -> None:
        """Set bounds of columns ``cols`` (arrays or scalars broadcast)."""
        cols = np.asarray(cols, dtype=np.int32)
        if cols.size == 0:
            return
        lo = np.broadcast_to(np.asarray(lb, dtype=np.float64), cols.shape).copy()
        hi = np.broadcast_to(np.asarray(ub, dtype=np.float64), cols.shape).copy()
        self.h.changeColsBounds(int(cols.size), cols, lo, hi)

    def set_costs(self, cols: np.ndarray, costs: Any) -> None:
        """Set objective coefficients of columns ``cols``."""
        cols = np.asarray(cols, dtype=np.int32)
        if cols.size == 0:
            return
        c = np.broadcast_to(np.asarray(costs, dtype=np.float64), cols.shape).copy()
        self.h.changeColsCost(int(cols.size), cols, c)

    def set_row_bounds(self, rows: np.ndarray, lb: Any, ub: Any) -> None:
        """Set bounds of rows ``rows`` (one call per row: HiGHS has no bulk form)."""
        rows = np.asarray(rows, dtype=np.int64)
        lo = np.broadcast_to(np.asarray(lb, dtype=float), rows.shape)
        hi = np.broadcast_to(np.asarray(ub, dtype=float), rows.shape)
        for r, a, b in zip(rows.tolist(), lo.tolist(), hi.tolist()):
            self.h.changeRowBounds(r, a, b)

    def set_coeffs(self, rows: np.ndarray, col: int, value: Any) -> None:
        """Set ``A[rows, col] = value`` (a scalar, or one value per row)."""
        rows = np.asarray(rows, dtype=np.int64)
        vals = np.broadcast_to(np.asarray(value, dtype=float), rows.shape)
        for r, v in zip(rows.tolist(), vals.tolist()):
            self.h.changeCoeff(r, int(col), v)

    def clear_basis(self) -> None:
        """Forget the basis: the next :meth:`run` starts cold."""
        self.h.clearSolver()

    # ------------------------------------------------------------------- run
    def run(self, *, time_limit: float | None = None, options: Mapping[str, Any] | None = None,
            cold: bool = False) -> SolverOutput:
        """Re-solve from the current basis and return the usual :class:`SolverOutput`.

        ``cold`` discards the basis first. HiGHS sometimes ends a warm-started re-solve of a
        badly scaled LP with model status "Unknown" (seen on water filling with throughputs
        spanning six decades); the re-solve is then repeated cold, then cold with IPX and
        crossover (at most ``IPM_RETRY_ITERATIONS`` iterations). When all of them fail the output has status "numerical_error" and no
        solution: a solver hiccup is a status, never an exception.
        """
        t0 = time.perf_counter()
        apply_options(self.h, options)
        self.h.setOptionValue("time_limit", float(time_limit) if time_limit is not None else float("inf"))
        if cold:
            self.h.clearSolver()
        _, native = run_rechecked(self.h, self.lp.name)
        status = map_status(native, _status_table())
        tried = ["cold" if cold else "warm"]
        if status == "unknown":
            for attempt, extra in (("cold", None), ("cold ipm", {"solver": "ipm", "run_crossover": "on",
                                                                        "ipm_iteration_limit": IPM_RETRY_ITERATIONS})):
                if attempt == "cold" and cold:
                    continue
                log.debug("highs %s: %r after a %s solve; retrying %s", self.lp.name,
                          self.h.modelStatusToString(native), tried[-1], attempt)
                status, native = self._retry_cold(extra, t0, time_limit)
                tried.append(attempt)
                if status != "unknown":
                    break
        native_str = self.h.modelStatusToString(native)
        self.n_runs += 1
        if status == "unknown":
            return SolverOutput(
                status="numerical_error", x=np.full(self.lp.n_vars, np.nan), objective=float("nan"),
                has_solution=False, native_status=native_str,
                message=f"HiGHS: {native_str!r} on {self.lp.name!r} after {' / '.join(tried)} solves",
                solve_s=time.perf_counter() - t0, backend="highs",
            )
        sol = self.h.getSolution()
        has = status == "optimal"
        x = np.asarray(sol.col_value, dtype=float) if has else np.full(self.lp.n_vars, np.nan)
        dual = np.asarray(sol.row_dual, dtype=float) if has else None
        info = self.h.getInfo()
        note = f" (after {' / '.join(tried)} solves)" if len(tried) > 1 else ""
        return SolverOutput(
            status=status, x=x, objective=float(info.objective_function_value) if has else float("nan"),
            has_solution=has, native_status=native_str, message=f"HiGHS: {native_str}{note}",
            solve_s=time.perf_counter() - t0, backend="highs", row_dual=dual,
            info={"simplex_iterations": int(info.simplex_iteration_count), "attempts": tried},
        )

    def _retry_cold(self, extra: Mapping[str, Any] | None, t0: float, time_limit: float | None) -> tuple[str, Any]:
        """One cold re-solve (with ``extra`` options, restored afterwards) within what is left of
        ``time_limit``; returns ``(status, native model status)``."""
        if time_limit is not None:
            left = time_limit - (time.perf_counter() - t0)
            if left <= 0:
                import highspy

                return "time_limit", highspy.HighsModelStatus.kTimeLimit
            self.h.setOptionValue("time_limit", float(left))
        previous = {}
        for key, value in (extra or {}).items():
            old = self.h.getOptionValue(key)
            previous[key] = old[1] if isinstance(old, tuple) else old  # highspy 1.12 returns (status, value)
            self.h.setOptionValue(key, value)
        try:
            self.h.clearSolver()
            _, native = run_rechecked(self.h, self.lp.name)
        finally:
            for key, value in previous.items():
                self.h.setOptionValue(key, value)
        status = map_status(native, _status_table())
        if status == "iteration_limit" and "ipm_iteration_limit" in (extra or {}):
            status = "unknown"  # our own cap on a last resort, not the user's limit
        return status, native
