r"""The restricted master LP shared by both modes of the structured solver.

A master holds the *master jobs* with their own variables, the fixed jobs' aggregated
group columns (:class:`Aggregate`) and the coupling rows; :func:`build_master` assembles it
in bulk, :func:`solve_master` solves it with HiGHS (primal simplex below 20,000 variables,
IPX with crossover above, the other on a failure) and :func:`read_master` reads back the
allocation and the prices. Also here: the random sample with proportionally scaled
capacities that gives both modes their first prices (:func:`sample_rows`,
:func:`subproblem`), the price-ratio bins used to group fixed jobs, and prices from the
whole program by an interior-point or PDLP solve (:func:`whole_lp_prices`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..program import LinearProgram
from .options import StructuredOptions
from .problem import SeparableProblem

__all__ = ['Aggregate', 'build_master', 'compact', 'most_violated', 'n_bins', 'ratio_bin', 'read_master', 'sample_rows', 'solve_master', 'subproblem', 'whole_lp_prices']

log = logging.getLogger(__name__)


def solve_master(lp: LinearProgram, deadline: float | None, start: tuple[np.ndarray, np.ndarray] | None = None,
                 keep_basis: bool = False):
    """Solve a master LP with HiGHS: simplex when small, IPX with crossover when large; when
    HiGHS fails (model status "Unknown" or "Not Set"), the other algorithm once. With a
    ``start`` basis ((column, row) statuses, :mod:`.basis`) the simplex method starts from
    it first (:data:`WARM_SIMPLEX`). ``keep_basis``: an optimal run's basis comes back in
    ``info["basis"]``. Returns a :class:`~hetsched.solvers.base.SolverOutput`; a double
    failure is status "numerical_error" (the backend then hands the program to a general
    solver)."""
    from ...errors import SolverError
    from ..base import SolverOutput
    from ..highs import HighsBackend

    # primal simplex: on 36 masters from max-min, makespan and max-sum (1e5-3e5 jobs) it took
    # 3.4 s in all against 7.4 s for dual simplex and 6.6 s for IPX (docs/scaling.md)
    primal, ipx = {"solver": "simplex", "simplex_strategy": 4}, {"solver": "ipm", "run_crossover": "on"}
    tries = [(primal, None), (ipx, None)] if lp.n_vars < 20_000 else [(ipx, None), (primal, None)]
    if start is not None:
        tries.insert(0, (WARM_SIMPLEX, start))
    errors = []
    for opts, basis in tries:
        remaining = None if deadline is None else max(1e-3, deadline - time.perf_counter())
        try:
            return HighsBackend(start=basis, keep_basis=keep_basis).solve(lp, time_limit=remaining, options=opts)
        except SolverError as exc:
            log.info("structured: HiGHS %s failed on a master LP (%s)", opts["solver"], exc)
            errors.append(f"{opts['solver']}: {exc}")
    return SolverOutput(status="numerical_error", x=np.full(lp.n_vars, np.nan), objective=float("nan"),
                        has_solution=False, native_status="failed", message="; ".join(errors), solve_s=0.0,
                        backend="highs")


#: HiGHS options of a master started from the last round's basis.
WARM_SIMPLEX = {"solver": "simplex", "simplex_strategy": 1}


@dataclass
class Aggregate:
    """Aggregated columns of the master (fixed jobs, by group).

    Column g moves its jobs from option 0 to option 1 by ``u_g``; its capacity
    coefficients are ``cap`` (m, G), objective ``obj`` (G,), bounds ``[0, ub]``; in level
    mode ``ub`` is t itself (a row ``u_g - t <= 0``), in floor mode 1.
    """

    cap: np.ndarray
    obj: np.ndarray
    link: np.ndarray | None = None  # (L, 2) pairs of columns with u_a + u_b <= 1 (floor mode)
    keys: np.ndarray | None = None  # (G,) a column's identity across rounds (floor mode, :mod:`.basis`)

    @property
    def size(self) -> int:
        return int(self.obj.shape[0])


def build_master(P: SeparableProblem, amb: np.ndarray, *, cap_rhs: np.ndarray, level: bool,
            t_cap: np.ndarray | None = None, t_bounds: tuple[float, float] = (0.0, np.inf),
            agg: Aggregate | None = None, cols: np.ndarray | None = None, obj_scale: float = 1.0):
    """Build the restricted master over ambiguous jobs ``amb`` (indices).

    ``cols`` (len(amb), m) selects the variables of those jobs (default: all usable).
    The objective is multiplied by ``obj_scale`` (level mode: the number of jobs, so that
    duals are of order one rather than 1/n, far above the solver's absolute tolerances);
    :func:`read_master` divides the duals back.

    Columns: [t (level mode)] [aggregated group columns] [X of ambiguous jobs].
    ``cap_rhs`` and ``t_cap`` (t's coefficient: the fixed jobs' load per unit of level)
    have one entry per coupling row (:attr:`SeparableProblem.n_cap`); ``agg.cap`` one row
    per coupling row. Returns the LP and the index maps needed to read it back.
    """
    lay = _layout(P, amb, cols, level, agg)
    c, col_lb, col_ub = _master_columns(P, amb, lay, level, agg, t_bounds, obj_scale)
    ent = _Entries()
    cap_types = _coupling_rows(P, amb, lay, ent, cap_rhs, level, t_cap, agg)
    n_cap = cap_types.size
    t_row0 = _group_rows(lay, ent, n_cap, level, agg)
    base = _time_rows(lay, ent, t_row0)
    lv_pos, nl = _level_rows(P, amb, lay, ent, base, level)
    lp = _assemble(P, lay, ent, base + nl, c, col_lb, col_ub)
    return lp, {'cap_types': cap_types, 'n_cap': n_cap, 'n_a': lay.n_a, 'lv_pos': lv_pos, 'base': base,
                't_row0': t_row0, 'g0': lay.g0, 'G': lay.G, 'obj_scale': obj_scale}


@dataclass
class _Layout:
    """Column layout of a master: [t (level mode)] [``G`` group columns] [``nx`` job variables].

    Job variable ``i`` (column ``xs + i``) is ambiguous job ``ja[i]`` (a position in ``amb``)
    on GPU type ``ka[i]``.
    """

    ja: np.ndarray
    ka: np.ndarray
    n_a: int
    g0: int  # first group column: 1 in level mode (t is column 0), else 0
    G: int
    xs: int  # first job variable: g0 + G
    nx: int
    nv: int  # all columns: xs + nx


def _layout(P: SeparableProblem, amb: np.ndarray, cols: np.ndarray | None, level: bool,
            agg: Aggregate | None) -> _Layout:
    """The master's columns: the job variables ``cols`` selects (default: ``P.U[amb]``, every
    usable pair) after t (level mode) and the ``agg`` group columns."""
    Ua = P.U[amb] if cols is None else cols
    ja, ka = np.nonzero(Ua)
    nx = ja.size
    g0 = 1 if level else 0
    G = agg.size if agg is not None else 0
    xs = g0 + G
    return _Layout(ja=ja, ka=ka, n_a=amb.size, g0=g0, G=G, xs=xs, nx=nx, nv=xs + nx)


@dataclass
class _Entries:
    """The master's constraint matrix as (row, column, value) blocks and its row bounds,
    appended phase by phase in row order."""

    rows: list = field(default_factory=list)
    cols: list = field(default_factory=list)
    vals: list = field(default_factory=list)
    rlb: list = field(default_factory=list)
    rub: list = field(default_factory=list)

    def add(self, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray) -> None:
        """Append one block of matrix entries."""
        self.rows.append(rows)
        self.cols.append(cols)
        self.vals.append(vals)

    def bound(self, lb: np.ndarray, ub: np.ndarray) -> None:
        """Append the bounds of the next rows."""
        self.rlb.append(lb)
        self.rub.append(ub)


def _master_columns(P: SeparableProblem, amb: np.ndarray, lay: _Layout, level: bool, agg: Aggregate | None,
                    t_bounds: tuple[float, float], obj_scale: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Objective and column bounds (c, col_lb, col_ub): t's (level mode, cost ``obj_scale``),
    the group columns' (``agg.obj``, up to inf in level mode, 1 in floor mode) and the job
    variables' (``P.c`` in floor mode, 0 in level mode; ``[0, inf)``)."""
    g0, xs, nv = lay.g0, lay.xs, lay.nv
    c = np.zeros(nv)
    col_lb = np.zeros(nv)
    col_ub = np.full(nv, np.inf)
    if level:
        c[0] = obj_scale
        col_lb[0], col_ub[0] = t_bounds
    if lay.G:
        c[g0:xs] = agg.obj
        col_ub[g0:xs] = np.inf if level else 1.0
    if not level:
        c[xs:] = P.c[amb[lay.ja], lay.ka]
    return c, col_lb, col_ub


