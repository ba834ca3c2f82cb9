r"""Floor mode of the structured solver: a separable objective with per-job floors
:math:`A_j \cdot X_j \ge f_j` (stage 2 of a level LP; the throughput LP).

Every job's best vertex at given prices is known in closed form (:mod:`.pricing`). Each
round (:func:`solve_floor`):

1. **group** the fixed jobs by (vertex, runner-up vertex, relative gap bin); a group's
   columns move its jobs toward the runner-up or shrink them to their floor
   (:func:`_floor_fixed`, :func:`_floor_groups`; vertices stay sparse, :class:`_Vertices`);
2. **solve** the master over the master jobs' likely variables
   (:func:`_floor_candidates`) plus the group columns, with the fixed vertices' load taken
   off the capacities (an infeasible master is widened, :func:`_floor_retry`);
3. **price** every job at the new prices (:func:`_floor_price_round`,
   :func:`_floor_pricing`): the Lagrangian bound certifies, fixed jobs whose best vertex
   beats their current one are violators, and master-job variables with a positive reduced
   cost join (:func:`_floor_new_columns`, :func:`_floor_track`);
4. **stop** when the gap is certified or nothing is left to add (:func:`_floor_finish`),
   else move the violators into the master, except those of large groups the master left
   fractional, which are grouped with finer bins instead (:func:`_refine_violators`).

First prices (:func:`_floor_warm_start`, :func:`_floor_start`): for a second stage, the
stage-1 prices scaled far above the objective; when stage 1's prices do not price the
floors but its allocation meets them, the floor problem on a random sample made feasible
by that allocation (:func:`_witness_prices`); otherwise the floor problem on a random
sample with floors scaled by level LPs.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace

import numpy as np

from .basis import BasisMemo
from .level import solve_level
from .master import (Aggregate, compact, most_violated, n_bins, ratio_bin, read_master, sample_rows, subproblem,
                     whole_lp_prices)
from .options import StructuredOptions, StructuredResult
from .pricing import PAIR, SINGLE, FloorChoice, floor_best
from .problem import SeparableProblem
from .rounds import (certify, iteration_limit, master_failed, out_of_time, record_round, solve_round_master,
                     store_solution)

__all__ = ['TIGHT_LEVEL', 'solve_floor']

log = logging.getLogger(__name__)

#: Debug line of a round (:func:`.rounds.record_round`).
_ROUND_LOG = ("structured floor round %d: %d master jobs, %d group columns, %d vars, obj=%.12g, gap %.2e, "
              "%d violators, %d new columns")


#: Certified gap at which a sample solved for first prices stops (:func:`_floor_warm_start`).
WARM_GAP = 1e-4

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
        return _entry_loads(P, rows, self.v0)


def _entry_loads(P: SeparableProblem, rows: np.ndarray, entries: list) -> np.ndarray:
    """Coupling-row loads (n_cap,) of jobs ``rows`` allocated the (type, amount) ``entries``."""
    return sum(P.loads(rows, k, a)[:, 0] for k, a in entries)


def _entries(kind, k, l, xk, xl) -> list:
    """A vertex's (type, amount) entries; amounts 0 where the vertex has no such entry."""
    return [(k, np.where(kind >= SINGLE, xk, 0.0)), (l, np.where(kind == PAIR, xl, 0.0))]


def _move_size(P: SeparableProblem, rows, lam, v0: list, v1: list) -> np.ndarray:
    r""":math:`\sum_k (|c_{jk}| + \text{price}_{jk}) |X^1_{jk} - X^0_{jk}|` of jobs ``rows``
    from the sparse entries (each type counted once)."""
    slots = [k for k, _ in v0] + [k for k, _ in v1]
    n = rows.shape[0]
    total = np.zeros(n)
    for i, k in enumerate(slots):
        first = np.ones(n, dtype=bool)
        for k_prev in slots[:i]:
            first &= k != k_prev
        d = sum(np.where(kk == k, a, 0.0) for kk, a in v1) - sum(np.where(kk == k, a, 0.0) for kk, a in v0)
        w = np.abs(P.c[rows, k]) + P.price_at(rows, k, lam)
        total += np.where(first, w * np.abs(d), 0.0)
    return total


def _group_loads(P: SeparableProblem, fj: np.ndarray, gid: np.ndarray, rows_g: np.ndarray,
                 moves: tuple, ncol: int) -> tuple[np.ndarray, np.ndarray]:
    """Coupling-row loads (n_cap, ncol) and objective (ncol,) of the group columns.

    Each move is (entries added, entries taken away, column of each group, jobs that make
    the move); a job of group ``gid`` (rows ``rows_g`` of ``fj`` are grouped) adds its
    change of load and objective (from its row of ``P.c``) to its column.
    """
    cap = np.zeros((P.n_cap, ncol))
    obj = np.zeros(ncol)
    for plus, minus, colmap, sel in moves:
        jr = rows_g[sel[rows_g]]
        if not jr.size:
            continue
        cidx = colmap[gid[jr]]
        rows = fj[jr]
        for entries, sign in ((plus, 1.0), (minus, -1.0)):
            for k, a in entries:
                cap += P.loads(rows, k[jr], sign * a[jr], cidx, ncol)
                obj += np.bincount(cidx, weights=sign * P.c[rows, k[jr]] * a[jr], minlength=ncol)
    return cap, obj


