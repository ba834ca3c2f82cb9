"""cvxpy backend: the LP as a handful of vectorized cvxpy constraints, solved by any
solver cvxpy has installed (Clarabel by default for LPs, HiGHS for integer programs).

The program is stated with one constraint object per *block*, never per row::

    A[eq] @ x == lb[eq]      rows with lb == ub (finite)
    A[ub] @ x <= ub[ub]      rows with a finite upper bound (not equality)
    A[lb] @ x >= lb[lb]      rows with a finite lower bound (not equality)
    x[J]      == lb[J]       fixed columns; likewise x[J] <= ub[J], x[J] >= lb[J]

Column bounds are constraints rather than ``cp.Variable(bounds=...)`` because cvxpy 1.9.1's
PDLP interface fails on variable bounds. Integer columns live in a second variable
``cp.Variable(n_int, integer=True)``; ``x`` is ``hstack([x_cont, x_int])`` permuted back
into the program's order. (``cp.Variable(n, integer=[(0,), (2,)])``, the documented
index-list form, fails in cvxpy 1.9.1 inside ``np.ravel_multi_index``.)
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import CapabilityError, SolverError, UnknownSolverError, ValidationError
from .base import Backend, Capabilities, SolverOutput, map_status
from .program import LinearProgram
from .registry import register_backend

__all__ = ["STATUS_TABLE", "TIME_LIMIT_KEYS", "CvxpyBackend"]

log = logging.getLogger(__name__)

#: cvxpy status -> hetsched status. ``"user_limit"`` is resolved separately: it becomes
#: "time_limit" when a time limit was in force and "iteration_limit" otherwise.
STATUS_TABLE: dict[str, str] = {
    "optimal": "optimal",
    "optimal_inaccurate": "optimal",
    "infeasible": "infeasible",
    "infeasible_inaccurate": "infeasible",
    "unbounded": "unbounded",
    "unbounded_inaccurate": "unbounded",
    "infeasible_or_unbounded": "infeasible_or_unbounded",
    "solver_error": "numerical_error",
}

#: Keyword through which each cvxpy solver takes a time limit in seconds (SCIPY takes it
#: inside ``scipy_options``).
TIME_LIMIT_KEYS: dict[str, str] = {
    "CLARABEL": "time_limit",
    "HIGHS": "time_limit",
    "OSQP": "time_limit",
    "GLOP": "time_limit_sec",
    "PDLP": "time_limit_sec",
    "SCS": "time_limit_secs",
    "SCIPY": "scipy_options.time_limit",
}

#: Relative feasibility tolerance used to decide whether a "user_limit" point is an incumbent.
INCUMBENT_TOL = 1e-6


def _default_solver(is_mip: bool, installed: list[str], mip_capable: list[str]) -> str:
    """Clarabel for LPs, HiGHS for MIPs, else the first installed solver that can do it."""
    preferred = ("HIGHS", *mip_capable) if is_mip else ("CLARABEL", "HIGHS", *installed)
    for name in preferred:
        if name in installed and (not is_mip or name in mip_capable):
            return name
    raise CapabilityError(
        "cvxpy has no installed solver for "
        + ("integer programs" if is_mip else "linear programs")
        + f"; installed: {installed}."
    )


def _mip_capable() -> list[str]:
    try:
        from cvxpy.reductions.solvers.defines import INSTALLED_MI_SOLVERS
    except ImportError:  # pragma: no cover - layout of older/newer cvxpy
        return ["HIGHS", "SCIPY"]
    return list(INSTALLED_MI_SOLVERS)


def _choose_solver(lp: LinearProgram, requested: Any, installed: list[str]) -> str:
    """The cvxpy solver for ``lp``: ``requested`` (any case), else :func:`_default_solver`.

    Raises UnknownSolverError when ``requested`` is not in ``installed``, CapabilityError
    when ``lp`` has integer variables and the solver cannot solve integer programs.
    """
    mip_capable = _mip_capable()
    if requested is None:
        solver = _default_solver(lp.is_mip, installed, mip_capable)
    else:
        solver = str(requested).upper()
        if solver not in installed:
            raise UnknownSolverError(
                f"`options['solver']` {requested!r} is not a solver installed under cvxpy; "
                f"choose one of {installed}."
            )
    if lp.is_mip and solver not in mip_capable:
        raise CapabilityError(
            f"cvxpy solver {solver!r} cannot solve integer programs ({lp.name}); choose one of "
            f"{mip_capable} as `options['solver']`."
        )
    return solver


def _add_time_limit(solver: str, opts: dict[str, Any], time_limit: float | None) -> bool:
    """Put ``time_limit`` into ``opts`` under ``solver``'s keyword (:data:`TIME_LIMIT_KEYS`)
    unless ``opts`` set it already; returns whether a time limit is in force."""
    if time_limit is not None:
        key = TIME_LIMIT_KEYS.get(solver)
        if key is None:
            log.warning("cvxpy solver %s: no known time-limit keyword; time_limit not enforced", solver)
        elif key.startswith("scipy_options."):
            sub = dict(opts.get("scipy_options") or {})
            sub.setdefault(key.split(".", 1)[1], float(time_limit))
            opts["scipy_options"] = sub
        else:
            opts.setdefault(key, float(time_limit))
    return time_limit is not None or any(k in opts for k in ("time_limit", "time_limit_sec", "time_limit_secs"))


def _mip_gap(stats: Any) -> float | None:
    """The relative MIP gap from cvxpy's ``solver_stats.extra_stats`` when the solver reports
    one (HiGHS' ``HighsInfo.mip_gap``, SciPy's ``mip_gap``); None otherwise."""
    extra = getattr(stats, "extra_stats", None)
    gap = extra.get("mip_gap") if isinstance(extra, Mapping) else getattr(extra, "mip_gap", None)
    try:
        gap = float(gap)
    except (TypeError, ValueError):
        return None
    return gap if np.isfinite(gap) else None


@register_backend
class CvxpyBackend(Backend):
    """Any LP/MIP solver installed under cvxpy, fed vectorized block constraints.

    ``options["solver"]`` picks the cvxpy solver by name (case-insensitive; default
    ``"CLARABEL"`` for LPs and ``"HIGHS"`` for integer programs). Every other key is passed
    to ``cvxpy.Problem.solve`` as a keyword, i.e. to the solver (e.g.
    ``{"solver": "SCS", "eps_abs": 1e-9}``). ``time_limit`` is forwarded under the
    solver's own keyword (:data:`TIME_LIMIT_KEYS`) unless the options set it already.

    ``solve`` raises :class:`~hetsched.errors.UnknownSolverError` when ``options["solver"]``
    is not installed under cvxpy (the message lists those that are) and
    :class:`~hetsched.errors.CapabilityError` when the chosen solver cannot solve integer
    programs and ``lp`` has integer variables (both also for a program settled without the
    solver); :class:`~hetsched.errors.ValidationError` when the solver rejects an option
    (the solver checks its keywords only when it runs, so a program settled without it does
    not raise for them), and
    :class:`~hetsched.errors.SolverError` when the solver fails.

    Notes
    -----
    Status mapping (:data:`STATUS_TABLE`): "optimal" and "optimal_inaccurate" ->
    "optimal" (the message says "inaccurate" for the latter: the solver met reduced
    tolerances only); "infeasible(_inaccurate)" -> "infeasible"; "unbounded(_inaccurate)" ->
    "unbounded"; "infeasible_or_unbounded" passes through; "user_limit" -> "time_limit"
    when a time limit was set and (if it came from ``time_limit``) at least 90 % of it was
    spent, else "iteration_limit" (cvxpy folds both into one status);
    anything else -> "unknown" (cvxpy itself raises on "solver_error", which becomes
    :class:`~hetsched.errors.SolverError`). A "user_limit" point counts as a solution only when it
    satisfies every bound to :data:`INCUMBENT_TOL` (relative) and integrality.
    ``mip_gap`` is read from the solver's statistics where cvxpy exposes it (HiGHS, SciPy).
    Duals are not provided (``capabilities.duals`` is False).
    """

    name = "cvxpy"
    module = "cvxpy"
    # interior point: cvxpy's default LP solver is Clarabel; no gap option of its own (the
    # key depends on the solver picked under cvxpy)
    capabilities = Capabilities(mip=True, interior_point=True)

    def _prepare(self, lp: LinearProgram, *, time_limit: float | None, options: Mapping[str, Any] | None) -> Any:
        """Pick the cvxpy solver (:func:`_choose_solver`).

        Returns ``(solver, opts, user_keys)``: the solver's name, ``options`` without
        ``"solver"``, and the names of the user's solver keywords.
        """
        import cvxpy as cp

        opts = dict(options or {})
        user_keys = [str(k) for k in opts if k != "solver"]
        installed = list(cp.installed_solvers())
        return _choose_solver(lp, opts.pop("solver", None), installed), opts, user_keys

    def _run(self, lp: LinearProgram, prepared: Any, *, time_limit: float | None, t0: float) -> SolverOutput:
        """Add the time limit, build and solve the cvxpy problem, and read the result."""
        solver, opts, user_keys = prepared
        limited = _add_time_limit(solver, opts, time_limit)
        x_var, problem = self._solve_problem(lp, solver, opts, user_keys)
        native = str(problem.status)
        status, has_solution, values = self._read_result(lp, native, x_var, limited=limited,
                                                         time_limit=time_limit, t0=t0)
        x_out = values if has_solution else self.no_solution(lp)
        objective = lp.objective_value(x_out) if has_solution else float("nan")
        message = f"cvxpy/{solver}: {native}"
        if native.endswith("_inaccurate"):
            message += " (inaccurate: solver met reduced tolerances only)"
        stats = problem.solver_stats
        return self._finish(
            lp, t0, log, f"cvxpy/{solver}", status=status, x=x_out, objective=objective, has_solution=has_solution,
            native_status=native, message=message, row_dual=None,
            mip_gap=_mip_gap(stats) if lp.is_mip and has_solution else None,
            info={
                "cvxpy_solver": solver,
                "num_iters": getattr(stats, "num_iters", None),
                "solver_solve_s": getattr(stats, "solve_time", None),
            },
        )

    def _solve_problem(
        self, lp: LinearProgram, solver: str, opts: dict[str, Any], user_keys: list[str]
    ) -> tuple[list[tuple[Any, np.ndarray]], Any]:
        """State ``lp`` as a ``cvxpy.Problem`` and solve it with ``solver`` and ``opts``.

        Returns the variable parts (see :meth:`_variables`) and the solved problem. Raises
        ValidationError when the solver rejects the user's options, SolverError when it fails.
        """
        import cvxpy as cp

        x_var, x = self._variables(cp, lp)
        problem = cp.Problem(self._objective(cp, lp, x), self._constraints(cp, lp, x))
        try:
            with warnings.catch_warnings(record=True) as caught:
                # cvxpy warns "Solution may be inaccurate" for *_inaccurate and user_limit;
                # the status says so already, so the warnings go to the log.
                warnings.simplefilter("always")
                problem.solve(solver=solver, **opts)
            for w in caught:
                log.info("cvxpy/%s %s: %s", solver, lp.name, w.message)
        except (cp.error.SolverError, TypeError, ValueError) as exc:
            # Solvers reject unknown or bad keywords with any of these; blame the user's
            # options only when there are some (naming the ones the message mentions).
            named = [k for k in user_keys if k in str(exc)]
            if named or (user_keys and not isinstance(exc, cp.error.SolverError)):
                raise ValidationError(
                    f"`options` {named or user_keys} rejected by cvxpy solver {solver!r}: {exc}"
                ) from None
            raise SolverError(f"cvxpy solver {solver!r} failed on program {lp.name!r}: {exc}") from exc
        return x_var, problem

    def _read_result(
        self, lp: LinearProgram, native: str, x_var: list[tuple[Any, np.ndarray]], *,
        limited: bool, time_limit: float | None, t0: float,
    ) -> tuple[str, bool, np.ndarray | None]:
        """The hetsched status for cvxpy's ``native`` status, whether there is a solution, and
        the values cvxpy holds (None when none).

        "user_limit" becomes "time_limit" or "iteration_limit" (see the class notes) and counts
        as a solution only for an incumbent (:meth:`_is_incumbent`); "optimal" without values
        becomes "unknown".
        """
        if native == "user_limit":
            # cvxpy folds a solver's time and iteration caps into one status: a run that
            # stopped well inside the time budget hit its iteration cap
            spent = time.perf_counter() - t0
            timed_out = limited and (time_limit is None or spent >= 0.9 * float(time_limit))
            status = "time_limit" if timed_out else "iteration_limit"
        else:
            status = map_status(native, STATUS_TABLE)
        values = self._values(lp, x_var)
        if status == "optimal":
            has_solution = values is not None
            if not has_solution:
                status = "unknown"
        elif native == "user_limit":
            has_solution = values is not None and self._is_incumbent(lp, values)
        else:
            has_solution = False
        return status, has_solution, values

    @staticmethod
    def _variables(cp: Any, lp: LinearProgram) -> tuple[list[tuple[Any, np.ndarray]], Any]:
        """cvxpy variables and the expression ``x`` in program order.

        Returns ``[(variable, program_indices), ...]`` and the expression.
        """
        n = lp.n_vars
        if not lp.is_mip:
            x = cp.Variable(n, name="x")
            return [(x, np.arange(n))], x
        integer = np.asarray(lp.integrality, dtype=bool)
        i_int, i_cont = np.flatnonzero(integer), np.flatnonzero(~integer)
        parts = []
        if i_cont.size:
            parts.append((cp.Variable(i_cont.size, name="x_cont"), i_cont))
        parts.append((cp.Variable(i_int.size, name="x_int", integer=True), i_int))
        order = np.concatenate([idx for _, idx in parts])
        stacked = cp.hstack([v for v, _ in parts]) if len(parts) > 1 else parts[0][0]
        return parts, stacked[np.argsort(order)]

    @staticmethod
    def _objective(cp: Any, lp: LinearProgram, x: Any) -> Any:
        expr = np.asarray(lp.c, dtype=float) @ x + float(lp.offset)
        return cp.Maximize(expr) if lp.sense == "max" else cp.Minimize(expr)

    @staticmethod
    def _constraints(cp: Any, lp: LinearProgram, x: Any) -> list[Any]:
        """One vectorized constraint per block (equality / upper / lower rows and columns)."""
        A = lp.A.tocsr()
        out = []
        for M, lb, ub, is_rows in ((A, lp.row_lb, lp.row_ub, True), (None, lp.col_lb, lp.col_ub, False)):
            lb = np.asarray(lb, dtype=float)
            ub = np.asarray(ub, dtype=float)
            eq = np.isfinite(lb) & (lb == ub)
            blocks = (
                (np.flatnonzero(eq), "==", lb),
                (np.flatnonzero(np.isfinite(ub) & ~eq), "<=", ub),
                (np.flatnonzero(np.isfinite(lb) & ~eq), ">=", lb),
            )
            for idx, op, rhs in blocks:
                if not idx.size:
                    continue
                lhs = M[idx] @ x if is_rows else x[idx]
                if op == "==":
                    out.append(lhs == rhs[idx])
                elif op == "<=":
                    out.append(lhs <= rhs[idx])
                else:
                    out.append(lhs >= rhs[idx])
        return out

    @staticmethod
    def _values(lp: LinearProgram, parts: list[tuple[Any, np.ndarray]]) -> np.ndarray | None:
        """The solution in program order, or None when cvxpy holds no values."""
        x = np.empty(lp.n_vars)
        for var, idx in parts:
            if var.value is None:
                return None
            x[idx] = np.asarray(var.value, dtype=float).ravel()
        return x

    @staticmethod
    def _is_incumbent(lp: LinearProgram, x: np.ndarray) -> bool:
        """Whether ``x`` satisfies the bounds (and integrality) of ``lp`` to :data:`INCUMBENT_TOL`."""
        if not np.all(np.isfinite(x)):
            return False
        finite = np.concatenate([lp.row_lb, lp.row_ub, lp.col_lb, lp.col_ub])
        finite = finite[np.isfinite(finite)]
        scale = 1.0 + (float(np.max(np.abs(finite))) if finite.size else 0.0)
        if lp.max_violation(x) > INCUMBENT_TOL * scale:
            return False
        if lp.is_mip:
            xi = x[np.asarray(lp.integrality, dtype=bool)]
            return bool(np.all(np.abs(xi - np.round(xi)) <= INCUMBENT_TOL * (1.0 + np.abs(xi))))
        return True
