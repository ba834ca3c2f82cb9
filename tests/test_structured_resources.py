"""The structured path with host-resource rows (CPU / memory capacity per GPU type).

Such programs have several coupling rows per type (the GPU row and one row per resource)
and single-variable rows that fix a gang which never fits a type's hosts at 0. The
structured solver prices every coupling row; these tests hold it to HiGHS on the same
programs, to a hand-derived optimum, and check its row duals against the LP itself.
"""

from __future__ import annotations

import numpy as np
import pytest

import hetsched as hs
from hetsched.formulations.max_min_fairness import MaxMinFairness
from hetsched.solvers import get_backend
from hetsched.solvers.structured import recognize

#: Small enough base size that a few hundred jobs go through the sampled warm start and
#: the aggregated master; no fallback, so a structured failure cannot hide behind HiGHS.
CG = {"base_size": 24, "fallback": "none"}


def resource_instance(seed: int, n: int = 300, m: int = 3):
    """Jobs with CPU and memory demands per GPU; host capacities that bind; some gangs that
    never fit the hosts of the smallest type."""
    rng = np.random.default_rng(seed)
    types = [f"g{k}" for k in range(m)]
    T = np.exp(rng.normal(0.0, 1.0, (n, m)))
    T[rng.random((n, m)) < 0.2] = 0.0
    T[T.max(axis=1) == 0, 0] = 1.0
    s = rng.choice([1, 2, 4], n, p=[0.7, 0.2, 0.1])
    cpus = rng.choice([1.0, 2.0, 4.0, 8.0], n)
    mem = rng.choice([4.0, 16.0, 64.0], n)
    counts = {t: int(rng.integers(n // (2 * m), n // m + 2)) for t in types}
    # hosts of g0 are small: a gang of 4 asking 8 CPUs per GPU (32) never fits there
    cpu_cap = {t: (20.0 if k == 0 else 2.5 * counts[t]) for k, t in enumerate(types)}
    mem_cap = {t: 20.0 * counts[t] for t in types}
    jobs = hs.JobSet(T, gpu_types=types, scale_factors=s, cpus_per_gpu=cpus, mem_per_gpu=mem,
                     steps_remaining=rng.uniform(1e3, 1e5, n), time_since_start=rng.uniform(0, 1e3, n))
    # every job must fit some type's hosts with positive throughput (the boundary check)
    fits = (s * cpus)[:, None] <= np.array([cpu_cap[t] for t in types])[None, :]
    fits &= (s * mem)[:, None] <= np.array([mem_cap[t] for t in types])[None, :]
    fits &= T > 0
    keep = fits.any(axis=1)
    jobs = jobs.take(np.flatnonzero(keep))
    return jobs, hs.Cluster(counts, cpus=cpu_cap, memory=mem_cap)


def host_usage(X, jobs, field):
    """Resource used per type, computed here from X (not by the library)."""
    d = np.asarray(jobs.field(field), dtype=float)
    return ((jobs.scale_factors * d)[:, None] * X).sum(axis=0)


def check_resources(res, jobs, cluster):
    X = res.X
    assert np.all(X >= -1e-9) and np.all(X.sum(axis=1) <= 1 + 1e-7)
    gpus = (jobs.scale_factors[:, None] * X).sum(axis=0)
    assert np.all(gpus <= cluster.capacities(jobs.gpu_types) * (1 + 1e-7) + 1e-9)
    for field, cap_name in (("cpus_per_gpu", "cpus"), ("mem_per_gpu", "memory")):
        cap = cluster.resource_vector(cap_name, jobs.gpu_types)
        assert np.all(host_usage(X, jobs, field) <= cap * (1 + 1e-7) + 1e-9)
        never = (jobs.scale_factors * np.asarray(jobs.field(field)))[:, None] > cap[None, :]
        assert np.all(X[never] <= 1e-12), "a gang was given time on a type whose hosts it never fits"


def test_hand_derived_cpu_row_optimum():
    """One type, 2 GPUs, 4 CPUs; max-sum of 3 a + 2 b + c with CPUs per GPU 4, 1, 1.

    Without the CPU row the optimum is 5 (a and b whole). With it, both rows bind at
    a = 2/3, b = 1, c = 1/3: value 13/3, GPU price 1/3, CPU price 2/3 (a and c are
    fractional: 3 = mu_g + 4 mu_c and 1 = mu_g + mu_c), b's time row price 2 - 1 = 1;
    dual value 2/3 + 8/3 + 1 = 13/3.
    """
    jobs = hs.JobSet([[3.0], [2.0], [1.0]], gpu_types=["v100"], cpus_per_gpu=[4.0, 1.0, 1.0])
    cluster = hs.Cluster({"v100": 2}, cpus={"v100": 4.0})
    res = hs.solve("max_sum_throughput", jobs, cluster, solver="structured", options={"fallback": "none"})
    assert res.status == "optimal", res.message
    assert res.solver == "structured"
    assert res.objective == pytest.approx(13 / 3, rel=1e-9)
    np.testing.assert_allclose(res.X[:, 0], [2 / 3, 1.0, 1 / 3], atol=1e-9)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("policy", ["max_min_fairness", "max_sum_throughput", "min_makespan"])
def test_resource_rows_match_highs(policy, seed):
    jobs, cluster = resource_instance(seed)
    a = hs.solve(policy, jobs, cluster, solver="structured", options=CG)
    b = hs.solve(policy, jobs, cluster, solver="highs")
    assert b.status == "optimal", b.message
    assert a.status == "optimal", a.message
    assert a.solver == "structured" and "delegat" not in a.message, a.message
    assert a.objective == pytest.approx(b.objective, rel=1e-6)
    check_resources(a, jobs, cluster)
    assert a.certificate is not None and a.certificate.ok, a.certificate


def test_resource_rows_change_the_optimum():
    """The instances above are not GPU-bound only: dropping the host rows changes max-sum."""
    jobs, cluster = resource_instance(1)
    plain = hs.JobSet(jobs.throughputs, gpu_types=jobs.gpu_types, scale_factors=jobs.scale_factors)
    with_rows = hs.solve("max_sum_throughput", jobs, cluster, solver="highs").objective
    without = hs.solve("max_sum_throughput", plain, hs.Cluster(cluster.as_dict()), solver="highs").objective
    assert with_rows < without * (1 - 1e-3)


def _level_lp(jobs, cluster):
    """Stage 1 of max-min fairness as a LinearProgram (with the host rows)."""
    return MaxMinFairness(second_stage=False).formulate(jobs, cluster)


@pytest.mark.parametrize("seed", range(4))
def test_recognized_shape_and_dual_feasibility(seed):
    """The program has extra coupling rows and fixed-at-zero variables; the structured
    backend's duals satisfy the LP's own dual feasibility and strong duality."""
    jobs, cluster = resource_instance(seed, n=200)
    lp = _level_lp(jobs, cluster)
    P, why = recognize(lp)
    assert P is not None, why
    assert P.n_extra >= 2 and P.zero_row.size > 0
    out = get_backend("structured").solve(lp, options=CG)
    ref = get_backend("highs").solve(lp)
    assert out.status == ref.status == "optimal", out.message
    assert out.objective == pytest.approx(ref.objective, rel=1e-6)
    d, x = out.row_dual, out.x
    # max problem, HiGHS convention: <= rows d >= 0, >= rows d <= 0, c - A^T d <= 0 where x = lb
    scale = 1.0 + np.abs(d).max()
    upper_only = np.isinf(lp.row_lb) & np.isfinite(lp.row_ub)
    lower_only = np.isfinite(lp.row_lb) & np.isinf(lp.row_ub)
    assert np.all(d[upper_only] >= -1e-9 * scale) and np.all(d[lower_only] <= 1e-9 * scale)
    rc = np.asarray(lp.c) - lp.A.T @ d
    at_lb = x <= lp.col_lb + 1e-12
    assert np.all(rc[at_lb] <= 1e-7 * scale)
    basic = (x > lp.col_lb + 1e-9) & (x < lp.col_ub - 1e-9)
    np.testing.assert_allclose(rc[basic], 0.0, atol=1e-7 * scale)
    # strong duality: the objective equals the dual value (rows at their active bound)
    rhs = np.where(d > 0, lp.row_ub, np.where(d < 0, lp.row_lb, 0.0))
    with np.errstate(invalid="ignore"):  # inf * 0 where a bound is infinite and rc is 0
        bound_part = np.where(rc > 0, lp.col_ub * rc, np.where(rc < 0, lp.col_lb * rc, 0.0))
    bound_part = np.where(np.isfinite(bound_part), bound_part, 0.0)
    assert float(d @ rhs + bound_part.sum()) == pytest.approx(out.objective - lp.offset, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("floor", [None, 0.25])
def test_fast_recognition_equals_the_generic_parse(floor):
    """The arrays the level program records (meta) and the ones parsed from its rows agree."""
    from hetsched.solvers.structured.problem import _from_level_meta, _parse

    jobs, cluster = resource_instance(3, n=150)
    lp = MaxMinFairness(second_stage=False).formulate(jobs, cluster, floor=floor)
    fast, (slow, why) = _from_level_meta(lp), _parse(lp)
    assert fast is not None and slow is not None, why
    assert fast.n_extra == slow.n_extra > 0 and fast.zero_row.size == slow.zero_row.size > 0
    # rows may be listed in another order: compare as sets keyed by LP row
    order_f, order_s = np.argsort(fast.extra_row), np.argsort(slow.extra_row)
    np.testing.assert_array_equal(fast.extra_row[order_f], slow.extra_row[order_s])
    np.testing.assert_array_equal(fast.kx[order_f], slow.kx[order_s])
    np.testing.assert_allclose(fast.Wx[:, order_f], slow.Wx[:, order_s])
    np.testing.assert_allclose(fast.Cx[order_f], slow.Cx[order_s])
    for name in ("A", "W", "C", "U", "cap_row", "level_row", "time_row"):
        np.testing.assert_array_equal(getattr(fast, name), getattr(slow, name), err_msg=name)
    zf = sorted(zip(fast.zero_row.tolist(), fast.zero_j.tolist(), fast.zero_k.tolist()))
    zs = sorted(zip(slow.zero_row.tolist(), slow.zero_j.tolist(), slow.zero_k.tolist()))
    assert zf == zs


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("with_rows", [False, True])
def test_stage2_program_equals_a_fresh_build(seed, with_rows):
    """Stage 2 reuses stage 1's matrix; it must be the program level_program builds."""
    from hetsched.formulations.aggregation import aggregate_jobs
    from hetsched.formulations.common import level_program, stage2_program

    jobs, cluster = resource_instance(seed, n=120)
    if not with_rows:
        jobs = hs.JobSet(jobs.throughputs, gpu_types=jobs.gpu_types, scale_factors=jobs.scale_factors)
        cluster = hs.Cluster(cluster.as_dict())
    # repeated rows merged into classes: multiplicities > 1 weigh the stage-2 objective
    jobs = jobs.take(np.random.default_rng(seed).integers(0, 40, jobs.n_jobs))
    jobs = aggregate_jobs(jobs).jobs
    assert jobs.multiplicity.max() > 1
    rng = np.random.default_rng(seed)
    a = jobs.throughputs * rng.uniform(0.5, 2.0, jobs.n_jobs)[:, None]
    cap = cluster.capacities(jobs.gpu_types)
    lp1 = level_program(jobs, cap, a, name="x", cluster=cluster)
    fresh = level_program(jobs, cap, a, floor=0.37, name="x", cluster=cluster, meta={"structured_warm": 1})
    reused = stage2_program(lp1, jobs, a, 0.37, meta={"structured_warm": 1})
    for f in ("c", "row_lb", "row_ub", "col_lb", "col_ub", "x_index"):
        np.testing.assert_array_equal(getattr(reused, f), getattr(fresh, f), err_msg=f)
    assert (reused.A != fresh.A).nnz == 0
    assert reused.name == fresh.name and reused.sense == fresh.sense and reused.offset == fresh.offset
    assert reused.meta.keys() == fresh.meta.keys() and reused.meta["structure"]["floor"] == 0.37
    assert reused.meta["structured_warm"] == 1


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("floor", [None, 0.5])
def test_level_program_matrix_from_its_definition(seed, floor):
    """The directly assembled level program equals one written out entry by entry from its
    definition (rows [jobs | capacity | level | host], variables [X row-major | t])."""
    from hetsched.formulations.aggregation import aggregate_jobs
    from hetsched.formulations.common import level_program

    jobs, cluster = resource_instance(seed, n=40)
    jobs = aggregate_jobs(jobs.take(np.random.default_rng(seed).integers(0, 30, 40))).jobs
    rng = np.random.default_rng(seed)
    a = jobs.throughputs * rng.uniform(0.5, 2.0, jobs.n_jobs)[:, None]
    cap = cluster.capacities(jobs.gpu_types)
    lp = level_program(jobs, cap, a, floor=floor, name="p", cluster=cluster)
    n, m = a.shape
    var = {}
    for j in range(n):
        for k in range(m):
            if a[j, k] > 0:
                var[j, k] = len(var)
    t = len(var)
    mu_s = jobs.multiplicity * jobs.scale_factors
    rows, lbs, ubs = [], [], []
    for j in range(n):  # time rows
        r = np.zeros(t + 1)
        for k in range(m):
            if (j, k) in var:
                r[var[j, k]] = 1.0
        rows.append(r); lbs.append(-np.inf); ubs.append(1.0)
    for k in range(m):  # capacity rows
        r = np.zeros(t + 1)
        for j in range(n):
            if (j, k) in var:
                r[var[j, k]] = mu_s[j]
        rows.append(r); lbs.append(-np.inf); ubs.append(cap[k])
    for j in range(n):  # level rows
        r = np.zeros(t + 1)
        for k in range(m):
            if (j, k) in var:
                r[var[j, k]] = a[j, k]
        r[t] = -1.0
        rows.append(r); lbs.append(0.0); ubs.append(np.inf)
    for field, name in (("cpus_per_gpu", "cpus"), ("mem_per_gpu", "memory")):  # host rows that can bind
        d = np.asarray(jobs.field(field), dtype=float)
        R = cluster.resource_vector(name, jobs.gpu_types)
        for k in range(m):
            total = sum(mu_s[j] * d[j] for j in range(n) if (j, k) in var)
            if total > R[k] * (1 + 1e-12):
                r = np.zeros(t + 1)
                for j in range(n):
                    if (j, k) in var and d[j] > 0:
                        r[var[j, k]] = mu_s[j] * d[j]
                rows.append(r); lbs.append(-np.inf); ubs.append(R[k])
        for (j, k), v in var.items():  # gangs that never fit the type's hosts
            if jobs.scale_factors[j] * d[j] > R[k] * (1 + 1e-12):
                r = np.zeros(t + 1)
                r[v] = 1.0
                rows.append(r); lbs.append(-np.inf); ubs.append(0.0)
    expected = np.array(rows)
    assert lp.A.shape == expected.shape
    np.testing.assert_array_equal(lp.A.toarray(), expected)
    np.testing.assert_array_equal(lp.row_lb, lbs)
    np.testing.assert_array_equal(lp.row_ub, ubs)
    c = np.zeros(t + 1)
    if floor is None:
        c[t] = 1.0
        assert lp.col_lb[t] == 0.0 and np.isinf(lp.col_ub[t])
    else:
        for (j, k), v in var.items():
            c[v] = jobs.multiplicity[j] * a[j, k]
        assert lp.col_lb[t] == lp.col_ub[t] == floor
    np.testing.assert_array_equal(lp.c, c)
    assert lp.A.has_sorted_indices
