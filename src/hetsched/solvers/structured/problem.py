r"""Recognize the block-angular structure of an allocation LP.

Every max-min "level" LP (:func:`hetsched.formulations.common.level_program`: max-min
fairness, min makespan, each step of finish-time fairness, and their second stages) and
the throughput LP (:mod:`hetsched.formulations.max_sum_throughput`) have the same shape:
one small block of rows per job, and only the m capacity rows couple the jobs.

.. math::

    \max\; \gamma\, t + \sum_{j,k} c_{jk} X_{jk} \quad\text{s.t.}\quad
    \sum_k X_{jk} \le 1,\qquad
    \sum_k A_{jk} X_{jk} \ge t \;\;(\text{or} \ge f_j),\qquad
    \sum_j W_{jk} X_{jk} \le C_k,\qquad X \ge 0.

Two modes are recognized:

* **level** (``c = 0``, t free, :math:`\gamma > 0`): stage 1 of a level LP;
* **floor** (t absent or fixed at a value): a separable objective with per-job floors
  :math:`A_j \cdot X_j \ge f_j` (stage 2 of a level LP; the throughput LP, with SLO rows
  as floors or no floors at all).

:func:`recognize` reads the structure from the :class:`~hetsched.solvers.program.LinearProgram`
itself (its ``x_index``, rows and bounds), so it needs nothing from the formulation and
refuses, with a reason, anything that does not match exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..program import LinearProgram

__all__ = ["SeparableProblem", "recognize"]


@dataclass(eq=False)
class SeparableProblem:
    r"""A block-angular allocation LP in array form (see the module docstring).

    Attributes
    ----------
    A : ndarray, shape (n, m)
        Level (or floor) row coefficients; 0 where the pair has no variable or the job has
        no level row.
    U : ndarray of bool, shape (n, m)
        Pairs with a variable.
    W : ndarray, shape (n, m)
        Capacity-row coefficient of X[j, k] (0 where none).
    C : ndarray, shape (m,)
        Capacities (``inf`` for a type without a capacity row).
    c : ndarray, shape (n, m), or None
        Objective on X (floor mode); None in level mode.
    floors : ndarray, shape (n,), or None
        Floor mode: right-hand side :math:`f_j` of the job's floor row (``-inf`` when the
        job has none).
    has_level : ndarray of bool, shape (n,)
        Level mode: the job has a level row (jobs without one are unconstrained by t).
    gamma : float
        Level mode: objective coefficient of t.
    t_bounds : tuple of float
        Level mode: bounds of t.
    offset : float
        Constant added to the objective.
    x_index : ndarray of int, shape (n, m)
        Where X lives in the LP's x.
    t_index : int
        Index of t in x (-1 when absent).
    t_value : float
        Floor mode: the fixed value of t (0 when absent).
    time_row, level_row : ndarray of int, shape (n,)
        Row of the job's time row and level/floor row (-1 when none).
    level_scale : ndarray, shape (n,)
        Level/floor rows are stored divided by this (the coefficient of -t, or 1), so the
        dual of the original row is the dual of the scaled row divided by it.
    cap_row : ndarray of int, shape (m,)
        Capacity row of each type (-1 when none).
    Wx : ndarray, shape (n, R)
        Further coupling rows (host CPU or memory rows, a second capacity row of a type):
        coefficient of :math:`X_{j,kx_e}` in extra row e. ``R = 0`` for GPU-only programs.
    kx : ndarray of int, shape (R,)
        The type whose variables extra row e holds.
    Cx : ndarray, shape (R,)
        Right-hand sides of the extra rows.
    extra_row : ndarray of int, shape (R,)
        Row of each extra coupling row in the LP (-1 when built here).
    zero_j, zero_k, zero_row : ndarray of int
        Variables a single-variable row ``coef X_jk <= 0`` fixes at 0 (a gang that never
        fits a type's hosts): they are left out of ``U`` and their rows only get duals.
    zero_coef : ndarray
        The coefficient of that row.

    The coupling rows are the m capacity rows followed by the R extra rows; prices
    :math:`\lambda` have one entry per coupling row (``n_cap = m + R``), and the price of
    a unit of time of job j on type k is :meth:`price` :math:`= W_{jk}\lambda_k +
    \sum_{e: kx_e = k} Wx_{je}\lambda_{m+e}`.
    """

    A: np.ndarray
    U: np.ndarray
    W: np.ndarray
    C: np.ndarray
    c: np.ndarray | None
    floors: np.ndarray | None
    has_level: np.ndarray
    gamma: float
    t_bounds: tuple[float, float]
    offset: float
    x_index: np.ndarray
    t_index: int
    t_value: float
    time_row: np.ndarray
    level_row: np.ndarray
    level_scale: np.ndarray
    cap_row: np.ndarray
    n_rows: int
    #: Prices from an earlier solve of the same jobs (see :func:`warm_from`), or None.
    warm: dict | None = None
    Wx: np.ndarray | None = None
    kx: np.ndarray | None = None
    Cx: np.ndarray | None = None
    extra_row: np.ndarray | None = None
    zero_j: np.ndarray | None = None
    zero_k: np.ndarray | None = None
    zero_row: np.ndarray | None = None
    zero_coef: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = self.A.shape[0]
        empty_i = np.zeros(0, dtype=np.int64)
        if self.Wx is None:
            self.Wx = np.zeros((n, 0))
        if self.kx is None:
            self.kx = empty_i
        if self.Cx is None:
            self.Cx = np.zeros(0)
        if self.extra_row is None:
            self.extra_row = np.full(self.kx.shape[0], -1, dtype=np.int64)
        for name in ("zero_j", "zero_k", "zero_row"):
            if getattr(self, name) is None:
                setattr(self, name, empty_i)
        if self.zero_coef is None:
            self.zero_coef = np.zeros(0)

    @property
    def n_extra(self) -> int:
        """Number of extra coupling rows R."""
        return int(self.kx.shape[0])

    @property
    def n_cap(self) -> int:
        """Number of coupling rows (one price each): m capacity rows + R extra rows."""
        return self.m + self.n_extra

    @property
    def C_all(self) -> np.ndarray:
        """Right-hand sides of every coupling row (``inf`` where a type has no capacity row)."""
        return np.concatenate([self.C, self.Cx]) if self.n_extra else self.C

    def price(self, lam: np.ndarray, rows: np.ndarray | slice | None = None) -> np.ndarray:
        """Price of a unit of time on each type, ``(len(rows), m)``, at coupling prices ``lam``."""
        sl = slice(None) if rows is None else rows
        q = self.W[sl] * lam[None, : self.m]
        if self.n_extra:
            Wx = self.Wx[sl]
            for e in np.flatnonzero(lam[self.m:] != 0):
                q[:, self.kx[e]] += Wx[:, e] * lam[self.m + e]
        return q

    def price_at(self, rows: np.ndarray, k: np.ndarray, lam: np.ndarray) -> np.ndarray:
        """:meth:`price` of job ``rows[i]`` on type ``k[i]`` only, shape (len(rows),)."""
        q = self.W[rows, k] * lam[k]
        for e in np.flatnonzero(lam[self.m:] != 0):
            q += np.where(k == self.kx[e], self.Wx[rows, e], 0.0) * lam[self.m + e]
        return q

    def loads(self, rows: np.ndarray, k: np.ndarray, amount: np.ndarray, group: np.ndarray | None = None,
              n_groups: int = 1) -> np.ndarray:
        """Coupling-row loads ``(n_cap, n_groups)`` of jobs ``rows`` each given ``amount`` of
        time on type ``k`` (summed per ``group``; all in group 0 when None)."""
        g = np.zeros(rows.shape[0], dtype=np.int64) if group is None else group
        out = np.zeros((self.n_cap, n_groups))
        out[: self.m] = np.bincount(k * n_groups + g, weights=self.W[rows, k] * amount,
                                    minlength=self.m * n_groups).reshape(self.m, n_groups)
        for e in range(self.n_extra):
            on = k == self.kx[e]
            if on.any():
                out[self.m + e] += np.bincount(g[on], weights=self.Wx[rows[on], e] * amount[on], minlength=n_groups)
        return out

    def take(self, rows: np.ndarray, **changes) -> SeparableProblem:
        """The jobs ``rows`` as a problem of their own (no LP rows; ``changes`` override fields)."""
        n_s = rows.shape[0]
        neg = np.full(n_s, -1, dtype=np.int64)
        fields = {
            "A": self.A[rows], "U": self.U[rows], "W": self.W[rows], "C": self.C, "c": None if self.c is None else self.c[rows],
            "floors": None if self.floors is None else self.floors[rows], "has_level": self.has_level[rows],
            "gamma": self.gamma, "t_bounds": self.t_bounds, "offset": self.offset,
            "x_index": np.full((n_s, self.m), -1, dtype=np.int64), "t_index": -1, "t_value": self.t_value, "time_row": neg,
            "level_row": neg, "level_scale": np.ones(n_s), "cap_row": np.full(self.m, -1, dtype=np.int64), "n_rows": 0,
            "Wx": self.Wx[rows], "kx": self.kx, "Cx": self.Cx,
        }
        fields.update(changes)
        return SeparableProblem(**fields)

    @property
    def mode(self) -> str:
        """"level" (maximize t) or "floor" (maximize c . X with floors)."""
        return "level" if self.c is None else "floor"

    @property
    def n(self) -> int:
        """Number of jobs (rows of X)."""
        return int(self.A.shape[0])

    @property
    def m(self) -> int:
        """Number of GPU types (columns of X)."""
        return int(self.A.shape[1])


def _segment_reduce(ufunc: np.ufunc, values: np.ndarray, indptr: np.ndarray, empty: float) -> np.ndarray:
    """``ufunc.reduce`` of ``values`` over CSR row segments; ``empty`` for empty rows."""
    n_rows = indptr.shape[0] - 1
    out = np.full(n_rows, empty, dtype=float)
    nonempty = indptr[1:] > indptr[:-1]
    if values.size and nonempty.any():
        out[nonempty] = ufunc.reduceat(values.astype(float), indptr[:-1][nonempty])
    return out


def _from_level_meta(lp: LinearProgram) -> SeparableProblem | None:
    """Fast path: the arrays :func:`~hetsched.formulations.common.level_program` records in
    ``lp.meta["structure"]``, checked against the program's shape and bounds (O(n m))."""
    st = lp.meta.get("structure")
    if not isinstance(st, dict) or st.get("kind") != "level" or lp.is_mip or lp.sense != "max":
        return None
    try:
        a = np.asarray(st["a"], dtype=float)
        load = np.asarray(st["load"], dtype=float)
        C = np.asarray(st["capacities"], dtype=float)
        floor = st["floor"]
        r_time, r_cap, r_lvl = (int(v) for v in st["rows"])
        t = int(lp.meta["t"])
    except (KeyError, TypeError, ValueError):
        return None
    xi = np.asarray(lp.x_index)
    if a.ndim != 2 or xi.shape != a.shape:
        return None
    n, m = a.shape
    U = a > 0
    res = st.get("resources") or {"coupling": [], "zero": [], "n_rows": 0}
    n_base = 2 * n + m
    if (load.shape != (n,) or C.shape != (m,) or lp.n_rows != n_base + int(res["n_rows"])
            or lp.n_vars != int(U.sum()) + 1
            or not np.array_equal(xi >= 0, U) or not (0 <= t < lp.n_vars) or (r_time, r_cap, r_lvl) != (0, n, n + m)):
        return None
    if not (np.all(lp.row_ub[:n] == 1.0) and np.array_equal(lp.row_ub[n:n + m], C)
            and np.all(lp.row_lb[n + m:n_base] == 0.0) and np.all(np.isinf(lp.row_ub[n + m:n_base]))):
        return None
    kx, Wx, Cx, extra_row = _meta_coupling(res["coupling"], U)
    zj, zk, zr = _meta_zero(res["zero"])
    # every pair usable and none fixed: A is a itself and W a broadcast view of the loads (no
    # n x m copies: at 10^6 x 10 their fresh pages cost about half a second of system time);
    # the structured solver only reads them
    dense = lp.x_block_start == 0 and not zj.size and bool(U.all())
    if dense:
        A, W = a, np.broadcast_to(load[:, None], (n, m))
    else:
        A, W = np.where(U, a, 0.0), np.where(U, load[:, None], 0.0)
    if extra_row.size and not np.array_equal(lp.row_ub[extra_row], Cx):
        return None
    if zj.size:
        if not np.all(lp.row_ub[zr] == 0.0):
            return None
        U = _drop_fixed(U, (A, W), Wx, kx, zj, zk)
    time_row = np.arange(n, dtype=np.int64)
    level_row = n + m + np.arange(n, dtype=np.int64)
    cap_row = n + np.arange(m, dtype=np.int64)
    common = {"A": A, "U": U, "W": W, "C": C, "x_index": xi, "t_index": t, "time_row": time_row, "level_row": level_row,
                  "level_scale": np.ones(n), "cap_row": cap_row, "n_rows": lp.n_rows, "has_level": np.ones(n, dtype=bool),
                  "Wx": Wx, "kx": kx, "Cx": Cx, "extra_row": extra_row, "zero_j": zj, "zero_k": zk, "zero_row": zr,
                  "zero_coef": np.ones(zj.size)}
    if floor is None:
        if lp.col_ub[t] != np.inf or lp.col_lb[t] != 0.0 or lp.c[t] <= 0:
            return None
        return SeparableProblem(c=None, floors=None, gamma=float(lp.c[t]), t_bounds=(0.0, np.inf),
                                offset=float(lp.offset), t_value=0.0, **common)
    f = float(lp.col_lb[t])
    if lp.col_ub[t] != f:
        return None
    if dense:
        cX = lp.c[: n * m].reshape(n, m)
    else:
        cX = np.zeros((n, m))
        cX[U] = lp.c[xi[U]]
    return SeparableProblem(c=cX, floors=np.full(n, f), gamma=0.0, t_bounds=(f, f),
                            offset=float(lp.offset) + float(lp.c[t]) * f, t_value=f, **common)


def _meta_coupling(coupling: list, U: np.ndarray):
    """Extra coupling rows recorded in ``meta["structure"]["resources"]`` (host-resource rows
    of :func:`hetsched.formulations.resources.add_resource_rows`: one row per binding type).
    Returns (type, coefficients (n, R), right-hand side and LP row of each extra row)."""
    n = U.shape[0]
    kx = [np.asarray(types, dtype=np.int64) for _, types, _, _ in coupling]
    kx = np.concatenate(kx) if kx else np.zeros(0, dtype=np.int64)
    Wx = np.zeros((n, kx.size))
    Cx, extra_row = np.zeros(kx.size), np.zeros(kx.size, dtype=np.int64)
    e = 0
    for r0, types, coef, caps in coupling:
        for i, k in enumerate(np.asarray(types, dtype=np.int64).tolist()):
            Wx[:, e] = np.where(U[:, k], coef, 0.0)
            Cx[e], extra_row[e] = caps[i], r0 + i
            e += 1
    return kx, Wx, Cx, extra_row


def _meta_zero(zero: list):
    """Rows fixing a gang that never fits a type's hosts at 0, as recorded in
    ``meta["structure"]["resources"]``: (jobs, types, LP rows)."""
    zj = [np.asarray(j, dtype=np.int64) for _, j, _ in zero]
    zk = [np.asarray(k, dtype=np.int64) for _, _, k in zero]
    zr = [r0 + np.arange(len(j)) for r0, j, _ in zero]
    zj, zk, zr = (np.concatenate(v) if v else np.zeros(0, dtype=np.int64) for v in (zj, zk, zr))
    return zj, zk, zr


def _drop_fixed(U: np.ndarray, mats: tuple, Wx: np.ndarray, kx: np.ndarray, zj: np.ndarray,
                zk: np.ndarray) -> np.ndarray:
    """The variables fixed at 0 by single-variable rows leave the problem: a copy of ``U``
    without them; their entries in ``mats`` and ``Wx`` (arrays of the problem) are zeroed."""
    U = U.copy()
    U[zj, zk] = False
    for M in mats:
        M[zj, zk] = 0.0
    for e in range(kx.size):
        Wx[zj[zk == kx[e]], e] = 0.0
    return U


def recognize(lp: LinearProgram) -> tuple[SeparableProblem | None, str]:
    """Read the block-angular structure of ``lp``.

    Programs from :func:`~hetsched.formulations.common.level_program` are read from
    ``lp.meta["structure"]`` (checked against the program); any other program is parsed
    from its rows and bounds.

    Returns
    -------
    problem : SeparableProblem or None
        None when ``lp`` does not have the structure.
    reason : str
        Why not (empty when recognized).
    """
    fast = _from_level_meta(lp)
    P, why = (fast, "") if fast is not None else _parse(lp)
    if P is not None:
        P.warm = warm_from(lp.meta.get("structured_warm"), P.n, P.n_cap, P.m)
    return P, why


def warm_from(info: object, n: int, m: int, n_types: int | None = None) -> dict | None:
    """A usable warm start from ``lp.meta["structured_warm"]``: the ``info["warm"]`` a
    level-mode structured solve returned for the same jobs (stage 1 for stage 2, the
    previous step of finish-time fairness), with one price per coupling row (``m``) and,
    when it has one of shape ``(n, n_types)``, its allocation ``"X"``. Anything else is
    ignored."""
    if not isinstance(info, dict):
        return None
    try:
        lam = np.asarray(info["lam"], dtype=float)
        rows = np.asarray(info["master_rows"], dtype=np.int64)
        level = float(info["level"])
    except (KeyError, TypeError, ValueError):
        return None
    if info.get("n") != n or lam.shape != (m,) or not np.all(np.isfinite(lam)) or np.any(lam < 0):
        return None
    if rows.size and (rows.min() < 0 or rows.max() >= n):
        return None
    out = {"lam": lam, "master_rows": rows, "level": level}
    X = info.get("X")
    if isinstance(X, np.ndarray) and X.shape == (n, n_types) and np.all(np.isfinite(X)):
        out["X"] = X  # the earlier solve's allocation (same variables), kept by reference
    return out


class _Refused(Exception):
    """A program :func:`_parse` does not recognize; the message says why."""


@dataclass
class _Vars:
    """The variables of a program being parsed: ``xi`` (n, m) where X lives in x (``U``:
    usable pairs), ``jj`` / ``kk`` / ``xv`` the job, type and index of each X variable,
    ``var_job`` / ``var_type`` per variable (-1 outside X), ``t`` the index of the level
    (-1: none) and ``nv`` the number of variables."""

    xi: np.ndarray
    n: int
    m: int
    nv: int
    U: np.ndarray
    jj: np.ndarray
    kk: np.ndarray
    xv: np.ndarray
    var_job: np.ndarray
    var_type: np.ndarray
    t: int


@dataclass
class _Rows:
    """Every row of the constraint matrix summarized (CSR, duplicates summed, zeros dropped).

    Per entry: ``cols`` / ``vals`` and the row ``row_of``, whether it is t (``is_t``) and
    its job ``ej`` / type ``ek``. Per row (``indptr``, ``n_rows`` rows): entries ``nnz``, X
    entries ``n_x`` and t entries ``n_t``, t's coefficient ``t_coef``, the smallest and
    largest job, type and X coefficient (``jmin`` ... ``vmax``), and the bounds ``rlb`` /
    ``rub``.
    """

    n_rows: int
    indptr: np.ndarray
    cols: np.ndarray
    vals: np.ndarray
    nnz: np.ndarray
    row_of: np.ndarray
    is_t: np.ndarray
    ej: np.ndarray
    ek: np.ndarray
    jmin: np.ndarray
    jmax: np.ndarray
    kmin: np.ndarray
    kmax: np.ndarray
    n_t: np.ndarray
    t_coef: np.ndarray
    n_x: np.ndarray
    vmin: np.ndarray
    vmax: np.ndarray
    rlb: np.ndarray
    rub: np.ndarray


def _parse(lp: LinearProgram) -> tuple[SeparableProblem | None, str]:
    """Generic recognition from the rows, columns and bounds of ``lp``.

    Phases: the variables (:func:`_parse_variables`), a summary of every row
    (:func:`_row_stats`), each row's role (:func:`_row_roles`: time, level/floor,
    capacity, t alone, empty), the level/floor rows (:func:`_level_rows`), the coupling
    rows (:func:`_coupling_rows`), the coefficients (:func:`_scatter`) and the mode
    (:func:`_parsed_problem`). Returns (problem, "") or (None, why not).
    """
    try:
        V = _parse_variables(lp)
        R = _row_stats(lp, V)
        role, time_row = _row_roles(V, R)
        lvl_rows, lvl_jobs, level_row, level_scale = _level_rows(V, R, role)
        cap_row, C, extra_rows, kx, Cx, extra_pos = _coupling_rows(V, R, role)
        A, W, Wx, zr, zj, zk, zcoef = _scatter(V, R, role, level_scale, extra_rows.size, extra_pos)
        cobj = np.asarray(lp.c, dtype=float)
        cX = np.zeros((V.n, V.m))
        cX[V.jj, V.kk] = cobj[V.xv]
        U = V.U
        if zr.size:
            U = _drop_fixed(U, (A, W, cX), Wx, kx, zj, zk)
        common = {"A": A, "U": U, "W": W, "C": C, "x_index": V.xi, "t_index": V.t, "time_row": time_row,
                  "level_row": level_row, "level_scale": level_scale, "cap_row": cap_row, "n_rows": R.n_rows,
                  "Wx": Wx, "kx": kx, "Cx": Cx, "extra_row": extra_rows, "zero_j": zj, "zero_k": zk, "zero_row": zr,
                  "zero_coef": zcoef}
        return _parsed_problem(lp, V, R, role, lvl_rows, lvl_jobs, cobj, cX, common), ""
    except _Refused as why:
        return None, str(why)


def _parse_variables(lp: LinearProgram) -> _Vars:
    """Variables phase: X from ``lp.x_index`` (bounds [0, >= 1]) and at most one more
    variable, the level t; a continuous maximization only."""
    if lp.is_mip:
        raise _Refused("integer variables")
    if lp.sense != "max":
        raise _Refused("not a maximization")
    xi = np.asarray(lp.x_index)
    if xi.ndim != 2:
        raise _Refused("x_index is not 2-D")
    n, m = xi.shape
    nv = lp.n_vars
    U = xi >= 0
    jj, kk = np.nonzero(U)
    xv = xi[jj, kk]
    var_job = np.full(nv, -1, dtype=np.int64)
    var_type = np.full(nv, -1, dtype=np.int64)
    var_job[xv] = jj
    var_type[xv] = kk
    extra = np.flatnonzero(var_job < 0)
    if extra.size > 1:
        raise _Refused(f"{extra.size} variables outside X (at most one, the level t, is allowed)")
    t = int(extra[0]) if extra.size else -1
    if xv.size and (np.any(lp.col_lb[xv] != 0.0) or np.any(lp.col_ub[xv] < 1.0)):
        raise _Refused("X variables must have bounds [0, >= 1]")
    return _Vars(xi=xi, n=n, m=m, nv=nv, U=U, jj=jj, kk=kk, xv=xv, var_job=var_job, var_type=var_type, t=t)


def _row_stats(lp: LinearProgram, V: _Vars) -> _Rows:
    """Summary phase: per-row counts, job/type/coefficient ranges and t's coefficient,
    from segment reductions over the CSR matrix (O(nnz))."""
    A_csr = lp.A.tocsr(copy=True)
    A_csr.sum_duplicates()
    A_csr.eliminate_zeros()
    indptr = A_csr.indptr.astype(np.int64)
    cols = A_csr.indices.astype(np.int64)
    vals = A_csr.data.astype(float)
    R = lp.n_rows
    nnz = np.diff(indptr)
    row_of = np.repeat(np.arange(R, dtype=np.int64), nnz)
    t = V.t
    is_t = cols == t if t >= 0 else np.zeros(cols.shape, dtype=bool)
    ej = V.var_job[cols]
    ek = V.var_type[cols]
    big = float(V.n + V.m + 1)
    jmin = _segment_reduce(np.minimum, np.where(is_t, big, ej), indptr, big)
    jmax = _segment_reduce(np.maximum, np.where(is_t, -1.0, ej), indptr, -1.0)
    kmin = _segment_reduce(np.minimum, np.where(is_t, big, ek), indptr, big)
    kmax = _segment_reduce(np.maximum, np.where(is_t, -1.0, ek), indptr, -1.0)
    n_t = _segment_reduce(np.add, is_t.astype(float), indptr, 0.0)
    t_coef = np.zeros(R)
    np.add.at(t_coef, row_of[is_t], vals[is_t])
    n_x = nnz - n_t
    vmin = _segment_reduce(np.minimum, np.where(is_t, np.inf, vals), indptr, np.inf)
    vmax = _segment_reduce(np.maximum, np.where(is_t, -np.inf, vals), indptr, -np.inf)
    rlb, rub = np.asarray(lp.row_lb, float), np.asarray(lp.row_ub, float)
    return _Rows(n_rows=R, indptr=indptr, cols=cols, vals=vals, nnz=nnz, row_of=row_of, is_t=is_t, ej=ej, ek=ek,
                 jmin=jmin, jmax=jmax, kmin=kmin, kmax=kmax, n_t=n_t, t_coef=t_coef, n_x=n_x, vmin=vmin, vmax=vmax,
                 rlb=rlb, rub=rub)


def _row_roles(V: _Vars, R: _Rows) -> tuple[np.ndarray, np.ndarray]:
    """Roles phase: each row is empty (5), t alone (4), a job's time row (1), a job's
    level/floor row (2) or a single-type capacity row (3); anything else refuses the
    program. Returns (role per row, time row per job)."""
    role = np.zeros(R.n_rows, dtype=np.int8)  # 0 unclassified, 1 time, 2 level/floor, 3 cap, 4 t-only, 5 empty
    empty = R.nnz == 0
    if np.any(empty & ((R.rlb > 0) | (R.rub < 0))):
        raise _Refused("an empty row excludes 0")
    role[empty] = 5
    t_only = (R.n_x == 0) & (R.n_t > 0)
    role[t_only] = 4
    single = (R.n_x > 0) & (R.jmin == R.jmax)
    time_row = _time_rows(V, R, single, role)
    # level rows: one job, with t (coefficient -g < 0), [0, inf); floor rows: one job, no t, [f, inf)
    unclassified = role == 0
    lvl = unclassified & single & (R.n_t == 1) & (R.t_coef < 0) & (R.rlb == 0.0) & np.isinf(R.rub) & (R.vmin > 0)
    flo = unclassified & single & (R.n_t == 0) & np.isfinite(R.rlb) & np.isinf(R.rub) & (R.vmin > 0)
    role[lvl | flo] = 2
    # capacity rows: one type, no t, (-inf or <= 0, C], nonnegative coefficients
    cap = ((role == 0) & (R.n_x > 0) & (R.n_t == 0) & (R.kmin == R.kmax) & (R.rlb <= 0.0) & np.isfinite(R.rub)
           & (R.vmin >= 0))
    role[cap] = 3
    if np.any(role == 0):
        r = int(np.flatnonzero(role == 0)[0])
        raise _Refused(f"row {r} is neither a job row nor a single-type capacity row")
    return role, time_row


def _time_rows(V: _Vars, R: _Rows, single: np.ndarray, role: np.ndarray) -> np.ndarray:
    """Each job's time row: one job, no t, coefficients 1, (-inf, 1], all of the job's
    variables (the first such row of a job; marked 1 in ``role``). Every job needs one."""
    n = V.n
    job_vars = np.bincount(V.jj, minlength=n)
    time_cand = single & (R.n_t == 0) & (R.vmin == 1.0) & (R.vmax == 1.0) & (R.rub == 1.0) & (R.rlb <= 0.0)
    time_cand &= R.n_x == job_vars[np.clip(R.jmin, 0, max(n - 1, 0)).astype(np.int64)] if n else time_cand
    cand_rows = np.flatnonzero(time_cand)
    cand_jobs = R.jmin[cand_rows].astype(np.int64)
    first_jobs, first_pos = np.unique(cand_jobs, return_index=True)
    time_row = np.full(n, -1, dtype=np.int64)
    time_row[first_jobs] = cand_rows[first_pos]
    role[time_row[first_jobs]] = 1
    if n and np.any(time_row < 0):
        j = int(np.flatnonzero(time_row < 0)[0])
        raise _Refused(f"job row {j} has no time row (sum_k X[j,k] <= 1)")
    return time_row


def _level_rows(V: _Vars, R: _Rows, role: np.ndarray):
    """Level/floor rows phase: at most one per job. Returns (the rows, their jobs, level
    row per job (-1: none), scale per job: the coefficient of -t, or 1)."""
    lvl_rows = np.flatnonzero(role == 2)
    lvl_jobs = R.jmin[lvl_rows].astype(np.int64)
    if np.any(np.bincount(lvl_jobs, minlength=V.n) > 1):
        raise _Refused("a job has more than one level/floor row")
    level_row = np.full(V.n, -1, dtype=np.int64)
    level_row[lvl_jobs] = lvl_rows
    level_scale = np.ones(V.n)
    level_scale[lvl_jobs] = np.where(R.n_t[lvl_rows] > 0, -R.t_coef[lvl_rows], 1.0)
    return lvl_rows, lvl_jobs, level_row, level_scale


def _coupling_rows(V: _Vars, R: _Rows, role: np.ndarray):
    """Coupling rows phase: single-variable rows ``coef X_jk <= 0`` fix a variable at 0
    (marked 6 in ``role``); of the other capacity rows the first of each type is its
    capacity row, further ones (host CPU or memory rows) are extra coupling rows.
    Returns (capacity row per type, capacities, extra rows, their types, their right-hand
    sides, position of each row among the extra rows (-1: none))."""
    # a row "coef X_jk <= 0" with one variable fixes it at 0 (a gang that never fits)
    zero = (role == 3) & (R.n_x == 1) & (R.rub == 0.0) & (R.vmin > 0)
    role[zero] = 6
    cap_rows = np.flatnonzero(role == 3)
    cap_types = R.kmin[cap_rows].astype(np.int64)
    primary = np.zeros(cap_rows.size, dtype=bool)
    primary[np.unique(cap_types, return_index=True)[1]] = True
    cap_row = np.full(V.m, -1, dtype=np.int64)
    cap_row[cap_types[primary]] = cap_rows[primary]
    C = np.full(V.m, np.inf)
    C[cap_types[primary]] = R.rub[cap_rows[primary]]
    extra_rows, kx = cap_rows[~primary], cap_types[~primary]
    Cx = R.rub[extra_rows]
    if np.any(C < 0) or np.any(Cx < 0):
        raise _Refused("a negative capacity")
    extra_pos = np.full(R.n_rows, -1, dtype=np.int64)
    extra_pos[extra_rows] = np.arange(extra_rows.size)
    return cap_row, C, extra_rows, kx, Cx, extra_pos


def _scatter(V: _Vars, R: _Rows, role: np.ndarray, level_scale: np.ndarray, n_extra: int, extra_pos: np.ndarray):
    """Coefficients phase: A (level rows, divided by ``level_scale``), W (capacity rows,
    at most one per variable), Wx (``n_extra`` extra coupling rows) and the variables fixed
    at 0 by their rows. Returns (A, W, Wx, those rows, their jobs, types, coefficients)."""
    n, m = V.n, V.m
    A = np.zeros((n, m))
    W = np.zeros((n, m))
    xe = ~R.is_t
    r_e, j_e, k_e, v_e = R.row_of[xe], R.ej[xe], R.ek[xe], R.vals[xe]
    in_lvl = role[r_e] == 2
    A[j_e[in_lvl], k_e[in_lvl]] = v_e[in_lvl] / level_scale[j_e[in_lvl]]
    in_cap = (role[r_e] == 3) & (extra_pos[r_e] < 0)
    W[j_e[in_cap], k_e[in_cap]] = v_e[in_cap]
    dup = np.bincount(V.xi[j_e[in_cap], k_e[in_cap]], minlength=V.nv)
    if np.any(dup > 1):
        raise _Refused("a variable is in more than one capacity row")
    in_x = (role[r_e] == 3) & (extra_pos[r_e] >= 0)
    Wx = np.zeros((n, n_extra))
    Wx[j_e[in_x], extra_pos[r_e[in_x]]] = v_e[in_x]
    zr = np.flatnonzero(role == 6)
    zvar = R.cols[R.indptr[zr]]
    return A, W, Wx, zr, V.var_job[zvar], V.var_type[zvar], R.vals[R.indptr[zr]]


def _t_range(lp: LinearProgram, t: int, R: _Rows, role: np.ndarray) -> tuple[bool, float, float]:
    """Range of the level t: its bounds tightened by the rows with t alone. Returns
    (fixed, lower, upper); a program without t counts as t fixed at 0."""
    if t < 0:
        return True, 0.0, 0.0
    tlb, tub = float(lp.col_lb[t]), float(lp.col_ub[t])
    # rows with t alone are bounds on t
    for r in np.flatnonzero(role == 4):
        g = R.t_coef[r]
        lo, hi = sorted((R.rlb[r] / g, R.rub[r] / g))
        tlb, tub = max(tlb, lo), min(tub, hi)
    if tlb > tub:
        raise _Refused("the bounds of t exclude every value")
    return tlb == tub, tlb, tub


def _parsed_problem(lp: LinearProgram, V: _Vars, R: _Rows, role: np.ndarray, lvl_rows: np.ndarray,
                    lvl_jobs: np.ndarray, cobj: np.ndarray, cX: np.ndarray, common: dict) -> SeparableProblem:
    """Mode phase: a free t with an objective that is a positive multiple of it is the
    level mode; a fixed t (or none) the floor mode, whose floors are t's value (level rows)
    or the rows' own lower bounds. ``common``: the fields both modes share."""
    fixed, tlb, tub = _t_range(lp, V.t, R, role)
    offset = float(lp.offset)
    has_lvl_t = np.zeros(V.n, dtype=bool)
    has_lvl_t[lvl_jobs] = R.n_t[lvl_rows] > 0
    level_row = common["level_row"]
    if not fixed:
        gamma = float(cobj[V.t])
        if gamma <= 0 or np.any(cX != 0):
            raise _Refused("t is free but the objective is not a positive multiple of t")
        if np.any((level_row >= 0) & ~has_lvl_t):
            raise _Refused("a floor row without t next to a free t")
        if not np.isfinite(tlb):
            raise _Refused("t has no lower bound")
        return SeparableProblem(c=None, floors=None, has_level=level_row >= 0, gamma=gamma,
                                t_bounds=(tlb, tub), offset=offset, t_value=0.0, **common)
    t_val = tlb
    floors = np.full(V.n, -np.inf)
    floors[lvl_jobs] = np.where(has_lvl_t[lvl_jobs], t_val, R.rlb[lvl_rows] / common["level_scale"][lvl_jobs])
    if V.t >= 0:
        offset += float(cobj[V.t]) * t_val
    return SeparableProblem(c=cX, floors=floors, has_level=level_row >= 0, gamma=0.0, t_bounds=(t_val, t_val),
                            offset=offset, t_value=t_val, **common)
