r"""The placement flow network, built with arrays: one node per job, not one per GPU.

Nodes
-----
``job j`` (supply :math:`s_j`, the GPUs it needs) · ``sink`` (demand :math:`\sum_j s_j`) ·
``T_k`` "anywhere of type k" · ``R_{k,r}`` type k in rack r · ``E_{k,c}`` fit class "servers
of type k with c usable GPUs left" (c = 1..G_k, G_k the largest type-k server) ·
``server s``.

Arcs (capacity, cost per unit of flow = per GPU)
------------------------------------------------
==================  ===========================  ================  =================================
name                from -> to                   capacity          cost
==================  ===========================  ================  =================================
unscheduled         job j -> sink                s_j               U_j (see costs.py)
continuation        job j -> server s            GPUs j held on s  continuation
fit                 job j -> E_{k_j, s_j}        s_j               migration_j
spread              job j -> T_{k_j}             s_j               spread + network_j + migration_j
rack                job j -> R_{k_j, r}          s_j               spread + network_j + migration_j
fit_chain           E_{k,c} -> E_{k,c+1}         inf               fragmentation / G_k
fit_server          E_{k,c} -> server s          c = c_s           0
type_rack           T_k -> R_{k,r}               inf               0
rack_server         R_{k,r} -> server s          usable GPUs of s  0
server_sink         server s -> sink             usable GPUs of s  0
==================  ===========================  ================  =================================

``migration_j`` is ``costs.migration`` for a job that ran last round on its type, else 0;
``network_j`` is ``costs.network`` times the job's communication intensity (gangs of two or
more; 0 without ``comm_intensity``);
``c_s`` is the usable GPUs of ``s`` minus those held by jobs that may continue there. A
gang of ``s_j`` enters the fit chain at class ``s_j`` and can only climb to looser classes,
so the fit path reaches only servers that can hold it whole, and pays
``fragmentation * (c - s_j) / G_k`` per GPU for using a class-``c`` server: best fit as a
*job-level* preference. Jobs larger than every server of their type (``s_j > G_k``) get no
fit or spread arc; with ``split_large_jobs`` they get one ``rack`` arc per rack of their type
with room for them, else only the unscheduled arc.

The flow is the linear relaxation of placement: it does not know that a gang must be
whole. The read-back (:mod:`hetsched.placement.readback`) turns it into whole gangs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from .costs import PlacementCosts, integer_costs
from .request import PlacementRequest

__all__ = ["ARC_KINDS", "FlowNetwork", "build_network"]

log = logging.getLogger(__name__)

#: Arc groups in the order they are laid out in the arc arrays.
ARC_KINDS = (
    "unscheduled",
    "continuation",
    "fit",
    "spread",
    "rack",
    "fit_chain",
    "fit_server",
    "type_rack",
    "rack_server",
    "server_sink",
)


@dataclass(frozen=True, eq=False)
class FlowNetwork:
    """A min-cost-flow instance in arc arrays plus what the read-back needs to interpret it.

    Attributes
    ----------
    n_nodes : int
    tails, heads : ndarray of int32
        Arc endpoints.
    capacity, cost : ndarray of int64
        Arc capacities and integer unit costs (scaled once by
        :func:`~hetsched.placement.costs.integer_costs`).
    supply : ndarray of int64, shape (n_nodes,)
        Node supplies (positive at jobs, negative at the sink); sums to 0.
    arcs : dict of str -> slice
        Position of each arc group of :data:`ARC_KINDS` in the arc arrays.
    cont_job, cont_server : ndarray of int
        Job and server of each continuation arc.
    rack_job, rack_pair : ndarray of int
        Job and (type, rack) pair of each rack arc.
    fit_job, spread_job : ndarray of int
        Job of each fit / spread arc.
    pair_type, pair_rack : ndarray of int
        GPU type and rack of each (type, rack) pair.
    server_pair : ndarray of int
        (type, rack) pair of each server.
    class_cap : ndarray of int
        ``c_s`` per server (usable GPUs not held by jobs that may continue).
    too_large : ndarray of bool
        Jobs larger than every server of their type.
    """

    n_nodes: int
    tails: np.ndarray
    heads: np.ndarray
    capacity: np.ndarray
    cost: np.ndarray
    supply: np.ndarray
    arcs: dict[str, slice]
    cont_job: np.ndarray
    cont_server: np.ndarray
    rack_job: np.ndarray
    rack_pair: np.ndarray
    fit_job: np.ndarray
    spread_job: np.ndarray
    pair_type: np.ndarray
    pair_rack: np.ndarray
    server_pair: np.ndarray
    class_cap: np.ndarray
    too_large: np.ndarray
    info: dict = field(default_factory=dict)

    @property
    def n_arcs(self) -> int:
        """Number of arcs."""
        return int(self.tails.shape[0])

    def cost_of(self, flow: np.ndarray) -> int:
        """Total integer cost of an arc flow vector."""
        return int(np.dot(flow.astype(np.int64), self.cost))


def build_network(req: PlacementRequest, costs: PlacementCosts) -> FlowNetwork:
    """Build the flow network of a round (see the module docstring for its shape).

    Parameters
    ----------
    req : PlacementRequest
        The validated round.
    costs : PlacementCosts
        Cost weights.

    Returns
    -------
    FlowNetwork
    """
    sk = _skeleton(req)
    unsched_cost = _unscheduled_cost(req, costs)
    job_groups, fit_job, rack_job, rack_pair = _job_arcs(req, costs, sk, unsched_cost)
    groups = job_groups + _pool_arcs(req, costs, sk)
    arcs, tails, heads, capacity, cost = _lay_out(groups)
    supply = np.zeros(sk.n_nodes, np.int64)
    supply[: req.n_jobs] = req.size
    supply[sk.sink] = -int(req.size.sum())
    log.debug(
        "placement network: %d nodes, %d arcs (%d jobs, %d servers)",
        sk.n_nodes,
        tails.shape[0],
        req.n_jobs,
        req.topology.n_servers,
    )
    return FlowNetwork(
        n_nodes=int(sk.n_nodes),
        tails=tails,
        heads=heads,
        capacity=capacity,
        cost=cost,
        supply=supply,
        arcs=arcs,
        rack_job=rack_job,
        rack_pair=rack_pair,
        fit_job=fit_job,
        spread_job=fit_job,
        cont_job=sk.cont_job,
        cont_server=sk.cont_server,
        pair_type=sk.pair_type,
        pair_rack=sk.pair_rack,
        server_pair=sk.server_pair.astype(np.int64),
        class_cap=sk.class_cap,
        too_large=sk.too_large,
        info={"g_max": sk.g_max, "pair_free": sk.pair_free, "unscheduled_cost": unsched_cost},
    )


def gang_limits(req: PlacementRequest) -> tuple[np.ndarray, np.ndarray]:
    """Largest server per GPU type, and the jobs larger than every server of their type.

    Parameters
    ----------
    req : PlacementRequest
        The validated round.

    Returns
    -------
    g_max : ndarray of int64, shape (n_types,)
        GPUs of the largest server of each type (static: blocked GPUs count): the fit
        classes are ``1..g_max[k]``.
    too_large : ndarray of bool, shape (n_jobs,)
        ``size[j] > g_max[job_type[j]]``.
    """
    topo = req.topology
    g_max = np.zeros(len(topo.gpu_types), np.int64)
    np.maximum.at(g_max, topo.server_type, topo.server_gpus)
    return g_max, req.size > g_max[req.job_type]


#: One arc group: (name, tails, heads, capacities, float costs), laid out in ARC_KINDS order.
_Group = tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


@dataclass(frozen=True, eq=False)
class _Skeleton:
    """What the arc groups of a round are built from: limits, rack pairs, continuation, nodes.

    ``pair_*`` describe the (type, rack) pairs that exist (``pair_free``: their usable GPUs);
    ``cont_*`` the continuation pairs (job, server) with ``cont_cap`` the usable GPUs the
    job held there (at most its size); ``class_cap`` is ``c_s``. Nodes are numbered jobs,
    sink, then blocks starting at ``t_node0`` (T_k), ``e_node0`` (E_{k,c}), ``r_node0``
    (R_{k,r}) and ``s_node0`` (servers).
    """

    g_max: np.ndarray
    too_large: np.ndarray
    pair_type: np.ndarray
    pair_rack: np.ndarray
    pair_free: np.ndarray
    server_pair: np.ndarray
    cont_job: np.ndarray
    cont_server: np.ndarray
    cont_cap: np.ndarray
    class_cap: np.ndarray
    class_start: np.ndarray
    sink: int
    t_node0: int
    e_node0: int
    r_node0: int
    s_node0: int
    n_nodes: int

    def e_node(self, k: np.ndarray, c: np.ndarray) -> np.ndarray:
        """Node of fit class E_{k,c}."""
        return self.e_node0 + self.class_start[k] + (c - 1)


def _skeleton(req: PlacementRequest) -> _Skeleton:
    """Gang limits, (type, rack) pairs, continuation pairs and node numbering of ``req``."""
    topo = req.topology
    n_jobs, n_types = req.n_jobs, len(topo.gpu_types)
    g_max, too_large = gang_limits(req)
    pair_keys, server_pair, pair_free = _rack_pairs(req)
    cont_job, cont_server, cont_cap, reserved = _continuation_pairs(req)
    class_start = np.zeros(n_types + 1, np.int64)
    np.cumsum(g_max, out=class_start[1:])
    t_node0 = n_jobs + 1
    e_node0 = t_node0 + n_types
    r_node0 = e_node0 + int(class_start[-1])
    s_node0 = r_node0 + pair_keys.shape[0]
    return _Skeleton(
        g_max=g_max,
        too_large=too_large,
        pair_type=pair_keys // topo.n_racks,
        pair_rack=pair_keys % topo.n_racks,
        pair_free=pair_free,
        server_pair=server_pair,
        cont_job=cont_job,
        cont_server=cont_server,
        cont_cap=cont_cap,
        class_cap=np.maximum(req.server_free - reserved, 0),
        class_start=class_start,
        sink=n_jobs,
        t_node0=t_node0,
        e_node0=e_node0,
        r_node0=r_node0,
        s_node0=s_node0,
        n_nodes=s_node0 + topo.n_servers,
    )


def _rack_pairs(req: PlacementRequest) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (type, rack) pairs that exist: ``(pair_keys, server_pair, pair_free)``.

    ``pair_keys`` is ``type * n_racks + rack`` per pair (sorted), ``server_pair`` the pair
    of each server, ``pair_free`` the usable GPUs of each pair.
    """
    topo = req.topology
    pair_key = topo.server_type * topo.n_racks + topo.server_rack
    pair_keys, server_pair = np.unique(pair_key, return_inverse=True)
    pair_free = np.bincount(server_pair, weights=req.server_free, minlength=pair_keys.shape[0]).astype(np.int64)
    return pair_keys, server_pair, pair_free


