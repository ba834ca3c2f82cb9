r"""POP-style partitioned solves (Narayanan et al., "Solving Large-Scale Granular Resource
Allocation Problems Efficiently with POP", SOSP'21).

:class:`Partitioned` wraps any policy. Its solve splits the jobs at random (seeded) into
k groups of sizes :math:`\lfloor n/k \rfloor` or :math:`\lceil n/k \rceil`, and the
cluster into k sub-clusters, solves the k sub-problems independently through a
:class:`concurrent.futures.Executor` and stitches the allocations back together.

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

Examples
--------
>>> import hetsched as hs
>>> from concurrent.futures import ThreadPoolExecutor
>>> from hetsched.solvers.partition import Partitioned
>>> jobs = hs.random_jobs(40, ["v100", "k80"], seed=0)
>>> cluster = hs.Cluster({"v100": 6, "k80": 6})
>>> with ThreadPoolExecutor(2) as ex:
...     res = hs.solve(Partitioned(hs.policies.MaxMinFairness(), k=2, seed=0, executor=ex), jobs, cluster)
>>> res.status, len(res.extra["subproblem_seconds"])
('optimal', 2)
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Executor
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, ClassVar

import numpy as np

from .. import errors as _errors
from ..errors import HetschedError, SolverError, ValidationError
from ..executors import broken_pool_hint, default_workers, process_pool
from ..formulations.base import Policy, PolicyOutcome, make_policy
from ..inputs.cluster import Cluster
from ..inputs.jobs import JobSet
from ..validation import check_int
from . import structured as _structured
from .base import SUCCESS_STATUSES
from .context import SolveContext

__all__ = ["Partitioned", "default_workers", "split_cluster", "split_jobs"]

log = logging.getLogger(__name__)


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
    remainders dealt round robin (see the module docstring). Prices are kept.

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
    from ..api import solve

    t0 = time.perf_counter()
    res = solve(payload["policy"], payload["jobs"], payload["cluster"], solver=payload["solver"],
                time_limit=payload["time_limit"], options=payload["options"], aggregate=payload["aggregate"])
    return {"X": res.X, "status": res.status, "message": res.message, "objective": res.objective,
            "seconds": time.perf_counter() - t0, "timings": dict(res.timings), "sizes": dict(res.sizes),
            "solver": res.solver}


@dataclass(frozen=True, eq=False)
class Partitioned(Policy):
    """Solve ``policy`` POP-style: k random sub-problems in parallel, X stitched back.

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

    Notes
    -----
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
    """

    policy: Policy | str
    _: KW_ONLY
    k: int
    seed: int = 0
    executor: Executor | None = field(default=None, repr=False)
    aggregate: bool = True

    aggregatable: ClassVar[bool] = False  # the split is over jobs; sub-problems aggregate

    def __post_init__(self) -> None:
        inner = make_policy(self.policy)
        if isinstance(inner, Partitioned):
            raise ValidationError("`policy` must not itself be Partitioned; partition once with the product of the k's.")
        object.__setattr__(self, "policy", inner)
        check_int(self.k, "k", low=1)
        check_int(self.seed, "seed", low=0)
        if self.executor is not None and not isinstance(self.executor, Executor):
            raise ValidationError(
                f"`executor` must be a concurrent.futures.Executor or None; got {type(self.executor).__name__}."
            )
        if not isinstance(self.aggregate, bool):
            raise ValidationError(f"`aggregate` must be True or False; got {self.aggregate!r}.")

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
        from ..api import validate_problem

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

    def _result(self, p: int, future) -> dict[str, Any]:
        try:
            return future.result()
        except HetschedError as exc:
            raise _hetsched_class(exc)(f"sub-problem {p} of k={self.k}: {_cause_text(exc)}") from exc
        except Exception as exc:
            raise SolverError(
                f"sub-problem {p} of k={self.k} failed in the executor: {exc!r}.{broken_pool_hint(exc)}"
            ) from exc


def _hetsched_class(exc: HetschedError) -> type[HetschedError]:
    """The hetsched exception class of ``exc`` (Ray re-raises a task's error as a subclass of it)."""
    return next(c for c in type(exc).__mro__ if c.__module__ == _errors.__name__)


def _cause_text(exc: BaseException) -> str:
    """The original message of ``exc`` (a Ray task error keeps it on ``.cause``)."""
    cause = getattr(exc, "cause", None)
    return str(cause) if isinstance(cause, BaseException) else str(exc)
