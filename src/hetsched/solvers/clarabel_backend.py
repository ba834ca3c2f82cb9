"""Clarabel backend: the LP as a conic program, assembled in bulk with scipy.sparse.

Clarabel solves

.. math::

    \\min_x\\ \\tfrac12 x^\\top P x + q^\\top x \\quad\\text{s.t.}\\quad A x + s = b,\\ s \\in K

with :math:`K` a product of cones. A :class:`~hetsched.solvers.program.LinearProgram` is stacked as
(``P = 0``, ``q = c`` for "min" and ``q = -c`` for "max")::

    zero cone      :   a_i x  = lb_i         rows with lb == ub (finite)
                        x_j    = lb_j         columns with lb == ub (finite)
    nonneg cone    :   a_i x <= ub_i         rows with finite ub (not equality)
                       -a_i x <= -lb_i        rows with finite lb (not equality)
                        x_j   <= ub_j         columns with finite ub (not fixed)
                       -x_j   <= -lb_j        columns with finite lb (not fixed)

The two blocks are built with one ``scipy.sparse.vstack`` each.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import CapabilityError, SolverError, ValidationError
from .base import Backend, Capabilities, SolverOutput, map_status, native_status_table
from .program import LinearProgram
from .registry import register_backend

__all__ = ["DEFAULT_TOLERANCES", "ClarabelBackend"]

log = logging.getLogger(__name__)

#: Tolerances set before user options (Clarabel's own defaults are 1e-8).
DEFAULT_TOLERANCES: dict[str, float] = {"tol_gap_abs": 1e-9, "tol_gap_rel": 1e-9, "tol_feas": 1e-9}


#: ``clarabel.SolverStatus`` member name -> hetsched status (others: "unknown").
_STATUS_NAMES: dict[str, str] = {
    "Solved": "optimal",
    "AlmostSolved": "optimal",
    "PrimalInfeasible": "infeasible",
    "AlmostPrimalInfeasible": "infeasible",
    "DualInfeasible": "unbounded",
    "AlmostDualInfeasible": "unbounded",
    "MaxTime": "time_limit",
    "MaxIterations": "iteration_limit",
    "NumericalError": "numerical_error",
    "InsufficientProgress": "numerical_error",
}


def _status_table() -> dict[Any, str]:
    """``clarabel.SolverStatus`` -> hetsched status (:data:`_STATUS_NAMES`)."""
    import clarabel

    return native_status_table(clarabel.SolverStatus, _STATUS_NAMES)


def _settings(time_limit: float | None, options: Mapping[str, Any] | None) -> Any:
    """A ``clarabel.DefaultSettings`` with hetsched defaults, then ``time_limit``, then ``options``."""
    import clarabel

    settings = clarabel.DefaultSettings()
    settings.verbose = False
    for key, value in DEFAULT_TOLERANCES.items():
        setattr(settings, key, value)
    if time_limit is not None:
        settings.time_limit = float(time_limit)
    for key, value in (options or {}).items():
        key = str(key)
        if key.startswith("_") or not hasattr(settings, key) or callable(getattr(settings, key)):
            raise ValidationError(
                f"`options[{key!r}]` is not a Clarabel setting; valid keys are the attributes of "
                f"clarabel.DefaultSettings (e.g. 'tol_gap_rel', 'max_iter', 'verbose')."
            )
        try:
            setattr(settings, key, value)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ValidationError(f"`options[{key!r}]` = {value!r} was rejected by Clarabel: {exc}") from None
    return settings


def conic_form(lp: LinearProgram) -> tuple[sp.csc_array, np.ndarray, int, np.ndarray, np.ndarray]:
    """Stack ``lp``'s rows and column bounds into Clarabel's ``A x + s = b`` form.

    Parameters
    ----------
    lp : LinearProgram
        The program.

    Returns
    -------
    A : scipy.sparse.csc_array, shape (n_cone_rows, n_vars)
        Zero-cone rows first, then nonnegative-cone rows.
    b : ndarray, shape (n_cone_rows,)
        Right-hand side.
    n_zero : int
        Number of zero-cone (equality) rows; the rest are nonnegative-cone rows.
    origin : ndarray of int, shape (n_cone_rows,)
        Row of ``lp.A`` each cone row comes from, -1 for column-bound rows.
    orient : ndarray of float, shape (n_cone_rows,)
        +1 where the cone row is ``a_i x (<= or ==) b``, -1 where it is the negated
        lower-bound row ``-a_i x <= -lb_i``.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> lp = LinearProgram(c=np.ones(1), A=sp.csr_array(np.ones((1, 1))), row_lb=np.array([1.0]),
    ...                    row_ub=np.array([2.0]), col_lb=np.zeros(1), col_ub=np.full(1, np.inf),
    ...                    x_index=np.zeros((1, 1), dtype=int))
    >>> A, b, n_zero, origin, orient = conic_form(lp)
    >>> A.toarray().ravel().tolist(), b.tolist(), n_zero, origin.tolist()
    ([1.0, -1.0, -1.0], [2.0, -1.0, -0.0], 0, [0, 0, -1])
    """
    n = lp.n_vars
    A = sp.csr_array(lp.A)
    rlb = np.asarray(lp.row_lb, dtype=float)
    rub = np.asarray(lp.row_ub, dtype=float)
    clb = np.asarray(lp.col_lb, dtype=float)
    cub = np.asarray(lp.col_ub, dtype=float)

    row_eq = np.isfinite(rlb) & (rlb == rub)
    col_eq = np.isfinite(clb) & (clb == cub)
    i_eq = np.flatnonzero(row_eq)
    i_ub = np.flatnonzero(np.isfinite(rub) & ~row_eq)
    i_lb = np.flatnonzero(np.isfinite(rlb) & ~row_eq)
    j_eq = np.flatnonzero(col_eq)
    j_ub = np.flatnonzero(np.isfinite(cub) & ~col_eq)
    j_lb = np.flatnonzero(np.isfinite(clb) & ~col_eq)

    eye = sp.identity(n, format="csr", dtype=float)
    blocks = [A[i_eq], eye[j_eq], A[i_ub], eye[j_ub], -A[i_lb], -eye[j_lb]]
    rhs = [rlb[i_eq], clb[j_eq], rub[i_ub], cub[j_ub], -rlb[i_lb], -clb[j_lb]]
    none = lambda j: np.full(j.size, -1, dtype=np.int64)
    origin = np.concatenate([i_eq, none(j_eq), i_ub, none(j_ub), i_lb, none(j_lb)]).astype(np.int64)
    orient = np.concatenate([np.ones(i_eq.size + j_eq.size + i_ub.size + j_ub.size), -np.ones(i_lb.size + j_lb.size)])
    n_cone = origin.size
    stacked = sp.csc_array(sp.vstack(blocks, format="csc")) if n else sp.csc_array((n_cone, 0))
    stacked.sort_indices()
    b = np.concatenate(rhs).astype(float)
    return stacked, b, int(i_eq.size + j_eq.size), origin, orient


@register_backend
class ClarabelBackend(Backend):
    """Clarabel interior point, called directly (no cvxpy in between).

    Linear programs only (``capabilities.mip`` is False). ``options`` are attributes of
    ``clarabel.DefaultSettings`` (e.g. ``{"tol_gap_rel": 1e-7, "max_iter": 500}``); an
    unknown key raises :class:`~hetsched.errors.ValidationError`. Before the user's options,
    the backend sets ``verbose = False`` and tightens ``tol_gap_abs``, ``tol_gap_rel`` and
    ``tol_feas`` to 1e-9 (Clarabel's defaults are 1e-8). ``time_limit`` is passed as
    ``settings.time_limit`` (seconds).

    ``solve`` raises :class:`~hetsched.errors.CapabilityError` for a program with integer
    variables (before looking at ``options``), :class:`~hetsched.errors.ValidationError` for
    an option that is not a Clarabel setting or has a bad value (both also for a program
    settled without the solver), and :class:`~hetsched.errors.SolverError` when Clarabel
    rejects the data or crashes.

    Notes
    -----
    Status mapping: ``Solved`` -> "optimal"; ``AlmostSolved`` -> "optimal" too, with the message
    "almost solved (reduced tolerances)": Clarabel met its *reduced* tolerances
    (``reduced_tol_*``: 5e-5 on the gaps, 1e-4 on feasibility by default) but not the full ones, and the iterate is
    returned; ``PrimalInfeasible`` / ``AlmostPrimalInfeasible`` -> "infeasible";
    ``DualInfeasible`` / ``AlmostDualInfeasible`` -> "unbounded"; ``MaxTime`` ->
    "time_limit"; ``MaxIterations`` -> "iteration_limit"; ``NumericalError`` /
    ``InsufficientProgress`` -> "numerical_error"; anything else -> "unknown". Only
    "optimal" carries a solution: an interior-point iterate stopped early is not feasible.

    Row duals follow HiGHS' convention (the derivative of the objective with respect to
    the row's active bound: for "max", a binding ``<=`` row has a dual >= 0).
    """

    name = "clarabel"
    module = "clarabel"
    capabilities = Capabilities(duals=True, interior_point=True)

    def _prepare(self, lp: LinearProgram, *, time_limit: float | None, options: Mapping[str, Any] | None) -> Any:
        """Refuse integer programs, then return the ``clarabel.DefaultSettings`` (:func:`_settings`)."""
        if lp.is_mip:
            raise CapabilityError(
                f"`solver` 'clarabel' cannot solve integer programs ({lp.name}); use 'highs' or 'pulp'."
            )
        return _settings(time_limit, options)

    def _run(self, lp: LinearProgram, prepared: Any, *, time_limit: float | None, t0: float) -> SolverOutput:
        """Solve the conic form of ``lp`` with the prepared settings; map duals back to rows."""
        import clarabel

        A, b, n_zero, origin, orient = conic_form(lp)
        n = lp.n_vars
        sign = -1.0 if lp.sense == "max" else 1.0
        q = sign * np.asarray(lp.c, dtype=float)
        P = sp.csc_matrix((n, n))
        cones = []
        if n_zero:
            cones.append(clarabel.ZeroConeT(n_zero))
        if A.shape[0] - n_zero:
            cones.append(clarabel.NonnegativeConeT(A.shape[0] - n_zero))
        try:
            solver = clarabel.DefaultSolver(P, q, sp.csc_matrix(A), b, cones, prepared)
            sol = solver.solve()
        except Exception as exc:  # clarabel raises bare Exception on bad data
            raise SolverError(f"Clarabel failed on program {lp.name!r}: {exc}") from exc
        native = str(sol.status)
        status = map_status(sol.status, _status_table())
        has_solution = status == "optimal"
        if has_solution:
            x = np.asarray(sol.x, dtype=float)
            objective = lp.objective_value(x)
            row_dual = _row_duals(lp, np.asarray(sol.z, dtype=float), origin, orient, sign)
        else:
            x = self.no_solution(lp)
            objective = float("nan")
            row_dual = None
        message = f"Clarabel: {native}"
        if sol.status == clarabel.SolverStatus.AlmostSolved:
            message += ": almost solved (reduced tolerances)"
        return self._finish(
            lp, t0, log, "clarabel", status=status, x=x, objective=objective, has_solution=has_solution,
            native_status=native, message=message, row_dual=row_dual, mip_gap=None,
            info={"iterations": int(sol.iterations), "r_prim": float(sol.r_prim), "r_dual": float(sol.r_dual)},
        )


def _row_duals(lp: LinearProgram, z: np.ndarray, origin: np.ndarray, orient: np.ndarray, sign: float) -> np.ndarray | None:
    """Map Clarabel's ``z`` back to one dual per row of ``lp.A`` (HiGHS' sign convention).

    With ``q = sign * c``, Clarabel's objective falls by ``z_i`` per unit increase of
    ``b_i``; the original objective is ``sign`` times Clarabel's, and a lower-bound row
    enters with ``b = -lb``. Hence ``y = sign * (z_lb - z_ub - z_eq)``: the derivative of the
    objective with respect to the active bound.
    """
    if lp.n_rows == 0:
        return None
    y = np.zeros(lp.n_rows)
    keep = origin >= 0
    np.add.at(y, origin[keep], -orient[keep] * z[keep])
    return sign * y
