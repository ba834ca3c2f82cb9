r"""Synergy's three ways to give the jobs of a round their host CPU cores and memory:
GPU-proportional, Synergy-TUNE (greedy, on servers) and Synergy-OPT (an LP).

Mohan et al., "Looking Beyond GPUs for DNN Scheduling on Multi-Tenant Clusters", OSDI 2022,
§4. The jobs that run and their GPU type are fixed beforehand by the GPU policy (FIFO, SRTF,
LAS: :class:`~hetsched.schedulers.synergy.Synergy`); these functions only divide each GPU
type's host CPUs :math:`C_k` and memory :math:`M_k` (over :math:`G_k` GPUs) among them. A job
:math:`j` of gang :math:`s_j` on type :math:`k` gets :math:`c_j` cores and :math:`m_j` GB per
GPU and runs at :math:`f_j(c_j, m_j)` times its GPU-bound throughput
(:mod:`hetsched.inputs.host_profiles`).

GPU-proportional (the baseline)
    :math:`c_j = C_k / G_k`, :math:`m_j = M_k / G_k`: every GPU brings its share of its
    servers. Always feasible; wastes what insensitive jobs do not use.

Synergy-TUNE (§4, the greedy)
    Each job's *demand* is its best case :math:`(c^*_j, m^*_j)` per GPU; its *fallback* is
    :math:`\min(\text{demand}, \text{proportional})` per resource, which runs at exactly the
    proportional speed (:math:`f` depends on each resource only up to the demand). Walking
    the jobs in the policy's order, on the servers of the job's type:

    1. place the gang with its demand (on one server, the fullest that fits; else GPU by GPU
       over servers, fullest first, each GPU bringing the per-GPU demand);
    2. else place it with its fallback;
    3. else take back from peers: server by server (fullest first among those with a free
       GPU), the jobs placed there that hold more than their fallback are cut to it (on all
       their servers) one at a time, those on fewest servers first, then those with the
       most cores per GPU, then the most memory per GPU (the order of Synergy's simulator),
       retrying the job with its fallback after each cut.

    Step 3 always succeeds when the type has :math:`s_j` free GPUs: once every job on a
    server holds at most its proportional share, the server's free cores are at least
    :math:`C_k/G_k` per free GPU. So no job runs slower than under GPU-proportional.

Synergy-OPT (§4, the LP)
    Over a grid of configurations :math:`p = (c_p, m_p)` per job (CPU at
    :math:`\{\frac14, \frac12, \frac34, 1\} c^*_j` and the proportional share, memory at
    :math:`\{0, \frac14, \frac12, \frac34, 1\} m^*_j` and the proportional share: 30 points,
    the proportional point among them), choose weights :math:`y_{jp} \ge 0`:

    .. math::

        \max \sum_j \sum_p y_{jp} \frac{f_j(p)}{f_j(\text{prop})}
        \quad\text{s.t.}\quad \sum_p y_{jp} = 1, \quad
        \sum_p y_{jp} f_j(p) \ge f_j(\text{prop}) \ \ \forall j,

        \sum_{j \text{ on } k} s_j \sum_p y_{jp} c_p \le C_k, \quad
        \sum_{j \text{ on } k} s_j \sum_p y_{jp} m_p \le M_k \ \ \forall k.

    The objective is the sum of the jobs' speed-ups over GPU-proportional (unit-free, so
    jobs of different models add up); the second row keeps every job at least as fast as
    proportional (the paper's fairness rule). It pools each type's servers into one and
    lets a job mix configurations within the round (``y`` fractional), so it is an upper
    bound on what a placement can reach, which is how the paper uses it (§4: OPT's ideal
    allocation needs jobs split across servers).

Examples
--------
Two 1-GPU jobs share one server of 2 GPUs, 8 cores and no memory need: job 0 needs 6 cores
per GPU, job 1 needs 1. Proportional gives each 4 (job 0 at 4/6); TUNE gives job 0 its 6
and job 1 its 1:

>>> import numpy as np
>>> from hetsched.inputs.host_profiles import HostSensitivity
>>> from hetsched.schedulers.synergy_alloc import HostServers, tune
>>> sens = HostSensitivity(np.array([6.0, 1.0]), np.zeros(2), np.zeros(2))
>>> servers = HostServers(np.array([0]), np.array([2]), np.array([8.0]), np.array([100.0]))
>>> out = tune(np.array([0, 1]), np.array([0, 0]), np.array([1, 1]), sens, servers,
...            prop_cpus=np.array([4.0]), prop_mem=np.array([50.0]))
>>> out.cpus.tolist(), out.speed.tolist()
([6.0, 1.0], [1.0, 1.0])
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..inputs.cluster import Cluster
from ..inputs.host_profiles import HostSensitivity, best_case_demand, speed_fraction
from ..solvers.program import LinearProgram
from ..solvers.registry import capabilities, get_backend

__all__ = ["HostAllocation", "HostServers", "host_servers", "opt", "opt_program", "proportional", "tune"]

log = logging.getLogger(__name__)

_EPS = 1e-9
#: OPT's grid: CPU at these fractions of the demand (and the proportional share) ...
CPU_FRACTIONS = (0.25, 0.5, 0.75, 1.0)
#: ... times memory at these fractions of the demand (and the proportional share).
MEM_FRACTIONS = (0.0, 0.25, 0.5, 0.75, 1.0)


@dataclass(frozen=True, eq=False)
class HostServers:
    """Servers as aligned arrays: GPU type column, GPUs, host CPU cores, host memory (GB)."""

    gpu_type: np.ndarray
    gpus: np.ndarray
    cpus: np.ndarray
    memory: np.ndarray

    @property
    def n_servers(self) -> int:
        """Number of servers."""
        return int(self.gpus.shape[0])


@dataclass(frozen=True, eq=False)
class HostAllocation:
    """What a job of the round gets (arrays aligned with the ``jobs`` given).

    Attributes
    ----------
    cpus, mem : ndarray
        CPU cores and GB of memory per GPU (OPT: the average of its mixture).
    speed : ndarray
        Fraction of the GPU-bound throughput the job runs at.
    placed : ndarray of bool
        False for a job TUNE could not place (never when the GPU walk left it room).
    servers : ndarray of int64
        Servers the job's gang spans (TUNE; 0 otherwise).
    info : dict
        ``solve_status``, ``solve_s`` (OPT).
    """

    cpus: np.ndarray
    mem: np.ndarray
    speed: np.ndarray
    placed: np.ndarray
    servers: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)


def host_servers(cluster: Cluster, gpu_types: tuple[str, ...], cpus: np.ndarray, memory: np.ndarray,
                 gpus_per_server: int) -> HostServers:
    """The cluster's servers with each type's host CPUs and memory split over them by GPUs.

    A cluster with a topology gives its servers; one without is cut into servers of
    ``gpus_per_server`` GPUs per type (the last one smaller).
    """
    types, gpus = [], []
    topo = cluster.topology
    if topo is not None:
        for srv_type, n in zip(np.asarray(topo.server_type).tolist(), np.asarray(topo.server_gpus).tolist()):
            name = topo.gpu_types[srv_type]
            if name in gpu_types and n > 0:
                types.append(gpu_types.index(name))
                gpus.append(int(n))
    else:
        for k, t in enumerate(gpu_types):
            left = cluster.count(t)
            while left > 0:
                types.append(k)
                gpus.append(min(gpus_per_server, left))
                left -= gpus_per_server
    st = np.asarray(types, dtype=np.int64)
    g = np.asarray(gpus, dtype=np.int64)
    per_type = np.bincount(st, weights=g, minlength=len(gpu_types))
    share = g / np.maximum(per_type[st], 1)
    return HostServers(st, g, np.asarray(cpus, float)[st] * share, np.asarray(memory, float)[st] * share)


def proportional(job_type: np.ndarray, scale_factors: np.ndarray, sens: HostSensitivity, *,
                 prop_cpus: np.ndarray, prop_mem: np.ndarray) -> HostAllocation:
    """GPU-proportional: every job gets its type's cores and memory per GPU."""
    c = prop_cpus[job_type].astype(float)
    m = prop_mem[job_type].astype(float)
    speed = speed_fraction(c, m, scale_factors, cpu_demand=sens.cpu_demand, dataset_gb=sens.dataset_gb,
                           io_ratio=sens.io_ratio)
    n = job_type.shape[0]
    return HostAllocation(c, m, speed, np.ones(n, bool), np.zeros(n, np.int64))


