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
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..program import LinearProgram
from .pricing import PAIR, SINGLE, FloorChoice, floor_best
from .problem import SeparableProblem

__all__ = ["StructuredOptions", "StructuredResult", "solve_separable"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StructuredOptions:
    """Tuning of the structured solver (defaults chosen by measurement, docs/scaling.md).

    Attributes
    ----------
    gap_tol : float
        Relative gap between the certified upper bound and the allocation's value at which
        the solution is accepted as optimal.
    margin : float
        Relative price margin within which a job counts as tied (ambiguous) when the
        master is first built from sampled prices.
    sample_factor : int
        The warm start solves a random 1/sample_factor of the jobs.
    base_size : int
        Problems with at most this many jobs are solved as one LP (no warm start).
    max_rounds : int
        Most master solves before giving up (the caller then falls back to a general LP).
    coarse_gap, coarse_rounds, floor_coarse_rounds : float, int, int
        While the certified gap exceeds ``coarse_gap``, the first ``coarse_rounds`` (level
        mode) or ``floor_coarse_rounds`` (floor mode) master solves only re-assign the fixed
        jobs to the new prices instead of moving violators into the master.
    max_add : int
        Most jobs moved into the master per round (or n/50 if larger): the most violated.
    seed : int
        Seed of the job sample (results are deterministic for a seed).
    init : str
        Where the first prices come from (the candidates of docs/scaling.md): "sample"
        (default: the same solver on a random sample, recursively), "ipx" (HiGHS interior
        point without crossover on the whole LP), "pdlp" (HiGHS PDLP on the whole LP),
        "lagrangian" (proximal cutting planes on the capacity prices, level mode),
        "hybrid" (the sample's prices refined by those cutting planes, level mode),
        "uniform" (prices 1/C: column generation from a cold start, level mode), "none" (no
        prices: all jobs in the master, i.e. the plain LP).
    lagrangian_iters : int
        Most cutting-plane iterations of ``init="lagrangian"`` / ``"hybrid"``.
    lagrangian_tol : float
        They stop when the cutting-plane model is within this (relative) of the best
        dual value found.
    """

    gap_tol: float = 1e-9
    margin: float = 0.02
    bin_width: float = 0.005
    group_ratio: float = 1.15
    column_ratio: float = 1.25
    max_add: int = 2_000
    coarse_gap: float = 1e-3
    coarse_rounds: int = 6
    floor_coarse_rounds: int = 2
    sample_factor: int = 8
    base_size: int = 1_000
    max_rounds: int = 40
    seed: int = 0
    init: str = "sample"
    lagrangian_iters: int = 300
    lagrangian_tol: float = 1e-7


@dataclass
class StructuredResult:
    """Outcome of :func:`solve_separable`."""

    status: str
    message: str
    X: np.ndarray | None = None
    t: float = float("nan")
    objective: float = float("nan")
    lower: float = float("nan")
    upper: float = float("nan")
    lam: np.ndarray | None = None
    y: np.ndarray | None = None
    z: np.ndarray | None = None
    rounds: int = 0
    n_master_jobs: int = 0
    master_rows: np.ndarray | None = None
    master_s: float = 0.0
    pricing_s: float = 0.0
    warm_s: float = 0.0
    warm_info: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)

    @property
    def gap(self) -> float:
        """Certified relative gap ``(upper - lower) / max(|lower|, tiny)``."""
        return (self.upper - self.lower) / max(abs(self.lower), 1e-300)


# ----------------------------------------------------------------------------- master LP
def _highs_solve(lp: LinearProgram, deadline: float | None):
    """Solve a master LP with HiGHS: simplex when small, IPX with crossover when large; when
    HiGHS fails (model status "Unknown" or "Not Set"), the other algorithm once. Returns a
    :class:`~hetsched.solvers.base.SolverOutput`; a double failure is status
    "numerical_error" (the backend then hands the program to a general solver)."""
    from ..errors import SolverError
    from ..solvers.base import SolverOutput
    from ..solvers.highs import HighsBackend

    # primal simplex: on 36 masters from max-min, makespan and max-sum (1e5-3e5 jobs) it took
    # 3.4 s in all against 7.4 s for dual simplex and 6.6 s for IPX (docs/scaling.md)
    primal, ipx = {"solver": "simplex", "simplex_strategy": 4}, {"solver": "ipm", "run_crossover": "on"}
    tries = (primal, ipx) if lp.n_vars < 20_000 else (ipx, primal)
    errors = []
    for opts in tries:
        remaining = None if deadline is None else max(1e-3, deadline - time.perf_counter())
        try:
            return HighsBackend().solve(lp, time_limit=remaining, options=opts)
        except SolverError as exc:
            log.info("structured: HiGHS %s failed on a master LP (%s)", opts["solver"], exc)
            errors.append(f"{opts['solver']}: {exc}")
    return SolverOutput(status="numerical_error", x=np.full(lp.n_vars, np.nan), objective=float("nan"),
                        has_solution=False, native_status="failed", message="; ".join(errors), solve_s=0.0,
                        backend="highs")


@dataclass
class _Aggregate:
    """Aggregated columns of the master (fixed jobs, by group).

    Column g moves its jobs from option 0 to option 1 by ``u_g``; its capacity
    coefficients are ``cap`` (m, G), objective ``obj`` (G,), bounds ``[0, ub]``; in level
    mode ``ub`` is t itself (a row ``u_g - t <= 0``), in floor mode 1.
    """

    cap: np.ndarray
    obj: np.ndarray
    link: np.ndarray | None = None  # (L, 2) pairs of columns with u_a + u_b <= 1 (floor mode)

    @property
    def size(self) -> int:
        return int(self.obj.shape[0])