def _runner_up_ratio(P: SeparableProblem, rows: np.ndarray, ch: FloorChoice, lam: np.ndarray):
    """(has a runner-up, vertex entries, runner-up entries, ratio rho) of jobs ``rows`` with
    choices ``ch`` at prices ``lam``. rho is 1 plus the gap to
    the runner-up relative to the size of the move itself: for "all time on k" vs "floor on
    k" this is (c - W lam) / (c + W lam), a pure price ratio whatever the floor; inf
    without a runner-up. The groups bin it (:func:`_floor_groups`), the release tests it
    (:func:`_release_settled`)."""
    has1 = ch.kind2 >= 0
    v0 = _entries(ch.kind, ch.k, ch.l, ch.xk, ch.xl)
    v1 = _entries(np.where(has1, ch.kind2, -1), ch.k2, ch.l2, ch.xk2, ch.xl2)
    scale = _move_size(P, rows, lam, v0, v1) + 1e-300
    rho = np.where(has1, 1.0 + np.maximum(ch.value - ch.runner_up, 0.0) / scale, np.inf)
    return has1, v0, v1, rho


def _floor_groups(P: SeparableProblem, fj: np.ndarray, ch: FloorChoice, lam: np.ndarray, opts: StructuredOptions,
                  fine: np.ndarray | None = None):
    """Vertices of fixed jobs, their groups and the aggregated columns.

    Each group shares (vertex, runner-up vertex, relative gap bin); its columns move all
    its jobs toward the runner-up (u) or shrink them on their type (s), u + s <= 1. ``fine``:
    the jobs' refinement levels (finer bins, :func:`_refined_bins`; None: all at level 0).
    Returns (:class:`_Vertices`, group per job, u column per job, s column per job,
    aggregated columns or None); loads and objectives come from the sparse vertices.
    """
    m = P.m
    from .pricing import vertex_signature

    # (the objective rows are read where needed, P.c[rows, k]: a copy P.c[fj] was n x m of
    # fresh memory every round)
    has1, v0, v1, rho = _runner_up_ratio(P, fj, ch, lam)
    xmin = _min_amount(P, fj, ch.kind, ch.k, ch.xk)
    shrink = (ch.kind == SINGLE) & (xmin < ch.xk * (1.0 - 1e-12))
    V = _Vertices(v0=v0, v1=v1, k=ch.k, delta=np.where(shrink, xmin - ch.xk, 0.0))
    sig0 = vertex_signature(m, ch.kind, ch.k, ch.l, ch.xk >= 1.0)
    sig1 = np.where(has1, vertex_signature(m, ch.kind2, ch.k2, ch.l2, ch.xk2 >= 1.0), -1)
    S = 2 + 2 * m + m * m
    b, nb = _refined_bins(has1, rho, fine, opts)
    key = ((sig0 * (S + 1) + (sig1 + 1)) * nb + b)
    grouped = has1 | shrink
    gid = np.full(fj.size, -1, dtype=np.int64)
    if not grouped.any():
        return V, gid, gid, gid, None
    size = (S + 1) * (S + 1) * nb
    if size <= max(4 * fj.size, 1 << 20):  # O(n) relabelling; a sort when the key range is large
        inv, uniq = compact(key[grouped], size)
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
    moves = ((v1, v0, ucol, has1), ([(ch.k, V.delta)], [], scol, shrink))
    cap, obj = _group_loads(P, fj, gid, np.flatnonzero(grouped), moves, ncol)
    both = g_has1 & g_shr
    link = np.stack([ucol[both], scol[both]], axis=1) if both.any() else None
    uj = np.where(gid >= 0, ucol[np.maximum(gid, 0)], -1)
    uj = np.where(has1, uj, -1)
    sj = np.where(gid >= 0, scol[np.maximum(gid, 0)], -1)
    sj = np.where(shrink, sj, -1)
    keys = np.empty(ncol, dtype=np.int64)  # the same move of the same group next round: same key
    keys[ucol[g_has1]] = 2 * uniq[g_has1]
    keys[scol[g_shr]] = 2 * uniq[g_shr] + 1
    return V, gid, uj, sj, Aggregate(cap=cap, obj=obj, link=link, keys=keys)


#: Bins of a refined job are ``REFINE_FACTOR`` times narrower per refinement level; a job is
#: refined at most ``MAX_REFINE`` times (:func:`_refine_violators`).
REFINE_FACTOR, MAX_REFINE = 8, 1

#: Fewest jobs in a fractional group whose violators are refined rather than moved into the master.
REFINE_MIN = 500


def _refined_bins(has1: np.ndarray, rho: np.ndarray, fine: np.ndarray | None, opts: StructuredOptions):
    """(bin of each job, number of bins): :func:`~.master.ratio_bin` of ``rho`` at the job's
    refinement level ``fine`` (bins ``REFINE_FACTOR**level`` times narrower; None: level 0),
    numbered so that levels never share a bin; jobs without a runner-up share a bin per level.
    The numbering does not depend on which levels occur, so a group keeps its key
    (:attr:`~.master.Aggregate.keys`, the master's basis from round to round) once jobs
    elsewhere are refined."""
    b = np.empty(rho.shape[0], dtype=np.int64)
    off = 0
    for lv in range(MAX_REFINE + 1):
        o = opts if lv == 0 else replace(opts, bin_width=opts.bin_width / REFINE_FACTOR ** lv)
        B = n_bins(o)
        sel = (slice(None) if lv == 0 else None) if fine is None else np.flatnonzero(fine == lv)
        if sel is not None:
            h = has1[sel]
            b[sel] = off + np.where(h, ratio_bin(np.where(h, rho[sel], 1.0), o), B)
        off += B + 1
    return b, off


