"""``solver="structured"``: the exact structured path as a solver backend.

The backend recognizes the block-angular shape of the allocation LPs from the
:class:`~hetsched.solvers.program.LinearProgram` alone (:func:`.recognize`) and solves it with
:func:`.solve_separable`. A program without that shape, or one the structured solver
does not certify, is handed to the backend ``solver="auto"`` would pick (the message and
``info["delegated_to"]`` say so); ``options={"fallback": "none"}`` turns that off.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from ...errors import ValidationError
from ...validation import check_choice, check_int, check_real, fail
from ..base import Backend, Capabilities, SolverOutput
from ..program import LinearProgram
from ..registry import choose_auto, get_backend, register_backend
from .problem import SeparableProblem, recognize
from .solver import StructuredOptions, StructuredResult, solve_separable

__all__ = ["StructuredBackend", "structured_options"]

log = logging.getLogger(__name__)

_OPTION_NAMES = tuple(f.name for f in dataclasses.fields(StructuredOptions))
_INITS = ("sample", "hybrid", "ipx", "pdlp", "lagrangian", "uniform", "none")


def structured_options(options: Mapping[str, Any] | None) -> tuple[StructuredOptions, str]:
    """Split backend ``options`` into :class:`StructuredOptions` and the fallback name.

    Raises
    ------
    ValidationError
        An unknown option name or a value of the wrong kind.
    """
    opts = dict(options or {})
    fallback = opts.pop("fallback", "auto")
    if not isinstance(fallback, str):
        raise fail("options['fallback']", "a backend name, 'auto' or 'none'", fallback)
    unknown = sorted(set(opts) - set(_OPTION_NAMES))
    if unknown:
        raise ValidationError(
            f"`options` for solver 'structured' must be among {[*_OPTION_NAMES, 'fallback']}; got {unknown}."
        )
    for key in ("gap_tol", "margin", "bin_width", "coarse_gap", "lagrangian_tol"):
        if key in opts:
            check_real(opts[key], f"options[{key!r}]", low=0.0, high=1.0, low_open=True, high_open=True)
    for key in ("group_ratio", "column_ratio"):
        if key in opts:
            check_real(opts[key], f"options[{key!r}]", low=1.0, low_open=True)
    for key, low in (("sample_factor", 2), ("base_size", 1), ("max_rounds", 1), ("coarse_rounds", 0), ("floor_coarse_rounds", 0), ("seed", 0),
                     ("lagrangian_iters", 1), ("max_add", 1)):
        if key in opts:
            check_int(opts[key], f"options[{key!r}]", low=low)
    if "init" in opts:
        check_choice(opts["init"], "options['init']", _INITS)
    return StructuredOptions(**opts), fallback


def _solution_vector(lp: LinearProgram, P: SeparableProblem, r: StructuredResult) -> np.ndarray:
    x = np.zeros(lp.n_vars)
    if lp.x_block_start == 0 and P.U.all():   # X[j, k] is variable j m + k
        x[: r.X.size] = r.X.reshape(-1)
    else:
        x[P.x_index[P.U]] = r.X[P.U]
    if P.t_index >= 0:
        x[P.t_index] = r.t if P.mode == "level" else P.t_value
    return x


def _row_duals(lp: LinearProgram, P: SeparableProblem, r: StructuredResult) -> np.ndarray:
    """Duals in HiGHS's convention for a maximization (<= rows >= 0, >= rows <= 0)."""
    g = P.gamma if P.mode == "level" else 1.0
    d = np.zeros(lp.n_rows)
    has_t = P.time_row >= 0
    d[P.time_row[has_t]] = g * r.z[has_t]
    has_c = P.cap_row >= 0
    d[P.cap_row[has_c]] = g * r.lam[: P.m][has_c]
    has_l = P.level_row >= 0
    d[P.level_row[has_l]] = -g * r.y[has_l] / P.level_scale[has_l]
    has_x = P.extra_row >= 0
    d[P.extra_row[has_x]] = g * r.lam[P.m:][has_x]
    if P.zero_row.size:  # a row fixing a variable at 0 takes up the variable's positive reduced cost
        v = P.x_index[P.zero_j, P.zero_k]
        rc = np.asarray(lp.c, dtype=float)[v] - (lp.A.T @ d)[v]
        d[P.zero_row] = np.maximum(rc, 0.0) / P.zero_coef
    return d


