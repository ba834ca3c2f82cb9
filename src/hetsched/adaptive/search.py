r"""Configuration search for adaptive schedulers: one (GPU type, GPU count) per job per round.

Pollux (Qiao et al., OSDI'21, §4.2) gives every job j a value :math:`s_{jc} \ge 0` for each
configuration c (its *speedup* there, already discounted by the caller for a restart when c
is not the job's current configuration) and scores an assignment ``choice`` (one
configuration per job, or -1: no GPUs, :math:`s_j = 0`) by the power mean

.. math::

    F(\text{choice}) = \Big(\frac{1}{J} \sum_j (s_j + \epsilon)^p\Big)^{1/p}
    \quad (p \ne 0), \qquad
    F = \exp\Big(\frac{1}{J} \sum_j \log(s_j + \epsilon)\Big) \quad (p = 0),

with :math:`p = -1` and :math:`\epsilon = 10^{-3}` by default. The feasible assignments are
those whose GPUs of each type k sum to at most :math:`C_k`: with the configuration set of
:func:`hetsched.formulations.sia.configurations.configuration_set` (power-of-two in-node
counts dividing the node size, or whole nodes) such a set always packs onto the nodes
(buddy argument), so the per-type count is the only constraint.

:math:`F` is a monotone function of the separable sum :math:`\sum_j u(s_j)` with

.. math:: u(s) = \operatorname{sgn}(p)\,(s + \epsilon)^p \quad (p \ne 0), \qquad u(s) = \log(s + \epsilon) \quad (p = 0)

(for :math:`p < 0`, :math:`F = (\frac1J \sum (s+\epsilon)^p)^{1/p}` falls as the sum rises,
hence the sign), so maximising :math:`\sum_j u(s_j)` maximises :math:`F` exactly. Two searches:

* :func:`exact_search` — the integer program

  .. math::

      \max \; J u_0 + \sum_{(j,c)} (u_{jc} - u_0)\, x_{jc}
      \quad \text{s.t.} \quad \sum_c x_{jc} \le 1, \quad
      \sum_{j,\, c: k_c = k} n_c\, x_{jc} \le C_k, \quad x \in \{0, 1\}

  (:math:`u_0 = u(0)`: no GPUs), with variables only for allowed pairs, solved by HiGHS
  through :class:`~hetsched.solvers.program.LinearProgram` and the ``highs`` backend. Its
  optimum maximises :math:`F`.
* :func:`genetic_search` — Pollux's genetic search (population 100, 100 generations in its
  paper) on this configuration space: single-point crossover over jobs, mutation, a repair
  that drops random allocations of over-used types, elitist survival by fitness.

Both return a :class:`SearchResult`; :meth:`SearchProblem.fitness` scores any choice.

In numpy (``choice[j]`` the configuration of job j or -1)::

    s = np.where(choice >= 0, value[np.arange(J), np.maximum(choice, 0)], 0.0)
    fitness = np.mean((s + eps) ** p) ** (1 / p)              # p != 0
    used[k] = gpus[choice[(choice >= 0) & (config_type[choice] == k)]].sum()   # <= C[k]
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import CapabilityError, SolverError, UnknownSolverError, ValidationError
from ..solvers.program import LinearProgram
from ..solvers.registry import get_backend
from ..validation import (
    check_instance,
    check_int,
    check_nonneg,
    check_positive,
    check_real,
    fail,
    fail_at,
)

__all__ = ["SearchProblem", "SearchResult", "exact_search", "genetic_search"]

#: Genetic search: probability that a child's job is reset to its ``initial`` configuration.
RESET_PROB = 0.1
#: Genetic search: expected number of other mutations per child (each job is mutated with
#: probability ``MUTATIONS_PER_CHILD / n_jobs``, at most :data:`MAX_MUTATION_PROB`): half
#: drop the job's allocation, half give it a random allowed configuration.
MUTATIONS_PER_CHILD = 2.0
#: Upper bound of the per-job mutation probability (small instances).
MAX_MUTATION_PROB = 0.25
#: A solution entry counts as 1 when above this (HiGHS returns integers up to its tolerance).
_ONE = 0.5
#: Largest distance from 0 or 1 accepted for an integer variable of the solver's solution.
_INTEGRALITY_TOL = 1e-5


# ------------------------------------------------------------------------------ validation
def _int_array(value: Any, name: str, *, ndim: int, low: int | None = None, high: int | None = None,
               shape: tuple[int, ...] | None = None, shape_text: str | None = None) -> np.ndarray:
    """``value`` as an int64 array of ``ndim`` dimensions: integers (or whole floats), not bools,
    in [low, high]; ``shape`` (-1 for any length) checked when given."""
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError):  # pragma: no cover - numpy accepts nearly anything
        raise fail(name, "an array of integers", value, shown=type(value).__name__) from None
    if arr.size == 0 and arr.ndim != ndim and shape is not None:
        arr = arr.reshape(tuple(max(s, 0) for s in shape))
    if arr.ndim != ndim or (shape is not None and any(s >= 0 and s != a for s, a in zip(shape, arr.shape))):
        want = shape_text or (f"{ndim} dimension(s)" if shape is None else str(shape))
        raise ValidationError(f"`{name}` must have shape {want}; got {arr.shape}.")
    if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise ValidationError(f"`{name}` must be an array of integers; got dtype {arr.dtype}.")
    if np.issubdtype(arr.dtype, np.floating):
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(arr) | (arr != np.round(arr))
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            raise fail_at(name, "integers", f"entry {idx if len(idx) > 1 else idx[0]}", arr[idx])
    out = arr.astype(np.int64)
    bad = np.zeros(out.shape, dtype=bool)
    if low is not None:
        bad |= out < low
    if high is not None:
        bad |= out > high
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        if low is not None and high is not None:
            rule = f"integers in [{low}, {high}]"
        elif low == 0:
            rule = "non-negative integers"
        elif low == 1:
            rule = "positive integers"
        elif low is not None:
            rule = f"integers >= {low}"
        else:
            rule = f"integers <= {high}"
        raise fail_at(name, rule, f"entry {idx if len(idx) > 1 else idx[0]}", out[idx])
    return out


def _frozen(arr: np.ndarray) -> np.ndarray:
    arr.setflags(write=False)
    return arr


def _utility(s: np.ndarray, p: float, eps: float) -> np.ndarray:
    """:math:`u(s)`: increasing in s; the sum over jobs orders assignments as the fitness does."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        if p == 0.0:
            return np.log(s + eps)
        return math.copysign(1.0, p) * np.power(s + eps, p)


