"""Dominant resource fairness across users (issue 9, part 4): hand-derived cases.

Dominant shares are recomputed here from X and the raw demands: per user, the largest
over resources of (amount used / capacity), with every job of a user sharing its dominant
resource in these cases (so the sum over jobs equals the max over resources).
"""

from __future__ import annotations

import numpy as np
import pytest

import hetsched as hs
from checker import assert_feasible
from hetsched.errors import ValidationError
from hetsched.policies import DominantResourceFairness


def dominant_shares(X, users, gpus, cpu, mem, counts, cpus, memory):
    """Per user: max(GPU_k used / C_k, CPU used / total CPU, memory used / total memory)."""
    X = np.asarray(X, float)
    out = {}
    for u in dict.fromkeys(users):
        rows = [j for j, v in enumerate(users) if v == u]
        g = np.zeros(X.shape[1])
        c = m = 0.0
        for j in rows:
            g += gpus[j] * X[j]
            c += gpus[j] * cpu[j] * X[j].sum()
            m += gpus[j] * mem[j] * X[j].sum()
        out[u] = max(max(g / np.asarray(counts, float)), c / sum(cpus), m / sum(memory))
    return out


def nsdi_example(extra_user: bool):
    users = ["A"] * 4 + ["B"] * 4 + (["C"] if extra_user else [])
    cpu = [1.0] * 4 + [3.0] * 4 + ([1.0] if extra_user else [])
    mem = [4.0] * 4 + [1.0] * 4 + ([1.0] if extra_user else [])
    jobs = hs.JobSet([[1.0]] * len(users), gpu_types=["v100"], entities=users, cpus_per_gpu=cpu, mem_per_gpu=mem)
    cluster = hs.Cluster({"v100": 100}, cpus={"v100": 9}, memory={"v100": 18})
    return jobs, cluster, users, cpu, mem


def test_nsdi_example_equal_dominant_shares() -> None:
    """Ghodsi et al. (NSDI'11), Fig. 1: 9 CPUs, 18 GB; A's tasks <1 CPU, 4 GB>, B's <3 CPU, 1 GB>.

    With a tasks for A and b for B (GPUs plentiful, each job one task): A's dominant resource
    is memory (4a/18), B's is CPU (3b/9). Equal shares 2a/9 = b/3 give b = 2a/3; CPU
    a + 3b = 3a <= 9 binds first (memory 4a + b = 14a/3 <= 18 allows a <= 3.86): a = 3,
    b = 2, both at 2/3.
    """
    jobs, cluster, users, cpu, mem = nsdi_example(extra_user=False)
    res = hs.solve("drf", jobs, cluster)
    assert res.success
    np.testing.assert_allclose(res.extra["dominant_share"], [2 / 3, 2 / 3], rtol=1e-7)
    assert res.X[:4].sum() == pytest.approx(3.0) and res.X[4:].sum() == pytest.approx(2.0)
    ds = dominant_shares(res.X, users, [1] * 8, cpu, mem, [100], [9], [18])
    assert ds["A"] == pytest.approx(2 / 3) and ds["B"] == pytest.approx(2 / 3)
    assert res.objective == pytest.approx(2 / 3)


def test_user_with_met_demand_stays_below() -> None:
    """Add user C with one task <1 CPU, 1 GB> (dominant share 1/9, CPU): its demand is met at
    1/9. A and B share the rest: 8 CPUs, 17 GB; b = 2a/3 and a + 3b = 3a <= 8 give a = 8/3,
    b = 16/9 (memory 4a + b = 12.4 <= 17), both at 2a/9 = 16/27."""
    jobs, cluster, users, cpu, mem = nsdi_example(extra_user=True)
    res = hs.solve("drf", jobs, cluster)
    np.testing.assert_allclose(res.extra["dominant_share"], [16 / 27, 16 / 27, 1 / 9], rtol=1e-7)
    assert res.X[8, 0] == pytest.approx(1.0)


def test_weighted_with_saturation() -> None:
    """Weights A: 2, B: 1 (two users of the NSDI example). Filling with D_A = 2t, D_B = t:
    a = 9t (D_A = 2a/9), b = 3t; limits: CPU 18t <= 9, memory 39t <= 18, and A has only 4
    tasks (a <= 4, t <= 4/9) -- the first to bind. A freezes at a = 4 (D_A = 8/9); B then
    grows until CPU 4 + 3b <= 9: b = 5/3, D_B = 5/9 (memory 16 + 5/3 <= 18 holds)."""
    jobs, cluster, users, cpu, mem = nsdi_example(extra_user=False)
    res = hs.solve(DominantResourceFairness(user_weights={"A": 2.0, "B": 1.0}), jobs, cluster)
    np.testing.assert_allclose(res.extra["dominant_share"], [8 / 9, 5 / 9], rtol=1e-7)
    assert res.X[:4].sum() == pytest.approx(4.0) and res.X[4:].sum() == pytest.approx(5 / 3)
    assert res.objective == pytest.approx(4 / 9)