class _Servers:
    """Free GPUs, cores and memory per server, and who holds what (TUNE's working state)."""

    def __init__(self, servers: HostServers, n_jobs: int) -> None:
        self.type = servers.gpu_type
        self.free_g = servers.gpus.astype(np.int64).copy()
        self.free_c = servers.cpus.astype(float).copy()
        self.free_m = servers.memory.astype(float).copy()
        self.on: list[dict[int, int]] = [{} for _ in range(servers.n_servers)]     # server -> {job: GPUs}
        self.where: list[dict[int, int]] = [{} for _ in range(n_jobs)]              # job -> {server: GPUs}

    def place(self, j: int, s: int, c: float, m: float, idx: np.ndarray) -> bool:
        """Gang ``j`` of ``s`` GPUs, ``c`` cores and ``m`` GB per GPU, on servers ``idx``."""
        fg, fc, fm = self.free_g[idx], self.free_c[idx], self.free_m[idx]
        whole = np.flatnonzero((fg >= s) & (fc + _EPS >= s * c) & (fm + _EPS >= s * m))
        if whole.size:
            pick = whole[np.argmin(fg[whole])]
            self._take(j, int(idx[pick]), s, c, m)
            return True
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            by_c = np.where(c > 0, np.floor((fc + _EPS) / c), np.inf)
            by_m = np.where(m > 0, np.floor((fm + _EPS) / m), np.inf)
        room = np.minimum(fg, np.minimum(by_c, by_m)).astype(np.int64)
        if room.sum() < s:
            return False
        left = s
        order = np.argsort(fg, kind="stable")
        for p in order[room[order] > 0].tolist():      # servers with no room add nothing
            take = min(int(room[p]), left)
            self._take(j, int(idx[p]), take, c, m)
            left -= take
            if left == 0:
                break
        return True

    def _take(self, j: int, srv: int, g: int, c: float, m: float) -> None:
        self.free_g[srv] -= g
        self.free_c[srv] -= g * c
        self.free_m[srv] -= g * m
        self.on[srv][j] = self.on[srv].get(j, 0) + g
        self.where[j][srv] = self.where[j].get(srv, 0) + g

    def cut(self, j: int, dc: float, dm: float) -> None:
        """Job ``j`` gives back ``dc`` cores and ``dm`` GB per GPU on all its servers."""
        for srv, g in self.where[j].items():
            self.free_c[srv] += g * dc
            self.free_m[srv] += g * dm


