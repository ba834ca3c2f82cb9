"""Host CPU / memory demands per GPU and per-type capacities (issue 9, part 4).

The independent check here knows nothing of how X was computed: it multiplies each job's
per-GPU demand by its gang size and its time on each type and compares with the
cluster's capacity of that type (plus the base checks of ``tests/checker.py``).
"""

from __future__ import annotations

import numpy as np
import pytest

import hetsched as hs
from checker import assert_feasible
from hetsched.errors import ValidationError
from hetsched.formulations.builder import ProgramBuilder
from hetsched.formulations.common import add_base_rows

INF = float("inf")

#: Policies that solve LPs with the shared base rows (the ones that must honour CPU/memory).
LP_POLICIES = (
    "max_min_fairness",
    "max_min_fairness_water_filling",
    "max_sum_throughput",
    "min_makespan",
    "finish_time_fairness",
    "hierarchical_max_min_fairness",
    "gandiva_fair",
    "drf",
)
#: Closed forms, priority rules and ILPs over configurations that do not model host resources.
NOT_LP = {"fifo", "isolated", "proportional", "allox", "sia"}


def host_usage(X, scale_factors, per_gpu):
    """sum_j s_j d_j X[j, k] per type, computed from scratch."""
    X = np.asarray(X, dtype=float)
    n, m = X.shape
    out = np.zeros(m)
    for j in range(n):
        for k in range(m):
            out[k] += scale_factors[j] * per_gpu[j] * X[j, k]
    return out


def instance(seed: int):
    rng = np.random.default_rng(seed)
    n = 8
    T = rng.uniform(0.5, 3.0, (n, 3))
    s = rng.choice([1, 1, 2], n)
    fields = dict(gpu_types=["v100", "p100", "k80"], scale_factors=s, steps_remaining=rng.uniform(1e3, 1e4, n),
                  entities=list("aabbccdd"))
    cpu = rng.uniform(2.0, 8.0, n)
    mem = rng.uniform(4.0, 30.0, n)
    return T, s, fields, cpu, mem


def test_every_lp_policy_is_listed() -> None:
    """Every registered policy is either checked here or known not to be an LP with base rows."""
    assert set(hs.list_policies()) <= set(LP_POLICIES) | NOT_LP


@pytest.mark.parametrize("policy", LP_POLICIES)
def test_ample_host_resources_change_nothing(policy: str) -> None:
    """With CPU/memory far above any demand, no row is added: the objective equals the GPU-only one."""
    T, s, fields, cpu, mem = instance(1)
    counts = {"v100": 2, "p100": 3, "k80": 4}
    plain = hs.solve(policy, hs.JobSet(T, **fields), hs.Cluster(counts))
    ample = hs.Cluster(counts, cpus={"v100": 1e4, "p100": 1e4, "k80": INF}, memory={t: 1e5 for t in counts})
    rich = hs.solve(policy, hs.JobSet(T, **fields, cpus_per_gpu=cpu, mem_per_gpu=mem), ample)
    assert plain.success and rich.success
    assert rich.objective == pytest.approx(plain.objective, rel=1e-7)
    assert rich.sizes["max_rows"] == plain.sizes["max_rows"]


@pytest.mark.parametrize("policy", LP_POLICIES)
@pytest.mark.parametrize("seed", [1, 2])
def test_binding_cpu_limit_is_respected(policy: str, seed: int) -> None:
    """CPU on the V100 and P100 servers is scarce; the independent check confirms it holds."""
    T, s, fields, cpu, mem = instance(seed)
    counts = {"v100": 2, "p100": 3, "k80": 4}
    cpus = {"v100": 6.0, "p100": 9.0, "k80": INF}
    memory = {"v100": 40.0, "p100": 1e4, "k80": 1e4}
    jobs = hs.JobSet(T, **fields, cpus_per_gpu=cpu, mem_per_gpu=mem)
    cluster = hs.Cluster(counts, cpus=cpus, memory=memory)
    res = hs.solve(policy, jobs, cluster)
    assert res.success, res.message
    assert_feasible(res.X, T, s, [2, 3, 4], context=policy)
    used_cpu = host_usage(res.X, s, cpu)
    used_mem = host_usage(res.X, s, mem)
    assert used_cpu[0] <= 6.0 * (1 + 1e-6) and used_cpu[1] <= 9.0 * (1 + 1e-6), used_cpu
    assert used_mem[0] <= 40.0 * (1 + 1e-6), used_mem
    # and the limit binds: without it, the GPU-only allocation would break it
    plain = hs.solve(policy, hs.JobSet(T, **fields), hs.Cluster(counts))
    assert host_usage(plain.X, s, cpu)[:2].max() > 6.0


def test_hand_derived_cpu_bound_allocation() -> None:
    """One V100 server with 8 cores; job 0 needs 8 cores per GPU, job 1 needs 2.

    max_sum_throughput with T = [[2, 1], [3, 1]] on 2 V100 + 2 K80 (K80 CPU unlimited):
    GPU-only, both jobs take a V100 (throughput 5). With 8 cores, 8 x0 + 2 x1 <= 8 on the V100;
    job 1 (faster, cheaper) keeps its V100 (2 cores), job 0 gets 6/8 of a V100 and the rest
    of its time on a K80: throughput 3 + 2 * 0.75 + 1 * 0.25 = 4.75.
    """
    jobs = hs.JobSet([[2.0, 1.0], [3.0, 1.0]], gpu_types=["v100", "k80"], cpus_per_gpu=[8.0, 2.0])
    res = hs.solve("max_sum_throughput", jobs, hs.Cluster({"v100": 2, "k80": 2}, cpus={"v100": 8, "k80": INF}))
    assert res.objective == pytest.approx(4.75)
    np.testing.assert_allclose(res.X, [[0.75, 0.25], [1.0, 0.0]], atol=1e-9)


