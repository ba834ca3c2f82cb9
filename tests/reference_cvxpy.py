"""Plain cvxpy reference formulations written straight from the spec (Gavel OSDI'20 style).

Nothing here uses hetsched: inputs are raw numpy arrays

* ``T`` (n, m) throughputs (0 = cannot run there),
* ``s`` (n,) scale factors, ``C`` (m,) GPU counts, ``w`` (n,) weights,
* ``R`` (n,) steps remaining, ``t`` (n,) time since start, ``e`` (n,) isolated time elapsed,

and every function returns the optimal objective value in the units of
``hetsched.solve(...).objective``. Infeasible programs raise :class:`ReferenceInfeasible`.

All programs are solved by Clarabel (an interior-point conic solver, i.e. a different
algorithm from the simplex/IPM LP code a library would typically use) with tolerances of
1e-10 (loosened to 1e-9 / 1e-8 only when Clarabel reports "optimal_inaccurate"), which in
practice gives objectives to a relative accuracy of ~1e-9 on these sizes.
"""

from __future__ import annotations

import math
import warnings

import cvxpy as cp
import numpy as np

__all__ = [
    "ReferenceInfeasible",
    "usable_mask",
    "proportional_throughput",
    "isolated_allocation",
    "isolated_throughput",
    "max_min_fairness",
    "max_sum_throughput",
    "min_makespan",
    "max_min_ratio",
    "finish_time_fairness",
    "finish_time_fairness_bisection",
    "evaluate",
    "rel_err",
]

CLARABEL_OPTS = dict(
    tol_gap_abs=1e-10,
    tol_gap_rel=1e-10,
    tol_feas=1e-10,
    tol_ktratio=1e-8,
    max_iter=400,
)


class ReferenceInfeasible(Exception):
    """The reference program is infeasible."""


# ----------------------------------------------------------------------------- helpers
def _arrays(T, s, C):
    T = np.asarray(T, dtype=float)
    s = np.asarray(s, dtype=float).reshape(-1)
    C = np.asarray(C, dtype=float).reshape(-1)
    return T, s, C


def usable_mask(T, s, C) -> np.ndarray:
    """``True`` where job ``j`` can run on type ``k``: ``T[j,k] > 0`` and ``C_k >= s_j``."""
    T, s, C = _arrays(T, s, C)
    return (T > 0) & (C[None, :] >= s[:, None])


def proportional_throughput(T, C) -> np.ndarray:
    """``p_j = sum_k T[j,k] C_k / sum_k C_k`` (spec, literally: every type counts)."""
    T = np.asarray(T, dtype=float)
    C = np.asarray(C, dtype=float)
    return T @ C / C.sum()


def isolated_allocation(T, s, C, n_total: int | None = None, *, zero_where_T_zero: bool = False) -> np.ndarray:
    """Spec: ``x_iso[j,k] = (C_k / n) / s_j`` (0 where ``C_k < s_j``), rows / max(1, row sum).

    ``zero_where_T_zero=True`` is the *alternative reading* (also zero where ``T == 0``
    before normalizing); it is used only to explain a mismatch in failure messages.
    """
    T, s, C = _arrays(T, s, C)
    n = T.shape[0] if n_total is None else n_total
    x = (C[None, :] / n) / s[:, None]
    x = np.where(C[None, :] >= s[:, None], x, 0.0)
    if zero_where_T_zero:
        x = np.where(T > 0, x, 0.0)
    return x / np.maximum(1.0, x.sum(axis=1, keepdims=True))


def isolated_throughput(T, s, C, n_total: int | None = None, *, zero_where_T_zero: bool = False) -> np.ndarray:
    """``iso_j = sum_k T[j,k] x_iso[j,k]``."""
    T = np.asarray(T, dtype=float)
    return (T * isolated_allocation(T, s, C, n_total, zero_where_T_zero=zero_where_T_zero)).sum(axis=1)


def _base_problem(T, s, C):
    """Variable X and the base constraints (X >= 0 via nonneg, rows <= 1, capacity, zeros)."""
    T, s, C = _arrays(T, s, C)
    n, m = T.shape
    X = cp.Variable((n, m), nonneg=True)
    forbidden = (~usable_mask(T, s, C)).astype(float)
    cons = [
        cp.sum(X, axis=1) <= 1,
        s @ X <= C,
    ]
    if forbidden.any():
        cons.append(cp.multiply(forbidden, X) == 0)
    thr = cp.sum(cp.multiply(T, X), axis=1)
    return X, cons, thr


