"""AlloX: min-cost matching of jobs to (GPU, position) slots (issue 9, part 1).

Optimality is checked against brute force over every assignment of jobs to individual GPUs
and every order of the jobs (a global permutation; each GPU runs its jobs in that order),
and the reported schedule is re-checked from scratch: durations, GPU counts over time, and
the average JCT it implies.
"""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

import hetsched as hs
from checker import assert_feasible
from hetsched.errors import MissingFieldError, ValidationError
from hetsched.policies import AlloX


def brute_force_total_jct(T, R, counts, wait) -> float:
    """min over (job -> GPU) and job orders of sum_j (wait_j + completion_j)."""
    gpus = [k for k, c in enumerate(counts) for _ in range(c)]
    n = len(R)
    best = np.inf
    for assign in itertools.product(range(len(gpus)), repeat=n):
        if any(T[j][gpus[g]] <= 0 for j, g in enumerate(assign)):
            continue
        for perm in itertools.permutations(range(n)):
            clock = [0.0] * len(gpus)
            total = 0.0
            for j in perm:
                g = assign[j]
                clock[g] += R[j] / T[j][gpus[g]]
                total += clock[g]
            best = min(best, total)
    return best + float(sum(wait))


def recheck_schedule(res, T, R, s, counts, wait) -> float:
    """Independent re-check of the schedule in ``res.extra``; returns its average JCT."""
    start = res.extra["start_times"]
    comp = res.extra["completion_times"]
    placed = np.isfinite(comp)
    types = {t: k for k, t in enumerate(res.gpu_types)}
    kind = np.full(len(R), -1)
    for tname, ids in res.extra["schedule"]:
        for jid in ids:
            kind[list(res.job_ids).index(jid)] = types[tname]
    assert (kind >= 0).sum() == placed.sum()
    for j in np.flatnonzero(placed):
        assert comp[j] - start[j] == pytest.approx(R[j] / T[j][kind[j]])
    # at every start time, the gangs running on each type fit in its GPUs
    for t in np.unique(start[placed]):
        for k, c in enumerate(counts):
            on = placed & (kind == k) & (start <= t + 1e-9) & (comp > t + 1e-9)
            assert s[on].sum() <= c
    return float(np.mean(np.asarray(wait)[placed] + comp[placed]))


@pytest.mark.parametrize("seed", range(12))
def test_matching_equals_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 5))
    T = rng.uniform(0.5, 4.0, (n, 2)).round(2)
    T[rng.random((n, 2)) < 0.2] = 0.0
    T[T.sum(axis=1) == 0, 0] = 1.0
    R = rng.uniform(10, 1000, n).round(0)
    counts = [int(c) for c in rng.integers(1, 3, 2)]
    wait = rng.uniform(0, 100, n).round(0)
    jobs = hs.JobSet(T, gpu_types=["a", "b"], steps_remaining=R, time_since_start=wait)
    res = hs.solve("allox", jobs, hs.Cluster({"a": counts[0], "b": counts[1]}))
    best = brute_force_total_jct(T.tolist(), R.tolist(), counts, wait.tolist())
    assert res.objective * n == pytest.approx(best, rel=1e-9)
    assert recheck_schedule(res, T, R, np.ones(n, int), counts, wait) == pytest.approx(res.objective)
    assert_feasible(res.X, T, np.ones(n), counts)


def test_hand_derived_three_jobs() -> None:
    """p (seconds) = R / T: a (50 on V100, 100 on K80), b (250, 500), c (200, 800); one GPU each.

    Candidates: {a,c} on V100 + b on K80: 50 + 250 + 500 = 800; {b,c} on V100 (SPT: c then b)
    + a on K80: 200 + 450 + 100 = 750; everything else costs more (e.g. all on the V100:
    50 + 250 + 500 = 800). So c runs now on the V100, a on the K80, b after c.
    """
    jobs = hs.JobSet([[2.0, 1.0], [2.0, 1.0], [4.0, 1.0]], gpu_types=["v100", "k80"], ids=["a", "b", "c"],
                     steps_remaining=[100.0, 500.0, 800.0])
    res = hs.solve("allox", jobs, hs.Cluster({"v100": 1, "k80": 1}))
    assert res.extra["schedule"] == [("v100", ["c", "b"]), ("k80", ["a"])]
    np.testing.assert_array_equal(res.X, [[0, 1], [0, 0], [1, 0]])
    assert res.objective == pytest.approx(750 / 3)


def test_horizon_gives_time_fractions() -> None:
    """One GPU, jobs of 100 s and 200 s: SPT order; over a 150 s horizon the short job runs
    100 s and the long one the remaining 50 s."""
    jobs = hs.JobSet([[1.0], [1.0]], gpu_types=["v100"], steps_remaining=[200.0, 100.0])
    res = hs.solve(AlloX(horizon=150.0), jobs, hs.Cluster({"v100": 1}))
    np.testing.assert_allclose(res.X, [[50 / 150], [100 / 150]])


