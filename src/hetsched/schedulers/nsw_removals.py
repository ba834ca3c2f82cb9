r"""Every "one bidder fewer" program of the partial-allocation payments, solved together.

The hidden payments of the partial-allocation auction (:mod:`.themis_auction`) need, for each
bidder class :math:`c`, the NSW optimum with one bidder of :math:`c` removed. With linear
valuations these programs differ from the whole program (whose certified optimum
:func:`.nsw_newton.certify_support` gives) only in one multiplicity, so they are solved here
from that optimum by Newton's method on the KKT system of :mod:`.nsw_newton`, all at once:

* **One layout.** Every program uses the same square system, with one row slot per possible
  unknown (each edge :math:`(c, k)` with :math:`v_{ck} > 0`, each price, each finite
  demand's :math:`\lambda_c`, each :math:`\beta_c`). A slot holds its equation when the
  element is in the program's support and a pinning row (:math:`x_e = 0`, :math:`p_k = 0`,
  :math:`\lambda_c = 0`, or a frozen edge's :math:`x_f = x_f^\ast` in a dropped edge's slot
  on a degenerate support) when it is not.
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
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from .nsw_newton import (
    GAP_TOL,
    MAX_SUPPORTS,
    SUPPORT_TOL,
    LinearNSW,
    _degenerate,
    nsw_bounds,
)

__all__ = ["CHORD_TOL", "solve_removals"]

log = logging.getLogger(__name__)

#: A utility row whose class moved by more than this (relative change of utility) is updated
#: exactly (low rank) instead of left at the whole program's values.
CHORD_TOL = 1e-2
#: A support whose inequalities break by more than this (relative) at the path's target is
#: not switched there: the target moves half-way back to the last point where it held.
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
#: Iterations per program and way (straight to ``t = 1``, then along the path) before it
#: gives that way up.
MAX_ITERATIONS = 100


class _Layout:
    """Slot indices shared by every program (see module)."""

    def __init__(self, v: np.ndarray, d: np.ndarray, C: np.ndarray):
        n, m = v.shape
        self.n, self.m = n, m
        self.v, self.d, self.C = v, d, C
        self.Cs = np.where(C > 0, C, 1.0)
        self.ec, self.ek = np.nonzero(v > 0)
        self.ev = v[self.ec, self.ek]
        nE = self.ec.size
        self.eid = np.full((n, m), -1)
        self.eid[self.ec, self.ek] = np.arange(nE)
        self.lc = np.flatnonzero(np.isfinite(d))
        self.pos_l = np.full(n, -1)
        self.pos_l[self.lc] = np.arange(self.lc.size)
        self.o_p, self.o_l = nE, nE + m
        self.o_b = nE + m + self.lc.size
        self.N = self.o_b + n
        self.Ak = np.zeros((nE, m))
        self.Ak[np.arange(nE), self.ek] = 1.0
        self.Ac = sp.csr_matrix((np.ones(nE), (np.arange(nE), self.ec)), shape=(nE, n))
        self.by_class = [self.eid[c][self.eid[c] >= 0] for c in range(n)]
        self.by_type = [self.eid[:, k][self.eid[:, k] >= 0] for k in range(m)]

    def kinds(self, E, P, L, F, D, gone=None):
        """``(edge kinds, partner, P, L over lc, gone)``: 0 pin ``x_e = 0``, 1 price equation,
        2 pin the frozen ``partner``; ``gone`` classes (no bidder left) pin their beta; None
        when frozen and dropped edges do not pair up."""
        kind = np.where(E[self.ec, self.ek], 1, 0).astype(np.int8)
        partner = np.full(self.ec.size, -1)
        dr = self.eid[np.nonzero(E & D)]
        fr = self.eid[np.nonzero(E & F)]
        if dr.size != fr.size:
            return None
        kind[dr] = 2
        partner[dr] = fr
        gone = np.zeros(self.n, dtype=bool) if gone is None else gone
        return kind, partner, P.copy(), L[self.lc].copy(), gone

    def split(self, z):
        """``(x over edges, p, lambda over all classes, beta)`` of stacked points (B, N)."""
        lam = np.zeros((z.shape[0], self.n))
        lam[:, self.lc] = z[:, self.o_l:self.o_b]
        return z[:, :self.o_p], z[:, self.o_p:self.o_l], lam, z[:, self.o_b:]

    def residuals(self, z, kind, partner, P, Lm, gone, W, fixed, beta0):
        """Residuals of stacked programs (all arguments but ``fixed``, ``beta0`` stacked on
        axis 0)."""
        x, p, lam, beta = self.split(z)
        ec, ek = self.ec, self.ek
        f1 = self.ev * beta[:, ec] - p[:, ek] - lam[:, ec]
        safe = np.maximum(partner, 0)
        pin = np.take_along_axis(x, safe, axis=1) - fixed[safe]
        r_e = np.where(kind == 1, f1, np.where(kind == 2, pin, x))
        load = (x * W[:, ec]) @ self.Ak
        r_p = np.where(P, load / self.Cs - 1.0, p)
        held = (self.Ac.T @ x.T).T
        r_l = np.where(Lm, held[:, self.lc] / self.d[self.lc] - 1.0, z[:, self.o_l:self.o_b])
        u = (self.Ac.T @ (x * self.ev).T).T
        r_b = np.where(gone, beta - beta0, beta * u - 1.0)
        return np.concatenate([r_e, r_p, r_l, r_b], axis=1)

    def matrix(self, kinds, w, z):
        """The Jacobian of one program at ``z`` (CSC)."""
        kind, partner, P, Lm, gone = kinds
        x, _, _, beta = (a[0] for a in self.split(z[None, :]))
        ec, ek, ev = self.ec, self.ek, self.ev
        e = np.arange(ec.size)
        one = kind == 1
        hl = one & (self.pos_l[ec] >= 0)
        two = kind == 2
        fp = P[ek]
        cl = self.pos_l[ec]
        fl = cl >= 0
        fl[fl] = Lm[cl[fl]]
        kk = np.arange(self.m)
        li = np.arange(self.lc.size)
        u = np.where(gone, 1.0, np.bincount(ec, weights=ev * x, minlength=self.n))
        nb = np.arange(self.n)
        ue = ~gone[ec]
        rows = [e[one], e[one], e[hl], e[kind == 0], e[two], self.o_p + ek[fp], self.o_p + kk[~P],
                self.o_l + cl[fl], self.o_l + li[~Lm], self.o_b + ec[ue], self.o_b + nb]
        cols = [self.o_b + ec[one], self.o_p + ek[one], self.o_l + cl[hl], e[kind == 0], partner[two], e[fp],
                self.o_p + kk[~P], e[fl], self.o_l + li[~Lm], e[ue], self.o_b + nb]
        vals = [ev[one], -np.ones(int(one.sum())), -np.ones(int(hl.sum())), np.ones(int((kind == 0).sum())),
                np.ones(int(two.sum())), w[ec[fp]] / self.Cs[ek[fp]], np.ones(int((~P).sum())),
                1.0 / self.d[ec[fl]], np.ones(int((~Lm).sum())), beta[ec[ue]] * ev[ue], u]
        return sp.csc_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                             shape=(self.N, self.N))

    def row(self, s, kinds, w, z):
        """Slot ``s``'s row of one program's Jacobian at ``z`` (dense)."""
        kind, partner, P, Lm, gone = kinds
        r = np.zeros(self.N)
        if s < self.o_p:
            if kind[s] == 0:
                r[s] = 1.0
            elif kind[s] == 2:
                r[partner[s]] = 1.0
            else:
                c, k = self.ec[s], self.ek[s]
                r[self.o_b + c] = self.ev[s]
                r[self.o_p + k] = -1.0
                if self.pos_l[c] >= 0:
                    r[self.o_l + self.pos_l[c]] = -1.0
        elif s < self.o_l:
            k = s - self.o_p
            if P[k]:
                es = self.by_type[k]
                r[es] = w[self.ec[es]] / self.Cs[k]
            else:
                r[s] = 1.0
        elif s < self.o_b:
            j = s - self.o_l
            if Lm[j]:
                c = self.lc[j]
                r[self.by_class[c]] = 1.0 / self.d[c]
            else:
                r[s] = 1.0
        else:
            c = s - self.o_b
            if gone[c]:
                r[s] = 1.0
            else:
                es = self.by_class[c]
                r[es] = z[self.o_b + c] * self.ev[es]
                r[s] = float((self.ev[es] * z[es]).sum())
        return r


class _Program:
    """One removal program's state in the batch: the path from the whole program (``t = 0``)
    to one bidder fewer in class ``c`` (``t = 1``), with the last point where the support
    held (``t_lo``, ``z_lo``)."""

    __slots__ = ("c", "t", "t_lo", "z_lo", "support", "kinds", "z", "w", "last", "refreshed", "switches",
                 "its", "low", "path")

    def __init__(self, c, support, z, path=False):
        self.c, self.support, self.z, self.path = c, support, z, path
        self.t, self.t_lo, self.z_lo = 1.0, 0.0, z.copy()
        self.last, self.refreshed, self.switches, self.its = np.inf, 0, 0, 0
        self.kinds = self.low = self.w = None


def _slacks(lay: _Layout, z: np.ndarray, w: np.ndarray, support) -> tuple[np.ndarray, np.ndarray]:
    """The inequalities of a support at ``z`` as one flat array (edges, types, classes), each
    non-negative where it holds, and their scales. In the support: ``x_e``, ``p_k``,
    ``lambda_c``; out of it: price minus bang per buck, unused capacity, unused demand.
    Elements that cannot switch (frozen edges, empty types, classes with no bidder or no
    demand limit) are ``inf``."""
    E, P, L, F, _ = support
    live = w > 0
    x, p, lam, beta = (a[0] for a in lay.split(z[None, :]))
    X = np.zeros((lay.n, lay.m))
    X[lay.ec, lay.ek] = x
    price = p[None, :] + lam[:, None]
    bang = lay.v * beta[:, None]
    ok_e = live[:, None] & (lay.v > 0) & ~F
    ve = np.where(ok_e, np.where(E, X, price - bang), np.inf)
    se = np.where(E, max(1.0, float(np.abs(X).max(initial=0.0))), np.maximum(price, bang) + 1e-300)
    load = (w[:, None] * X).sum(axis=0)
    vt = np.where(lay.C > 0, np.where(P, p, lay.C - load), np.inf)
    st = np.where(P, max(1e-300, float(np.abs(p).max(initial=0.0))), lay.Cs)
    fin = np.isfinite(lay.d) & live
    held = X.sum(axis=1)
    vc = np.where(fin, np.where(L, lam, np.where(fin, lay.d, 0.0) - held), np.inf)
    sc = np.where(L, max(1e-300, float(np.abs(lam).max(initial=0.0)), float(np.abs(p).max(initial=0.0))),
                  np.where(fin, lay.d, 1.0))
    return np.concatenate([ve.ravel(), vt, vc]), np.concatenate([se.ravel(), st, sc])


def solve_removals(v: np.ndarray, w: np.ndarray, d: np.ndarray, C: np.ndarray, base: LinearNSW,
                   classes: np.ndarray) -> list[LinearNSW | None]:
    """Certified optima of the programs without one bidder of each of ``classes``.

    Each program follows the path :math:`w(t) = w - t e_c` from the whole program's optimum
    (``t = 0``) to its own (``t = 1``), in one chord-Newton solve when its support holds
    there. Where inequalities break by little (at most :data:`BACKOFF`), they switch in or
    out of the support and the solve repeats at the same ``t``. A program that fails that way,
    or whose bidder holds more than :data:`PATH_SHARE` of a type, goes along the path: where inequalities break by more, the target moves back to
    just past the first break point on the segment from the last ``t`` where the support
    held (linear interpolation of the slacks, a ratio test as in the simplex method), so that
    supports change close to where they should.

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
    lay = _Layout(v, d, C)
    base_kinds = lay.kinds(*base.support)
    out: list[LinearNSW | None] = [None] * len(classes)
    if base_kinds is None or not len(classes):
        return out
    X0 = base.x
    u0 = (v * X0).sum(axis=1)
    z0 = np.concatenate([X0[lay.ec, lay.ek], base.prices, base.caps[lay.lc], 1.0 / u0])
    fixed = z0[:lay.o_p]
    J = lay.matrix(base_kinds, w, z0)
    lu = spla.splu(J)
    J = J.tocsr()
    cols: dict[int, np.ndarray] = {}
    base_rows: dict[int, np.ndarray] = {}
    degenerate = bool(base.support[4].any())
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

    def base_row(s):
        r = base_rows.get(s)
        if r is None:
            r = base_rows[s] = J[s].toarray().ravel()
        return r

    def reduce(E, P, L, beta, wc):
        """Frozen and dropped edges of a support (one QR per distinct support, shared)."""
        key = np.packbits(np.concatenate([E.ravel(), P, L])).tobytes()
        if key not in reductions:
            live = wc > 0
            fd = _degenerate(v[live], wc[live], d[live], C, E[live], P, L[live], beta[live])
            if fd is not None:
                F = np.zeros_like(E)
                D = np.zeros_like(E)
                F[live], D[live] = fd
                fd = (F, D)
            reductions[key] = fd
        return reductions[key]

    def configure(pr: _Program, rereduce: bool = False) -> bool:
        """Kinds and Woodbury data of ``pr`` at its ``t``, support and point; False if that
        system cannot be set up (frozen edges that do not pair, a singular update)."""
        E, P, L, F, D = pr.support
        pr.w = w.copy()
        pr.w[pr.c] -= pr.t
        gone = np.zeros(lay.n, dtype=bool)
        if pr.w[pr.c] <= 0:      # no bidder left: its edges, cap and utility are pinned
            pr.w[pr.c] = 0.0
            gone[pr.c] = True
            E, L = E.copy(), L.copy()
            E[pr.c], L[pr.c] = False, False
            P = P & E.any(axis=0)   # a type nobody else is on cannot be full
        # a bidder with no demand limit on a type wants all of it at a zero price: full
        P = P | ((E & ~L[:, None] & (pr.w > 0)[:, None]).any(axis=0) & (C > 0))
        if degenerate:       # (cached per support: one QR for all programs that reach it)
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
        pr.refreshed = 0
        return lowrank(pr)

    def lowrank(pr: _Program) -> bool:
        """Woodbury data of ``pr`` at its current point; False if singular."""
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
        S = [s for s, k in zip(S, keep) if k]
        dR = dR[keep]
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

    def finish(pr: _Program, i: int) -> bool | None:
        """A converged point: certified into ``out[i]`` (True), given up (False), or the path
        goes on (None; ``pr`` reconfigured)."""
        E, P, L, F, D = pr.support
        live = pr.w > 0
        x, p, lam, beta = (a[0] for a in lay.split(pr.z[None, :]))
        val, scale = _slacks(lay, pr.z, pr.w, pr.support)
        bad = val < -SUPPORT_TOL * scale
        if not bad.any() and degenerate and D.any():
            dc, dk = np.nonzero(D & live[:, None])
            bang, price = lay.v[dc, dk] * beta[dc], p[dk] + lam[dc]
            if (np.abs(bang - price) > SUPPORT_TOL * np.maximum(price, bang)).any():
                # a degenerate cycle broke (a class on it became capped): reduce afresh, same point
                log.debug("nsw removals: class %d breaks a degenerate cycle", pr.c)
                pr.switches += 1
                return None if pr.switches <= 4 * MAX_SUPPORTS and configure(pr, rereduce=True) else False
        if not bad.any():
            if pr.t >= 1.0:
                X = np.zeros((lay.n, lay.m))
                X[lay.ec, lay.ek] = x
                lo, hi, xf = nsw_bounds(lay.v, pr.w, lay.d, lay.C, X, p, lam)
                if hi - lo <= GAP_TOL:
                    out[i] = LinearNSW(xf, np.maximum(p, 0.0), np.where(live, np.maximum(lam, 0.0), 0.0), lo, hi,
                                       (E, P, L, F, D), pr.its)
                    return True
                log.debug("nsw removals: class %d gap %.3g", pr.c, hi - lo)
                return False
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
            w_lo = w.copy()
            w_lo[pr.c] -= pr.t_lo
            val_lo, _ = _slacks(lay, pr.z_lo, w_lo, pr.support)
            lo = np.maximum(np.where(np.isfinite(val_lo), val_lo, 0.0), 0.0)[bad]
            theta = min(1.0, float((lo / np.maximum(lo - val[bad], 1e-300)).min()) + RATIO_PAST)
            pr.t = pr.t_lo + theta * (pr.t - pr.t_lo)
            pr.z = pr.z_lo + theta * (pr.z - pr.z_lo)
            return None if configure(pr) else False
        # close to it: the inequalities that break first on the segment from the last point
        # where the support held switch here (several at once can ask for an inconsistent
        # support: two classes entering the same pair of types)
        w_lo = w.copy()
        w_lo[pr.c] -= pr.t_lo
        val_lo, _ = _slacks(lay, pr.z_lo, w_lo, pr.support)
        lo = np.maximum(np.where(np.isfinite(val_lo), val_lo, 0.0), 0.0)[bad]
        theta = lo / np.maximum(lo - val[bad], 1e-300)
        nm = lay.n * lay.m
        switch = np.flatnonzero(bad)[theta <= theta.min() + FIRST_TOL]
        E, P, L = E.copy(), P.copy(), L.copy()
        se = switch[switch < nm]
        E.ravel()[se] = ~E.ravel()[se]
        sk = switch[(switch >= nm) & (switch < nm + lay.m)] - nm
        P[sk] = ~P[sk]
        sc = switch[switch >= nm + lay.m] - nm - lay.m
        L[sc] = ~L[sc]
        pr.support = (E, P, L, F, D)
        return None if configure(pr) else False

    def restart(pr: _Program) -> bool:
        """A program that failed going straight to ``t = 1`` starts again along the path."""
        if pr.path:
            return False
        pr.path, pr.t, pr.t_lo = True, 1.0, 0.0
        pr.z, pr.z_lo = z0.copy(), z0.copy()
        pr.support = tuple(a.copy() for a in base.support)
        pr.switches = pr.its = 0
        return configure(pr)

    progs = []
    share = (X0 / lay.Cs).max(axis=1)
    for i, c in enumerate(np.asarray(classes, dtype=np.int64)):
        pr = _Program(int(c), tuple(a.copy() for a in base.support), z0.copy(), path=bool(share[c] > PATH_SHARE))
        if configure(pr) or restart(pr):
            progs.append((i, pr))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):   # divergence is caught below
        _run(progs, lay, lu, fixed, u0, finish, lowrank, restart)
    return out


def _run(progs, lay, lu, fixed, u0, finish, lowrank, restart) -> None:
    """The lockstep iterations (see :func:`solve_removals`)."""
    while progs:
        Zs = np.array([pr.z for _, pr in progs])
        R = lay.residuals(Zs, *(np.stack([pr.kinds[t] for _, pr in progs]) for t in range(5)),
                          np.stack([pr.w for _, pr in progs]), fixed, 1.0 / u0)
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
            if r <= 1e-14 or (slow and r <= 1e-12):
                done = finish(pr, i)
                if done is None or (done is False and restart(pr)):
                    keep.append((i, pr))
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
        progs = keep