def tune(jobs_in_order: np.ndarray, job_type: np.ndarray, scale_factors: np.ndarray, sens: HostSensitivity,
         servers: HostServers, *, prop_cpus: np.ndarray, prop_mem: np.ndarray) -> HostAllocation:
    """Synergy-TUNE (module docstring): place the jobs on servers in ``jobs_in_order``.

    Parameters
    ----------
    jobs_in_order : ndarray of int
        Positions (into the other per-job arrays) in the policy's order.
    job_type : ndarray of int
        GPU type column of each job (the GPU walk's choice).
    scale_factors : ndarray of int
    sens : HostSensitivity
        The jobs' sensitivity (aligned with ``job_type``).
    servers : HostServers
    prop_cpus, prop_mem : ndarray, shape (n_types,)
        Cores and GB per GPU of each type (the proportional share).
    """
    n = job_type.shape[0]
    s = np.asarray(scale_factors, dtype=np.int64)
    dc, dm = best_case_demand(sens, s)
    fc = np.minimum(dc, prop_cpus[job_type])
    fm = np.minimum(dm, prop_mem[job_type])
    cpus = np.zeros(n)
    mem = np.zeros(n)
    placed = np.zeros(n, bool)
    state = _Servers(servers, n)
    of_type = [np.flatnonzero(servers.gpu_type == k) for k in range(prop_cpus.shape[0])]
    n_cut = 0
    for j in np.asarray(jobs_in_order, dtype=np.int64).tolist():
        idx = of_type[job_type[j]]
        sj = int(s[j])
        if state.place(j, sj, dc[j], dm[j], idx):
            cpus[j], mem[j], placed[j] = dc[j], dm[j], True
            continue
        if state.place(j, sj, fc[j], fm[j], idx):
            cpus[j], mem[j], placed[j] = fc[j], fm[j], True
            continue
        for srv in idx[np.argsort(state.free_g[idx], kind="stable")].tolist():
            if state.free_g[srv] == 0:
                continue
            peers = [p for p in state.on[srv] if cpus[p] > fc[p] + _EPS or mem[p] > fm[p] + _EPS]
            peers.sort(key=lambda p: (len(state.where[p]), -cpus[p], -mem[p], p))
            for p in peers:
                state.cut(p, cpus[p] - fc[p], mem[p] - fm[p])
                cpus[p], mem[p] = fc[p], fm[p]
                n_cut += 1
                if state.place(j, sj, fc[j], fm[j], idx):
                    cpus[j], mem[j], placed[j] = fc[j], fm[j], True
                    break
            if placed[j]:
                break
        if not placed[j]:
            log.warning("synergy-tune: job row %d (%d GPUs) found no room on its type's servers", j, sj)
    speed = speed_fraction(cpus, mem, s, cpu_demand=sens.cpu_demand, dataset_gb=sens.dataset_gb,
                           io_ratio=sens.io_ratio)
    speed = np.where(placed, speed, 0.0)
    spans = np.array([len(w) for w in state.where], dtype=np.int64)
    return HostAllocation(cpus, mem, speed, placed, spans, info={"peers_cut": n_cut})