def _solve(prob: cp.Problem) -> float:
    """Solve with Clarabel at tolerance 1e-10, loosening to 1e-9 then 1e-8 if Clarabel reports
    'optimal_inaccurate' (it does on a few FTF instances at 1e-10)."""
    for tol in (1e-10, 1e-9, 1e-8):
        opts = dict(CLARABEL_OPTS, tol_gap_abs=tol, tol_gap_rel=tol, tol_feas=tol)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # cvxpy's "may be inaccurate" warning
            prob.solve(solver=cp.CLARABEL, **opts)
        if prob.status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
            raise ReferenceInfeasible(prob.status)
        if prob.status == cp.OPTIMAL:
            return float(prob.value)
    raise RuntimeError(f"reference solve ended with status {prob.status}")


# ---------------------------------------------------------------------------- policies
def max_min_fairness(T, s, C, w=None, *, heterogeneity_aware: bool = True,
                     p_usable_only: bool = False) -> float:
    """max_X min_j s_j thr_j(X) / (w_j p_j); heterogeneity-agnostic uses T := 1[T > 0].

    ``p_usable_only=True`` is the *alternative reading* of p_j that leaves out types with
    ``C_k < s_j``; it is used only to explain a mismatch in failure messages.
    """
    T, s, C = _arrays(T, s, C)
    if not heterogeneity_aware:
        T = (T > 0).astype(float)
    w = np.ones(T.shape[0]) if w is None else np.asarray(w, dtype=float)
    if p_usable_only:
        p = proportional_throughput(np.where(C[None, :] >= s[:, None], T, 0.0), C)
    else:
        p = proportional_throughput(T, C)
    X, cons, thr = _base_problem(T, s, C)
    coef = s / (w * p)
    return _solve(cp.Problem(cp.Maximize(cp.min(cp.multiply(coef, thr))), cons))


def max_sum_throughput(T, s, C, *, prices=None, required=None) -> float:
    """max_X sum_j thr_j(X) (or sum_jk T[j,k]/price_k X[j,k]); ``required``: thr_j >= required_j."""
    T, s, C = _arrays(T, s, C)
    X, cons, thr = _base_problem(T, s, C)
    if prices is None:
        obj = cp.sum(thr)
    else:
        price = np.asarray(prices, dtype=float)
        obj = cp.sum(cp.multiply(T / price[None, :], X))
    if required is not None:
        cons.append(thr >= np.asarray(required, dtype=float))
    return _solve(cp.Problem(cp.Maximize(obj), cons))


def max_min_ratio(T, s, C, R) -> float:
    """max_X min_j thr_j(X) / R_j (an LP); 1 / this is the minimum makespan."""
    T, s, C = _arrays(T, s, C)
    X, cons, thr = _base_problem(T, s, C)
    R = np.asarray(R, dtype=float)
    return _solve(cp.Problem(cp.Maximize(cp.min(cp.multiply(1.0 / R, thr))), cons))


def min_makespan(T, s, C, R) -> float:
    """min_X max_j R_j / thr_j(X), in seconds.

    Written as the equivalent LP max min_j thr_j/R_j (makespan = 1 / that), which Clarabel
    solves more accurately than the inv_pos form; both are the same program.
    """
    return 1.0 / max_min_ratio(T, s, C, R)


def _ftf_denominator(T, s, C, R, e, n_total=None, zero_where_T_zero=False):
    iso = isolated_throughput(T, s, C, n_total, zero_where_T_zero=zero_where_T_zero)
    return np.asarray(e, dtype=float) + np.asarray(R, dtype=float) / iso


def finish_time_fairness(T, s, C, R, t=None, e=None, *, zero_where_T_zero: bool = False) -> float:
    """min_X max_j (t_j + R_j * inv_pos(thr_j(X))) / D_j,  D_j = e_j + R_j / iso_j.

    A convex program (inv_pos is convex and decreasing, thr is affine), solved by Clarabel.
    """
    T, s, C = _arrays(T, s, C)
    n = T.shape[0]
    R = np.asarray(R, dtype=float)
    t = np.zeros(n) if t is None else np.asarray(t, dtype=float)
    e = np.zeros(n) if e is None else np.asarray(e, dtype=float)
    D = _ftf_denominator(T, s, C, R, e, zero_where_T_zero=zero_where_T_zero)
    X, cons, thr = _base_problem(T, s, C)
    rho = cp.multiply(1.0 / D, t + cp.multiply(R, cp.inv_pos(thr)))
    return _solve(cp.Problem(cp.Minimize(cp.max(rho)), cons))


