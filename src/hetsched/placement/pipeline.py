"""``place()``: validate -> build the flow network -> min-cost flow -> read-back -> Placement."""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

import numpy as np

from ..errors import ValidationError, show
from ..inputs.cluster import Cluster
from ..inputs.topology import Topology
from ..validation import check_bool, check_choice, check_instance, check_vector
from .costs import PlacementCosts
from .interconnect import PATTERNS, BoundInterconnect, Interconnect
from .network import build_network
from .readback import read_back
from .request import PlacementRequest, make_request
from .result import Placement
from .selection import choose_subsets
from .solvers import FLOW_SOLVERS, solve_flow

__all__ = ["job_comm_intensity", "job_patterns", "migrated_jobs", "place", "place_plan"]

log = logging.getLogger(__name__)


def place(
    cluster: Cluster | Topology,
    job_ids: Any,
    gpu_types: Any,
    num_gpus: Any,
    *,
    previous: Any = None,
    waiting: Any = None,
    blocked: Any = None,
    costs: PlacementCosts | None = None,
    solver: str = "ortools",
    split_large_jobs: bool = False,
    allow_overcommit: bool = False,
    order: str = "best_fit",
    backfill: bool = True,
    comm_intensity: Any = None,
    interconnect: Interconnect | BoundInterconnect | None = None,
    patterns: Any = None,
    choose_gpus: bool = True,
) -> Placement:
    """Place one round: give each job whole gangs of GPUs of its type on concrete servers.

    The input is the round's plan ("job ``j`` needs ``num_gpus[j]`` GPUs of type
    ``gpu_types[j]``"); a min-cost flow with one node per job decides how many GPUs each job
    gets and from where, and a gang-aware read-back turns the flow into GPU ids (see
    ``docs/placement.md``).

    Parameters
    ----------
    cluster : Cluster or Topology
        A cluster with a topology (:meth:`Cluster.from_servers`) or a topology.
    job_ids : array-like, shape (n_jobs,)
        Unique job ids.
    gpu_types : array-like of str (or int type indices), shape (n_jobs,)
        GPU type each job runs on this round.
    num_gpus : array-like of int, shape (n_jobs,)
        GPUs each job needs (its gang size).
    previous : Placement or Mapping, optional
        Last round's placement: a :class:`Placement` or a mapping job id -> GPUs (global
        ids or ``(server name, gpu index)`` pairs). Jobs not in this round are ignored.
    waiting : array-like of float, shape (n_jobs,), optional
        Time each job has waited (non-negative); raises its unscheduled cost (Quincy).
    blocked : iterable, optional
        GPUs nobody may use this round: global ids, ``(server, gpu index)`` pairs or
        server names (a whole server).
    costs : PlacementCosts, optional
        Cost weights (default ``PlacementCosts()``).
    solver : {"ortools", "networkx"}
        Min-cost-flow solver.
    split_large_jobs : bool, default False
        Let a job larger than every server of its type span servers of one rack; when
        False such a job is unscheduled with reason ``"too_large"``.
    allow_overcommit : bool, default False
        Let the plan ask for more GPUs of a type than the cluster has (the excess is left
        unscheduled). When False such a plan raises.
    order : {"best_fit", "arbitrary"}
        Decomposition order of the read-back; "arbitrary" exists for comparison only.
    backfill : bool, default True
        Try jobs the flow left out on GPUs that remain idle after repair.
    comm_intensity : array-like of float in [0, 1], shape (n_jobs,), optional
        Share of each job's step time spent communicating (see ``docs/interconnect.md``).
        Weights ``costs.network`` on the paths that may spread a gang over servers (and, with
        ``costs.network > 0``, raises the job's read-back priority by ``network * c``, so
        that among gangs of one size the heavy ones take whole servers first); with an
        ``interconnect``, jobs with ``c > 0`` are the bandwidth-sensitive ones of the
        inside-server choice. Default: all 0.
    interconnect : Interconnect, optional
        GPU graphs per server: the GPUs inside each server are then chosen by
        :mod:`hetsched.placement.selection` (MAPA, SC'21) and the placement reports each
        job's predicted bandwidth (``Placement.bandwidth``).
    patterns : str or array-like of str, shape (n_jobs,), optional
        ``"ring"`` (default) or ``"all_to_all"`` per job (or one for all).
    choose_gpus : bool, default True
        With an ``interconnect``: choose the GPUs inside servers; False keeps the read-back's
        lowest free ids and only predicts bandwidths (for comparison).

    Returns
    -------
    Placement

    Raises
    ------
    ValidationError
        Unknown GPU types or servers, bad sizes, negative waiting times or weights, a plan
        asking for more GPUs of a type than exist (unless ``allow_overcommit``), a previous
        placement that gives one GPU to two jobs.

    Examples
    --------
    >>> from hetsched import Cluster
    >>> cluster = Cluster.from_servers({"v100": 16}, gpus_per_server=8)
    >>> p = place(cluster, ["a", "b", "c"], ["v100"] * 3, [8, 4, 4])
    >>> p.n_placed, p.consolidated
    (3, 3)
    >>> again = place(cluster, ["a", "b", "c"], ["v100"] * 3, [8, 4, 4], previous=p)
    >>> again.migrations, again.gpus_of("b") == p.gpus_of("b")
    (0, True)
    """
    t0 = time.perf_counter()
    topo = _topology(cluster)
    costs = PlacementCosts() if costs is None else check_instance(costs, "costs", PlacementCosts, "a PlacementCosts")
    check_choice(solver, "solver", sorted(FLOW_SOLVERS))
    check_choice(order, "order", ("best_fit", "arbitrary"))
    check_bool(allow_overcommit, "allow_overcommit")
    check_bool(backfill, "backfill")
    req = make_request(
        topo,
        job_ids,
        gpu_types,
        num_gpus,
        previous=previous,
        waiting=waiting,
        blocked=blocked,
        split_large_jobs=split_large_jobs,
        allow_overcommit=allow_overcommit,
    )
    bound = _bound(interconnect, topo)
    comm = job_comm_intensity(comm_intensity, req.job_ids)
    pattern = job_patterns(patterns, req.job_ids)
    if comm is not None:
        req = dataclasses.replace(req, comm=comm)
    net = build_network(req, costs)
    t1 = time.perf_counter()
    sol = solve_flow(net, solver)
    t2 = time.perf_counter()
    priority = None
    if comm is not None and costs.network > 0:
        priority = net.info["unscheduled_cost"] + costs.network * np.where(req.size > 1, comm, 0.0)
    rb = read_back(req, net, sol, order=order, backfill=bool(backfill), priority=priority)
    gpus, bandwidth, extra = rb.gpus, None, {}
    if bound is not None:
        ts = time.perf_counter()
        sensitive = (req.size > 1) & ((comm > 0) if comm is not None else True)
        choice = choose_subsets(bound, rb.gpu_offset, rb.gpus, req.usable, req.prev_offset, req.prev_gpu,
                                pattern, sensitive, rechoose=check_bool(choose_gpus, "choose_gpus"))
        gpus, bandwidth = choice.gpus, choice.bandwidth
        extra = {"subset_s": time.perf_counter() - ts, "rechosen_chunks": choice.n_rechosen,
                 "best_bandwidth": choice.best_bandwidth}
    migrated = migrated_jobs(req, rb.gpu_offset, gpus)
    t3 = time.perf_counter()
    result = Placement(
        topology=topo,
        job_ids=req.job_ids,
        gpu_type=req.job_type,
        num_gpus=req.size,
        gpu_offset=rb.gpu_offset,
        gpus=gpus,
        reason=rb.reason,
        migrated=migrated,
        flow_cost=sol.cost,
        solver=sol.solver,
        timings={"build_s": t1 - t0, "solve_s": t2 - t1, "readback_s": t3 - t2, "total_s": t3 - t0},
        info={
            "n_nodes": net.n_nodes,
            "n_arcs": net.n_arcs,
            "repaired": rb.repaired,
            "rolled_back": rb.rolled_back,
            "backfilled": rb.backfilled,
            "usable_gpus": int(req.usable.sum()),
            **extra,
        },
        bandwidth=bandwidth,
    )
    log.debug("%r in %.3fs", result, t3 - t0)
    return result


