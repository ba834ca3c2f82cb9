r"""Level mode of the structured solver: maximize the level t (stage 1 of a level LP).

Given capacity prices, job j's price of a unit of level on type k is
:math:`q_{jk} = \text{price}_{jk} / A_{jk}`; a fixed job sits on its cheapest type. Each
round (:func:`solve_level`):

1. **group** the fixed jobs by (cheapest type, runner-up, price-ratio bin) into one column
   each that moves them to the runner-up (:func:`_level_groups`), and load t's column with
   every fixed job's load per unit of level (:func:`_level_fixed`);
2. **solve** the master (:mod:`.master`) and read the level t and new prices;
3. **price** every job in closed form (:func:`_level_pricing`), bound t from above by weak
   duality (:func:`_level_upper`), and collect violators (fixed jobs whose type is no longer
   cheapest, or whose type cannot carry them to t; :func:`_level_violators`) and master-job
   columns with a positive reduced cost (:func:`_master_reduced_costs`);
4. **stop** when there are none (certified gap, :func:`_level_finish`), else move them into
   the master (:func:`_level_next`).

First prices: the same solver on a random sample (:func:`_level_warm_start`), or the
alternatives of :class:`~.options.StructuredOptions` ``init``; they classify the jobs into
master jobs and fixed ones (:func:`_level_start`). Before any of it, a level bounded by
one job's own time row is certified without an LP when an assignment reaching it fits
(:func:`_row_bound`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np

from .master import (Aggregate, compact, most_violated, n_bins, ratio_bin, read_master, sample_rows, subproblem,
                     whole_lp_prices)
from .options import StructuredOptions, StructuredResult
from .problem import SeparableProblem
from .rounds import (certify, iteration_limit, master_failed, out_of_time, record_round, solve_round_master,
                     store_solution)

__all__ = ['solve_level']

log = logging.getLogger(__name__)

#: Debug line of a round (:func:`.rounds.record_round`).
_ROUND_LOG = ("structured level round %d: %d master jobs, %d groups, %d vars, t=%.12g, gap %.2e, "
              "%d violators, %d new columns")


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
    B = n_bins(opts)
    key = (k1[grp] * m + k2[grp]) * B + ratio_bin(rho[grp], opts)
    inv, uniq = compact(key, m * m * B)
    gid[grp] = inv
    G = uniq.size
    rows = fj[grp]
    cap = P.loads(rows, k2[grp], 1.0 / a2[grp], inv, G) - P.loads(rows, k1[grp], 1.0 / a1[grp], inv, G)
    return gid, Aggregate(cap=cap, obj=np.zeros(G))


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



@dataclass
class _LevelState:
    """What the level rounds carry from one round to the next.

    ``amb``: the master jobs (bool, n); ``cols``: their variables in the master (bool,
    (n, m)); ``cls``: every job's cheapest two types and prices (:func:`_top2_min`) at the
    classification prices, None before any prices; ``t_ref``: the level a fixed job must
    reach on its runner-up type to join a group. The rest is fixed for the solve: the
    pricing ``costs``, the coupling rows' right-hand sides ``C`` (``C_fin``: 0 for
    ``inf``) and the master's objective scale.
    """

    amb: np.ndarray
    cols: np.ndarray
    cls: tuple | None
    t_ref: float
    costs: _Costs
    C: np.ndarray
    C_fin: np.ndarray
    obj_scale: float


@dataclass
class _LevelFixed:
    """The fixed jobs ``fj`` of a round: cheapest type ``k1`` and runner-up ``k2`` with their
    coefficients ``a1`` / ``a2``, group ``gid`` (-1: none) and the groups' columns ``agg``,
    the level each can reach ``lim``, their load per unit of level ``L`` (n_cap,) and the
    bound on t they allow ``t_fix_ub``."""

    fj: np.ndarray
    k1: np.ndarray
    k2: np.ndarray
    a1: np.ndarray
    a2: np.ndarray
    gid: np.ndarray
    agg: Aggregate | None
    lim: np.ndarray
    L: np.ndarray
    t_fix_ub: float


@dataclass
class _LevelPriced:
    """Closed-form pricing of a round at the master's prices ``lam``: the fixed jobs' moves
    ``ug`` and whether they sit on ``k1`` (``on1``) / ``k2`` (``on2``), the prices of a unit of
    level ``q`` (n, m) and their cheapest two types ``new_cls``, the duals ``y`` / ``z``, the
    weak-duality bound ``upper``, the violators ``viol`` and the master jobs' new columns
    ``new_cols`` (rows ``col_jobs``)."""

    lam: np.ndarray
    ug: np.ndarray
    on1: np.ndarray
    on2: np.ndarray
    q: np.ndarray
    new_cls: tuple
    y: np.ndarray
    z: np.ndarray
    upper: float
    viol: np.ndarray
    new_cols: np.ndarray
    col_jobs: np.ndarray


def solve_level(P: SeparableProblem, opts: StructuredOptions, deadline: float | None, depth: int = 0) -> StructuredResult:
    """Maximize the level t of ``P`` (level mode), certified by weak duality.

    Phases (module docstring): first prices (given in ``P.warm``, or
    :func:`_level_warm_start`) classify the jobs into master jobs (near a tie, or unable to
    reach the estimated level on their cheapest type) and fixed ones; then rounds of group
    -> solve -> price -> stop or move violators in. ``depth`` counts the recursion of the
    sampled warm start. Returns status "optimal" with X, t, the prices and the level duals,
    or "time_limit" / "iteration_limit" / the master's failure status.
    """
    t_start = time.perf_counter()
    res = StructuredResult(status="unknown", message="")
    if P.n > opts.base_size and opts.init != "none" and _row_bound(P, res):
        return certify(res, 0.0, 0, opts, log, "level", t_start)
    S = _level_start(P, opts, deadline, depth, res)
    t_lb, t_ub = P.t_bounds
    for rnd in range(1, opts.max_rounds + 1):
        if out_of_time(res, deadline, rnd):
            return res
        amb_idx = np.flatnonzero(S.amb)
        fj = np.flatnonzero(P.has_level & ~S.amb)
        t_p = time.perf_counter()  # 1. group the fixed jobs
        F = _level_fixed(P, S, fj, opts)
        res.pricing_s += time.perf_counter() - t_p
        # 2. solve the master
        lp, maps, out = solve_round_master(P, amb_idx, res, deadline, cap_rhs=S.C, level=True, t_cap=F.L,
                                           t_bounds=(t_lb, min(t_ub, F.t_fix_ub)), agg=F.agg,
                                           cols=S.cols[amb_idx], obj_scale=S.obj_scale)
        if master_failed(res, out, rnd):
            return res
        t = float(out.x[0])
        Xa, lam, za, ya, u = read_master(P, lp, out, maps)
        t_p = time.perf_counter()  # 3. price every job
        R = _level_pricing(P, S, F, amb_idx, t, lam, ya, za, u, opts)
        res.pricing_s += time.perf_counter() - t_p
        gap = (R.upper - t) / max(abs(t), 1e-300)
        record_round(res, log, _ROUND_LOG, rnd, amb_idx, F.agg, lp.n_vars, ("t", t), R.upper, gap, R.viol,
                     R.new_cols)
        if R.viol.size == 0 and R.col_jobs.size == 0:  # 4. stop, or move violators in
            return _level_finish(res, P, F, R, amb_idx, Xa, t, gap, rnd, opts, t_start)
        _level_next(P, S, F, R, amb_idx, gap, rnd, opts)
    return iteration_limit(res, opts)


#: :func:`_fitting_assignment`: most price updates looking for an assignment that fits, and
#: most updates in a row that do not cut the best total overload by 1 %.
_ROW_FIT_STEPS, _ROW_FIT_STALL = 200, 60


def _row_bound(P: SeparableProblem, res: StructuredResult) -> bool:
    r"""Certify the level bounded by one job's own time row, when it is (no LP at all).

    Every job with a level row reaches at most :math:`\max_k A_{jk}` (all its time on its
    best type), so :math:`t^\star \le t_r = \min_j \max_k A_{jk}`, a bound weak duality
    certifies with :math:`\lambda = 0` and :math:`y = e_{j^\star}` (the job attaining the
    minimum), :math:`z_{j^\star} = t_r`. When prices can be found at which every job's
    cheapest single type carrying it to :math:`t_r` (time :math:`t_r / A_{jk} \le 1`, price
    :math:`\text{price}_{jk} t_r / A_{jk}`) fits the capacities (:func:`_fitting_assignment`,
    after a necessary aggregate check), that
    assignment attains :math:`t_r`: ``res`` then holds it, certified with gap 0, and True
    is returned. This is min makespan's stage 1 (the job with the slowest best rate sets the
    makespan whenever the cluster has room for every other job to finish by then), where a
    sampled warm start spent seconds on the sample's capacity-bound level.
    """
    lv = np.flatnonzero(P.has_level)
    t_lb, t_ub = P.t_bounds
    if not lv.size:
        return False
    every = lv.size == P.n  # no copies of (n, m) arrays for the common case
    A = np.where(P.U, P.A, 0.0) if every else np.where(P.U[lv], P.A[lv], 0.0)
    best = A.max(axis=1)
    j_star = int(np.argmin(best))
    t_r = float(best[j_star])
    if not (t_r > 0 and t_lb <= t_r <= t_ub):
        return False
    C = P.C_all
    room = np.where(np.isfinite(C), C, np.inf) * (1.0 - 1e-9)
    if np.all(np.isfinite(P.C)):
        # necessary: each job loads the GPU capacity rows by at least t_r times its least
        # load per unit of level (a max-min level, far below t_r, stops here after O(n m)
        # work). Extra coupling rows (CPU, memory) only restrict further, so the GPU rows'
        # sum decides alone; with them, the check was skipped before and the price search
        # below ran to its stall (cpu_rows_1e5: 1.6 of 4.7 s)
        W = P.W if every else P.W[lv]
        least = np.where(A > 0, W, np.inf).min(axis=1) / best
        if t_r * float(least.sum()) > float(room[: P.m].sum()):
            return False
    with np.errstate(divide="ignore"):
        need = np.where(A >= t_r, t_r / np.where(A > 0, A, 1.0), np.inf)
    del A  # (n, m): free before the price updates
    k = _fitting_assignment(P, lv, need, room)
    if k is None:
        return False
    r = np.arange(lv.size)
    X = np.zeros((P.n, P.m))
    X[lv, k] = need[r, k]
    res.X, res.t, res.lam = X, t_r, np.zeros(P.n_cap)
    res.y, res.z = np.zeros(P.n), np.zeros(P.n)
    res.y[lv[j_star]], res.z[lv[j_star]] = 1.0, t_r
    res.objective = P.gamma * t_r + P.offset
    res.lower = res.upper = t_r
    res.master_rows = np.zeros(0, dtype=np.int64)
    res.warm_info["init"] = "row_bound"
    log.debug("structured level: t = %.12g, bounded by job %d's own time row; certified without an LP", t_r,
              int(lv[j_star]))
    return True


def _fitting_assignment(P: SeparableProblem, lv: np.ndarray, need: np.ndarray, room: np.ndarray) -> np.ndarray | None:
    r"""Each job's type (jobs ``lv``, time ``need`` (len(lv), m), inf where unusable) at prices
    under which every job's cheapest type fits ``room``, or None.

    Prices move by :math:`\lambda_k \leftarrow \lambda_k \exp(\eta_i\,
    \mathrm{clip}(L_k / C_k - 1, -1, 1))` with steps :math:`\eta_i = 0.5 / \sqrt{1 + i/5}`
    that shrink so that whole jobs stop swinging between types; at most
    :data:`_ROW_FIT_STEPS` updates, and none after :data:`_ROW_FIT_STALL` that did not cut
    the best total overload by 1 %.
    """
    fin = np.isfinite(room)
    pos = fin & (room > 0)
    lam = np.where(pos, 1.0 / np.where(pos, room, 1.0), 0.0)
    # a row without room (a type with no GPUs) keeps a price far above the others, so a job
    # lands there only when it has no other type; before, its price 1/1e-300 set the floor
    # of every other price (1e-3 of the highest) and 0/0 made the prices NaN
    no_room = fin & ~pos
    lam[no_room] = 1e6 * (float(lam.max()) if pos.any() else 1.0)
    r = np.arange(lv.size)
    unusable = ~np.isfinite(need)
    need0 = np.where(unusable, 0.0, need)
    best, since = np.inf, 0
    for i in range(_ROW_FIT_STEPS):
        q = P.price(lam, lv if lv.size < P.n else None)
        q *= need0
        q[unusable] = np.inf
        k = np.argmin(q, axis=1)
        del q
        load = P.loads(lv, k, need[r, k])[:, 0]
        over = float(np.maximum(load - room, 0.0)[fin].sum())
        if over == 0.0:
            return k
        best, since = (over, 0) if over < 0.99 * best else (best, since + 1)
        if since >= _ROW_FIT_STALL:
            return None
        rel = np.where(pos, load / np.where(pos, room, 1.0), 1.0)
        floor = 1e-3 * float(lam[pos].max()) if pos.any() else 0.0
        step = np.maximum(lam * np.exp(0.5 / np.sqrt(1.0 + i / 5.0) * np.clip(rel - 1.0, -1.0, 1.0)), floor)
        lam = np.where(pos, step, lam)
    return None


def _level_start(P: SeparableProblem, opts: StructuredOptions, deadline: float | None, depth: int,
                 res: StructuredResult) -> _LevelState:
    """Setup: the first prices (:func:`_level_first_prices`) and, with them, the first
    master jobs and their variables (:func:`_level_classify`; without prices every job
    with a level row is a master job with all its variables). Returns the rounds' state."""
    lam, t_est, warm_rows = _level_first_prices(P, opts, deadline, depth, res)
    C = P.C_all
    costs = _Costs(P)
    cols = np.zeros((P.n, P.m), dtype=bool)
    if lam is None:
        amb = P.has_level.copy()
        cols[amb] = P.U[amb]
        cls = None
    else:
        amb, cls = _level_classify(P, opts, costs, cols, _classification_prices(lam, C), t_est, warm_rows)
    return _LevelState(amb=amb, cols=cols, cls=cls, t_ref=float(t_est) if np.isfinite(t_est) else 0.0, costs=costs,
                       C=C, C_fin=np.where(np.isfinite(C), C, 0.0), obj_scale=float(max(1, int(P.has_level.sum()))))


