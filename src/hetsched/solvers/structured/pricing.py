r"""Closed-form per-job pricing for the block-angular allocation LPs.

With capacity prices :math:`\lambda \ge 0` every job's sub-problem is an LP over its own
two rows, solved here in closed form for all jobs at once (numpy, no per-job Python).

Level mode. Reaching level :math:`t` on type k alone takes :math:`X_{jk} = t / A_{jk}` and
costs :math:`q_{jk} = W_{jk} \lambda_k / A_{jk}` per unit of level; the job's price of a
unit of level is :math:`\theta_j = \min_k q_{jk}`.

Floor mode. With profit per unit of time :math:`r_{jk} = c_{jk} - W_{jk}\lambda_k`, the
job's polytope :math:`P_j = \{x \ge 0,\ \sum_k x_k \le 1,\ A_j \cdot x \ge f_j\}` has
vertices with at most two nonzeros:

* the origin (when :math:`f_j \le 0`);
* :math:`x_k = 1` ("full") and :math:`x_k = f_j / A_{jk}` ("floor") for types with
  :math:`A_{jk} \ge f_j`;
* pairs :math:`A_{jk} < f_j < A_{jl}` with both rows tight:
  :math:`x_k = (A_{jl} - f_j)/(A_{jl} - A_{jk})`, :math:`x_l = 1 - x_k`, which can beat the
  single-type vertices only when :math:`r_{jk} > r_{jl}`.

:func:`floor_best` returns the best vertex, its value and the runner-up value.
"""

from __future__ import annotations

import numpy as np

__all__ = ["CHUNK_ROWS", "FloorChoice", "floor_best", "vertex_signature"]

#: Rows processed at once by the floor-mode pricing (bounds temporary memory).
CHUNK_ROWS = 131_072

ORIGIN, SINGLE, PAIR = 0, 1, 2


class FloorChoice:
    """Best and runner-up vertex of every job's floor-mode polytope under given prices.

    Attributes
    ----------
    value, runner_up : ndarray, shape (n,)
        Profit of the best vertex and of the best *other* vertex (different support or
        amount; ``-inf`` when there is none).
    kind, k, l, xk, xl : ndarray
        The best vertex: ``kind`` 0 origin, 1 one type, 2 two types; types ``k`` (and
        ``l`` for pairs) with amounts of time ``xk`` (and ``xl``).
    kind2, k2, l2, xk2, xl2 : ndarray
        The runner-up vertex, same encoding (``kind2 = -1`` when there is none).
    y, z : ndarray
        Duals of the job's floor row (>= 0) and time row (>= 0) at the best vertex.
    """

    _FIELDS = ("value", "kind", "k", "l", "xk", "xl")

    def __init__(self, n: int) -> None:
        self.value = np.full(n, -np.inf)
        self.kind = np.zeros(n, dtype=np.int8)
        self.k = np.zeros(n, dtype=np.int64)
        self.l = np.zeros(n, dtype=np.int64)
        self.xk = np.zeros(n)
        self.xl = np.zeros(n)
        self.runner_up = np.full(n, -np.inf)
        self.kind2 = np.full(n, -1, dtype=np.int8)
        self.k2 = np.zeros(n, dtype=np.int64)
        self.l2 = np.zeros(n, dtype=np.int64)
        self.xk2 = np.zeros(n)
        self.xl2 = np.zeros(n)
        self.y = np.zeros(n)
        self.z = np.zeros(n)

    def take(self, rows: np.ndarray) -> FloorChoice:
        """The choices of jobs ``rows`` (what :func:`floor_best` returns for those rows alone)."""
        out = FloorChoice.__new__(FloorChoice)
        for name, value in vars(self).items():
            setattr(out, name, value[rows])
        return out


def vertex_signature(m: int, kind: np.ndarray, k: np.ndarray, l: np.ndarray, full: np.ndarray) -> np.ndarray:
    """An integer naming the support and amount rule of a vertex (for grouping jobs).

    0: origin or none; 1 + k: all time on k; 1 + m + k: floor amount on k;
    1 + 2m + k m + l: the pair (k, l).
    """
    return np.where(kind == PAIR, 1 + 2 * m + k * m + l,
                    np.where(kind == SINGLE, 1 + k + np.where(full, 0, m), 0)).astype(np.int64)


