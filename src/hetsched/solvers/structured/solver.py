r"""Exact structured solver: column generation over an aggregated restricted master.

Only the m capacity rows couple the jobs; every other row belongs to one job. Given
capacity prices :math:`\lambda`, each job's best use of the cluster is known in closed
form (:mod:`.pricing`), and at an optimum almost every job sits at the closed-form answer
of the optimal prices: only jobs that are *tied* between two options, or limited by their
own time row, need an LP. Each round therefore solves a small master LP with

* **fixed** jobs at their closed-form choice for the current prices. In level mode a fixed
  job j on type :math:`k_j` gets :math:`X_{jk_j} = t / A_{jk_j}`, so all fixed jobs
  together are *one* column of the master, the level t, with capacity coefficient
  :math:`L_k = \sum_{j \text{ fixed on } k} W_{jk} / A_{jk}`; in floor mode a fixed
  job's vertex is a constant;
* **switch columns**: fixed jobs grouped by (their choice, their runner-up, bin of the
  price ratio between the two) may move to the runner-up together (and, in floor mode,
  shrink to their floor), so the master can rebalance load between types and its duals
  stay informative;
* **master jobs** with their own variables (candidate types; variables with a positive
  reduced cost are added),

reads new prices from the master's duals, prices *every* job in closed form, and moves the
fixed jobs whose choice is no longer best into the master. It stops when a dual
certificate built from the master's prices and the closed-form pricing of all jobs proves
the master's allocation optimal for the full LP:

* level mode, weak duality: for :math:`\lambda, y \ge 0` with
  :math:`z_j = \max(0, \max_k (y_j A_{jk} - W_{jk}\lambda_k))`,
  :math:`t^\star \le (\lambda \cdot C + \sum_j z_j) / \sum_j y_j`;
* floor mode, Lagrangian bound:
  :math:`\mathrm{OPT} \le \lambda \cdot C + \sum_j \max_{x \in P_j} (c_j - W_j \lambda) \cdot x`.

The first prices come from the same solver run on a random sample of the jobs with
proportionally scaled capacities (recursively), so the first master already holds only
the jobs near a tie; identical jobs are merged first. The result is a primal allocation,
a certified relative gap, and duals for every row. Measurements: ``docs/scaling.md``.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from .floor import solve_floor
from .level import solve_level
from .options import StructuredOptions, StructuredResult
from .problem import SeparableProblem

__all__ = ['StructuredOptions', 'StructuredResult', 'solve_separable']

log = logging.getLogger(__name__)


def solve_separable(P: SeparableProblem, opts: StructuredOptions | None = None, *,
                    time_limit: float | None = None) -> StructuredResult:
    """Solve a recognized block-angular LP exactly (see the module docstring).

    Parameters
    ----------
    P : SeparableProblem
        From :func:`hetsched.solvers.structured.recognize`.
    opts : StructuredOptions, optional
        Tuning; defaults when None.
    time_limit : float, optional
        Seconds; the status is "time_limit" when exceeded.

    Returns
    -------
    StructuredResult
        ``status`` "optimal" with ``X``, the certified ``lower``/``upper`` bounds and the
        duals, or another status (the caller falls back to a general LP solver).
    """
    opts = opts or StructuredOptions()
    deadline = None if time_limit is None else time.perf_counter() + float(time_limit)
    merged = _merge_duplicates(P)
    Q = P if merged is None else merged[0]
    r = solve_level(Q, opts, deadline) if Q.mode == "level" else solve_floor(Q, opts, deadline)
    if merged is None or r.X is None:
        return r
    _, inv, count = merged
    r.X = r.X[inv]
    r.y = r.y[inv] / count[inv]
    r.z = r.z[inv] / count[inv]
    if r.master_rows is not None:
        r.master_rows = np.flatnonzero(np.isin(inv, r.master_rows))
    r.warm_info["merged_classes"] = int(count.size)
    return r


#: Identical jobs are merged into one row (with their loads and objective added) when at
#: least this fraction of the rows are copies: exact for these symmetric LPs (see
#: :mod:`hetsched.formulations.aggregation`), and ties between copies would otherwise fill the master.
MERGE_MIN_DUPLICATES = 0.05


def _merge_duplicates(P: SeparableProblem):
    """(merged problem, class of each job, class sizes), or None when not worthwhile."""
    n = P.n
    if n < 2:
        return None
    rng = np.random.default_rng(20_240_601)
    fin = lambda M: np.where(np.isfinite(M), M, 1e300)
    # copies agree on A first of all: when A alone leaves too few copies, the whole
    # fingerprint cannot leave more (on 10^6 distinct hard-family jobs a call that ends in
    # "not worthwhile" took 0.44-0.52 s with every fingerprint, 0.08-0.11 s with A's alone)
    key_a = fin(P.A) @ rng.normal(size=P.m)
    if n - np.unique(key_a).size < MERGE_MIN_DUPLICATES * n:
        return None
    rest = [P.W, P.U.astype(float)] + ([P.c] if P.c is not None else []) + ([P.Wx] if P.n_extra else [])
    key = key_a + sum(fin(M) @ rng.normal(size=M.shape[1]) for M in rest)
    mats = [P.A, *rest]
    extra = [P.has_level.astype(float)] + ([fin(P.floors)] if P.floors is not None else [])
    key = key + sum(v * rng.normal() for v in extra)
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    if n - first.size < MERGE_MIN_DUPLICATES * n:
        return None
    rep = first[inv]
    same = all(np.array_equal(M, M[rep]) for M in mats)
    same = same and np.array_equal(P.has_level, P.has_level[rep])
    if P.floors is not None:
        same = same and np.array_equal(P.floors, P.floors[rep])
    if not same:  # a fingerprint collision: do not merge
        return None
    count = np.bincount(inv).astype(float)
    warm = None
    if P.warm is not None:
        warm = {**P.warm, "master_rows": np.unique(inv[P.warm["master_rows"]])}
        if "X" in warm:  # copies share one row: their mean allocation meets what each met
            Xw = np.zeros((first.size, P.m))
            for k in range(P.m):
                Xw[:, k] = np.bincount(inv, weights=warm["X"][:, k], minlength=first.size)
            warm["X"] = Xw / np.bincount(inv)[:, None]
    Q = P.take(first, W=P.W[first] * count[:, None], Wx=P.Wx[first] * count[:, None],
               c=None if P.c is None else P.c[first] * count[:, None], warm=warm)
    return Q, inv, count
