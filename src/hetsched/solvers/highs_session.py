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

from ..errors import SolverError
from ..program import LinearProgram
from .base import SolverOutput, map_status
from .highs import _status_table, apply_options, load_model, new_highs, run_rechecked

__all__ = ["HighsSession"]

log = logging.getLogger(__name__)


class HighsSession:
    """A :class:`~hetsched.program.LinearProgram` loaded into one ``highspy.Highs`` object.

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

    def set_coeffs(self, rows: np.ndarray, col: int, value: float) -> None:
        """Set ``A[rows, col] = value``."""
        for r in np.asarray(rows, dtype=np.int64).tolist():
            self.h.changeCoeff(r, int(col), float(value))

    # ------------------------------------------------------------------- run
    def run(self, *, time_limit: float | None = None, options: Mapping[str, Any] | None = None) -> SolverOutput:
        """Re-solve from the current basis and return the usual :class:`SolverOutput`."""
        t0 = time.perf_counter()
        apply_options(self.h, options)
        self.h.setOptionValue("time_limit", float(time_limit) if time_limit is not None else float("inf"))
        _, native = run_rechecked(self.h, self.lp.name)
        status = map_status(native, _status_table())
        native_str = self.h.modelStatusToString(native)
        if status == "unknown":
            raise SolverError(f"HiGHS failed on a warm-started re-solve of {self.lp.name!r}: {native_str!r}.")
        sol = self.h.getSolution()
        has = status == "optimal"
        x = np.asarray(sol.col_value, dtype=float) if has else np.full(self.lp.n_vars, np.nan)
        dual = np.asarray(sol.row_dual, dtype=float) if has else None
        info = self.h.getInfo()
        self.n_runs += 1
        return SolverOutput(
            status=status, x=x, objective=float(info.objective_function_value) if has else float("nan"),
            has_solution=has, native_status=native_str, message=f"HiGHS: {native_str}",
            solve_s=time.perf_counter() - t0, backend="highs", row_dual=dual,
            info={"simplex_iterations": int(info.simplex_iteration_count)},
        )
