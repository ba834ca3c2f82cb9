"""Steps of a column-generation round shared by the level and the floor mode.

Both :func:`~.level.solve_level` and :func:`~.floor.solve_floor` run the same loop: check the
deadline, build and solve the master, record the round, and, once nothing is left to add,
store the allocation with its certificate. The mode-specific phases (grouping the fixed
jobs, pricing, choosing violators) stay in :mod:`.level` and :mod:`.floor`.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from .basis import BasisMemo, capture_basis, start_basis
from .master import Aggregate, build_master, solve_master
from .options import StructuredOptions, StructuredResult
from .problem import SeparableProblem

__all__ = ["certify", "iteration_limit", "master_failed", "out_of_time", "record_round", "solve_round_master",
           "store_solution"]


def out_of_time(res: StructuredResult, deadline: float | None, rnd: int) -> bool:
    """Whether the deadline passed before master solve ``rnd``; marks ``res`` "time_limit" if so."""
    if deadline is not None and time.perf_counter() > deadline:
        res.status, res.message = "time_limit", f"time limit after {rnd - 1} master solves"
        return True
    return False


def solve_round_master(P: SeparableProblem, amb_idx: np.ndarray, res: StructuredResult, deadline: float | None,
                       memo: BasisMemo | None = None, **master: Any):
    """Build the master over the master jobs ``amb_idx`` (``master``: the keywords of
    :func:`~.master.build_master`) and solve it, timed into ``res.master_s``. With a
    ``memo`` (floor mode) the master starts from the last round's basis when there is one
    and leaves its own there.

    Returns the program, its variable maps and the solver's outcome.
    """
    t_m = time.perf_counter()
    lp, maps = build_master(P, amb_idx, **master)
    start = None
    if memo is not None and memo.last is not None:
        start = start_basis(P, amb_idx, lp, maps, master.get("agg"), memo.last)
    out = solve_master(lp, deadline, start=start, keep_basis=memo is not None)
    if memo is not None:
        basis = out.info.get("basis") if out.info else None
        memo.last = None if basis is None else capture_basis(P, amb_idx, lp, maps, master.get("agg"), *basis)
    res.master_s += time.perf_counter() - t_m
    return lp, maps, out


def master_failed(res: StructuredResult, out: Any, rnd: int) -> bool:
    """Whether master ``rnd`` failed; the failure becomes the status of ``res`` if so."""
    if not out.success:
        res.status = out.status
        res.message = f"master LP {rnd} ended {out.status!r} ({out.message})"
        return True
    return False


def record_round(res: StructuredResult, logger: logging.Logger, fmt: str, rnd: int, amb_idx: np.ndarray,
                 agg: Aggregate | None, n_vars: int, value: tuple[str, float], upper: float, gap: float,
                 viol: np.ndarray, new_cols: np.ndarray) -> None:
    """Append round ``rnd`` to ``res.history`` and log it with ``fmt``: master jobs, groups,
    master variables, the round's value (``(name, value)``: the level t or the objective),
    the bound, the gap, violators and new columns."""
    groups, n_new = agg.size if agg else 0, int(new_cols.sum())
    res.history.append({"round": rnd, "master_jobs": int(amb_idx.size), "groups": groups, "master_vars": n_vars,
                        value[0]: value[1], "upper": upper, "gap": gap, "violators": int(viol.size),
                        "new_columns": n_new})
    logger.debug(fmt, rnd, amb_idx.size, groups, n_vars, value[1], gap, viol.size, n_new)


def store_solution(res: StructuredResult, amb_idx: np.ndarray, Xa: np.ndarray, m: int, n: int, rnd: int,
                   lower: float, upper: float) -> np.ndarray:
    """Record the final round in ``res``: bounds ``lower`` / ``max(upper, lower)``, the
    round count and the number of master jobs. Returns X (n, m) holding the master jobs'
    rows ``Xa``; the caller adds the fixed jobs' allocation."""
    X = np.zeros((n, m))
    X[amb_idx] = Xa
    res.lower, res.upper = lower, max(upper, lower)
    res.rounds, res.n_master_jobs = rnd, int(amb_idx.size)
    return X


def certify(res: StructuredResult, gap: float, rnd: int, opts: StructuredOptions, logger: logging.Logger,
            mode: str, t_start: float) -> StructuredResult:
    """Final status of a round with nothing left to add: "optimal" when the certified
    ``gap`` is within tolerance, else "numerical_error". Logs the end and returns ``res``."""
    if gap <= max(opts.gap_tol, 1e-7):
        res.status, res.message = "optimal", f"certified gap {max(gap, 0.0):.1e} after {rnd} master LP(s)"
    else:
        res.status = "numerical_error"
        res.message = f"no violators but certified gap {gap:.1e} after {rnd} master LP(s)"
    logger.debug("structured " + mode + " done in %.3fs: %s", time.perf_counter() - t_start, res.message)
    return res


def iteration_limit(res: StructuredResult, opts: StructuredOptions) -> StructuredResult:
    """``res`` marked "iteration_limit": ``opts.max_rounds`` master solves without a certificate."""
    res.status, res.message = "iteration_limit", f"no certificate after {opts.max_rounds} master LPs"
    return res