@dataclass
class _FloorState:
    """What the floor rounds carry from one round to the next.

    ``amb``: the master jobs (bool, n); ``cols``: their variables in the master (bool,
    (n, m); None: all usable); ``lam``: the prices that group the fixed jobs (None before
    any); ``lam_best`` / ``best_upper`` / ``best_gap``: the prices with the lowest bound so
    far, that bound and the best gap (the stabilization center); ``priced``: (prices,
    :func:`~.pricing.floor_best` of every job at them) from the last pricing. ``C`` /
    ``C_fin``: the coupling rows' right-hand sides (``C_fin``: 0 for ``inf``). ``fine``: each
    job's refinement level (int8, n; None before any job is refined, :func:`_refine_violators`).
    ``back``: (grouping prices, joining violators, released master jobs) of the last round
    that moved violators in (:func:`_back_to_last_round`; None after any other round).
    """

    amb: np.ndarray
    cols: np.ndarray | None
    lam: np.ndarray | None
    C: np.ndarray
    C_fin: np.ndarray
    lam_best: np.ndarray | None = None
    best_upper: float = np.inf
    best_gap: float = np.inf
    priced: tuple | None = None
    witness_used: bool = False
    released: np.ndarray | None = None
    fit_lam: np.ndarray | None = None
    fit_viol: np.ndarray | None = None
    memo: BasisMemo = field(default_factory=BasisMemo)
    fine: np.ndarray | None = None
    back: tuple | None = None


@dataclass
class _FloorFixed:
    """The fixed jobs ``fj`` of a round: their vertices ``V`` (None when there are none),
    the column of each job's move ``uj`` and shrink ``sj`` (-1: none), the groups' columns
    ``agg`` and the coupling-row load of the vertices ``load`` (n_cap,)."""

    fj: np.ndarray
    V: _Vertices | None
    uj: np.ndarray
    sj: np.ndarray
    agg: Aggregate | None
    load: np.ndarray


@dataclass
class _FloorPriced:
    """Pricing of a round at prices ``lam``: the fixed jobs' allocation ``ent`` ((type,
    amount) entries), the allocation's value ``lower``, every job's choice ``full``, the
    Lagrangian bound ``upper``, the ``gap``, the violators ``viol`` and the master jobs' new
    columns ``new_cols``."""

    lam: np.ndarray
    ent: list
    lower: float
    full: FloorChoice
    upper: float
    gap: float
    viol: np.ndarray
    new_cols: np.ndarray


def solve_floor(P: SeparableProblem, opts: StructuredOptions, deadline: float | None, depth: int = 0) -> StructuredResult:
    """Maximize the separable objective of ``P`` under its floors (floor mode), certified
    by the Lagrangian bound.

    Phases (module docstring): first prices from :func:`_floor_warm_start` (or none: every
    job in the master, the plain LP) and, for a second stage, the first stage's master jobs
    with their likely variables; then rounds of group -> solve -> price -> stop or add
    violators and columns. While the best gap is coarse, every round prices at a point
    between the best prices so far and the master's (in-out stabilization); the first
    ``floor_coarse_rounds`` of them only regroup. A master made infeasible by restricted
    variables gets all its jobs' variables, one made infeasible by the fixed vertices makes
    every job a master job. Returns status "optimal"
    with X, the prices and the row duals, "infeasible" (floors that cannot all be met), or
    a limit / the master's failure status.
    """
    t_start = time.perf_counter()
    res = StructuredResult(status="unknown", message="")
    S = _floor_start(P, opts, deadline, depth, res)
    if S is None:
        return res
    for rnd in range(1, opts.max_rounds + 1):
        if out_of_time(res, deadline, rnd):
            return res
        amb_idx = np.flatnonzero(S.amb)
        fj = np.flatnonzero(~S.amb)
        lam_group = S.lam
        t_p = time.perf_counter()  # 1. group the fixed jobs
        F = _floor_fixed(P, S, fj, opts)
        if F is None:
            continue  # a fixed job without a vertex became a master job: group again
        res.pricing_s += time.perf_counter() - t_p
        # 2. solve the master
        lp, maps, out = solve_round_master(P, amb_idx, res, deadline, memo=S.memo, cap_rhs=S.C - F.load, level=False,
                                           agg=F.agg, cols=None if S.cols is None else S.cols[amb_idx])
        if _floor_retry(P, S, res, out.status, amb_idx, fj, rnd, (opts, deadline, depth)):
            continue
        if master_failed(res, out, rnd):
            return res
        Xa, lam_master, za, ya, u = read_master(P, lp, out, maps)
        t_p = time.perf_counter()  # 3. price every job
        R = _floor_price_round(P, S, F, amb_idx, Xa, lam_master, ya, za, u, opts)
        res.pricing_s += time.perf_counter() - t_p
        record_round(res, log, _ROUND_LOG, rnd, amb_idx, F.agg, lp.n_vars, ("objective", R.lower), R.upper, R.gap,
                     R.viol, R.new_cols)
        _floor_track(S, R, amb_idx)  # 4. add columns; stop, or move violators in
        S.fit_lam, S.fit_viol, S.back = None, None, None
        if R.viol.size and R.gap > opts.coarse_gap and rnd <= opts.floor_coarse_rounds and fj.size:
            S.fit_lam, S.fit_viol = lam_group, R.viol  # a feasible grouping, should the regroup overfill
            continue  # prices still far off: regroup with the new prices first
        if (R.viol.size == 0 and not R.new_cols.any()) or R.gap <= opts.gap_tol:
            return _floor_finish(res, P, F, R, amb_idx, Xa, ya, za, rnd, opts, t_start)
        _release_settled(P, S, R, amb_idx, Xa, res)
        join = _refine_violators(P, S, F, R.viol, u, res)
        S.amb[join] = True
        if S.cols is not None and join.size:
            S.cols[join] = _floor_candidates(P, join, R.full.take(join))
        S.back = (lam_group, join, amb_idx[~S.amb[amb_idx]])  # should the regroup overfill
    return iteration_limit(res, opts)