@register_backend
class StructuredBackend(Backend):
    """Exact structured solver for block-angular allocation LPs (see :mod:`hetsched.solvers.structured`).

    ``options``: any field of :class:`StructuredOptions` (``gap_tol``, ``margin``,
    ``seed``, ``init``, ...) and ``fallback`` ("auto" default: the backend ``solver="auto"``
    picks; a backend name; or "none" to return the structured status as is).
    """

    name = "structured"
    module = "highspy"
    # recognizes block-angular programs only and hands the others to a general backend
    capabilities = Capabilities(duals=True, general=False)

    def solve(self, lp: LinearProgram, *, time_limit: float | None = None,
              options: Mapping[str, Any] | None = None) -> SolverOutput:
        t0 = time.perf_counter()
        opts, fallback = structured_options(options)
        P, why = recognize(lp)
        if P is None:
            return self._delegate(lp, fallback, time_limit, t0, f"not block-angular ({why})")
        r = solve_separable(P, opts, time_limit=time_limit)
        info = {"rounds": r.rounds, "master_jobs": r.n_master_jobs, "gap": r.gap, "lower": r.lower,
                "upper": r.upper, "warm_s": r.warm_s, "master_s": r.master_s, "pricing_s": r.pricing_s,
                "mode": P.mode, "init": r.warm_info.get("init", "")}
        if r.status == "optimal" and P.mode == "level" and r.lam is not None:
            # prices a later program over the same jobs can start from (meta["structured_warm"])
            # and the allocation, a witness that floors at this level can be met (floor mode's
            # first prices, :func:`.floor._witness_prices`)
            info["warm"] = {"lam": r.lam, "master_rows": r.master_rows, "level": r.t, "n": P.n, "X": r.X}
        if r.status == "optimal":
            elapsed = time.perf_counter() - t0
            log.debug("structured %s (%s mode): %s in %.3fs", lp.name, P.mode, r.message, elapsed)
            return SolverOutput(status="optimal", x=_solution_vector(lp, P, r), objective=float(r.objective),
                                has_solution=True, native_status=r.status, message=f"structured: {r.message}",
                                solve_s=elapsed, backend=self.name, row_dual=_row_duals(lp, P, r), info=info)
        if r.status == "time_limit":
            return SolverOutput(status="time_limit", x=self.no_solution(lp), objective=float("nan"),
                                has_solution=False, native_status=r.status, message=f"structured: {r.message}",
                                solve_s=time.perf_counter() - t0, backend=self.name, info=info)
        remaining = None if time_limit is None else time_limit - (time.perf_counter() - t0)
        return self._delegate(lp, fallback, remaining, t0, f"{r.status}: {r.message}", info)

    def _delegate(self, lp, fallback, time_limit, t0, reason, info=None) -> SolverOutput:
        if fallback == "none":
            return SolverOutput(status="unknown", x=self.no_solution(lp), objective=float("nan"), has_solution=False,
                                native_status="not solved", message=f"structured: {reason}; no fallback",
                                solve_s=time.perf_counter() - t0, backend=self.name, info=dict(info or {}))
        if fallback == "auto":  # what "auto" picks among backends that solve any program
            name, opts = choose_auto(lp, require=("general",))
        else:
            name, opts = fallback, {}
            if not get_backend(name).capabilities.general:
                raise ValidationError(f"`options['fallback']` must be a backend that solves any program "
                                      f"(capabilities.general), 'auto' or 'none'; got {name!r}.")
        if time_limit is not None and time_limit <= 0:
            return SolverOutput(status="time_limit", x=self.no_solution(lp), objective=float("nan"),
                                has_solution=False, native_status="not started",
                                message=f"structured: {reason}; no time left for {name}",
                                solve_s=time.perf_counter() - t0, backend=self.name, info=dict(info or {}))
        log.info("structured: %s; program %r solved by %s", reason, lp.name, name)
        out = get_backend(name).solve(lp, time_limit=time_limit, options=opts)
        return dataclasses.replace(out, message=f"structured: {reason}; {name}: {out.message}",
                                   solve_s=time.perf_counter() - t0, backend=self.name,
                                   info={**out.info, **(info or {}), "delegated_to": name, "delegation_reason": reason})
