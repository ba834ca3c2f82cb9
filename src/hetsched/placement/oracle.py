r"""Exact placement by integer programming (HiGHS): a test oracle for tiny clusters.

For jobs :math:`j` (type :math:`k_j`, size :math:`s_j`) and servers :math:`s` of the job's
type with :math:`f_s` usable GPUs:

.. math::

    \max\; & M \sum_j s_j p_j + \sum_{j: s_j > 1} \sum_s w_{js} \\
    \text{s.t.}\; & \sum_s x_{js} = s_j p_j, \quad
      x_{js} \ge s_j w_{js}, \quad
      \sum_j x_{js} \le f_s, \\
    & x_{js} \in \{0..\min(s_j, f_s)\},\; p_j, w_{js} \in \{0, 1\},

with :math:`M` larger than the number of gangs: first place as many GPUs as possible with
whole gangs (:math:`p_j` all or nothing), then put as many multi-GPU gangs as possible on
one server (:math:`w_{js} = 1`). Jobs larger than every server of their type are left out
(or, with ``split_large_jobs``, kept in one rack by binaries :math:`y_{jr}`).

In plain numpy terms: ``x[j, s]`` GPUs of job j on server s; ``p[j] = x[j].sum() / size[j]``;
``w[j, s] = x[j, s] == size[j]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..errors import SolverError
from ..solvers.highs import HighsBackend
from ..solvers.program import LinearProgram
from .network import gang_limits
from .request import PlacementRequest

__all__ = ["OracleResult", "oracle_placement"]


@dataclass(frozen=True, eq=False)
class OracleResult:
    """Optimum of the placement ILP.

    Attributes
    ----------
    x : ndarray of int, shape (n_jobs, n_servers)
        GPUs of each job on each server.
    placed : ndarray of bool
    placed_gpus, consolidated : int
        GPUs placed, and multi-GPU jobs placed on one server.
    status : str
    """

    x: np.ndarray
    placed: np.ndarray
    placed_gpus: int
    consolidated: int
    status: str


def oracle_placement(req: PlacementRequest, *, time_limit: float = 30.0) -> OracleResult:
    """Solve the placement ILP exactly (see the module docstring). For tiny instances only.

    Parameters
    ----------
    req : PlacementRequest
        From :func:`hetsched.placement.request.make_request`.
    time_limit : float
        Seconds for HiGHS.

    Returns
    -------
    OracleResult
    """
    cols = _columns(req)
    out = HighsBackend().solve(_program(req, cols), time_limit=time_limit)
    if not out.has_solution:
        raise SolverError(f"placement oracle: HiGHS returned {out.status!r} without a solution.")
    sol = np.rint(out.x).astype(np.int64)
    size = req.size
    X = np.zeros((req.n_jobs, req.topology.n_servers), np.int64)
    X[cols.jj, cols.ss] = sol[cols.ox : cols.ox + cols.nx]
    placed = sol[cols.op : cols.op + req.n_jobs] > 0
    whole = ((X == size[:, None]) & (size[:, None] > 1)).any(axis=1)
    return OracleResult(
        x=X,
        placed=placed,
        placed_gpus=int(size[placed].sum()),
        consolidated=int((whole & placed).sum()),
        status=out.status,
    )


@dataclass(frozen=True, eq=False)
class _Columns:
    """The ILP's variables, laid out ``x | w | p | y`` from column offsets ``ox, ow, op, oy``.

    ``x`` for each compatible (job ``jj``, server ``ss``) pair, ``w`` for each whole-fit
    pair (``wj``, ``ws``), ``p`` per job, ``y`` per (big job ``yj``, rack ``yr``); ``big``
    are the jobs larger than every server that may be split (``split_large_jobs``).
    """

    too_large: np.ndarray
    eligible: np.ndarray
    jj: np.ndarray
    ss: np.ndarray
    wj: np.ndarray
    ws: np.ndarray
    big: np.ndarray
    yj: np.ndarray
    yr: np.ndarray
    nx: int
    nw: int
    ny: int
    ox: int
    ow: int
    op: int
    oy: int
    nv: int


def _columns(req: PlacementRequest) -> _Columns:
    """Variables of the ILP of ``req``: compatible, whole-fit and rack pairs with their offsets."""
    topo = req.topology
    free, size, jtype = req.server_free, req.size, req.job_type
    too_large = gang_limits(req)[1]
    eligible = ~too_large | req.split_large_jobs
    jj, ss = np.nonzero((topo.server_type[None, :] == jtype[:, None]) & (free[None, :] > 0) & eligible[:, None])
    wmask = (size[jj] > 1) & (free[ss] >= size[jj]) & ~too_large[jj]
    big = np.flatnonzero(too_large & eligible)
    nx, nw = jj.size, int(wmask.sum())
    ny = big.size * topo.n_racks
    return _Columns(
        too_large=too_large,
        eligible=eligible,
        jj=jj,
        ss=ss,
        wj=jj[wmask],
        ws=ss[wmask],
        big=big,
        yj=np.repeat(big, topo.n_racks),
        yr=np.tile(np.arange(topo.n_racks), big.size),
        nx=nx,
        nw=nw,
        ny=ny,
        ox=0,
        ow=nx,
        op=nx + nw,
        oy=nx + nw + req.n_jobs,
        nv=nx + nw + req.n_jobs + ny,
    )


@dataclass(eq=False)
class _Rows:
    """Constraint rows collected as COO triplets with their bounds; ``r`` rows so far."""

    rows: list[np.ndarray] = field(default_factory=list)
    cols: list[np.ndarray] = field(default_factory=list)
    vals: list[np.ndarray] = field(default_factory=list)
    lb: list[np.ndarray] = field(default_factory=list)
    ub: list[np.ndarray] = field(default_factory=list)
    r: int = 0

    def add(self, rows: list, cols: list, vals: list, lb: np.ndarray, ub: np.ndarray) -> None:
        """Append ``lb.size`` rows; ``rows`` are numbered from 0 within the block."""
        self.rows += [self.r + x for x in rows]
        self.cols += cols
        self.vals += vals
        self.lb.append(lb)
        self.ub.append(ub)
        self.r += lb.size


def _program(req: PlacementRequest, cols: _Columns) -> LinearProgram:
    """The ILP of ``req`` over ``cols`` (objective, rows and column bounds) for HiGHS."""
    n, size, free = req.n_jobs, req.size, req.server_free
    jj, ss, nw, ny = cols.jj, cols.ss, cols.nw, cols.ny
    c = np.zeros(cols.nv)
    c[cols.op : cols.op + n] = float(nw + 1) * size
    c[cols.ow : cols.ow + nw] = 1.0
    rows = _Rows()
    _gang_rows(req, cols, rows)
    if ny:
        _rack_rows(req, cols, rows)
    A = sp.csr_array(
        (np.concatenate(rows.vals), (np.concatenate(rows.rows), np.concatenate(rows.cols))), shape=(rows.r, cols.nv)
    )
    col_ub = np.concatenate(
        [np.minimum(size[jj], free[ss]).astype(float), np.ones(nw), cols.eligible.astype(float), np.ones(ny)]
    )
    return LinearProgram(
        c=c,
        A=A,
        row_lb=np.concatenate(rows.lb),
        row_ub=np.concatenate(rows.ub),
        col_lb=np.zeros(cols.nv),
        col_ub=col_ub,
        x_index=np.zeros((0, 0), np.int64),
        sense="max",
        integrality=np.ones(cols.nv, bool),
        name="placement_oracle",
    )


def _gang_rows(req: PlacementRequest, cols: _Columns, rows: _Rows) -> None:
    """Append the rows every instance has: whole gangs (``p_j``), whole-fit ``w_js``, server capacity."""
    n, size, free = req.n_jobs, req.size, req.server_free
    jj, ss, nx, nw = cols.jj, cols.ss, cols.nx, cols.nw
    # sum_s x_js - s_j p_j = 0
    rows.add(
        [jj, np.arange(n)],
        [cols.ox + np.arange(nx), cols.op + np.arange(n)],
        [np.ones(nx), -size.astype(float)],
        np.zeros(n),
        np.zeros(n),
    )
    # x_js - s_j w_js >= 0  (position of x for (wj, ws))
    xpos = {(a, b): i for i, (a, b) in enumerate(zip(jj.tolist(), ss.tolist()))}
    wx = np.fromiter((xpos[(a, b)] for a, b in zip(cols.wj.tolist(), cols.ws.tolist())), dtype=np.int64, count=nw)
    rows.add(
        [np.arange(nw), np.arange(nw)],
        [cols.ox + wx, cols.ow + np.arange(nw)],
        [np.ones(nw), -size[cols.wj].astype(float)],
        np.zeros(nw),
        np.full(nw, np.inf),
    )
    # sum_j x_js <= free_s
    rows.add(
        [ss], [cols.ox + np.arange(nx)], [np.ones(nx)], np.full(req.topology.n_servers, -np.inf), free.astype(float)
    )


def _rack_rows(req: PlacementRequest, cols: _Columns, rows: _Rows) -> None:
    """Append the one-rack rows of big jobs: ``x_js <= s_j y_{j, rack(s)}`` and ``sum_r y_jr <= 1``."""
    jj, big, ny = cols.jj, cols.big, cols.ny
    bi = np.flatnonzero(cols.too_large[jj])
    ypos = {(a, b): i for i, (a, b) in enumerate(zip(cols.yj.tolist(), cols.yr.tolist()))}
    rack = req.topology.server_rack
    yi = np.fromiter((ypos[(int(jj[i]), int(rack[cols.ss[i]]))] for i in bi), dtype=np.int64, count=bi.size)
    rows.add(
        [np.arange(bi.size), np.arange(bi.size)],
        [cols.ox + bi, cols.oy + yi],
        [np.ones(bi.size), -req.size[jj[bi]].astype(float)],
        np.full(bi.size, -np.inf),
        np.zeros(bi.size),
    )
    rows.add(
        [np.searchsorted(big, cols.yj)],
        [cols.oy + np.arange(ny)],
        [np.ones(ny)],
        np.full(big.size, -np.inf),
        np.ones(big.size),
    )