def _floor_start(P: SeparableProblem, opts: StructuredOptions, deadline: float | None, depth: int,
                 res: StructuredResult) -> _FloorState | None:
    """Setup: first prices from :func:`_floor_warm_start` for a problem above ``base_size``
    (timed into ``res.warm_s``). With a second stage's master jobs they start in the master
    with their likely variables; prices alone become the first stabilization center;
    without prices every job is a master job. Returns the rounds' state, or None when the
    floors cannot all be met (``res`` then says so)."""
    n, m, A, c, f = P.n, P.m, P.A, P.c, P.floors
    C = P.C_all
    S = _FloorState(amb=np.ones(n, dtype=bool), cols=None, lam=None, C=C, C_fin=np.where(np.isfinite(C), C, 0.0))
    if not (n > opts.base_size and opts.init != "none"):
        return S
    t_w = time.perf_counter()
    warm = _floor_warm_start(P, opts, deadline, depth, res.warm_info)
    res.warm_s = time.perf_counter() - t_w
    if warm == "infeasible":
        res.status, res.message = "infeasible", "the floors cannot all be met (certified by the level bound)"
        return None
    if warm is None:
        return S
    S.lam, amb0 = warm
    S.amb = np.zeros(n, dtype=bool)
    S.cols = np.zeros((n, m), dtype=bool)
    if amb0 is not None:
        ch0 = floor_best(A[amb0], P.U[amb0], _price_fn(P, S.lam, amb0), c[amb0], f[amb0])
        S.cols[amb0] = _floor_candidates(P, amb0, ch0)
        # prices of a level optimum, scaled far above the objective: they choose the
        # master's jobs well but are no stabilization center (a mix with the
        # master's prices would be theirs), so the rounds price at the master's
        S.amb[amb0] = True
    else:
        S.lam_best = S.lam
        _price_all(P, S)
    return S


def _price_all(P: SeparableProblem, S: _FloorState) -> None:
    """Price every job at new first prices ``S.lam``: their Lagrangian bound becomes
    ``S.best_upper`` and the choices ``S.priced``, which the next grouping reuses (at 10^6
    jobs one pricing costs about 2 CPU-seconds)."""
    ch = floor_best(P.A, P.U, _price_fn(P, S.lam), P.c, P.floors)
    S.best_upper = float(S.lam @ S.C_fin + ch.value.sum()) + P.offset
    S.priced = (S.lam, ch)


def _floor_fixed(P: SeparableProblem, S: _FloorState, fj: np.ndarray, opts: StructuredOptions) -> _FloorFixed | None:
    """Group phase: the fixed jobs ``fj`` at their best vertex for ``S.lam`` (reusing the last
    pricing when it was at these prices), their groups (:func:`_floor_groups`) and load.
    Returns None after moving fixed jobs without a vertex into the master (the LP sees
    them)."""
    if not fj.size:
        none_i = np.zeros(0, dtype=np.int64)
        return _FloorFixed(fj=fj, V=None, uj=none_i, sj=none_i, agg=None, load=np.zeros(P.n_cap))
    if S.priced is not None and S.priced[0] is S.lam:  # last round priced every job at these prices
        ch = S.priced[1].take(fj)
    else:
        ch = floor_best(P.A[fj], P.U[fj], _price_fn(P, S.lam, fj), P.c[fj], P.floors[fj])
    V, _, uj, sj, agg = _floor_groups(P, fj, ch, S.lam, opts, None if S.fine is None else S.fine[fj])
    if np.any(~np.isfinite(ch.value)):  # a fixed job with no vertex: let the LP see it
        bad = fj[~np.isfinite(ch.value)]
        S.amb[bad] = True
        if S.cols is not None:
            S.cols[bad] = P.U[bad]
        return None
    return _FloorFixed(fj=fj, V=V, uj=uj, sj=sj, agg=agg, load=V.loads(P, fj))


def _floor_retry(P: SeparableProblem, S: _FloorState, res: StructuredResult, status: str, amb_idx: np.ndarray,
                 fj: np.ndarray, rnd: int, solve_args: tuple) -> bool:
    """Whether an infeasible master (``status``) is solved again, widened: after a round that
    moved violators in, at that round's prices (:func:`_back_to_last_round`); otherwise first
    with all the master jobs' variables; then, when the fixed vertices do not fit, at prices from the
    witness sample (:func:`_witness_reprice`) or at prices raised until they fit
    (:func:`_fitting_prices`); else as the plain LP (every job a master job). The round is
    recorded as infeasible. ``solve_args``: (options, deadline, depth) of the solve."""
    if status not in ("infeasible", "infeasible_or_unbounded"):
        return False
    if _back_to_last_round(P, S):
        pass  # the regroup after a round that moved violators in overfilled: that round's prices
    elif S.cols is not None and not np.array_equal(S.cols[amb_idx], P.U[amb_idx]):
        S.cols[amb_idx] = P.U[amb_idx]  # the master jobs' chosen variables cannot meet their floors: all of them
    elif _back_to_fitting_grouping(P, S):
        pass  # a regroup-only round overfilled: the last feasible grouping, its violators in the master
    elif fj.size and S.lam is not None and _witness_reprice(P, S, res, *solve_args):
        pass  # the fixed vertices did not fit at the level's prices: regroup at the witness sample's
    elif fj.size and S.lam is not None and _fitting_prices(P, S):
        pass  # the fixed vertices did not fit: regroup at prices where every job's vertex fits
    elif fj.size:
        S.amb[:] = True  # the fixed vertices do not fit: solve the plain LP
        S.cols = None
    else:
        return False
    res.history.append({"round": rnd, "master_jobs": int(amb_idx.size), "infeasible_master": True})
    return True


