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

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..errors import SolverError
from ..solvers.highs import HighsBackend
from ..solvers.program import LinearProgram
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
    topo = req.topology
    n, S = req.n_jobs, topo.n_servers
    free = req.server_free
    size, jtype = req.size, req.job_type
    g_max = np.zeros(len(topo.gpu_types), np.int64)
    np.maximum.at(g_max, topo.server_type, topo.server_gpus)
    too_large = size > g_max[jtype]
    eligible = ~too_large | req.split_large_jobs
    # variables: x (j,s) for compatible pairs, w (j,s) for whole-fit pairs, p (j), y (j,r)
    jj, ss = np.nonzero((topo.server_type[None, :] == jtype[:, None]) & (free[None, :] > 0) & eligible[:, None])
    nx_ = jj.size
    wmask = (size[jj] > 1) & (free[ss] >= size[jj]) & ~too_large[jj]
    wj, ws = jj[wmask], ss[wmask]
    nw = wj.size
    big = np.flatnonzero(too_large & eligible)
    racks = np.arange(topo.n_racks)
    yj = np.repeat(big, topo.n_racks)
    yr = np.tile(racks, big.size)
    ny = yj.size
    ox, ow, op, oy = 0, nx_, nx_ + nw, nx_ + nw + n
    nv = oy + ny
    big_m = float(nw + 1)
    c = np.zeros(nv)
    c[op : op + n] = big_m * size
    c[ow : ow + nw] = 1.0
    rows, cols, vals, lb, ub = [], [], [], [], []
    # rows 0..n-1: sum_s x_js - s_j p_j = 0
    rows += [jj, np.arange(n)]
    cols += [ox + np.arange(nx_), op + np.arange(n)]
    vals += [np.ones(nx_), -size.astype(float)]
    lb.append(np.zeros(n)); ub.append(np.zeros(n))  # noqa: E702
    r = n
    # x_js - s_j w_js >= 0  (position of x for (wj, ws))
    xpos = {(a, b): i for i, (a, b) in enumerate(zip(jj.tolist(), ss.tolist()))}
    wx = np.fromiter((xpos[(a, b)] for a, b in zip(wj.tolist(), ws.tolist())), dtype=np.int64, count=nw)
    rows += [r + np.arange(nw), r + np.arange(nw)]
    cols += [ox + wx, ow + np.arange(nw)]
    vals += [np.ones(nw), -size[wj].astype(float)]
    lb.append(np.zeros(nw)); ub.append(np.full(nw, np.inf))  # noqa: E702
    r += nw
    # sum_j x_js <= free_s
    rows.append(r + ss)
    cols.append(ox + np.arange(nx_))
    vals.append(np.ones(nx_))
    lb.append(np.full(S, -np.inf)); ub.append(free.astype(float))  # noqa: E702
    r += S
    if ny:
        # x_js <= s_j y_{j, rack(s)} for big jobs; sum_r y_jr <= 1
        bmask = too_large[jj]
        bi = np.flatnonzero(bmask)
        ypos = {(a, b): i for i, (a, b) in enumerate(zip(yj.tolist(), yr.tolist()))}
        yi = np.fromiter((ypos[(int(jj[i]), int(topo.server_rack[ss[i]]))] for i in bi), dtype=np.int64, count=bi.size)
        rows += [r + np.arange(bi.size), r + np.arange(bi.size)]
        cols += [ox + bi, oy + yi]
        vals += [np.ones(bi.size), -size[jj[bi]].astype(float)]
        lb.append(np.full(bi.size, -np.inf)); ub.append(np.zeros(bi.size))  # noqa: E702
        r += bi.size
        bidx = np.searchsorted(big, yj)
        rows.append(r + bidx)
        cols.append(oy + np.arange(ny))
        vals.append(np.ones(ny))
        lb.append(np.full(big.size, -np.inf)); ub.append(np.ones(big.size))  # noqa: E702
        r += big.size
    A = sp.csr_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(r, nv))
    col_ub = np.concatenate(
        [np.minimum(size[jj], free[ss]).astype(float), np.ones(nw), eligible.astype(float), np.ones(ny)]
    )
    lp = LinearProgram(
        c=c,
        A=A,
        row_lb=np.concatenate(lb),
        row_ub=np.concatenate(ub),
        col_lb=np.zeros(nv),
        col_ub=col_ub,
        x_index=np.zeros((0, 0), np.int64),
        sense="max",
        integrality=np.ones(nv, bool),
        name="placement_oracle",
    )
    out = HighsBackend().solve(lp, time_limit=time_limit)
    if not out.has_solution:
        raise SolverError(f"placement oracle: HiGHS returned {out.status!r} without a solution.")
    sol = np.rint(out.x).astype(np.int64)
    X = np.zeros((n, S), np.int64)
    X[jj, ss] = sol[ox : ox + nx_]
    placed = sol[op : op + n] > 0
    whole = ((X == size[:, None]) & (size[:, None] > 1)).any(axis=1)
    return OracleResult(
        x=X,
        placed=placed,
        placed_gpus=int(size[placed].sum()),
        consolidated=int((whole & placed).sum()),
        status=out.status,
    )