def _coupling_rows(P: SeparableProblem, amb: np.ndarray, lay: _Layout, ent: _Entries, cap_rhs: np.ndarray,
                   level: bool, t_cap: np.ndarray | None, agg: Aggregate | None) -> np.ndarray:
    """Rows 0..n_cap-1 into ``ent``: the coupling rows with a finite ``cap_rhs`` (GPU types,
    then host resources) over the job variables, t (``t_cap``, level mode) and the group
    columns (``agg.cap``), each ``<= cap_rhs``. Returns those rows' indices (``cap_types``)."""
    m, ja, ka, xs = P.m, lay.ja, lay.ka, lay.xs
    cap_types = np.flatnonzero(np.isfinite(cap_rhs))  # coupling rows with a finite right-hand side
    cap_pos = np.full(cap_rhs.shape[0], -1, dtype=np.int64)
    cap_pos[cap_types] = np.arange(cap_types.size)
    wv = P.W[amb[ja], ka]
    keep = (cap_pos[ka] >= 0) & (wv != 0)
    ent.add(cap_pos[ka][keep], xs + np.flatnonzero(keep), wv[keep])
    for e in range(P.n_extra):  # extra coupling rows (host resources) over their type's variables
        if cap_pos[m + e] < 0:
            continue
        on = np.flatnonzero(ka == P.kx[e])
        we = P.Wx[amb[ja[on]], e]
        nz = we != 0
        ent.add(np.full(int(nz.sum()), cap_pos[m + e]), xs + on[nz], we[nz])
    if level and t_cap is not None:
        gk = cap_types[t_cap[cap_types] != 0]
        ent.add(cap_pos[gk], np.zeros(gk.size, dtype=np.int64), t_cap[gk])
    if lay.G:
        kk, gg = np.nonzero(agg.cap[cap_types])
        ent.add(kk, lay.g0 + gg, agg.cap[cap_types][kk, gg])
    ent.bound(np.full(cap_types.size, -np.inf), cap_rhs[cap_types])
    return cap_types


