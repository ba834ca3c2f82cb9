"""Tiny instances whose optimum is derived by hand, plus property tests.

Notation (the spec): T[j,k] throughput, s_j scale factor, w_j weight, C_k GPU count,
thr_j(X) = sum_k T[j,k] X[j,k], p_j = sum_k T[j,k] C_k / sum_k C_k, R_j steps remaining.

A recurring argument ("the 2x2 family"): with C = (1, 1), two jobs with s = 1 and T > 0
everywhere, X = [[a, b], [c, d]] is feasible iff a+b <= 1, c+d <= 1, a+c <= 1, b+d <= 1.
Every objective below improves (weakly) when any thr_j grows, and raising an entry raises
thr. If some row j is not tight and the column k is not tight we can raise X[j,k]; if
row j is not tight but both columns are tight then sum(X) = 2 (columns) < 2 (rows), a
contradiction. So some optimum has all four constraints tight: b = c = 1 - a, d = a,
a in [0, 1], i.e. X = [[a, 1-a], [1-a, a]]. We then optimize over the single number a.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hetsched as hs
import reference_cvxpy as ref
from checker import assert_feasible, check_allocation

# The spec's agreement tolerance (relative). Solvers may legitimately back off an optimal level
# slightly (e.g. a second stage constrained to >= (1 - 1e-7) * level), so exact-looking
# closed forms are still compared at 1e-6, not at machine precision.
REL = 1e-6

TWO = ["v100", "k80"]
T22 = np.array([[4.0, 1.0], [2.0, 1.0]])


def _solve_both(policy, jobs, cluster):
    """Solve with and without aggregation; both must succeed with the same objective."""
    a = hs.solve(policy, jobs, cluster, aggregate=True)
    b = hs.solve(policy, jobs, cluster, aggregate=False)
    for res in (a, b):
        assert res.status == "optimal" and res.success, (res.status, res.message)
        cap = cluster.capacities(jobs.gpu_types)
        assert_feasible(res.X, jobs.throughputs, jobs.scale_factors, cap)
    if not (math.isnan(a.objective) and math.isnan(b.objective)):
        assert a.objective == pytest.approx(b.objective, rel=REL)
    return a


# ================================================================ max-min fairness
def test_mmf_2x2_unweighted():
    """T = [[4,1],[2,1]], C = (1,1), s = w = 1.

    p_1 = (4 + 1)/2 = 2.5, p_2 = (2 + 1)/2 = 1.5. On the 2x2 family X = [[a,1-a],[1-a,a]]:
    thr_1 = 4a + (1-a) = 1 + 3a (increasing), thr_2 = 2(1-a) + a = 2 - a (decreasing).
    max_a min((1+3a)/2.5, (2-a)/1.5) is at the crossing: 1.5 + 4.5a = 5 - 2.5a -> a = 1/2,
    value (1 + 1.5)/2.5 = 1. The crossing is unique, so X = [[.5,.5],[.5,.5]] is the unique
    optimum (off the family every point is dominated by a family point with strictly
    larger throughputs, hence not optimal unless it is that point).
    """
    res = _solve_both("max_min_fairness", hs.JobSet(T22, gpu_types=TWO), hs.Cluster({"v100": 1, "k80": 1}))
    assert res.objective == pytest.approx(1.0, rel=REL)
    np.testing.assert_allclose(res.X, [[0.5, 0.5], [0.5, 0.5]], atol=1e-6)


def test_mmf_2x2_weighted():
    """Same as the unweighted case with w = (1, 2): maximize min(thr_1/2.5, thr_2/(2*1.5)).

    Crossing: (1+3a)/2.5 = (2-a)/3 -> 3 + 9a = 5 - 2.5a -> a = 2/11.5 = 4/23.
    Value (1 + 12/23)/2.5 = (35/23)/2.5 = 14/23; check (2 - 4/23)/3 = (42/23)/3 = 14/23.
    X = [[4/23, 19/23], [19/23, 4/23]].
    """
    jobs = hs.JobSet(T22, gpu_types=TWO, weights=[1.0, 2.0])
    res = _solve_both("max_min_fairness", jobs, hs.Cluster({"v100": 1, "k80": 1}))
    assert res.objective == pytest.approx(14 / 23, rel=REL)
    np.testing.assert_allclose(res.X, [[4 / 23, 19 / 23], [19 / 23, 4 / 23]], atol=1e-6)


@pytest.mark.parametrize(
    "C, s, w, T, expected",
    [
        (2, [1, 2, 1], [1, 1, 1], [3.0, 7.0, 0.5], 2 / 3),  # capacity binds: 2/3 < min s/w = 1
        (4, [1, 2, 1], [1, 1, 2], [3.0, 7.0, 0.5], 0.5),  # row of job 3 binds: s/w = 1/2
        (8, [4, 4], [1, 3], [1.0, 9.0], 4 / 3),  # row of job 2 binds: 4/3 < C/sum w = 2
        (5, [1], [2], [2.5], 0.5),  # single job: min(5/2, 1/2)
    ],
)
def test_mmf_one_type_closed_form(C, s, w, T, expected):
    """One type with C GPUs: p_j = T_j * C / C = T_j, so the share is s_j T_j x_j/(w_j T_j) = s_j x_j / w_j.

    Level t is feasible iff x_j = w_j t / s_j satisfies x_j <= 1 (t <= s_j / w_j) and
    sum_j s_j x_j = t sum_j w_j <= C. Hence t* = min(C / sum_j w_j, min_j s_j / w_j).
    """
    assert expected == pytest.approx(min(C / sum(w), min(a / b for a, b in zip(s, w))))
    jobs = hs.JobSet(np.array(T)[:, None], gpu_types=["g"], scale_factors=s, weights=w)
    res = _solve_both("max_min_fairness", jobs, hs.Cluster({"g": C}))
    assert res.objective == pytest.approx(expected, rel=REL)


@pytest.mark.parametrize("seed", range(20))
def test_mmf_one_type_closed_form_random(seed):
    """Random one-type instances against t* = min(C / sum w, min_j s_j / w_j) (see above)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 20))
    s = rng.choice([1, 2, 4, 8], size=n)
    C = int(rng.integers(8, 40))
    w = rng.choice([0.5, 1.0, 2.0, 3.0], size=n)
    T = rng.uniform(0.1, 10, size=(n, 1))
    res = _solve_both("max_min_fairness", hs.JobSet(T, gpu_types=["g"], scale_factors=s, weights=w),
                      hs.Cluster({"g": C}))
    assert res.objective == pytest.approx(min(C / w.sum(), (s / w).min()), rel=REL)