def finish_time_fairness_bisection(T, s, C, R, t=None, e=None, *, rel_tol: float = 1e-11) -> float:
    """Second, LP-only reference for FTF (used to validate the inv_pos program above).

    rho_j <= r  <=>  thr_j >= R_j / (r D_j - t_j)  (when r D_j > t_j), so feasibility of a level r
    is an LP; we bisect on r with scipy's HiGHS. Used only in a self-test of the references.
    """
    from scipy.optimize import linprog

    T, s, C = _arrays(T, s, C)
    n, m = T.shape
    R = np.asarray(R, dtype=float)
    t = np.zeros(n) if t is None else np.asarray(t, dtype=float)
    e = np.zeros(n) if e is None else np.asarray(e, dtype=float)
    D = _ftf_denominator(T, s, C, R, e)
    ok = usable_mask(T, s, C)
    idx = np.argwhere(ok)
    nv = len(idx)
    # rows: row sums, capacity, -thr_j <= -need_j
    A_row = np.zeros((n, nv))
    A_cap = np.zeros((m, nv))
    A_thr = np.zeros((n, nv))
    for v, (j, k) in enumerate(idx):
        A_row[j, v] = 1
        A_cap[k, v] = s[j]
        A_thr[j, v] = -T[j, k]
    thr_max = np.array([T[j][ok[j]].max() for j in range(n)])

    def feasible(r: float) -> bool:
        slack = r * D - t
        if (slack <= 0).any():
            return False
        need = R / slack
        if (need > thr_max * (1 + 1e-12)).any():
            return False
        res = linprog(
            np.zeros(nv),
            A_ub=np.vstack([A_row, A_cap, A_thr]),
            b_ub=np.concatenate([np.ones(n), C, -need]),
            bounds=(0, None),
            method="highs",
            options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10},
        )
        return res.status == 0

    lo = float(np.max(t / D))  # rho_j > t_j / D_j always
    hi = max(lo, 1.0) * 2
    while not feasible(hi):
        hi *= 2
    while hi - lo > rel_tol * hi:
        mid = 0.5 * (lo + hi)
        if feasible(mid):
            hi = mid
        else:
            lo = mid
    return hi


# --------------------------------------------------------------- objectives of a given X
def evaluate(policy: str, X, T, s, C, *, w=None, R=None, t=None, e=None, prices=None,
             heterogeneity_aware: bool = True) -> float:
    """The spec's objective of a given allocation ``X`` (no optimization)."""
    X = np.asarray(X, dtype=float)
    T, s, C = _arrays(T, s, C)
    n = T.shape[0]
    if policy == "max_min_fairness":
        if not heterogeneity_aware:
            T = (T > 0).astype(float)
        w = np.ones(n) if w is None else np.asarray(w, dtype=float)
        thr = (T * X).sum(axis=1)
        return float(np.min(s * thr / (w * proportional_throughput(T, C))))
    thr = (T * X).sum(axis=1)
    if policy == "max_sum_throughput":
        if prices is None:
            return float(thr.sum())
        return float((T / np.asarray(prices, dtype=float)[None, :] * X).sum())
    if policy == "min_makespan":
        with np.errstate(divide="ignore"):
            return float(np.max(np.asarray(R, dtype=float) / thr))
    if policy == "finish_time_fairness":
        R = np.asarray(R, dtype=float)
        t = np.zeros(n) if t is None else np.asarray(t, dtype=float)
        e = np.zeros(n) if e is None else np.asarray(e, dtype=float)
        D = _ftf_denominator(T, s, C, R, e)
        with np.errstate(divide="ignore"):
            return float(np.max((t + R / thr) / D))
    raise ValueError(policy)


def rel_err(a: float, b: float) -> float:
    """Relative error |a - b| / |b| (inf when either is not finite)."""
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.inf
    return abs(a - b) / max(abs(b), 1e-300)