# ------------------------------------------------------------------------------ problem
@dataclass(frozen=True, eq=False)
class SearchProblem:
    """One round's configuration search.

    Attributes
    ----------
    value : ndarray of float, shape (n_jobs, n_configs)
        :math:`s_{jc} \\ge 0`, finite where ``allowed`` (0: allowed but worthless); ignored
        (NaN or anything) where not allowed.
    allowed : ndarray of bool, shape (n_jobs, n_configs)
        Which configurations each job may get.
    config_type : ndarray of int, shape (n_configs,)
        GPU type index (into ``capacities``) of each configuration.
    config_gpus : ndarray of int, shape (n_configs,)
        GPUs of each configuration (>= 1).
    capacities : ndarray of int, shape (n_types,)
        GPUs of each type (>= 0).
    p : float, default -1
        Power of the power mean (finite; 0: geometric mean).
    eps : float, default 1e-3
        Added to every job's value (> 0; keeps :math:`(s + \\epsilon)^p` finite for p < 0).

    The arrays are stored as read-only copies. Raises :class:`~hetsched.errors.ValidationError`
    for inconsistent shapes, a value that is negative or not finite where allowed, a type
    index out of range, a GPU count below 1, a negative or fractional capacity, a
    non-finite ``p``, a non-positive ``eps``, or a ``p`` for which :math:`(s + \\epsilon)^p`
    overflows.

    Examples
    --------
    >>> prob = SearchProblem(value=np.array([[1.0, 1.5]]), allowed=np.array([[True, True]]),
    ...                      config_type=np.array([0, 0]), config_gpus=np.array([1, 2]),
    ...                      capacities=np.array([2]))
    >>> round(prob.fitness(np.array([1])), 6), prob.feasible(np.array([1]))
    (1.501, True)
    """

    value: np.ndarray
    allowed: np.ndarray
    config_type: np.ndarray
    config_gpus: np.ndarray
    capacities: np.ndarray
    p: float = -1.0
    eps: float = 1e-3

    def __post_init__(self) -> None:
        p = check_real(self.p, "p")
        eps = check_positive(self.eps, "eps")
        try:
            value = np.array(self.value, dtype=float)
        except (TypeError, ValueError):
            raise fail("value", "a numeric array of shape (n_jobs, n_configs)", self.value,
                       shown=type(self.value).__name__) from None
        if value.ndim != 2:
            raise ValidationError(f"`value` must have shape (n_jobs, n_configs); got {value.shape}.")
        J, C = value.shape
        allowed = np.asarray(self.allowed)
        if allowed.shape != (J, C):
            raise ValidationError(
                f"`allowed` must have the shape of `value` (n_jobs, n_configs) = {(J, C)}; got {allowed.shape}.")
        if allowed.dtype != bool:
            if not np.issubdtype(allowed.dtype, np.number) or not np.isin(allowed, (0, 1)).all():
                raise ValidationError(f"`allowed` must be a boolean array (or 0/1); got dtype {allowed.dtype}.")
            allowed = allowed.astype(bool)
        else:
            allowed = allowed.copy()
        capacities = _int_array(self.capacities, "capacities", ndim=1, low=0, shape=(-1,),
                                shape_text="(n_types,)")
        n_types = capacities.shape[0]
        config_type = _int_array(self.config_type, "config_type", ndim=1, low=0, high=max(n_types - 1, 0),
                                 shape=(C,), shape_text=f"(n_configs,) = ({C},)")
        if n_types == 0 and C > 0:
            raise ValidationError(f"`capacities` must list at least one GPU type when there are configurations; "
                                  f"got {capacities.tolist()}.")
        config_gpus = _int_array(self.config_gpus, "config_gpus", ndim=1, low=1, shape=(C,),
                                 shape_text=f"(n_configs,) = ({C},)")
        with np.errstate(invalid="ignore"):
            bad = allowed & (~np.isfinite(value) | (value < 0))
        if bad.any():
            j, c = (int(i) for i in np.argwhere(bad)[0])
            raise fail_at("value", "finite and non-negative where `allowed`", f"job {j}, configuration {c}",
                          value[j, c])
        s = np.where(allowed, value, 0.0)
        util = _utility(s, p, eps)
        u0 = float(_utility(np.zeros(1), p, eps)[0])
        if not math.isfinite(u0) or not np.isfinite(util[allowed]).all():
            raise ValidationError(
                f"`p` must keep (value + eps) ** p finite (eps = {eps!r}, "
                f"largest value {float(s.max(initial=0.0))!r}); got {self.p!r}.")
        set_ = object.__setattr__
        set_(self, "value", _frozen(value))
        set_(self, "allowed", _frozen(allowed))
        set_(self, "config_type", _frozen(config_type))
        set_(self, "config_gpus", _frozen(config_gpus))
        set_(self, "capacities", _frozen(capacities))
        set_(self, "p", p)
        set_(self, "eps", eps)
        set_(self, "_s", _frozen(s))
        set_(self, "_u", _frozen(np.where(allowed, util, u0)))
        set_(self, "_u0", u0)
        # the same with a last column for "no GPUs", so that index -1 picks it
        set_(self, "_s_ext", _frozen(np.concatenate([s, np.zeros((J, 1))], axis=1)))
        set_(self, "_u_ext", _frozen(np.concatenate([self._u, np.full((J, 1), u0)], axis=1)))

    # -------------------------------------------------------------- sizes
    @property
    def n_jobs(self) -> int:
        """Number of jobs."""
        return int(self.value.shape[0])

    @property
    def n_configs(self) -> int:
        """Number of configurations."""
        return int(self.value.shape[1])

    @property
    def n_types(self) -> int:
        """Number of GPU types."""
        return int(self.capacities.shape[0])

    # -------------------------------------------------------------- scoring
    def _choice(self, choice: Any, name: str = "choice", *, require_allowed: bool = True) -> np.ndarray:
        """``choice`` as int64 (n_jobs,) in [-1, n_configs); every chosen pair allowed."""
        out = _int_array(choice, name, ndim=1, low=-1, high=self.n_configs - 1, shape=(self.n_jobs,),
                         shape_text=f"(n_jobs,) = ({self.n_jobs},)")
        if require_allowed:
            on = np.flatnonzero(out >= 0)
            bad = on[~self.allowed[on, out[on]]]
            if bad.size:
                j = int(bad[0])
                raise fail_at(name, "an allowed configuration (or -1) for every job", f"job {j}", int(out[j]),
                              verb="has")
        return out

    def usage(self, choice: Any) -> np.ndarray:
        """GPUs of each type that ``choice`` uses, shape (n_types,)."""
        ch = self._choice(choice, require_allowed=False)
        on = ch >= 0
        return np.bincount(self.config_type[ch[on]], weights=self.config_gpus[ch[on]],
                           minlength=self.n_types).astype(np.int64)

    def utility_sum(self, choice: Any) -> float:
        """:math:`\\sum_j u(s_j)`, the separable objective the exact search maximises."""
        ch = self._choice(choice)
        return float(self._u_ext[np.arange(self.n_jobs), ch].sum())

    def fitness(self, choice: Any) -> float:
        """The power mean of :math:`s_j + \\epsilon` over all jobs (geometric for p = 0).

        ``choice[j]`` is job j's configuration or -1 (value 0). Capacity is not checked
        (see :meth:`feasible`); a job given a configuration it is not allowed raises
        ValidationError. NaN when there are no jobs (the mean of nothing).
        """
        ch = self._choice(choice)
        if self.n_jobs == 0:
            return math.nan
        s = self._s_ext[np.arange(self.n_jobs), ch] + self.eps
        if self.p == 0.0:
            return float(np.exp(np.mean(np.log(s))))
        return float(np.mean(np.power(s, self.p)) ** (1.0 / self.p))

    def feasible(self, choice: Any) -> bool:
        """Whether ``choice`` gives every job an allowed configuration or none and stays within
        every type's capacity. A malformed ``choice`` (shape, non-integers, index out of
        range) raises ValidationError."""
        ch = self._choice(choice, require_allowed=False)
        on = np.flatnonzero(ch >= 0)
        if not self.allowed[on, ch[on]].all():
            return False
        return bool((self.usage(ch) <= self.capacities).all())

    def __repr__(self) -> str:
        return (f"SearchProblem(n_jobs={self.n_jobs}, n_configs={self.n_configs}, "
                f"capacities={self.capacities.tolist()}, p={self.p}, eps={self.eps})")


