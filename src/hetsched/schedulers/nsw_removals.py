r"""Every "one bidder fewer" program of the partial-allocation payments, solved together.

The hidden payments of the partial-allocation auction (:mod:`.themis_auction`) need, for each
bidder class :math:`c`, the NSW optimum with one bidder of :math:`c` removed. With linear
valuations these programs differ from the whole program (whose certified optimum
:func:`.nsw_newton.certify_support` gives) only in one multiplicity, so they are solved here
from that optimum by Newton's method on the KKT system of :mod:`.nsw_newton`, all at once:

* **One layout.** Every program is a system of the same size over the same slots
  (:class:`.nsw_kkt.KKTLayout`: one slot per possible unknown, holding its equation when the
  element is in the program's support and a pin when it is not).
* **One factorisation.** The whole program's Jacobian at its optimum is factorised once
  (sparse LU). A program's own Jacobian differs in a few rows: the capacity rows (one bidder
  fewer), slots whose support changed, and utility rows of classes whose utility moved by
  more than :data:`CHORD_TOL`. Those rows are replaced by the Sherman-Morrison-Woodbury
  formula, :math:`(J + E_S \Delta R)^{-1} = J^{-1} - J^{-1}E_S(I + \Delta R J^{-1}E_S)^{-1}
  \Delta R J^{-1}`; the other utility rows keep the whole program's values (a chord
  method: linear convergence at a rate of the size of the change).
* **Lockstep.** The residuals of all programs are evaluated as one array and the base
  solve takes them as one right-hand side block; a program leaves the batch when its support
  checks hold and its duality gap is at most :data:`.nsw_newton.GAP_TOL` (certified), or when
  it stalls (then None: the caller solves it another way).

Nothing here is trusted without the certificate: a returned program's objective is within
``GAP_TOL`` of its optimum by the dual bound of :func:`.nsw_newton.nsw_bounds`.
"""

from __future__ import annotations

import logging

import numpy as np
import scipy.sparse.linalg as spla

from .nsw_kkt import KKTLayout, cycle_broken, slacks, switch
from .nsw_newton import (
    GAP_TOL,
    MAX_SUPPORTS,
    SUPPORT_TOL,
    LinearNSW,
    degenerate,
    nsw_bounds,
)

__all__ = ["CHORD_TOL", "solve_removals"]

log = logging.getLogger(__name__)

#: A utility row whose class moved by more than this (relative change of utility) is updated
#: exactly (low rank) instead of left at the whole program's values.
CHORD_TOL = 1e-2
#: Along the path, a support whose inequalities break by more than this (relative) at the
#: target is not switched there: the target moves back to just past the first break point.
BACKOFF = 1e-2
#: Inequalities whose interpolated break points are within this of the first switch together.
FIRST_TOL = 1e-6
#: How far past the interpolated break point (as a fraction of the segment) the target moves.
RATIO_PAST = 1e-3
#: A bidder holding more than this share of a type's offer is removed along the path from
#: the start (its removal moves prices too far for one straight solve).
PATH_SHARE = 0.02
#: Rows a program may differ in from the whole program before it factorises its own Jacobian.
MAX_RANK = 16
#: Low-rank refreshes (the moved classes' rows re-evaluated where the chord slows) per support.
MAX_REFRESH = 4
#: Systems up to this many slots keep the whole program's Jacobian dense for row lookups.
DENSE_ROWS = 3000
#: Largest residual at which a program counts as converged (the duality gap then decides).
CONVERGED = 1e-14
#: Iterations per program and way (straight to ``t = 1``, then along the path) before it
#: gives that way up.
MAX_ITERATIONS = 100


class _Program:
    """One removal program's state in the batch: the path from the whole program (``t = 0``)
    to one bidder fewer in class ``c`` (``t = 1``), with the last point where the support
    held (``t_lo``, ``z_lo``)."""

    __slots__ = ("c", "t", "t_lo", "z_lo", "support", "kinds", "z", "w", "last", "refreshed", "switches",
                 "its", "low", "path", "version")

    def __init__(self, c, support, z, path=False):
        self.c, self.support, self.z, self.path = c, support, z, path
        self.t, self.t_lo, self.z_lo = 1.0, 0.0, z.copy()
        self.last, self.refreshed, self.switches, self.its = np.inf, 0, 0, 0
        self.kinds = self.low = self.w = None
        self.version = 0          # bumped whenever kinds or w change (the batch restacks them)


