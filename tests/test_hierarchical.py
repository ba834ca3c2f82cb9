"""Hierarchical max-min fairness: weighted across entities, fairness or FIFO within."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import hetsched as hs
from checker import assert_feasible

H = hs.policies.HierarchicalMaxMinFairness


def test_twice_the_weight_twice_the_share():
    """One type, 6 GPUs, T = 1: u_j = x_j. Entity a (weight 2) and b (weight 1) own 4 jobs each,
    so no job's row cap binds: E_a = 2t, E_b = t, E_a + E_b = 6 -> E_a = 4, E_b = 2."""
    jobs = hs.JobSet([[1.0]] * 8, gpu_types=["g"], entities=["a"] * 4 + ["b"] * 4)
    res = hs.solve(H(entity_weights={"a": 2, "b": 1}), jobs, hs.Cluster({"g": 6}))
    assert res.success
    X = res.X[:, 0]
    assert X[:4].sum() == pytest.approx(4.0, rel=1e-6) and X[4:].sum() == pytest.approx(2.0, rel=1e-6)
    assert res.extra["entity_shares"]["a"] == pytest.approx(2.0, rel=1e-6)  # E_a / W_a
    np.testing.assert_allclose(X[:4], 1.0, rtol=1e-6)  # fairness within a: 1 each
    np.testing.assert_allclose(X[4:], 0.5, rtol=1e-6)


def test_spare_share_flows_to_other_entities():
    """a (weight 5) has one job, capped at 1 GPU; b and c (weight 1) take the remaining 3 GPUs
    equally: 1.5 each, i.e. 0.75 per job of their two jobs."""
    jobs = hs.JobSet([[1.0]] * 5, gpu_types=["g"], entities=["a", "b", "b", "c", "c"])
    res = hs.solve(H(entity_weights={"a": 5, "b": 1, "c": 1}), jobs, hs.Cluster({"g": 4}))
    np.testing.assert_allclose(res.X[:, 0], [1.0, 0.75, 0.75, 0.75, 0.75], rtol=1e-6)


def test_intra_fairness_follows_job_weights():
    """E_a = E_b = 1 GPU. Within b, weights (1, 3): u/w equal -> x = (0.25, 0.75)."""
    jobs = hs.JobSet([[1.0]] * 3, gpu_types=["g"], entities=["a", "b", "b"], weights=[1, 1, 3])
    res = hs.solve(H(), jobs, hs.Cluster({"g": 2}))
    np.testing.assert_allclose(res.X[:, 0], [1.0, 0.25, 0.75], rtol=1e-6)


def test_intra_fifo_serves_oldest_first():
    """E_a = E_b = 1.5 of 3 GPUs. In b the job that arrived at t=1 takes a whole GPU first,
    the one from t=5 the remaining 0.5; a's two jobs arrived together-ish (0, 2): 1 then 0.5."""
    jobs = hs.JobSet([[1.0]] * 4, gpu_types=["g"], entities=["a", "a", "b", "b"],
                     arrival_times=[0.0, 2.0, 5.0, 1.0])
    res = hs.solve(H(intra="fifo"), jobs, hs.Cluster({"g": 3}))
    assert res.success, res.message
    np.testing.assert_allclose(res.X[:, 0], [1.0, 0.5, 0.5, 1.0], rtol=1e-6)


def entity_level_reference(T, s, w, C, codes, W):
    """First inter-entity level written plainly: max t s.t. sum_{j in e} u_j >= W_e t."""
    n, m = T.shape
    p = T @ C / C.sum()
    usable = (T > 0) & (C[None, :] >= s[:, None])
    u = np.where(usable, T * (s / p)[:, None], 0.0)
    x = cp.Variable((n, m), nonneg=True)
    t = cp.Variable()
    E = cp.hstack([cp.sum(cp.multiply(u[codes == e], x[codes == e])) for e in range(len(W))])
    cons = [cp.sum(x, axis=1) <= 1, s @ x <= C, x[~usable] == 0, E >= W * t]
    cp.Problem(cp.Maximize(t), cons).solve(solver=cp.CLARABEL)
    return float(t.value)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("intra", ["fairness", "fifo"])
def test_random_instances(seed, intra):
    rng = np.random.default_rng(seed)
    n, m, k = int(rng.integers(3, 10)), int(rng.integers(1, 4)), int(rng.integers(1, 4))
    T = rng.uniform(0.2, 4, (n, m)) * (rng.random((n, m)) > 0.3)
    T[np.arange(n), rng.integers(0, m, n)] = rng.uniform(0.5, 4, n)
    s = rng.choice([1, 2], n)
    w = rng.choice([1.0, 2.0], n)
    C = rng.integers(2, 6, m).astype(float)
    codes = np.arange(n) % k
    W = rng.choice([1.0, 2.0, 3.0], k)
    types = [f"g{i}" for i in range(m)]
    ents = [f"e{c}" for c in codes]
    jobs = hs.JobSet(T, gpu_types=types, scale_factors=s, weights=w, entities=ents,
                     arrival_times=rng.permutation(n).astype(float))
    cluster = hs.Cluster({g: int(c) for g, c in zip(types, C)})
    pol = H(entity_weights={f"e{e}": W[e] for e in range(k)}, intra=intra)
    res = hs.solve(pol, jobs, cluster)
    assert res.success, res.message
    assert_feasible(res.X, T, s, C)
    assert res.objective == pytest.approx(entity_level_reference(T, s, w, C, codes, W), rel=1e-6)
    # duplicating every job keeps each entity's share x2 exactly, aggregated or not
    rows = np.repeat(np.arange(n), 2)
    big = hs.JobSet(T[rows], gpu_types=types, scale_factors=s[rows], weights=w[rows],
                    entities=[ents[r] for r in rows], arrival_times=np.repeat(np.arange(n), 2).astype(float))
    on = hs.solve(pol, big, cluster)
    off = hs.solve(pol, big, cluster, aggregate=False)
    assert on.success and off.success, (on.message, off.message)
    for e in on.extra["entity_shares"]:
        assert on.extra["entity_shares"][e] == pytest.approx(off.extra["entity_shares"][e], rel=1e-6, abs=1e-9)


def test_bad_inputs():
    jobs = hs.JobSet([[1.0]] * 2, gpu_types=["g"], entities=["a", "b"])
    cl = hs.Cluster({"g": 2})
    with pytest.raises(hs.MissingFieldError, match="needs job field `entities`"):
        hs.solve(H(), hs.JobSet([[1.0]], gpu_types=["g"]), cl)
    with pytest.raises(hs.ValidationError, match=r"`entity_weights` must name every entity that owns a job; missing \['b'\]"):
        hs.solve(H(entity_weights={"a": 1}), jobs, cl)
    with pytest.raises(hs.ValidationError, match=r"`entity_weights\['a'\]` must be a positive number; got 0"):
        hs.solve(H(entity_weights={"a": 0, "b": 1}), jobs, cl)
    with pytest.raises(hs.ValidationError, match="`intra` must be 'fairness' or 'fifo'; got 'lottery'"):
        hs.solve(H(intra="lottery"), jobs, cl)
    with pytest.raises(hs.ValidationError, match="`entities` must have shape"):
        hs.JobSet([[1.0]] * 2, gpu_types=["g"], entities=["a"])
    res = hs.solve(H(entity_weights={"a": 1, "b": 1, "ghost": 3}), jobs, cl)
    assert res.success and res.extra["ignored_entities"] == ["ghost"] and "ghost" in res.message