def test_alpha_keeps_longest_waiting_jobs() -> None:
    """alpha = 0.5 of 4 jobs on 1 GPU: max(ceil(2), 1) = 2 candidates, the two that waited
    longest (rows 1 and 3); the shortest of them (row 3) runs."""
    jobs = hs.JobSet([[1.0]] * 4, gpu_types=["v100"], steps_remaining=[10.0, 300.0, 5.0, 200.0],
                     time_since_start=[0.0, 50.0, 10.0, 40.0])
    res = hs.solve(AlloX(alpha=0.5), jobs, hs.Cluster({"v100": 1}))
    assert sorted(res.extra["candidates"].tolist()) == [1, 3]
    np.testing.assert_array_equal(res.X.ravel(), [0, 0, 0, 1])
    # without the knob the shortest job overall runs first
    np.testing.assert_array_equal(hs.solve("allox", jobs, hs.Cluster({"v100": 1})).X.ravel(), [0, 0, 1, 0])


def test_pinned_jobs_keep_their_gpu() -> None:
    jobs = hs.JobSet([[1.0, 1.0]] * 3, gpu_types=["v100", "k80"], ids=["x", "y", "z"],
                     steps_remaining=[1000.0, 10.0, 20.0])
    res = hs.solve(AlloX(pinned={"x": "v100"}), jobs, hs.Cluster({"v100": 1, "k80": 1}))
    np.testing.assert_array_equal(res.X, [[1, 0], [0, 1], [0, 0]])
    with pytest.raises(ValidationError, match="`pinned` names job 'w'"):
        hs.solve(AlloX(pinned={"w": "v100"}), jobs, hs.Cluster({"v100": 1, "k80": 1}))
    with pytest.raises(ValidationError, match="more 'v100' GPUs"):
        hs.solve(AlloX(pinned={"x": "v100", "y": "v100"}), jobs, hs.Cluster({"v100": 1, "k80": 1}))


@pytest.mark.parametrize("seed", range(4))
def test_gangs_are_scheduled_feasibly(seed: int) -> None:
    """Multi-GPU jobs (hetsched's extension): X feasible and the schedule never oversubscribes."""
    rng = np.random.default_rng(seed)
    n = 25
    T = rng.uniform(0.5, 3.0, (n, 3))
    s = rng.choice([1, 2, 4], n)
    R = rng.uniform(1e3, 1e5, n)
    counts = [4, 4, 8]
    jobs = hs.JobSet(T, gpu_types=["v100", "p100", "k80"], scale_factors=s, steps_remaining=R)
    res = hs.solve("allox", jobs, hs.Cluster(dict(zip(jobs.gpu_types, counts))))
    assert_feasible(res.X, T, s, counts)
    assert np.isfinite(res.extra["completion_times"]).all()
    assert recheck_schedule(res, T, R, s, counts, np.zeros(n)) == pytest.approx(res.objective)
    with_h = hs.solve(AlloX(horizon=3600.0), jobs, hs.Cluster(dict(zip(jobs.gpu_types, counts))))
    assert_feasible(with_h.X, T, s, counts)


def test_sparse_solve_is_fast() -> None:
    """1,500 jobs on 3 x 40 GPUs: the (type, position) network has ~1500 * 3 * 38 arcs (Gavel's
    dense matrix would hold 1500 x 180,000 entries)."""
    rng = np.random.default_rng(0)
    n = 1500
    jobs = hs.JobSet(rng.uniform(0.5, 3.0, (n, 3)), gpu_types=["v100", "p100", "k80"],
                     steps_remaining=rng.uniform(1e3, 1e5, n))
    t0 = time.perf_counter()
    res = hs.solve("allox", jobs, hs.Cluster({"v100": 40, "p100": 40, "k80": 40}))
    assert time.perf_counter() - t0 < 10
    assert res.X.sum() == 120


def test_bad_input() -> None:
    with pytest.raises(ValidationError, match=r"`alpha` must be a number in \(0, 1\]; got 0"):
        AlloX(alpha=0)
    with pytest.raises(ValidationError, match="`horizon` must be a positive number"):
        AlloX(horizon=-1.0)
    with pytest.raises(ValidationError, match="`pinned` must be a mapping"):
        AlloX(pinned=["x"])
    jobs = hs.JobSet([[1.0]], gpu_types=["v100"])
    with pytest.raises(MissingFieldError, match="steps_remaining"):
        hs.solve("allox", jobs, hs.Cluster({"v100": 1}))


@pytest.mark.parametrize("module", ['hetsched.formulations.allox'])
def test_doctests(module: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.failed == 0 and result.attempted > 0
