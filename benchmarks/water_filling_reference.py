"""Water filling the way Gavel does it: one LP and one MILP per level, in cvxpy.

Gavel's ``MaxMinFairnessWaterFillingPolicyWithPerf`` (stanford-futuredata/gavel) alternates
(1) an LP that maximizes the level t of the jobs not yet frozen, and (2) a MILP with a binary
z_j per active job that looks for the largest set of jobs that can rise above t together
(``share_j >= (1 + eps) t`` where z_j = 1); jobs left at z_j = 0 are frozen at t. Written
here from that description, on plain arrays (``a`` normalized-share coefficients, ``s``
scale factors, ``C`` GPU counts); no hetsched import. HiGHS (through cvxpy) runs both the
LPs and the MILPs (Gavel used Gurobi; an interior-point LP level is not accurate enough for
the MILP's rise test).
"""

from __future__ import annotations

import time
import warnings

import cvxpy as cp
import numpy as np

#: Relative rise a job must manage to count as "not bottlenecked" in the MILP. Smaller
#: values (1e-5, 1e-6) made the MILP infeasible after 19-100 levels on the 128-job run:
#: the LP levels are only accurate to the solvers' 1e-7 tolerances. Jobs that can rise by
#: less than EPS are frozen early, so the reference's shares may differ by ~EPS.
EPS = 1e-4


def water_filling(a: np.ndarray, s: np.ndarray, C: np.ndarray, *, time_limit: float = 600.0) -> dict:
    """Lexicographic max-min by LP + MILP per level; returns shares, levels, LP/MILP counts."""
    n, m = a.shape
    t0 = time.perf_counter()
    frozen = np.full(n, np.nan)
    active = np.ones(n, dtype=bool)
    n_lp = n_milp = 0
    levels = []
    x = cp.Variable((n, m), nonneg=True)
    base = [cp.sum(x, axis=1) <= 1, s @ x <= C, x[a == 0] == 0] if (a == 0).any() else [cp.sum(x, axis=1) <= 1, s @ x <= C]
    share = cp.sum(cp.multiply(a, x), axis=1)
    while active.any():
        if time.perf_counter() - t0 > time_limit:
            return {"shares": None, "levels": len(levels), "lps": n_lp, "milps": n_milp, "timed_out": True}
        t = cp.Variable()
        cons = list(base)
        idx_a, idx_f = np.flatnonzero(active), np.flatnonzero(~active)
        cons.append(share[idx_a] >= t)
        if idx_f.size:
            cons.append(share[idx_f] >= frozen[idx_f] * (1 - 1e-6))
        cp.Problem(cp.Maximize(t), cons).solve(solver=cp.HIGHS)
        n_lp += 1
        level = float(t.value)
        z = cp.Variable(idx_a.size, boolean=True)
        cons = list(base)
        cons.append(share[idx_a] >= level * (1 - 1e-6) + EPS * level * z)
        if idx_f.size:
            cons.append(share[idx_f] >= frozen[idx_f] * (1 - 1e-6))
        milp = cp.Problem(cp.Maximize(cp.sum(z)), cons)
        with warnings.catch_warnings():  # cvxpy's canonicalization warns on boolean slices
            warnings.simplefilter("ignore", RuntimeWarning)
            milp.solve(solver=cp.HIGHS)
        n_milp += 1
        if z.value is None:
            raise RuntimeError(f"reference MILP ended {milp.status!r} at level {len(levels) + 1}")
        rise = np.round(z.value).astype(bool)
        stuck = idx_a[~rise]
        if stuck.size == 0:  # numerical safety: freeze the lowest
            stuck = idx_a[:1]
        frozen[stuck] = level
        active[stuck] = False
        levels.append(level)
    # the shares the last program's X achieves (frozen rows may sit 1e-6 below their level)
    achieved = (a * np.clip(x.value, 0.0, None)).sum(axis=1)
    return {"shares": achieved, "levels": len(levels), "lps": n_lp, "milps": n_milp, "timed_out": False}