def _level_first_prices(P: SeparableProblem, opts: StructuredOptions, deadline: float | None, depth: int,
                        res: StructuredResult):
    """First prices: those of ``P.warm`` when given, else :func:`_level_warm_start` for a
    problem above ``base_size`` (timed into ``res.warm_s``). Returns (prices or None, level
    estimate or nan, master rows of the warm start or None)."""
    if P.warm is not None and opts.init != "none" and np.any(P.warm["lam"] > 0):
        res.warm_info["init"] = "given"
        return P.warm["lam"], np.nan, P.warm["master_rows"]
    if P.n > opts.base_size and opts.init != "none":
        t_w = time.perf_counter()
        lam, t_est = _level_warm_start(P, opts, deadline, depth, res.warm_info)
        res.warm_s = time.perf_counter() - t_w
        return lam, t_est, None
    return None, np.nan, None


def _level_classify(P: SeparableProblem, opts: StructuredOptions, costs: _Costs, cols: np.ndarray,
                    lam_cls: np.ndarray, t_est: float, warm_rows: np.ndarray | None):
    """First master jobs at the classification prices ``lam_cls``: jobs with a third type
    within ``margin`` of their cheapest, with no finite price, or unable to reach about
    ``t_est`` on their cheapest type, and the warm start's master rows. Writes their
    candidate variables into ``cols``; returns (master jobs, cheapest two types of every job)."""
    n, lv, A = P.n, P.has_level, P.A
    q_cls = costs(lam_cls)
    cls = _top2_min(q_cls)
    k1, q1 = cls[0], cls[1]
    q3 = np.partition(q_cls, 2, axis=1)[:, 2] if P.m > 2 else np.full(n, np.inf)
    with np.errstate(invalid="ignore"):
        third = (q3 <= q1 * (1.0 + opts.margin)) & (q1 > 0)
    amb = lv & (third | ~np.isfinite(q1) | (A[np.arange(n), k1] <= t_est * (1.0 + opts.margin)))
    if warm_rows is not None:
        amb[warm_rows] = lv[warm_rows]
    ai = np.flatnonzero(amb)
    cols[ai] = _candidate_columns(q_cls[ai], A[ai], P.U[ai], opts)
    return amb, cls


