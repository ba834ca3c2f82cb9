r"""``solve()``: validate once at the boundary, aggregate, run the policy, expand, report;
and :class:`Partitioned`, POP-style solves that run ``solve`` on k sub-problems.

POP (Narayanan et al., "Solving Large-Scale Granular Resource Allocation Problems
Efficiently with POP", SOSP'21) belongs to this stage, not to the solvers': it wraps a
policy and runs the whole pipeline (validation, aggregation, certificate) on each
sub-problem.

Examples
--------
>>> import hetsched as hs
>>> from concurrent.futures import ThreadPoolExecutor
>>> jobs = hs.random_jobs(40, ["v100", "k80"], seed=0)
>>> cluster = hs.Cluster({"v100": 6, "k80": 6})
>>> with ThreadPoolExecutor(2) as ex:
...     res = hs.solve(Partitioned(policy=hs.policies.MaxMinFairness(), k=2, seed=0, executor=ex), jobs, cluster)
>>> res.status, len(res.extra["subproblem_seconds"])
('optimal', 2)
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
import warnings
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from . import errors as _errors
from .errors import HetschedError, MissingFieldError, SolverError, ValidationError, show
from .executors import broken_pool_hint, default_workers, process_pool
from .formulations.aggregation import aggregate_jobs
from .formulations.base import Policy, PolicyOutcome, make_policy
from .inputs.cluster import Cluster, check_gpu_type_names
from .inputs.jobs import RESOURCE_FIELDS, JobSet, usable_mask
from .result import Allocation
from .solvers.base import SUCCESS_STATUSES
from .solvers.certificate import FAILED_STATUS, certify
from .solvers.context import SolveContext
from .validation import check_bool, check_instance, check_int

__all__ = ["Partitioned", "solve", "split_cluster", "split_jobs", "validate_problem"]

log = logging.getLogger(__name__)


def validate_problem(policy: Policy | str, jobs: JobSet, cluster: Cluster) -> np.ndarray:
    """Check that ``jobs`` can be scheduled on ``cluster`` by ``policy``; return capacities.

    ``policy`` is a policy object or a registered name (as for :func:`solve`).

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
    if not isinstance(policy, Policy):
        policy = make_policy(policy)  # a name; anything else: a ValidationError naming `policy`
    check_instance(jobs, "jobs", JobSet, "a hetsched.JobSet")
    check_instance(cluster, "cluster", Cluster, "a hetsched.Cluster")
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
    check_gpu_type_names(jobs.gpu_types, cluster)
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
    fits = usable_mask(T, jobs.scale_factors, cap).any(axis=1)
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
    usable = usable_mask(jobs.throughputs, jobs.scale_factors, cap)
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


# ------------------------------------------------------------------------------ POP partitioning


def split_jobs(n_jobs: int, k: int, seed: int) -> list[np.ndarray]:
    """POP's random split: a seeded permutation of ``range(n_jobs)`` cut into k sorted parts.

    Part sizes are :math:`\\lfloor n/k \\rfloor` or :math:`\\lceil n/k \\rceil`.

    Examples
    --------
    >>> [p.tolist() for p in split_jobs(5, 2, seed=0)]
    [[2, 3, 4], [0, 1]]
    """
    perm = np.random.default_rng(seed).permutation(n_jobs)
    return [np.sort(p) for p in np.array_split(perm, k)]


def split_cluster(cluster: Cluster, k: int) -> list[Cluster]:
    """k sub-clusters: :math:`\\lfloor C_t / k \\rfloor` GPUs of each type t plus the
    remainders dealt round robin (see :class:`Partitioned`). Prices are kept.

    Examples
    --------
    >>> import hetsched as hs
    >>> [c.as_dict() for c in split_cluster(hs.Cluster({"a": 5, "b": 3}), 2)]
    [{'a': 3, 'b': 1}, {'a': 2, 'b': 2}]
    """
    counts = np.asarray(cluster.counts, dtype=np.int64)
    base, rem = counts // k, counts % k
    offset = np.concatenate([[0], np.cumsum(rem)[:-1]]) % k
    parts = np.arange(k)[:, None]
    extra = ((parts - offset[None, :]) % k) < rem[None, :]
    sub = base[None, :] + extra.astype(np.int64)
    return [Cluster(dict(zip(cluster.gpu_types, (int(v) for v in row))), prices=cluster.prices) for row in sub]