def _top2(V: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Column of the max, the max, column of the second largest, its value (per row)."""
    r = np.arange(V.shape[0])
    k = np.argmax(V, axis=1)
    best = V[r, k]
    if V.shape[1] > 1:
        V2 = V.copy()
        V2[r, k] = -np.inf
        k2 = np.argmax(V2, axis=1)
        second = V2[r, k2]
    else:
        k2 = np.zeros(V.shape[0], dtype=np.int64)
        second = np.full(V.shape[0], -np.inf)
    return k, best, k2, second


class _Top2:
    """Running best and runner-up of candidate vertices (value, kind, k, l, xk, xl)."""

    def __init__(self, n: int) -> None:
        self.b = [np.full(n, -np.inf), np.full(n, -1, dtype=np.int8), np.zeros(n, dtype=np.int64),
                  np.zeros(n, dtype=np.int64), np.zeros(n), np.zeros(n)]
        self.s = [a.copy() for a in self.b]

    def offer(self, cand: list[np.ndarray], rows: np.ndarray | None = None) -> None:
        b, s = self.b, self.s
        if rows is None:
            rows = np.arange(b[0].shape[0])
        v = cand[0]
        beats_b = v > b[0][rows]
        beats_s = ~beats_b & (v > s[0][rows])
        rb, rs = rows[beats_b], rows[beats_s]
        for i in range(6):
            s[i][rb] = b[i][rb]
            b[i][rb] = cand[i][beats_b]
            s[i][rs] = cand[i][beats_s]


def floor_best(A: np.ndarray, U: np.ndarray, price, c: np.ndarray, f: np.ndarray) -> FloorChoice:
    """Best and runner-up vertex of :math:`P_j` for profit :math:`r = c - \\text{price}`,
    ``price[j, k]`` the cost of a unit of time of job j on type k at the current capacity
    prices (:math:`W_{jk}\\lambda_k` plus any host-resource rows): an array, or a function
    of a row slice returning that slice's prices (so that no (n, m) array is built)."""
    n = A.shape[0]
    out = FloorChoice(n)
    for s in range(0, n, CHUNK_ROWS):
        e = min(n, s + CHUNK_ROWS)
        sl = slice(s, e)
        pr = price(sl) if callable(price) else price[sl]
        _floor_chunk(A[sl], U[sl], pr, c[sl], f[sl], out, sl)
    return out


def _floor_chunk(A, U, price, c, f, out: FloorChoice, sl: slice) -> None:
    n, m = A.shape
    rows = np.arange(n)
    r = np.where(U, c - price, -np.inf)
    fpos = f > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        amt_floor = np.where(fpos[:, None], f[:, None] / A, 0.0)
    alone = U & ((A >= f[:, None]) | ~fpos[:, None])
    full_better = (r >= 0) | ~fpos[:, None]
    v_full = np.where(alone, r, -np.inf)
    with np.errstate(invalid="ignore"):
        v_floor = np.where(alone & fpos[:, None], r * amt_floor, -np.inf)
    v_k = np.where(full_better, v_full, v_floor)
    v_alt = np.where(full_better, v_floor, v_full)
    ka, va, kb, vb = _top2(v_k)
    one = np.ones(n, dtype=np.int8)
    zero_i = np.zeros(n, dtype=np.int64)
    zero_f = np.zeros(n)
    amount = lambda k, pref: np.where(full_better[rows, k] == pref, 1.0, amt_floor[rows, k])
    top = _Top2(n)
    top.offer([va, one, ka, zero_i, amount(ka, True), zero_f])
    top.offer([vb, one, kb, zero_i, amount(kb, True), zero_f])
    top.offer([v_alt[rows, ka], one, ka, zero_i, amount(ka, False), zero_f])
    origin = np.flatnonzero(~fpos)
    if origin.size:
        top.offer([np.zeros(origin.size), np.zeros(origin.size, dtype=np.int8), zero_i[origin], zero_i[origin],
                   zero_f[origin], zero_f[origin]], origin)
    # pairs: a low type k (A_k < f) with r_k above the runner-up so far
    low = U & fpos[:, None] & (A < f[:, None])
    cand = np.flatnonzero(fpos & (np.where(low, r, -np.inf).max(axis=1) > top.s[0]))
    if cand.size:
        Ac, rc, fc = A[cand], r[cand], f[cand]
        lowc, highc = low[cand], U[cand] & (A[cand] > f[cand][:, None])
        sub = _Top2(cand.size)
        ones2 = np.full(cand.size, 2, dtype=np.int8)
        cr = np.arange(cand.size)
        for k in range(m):
            ok = lowc[:, k]
            if not ok.any():
                continue
            with np.errstate(divide="ignore", invalid="ignore"):
                xk = (Ac - fc[:, None]) / (Ac - Ac[:, [k]])
                val = rc[:, [k]] * xk + rc * (1.0 - xk)
            val = np.where(highc & ok[:, None], val, -np.inf)
            l1, v1, l2, v2 = _top2(val)
            kk = np.full(cand.size, k, dtype=np.int64)
            x1, x2 = xk[cr, l1], xk[cr, l2]
            sub.offer([v1, ones2, kk, l1, x1, 1.0 - x1])
            sub.offer([v2, ones2, kk, l2, x2, 1.0 - x2])
        for rec in (sub.b, sub.s):
            top.offer(rec, cand)
    b, s = top.b, top.s
    out.value[sl], out.kind[sl], out.k[sl], out.l[sl], out.xk[sl], out.xl[sl] = b
    out.runner_up[sl], out.kind2[sl], out.k2[sl], out.l2[sl], out.xk2[sl], out.xl2[sl] = s
    # duals of the job's two rows at the best vertex
    kind, kb_, lb_ = b[1], b[2], b[3]
    rk = r[rows, kb_]
    y = np.zeros(n)
    z = np.zeros(n)
    single = kind == SINGLE
    with np.errstate(divide="ignore", invalid="ignore"):
        at_floor = single & (b[4] < 1.0) & fpos
        y = np.where(at_floor, -rk / A[rows, kb_], 0.0)
        z = np.where(single & ~at_floor, np.maximum(rk, 0.0), 0.0)
        two = kind == PAIR
        if two.any():
            t2 = rows[two]
            Ak, Al = A[t2, kb_[two]], A[t2, lb_[two]]
            yk = (r[t2, kb_[two]] - r[t2, lb_[two]]) / (Al - Ak)
            y[two] = yk
            z[two] = r[t2, kb_[two]] + yk * Ak
    out.y[sl] = np.maximum(y, 0.0)
    out.z[sl] = np.maximum(z, 0.0)