def _group_rows(lay: _Layout, ent: _Entries, r0: int, level: bool, agg: Aggregate | None) -> int:
    """Rows from ``r0`` into ``ent`` on the group columns: ``u_g - t <= 0`` per group (level
    mode) or ``u_a + u_b <= 1`` per linked pair ``agg.link`` (floor mode). Returns the next row."""
    g0, G = lay.g0, lay.G
    if level and G:  # u_g - t <= 0
        ent.add(r0 + np.arange(G), g0 + np.arange(G), np.ones(G))
        ent.add(r0 + np.arange(G), np.zeros(G, dtype=np.int64), -np.ones(G))
        ent.bound(np.full(G, -np.inf), np.zeros(G))
        r0 += G
    if not level and G and agg.link is not None and agg.link.size:  # u_a + u_b <= 1
        nL = agg.link.shape[0]
        ent.add(r0 + np.repeat(np.arange(nL), 2), g0 + agg.link.reshape(-1), np.ones(2 * nL))
        ent.bound(np.full(nL, -np.inf), np.ones(nL))
        r0 += nL
    return r0


def _time_rows(lay: _Layout, ent: _Entries, r0: int) -> int:
    """Rows ``r0 .. r0+n_a-1`` into ``ent``: each ambiguous job's time, the sum of its
    variables, at most 1. Returns the next row."""
    nx, n_a = lay.nx, lay.n_a
    ent.add(r0 + lay.ja, lay.xs + np.arange(nx), np.ones(nx))
    ent.bound(np.full(n_a, -np.inf), np.ones(n_a))
    return r0 + n_a


def _level_rows(P: SeparableProblem, amb: np.ndarray, lay: _Layout, ent: _Entries, base: int,
                level: bool) -> tuple[np.ndarray, int]:
    """Rows from ``base`` into ``ent``, one per ambiguous job with a level (level mode:
    ``sum_k A x - t >= 0``) or a finite floor (floor mode: ``sum_k A x >= floor``).
    Returns ``lv_pos`` (each job's row after ``base``, -1 for none) and the number of rows."""
    ja, ka, xs, n_a = lay.ja, lay.ka, lay.xs, lay.n_a
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
    ent.add(base + lv_pos[ja][sel], xs + np.flatnonzero(sel), av[sel])
    if level:
        ent.add(base + np.arange(nl), np.zeros(nl, dtype=np.int64), -np.ones(nl))
    ent.bound(rhs, np.full(nl, np.inf))
    return lv_pos, nl