def _solve_part(payload: dict[str, Any]) -> dict[str, Any]:
    """Solve one sub-problem (runs in a worker; module-level so process pools can pickle it)."""
    t0 = time.perf_counter()
    res = solve(payload["policy"], payload["jobs"], payload["cluster"], solver=payload["solver"],
                time_limit=payload["time_limit"], options=payload["options"], aggregate=payload["aggregate"])
    return {"X": res.X, "status": res.status, "message": res.message, "objective": res.objective,
            "seconds": time.perf_counter() - t0, "timings": dict(res.timings), "sizes": dict(res.sizes),
            "solver": res.solver}


@dataclass(frozen=True, eq=False, kw_only=True)
class Partitioned(Policy):
    r"""Solve ``policy`` POP-style: k random sub-problems in parallel, X stitched back.

    The solve splits the jobs at random (seeded) into k groups of sizes
    :math:`\lfloor n/k \rfloor` or :math:`\lceil n/k \rceil`, and the cluster into k
    sub-clusters, solves the k sub-problems independently (each with :func:`solve`) through a
    :class:`concurrent.futures.Executor` and stitches the allocations back together.

    Parameters
    ----------
    policy : Policy or str
        The policy to partition (any policy object, or a registered name).
    k : int
        Number of sub-problems, ``1 <= k <= n_jobs`` (checked at solve time). k larger
        than some type's count is allowed: some sub-clusters then have none of it.
    seed : int, default 0
        Seed of the random job split; the same seed gives the same split and, since each
        sub-problem is solved deterministically, the same X for any executor.
    executor : concurrent.futures.Executor, optional
        Where sub-problems run (any Executor: thread or process pool, Ray's or Dask's).
        Default: a process pool (spawn start method) with ``min(k, CPUs)`` workers created
        for the solve and shut down after it; with k = 1 the one sub-problem runs inline.
        An executor given here is used as is and left open. With the default pool, a script
        must call ``solve`` under ``if __name__ == "__main__":`` (spawned workers import the
        script again; see :mod:`hetsched.executors`).
    aggregate : bool, default True
        Merge identical jobs inside each sub-problem (see :mod:`hetsched.formulations.aggregation`).

    Every parameter is keyword-only. ``Partitioned(policy, k=...)`` with the policy by
    position still works for one release and warns (DeprecationWarning).

    Notes
    -----
    Cluster split. Type k's :math:`C_k` GPUs give every sub-cluster :math:`\lfloor C_k / k
    \rfloor`; the :math:`r_k = C_k \bmod k` remaining GPUs go one each to sub-clusters
    :math:`(o_k + i) \bmod k`, :math:`i < r_k`, where :math:`o_k = (\sum_{k' < k} r_{k'})
    \bmod k` (round robin over the types, so the sub-clusters' totals differ by at most one
    GPU). POP drops the remainders; here no GPU is lost. When :math:`C_k < k` some
    sub-clusters have none of type k: that is allowed, the jobs there use other types (a
    sub-problem in which some job can run on no type is rejected before anything is solved,
    naming the sub-problem).

    Every sub-problem is a feasible allocation of its sub-cluster, so the stitched X is
    feasible for the whole cluster: rows and capacities add up. It is optimal per
    sub-problem, not for the whole problem (POP's quality loss); with k = 1 it is the
    unpartitioned solve. The objective reported is the inner policy's objective of the
    stitched X on the *whole* problem.

    ``solve(..., solver=, time_limit=, options=)`` apply to every sub-problem (the time
    limit to each). The result's ``extra`` holds ``k``, ``seed``, ``executor``,
    ``subproblem_seconds`` (wall time of each sub-solve, where it ran),
    ``subproblem_max_s``, ``subproblem_sum_s``, ``subproblem_status``,
    ``subproblem_objective``, ``subproblem_jobs`` and ``parallel_wall_s`` (dispatch to
    last result). ``timings["solve_s"]`` and ``["build_s"]`` are sums over sub-problems.

    Raises
    ------
    ValidationError
        Bad parameters; k > n_jobs; a sub-problem in which some job can run on no GPU
        type (the message names the sub-problem; use a smaller k).
    SolverError
        A sub-problem failed in the executor (the message names the sub-problem). Errors
        hetsched raises inside a sub-problem keep their class, with the sub-problem named.
    MainModuleGuardError
        The default pool was requested from the top level of a script that a spawned worker
        is importing (the script lacks ``if __name__ == "__main__":``).
    TypeError
        More than one positional argument, or the policy both by position and by keyword.
    """

    policy: Policy | str
    k: int
    seed: int = 0
    executor: Executor | None = dataclasses.field(default=None, repr=False)
    aggregate: bool = True

    aggregatable: ClassVar[bool] = False  # the split is over jobs; sub-problems aggregate

    def __post_init__(self) -> None:
        inner = make_policy(self.policy)
        if isinstance(inner, Partitioned):
            raise ValidationError("`policy` must not itself be Partitioned; partition once with the product of the k's.")
        object.__setattr__(self, "policy", inner)
        check_int(self.k, "k", low=1)
        check_int(self.seed, "seed", low=0)
        check_instance(self.executor, "executor", Executor, "a concurrent.futures.Executor", allow_none=True)
        check_bool(self.aggregate, "aggregate")

    # the wrapped policy's identity and needs
    @property
    def name(self) -> str:  # type: ignore[override]
        return f"partitioned({self.policy.name})"

    @property
    def requires(self) -> tuple[str, ...]:  # type: ignore[override]
        return self.policy.requires

    @property
    def reads(self) -> tuple[str, ...]:  # type: ignore[override]
        return self.policy.reads

    def objective_of(self, X: np.ndarray, jobs: JobSet, cluster: Cluster) -> float:
        """The wrapped policy's objective of ``X`` on the whole problem."""
        return self.policy.objective_of(X, jobs, cluster)

    def subproblems(self, jobs: JobSet, cluster: Cluster) -> tuple[list[np.ndarray], list[JobSet], list[Cluster]]:
        """Row indices, JobSets and Clusters of the k sub-problems (validated).

        Raises
        ------
        ValidationError
            k > n_jobs, or a sub-problem where some job can run on no type.
        """
        n = jobs.n_jobs
        if self.k > n:
            raise ValidationError(f"`k` must be at most the number of jobs ({n}); got {self.k}.")
        parts = split_jobs(n, self.k, self.seed)
        clusters = split_cluster(cluster, self.k)
        subjobs = [jobs.take(idx) for idx in parts]
        for p, (sj, sc) in enumerate(zip(subjobs, clusters)):
            try:
                validate_problem(self.policy, sj, sc)
            except ValidationError as exc:
                raise type(exc)(
                    f"sub-problem {p} of k={self.k} (sub-cluster {sc.as_dict()}): {exc} Use a smaller `k`."
                ) from exc
        return parts, subjobs, clusters

    def solve(self, jobs: JobSet, cluster: Cluster, ctx: SolveContext) -> PolicyOutcome:
        """Solve the k sub-problems through the executor and stitch their X (see the class)."""
        n, m = jobs.n_jobs, jobs.n_types
        with ctx.building():
            parts, subjobs, clusters = self.subproblems(jobs, cluster)
        payloads = [
            {"policy": self.policy, "jobs": sj, "cluster": sc, "solver": ctx.solver, "time_limit": ctx.remaining(),
             "options": dict(ctx.options), "aggregate": self.aggregate}
            for sj, sc in zip(subjobs, clusters)
        ]
        t0 = time.perf_counter()
        results = self._run(payloads)
        wall = time.perf_counter() - t0
        X = np.full((n, m), np.nan)
        for idx, r in zip(parts, results):
            X[idx] = r["X"]
        for r in results:
            ctx.n_programs += int(r["sizes"].get("n_programs", 0))
            ctx.solve_s += float(r["timings"].get("solve_s", 0.0))
            ctx.build_s += float(r["timings"].get("build_s", 0.0))
            ctx.max_vars = max(ctx.max_vars, int(r["sizes"].get("max_vars", 0)))
            ctx.max_rows = max(ctx.max_rows, int(r["sizes"].get("max_rows", 0)))
            for name in str(r["solver"]).split(","):
                if name and name != "none" and name not in ctx.backends_used:
                    ctx.backends_used.append(name)
        statuses = [r["status"] for r in results]
        failed = [p for p, s in enumerate(statuses) if s not in SUCCESS_STATUSES]
        if failed:
            p = failed[0]
            status = statuses[p]
            message = (f"{len(failed)} of {self.k} sub-problems not optimal; sub-problem {p}: "
                       f"{status!r} ({results[p]['message']})")
        else:
            status = "optimal"
            message = (f"POP: {self.k} sub-problem(s), each optimal for its part of the jobs and "
                       f"cluster (not necessarily optimal for the whole problem)")
        objective = self.objective_of(X, jobs, cluster) if not np.isnan(X).any() else float("nan")
        secs = [float(r["seconds"]) for r in results]
        executor = type(self.executor).__name__ if self.executor is not None else (
            "inline" if self.k == 1 else "ProcessPoolExecutor")
        extra = {
            "k": self.k, "seed": self.seed, "executor": executor,
            "subproblem_seconds": secs, "subproblem_max_s": max(secs), "subproblem_sum_s": float(sum(secs)),
            "subproblem_status": statuses, "subproblem_objective": [float(r["objective"]) for r in results],
            "subproblem_jobs": [int(p.size) for p in parts], "parallel_wall_s": wall,
        }
        log.info("%s: k=%d, sub-problems max %.3fs, sum %.3fs, wall %.3fs", self.name, self.k, max(secs), sum(secs), wall)
        return PolicyOutcome(X=X, objective=objective, status=status, message=message, extra=extra)

    def _run(self, payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Solve every payload through the executor; errors name the sub-problem."""
        own = None
        executor = self.executor
        if executor is None:
            if len(payloads) == 1:
                return [self._inline(0, payloads[0])]
            own = process_pool(min(len(payloads), default_workers()), what="Partitioned.solve",
                               start_method="spawn")
            executor = own
        try:
            futures = []
            for p, pl in enumerate(payloads):
                try:
                    futures.append(executor.submit(_solve_part, pl))
                except Exception as exc:
                    raise SolverError(f"sub-problem {p} of k={self.k} could not be submitted to the executor: {exc!r}") from exc
            return [self._result(p, f) for p, f in enumerate(futures)]
        finally:
            if own is not None:
                own.shutdown(wait=True, cancel_futures=True)

    def _inline(self, p: int, payload: dict[str, Any]) -> dict[str, Any]:
        try:
            return _solve_part(payload)
        except HetschedError as exc:
            raise _hetsched_class(exc)(f"sub-problem {p} of k={self.k}: {exc}") from exc

    def _result(self, p: int, future: Future) -> dict[str, Any]:
        try:
            return future.result()
        except HetschedError as exc:
            raise _hetsched_class(exc)(f"sub-problem {p} of k={self.k}: {_cause_text(exc)}") from exc
        except Exception as exc:
            raise SolverError(
                f"sub-problem {p} of k={self.k} failed in the executor: {exc!r}.{broken_pool_hint(exc)}"
            ) from exc


def _policy_by_position(init: Callable[..., None]) -> Callable[..., None]:
    """Wrap the keyword-only ``__init__`` of :class:`Partitioned` so that the policy given by
    position still works for one release, with a DeprecationWarning."""

    @functools.wraps(init)
    def __init__(self: Partitioned, *args: Any, **kwargs: Any) -> None:
        if args:
            if len(args) > 1 or "policy" in kwargs:
                raise TypeError("Partitioned() takes its parameters by keyword only: "
                                "Partitioned(policy=..., k=..., seed=..., executor=..., aggregate=...).")
            warnings.warn("Partitioned(policy, k=...) with the policy by position is deprecated (it will be "
                          "refused in the next release); write Partitioned(policy=..., k=...).",
                          DeprecationWarning, stacklevel=2)
            kwargs["policy"] = args[0]
        init(self, **kwargs)

    return __init__


Partitioned.__init__ = _policy_by_position(Partitioned.__init__)  # type: ignore[method-assign]


def _hetsched_class(exc: HetschedError) -> type[HetschedError]:
    """The hetsched exception class of ``exc`` (Ray re-raises a task's error as a subclass of it)."""
    return next(c for c in type(exc).__mro__ if c.__module__ == _errors.__name__)


def _cause_text(exc: BaseException) -> str:
    """The original message of ``exc`` (a Ray task error keeps it on ``.cause``)."""
    cause = getattr(exc, "cause", None)
    return str(cause) if isinstance(cause, BaseException) else str(exc)
