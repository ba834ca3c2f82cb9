r"""The partial-allocation (PA) auction Themis runs each time GPUs are offered.

Themis (Mahajan et al., "Themis: Fair and Efficient GPU Cluster Scheduling", NSDI 2020,
§4) offers free GPUs to the apps furthest from their fair share and allocates them with the
partial-allocation mechanism of Cole, Gkatzelis and Goel ("Mechanism design for fair
division: allocating divisible items without payments", EC 2013, §3). This module is that
auction alone, over divisible GPU counts; :mod:`hetsched.schedulers.themis` is the arbiter
around it (who bids, leases, rounding to whole gangs, work conservation).

Valuations
----------
Bidder :math:`i` values :math:`x_{ik} \ge 0` GPUs of type :math:`k` (``m`` types) with an
additive, concave, non-decreasing, piecewise-linear table per type, and may hold at most
:math:`d_i` GPUs in all (its ``demand``, public knowledge: a gang size):

.. math::

    V_i(x_i) = \sum_k \varphi_{ik}(x_{ik}), \qquad
    \varphi_{ik}(g) = \text{table}_{ik}[g] \text{ at whole } g, \text{ linear in between},

with :math:`\varphi_{ik}(0) = 0`. Linear valuations (``values``: value per GPU,
:math:`\varphi_{ik}(g) = v_{ik} g`) are the special case Themis' apps produce when a GPU of
type ``k`` adds speed in proportion (see :mod:`.themis`).

Nash social welfare and payments
--------------------------------
With ``C_k`` GPUs of type ``k`` offered, the NSW allocation is

.. math::

    x^\star = \arg\max_x \sum_i \log V_i(x_i) \quad\text{s.t.}\quad
    \sum_i x_{ik} \le C_k,\ \sum_k x_{ik} \le d_i,\ 0 \le x_{ik} \le G_{ik},

a convex program (concave objective, linear constraints; :math:`G_{ik}` is the largest count
in the table). It is solved exactly as a conic program with one exponential cone per bidder,
:math:`(t_i, 1, u_i) \in K_{\exp} \iff t_i \le \log u_i`, hypograph rows
:math:`w_{ik} \le a_{ikp} + b_{ikp} x_{ik}` per linear piece ``p`` and
:math:`u_i \le \sum_k w_{ik}`, by Clarabel.

The hidden payment (Cole et al., PA mechanism): bidder :math:`i` receives only the fraction

.. math::

    c_i = \frac{\prod_{j \ne i} V_j(x^\star_j)}{\prod_{j \ne i} V_j(x^{\star,-i}_j)} \in (0, 1]

of its bundle, where :math:`x^{\star,-i}` is the NSW allocation of the same GPUs without
bidder :math:`i`; it keeps :math:`c_i x^\star_i` and :math:`(1 - c_i) x^\star_i` is *left
over* (Themis gives leftovers away for work conservation). With valuations homogeneous of
degree one (linear values), bidder :math:`i`'s realised value is
:math:`c_i V_i(x^\star_i) = \prod_j V_j(x^\star_j) / \prod_{j\ne i} V_j(x^{\star,-i}_j)`: the
denominator does not depend on its report and the numerator is what :math:`x^\star`
maximises, so reporting the truth is a dominant strategy (Cole et al., Theorem 3.2). With
non-linear tables the payments are computed the same way, but that theorem does not cover
them.

Exact reductions
----------------
* Scaling one bidder's valuation by a constant changes neither :math:`x^\star` nor any
  :math:`c`; each bidder's table is divided by its largest value first.
* Bidders with identical (scaled) tables and demand form a *class*: the program is
  symmetric in them and strictly concave in the utilities, so an optimum gives them equal
  bundles and the program is solved over classes with multiplicities :math:`n_c`
  (objective :math:`\sum_c n_c \log u_c`, capacity :math:`\sum_c n_c x_{ck} \le C_k`).
  Removing a bidder of class ``c`` is the same program with :math:`n_c - 1`: the payments need
  one program per class, not per bidder.
* With linear values the whole program's conic optimum is polished and certified by Newton's
  method on its KKT system (:mod:`.nsw_newton`), and the payment programs are solved
  together from it (:mod:`.nsw_removals`), each accepted only with a duality gap of at most
  1e-9; a program the Newton path does not certify is solved by Clarabel.
* A bidder whose valuation is zero on everything offered (no usable type) is not in the
  program: it gets nothing and pays nothing (:math:`c_i = 1`).

In numpy (linear values ``v``, allocation ``x``): ``nsw = np.log((v * x).sum(1)).sum()``.

Examples
--------
Two bidders, one GPU of each of two types; each values "its" type twice as much. The NSW
optimum gives each its favourite GPU (utilities 2 and 2); without one bidder the other takes
both (utility 3), so each keeps :math:`c = 2/3` of its GPU:

>>> from hetsched.schedulers.themis_auction import partial_allocation
>>> res = partial_allocation([[2.0, 1.0], [1.0, 2.0]], [1, 1])
>>> res.allocation.round(6).tolist(), res.fractions.round(6).tolist()
([[1.0, 0.0], [0.0, 1.0]], [0.666667, 0.666667])
>>> res.leftover.round(6).tolist()
[0.333333, 0.333333]
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import SolverError, ValidationError
from ..validation import check_matrix
from .nsw_newton import certify_support
from .nsw_removals import solve_removals

__all__ = ["AuctionResult", "ValuationTables", "partial_allocation", "valuation_tables"]

log = logging.getLogger(__name__)

#: Fewest bidder classes for which the payment programs go to the batched Newton path
#: (:mod:`.nsw_removals`); below it one conic solve each is faster (10 distinct bidders:
#: 8 ms conic against 43 ms batched, measured; 50: 155 ms against 114 ms).
NEWTON_MIN_CLASSES = 32
#: A solver's payment fraction may exceed 1 by at most this before it is an error (c <= 1
#: holds exactly; more than this is a solve that is not optimal).
FRACTION_TOL = 1e-6


@dataclass(frozen=True, eq=False)
class ValuationTables:
    """Bidders' concave piecewise-linear valuations, as linear pieces (validated).

    Attributes
    ----------
    slopes, intercepts : ndarray, shape (n, m, p)
        Piece ``q`` of bidder ``i`` on type ``k``: :math:`w \\le a + b x`; unused pieces
        repeat the last one.
    domain : ndarray, shape (n, m)
        Largest GPU count each table covers (``inf`` for linear values).
    names : tuple of str
        How each bidder is named in messages.
    """

    slopes: np.ndarray
    intercepts: np.ndarray
    domain: np.ndarray
    names: tuple[str, ...]

    @property
    def saturation(self) -> np.ndarray:
        """Fewest GPUs of each type at which each table reaches its largest value (``inf``
        for linear values with a positive slope; 0 for a worthless type)."""
        last = self.slopes[:, :, -1]
        top = np.where(last > 0, np.inf, self.intercepts[:, :, -1])
        # the count where the rising pieces meet the flat top: min over pieces with slope > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            meet = np.where(self.slopes > 0, (top[:, :, None] - self.intercepts) / self.slopes, 0.0)
        sat = np.where(last > 0, np.inf, np.where(top > 0, meet.max(axis=2, initial=0.0), 0.0))
        return np.minimum(sat, self.domain)

    @property
    def n_bidders(self) -> int:
        """Number of bidders."""
        return int(self.slopes.shape[0])

    @property
    def n_types(self) -> int:
        """Number of GPU types."""
        return int(self.slopes.shape[1])

    def value(self, x: np.ndarray) -> np.ndarray:
        """:math:`V_i(x_i)` of each bidder at allocation ``x`` (shape (n, m))."""
        x = np.minimum(np.asarray(x, dtype=float), self.domain)
        return np.min(self.intercepts + self.slopes * x[:, :, None], axis=2).sum(axis=1)


def _bidder_name(names: Sequence[Any] | None, i: int) -> str:
    return f"bidder {i}" if names is None else f"job {names[i]!r}"


def valuation_tables(tables: Sequence[Sequence[Sequence[float]]], *, gpu_types: Sequence[str] | None = None,
                     names: Sequence[Any] | None = None, field: str = "tables") -> ValuationTables:
    """Validate Themis bid tables and turn them into linear pieces.

    Parameters
    ----------
    tables : sequence (bidders) of sequences (types) of sequences of float
        ``tables[i][k][g]``: value to bidder ``i`` of ``g`` GPUs of type ``k``, ``g = 0, 1, ..``.
        Each table starts at 0, is non-decreasing (monotone: more GPUs are never worth less)
        and concave (each extra GPU adds no more than the one before); a table ``[0]`` means
        the type is worthless to the bidder.
    gpu_types : sequence of str, optional
        Type names, for messages.
    names : sequence, optional
        Bidder names (job ids), for messages.
    field : str
        The argument's name in messages.

    Raises
    ------
    ValidationError
        Naming the bidder (job), the type, the GPU count and the values: a table that does
        not start at 0, decreases, or is not concave; an entry that is not a finite number.
    """
    if isinstance(tables, (str, bytes)) or not isinstance(tables, Sequence):
        raise ValidationError(f"`{field}` must be a sequence (one per bidder) of sequences (one per GPU type) of "
                              f"values at 0, 1, 2, ... GPUs; got {type(tables).__name__}.")
    n = len(tables)
    m = len(tables[0]) if n else (len(gpu_types) if gpu_types is not None else 0)
    tname = (lambda k: repr(gpu_types[k])) if gpu_types is not None else (lambda k: str(k))
    pieces: list[list[tuple[np.ndarray, np.ndarray]]] = []
    domain = np.zeros((n, m))
    for i, row in enumerate(tables):
        who = _bidder_name(names, i)
        if isinstance(row, (str, bytes)) or not isinstance(row, Sequence) or len(row) != m:
            raise ValidationError(f"`{field}` for {who} must have one table per GPU type ({m}); got {row!r:.80}.")
        per = []
        for k, tab in enumerate(row):
            try:
                a = np.asarray(tab, dtype=float).reshape(-1)
            except (TypeError, ValueError):
                raise ValidationError(f"`{field}` for {who}, GPU type {tname(k)} must be numbers; "
                                      f"got {tab!r:.80}.") from None
            if a.size == 0 or not np.isfinite(a).all():
                raise ValidationError(f"`{field}` for {who}, GPU type {tname(k)} must be finite numbers at 0, 1, .. "
                                      f"GPUs; got {a.tolist()!r:.80}.")
            if a[0] != 0.0:
                raise ValidationError(f"`{field}` for {who}, GPU type {tname(k)} must be worth 0 at 0 GPUs; "
                                      f"got {float(a[0])!r}.")
            inc = np.diff(a)
            bad = np.flatnonzero(inc < 0)
            if bad.size:
                g = int(bad[0]) + 1
                raise ValidationError(f"`{field}` for {who}, GPU type {tname(k)} must be monotone (non-decreasing in "
                                      f"GPUs); got {float(a[g])!r} at {g} GPU(s) after {float(a[g - 1])!r} at {g - 1}.")
            bad = np.flatnonzero(np.diff(inc) > 1e-12 * max(1.0, float(np.abs(a).max())))
            if bad.size:
                g = int(bad[0]) + 2
                raise ValidationError(f"`{field}` for {who}, GPU type {tname(k)} must be concave (each extra GPU adds no "
                                      f"more than the one before); GPU {g} adds {float(inc[g - 1])!r} after {float(inc[g - 2])!r}.")
            domain[i, k] = a.size - 1
            if inc.size == 0:
                per.append((np.zeros(1), np.zeros(1)))
                continue
            # merge runs of equal slope: each run is one piece w <= a[g0] + b (x - g0)
            starts = np.concatenate([[0], np.flatnonzero(np.diff(inc) != 0) + 1])
            b = inc[starts]
            per.append((b, a[starts] - b * starts))
        pieces.append(per)
    p = max((len(b) for per in pieces for b, _ in per), default=1)
    slopes = np.zeros((n, m, p))
    inter = np.zeros((n, m, p))
    for i, per in enumerate(pieces):
        for k, (b, c) in enumerate(per):
            slopes[i, k, :b.size], inter[i, k, :b.size] = b, c
            slopes[i, k, b.size:], inter[i, k, b.size:] = b[-1], c[-1]
    shown = tuple(_bidder_name(names, i) for i in range(n))
    return ValuationTables(slopes, inter, domain, shown)


def _linear(values: Any, names: Sequence[Any] | None) -> ValuationTables:
    v = check_matrix(values, "values", shape=(-1, -1), shape_text="(n_bidders, n_gpu_types)")
    n, m = v.shape
    shown = tuple(_bidder_name(names, i) for i in range(n))
    return ValuationTables(v[:, :, None].copy(), np.zeros((n, m, 1)), np.full((n, m), np.inf), shown)


@dataclass(frozen=True, eq=False)
class AuctionResult:
    """Outcome of :func:`partial_allocation` (rows follow the bidders).

    Attributes
    ----------
    allocation : ndarray, shape (n, m)
        :math:`x^\\star`, the NSW optimum (GPUs of each type per bidder, divisible).
    fractions : ndarray, shape (n,)
        :math:`c_i \\in (0, 1]`, the share of its bundle each bidder keeps (1 for bidders
        not in the program).
    kept : ndarray, shape (n, m)
        :math:`c_i x^\\star_i`, what each bidder receives.
    leftover : ndarray, shape (m,)
        Offered GPUs nobody keeps: :math:`C - \\sum_i c_i x^\\star_i`.
    values : ndarray, shape (n,)
        :math:`V_i(x^\\star_i)` in the bidders' own units.
    log_nsw : float
        :math:`\\sum_i \\log V_i(x^\\star_i)` over the bidders in the program.
    status : str
        "optimal", or the first solve that was not ("inaccurate": Clarabel's AlmostSolved;
        "failed": anything else; then ``fractions`` of the affected bidders are NaN).
    message : str
    solves : int
        Conic programs solved: the whole program (unless the offer is abundant), plus each
        payment program the Newton path did not certify.
    classes : int
        Distinct bidder classes.
    solve_s : float
        Wall seconds of the whole auction.
    certified : int
        Programs (the whole one and payment ones) whose optimum the Newton path of
        :mod:`.nsw_newton` / :mod:`.nsw_removals` certified by a duality gap (linear values
        only; the whole program is also counted in ``solves``, which gave its start).
    max_gap : float
        Largest duality gap (log units) among the certified programs (0 if none).
    """

    allocation: np.ndarray
    fractions: np.ndarray
    kept: np.ndarray
    leftover: np.ndarray
    values: np.ndarray
    log_nsw: float
    status: str
    message: str
    solves: int
    classes: int
    solve_s: float
    certified: int = 0
    max_gap: float = 0.0

    @property
    def success(self) -> bool:
        """Whether every solve was optimal."""
        return self.status == "optimal"


_STATUS = {"Solved": "optimal", "AlmostSolved": "inaccurate"}


def _solve_classes(tab: ValuationTables, mult: np.ndarray, cap: np.ndarray, offered: np.ndarray,
                   *, tight: bool = True) -> tuple[np.ndarray, str]:
    """NSW program over classes (rows of ``tab``) with multiplicities ``mult``; ``(x, status)``.

    ``tight`` (always, here): ask for a gap far below Clarabel's default 1e-8; the payments
    exponentiate differences of sums of logs, so an absolute gap of 1e-8 over hundreds of
    bidders shows up as c > 1 (measured), and x is only as accurate as the gap's square root.
    """
    import clarabel

    n, m, p = tab.slopes.shape
    nx = n * m
    # linear valuations (one piece through 0, no domain): u_i = sum_k v_ik x_ik directly
    linear = _is_linear(tab)
    # variables: x (n*m), [w (n*m), u (n),] t (n)
    ix = np.arange(nx)
    iw = nx + ix
    iu = 2 * nx + np.arange(n)
    it = (nx if linear else 2 * nx + n) + np.arange(n)
    nv = int(it[-1]) + 1 if n else nx
    rows, cols, vals, rhs = [], [], [], []
    r = 0

    def add(rr, cc, vv):
        rows.append(np.asarray(rr)), cols.append(np.asarray(cc)), vals.append(np.asarray(vv, dtype=float))

    if not linear:
        # pieces: w_ik - b x_ik <= a
        q = np.arange(nx * p)
        ik = q // p
        add(r + q, iw[ik], np.ones(q.size))
        add(r + q, ix[ik], -tab.slopes.reshape(-1))
        rhs.append(tab.intercepts.reshape(-1))
        r += q.size
        # u_i - sum_k w_ik <= 0
        add(r + np.arange(n), iu, np.ones(n))
        add(r + ix // m, iw, -np.ones(nx))
        rhs.append(np.zeros(n))
        r += n
    # demand: sum_k x_ik <= d_i (where finite)
    fin = np.flatnonzero(np.isfinite(cap))
    if fin.size:
        sel = np.isin(ix // m, fin)
        pos = np.searchsorted(fin, ix[sel] // m)
        add(r + pos, ix[sel], np.ones(int(sel.sum())))
        rhs.append(cap[fin])
        r += fin.size
    # capacity: sum_i mult_i x_ik <= C_k
    add(r + ix % m, ix, np.repeat(mult, m).astype(float))
    rhs.append(offered.astype(float))
    r += m
    # domain: x_ik <= G_ik (finite entries)
    dom = tab.domain.reshape(-1)
    fd = np.flatnonzero(np.isfinite(dom))
    if fd.size:
        add(r + np.arange(fd.size), ix[fd], np.ones(fd.size))
        rhs.append(dom[fd])
        r += fd.size
    # x >= 0
    add(r + np.arange(nx), ix, -np.ones(nx))
    rhs.append(np.zeros(nx))
    r += nx
    n_nonneg = r
    # exponential cones (t_i, 1, u_i), s = b - A z: t_i <= log u_i
    e = r + 3 * np.arange(n)
    add(e, it, -np.ones(n))
    if linear:
        add(e[ix // m] + 2, ix, -tab.slopes.reshape(-1))
    else:
        add(e + 2, iu, -np.ones(n))
    b_exp = np.zeros(3 * n)
    b_exp[1::3] = 1.0
    rhs.append(b_exp)
    r += 3 * n
    A = sp.csc_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(r, nv))
    b = np.concatenate(rhs)
    c = np.zeros(nv)
    c[it] = -mult.astype(float)
    cones = [clarabel.NonnegativeConeT(n_nonneg)] + [clarabel.ExponentialConeT() for _ in range(n)]
    P = sp.csc_matrix((nv, nv))
    # The objective is flat (quadratic) at the optimum, so x is only as accurate as the square
    # root of the gap: ask for a tight gap first, then looser ones down to Clarabel's defaults
    # (1e-8) when a solve stops short of its tolerance.
    for tol in ((1e-11, 1e-9, None) if tight else (None, 1e-6)):
        settings = clarabel.DefaultSettings()
        settings.verbose = False
        if tol is not None:
            settings.tol_gap_abs = settings.tol_gap_rel = tol
            settings.tol_feas = min(1e-10 if tight else tol, settings.tol_feas)
        sol = clarabel.DefaultSolver(P, c, A, b, cones, settings).solve()
        status = _STATUS.get(str(sol.status), "failed")
        if status == "optimal":
            break
    if status == "failed":
        return np.full((n, m), np.nan), f"failed ({sol.status})"
    # GPUs beyond where a table stops rising are worth nothing to the bidder: they stay unallocated
    x = np.minimum(np.maximum(np.asarray(sol.x)[:nx].reshape(n, m), 0.0), tab.saturation)
    return x, status


def _is_linear(tab: ValuationTables) -> bool:
    """Whether every table is one line through 0 with no domain (linear values)."""
    return tab.slopes.shape[2] == 1 and not tab.intercepts.any() and not np.isfinite(tab.domain).any()


def _abundant(tab: ValuationTables, mult: np.ndarray, cap: np.ndarray, offered: np.ndarray) -> np.ndarray | None:
    """With linear values and finite demands, the bundle "whole demand on a best type" for
    everyone when the offer covers it (each bidder then reaches its largest possible value,
    so that allocation is the NSW optimum with or without any bidder, and every c is 1);
    else None."""
    n, m, _ = tab.slopes.shape
    if not _is_linear(tab) or not np.isfinite(cap).all():
        return None
    best = np.argmax(tab.slopes[:, :, 0], axis=1)
    load = np.bincount(best, weights=mult * cap, minlength=m)
    if (load > offered).any():
        return None
    x = np.zeros((n, m))
    x[np.arange(n), best] = cap
    return x


def partial_allocation(values: Any = None, offered: Any = None, *, tables: ValuationTables | None = None,
                       demand: Any = None, names: Sequence[Any] | None = None) -> AuctionResult:
    """Run the partial-allocation auction (NSW optimum, then the hidden payments).

    Parameters
    ----------
    values : array-like, shape (n_bidders, n_gpu_types), optional
        Linear valuations: value of one GPU of each type to each bidder (non-negative).
        Give either ``values`` or ``tables``.
    offered : array-like, shape (n_gpu_types,)
        GPUs of each type on offer (non-negative).
    tables : ValuationTables, optional
        Concave piecewise-linear valuations from :func:`valuation_tables`.
    demand : array-like, shape (n_bidders,), optional
        Most GPUs each bidder can hold in all (``inf`` or None: no limit).
    names : sequence, optional
        Bidder names (job ids) for messages.

    Returns
    -------
    AuctionResult

    Raises
    ------
    ValidationError
        Bad shapes or values (negative, not finite), both or neither of ``values`` /
        ``tables``.
    SolverError
        A payment fraction above 1 by more than :data:`FRACTION_TOL` (a solve that claimed
        optimality but was not).
    """
    t0 = time.perf_counter()
    if (values is None) == (tables is None):
        raise ValidationError("`values` and `tables` are alternatives: give exactly one; got "
                              f"{'both' if values is not None else 'neither'}.")
    tab = _linear(values, names) if tables is None else tables
    if not isinstance(tab, ValuationTables):
        raise ValidationError(f"`tables` must be ValuationTables (see valuation_tables()); got {type(tab).__name__}.")
    n, m = tab.n_bidders, tab.n_types
    C = check_matrix(offered, "offered", shape=(m,), shape_text=f"(n_gpu_types,) = ({m},)")
    if demand is None:
        d = np.full(n, np.inf)
    else:
        d = check_matrix(demand, "demand", shape=(n,), shape_text=f"(n_bidders,) = ({n},)", finite=False)
        if np.isnan(d).any():
            raise ValidationError(f"`demand` must be numbers >= 0 (inf: no limit); got NaN at bidder "
                                  f"{int(np.flatnonzero(np.isnan(d))[0])}.")
    # the best value each bidder can reach (within the offer): zero -> not in the program
    reach = tab.value(np.minimum(np.broadcast_to(C, (n, m)), d[:, None]))
    inside = np.flatnonzero(reach > 0)
    x_all = np.zeros((n, m))
    frac = np.ones(n)
    status, message = "optimal", "no bidder values the offer" if inside.size == 0 else ""
    log_nsw, solves, n_cls = 0.0, 0, 0
    if inside.size:
        scale = reach[inside]
        sl = tab.slopes[inside] / scale[:, None, None]
        ic = tab.intercepts[inside] / scale[:, None, None]
        dom = tab.domain[inside]
        key = np.concatenate([sl.reshape(inside.size, -1), ic.reshape(inside.size, -1), dom, d[inside, None]], axis=1)
        uniq, cls_of, mult = np.unique(key, axis=0, return_inverse=True, return_counts=True)
        cls_of = cls_of.reshape(-1)
        first = np.zeros(uniq.shape[0], dtype=np.int64)
        first[cls_of[::-1]] = np.arange(inside.size)[::-1]
        ct = ValuationTables(sl[first], ic[first], dom[first], tuple(tab.names[i] for i in inside[first]))
        cd = d[inside][first]
        n_cls = int(uniq.shape[0])
        x_c = _abundant(ct, mult, cd, C)
        if x_c is not None:    # every bidder gets its whole demand on its best type: c = 1, no solve
            x_all[inside] = x_c[cls_of]
            st = "abundant"
            log_nsw = float((mult * np.log(ct.value(x_c))).sum() + np.log(scale).sum())
            message = "the offer covers every bidder's demand on its best type"
        else:
            x_c, st = _solve_classes(ct, mult, cd, C)
            solves = 1
    certified = 0
    max_gap = 0.0
    if inside.size and st != "abundant":
        if st != "optimal":
            status, message = st, f"NSW program: {st}"
        if st.startswith("failed"):
            frac[inside] = np.nan
            x_all[inside] = np.nan
        else:
            base = None
            if _is_linear(ct):
                V = ct.slopes[:, :, 0]
                base = certify_support(V, mult.astype(float), cd, C, x_c)
            if base is not None:      # certified by its dual bound: exact, whatever the conic status
                x_c, certified, max_gap = base.x, 1, max(0.0, base.gap)
                if st != "optimal":
                    status, message = "optimal", ""
            u = ct.value(x_c)
            log_u = np.log(u)
            nsw = float((mult * log_u).sum())
            log_nsw = nsw + float(np.log(scale).sum())
            frac_c = np.empty(n_cls)
            fast: list[Any] = [None] * n_cls
            if base is not None and n_cls >= NEWTON_MIN_CLASSES:
                fast = solve_removals(V, mult.astype(float), cd, C, base, np.arange(n_cls))
            for c in range(n_cls):
                m2 = mult.copy()
                m2[c] -= 1
                keep = np.flatnonzero(m2 > 0)
                if keep.size == 0:      # alone: nobody else to compare with
                    frac_c[c] = 1.0
                    continue
                other = nsw - log_u[c]
                r = fast[c]
                if r is not None:
                    certified += 1
                    max_gap = max(max_gap, r.gap)
                    frac_c[c] = math.exp(other - r.objective)
                    continue
                sub = ValuationTables(ct.slopes[keep], ct.intercepts[keep], ct.domain[keep],
                                      tuple(ct.names[j] for j in keep))
                # a payment needs the optimal value to ~1e-9 absolute (c = exp of a difference of sums)
                x_r, st_r = _solve_classes(sub, m2[keep], cd[keep], C)
                solves += 1
                if st_r.startswith("failed"):
                    frac_c[c] = np.nan
                    if status == "optimal":
                        status, message = "failed", f"payment of {ct.names[c]}'s class: {st_r}"
                    continue
                if st_r != "optimal" and status == "optimal":
                    status, message = st_r, f"payment of {ct.names[c]}'s class: {st_r}"
                without = float((m2[keep] * np.log(sub.value(x_r))).sum())
                frac_c[c] = math.exp(other - without)
            over = np.flatnonzero(frac_c > 1.0 + FRACTION_TOL)
            if over.size:
                raise SolverError(f"partial allocation: payment fraction of {ct.names[int(over[0])]} is "
                                  f"{frac_c[over[0]]!r} > 1 (a solve was not optimal).")
            frac_c = np.minimum(frac_c, 1.0)   # within FRACTION_TOL of 1: solver rounding
            x_all[inside] = x_c[cls_of]
            frac[inside] = frac_c[cls_of]
    kept = x_all * frac[:, None]
    vals = tab.value(np.nan_to_num(x_all))
    res = AuctionResult(allocation=x_all, fractions=frac, kept=kept, leftover=C - np.nansum(kept, axis=0),
                        values=vals, log_nsw=log_nsw, status=status,
                        message=message or (f"{inside.size} bidder(s) in {n_cls} class(es); {solves} conic solve(s), "
                                            f"{certified} certified by Newton"),
                        solves=solves, classes=n_cls, solve_s=time.perf_counter() - t0, certified=certified,
                        max_gap=max_gap)
    log.debug("themis auction: %s", res.message)
    return res
