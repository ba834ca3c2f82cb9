r"""Certified Nash-social-welfare optima for *linear* valuations by active-set Newton.

The partial-allocation auction (:mod:`.themis_auction`) needs the NSW optimum of the whole
offer and of the offer without each bidder class: with ``c`` classes, ``c + 1`` programs that
differ from one another by one bidder. A conic solve each is exact but costs milliseconds;
this module solves the programs with linear valuations to machine precision from a nearby
solution (the first program's conic optimum, then the whole-offer optimum for each removal)
and *certifies* each result with a duality gap, so that nothing it returns is trusted on
faith: a program whose gap does not close is handed back (``None``) and solved conically.

The program (classes :math:`c` of :math:`w_c` identical bidders, values :math:`v_{ck} \ge 0`
per GPU of type :math:`k`, demand :math:`d_c \le \infty`, offer :math:`C_k`):

.. math::

    \max_{x \ge 0} \sum_c w_c \log u_c,\quad u_c = \sum_k v_{ck} x_{ck},\quad
    \sum_c w_c x_{ck} \le C_k\ (p_k),\quad \sum_k x_{ck} \le d_c\ (w_c \lambda_c).

KKT conditions, with :math:`\beta_c = 1/u_c` (each bidder's marginal utility of money):

.. math::

    v_{ck}\beta_c \le p_k + \lambda_c \text{ (equality where } x_{ck} > 0),\quad
    \beta_c u_c = 1,\quad p, \lambda \ge 0 \text{ complementary to their rows}.

Given the *support* — the edges :math:`E = \{(c, k): x_{ck} > 0\}`, the full types
:math:`P` (:math:`p_k > 0`) and the capped classes :math:`L` (:math:`\lambda_c > 0`) — the
conditions that hold with equality are a square system (:mod:`.nsw_kkt`), solved by
Newton's method (sparse LU). The result is checked against the inequalities; the broken
ones switch (an edge with :math:`x_e < 0` leaves :math:`E`, an edge whose bang per buck
:math:`v_{ck}\beta_c` exceeds :math:`p_k + \lambda_c` joins it, likewise for :math:`P` and
:math:`L`) and Newton runs again, a few times at most. A degenerate support (two uncapped
classes with proportional values sharing two types: the flow around the cycle is free and
one of its price equations repeats the others) is made regular by :func:`degenerate`.

Certificate
-----------
Any :math:`p, \lambda \ge 0` bound the optimum from above by the Lagrange dual

.. math::

    D(p, \lambda) = \sum_k p_k C_k + \sum_c w_c\Big(\lambda_c d_c - 1 +
    \log \max_k \frac{v_{ck}}{p_k + \lambda_c}\Big)

(each bidder's inner problem :math:`\max_{x \ge 0} \log v_c^\top x - (p + \lambda_c)^\top x`
is solved by spending one unit on its best bang per buck), and any feasible :math:`x` from
below by its objective. The feasible :math:`x` used is Newton's, clipped at 0 and scaled down
by the one factor that makes every capacity and demand row hold. A program is *certified*
when :math:`D - \text{objective} \le` :data:`GAP_TOL`; its objective is then within that
of the optimum, which is what the hidden payments (exponentials of differences of optima)
need.

In numpy, the dual bound of prices ``p`` (types) and ``lam`` (classes, 0 where demand is
infinite): ``(p * C).sum() + (w * (np.where(lam > 0, lam * d, 0) - 1 + np.log((v / (p + lam[:, None])).max(1)))).sum()``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import scipy.sparse.linalg as spla

from .nsw_kkt import KKTLayout, cycle_broken, slacks, switch

__all__ = ["GAP_TOL", "LinearNSW", "certify_support", "degenerate", "nsw_bounds"]

log = logging.getLogger(__name__)

#: Largest duality gap (in the objective's log units) a certified result may have.
GAP_TOL = 1e-9
#: Relative tolerance of the support checks (sign of x, p, lambda; bang per buck; rows).
SUPPORT_TOL = 1e-10
#: Newton iterations per support, and support changes per program, before giving up.
MAX_NEWTON = 12
MAX_SUPPORTS = 8
#: Relative thresholds at which a start's entries count as in the support, tried in turn.
START_THRESHOLDS = (1e-7, 1e-3, 5e-2)


@dataclass(frozen=True, eq=False)
class LinearNSW:
    """A certified optimum of the linear-valuation NSW program.

    Attributes
    ----------
    x : ndarray, shape (n, m)
        A feasible allocation per bidder of each class (zero rows for classes with ``w = 0``).
    prices : ndarray, shape (m,)
        :math:`p_k \\ge 0`.
    caps : ndarray, shape (n,)
        :math:`\\lambda_c \\ge 0` (0 where the demand is infinite).
    objective : float
        :math:`\\sum_c w_c \\log u_c` of ``x`` (a lower bound of the optimum).
    bound : float
        :math:`D(p, \\lambda)` (an upper bound of the optimum).
    support : tuple of ndarray
        ``(edges (n, m), full types (m,), capped classes (n,), frozen edges (n, m), dropped
        edges (n, m))``, boolean masks (see :mod:`.nsw_kkt`).
    newton : int
        Newton iterations spent.
    """

    x: np.ndarray
    prices: np.ndarray
    caps: np.ndarray
    objective: float
    bound: float
    support: tuple[np.ndarray, np.ndarray, np.ndarray]
    newton: int

    @property
    def gap(self) -> float:
        """``bound - objective`` (certified: at most :data:`GAP_TOL`)."""
        return self.bound - self.objective


def nsw_bounds(v: np.ndarray, w: np.ndarray, d: np.ndarray, C: np.ndarray, x: np.ndarray, p: np.ndarray,
               lam: np.ndarray) -> tuple[float, float, np.ndarray]:
    """Lower and upper bounds of the optimum from any ``x`` and any ``p, lam`` (see module).

    ``x`` is clipped at 0 and scaled into the feasible set first; the scaled ``x`` is
    returned. ``p`` and ``lam`` are clipped at 0 (``lam`` is 0 where ``d`` is infinite).
    Classes with ``w = 0`` count in neither bound. A bound that does not exist (a bidder
    with zero utility; a valued type priced at 0 for an uncapped class) is ``-inf`` /
    ``inf``. ``w``, ``x``, ``p`` and ``lam`` may carry a leading batch axis (stacked
    programs); the bounds are then arrays.
    """
    w, x, p, lam = (np.asarray(a, dtype=float) for a in (w, x, p, lam))
    one = x.ndim == 2
    if one:
        w, x, p, lam = w[None], x[None], p[None], lam[None]
    live = w > 0
    x = np.where(live[:, :, None], np.maximum(x, 0.0), 0.0)
    load = np.einsum("bn,bnm->bm", w, x)
    held = x.sum(axis=2)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        s = np.minimum(np.minimum(1.0, np.where(load > 0, C / load, np.inf).min(axis=1, initial=np.inf)),
                       np.where(held > 0, d / held, np.inf).min(axis=1, initial=np.inf))
        x = x * s[:, None, None]
        u = (v[None] * x).sum(axis=2)
        lower = np.where((u > 0) | ~live, w * np.log(np.where(live, u, 1.0)), -np.inf).sum(axis=1)
        p = np.maximum(p, 0.0)
        lam = np.where(np.isfinite(d), np.maximum(lam, 0.0), 0.0)
        price = p[:, None, :] + lam[:, :, None]
        bang = np.where(v[None] > 0, v[None] / price, 0.0).max(axis=2)
        capterm = np.where(lam > 0, lam * d, 0.0)
        upper = (p * C).sum(axis=1) + np.where(live, w * (capterm - 1.0 + np.log(np.where(live, bang, 1.0))),
                                               0.0).sum(axis=1)
    upper = np.where(np.isfinite(upper), upper, np.inf)
    lower = np.where(np.isnan(lower), -np.inf, lower)
    if one:
        return float(lower[0]), float(upper[0]), x[0]
    return lower, upper, x


def degenerate(v, w, d, C, E, P, L, beta):
    """Frozen and dropped edges that make a degenerate support's system square and regular.

    The bang-per-buck rows (one per edge, in ``(p_P, lambda_L, beta)``) and the flow columns
    (one per edge, in the utility, capacity and demand rows) are each reduced to a maximal
    independent set by QR with column pivoting; the edges left out are dropped (rows) and
    frozen (columns). Returns ``(F, D)`` masks, or None when the two deficiencies differ.

    Only edges of classes with two or more edges can take part: a one-edge class's row is
    the only one with its :math:`\beta_c` and its flow the only one in its utility row. The
    QR runs on those edges alone (a handful where the full support has hundreds).
    """
    import scipy.linalg as sla

    n, m = v.shape
    multi = E & (E.sum(axis=1) >= 2)[:, None]
    ec, ek = np.nonzero(multi)
    nE = ec.size
    Pk, Lc = np.flatnonzero(P), np.flatnonzero(L)
    pos_p = np.full(m, -1)
    pos_p[Pk] = np.arange(Pk.size)
    pos_l = np.full(n, -1)
    pos_l[Lc] = np.arange(Lc.size)
    e = np.arange(nE)
    A = np.zeros((nE, Pk.size + Lc.size + n))          # bang-per-buck rows
    h = pos_p[ek] >= 0
    A[e[h], pos_p[ek[h]]] = -1.0
    h = pos_l[ec] >= 0
    A[e[h], Pk.size + pos_l[ec[h]]] = -1.0
    A[e, Pk.size + Lc.size + ec] = v[ec, ek]
    B = np.zeros((n + Pk.size + Lc.size, nE))          # flow columns
    B[ec, e] = beta[ec] * v[ec, ek]
    h = pos_p[ek] >= 0
    B[n + pos_p[ek[h]], e[h]] = w[ec[h]] / C[ek[h]]
    h = pos_l[ec] >= 0
    B[n + Pk.size + pos_l[ec[h]], e[h]] = 1.0 / d[ec[h]]

    def independent(M):
        if M.size == 0:
            return np.arange(M.shape[1])
        R, piv = sla.qr(M, mode="r", pivoting=True)
        diag = np.abs(np.diag(R))
        rank = int((diag > 1e-10 * max(diag.max(initial=0.0), 1e-300)).sum())
        return piv[:rank]

    rows = independent(A.T)
    cols = independent(B)
    if rows.size != cols.size:
        return None
    D = np.zeros((n, m), dtype=bool)
    F = np.zeros((n, m), dtype=bool)
    drop = np.setdiff1d(e, rows)
    frz = np.setdiff1d(e, cols)
    D[ec[drop], ek[drop]] = True
    F[ec[frz], ek[frz]] = True
    return F, D


def certify_support(v: np.ndarray, w: np.ndarray, d: np.ndarray, C: np.ndarray, x0: np.ndarray,
                    p0: np.ndarray | None = None, lam0: np.ndarray | None = None,
                    support: tuple[np.ndarray, ...] | None = None) -> LinearNSW | None:
    """Solve the linear NSW program from a nearby point and certify it, or return None.

    Parameters
    ----------
    v : ndarray, shape (n, m)
        Values per GPU (non-negative; every class with ``w > 0`` values some type with
        ``C > 0``).
    w : ndarray, shape (n,)
        Bidders per class (non-negative; 0 takes the class out of the program).
    d : ndarray, shape (n,)
        Demands (``inf``: none).
    C : ndarray, shape (m,)
        GPUs offered of each type.
    x0 : ndarray, shape (n, m)
        A nearby allocation (a conic solution, or a neighbouring program's optimum).
    p0, lam0 : ndarray, optional
        Nearby multipliers (shapes (m,), (n,)); fitted to ``x0`` by least squares when not
        given.
    support : tuple of ndarray, optional
        ``LinearNSW.support`` of a neighbouring program to start from; derived from ``x0``
        with a relative threshold when not given.

    Returns
    -------
    LinearNSW or None
        None when Newton fails on every support tried or the gap stays above
        :data:`GAP_TOL` (the caller then solves the program another way).
    """
    n, m = v.shape
    keep = np.flatnonzero(w > 0)
    sub = None
    if support is not None:
        E, P, L, F, D = support
        sub = (E[keep], P, L[keep], F[keep], D[keep])
    res = _certify_live(np.where((C > 0)[None, :], v[keep], 0.0), w[keep].astype(float), d[keep], C, x0[keep],
                        p0, None if lam0 is None else lam0[keep], sub)
    if res is None:
        return None
    x = np.zeros((n, m))
    x[keep] = res.x
    lam = np.zeros(n)
    lam[keep] = res.caps
    E, P, L, F, D = res.support
    full = []
    for a in (E, L, F, D):
        b = np.zeros((n,) + a.shape[1:], dtype=bool)
        b[keep] = a
        full.append(b)
    return LinearNSW(x, res.prices, lam, res.objective, res.bound, (full[0], P, full[1], full[2], full[3]), res.newton)


def _certify_live(v, w, d, C, x0, p0, lam0, support):
    """:func:`certify_support` over classes with ``w > 0`` only.

    Without a given support, the support is read off ``x0`` with the relative thresholds of
    :data:`START_THRESHOLDS` in turn (a conic solution needs the first; a rougher start, the
    later ones) until one certifies.
    """
    if support is not None:
        return _certify_from(v, w, d, C, x0, p0, lam0, support)
    n, m = v.shape
    scale = max(1.0, float(np.abs(x0).max(initial=0.0)))
    x = np.maximum(x0, 0.0)
    load = (w[:, None] * x).sum(axis=0)
    held = x.sum(axis=1)
    for thr in START_THRESHOLDS:
        E = (x0 > thr * scale) & (v > 0)
        P = (load >= C * (1 - thr)) & (C > 0)
        L = np.isfinite(d) & (held >= d * (1 - thr))
        none = np.zeros((n, m), dtype=bool)
        res = _certify_from(v, w, d, C, x0, p0, lam0, (E, P, L, none, none.copy()))
        if res is not None:
            return res
    return None


def _certify_from(v, w, d, C, x0, p0, lam0, support):
    """:func:`certify_support` from a given support (see there)."""
    E, P, L, F, D = (np.array(a, dtype=bool) for a in support)
    E &= v > 0
    L &= np.isfinite(d)
    X = np.maximum(np.where(E, x0, 0.0), 0.0)
    u = (v * X).sum(axis=1)
    if (u <= 0).any():
        return None
    beta = 1.0 / u
    if p0 is None or lam0 is None:
        p0, lam0 = _multipliers(v, E, P, L, beta)
    lay = KKTLayout(v, d, C)
    z = np.concatenate([X[lay.ec, lay.ek], np.where(P, p0, 0.0), np.where(L, lam0, 0.0)[lay.lc], beta])
    total = 0
    reduced = False
    for _ in range(MAX_SUPPORTS):
        support = (E, P, L, F & E, D & E)
        kinds = lay.kinds(*support)
        z_fix = z[:lay.o_p].copy()          # where frozen edges stay
        z, it = (None, 0) if kinds is None else _newton(lay, kinds, w, z, z_fix)
        total += it
        if z is None:
            if reduced:
                log.debug("nsw newton: no solution on a support of %d edges", int(E.sum()))
                return None
            fd = degenerate(v, w, d, C, E, P, L, beta)
            if fd is None:
                return None
            F, D = fd
            z = np.concatenate([X[lay.ec, lay.ek], np.where(P, p0, 0.0), np.where(L, lam0, 0.0)[lay.lc], beta])
            reduced = True
            continue
        x, p, lam, beta = (a[0] for a in lay.split(z[None, :]))
        X = np.zeros_like(v)
        X[lay.ec, lay.ek] = x
        val, scale = slacks(lay, z, w, support)
        bad = val < -SUPPORT_TOL * scale
        if not bad.any() and cycle_broken(v, support[4], beta, p, lam, SUPPORT_TOL):
            F, D = np.zeros_like(E), np.zeros_like(E)     # reduce afresh on the same support
            p0, lam0 = p, lam
            reduced = False
            continue
        if not bad.any():
            lo, hi, xf = nsw_bounds(v, w, d, C, X, p, lam)
            if hi - lo <= GAP_TOL:
                return LinearNSW(xf, np.maximum(p, 0.0), np.maximum(lam, 0.0), lo, hi, support, total)
            log.debug("nsw newton: support consistent but gap %.3g > %.3g", hi - lo, GAP_TOL)
            return None
        E, P, L, _, _ = switch(lay, support, np.flatnonzero(bad))
        z = np.where(np.isfinite(z), z, 0.0)
        F, D = np.zeros_like(E), np.zeros_like(E)      # a new support may be regular, or degenerate elsewhere
        p0, lam0 = p, lam
        reduced = False
    return None


def _newton(lay: KKTLayout, kinds, w: np.ndarray, z: np.ndarray, z_fix: np.ndarray):
    """Newton's method on one support from ``z``: ``(z, iterations)``, ``z`` None when the
    system is singular or the iteration does not converge."""
    beta0 = z[lay.o_b:].copy()
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for it in range(MAX_NEWTON + 1):
            F = lay.residuals(z[None, :], *(k[None, ...] for k in kinds), w[None, :], z_fix, beta0)[0]
            res = float(np.abs(F).max(initial=0.0))
            if not np.isfinite(res):
                return None, it
            if res <= 1e-14:
                return z, it
            if it == MAX_NEWTON:
                break
            try:
                z = z - spla.splu(lay.matrix(kinds, w, z)).solve(F)
            except RuntimeError:        # singular
                return None, it
    return (z if res <= 1e-12 else None), MAX_NEWTON


def _multipliers(v, E, P, L, beta):
    """``p_P, lambda_L`` fitting ``v_e beta_c = p_k + lambda_c`` on the edges (least squares)."""
    n, m = v.shape
    ec, ek = np.nonzero(E)
    Pk, Lc = np.flatnonzero(P), np.flatnonzero(L)
    A = np.zeros((ec.size, Pk.size + Lc.size))
    pp = np.full(m, -1)
    pp[Pk] = np.arange(Pk.size)
    pl = np.full(n, -1)
    pl[Lc] = Pk.size + np.arange(Lc.size)
    rows = np.arange(ec.size)
    ok = pp[ek] >= 0
    A[rows[ok], pp[ek[ok]]] = 1.0
    ok = pl[ec] >= 0
    A[rows[ok], pl[ec[ok]]] = 1.0
    sol = np.linalg.lstsq(A, v[ec, ek] * beta[ec], rcond=None)[0] if A.size else np.zeros(0)
    p = np.zeros(m)
    p[Pk] = sol[:Pk.size]
    lam = np.zeros(n)
    lam[Lc] = sol[Pk.size:]
    return p, lam