def place_plan(cluster: Cluster | Topology, plan: Any, *, waiting: Any = None, **kwargs: Any) -> Placement:
    """Place the jobs a round plan runs (``hetsched.mechanism.RoundPlan``, "rounds" mode).

    The plan's running jobs (``assignment >= 0``) become the request: job ids
    ``plan.job_ids[run]``, types ``plan.gpu_types[plan.assignment[run]]``, sizes
    ``plan.scale_factors[run]``. Any object with those four attributes works.

    Parameters
    ----------
    cluster : Cluster or Topology
    plan : RoundPlan
    waiting : array-like, optional
        Waiting time per job *of the plan* (all rows, aligned with ``plan.job_ids``); the
        running rows are passed on.
    **kwargs
        Passed to :func:`place` (``previous``, ``costs``, ``solver``, ...).

    Returns
    -------
    Placement
        One row per running job of the plan.
    """
    if getattr(plan, "mode", "rounds") != "rounds":
        raise ValidationError(
            f"`plan` must be a 'rounds'-mode plan (whole gangs on one type); got mode {plan.mode!r}."
        )
    try:
        ids = np.asarray(plan.job_ids)
        assignment = np.asarray(plan.assignment)
        types = np.asarray(list(plan.gpu_types), dtype=object)
        sizes = np.asarray(plan.scale_factors)
    except AttributeError as exc:
        raise ValidationError(
            f"`plan` must have job_ids, gpu_types, assignment and scale_factors; missing {exc.name!r}."
        ) from None
    run = assignment >= 0
    wait = None
    if waiting is not None:
        wait = np.asarray(waiting, dtype=float)
        if wait.shape != ids.shape:
            raise ValidationError(f"`waiting` must have shape {ids.shape} like `plan.job_ids`; got {wait.shape}.")
        wait = wait[run]
    return place(cluster, ids[run], types[assignment[run]].astype(str), sizes[run], waiting=wait, **kwargs)