def _level_fixed(P: SeparableProblem, S: _LevelState, fj: np.ndarray, opts: StructuredOptions) -> _LevelFixed:
    """Group phase: the fixed jobs ``fj`` on their cheapest type by ``S.cls``, their groups
    (:func:`_level_groups`) and their load per unit of level."""
    if not fj.size:
        none_i, none_f = np.zeros(0, dtype=np.int64), np.zeros(0)
        return _LevelFixed(fj=fj, k1=none_i, k2=none_i, a1=none_f, a2=none_f, gid=none_i, agg=None, lim=none_f,
                           L=np.zeros(P.n_cap), t_fix_ub=np.inf)
    k1, q1, k2, q2 = (v[fj] for v in S.cls)
    a1, a2 = P.A[fj, k1], P.A[fj, k2]
    gid, agg = _level_groups(P, fj, k1, q1, k2, q2, a1, a2, opts, S.t_ref)
    L = P.loads(fj, k1, 1.0 / a1)[:, 0]
    lim = np.where(gid >= 0, np.minimum(a1, a2), a1)
    return _LevelFixed(fj=fj, k1=k1, k2=k2, a1=a1, a2=a2, gid=gid, agg=agg, lim=lim, L=L, t_fix_ub=float(lim.min()))


def _level_pricing(P: SeparableProblem, S: _LevelState, F: _LevelFixed, amb_idx: np.ndarray, t: float,
                   lam: np.ndarray, ya: np.ndarray, za: np.ndarray, u: np.ndarray,
                   opts: StructuredOptions) -> _LevelPriced:
    """Price phase: every job at the master's prices ``lam`` (level ``t``, master-job duals
    ``ya`` / ``za``, group moves ``u``): level duals, the weak-duality bound, violators and
    new columns. Raises ``S.t_ref`` to ``t``."""
    fj = F.fj
    ug = np.where(F.gid >= 0, u[np.maximum(F.gid, 0)], 0.0) if F.agg is not None else np.zeros(fj.size)
    on1 = ug < t * (1.0 - 1e-12) if t > 0 else np.ones(fj.size, dtype=bool)
    on2 = (F.gid >= 0) & (ug > t * 1e-12)
    q = S.costs(lam)
    new_cls = _top2_min(q)
    qmin_f = new_cls[1][fj]
    y = np.zeros(P.n)
    y[amb_idx] = ya
    y[fj] = qmin_f
    # z: 0 for fixed jobs (y = their cheapest price); master jobs over all their variables
    z, new_cols = _master_reduced_costs(P, S.cols, amb_idx, lam, ya, za)
    upper = _level_upper(lam, y, z, S.C_fin, *P.t_bounds)
    viol = _level_violators(P, S, F, q, qmin_f, on1, on2, t, opts)
    col_jobs = amb_idx[new_cols.any(axis=1)] if new_cols.size else amb_idx[:0]
    return _LevelPriced(lam=lam, ug=ug, on1=on1, on2=on2, q=q, new_cls=new_cls, y=y, z=z, upper=upper, viol=viol,
                        new_cols=new_cols, col_jobs=col_jobs)