@dataclass(frozen=True)
class SearchResult:
    """What a search returns.

    Attributes
    ----------
    choice : ndarray of int, shape (n_jobs,)
        Configuration of each job, -1 for none; always feasible except with status "failed"
        (then all -1).
    fitness : float
        ``problem.fitness(choice)``.
    status : str
        "optimal" (exact, within ``mip_gap``), "time_limit" / "iteration_limit" (exact,
        stopped: the best assignment known), "feasible" (genetic), "failed" (exact: the
        solver failed; ``info["message"]`` says why).
    seconds : float
        Wall-clock seconds of the whole search (building, solving, checking).
    method : str
        "exact" or "genetic".
    gap : float or None
        Exact search: the solver's relative gap on :math:`\\sum_j u(s_j)` (an upper bound on
        the returned choice's gap); None when no solution came from the solver, and for the
        genetic search.
    info : dict
        Method-specific details (columns, pruned columns, solver status and message, ...).
    """

    choice: np.ndarray
    fitness: float
    status: str
    seconds: float
    method: str
    gap: float | None = None
    info: dict[str, Any] = field(default_factory=dict)


def _result(problem: SearchProblem, choice: np.ndarray, status: str, t0: float, method: str,
            gap: float | None, info: dict[str, Any]) -> SearchResult:
    choice = _frozen(np.asarray(choice, dtype=np.int64).copy())
    fit = problem.fitness(choice) if status != "failed" else math.nan
    return SearchResult(choice=choice, fitness=fit, status=status, seconds=time.perf_counter() - t0,
                        method=method, gap=gap, info=info)