def test_mmf_heterogeneity_agnostic():
    """heterogeneity_aware=False: T' = 1[T > 0] = ones, p'_j = (1 + 1)/2 = 1, share_j = row sum_j <= 1.

    Both rows can be 1 at once (X = identity), so the objective is 1; the reported
    effective throughputs are still the real T times X.
    """
    pol = hs.policies.MaxMinFairness(heterogeneity_aware=False)
    res = _solve_both(pol, hs.JobSet(T22, gpu_types=TWO), hs.Cluster({"v100": 1, "k80": 1}))
    assert res.objective == pytest.approx(1.0, rel=REL)
    np.testing.assert_allclose(res.X.sum(axis=1), [1.0, 1.0], atol=1e-6)
    np.testing.assert_allclose(res.effective_throughput, (T22 * res.X).sum(axis=1), rtol=1e-12)


def test_mmf_heterogeneity_agnostic_with_zero():
    """T = [[4,0],[2,1]], C = (2,2), agnostic: T' = [[1,0],[1,1]], p'_1 = 2/4, p'_2 = 1.

    share_1 = row_1 / 0.5 <= 2, share_2 = row_2 <= 1; rows 1 and 1 are feasible (job 1 on
    type 0, job 2 on type 1), so the objective is min(2, 1) = 1 and job 2's row is 1.
    """
    pol = hs.policies.MaxMinFairness(heterogeneity_aware=False)
    T = np.array([[4.0, 0.0], [2.0, 1.0]])
    res = _solve_both(pol, hs.JobSet(T, gpu_types=TWO), hs.Cluster({"v100": 2, "k80": 2}))
    assert res.objective == pytest.approx(1.0, rel=REL)
    assert res.X[1].sum() == pytest.approx(1.0, abs=1e-6)