def _master_reduced_costs(P: SeparableProblem, cols: np.ndarray, amb_idx: np.ndarray, lam: np.ndarray,
                          ya: np.ndarray, za: np.ndarray):
    r"""Reduced costs :math:`y_j A_{jk} - \text{price}_{jk}` of the master jobs ``amb_idx``:
    returns z (n,) (their largest, at least 0; 0 for the other jobs) and the variables
    missing from the master whose reduced cost beats ``za`` (bool, (len(amb_idx), m))."""
    z = np.zeros(P.n)
    Aa, Pa, Ua = P.A[amb_idx], P.price(lam, amb_idx), P.U[amb_idx]
    rc = np.where(Ua, ya[:, None] * Aa - Pa, -np.inf)
    if amb_idx.size:
        z[amb_idx] = np.maximum(rc.max(axis=1), 0.0)
    scale_rc = np.where(Ua, ya[:, None] * Aa + Pa, 0.0)
    return z, Ua & ~cols[amb_idx] & (rc - za[:, None] > 1e-9 * scale_rc + 1e-300)


def _level_violators(P: SeparableProblem, S: _LevelState, F: _LevelFixed, q: np.ndarray, qmin_f: np.ndarray,
                     on1: np.ndarray, on2: np.ndarray, t: float, opts: StructuredOptions) -> np.ndarray:
    """Fixed jobs on a type that is no longer their cheapest at prices ``q`` (``on1`` /
    ``on2``: where they sit), and, when the fixed jobs bound t, those whose type cannot
    carry them past ``S.t_ref``; the most violated first (:func:`~.master.most_violated`).
    Raises ``S.t_ref`` to ``t``."""
    fj, k1, k2 = F.fj, F.k1, F.k2
    tol = qmin_f * (1.0 + 1e-9) + 1e-300
    with np.errstate(invalid="ignore"):
        bad = (on1 & (q[fj, k1] > tol)) | (on2 & (q[fj, k2] > tol))
    if np.isfinite(F.t_fix_ub) and t >= F.t_fix_ub * (1.0 - 1e-12):
        S.t_ref = max(S.t_ref, t)
        bad |= F.lim <= S.t_ref * (1.0 + opts.margin)
    S.t_ref = max(S.t_ref, t)
    with np.errstate(invalid="ignore", divide="ignore"):
        excess = np.where(bad, np.maximum(q[fj, k1] * on1, q[fj, k2] * on2) / (qmin_f + 1e-300) - 1.0, 0.0)
    excess = np.where(bad & ~np.isfinite(excess), 1.0, excess)
    return most_violated(fj, np.where(bad, np.maximum(excess, 1e-300), 0.0), 0.0, opts, P.n)