def _continuation_pairs(req: PlacementRequest) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Continuation pairs (job, server) with the usable GPUs the job held there.

    Returns ``(cont_job, cont_server, cont_cap, reserved)``: ``cont_cap`` is capped at the
    job's size, ``reserved`` sums it per server.
    """
    topo = req.topology
    n_servers = topo.n_servers
    counts = np.diff(req.prev_offset)
    pj = np.repeat(np.arange(req.n_jobs, dtype=np.int64), counts)
    ok = req.usable[req.prev_gpu]
    pj, ps = pj[ok], topo.gpu_server[req.prev_gpu[ok]]
    key, held = np.unique(pj * n_servers + ps, return_counts=True)
    cont_job, cont_server = key // max(n_servers, 1), key % max(n_servers, 1)
    cont_cap = np.minimum(held, req.size[cont_job])
    reserved = np.bincount(cont_server, weights=cont_cap, minlength=n_servers).astype(np.int64)
    return cont_job, cont_server, cont_cap, reserved


def _unscheduled_cost(req: PlacementRequest, costs: PlacementCosts) -> np.ndarray:
    """``U_j`` per job: base + waiting + preemption (it ran last round) + plan order."""
    rank = 1.0 - np.arange(req.n_jobs) / max(req.n_jobs, 1)
    return (
        costs.unscheduled
        + costs.waiting * req.waiting
        + costs.preemption * req.prev_same_type
        + costs.plan_order * rank
    )


def _job_arcs(
    req: PlacementRequest, costs: PlacementCosts, sk: _Skeleton, unsched_cost: np.ndarray
) -> tuple[list[_Group], np.ndarray, np.ndarray, np.ndarray]:
    """The arc groups out of job nodes: unscheduled, continuation, fit, spread, rack.

    Returns the groups and the jobs of the fit (= spread) arcs and of the rack arcs with
    their (type, rack) pairs.
    """
    n_jobs, size, jtype = req.n_jobs, req.size, req.job_type
    migr = np.where(req.prev_same_type, costs.migration, 0.0)
    # network-aware: spreading a gang costs its communication intensity
    net_cost = costs.network * np.where(size > 1, req.comm, 0.0) if req.comm is not None else np.zeros(n_jobs)
    jobs = np.arange(n_jobs, dtype=np.int64)
    cont_cost = np.full(sk.cont_job.shape, costs.continuation)
    # spread: every job that fits a server (for a 1-GPU job this is the path to GPUs that
    # jobs which may continue hold, which the fit classes leave out)
    fit_job = jobs[~sk.too_large]
    # rack arcs for jobs larger than any server of their type
    big = jobs[sk.too_large] if req.split_large_jobs else np.zeros(0, np.int64)
    if big.size:
        # pairs of the job's type with enough usable GPUs
        cand = (sk.pair_type[None, :] == jtype[big][:, None]) & (sk.pair_free[None, :] >= size[big][:, None])
        bj, bp = np.nonzero(cand)
        rack_job, rack_pair = big[bj], bp.astype(np.int64)
    else:
        rack_job = rack_pair = np.zeros(0, np.int64)
    groups: list[_Group] = [
        ("unscheduled", jobs, np.full(n_jobs, sk.sink), size, unsched_cost),
        ("continuation", sk.cont_job, sk.s_node0 + sk.cont_server, sk.cont_cap, cont_cost),
        ("fit", fit_job, sk.e_node(jtype[fit_job], size[fit_job]), size[fit_job], migr[fit_job]),
        ("spread", fit_job, sk.t_node0 + jtype[fit_job], size[fit_job], costs.spread + net_cost[fit_job] + migr[fit_job]),
        ("rack", rack_job, sk.r_node0 + rack_pair, size[rack_job], costs.spread + net_cost[rack_job] + migr[rack_job]),
    ]
    return groups, fit_job, rack_job, rack_pair


def _pool_arcs(req: PlacementRequest, costs: PlacementCosts, sk: _Skeleton) -> list[_Group]:
    """The arc groups between pool nodes: fit_chain, fit_server, type_rack, rack_server, server_sink."""
    n_types, n_servers = len(sk.g_max), req.topology.n_servers
    n_pairs = sk.pair_type.shape[0]
    inf = max(int(req.size.sum()), 1)
    free = req.server_free
    # fit chain E_{k,c} -> E_{k,c+1}
    ck = np.repeat(np.arange(n_types, dtype=np.int64), np.maximum(sk.g_max - 1, 0))
    cc = np.concatenate([np.arange(1, g) for g in sk.g_max]) if n_types else np.zeros(0, np.int64)
    cc = cc.astype(np.int64)
    step = costs.fragmentation / np.maximum(sk.g_max, 1)
    # fit class -> server
    fs = np.flatnonzero(sk.class_cap > 0)
    fs_class = sk.e_node(req.topology.server_type[fs], sk.class_cap[fs])
    srv = np.arange(n_servers, dtype=np.int64)
    return [
        ("fit_chain", sk.e_node(ck, cc), sk.e_node(ck, cc + 1), np.full(ck.shape, inf), step[ck]),
        ("fit_server", fs_class, sk.s_node0 + fs, sk.class_cap[fs], np.zeros(fs.shape)),
        (
            "type_rack",
            sk.t_node0 + sk.pair_type,
            sk.r_node0 + np.arange(n_pairs),
            np.full(n_pairs, inf),
            np.zeros(n_pairs),
        ),
        ("rack_server", sk.r_node0 + sk.server_pair, sk.s_node0 + srv, free, np.zeros(n_servers)),
        ("server_sink", sk.s_node0 + srv, np.full(n_servers, sk.sink), free, np.zeros(n_servers)),
    ]


def _lay_out(groups: list[_Group]) -> tuple[dict[str, slice], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Concatenate arc groups into ``(arcs, tails, heads, capacity, cost)`` with integer costs."""
    arcs: dict[str, slice] = {}
    pos = 0
    for name, t, _h, _cap, _cst in groups:
        arcs[name] = slice(pos, pos + t.shape[0])
        pos += t.shape[0]
    tails = np.concatenate([g[1] for g in groups]).astype(np.int32)
    heads = np.concatenate([g[2] for g in groups]).astype(np.int32)
    capacity = np.concatenate([np.asarray(g[3], dtype=np.int64) for g in groups])
    cost = integer_costs(np.concatenate([np.asarray(g[4], dtype=np.float64) for g in groups]))
    return arcs, tails, heads, capacity, cost
