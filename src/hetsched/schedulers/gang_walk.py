"""Whole gangs in a priority order onto GPU types: the "which jobs run" step that Synergy
and AntMan share with Tiresias.

Walking jobs in priority order, each whole gang takes the GPU type it prefers that still has
room (its last round's type first when ``last_type`` is given, else the fastest usable
type); a job that fits no type is skipped and later, smaller jobs may still run. The walk
itself is :func:`hetsched.mechanism.greedy_pack`.

>>> import numpy as np
>>> from hetsched.schedulers.gang_walk import walk_gangs
>>> T = np.array([[2.0, 1.0], [2.0, 1.0], [2.0, 1.0]])
>>> walk_gangs(np.array([2, 0, 1]), T, np.array([1, 1, 2]), np.array([2, 1])).tolist()
[1, -1, 0]
"""

from __future__ import annotations

import numpy as np

from ..inputs.jobs import usable_mask
from ..mechanism.packing import greedy_pack

__all__ = ["walk_gangs"]


def walk_gangs(order: np.ndarray, throughputs: np.ndarray, scale_factors: np.ndarray, capacities: np.ndarray, *,
               last_type: np.ndarray | None = None, allowed: np.ndarray | None = None) -> np.ndarray:
    """Type column each job runs on (-1: it waits), walking ``order`` greedily.

    Parameters
    ----------
    order : ndarray of int
        Job rows, highest priority first (rows left out do not run).
    throughputs : ndarray, shape (n, m)
        Steps/s per job and type (0: cannot run there).
    scale_factors : ndarray of int, shape (n,)
    capacities : ndarray, shape (m,)
        Free GPUs per type.
    last_type : ndarray of int, optional
        Type each job ran on last round (-1: none); preferred when still usable.
    allowed : ndarray of bool, shape (n, m), optional
        Further per-job restriction of the usable types (e.g. GPU memory).
    """
    n, m = throughputs.shape
    cap = np.asarray(capacities, dtype=np.int64)
    s = np.asarray(scale_factors, dtype=np.int64)
    usable = usable_mask(throughputs, s, cap)
    if allowed is not None:
        usable &= allowed
    pref = np.where(usable, throughputs, -np.inf)
    if last_type is not None:
        has = np.flatnonzero(last_type >= 0)
        has = has[usable[has, last_type[has]]]
        pref[has, last_type[has]] = np.inf
    type_rank = np.argsort(-pref, axis=1, kind="stable")
    order = np.asarray(order, dtype=np.int64)
    cand_j = np.repeat(order, m)
    cand_k = type_rank[order].ravel() if order.size else np.zeros(0, np.int64)
    ok = usable[cand_j, cand_k] if order.size else np.zeros(0, bool)
    assignment, _ = greedy_pack(cand_j[ok], cand_k[ok], s, cap, n)
    return assignment