def _back_to_fitting_grouping(P: SeparableProblem, S: _FloorState) -> bool:
    """When the regrouping after a coarse round (violators found but not moved, the fixed
    jobs only regrouped at the new prices) made the master infeasible: group again at the
    coarse round's own prices (``S.fit_lam``, where its master was feasible) with its
    violators (``S.fit_viol``) moved into the master, and return True; once per such round
    (False when the last round was not a coarse one).

    That master is feasible: the coarse round's fixed jobs less the violators group as
    they did there, and each violator can take its share of that round's allocation (its
    variables include its best and runner-up vertices at both prices). Raising
    prices until every vertex fits (:func:`_fitting_prices`) instead threw away good prices:
    on max-min 10^5 hard seed 8 the first round's gap of 4.6e-3 became 0.575 after it, and
    on a 15,625-job sample at 10^6 2.1e-2 became 0.589, each followed by masters of 2,000
    jobs and more.
    """
    viol, lam = S.fit_viol, S.fit_lam
    if viol is None or not viol.size or lam is None or lam is S.lam or S.cols is None or S.priced is None:
        return False
    S.fit_viol = None
    _group_again_at(P, S, lam, viol)
    log.debug("structured floor: regrouping overfilled the master; back to the last feasible prices with %d "
              "violators in the master", viol.size)
    return True


def _group_again_at(P: SeparableProblem, S: _FloorState, lam: np.ndarray, viol: np.ndarray) -> None:
    """Group at earlier prices ``lam`` with violators ``viol`` in the master; their variables
    are those of their vertices at the last pricing's prices (``S.priced``, which found them)
    and at ``lam`` (where the master at ``lam`` had them), so that master can give each its
    share of that allocation."""
    S.lam = lam
    S.amb[viol] = True
    if viol.size:
        ch_new = S.priced[1].take(viol)
        ch_old = floor_best(P.A[viol], P.U[viol], _price_fn(P, lam, viol), P.c[viol], P.floors[viol])
        S.cols[viol] = _floor_candidates(P, viol, ch_new) | _floor_candidates(P, viol, ch_old)


def _back_to_last_round(P: SeparableProblem, S: _FloorState) -> bool:
    """When the master after a round that moved violators in (``S.back``: the prices that
    round grouped at, its joining violators and the master jobs it released) is
    infeasible: group again at that round's prices with its joining violators in the
    master (their variables also those of their vertices at those prices) and its released
    jobs back in, and return True; once per such round.

    That master is feasible: each group, less its joining jobs, can take the move it had
    (a refined job's finer group too), each joining job the share of it that it had, and
    every other master job its allocation. The rounds then go on from that round's prices,
    where a widened re-solve followed by prices raised until every vertex fits
    (:func:`_fitting_prices`) went back to a gap of 0.16-0.29: at 10^6 jobs (max-min, hard
    family, seed 1) the 125,000-job witness sample went through that four times.
    """
    back, S.back = S.back, None
    if back is None or S.cols is None or S.priced is None or back[0] is None or back[0] is S.lam:
        return False
    lam, join, released = back
    _group_again_at(P, S, lam, join)
    S.amb[released] = True
    log.debug("structured floor: regrouping after %d violators joined overfilled the master; back to that "
              "round's prices with %d released jobs back in", join.size, released.size)
    return True


def _witness_reprice(P: SeparableProblem, S: _FloorState, res: StructuredResult, opts: StructuredOptions,
                     deadline, depth: int) -> bool:
    """Once per solve, when ``P.warm`` carries a witness allocation and the first prices
    were the level's (:func:`_tight_prices`): set ``S.lam`` to the witness sample's prices
    (:func:`_witness_prices`, the new stabilization center) and return True.

    Measured on min makespan, hard family, 3*10^4 x 10 (stage-1 level 0.916, below the row
    bound): at the level's prices the fixed vertices overfilled every type and the rounds
    grew the master to 11,500 jobs and 98,000 variables (146 s); from the witness sample's
    prices stage 2 took 0.8 s. The level's prices stay first: on max-min (the old
    generator, 10^5 jobs) they certify in 3 masters, where the witness sample took 90 s.
    """
    w = P.warm
    if S.witness_used or S.lam_best is not None or w is None or w.get("X") is None:
        return False
    S.witness_used = True
    t_w = time.perf_counter()
    warm = _witness_prices(P, w["X"], opts, deadline, depth)
    res.warm_s += time.perf_counter() - t_w
    if warm is None:
        return False
    res.warm_info["init"] = "tight+witness"
    S.lam = S.lam_best = warm[0]
    _price_all(P, S)
    return True


#: :func:`_fitting_prices`: most price updates; factor up on an overfilled row; factor down on
#: a row filled below ``_FIT_LOW`` of its capacity (whole jobs switch types at once, so
#: steps much coarser than the spread of their throughputs swing the load from type to type).
_FIT_STEPS, _FIT_UP, _FIT_DOWN, _FIT_LOW = 100, 1.3, 1.1, 0.8