# ============================================================ max-sum throughput
def test_max_sum_2x2():
    """T = [[4,1],[2,1]], C = (1,1): maximize 4a + b + 2c + d on the assignment polytope.

    Dual certificate: capacity multipliers (3, 0), row multipliers (1, 1) cover every
    coefficient (4 <= 3+1, 1 <= 0+1, 2 <= 3+1, 1 <= 0+1), so thr_1 + thr_2 <= 3 + 0 + 1 + 1 = 5;
    X = identity attains 5. It is unique (the swap gives 3 and mixtures lie between).
    """
    res = _solve_both("max_sum_throughput", hs.JobSet(T22, gpu_types=TWO), hs.Cluster({"v100": 1, "k80": 1}))
    assert res.objective == pytest.approx(5.0, rel=REL)
    np.testing.assert_allclose(res.X, np.eye(2), atol=1e-6)


def test_max_sum_cost_normalized():
    """Prices (4, 1): T/price = [[1,1],[0.5,1]]; maximize a + b + 0.5c + d.

    Each row's value is at most its row sum times its best ratio (1), so the optimum is <= 2,
    attained only with d = 1 (job 2's only ratio-1 type), which forces b = 0, a = 1: X = I.
    """
    cluster = hs.Cluster({"v100": 1, "k80": 1}, prices={"v100": 4.0, "k80": 1.0})
    res = _solve_both(hs.policies.MaxSumThroughput(normalize_by_cost=True), hs.JobSet(T22, gpu_types=TWO), cluster)
    assert res.objective == pytest.approx(2.0, rel=REL)
    np.testing.assert_allclose(res.X, np.eye(2), atol=1e-6)


def test_max_sum_slo_forces_split():
    """One type, C = 1, T = (2, 1), R = (10, 10), SLO = (10, 20) s.

    Needs thr_1 = 2 x_1 >= 1 (x_1 >= 1/2) and thr_2 = x_2 >= 1/2; with x_1 + x_2 <= 1 the
    only feasible point is x = (1/2, 1/2): objective 2/2 + 1/2 = 1.5 (vs 2 without SLOs).
    """
    jobs = hs.JobSet([[2.0], [1.0]], gpu_types=["g"], steps_remaining=[10, 10], slos=[10, 20])
    res = _solve_both("max_sum_throughput", jobs, hs.Cluster({"g": 1}))
    assert res.objective == pytest.approx(1.5, rel=REL)
    np.testing.assert_allclose(res.X, [[0.5], [0.5]], atol=1e-6)


def test_max_sum_slo_infeasible_names_job():
    """Job "A" needs R/slo = 100/50 = 2 steps/s but its best throughput is 1: infeasible.

    Job "B" needs 10/100 = 0.1 <= 1 and is fine on its own.
    """
    jobs = hs.JobSet([[1.0], [1.0]], gpu_types=["g"], ids=["A", "B"], steps_remaining=[100, 10], slos=[50, 100])
    for aggregate in (True, False):
        res = hs.solve("max_sum_throughput", jobs, hs.Cluster({"g": 1}), aggregate=aggregate)
        assert res.status == "infeasible" and res.success is False
        assert "A" in [str(x) for x in res.extra["infeasible_jobs"]]


def test_max_sum_slo_infeasible_because_gang_does_not_fit():
    """Job "big" (s = 2) needs 100/25 = 4 steps/s. It has T = 6 on v100, but the cluster has
    only 1 v100 < s = 2 GPUs, so its best usable throughput is max{T[k80]} = 2 < 4:
    individually infeasible. Job "small" needs 1/100 and is fine.
    """
    jobs = hs.JobSet([[6.0, 2.0], [1.0, 1.0]], gpu_types=TWO, ids=["big", "small"],
                     scale_factors=[2, 1], steps_remaining=[100, 1], slos=[25, 100])
    res = hs.solve("max_sum_throughput", jobs, hs.Cluster({"v100": 1, "k80": 4}))
    assert res.status == "infeasible" and res.success is False
    assert "big" in [str(x) for x in res.extra["infeasible_jobs"]]


