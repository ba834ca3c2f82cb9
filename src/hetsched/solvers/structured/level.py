r"""Level mode of the structured solver: maximize the level t (stage 1 of a level LP).

Given capacity prices, job j's price of a unit of level on type k is
:math:`q_{jk} = \text{price}_{jk} / A_{jk}`; a fixed job sits on its cheapest type. Each
round (:func:`solve_level`):

1. **group** the fixed jobs by (cheapest type, runner-up, price-ratio bin) into one column
   each that moves them to the runner-up (:func:`_level_groups`), and load t's column with
   every fixed job's load per unit of level;
2. **solve** the master (:mod:`.master`) and read the level t and new prices;
3. **price** every job in closed form, bound t from above by weak duality
   (:func:`_level_upper`), and collect violators (fixed jobs whose type is no longer
   cheapest, or whose type cannot carry them to t) and master-job columns with a positive
   reduced cost;
4. **stop** when there are none (certified gap), else move them into the master.

First prices: the same solver on a random sample (:func:`_level_warm_start`), or the
alternatives of :class:`~.options.StructuredOptions` ``init``.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from .master import (
    Aggregate,
    build_master,
    compact,
    most_violated,
    n_bins,
    ratio_bin,
    read_master,
    sample_rows,
    solve_master,
    subproblem,
    whole_lp_prices,
)
from .options import StructuredOptions, StructuredResult
from .problem import SeparableProblem

__all__ = ['solve_level']

log = logging.getLogger(__name__)


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


def solve_level(P: SeparableProblem, opts: StructuredOptions, deadline: float | None, depth: int = 0) -> StructuredResult:
    """Maximize the level t of ``P`` (level mode), certified by weak duality.

    Phases (module docstring): first prices (given in ``P.warm``, or
    :func:`_level_warm_start`) classify the jobs into master jobs (near a tie, or unable to
    reach the estimated level on their cheapest type) and fixed ones; then rounds of group
    -> solve -> price -> stop or move violators in. ``depth`` counts the recursion of the
    sampled warm start. Returns status "optimal" with X, t, the prices and the level duals,
    or "time_limit" / "iteration_limit" / the master's failure status.
    """
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
        lp, maps = build_master(P, amb_idx, cap_rhs=C, level=True, t_cap=L, t_bounds=(t_lb, ub), agg=agg,
                           cols=cols[amb_idx], obj_scale=obj_scale)
        out = solve_master(lp, deadline)
        res.master_s += time.perf_counter() - t_m
        if not out.success:
            res.status = out.status
            res.message = f"master LP {rnd} ended {out.status!r} ({out.message})"
            return res
        t = float(out.x[0])
        Xa, lam, za, ya, u = read_master(P, lp, out, maps)
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
        viol = most_violated(fj, np.where(bad, np.maximum(excess, 1e-300), 0.0), 0.0, opts, n)
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
        rows, scale = sample_rows(P, opts)
        sub = subproblem(P, rows, scale)
        r = solve_level(sub, opts, deadline, depth + 1)
        if r.status != "optimal":
            return None, np.nan
        lam, t = _lagrangian_prices(P, opts, deadline, info, start=r.lam, box=0.05)
        return lam, min(t, r.t) if np.isfinite(t) else r.t
    if opts.init == "uniform":
        C = P.C_all
        lam = np.where(np.isfinite(C) & (C > 0), 1.0 / np.maximum(np.where(np.isfinite(C), C, 1.0), 1e-300), 0.0)
        return lam, np.nan
    rows, scale = sample_rows(P, opts)
    sub = subproblem(P, rows, scale)
    r = solve_level(sub, opts, deadline, depth + 1)
    if r.status != "optimal":
        return None, np.nan
    return r.lam, r.t


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