def _fitting_prices(P: SeparableProblem, S: _FloorState) -> bool:
    """Raise the prices of the coupling rows that the jobs' best vertices overfill (by
    ``_FIT_UP``, from at least 1e-3 of the highest price; rows filled below ``_FIT_LOW`` come
    down by ``_FIT_DOWN``) until every job's best vertex at the prices fits the capacities
    together; set ``S.lam`` to them and return True, or False when they fit already
    (nothing to raise) or still do not fit after ``_FIT_STEPS`` updates (a job that can
    meet its floor only on a full row, say).

    A master made infeasible by the fixed jobs' vertices is a symptom of prices far off
    (measured on the hard instances of ``benchmarks/hard_instances.py``: a 12,500-job warm
    start whose vertices put 9,700 GPUs' worth of time on a type with 170); at prices where
    all vertices fit, the fixed jobs alone leave room for the master's, so regrouping there
    keeps the master small where the plain LP over every job took most of the solve.
    Prices only choose the master; the certificate is unchanged.
    """
    lam = np.maximum(S.lam, 0.0).astype(float)
    base = 1e-3 * max(float(lam.max()), 1e-12)
    rows = np.arange(P.n)
    room = np.where(np.isfinite(S.C), S.C, np.inf) * (1.0 - 1e-9)
    for i in range(_FIT_STEPS):
        ch = floor_best(P.A, P.U, _price_fn(P, lam), P.c, P.floors)
        if not np.all(np.isfinite(ch.value)):
            return False
        load = _entry_loads(P, rows, _entries(ch.kind, ch.k, ch.l, ch.xk, ch.xl))
        over = load > room
        if not over.any():
            if i == 0:
                return False    # they fit already: the master's infeasibility lies elsewhere
            log.debug("structured floor: prices raised on %s until every vertex fits", np.flatnonzero(S.lam != lam))
            S.lam, S.priced = lam, (lam, ch)
            return True
        lam = np.where(over, np.maximum(_FIT_UP * lam, base), np.where(load < _FIT_LOW * room, lam / _FIT_DOWN, lam))
    return False


def _floor_price_round(P: SeparableProblem, S: _FloorState, F: _FloorFixed, amb_idx: np.ndarray, Xa: np.ndarray,
                       lam_master: np.ndarray, ya: np.ndarray, za: np.ndarray, u: np.ndarray,
                       opts: StructuredOptions) -> _FloorPriced:
    """Price phase: the allocation's value (master jobs ``Xa``, fixed jobs moved by the
    group columns ``u``), every job priced at a stabilized point or the master's prices
    (:func:`_floor_pricing`), and the master jobs' new columns. Sets ``S.lam`` and
    ``S.priced``."""
    # in-out stabilization: while the best gap is coarse, price at a point between the best
    # prices so far (lowest bound) and the master's, which damps the master's swings; in
    # every round, not only the regroup-only ones: the first master after those, priced at
    # its own prices, could raise the gap from 5e-3 to 1.5 and pull 2,000 jobs chosen at
    # those prices into the master (max-min 10^5 hard, seed 2: 12 rounds, 26 s)
    stabilize = S.lam_best is not None and S.best_gap > opts.coarse_gap
    lam = 0.5 * (S.lam_best + lam_master) if stabilize else lam_master
    fj, c = F.fj, P.c
    ent = _fixed_entries(F, u)
    # the fixed jobs' allocation stays sparse (entries) until the certificate holds
    lower = float((c[amb_idx] * Xa).sum()) + sum(float(c[fj, k] @ a) for k, a in ent) + P.offset
    full, upper, viol = _floor_pricing(P, lam, fj, ent, S.C_fin, opts)
    gap = (upper - lower) / max(abs(lower), 1e-300)
    if viol.size == 0 and gap > opts.gap_tol and lam is not lam_master:
        # no violators at the stabilized prices proves nothing about the master's jobs:
        # price at the master's own prices before concluding
        lam = lam_master
        full, upper, viol = _floor_pricing(P, lam, fj, ent, S.C_fin, opts)
        gap = (upper - lower) / max(abs(lower), 1e-300)
    S.lam, S.priced = lam, (lam, full)
    new_cols = _floor_new_columns(P, amb_idx, S.cols, lam_master, ya, za)
    return _FloorPriced(lam=lam, ent=ent, lower=lower, full=full, upper=upper, gap=gap, viol=viol, new_cols=new_cols)


#: A master job whose allocation in the master is its best vertex at the round's prices,
#: ahead of its runner-up by more than this ratio (the groups' measure, :func:`_floor_groups`),
#: leaves the master (:func:`_release_settled`).
SETTLED_RATIO = 1.02


def _release_settled(P: SeparableProblem, S: _FloorState, R: _FloorPriced, amb_idx: np.ndarray, Xa: np.ndarray,
                     res: StructuredResult) -> None:
    """Move master jobs that the master left at their clear best vertex back to the fixed
    jobs (column deletion), each job at most once in a solve.

    Violators join the master while the prices are still far off (2,000 a round on the
    hard family of ``benchmarks/hard_instances.py``) and most end up at the vertex that is
    best at the next prices: kept, they made the master of a 12,500-job sample grow to 6,300
    jobs and its LP cost 1.2-1.4 s. A job released here sits next round at its best vertex
    for ``S.lam`` (the prices the next grouping uses), which is its allocation in this
    master, so the master's load moves to the fixed jobs unchanged; its group's columns
    still move it, and it comes back as a violator if the prices turn. Releasing each job
    once bounds the rounds as before. Needs restricted masters (``S.cols``; the plain LP
    over every job releases nothing). Records the count in the round's history entry.
    """
    res.history[-1]["released"] = 0
    if S.cols is None or not amb_idx.size:
        return
    if S.released is None:
        S.released = np.zeros(P.n, dtype=bool)
    ch = R.full.take(amb_idx)
    _, v0, _, rho = _runner_up_ratio(P, amb_idx, ch, R.lam)
    vertex = np.zeros_like(Xa)
    r = np.arange(amb_idx.size)
    for k, a in v0:
        vertex[r, k] += a
    at_vertex = np.all(np.abs(Xa - vertex) <= 1e-9 * (1.0 + np.abs(vertex)), axis=1)
    out = amb_idx[at_vertex & (rho > SETTLED_RATIO) & ~S.released[amb_idx]]
    res.history[-1]["released"] = int(out.size)
    if out.size:
        S.amb[out] = False
        S.released[out] = True
        log.debug("structured floor: %d of %d master jobs settled at their vertex leave the master", out.size,
                  amb_idx.size)