# ==================================================================== min makespan
@pytest.mark.parametrize("C, expected", [(2, 140.0), (4, 100.0)])
def test_makespan_one_type_same_throughput(C, expected):
    """One type, every job has throughput T = 2 on its s_j GPUs; s = (1,2,1), R = (100,200,60).

    Makespan M is feasible iff x_j = R_j/(T M) satisfies x_j <= 1 (M >= R_j/T) and
    sum_j s_j x_j <= C (M >= sum_j s_j R_j/(C T)). So M* = max(sum_j s_j R_j/(C T), max_j R_j/T)
    with sum_j s_j R_j = 100 + 400 + 60 = 560: C = 2 -> max(140, 100) = 140;
    C = 4 -> max(70, 100) = 100.
    """
    jobs = hs.JobSet([[2.0]] * 3, gpu_types=["g"], scale_factors=[1, 2, 1], steps_remaining=[100, 200, 60])
    res = _solve_both("min_makespan", jobs, hs.Cluster({"g": C}))
    assert res.objective == pytest.approx(expected, rel=REL)


def test_makespan_2x2():
    """T = [[4,1],[2,1]], C = (1,1), R = (10,10). On the 2x2 family thr = (1+3a, 2-a);
    minimize max(10/(1+3a), 10/(2-a)): equal at 1 + 3a = 2 - a -> a = 1/4, thr = 7/4 each,
    makespan 10/(7/4) = 40/7.
    """
    jobs = hs.JobSet(T22, gpu_types=TWO, steps_remaining=[10, 10])
    res = _solve_both("min_makespan", jobs, hs.Cluster({"v100": 1, "k80": 1}))
    assert res.objective == pytest.approx(40 / 7, rel=REL)
    np.testing.assert_allclose(res.X, [[0.25, 0.75], [0.75, 0.25]], atol=1e-6)


# =========================================================== finish-time fairness
def test_ftf_2x2_t0():
    """T = [[4,1],[2,1]], C = (1,1), n = 2, s = 1, t = e = 0, R = (1000, 3000).

    x_iso = (C_k/2)/1 = 1/2 everywhere (row sums 1, no normalization), iso = (2.5, 1.5).
    With t = e = 0, rho_j = (R_j/thr_j)/(R_j/iso_j) = iso_j/thr_j, so min max rho =
    1 / max_X min_j thr_j/iso_j = 1 / (the unweighted 2x2 max-min value, since iso = p) = 1.
    """
    jobs = hs.JobSet(T22, gpu_types=TWO, steps_remaining=[1000, 3000])
    res = _solve_both("finish_time_fairness", jobs, hs.Cluster({"v100": 1, "k80": 1}))
    assert res.objective == pytest.approx(1.0, rel=REL)
    np.testing.assert_allclose(res.X, [[0.5, 0.5], [0.5, 0.5]], atol=1e-5)


def test_ftf_2x2_with_time_since_start():
    """As above with R = (10, 10), t = (2, 0), e = 0. D = R/iso = (4, 20/3).

    On the 2x2 family rho_1 = (2 + 10/(1+3a))/4 (decreasing in a), rho_2 = (10/(2-a))/(20/3)
    = 1.5/(2-a) (increasing); at a = 0: (3, .75), at a = 1: (1.125, 1.5), so the optimum is
    the crossing: (12 + 6a)(2 - a) = 6(1 + 3a) -> 24 - 6a^2 = 6 + 18a -> a^2 + 3a - 3 = 0,
    a* = (sqrt(21) - 3)/2 ~ 0.7913, rho* = 1.5/(2 - a*) = 3/(7 - sqrt(21)) ~ 1.24100.
    """
    jobs = hs.JobSet(T22, gpu_types=TWO, steps_remaining=[10, 10], time_since_start=[2, 0])
    res = _solve_both("finish_time_fairness", jobs, hs.Cluster({"v100": 1, "k80": 1}))
    assert res.objective == pytest.approx(3 / (7 - math.sqrt(21)), rel=REL)
    a = (math.sqrt(21) - 3) / 2
    np.testing.assert_allclose(res.X, [[a, 1 - a], [1 - a, a]], atol=1e-5)


