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
spread              job j -> T_{k_j}             s_j               spread + migration_j
rack                job j -> R_{k_j, r}          s_j               spread + migration_j
fit_chain           E_{k,c} -> E_{k,c+1}         inf               fragmentation / G_k
fit_server          E_{k,c} -> server s          c = c_s           0
type_rack           T_k -> R_{k,r}               inf               0
rack_server         R_{k,r} -> server s          usable GPUs of s  0
server_sink         server s -> sink             usable GPUs of s  0
==================  ===========================  ================  =================================

``migration_j`` is ``costs.migration`` for a job that ran last round on its type, else 0;
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

__all__ = ["FlowNetwork", "build_network", "ARC_KINDS"]

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
    topo = req.topology
    n_jobs, n_types, n_servers = req.n_jobs, len(topo.gpu_types), topo.n_servers
    size, jtype = req.size, req.job_type
    free = req.server_free
    inf = max(int(size.sum()), 1)

    # Largest server per type (static): the fit classes 1..G_k.
    g_max = np.zeros(n_types, np.int64)
    np.maximum.at(g_max, topo.server_type, topo.server_gpus)
    too_large = size > g_max[jtype]

    # (type, rack) pairs that exist.
    pair_key = topo.server_type * topo.n_racks + topo.server_rack
    pair_keys, server_pair = np.unique(pair_key, return_inverse=True)
    pair_type, pair_rack = pair_keys // topo.n_racks, pair_keys % topo.n_racks
    n_pairs = pair_keys.shape[0]
    pair_free = np.bincount(server_pair, weights=free, minlength=n_pairs).astype(np.int64)

    # Continuation pairs (job, server) with the usable GPUs the job held there.
    counts = np.diff(req.prev_offset)
    pj = np.repeat(np.arange(n_jobs, dtype=np.int64), counts)
    ok = req.usable[req.prev_gpu]
    pj, ps = pj[ok], topo.gpu_server[req.prev_gpu[ok]]
    key, held = np.unique(pj * n_servers + ps, return_counts=True)
    cont_job, cont_server = key // max(n_servers, 1), key % max(n_servers, 1)
    cont_cap = np.minimum(held, size[cont_job])
    reserved = np.bincount(cont_server, weights=cont_cap, minlength=n_servers).astype(np.int64)
    class_cap = np.maximum(free - reserved, 0)

    # Node numbering.
    sink = n_jobs
    t_node0 = n_jobs + 1
    class_start = np.zeros(n_types + 1, np.int64)
    np.cumsum(g_max, out=class_start[1:])
    e_node0 = t_node0 + n_types
    r_node0 = e_node0 + int(class_start[-1])
    s_node0 = r_node0 + n_pairs
    n_nodes = s_node0 + n_servers

    def e_node(k: np.ndarray, c: np.ndarray) -> np.ndarray:
        return e_node0 + class_start[k] + (c - 1)

    migr = np.where(req.prev_same_type, costs.migration, 0.0)
    ran = req.prev_same_type
    rank = 1.0 - np.arange(n_jobs) / max(n_jobs, 1)
    unsched_cost = (
        costs.unscheduled + costs.waiting * req.waiting + costs.preemption * ran + costs.plan_order * rank
    )
    jobs = np.arange(n_jobs, dtype=np.int64)
    normal = ~too_large

    groups: list[tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    # unscheduled
    groups.append(("unscheduled", jobs, np.full(n_jobs, sink), size, unsched_cost))
    # continuation
    groups.append(
        ("continuation", cont_job, s_node0 + cont_server, cont_cap, np.full(cont_job.shape, costs.continuation))
    )
    # fit
    fit_job = jobs[normal]
    groups.append(("fit", fit_job, e_node(jtype[fit_job], size[fit_job]), size[fit_job], migr[fit_job]))
    # spread: every job that fits a server (for a 1-GPU job this is the path to GPUs that
    # jobs which may continue hold, which the fit classes leave out)
    spread_job = fit_job
    groups.append(
        ("spread", spread_job, t_node0 + jtype[spread_job], size[spread_job], costs.spread + migr[spread_job])
    )
    # rack arcs for jobs larger than any server of their type
    big = jobs[too_large] if req.split_large_jobs else np.zeros(0, np.int64)
    if big.size:
        # pairs of the job's type with enough usable GPUs
        cand = (pair_type[None, :] == jtype[big][:, None]) & (pair_free[None, :] >= size[big][:, None])
        bj, bp = np.nonzero(cand)
        rack_job, rack_pair = big[bj], bp.astype(np.int64)
    else:
        rack_job = rack_pair = np.zeros(0, np.int64)
    groups.append(
        ("rack", rack_job, r_node0 + rack_pair, size[rack_job], costs.spread + migr[rack_job])
    )
    # fit chain E_{k,c} -> E_{k,c+1}
    ck = np.repeat(np.arange(n_types, dtype=np.int64), np.maximum(g_max - 1, 0))
    cc = np.concatenate([np.arange(1, g) for g in g_max]) if n_types else np.zeros(0, np.int64)
    cc = cc.astype(np.int64)
    step = costs.fragmentation / np.maximum(g_max, 1)
    groups.append(("fit_chain", e_node(ck, cc), e_node(ck, cc + 1), np.full(ck.shape, inf), step[ck]))
    # fit class -> server
    fs = np.flatnonzero(class_cap > 0)
    groups.append(
        ("fit_server", e_node(topo.server_type[fs], class_cap[fs]), s_node0 + fs, class_cap[fs], np.zeros(fs.shape))
    )
    # T_k -> R_{k,r}
    groups.append(
        ("type_rack", t_node0 + pair_type, r_node0 + np.arange(n_pairs), np.full(n_pairs, inf), np.zeros(n_pairs))
    )
    # R_{k,r} -> server
    srv = np.arange(n_servers, dtype=np.int64)
    groups.append(("rack_server", r_node0 + server_pair, s_node0 + srv, free, np.zeros(n_servers)))
    # server -> sink
    groups.append(("server_sink", s_node0 + srv, np.full(n_servers, sink), free, np.zeros(n_servers)))

    arcs: dict[str, slice] = {}
    pos = 0
    for name, t, h, cap, cst in groups:
        arcs[name] = slice(pos, pos + t.shape[0])
        pos += t.shape[0]
    tails = np.concatenate([g[1] for g in groups]).astype(np.int32)
    heads = np.concatenate([g[2] for g in groups]).astype(np.int32)
    capacity = np.concatenate([np.asarray(g[3], dtype=np.int64) for g in groups])
    cost = integer_costs(np.concatenate([np.asarray(g[4], dtype=np.float64) for g in groups]))
    supply = np.zeros(n_nodes, np.int64)
    supply[:n_jobs] = size
    supply[sink] = -int(size.sum())
    log.debug("placement network: %d nodes, %d arcs (%d jobs, %d servers)", n_nodes, pos, n_jobs, n_servers)
    return FlowNetwork(
        n_nodes=int(n_nodes),
        tails=tails,
        heads=heads,
        capacity=capacity,
        cost=cost,
        supply=supply,
        arcs=arcs,
        cont_job=cont_job,
        cont_server=cont_server,
        rack_job=rack_job,
        rack_pair=rack_pair,
        fit_job=fit_job,
        spread_job=spread_job,
        pair_type=pair_type,
        pair_rack=pair_rack,
        server_pair=server_pair.astype(np.int64),
        class_cap=class_cap,
        too_large=too_large,
        info={"g_max": g_max, "pair_free": pair_free, "unscheduled_cost": unsched_cost},
    )