def _refine_violators(P: SeparableProblem, S: _FloorState, F: _FloorFixed, viol: np.ndarray, u: np.ndarray,
                      res: StructuredResult) -> np.ndarray:
    """The violators that join the master; the others are refined (returned without them).

    A fixed job in a group whose column the master left fractional sits between its two
    vertices, so at almost any new prices it is a violator: at 10^6 jobs (max-min, hard
    family, seed 0) 8,415 of the 13,090 violators of the first full round came from ten
    such groups (4,996 jobs in the largest), and the master they joined took 3.4 s of IPX.
    A violator from a fractional group of at least ``REFINE_MIN`` jobs is instead refined,
    once: it is grouped with bins ``REFINE_FACTOR`` times narrower from then on
    (:func:`_refined_bins`), so the next master splits its group finely instead of taking
    its jobs one by one; a refined job that is again a violator joins, so the rounds stay
    bounded as before. The count goes into the round's history entry (``"refined"``).
    Returns the joining violators (sorted)."""
    res.history[-1]["refined"] = 0
    if not viol.size or F.agg is None or S.cols is None:
        return viol
    tol = 1e-9
    size = np.zeros(u.size, dtype=np.int64)
    for col in (F.uj, F.sj):
        size += np.bincount(col[col >= 0], minlength=u.size)
    frac = (u > tol) & (u < 1.0 - tol) & (size >= REFINE_MIN)
    in_frac = np.zeros(F.fj.size, dtype=bool)
    for col in (F.uj, F.sj):
        on = col >= 0
        in_frac[on] |= frac[col[on]]
    if S.fine is None:
        S.fine = np.zeros(P.n, dtype=np.int8)
    pos = np.searchsorted(F.fj, viol)
    refine = in_frac[pos] & (S.fine[viol] < MAX_REFINE)
    S.fine[viol[refine]] += 1
    res.history[-1]["refined"] = int(refine.sum())
    return viol[~refine]


def _fixed_entries(F: _FloorFixed, u: np.ndarray) -> list:
    """The fixed jobs' allocation as sparse (type, amount) entries: their vertices moved and
    shrunk by the group columns' values ``u`` (no entries without fixed jobs)."""
    if F.V is None:
        return []
    if F.agg is not None:
        uu = np.where(F.uj >= 0, u[np.maximum(F.uj, 0)], 0.0)
        ss = np.where(F.sj >= 0, u[np.maximum(F.sj, 0)], 0.0)
        return F.V.entries(uu, ss)
    return F.V.entries()


def _floor_track(S: _FloorState, R: _FloorPriced, amb_idx: np.ndarray) -> None:
    """Update phase (every round): the master jobs' new columns join, and the best bound,
    its prices and the best gap so far are kept."""
    if R.new_cols.any():
        S.cols[amb_idx] |= R.new_cols
    if R.upper < S.best_upper:
        S.best_upper, S.lam_best = R.upper, R.lam.copy()
    S.best_gap = min(S.best_gap, R.gap)


def _floor_finish(res: StructuredResult, P: SeparableProblem, F: _FloorFixed, R: _FloorPriced, amb_idx: np.ndarray,
                  Xa: np.ndarray, ya: np.ndarray, za: np.ndarray, rnd: int, opts: StructuredOptions,
                  t_start: float) -> StructuredResult:
    """Stop phase: the allocation (master jobs' ``Xa``, fixed jobs' entries), the prices,
    the row duals (master's ``ya`` / ``za`` for master jobs, the pricing's for fixed ones)
    and the certified bounds into ``res``; its status from the gap (:func:`.rounds.certify`)."""
    fj, n = F.fj, P.n
    y = np.zeros(n)
    z = np.zeros(n)
    y[fj], z[fj] = R.full.y[fj], R.full.z[fj]
    y[amb_idx], z[amb_idx] = ya, za
    X = store_solution(res, amb_idx, Xa, P.m, n, rnd, R.lower, R.upper)
    for k, a in R.ent:
        X[fj, k] += a
    res.X, res.lam, res.y, res.z = X, R.lam, y, z
    res.objective = R.lower
    res.master_rows = amb_idx
    return certify(res, R.gap, rnd, opts, log, "floor", t_start)


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
    full = floor_best(A, P.U, _price_fn(P, lam), c, P.floors)
    upper = float(lam @ C_fin + full.value.sum()) + P.offset
    cur = np.zeros(fj.size)
    size = np.zeros(fj.size)
    for k, a in ent:
        p, ck = P.price_at(fj, k, lam), c[fj, k]
        cur += (ck - p) * a
        size += (np.abs(ck) + p) * a
    scale_f = size + np.abs(full.value[fj])
    excess = (full.value[fj] - cur) / (scale_f + 1e-300)
    return full, upper, most_violated(fj, excess, 1e-9, opts, P.n)


def _tight_prices(P: SeparableProblem, lam1: np.ndarray) -> np.ndarray:
    """Level prices scaled far above the objective (floors at a level optimum cost that much)."""
    ratio = np.where(P.U & (P.W > 0), np.abs(P.c) / np.maximum(P.W, 1e-300), 0.0)
    return 1e6 * max(float(ratio.max()), 1e-300) / float(lam1.max()) * lam1