def test_ftf_isolated_time_elapsed():
    """One type, C = 1, two identical jobs T = 1, s = 1, R = (10, 10), t = (0, 0), e = (0, 10).

    x_iso = 1/2 each -> iso = 1/2, D = e + R/iso = (20, 30). rho_j = (10/x_j)/D_j; minimize
    max(1/(2 x_1), 1/(3 x_2)) s.t. x_1 + x_2 <= 1: equal at 2 x_1 = 3 x_2 -> x = (3/5, 2/5),
    rho* = 1/(2 * 3/5) = 5/6.
    """
    jobs = hs.JobSet([[1.0], [1.0]], gpu_types=["g"], steps_remaining=[10, 10],
                     time_since_start=[0, 0], isolated_time_elapsed=[0, 10])
    res = _solve_both("finish_time_fairness", jobs, hs.Cluster({"g": 1}))
    assert res.objective == pytest.approx(5 / 6, rel=REL)
    np.testing.assert_allclose(res.X, [[0.6], [0.4]], atol=1e-5)


def test_ftf_one_usable_type_with_gang_and_normalization():
    """Cluster g0:1, g1:6; six jobs with T = (0, 1) (only g1 usable), s = (1,1,1,2,1,1),
    R = (1,1,66,1,1,1), t = (0,0,1,0,0,0), e = 0.  (Found by the Hypothesis test below.)

    Isolated share (spec, literally: x_iso is zeroed only where C_k < s_j, then normalized),
    n = 6: s = 1 jobs get (1/6, 6/6) with row sum 7/6 -> divided by 7/6 -> g1 share 6/7;
    the s = 2 job gets (0 [C_0 = 1 < 2], (6/6)/2 = 1/2). So iso = 6/7 (s=1), 1/2 (s=2) and
    D = R/iso = 7/6 for the four R=1, s=1 jobs, 77 for job 2, 2 for job 3.
    With thr_j = x_j (the g1 share): rho = 6/(7x) for the four, (1 + 66/x_2)/77, 1/(2 x_3).
    Level r is feasible iff x = (6/(7r), ..., 66/(77r - 1), 1/(2r)) fits: each x <= 1
    (r >= 67/77 ~ 0.870) and 4*6/(7r) + 66/(77r-1) + 2/(2r) <= 6, i.e.
    31/(7r) + 66/(77r-1) <= 6 <=> 3234 r^2 - 2891 r + 31 >= 0. The larger root is
    r* = (2891 + sqrt(7956865)) / 6468 ~ 0.88308466 (>= 0.870, so rows do not bind).
    """
    T = np.array([[0.0, 1.0]] * 6)
    jobs = hs.JobSet(T, gpu_types=["g0", "g1"], scale_factors=[1, 1, 1, 2, 1, 1],
                     steps_remaining=[1, 1, 66, 1, 1, 1], time_since_start=[0, 0, 1, 0, 0, 0])
    res = _solve_both("finish_time_fairness", jobs, hs.Cluster({"g0": 1, "g1": 6}))
    assert res.objective == pytest.approx((2891 + math.sqrt(7956865)) / 6468, rel=REL)


@pytest.mark.parametrize("seed", range(6))
def test_ftf_t0_equals_makespan_lp(seed):
    """With t = e = 0, rho_j = iso_j/thr_j whatever R is, so FTF's optimum equals the makespan
    with steps_remaining := iso (max_j iso_j/thr_j), an LP: 1 / max_X min_j thr_j/iso_j.
    Checked against the LP reference and against hetsched's own min_makespan.
    """
    rng = np.random.default_rng(100 + seed)
    n, m = int(rng.integers(2, 9)), int(rng.integers(1, 4))
    T = rng.uniform(0.5, 5, size=(n, m))
    C = rng.integers(1, 6, size=m)
    types = [f"g{k}" for k in range(m)]
    cluster = hs.Cluster({g: int(c) for g, c in zip(types, C)})
    s = np.ones(n)
    iso = ref.isolated_throughput(T, s, C)
    lp = 1.0 / ref.max_min_ratio(T, s, C, iso)
    ftf = hs.solve("finish_time_fairness", hs.JobSet(T, gpu_types=types, steps_remaining=rng.uniform(10, 1e4, n)), cluster)
    mk = hs.solve("min_makespan", hs.JobSet(T, gpu_types=types, steps_remaining=iso), cluster)
    assert ftf.status == "optimal" and mk.status == "optimal"
    assert ftf.objective == pytest.approx(lp, rel=REL)
    assert mk.objective == pytest.approx(lp, rel=REL)


