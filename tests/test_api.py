"""The public face of solve(): result shape and labels, statuses, aggregation, type alignment."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import hetsched as hs
from hetsched.errors import ValidationError
from checker import assert_feasible


def random_instance(seed: int, n: int = 40, m: int = 3, dup: int = 1):
    rng = np.random.default_rng(seed)
    base = rng.lognormal(size=(n, m)) * (rng.random((n, m)) > 0.2)
    base[:, 0] = np.maximum(base[:, 0], 0.1)  # every job can use type 0
    T = np.repeat(base, dup, axis=0)
    s = np.repeat(rng.choice([1, 2, 4], n), dup)
    types = [f"t{k}" for k in range(m)]
    cluster = hs.Cluster({t: int(c) for t, c in zip(types, rng.integers(4, 20, m))})
    jobs = hs.JobSet(T, gpu_types=types, scale_factors=s,
                     steps_remaining=np.repeat(rng.uniform(1e3, 1e5, n), dup),
                     entities=[f"team{i % 3}" for i in range(n * dup)])
    return jobs, cluster


def test_result_shape_labels_and_frame() -> None:
    jobs = hs.JobSet(pd.DataFrame({"v100": [3.0, 2.0], "k80": [1.0, 1.0]}, index=["a", "b"]))
    res = hs.solve("max_sum_throughput", jobs, hs.Cluster({"k80": 1, "v100": 1}))
    assert res.X.shape == (2, 2) and res.gpu_types == ("v100", "k80")
    assert list(res.job_ids) == ["a", "b"]
    np.testing.assert_allclose(res.effective_throughput, (jobs.throughputs * res.X).sum(1))
    frame = res.to_frame()
    assert list(frame.columns) == ["v100", "k80", "effective_throughput"]
    assert list(frame.index) == ["a", "b"]
    # hand-derived: a on v100 (3) and b on k80 (1) gives 4; the swap gives 3
    assert res.objective == pytest.approx(4.0, rel=1e-9)
    assert res.X[0, 0] == pytest.approx(1.0) and res.X[1, 1] == pytest.approx(1.0)
    with pytest.raises(Exception):
        res.status = "x"  # frozen


def test_gpu_types_subset_and_reordering() -> None:
    """Columns follow jobs.gpu_types; a type missing from the cluster counts as 0 GPUs
    (the cluster lists p100 with 0 GPUs: absent on purpose, see test_type_names.py)."""
    cluster = hs.Cluster({"k80": 2, "v100": 1, "p100": 0})
    jobs = hs.JobSet([[5.0, 1.0, 9.0], [5.0, 1.0, 9.0]], gpu_types=["v100", "k80", "a100"])
    res = hs.solve("max_sum_throughput", jobs, cluster)
    assert np.all(res.X[:, 2] == 0)  # no a100 in the cluster
    # hand-derived: one v100 (5) + two k80 shared by the two jobs (rows <= 1) -> 5 + 1 + ... :
    # best is one job v100 full (5) and the other k80 full (1): total 6.
    assert res.objective == pytest.approx(6.0, rel=1e-9)
    assert_feasible(res.X, jobs.throughputs, jobs.scale_factors, cluster.capacities(jobs.gpu_types))
    # with p100 GPUs that no job names beside an a100 the cluster lacks, the names disagree (issue 30)
    with pytest.raises(ValidationError, match=r"name different GPU types"):
        hs.solve("max_sum_throughput", jobs, hs.Cluster({"k80": 2, "v100": 1, "p100": 3}))


@pytest.mark.parametrize("policy", ["max_min_fairness", "max_sum_throughput", "min_makespan",
                                    "finish_time_fairness", "isolated", "proportional"])
def test_aggregation_is_exact(policy: str) -> None:
    jobs, cluster = random_instance(3, n=15, dup=4)
    on = hs.solve(policy, jobs, cluster, aggregate=True)
    off = hs.solve(policy, jobs, cluster, aggregate=False)
    assert on.sizes["n_classes"] == 15 and off.sizes["n_classes"] == 60
    assert on.success and off.success
    assert on.objective == pytest.approx(off.objective, rel=1e-6)
    assert_feasible(on.X, jobs.throughputs, jobs.scale_factors, cluster.capacities(jobs.gpu_types))
    # identical jobs get identical rows
    np.testing.assert_allclose(on.X[0::15][:1], on.X[0:1])


def test_aggregation_large_catalogue_is_fast_and_feasible() -> None:
    rng = np.random.default_rng(0)
    cat = rng.lognormal(size=(80, 3))
    sf = rng.choice([1, 2, 4, 8], 80)
    pick = rng.integers(0, 80, 200_000)
    cluster = hs.Cluster({"v100": 3000, "p100": 3000, "k80": 3000})
    jobs = hs.JobSet(cat[pick], gpu_types=["v100", "p100", "k80"], scale_factors=sf[pick])
    res = hs.solve("max_min_fairness", jobs, cluster)
    assert res.success and res.sizes["n_classes"] <= 80
    assert_feasible(res.X, jobs.throughputs, jobs.scale_factors, cluster.capacities(jobs.gpu_types))


def test_infeasible_slos_are_reported_not_dropped() -> None:
    """Job 'late' needs 10 steps/s but runs at most 4 (v100): infeasible even alone."""
    jobs = hs.JobSet([[4.0, 1.0], [4.0, 1.0]], gpu_types=["v100", "k80"], ids=["ok", "late"],
                     steps_remaining=[100.0, 1000.0], slos=[1000.0, 100.0])
    res = hs.solve("max_sum_throughput", jobs, hs.Cluster({"v100": 1, "k80": 1}))
    assert res.status == "infeasible" and not res.success
    assert res.extra["infeasible_jobs"] == ["late"]
    assert "late" in res.message
    assert np.isnan(res.X).all() and np.isnan(res.objective)


def test_jointly_infeasible_slos_name_short_jobs() -> None:
    """Each job alone meets 3 steps/s on the single v100 (T=4), but not both at once:
    the elastic LP leaves at least one short, and it is named."""
    jobs = hs.JobSet([[4.0], [4.0]], gpu_types=["v100"], ids=["a", "b"],
                     steps_remaining=[300.0, 300.0], slos=[100.0, 100.0])
    res = hs.solve("max_sum_throughput", jobs, hs.Cluster({"v100": 1}))
    assert res.status == "infeasible"
    assert set(res.extra["infeasible_jobs"]) <= {"a", "b"} and res.extra["infeasible_jobs"]


def test_slos_met_when_feasible() -> None:
    jobs = hs.JobSet([[4.0, 1.0], [4.0, 1.0]], gpu_types=["v100", "k80"],
                     steps_remaining=[100.0, 100.0], slos=[50.0, 200.0])
    res = hs.solve("max_sum_throughput", jobs, hs.Cluster({"v100": 1, "k80": 1}))
    assert res.success
    assert np.all(res.effective_throughput >= np.array([2.0, 0.5]) - 1e-7)


def test_time_limit_is_a_status() -> None:
    """A time limit far below what the solve needs ends with status 'time_limit', never an exception."""
    jobs, cluster = random_instance(1, n=3000)
    res = hs.solve("finish_time_fairness", jobs, cluster, solver="highs",
                   options={"solver": "simplex"}, time_limit=1e-3)
    assert res.status == "time_limit" and not res.success


def test_solver_choice_recorded_and_backends_agree() -> None:
    jobs, cluster = random_instance(2, n=20)
    objs = {}
    for solver in hs.available_solvers():
        res = hs.solve("max_min_fairness", jobs, cluster, solver=solver)
        assert res.success, (solver, res.message)
        assert solver in res.solver
        objs[solver] = res.objective
    ref = objs["highs"]
    for solver, value in objs.items():
        assert value == pytest.approx(ref, rel=1e-6), solver


def test_no_print_from_library(capsys: pytest.CaptureFixture[str]) -> None:
    jobs, cluster = random_instance(4, n=30)
    for policy in hs.list_policies():
        hs.solve(policy, jobs, cluster)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_policy_objects_keep_parameters() -> None:
    p = hs.policies.MaxMinFairness(heterogeneity_aware=False, second_stage=False)
    jobs, cluster = random_instance(5, n=10)
    res = hs.solve(p, jobs, cluster)
    assert res.params == {"heterogeneity_aware": False, "second_stage": False}
    assert res.sizes["n_programs"] == 1
    with pytest.raises(TypeError):
        hs.policies.MaxMinFairness(True)  # type: ignore[misc]  # keyword-only