def _floor_warm_start(P: SeparableProblem, opts: StructuredOptions, deadline, depth, info: dict | None = None):
    """First prices (and master jobs) for a floor problem, or "infeasible", or None.

    With floors, the level problem "how far can every floor be scaled" (coefficients
    :math:`A_{jk}/f_j`) is solved first. When its optimum is at most :data:`TIGHT_LEVEL`
    the floors sit at a level optimum (a second stage): prices proportional to that
    problem's (scaled far above the objective) price the floors, and its master jobs start
    in the master. Otherwise prices come from the same floor problem on a random sample
    with proportionally scaled capacities and floors scaled to the sample's own level.
    A warm start that carries an allocation meeting the floors (stage 1's ``"X"``, when its
    prices do not price the floors) skips both level LPs: :func:`_witness_prices` (``info``
    then records ``init="witness"``).
    """
    n = P.n
    if opts.init in ("ipx", "pdlp"):
        lam, _ = whole_lp_prices(P, opts, deadline, {}, level=False)
        return None if lam is None else (lam, None)
    pos = P.floors > 0
    w = P.warm
    if (w is not None and pos.all() and np.ptp(P.floors) == 0 and w["level"] > 0
            and P.floors[0] >= w["level"] * (1.0 - 1e-6) and np.any(w["lam"] > 0)):
        # a second stage at the level the warm start found: its prices price the floors
        return _tight_prices(P, w["lam"]), w["master_rows"]
    if w is not None and w.get("X") is not None:
        # an allocation that meets the floors (stage 1's) prices a sample without level LPs
        if info is not None:
            info["init"] = "witness"
        return _witness_prices(P, w["X"], opts, deadline, depth)
    tau = np.inf
    if pos.any():
        lvl = subproblem(P, np.arange(n), 1.0, level_from_floors=True)
        r = solve_level(lvl, opts, deadline, depth + 1)
        if r.status != "optimal":
            return None
        if r.upper < 1.0 - 1e-9:
            return "infeasible"
        tau = r.t
        if tau <= TIGHT_LEVEL and np.any(r.lam > 0):
            return _tight_prices(P, r.lam), r.master_rows
        # tight only through some job's own time row (capacity has no price), or loose:
        # the floors leave room, so a sample prices the capacity
    rows, scale = sample_rows(P, opts)
    floors = None
    if pos.any():
        lvl_s = subproblem(P, rows, scale, level_from_floors=True)
        rs = solve_level(lvl_s, opts, deadline, depth + 1)
        if rs.status != "optimal":
            return None
        beta = min(1.0, rs.t / tau) * (1.0 - 1e-9)
        floors = np.where(pos[rows], P.floors[rows] * beta, P.floors[rows])
    sub = subproblem(P, rows, scale, floors=floors)
    # the sample only prices the whole problem, whose own rounds certify the result: a
    # coarser gap there saves its last master solves (WARM_GAP)
    r = solve_floor(sub, replace(opts, gap_tol=max(opts.gap_tol, WARM_GAP)), deadline, depth + 1)
    if r.status != "optimal":
        return None
    return r.lam, None


def _witness_prices(P: SeparableProblem, X: np.ndarray, opts: StructuredOptions, deadline, depth):
    r"""First prices from a random sample made feasible by a witness allocation ``X``.

    ``X`` (n, m) is an allocation of the same jobs that meets (up to the solver's
    tolerances) every floor, time row and capacity, as stage 1's does for a second stage.
    The sample (:func:`~.master.sample_rows`) keeps its rows of ``X`` (each scaled down to
    a time of at most 1) as its own witness: its floors are
    :math:`\min(f_j, A_j \cdot X_j)` and its capacities
    :math:`\max(\text{scale}\,C, \sum_{j \in S} W_j X_j)`, so the sample is feasible by
    construction and no level LP ("how far can the floors be scaled", an LP as large as
    the sample) is needed to scale them; recursively, the sample's own sample is priced
    the same way. Prices only choose the master, so the certificate is unchanged.
    Returns (prices, None) or None when the sample's solve fails.
    """
    rows, scale = sample_rows(P, opts)
    Xs = np.maximum(X[rows], 0.0)
    Xs = Xs / np.maximum(Xs.sum(axis=1), 1.0)[:, None]
    load = _allocation_loads(P, rows, Xs)
    C_s = np.maximum(P.C_all * scale, load)
    f = P.floors[rows]
    floors = np.where(np.isfinite(f), np.minimum(f, (P.A[rows] * Xs).sum(axis=1)), f)
    sub = replace(subproblem(P, rows, scale, floors=floors), C=C_s[: P.m], Cx=C_s[P.m:],
                  warm={"lam": np.zeros(P.n_cap), "master_rows": np.zeros(0, dtype=np.int64), "level": np.nan,
                        "X": Xs})
    r = solve_floor(sub, replace(opts, gap_tol=max(opts.gap_tol, WARM_GAP)), deadline, depth + 1)
    log.debug("structured floor: witness-sample prices from %d jobs (%s, %d rounds)", rows.size, r.status, r.rounds)
    if r.status != "optimal":
        return None
    return r.lam, None


def _allocation_loads(P: SeparableProblem, rows: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Coupling-row loads (n_cap,) of jobs ``rows`` allocated ``X`` (len(rows), m)."""
    out = np.zeros(P.n_cap)
    out[: P.m] = (P.W[rows] * X).sum(axis=0)
    for e in range(P.n_extra):
        out[P.m + e] = float(P.Wx[rows, e] @ X[:, P.kx[e]])
    return out


def _price_fn(P: SeparableProblem, lam: np.ndarray, rows: np.ndarray | None = None):
    """Prices of a row slice (of ``rows`` when given) at ``lam``, for :func:`~.pricing.floor_best`."""
    if rows is None:
        return lambda sl: P.price(lam, sl)
    return lambda sl: P.price(lam, rows[sl])
