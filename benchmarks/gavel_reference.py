"""Reference allocations written the way Gavel (Narayanan et al., OSDI'20) writes them.

Each policy is a cvxpy program over ``x = cp.Variable((n, m))`` built from numpy arrays, with
Gavel's base constraints (``x >= 0``, ``sum(s * x, axis=0) <= C``, ``sum(x, axis=1) <= 1``)
and solved by cvxpy's *default* solver (``problem.solve()`` with no solver argument), the
way stanford-futuredata/gavel ``scheduler/policies/*.py`` does (Gavel passes a solver name;
we leave cvxpy's own choice). As in Gavel, the returned allocation is ``x.value`` clipped
to [0, 1]. Nothing here imports hetsched: inputs are plain arrays

* ``T`` (n, m) throughputs, ``s`` (n,) scale factors, ``C`` (m,) GPU counts,
* ``R`` (n,) steps remaining, ``t`` (n,) seconds since start, ``e`` (n,) isolated time used,

and :func:`evaluate` / :func:`max_violation` score any allocation with plain numpy, so both
sides of a benchmark are judged by the same independent formula.

Differences from Gavel's code, on purpose (so that both sides solve the same math):

* max-min fairness normalizes by the proportional throughput ``p_j = T_j . C / sum(C)``
  (hetsched's definition); Gavel's ``MaxMinFairnessPolicyWithPerf`` divides by an isolated
  throughput computed by a second max-min LP.
* finish-time fairness divides by ``D_j = e_j + R_j / iso_j`` with the Themis isolated
  share ``x_iso = (C / n) / s_j`` (rows normalized to <= 1); Gavel uses
  ``t_j + R_j / iso_j`` with a max-min isolated allocation.
* x = 0 where T == 0 is added explicitly (Gavel leaves such entries free; it changes no
  optimum, only keeps the capacity rows honest).

Min makespan follows Gavel's ``MinTotalDurationPolicy`` exactly: bisection on the makespan
over [100 s, 1e6 s] with a feasibility LP per step, stopping once ``1.05 * lo >= hi`` (so
its answer is up to 5 % above the optimum, by design).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import cvxpy as cp
import numpy as np

__all__ = [
    "RefResult",
    "proportional_throughput",
    "isolated_throughput",
    "ftf_denominator",
    "max_min_fairness",
    "max_min_fairness_per_job",
    "max_sum_throughput",
    "min_makespan",
    "finish_time_fairness",
    "evaluate",
    "max_violation",
    "SENSE",
    "REFERENCES",
]

#: "max" or "min" per reference key.
SENSE = {"max_min_fairness": "max", "max_sum_throughput": "max", "min_makespan": "min",
         "finish_time_fairness": "min"}

#: Bisection stops once ``MAKESPAN_RATIO * lo >= hi`` (Gavel's 1.05).
MAKESPAN_RATIO = 1.05
#: Largest makespan bracket tried before giving up (Gavel has no limit).
MAKESPAN_GIVE_UP = 1e15


@dataclass
class RefResult:
    """A reference allocation and how it was obtained."""

    X: np.ndarray
    seconds: float
    status: str
    solver: str
    n_programs: int = 1
    info: dict = field(default_factory=dict)


# --------------------------------------------------------------------- plain-numpy math
def proportional_throughput(T: np.ndarray, C: np.ndarray) -> np.ndarray:
    """``p_j = sum_k T[j,k] C_k / sum_k C_k``."""
    return T @ C / C.sum()


def isolated_throughput(T: np.ndarray, s: np.ndarray, C: np.ndarray) -> np.ndarray:
    """Themis isolated throughput: ``x_iso[j,k] = (C_k/n)/s_j`` (0 where C_k < s_j), rows / max(1, sum)."""
    n = T.shape[0]
    x = (C[None, :] / n) / s[:, None]
    x = np.where(C[None, :] >= s[:, None], x, 0.0)
    x = x / np.maximum(1.0, x.sum(axis=1, keepdims=True))
    return (T * x).sum(axis=1)


def ftf_denominator(T, s, C, R, e=None) -> np.ndarray:
    """``D_j = e_j + R_j / iso_j``."""
    e = np.zeros(T.shape[0]) if e is None else e
    return e + R / isolated_throughput(T, s, C)


def evaluate(policy: str, X: np.ndarray, T, s, C, R=None, t=None, e=None) -> float:
    """The policy's objective of allocation ``X``, straight from the definitions."""
    thr = (T * X).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        if policy == "max_min_fairness":
            p = proportional_throughput(T, C)
            return float((s * thr / p).min())
        if policy == "max_sum_throughput":
            return float(thr.sum())
        if policy == "min_makespan":
            return float((R / thr).max())
        if policy == "finish_time_fairness":
            t = np.zeros(T.shape[0]) if t is None else t
            return float(((t + R / thr) / ftf_denominator(T, s, C, R, e)).max())
    raise KeyError(policy)