def solve_removals(v: np.ndarray, w: np.ndarray, d: np.ndarray, C: np.ndarray, base: LinearNSW,
                   classes: np.ndarray) -> list[LinearNSW | None]:
    """Certified optima of the programs without one bidder of each of ``classes``.

    Each program follows the path :math:`w(t) = w - t e_c` from the whole program's optimum
    (``t = 0``) to its own (``t = 1``), in one chord-Newton solve when its support holds
    there; otherwise the inequalities that break first (linear interpolation of the slacks
    from the last point where the support held: a ratio test, as in the simplex method)
    switch in or out of the support and the solve repeats. A program that fails that way,
    or whose bidder holds more than :data:`PATH_SHARE` of a type, goes along the path: where
    inequalities break by more than :data:`BACKOFF`, the target moves back to just past the
    first break point, so that supports change close to where they should.

    Parameters
    ----------
    v, w, d, C : ndarray
        The whole program, as for :func:`.nsw_newton.certify_support` (every ``w >= 1``).
    base : LinearNSW
        Its certified optimum.
    classes : ndarray of int
        The class to take one bidder from, per program.

    Returns
    -------
    list of LinearNSW or None
        Per program, its certified optimum (classes with no bidder left have zero rows), or
        None where the batch could not certify it.
    """
    v = np.where((C > 0)[None, :], v, 0.0)
    w = np.asarray(w, dtype=float)
    lay = KKTLayout(v, d, C)
    out: list[LinearNSW | None] = [None] * len(classes)
    base_support = base.support
    base_kinds = lay.kinds(*base_support)
    if base_kinds is None or not len(classes):
        return out
    X0 = base.x
    u0 = (v * X0).sum(axis=1)
    z0 = np.concatenate([X0[lay.ec, lay.ek], base.prices, base.caps[lay.lc], 1.0 / u0])
    fixed = z0[:lay.o_p]
    J = lay.matrix(base_kinds, w, z0)
    try:
        lu = spla.splu(J)
    except RuntimeError:          # a degenerate support the whole program's solve did not reduce
        fd = degenerate(v, w, d, C, *base_support[:3], 1.0 / u0)
        base_kinds = None if fd is None else lay.kinds(*base_support[:3], *fd)
        if base_kinds is None:
            return out
        base_support = (*base_support[:3], *fd)
        J = lay.matrix(base_kinds, w, z0)
        try:
            lu = spla.splu(J)
        except RuntimeError:
            log.debug("nsw removals: the whole program's Jacobian is singular")
            return out
    J = J.tocsr()
    cols: dict[int, np.ndarray] = {}
    base_rows: dict[int, np.ndarray] = {}
    has_cycles = bool(base_support[4].any())
    reductions: dict[bytes, tuple[np.ndarray, np.ndarray] | None] = {}

    def column(slots):
        need = [s for s in slots if s not in cols]
        if need:
            rhs = np.zeros((lay.N, len(need)))
            rhs[need, np.arange(len(need))] = 1.0
            sol = lu.solve(rhs)
            for i, s in enumerate(need):
                cols[s] = sol[:, i]
        return np.column_stack([cols[s] for s in slots]) if slots else np.zeros((lay.N, 0))

    dense = J.toarray() if lay.N <= DENSE_ROWS else None

    def base_row(s):
        if dense is not None:
            return dense[s]
        r = base_rows.get(s)
        if r is None:
            r = base_rows[s] = J[s].toarray().ravel()
        return r

    def reduce(E, P, L, beta, wc):
        """Frozen and dropped edges of a support (one QR per distinct support, shared).

        Only classes on two or more types take part (see :func:`.nsw_newton.degenerate`), so
        supports that differ elsewhere share one reduction."""
        multi = np.flatnonzero(E.sum(axis=1) >= 2)
        key = multi.tobytes() + np.packbits(np.concatenate([E[multi].ravel(), L[multi], P])).tobytes()
        if key not in reductions:
            live = wc > 0
            fd = degenerate(v[live], wc[live], d[live], C, E[live], P, L[live], beta[live])
            if fd is not None:
                F = np.zeros_like(E)
                D = np.zeros_like(E)
                F[live], D[live] = fd
                fd = (F, D)
            reductions[key] = fd
        return reductions[key]

    def configure(pr: _Program) -> bool:
        """Kinds and Woodbury data of ``pr`` at its ``t``, support and point; False if that
        system cannot be set up (frozen edges that do not pair, a singular update)."""
        E, P, L, F, D = pr.support
        pr.w = w.copy()
        pr.w[pr.c] -= pr.t
        pr.refreshed = 0
        pr.version += 1
        if pr.w[pr.c] > 0 and pr.support is base_support:     # the first solve of most programs
            pr.kinds = base_kinds
            return lowrank(pr)
        gone = np.zeros(lay.n, dtype=bool)
        if pr.w[pr.c] <= 0:      # no bidder left: its edges, cap and utility are pinned
            pr.w[pr.c] = 0.0
            gone[pr.c] = True
            E, L = E.copy(), L.copy()
            E[pr.c], L[pr.c] = False, False
            P = P & E.any(axis=0)   # a type nobody else is on cannot be full
        # a bidder with no demand limit on a type wants all of it at a zero price: full
        P = P | ((E & ~L[:, None] & (pr.w > 0)[:, None]).any(axis=0) & (C > 0))
        if has_cycles:       # (cached per support: one QR for all programs that reach it)
            _, _, _, beta = (a[0] for a in lay.split(pr.z[None, :]))
            fd = reduce(E, P, L, beta, pr.w)
            if fd is None:
                return False
            F, D = fd
        else:
            F, D = F & E, D & E
        kinds = lay.kinds(E, P, L, F, D, gone)
        if kinds is None:
            return False
        pr.kinds = kinds
        pr.support = (pr.support[0], P, pr.support[2], F, D)
        return lowrank(pr)

    def lowrank(pr: _Program) -> bool:
        """Woodbury data of ``pr`` at its current point; False if singular."""
        if pr.kinds is base_kinds and pr.z is z_start[pr.c]:
            # first solve: only the capacity rows of the types its class is on change, each in
            # one entry (one bidder fewer): -1/C_k at the class's edge on k
            ks = [k for k in np.flatnonzero(base_kinds[2]) if lay.eid[pr.c, k] >= 0]
            dR = np.zeros((len(ks), lay.N))
            dR[np.arange(len(ks)), lay.eid[pr.c, ks]] = -1.0 / lay.Cs[ks]
            return woodbury(pr, [lay.o_p + k for k in ks], dR)
        kind, partner, P, Lm, gone = pr.kinds
        bk, bp, bP, bL, _ = base_kinds
        S = set(np.flatnonzero((kind != bk) | ((kind == 2) & (partner != bp))).tolist())
        S |= {lay.o_p + k for k in np.flatnonzero(P != bP)}
        S |= {lay.o_p + k for k in np.flatnonzero(P) if lay.eid[pr.c, k] >= 0}
        S |= {lay.o_l + j for j in np.flatnonzero(Lm != bL)}
        _, _, _, beta = (a[0] for a in lay.split(pr.z[None, :]))
        moved = (np.abs(beta * u0 - 1.0) > CHORD_TOL) | gone
        S |= {lay.o_b + c for c in np.flatnonzero(moved)}
        S = sorted(S)
        if len(S) > MAX_RANK:      # cheaper to factorise this program's own Jacobian here
            try:
                pr.low = spla.splu(lay.matrix(pr.kinds, pr.w, pr.z))
            except RuntimeError:   # singular
                return False
            pr.last = np.inf
            return True
        dR = np.array([lay.row(s, pr.kinds, pr.w, pr.z) - base_row(s) for s in S]).reshape(len(S), lay.N)
        keep = np.abs(dR).max(axis=1, initial=0.0) > 0
        return woodbury(pr, [s for s, k in zip(S, keep) if k], dR[keep])

    def woodbury(pr: _Program, S: list, dR: np.ndarray) -> bool:
        """``pr.low`` for the rows ``S`` replaced by the base rows plus ``dR``."""
        Z = column(S)
        K = np.eye(len(S)) + dR @ Z
        try:
            Kinv = np.linalg.inv(K)
        except np.linalg.LinAlgError:
            return False
        if not np.isfinite(Kinv).all():
            return False
        pr.low = (dR, Z, Kinv)
        pr.last = np.inf
        return True

    def breaks(pr: _Program, val: np.ndarray, bad: np.ndarray) -> np.ndarray:
        """Where on the segment from ``(t_lo, z_lo)`` to the current point each broken
        inequality breaks (0 to 1; linear interpolation of its slack)."""
        w_lo = w.copy()
        w_lo[pr.c] -= pr.t_lo
        val_lo, _ = slacks(lay, pr.z_lo, w_lo, pr.support)
        lo = np.maximum(np.where(np.isfinite(val_lo), val_lo, 0.0), 0.0)[bad]
        return lo / np.maximum(lo - val[bad], 1e-300)

    def finish(pr: _Program, val: np.ndarray, scale: np.ndarray) -> bool | str | None:
        """A converged point with its slacks: ready to certify ("certify"), given up
        (False), or the path goes on (None; ``pr`` reconfigured)."""
        E, P, L, F, D = pr.support
        live = pr.w > 0
        _, p, lam, beta = (a[0] for a in lay.split(pr.z[None, :]))
        bad = val < -SUPPORT_TOL * scale
        if not bad.any() and has_cycles and cycle_broken(lay.v, D & live[:, None], beta, p, lam, SUPPORT_TOL):
            # a degenerate cycle broke (a class on it became capped): reduce afresh, same point
            log.debug("nsw removals: class %d breaks a degenerate cycle", pr.c)
            pr.switches += 1
            return None if pr.switches <= 4 * MAX_SUPPORTS and configure(pr) else False
        if not bad.any():
            if pr.t >= 1.0:
                return "certify"
            pr.t_lo, pr.z_lo = pr.t, pr.z.copy()
            pr.t = 1.0
            return None if configure(pr) else False
        pr.switches += 1
        if pr.switches > 4 * MAX_SUPPORTS:
            log.debug("nsw removals: class %d switched its support too often", pr.c)
            return False
        if pr.path and float((-val[bad] / scale[bad]).max()) > BACKOFF and pr.t - pr.t_lo > 1e-9:
            # far outside the support: move the target back to just past where the first
            # inequality breaks on the segment from the last point where the support held
            # (linear interpolation of the slacks, a ratio test as in the simplex method)
            theta = min(1.0, float(breaks(pr, val, bad).min()) + RATIO_PAST)
            pr.t = pr.t_lo + theta * (pr.t - pr.t_lo)
            pr.z = pr.z_lo + theta * (pr.z - pr.z_lo)
            return None if configure(pr) else False
        # close to it: the inequalities that break first on the segment from the last point
        # where the support held switch here (several at once can ask for an inconsistent
        # support: two classes entering the same pair of types)
        theta = breaks(pr, val, bad)
        pr.support = switch(lay, pr.support, np.flatnonzero(bad)[theta <= theta.min() + FIRST_TOL])
        return None if configure(pr) else False

    def certify(done: list) -> list[bool]:
        """Duality gaps of converged programs ``[(i, pr), ...]`` (one batched bound);
        certified ones go into ``out[i]``."""
        Zc = np.stack([pr.z for _, pr in done])
        x, p, lam, _ = lay.split(Zc)
        X = np.zeros((len(done), lay.n, lay.m))
        X[:, lay.ec, lay.ek] = x
        Wc = np.stack([pr.w for _, pr in done])
        lo, hi, xf = nsw_bounds(lay.v, Wc, lay.d, lay.C, X, p, lam)
        ok = []
        for b, (i, pr) in enumerate(done):
            if hi[b] - lo[b] <= GAP_TOL:
                live = pr.w > 0
                out[i] = LinearNSW(xf[b], np.maximum(p[b], 0.0), np.where(live, np.maximum(lam[b], 0.0), 0.0),
                                   float(lo[b]), float(hi[b]), pr.support, pr.its)
                ok.append(True)
            else:
                log.debug("nsw removals: class %d gap %.3g", pr.c, hi[b] - lo[b])
                ok.append(False)
        return ok

    def restart(pr: _Program) -> bool:
        """A program that failed going straight to ``t = 1`` starts again along the path."""
        if pr.path:
            return False
        pr.path, pr.t, pr.t_lo = True, 1.0, 0.0
        pr.z, pr.z_lo = z0.copy(), z0.copy()
        pr.support = tuple(a.copy() for a in base_support)
        pr.switches = pr.its = 0
        return configure(pr)

    progs = []
    share = (X0 / lay.Cs).max(axis=1)
    z_start: dict[int, np.ndarray] = {}
    for i, c in enumerate(np.asarray(classes, dtype=np.int64)):
        pr = _Program(int(c), base_support, z0.copy(), path=bool(share[c] > PATH_SHARE))
        z_start[pr.c] = pr.z
        if configure(pr) or restart(pr):
            progs.append((i, pr))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):   # divergence is caught below
        _run(progs, lay, lu, fixed, u0, finish, certify, lowrank, restart)
    return out


