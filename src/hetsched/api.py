"""``solve()``: validate once at the boundary, aggregate, run the policy, expand, report."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from .errors import MissingFieldError, ValidationError, show
from .formulations.aggregation import aggregate_jobs
from .formulations.base import Policy, make_policy
from .inputs.cluster import Cluster
from .inputs.jobs import RESOURCE_FIELDS, JobSet
from .result import Allocation
from .solvers.base import SUCCESS_STATUSES
from .solvers.certificate import FAILED_STATUS, certify
from .solvers.context import SolveContext
from .validation import check_bool

__all__ = ["solve", "validate_problem"]

log = logging.getLogger(__name__)


def validate_problem(policy: Policy, jobs: JobSet, cluster: Cluster) -> np.ndarray:
    """Check that ``jobs`` can be scheduled on ``cluster`` by ``policy``; return capacities.

    Raises
    ------
    ValidationError
        Wrong argument types; a cluster with no GPU of any type the jobs name; a job that
        cannot run on any type the cluster has (zero throughput everywhere, a gang
        larger than every usable type's count, or a gang needing more host CPUs / memory
        than every usable type's servers have, where the cluster states them).
    MissingFieldError
        A field the policy requires is missing from ``jobs``.
    """
    if not isinstance(jobs, JobSet):
        raise ValidationError(f"`jobs` must be a hetsched.JobSet; got {type(jobs).__name__}.")
    if not isinstance(cluster, Cluster):
        raise ValidationError(f"`cluster` must be a hetsched.Cluster; got {type(cluster).__name__}.")
    cap = cluster.capacities(jobs.gpu_types)
    for field in policy.requires:
        if not jobs.has(field):
            raise MissingFieldError(
                f"policy {policy.name!r} needs job field `{field}`; pass JobSet(..., {field}=...)."
            )
    if jobs.n_jobs == 0:
        return cap
    if cap.sum() <= 0:
        raise ValidationError(
            f"`cluster` has no GPUs of the job types' GPU types {list(jobs.gpu_types)}; "
            f"cluster counts: {cluster.as_dict()}."
        )
    T = jobs.throughputs
    present = cap > 0
    no_thr = ~(T[:, present] > 0).any(axis=1)
    if no_thr.any():
        j = int(np.flatnonzero(no_thr)[0])
        raise ValidationError(
            f"job {show(jobs.ids[j])} has zero throughput on every GPU type the cluster has "
            f"({[t for t, c in zip(jobs.gpu_types, cap) if c > 0]}); it can never run "
            f"({int(no_thr.sum())} such job(s))."
        )
    fits = ((T > 0) & (cap[None, :] >= jobs.scale_factors[:, None])).any(axis=1)
    if not fits.all():
        j = int(np.flatnonzero(~fits)[0])
        usable = [(t, int(c)) for t, c, thr in zip(jobs.gpu_types, cap, T[j]) if thr > 0 and c > 0]
        largest = max(usable, key=lambda tc: tc[1])
        raise ValidationError(
            f"job {show(jobs.ids[j])} asks for {int(jobs.scale_factors[j])} GPUs but the largest GPU type "
            f"it can run on ({show(largest[0])}) has {largest[1]} ({int((~fits).sum())} such job(s))."
        )
    _check_host_fit(jobs, cluster, cap)
    return cap


def _check_host_fit(jobs: JobSet, cluster: Cluster, cap: np.ndarray) -> None:
    """Refuse a job whose gang needs more host CPUs / memory than every GPU type it could run on has.

    Only resources the cluster states are checked (a policy that needs a missing capacity says
    so itself); the tolerance is that of the capacity rows (:mod:`hetsched.formulations.resources`).
    """
    usable = (jobs.throughputs > 0) & (cap[None, :] >= jobs.scale_factors[:, None])
    for field, capacity in RESOURCE_FIELDS.items():
        if not jobs.has(field):
            continue
        host = cluster.resource_vector(capacity, jobs.gpu_types)
        if host is None:
            continue
        need = jobs.scale_factors * jobs.field(field)
        fits = (usable & (need[:, None] <= host[None, :] * (1 + 1e-12))).any(axis=1)
        if not fits.all():
            bad = np.flatnonzero(~fits)
            j = int(bad[0])
            offer = {t: float(h) for t, h, ok in zip(jobs.gpu_types, host, usable[j]) if ok}
            raise ValidationError(
                f"job {show(jobs.ids[j])} needs `{field}` = {show(jobs.field(field)[j])} x {int(jobs.scale_factors[j])} "
                f"GPU(s) = {need[j]:g} host `{capacity}`, more than any GPU type it can run on has "
                f"(cluster `{capacity}`: {offer}); it can never run ({bad.size} such job(s))."
            )


def solve(
    policy: str | Policy,
    jobs: JobSet,
    cluster: Cluster,
    *,
    solver: str = "auto",
    time_limit: float | None = None,
    options: Mapping[str, Any] | None = None,
    aggregate: bool = True,
) -> Allocation:
    """Compute a policy's allocation of ``cluster`` among ``jobs``.

    Parameters
    ----------
    policy : str or Policy
        A registered name (see :func:`hetsched.list_policies`) or a policy object such as
        ``hetsched.policies.MaxMinFairness(second_stage=False)``.
    jobs : JobSet
        The jobs, their throughputs and fields.
    cluster : Cluster
        GPU types and counts (and prices for cost-aware policies).
    solver : str, default "auto"
        "auto" picks the backend and algorithm per program shape (see
        :func:`hetsched.solvers.choose_auto`); or one of "highs", "clarabel", "cvxpy", "pulp".
    time_limit : float, optional
        Wall-clock seconds for all programs of this solve; when reached the result has
        status "time_limit" (with the best solution if the solver had one).
    options : Mapping, optional
        Backend options passed through unchanged (HiGHS option names for "highs";
        ``{"solver": "SCS", ...}`` for "cvxpy"; ``{"msg": True}`` for "pulp").
    aggregate : bool, default True
        Merge identical jobs into classes before formulating (exact; see
        :mod:`hetsched.formulations.aggregation`).

    Returns
    -------
    Allocation
        Frozen result with ``X``, ``objective``, ``status``, ``success``, timings and sizes.

    Raises
    ------
    ValidationError
        Bad input (the message names the argument, the rule and the value).
    SolverError
        The solver crashed. Infeasible and time-limited solves are reported as a status.

    Notes
    -----
    Every result carries ``certificate`` (:mod:`hetsched.solvers.certificate`): X re-checked against
    each constraint family and the objective recomputed, with code independent of the
    formulations. When it fails, ``status`` is "failed_certificate", ``success`` False, the
    message says why and ``extra["solver_status"]`` keeps the solver's status.

    Examples
    --------
    >>> import hetsched as hs
    >>> jobs = hs.JobSet([[4.0, 1.0], [4.0, 1.0]], gpu_types=["v100", "k80"])
    >>> res = hs.solve("max_sum_throughput", jobs, hs.Cluster({"v100": 1, "k80": 1}))
    >>> res.status, round(res.objective, 6)
    ('optimal', 5.0)
    """
    t0 = time.perf_counter()
    pol = make_policy(policy)
    check_bool(aggregate, "aggregate")
    validate_problem(pol, jobs, cluster)
    ctx = SolveContext(solver=solver, time_limit=time_limit, options=options)
    n, m = jobs.n_jobs, jobs.n_types
    if n == 0:
        cert = certify(pol.name, pol.params(), np.zeros((0, m)), jobs, cluster, status="optimal",
                       objective=float("nan"), extra={})
        return Allocation(
            policy=pol.name, params=pol.params(), status="optimal", success=True,
            message="no jobs: empty allocation", objective=float("nan"), X=np.zeros((0, m)),
            job_ids=jobs.ids, gpu_types=jobs.gpu_types, throughputs=jobs.throughputs, solver="none",
            timings={"aggregate_s": 0.0, "build_s": 0.0, "solve_s": 0.0, "total_s": time.perf_counter() - t0},
            sizes={"n_jobs": 0, "n_classes": 0, "n_programs": 0, "max_vars": 0, "max_rows": 0},
            certificate=cert,
        )
    t_agg = time.perf_counter()
    if aggregate and pol.aggregatable:
        classes = aggregate_jobs(jobs, pol.aggregation_fields(jobs))
        work, inverse = classes.jobs, classes.inverse
    else:
        work, inverse = jobs, None
    aggregate_s = time.perf_counter() - t_agg
    outcome = pol.solve(work, cluster, ctx)
    X = outcome.X if inverse is None else outcome.X[inverse]
    extra = dict(outcome.extra)
    if "infeasible_rows" in extra:
        rows = np.asarray(extra.pop("infeasible_rows"), dtype=np.int64)
        members = np.isin(inverse, rows) if inverse is not None else np.isin(np.arange(n), rows)
        extra["infeasible_jobs"] = jobs.ids[members].tolist()
    status, message = outcome.status, outcome.message
    if ctx.fallbacks:  # programs another backend failed on, re-solved by HiGHS (hetsched.solvers.fallback)
        extra["fallbacks"] = list(ctx.fallbacks)
        message = (f"{message}; {len(ctx.fallbacks)} program(s) re-solved by the exact fallback "
                   f"(first: {ctx.fallbacks[0][:300]})")
    cert = certify(pol.name, pol.params(), X, jobs, cluster, status=status, objective=outcome.objective, extra=extra)
    if not cert.ok:
        log.warning("%s: %s (solver status %r)", pol.name, cert.message, status)
        extra["solver_status"] = status
        message = f"{cert.message} (solver status {status!r}: {message})"
        status = FAILED_STATUS
    total_s = time.perf_counter() - t0
    log.info(
        "%s: %s objective=%.6g (%d jobs, %d classes, %d programs, %.3fs)",
        pol.name, status, outcome.objective, n, work.n_jobs, ctx.n_programs, total_s,
    )
    return Allocation(
        policy=pol.name,
        params=pol.params(),
        status=status,
        success=status in SUCCESS_STATUSES,
        message=message,
        objective=outcome.objective,
        X=X,
        job_ids=jobs.ids,
        gpu_types=jobs.gpu_types,
        throughputs=jobs.throughputs,
        solver=",".join(ctx.backends_used) or "none",
        timings={"aggregate_s": aggregate_s, "build_s": ctx.build_s, "solve_s": ctx.solve_s,
                 "certificate_s": cert.seconds, "total_s": total_s},
        sizes={"n_jobs": n, "n_classes": work.n_jobs, "n_programs": ctx.n_programs,
               "max_vars": ctx.max_vars, "max_rows": ctx.max_rows},
        extra=extra,
        certificate=cert,
    )