# ============================================================================ fifo
def test_fifo_arrival_order():
    """Cluster v100:1, k80:1; every job is faster on v100. Arrival times (3, 1, 2).

    Order: job 1 (t=1) takes v100 (3 > 1); job 2 (t=2) finds v100 full -> k80; job 0 (t=3)
    finds both full -> nothing. X = [[0,0],[1,0],[0,1]].
    """
    T = [[4.0, 1.0], [3.0, 1.0], [2.0, 1.0]]
    jobs = hs.JobSet(T, gpu_types=TWO, arrival_times=[3, 1, 2])
    res = hs.solve("fifo", jobs, hs.Cluster({"v100": 1, "k80": 1}))
    assert res.success
    np.testing.assert_array_equal(res.X, [[0, 0], [1, 0], [0, 1]])


def test_fifo_row_order_and_gangs():
    """No arrival times -> row order. Cluster v100:2, k80:4.

    j0 (s=1, T=(2,1)) -> v100 (1 v100 left). j1 (s=2, T=(5,1)): v100 has 1 < 2 -> k80 (2 left).
    j2 (s=1, T=(1,3)) -> k80, its fastest (1 k80 left). j3 (s=2, T=(2,1)): v100 1 < 2,
    k80 1 < 2 -> nothing. j4 (s=1, T=(0,1)) -> k80 (0 left).
    """
    T = [[2.0, 1.0], [5.0, 1.0], [1.0, 3.0], [2.0, 1.0], [0.0, 1.0]]
    jobs = hs.JobSet(T, gpu_types=TWO, scale_factors=[1, 2, 1, 2, 1])
    res = hs.solve("fifo", jobs, hs.Cluster({"v100": 2, "k80": 4}))
    assert res.success
    np.testing.assert_array_equal(res.X, [[1, 0], [0, 1], [0, 1], [0, 0], [0, 1]])


# ================================================================ isolated / proportional
def test_isolated_closed_form():
    """Cluster a:4, b:2; n = 4 jobs with s = (1,1,2,4), all T > 0.

    x_iso[j,k] = (C_k/4)/s_j: s=1 -> (1, 1/2), row sum 3/2 -> /1.5 -> (2/3, 1/3);
    s=2 -> (1/2, 1/4), row sum 3/4, unchanged; s=4 -> (1/4, 0) since C_b = 2 < 4.
    """
    T = np.full((4, 2), 2.0)
    jobs = hs.JobSet(T, gpu_types=["a", "b"], scale_factors=[1, 1, 2, 4])
    res = _solve_both("isolated", jobs, hs.Cluster({"a": 4, "b": 2}))
    expected = [[2 / 3, 1 / 3], [2 / 3, 1 / 3], [0.5, 0.25], [0.25, 0.0]]
    np.testing.assert_allclose(res.X, expected, atol=1e-12)


def test_isolated_zero_throughput_and_duplicates():
    """Cluster a:2, b:2; n = 4 identical-except-one jobs, s = 1: x_iso = (2/4, 2/4), row sum 1
    (no normalization). Job 3 has T = 0 on b, so its X there must be 0 (base constraint).
    Jobs 0-2 are identical, so aggregation merges them; n must still count all 4 jobs.
    """
    T = np.array([[1.0, 2.0], [1.0, 2.0], [1.0, 2.0], [3.0, 0.0]])
    jobs = hs.JobSet(T, gpu_types=["a", "b"])
    res = _solve_both("isolated", jobs, hs.Cluster({"a": 2, "b": 2}))
    np.testing.assert_allclose(res.X, [[0.5, 0.5]] * 3 + [[0.5, 0.0]], atol=1e-12)


def test_proportional_oversubscribed():
    """Cluster a:4, b:2 (sum C = 6); s = (1,1,2,4), sum s = 8 > 6 -> factor min(1, 6/8) = 3/4.

    X[j,a] = 4/6 * 3/4 = 1/2, X[j,b] = 2/6 * 3/4 = 1/4 on usable pairs; job 3 (s = 4) cannot
    use b (C_b = 2 < 4) and job 1 has T = 0 on b. Capacity check: a: 8 * 1/2 = 4 <= 4.
    """
    T = np.array([[1.0, 1.0], [1.0, 0.0], [2.0, 1.0], [3.0, 1.0]])
    jobs = hs.JobSet(T, gpu_types=["a", "b"], scale_factors=[1, 1, 2, 4])
    res = _solve_both("proportional", jobs, hs.Cluster({"a": 4, "b": 2}))
    np.testing.assert_allclose(res.X, [[0.5, 0.25], [0.5, 0.0], [0.5, 0.25], [0.5, 0.0]], atol=1e-12)


