"""PuLP backend: the program rebuilt row by row in PuLP and solved by its bundled CBC.

PuLP needs one Python object per variable, so this backend is a cross-check, not a hot
path. Rows are read from the CSR arrays, one ``indptr`` slice per row::

    lb == ub (finite)   ->  expr == lb
    finite ub           ->  expr <= ub
    finite lb           ->  expr >= lb         (a ranged row gives two constraints)

Rows with no nonzeros are checked here (``lb <= 0 <= ub``) instead of being sent to CBC.
"""

from __future__ import annotations

import logging
import math
import os
import re
import tempfile
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..errors import SolverError, ValidationError
from ..validation import check_bool, check_int, check_nonneg
from .base import Backend, Capabilities, SolverOutput, map_status
from .program import LinearProgram
from .registry import register_backend

__all__ = ["OPTION_KEYS", "STATUS_TABLE", "PulpBackend", "cbc_mip_gap"]

log = logging.getLogger(__name__)

#: ``(prob.status, prob.sol_status)`` -> hetsched status. PuLP reads CBC's "Stopped on
#: time - objective value ..." as status 1 ("Optimal") with sol_status 2 ("Solution
#: Found"), so the pair, not the status alone, decides. (0, 0) ("Stopped", no solution)
#: is resolved in :meth:`PulpBackend._run`: "time_limit" when a time limit was set.
STATUS_TABLE: dict[tuple[int, int], str] = {
    (1, 1): "optimal",
    (1, 2): "time_limit",
    (-1, -1): "infeasible",
    (-1, 0): "infeasible",  # CBC "Integer infeasible"
    (-2, -2): "unbounded",
}

#: Options accepted (passed to ``pulp.PULP_CBC_CMD``) and the rule of each value
#: (``rule(value, name)`` raises :class:`ValidationError`; see :mod:`hetsched.validation`).
OPTION_KEYS: dict[str, Callable[[Any, str], Any]] = {
    "msg": check_bool,
    "gapRel": check_nonneg,
    "threads": lambda v, name: check_int(v, name, low=1),
}

_NUMBER = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"


def cbc_mip_gap(log_text: str) -> float | None:
    """Relative MIP gap from a CBC log: ``|bound - objective| / |objective|``.

    Parameters
    ----------
    log_text : str
        CBC's standard output.

    Returns
    -------
    float or None
        The gap from the "Objective value" and "Upper bound"/"Lower bound" lines of CBC's
        final summary; 0.0 for "Optimal solution found" without a bound line (gap closed);
        None when the log has no summary.

    Examples
    --------
    >>> text = "Result - Stopped on time limit\\n\\nObjective value:  2444.0\\nUpper bound:  2493.854\\n"
    >>> round(cbc_mip_gap(text), 4)
    0.0204
    """
    i = log_text.rfind("Result - ")
    if i < 0:
        return None
    summary = log_text[i:]
    obj = re.search(r"^Objective value:\s*" + _NUMBER, summary, re.M)
    bound = re.search(r"^(?:Upper|Lower) bound:\s*" + _NUMBER, summary, re.M)
    if obj and bound:
        o, b = float(obj.group(1)), float(bound.group(1))
        if o == 0.0:
            return 0.0 if b == 0.0 else math.inf
        return abs(b - o) / abs(o)
    if summary.startswith("Result - Optimal solution found"):
        return 0.0
    return None