def test_gpu_only_shares() -> None:
    """One type with 6 GPUs; user a has one job (demand met at 1/6), b and c five jobs each:
    they split the other 5 GPUs, 2.5 each (share 5/12)."""
    users = ["a"] + ["b"] * 5 + ["c"] * 5
    jobs = hs.JobSet([[1.0]] * 11, gpu_types=["v100"], entities=users)
    res = hs.solve("drf", jobs, hs.Cluster({"v100": 6}))
    np.testing.assert_allclose(res.extra["dominant_share"], [1 / 6, 5 / 12, 5 / 12], rtol=1e-7)
    assert_feasible(res.X, [[1.0]] * 11, [1] * 11, [6])


def test_users_share_their_gpus_among_their_jobs() -> None:
    """Users a (two jobs) and b (three) on 2 GPUs: both at dominant share 1/2 (one GPU each),
    spread evenly over each user's jobs: 1/2 and 1/3 of the time."""
    jobs = hs.JobSet([[1.0]] * 5, gpu_types=["v100"], entities=["a", "a", "b", "b", "b"])
    res = hs.solve("drf", jobs, hs.Cluster({"v100": 2}))
    np.testing.assert_allclose(res.extra["dominant_share"], [0.5, 0.5], rtol=1e-7)
    np.testing.assert_allclose(res.X.ravel(), [1 / 2] * 2 + [1 / 3] * 3, atol=1e-7)


def test_heterogeneous_types_and_gangs_first_level_is_max_min() -> None:
    """Random users, gangs, three types and CPU limits: X is feasible, and the smallest
    dominant share equals the max-min level an independent dense LP (scipy linprog) finds.

    Rates: a job on type k holds s_j/C_k of that type's GPUs and s_j cpu_j / sum(cpus) of the
    CPUs; its dominant-share rate is the larger of the two.
    """
    from scipy.optimize import linprog

    rng = np.random.default_rng(3)
    n = 15
    T = rng.uniform(0.5, 3.0, (n, 3))
    s = rng.choice([1, 2], n)
    cpu = rng.uniform(1, 6, n)
    users = [f"u{i}" for i in rng.integers(0, 4, n)]
    counts, cpus = [4, 4, 8], [16.0, 16.0, 64.0]
    jobs = hs.JobSet(T, gpu_types=["v100", "p100", "k80"], scale_factors=s, entities=users, cpus_per_gpu=cpu)
    cluster = hs.Cluster(dict(zip(jobs.gpu_types, counts)), cpus=dict(zip(jobs.gpu_types, cpus)))
    res = hs.solve("drf", jobs, cluster)
    assert res.success
    assert_feasible(res.X, T, s, counts)
    m = 3
    rate = np.maximum(s[:, None] / np.array(counts, float)[None, :], (s * cpu / sum(cpus))[:, None])
    labels = list(dict.fromkeys(users))
    nv = n * m + 1                                          # X row-major, then t
    A, b = [], []
    for j in range(n):                                      # rows <= 1
        r = np.zeros(nv); r[j * m:(j + 1) * m] = 1; A.append(r); b.append(1.0)
    for k in range(m):                                      # GPUs and CPUs of each type
        r = np.zeros(nv); r[[j * m + k for j in range(n)]] = s; A.append(r); b.append(counts[k])
        r = np.zeros(nv); r[[j * m + k for j in range(n)]] = s * cpu; A.append(r); b.append(cpus[k])
    for u in labels:                                        # t - D_u <= 0
        r = np.zeros(nv); r[-1] = 1
        for j in (j for j, v in enumerate(users) if v == u):
            r[j * m:(j + 1) * m] = -rate[j]
        A.append(r); b.append(0.0)
    c = np.zeros(nv); c[-1] = -1
    ref = linprog(c, A_ub=np.array(A), b_ub=np.array(b), bounds=[(0, None)] * nv, method="highs")
    assert ref.status == 0
    assert res.extra["dominant_share"].min() == pytest.approx(-ref.fun, rel=1e-6)
    assert res.objective == pytest.approx(-ref.fun, rel=1e-6)


# ----------------------------------------------------------------------------- bad input
def test_bad_weights_and_users() -> None:
    with pytest.raises(ValidationError, match=r"`user_weights\['A'\]` must be a positive number"):
        DominantResourceFairness(user_weights={"A": 0})
    jobs, cluster, *_ = nsdi_example(extra_user=False)
    with pytest.raises(ValidationError, match=r"`user_weights` names user\(s\) \['Z'\]"):
        hs.solve(DominantResourceFairness(user_weights={"A": 1, "B": 1, "Z": 1}), jobs, cluster)
    with pytest.raises(ValidationError, match="`max_rounds` must be a positive integer"):
        DominantResourceFairness(max_rounds=0)


@pytest.mark.parametrize("module", ['hetsched.formulations.drf'])
def test_doctests(module: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.failed == 0 and result.attempted > 0
