"""Backend interface, solver-neutral statuses and the per-solve output record."""

from __future__ import annotations

import importlib
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..program import LinearProgram

__all__ = ["Backend", "SolverOutput", "STATUSES", "SUCCESS_STATUSES", "map_status", "empty_row_conflict",
           "decided_without_solver"]

#: Every status a result can carry.
STATUSES = (
    "optimal",
    "infeasible",
    "unbounded",
    "infeasible_or_unbounded",
    "time_limit",
    "iteration_limit",
    "numerical_error",
    "unknown",
)
#: Statuses for which ``success`` is True.
SUCCESS_STATUSES = frozenset({"optimal"})


def map_status(native: Any, table: Mapping[Any, str]) -> str:
    """Translate a native solver status through ``table``; anything unlisted is "unknown"."""
    return table.get(native, "unknown")


@dataclass(frozen=True, eq=False)
class SolverOutput:
    """What one backend run returns.

    Attributes
    ----------
    status : str
        One of :data:`STATUSES`.
    x : ndarray
        Primal solution (NaN everywhere when the solver returned none).
    objective : float
        Objective value of ``x`` as the solver reports it (NaN when none).
    has_solution : bool
        Whether ``x`` holds a solution (possibly sub-optimal for ``time_limit``).
    row_dual : ndarray or None
        Row duals when the backend provides them.
    native_status : str
        The solver's own status string.
    message : str
        Human-readable summary.
    solve_s : float
        Seconds inside the solver (including the translation of the program).
    backend : str
        Backend name.
    mip_gap : float or None
        Relative MIP gap reached, for integer programs.
    """

    status: str
    x: np.ndarray
    objective: float
    has_solution: bool
    native_status: str
    message: str
    solve_s: float
    backend: str
    row_dual: np.ndarray | None = None
    mip_gap: float | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def success(self) -> bool:
        """True when the status is "optimal"."""
        return self.status in SUCCESS_STATUSES


def empty_row_conflict(lp: LinearProgram) -> str | None:
    """Why ``lp`` is infeasible on its face: a row with no coefficients whose bounds exclude 0.

    Returns None when there is no such row.
    """
    if lp.n_rows == 0:
        return None
    empty = np.diff(lp.A.tocsr().indptr) == 0
    bad = np.flatnonzero(empty & ((lp.row_lb > 0.0) | (lp.row_ub < 0.0)))
    if bad.size == 0:
        return None
    i = int(bad[0])
    return f"row {i} has no coefficients but bounds [{lp.row_lb[i]}, {lp.row_ub[i]}] exclude 0"


def decided_without_solver(lp: LinearProgram, backend: str, t0: float, conflict: str | None) -> SolverOutput:
    """The output for a program settled without calling a solver.

    Used by every backend for a program with no variables (optimal at ``x = []``) or with
    an :func:`empty_row_conflict` (infeasible, ``conflict`` says which row).
    """
    feasible = conflict is None
    return SolverOutput(
        status="optimal" if feasible else "infeasible",
        x=np.zeros(lp.n_vars) if feasible else np.full(lp.n_vars, np.nan),
        objective=float(lp.offset) if feasible else float("nan"),
        has_solution=feasible,
        native_status="not solved",
        message=f"{backend}: " + ("program has no variables" if feasible else conflict),
        solve_s=time.perf_counter() - t0,
        backend=backend,
    )


class Backend:
    """A solver backend: translates a :class:`~hetsched.program.LinearProgram` and solves it.

    Subclasses set :attr:`name`, :attr:`supports_mip`, :attr:`provides_duals`, implement
    :meth:`available` and :meth:`solve`, and are registered with
    :func:`hetsched.solvers.register_backend`.
    """

    name: ClassVar[str] = ""
    #: Python package the backend needs (imported by :meth:`available`).
    module: ClassVar[str] = ""
    supports_mip: ClassVar[bool] = False
    provides_duals: ClassVar[bool] = False

    @classmethod
    def available(cls) -> bool:
        """Whether the backend's solver package (:attr:`module`) imports here."""
        try:
            importlib.import_module(cls.module)
        except ImportError:
            return False
        return True

    def solve(
        self,
        lp: LinearProgram,
        *,
        time_limit: float | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> SolverOutput:
        """Solve ``lp``; infeasible/time-limit come back as a status, crashes raise SolverError."""
        raise NotImplementedError

    @staticmethod
    def no_solution(lp: LinearProgram) -> np.ndarray:
        """The NaN vector used when a solver returned no solution."""
        return np.full(lp.n_vars, np.nan)