def _check_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of ``options`` after checking each key and value against :data:`OPTION_KEYS`."""
    opts = dict(options or {})
    for key, value in opts.items():
        if key not in OPTION_KEYS:
            raise ValidationError(
                f"`options[{key!r}]` is not a PuLP/CBC option this backend accepts; use one of {sorted(OPTION_KEYS)}."
            )
        OPTION_KEYS[key](value, f"options[{key!r}]")
    return opts


def _run_cbc(pulp: Any, prob: Any, name: str, opts: dict[str, Any], time_limit: float | None) -> str:
    """Solve the PuLP problem ``prob`` with CBC (``pulp.PULP_CBC_CMD``) and the checked ``opts``.

    Returns CBC's log ("" when ``msg`` is true: the log then goes to the console). Raises
    SolverError when CBC fails to run.
    """
    log_path = None
    if not opts.get("msg", False):
        fd, log_path = tempfile.mkstemp(prefix="hetsched-cbc-", suffix=".log")
        os.close(fd)
    kwargs = dict(msg=bool(opts.get("msg", False)), timeLimit=time_limit, logPath=log_path)
    kwargs.update({k: v for k, v in opts.items() if k != "msg"})
    log_text = ""
    try:
        with warnings.catch_warnings():
            # PULP_CBC_CMD is deprecated for PuLP 4.0 (COIN_CMD + pulp[cbc] replaces it).
            warnings.simplefilter("ignore", DeprecationWarning)
            cmd = pulp.PULP_CBC_CMD(**kwargs)
            prob.solve(cmd)
    except pulp.PulpSolverError as exc:
        raise SolverError(f"CBC failed on program {name!r}: {exc}") from exc
    finally:
        if log_path is not None:
            try:
                with open(log_path) as fh:
                    log_text = fh.read()
            finally:
                os.remove(log_path)
    return log_text


@register_backend
class PulpBackend(Backend):
    """PuLP with its bundled CBC (``pulp.PULP_CBC_CMD``); LPs and MIPs.

    ``options`` may hold ``msg`` (bool: show CBC's log), ``gapRel`` (relative MIP gap at
    which CBC stops) and ``threads``; any other key, or a bad value, raises
    :class:`~hetsched.errors.ValidationError` (also for a program settled without the
    solver). ``time_limit`` is passed as ``timeLimit``. CBC failing to run, or leaving
    variables without values, raises :class:`~hetsched.errors.SolverError`.

    Notes
    -----
    Status mapping (:data:`STATUS_TABLE`) uses the pair ``(prob.status, prob.sol_status)``:
    Optimal/Optimal Solution Found -> "optimal"; Optimal/Solution Found (CBC stopped on
    the time limit holding an incumbent) -> "time_limit" with the incumbent as ``x``
    (but "unknown", without a solution, when CBC stopped that way without a time limit or
    before 90 % of it was spent: seen on LPs, with a point that breaks bounds);
    Not Solved/No Solution Found -> "time_limit" without a solution when a time limit was
    set, else "unknown"; Infeasible -> "infeasible"; Unbounded -> "unbounded"; anything
    else -> "unknown". ``mip_gap`` is parsed from CBC's log (see :func:`cbc_mip_gap`);
    it is None when ``msg=True`` (the log then goes to the console) or for LPs.
    Duals are not provided.
    """

    name = "pulp"
    module = "pulp"
    capabilities = Capabilities(mip=True, gap_option="gapRel")

    @classmethod
    def available(cls) -> bool:
        try:
            import pulp
        except ImportError:
            return False
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                return bool(pulp.PULP_CBC_CMD(msg=False).available())
        except Exception:
            return False

    def _prepare(self, lp: LinearProgram, *, time_limit: float | None, options: Mapping[str, Any] | None) -> Any:
        """The checked options (:func:`_check_options`)."""
        return _check_options(options)

    def _run(self, lp: LinearProgram, prepared: Any, *, time_limit: float | None, t0: float) -> SolverOutput:
        """Build ``lp`` in PuLP, run CBC with the checked options and read status and values."""
        import pulp

        prob, xs = self._build(pulp, lp)
        log_text = _run_cbc(pulp, prob, lp.name, prepared, time_limit)
        pair = (int(prob.status), int(prob.sol_status))
        native = f"{pulp.LpStatus.get(pair[0], pair[0])} / {pulp.LpSolution.get(pair[1], pair[1])}"
        if pair == (0, 0) and time_limit is not None:
            status = "time_limit"
        else:
            status = map_status(pair, STATUS_TABLE)
        if status == "time_limit" and (time_limit is None or time.perf_counter() - t0 < 0.9 * float(time_limit)):
            # "Stopped on ..." well inside (or without) a time limit: CBC gave up for another reason
            status = "unknown"
        has_solution = pair[1] in (1, 2) and status in ("optimal", "time_limit")
        if has_solution:
            x = np.array([v.varValue if v.varValue is not None else np.nan for v in xs], dtype=float)
            if np.isnan(x).any():
                raise SolverError(f"CBC reported {native!r} on program {lp.name!r} but left variables without values.")
            objective = lp.objective_value(x)
        else:
            x = self.no_solution(lp)
            objective = float("nan")
        mip_gap = cbc_mip_gap(log_text) if lp.is_mip and has_solution and log_text else None
        return self._finish(
            lp, t0, log, "pulp/cbc", status=status, x=x, objective=objective, has_solution=has_solution,
            native_status=native, message=f"PuLP/CBC: {native}", row_dual=None, mip_gap=mip_gap,
            info={"pulp_status": pair[0], "pulp_sol_status": pair[1]},
        )

    @staticmethod
    def _build(pulp: Any, lp: LinearProgram) -> tuple[Any, list[Any]]:
        """The PuLP problem and its variables (rows without coefficients are skipped: the
        caller has ruled out those whose bounds exclude 0)."""
        sense = pulp.LpMaximize if lp.sense == "max" else pulp.LpMinimize
        prob = pulp.LpProblem(_safe_name(lp.name), sense)
        integer = np.zeros(lp.n_vars, dtype=bool) if lp.integrality is None else np.asarray(lp.integrality, bool)
        lbs = [None if not np.isfinite(v) else float(v) for v in lp.col_lb]
        ubs = [None if not np.isfinite(v) else float(v) for v in lp.col_ub]
        cats = np.where(integer, pulp.LpInteger, pulp.LpContinuous)
        if hasattr(prob, "add_variable"):  # PuLP >= 3.3; constructing LpVariable is deprecated there
            xs = [prob.add_variable(f"x{i}", lbs[i], ubs[i], cat=str(cats[i])) for i in range(lp.n_vars)]
        else:  # pragma: no cover - older PuLP
            xs = [pulp.LpVariable(f"x{i}", lbs[i], ubs[i], cat=str(cats[i])) for i in range(lp.n_vars)]
            prob.addVariables(xs)
        # Every variable enters the objective, zero coefficients included: PuLP writes only
        # the variables that appear in some expression, and CBC returns no value for others.
        c = np.asarray(lp.c, dtype=float)
        prob.setObjective(pulp.LpAffineExpression(list(zip(xs, c.tolist())), constant=float(lp.offset)))

        A = lp.A.tocsr()
        if not A.has_canonical_format:  # never mutate the caller's matrix
            A = A.copy()
            A.sum_duplicates()
        indptr, indices, data = A.indptr, A.indices, A.data
        rlb = np.asarray(lp.row_lb, dtype=float)
        rub = np.asarray(lp.row_ub, dtype=float)
        for i in range(lp.n_rows):
            lo, hi = rlb[i], rub[i]
            s, e = indptr[i], indptr[i + 1]
            if s == e:
                continue
            expr = pulp.LpAffineExpression([(xs[j], float(v)) for j, v in zip(indices[s:e], data[s:e])])
            if np.isfinite(lo) and lo == hi:
                prob.addConstraint(pulp.LpConstraint(expr, pulp.LpConstraintEQ, rhs=float(lo)), f"r{i}")
                continue
            if np.isfinite(hi):
                prob.addConstraint(pulp.LpConstraint(expr, pulp.LpConstraintLE, rhs=float(hi)), f"r{i}")
            if np.isfinite(lo):
                prob.addConstraint(pulp.LpConstraint(expr, pulp.LpConstraintGE, rhs=float(lo)), f"r{i}_lb")
        return prob, xs


def _safe_name(name: str) -> str:
    """A problem name PuLP/CBC accept (no spaces or colons)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name) or "lp"