def _bound(interconnect: Any, topo: Topology) -> BoundInterconnect | None:
    """The interconnect on ``topo`` (bound here unless it already is, on the same topology)."""
    if interconnect is None:
        return None
    if isinstance(interconnect, BoundInterconnect):
        if interconnect.topology is not topo and interconnect.topology != topo:
            raise ValidationError("`interconnect` is bound to a different topology than `cluster`.")
        return interconnect
    check_instance(interconnect, "interconnect", Interconnect, "a hetsched.placement.Interconnect or None")
    return interconnect.bind(topo)


def job_comm_intensity(value: Any, job_ids: np.ndarray) -> np.ndarray | None:
    """``comm_intensity`` as floats in [0, 1], one per job (a scalar is repeated); None stays None."""
    if value is None:
        return None
    arr = check_vector(value, "comm_intensity", job_ids.shape[0])
    bad = ~np.isfinite(arr) | (arr < 0) | (arr > 1)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise ValidationError(f"`comm_intensity` must be in [0, 1]; job {show(job_ids[j])} has {show(float(arr[j]))}.")
    return arr


def job_patterns(value: Any, job_ids: np.ndarray) -> np.ndarray:
    """``patterns`` as indices into ``PATTERNS`` (default: all "ring")."""
    n = job_ids.shape[0]
    if value is None:
        return np.zeros(n, np.int64)
    if isinstance(value, str):
        return np.full(n, PATTERNS.index(check_choice(value, "patterns", PATTERNS)), np.int64)
    items = list(value)
    if len(items) != n:
        raise ValidationError(f"`patterns` must have one entry per job ({n}); got {len(items)}.")
    out = np.zeros(n, np.int64)
    for j, p in enumerate(items):
        if p not in PATTERNS:
            raise ValidationError(f"`patterns` entries must be one of {list(PATTERNS)}; job {show(job_ids[j])} has {p!r}.")
        out[j] = PATTERNS.index(p)
    return out


def _topology(cluster: Any) -> Topology:
    if isinstance(cluster, Topology):
        return cluster
    if isinstance(cluster, Cluster):
        if cluster.topology is None:
            raise ValidationError(
                "`cluster` has no server topology; build it with Cluster.from_servers(...)."
            )
        return cluster.topology
    raise ValidationError(f"`cluster` must be a Cluster or a Topology; got {type(cluster).__name__}.")


def migrated_jobs(req: PlacementRequest, gpu_offset: np.ndarray, gpus: np.ndarray) -> np.ndarray:
    """Jobs that ran last round on their type, run now, and kept < min(before, now) GPUs."""
    n = req.n_jobs
    prev_n = np.diff(req.prev_offset)
    now_n = np.diff(gpu_offset)
    cand = (prev_n > 0) & (now_n > 0)
    if not cand.any():
        return np.zeros(n, bool)
    m = max(req.topology.n_gpus, 1)
    prev_key = np.repeat(np.arange(n, dtype=np.int64), prev_n) * m + req.prev_gpu
    now_key = np.repeat(np.arange(n, dtype=np.int64), now_n) * m + gpus
    common = np.intersect1d(prev_key, now_key, assume_unique=True)
    kept = np.bincount(common // m, minlength=n)
    return cand & (kept < np.minimum(prev_n, now_n))
