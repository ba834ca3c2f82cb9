"""The structured path's shortcuts for two-stage policies, against HiGHS on the same programs.

* **Row bound** (:func:`hetsched.solvers.structured.level._row_bound`): a level bounded by
  one job's own time row (min makespan's stage 1, most often) is certified without an LP
  when an assignment reaching it fits.
* **Witness prices** (:func:`hetsched.solvers.structured.floor._witness_prices`): stage 2's
  first prices come from a sample made feasible by stage 1's allocation (also carried from
  finish-time fairness's best Newton step) instead of from level LPs; and when the level's
  own prices make the first master infeasible, the same sample re-prices it
  (:func:`hetsched.solvers.structured.floor._witness_reprice`).

Each test asserts that the shortcut ran (through the backend's ``info["init"]`` or the
solver's debug log) and that the result matches HiGHS to 1e-6: the level, and the second
stage's total, which is what the witness changes the route to.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import numpy as np
import pytest
from checker import assert_feasible
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hetsched as hs
from hetsched.solvers import get_backend

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from hard_instances import hard_instance  # noqa: E402

REL = 1e-6
#: Force the warm starts (and so the shortcuts) on instances of a few hundred jobs.
SMALL = {"base_size": 16, "fallback": "none"}
FLOOR_LOG = "hetsched.solvers.structured"
WITNESS = "witness-sample prices"
ROW_BOUND = "own time row; certified without an LP"


def hard_jobs(n: int, m: int, seed: int):
    """The benchmark's hard family with ``steps_remaining`` and ``time_since_start`` (as the
    makespan and finish-time-fairness rows of ``benchmarks/scale_targets.py`` draw them)."""
    jobs, cluster = hard_instance(n, m, seed)
    rng = np.random.default_rng([seed, n])
    jobs = hs.JobSet(jobs.throughputs, gpu_types=jobs.gpu_types, scale_factors=jobs.scale_factors,
                     weights=jobs.weights, steps_remaining=rng.uniform(1e3, 1e6, n),
                     time_since_start=rng.uniform(0.0, 3600.0, n))
    return jobs, cluster


def stage2_value(policy: str, res, jobs, cluster) -> float:
    r"""The second stage's objective :math:`\sum_j \sum_k a_{jk} X_{jk}` at ``res.X`` (the
    total effective throughput may differ between alternative optima; this may not)."""
    if policy == "min_makespan":
        a = hs.policies.MinMakespan().coefficients(jobs, cluster)[0]
    elif policy == "finish_time_fairness":
        a = hs.policies.FinishTimeFairness().coefficients(jobs, cluster, res.extra["upper_bound"])
    else:
        a = hs.policies.MaxMinFairness().coefficients(jobs, cluster)
    return float((a * np.asarray(res.X)).sum())


def agree(policy: str, jobs, cluster, options=SMALL, aggregate: bool = True):
    """Structured (``options``) and HiGHS: same objective and same stage-2 objective."""
    a = hs.solve(policy, jobs, cluster, solver="structured", options=options, aggregate=aggregate)
    b = hs.solve(policy, jobs, cluster, solver="highs", aggregate=aggregate)
    assert a.status == b.status == "optimal", (a.message, b.message)
    assert a.solver == "structured"
    assert_feasible(a.X, jobs.throughputs, jobs.scale_factors, cluster.capacities(jobs.gpu_types))
    assert a.objective == pytest.approx(b.objective, rel=REL)
    assert stage2_value(policy, a, jobs, cluster) == pytest.approx(stage2_value(policy, b, jobs, cluster), rel=REL)
    return a


def ran(caplog, text: str) -> bool:
    return any(text in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(("n", "seed"), [(600, 1), (2000, 0), (2000, 2)])
def test_makespan_stage1_is_certified_by_the_row_bound(n: int, seed: int) -> None:
    """Min makespan's stage 1 on the hard family (10 types): the slowest job sets the
    level; the backend certifies it with no master LP, and the duals it returns are a
    certificate."""
    jobs, cluster = hard_jobs(n, 10, seed)
    pol = hs.policies.MinMakespan(second_stage=False)
    lp = pol.formulate(jobs, cluster)
    out = get_backend("structured").solve(lp, options=SMALL)
    ref = get_backend("highs").solve(lp)
    assert out.status == ref.status == "optimal"
    assert out.info["init"] == "row_bound" and out.info["rounds"] == 0
    assert out.objective == pytest.approx(ref.objective, rel=REL)
    # the returned row duals prove the bound: dual objective == primal objective, and every
    # variable's reduced cost is <= 0 (maximization; <= rows >= 0, >= rows <= 0)
    d = out.row_dual
    fin_ub, fin_lb = np.isfinite(lp.row_ub), np.isfinite(lp.row_lb)
    assert np.all(d[fin_ub & ~fin_lb] >= -1e-12) and np.all(d[fin_lb & ~fin_ub] <= 1e-12)
    dual_obj = float(np.where(d > 0, d * np.where(fin_ub, lp.row_ub, 0.0), d * np.where(fin_lb, lp.row_lb, 0.0)).sum())
    rc = np.asarray(lp.c) - lp.A.T @ d
    t = int(lp.meta["t"])
    free = np.ones(lp.n_vars, dtype=bool)
    free[t] = False
    assert np.all(rc[free] <= 1e-9)
    assert rc[t] == pytest.approx(0.0, abs=1e-9)
    assert dual_obj == pytest.approx(out.objective, rel=1e-9)


def test_row_bound_declines_when_no_assignment_fits() -> None:
    """Ten jobs that can only use a 1-GPU type: the aggregate check passes (a 100-GPU type
    exists), no assignment fits, and the ordinary rounds find the level 1/10."""
    n = 10
    T = np.column_stack([np.ones(n), np.zeros(n)])
    jobs = hs.JobSet(T, gpu_types=["a", "b"])
    cluster = hs.Cluster({"a": 1, "b": 100})
    pol = hs.policies.MaxMinFairness(second_stage=False)
    out = get_backend("structured").solve(pol.formulate(jobs, cluster), options={"base_size": 4, "fallback": "none"})
    assert out.status == "optimal" and out.info["init"] != "row_bound"
    assert hs.solve(pol, jobs, cluster, solver="structured", options={"base_size": 4}).objective == pytest.approx(
        hs.solve(pol, jobs, cluster, solver="highs").objective, rel=REL)


def test_row_bound_aggregate_check_also_declines_with_cpu_rows(monkeypatch) -> None:
    """With a CPU row per type (extra coupling rows) a max-min level far below every job's
    own time row is declined by the GPU rows' aggregate check, before any price search
    (that search ran to its stall on cpu_rows_1e5 and cost a third of the solve)."""
    from hetsched.solvers.structured import level

    def no_search(*args, **kwargs):
        raise AssertionError("the price search ran although the aggregate check declines")

    monkeypatch.setattr(level, "_fitting_assignment", no_search)
    rng = np.random.default_rng(5)
    n = 3000
    jobs = hs.JobSet(rng.lognormal(0.0, 1.0, (n, 3)), gpu_types=["a", "b", "c"],
                     scale_factors=rng.choice([1, 2, 4], n), cpus_per_gpu=rng.choice([2.0, 4.0, 8.0], n))
    cluster = hs.Cluster({"a": 300, "b": 200, "c": 100}, cpus={"a": 900.0, "b": 600.0, "c": 300.0})
    pol = hs.policies.MaxMinFairness(second_stage=False)
    lp = pol.formulate(jobs, cluster)
    assert lp.meta["structure"]["resources"]["coupling"], "the program has no CPU rows"
    out = get_backend("structured").solve(lp, options={"fallback": "none"})
    ref = get_backend("highs").solve(lp)
    assert out.status == ref.status == "optimal" and out.info["init"] != "row_bound"
    assert out.objective == pytest.approx(ref.objective, rel=REL)


@pytest.mark.parametrize("policy", ["min_makespan", "finish_time_fairness", "max_min_fairness"])
def test_second_stage_prices_from_the_stage1_witness(policy: str, caplog) -> None:
    """Stage 2 takes its first prices from the witness sample (no level LP) and still
    matches HiGHS; finish-time fairness hands its best Newton step's allocation over."""
    jobs, cluster = hard_jobs(800, 6, 3)
    with caplog.at_level(logging.DEBUG, logger=FLOOR_LOG):
        agree(policy, jobs, cluster)
    assert ran(caplog, WITNESS)


