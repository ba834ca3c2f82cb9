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

#: Rows processed at once by the floor-mode pricing: bounds the chunk's (rows, m) work arrays,
#: which are allocated once per call and reused (131072 -> 32768 rows: 6.1 -> 5.1 CPU-s over
#: five price vectors of the 10^6 x 10 hard max-min instance; 8192 and 32768 within noise).
CHUNK_ROWS = 32_768

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


#: ``_IS[mask]``: 0 where ``mask``, -inf elsewhere.
_IS = np.array([-np.inf, 0.0])
_NEG_INF_BITS = np.uint64(0xFFF0000000000000)


def _minus_inf_where(mask: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out`` = -inf where ``mask``, 0 elsewhere: the bit pattern of -inf times the mask's
    bytes (then ``out += r`` masks r: 0.60 ms on 32768 x 10 random masks, against 1.25 ms
    for ``np.where(mask, -np.inf, r)`` and 0.74 ms for a gather from a two-entry table)."""
    np.multiply(mask.view(np.uint8), _NEG_INF_BITS, out=out.view(np.uint64), dtype=np.uint64)
    return out


def _top2(V: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Column of the max, the max, column of the second largest, its value (per row).

    ``V`` (C-contiguous) is overwritten: its row maxima are set to -inf (no copy of V).
    """
    n, m = V.shape
    k = np.argmax(V, axis=1)
    flat = V.reshape(-1)
    at = np.arange(0, n * m, m)
    best = flat[at + k]
    if m == 1:
        return k, best, np.zeros(n, dtype=np.int64), np.full(n, -np.inf)
    flat[at + k] = -np.inf
    k2 = np.argmax(V, axis=1)
    return k, best, k2, flat[at + k2]


def _colmax(V: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Row maxima of a (n, m) array, one column at a time (2-3x faster than ``V.max(axis=1)``
    for m of about 10)."""
    np.copyto(out, V[:, 0])
    for j in range(1, V.shape[1]):
        np.maximum(out, V[:, j], out=out)
    return out


def _offer(b: list, s: list, cand: list, rows: np.ndarray) -> None:
    """Offer candidate vertices ``cand`` (value, kind, k, l, xk, xl) to the running best ``b``
    and runner-up ``s`` of jobs ``rows`` (strictly better only: earlier offers win ties)."""
    v = cand[0]
    beats_b = v > b[0][rows]
    beats_s = ~beats_b & (v > s[0][rows])
    rb, rs = rows[beats_b], rows[beats_s]
    for i in range(6):
        s[i][rb] = b[i][rb]
        b[i][rb] = cand[i][beats_b]
        s[i][rs] = cand[i][beats_s]


class _Buffers:
    """Work arrays of one chunk, allocated once per :func:`floor_best` call and reused."""

    def __init__(self, rows: int, m: int) -> None:
        self.r, self.v, self.g = np.empty((rows, m)), np.empty((rows, m)), np.empty((rows, m))
        self.mask = np.empty((rows, m), dtype=bool)
        self.row = np.empty(rows)
        self.m, self._pairs = m, np.empty((2, 0))

    def pairs(self, size: int) -> tuple[np.ndarray, np.ndarray]:
        """Two (size, m) work arrays for the pair vertices (grown as needed, then reused)."""
        if self._pairs.shape[1] < size * self.m:
            self._pairs = np.empty((2, max(size, 2 * self._pairs.shape[1] // max(self.m, 1)) * self.m))
        w = self._pairs[:, : size * self.m]
        return w[0].reshape(size, self.m), w[1].reshape(size, self.m)


def floor_best(A: np.ndarray, U: np.ndarray, price, c: np.ndarray, f: np.ndarray) -> FloorChoice:
    """Best and runner-up vertex of :math:`P_j` for profit :math:`r = c - \\text{price}`,
    ``price[j, k]`` the cost of a unit of time of job j on type k at the current capacity
    prices (:math:`W_{jk}\\lambda_k` plus any host-resource rows): an array, or a function
    of a row slice returning that slice's prices (so that no (n, m) array is built).
    ``c`` and the prices are finite."""
    n, m = A.shape
    out = FloorChoice(n)
    U = np.asarray(U, dtype=bool)
    buf = _Buffers(min(n, CHUNK_ROWS), m)
    for s in range(0, n, CHUNK_ROWS):
        e = min(n, s + CHUNK_ROWS)
        sl = slice(s, e)
        pr = price(sl) if callable(price) else price[sl]
        _floor_chunk(A[sl], U[sl], pr, c[sl], f[sl], out, sl, buf)
    return out


def _floor_chunk(A, U, price, c, f, out: FloorChoice, sl: slice, buf: _Buffers) -> None:
    """:func:`floor_best` of one chunk of rows, written into ``out[sl]``.

    Single-type vertices: for a type that meets the floor alone (:math:`A_k \\ge f`) the
    better of "full" (value r) and "floor" (value :math:`r f/A_k`, :math:`f/A_k \\le 1`) is
    :math:`\\max(r, r f/A_k)` and the other the min, so no sign mask is built and only the
    best type's other vertex is looked at again. Best and runner-up then come in closed
    form, with the ties resolved as offering (best type, second type, the best type's other
    vertex, the origin, the pairs) in that order, a later one only when strictly better.
    """
    n, m = A.shape
    at = np.arange(0, n * m, m)
    r, v, g, lo, rmax = buf.r[:n], buf.v[:n], buf.g[:n], buf.mask[:n], buf.row[:n]
    np.subtract(c, price, out=r)
    all_u = bool(U.all())
    fpos = f > 0
    np.less(A, f[:, None], out=lo)
    _minus_inf_where(lo if all_u else lo | ~U, v)
    v += r  # all time on k: r where type k alone meets the floor (A_k >= f), -inf elsewhere
    with np.errstate(divide="ignore", invalid="ignore"):
        np.divide(f[:, None], A, out=g)
        np.abs(g, out=g)  # f/A in (0, 1] where alone; >= 0 elsewhere so that -inf * g stays -inf
        np.multiply(v, g, out=g)  # the floor amount on k
    np.maximum(v, g, out=g)  # the better of the two on each type
    nf = np.flatnonzero(~fpos)
    if nf.size:  # no floor: all time on any usable type (and the origin)
        g[nf] = r[nf] + _IS[U[nf].view(np.uint8)]
    ka, va, kb, vb = _top2(g)
    rf, vf, Af = r.reshape(-1), v.reshape(-1), A.reshape(-1)
    ia, ib = at + ka, at + kb
    ra, rb, full_a = rf[ia], rf[ib], vf[ia]
    with np.errstate(divide="ignore", invalid="ignore"):
        ga, gb = f / Af[ia], f / Af[ib]
        top_a = ra >= 0  # the best type's better vertex is all time on it
        alt_a = np.where(top_a, full_a * np.abs(ga), full_a)
    use_alt = alt_a > vb
    one = np.ones(n, dtype=np.int8)
    b = [va, one, ka, np.zeros(n, dtype=np.int64), np.where(top_a, 1.0, ga), np.zeros(n)]
    s = [np.maximum(vb, alt_a), one.copy(), np.where(use_alt, ka, kb), np.zeros(n, dtype=np.int64),
         np.where(use_alt, np.where(top_a, ga, 1.0), np.where(rb >= 0, 1.0, gb)), np.zeros(n)]
    odd = np.flatnonzero(~((s[0] > -np.inf) & fpos))  # no second vertex or no floor: rare, exact offers
    if odd.size:
        _singles_slow(b, s, odd, fpos[odd], va[odd], ka[odd], vb[odd], kb[odd], alt_a[odd], b[4][odd],
                      np.where(rb[odd] >= 0, 1.0, gb[odd]), np.where(top_a[odd], ga[odd], 1.0))
    # pairs: a low type k (A_k < f) with r_k above the runner-up so far
    np.logical_not(lo, out=lo)
    _minus_inf_where(lo if all_u else lo | ~U, v)
    v += r
    cand = np.flatnonzero(fpos & (_colmax(v, rmax) > s[0]))
    if cand.size:
        _pairs(A[cand], r[cand], U[cand], f[cand], b, s, cand, buf)
    out.value[sl], out.kind[sl], out.k[sl], out.l[sl], out.xk[sl], out.xl[sl] = b
    out.runner_up[sl], out.kind2[sl], out.k2[sl], out.l2[sl], out.xk2[sl], out.xl2[sl] = s
    # duals of the job's two rows at the best vertex
    kind, kbest = b[1], b[2]
    ik = at + kbest
    rk = rf[ik]
    single = kind == SINGLE
    at_floor = single & (b[4] < 1.0) & fpos
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.where(at_floor, -rk / Af[ik], 0.0)
        z = np.where(single & ~at_floor, np.maximum(rk, 0.0), 0.0)
        two = np.flatnonzero(kind == PAIR)
        if two.size:
            il = at[two] + b[3][two]
            Ak, Al, rk2 = Af[ik[two]], Af[il], rk[two]
            yk = (rk2 - rf[il]) / (Al - Ak)
            y[two] = yk
            z[two] = rk2 + yk * Ak
    np.maximum(y, 0.0, out=out.y[sl])
    np.maximum(z, 0.0, out=out.z[sl])


def _singles_slow(b: list, s: list, rows, fpos, va, ka, vb, kb, alt_a, xa, xb, x_alt) -> None:
    """The single-type and origin offers of jobs ``rows`` one by one (jobs with no second
    vertex, or no floor), as :func:`_floor_chunk` would make them."""
    nr = rows.size
    none = np.full(nr, -1, dtype=np.int8)
    zi, zf = np.zeros(nr, dtype=np.int64), np.zeros(nr)
    alt_a = np.where(fpos, alt_a, -np.inf)  # no floor: no floor vertex
    xa, xb = np.where(fpos, xa, 1.0), np.where(fpos, xb, 1.0)
    x_alt = np.where(fpos, x_alt, 0.0)
    best = [np.full(nr, -np.inf), none, zi, zi, zf, zf]
    best, second = [a.copy() for a in best], [a.copy() for a in best]
    own = np.arange(nr)
    one = np.ones(nr, dtype=np.int8)
    _offer(best, second, [va, one, ka, zi, xa, zf], own)
    _offer(best, second, [vb, one, kb, zi, xb, zf], own)
    _offer(best, second, [alt_a, one, ka, zi, x_alt, zf], own)
    o = np.flatnonzero(~fpos)
    if o.size:
        _offer(best, second, [zf[o], np.zeros(o.size, dtype=np.int8), zi[o], zi[o], zf[o], zf[o]], o)
    for i in range(6):
        b[i][rows] = best[i]
        s[i][rows] = second[i]


def _pairs(A, r, U, f, b: list, s: list, rows: np.ndarray, buf: _Buffers) -> None:
    """Offer the best two pair vertices (low k, high l) of jobs ``rows`` to ``b``/``s``.

    All (job, high type) combinations at once, each against every type k: a non-low k gets
    :math:`A_k := f` and :math:`r_k := -\\infty`, so that its x is 1 and its value -inf
    without a mask (about 3 high and 7 low types per candidate job in the hard 10^6 x 10
    instance, so a third of the work of enumerating every (k, l)); the best two per job
    come from segment maxima.
    """
    low = U & (A < f[:, None])
    pj, pl = np.nonzero(U & (A > f[:, None]))  # grouped by job
    if not pj.size:
        return
    Alow = np.where(low, A, f[:, None])
    rlow = np.where(low, r, -np.inf)
    Al, rl = A[pj, pl], r[pj, pl]
    num = Al - f[pj]
    # x = num / (A_l - A_k) (time on k; l gets the rest), val = r_k x + r_l (1 - x), in two
    # work arrays: fresh temporaries of this size cost page faults (3x the arithmetic)
    x, val = buf.pairs(pj.size)
    np.take(Alow, pj, axis=0, out=x)
    np.take(rlow, pj, axis=0, out=val)
    with np.errstate(divide="ignore", invalid="ignore"):
        np.subtract(Al[:, None], x, out=x)
        np.divide(num[:, None], x, out=x)
    np.multiply(val, x, out=val)
    np.subtract(1.0, x, out=x)
    np.multiply(rl[:, None], x, out=x)
    val += x
    # best two per job: each (job, l)'s best k, then across the job's l (segment maxima)
    new_job = np.r_[True, pj[1:] != pj[:-1]]
    start, seg = np.flatnonzero(new_job), np.cumsum(new_job) - 1
    jobs, ar = rows[pj[start]], np.arange(start.size)
    best_l = _colmax(val, np.empty(pj.size))
    v1 = np.maximum.reduceat(best_l, start)
    p1 = _first(best_l == v1[seg], seg, start)
    row1 = val[p1]
    k1 = np.argmax(row1, axis=1)
    row1[ar, k1] = -np.inf
    k1b = np.argmax(row1, axis=1)
    best_l[p1] = row1[ar, k1b]  # the runner-up of the best (job, l) ...
    v2 = np.maximum.reduceat(best_l, start)
    p2 = _first(best_l == v2[seg], seg, start)  # ... against the best of the job's other l
    k2 = k1b.copy()
    other = np.flatnonzero(p2 != p1)
    if other.size:
        k2[other] = np.argmax(val[p2[other]], axis=1)
    two = np.full(start.size, PAIR, dtype=np.int8)
    for v_, p_, k_ in ((v1, p1, k1), (v2, p2, k2)):
        with np.errstate(divide="ignore", invalid="ignore"):
            xk = num[p_] / (Al[p_] - Alow[pj[p_], k_])
        _offer(b, s, [v_, two, k_, pl[p_], xk, 1.0 - xk], jobs)


def _first(hit: np.ndarray, seg: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Index of the first True of ``hit`` in every segment (``seg``: sorted segment of each
    entry, ``start``: where each begins); the segment's start where it has none (NaN)."""
    i = np.flatnonzero(hit)
    sg = seg[i]
    first = np.r_[True, sg[1:] != sg[:-1]] if i.size else np.zeros(0, dtype=bool)
    out = start.copy()
    out[sg[first]] = i[first]
    return out