# ------------------------------------------------------------------------------ exact
def _undominated(s: np.ndarray, cand: np.ndarray, config_type: np.ndarray, config_gpus: np.ndarray,
                 n_types: int) -> np.ndarray:
    """Columns among ``cand`` that some optimum may need (see :func:`exact_search`).

    Column (j, c) is kept iff its value beats every candidate of the same type with fewer GPUs
    (or as many and an earlier index) and beats 0 (no GPUs at all, a "configuration" of every
    type with 0 GPUs and value 0).
    """
    keep = np.zeros_like(cand)
    for k in range(n_types):
        cols = np.flatnonzero(config_type == k)
        if cols.size == 0:
            continue
        order = cols[np.argsort(config_gpus[cols], kind="stable")]
        on = cand[:, order]
        v = np.where(on, s[:, order], -np.inf)
        best_before = np.maximum.accumulate(v, axis=1)
        best_before = np.concatenate([np.zeros((v.shape[0], 1)), best_before[:, :-1]], axis=1)
        keep[:, order] = on & (v > np.maximum(best_before, 0.0))
    return keep


def exact_search(problem: SearchProblem, *, time_limit: float | None = None, mip_gap: float = 1e-6,
                 incumbent: Any = None, _prune: bool = True) -> SearchResult:
    """The assignment of highest fitness, from an integer program solved by HiGHS.

    Parameters
    ----------
    problem : SearchProblem
    time_limit : float, optional
        Seconds HiGHS may spend; when it stops on the limit the result has status
        "time_limit" and the best assignment known (HiGHS' incumbent, or ``incumbent``, or
        no GPUs for anyone) with HiGHS' gap.
    mip_gap : float, default 1e-6
        Relative gap at which HiGHS stops (``mip_rel_gap``), on :math:`\\sum_j u(s_j)`.
    incumbent : array of int, shape (n_jobs,), optional
        A feasible assignment (e.g. last round's, or a genetic search's). Returned instead of
        the solver's when its fitness is higher (so the result never falls below it), and
        when the solver stops on the time limit without a solution.

    Returns
    -------
    SearchResult
        ``method="exact"``. ``info``: ``columns`` (binary variables), ``candidates`` (allowed
        pairs that fit their type), ``pruned`` (dominated candidates dropped), ``rows``,
        ``solver_status``, ``message``, ``solve_s``, ``objective`` (HiGHS' value of
        :math:`\\sum_j u(s_j)`), ``source`` ("solver", "incumbent" or "empty").

    Raises
    ------
    ValidationError
        Bad ``time_limit``, ``mip_gap`` or ``incumbent`` (malformed, a configuration not
        allowed, or over capacity).

    Notes
    -----
    Columns dropped before solving, besides pairs that are not allowed:

    * a configuration with more GPUs than its type has (never feasible);
    * *dominated* columns: (j, c) when some allowed (j, c') of the same type has
      :math:`n_{c'} \\le n_c` GPUs and :math:`s_{jc'} \\ge s_{jc}`, or when :math:`s_{jc} = 0`
      (dominated by "no GPUs": 0 GPUs, value 0). Proof that the optimum is unchanged: take any
      feasible x with :math:`x_{jc} = 1` and move job j to c' (or to no GPUs). Job j still has
      at most one configuration; type k's GPU total changes by
      :math:`n_{c'} - n_c \\le 0` and no other type's changes, so x stays feasible; the
      objective changes by :math:`u(s_{jc'}) - u(s_{jc}) \\ge 0` because u is increasing. So
      every optimum can be moved onto kept columns without losing value (c' may itself be
      dominated, but the chain ends at a kept column: the first column, in the order by
      GPUs, that attains the largest value up to c).
    """
    t0 = time.perf_counter()
    check_instance(problem, "problem", SearchProblem, "a hetsched.adaptive.search.SearchProblem")
    time_limit = check_positive(time_limit, "time_limit", unit="seconds", allow_none=True)
    mip_gap = check_nonneg(mip_gap, "mip_gap")
    inc = None
    if incumbent is not None:
        inc = problem._choice(incumbent, "incumbent")
        if not problem.feasible(inc):
            used = problem.usage(inc)
            k = int(np.flatnonzero(used > problem.capacities)[0])
            raise ValidationError(f"`incumbent` must be feasible (within every type's capacity); "
                                  f"it uses {int(used[k])} GPUs of type {k}, which has {int(problem.capacities[k])}.")
    J, C = problem.n_jobs, problem.n_configs
    ctype, gpus, cap = problem.config_type, problem.config_gpus, problem.capacities
    s, u, u0 = problem._s, problem._u, problem._u0
    if _prune:
        fits = gpus <= cap[ctype] if C else np.zeros(0, dtype=bool)
        cand = problem.allowed & fits[None, :]
        mask = _undominated(s, cand, ctype, gpus, problem.n_types)
    else:
        cand = mask = problem.allowed
    jj, cc = np.nonzero(mask)
    n = int(jj.size)
    # rows: one per job with two or more columns (the x <= 1 bound covers the others),
    # one per GPU type that has columns
    per_job = np.bincount(jj, minlength=J)
    job_row = np.full(J, -1, dtype=np.int64)
    multi = np.flatnonzero(per_job >= 2)
    job_row[multi] = np.arange(multi.size)
    types_used = np.unique(ctype[cc])
    type_row = np.full(problem.n_types, -1, dtype=np.int64)
    type_row[types_used] = multi.size + np.arange(types_used.size)
    has_row = job_row[jj] >= 0
    rows = np.concatenate([job_row[jj[has_row]], type_row[ctype[cc]]])
    cols = np.concatenate([np.flatnonzero(has_row), np.arange(n)])
    data = np.concatenate([np.ones(int(has_row.sum())), gpus[cc].astype(float)])
    m = multi.size + types_used.size
    A = sp.csr_array((data, (rows, cols)), shape=(m, n))
    x_index = np.full((J, C), -1, dtype=np.int64)
    x_index[jj, cc] = np.arange(n)
    lp = LinearProgram(
        c=u[jj, cc] - u0, A=A, row_lb=np.full(m, -np.inf),
        row_ub=np.concatenate([np.ones(multi.size), cap[types_used].astype(float)]),
        col_lb=np.zeros(n), col_ub=np.ones(n), x_index=x_index, sense="max",
        integrality=np.ones(n, dtype=bool), offset=J * u0, name="configuration_search",
        meta={"job": jj, "config": cc},
    )
    info: dict[str, Any] = {"columns": n, "candidates": int(cand.sum()), "pruned": int(cand.sum()) - n,
                            "rows": m, "mip_gap_requested": mip_gap, "time_limit": time_limit}
    empty = np.full(J, -1, dtype=np.int64)
    try:
        out = get_backend("highs").solve(lp, time_limit=time_limit, options={"mip_rel_gap": mip_gap})
    except (SolverError, UnknownSolverError, CapabilityError) as exc:
        info.update(solver_status="error", message=f"{type(exc).__name__}: {exc}", source="none")
        return _result(problem, empty, "failed", t0, "exact", None, info)
    info.update(solver_status=out.status, native_status=out.native_status, message=out.message,
                solve_s=out.solve_s, objective=out.objective)
    if out.status not in ("optimal", "time_limit", "iteration_limit"):
        info["source"] = "none"
        return _result(problem, empty, "failed", t0, "exact", None, info)
    status = out.status
    if not out.has_solution:
        choice = inc if inc is not None else empty
        info["source"] = "incumbent" if inc is not None else "empty"
        info["message"] += "; the solver stopped without a solution"
        return _result(problem, choice, status, t0, "exact", None, info)
    x = np.asarray(out.x, dtype=float)
    off = np.abs(x - np.round(x))
    on = x > _ONE
    choice = empty.copy()
    choice[jj[on]] = cc[on]
    problems = []
    if n and float(off.max()) > _INTEGRALITY_TOL:
        problems.append(f"a variable is {float(off.max()):.3g} away from 0/1")
    if np.bincount(jj[on], minlength=J).max(initial=0) > 1:
        problems.append("a job got two configurations")
    if not problem.feasible(choice):
        problems.append(f"GPUs used {problem.usage(choice).tolist()} exceed capacities {cap.tolist()}")
    if problems:
        info.update(source="none", message=info["message"] + "; solution rejected: " + "; ".join(problems))
        return _result(problem, empty, "failed", t0, "exact", None, info)
    info["source"] = "solver"
    if inc is not None and problem.utility_sum(inc) > problem.utility_sum(choice):
        choice = inc
        info["source"] = "incumbent"
    return _result(problem, choice, status, t0, "exact", out.mip_gap, info)


