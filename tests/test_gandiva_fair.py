"""Gandiva_fair: fair shares per user and trades from which nobody loses (issue 9, part 2).

The independent evaluator recomputes, with scipy's ``linprog`` on a dense model written
here from the raw inputs, each user's best utility inside its own ticket share of every
GPU type, and each user's utility of the returned X; it never calls hetsched's builder.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linprog

import hetsched as hs
from checker import assert_feasible
from hetsched.errors import ValidationError
from hetsched.policies import GandivaFair


def value_matrix(T, s, counts):
    """a[j, k] = s_j T[j, k] / p_j, p_j = sum_k T[j, k] C_k / sum_k C_k (0 where unusable)."""
    T = np.asarray(T, float)
    C = np.asarray(counts, float)
    p = (T * C).sum(axis=1) / C.sum()
    a = np.asarray(s, float)[:, None] * T / p[:, None]
    return np.where((T > 0) & (C[None, :] >= np.asarray(s)[:, None]), a, 0.0)


def evaluator(T, s, counts, users, tickets):
    """(fair utility per user by linprog, utility function of X)."""
    a = value_matrix(T, s, counts)
    labels = list(dict.fromkeys(users))
    share = np.array([tickets[u] for u in labels], float)
    share /= share.sum()
    fair = []
    for ui, u in enumerate(labels):
        rows = [j for j, v in enumerate(users) if v == u]
        m = len(counts)
        nv = len(rows) * m
        c = -np.array([a[j, k] for j in rows for k in range(m)])
        A, b = [], []
        for i, j in enumerate(rows):               # each job at most the whole time
            r = np.zeros(nv)
            r[i * m:(i + 1) * m] = 1
            A.append(r)
            b.append(1.0)
        for k in range(m):                         # the user's share of type k
            r = np.zeros(nv)
            for i, j in enumerate(rows):
                r[i * m + k] = s[j]
            A.append(r)
            b.append(share[ui] * counts[k])
        bounds = [(0, 0) if a[j, k] == 0 else (0, None) for j in rows for k in range(m)]
        res = linprog(c, A_ub=np.array(A), b_ub=np.array(b), bounds=bounds, method="highs")
        assert res.status == 0
        fair.append(-res.fun)

    def utility(X):
        per_job = (a * X).sum(axis=1)
        return np.array([per_job[[j for j, v in enumerate(users) if v == u]].sum() for u in labels])

    return np.array(fair), utility


@pytest.mark.parametrize("seed", range(6))
def test_nobody_falls_below_fair_share(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 12
    T = rng.uniform(0.3, 4.0, (n, 3))
    T[rng.random((n, 3)) < 0.1] = 0.0
    T[T.sum(axis=1) == 0, 2] = 1.0
    s = rng.choice([1, 1, 2], n)
    users = [f"u{i}" for i in rng.integers(0, 4, n)]
    tickets = {u: float(rng.integers(1, 4)) for u in sorted(set(users))}
    counts = [3, 4, 6]
    jobs = hs.JobSet(T, gpu_types=["v100", "p100", "k80"], scale_factors=s, entities=users)
    res = hs.solve(GandivaFair(tickets=tickets), jobs, hs.Cluster(dict(zip(jobs.gpu_types, counts))))
    assert res.success, res.message
    assert_feasible(res.X, T, s, counts)
    fair, utility = evaluator(T, s, counts, users, tickets)
    np.testing.assert_allclose(res.extra["fair_utility"], fair, rtol=1e-6, atol=1e-9)
    got = utility(res.X)
    assert (got >= fair * (1 - 1e-6) - 1e-9).all(), (got, fair)
    np.testing.assert_allclose(res.extra["utility"], got, rtol=1e-9, atol=1e-12)
    # trading never loses total value
    assert got.sum() >= fair.sum() * (1 - 1e-9)


def test_identical_speedups_no_trade() -> None:
    """Every job has the same throughput row: exchanging GPU types never gains anyone
    anything, so the untraded fair shares come back (2 users x 4 jobs; each user's share of
    (2 K80, 2 P100, 4 V100) is (1, 1, 2) GPUs, which its 4 jobs can fill)."""
    T = [[1.0, 2.0, 4.0]] * 8
    users = ["ann"] * 4 + ["bob"] * 4
    jobs = hs.JobSet(T, gpu_types=["k80", "p100", "v100"], entities=users)
    res = hs.solve("gandiva_fair", jobs, hs.Cluster({"k80": 2, "p100": 2, "v100": 4}))
    assert res.extra["traded"] is False
    np.testing.assert_allclose(res.extra["gpus"], [[1, 1, 2], [1, 1, 2]], atol=1e-7)
    np.testing.assert_allclose(res.extra["utility"], res.extra["fair_utility"], rtol=1e-7)


def test_opposite_speedups_both_gain() -> None:
    """ann's jobs run 3x faster on the V100, bob's 3x faster on the K80. Each user's value:
    p = (1 + 3)/2 = 2, so a = (0.5, 1.5) for ann and (1.5, 0.5) for bob; untraded (half of each
    GPU each) both have 1.0; after swapping halves both have 1.5."""
    jobs = hs.JobSet([[1.0, 3.0], [3.0, 1.0]], gpu_types=["k80", "v100"], entities=["ann", "bob"])
    res = hs.solve("gandiva_fair", jobs, hs.Cluster({"k80": 1, "v100": 1}))
    np.testing.assert_allclose(res.extra["fair_utility"], [1.0, 1.0])
    np.testing.assert_allclose(res.extra["utility"], [1.5, 1.5])
    np.testing.assert_allclose(res.X, [[0, 1], [1, 0]], atol=1e-9)
    assert res.extra["traded"] is True


def test_hand_derived_trade_at_the_sellers_rate() -> None:
    """2 K80 + 2 V100; ann's jobs speed up 2x on the V100, bob's 4x; 4 jobs each (rows never bind).

    Values: ann a = (2/3, 4/3) (p = 1.5), bob a = (0.4, 1.6) (p = 2.5); fair shares 1 K80 +
    1 V100 each give both 2.0. If bob hands x K80 to ann for y of her V100: ann gains
    (2/3) x - (4/3) y >= 0 (x >= 2y), bob gains 1.6 y - 0.4 x >= 0 (x <= 4y): any rate x / y in
    [2, 4], between the two speedups. Total value rises by (0.2667)(x + y), limited by x <= 1
    (ann can hold both K80s) and y <= x / 2: x = 1, y = 1/2. Ann stays at 2.0 (she trades at
    her own speedup, the marginal seller's rate), bob reaches 2.4; no allocation gives both a
    gain at that total, so the split stage keeps it.
    """
    T = [[1.0, 2.0]] * 4 + [[1.0, 4.0]] * 4
    jobs = hs.JobSet(T, gpu_types=["k80", "v100"], entities=["ann"] * 4 + ["bob"] * 4)
    res = hs.solve("gandiva_fair", jobs, hs.Cluster({"k80": 2, "v100": 2}))
    np.testing.assert_allclose(res.extra["fair_utility"], [2.0, 2.0])
    np.testing.assert_allclose(res.extra["utility"], [2.0, 2.4], rtol=1e-7)
    np.testing.assert_allclose(res.extra["gpus"], [[2.0, 0.5], [0.0, 1.5]], atol=1e-7)
    assert res.objective == pytest.approx(4.4)


def test_split_gains_shares_surplus() -> None:
    """Three users, the third indifferent: with split_gains the two traders both gain."""
    T = [[1.0, 3.0]] * 2 + [[3.0, 1.0]] * 2 + [[1.0, 1.0]] * 2
    users = ["ann"] * 2 + ["bob"] * 2 + ["cy"] * 2
    jobs = hs.JobSet(T, gpu_types=["k80", "v100"], entities=users)
    res = hs.solve("gandiva_fair", jobs, hs.Cluster({"k80": 3, "v100": 3}))
    gain = res.extra["utility"] / res.extra["fair_utility"] - 1
    assert gain[0] > 1e-6 and gain[1] > 1e-6 and gain[2] >= -1e-9


def test_users_share_their_gpus_among_their_jobs() -> None:
    """Two users with two identical jobs each on 2 GPUs: each user's fair share is 1 GPU; the
    within-user step spreads it (0.5 per job), where an LP vertex may give one job all of it."""
    jobs = hs.JobSet([[1.0]] * 4, gpu_types=["v100"], entities=["ann", "ann", "bob", "bob"])
    res = hs.solve("gandiva_fair", jobs, hs.Cluster({"v100": 2}))
    np.testing.assert_allclose(res.X.ravel(), [0.5] * 4, atol=1e-7)
    np.testing.assert_allclose(res.extra["utility"], res.extra["fair_utility"], rtol=1e-7)


def test_jobs_without_entities_are_their_own_users() -> None:
    jobs = hs.JobSet([[1.0, 3.0], [3.0, 1.0]], gpu_types=["k80", "v100"], ids=["x", "y"], weights=[1.0, 3.0])
    res = hs.solve("gandiva_fair", jobs, hs.Cluster({"k80": 4, "v100": 4}))
    assert res.extra["users"].tolist() == ["x", "y"]
    assert res.success


# ----------------------------------------------------------------------------- bad input
def test_unknown_user_in_tickets() -> None:
    jobs = hs.JobSet([[1.0]] * 2, gpu_types=["v100"], entities=["ann", "bob"])
    with pytest.raises(ValidationError, match=r"`tickets` names user\(s\) \['zed'\]"):
        hs.solve(GandivaFair(tickets={"ann": 1, "bob": 1, "zed": 2}), jobs, hs.Cluster({"v100": 2}))
    res = hs.solve(GandivaFair(tickets={"ann": 1, "bob": 1, "zed": 2}, allow_absent_users=True), jobs,
                   hs.Cluster({"v100": 2}))
    assert res.success
    with pytest.raises(ValidationError, match=r"missing \['bob'\]"):
        hs.solve(GandivaFair(tickets={"ann": 1}), jobs, hs.Cluster({"v100": 2}))


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "many", True])
def test_non_positive_tickets(bad) -> None:
    with pytest.raises(ValidationError, match=r"`tickets\['ann'\]` must be a positive number"):
        GandivaFair(tickets={"ann": bad})


@pytest.mark.parametrize("module", ['hetsched.formulations.gandiva_fair', 'hetsched.formulations.users'])
def test_doctests(module: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.failed == 0 and result.attempted > 0
