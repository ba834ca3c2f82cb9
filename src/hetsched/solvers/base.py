"""Backend interface, solver-neutral statuses and the per-solve output record."""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..errors import ValidationError
from .program import LinearProgram

__all__ = [
    "STATUSES", "SUCCESS_STATUSES", "Backend", "Capabilities", "SolverOutput", "decided_without_solver",
    "empty_row_conflict", "map_status", "native_status_table"
]

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


def native_status_table(enum: Any, names: Mapping[str, str]) -> dict[Any, str]:
    """The table for :func:`map_status` from a solver's status enum: ``{enum.NAME: status}``.

    ``names`` maps member names of ``enum`` to statuses among :data:`STATUSES`.
    """
    return {getattr(enum, name): status for name, status in names.items()}


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


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do, declared as data on the backend class (:attr:`Backend.capabilities`).

    Code that depends on a backend's abilities asks these flags (``backend.capabilities.mip``,
    :func:`hetsched.solvers.choose_auto` with ``require=``), never the backend's name.

    Attributes
    ----------
    mip : bool
        Solves programs with integer variables (``lp.integrality``).
    duals : bool
        Returns row duals (``SolverOutput.row_dual``).
    warm_start : bool
        Keeps an LP loaded and re-solves it, changed in place, from the previous basis
        (:class:`~hetsched.solvers.highs_session.HighsSession`,
        :meth:`hetsched.solvers.context.SolveContext.open_session`).
    time_limit : bool
        Honours ``time_limit`` (returning status "time_limit").
    gap_option : str or None
        Name of the option that sets the relative MIP gap at which the solver stops
        (None: the backend has no such option of its own).
    presolve_off : tuple of (str, value) pairs
        Options that turn the solver's presolve off (empty: no such option).
    interior_point : bool
        Returns interior points by default, which may miss rows by up to
        :data:`hetsched.solvers.fallback.FEASIBILITY_TOL` (simplex backends: ~1e-9).
    general : bool
        Solves any :class:`~hetsched.solvers.program.LinearProgram` itself. False for a backend
        that recognizes one program shape and hands every other program to a general one
        (the structured path); a fallback must be general.
    """

    mip: bool = False
    duals: bool = False
    warm_start: bool = False
    time_limit: bool = True
    gap_option: str | None = None
    presolve_off: tuple[tuple[str, Any], ...] = ()
    interior_point: bool = False
    general: bool = True

    def has(self, flags: tuple[str, ...] | list[str] | frozenset[str] = ()) -> bool:
        """Whether every boolean capability named in ``flags`` is true."""
        unknown = [f for f in flags if f not in _FLAGS]
        if unknown:
            raise ValidationError(f"`require` must name capability flags among {list(_FLAGS)}; got {unknown}.")
        return all(getattr(self, f) for f in flags)


#: The boolean flags of :class:`Capabilities` (what ``require=`` may name).
_FLAGS = ("mip", "duals", "warm_start", "time_limit", "interior_point", "general")


class Backend:
    """A solver backend: translates a :class:`~hetsched.solvers.program.LinearProgram` and solves it.

    Subclasses set :attr:`name`, :attr:`module`, :attr:`capabilities`, implement
    :meth:`_prepare` and :meth:`_run`, the two phases of :meth:`solve` (or override :meth:`solve`
    when their flow differs), implement :meth:`available` when importing :attr:`module` is not
    the test, and are registered with :func:`hetsched.solvers.register_backend`. The class
    docstring of each backend says what its ``options`` are, where ``time_limit`` goes and
    which errors its checks raise.
    """

    name: ClassVar[str] = ""
    #: Python package the backend needs (imported by :meth:`available`).
    module: ClassVar[str] = ""
    #: What the backend can do (see :class:`Capabilities`).
    capabilities: ClassVar[Capabilities] = Capabilities()

    @property
    def supports_mip(self) -> bool:
        """Same as ``capabilities.mip``."""
        return self.capabilities.mip

    @property
    def provides_duals(self) -> bool:
        """Same as ``capabilities.duals``."""
        return self.capabilities.duals

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
        """Solve ``lp``; infeasible/time-limit come back as a status, crashes raise SolverError.

        The backend first checks ``options`` and whether it can solve ``lp``
        (:meth:`_prepare`). A program with no variables, or with a row that has no
        coefficients but bounds excluding 0 (:func:`empty_row_conflict`), is then settled
        without calling the solver (:func:`decided_without_solver`); any other goes to the
        solver (:meth:`_run`).

        Parameters
        ----------
        lp : LinearProgram
            The program.
        time_limit : float, optional
            Seconds the solver may spend, passed under the solver's own option (see the
            backend's class docstring).
        options : Mapping, optional
            Backend-specific options (see the backend's class docstring).

        Returns
        -------
        SolverOutput
            Infeasible, unbounded and stopped runs come back as a status (:data:`STATUSES`).

        Raises
        ------
        CapabilityError
            The backend (or the solver chosen through ``options``) cannot solve ``lp``, e.g.
            a program with integer variables.
        UnknownSolverError
            ``options`` name a solver that is not installed.
        ValidationError
            An unknown option or a bad option value.
        SolverError
            The solver rejected the data, crashed or failed.
        """
        t0 = time.perf_counter()
        prepared = self._prepare(lp, time_limit=time_limit, options=options)
        conflict = empty_row_conflict(lp)
        if conflict is not None or lp.n_vars == 0:
            return decided_without_solver(lp, self.name, t0, conflict)
        return self._run(lp, prepared, time_limit=time_limit, t0=t0)

    def _prepare(self, lp: LinearProgram, *, time_limit: float | None, options: Mapping[str, Any] | None) -> Any:
        """Check ``options`` and the backend's abilities for ``lp`` before anything is decided.

        Runs for every program, the empty ones included, and raises the backend's
        option and capability errors. Returns what :meth:`_run` needs (solver settings,
        a solver object, checked options).
        """
        raise NotImplementedError

    def _run(self, lp: LinearProgram, prepared: Any, *, time_limit: float | None, t0: float) -> SolverOutput:
        """Solve ``lp`` (at least one variable, no empty-row conflict) with what
        :meth:`_prepare` returned; ``solve_s`` of the output counts from ``t0``."""
        raise NotImplementedError

    def _finish(self, lp: LinearProgram, t0: float, logger: logging.Logger, label: str, **fields: Any) -> SolverOutput:
        """The :class:`SolverOutput` of a solver run, with ``solve_s`` counted from ``t0``.

        ``fields`` are the output's other fields but ``backend`` (this backend). Logs
        ``"<label> <program>: <native status> in <s>s (<n> vars, <m> rows)"`` on ``logger`` at
        debug level.
        """
        elapsed = time.perf_counter() - t0
        logger.debug("%s %s: %s in %.3fs (%d vars, %d rows)", label, lp.name, fields["native_status"], elapsed,
                     lp.n_vars, lp.n_rows)
        return SolverOutput(solve_s=elapsed, backend=self.name, **fields)

    @staticmethod
    def no_solution(lp: LinearProgram) -> np.ndarray:
        """The NaN vector used when a solver returned no solution."""
        return np.full(lp.n_vars, np.nan)