def _level_finish(res: StructuredResult, P: SeparableProblem, F: _LevelFixed, R: _LevelPriced, amb_idx: np.ndarray,
                  Xa: np.ndarray, t: float, gap: float, rnd: int, opts: StructuredOptions,
                  t_start: float) -> StructuredResult:
    """Stop phase: the allocation (master jobs' ``Xa``, fixed jobs at level ``t`` split
    between their two types), prices, duals and certified bounds into ``res``; its status
    from the ``gap`` (:func:`.rounds.certify`)."""
    fj, on1, on2 = F.fj, R.on1, R.on2
    X = store_solution(res, amb_idx, Xa, P.m, P.n, rnd, t, R.upper)
    X[fj, F.k1] = np.where(on1, (t - R.ug) / F.a1, 0.0)
    if on2.any():
        X[fj[on2], F.k2[on2]] = R.ug[on2] / F.a2[on2]
    res.X, res.t, res.lam, res.y, res.z = X, t, R.lam, R.y, R.z
    res.objective = P.gamma * t + P.offset
    res.master_rows = np.union1d(amb_idx, fj[on1 & on2])
    return certify(res, gap, rnd, opts, log, "level", t_start)


def _level_next(P: SeparableProblem, S: _LevelState, F: _LevelFixed, R: _LevelPriced, amb_idx: np.ndarray,
                gap: float, rnd: int, opts: StructuredOptions) -> None:
    """Update phase: reclassify the jobs at the new classification prices; unless the gap
    is still coarse (then the next round only regroups the fixed jobs), add the master
    jobs' new columns and move the violators into the master with their candidate
    variables."""
    lam_cls = _classification_prices(R.lam, S.C)
    if np.array_equal(lam_cls, R.lam):
        S.cls, q = R.new_cls, R.q
    else:
        q = S.costs(lam_cls)
        S.cls = _top2_min(q)
    if gap > opts.coarse_gap and rnd <= opts.coarse_rounds and F.fj.size > 0 and R.viol.size:
        return  # prices still far off: regroup the fixed jobs with the new prices first
    if R.col_jobs.size:
        S.cols[amb_idx] |= R.new_cols
    if R.viol.size:
        S.amb[R.viol] = True
        S.cols[R.viol] = _candidate_columns(q[R.viol], P.A[R.viol], P.U[R.viol], opts)


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
        lam, t = whole_lp_prices(P, opts, deadline, info, level=True)
        return lam, t
    if opts.init == "lagrangian":
        return _lagrangian_prices(P, opts, deadline, info)
    if opts.init == "hybrid":  # sampled prices refined by cutting planes on the whole problem
        r = _sampled_level(P, opts, deadline, depth)
        if r.status != "optimal":
            return None, np.nan
        lam, t = _lagrangian_prices(P, opts, deadline, info, start=r.lam, box=0.05)
        return lam, min(t, r.t) if np.isfinite(t) else r.t
    if opts.init == "uniform":
        C = P.C_all
        lam = np.where(np.isfinite(C) & (C > 0), 1.0 / np.maximum(np.where(np.isfinite(C), C, 1.0), 1e-300), 0.0)
        return lam, np.nan
    r = _sampled_level(P, opts, deadline, depth)
    if r.status != "optimal":
        return None, np.nan
    return r.lam, r.t


def _sampled_level(P: SeparableProblem, opts: StructuredOptions, deadline: float | None, depth: int) -> StructuredResult:
    """The level problem on a random sample of the jobs with proportionally scaled
    capacities (:func:`~.master.sample_rows`), solved one recursion level deeper."""
    rows, scale = sample_rows(P, opts)
    sub = subproblem(P, rows, scale)
    return solve_level(sub, opts, deadline, depth + 1)


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
