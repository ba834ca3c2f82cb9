"""POP-style partitioned solves: feasibility, k = 1, determinism, executors, bad input."""

from __future__ import annotations

import inspect
from concurrent.futures import Executor, Future, ThreadPoolExecutor

import numpy as np
import pytest

import hetsched as hs
from checker import assert_feasible
from hetsched.errors import MissingFieldError, SolverError, ValidationError
from hetsched.api import Partitioned, split_cluster, split_jobs


def problem(n=120, m=3, seed=0, counts=None):
    types = [f"g{k}" for k in range(m)]
    jobs = hs.random_jobs(n, types, seed=seed)
    cluster = hs.Cluster(counts or {t: 10 + 3 * k for k, t in enumerate(types)})
    return jobs, cluster


def feasible(res, jobs, cluster):
    assert_feasible(res.X, jobs.throughputs, jobs.scale_factors, cluster.capacities(jobs.gpu_types))


# ------------------------------------------------------------------------- splitting
def test_split_jobs_sizes_and_cover():
    parts = split_jobs(103, 7, seed=3)
    sizes = [p.size for p in parts]
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == 103
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(103))


@pytest.mark.parametrize("k", [1, 2, 3, 7, 40])
def test_split_cluster_keeps_every_gpu(k):
    cluster = hs.Cluster({"a": 23, "b": 5, "c": 0, "d": 9})
    subs = split_cluster(cluster, k)
    total = np.sum([s.counts for s in subs], axis=0)
    np.testing.assert_array_equal(total, cluster.counts)  # POP would drop the remainders
    per = [int(s.counts.sum()) for s in subs]
    assert max(per) - min(per) <= 1
    for s in subs:
        assert ((s.counts == cluster.counts // k) | (s.counts == cluster.counts // k + 1)).all()


def test_k_larger_than_a_type_count_is_allowed():
    jobs, _ = problem(60, 2)
    cluster = hs.Cluster({"g0": 2, "g1": 30})  # 4 parts: two of them get no g0
    assert [c.count("g0") for c in split_cluster(cluster, 4)] == [1, 1, 0, 0]
    res = hs.solve(Partitioned(policy=hs.policies.MaxMinFairness(), k=4, seed=1, executor=SerialExecutor()), jobs, cluster)
    assert res.status == "optimal"
    feasible(res, jobs, cluster)


# ---------------------------------------------------------------------- correctness
@pytest.mark.parametrize("policy", [
    hs.policies.MaxMinFairness(),
    hs.policies.MinMakespan(),
    hs.policies.MaxSumThroughput(),
    hs.policies.FinishTimeFairness(),
])
@pytest.mark.parametrize("k", [2, 5])
def test_partitioned_is_feasible(policy, k):
    jobs, cluster = problem(80, 3, seed=k)
    with ThreadPoolExecutor(2) as ex:
        res = hs.solve(Partitioned(policy=policy, k=k, seed=0, executor=ex), jobs, cluster)
    assert res.status == "optimal", res.message
    feasible(res, jobs, cluster)
    assert res.policy == f"partitioned({policy.name})"
    extra = res.extra
    assert len(extra["subproblem_seconds"]) == k == extra["k"]
    assert extra["subproblem_max_s"] == max(extra["subproblem_seconds"])
    assert extra["subproblem_sum_s"] == pytest.approx(sum(extra["subproblem_seconds"]))
    assert extra["subproblem_status"] == ["optimal"] * k
    assert sum(extra["subproblem_jobs"]) == jobs.n_jobs


def test_partitioned_is_no_better_than_the_optimum():
    jobs, cluster = problem(150, 4, seed=2)
    exact = hs.solve("max_min_fairness", jobs, cluster)
    with ThreadPoolExecutor(2) as ex:
        pop = hs.solve(Partitioned(policy=hs.policies.MaxMinFairness(), k=4, executor=ex), jobs, cluster)
    assert pop.objective <= exact.objective * (1 + 1e-9)
    assert pop.objective == pytest.approx(hs.policies.MaxMinFairness().objective_of(pop.X, jobs, cluster))


@pytest.mark.parametrize("policy", ["max_min_fairness", "max_sum_throughput"])
def test_k1_equals_unpartitioned(policy):
    jobs, cluster = problem(90, 3, seed=4)
    plain = hs.solve(policy, jobs, cluster)
    one = hs.solve(Partitioned(policy=policy, k=1), jobs, cluster)
    assert one.extra["executor"] == "inline"
    assert one.objective == pytest.approx(plain.objective, rel=1e-12)
    np.testing.assert_allclose(one.X, plain.X, rtol=0, atol=1e-12)


def test_deterministic_per_seed():
    jobs, cluster = problem(100, 3, seed=5)
    with ThreadPoolExecutor(2) as ex:
        a = hs.solve(Partitioned(policy="max_min_fairness", k=3, seed=7, executor=ex), jobs, cluster)
        b = hs.solve(Partitioned(policy="max_min_fairness", k=3, seed=7, executor=ex), jobs, cluster)
        c = hs.solve(Partitioned(policy="max_min_fairness", k=3, seed=8, executor=ex), jobs, cluster)
    np.testing.assert_array_equal(a.X, b.X)
    assert not np.array_equal(a.X, c.X)


class SerialExecutor(Executor):
    """Runs each call at submission (an executor unlike the pools)."""

    def submit(self, fn, /, *args, **kwargs):
        fut = Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001
            fut.set_exception(exc)
        return fut


def test_executor_choice_does_not_change_results():
    """Threads, a serial executor and the default process pool give the same X."""
    jobs, cluster = problem(60, 2, seed=6)
    pol = dict(policy=hs.policies.MaxMinFairness(), k=3, seed=1)
    with ThreadPoolExecutor(3) as ex:
        threads = hs.solve(Partitioned(**pol, executor=ex), jobs, cluster)
    serial = hs.solve(Partitioned(**pol, executor=SerialExecutor()), jobs, cluster)
    procs = hs.solve(Partitioned(**pol), jobs, cluster)  # default: spawn process pool
    assert procs.extra["executor"] == "ProcessPoolExecutor"
    np.testing.assert_array_equal(threads.X, serial.X)
    np.testing.assert_array_equal(threads.X, procs.X)


def test_structured_solver_in_subproblems():
    jobs, cluster = problem(200, 4, seed=8)
    with ThreadPoolExecutor(2) as ex:
        a = hs.solve(Partitioned(policy="max_min_fairness", k=2, executor=ex), jobs, cluster, solver="structured")
        b = hs.solve(Partitioned(policy="max_min_fairness", k=2, executor=ex), jobs, cluster, solver="highs")
    assert a.solver == "structured"
    assert a.objective == pytest.approx(b.objective, rel=1e-6)


# ------------------------------------------------------------------------ bad input
@pytest.mark.parametrize("k", [0, -1, True, 2.5, "4"])
def test_bad_k(k):
    with pytest.raises(ValidationError, match="`k` must be a positive integer"):
        Partitioned(policy="max_min_fairness", k=k)


def test_k_larger_than_n():
    jobs, cluster = problem(5, 2)
    with pytest.raises(ValidationError, match=r"`k` must be at most the number of jobs \(5\); got 6"):
        hs.solve(Partitioned(policy="max_min_fairness", k=6), jobs, cluster)


@pytest.mark.parametrize("kwargs, word", [
    ({"seed": -1}, "`seed`"),
    ({"executor": "threads"}, "`executor`"),
    ({"aggregate": 1}, "`aggregate`"),
])
def test_bad_parameters(kwargs, word):
    with pytest.raises(ValidationError, match=word):
        Partitioned(policy="max_min_fairness", k=2, **kwargs)


def test_parameters_are_keyword_only():
    params = inspect.signature(Partitioned).parameters
    assert [p.name for p in params.values()] == ["policy", "k", "seed", "executor", "aggregate"]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values())
    with pytest.warns(DeprecationWarning, match=r"Partitioned\(policy=\.\.\., k=\.\.\.\)"):
        old = Partitioned("max_min_fairness", k=2, seed=3)  # by position: works for one release
    assert (old.policy.name, old.k, old.seed) == ("max_min_fairness", 2, 3)
    with pytest.raises(TypeError, match="by keyword only"):
        Partitioned("max_min_fairness", 2)
    with pytest.raises(TypeError, match="by keyword only"):
        Partitioned("max_min_fairness", policy="fifo", k=2)


def test_old_module_path_forwards_and_warns():
    with pytest.warns(DeprecationWarning, match=r"'hetsched\.solvers\.partition' moved to 'hetsched\.api'"):
        from hetsched.solvers.partition import Partitioned as old
    assert old is Partitioned is hs.Partitioned is hs.policies.Partitioned


def test_nested_and_unknown_policy():
    with pytest.raises(ValidationError, match="must not itself be Partitioned"):
        Partitioned(policy=Partitioned(policy="max_min_fairness", k=2), k=2)
    with pytest.raises(ValidationError, match="not a known policy"):
        Partitioned(policy="no_such_policy", k=2)


def test_missing_field_is_reported_before_splitting():
    jobs, cluster = problem(20, 2)
    bare = hs.JobSet(jobs.throughputs, gpu_types=jobs.gpu_types)
    with pytest.raises(MissingFieldError, match="steps_remaining"):
        hs.solve(Partitioned(policy="min_makespan", k=2), bare, cluster)


def test_subproblem_where_a_gang_cannot_fit_names_it():
    jobs = hs.JobSet(np.ones((4, 1)), gpu_types=["a"], scale_factors=[4, 1, 1, 1])
    with pytest.raises(ValidationError, match=r"sub-problem \d of k=2 .*asks for 4 GPUs.*smaller `k`"):
        hs.solve(Partitioned(policy="max_min_fairness", k=2, seed=0), jobs, hs.Cluster({"a": 6}))


class FailingExecutor(Executor):
    """Futures of the second submission fail (like a lost worker)."""

    def __init__(self):
        self.calls = 0

    def submit(self, fn, /, *args, **kwargs):
        self.calls += 1
        fut = Future()
        if self.calls == 2:
            fut.set_exception(RuntimeError("worker lost"))
        else:
            fut.set_result(fn(*args, **kwargs))
        return fut


def test_executor_error_names_the_subproblem():
    jobs, cluster = problem(30, 2)
    with pytest.raises(SolverError, match=r"sub-problem 1 of k=3 failed in the executor: RuntimeError\('worker lost'\)"):
        hs.solve(Partitioned(policy="max_min_fairness", k=3, executor=FailingExecutor()), jobs, cluster)


def test_error_raised_inside_a_subproblem_keeps_its_class():
    jobs, cluster = problem(30, 2)
    with pytest.raises(ValidationError, match=r"sub-problem 0 of k=2: .*options"):
        hs.solve(Partitioned(policy="max_min_fairness", k=2, executor=SerialExecutor()), jobs, cluster,
                 solver="highs", options={"no_such_highs_option": 1})