def _grid(job_type: np.ndarray, scale_factors: np.ndarray, sens: HostSensitivity, prop_cpus: np.ndarray,
          prop_mem: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per job the grid's CPU values (n, a), memory values (n, b) and speeds (n, a, b)."""
    dc, dm = best_case_demand(sens, scale_factors)
    C = np.concatenate([dc[:, None] * np.asarray(CPU_FRACTIONS)[None, :], prop_cpus[job_type][:, None]], axis=1)
    M = np.concatenate([dm[:, None] * np.asarray(MEM_FRACTIONS)[None, :], prop_mem[job_type][:, None]], axis=1)
    F = speed_fraction(C[:, :, None], M[:, None, :], np.asarray(scale_factors)[:, None, None],
                       cpu_demand=sens.cpu_demand[:, None, None], dataset_gb=sens.dataset_gb[:, None, None],
                       io_ratio=sens.io_ratio[:, None, None])
    return C, M, F


def opt_program(job_type: np.ndarray, scale_factors: np.ndarray, sens: HostSensitivity, *, cpus: np.ndarray,
                memory: np.ndarray, prop_cpus: np.ndarray, prop_mem: np.ndarray,
                integral: bool = False) -> LinearProgram:
    """Synergy-OPT's LP (module docstring) as a :class:`~hetsched.solvers.program.LinearProgram`.

    ``cpus`` and ``memory`` are each type's host totals. Grid points that another point of
    the same job dominates (no more cores or memory, no less speed; duplicates) get no
    variable: they cannot improve any mixture. ``meta`` holds the grid (``C``, ``M``, ``F``),
    the proportional speeds ``F_prop`` and each variable's ``job`` and grid ``point``.
    ``integral=True`` makes every ``y`` binary: one configuration per job (a MILP).
    """
    n = job_type.shape[0]
    n_types = cpus.shape[0]
    C, M, F = _grid(job_type, scale_factors, sens, prop_cpus, prop_mem)
    a, b = C.shape[1], M.shape[1]
    P = a * b
    F_prop = F[:, a - 1, b - 1]
    Ff = F.reshape(n, P)
    Cf = np.repeat(C, b, axis=1)
    Mf = np.tile(M, (1, a))
    # a point another point beats (no more cores, no more memory, no less speed) never helps:
    # swapping it for that point in any mixture keeps every row and the objective
    q_le = (Cf[:, :, None] <= Cf[:, None, :]) & (Mf[:, :, None] <= Mf[:, None, :]) & (Ff[:, :, None] >= Ff[:, None, :])
    strict = (Cf[:, :, None] < Cf[:, None, :]) | (Mf[:, :, None] < Mf[:, None, :]) | (Ff[:, :, None] > Ff[:, None, :])
    first = np.arange(P)[:, None] < np.arange(P)[None, :]          # ties: the first copy stays
    keep = ~(q_le & (strict | first[None, :, :])).any(axis=1)
    job_of, point = np.nonzero(keep)
    nv = job_of.shape[0]
    s = np.asarray(scale_factors, dtype=float)
    cols = np.arange(nv)
    kt = job_type[job_of]
    rows = np.concatenate([job_of, n + job_of, 2 * n + kt, 2 * n + n_types + kt])
    vals = np.concatenate([np.ones(nv), Ff[job_of, point], s[job_of] * Cf[job_of, point],
                           s[job_of] * Mf[job_of, point]])
    A = sp.csr_array(sp.coo_array((vals, (rows, np.tile(cols, 4))), shape=(2 * n + 2 * n_types, nv)))
    row_lb = np.concatenate([np.ones(n), F_prop, np.full(2 * n_types, -np.inf)])
    row_ub = np.concatenate([np.ones(n), np.full(n, np.inf), cpus, memory])
    return LinearProgram(c=Ff[job_of, point] / F_prop[job_of], A=A, row_lb=row_lb, row_ub=row_ub,
                         col_lb=np.zeros(nv), col_ub=np.ones(nv), x_index=np.zeros((n, 0), np.int64),
                         sense="max", name="synergy_opt", integrality=np.full(nv, bool(integral)),
                         meta={"C": C, "M": M, "F": F, "F_prop": F_prop, "job": job_of, "point": point})


def opt(job_type: np.ndarray, scale_factors: np.ndarray, sens: HostSensitivity, *, cpus: np.ndarray,
        memory: np.ndarray, prop_cpus: np.ndarray, prop_mem: np.ndarray, solver: str = "highs",
        time_limit: float | None = None, integral: bool = False, mip_gap: float = 1e-3) -> HostAllocation:
    """Synergy-OPT: solve :func:`opt_program`; a solve that does not reach "optimal" gives
    GPU-proportional, with the solver's status in ``info`` (never a clipped solution).
    ``integral``: one configuration per job, solved to the relative gap ``mip_gap``."""
    n = job_type.shape[0]
    if n == 0:
        return HostAllocation(np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0, bool), np.zeros(0, np.int64),
                              info={"solve_status": "optimal", "solve_ok": True, "solve_s": 0.0})
    lp = opt_program(job_type, scale_factors, sens, cpus=cpus, memory=memory, prop_cpus=prop_cpus,
                     prop_mem=prop_mem, integral=integral)
    backend = get_backend(solver)
    gap = capabilities(solver).gap_option if integral else None
    out = backend.solve(lp, time_limit=time_limit, options={gap: mip_gap} if gap else None)
    info = {"solve_status": out.status, "solve_ok": bool(out.success), "solve_s": float(out.solve_s),
            "objective": float(out.objective)}
    if not out.success:
        log.warning("synergy-opt: the LP ended %s (%s); this round runs GPU-proportional", out.status, out.message)
        base = proportional(job_type, scale_factors, sens, prop_cpus=prop_cpus, prop_mem=prop_mem)
        return HostAllocation(base.cpus, base.mem, base.speed, base.placed, base.servers, info=info)
    a, b = lp.meta["C"].shape[1], lp.meta["M"].shape[1]
    y = np.zeros((n, a * b))
    y[lp.meta["job"], lp.meta["point"]] = out.x
    y = y.reshape(n, a, b)
    speed = np.einsum("jab,jab->j", y, lp.meta["F"])
    c = np.einsum("jab,ja->j", y, lp.meta["C"])
    m = np.einsum("jab,jb->j", y, lp.meta["M"])
    return HostAllocation(c, m, speed, np.ones(n, bool), np.zeros(n, np.int64), info=info)
