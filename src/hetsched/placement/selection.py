r"""Choose the GPUs inside each server for a placement, and predict each job's bandwidth.

Placement's flow and read-back decide *how many* GPUs of *which server* each job gets; on a
server with an interconnect graph (:mod:`hetsched.placement.interconnect`) this module then
decides *which* GPUs, with the rule of that module (MAPA, SC'21, §4): per server, the chunks
to place are taken sensitive first, largest first, and each takes the subset its lookup
table names for the GPUs still free.

A *chunk* is the part of one job on one server. A chunk that holds any GPU the job held last
round stays as the read-back gave it (continuation, never an extra migration); every other
chunk on a server with a graph is re-chosen among the server's usable GPUs that no staying
chunk holds. The read-back already fitted the chunks, so every choice fits.

Predicted bandwidth of a job (GB/s, per direction)
--------------------------------------------------
* one server: :math:`\beta(S)` of its subset for its pattern (NaN for one GPU);
* several servers: the smallest of :math:`\beta` over its chunks of two or more GPUs and the
  server uplink bandwidth when the interconnect gives one (a ring through the NICs runs at
  its slowest hop);
* NaN on a server without a graph.

Everything is arrays: the lookup runs once per rank of chunk within its server (at most 8
passes), so the cost grows with the number of chunks, not with a Python loop per job.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from .interconnect import MAX_GRAPH_GPUS, BoundInterconnect

__all__ = ["SubsetChoice", "choose_subsets"]

log = logging.getLogger(__name__)

_BITS = np.arange(MAX_GRAPH_GPUS, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class SubsetChoice:
    """The GPUs after the inside-server choice, and each job's predicted bandwidth.

    Attributes
    ----------
    gpus : ndarray of int
        Same CSR layout (``gpu_offset``) as the placement's, GPU ids re-chosen.
    bandwidth : ndarray of float, shape (n_jobs,)
        Predicted bandwidth (GB/s) the job's pattern sees; NaN where not defined.
    best_bandwidth : ndarray of float, shape (n_jobs,)
        The best bandwidth any subset of the job's size gets on an empty server of the job's
        graph (the reference of the throughput penalty); NaN where not defined.
    n_rechosen : int
        Chunks whose GPUs were chosen here (the others stayed).
    """

    gpus: np.ndarray
    bandwidth: np.ndarray
    best_bandwidth: np.ndarray
    n_rechosen: int


def choose_subsets(bound: BoundInterconnect, gpu_offset: np.ndarray, gpus: np.ndarray, usable: np.ndarray,
                   prev_offset: np.ndarray, prev_gpu: np.ndarray, pattern: np.ndarray,
                   sensitive: np.ndarray, *, rechoose: bool = True) -> SubsetChoice:
    """Re-choose the GPUs of chunks on servers with a graph (see the module docstring).

    Parameters
    ----------
    bound : BoundInterconnect
        The interconnect on the placement's topology.
    gpu_offset, gpus : ndarray of int
        The read-back's GPUs per job (CSR; ids sorted within a job).
    usable : ndarray of bool, shape (n_gpus,)
        GPUs not blocked this round.
    prev_offset, prev_gpu : ndarray of int
        What each job held last round (CSR, as in :class:`~hetsched.placement.PlacementRequest`).
    pattern : ndarray of int, shape (n_jobs,)
        Index into :data:`~hetsched.placement.interconnect.PATTERNS`.
    sensitive : ndarray of bool, shape (n_jobs,)
        Jobs ranked by bandwidth first (MAPA's bandwidth-sensitive jobs).
    rechoose : bool, default True
        False keeps every chunk's GPUs as given and only predicts bandwidths (the ablation
        "interconnect-blind ids" of ``benchmarks/interconnect.py``).

    Returns
    -------
    SubsetChoice
    """
    topo = bound.topology
    n_jobs = gpu_offset.shape[0] - 1
    tab = bound.stacked()
    counts = np.diff(gpu_offset)
    job_of = np.repeat(np.arange(n_jobs, dtype=np.int64), counts)
    srv = topo.gpu_server[gpus]
    local = _bit(gpus - topo.gpu_offset[srv])
    # chunks: runs of equal (job, server); gpus are sorted within a job, so servers are grouped
    new_chunk = np.ones(gpus.shape[0], bool)
    new_chunk[1:] = (job_of[1:] != job_of[:-1]) | (srv[1:] != srv[:-1])
    chunk_of = np.cumsum(new_chunk) - 1
    n_chunks = int(new_chunk.sum())
    c_job = job_of[new_chunk]
    c_srv = srv[new_chunk]
    c_size = np.bincount(chunk_of, minlength=n_chunks)
    c_mask = np.bincount(chunk_of, weights=local.astype(np.float64), minlength=n_chunks).astype(np.int64)
    c_graph = bound.server_graph[c_srv] if n_chunks else np.zeros(0, np.int64)
    # chunks holding a GPU their job held last round stay
    held = _held_last_round(job_of, gpus, prev_offset, prev_gpu, topo.n_gpus)
    c_stays = np.bincount(chunk_of, weights=held, minlength=n_chunks) > 0
    movable = (c_graph >= 0) & ~c_stays & bool(rechoose)
    # free mask per server: usable GPUs not held by staying chunks
    n_srv = topo.n_servers
    g_bit = _bit(np.arange(topo.n_gpus, dtype=np.int64) - topo.gpu_offset[topo.gpu_server])
    free = np.bincount(topo.gpu_server, weights=np.where(usable, g_bit, 0).astype(np.float64),
                       minlength=n_srv).astype(np.int64) if topo.n_gpus else np.zeros(n_srv, np.int64)
    stay_bits = np.bincount(c_srv[~movable & (c_graph >= 0)], weights=c_mask[~movable & (c_graph >= 0)].astype(float),
                            minlength=n_srv).astype(np.int64)
    free &= ~stay_bits
    new_mask = c_mask.copy()
    mv = np.flatnonzero(movable)
    if mv.size:
        sens = sensitive[c_job[mv]].astype(np.int64)
        # per server: sensitive first, then largest, then job order
        order = np.lexsort((c_job[mv], -c_size[mv], -sens, c_srv[mv]))
        mv, sens = mv[order], sens[order]
        first = np.ones(mv.size, bool)
        first[1:] = c_srv[mv][1:] != c_srv[mv][:-1]
        start = np.maximum.accumulate(np.where(first, np.arange(mv.size), 0))
        rank = np.arange(mv.size) - start
        for r in range(int(rank.max()) + 1):
            at = rank == r
            ch, s = mv[at], c_srv[mv[at]]
            pick = tab["choice"][c_graph[ch], pattern[c_job[ch]], sens[at], c_size[ch], free[s]]
            if np.any(pick < 0):   # the read-back fitted every chunk; a miss is a bug, not a fallback
                raise AssertionError("inside-server choice found no subset for a chunk the read-back fitted")
            new_mask[ch] = pick
            free[s] &= ~pick
    # write the new ids back in the same CSR layout (ascending within a chunk, chunks in server order)
    out = gpus.copy()
    if mv.size:
        bits = (new_mask[:, None] >> _BITS[None, :]) & 1
        sorted_local = np.argsort(1 - bits, axis=1, kind="stable")   # set bits first, ascending
        pos = np.arange(gpus.shape[0]) - np.flatnonzero(new_chunk)[chunk_of]
        moved = movable[chunk_of]
        out[moved] = topo.gpu_offset[srv[moved]] + sorted_local[chunk_of[moved], pos[moved]]
    bw, best = _bandwidths(bound, tab, n_jobs, c_job, c_graph, c_size, new_mask, pattern)
    log.debug("inside-server choice: %d of %d chunks re-chosen", int(mv.size), n_chunks)
    return SubsetChoice(gpus=out, bandwidth=bw, best_bandwidth=best, n_rechosen=int(mv.size))


def _bit(local: np.ndarray) -> np.ndarray:
    """``1 << local`` for local indices below 8 (servers with a graph), else 0 (never used)."""
    return np.where(local < MAX_GRAPH_GPUS, np.left_shift(1, np.minimum(local, MAX_GRAPH_GPUS - 1)), 0)


def _held_last_round(job_of: np.ndarray, gpus: np.ndarray, prev_offset: np.ndarray, prev_gpu: np.ndarray,
                     n_gpus: int) -> np.ndarray:
    """Per GPU entry: whether its job held that GPU last round."""
    if prev_gpu.size == 0 or gpus.size == 0:
        return np.zeros(gpus.shape[0], bool)
    m = max(n_gpus, 1)
    n = prev_offset.shape[0] - 1
    prev_key = np.repeat(np.arange(n, dtype=np.int64), np.diff(prev_offset)) * m + prev_gpu
    return np.isin(job_of * m + gpus, prev_key)


def _bandwidths(bound: BoundInterconnect, tab: dict[str, np.ndarray], n_jobs: int, c_job: np.ndarray,
                c_graph: np.ndarray, c_size: np.ndarray, c_mask: np.ndarray, pattern: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """Predicted and best bandwidth per job (module docstring)."""
    bw = np.full(n_jobs, np.inf)
    best = np.full(n_jobs, np.nan)
    no_graph = np.zeros(n_jobs, bool)
    no_graph[c_job[c_graph < 0]] = True
    g = np.maximum(c_graph, 0)
    p = pattern[c_job]
    s = np.where(c_graph >= 0, tab["score"][g, p, c_mask], np.nan)
    np.minimum.at(bw, c_job[c_graph >= 0], s[c_graph >= 0])
    n_chunks = np.bincount(c_job, minlength=n_jobs)
    spread = n_chunks > 1
    up = bound.interconnect.server_uplink_gb_s
    if up is not None:
        bw[spread] = np.minimum(bw[spread], up)
    bw[no_graph | (n_chunks == 0)] = np.nan
    bw[np.isinf(bw)] = np.nan
    one = (n_chunks == 1) & ~no_graph
    best[c_job[one[c_job] & (c_graph >= 0)]] = tab["best"][g, p, c_size][one[c_job] & (c_graph >= 0)]
    return bw, best
