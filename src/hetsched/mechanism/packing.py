"""Greedy whole-gang packing of a sorted list of (job, type) entries, vectorized.

The rule (Gavel's): walk the entries in order; entry ``(j, k)`` is accepted when job ``j``
has not been placed yet this round and type ``k`` still has at least ``s_j`` free GPUs.
A gang is never split.

:func:`greedy_pack` computes exactly the same result as that sequential walk, but in a few
numpy passes. Each pass takes every entry still possible (job unplaced and gang no larger
than the free GPUs of its type), keeps the first entry of each job, and finds the first
position ``p`` where the running GPU count of some type would exceed what was free at the
start of the pass. Everything before ``p`` is accepted (distinct jobs that fit together);
the entry at ``p`` does not fit once they are placed, so it is rejected, and the next pass
starts after it. After such a reject on type ``k`` the free count of ``k`` is smaller than
that gang, so later rejects on ``k`` involve strictly smaller gangs: at most
``n_types * n_distinct_gang_sizes`` passes end in a reject. Passes look at a window of
about four times the free GPUs (no more entries can be accepted than GPUs are free, and a
job has at most ``n_types`` entries), and the walk stops as soon as no type has room for
the smallest gang.
"""

from __future__ import annotations

import numpy as np

__all__ = ["greedy_pack", "greedy_pack_blocking", "greedy_pack_members", "greedy_pack_sequential"]


def greedy_pack(
    entry_job: np.ndarray,
    entry_type: np.ndarray,
    scale_factors: np.ndarray,
    capacities: np.ndarray,
    n_jobs: int,
) -> tuple[np.ndarray, int]:
    """Place whole gangs by walking sorted entries greedily (vectorized, exact).

    Parameters
    ----------
    entry_job, entry_type : ndarray of int, shape (n_entries,)
        Job row and type column of each candidate entry, in priority order (best first).
    scale_factors : ndarray of int, shape (n_jobs,)
        Gang size of each job.
    capacities : ndarray of int, shape (n_types,)
        Whole GPUs of each type.
    n_jobs : int
        Number of jobs (length of the result).

    Returns
    -------
    assignment : ndarray of int64, shape (n_jobs,)
        Type column each job runs on this round, or -1.
    passes : int
        Number of vectorized passes used (for diagnostics).

    Examples
    --------
    Three jobs on one type with 6 GPUs, in priority order; the second gang of 4 does
    not fit after the first, the gang of 2 behind it does:

    >>> a, _ = greedy_pack(np.array([0, 1, 2]), np.array([0, 0, 0]),
    ...                    np.array([4, 4, 2]), np.array([6]), 3)
    >>> a.tolist()
    [0, -1, 0]
    """
    m = int(capacities.shape[0])
    assignment = np.full(n_jobs, -1, dtype=np.int64)
    rem = np.asarray(capacities, dtype=np.int64).copy()
    ej = np.asarray(entry_job, dtype=np.int64)
    ek = np.asarray(entry_type, dtype=np.int64)
    es = np.asarray(scale_factors, dtype=np.int64)[ej]
    n_entries = ej.shape[0]
    if n_entries == 0:
        return assignment, 0
    smin = int(es.min())
    scratch = np.full(n_jobs, _BIG, dtype=np.int64)
    pos = 0
    passes = 0
    while pos < n_entries and int(rem.max()) >= smin:
        passes += 1
        # Only about sum(rem) entries can still be accepted: look at a window of that order
        # (the pass is exact for any window; the size only trades passes for work).
        end = min(n_entries, pos + max(_MIN_WINDOW, 4 * int(rem.sum())))
        wj, wk, ws = ej[pos:end], ek[pos:end], es[pos:end]
        cand = np.flatnonzero((assignment[wj] < 0) & (ws <= rem[wk]))
        if cand.size == 0:
            pos = end
            continue
        cj, ck, cs = wj[cand], wk[cand], ws[cand]
        first = _first_occurrence(cj, scratch)
        use = np.where(first, cs, 0)
        cum = np.empty_like(use)
        for k in range(m):  # loop over GPU types only
            mk = ck == k
            if mk.any():
                cum[mk] = np.cumsum(use[mk])
        over = first & (cum > rem[ck])
        if over.any():
            stop = int(np.argmax(over))
            take = first.copy()
            take[stop:] = False
            nxt = pos + int(cand[stop]) + 1  # the entry at `stop` no longer fits: rejected
        else:
            take = first
            nxt = end
        tk = ck[take]
        assignment[cj[take]] = tk
        rem -= np.bincount(tk, weights=cs[take], minlength=m).astype(np.int64)
        pos = nxt
    return assignment, passes


_BIG = np.iinfo(np.int64).max
_MIN_WINDOW = 2048


def _first_occurrence(jobs: np.ndarray, scratch: np.ndarray) -> np.ndarray:
    """Mask of the first occurrence of each value of ``jobs`` (in array order).

    ``scratch`` is an all-``_BIG`` array indexed by job, restored before returning.
    ``np.minimum.at`` keeps the smallest position per job; nothing relies on the order in
    which fancy assignment resolves repeated indices.
    """
    pos = np.arange(jobs.shape[0], dtype=np.int64)
    np.minimum.at(scratch, jobs, pos)
    first = scratch[jobs] == pos
    scratch[jobs] = _BIG
    return first