def test_proportional_undersubscribed():
    """Cluster a:3, b:1 (sum C = 4); two jobs s = 1, sum s = 2 < 4 -> factor 1: X = (3/4, 1/4)."""
    jobs = hs.JobSet([[1.0, 5.0], [2.0, 1.0]], gpu_types=["a", "b"])
    res = _solve_both("proportional", jobs, hs.Cluster({"a": 3, "b": 1}))
    np.testing.assert_allclose(res.X, [[0.75, 0.25], [0.75, 0.25]], atol=1e-12)


# ==================================== max-min: no idle capacity on Gavel-like instances
def gavel_like(seed: int):
    """30-128 jobs drawn from 26 job models on v100 / p100 / k80 (v100 > p100 > k80, some
    models cannot run on k80), scale factors {1,2,4,8}, some weights 2."""
    rng = np.random.default_rng([4242, seed])
    n = int(rng.integers(30, 129))
    types = ["v100", "p100", "k80"]
    C = rng.integers(8, 37, size=3)
    k80 = rng.uniform(1, 10, size=26)
    p100 = k80 * rng.uniform(1.2, 3.5, size=26)
    v100 = p100 * rng.uniform(1.1, 2.5, size=26)
    models = np.column_stack([v100, p100, k80 * (rng.random(26) > 0.15)])
    T = models[rng.integers(0, 26, size=n)]
    s = rng.choice([1, 2, 4, 8], size=n, p=[0.7, 0.1, 0.15, 0.05])
    w = rng.choice([1.0, 1.0, 1.0, 2.0], size=n)
    jobs = hs.JobSet(T, gpu_types=types, scale_factors=s, weights=w)
    return jobs, hs.Cluster({t: int(c) for t, c in zip(types, C)}), T, s, C.astype(float), w


def idle_violations(X, T, s, C, tol=1e-6) -> list[str]:
    """Type k with capacity left (sum_j s_j X[j,k] < C_k - tol) while a job with T[j,k] > 0,
    s_j <= C_k - used_k and row sum < 1 - tol could use it."""
    used = s @ X
    rows = X.sum(axis=1)
    out = []
    for k in range(len(C)):
        free = C[k] - used[k]
        if free > tol:
            starved = np.flatnonzero((T[:, k] > 0) & (s <= free) & (rows < 1 - tol))
            if starved.size:
                out.append(f"type {k}: {free:.6g} GPUs idle but jobs {starved.tolist()} have rows "
                           f"{rows[starved].round(6).tolist()}")
    return out


@pytest.mark.parametrize("seed", range(10))
def test_mmf_no_idle_capacity_gavel_like(seed):
    jobs, cluster, T, s, C, w = gavel_like(seed)
    res = hs.solve("max_min_fairness", jobs, cluster)
    assert res.status == "optimal", res.message
    assert_feasible(res.X, T, s, C)
    viol = idle_violations(res.X, T, s, C)
    assert not viol, "\n".join(viol)
    assert res.objective == pytest.approx(ref.max_min_fairness(T, s, C, w), rel=REL)


@pytest.mark.parametrize("seed", range(3))
def test_mmf_no_idle_capacity_gavel_like_unaggregated(seed):
    jobs, cluster, T, s, C, w = gavel_like(100 + seed)
    res = hs.solve("max_min_fairness", jobs, cluster, aggregate=False)
    assert res.status == "optimal", res.message
    assert_feasible(res.X, T, s, C)
    viol = idle_violations(res.X, T, s, C)
    assert not viol, "\n".join(viol)