def _run(progs, lay, lu, fixed, u0, finish, certify, lowrank, restart) -> None:
    """The lockstep iterations (see :func:`solve_removals`)."""
    stacked: tuple = ((), ())
    while progs:
        conv = []
        Zs = np.array([pr.z for _, pr in progs])
        key = tuple((i, pr.version) for i, pr in progs)
        if key != stacked[0]:          # restack only when a program came, went or changed support
            stacked = (key, tuple(np.stack([pr.kinds[t] for _, pr in progs]) for t in range(5))
                       + (np.stack([pr.w for _, pr in progs]),))
        R = lay.residuals(Zs, *stacked[1], fixed, 1.0 / u0)
        res = np.abs(R).max(axis=1, initial=0.0)
        keep, rows = [], []
        for j, (i, pr) in enumerate(progs):
            r = float(res[j])
            if pr.its >= MAX_ITERATIONS:
                log.debug("nsw removals: class %d: no convergence in %d iterations (residual %.3g)", pr.c,
                          pr.its, r)
                if restart(pr):
                    keep.append((i, pr))
                continue
            slow = r > 0.1 * pr.last
            if r <= CONVERGED or (slow and r <= 1e-12):
                conv.append((i, pr))
                continue
            if not np.isfinite(r) or slow:
                if not np.isfinite(r) or pr.refreshed >= MAX_REFRESH or not lowrank(pr):
                    log.debug("nsw removals: class %d stalls at residual %.3g (t = %.3g)", pr.c, r, pr.t)
                    if restart(pr):
                        keep.append((i, pr))
                    continue
                pr.refreshed += 1
            pr.last = r
            keep.append((i, pr))
            rows.append(j)
        if rows:
            stepping = [pr for (_, pr) in keep if pr.last != np.inf]
            shared = [t for t, pr in enumerate(stepping) if isinstance(pr.low, tuple)]
            Y = lu.solve(np.ascontiguousarray(R[np.asarray(rows)[shared]].T)) if shared else None
            col = 0
            for t, pr in enumerate(stepping):
                if isinstance(pr.low, tuple):
                    y = Y[:, col]
                    col += 1
                    dR, Z, Kinv = pr.low
                    if dR.shape[0]:
                        y = y - Z @ (Kinv @ (dR @ y))
                else:
                    y = pr.low.solve(R[rows[t]])
                pr.z = pr.z - y
                pr.its += 1
        if conv:        # converged programs: their slacks (and gaps) as one array each
            vals, scales = slacks(lay, np.stack([pr.z for _, pr in conv]), np.stack([pr.w for _, pr in conv]),
                                  tuple(np.stack([pr.support[t] for _, pr in conv]) for t in range(4)))
            ready = []
            for (i, pr), val, scale in zip(conv, vals, scales):
                done = finish(pr, val, scale)
                if done == "certify":
                    ready.append((i, pr))
                elif done is None or (done is False and restart(pr)):
                    keep.append((i, pr))
            if ready:
                for (i, pr), ok in zip(ready, certify(ready)):
                    if not ok and restart(pr):
                        keep.append((i, pr))
        progs = keep
