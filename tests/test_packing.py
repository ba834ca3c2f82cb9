"""Space sharing (packing): equivalences, hand-derived optima, an independent cvxpy
formulation, a pair-aware allocation checker, exact class aggregation, bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import hetsched as hs
from hetsched.formulations.spaces.packing import DEFAULT_PAIR_THRESHOLD, Packing
from hetsched.inputs.throughputs import PairThroughputs

P = hs.policies
POLICIES = [P.MaxMinFairness, P.MaxSumThroughput, P.MinMakespan, P.FinishTimeFairness]
GAVEL = Path(__file__).resolve().parents[2] / "shared" / "data" / "gavel" / "simulation_throughputs.json"


# --------------------------------------------------------------------------- helpers
def catalogue_case(seed: int, n: int = 30, *, combined=(0.9, 1.5)):
    cat = hs.generate_catalogue(n_job_types=5, scale_factors=(1, 2, 4), seed=seed, pairs=True,
                                pair_combined_range=combined, pair_infeasible_prob=0.3)
    w = hs.sample_jobs(cat, n, seed=seed + 100, scale_factor_probs={1: 0.6, 2: 0.3, 4: 0.1})
    cluster = hs.Cluster({"v100": 6, "p100": 6, "k80": 8})
    return cat, w, cluster


def with_pair_table(cat, w, table: np.ndarray, threshold: float) -> Packing:
    pairs = PairThroughputs(cat.pairs.index, table)
    return Packing(pairs, gpu_types=cat.gpu_types, keys=pd.Series(w.rows, index=w.jobs.ids), threshold=threshold)


def check_packed(res, jobs: hs.JobSet, cluster: hs.Cluster, packing: Packing, tol: float = 1e-6) -> None:
    """Pair-aware checker of a packed allocation, from the raw inputs only.

    Rows are non-negative; each job's time (alone or in pairs) is at most 1; per GPU type
    the GPUs used (a pair's gang once) fit the capacity; pairs only join jobs with equal
    scale factors; every row's throughputs are the table's (mean of the two entries for
    two jobs of one key); and the throughput each job gets from its rows is the result's
    effective throughput.
    """
    rows = res.extra["allocation_rows"]
    n, m = jobs.n_jobs, jobs.n_types
    pos = {j: i for i, j in enumerate(jobs.ids.tolist())}
    col = {t: k for k, t in enumerate(jobs.gpu_types)}
    cap = cluster.capacities(jobs.gpu_types)
    s = jobs.scale_factors
    T = jobs.throughputs
    time = np.zeros((n, m))
    thr = np.zeros(n)
    used = np.zeros(m)
    tab = packing.aligned(jobs.gpu_types)
    for r in rows.itertuples(index=False):
        assert r.fraction >= -tol
        a, k = pos[r.job], col[r.gpu_type]
        used[k] += r.gpus
        assert r.gpus == pytest.approx(r.fraction * s[a], rel=1e-9, abs=1e-12)
        time[a, k] += r.fraction
        if r.kind == "pair":
            b = pos[r.partner]
            assert a != b and s[a] == s[b]
            time[b, k] += r.fraction
            ka, kb = packing.keys[r.job], packing.keys[r.partner]
            p = int(packing.pairs.positions([ka], [kb])[0])
            assert p >= 0
            ta, tb = (tab[p, k, 0], tab[p, k, 1]) if ka <= kb else (tab[p, k, 1], tab[p, k, 0])
            if ka == kb:
                ta = tb = 0.5 * (ta + tb)
            assert r.throughput == pytest.approx(ta, rel=1e-9) and r.partner_throughput == pytest.approx(tb, rel=1e-9)
            thr[a] += r.fraction * ta
            thr[b] += r.fraction * tb
        else:
            assert r.kind == "single" and r.partner is None
            assert r.throughput == pytest.approx(T[a, k], rel=1e-9)
            thr[a] += r.fraction * T[a, k]
    assert (time.sum(axis=1) <= 1 + tol).all(), time.sum(axis=1).max()
    assert (used <= cap + tol * np.maximum(1, cap)).all(), (used, cap)
    np.testing.assert_allclose(thr, res.effective_throughput, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(time, res.extra["time"], rtol=1e-6, atol=1e-7)


# ------------------------------------------------------------------- equivalences
@pytest.mark.parametrize("policy", POLICIES, ids=lambda c: c.name)
def test_zero_pair_throughputs_equal_unpacked(policy) -> None:
    cat, w, cluster = catalogue_case(1)
    zero = with_pair_table(cat, w, np.zeros_like(cat.pairs.throughputs), threshold=0.0)
    base = hs.solve(policy(), w.jobs, cluster)
    for agg in (True, False):
        packing = Packing(zero.pairs, gpu_types=zero.gpu_types, keys=zero.keys, threshold=0.0, aggregate=agg)
        res = hs.solve(policy(packing=packing), w.jobs, cluster)
        assert res.success and res.extra["space"]["n_pair"] == 0
        assert res.objective == pytest.approx(base.objective, rel=1e-6)


@pytest.mark.parametrize("policy", POLICIES, ids=lambda c: c.name)
def test_dominated_pairs_change_nothing(policy) -> None:
    """Pairs with combined normalized throughput <= 1, kept (threshold 0), never help."""
    cat, w, cluster = catalogue_case(2)
    i, j = cat.pairs.index[:, 0], cat.pairs.index[:, 1]
    table = 0.45 * np.stack([cat.throughputs[i], cat.throughputs[j]], axis=2)  # combined 0.9
    packing = with_pair_table(cat, w, table, threshold=0.0)
    res = hs.solve(policy(packing=packing), w.jobs, cluster)
    base = hs.solve(policy(), w.jobs, cluster)
    assert res.extra["space"]["n_pair"] > 0
    assert res.objective == pytest.approx(base.objective, rel=1e-6)
    check_packed(res, w.jobs, cluster, packing)


@pytest.mark.parametrize("policy", POLICIES, ids=lambda c: c.name)
def test_class_aggregation_is_exact(policy) -> None:
    cat, w, cluster = catalogue_case(3, n=40)
    on = Packing.from_workload(w, cat, threshold=1.0)
    off = Packing.from_workload(w, cat, threshold=1.0, aggregate=False)
    r_on = hs.solve(policy(packing=on), w.jobs, cluster)
    r_off = hs.solve(policy(packing=off), w.jobs, cluster)
    assert r_on.success and r_off.success
    assert r_on.objective == pytest.approx(r_off.objective, rel=1e-6)
    check_packed(r_on, w.jobs, cluster, on)
    check_packed(r_off, w.jobs, cluster, off)


def test_class_aggregation_shrinks_the_program() -> None:
    cat, w, cluster = catalogue_case(4, n=300)
    res = hs.solve(P.MaxMinFairness(packing=Packing.from_workload(w, cat)), w.jobs, cluster)
    assert res.success and res.extra["space"]["n_classes"] <= len(cat)
    assert res.sizes["max_vars"] < 2000
    check_packed(res, w.jobs, cluster, Packing.from_workload(w, cat))


def test_max_sum_classes_ignore_steps_without_slos() -> None:
    """Max-sum reads ``steps_remaining`` only for SLO rows: without slos, jobs of one
    catalogue row form one class even though their steps differ (the per-job program and
    the class program have the same optimum); with slos every job keeps its own class."""
    cat, w, cluster = catalogue_case(5, n=60)
    assert np.unique(w.jobs.steps_remaining).size == w.jobs.n_jobs  # steps tell every job apart
    on = Packing.from_workload(w, cat, threshold=1.0)
    off = Packing.from_workload(w, cat, threshold=1.0, aggregate=False)
    r_on = hs.solve(P.MaxSumThroughput(packing=on), w.jobs, cluster)
    r_off = hs.solve(P.MaxSumThroughput(packing=off), w.jobs, cluster)
    assert r_on.success and r_off.success
    assert r_on.extra["space"]["n_classes"] <= len(cat)
    assert r_on.objective == pytest.approx(r_off.objective, rel=1e-6)
    check_packed(r_on, w.jobs, cluster, on)
    j = w.jobs
    slo_jobs = hs.JobSet(j.throughputs, gpu_types=j.gpu_types, scale_factors=j.scale_factors, ids=j.ids,
                         steps_remaining=j.steps_remaining, slos=np.full(j.n_jobs, 1e9))
    assert P.MaxSumThroughput().aggregation_fields(slo_jobs) == ("steps_remaining", "slos")
    assert P.MaxSumThroughput(use_slos=False).aggregation_fields(slo_jobs) == ()
    r_slo = hs.solve(P.MaxSumThroughput(packing=on), slo_jobs, cluster)
    assert r_slo.success and r_slo.extra["space"].get("n_classes", j.n_jobs) == j.n_jobs
    assert P.MaxSumThroughput().aggregation_fields(w.jobs) == ()
    assert P.MaxSumThroughput(use_slos=False).aggregation_fields(w.jobs) == ()


def test_threshold_one_is_exact_and_larger_thresholds_only_lose() -> None:
    cat, w, cluster = catalogue_case(5, n=40)
    objs = {}
    for th in (0.0, 1.0, 1.2, 1.6):
        res = hs.solve(P.MaxMinFairness(packing=Packing.from_workload(w, cat, threshold=th, aggregate=False)),
                       w.jobs, cluster)
        objs[th] = (res.objective, res.extra["space"]["n_pair"])
    assert objs[1.0][0] == pytest.approx(objs[0.0][0], rel=1e-7)
    assert objs[1.0][1] < objs[0.0][1]
    assert objs[1.2][0] <= objs[1.0][0] * (1 + 1e-7) and objs[1.6][0] <= objs[1.2][0] * (1 + 1e-7)
    assert objs[1.6][1] < objs[1.2][1] < objs[1.0][1]
    assert DEFAULT_PAIR_THRESHOLD > 1.0


# ------------------------------------------------------------------ hand-made optima
def test_sharing_strictly_helps_two_jobs_one_gpu() -> None:
    r"""Two 1-GPU jobs, one V100; alone each runs 1 step/s, together 0.75 each.

    * max-min: p_j = T C / sum C = 1. Time slicing gives each X = 1/2, share 1/2; the pair
      row y = 1 gives each 0.75 (y is limited by one GPU and by each job's time), so 0.75.
    * max-sum: 1 (one GPU at 1 step/s) vs 0.75 + 0.75 = 1.5.
    * makespan, R = 100 each: time slicing finishes both at 200 s; sharing at
      100 / 0.75 = 133.33 s.
    * FTF: isolated share C/n = 1/2, so D = R / 0.5 = 200; time slicing gives
      rho = (100 / 0.5) / 200 = 1, sharing (100 / 0.75) / 200 = 2/3.
    """
    jobs = hs.JobSet([[1.0], [1.0]], gpu_types=["v100"], ids=["a", "b"], steps_remaining=[100.0, 100.0])
    cluster = hs.Cluster({"v100": 1})
    packing = Packing.from_job_pairs(["a"], ["b"], [[[0.75, 0.75]]], gpu_types=["v100"])
    expect = {P.MaxMinFairness: (0.5, 0.75), P.MaxSumThroughput: (1.0, 1.5),
              P.MinMakespan: (200.0, 400.0 / 3), P.FinishTimeFairness: (1.0, 2.0 / 3)}
    for policy, (plain, packed) in expect.items():
        assert hs.solve(policy(), jobs, cluster).objective == pytest.approx(plain, rel=1e-6)
        res = hs.solve(policy(packing=packing), jobs, cluster)
        assert res.objective == pytest.approx(packed, rel=1e-6), policy.name
        np.testing.assert_allclose(res.effective_throughput, [0.75, 0.75], rtol=1e-6)
        rows = res.extra["allocation_rows"]
        assert rows.kind.tolist() == ["pair"] and rows.fraction.iloc[0] == pytest.approx(1.0)
        check_packed(res, jobs, cluster, packing)


def test_sharing_helps_with_mixed_scale_factors() -> None:
    r"""Jobs a, b (2 GPUs each) may share; c (1 GPU) may not pair with them. Three GPUs.

    Unpacked max-sum: the two gangs cannot both run (2 + 2 > 3); best is one gang full
    time (2 steps/s) + c (1 step/s) = 3. Packed: a and b share one 2-GPU gang at 1.6 and
    1.6 steps/s (y = 1), c takes the third GPU: 1.6 + 1.6 + 1 = 4.2. The table's a-c pair
    is ignored (scale factors differ), as Gavel's packed policies cannot do without crashing.
    """
    jobs = hs.JobSet([[2.0], [2.0], [1.0]], gpu_types=["v100"], ids=["a", "b", "c"], scale_factors=[2, 2, 1])
    cluster = hs.Cluster({"v100": 3})
    packing = Packing.from_job_pairs(["a", "a"], ["b", "c"], [[[1.6, 1.6]], [[2.0, 1.0]]], gpu_types=["v100"])
    assert hs.solve("max_sum_throughput", jobs, cluster).objective == pytest.approx(3.0, rel=1e-6)
    res = hs.solve(P.MaxSumThroughput(packing=packing), jobs, cluster)
    assert res.objective == pytest.approx(4.2, rel=1e-6)
    assert res.extra["space"]["n_pair"] == 1
    check_packed(res, jobs, cluster, packing)


# ------------------------------------------------- independent cvxpy formulation
def _random_pair_instance(seed: int):
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(4, 8)), 2
    T = rng.lognormal(0.0, 0.6, size=(n, m)) * (rng.random((n, m)) > 0.15)
    T[T.sum(axis=1) == 0, 0] = 1.0
    s = rng.choice([1, 2], size=n, p=[0.7, 0.3])
    C = rng.integers(1, 4, size=m).astype(float)
    C[0] = max(C[0], 2.0)
    T[:, 0] = np.where(T[:, 0] > 0, T[:, 0], 0.5)  # every job runs on type 0 (2+ GPUs)
    ids = [f"j{i}" for i in range(n)]
    a, b, thr = [], [], []
    for i in range(n):
        for j in range(i + 1, n):
            if rng.random() < 0.8:
                comb = rng.uniform(0.5, 1.8, size=m)
                u = rng.uniform(0.2, 0.8, size=m)
                pt = np.stack([comb * u * T[i], comb * (1 - u) * T[j]], axis=1) * (rng.random(m) > 0.25)[:, None]
                a.append(ids[i]), b.append(ids[j]), thr.append(pt)
    return T, s, C, ids, a, b, np.array(thr).reshape(len(a), m, 2)


def _cvxpy_packed_max_min(T, s, C, ids, a, b, thr) -> float:
    """Packed max-min fairness written directly in cvxpy, Gavel style: one row per pair."""
    import cvxpy as cp

    n, m = T.shape
    pos = {j: i for i, j in enumerate(ids)}
    pairs = [(pos[x], pos[y], t) for x, y, t in zip(a, b, thr) if s[pos[x]] == s[pos[y]]]
    usable = (T > 0) & (C[None, :] >= s[:, None])
    X = cp.Variable((n, m), nonneg=True)
    Y = cp.Variable((max(len(pairs), 1), m), nonneg=True)
    t = cp.Variable()
    cons = [X[~usable] == 0] if (~usable).any() else []
    time = [cp.sum(X[j, :]) for j in range(n)]
    thr_j = [T[j, :] @ X[j, :] for j in range(n)]
    gpus = [s @ X[:, k] for k in range(m)]
    for p, (i, j, pt) in enumerate(pairs):
        for k in range(m):
            if not (usable[i, k] and usable[j, k]) or pt[k].sum() == 0:
                cons.append(Y[p, k] == 0)
        time[i] = time[i] + cp.sum(Y[p, :])
        time[j] = time[j] + cp.sum(Y[p, :])
        thr_j[i] = thr_j[i] + pt[:, 0] @ Y[p, :]
        thr_j[j] = thr_j[j] + pt[:, 1] @ Y[p, :]
        for k in range(m):
            gpus[k] = gpus[k] + s[i] * Y[p, k]
    if not pairs:
        cons.append(Y == 0)
    prop = T @ C / C.sum()
    cons += [time[j] <= 1 for j in range(n)] + [gpus[k] <= C[k] for k in range(m)]
    cons += [s[j] * thr_j[j] / prop[j] >= t for j in range(n)]
    prob = cp.Problem(cp.Maximize(t), cons)
    prob.solve(solver=cp.CLARABEL)
    assert prob.status == "optimal", prob.status
    return float(t.value)


@pytest.mark.parametrize("seed", range(8))
def test_packed_max_min_matches_independent_cvxpy(seed: int) -> None:
    T, s, C, ids, a, b, thr = _random_pair_instance(seed)
    jobs = hs.JobSet(T, gpu_types=["x", "y"], ids=ids, scale_factors=s)
    cluster = hs.Cluster({"x": int(C[0]), "y": int(C[1])})
    ref = _cvxpy_packed_max_min(T, s, C, ids, a, b, thr)
    for th in (0.0, 1.0):
        packing = Packing.from_job_pairs(a, b, thr, gpu_types=["x", "y"], threshold=th)
        res = hs.solve(P.MaxMinFairness(packing=packing), jobs, cluster)
        assert res.success
        assert res.objective == pytest.approx(ref, rel=1e-5, abs=1e-7)
        check_packed(res, jobs, cluster, packing)


# --------------------------------------------------------------- results, options
def test_results_carry_rows_and_packed_policies_do_not_aggregate() -> None:
    cat, w, cluster = catalogue_case(6)
    packing = Packing.from_workload(w, cat)
    pol = P.MaxMinFairness(packing=packing)
    assert pol.aggregatable is False and P.MaxMinFairness().aggregatable is True
    res = hs.solve(pol, w.jobs, cluster)
    assert res.params["packing"] is packing
    assert set(res.extra) >= {"allocation_rows", "time", "time_shared", "space"}
    assert list(res.extra["allocation_rows"].columns) == [
        "kind", "gpu_type", "job", "partner", "fraction", "gpus", "throughput", "partner_throughput"]
    assert (res.extra["time_shared"] <= res.extra["time"] + 1e-9).all()
    assert "packing" not in hs.solve(P.MaxMinFairness(), w.jobs, cluster).params


def test_ftf_without_second_stage_still_reports_rows() -> None:
    cat, w, cluster = catalogue_case(7)
    packing = Packing.from_workload(w, cat)
    res = hs.solve(P.FinishTimeFairness(packing=packing, second_stage=False), w.jobs, cluster)
    assert res.success
    check_packed(res, w.jobs, cluster, packing)


def test_agnostic_max_min_packs_at_relative_speed() -> None:
    jobs = hs.JobSet([[4.0], [2.0]], gpu_types=["v100"], ids=["a", "b"])
    packing = Packing.from_job_pairs(["a"], ["b"], [[[3.0, 1.5]]], gpu_types=["v100"])  # 0.75 of each
    res = hs.solve(P.MaxMinFairness(heterogeneity_aware=False, packing=packing), jobs, hs.Cluster({"v100": 1}))
    assert res.objective == pytest.approx(0.75, rel=1e-6)


@pytest.mark.skipif(not GAVEL.is_file(), reason="Gavel's throughput table is not present")
def test_gavel_table_pairs_pack() -> None:
    cat = hs.load_gavel_throughputs(GAVEL)
    w = hs.sample_jobs(cat, 96, seed=3)
    cluster = hs.Cluster({"v100": 12, "p100": 12, "k80": 12})
    packing = Packing.from_workload(w, cat)
    res = hs.solve(P.MaxMinFairness(packing=packing), w.jobs, cluster)
    base = hs.solve(P.MaxMinFairness(), w.jobs, cluster)
    assert res.success and res.objective > base.objective * 1.05
    check_packed(res, w.jobs, cluster, packing)


# --------------------------------------------------------------------- bad input
def test_pairs_naming_unknown_jobs() -> None:
    jobs = hs.JobSet([[1.0], [1.0]], gpu_types=["v100"], ids=["a", "b"])
    packing = Packing.from_job_pairs(["a"], ["zz"], [[[0.7, 0.7]]], gpu_types=["v100"])
    with pytest.raises(hs.ValidationError, match="not in `jobs`.*zz"):
        hs.solve(P.MaxMinFairness(packing=packing), jobs, hs.Cluster({"v100": 1}))


def test_pair_throughput_without_single_throughput() -> None:
    jobs = hs.JobSet([[1.0, 0.0], [1.0, 1.0]], gpu_types=["v100", "k80"], ids=["a", "b"])
    packing = Packing.from_job_pairs(["a"], ["b"], [[[0.7, 0.7], [0.5, 0.5]]], gpu_types=["v100", "k80"])
    with pytest.raises(hs.ValidationError, match="job 'a'.*'k80'.*own throughput there is 0"):
        hs.solve(P.MaxSumThroughput(packing=packing), jobs, hs.Cluster({"v100": 1, "k80": 1}))


def test_catalogue_packing_missing_a_job() -> None:
    cat, w, cluster = catalogue_case(8, n=6)
    packing = Packing.from_catalogue(cat, w.rows[:5], w.jobs.ids[:5])
    with pytest.raises(hs.ValidationError, match="has no pair-table row"):
        hs.solve(P.MaxMinFairness(packing=packing), w.jobs, cluster)


@pytest.mark.parametrize("kwargs, match", [
    ({"threshold": -1.0}, "threshold"),
    ({"threshold": float("nan")}, "threshold"),
    ({"aggregate": "yes"}, "aggregate"),
])
def test_bad_packing_parameters(kwargs, match) -> None:
    with pytest.raises(hs.ValidationError, match=match):
        Packing.from_job_pairs(["a"], ["b"], [[[0.7, 0.7]]], gpu_types=["v100"], **kwargs)


def test_bad_packing_objects() -> None:
    with pytest.raises(hs.ValidationError, match="cannot share with itself"):
        Packing.from_job_pairs(["a"], ["a"], [[[0.7, 0.7]]], gpu_types=["v100"])
    with pytest.raises(hs.ValidationError, match="shape"):
        Packing.from_job_pairs(["a"], ["b"], [[0.7, 0.7]], gpu_types=["v100"])
    with pytest.raises(hs.ValidationError, match="no pair table"):
        Packing.from_catalogue(hs.generate_catalogue(n_job_types=2, seed=0), [0], ["a"])
    jobs = hs.JobSet([[1.0]], gpu_types=["v100"])
    with pytest.raises(hs.ValidationError, match="must be a hetsched.formulations.spaces.packing.Packing"):
        hs.solve(P.MaxMinFairness(packing={"a": 1}), jobs, hs.Cluster({"v100": 1}))


# ------------------------------------------------------------- one workload container (issue 24)
def test_from_workload_takes_a_generated_trace() -> None:
    cat = hs.generate_catalogue(n_job_types=5, scale_factors=(1, 2), seed=4, pairs=True)
    tr = hs.generate_workload(12, rate_per_hour=6.0, seed=4, catalogue=cat)
    packing = Packing.from_workload(tr, cat)  # was a raw AttributeError: 'Trace' object has no attribute 'rows'
    assert packing.keys.loc[tr.jobs.ids].tolist() == tr.catalogue_rows.tolist()
    own = Packing.from_workload(tr)  # the catalogue defaults to the workload's own
    assert own.keys.equals(packing.keys)


@pytest.mark.parametrize("bad, match", [
    (lambda tr: tr.jobs, r"`workload` must be a hetsched\.Workload .*got JobSet"),
    (lambda tr: {"n_jobs": 3}, r"`workload` must be a hetsched\.Workload .*got dict"),
    (lambda tr: hs.Workload(tr.jobs), r"`workload` must be sampled from a throughput catalogue .*source 'jobs'"),
])
def test_from_workload_refuses_what_is_not_a_sampled_workload(bad, match) -> None:
    cat = hs.generate_catalogue(n_job_types=3, seed=1, pairs=True)
    tr = hs.generate_workload(4, rate_per_hour=6.0, seed=1, catalogue=cat)
    with pytest.raises(hs.ValidationError, match=match):
        Packing.from_workload(bad(tr), cat)