# ------------------------------------------------------------------------------ genetic
class _Genetic:
    """Vectorised operators on a population (P, J) of choice vectors."""

    def __init__(self, problem: SearchProblem, rng: np.random.Generator, initial: np.ndarray | None):
        self.pb = problem
        self.rng = rng
        self.initial = initial
        J = problem.n_jobs
        self.rows = np.arange(J)
        self.n_allowed = problem.allowed.sum(axis=1)
        width = max(int(self.n_allowed.max(initial=0)), 1)
        table = np.zeros((J, width), dtype=np.int64)
        for j in range(J):  # one pass at set-up; the operators below are vectorised
            cfg = np.flatnonzero(problem.allowed[j])
            table[j, :cfg.size] = cfg
        self.table = table
        self.type_ext = np.append(problem.config_type, -1)
        self.gpus_ext = np.append(problem.config_gpus, 0)
        # sampling weights 1 / gpus over each job's allowed configurations (cumulative, per row)
        w = np.where(np.arange(width)[None, :] < self.n_allowed[:, None],
                     1.0 / problem.config_gpus[table] if problem.n_configs else 0.0, 0.0)
        total = w.sum(axis=1, keepdims=True)
        cum = np.cumsum(w, axis=1) / np.where(total > 0, total, 1.0)
        # row j's cumulative weights shifted into [j, j + 1]: one sorted array for all jobs
        self.flat_cum = (cum + self.rows[:, None]).ravel()
        self.width = width

    def score(self, pop: np.ndarray) -> np.ndarray:
        """:math:`\\sum_j u(s_j)` per individual (orders individuals as the fitness does)."""
        return self.pb._u_ext[self.rows[None, :], pop].sum(axis=1)

    def random_configs(self, shape: tuple[int, int]) -> np.ndarray:
        """A random allowed configuration per entry, with probability proportional to 1 / GPUs
        (-1 for a job allowed none).

        Pollux mutates its allocation matrices a replica at a time, so small allocations are
        the likely ones; uniform draws over this configuration set (mostly multi-node counts)
        would nearly always be undone by the repair."""
        u = np.maximum(self.rng.random(shape), 1e-12)  # in (0, 1): row j's query stays inside row j
        # entries of row j below u = entries of the flat array below j + u, less the j * width before it
        r = np.searchsorted(self.flat_cum, u + self.rows[None, :], side="left") - self.rows[None, :] * self.width
        r = np.clip(r, 0, np.maximum(self.n_allowed - 1, 0)[None, :])
        cfg = self.table[self.rows[None, :], r]
        return np.where(self.n_allowed[None, :] > 0, cfg, -1)

    def repair(self, pop: np.ndarray) -> np.ndarray:
        """Drop random allocations of over-used types until every type fits.

        Dropping the allocations of a type one by one from the end of a random order until
        its total fits leaves the longest prefix of that order whose running total fits, so
        each type is repaired at once with a cumulative sum.
        """
        P, J = pop.shape
        if J == 0 or P == 0:
            return pop
        pb = self.pb
        order = np.argsort(self.rng.random((P, J)), axis=1)
        perm = np.take_along_axis(pop, order, axis=1)
        on = perm >= 0
        t = self.type_ext[perm]  # -1 (no GPUs) picks the last entry: type -1, 0 GPUs
        g = self.gpus_ext[perm]
        drop = np.zeros((P, J), dtype=bool)
        for k in np.unique(t[on]):
            here = t == k
            total = np.cumsum(np.where(here, g, 0), axis=1)
            drop |= here & (total > pb.capacities[k])
        if drop.any():
            perm = np.where(drop, -1, perm)
            np.put_along_axis(pop, order, perm, axis=1)
        return pop

    def random_population(self, size: int) -> np.ndarray:
        """Individuals that give each job a random allowed configuration with a per-individual
        probability (uniform in [0, 1)) and nothing otherwise, repaired."""
        J = self.pb.n_jobs
        share = self.rng.random((size, 1))
        pop = np.where(self.rng.random((size, J)) < share, self.random_configs((size, J)), -1)
        return self.repair(pop)

    def offspring(self, pop: np.ndarray, fit: np.ndarray) -> np.ndarray:
        """One child per individual: binary-tournament parents, single-point crossover over
        jobs, mutation, repair."""
        P, J = pop.shape
        rng = self.rng

        def tournament() -> np.ndarray:
            a, b = rng.integers(0, P, size=P), rng.integers(0, P, size=P)
            return np.where(fit[a] >= fit[b], a, b)

        mother, father = pop[tournament()], pop[tournament()]
        point = rng.integers(1, J, size=P) if J > 1 else np.zeros(P, dtype=np.int64)
        child = np.where(np.arange(J)[None, :] < point[:, None], mother, father)
        rate = min(MAX_MUTATION_PROB, MUTATIONS_PER_CHILD / max(J, 1))
        mutate = rng.random((P, J)) < rate
        kind = rng.random((P, J))
        if self.initial is not None:
            reset = mutate & (kind < RESET_PROB)
            child = np.where(reset, self.initial[None, :], child)
            kind = (kind - RESET_PROB) / (1.0 - RESET_PROB)  # uniform again on the other mutations
            mutate &= ~reset
        to_none = mutate & (kind < 0.5)
        to_random = mutate & ~to_none
        child = np.where(to_none, -1, child)
        child = np.where(to_random, self.random_configs((P, J)), child)
        return self.repair(child)

    @staticmethod
    def survivors(pop: np.ndarray, fit: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``size`` fittest, distinct individuals first (duplicates only to fill up)."""
        _, first = np.unique(pop, axis=0, return_index=True)
        distinct = np.zeros(pop.shape[0], dtype=bool)
        distinct[first] = True
        # sort by (distinct first, fitness descending, position) — stable and deterministic
        order = np.lexsort((np.arange(pop.shape[0]), -fit, ~distinct))[:size]
        return pop[order], fit[order]


def genetic_search(problem: SearchProblem, *, seed: int, population: int = 100, generations: int = 100,
                   initial: Any = None) -> SearchResult:
    """Pollux-style genetic search over assignments (one configuration or none per job).

    Individuals are choice vectors. The first population holds ``initial`` (repaired to fit)
    and random individuals (each job given a random allowed configuration with an
    individual-wide probability, then repaired). Every generation makes one child per
    individual: parents by binary tournament, single-point crossover over the jobs, then
    mutation — each job is mutated with probability
    ``min(MAX_MUTATION_PROB, MUTATIONS_PER_CHILD / n_jobs)``: reset to its ``initial``
    configuration with probability :data:`RESET_PROB` (only with ``initial``), otherwise
    dropped or given a random allowed configuration (even odds; configurations drawn with
    probability proportional to 1 / GPUs) — and repair (random allocations of each
    over-used type dropped until it fits). The ``population`` fittest distinct individuals
    of parents and children survive (elitist), so the best fitness never falls.

    Parameters
    ----------
    problem : SearchProblem
    seed : int
        Seed of ``numpy.random.default_rng``, the only source of randomness.
    population : int, default 100
        Individuals per generation (>= 2).
    generations : int, default 100
        Generations after the first population (>= 0).
    initial : array of int, shape (n_jobs,), optional
        E.g. the current configurations (-1: none); every chosen configuration must be
        allowed, capacity may be exceeded (the copy in the population is repaired).

    Returns
    -------
    SearchResult
        ``method="genetic"``, ``status="feasible"``, ``gap=None``; ``info``: ``seed``,
        ``population``, ``generations``, ``evaluations``, ``history`` (best fitness after the
        first population and after each generation).
    """
    t0 = time.perf_counter()
    check_instance(problem, "problem", SearchProblem, "a hetsched.adaptive.search.SearchProblem")
    seed = check_int(seed, "seed", low=0)
    population = check_int(population, "population", low=2)
    generations = check_int(generations, "generations", low=0)
    init = None if initial is None else problem._choice(initial, "initial")
    rng = np.random.default_rng(seed)
    ga = _Genetic(problem, rng, init)
    parts = []
    if init is not None:
        parts.append(ga.repair(init[None, :].copy()))
    parts.append(ga.random_population(population - len(parts)))
    pop = np.concatenate(parts, axis=0)
    fit = ga.score(pop)
    pop, fit = ga.survivors(pop, fit, population)
    evaluations = pop.shape[0]
    history = [float(fit[0])]
    for _ in range(generations):
        children = ga.offspring(pop, fit)
        both = np.concatenate([pop, children], axis=0)
        pop, fit = ga.survivors(both, np.concatenate([fit, ga.score(children)]), population)
        evaluations += children.shape[0]
        history.append(float(fit[0]))
    best = pop[0]
    if not problem.feasible(best):  # pragma: no cover - repair guarantees it
        raise RuntimeError("genetic search produced an infeasible assignment (bug)")
    J = problem.n_jobs
    to_fitness = _sum_to_fitness(problem.p, J)
    info = {"seed": seed, "population": population, "generations": generations, "evaluations": evaluations,
            "history": [to_fitness(h) for h in history]}
    return _result(problem, best, "feasible", t0, "genetic", None, info)


def _sum_to_fitness(p: float, J: int):
    """Map :math:`\\sum_j u(s_j)` to the power mean (for the search history)."""
    def convert(total: float) -> float:
        if J == 0:
            return math.nan
        if p == 0.0:
            return math.exp(total / J)
        return (math.copysign(1.0, p) * total / J) ** (1.0 / p)
    return convert
