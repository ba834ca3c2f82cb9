"""Placement sensitivity: consolidated vs unconsolidated rows under consolidated-GPU bounds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import hetsched as hs
from hetsched.formulations.spaces.packing import Packing
from hetsched.formulations.spaces.placement_sensitivity import PlacementSensitivity

P = hs.policies
POLICIES = [P.MaxMinFairness, P.MaxSumThroughput, P.MinMakespan, P.FinishTimeFairness]


def catalogue_case(seed: int, n: int = 30):
    cat = hs.generate_catalogue(n_job_types=5, scale_factors=(1, 2, 4, 8), seed=seed, pairs=True,
                                unconsolidated_slowdown_range=(1.2, 4.0))
    w = hs.sample_jobs(cat, n, seed=seed + 100, scale_factor_probs={1: 0.4, 2: 0.3, 4: 0.2, 8: 0.1})
    # 4-GPU servers: 8-GPU gangs never consolidate; 12 GPUs of each type.
    cluster = hs.Cluster.from_servers({"v100": 12, "p100": 12, "k80": 12}, gpus_per_server=4)
    return cat, w, cluster


def check_placed(res, jobs: hs.JobSet, cluster: hs.Cluster, ps: PlacementSensitivity, tol: float = 1e-6) -> None:
    """From the raw inputs: rows non-negative, job time <= 1, capacity, consolidated-GPU bounds
    from the servers, row throughputs equal the tables, and rows add up to the result."""
    rows = res.extra["allocation_rows"]
    pos = {j: i for i, j in enumerate(jobs.ids.tolist())}
    col = {t: k for k, t in enumerate(jobs.gpu_types)}
    n, m = jobs.n_jobs, jobs.n_types
    s, T = jobs.scale_factors, jobs.throughputs
    U = ps.unconsolidated.reindex(jobs.ids)
    cap = cluster.capacities(jobs.gpu_types)
    time, thr, used = np.zeros((n, m)), np.zeros(n), np.zeros(m)
    cons = {}  # (type, gang size) -> GPUs held by consolidated gangs of that size
    for r in rows.itertuples(index=False):
        j, k = pos[r.job], col[r.gpu_type]
        assert r.fraction >= -tol and r.kind in ("single", "unconsolidated")
        time[j, k] += r.fraction
        used[k] += r.gpus
        if r.kind == "single":
            assert r.throughput == pytest.approx(T[j, k])
            if s[j] > 1:
                cons[k, int(s[j])] = cons.get((k, int(s[j])), 0.0) + r.gpus
        else:
            assert s[j] > 1 and r.throughput == pytest.approx(U[r.gpu_type].iloc[j])
        thr[j] += r.fraction * r.throughput
    assert (time.sum(1) <= 1 + tol).all() and (used <= cap + tol).all()
    topo = cluster.topology
    for k, t in enumerate(jobs.gpu_types):
        g = topo.server_gpus[topo.server_type == topo.gpu_types.index(t)]
        for q in {q for (_, q) in cons}:
            held = sum(v for (kk, qq), v in cons.items() if kk == k and qq % q == 0)
            assert held <= (q * (g // q)).sum() + tol, (t, q, held)
    np.testing.assert_allclose(thr, res.effective_throughput, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(time, res.extra["time"], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("policy", POLICIES, ids=lambda c: c.name)
def test_equal_throughputs_equal_insensitive_policy(policy) -> None:
    cat, w, _ = catalogue_case(1)
    cluster = hs.Cluster.from_servers({"v100": 12, "p100": 12, "k80": 12}, gpus_per_server=8)
    ps = PlacementSensitivity(pd.DataFrame(w.jobs.throughputs, index=w.jobs.ids, columns=list(w.jobs.gpu_types)))
    res = hs.solve(policy(placement_sensitivity=ps), w.jobs, cluster)
    base = hs.solve(policy(), w.jobs, cluster)
    assert res.success and res.extra["space"]["n_unconsolidated"] > 0 and res.extra["space"]["n_side_rows"] > 0
    assert res.objective == pytest.approx(base.objective, rel=1e-6)
    check_placed(res, w.jobs, cluster, ps)


def test_large_consolidation_gain_is_consolidated_first() -> None:
    r"""Two 2-GPU jobs on a 2-GPU server and two 1-GPU servers (C = 4, one gang fits on a
    server at a time: consolidated GPUs <= 2). Job a: 3 steps/s consolidated, 1 spread
    (gain 3x); job b: 1.1 vs 1 (gain 1.1x). Both always run (4 GPUs for two gangs); with c_a,
    c_b the consolidated time fractions, c_a + c_b <= 1.

    * max-sum: 3 c_a + (1 - c_a) + 1.1 c_b + (1 - c_b) = 2 + 2 c_a + 0.1 c_b: c_a = 1, c_b = 0,
      objective 4.
    * max-min (one type, so p_j = T_j, share_j = 2 thr_j / T_j): share_a = (2/3)(1 + 2 c_a),
      share_b = (2/1.1)(1 + 0.1 c_b). With c_b = 1 - c_a, equal shares at
      c_a = (4/3) / (4/3 + 0.2/1.1) = 0.88, share 1.84: a still gets most consolidated time.
    """
    cluster = hs.Cluster.from_servers([("s0", "v100", 2), ("s1", "v100", 1), ("s2", "v100", 1)])
    jobs = hs.JobSet([[3.0], [1.1]], gpu_types=["v100"], ids=["a", "b"], scale_factors=[2, 2])
    ps = PlacementSensitivity(pd.DataFrame({"v100": [1.0, 1.0]}, index=["a", "b"]))
    res = hs.solve(P.MaxSumThroughput(placement_sensitivity=ps), jobs, cluster)
    assert res.objective == pytest.approx(4.0, rel=1e-6)
    cons = res.extra["time"] - res.extra["time_unconsolidated"]
    np.testing.assert_allclose(cons[:, 0], [1.0, 0.0], atol=1e-7)
    check_placed(res, jobs, cluster, ps)

    mm = hs.solve(P.MaxMinFairness(placement_sensitivity=ps), jobs, cluster)
    c = (mm.extra["time"] - mm.extra["time_unconsolidated"])[:, 0]
    c_a = (4 / 3) / (4 / 3 + 0.2 / 1.1)
    assert c[0] == pytest.approx(c_a, rel=1e-6) and c[1] == pytest.approx(1 - c_a, rel=1e-6)
    assert mm.objective == pytest.approx((2 / 3) * (1 + 2 * c_a), rel=1e-6)
    # Insensitive max-min assumes both can be consolidated: share 2 each, not achievable here.
    assert hs.solve("max_min_fairness", jobs, cluster).objective == pytest.approx(2.0, rel=1e-6)


def test_gangs_larger_than_servers_run_unconsolidated() -> None:
    cluster = hs.Cluster.from_servers({"v100": 8}, gpus_per_server=4)
    jobs = hs.JobSet([[8.0], [2.0]], gpu_types=["v100"], ids=["big", "small"], scale_factors=[8, 2])
    ps = PlacementSensitivity(pd.DataFrame({"v100": [3.0, 1.0]}, index=["big", "small"]))
    res = hs.solve(P.MaxSumThroughput(placement_sensitivity=ps), jobs, cluster)
    # big can never consolidate (servers of 4): 3 steps/s on all 8 GPUs at best.
    t = res.extra["time"]
    np.testing.assert_allclose(res.extra["time_unconsolidated"][0], t[0], atol=1e-9)
    assert res.effective_throughput[0] <= 3.0 + 1e-9
    check_placed(res, jobs, cluster, ps)


def test_explicit_consolidated_gpus_bound() -> None:
    jobs = hs.JobSet([[4.0], [4.0]], gpu_types=["v100"], ids=["a", "b"], scale_factors=[2, 2])
    frame = pd.DataFrame({"v100": [1.0, 1.0]}, index=["a", "b"])
    cluster = hs.Cluster({"v100": 4})
    free = hs.solve(P.MaxSumThroughput(placement_sensitivity=PlacementSensitivity(frame)), jobs, cluster)
    assert free.objective == pytest.approx(8.0)  # no topology, no bound: both consolidated
    half = PlacementSensitivity(frame, consolidated_gpus={"v100": 2})
    res = hs.solve(P.MaxSumThroughput(placement_sensitivity=half), jobs, cluster)
    assert res.objective == pytest.approx(4.0 + 1.0)
    assert res.extra["space"]["n_side_rows"] == 1


def test_unconsolidated_faster_is_allowed_and_used() -> None:
    jobs = hs.JobSet([[2.0]], gpu_types=["v100"], ids=["a"], scale_factors=[2])
    ps = PlacementSensitivity(pd.DataFrame({"v100": [2.5]}, index=["a"]))
    res = hs.solve(P.MaxSumThroughput(placement_sensitivity=ps), jobs, hs.Cluster({"v100": 2}))
    assert res.objective == pytest.approx(2.5)
    assert res.extra["time_unconsolidated"][0, 0] == pytest.approx(1.0)


def test_single_gpu_jobs_have_no_unconsolidated_rows() -> None:
    jobs = hs.JobSet([[2.0], [1.0]], gpu_types=["v100"], ids=["a", "b"])
    ps = PlacementSensitivity(pd.DataFrame({"v100": [1.0, 0.5]}, index=["a", "b"]))
    res = hs.solve(P.MaxMinFairness(placement_sensitivity=ps), jobs, hs.Cluster.from_servers({"v100": 2}))
    assert res.extra["space"]["n_unconsolidated"] == 0
    assert res.objective == pytest.approx(hs.solve("max_min_fairness", jobs, hs.Cluster({"v100": 2})).objective)


@pytest.mark.parametrize("policy", POLICIES, ids=lambda c: c.name)
def test_catalogue_workload_all_policies(policy) -> None:
    cat, w, cluster = catalogue_case(2)
    ps = PlacementSensitivity.from_workload(w, cat)
    res = hs.solve(policy(placement_sensitivity=ps), w.jobs, cluster)
    off = hs.solve(policy(placement_sensitivity=PlacementSensitivity.from_workload(w, cat, aggregate=False)),
                   w.jobs, cluster)
    assert res.success and off.success
    assert res.objective == pytest.approx(off.objective, rel=1e-6)
    check_placed(res, w.jobs, cluster, ps)
    check_placed(off, w.jobs, cluster, ps)
    assert policy(placement_sensitivity=ps).aggregatable is False


def test_with_packing_too() -> None:
    cat, w, cluster = catalogue_case(3)
    ps = PlacementSensitivity.from_workload(w, cat)
    pk = Packing.from_workload(w, cat, threshold=1.0)
    res = hs.solve(P.MaxMinFairness(placement_sensitivity=ps, packing=pk), w.jobs, cluster)
    only = hs.solve(P.MaxMinFairness(placement_sensitivity=ps), w.jobs, cluster)
    assert res.success and res.objective >= only.objective * (1 - 1e-7)
    assert {"time_shared", "time_unconsolidated"} <= set(res.extra)


# --------------------------------------------------------------------- bad input
def test_missing_job_row() -> None:
    jobs = hs.JobSet([[2.0], [1.0]], gpu_types=["v100"], ids=["a", "b"], scale_factors=[2, 2])
    ps = PlacementSensitivity(pd.DataFrame({"v100": [1.0]}, index=["a"]))
    with pytest.raises(hs.ValidationError, match="job 'b' has no row"):
        hs.solve(P.MaxMinFairness(placement_sensitivity=ps), jobs, hs.Cluster({"v100": 4}))


def test_unconsolidated_without_consolidated() -> None:
    jobs = hs.JobSet([[2.0, 0.0]], gpu_types=["v100", "k80"], ids=["a"], scale_factors=[2])
    ps = PlacementSensitivity(pd.DataFrame({"v100": [1.0], "k80": [0.5]}, index=["a"]))
    with pytest.raises(hs.ValidationError, match="consolidated throughput 0"):
        hs.solve(P.MaxMinFairness(placement_sensitivity=ps), jobs, hs.Cluster({"v100": 2, "k80": 2}))


@pytest.mark.parametrize("frame, kwargs, match", [
    (pd.DataFrame({"v100": [-1.0]}, index=["a"]), {}, "non-negative"),
    (pd.DataFrame({"v100": [1.0, 2.0]}, index=["a", "a"]), {}, "one row per job"),
    (pd.DataFrame({"v100": [1.0]}, index=["a"]), {"consolidated_gpus": {"v100": -2}}, "consolidated_gpus"),
    ({"a": 1.0}, {}, "DataFrame"),
])
def test_bad_placement_parameters(frame, kwargs, match) -> None:
    with pytest.raises(hs.ValidationError, match=match):
        PlacementSensitivity(frame, **kwargs)


def test_wrong_option_type() -> None:
    jobs = hs.JobSet([[1.0]], gpu_types=["v100"])
    with pytest.raises(hs.ValidationError, match="PlacementSensitivity"):
        hs.solve(P.MinMakespan(placement_sensitivity=1), hs.JobSet([[1.0]], gpu_types=["v100"], steps_remaining=[1.0]),
                 hs.Cluster({"v100": 1}))
    assert jobs.n_jobs == 1


# ------------------------------------------------------------- one workload container (issue 24)
def test_from_workload_takes_a_generated_trace_and_refuses_other_things() -> None:
    cat = hs.generate_catalogue(n_job_types=4, scale_factors=(1, 2, 4), seed=2)
    tr = hs.generate_workload(10, rate_per_hour=6.0, seed=2, catalogue=cat)
    ps = PlacementSensitivity.from_workload(tr, cat)
    np.testing.assert_array_equal(ps.unconsolidated.loc[tr.jobs.ids].to_numpy(), tr.unconsolidated)
    assert PlacementSensitivity.from_workload(tr).unconsolidated.equals(ps.unconsolidated)
    with pytest.raises(hs.ValidationError, match=r"`workload` must be a hetsched\.Workload .*got JobSet"):
        PlacementSensitivity.from_workload(tr.jobs, cat)
    small = hs.generate_catalogue(n_job_types=1, scale_factors=(1,), seed=2)
    with pytest.raises(hs.ValidationError, match=r"`catalogue` must hold every row of `workload`"):
        PlacementSensitivity.from_workload(tr, small)