def _master(P: SeparableProblem, amb: np.ndarray, *, cap_rhs: np.ndarray, level: bool,
            t_cap: np.ndarray | None = None, t_bounds: tuple[float, float] = (0.0, np.inf),
            agg: _Aggregate | None = None, cols: np.ndarray | None = None, obj_scale: float = 1.0):
    """Build the restricted master over ambiguous jobs ``amb`` (indices).

    ``cols`` (len(amb), m) selects the variables of those jobs (default: all usable).
    The objective is multiplied by ``obj_scale`` (level mode: the number of jobs, so that
    duals are of order one rather than 1/n, far above the solver's absolute tolerances);
    :func:`_read_master` divides the duals back.

    Columns: [t (level mode)] [aggregated group columns] [X of ambiguous jobs].
    ``cap_rhs`` and ``t_cap`` (t's coefficient: the fixed jobs' load per unit of level)
    have one entry per coupling row (:attr:`SeparableProblem.n_cap`); ``agg.cap`` one row
    per coupling row. Returns the LP and the index maps needed to read it back.
    """
    m = P.m
    Ua = P.U[amb] if cols is None else cols
    ja, ka = np.nonzero(Ua)
    nx = ja.size
    n_a = amb.size
    g0 = 1 if level else 0
    G = agg.size if agg is not None else 0
    xs = g0 + G
    nv = xs + nx
    c = np.zeros(nv)
    col_lb = np.zeros(nv)
    col_ub = np.full(nv, np.inf)
    if level:
        c[0] = obj_scale
        col_lb[0], col_ub[0] = t_bounds
    if G:
        c[g0:xs] = agg.obj
        col_ub[g0:xs] = np.inf if level else 1.0
    if not level:
        c[xs:] = P.c[amb[ja], ka]
    cap_types = np.flatnonzero(np.isfinite(cap_rhs))  # coupling rows with a finite right-hand side
    cap_pos = np.full(cap_rhs.shape[0], -1, dtype=np.int64)
    cap_pos[cap_types] = np.arange(cap_types.size)
    rows, cols, vals = [], [], []
    wv = P.W[amb[ja], ka]
    keep = (cap_pos[ka] >= 0) & (wv != 0)
    rows.append(cap_pos[ka][keep]); cols.append(xs + np.flatnonzero(keep)); vals.append(wv[keep])
    for e in range(P.n_extra):  # extra coupling rows (host resources) over their type's variables
        if cap_pos[m + e] < 0:
            continue
        on = np.flatnonzero(ka == P.kx[e])
        we = P.Wx[amb[ja[on]], e]
        nz = we != 0
        rows.append(np.full(int(nz.sum()), cap_pos[m + e])); cols.append(xs + on[nz]); vals.append(we[nz])
    if level and t_cap is not None:
        gk = cap_types[t_cap[cap_types] != 0]
        rows.append(cap_pos[gk]); cols.append(np.zeros(gk.size, dtype=np.int64)); vals.append(t_cap[gk])
    if G:
        kk, gg = np.nonzero(agg.cap[cap_types])
        rows.append(kk); cols.append(g0 + gg); vals.append(agg.cap[cap_types][kk, gg])
    n_cap = cap_types.size
    rlb = [np.full(n_cap, -np.inf)]
    rub = [cap_rhs[cap_types]]
    r0 = n_cap
    if level and G:  # u_g - t <= 0
        rows.append(r0 + np.arange(G)); cols.append(g0 + np.arange(G)); vals.append(np.ones(G))
        rows.append(r0 + np.arange(G)); cols.append(np.zeros(G, dtype=np.int64)); vals.append(-np.ones(G))
        rlb.append(np.full(G, -np.inf)); rub.append(np.zeros(G))
        r0 += G
    if not level and G and agg.link is not None and agg.link.size:  # u_a + u_b <= 1
        nL = agg.link.shape[0]
        rows.append(r0 + np.repeat(np.arange(nL), 2)); cols.append(g0 + agg.link.reshape(-1)); vals.append(np.ones(2 * nL))
        rlb.append(np.full(nL, -np.inf)); rub.append(np.ones(nL))
        r0 += nL
    # time rows
    t_row0 = r0
    rows.append(r0 + ja); cols.append(xs + np.arange(nx)); vals.append(np.ones(nx))
    rlb.append(np.full(n_a, -np.inf)); rub.append(np.ones(n_a))
    r0 += n_a
    base = r0
    av = P.A[amb[ja], ka]
    if level:
        has = P.has_level[amb]
        rhs = np.zeros(int(has.sum()))
    else:
        fa = P.floors[amb]
        has = np.isfinite(fa)
        rhs = fa[has]
    lv_pos = np.full(n_a, -1, dtype=np.int64)
    nl = int(has.sum())
    lv_pos[has] = np.arange(nl)
    sel = has[ja] & (av != 0)
    rows.append(base + lv_pos[ja][sel]); cols.append(xs + np.flatnonzero(sel)); vals.append(av[sel])
    if level:
        rows.append(base + np.arange(nl)); cols.append(np.zeros(nl, dtype=np.int64)); vals.append(-np.ones(nl))
    rlb.append(rhs); rub.append(np.full(nl, np.inf))
    n_rows = base + nl
    Amat = sp.csr_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n_rows, nv))
    x_index = np.full((n_a, m), -1, dtype=np.int64)
    x_index[ja, ka] = xs + np.arange(nx)
    lp = LinearProgram(c=c, A=Amat, row_lb=np.concatenate(rlb), row_ub=np.concatenate(rub), col_lb=col_lb,
                       col_ub=col_ub, x_index=x_index, sense="max", name="structured-master")
    return lp, dict(cap_types=cap_types, n_cap=n_cap, n_a=n_a, lv_pos=lv_pos, base=base, t_row0=t_row0,
                    g0=g0, G=G, obj_scale=obj_scale)


def _read_master(P, lp, out, maps):
    """(X_amb (n_a, m), lam (n_cap,), z_amb, y_amb, u (G,)) from a solved master."""
    X = lp.extract_X(out.x)
    d = out.row_dual if out.row_dual is not None else np.zeros(lp.n_rows)
    d = d / maps["obj_scale"]
    lam = np.zeros(P.n_cap)
    lam[maps["cap_types"]] = np.maximum(d[: maps["n_cap"]], 0.0)
    t0, n_a = maps["t_row0"], maps["n_a"]
    z = np.maximum(d[t0 : t0 + n_a], 0.0)
    y = np.zeros(n_a)
    has = maps["lv_pos"] >= 0
    y[has] = np.maximum(-d[maps["base"] + maps["lv_pos"][has]], 0.0)
    u = out.x[maps["g0"] : maps["g0"] + maps["G"]]
    return X, lam, z, y, u


# ------------------------------------------------------------------------------- sampling
def _subproblem(P: SeparableProblem, rows: np.ndarray, scale: float, floors: np.ndarray | None = None,
                level_from_floors: bool = False) -> SeparableProblem:
    """The problem restricted to ``rows`` with capacities times ``scale``.

    ``level_from_floors``: the level problem "how far can the floors be scaled", with
    :math:`A_{jk} / f_j` as level coefficients for the jobs with :math:`f_j > 0`.
    """
    A = P.A[rows]
    c = None if P.c is None else P.c[rows]
    fl = None if P.floors is None else (P.floors[rows] if floors is None else floors)
    has_level = P.has_level[rows]
    if level_from_floors:
        f = P.floors[rows]
        pos = f > 0
        A = np.where(pos[:, None], A / np.where(pos, f, 1.0)[:, None], 0.0)
        c, fl, has_level = None, None, pos
    return P.take(rows, A=A, C=P.C * scale, Cx=P.Cx * scale, c=c, floors=fl, has_level=has_level, gamma=1.0,
                  t_bounds=(0.0, np.inf) if (c is None) else P.t_bounds, offset=0.0, t_value=0.0)


