"""Hierarchical max-min fairness against an independent, slow lexicographic reference.

The reference writes the program from the spec (dense matrices, ``scipy.optimize.linprog``)
and settles every level the obvious way: one LP for the level, then one LP per active
function asking whether it can exceed the level while the others keep theirs. Entities
first (their weighted totals), then the jobs' weighted shares with every entity's total
held. Instances are small and hard: weights 1 and 5, gangs up to the largest type's count,
tiny capacities, entity weights, a single job.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from checker import assert_feasible
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

import hetsched as hs
from hetsched.formulations.hierarchical import TOTALS_RELATIVE_SLACK

#: slack of the reference's frozen rows, relative (keeps its LPs feasible after rounding)
REF_SLACK = 1e-9
#: linprog's HiGHS tolerances (its default 1e-7 lets a level overshoot past REF_SLACK)
LINPROG = {"method": "highs", "options": {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}}


def share_coefficients(T, s, w, C):
    """s_j T_jk / (w_j p_j) with p_j = T_j . C / sum(C), where job j can run on type k."""
    p = T @ C / C.sum()
    usable = (T > 0) & (C[None, :] >= s[:, None])
    return np.where(usable, T * (s / (w * p))[:, None], 0.0)


def lexicographic_max_min(F, A_ub, b_ub, bounds):
    """Levels of the functions ``F @ x`` (rows of F) at the lexicographic max-min point of
    ``A_ub x <= b_ub`` within ``bounds``; x has one extra last column, the level t."""
    n_f = F.shape[0]
    levels = np.full(n_f, np.nan)
    active = set(range(n_f))

    def rows(fixed_t=None):
        R, r = [A_ub], [b_ub]
        for g in active:
            row = -F[g].copy()
            if fixed_t is None:
                row[-1] = 1.0
                R.append(row[None]), r.append([0.0])
            else:
                R.append(row[None]), r.append([-(fixed_t - REF_SLACK * max(abs(fixed_t), 1.0))])
        for g in np.flatnonzero(~np.isnan(levels)):
            R.append(-F[g][None]), r.append([-levels[g]])
        return np.vstack(R), np.concatenate(r)

    while active:
        c = np.zeros(F.shape[1])
        c[-1] = -1.0
        R, r = rows()
        res = linprog(c, A_ub=R, b_ub=r, bounds=bounds, **LINPROG)
        assert res.status == 0, res.message
        t = -res.fun
        R, r = rows(fixed_t=t)
        stuck = []
        for g in sorted(active):
            out = linprog(-F[g], A_ub=R, b_ub=r, bounds=bounds, **LINPROG)
            assert out.status == 0, out.message
            if -out.fun <= t + 1e-7 * max(abs(t), 1.0):
                stuck.append(g)
        assert stuck
        for g in stuck:
            levels[g] = t - REF_SLACK * max(abs(t), 1.0)
            active.discard(g)
    return levels


def reference_hierarchical(T, s, w, C, entity, W):
    """(entity totals E_e, job shares a_j . X_j) of hierarchical max-min fairness with
    fairness within entities, computed from the spec."""
    n, m = T.shape
    nv = n * m
    a = share_coefficients(T, s, w, C)
    u = a * w[:, None]
    A_ub, b_ub = [], []
    for j in range(n):  # each job's time sums to at most 1
        row = np.zeros(nv + 1)
        row[j * m:(j + 1) * m] = 1.0
        A_ub.append(row), b_ub.append(1.0)
    for k in range(m):  # capacity
        row = np.zeros(nv + 1)
        row[k:nv:m] = s
        A_ub.append(row), b_ub.append(C[k])
    A_ub, b_ub = np.array(A_ub), np.array(b_ub)
    bounds = [(0, None if a[j, k] > 0 else 0) for j in range(n) for k in range(m)] + [(None, None)]
    n_e = len(W)
    E = np.zeros((n_e, nv + 1))
    for j in range(n):
        E[entity[j], j * m:(j + 1) * m] += u[j]
    ent_level = lexicographic_max_min(E / W[:, None], A_ub, b_ub, bounds)
    totals = ent_level * W
    held_A = np.vstack([A_ub, -E])
    # the spec holds every entity at E_e >= E_e* (1 - TOTALS_RELATIVE_SLACK)
    held_b = np.concatenate([b_ub, -totals * (1.0 - TOTALS_RELATIVE_SLACK)])
    J = np.zeros((n, nv + 1))
    for j in range(n):
        J[j, j * m:(j + 1) * m] = a[j]
    return totals, lexicographic_max_min(J, held_A, held_b, bounds)


@st.composite
def hard_instances(draw):
    """Small instances in the spirit of the hard family: weights 1 and 5, gangs up to the
    largest type's count, tiny and uneven capacities, 1-3 entities with weights."""
    m = draw(st.integers(1, 3))
    C = np.array(draw(st.lists(st.integers(1, 4), min_size=m, max_size=m)), dtype=float)
    n = draw(st.integers(1, 5))
    big = int(C.max())
    s = np.array(draw(st.lists(st.sampled_from(sorted({g for g in (1, 2, big) if g <= big})), min_size=n, max_size=n)))
    w = np.array(draw(st.lists(st.sampled_from([1.0, 5.0]), min_size=n, max_size=n)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    trend = np.linspace(1.0, 10.0, m)
    T = trend[None, :] * np.exp(rng.normal(0.0, 0.5, (n, m)))
    T[rng.random((n, m)) < 0.2] = 0.0
    best = int(np.argmax(C))  # every job can run somewhere: on the largest type
    T[:, best] = np.maximum(T[:, best], 0.5)
    n_e = draw(st.integers(1, 3))
    entity = np.array(draw(st.lists(st.integers(0, n_e - 1), min_size=n, max_size=n)))
    W = np.array(draw(st.lists(st.sampled_from([1.0, 2.0, 3.0]), min_size=n_e, max_size=n_e)))
    return T, s, w, C, entity, W


def solve_hierarchical(T, s, w, C, entity, W, **kw):
    types = [f"g{k}" for k in range(T.shape[1])]
    names = np.array([f"e{e}" for e in entity])
    present = sorted(set(names.tolist()))
    jobs = hs.JobSet(T, gpu_types=types, scale_factors=s, weights=w, entities=names)
    policy = hs.policies.HierarchicalMaxMinFairness(entity_weights={e: float(W[int(e[1:])]) for e in present})
    return hs.solve(policy, jobs, hs.Cluster({t: int(c) for t, c in zip(types, C)}), **kw)


def assert_matches_reference(T, s, w, C, entity, W, res, tol=1e-5):
    """``res`` is feasible; entity totals and job shares equal the reference's to ``tol``
    relative, or ``tol`` times the largest share (a share near zero is set by the 1e-7
    slack on the entity totals: a job 1/40 as efficient as its entity's best moves 40x as
    much; see :func:`test_known_gap_at_1e6` for the 1e-6 comparison)."""
    assert res.success, res.message
    assert_feasible(res.X, T, s, C)
    a = share_coefficients(T, s, w, C)
    u = a * w[:, None]
    totals, shares = reference_hierarchical(T, s, w, C, entity, W)
    got_totals = np.bincount(entity, weights=(u * res.X).sum(1), minlength=len(W))
    present = np.unique(entity)
    atol = tol * max(1.0, float(np.abs(shares).max()))
    # every entity keeps its level from the entity stage (less the 1e-7 slack the job stage
    # may spend) ...
    assert np.all(got_totals[present] >= totals[present] * (1.0 - 1e-6) - 1e-9), (got_totals, totals)
    # ... and its final total is what the reference's job shares add up to: the job stage may
    # lift a total above its entity-stage level, by far more than 1e-7 (found by Hypothesis:
    # entity 1 giving up 3e-7 of its slack let a gang-4 job of entity 0 gain 9e-5, in both
    # solvers alike)
    ref_totals = np.bincount(entity, weights=w * shares, minlength=len(W))
    np.testing.assert_allclose(got_totals[present], ref_totals[present], rtol=tol, atol=atol)
    np.testing.assert_allclose((a * res.X).sum(1), shares, rtol=tol, atol=atol)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hard_instances())
@example((np.array([[0.0, 5.61219856, 5.63994928], [0.0, 4.01916557, 4.56159017],
                    [1.55530766, 10.3522526, 28.07735927], [1.39956679, 5.32196254, 0.5]]),
          np.array([1, 1, 4, 1]), np.array([1.0, 1.0, 5.0, 1.0]), np.array([1.0, 3.0, 4.0]),
          np.array([1, 0, 0, 1]), np.array([1.0, 1.0])))
def test_hierarchical_matches_slow_reference_on_hard_instances(inst):
    """Each entity's total and each job's share equal the reference's (the lexicographic
    optimum is unique in the shares, so they are compared job by job)."""
    T, s, w, C, entity, W = inst
    assert_matches_reference(T, s, w, C, entity, W, solve_hierarchical(*inst, aggregate=False))


@pytest.mark.parametrize("seed", range(6))
def test_hierarchical_matches_slow_reference_on_larger_instances(seed):
    """Twelve to sixteen jobs in three entities on 2-3 types: several levels per entity,
    so the deferred slack LPs and the level re-solves after a freeze both run."""
    rng = np.random.default_rng(300 + seed)
    n, m = int(rng.integers(12, 17)), int(rng.integers(2, 4))
    C = rng.integers(2, 9, m).astype(float)
    s = rng.choice([1, 1, 2, int(C.max())], n)
    w = rng.choice([1.0, 1.0, 1.0, 5.0], n)
    T = np.linspace(1.0, 10.0, m)[None, :] * np.exp(rng.normal(0.0, 0.7, (n, m)))
    T[:, int(np.argmax(C))] += 0.5
    entity = rng.integers(0, 3, n)
    W = np.array([1.0, 2.0, 1.5])
    assert_matches_reference(T, s, w, C, entity, W, solve_hierarchical(T, s, w, C, entity, W, aggregate=False))


def test_single_job_takes_its_best_type():
    """One job in one entity: its share is its cap, every GPU-hour it can use."""
    T = np.array([[1.0, 4.0]])
    s, w, C = np.array([2]), np.array([5.0]), np.array([2.0, 2.0])
    res = solve_hierarchical(T, s, w, C, np.array([0]), np.array([1.0]))
    assert_matches_reference(T, s, w, C, np.array([0]), np.array([1.0]), res)
    assert res.X[0, 1] == pytest.approx(1.0, abs=1e-7)


@pytest.mark.xfail(strict=True, reason="known gap, as before the level-loop changes of issue 29: the "
                   "lowest job's share is 1.3e-6 (3e-5 relative) below the reference's")
def test_known_gap_at_1e6():
    """An instance Hypothesis found where the within-entity fill ends 1.3e-6 below the
    reference on the lowest job (0.0433472 vs 0.0433485; the commit before issue 29's
    hierarchical changes gives the same X): within 1e-5, not within 1e-6."""
    T = np.array([[0.0, 8.16060083], [0.79126546, 18.54403684], [0.0, 5.6941692],
                  [0.65536638, 15.06639551], [0.0, 8.60766926]])
    s, w, C = np.ones(5, dtype=int), np.ones(5), np.array([1.0, 2.0])
    entity, W = np.array([0, 1, 0, 0, 0]), np.array([2.0, 1.0])
    res = solve_hierarchical(T, s, w, C, entity, W, aggregate=False)
    assert_matches_reference(T, s, w, C, entity, W, res, tol=1e-6)


@pytest.mark.parametrize("seed", range(2))
def test_freezing_on_duals_alone_changes_nothing_but_the_lp_count(seed, monkeypatch):
    """Groups named by vertex duals freeze without slack LPs (the next level LP shows
    whether others are stuck too): the shares equal those of slack LPs at every level."""
    import hetsched.formulations.water_filling as wf

    rng = np.random.default_rng(70 + seed)
    n = 200
    T = np.linspace(1.0, 10.0, 3)[None, :] * np.exp(rng.normal(0.0, 0.5, (n, 3)))
    jobs = hs.JobSet(T, gpu_types=["g0", "g1", "g2"], scale_factors=rng.choice([1, 2, 4, 8], n, p=[.6, .2, .15, .05]),
                     weights=rng.choice([1.0, 5.0], n, p=[.8, .2]), entities=rng.choice(["a", "b", "c", "d"], n))
    cluster = hs.Cluster({"g0": 20, "g1": 90, "g2": 8})
    fast = hs.solve("hierarchical_max_min_fairness", jobs, cluster, aggregate=False)
    monkeypatch.setattr(wf, "_dual_stuck", lambda fill, out: np.zeros(fill.active.shape[0], dtype=bool))
    slow = hs.solve("hierarchical_max_min_fairness", jobs, cluster, aggregate=False)
    assert fast.success and slow.success
    a = share_coefficients(T, jobs.scale_factors, jobs.weights, cluster.capacities(jobs.gpu_types))
    # 1e-5: the lowest level is numerically zero here (4.6e-7 vs 4.4e-7, set by the
    # margins), and a shift there moves a few other shares by up to 3.5e-6 relative
    np.testing.assert_allclose((a * fast.X).sum(1), (a * slow.X).sum(1), rtol=1e-5, atol=1e-6)
    def within_lps(res):
        return int(re.search(r"within: .*?(\d+) LP solve", res.message).group(1))

    assert within_lps(fast) < within_lps(slow)
