r"""AlloX (Le et al., EuroSys'20): minimum average completion time by min-cost matching.

Math
----
With processing time :math:`p_{jk} = R_j / T_{jk}` of job j on one GPU of type k (R: steps
remaining), a schedule puts on each GPU (worker) an ordered list of jobs. If job j is the
q-th job *from the end* of a worker of type k, it delays itself and the q-1 jobs after it
by :math:`p_{jk}`, so the total completion time is

.. math::

    \sum_j C_j = \sum_j q_j\, p_{j k_j},

and minimizing it is a min-cost bipartite matching of jobs to slots (worker, q) with cost
:math:`q\,p_{jk}` (Bruno, Coffman and Sethi, CACM 1974; Horn, 1973; AlloX §4). AlloX adds
each job's waiting time :math:`w_j` (``time_since_start``) to its cost; it is the same for
every slot of a job, so it changes the reported JCT, not the matching. AlloX's fairness
knob :math:`\alpha \in (0, 1]` keeps only the :math:`\max(\lceil\alpha n\rceil, W)`
longest-waiting jobs (W free GPUs) as candidates of this horizon.

Sparse solve
------------
Workers of one type are interchangeable, so one node per (type k, position q) with
capacity :math:`C_k` replaces the :math:`C_k` separate slot columns; and an optimal
schedule keeps the workers of a type balanced to within one job (moving the first job of
a worker with q jobs onto one with at most q-2 lowers its cost from :math:`q p` to at
most :math:`(q-1) p`), so positions stop at :math:`\lceil n / C_k\rceil`. The min-cost
flow (OR-Tools) has :math:`\sum_k n \lceil n / C_k\rceil` arcs, instead of Gavel's dense
:math:`n \times n W` matrix. Each type's jobs are then list-scheduled shortest-first on its
GPUs (each job starts on the earliest-free GPU; SPT is optimal for identical machines), which
realizes the matching's cost.

Multi-GPU jobs (an extension; AlloX and Gavel's copy take single-GPU jobs only)
-------------------------------------------------------------------------------
A gang of :math:`s_j` GPUs enters the matching with its *area* :math:`s_j p_{jk}`
(GPU-seconds) as if it were a one-GPU job, which picks its type; each type's jobs are then
placed in order of area, each at the earliest time its :math:`s_j` GPUs stay free for its
whole run (conservative backfilling). For single-GPU jobs this is exactly AlloX; with gangs
it is a heuristic (the gang problem is NP-hard) and the reported completion times are
those of that schedule.

Output
------
``X[j, k] = 1`` for the job at the head of each worker (``horizon=None``, Gavel's AlloX),
or, with a ``horizon`` H, the fraction of :math:`[0, H]` the schedule runs job j on type k:
``X[j, k] = (min(C_j, H) - min(S_j, H)) / H`` (S: start time). Every worker carries at most
one job at a time, so per type :math:`\sum_j X_{jk} \le C_k` and rows sum to at most 1.

Examples
--------
>>> import hetsched as hs
>>> jobs = hs.JobSet([[2.0, 1.0], [2.0, 1.0], [4.0, 1.0]], gpu_types=["v100", "k80"],
...                  ids=["a", "b", "c"], steps_remaining=[100.0, 500.0, 800.0])
>>> res = hs.solve("allox", jobs, hs.Cluster({"v100": 1, "k80": 1}))
>>> res.extra["schedule"]                        # run order on each type
[('v100', ['c', 'b']), ('k80', ['a'])]
>>> res.X.tolist()                               # heads of the queues run now
[[0.0, 1.0], [0.0, 0.0], [1.0, 0.0]]
>>> res.extra["completion_times"].tolist()
[100.0, 450.0, 200.0]
>>> res.objective                                # average JCT (no waiting so far)
250.0
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import SolverError, ValidationError
from ..inputs.cluster import Cluster
from ..inputs.jobs import RESOURCE_FIELDS, JobSet, usable_mask
from ..solvers.context import SolveContext
from ..validation import check_mapping, check_real
from .base import Policy, PolicyOutcome, register_policy

__all__ = ["AlloX", "allox_schedule"]

log = logging.getLogger(__name__)


@register_policy
class AlloX(Policy):
    """Minimize average completion time by min-cost matching of jobs to (GPU, position) slots.

    Parameters
    ----------
    alpha : float in (0, 1], default 1.0
        AlloX's fairness knob: only the ``max(ceil(alpha * n), free GPUs)`` jobs that have
        waited longest (``time_since_start``, ties by row order) are candidates this
        horizon; the others get a zero row.
    horizon : float, optional
        Seconds the returned X covers. None (default): X is 1 for the job at the head of
        each GPU's queue (what Gavel's AlloX returns). A number: the fraction of the
        horizon each job runs under the matched schedule.
    pinned : Mapping[job id, str], optional
        Jobs already running that AlloX does not preempt, with their GPU type: they keep
        ``X = 1`` there and their GPUs are not matched (Gavel keeps previous whole-GPU
        assignments this way).

    Notes
    -----
    Needs ``steps_remaining``; reads ``time_since_start`` (default 0). Not aggregated
    (each job gets its own slot). Jobs with several GPUs are handled by the extension in
    the module docstring (exact AlloX for single-GPU jobs). Host-resource demands (``cpus_per_gpu``,
    ``mem_per_gpu``) are not modelled by AlloX and are ignored (``extra["ignored_fields"]``).
    """

    name = "allox"
    requires = ("steps_remaining",)
    reads = ("steps_remaining", "time_since_start")
    aggregatable = False
    alpha: float = 1.0
    horizon: float | None = None
    pinned: Mapping[Any, str] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        check_real(self.alpha, "alpha", low=0.0, high=1.0, low_open=True)
        check_real(self.horizon, "horizon", low=0.0, low_open=True, allow_none=True,
                   rule="a positive number of seconds or None")
        if self.pinned is not None:
            check_mapping(self.pinned, "pinned", rule="a mapping of job id -> GPU type")

    def objective_of(self, X: np.ndarray, jobs: JobSet, cluster: Cluster) -> float:
        """Not defined from X alone (the order on each GPU matters); see ``extra``."""
        raise NotImplementedError("AlloX's objective (average JCT) depends on the schedule, not only on X")

    def solve(self, jobs: JobSet, cluster: Cluster, ctx: SolveContext) -> PolicyOutcome:
        with ctx.building():
            sched = allox_schedule(jobs, cluster, alpha=self.alpha, pinned=self.pinned)
        n, m = jobs.n_jobs, jobs.n_types
        X = np.zeros((n, m))
        placed = sched["gpu_type"] >= 0
        rows = np.flatnonzero(placed)
        k = sched["gpu_type"][rows]
        if self.horizon is None:
            head = sched["start_times"][rows] == 0.0
            X[rows[head], k[head]] = 1.0
        else:
            H = float(self.horizon)
            S, C = sched["start_times"][rows], sched["completion_times"][rows]
            X[rows, k] = (np.minimum(C, H) - np.minimum(S, H)) / H
        for j, kk in sched["pinned_rows"]:
            X[j, kk] = 1.0
        jct = sched["wait"] + sched["completion_times"]
        objective = float(np.mean(jct[placed])) if placed.any() else float("nan")
        ignored = [f for f in RESOURCE_FIELDS if jobs.has(f)]
        if ignored:
            log.info("allox: host-resource fields %s are not modelled and were ignored", ignored)
        msg = (f"allox matched {int(placed.sum())} of {int(sched['n_candidates'])} candidate job(s) "
               f"({n} jobs, {len(sched['pinned_rows'])} pinned); predicted average JCT {objective:.6g} s")
        if (jobs.scale_factors > 1).any():
            msg += " (multi-GPU jobs: area matching + gang list scheduling, a heuristic)"
        return PolicyOutcome(
            X=X, objective=objective, status="optimal", message=msg,
            extra={
                "completion_times": sched["completion_times"],
                "start_times": sched["start_times"],
                "predicted_jct": jct,
                "schedule": [(jobs.gpu_types[kk], jobs.ids[np.asarray(order, dtype=np.int64)].tolist())
                             for kk, order in sched["types"]],
                "candidates": sched["candidates"],
                "ignored_fields": ignored,
            },
        )


def allox_schedule(jobs: JobSet, cluster: Cluster, *, alpha: float = 1.0,
                   pinned: Mapping[Any, str] | None = None) -> dict[str, Any]:
    """The AlloX schedule: which GPU type, and when, for each candidate job.

    Parameters
    ----------
    jobs : JobSet
        Needs ``steps_remaining``.
    cluster : Cluster
    alpha : float in (0, 1]
        Fairness knob (see :class:`AlloX`).
    pinned : Mapping[job id, str], optional
        Running jobs that keep their GPUs (see :class:`AlloX`).

    Returns
    -------
    dict
        ``gpu_type`` (n,) column per job or -1; ``start_times`` and ``completion_times``
        (n,) from now (NaN when not scheduled); ``wait`` (n,); ``types``: list of
        ``(type column, [rows in start order])``; ``candidates`` (rows considered);
        ``n_candidates``; ``pinned_rows``: list of ``(row, column)``; ``total`` (sum of
        completion times of the scheduled jobs).

    Raises
    ------
    ValidationError
        A pinned id or type that is unknown or unusable, or pinned gangs that need more
        GPUs of a type than it has.
    """
    n, m = jobs.n_jobs, jobs.n_types
    s = jobs.scale_factors.astype(np.int64)
    cap = cluster.capacities(jobs.gpu_types).astype(np.int64)
    T = jobs.throughputs
    R = np.asarray(jobs.steps_remaining, dtype=float)
    wait = np.asarray(jobs.field("time_since_start", 0.0), dtype=float)
    free = cap.copy()
    pinned_rows: list[tuple[int, int]] = []
    is_pinned = np.zeros(n, dtype=bool)
    if pinned:
        pos = {v: i for i, v in enumerate(jobs.ids.tolist())}
        col = {t: k for k, t in enumerate(jobs.gpu_types)}
        for jid, gtype in pinned.items():
            if jid not in pos:
                raise ValidationError(f"`pinned` names job {jid!r}, which is not in `jobs`.")
            if gtype not in col:
                raise ValidationError(
                    f"`pinned[{jid!r}]` must be one of the jobs' GPU types {list(jobs.gpu_types)}; got {gtype!r}."
                )
            j, k = pos[jid], col[gtype]
            if T[j, k] <= 0:
                raise ValidationError(f"`pinned[{jid!r}]` is {gtype!r}, where the job has zero throughput.")
            free[k] -= s[j]
            if free[k] < 0:
                raise ValidationError(f"`pinned` jobs need more {gtype!r} GPUs than the cluster has ({int(cap[k])}).")
            pinned_rows.append((j, k))
            is_pinned[j] = True
    rest = np.flatnonzero(~is_pinned)
    order = rest[np.lexsort((rest, -wait[rest]))]  # longest waiting first, then row order
    n_free = int(free.sum())
    n_c = min(order.size, max(int(math.ceil(alpha * order.size - 1e-12)), n_free))
    cand = order[:n_c]
    usable = usable_mask(T[cand], s[cand], free)
    ok = usable.any(axis=1)
    if not ok.all():
        log.info("allox: %d candidate job(s) have no usable GPU type with room this horizon", int((~ok).sum()))
    match = cand[ok]
    gpu_type = np.full(n, -1, dtype=np.int64)
    start = np.full(n, np.nan)
    comp = np.full(n, np.nan)
    per_type: list[tuple[int, list[int]]] = []
    if match.size:
        Tm = T[match]
        p = np.where(Tm > 0, R[match, None] / np.where(Tm > 0, Tm, 1.0), np.inf)   # seconds on s_j GPUs
        area = p * s[match, None]                                                  # GPU-seconds
        assigned = _match(area, free, usable[ok])
        for k in range(m):
            rows = np.flatnonzero(assigned == k)
            if rows.size == 0:
                continue
            seq = rows[np.argsort(area[rows, k], kind="stable")]       # shortest (area) first
            st, fin = _list_schedule(p[seq, k], s[match[seq]], int(free[k]))
            gpu_type[match[seq]] = k
            start[match[seq]] = st
            comp[match[seq]] = fin
            by_start = np.argsort(st, kind="stable")
            per_type.append((k, match[seq][by_start].tolist()))
    total = float(np.nansum(comp))
    return {"gpu_type": gpu_type, "start_times": start, "completion_times": comp, "wait": wait,
            "types": per_type, "candidates": cand, "n_candidates": int(n_c), "pinned_rows": pinned_rows,
            "total": total}


def _list_schedule(p: np.ndarray, s: np.ndarray, gpus: int) -> tuple[np.ndarray, np.ndarray]:
    """Start and finish times of jobs taken in order on ``gpus`` identical GPUs.

    Single-GPU jobs: each starts on the earliest-free GPU (list scheduling). With gangs:
    conservative backfilling -- each job, in order, is placed at the earliest time at which
    ``s`` GPUs stay free for its whole run, given the jobs placed before it (a later job may
    start before an earlier one if it fits in a gap). A load of at most ``gpus`` at every
    instant is all identical GPUs need (interval multicoloring), so the schedule is feasible.
    """
    st = np.empty(p.size)
    if p.size == 0:
        return st, st.copy()
    if (s == 1).all():
        free_at = np.zeros(gpus)
        for i in range(p.size):
            g = int(np.argmin(free_at))
            st[i] = free_at[g]
            free_at[g] += p[i]
        return st, st + p
    times = [0.0]            # breakpoints of the usage profile
    used = [0]               # GPUs in use on [times[b], times[b+1])
    for i in range(p.size):
        need, dur = int(s[i]), float(p[i])
        for b, t0 in enumerate(times):
            if used[b] + need > gpus:
                continue
            t1 = t0 + dur
            ok = True
            for c in range(b + 1, len(times)):
                if times[c] >= t1:
                    break
                if used[c] + need > gpus:
                    ok = False
                    break
            if ok:
                break
        st[i] = t0
        for edge in (t0, t1):                  # split the profile at the reservation's ends
            pos = int(np.searchsorted(times, edge, side="right"))
            if times[pos - 1] != edge:
                times.insert(pos, edge)
                used.insert(pos, used[pos - 1])
        for c in range(len(times)):
            if t0 <= times[c] < t1:
                used[c] += need
    return st, st + p


def _match(p: np.ndarray, free: np.ndarray, usable: np.ndarray) -> np.ndarray:
    """Type of each job in a min-cost assignment to (type, position) slots (min-cost flow).

    ``p`` (n_c, m) processing times (inf where unusable), ``free`` GPUs per type. Nodes:
    0 source, 1..n jobs, then one node per (type, position), then the sink.
    """
    from ortools.graph.python import min_cost_flow

    n_c, m = p.shape
    P = np.where(free > 0, np.minimum(n_c, -(-n_c // np.maximum(free, 1))), 0)  # positions per type
    slot_start = np.concatenate([[0], np.cumsum(P)])[:-1] + 1 + n_c
    n_slots = int(P.sum())
    sink = 1 + n_c + n_slots
    tails, heads, costs, arc_type = [], [], [], []
    finite_max = 0.0
    for k in range(m):
        if P[k] == 0:
            continue
        jk = np.flatnonzero(usable[:, k])
        if jk.size == 0:
            continue
        q = np.arange(1, P[k] + 1)
        tails.append(np.repeat(jk + 1, P[k]))
        heads.append(np.tile(slot_start[k] + q - 1, jk.size))
        c = np.repeat(p[jk, k], P[k]) * np.tile(q, jk.size)
        costs.append(c)
        arc_type.append(np.full(c.size, k))
        finite_max = max(finite_max, float(c.max()))
    t_jobs = np.concatenate(tails)
    h_jobs = np.concatenate(heads)
    c_jobs = np.concatenate(costs)
    # integer costs: keep every total well inside int64 and the rounding below 1e-13 relative
    scale = min(2.0 ** 52, 2.0 ** 60 / (n_c + 1)) / max(finite_max, 1e-300)
    ci = np.rint(c_jobs * scale).astype(np.int64)
    slot_nodes = 1 + n_c + np.arange(n_slots)
    slot_cap = np.repeat(free[P > 0], P[P > 0]) if n_slots else np.zeros(0, np.int64)
    tail = np.concatenate([np.zeros(n_c, np.int64), t_jobs, slot_nodes])
    head = np.concatenate([np.arange(1, n_c + 1), h_jobs, np.full(n_slots, sink)])
    capa = np.concatenate([np.ones(n_c, np.int64), np.ones(t_jobs.size, np.int64), slot_cap.astype(np.int64)])
    cost = np.concatenate([np.zeros(n_c, np.int64), ci, np.zeros(n_slots, np.int64)])
    flow = min_cost_flow.SimpleMinCostFlow()
    arcs = flow.add_arcs_with_capacity_and_unit_cost(tail, head, capa, cost)
    flow.set_nodes_supplies(np.array([0, sink]), np.array([n_c, -n_c]))
    status = flow.solve()
    if status != flow.OPTIMAL:  # cannot happen: every job has a usable type with n_c slots
        raise SolverError(f"allox: OR-Tools min-cost flow ended with status {status}")
    f = flow.flows(arcs)[n_c:n_c + t_jobs.size]
    used = f > 0
    out = np.full(n_c, -1, dtype=np.int64)
    out[t_jobs[used] - 1] = np.concatenate(arc_type)[used]
    return out