def test_gang_that_never_fits_the_host_gets_no_time_there() -> None:
    """A 2-GPU gang needing 2 x 6 = 12 cores cannot run on the V100 servers (10 cores), even
    though the capacity row alone would allow 10/12 of the time."""
    jobs = hs.JobSet([[4.0, 1.0]], gpu_types=["v100", "k80"], scale_factors=[2], cpus_per_gpu=[6.0])
    res = hs.solve("max_sum_throughput", jobs, hs.Cluster({"v100": 2, "k80": 2}, cpus={"v100": 10, "k80": 100}))
    np.testing.assert_allclose(res.X, [[0.0, 1.0]], atol=1e-9)


def test_aggregation_keeps_different_demands_apart() -> None:
    """Jobs equal in T but not in CPU demand are not merged (the CPU row weighs each)."""
    T = [[2.0, 1.0]] * 4
    jobs = hs.JobSet(T, gpu_types=["v100", "k80"], cpus_per_gpu=[8.0, 8.0, 1.0, 1.0])
    cluster = hs.Cluster({"v100": 2, "k80": 2}, cpus={"v100": 9, "k80": INF})
    res = hs.solve("max_sum_throughput", jobs, cluster)
    assert res.sizes["n_classes"] == 2
    direct = hs.solve("max_sum_throughput", jobs, cluster, aggregate=False)
    assert res.objective == pytest.approx(direct.objective)
    assert host_usage(res.X, [1] * 4, [8, 8, 1, 1])[0] <= 9 + 1e-6


def test_rows_only_where_they_can_bind() -> None:
    """add_base_rows adds one CPU row per type whose capacity total demand can exceed."""
    jobs = hs.JobSet([[1.0, 1.0]] * 3, gpu_types=["a", "b"], cpus_per_gpu=[4.0, 4.0, 4.0])
    cluster = hs.Cluster({"a": 3, "b": 3}, cpus={"a": 8.0, "b": 12.0})  # 12 needed at most
    b = ProgramBuilder()
    X = b.add_allocation(np.ones((3, 2), dtype=bool))
    add_base_rows(b, X, jobs, cluster.capacities(jobs.gpu_types), cluster=cluster)
    assert b.n_rows == 3 + 2 + 1


# ----------------------------------------------------------------------------- bad input
def test_demands_without_capacities_name_the_field() -> None:
    jobs = hs.JobSet([[1.0]], gpu_types=["v100"], mem_per_gpu=[16.0])
    with pytest.raises(ValidationError, match=r"mem_per_gpu.*memory="):
        hs.solve("max_min_fairness", jobs, hs.Cluster({"v100": 1}))
    with pytest.raises(ValidationError, match=r"mem_per_gpu"):
        hs.solve("drf", jobs, hs.Cluster({"v100": 1}, cpus={"v100": 8}))


def test_builder_without_cluster_is_refused_when_jobs_state_demands() -> None:
    jobs = hs.JobSet([[1.0]], gpu_types=["v100"], cpus_per_gpu=[4.0])
    b = ProgramBuilder()
    X = b.add_allocation(np.ones((1, 1), dtype=bool))
    with pytest.raises(ValidationError, match="built without the cluster"):
        add_base_rows(b, X, jobs, np.array([1.0]))


@pytest.mark.parametrize("value", [-1.0, np.nan, np.inf])
def test_job_demand_must_be_non_negative_and_finite(value: float) -> None:
    with pytest.raises(ValidationError, match=r"`cpus_per_gpu` must be non-negative; job 1"):
        hs.JobSet([[1.0], [1.0]], gpu_types=["v100"], cpus_per_gpu=[1.0, value])


@pytest.mark.parametrize(
    ("cpus", "match"),
    [
        ({"v100": 8, "tpu": 4}, r"`cpus` names GPU type 'tpu'"),
        ({"v100": 8}, r"`cpus` must name every GPU type.*\['k80'\]"),
        ({"v100": -1, "k80": 1}, r"`cpus\['v100'\]` must be a non-negative number"),
        ({"v100": "lots", "k80": 1}, r"`cpus\['v100'\]` must be a non-negative number"),
        ([8, 8], r"`cpus` must be a mapping"),
    ],
)
def test_cluster_capacity_validation(cpus, match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        hs.Cluster({"v100": 2, "k80": 2}, cpus=cpus)


def test_cluster_keeps_resources() -> None:
    c = hs.Cluster({"v100": 2, "k80": 0}, cpus={"v100": 16}, memory={"v100": 64, "k80": 0})
    assert c.cpus == {"v100": 16.0} and c.memory == {"v100": 64.0, "k80": 0.0}
    assert c != hs.Cluster({"v100": 2, "k80": 0})
    assert "cpus=" in repr(c)
    d = hs.Cluster.from_servers({"v100": 16}, gpus_per_server=8, cpus={"v100": 128})
    assert d.resource_vector("cpus", ["v100"]).tolist() == [128.0]


@pytest.mark.parametrize("module", ['hetsched.formulations.resources', 'hetsched.inputs.cluster'])
def test_doctests(module: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.failed == 0 and result.attempted > 0