def _sample(P: SeparableProblem, opts: StructuredOptions) -> tuple[np.ndarray, float]:
    """Random rows (seeded) and the capacity scale that keeps the sample as contended."""
    n = P.n
    n_s = max(opts.base_size // 2, n // opts.sample_factor)
    rng = np.random.default_rng([opts.seed, n, P.m])
    rows = np.sort(rng.choice(n, size=n_s, replace=False))
    weight = P.W.max(axis=1)
    total = float(weight.sum())
    scale = float(weight[rows].sum()) / total if total > 0 else n_s / n
    return rows, scale


# ---------------------------------------------------------------------------- level mode
def _n_bins(opts: StructuredOptions) -> int:
    fine = int(np.ceil(np.log(opts.group_ratio) / np.log1p(opts.bin_width)))
    return fine + _COARSE_BINS + 1


#: Coarse bins (10 % wide) above ``group_ratio``; ratios beyond share the last bin.
_COARSE_BINS = 48


def _ratio_bin(rho: np.ndarray, opts: StructuredOptions) -> np.ndarray:
    """Bin of a price ratio >= 1: fine (``bin_width``) up to ``group_ratio``, then 10 %."""
    fine = int(np.ceil(np.log(opts.group_ratio) / np.log1p(opts.bin_width)))
    lr = np.log(np.maximum(rho, 1.0))
    b = np.floor(lr / np.log1p(opts.bin_width))
    coarse = fine + np.minimum(np.floor((lr - np.log(opts.group_ratio)) / np.log(1.1)), _COARSE_BINS)
    return np.where(rho < opts.group_ratio, b, coarse).astype(np.int64)


def _compact(key: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Relabel integer keys in [0, size) to 0..G-1 (O(n), no sort); returns (labels, keys)."""
    present = np.bincount(key, minlength=size) > 0
    remap = np.cumsum(present) - 1
    return remap[key], np.flatnonzero(present)


def _level_groups(P: SeparableProblem, fj, k1, q1, k2, q2, a1, a2, opts: StructuredOptions, t_ref: float):
    """Group fixed jobs by (cheapest type k1, second cheapest k2, price-ratio bin).

    Inputs are the fixed jobs ``fj``, their cheapest two types, their prices of a unit of
    level ``q`` and coefficients ``a``. A job joins a group only when it can reach about
    ``t_ref`` on its second type alone. Returns the group id per job (-1: none) and the
    aggregated columns.
    """
    m = P.m
    nf = k1.shape[0]
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = np.where(q1 > 0, q2 / q1, np.inf)
    grp = np.isfinite(rho) & (a2 > t_ref * (1.0 + opts.margin))
    gid = np.full(nf, -1, dtype=np.int64)
    if not grp.any():
        return gid, None
    B = _n_bins(opts)
    key = (k1[grp] * m + k2[grp]) * B + _ratio_bin(rho[grp], opts)
    inv, uniq = _compact(key, m * m * B)
    gid[grp] = inv
    G = uniq.size
    rows = fj[grp]
    cap = P.loads(rows, k2[grp], 1.0 / a2[grp], inv, G) - P.loads(rows, k1[grp], 1.0 / a1[grp], inv, G)
    return gid, _Aggregate(cap=cap, obj=np.zeros(G))


class _Costs:
    """Prices of a unit of level of the jobs ``rows``, ``q = price(lam) / A`` (``W / A``
    computed once when the capacity rows are the only coupling rows)."""

    def __init__(self, P: SeparableProblem, rows: np.ndarray | None = None) -> None:
        A = P.A if rows is None else P.A[rows]
        self.P, self.rows, self.A = P, rows, A
        with np.errstate(divide="ignore", invalid="ignore"):
            W = P.W if rows is None else P.W[rows]
            self.WA = np.where(A > 0, W / A, np.inf) if P.n_extra == 0 else None

    def __call__(self, lam: np.ndarray) -> np.ndarray:
        if self.WA is None:
            with np.errstate(divide="ignore", invalid="ignore"):
                return np.where(self.A > 0, self.P.price(lam, self.rows) / self.A, np.inf)
        with np.errstate(invalid="ignore"):  # inf * 0 where lam_k = 0: fixed just below
            q = self.WA * lam[None, :]
        zero = np.flatnonzero(lam == 0)
        if zero.size:
            q[:, zero] = np.where(np.isfinite(self.WA[:, zero]), 0.0, np.inf)
        return q


def _top2_min(q: np.ndarray):
    """Cheapest and second cheapest type of each row and their prices (``q`` restored)."""
    n, m = q.shape
    r = np.arange(n)
    k1 = np.argmin(q, axis=1)
    q1 = q[r, k1]
    if m == 1:
        return k1, q1, k1.copy(), np.full(n, np.inf)
    q[r, k1] = np.inf
    k2 = np.argmin(q, axis=1)
    q2 = q[r, k2]
    q[r, k1] = q1
    return k1, q1, k2, q2


def _candidate_columns(q: np.ndarray, A: np.ndarray, U: np.ndarray, opts: StructuredOptions) -> np.ndarray:
    """Variables a job brings into the master: types within ``column_ratio`` of its cheapest
    price of a unit of level, and its type with the largest coefficient (for its time row)."""
    n = q.shape[0]
    q1 = q.min(axis=1)
    with np.errstate(invalid="ignore"):
        cols = U & (q <= q1[:, None] * opts.column_ratio)
    cols[np.arange(n), np.argmax(np.where(U, A, -np.inf), axis=1)] = True
    return cols & U


def _solve_level(P: SeparableProblem, opts: StructuredOptions, deadline: float | None, depth: int = 0) -> StructuredResult:
    n, m = P.n, P.m
    t_start = time.perf_counter()
    res = StructuredResult(status="unknown", message="")
    lv = P.has_level
    A, C, U = P.A, P.C_all, P.U
    rows_n = np.arange(n)
    lam = None
    t_est = np.nan
    warm_rows = None
    if P.warm is not None and opts.init != "none" and np.any(P.warm["lam"] > 0):
        lam, t_est, warm_rows = P.warm["lam"], np.nan, P.warm["master_rows"]
        res.warm_info["init"] = "given"
    elif n > opts.base_size and opts.init != "none":
        t_w = time.perf_counter()
        lam, t_est = _level_warm_start(P, opts, deadline, depth, res.warm_info)
        res.warm_s = time.perf_counter() - t_w
    costs = _Costs(P)
    cols = np.zeros((n, m), dtype=bool)
    if lam is None:
        amb = lv.copy()
        cols[amb] = U[amb]
        cls = None
    else:
        q_cls = costs(_classification_prices(lam, C))
        cls = _top2_min(q_cls)
        k1, q1 = cls[0], cls[1]
        q3 = np.partition(q_cls, 2, axis=1)[:, 2] if m > 2 else np.full(n, np.inf)
        with np.errstate(invalid="ignore"):
            third = (q3 <= q1 * (1.0 + opts.margin)) & (q1 > 0)
        amb = lv & (third | ~np.isfinite(q1) | (A[rows_n, k1] <= t_est * (1.0 + opts.margin)))
        if warm_rows is not None:
            amb[warm_rows] = lv[warm_rows]
        ai = np.flatnonzero(amb)
        cols[ai] = _candidate_columns(q_cls[ai], A[ai], U[ai], opts)
        del q_cls
    C_fin = np.where(np.isfinite(C), C, 0.0)
    t_lb, t_ub = P.t_bounds
    t_ref = float(t_est) if np.isfinite(t_est) else 0.0
    obj_scale = float(max(1, int(lv.sum())))
    for rnd in range(1, opts.max_rounds + 1):
        if deadline is not None and time.perf_counter() > deadline:
            res.status, res.message = "time_limit", f"time limit after {rnd - 1} master solves"
            return res
        amb_idx = np.flatnonzero(amb)
        fj = np.flatnonzero(lv & ~amb)
        t_p = time.perf_counter()
        agg = None
        if fj.size:
            k1, q1, k2, q2 = (v[fj] for v in cls)
            a1, a2 = A[fj, k1], A[fj, k2]
            gid, agg = _level_groups(P, fj, k1, q1, k2, q2, a1, a2, opts, t_ref)
            L = P.loads(fj, k1, 1.0 / a1)[:, 0]
            lim = np.where(gid >= 0, np.minimum(a1, a2), a1)
            t_fix_ub = float(lim.min())
        else:
            k1 = k2 = gid = np.zeros(0, dtype=np.int64)
            a1 = a2 = lim = np.zeros(0)
            L, t_fix_ub = np.zeros(P.n_cap), np.inf
        ub = min(t_ub, t_fix_ub)
        res.pricing_s += time.perf_counter() - t_p
        t_m = time.perf_counter()
        lp, maps = _master(P, amb_idx, cap_rhs=C, level=True, t_cap=L, t_bounds=(t_lb, ub), agg=agg,
                           cols=cols[amb_idx], obj_scale=obj_scale)
        out = _highs_solve(lp, deadline)
        res.master_s += time.perf_counter() - t_m
        if not out.success:
            res.status = out.status
            res.message = f"master LP {rnd} ended {out.status!r} ({out.message})"
            return res
        t = float(out.x[0])
        Xa, lam, za, ya, u = _read_master(P, lp, out, maps)
        t_p = time.perf_counter()
        ug = np.where(gid >= 0, u[np.maximum(gid, 0)], 0.0) if agg is not None else np.zeros(fj.size)
        on1 = ug < t * (1.0 - 1e-12) if t > 0 else np.ones(fj.size, dtype=bool)
        on2 = (gid >= 0) & (ug > t * 1e-12)
        q = costs(lam)
        new_cls = _top2_min(q)
        qmin_f = new_cls[1][fj]
        y = np.zeros(n)
        y[amb_idx] = ya
        y[fj] = qmin_f
        # z: 0 for fixed jobs (y = their cheapest price); master jobs over all their variables
        z = np.zeros(n)
        Aa, Pa, Ua = A[amb_idx], P.price(lam, amb_idx), U[amb_idx]
        rc = np.where(Ua, ya[:, None] * Aa - Pa, -np.inf)
        if amb_idx.size:
            z[amb_idx] = np.maximum(rc.max(axis=1), 0.0)
        upper = _level_upper(lam, y, z, C_fin, t_lb, t_ub)
        # violators: fixed jobs on a type that is no longer cheapest; master jobs missing a
        # variable with positive reduced cost
        tol = qmin_f * (1.0 + 1e-9) + 1e-300
        with np.errstate(invalid="ignore"):
            bad = (on1 & (q[fj, k1] > tol)) | (on2 & (q[fj, k2] > tol))
        if np.isfinite(t_fix_ub) and t >= t_fix_ub * (1.0 - 1e-12):
            t_ref = max(t_ref, t)
            bad |= lim <= t_ref * (1.0 + opts.margin)
        t_ref = max(t_ref, t)
        with np.errstate(invalid="ignore", divide="ignore"):
            excess = np.where(bad, np.maximum(q[fj, k1] * on1, q[fj, k2] * on2) / (qmin_f + 1e-300) - 1.0, 0.0)
        excess = np.where(bad & ~np.isfinite(excess), 1.0, excess)
        viol = _most_violated(fj, np.where(bad, np.maximum(excess, 1e-300), 0.0), 0.0, opts, n)
        scale_rc = np.where(Ua, ya[:, None] * Aa + Pa, 0.0)
        new_cols = Ua & ~cols[amb_idx] & (rc - za[:, None] > 1e-9 * scale_rc + 1e-300)
        col_jobs = amb_idx[new_cols.any(axis=1)] if new_cols.size else amb_idx[:0]
        res.pricing_s += time.perf_counter() - t_p
        gap = (upper - t) / max(abs(t), 1e-300)
        res.history.append({"round": rnd, "master_jobs": int(amb_idx.size), "groups": agg.size if agg else 0,
                            "master_vars": lp.n_vars, "t": t, "upper": upper, "gap": gap,
                            "violators": int(viol.size), "new_columns": int(new_cols.sum())})
        log.debug("structured level round %d: %d master jobs, %d groups, %d vars, t=%.12g, gap %.2e, "
                  "%d violators, %d new columns", rnd, amb_idx.size, agg.size if agg else 0, lp.n_vars, t, gap,
                  viol.size, int(new_cols.sum()))
        if viol.size == 0 and col_jobs.size == 0:
            X = np.zeros((n, m))
            X[amb_idx] = Xa
            X[fj, k1] = np.where(on1, (t - ug) / a1, 0.0)
            if on2.any():
                X[fj[on2], k2[on2]] = ug[on2] / a2[on2]
            res.X, res.t, res.lam, res.y, res.z = X, t, lam, y, z
            res.lower, res.upper = t, max(upper, t)
            res.objective = P.gamma * t + P.offset
            res.rounds, res.n_master_jobs = rnd, int(amb_idx.size)
            res.master_rows = np.union1d(amb_idx, fj[on1 & on2])
            if gap <= max(opts.gap_tol, 1e-7):
                res.status, res.message = "optimal", f"certified gap {max(gap, 0.0):.1e} after {rnd} master LP(s)"
            else:
                res.status = "numerical_error"
                res.message = f"no violators but certified gap {gap:.1e} after {rnd} master LP(s)"
            log.debug("structured level done in %.3fs: %s", time.perf_counter() - t_start, res.message)
            return res
        lam_cls = _classification_prices(lam, C)
        if np.array_equal(lam_cls, lam):
            cls = new_cls
        else:
            q = costs(lam_cls)
            cls = _top2_min(q)
        if gap > opts.coarse_gap and rnd <= opts.coarse_rounds and fj.size > 0:
            continue  # prices still far off: regroup the fixed jobs with the new prices first
        if col_jobs.size:
            cols[amb_idx] |= new_cols
        if viol.size:
            amb[viol] = True
            cols[viol] = _candidate_columns(q[viol], A[viol], U[viol], opts)
    res.status, res.message = "iteration_limit", f"no certificate after {opts.max_rounds} master LPs"
    return res


def _most_violated(rows: np.ndarray, excess: np.ndarray, tol: float, opts: StructuredOptions, n: int) -> np.ndarray:
    """Rows whose (relative) violation exceeds ``tol``; at most ``max(max_add, n/50)`` of the
    largest, so that a master built from poor prices does not swallow the whole problem."""
    hit = np.flatnonzero(excess > tol)
    cap = max(opts.max_add, n // 50)
    if hit.size > cap:
        hit = hit[np.argpartition(-excess[hit], cap - 1)[:cap]]
    return rows[np.sort(hit)]


def _classification_prices(lam: np.ndarray, C: np.ndarray) -> np.ndarray:
    """Prices used to assign fixed jobs: the master's, with zeros lifted a little.

    A zero price (spare capacity in the master) would send every job that can use the
    type onto it; a small positive floor keeps the assignment informative.
    """
    fin = np.isfinite(C)
    top = float(lam[fin].max()) if fin.any() else 0.0
    if top <= 0:
        out = np.where(fin, 1.0 / np.maximum(np.where(fin, C, 1.0), 1e-300), 0.0)
        return out
    return np.where(fin, np.maximum(lam, 1e-3 * top), 0.0)


def _level_upper(lam, y, z, C_fin, t_lb, t_ub) -> float:
    """Weak-duality bound on t from prices ``lam`` and level duals ``y`` (see module doc)."""
    S = float(y.sum())
    base = float(lam @ C_fin + z.sum())
    best = np.inf
    if S > 0:
        best = base / S  # scale y to sum to 1
    if S <= 1 and np.isfinite(t_ub):
        best = min(best, base + t_ub * (1.0 - S))
    if S >= 1 and np.isfinite(t_lb):
        best = min(best, base + t_lb * (1.0 - S))
    return best


def _level_warm_start(P, opts, deadline, depth, info=None):
    """First prices and level estimate for a level problem (see ``StructuredOptions.init``)."""
    info = {} if info is None else info
    info["init"] = opts.init
    if opts.init in ("ipx", "pdlp"):
        lam, t = _whole_lp_prices(P, opts, deadline, info, level=True)
        return lam, t
    if opts.init == "lagrangian":
        return _lagrangian_prices(P, opts, deadline, info)
    if opts.init == "hybrid":  # sampled prices refined by cutting planes on the whole problem
        rows, scale = _sample(P, opts)
        sub = _subproblem(P, rows, scale)
        r = _solve_level(sub, opts, deadline, depth + 1)
        if r.status != "optimal":
            return None, np.nan
        lam, t = _lagrangian_prices(P, opts, deadline, info, start=r.lam, box=0.05)
        return lam, min(t, r.t) if np.isfinite(t) else r.t
    if opts.init == "uniform":
        C = P.C_all
        lam = np.where(np.isfinite(C) & (C > 0), 1.0 / np.maximum(np.where(np.isfinite(C), C, 1.0), 1e-300), 0.0)
        return lam, np.nan
    rows, scale = _sample(P, opts)
    sub = _subproblem(P, rows, scale)
    r = _solve_level(sub, opts, deadline, depth + 1)
    if r.status != "optimal":
        return None, np.nan
    return r.lam, r.t


def _whole_lp_prices(P, opts, deadline, info, *, level: bool):
    """Prices from HiGHS IPX without crossover, or PDLP, on the whole program."""
    from ..solvers.highs import HighsBackend

    n = P.n
    rows = np.flatnonzero(P.has_level) if level else np.arange(n)
    lp, maps = _master(P, rows, cap_rhs=P.C_all, level=level, t_cap=np.zeros(P.n_cap) if level else None,
                       t_bounds=P.t_bounds, obj_scale=float(max(1, rows.size)) if level else 1.0)
    options = ({"solver": "ipm", "run_crossover": "off"} if opts.init == "ipx"
               else {"solver": "pdlp", "pdlp_optimality_tolerance": 1e-7})
    remaining = None if deadline is None else max(1e-3, deadline - time.perf_counter())
    t0 = time.perf_counter()
    out = HighsBackend().solve(lp, time_limit=remaining, options=options)
    info.update(whole_lp_s=time.perf_counter() - t0, whole_lp_status=out.status)
    if out.row_dual is None:
        return None, np.nan
    _, lam, _, _, _ = _read_master(P, lp, out, maps)
    t = float(out.x[0]) if level else np.nan
    info["whole_lp_level"] = t
    return lam, t


def _lagrangian_prices(P, opts, deadline, info, start=None, box=0.5):
    r"""Price-directed search: maximize the Lagrangian dual over the capacity prices.

    Ignoring the jobs' time rows, :math:`t^\star \le 1 / \Theta(\lambda)` for
    :math:`\lambda \ge 0,\ \lambda \cdot C = 1`, with
    :math:`\Theta(\lambda) = \sum_j \min_k W_{jk}\lambda_k / A_{jk}` concave and piecewise
    linear. Proximal (box-stabilized) cutting planes: each iteration prices every job in
    closed form, adds the cut :math:`\theta \le L \cdot \lambda` (L: load vector of the
    cheapest assignment) and solves a tiny LP over (θ, λ) in a box around the best point.
    """
    from scipy.optimize import linprog

    lv = np.flatnonzero(P.has_level)
    costs = _Costs(P, lv)
    C = P.C_all
    act = np.isfinite(C) & (C > 0)
    m = P.n_cap  # one price per coupling row
    if start is None:
        lam = np.where(act, 1.0 / (act.sum() * np.where(act, C, 1.0)), 0.0)
    else:
        if not (start[act] > 0).any():  # no binding capacity in the sample: nothing to refine
            return start, np.nan
        lam = np.where(act, np.maximum(start, 1e-12 * float(start.max())), 0.0)
        lam = lam / float(lam @ np.where(act, C, 0.0))
    center, best = lam.copy(), -np.inf
    cuts: list[np.ndarray] = []
    trace = []
    t0 = time.perf_counter()
    for it in range(opts.lagrangian_iters):
        if deadline is not None and time.perf_counter() > deadline:
            break
        q = costs(lam)
        k1 = np.argmin(q, axis=1)
        L = P.loads(lv, k1, 1.0 / costs.A[np.arange(lv.size), k1])[:, 0]
        theta = float(L @ lam)
        if theta > best:
            center, best = lam.copy(), theta
            box = min(box * 2.0, 1.0)
        else:
            box *= 0.5
        cuts.append(L)
        # master: max th  s.t. th <= L_i . lam, C . lam = 1, |lam - center| <= box * center
        G = np.array(cuts)
        c = np.zeros(m + 1)
        c[0] = -1.0
        A_ub = np.hstack([np.ones((len(cuts), 1)), -G])
        lo = np.where(act, np.maximum(center * (1 - box), 0.0), 0.0)
        hi = np.where(act, center * (1 + box) + 1e-12, 0.0)
        res = linprog(c, A_ub=A_ub, b_ub=np.zeros(len(cuts)), A_eq=np.concatenate([[0.0], np.where(act, C, 0.0)])[None, :],
                      b_eq=[1.0], bounds=[(None, None)] + list(zip(lo, hi)), method="highs")
        if res.status != 0:
            break
        model = -float(res.fun)
        trace.append((time.perf_counter() - t0, 1.0 / best if best > 0 else np.inf, model))
        lam = np.maximum(res.x[1:], 0.0)
        if model - best <= opts.lagrangian_tol * best:
            break
    info.update(lagrangian_iterations=len(trace), lagrangian_trace=trace,
                lagrangian_upper=1.0 / best if best > 0 else np.inf)
    return center, (1.0 / best if best > 0 else np.nan)


# ---------------------------------------------------------------------------- public API
def solve_separable(P: SeparableProblem, opts: StructuredOptions | None = None, *,
                    time_limit: float | None = None) -> StructuredResult:
    """Solve a recognized block-angular LP exactly (see the module docstring).

    Parameters
    ----------
    P : SeparableProblem
        From :func:`hetsched.structured.recognize`.
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
    r = _solve_level(Q, opts, deadline) if Q.mode == "level" else _solve_floor(Q, opts, deadline)
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
#: :mod:`hetsched.aggregation`), and ties between copies would otherwise fill the master.
MERGE_MIN_DUPLICATES = 0.05


def _merge_duplicates(P: SeparableProblem):
    """(merged problem, class of each job, class sizes), or None when not worthwhile."""
    n, m = P.n, P.m
    if n < 2:
        return None
    rng = np.random.default_rng(20_240_601)
    fin = lambda M: np.where(np.isfinite(M), M, 1e300)  # noqa: E731
    mats = [P.A, P.W, P.U.astype(float)] + ([P.c] if P.c is not None else []) + ([P.Wx] if P.n_extra else [])
    key = sum(fin(M) @ rng.normal(size=M.shape[1]) for M in mats)
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
    k = first.size
    warm = None
    if P.warm is not None:
        warm = {**P.warm, "master_rows": np.unique(inv[P.warm["master_rows"]])}
    Q = P.take(first, W=P.W[first] * count[:, None], Wx=P.Wx[first] * count[:, None],
               c=None if P.c is None else P.c[first] * count[:, None], warm=warm)
    return Q, inv, count


# ---------------------------------------------------------------------------- floor mode
#: Floor-feasibility level at or below which a floor problem counts as tight (its floors are
#: the optimum of a level LP, as in a policy's second stage).
TIGHT_LEVEL = 1.0 + 1e-6


def _min_amount(P, rows, kind, k, xk):
    """Smallest amount a single-type vertex can shrink to on its type (floor or 0)."""
    f = P.floors[rows]
    with np.errstate(divide="ignore", invalid="ignore"):
        lo = np.where(f > 0, f / P.A[rows, k], 0.0)
    return np.where(kind == SINGLE, np.minimum(lo, xk), xk)


@dataclass
class _Vertices:
    r"""Fixed jobs' vertices, sparsely (at most two nonzeros each; see :mod:`.pricing`).

    ``v0`` / ``v1``: (type, amount) entries of the current vertex and of the runner-up
    (amount 0 where a job has none); moving by ``u`` toward the runner-up and shrinking by
    ``s`` on type ``k`` by ``delta`` gives :math:`(1-u) X^0 + u X^1 + s\,\delta\,e_k`.
    """

    v0: list
    v1: list
    k: np.ndarray
    delta: np.ndarray

    def entries(self, u: np.ndarray | None = None, s: np.ndarray | None = None) -> list:
        """(type, amount) entries of the allocation at moves ``u`` and shrinks ``s`` (the
        vertex when None); within one entry each job appears once."""
        w0 = 1.0 if u is None else 1.0 - u
        out = [(k, w0 * a) for k, a in self.v0]
        if u is not None:
            out += [(k, u * a) for k, a in self.v1]
        if s is not None:
            out.append((self.k, s * self.delta))
        return out

    def loads(self, P: SeparableProblem, rows: np.ndarray) -> np.ndarray:
        """Coupling-row loads (n_cap,) of the current vertices of jobs ``rows``."""
        return sum(P.loads(rows, k, a)[:, 0] for k, a in self.v0)


def _entries(kind, k, l, xk, xl) -> list:
    """A vertex's (type, amount) entries; amounts 0 where the vertex has no such entry."""
    return [(k, np.where(kind >= SINGLE, xk, 0.0)), (l, np.where(kind == PAIR, xl, 0.0))]


def _move_size(P: SeparableProblem, rows, lam, cf, v0: list, v1: list) -> np.ndarray:
    r""":math:`\sum_k (|c_{jk}| + \text{price}_{jk}) |X^1_{jk} - X^0_{jk}|` from the sparse
    entries (each type counted once)."""
    slots = [k for k, _ in v0] + [k for k, _ in v1]
    n = rows.shape[0]
    r = np.arange(n)
    total = np.zeros(n)
    for i, k in enumerate(slots):
        first = np.ones(n, dtype=bool)
        for k_prev in slots[:i]:
            first &= k != k_prev
        d = sum(np.where(kk == k, a, 0.0) for kk, a in v1) - sum(np.where(kk == k, a, 0.0) for kk, a in v0)
        w = np.abs(cf[r, k]) + P.price_at(rows, k, lam)
        total += np.where(first, w * np.abs(d), 0.0)
    return total


def _floor_groups(P: SeparableProblem, fj: np.ndarray, ch: FloorChoice, lam: np.ndarray, opts: StructuredOptions):
    """Vertices of fixed jobs, their groups and the aggregated columns.

    Each group shares (vertex, runner-up vertex, relative gap bin); its columns move all
    its jobs toward the runner-up (u) or shrink them on their type (s), u + s <= 1.
    Returns (:class:`_Vertices`, group per job, u column per job, s column per job,
    aggregated columns or None); loads and objectives come from the sparse vertices.
    """
    m = P.m
    from .pricing import vertex_signature

    has1 = ch.kind2 >= 0
    v0 = _entries(ch.kind, ch.k, ch.l, ch.xk, ch.xl)
    v1 = _entries(np.where(has1, ch.kind2, -1), ch.k2, ch.l2, ch.xk2, ch.xl2)
    xmin = _min_amount(P, fj, ch.kind, ch.k, ch.xk)
    shrink = (ch.kind == SINGLE) & (xmin < ch.xk * (1.0 - 1e-12))
    V = _Vertices(v0=v0, v1=v1, k=ch.k, delta=np.where(shrink, xmin - ch.xk, 0.0))
    cf = P.c[fj]
    # gap relative to the size of the move itself: for "all time on k" vs "floor on k" this
    # is (c - W lam) / (c + W lam), a pure price ratio whatever the floor
    scale = _move_size(P, fj, lam, cf, v0, v1) + 1e-300
    rho = 1.0 + np.maximum(ch.value - ch.runner_up, 0.0) / scale
    rho = np.where(has1, rho, np.inf)
    sig0 = vertex_signature(m, ch.kind, ch.k, ch.l, ch.xk >= 1.0)
    sig1 = np.where(has1, vertex_signature(m, ch.kind2, ch.k2, ch.l2, ch.xk2 >= 1.0), -1)
    S = 2 + 2 * m + m * m
    B = _n_bins(opts)
    b = np.where(has1, _ratio_bin(np.where(has1, rho, 1.0), opts), B)
    key = ((sig0 * (S + 1) + (sig1 + 1)) * (B + 1) + b)
    grouped = has1 | shrink
    gid = np.full(fj.size, -1, dtype=np.int64)
    if not grouped.any():
        return V, gid, gid, gid, None
    size = (S + 1) * (S + 1) * (B + 1)
    if size <= max(4 * fj.size, 1 << 20):  # O(n) relabelling; a sort when the key range is large
        inv, uniq = _compact(key[grouped], size)
    else:
        uniq, inv = np.unique(key[grouped], return_inverse=True)
    gid[grouped] = inv
    G = uniq.size
    # column u_g (to the runner-up) where the group has one; s_g (shrink) where shrinkable
    g_has1 = np.zeros(G, dtype=bool)
    g_has1[inv[has1[grouped]]] = True
    g_shr = np.zeros(G, dtype=bool)
    g_shr[inv[shrink[grouped]]] = True
    ucol = np.full(G, -1, dtype=np.int64)
    ucol[g_has1] = np.arange(int(g_has1.sum()))
    scol = np.full(G, -1, dtype=np.int64)
    scol[g_shr] = int(g_has1.sum()) + np.arange(int(g_shr.sum()))
    ncol = int(g_has1.sum() + g_shr.sum())
    cap = np.zeros((P.n_cap, ncol))
    obj = np.zeros(ncol)
    rows_g = np.flatnonzero(grouped)
    moves = ((v1, v0, ucol, has1), ([(ch.k, V.delta)], [], scol, shrink))
    for plus, minus, colmap, sel in moves:
        jr = rows_g[sel[rows_g]]
        if not jr.size:
            continue
        cidx = colmap[gid[jr]]
        rows = fj[jr]
        for entries, sign in ((plus, 1.0), (minus, -1.0)):
            for k, a in entries:
                cap += P.loads(rows, k[jr], sign * a[jr], cidx, ncol)
                obj += np.bincount(cidx, weights=sign * cf[jr, k[jr]] * a[jr], minlength=ncol)
    both = g_has1 & g_shr
    link = np.stack([ucol[both], scol[both]], axis=1) if both.any() else None
    uj = np.where(gid >= 0, ucol[np.maximum(gid, 0)], -1)
    uj = np.where(has1, uj, -1)
    sj = np.where(gid >= 0, scol[np.maximum(gid, 0)], -1)
    sj = np.where(shrink, sj, -1)
    return V, gid, uj, sj, _Aggregate(cap=cap, obj=obj, link=link)


def _solve_floor(P: SeparableProblem, opts: StructuredOptions, deadline: float | None, depth: int = 0) -> StructuredResult:
    n, m = P.n, P.m
    t_start = time.perf_counter()
    res = StructuredResult(status="unknown", message="")
    A, C, c, f = P.A, P.C_all, P.c, P.floors
    C_fin = np.where(np.isfinite(C), C, 0.0)
    lam = None
    amb = np.ones(n, dtype=bool)
    best_upper, lam_best, best_gap = np.inf, None, np.inf
    priced = None  # (prices, floor_best of every job at them) from the last round's pricing
    cols = None  # master jobs' variables (None: all usable); restricted once prices are known
    if n > opts.base_size and opts.init != "none":
        t_w = time.perf_counter()
        warm = _floor_warm_start(P, opts, deadline, depth)
        res.warm_s = time.perf_counter() - t_w
        if warm == "infeasible":
            res.status, res.message = "infeasible", "the floors cannot all be met (certified by the level bound)"
            return res
        if warm is not None:
            lam, amb0 = warm
            amb = np.zeros(n, dtype=bool)
            cols = np.zeros((n, m), dtype=bool)
            if amb0 is not None:
                ch0 = floor_best(A[amb0], P.U[amb0], lambda sl: P.price(lam, amb0[sl]), c[amb0], f[amb0])
                cols[amb0] = _floor_candidates(P, amb0, ch0)
                # prices of a level optimum, scaled far above the objective: they choose the
                # master's jobs well but are no stabilization center (a mix with the
                # master's prices would be theirs), so the rounds price at the master's
                amb[amb0] = True
            else:
                lam_best = lam
                best_upper = float(lam @ C_fin + floor_best(A, P.U, lambda sl: P.price(lam, sl), c, f).value.sum()) \
                    + P.offset
    for rnd in range(1, opts.max_rounds + 1):
        if deadline is not None and time.perf_counter() > deadline:
            res.status, res.message = "time_limit", f"time limit after {rnd - 1} master solves"
            return res
        amb_idx = np.flatnonzero(amb)
        fj = np.flatnonzero(~amb)
        t_p = time.perf_counter()
        if fj.size:
            if priced is not None and priced[0] is lam:  # last round priced every job at these prices
                ch = priced[1].take(fj)
            else:
                ch = floor_best(A[fj], P.U[fj], lambda sl: P.price(lam, fj[sl]), c[fj], f[fj])
            V, gid, uj, sj, agg = _floor_groups(P, fj, ch, lam, opts)
            if np.any(~np.isfinite(ch.value)):  # a fixed job with no vertex: let the LP see it
                bad = fj[~np.isfinite(ch.value)]
                amb[bad] = True
                if cols is not None:
                    cols[bad] = P.U[bad]
                continue
            fixed_load = V.loads(P, fj)
        else:
            V = None
            uj = sj = np.zeros(0, dtype=np.int64)
            agg, fixed_load = None, np.zeros(P.n_cap)
        res.pricing_s += time.perf_counter() - t_p
        t_m = time.perf_counter()
        lp, maps = _master(P, amb_idx, cap_rhs=C - fixed_load, level=False, agg=agg,
                           cols=None if cols is None else cols[amb_idx])
        out = _highs_solve(lp, deadline)
        res.master_s += time.perf_counter() - t_m
        if out.status in ("infeasible", "infeasible_or_unbounded") and cols is not None \
                and not np.array_equal(cols[amb_idx], P.U[amb_idx]):
            cols[amb_idx] = P.U[amb_idx]  # the master jobs' chosen variables cannot meet their floors: all of them
            res.history.append({"round": rnd, "master_jobs": int(amb_idx.size), "infeasible_master": True})
            continue
        if out.status in ("infeasible", "infeasible_or_unbounded") and fj.size:
            amb[:] = True  # the fixed vertices do not fit: solve the plain LP
            cols = None
            res.history.append({"round": rnd, "master_jobs": int(amb_idx.size), "infeasible_master": True})
            continue
        if not out.success:
            res.status = out.status
            res.message = f"master LP {rnd} ended {out.status!r} ({out.message})"
            return res
        Xa, lam_master, za, ya, u = _read_master(P, lp, out, maps)
        # in-out stabilization: while far from optimal, price at a point between the best
        # prices so far (lowest bound) and the master's, which damps the master's swings
        coarse_phase = rnd <= opts.floor_coarse_rounds and lam_best is not None
        lam = 0.5 * (lam_best + lam_master) if coarse_phase and best_gap > opts.coarse_gap else lam_master
        t_p = time.perf_counter()
        if V is None:
            ent = []
        elif agg is not None:
            uu = np.where(uj >= 0, u[np.maximum(uj, 0)], 0.0)
            ss = np.where(sj >= 0, u[np.maximum(sj, 0)], 0.0)
            ent = V.entries(uu, ss)
        else:
            ent = V.entries()
        # the fixed jobs' allocation stays sparse (entries) until the certificate holds
        lower = float((c[amb_idx] * Xa).sum()) + sum(float(c[fj, k] @ a) for k, a in ent) + P.offset
        full, upper, viol = _floor_pricing(P, lam, fj, ent, C_fin, opts)
        gap = (upper - lower) / max(abs(lower), 1e-300)
        if viol.size == 0 and gap > opts.gap_tol and lam is not lam_master:
            # no violators at the stabilized prices proves nothing about the master's jobs:
            # price at the master's own prices before concluding
            lam = lam_master
            full, upper, viol = _floor_pricing(P, lam, fj, ent, C_fin, opts)
            gap = (upper - lower) / max(abs(lower), 1e-300)
        priced = (lam, full)
        new_cols = _floor_new_columns(P, amb_idx, cols, lam_master, ya, za)
        res.pricing_s += time.perf_counter() - t_p
        res.history.append({"round": rnd, "master_jobs": int(amb_idx.size), "groups": agg.size if agg else 0,
                            "master_vars": lp.n_vars, "objective": lower, "upper": upper, "gap": gap,
                            "violators": int(viol.size), "new_columns": int(new_cols.sum())})
        log.debug("structured floor round %d: %d master jobs, %d group columns, %d vars, obj=%.12g, gap %.2e, "
                  "%d violators, %d new columns", rnd, amb_idx.size, agg.size if agg else 0, lp.n_vars, lower, gap,
                  viol.size, int(new_cols.sum()))
        if new_cols.any():
            cols[amb_idx] |= new_cols
        if upper < best_upper:
            best_upper, lam_best = upper, lam.copy()
        best_gap = min(best_gap, gap)
        if viol.size and gap > opts.coarse_gap and rnd <= opts.floor_coarse_rounds and fj.size:
            continue  # prices still far off: regroup with the new prices first
        if (viol.size == 0 and not new_cols.any()) or gap <= opts.gap_tol:
            y = np.zeros(n)
            z = np.zeros(n)
            y[fj], z[fj] = full.y[fj], full.z[fj]
            y[amb_idx], z[amb_idx] = ya, za
            X = np.zeros((n, m))
            X[amb_idx] = Xa
            for k, a in ent:
                X[fj, k] += a
            res.X, res.lam, res.y, res.z = X, lam, y, z
            res.lower, res.upper = lower, max(upper, lower)
            res.objective = lower
            res.rounds, res.n_master_jobs = rnd, int(amb_idx.size)
            res.master_rows = amb_idx
            if gap <= max(opts.gap_tol, 1e-7):
                res.status, res.message = "optimal", f"certified gap {max(gap, 0.0):.1e} after {rnd} master LP(s)"
            else:
                res.status = "numerical_error"
                res.message = f"no violators but certified gap {gap:.1e} after {rnd} master LP(s)"
            log.debug("structured floor done in %.3fs: %s", time.perf_counter() - t_start, res.message)
            return res
        amb[viol] = True
        if cols is not None and viol.size:
            cols[viol] = _floor_candidates(P, viol, full.take(viol))
    res.status, res.message = "iteration_limit", f"no certificate after {opts.max_rounds} master LPs"
    return res


def _floor_candidates(P: SeparableProblem, rows: np.ndarray, ch: FloorChoice) -> np.ndarray:
    """Variables a job brings into a floor master: the types of its best and runner-up
    vertices at the current prices and its type with the largest floor coefficient (so
    that its floor row stays satisfiable); others join when their reduced cost turns
    positive (:func:`_floor_new_columns`)."""
    n_r, m = rows.shape[0], P.m
    out = np.zeros((n_r, m), dtype=bool)
    r = np.arange(n_r)
    for kind, k, l in ((ch.kind, ch.k, ch.l), (ch.kind2, ch.k2, ch.l2)):
        one = kind >= SINGLE
        out[r[one], k[one]] = True
        two = kind == PAIR
        out[r[two], l[two]] = True
    U = P.U[rows]
    out[r, np.argmax(np.where(U, P.A[rows], -np.inf), axis=1)] = True
    return out & U


def _floor_new_columns(P: SeparableProblem, amb_idx: np.ndarray, cols: np.ndarray | None, lam: np.ndarray,
                       y: np.ndarray, z: np.ndarray) -> np.ndarray:
    r"""Master jobs' variables missing from the master whose reduced cost at the master's
    duals is positive: :math:`c_{jk} - \text{price}_{jk} + y_j A_{jk} - z_j > 0`."""
    if cols is None or not amb_idx.size:
        return np.zeros((amb_idx.size, P.m), dtype=bool)
    price = P.price(lam, amb_idx)
    Aa, ca, Ua = P.A[amb_idx], P.c[amb_idx], P.U[amb_idx]
    rc = ca - price + y[:, None] * Aa - z[:, None]
    scale = np.abs(ca) + price + y[:, None] * Aa + z[:, None]
    return Ua & ~cols[amb_idx] & (rc > 1e-9 * scale + 1e-300)


def _floor_pricing(P: SeparableProblem, lam: np.ndarray, fj: np.ndarray, ent: list, C_fin: np.ndarray,
                   opts: StructuredOptions):
    """Closed-form pricing of every job at ``lam``: (choices, Lagrangian upper bound, violators).

    Violators are fixed jobs (rows ``fj``, allocated the (type, amount) entries ``ent``)
    whose best vertex at ``lam`` beats their current one by more than a relative 1e-9.
    Prices are computed chunk by chunk, never as one (n, m) array.
    """
    A, c = P.A, P.c
    full = floor_best(A, P.U, lambda sl: P.price(lam, sl), c, P.floors)
    upper = float(lam @ C_fin + full.value.sum()) + P.offset
    cur = np.zeros(fj.size)
    size = np.zeros(fj.size)
    for k, a in ent:
        p, ck = P.price_at(fj, k, lam), c[fj, k]
        cur += (ck - p) * a
        size += (np.abs(ck) + p) * a
    scale_f = size + np.abs(full.value[fj])
    excess = (full.value[fj] - cur) / (scale_f + 1e-300)
    return full, upper, _most_violated(fj, excess, 1e-9, opts, P.n)


def _tight_prices(P: SeparableProblem, lam1: np.ndarray) -> np.ndarray:
    """Level prices scaled far above the objective (floors at a level optimum cost that much)."""
    ratio = np.where(P.U & (P.W > 0), np.abs(P.c) / np.maximum(P.W, 1e-300), 0.0)
    return 1e6 * max(float(ratio.max()), 1e-300) / float(lam1.max()) * lam1


def _floor_warm_start(P: SeparableProblem, opts: StructuredOptions, deadline, depth):
    """First prices (and master jobs) for a floor problem, or "infeasible", or None.

    With floors, the level problem "how far can every floor be scaled" (coefficients
    :math:`A_{jk}/f_j`) is solved first. When its optimum is at most :data:`TIGHT_LEVEL`
    the floors sit at a level optimum (a second stage): prices proportional to that
    problem's (scaled far above the objective) price the floors, and its master jobs start
    in the master. Otherwise prices come from the same floor problem on a random sample
    with proportionally scaled capacities and floors scaled to the sample's own level.
    """
    n = P.n
    if opts.init in ("ipx", "pdlp"):
        lam, _ = _whole_lp_prices(P, opts, deadline, {}, level=False)
        return None if lam is None else (lam, None)
    pos = P.floors > 0
    w = P.warm
    if (w is not None and pos.all() and np.ptp(P.floors) == 0 and w["level"] > 0
            and P.floors[0] >= w["level"] * (1.0 - 1e-6) and np.any(w["lam"] > 0)):
        # a second stage at the level the warm start found: its prices price the floors
        return _tight_prices(P, w["lam"]), w["master_rows"]
    tau = np.inf
    if pos.any():
        lvl = _subproblem(P, np.arange(n), 1.0, level_from_floors=True)
        r = _solve_level(lvl, opts, deadline, depth + 1)
        if r.status != "optimal":
            return None
        if r.upper < 1.0 - 1e-9:
            return "infeasible"
        tau = r.t
        if tau <= TIGHT_LEVEL and np.any(r.lam > 0):
            return _tight_prices(P, r.lam), r.master_rows
        # tight only through some job's own time row (capacity has no price), or loose:
        # the floors leave room, so a sample prices the capacity
    rows, scale = _sample(P, opts)
    floors = None
    if pos.any():
        lvl_s = _subproblem(P, rows, scale, level_from_floors=True)
        rs = _solve_level(lvl_s, opts, deadline, depth + 1)
        if rs.status != "optimal":
            return None
        beta = min(1.0, rs.t / tau) * (1.0 - 1e-9)
        floors = np.where(pos[rows], P.floors[rows] * beta, P.floors[rows])
    sub = _subproblem(P, rows, scale, floors=floors)
    r = _solve_floor(sub, opts, deadline, depth + 1)
    if r.status != "optimal":
        return None
    return r.lam, None