@pytest.mark.parametrize(("n", "m", "seed"), [(400, 8, 1), (400, 10, 2), (1200, 8, 2)])
def test_overfilling_level_prices_give_way_to_the_witness(n: int, m: int, seed: int, caplog) -> None:
    """Stage 1 bound by capacity (no row bound): stage 2 starts at the level's prices; when
    the fixed jobs' vertices overfill the first master there, the witness sample re-prices
    it (min makespan at 3*10^4 on the hard family: 146 s -> under 1 s), same optimum."""
    jobs, cluster = hard_jobs(n, m, seed)
    with caplog.at_level(logging.DEBUG, logger=FLOOR_LOG):
        agree("min_makespan", jobs, cluster)
    assert ran(caplog, WITNESS) and not ran(caplog, ROW_BOUND)


def test_witness_survives_merging_duplicate_jobs(caplog) -> None:
    """A tenth of the jobs are copies (and the policy does not aggregate them): both stages
    merge them, and stage 2 averages the witness per class."""
    jobs, cluster = hard_jobs(600, 10, 1)
    rows = np.concatenate([np.arange(600), np.arange(60)])
    dup = hs.JobSet(jobs.throughputs[rows], gpu_types=jobs.gpu_types, scale_factors=jobs.scale_factors[rows],
                    weights=jobs.weights[rows], steps_remaining=jobs.steps_remaining[rows],
                    time_since_start=jobs.field("time_since_start", 0.0)[rows])
    with caplog.at_level(logging.DEBUG, logger=FLOOR_LOG):
        agree("min_makespan", dup, cluster, options={**SMALL, "base_size": 8}, aggregate=False)
    assert ran(caplog, WITNESS)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), n=st.integers(1, 400), m=st.integers(1, 10),
       policy=st.sampled_from(["min_makespan", "finish_time_fairness", "max_min_fairness"]))