def _assemble(P: SeparableProblem, lay: _Layout, ent: _Entries, n_rows: int, c: np.ndarray, col_lb: np.ndarray,
              col_ub: np.ndarray) -> LinearProgram:
    """The master LP (maximised) from the columns, the ``n_rows`` rows in ``ent`` and the map
    (job position in ``amb``, type) -> job variable."""
    Amat = sp.csr_array((np.concatenate(ent.vals), (np.concatenate(ent.rows), np.concatenate(ent.cols))),
                        shape=(n_rows, lay.nv))
    x_index = np.full((lay.n_a, P.m), -1, dtype=np.int64)
    x_index[lay.ja, lay.ka] = lay.xs + np.arange(lay.nx)
    return LinearProgram(c=c, A=Amat, row_lb=np.concatenate(ent.rlb), row_ub=np.concatenate(ent.rub), col_lb=col_lb,
                         col_ub=col_ub, x_index=x_index, sense="max", name="structured-master")


def read_master(P, lp, out, maps):
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


def most_violated(rows: np.ndarray, excess: np.ndarray, tol: float, opts: StructuredOptions, n: int) -> np.ndarray:
    """Rows whose (relative) violation exceeds ``tol``; at most ``max(max_add, n/50)`` of the
    largest, so that a master built from poor prices does not swallow the whole problem."""
    hit = np.flatnonzero(excess > tol)
    cap = max(opts.max_add, n // 50)
    if hit.size > cap:
        hit = hit[np.argpartition(-excess[hit], cap - 1)[:cap]]
    return rows[np.sort(hit)]


def subproblem(P: SeparableProblem, rows: np.ndarray, scale: float, floors: np.ndarray | None = None,
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


def sample_rows(P: SeparableProblem, opts: StructuredOptions) -> tuple[np.ndarray, float]:
    """Random rows (seeded) and the capacity scale that keeps the sample as contended."""
    n = P.n
    n_s = max(opts.base_size // 2, n // opts.sample_factor)
    rng = np.random.default_rng([opts.seed, n, P.m])
    rows = np.sort(rng.choice(n, size=n_s, replace=False))
    weight = P.W.max(axis=1)
    total = float(weight.sum())
    scale = float(weight[rows].sum()) / total if total > 0 else n_s / n
    return rows, scale


def n_bins(opts: StructuredOptions) -> int:
    fine = int(np.ceil(np.log(opts.group_ratio) / np.log1p(opts.bin_width)))
    return fine + COARSE_BINS + 1


#: Coarse bins (10 % wide) above ``group_ratio``; ratios beyond share the last bin.
COARSE_BINS = 48


def ratio_bin(rho: np.ndarray, opts: StructuredOptions) -> np.ndarray:
    """Bin of a price ratio >= 1: fine (``bin_width``) up to ``group_ratio``, then 10 %."""
    fine = int(np.ceil(np.log(opts.group_ratio) / np.log1p(opts.bin_width)))
    lr = np.log(np.maximum(rho, 1.0))
    b = np.floor(lr / np.log1p(opts.bin_width))
    coarse = fine + np.minimum(np.floor((lr - np.log(opts.group_ratio)) / np.log(1.1)), COARSE_BINS)
    return np.where(rho < opts.group_ratio, b, coarse).astype(np.int64)


def compact(key: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Relabel integer keys in [0, size) to 0..G-1 (O(n), no sort); returns (labels, keys)."""
    present = np.bincount(key, minlength=size) > 0
    remap = np.cumsum(present) - 1
    return remap[key], np.flatnonzero(present)


def whole_lp_prices(P, opts, deadline, info, *, level: bool):
    """Prices from HiGHS IPX without crossover, or PDLP, on the whole program."""
    from ..highs import HighsBackend

    n = P.n
    rows = np.flatnonzero(P.has_level) if level else np.arange(n)
    lp, maps = build_master(P, rows, cap_rhs=P.C_all, level=level, t_cap=np.zeros(P.n_cap) if level else None,
                       t_bounds=P.t_bounds, obj_scale=float(max(1, rows.size)) if level else 1.0)
    options = ({"solver": "ipm", "run_crossover": "off"} if opts.init == "ipx"
               else {"solver": "pdlp", "pdlp_optimality_tolerance": 1e-7})
    remaining = None if deadline is None else max(1e-3, deadline - time.perf_counter())
    t0 = time.perf_counter()
    out = HighsBackend().solve(lp, time_limit=remaining, options=options)
    info.update(whole_lp_s=time.perf_counter() - t0, whole_lp_status=out.status)
    if out.row_dual is None:
        return None, np.nan
    _, lam, _, _, _ = read_master(P, lp, out, maps)
    t = float(out.x[0]) if level else np.nan
    info["whole_lp_level"] = t
    return lam, t