def greedy_pack_sequential(entry_job: np.ndarray, entry_type: np.ndarray, scale_factors: np.ndarray,
                           capacities: np.ndarray, n_jobs: int) -> np.ndarray:
    """The same greedy walk, one entry at a time (reference for tests and benchmarks)."""
    assignment = [-1] * n_jobs
    rem = [int(c) for c in capacities]
    s = [int(v) for v in scale_factors]
    for j, k in zip(np.asarray(entry_job).tolist(), np.asarray(entry_type).tolist()):
        if assignment[j] >= 0 or s[j] > rem[k]:
            continue
        assignment[j] = k
        rem[k] -= s[j]
    return np.asarray(assignment, dtype=np.int64)


def greedy_pack_members(
    entry_unit: np.ndarray,
    entry_type: np.ndarray,
    gangs: np.ndarray,
    capacities: np.ndarray,
    members: np.ndarray,
) -> np.ndarray:
    """The greedy walk over *allocation rows* whose members may overlap (space sharing).

    A unit (an allocation row: one job, or a pair of jobs sharing one gang) is accepted on
    type ``k`` when it is not placed yet, none of its member jobs runs in another unit this
    round, and ``k`` has ``gangs[u]`` free GPUs. Sequential: the units of a round are few
    (a few per job), and the member rule does not vectorize like :func:`greedy_pack`.

    Parameters
    ----------
    entry_unit, entry_type : ndarray of int, shape (n_entries,)
        Unit row and type column of each candidate entry, best first.
    gangs : ndarray of int, shape (n_units,)
        GPUs each unit holds.
    capacities : ndarray of int, shape (n_types,)
    members : ndarray of int, shape (n_units, 2)
        Member jobs (any non-negative integer keys); -1 for "no second member".

    Returns
    -------
    ndarray of int64, shape (n_units,)
        Type column each unit runs on, or -1.

    Examples
    --------
    Units 0 = job 7 alone, 1 = jobs 7 and 8 together, 2 = job 8 alone; one type, 2 GPUs.
    The pair comes first; the single units of its members are then excluded:

    >>> greedy_pack_members(np.array([1, 0, 2]), np.array([0, 0, 0]), np.array([1, 1, 1]),
    ...                     np.array([2]), np.array([[7, -1], [7, 8], [8, -1]])).tolist()
    [-1, 0, -1]
    """
    n_units = int(np.asarray(gangs).shape[0])
    assignment = [-1] * n_units
    rem = [int(c) for c in capacities]
    g = [int(v) for v in gangs]
    mem = np.asarray(members, dtype=np.int64).tolist()
    busy: set[int] = set()
    for u, k in zip(np.asarray(entry_unit).tolist(), np.asarray(entry_type).tolist()):
        if assignment[u] >= 0 or g[u] > rem[k]:
            continue
        a, b = mem[u]
        if a in busy or (b >= 0 and b in busy):
            continue
        assignment[u] = k
        rem[k] -= g[u]
        busy.add(a)
        if b >= 0:
            busy.add(b)
    return np.asarray(assignment, dtype=np.int64)


def greedy_pack_blocking(entry_job: np.ndarray, entry_type: np.ndarray, scale_factors: np.ndarray,
                         capacities: np.ndarray, n_jobs: int) -> np.ndarray:
    """The walk *without backfill*: jobs in the order of their best entry; each job tries its
    entries in order; the walk stops at the first job that fits none of them.

    A later, smaller job never runs past an earlier one that is waiting for room (head-of-line
    blocking, as in Blox's FIFO and Gavel's FIFO admission, ``policies/fifo.py``). With
    :func:`greedy_pack` (backfill) it would.

    Examples
    --------
    Gangs of 4, 4 and 2 on one type with 6 GPUs: the second gang does not fit, so the walk
    stops and the gang of 2 behind it waits (``greedy_pack`` would run it):

    >>> greedy_pack_blocking(np.array([0, 1, 2]), np.array([0, 0, 0]),
    ...                      np.array([4, 4, 2]), np.array([6]), 3).tolist()
    [0, -1, -1]
    """
    assignment = np.full(n_jobs, -1, dtype=np.int64)
    rem = [int(c) for c in capacities]
    s = np.asarray(scale_factors, dtype=np.int64)
    ej = np.asarray(entry_job, dtype=np.int64)
    ek = np.asarray(entry_type, dtype=np.int64)
    if ej.size == 0:
        return assignment
    order = np.argsort(ej, kind="stable")
    first = np.full(n_jobs, ej.size, dtype=np.int64)
    np.minimum.at(first, ej, np.arange(ej.size))
    jobs_in_order = np.unique(ej)[np.argsort(first[np.unique(ej)], kind="stable")]
    starts = np.searchsorted(ej[order], jobs_in_order)
    ends = np.searchsorted(ej[order], jobs_in_order, side="right")
    for j, a, b in zip(jobs_in_order.tolist(), starts.tolist(), ends.tolist()):
        placed = False
        for k in ek[order[a:b]].tolist():
            if s[j] <= rem[k]:
                assignment[j] = k
                rem[k] -= int(s[j])
                placed = True
                break
        if not placed:
            break
    return assignment