def test_property_hard_family_two_stages(seed: int, n: int, m: int, policy: str, caplog) -> None:
    """Hard-family instances of any size down to one job and one type (weights, gangs up
    to the largest type's count, tiny capacities): the same optimum as HiGHS, whichever of
    the shortcuts ran."""
    jobs, cluster = hard_jobs(n, m, seed)
    largest = max(cluster.capacities(jobs.gpu_types))
    jobs = hs.JobSet(jobs.throughputs, gpu_types=jobs.gpu_types, scale_factors=np.minimum(jobs.scale_factors, largest),
                     weights=jobs.weights, steps_remaining=jobs.steps_remaining,
                     time_since_start=jobs.field("time_since_start", 0.0))
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger=FLOOR_LOG):
        agree(policy, jobs, cluster)


@pytest.mark.parametrize("coarse_rounds", [0, 2])
def test_stabilized_prices_past_the_regroup_rounds(coarse_rounds: int) -> None:
    """While the best gap is coarse, rounds that move violators into the master price at
    the stabilized point too (here stage 2's rounds 2-4 with ``floor_coarse_rounds=0``,
    round 4 at gap 8e-2 with 2): the violators differ, the optimum does not."""
    jobs, cluster = hard_jobs(1200, 10, 2)
    agree("max_min_fairness", jobs, cluster, options={**SMALL, "floor_coarse_rounds": coarse_rounds})