# ============================================================ hypothesis: feasibility
POLICIES = {
    "max_min_fairness": lambda: "max_min_fairness",
    "max_min_fairness_agnostic": lambda: hs.policies.MaxMinFairness(heterogeneity_aware=False),
    "max_sum_throughput": lambda: "max_sum_throughput",
    "max_sum_throughput_cost": lambda: hs.policies.MaxSumThroughput(normalize_by_cost=True),
    "min_makespan": lambda: "min_makespan",
    "finish_time_fairness": lambda: "finish_time_fairness",
    "isolated": lambda: "isolated",
    "proportional": lambda: "proportional",
    "fifo": lambda: "fifo",
}


@st.composite
def problems(draw):
    n = draw(st.integers(1, 10))
    m = draw(st.integers(1, 4))
    vec = lambda elem, size: draw(st.lists(elem, min_size=size, max_size=size))  # noqa: E731
    C = vec(st.integers(0, 8), m)
    T = np.array([vec(st.one_of(st.just(0.0), st.floats(0.01, 100.0)), m) for _ in range(n)])
    s = np.array(vec(st.sampled_from([1, 2, 4]), n))
    w = vec(st.sampled_from([0.5, 1.0, 2.0, 5.0]), n)
    R = vec(st.floats(1.0, 1e5), n)
    t = vec(st.one_of(st.just(0.0), st.floats(0.0, 1e3)), n)
    e = vec(st.one_of(st.just(0.0), st.floats(0.0, 1e3)), n)
    arrival = vec(st.integers(0, 5), n)
    prices = vec(st.floats(0.1, 10.0), m)
    dup = draw(st.booleans())
    # repair: every job needs a type with T > 0 and C_k >= s_j
    for j in range(n):
        ok = (T[j] > 0) & (np.array(C) >= s[j])
        if not ok.any():
            k = int(np.argmax(C))
            C[k] = max(C[k], int(s[j]))
            if T[j, k] <= 0:
                T[j, k] = 1.0
    rows = list(range(n)) + ([0, 0] if dup else [])
    types = [f"g{k}" for k in range(m)]
    jobs = hs.JobSet(T[rows], gpu_types=types, scale_factors=s[rows], weights=np.array(w)[rows],
                     steps_remaining=np.array(R)[rows], time_since_start=np.array(t)[rows],
                     isolated_time_elapsed=np.array(e)[rows], arrival_times=np.array(arrival)[rows])
    cluster = hs.Cluster({g: int(c) for g, c in zip(types, C)},
                         prices={g: float(p) for g, p in zip(types, prices)})
    return jobs, cluster


@pytest.mark.parametrize("policy_name", list(POLICIES))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=problems())
def test_every_policy_returns_feasible_X(policy_name, problem):
    jobs, cluster = problem
    res = hs.solve(POLICIES[policy_name](), jobs, cluster)
    cap = cluster.capacities(jobs.gpu_types)
    problems_found = check_allocation(res.X, jobs.throughputs, jobs.scale_factors, cap)
    where = f"\n{jobs.to_frame().to_string(float_format='{:.17g}'.format)}\n{cluster}"
    assert not problems_found, f"{policy_name}: {problems_found}{where}"
    assert res.status == "optimal", f"{policy_name}: {res.status} {res.message}{where}"


# ======================================================== the checker is not vacuous
def test_checker_detects_each_violation():
    """Each base constraint, violated on its own, is reported (and a feasible X is not)."""
    T = np.array([[1.0, 0.0], [2.0, 3.0]])
    s = np.array([1, 2])
    C = np.array([2.0, 1.0])  # job 1 (s=2) cannot use type 1 (C=1 < 2)
    ok = np.array([[0.5, 0.0], [0.5, 0.0]])
    assert check_allocation(ok, T, s, C) == []
    cases = {
        "not finite": np.array([[np.nan, 0.0], [0.5, 0.0]]),
        "negative": np.array([[-0.1, 0.0], [0.5, 0.0]]),
        "row": np.array([[1.2, 0.0], [0.0, 0.0]]),
        "capacity": np.array([[1.0, 0.0], [0.75, 0.0]]),  # 1 + 2*0.75 = 2.5 > 2
        "T == 0": np.array([[0.5, 0.1], [0.5, 0.0]]),
        "C_k": np.array([[0.5, 0.0], [0.5, 0.2]]),
        "shape": np.zeros((2, 3)),
    }
    for what, X in cases.items():
        found = check_allocation(X, T, s, C)
        assert found, what
        with pytest.raises(AssertionError):
            assert_feasible(X, T, s, C)