def max_violation(X: np.ndarray, s, C) -> float:
    """Largest violation of the base constraints (negativity, row sums, relative capacity)."""
    neg = max(0.0, -float(X.min()))
    rows = max(0.0, float(X.sum(axis=1).max()) - 1.0)
    cap = max(0.0, float(((s @ X - C) / C).max()))
    return max(neg, rows, cap)


# ----------------------------------------------------------------------- cvxpy (Gavel style)
def _base_constraints(x, s, C, T):
    """Gavel's ``get_base_constraints`` plus x = 0 where the job cannot run (T == 0)."""
    scale_factors_array = np.repeat(s.astype(float)[:, None], T.shape[1], axis=1)
    cons = [
        x >= 0,
        cp.sum(cp.multiply(scale_factors_array, x), axis=0) <= C,
        cp.sum(x, axis=1) <= 1,
    ]
    zero = T == 0
    if zero.any():
        cons.append(cp.multiply(zero.astype(float), x) == 0)
    return cons


def _solve(problem: cp.Problem) -> tuple[str, str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # cvxpy's "solution may be inaccurate" etc.
        try:
            problem.solve()
        except cp.error.SolverError:  # reported as a status, like an infeasible problem
            return "solver_error", "?"
    name = problem.solver_stats.solver_name if problem.solver_stats else "?"
    return str(problem.status), str(name)


def _clipped(x: cp.Variable, shape) -> np.ndarray:
    if x.value is None:
        return np.full(shape, np.nan)
    return np.clip(x.value, 0.0, 1.0)


def _mmf_coefficients(T, s, C, w=None) -> np.ndarray:
    """``coef[j,k] = T[j,k] s_j / (w_j p_j)``: job j's normalized share per unit of time on k."""
    w = np.ones(T.shape[0]) if w is None else w
    return T * (s / (w * proportional_throughput(T, C)))[:, None]


def max_min_fairness(T, s, C, w=None, **_) -> RefResult:
    """maximize min_j sum_k coef[j,k] x[j,k], coef = T * s / (w * p)."""
    t0 = time.perf_counter()
    coef = _mmf_coefficients(T, s, C, w)
    x = cp.Variable(T.shape)
    objective = cp.Maximize(cp.min(cp.sum(cp.multiply(coef, x), axis=1)))
    problem = cp.Problem(objective, _base_constraints(x, s, C, T))
    status, solver = _solve(problem)
    return RefResult(_clipped(x, T.shape), time.perf_counter() - t0, status, solver)


def max_min_fairness_per_job(T, s, C, w=None, **_) -> RefResult:
    """The same program as :func:`max_min_fairness`, built the way Gavel's packing policies
    build it (``MaxMinFairnessPolicyWithPacking.get_allocation`` with only single jobs, and
    ``PolicyWithPacking.get_base_constraints``): one cvxpy expression per job for its share,
    ``cp.Maximize(cp.minimum(*terms))``, and one per job for its time row, stacked.

    Left out on purpose: Gavel's ``flatten`` first fills a dense (jobs x combinations x
    types) float32 tensor, which at 16,384 jobs and 3 types is 3.2 GB; here each job's row
    of coefficients is taken straight from ``T``. Everything else (cvxpy's default solver,
    clipping) is as in :func:`max_min_fairness`.
    """
    t0 = time.perf_counter()
    n, m = T.shape
    coef = _mmf_coefficients(T, s, C, w)
    x = cp.Variable((n, m))
    terms = [cp.sum(cp.multiply(coef[i], x[i])) for i in range(n)]
    objective = cp.Maximize(cp.minimum(*terms) if n > 1 else terms[0])
    scale_factors_array = np.repeat(s.astype(float)[:, None], m, axis=1)
    constraints = [x >= 0, cp.sum(cp.multiply(scale_factors_array, x), axis=0) <= C,
                   cp.vstack([cp.sum(x[i]) for i in range(n)]) <= 1]
    zero = T == 0
    if zero.any():
        constraints.append(cp.multiply(zero.astype(float), x) == 0)
    problem = cp.Problem(objective, constraints)
    status, solver = _solve(problem)
    return RefResult(_clipped(x, T.shape), time.perf_counter() - t0, status, solver)


def max_sum_throughput(T, s, C, **_) -> RefResult:
    """maximize sum_jk T[j,k] x[j,k]."""
    t0 = time.perf_counter()
    x = cp.Variable(T.shape)
    problem = cp.Problem(cp.Maximize(cp.sum(cp.multiply(T, x))), _base_constraints(x, s, C, T))
    status, solver = _solve(problem)
    return RefResult(_clipped(x, T.shape), time.perf_counter() - t0, status, solver)


def _makespan_feasible(T, s, C, R, M):
    """Gavel's ``get_allocation_helper``: can every job finish within M seconds?"""
    x = cp.Variable(T.shape)
    constraints = _base_constraints(x, s, C, T)
    constraints.append(cp.sum(cp.multiply(T, x), axis=1) >= R / M)
    problem = cp.Problem(cp.Maximize(1), constraints)
    status, solver = _solve(problem)
    return status, solver, x


def min_makespan(T, s, C, R, **_) -> RefResult:
    """Gavel's bisection on the makespan M (seconds), one cvxpy feasibility problem per step.

    Gavel's loop verbatim: bisect [100, 1e6] until ``1.05 * lo >= hi``; if no M was
    feasible, move to [1e6, 1e7], and so on.
    """
    t0 = time.perf_counter()
    max_T, min_T = 1e6, 100.0
    last_max_T = max_T
    last_feasible_x, solver, steps = None, "?", 0
    while last_feasible_x is None:
        while MAKESPAN_RATIO * min_T < max_T:
            M = (min_T + max_T) / 2.0
            status, solver, x = _makespan_feasible(T, s, C, R, M)
            steps += 1
            if status == "optimal":
                last_feasible_x, max_T = _clipped(x, T.shape), M
            else:
                min_T = M
        max_T, min_T = last_max_T * 10.0, last_max_T
        last_max_T *= 10.0
        if last_feasible_x is None and last_max_T > MAKESPAN_GIVE_UP:  # Gavel loops forever
            return RefResult(np.full(T.shape, np.nan), time.perf_counter() - t0, "infeasible", solver,
                             n_programs=steps)
    return RefResult(last_feasible_x, time.perf_counter() - t0, "optimal", solver, n_programs=steps)


def finish_time_fairness(T, s, C, R, t=None, e=None, **_) -> RefResult:
    """Gavel's conic program, built job by job: minimize max_j (t_j + R_j inv_pos(thr_j)) / D_j."""
    t0 = time.perf_counter()
    n = T.shape[0]
    t = np.zeros(n) if t is None else t
    D = ftf_denominator(T, s, C, R, e)
    x = cp.Variable(T.shape)
    expected_time_fractions = []
    for i in range(n):
        allocation_throughput = cp.sum(cp.multiply(T[i], x[i]))
        expected_time_allocation = t[i] + R[i] * cp.inv_pos(allocation_throughput)
        expected_time_fractions.append(expected_time_allocation / D[i])
    if len(expected_time_fractions) == 1:
        objective = cp.Minimize(expected_time_fractions[0])
    else:
        objective = cp.Minimize(cp.maximum(*expected_time_fractions))
    problem = cp.Problem(objective, _base_constraints(x, s, C, T))
    status, solver = _solve(problem)
    return RefResult(_clipped(x, T.shape), time.perf_counter() - t0, status, solver)


#: Reference function per policy key.
REFERENCES = {
    "max_min_fairness": max_min_fairness,
    "max_sum_throughput": max_sum_throughput,
    "min_makespan": min_makespan,
    "finish_time_fairness": finish_time_fairness,
}
