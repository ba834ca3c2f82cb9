r"""The KKT system of the linear-valuation NSW program, laid out over every possible unknown.

The program (classes :math:`c` of :math:`w_c` identical bidders, values :math:`v_{ck} \ge 0`
per GPU of type :math:`k`, demand :math:`d_c \le \infty`, offer :math:`C_k`) and its KKT
conditions are in :mod:`.nsw_newton`. Given a *support* — the edges :math:`E` in use, the
full types :math:`P`, the capped classes :math:`L` — the conditions that hold with equality
form a square system in :math:`(x, p, \lambda, \beta)`:

.. math::

    v_e \beta_c - p_k - \lambda_c = 0\ (e = (c, k) \in E),\quad
    \beta_c \textstyle\sum_{e \in E_c} v_e x_e - 1 = 0,\quad
    \sum_{e \ni k} w_c x_e / C_k - 1 = 0\ (k \in P),\quad
    \sum_{e \in E_c} x_e / d_c - 1 = 0\ (c \in L).

:class:`KKTLayout` gives every possible unknown (each edge with :math:`v_{ck} > 0`, each
price, each finite demand's :math:`\lambda_c`, each :math:`\beta_c`) a *slot*: a slot holds
its equation when the element is in the support and a pinning row (:math:`x_e = 0`,
:math:`p_k = 0`, :math:`\lambda_c = 0`) when it is not. Two more pins: on a *degenerate*
support (two uncapped classes with proportional values sharing two types) the flow around
the cycle is free and one of its price equations repeats the others, so a *dropped* edge's
slot pins a *frozen* edge's flow at a given value instead (:func:`.nsw_newton.degenerate`
chooses them); a class with no bidder left pins its :math:`\beta`. Every program of one
auction — the whole one, each one-bidder-fewer one, at any support — is thus a system of
the same size over the same slots, which is what lets :mod:`.nsw_removals` reuse one
factorisation for all of them.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = ["KKTLayout", "cycle_broken", "slacks", "switch"]


class KKTLayout:
    """The KKT system of the linear NSW program over every possible unknown (see module).

    Parameters
    ----------
    v : ndarray, shape (n, m)
        Values per GPU, zero for types with no GPU offered.
    d : ndarray, shape (n,)
        Demands (``inf``: none).
    C : ndarray, shape (m,)
        GPUs offered of each type.
    """

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
        self.AcT = self.Ac.T.tocsr()
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
        held = (self.AcT @ x.T).T
        r_l = np.where(Lm, held[:, self.lc] / self.d[self.lc] - 1.0, z[:, self.o_l:self.o_b])
        u = (self.AcT @ (x * self.ev).T).T
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


def slacks(lay: KKTLayout, z: np.ndarray, w: np.ndarray, support) -> tuple[np.ndarray, np.ndarray]:
    """The inequalities of a support at ``z`` as one flat array (edges, types, classes), each
    non-negative where it holds, and their scales. In the support: ``x_e``, ``p_k``,
    ``lambda_c``; out of it: price minus bang per buck, unused capacity, unused demand.
    Elements that cannot switch (frozen edges, empty types, classes with no bidder or no
    demand limit) are ``inf``.

    ``z``, ``w`` and each mask of ``support`` may carry a leading batch axis (stacked
    programs); the results then do too."""
    E, P, L, F = (np.asarray(a) for a in support[:4])
    z, w = np.asarray(z), np.asarray(w)
    one = z.ndim == 1
    if one:
        z, w, E, P, L, F = z[None], w[None], E[None], P[None], L[None], F[None]
    B = z.shape[0]
    live = w > 0
    x, p, lam, beta = lay.split(z)
    X = np.zeros((B, lay.n, lay.m))
    X[:, lay.ec, lay.ek] = x
    price = p[:, None, :] + lam[:, :, None]
    bang = lay.v[None] * beta[:, :, None]
    ok_e = live[:, :, None] & (lay.v > 0)[None] & ~F
    ve = np.where(ok_e, np.where(E, X, price - bang), np.inf)
    xs = np.maximum(1.0, np.abs(X).max(axis=(1, 2)))
    se = np.where(E, xs[:, None, None], np.maximum(price, bang) + 1e-300)
    load = np.einsum("bn,bnm->bm", w, X)
    vt = np.where(lay.C > 0, np.where(P, p, lay.C - load), np.inf)
    ps = np.maximum(1e-300, np.abs(p).max(axis=1, initial=0.0))
    st = np.where(P, ps[:, None], lay.Cs)
    fin = np.isfinite(lay.d) & live
    held = X.sum(axis=2)
    dd = np.where(np.isfinite(lay.d), lay.d, 0.0)
    vc = np.where(fin, np.where(L, lam, dd - held), np.inf)
    ls = np.maximum(ps, np.abs(lam).max(axis=1, initial=0.0))
    sc = np.where(L, ls[:, None], np.where(fin, lay.d, 1.0))
    val = np.concatenate([ve.reshape(B, -1), vt, vc], axis=1)
    scale = np.concatenate([se.reshape(B, -1), st, sc], axis=1)
    return (val[0], scale[0]) if one else (val, scale)


def switch(lay: KKTLayout, support, elements: np.ndarray):
    """The support with the given elements of :func:`slacks`' flat order switched in or out
    (edges, then types, then classes); frozen and dropped edges are kept as given."""
    E, P, L, F, D = support
    nm = lay.n * lay.m
    E, P, L = E.copy(), P.copy(), L.copy()
    se = elements[elements < nm]
    E.ravel()[se] = ~E.ravel()[se]
    sk = elements[(elements >= nm) & (elements < nm + lay.m)] - nm
    P[sk] = ~P[sk]
    sc = elements[elements >= nm + lay.m] - nm - lay.m
    L[sc] = ~L[sc]
    return E, P, L, F, D


def cycle_broken(v: np.ndarray, D: np.ndarray, beta: np.ndarray, p: np.ndarray, lam: np.ndarray,
                 tol: float) -> bool:
    """Whether a dropped edge's price equation (``D``, see the module) no longer holds at
    ``beta, p, lam`` to relative ``tol``: it repeats the others only while its cycle stays
    degenerate (no class on it became capped), so the reduction must be made afresh."""
    dc, dk = np.nonzero(D)
    bang, price = v[dc, dk] * beta[dc], p[dk] + lam[dc]
    return bool((np.abs(bang - price) > tol * np.maximum(price, bang)).any())
