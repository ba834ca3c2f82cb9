"""The one round loop: every scheduler kind through simulate(), allocation rows (pairs,
consolidation, Sia configurations), restart cost, and plans that break the loop's rules."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sim_checker import check_simulation

import hetsched as hs
from hetsched.errors import SchedulerError, ValidationError
from hetsched.formulations.spaces.packing import Packing
from hetsched.formulations.spaces.placement_sensitivity import PlacementSensitivity
from hetsched.sim import PolicyScheduler, RoundRows, SimOptions, generate_workload

CLUSTER = hs.Cluster({"v100": 4, "p100": 4, "k80": 4})


def _sia_bound(trace, cluster):
    """Goodput of Sia's bootstrap model for every job and configuration (the policy's input)."""
    types = tuple(cluster.gpu_types)
    jobs = trace.jobs.with_columns(types)
    js = hs.JobSet(jobs.throughputs, gpu_types=types, ids=np.arange(jobs.n_jobs), scale_factors=jobs.scale_factors)
    table = hs.policies.Sia().goodput_table(js, cluster)
    return lambda j, p, k, g: float(table.loc[j, (types[k], g)])


# ----------------------------------------------------------------------------- hand-built cases
def test_space_sharing_strictly_shortens_the_makespan() -> None:
    # Two jobs of 3,600 steps on one GPU at 1 step/s alone, 0.75 each together.
    # Time slicing: 7,200 s of work on one GPU -> makespan 7,200 s.
    # Sharing the GPU: both run at 0.75 the whole time -> 3,600 / 0.75 = 4,800 s.
    jobs = hs.JobSet([[1.0], [1.0]], gpu_types=["v100"], ids=["a", "b"], steps_remaining=[3600.0, 3600.0])
    packing = Packing.from_job_pairs(["a"], ["b"], [[[0.75, 0.75]]], gpu_types=["v100"])
    cl = hs.Cluster({"v100": 1})
    alone = hs.simulate(hs.policies.MaxMinFairness(), jobs, cl)
    shared = hs.simulate(hs.policies.MaxMinFairness(packing=packing), jobs, cl)
    assert alone.summary["makespan_s"] == pytest.approx(7200.0)
    assert shared.summary["makespan_s"] == pytest.approx(4800.0)
    assert shared.jobs["jct_s"].tolist() == pytest.approx([4800.0, 4800.0])
    runs = shared.runs
    assert (runs["partner"] >= 0).all()  # every entry is the pair: one GPU, counted once
    assert shared.rounds["gpu_seconds_v100"].max() == pytest.approx(360.0)
    assert check_simulation(shared, rate_bound=lambda j, p, k, g: 0.75) == []
    assert check_simulation(alone) == []


def test_sia_elasticity_strictly_lowers_jct() -> None:
    # One job measured at 1 step/s on 1 GPU, 36,000 steps, 4 V100s on one server.
    # Fixed gang (max-min fairness): 1 GPU -> 36,000 s.
    # Sia: 4 GPUs in one node at the bootstrap speed-up 4 / (1 + 0.1) -> 36,000 * 1.1 / 4 = 9,900 s.
    jobs = hs.JobSet([[1.0]], gpu_types=["v100"], steps_remaining=[36000.0])
    cl = hs.Cluster({"v100": 4})
    fixed = hs.simulate("max_min_fairness", jobs, cl)
    elastic = hs.simulate("sia", jobs, cl)
    assert fixed.summary["avg_jct_s"] == pytest.approx(36000.0)
    assert elastic.summary["avg_jct_s"] == pytest.approx(9900.0)
    assert (elastic.runs["gpus"] == 4).all()
    assert check_simulation(elastic, rate_bound=lambda j, p, k, g: g / (1.1 if g > 1 else 1.0)) == []


def test_consolidated_row_waits_rather_than_spreading() -> None:
    # An 8-GPU job on two 4-GPU servers: 2 steps/s consolidated, 1 step/s spread.
    cl = hs.Cluster.from_servers({"v100": 8}, gpus_per_server=4)
    jobs = hs.sim.Trace(hs.JobSet([[2.0]], gpu_types=["v100"], ids=["big"], scale_factors=[8],
                                  steps_remaining=[3600.0]), unconsolidated=[[1.0]])
    unc = pd.DataFrame({"v100": [1.0]}, index=["big"])
    # The truth (bound from the topology: no server holds 8 GPUs): the LP picks the
    # unconsolidated row, which runs spread at 1 step/s -> 3,600 s.
    truth = PlacementSensitivity(unc)
    res = hs.simulate(hs.policies.MaxMinFairness(placement_sensitivity=truth), jobs, cl)
    assert res.summary["avg_jct_s"] == pytest.approx(3600.0)
    assert res.runs["spread"].all()
    assert check_simulation(res) == []
    # A wrong bound (8 consolidated GPUs) makes the LP choose the consolidated row; placement
    # cannot put it on one server, so it waits instead of running spread.
    wrong = PlacementSensitivity(unc, consolidated_gpus={"v100": 8})
    res = hs.simulate(hs.policies.MaxMinFairness(placement_sensitivity=wrong), jobs, cl)
    assert res.summary["status"] == "stalled"
    assert len(res.runs) == 0 and not res.jobs["completed"].any()


def test_restart_cost_by_hand() -> None:
    # One job, 1 step/s, 1,000 steps, 30 s to (re)start: it pays once -> JCT 1,030 s.
    jobs = hs.JobSet([[1.0]], gpu_types=["v100"], steps_remaining=[1000.0])
    res = hs.simulate("max_min_fairness", jobs, hs.Cluster({"v100": 1}), options=SimOptions(restart_seconds=30.0))
    assert res.summary["avg_jct_s"] == pytest.approx(1030.0)
    assert res.jobs["restarts"].tolist() == [1]
    assert res.jobs["restart_seconds"].tolist() == [30.0]
    assert check_simulation(res) == []


def test_restart_cost_charged_on_every_resume() -> None:
    # Two equal jobs time-share one GPU: they alternate rounds, so every round is a (re)start.
    jobs = hs.JobSet([[1.0], [1.0]], gpu_types=["v100"], steps_remaining=[1000.0, 1000.0])
    res = hs.simulate("max_min_fairness", jobs, hs.Cluster({"v100": 1}), options=SimOptions(restart_seconds=60.0))
    runs = res.runs
    assert (runs["restart_s"] == 60.0).all()
    assert res.jobs["restarts"].sum() == len(runs)
    free = hs.simulate("max_min_fairness", jobs, hs.Cluster({"v100": 1}))
    assert res.summary["makespan_s"] > free.summary["makespan_s"]
    assert check_simulation(res) == []


def test_restart_cost_longer_than_a_round_makes_no_progress_that_round() -> None:
    jobs = hs.JobSet([[1.0]], gpu_types=["v100"], steps_remaining=[100.0])
    res = hs.simulate("max_min_fairness", jobs, hs.Cluster({"v100": 1}),
                      options=SimOptions(restart_seconds=500.0, round_seconds=360.0))
    # round 0: 360 s of restart (no progress); round 1 keeps the GPU: 100 s of work.
    assert res.summary["avg_jct_s"] == pytest.approx(460.0)
    assert check_simulation(res) == []


# ----------------------------------------------------------------------------- every scheduler kind
def _kinds():
    return {
        **{name: name for name in hs.list_policies()},
        "tiresias": hs.Tiresias(thresholds=(3600.0,)),
        "max_min_fairness+packing": hs.policies.MaxMinFairness(packing="workload"),
        "finish_time_fairness+placement": hs.policies.FinishTimeFairness(placement_sensitivity="workload"),
        "max_sum_throughput+both": hs.policies.MaxSumThroughput(packing="workload",
                                                                placement_sensitivity="workload"),
    }


@pytest.mark.parametrize("name", sorted(_kinds()))
def test_every_scheduler_runs_on_a_generated_workload(name: str) -> None:
    sched = _kinds()[name]
    cluster = hs.Cluster.from_servers({"v100": 8, "p100": 8, "k80": 8}, gpus_per_server=4)
    res = hs.simulate(sched, {"n_jobs": 12, "rate_per_hour": 4.0, "long_job_prob": 0.0}, cluster,
                      options=SimOptions(seed=3))
    assert res.summary["n_completed"] == 12, res.summary["status"]
    bound = None
    if name == "sia":
        bound = _sia_bound(generate_workload(12, rate_per_hour=4.0, long_job_prob=0.0, seed=3), cluster)
    elif "packing" in name or "both" in name:
        bound = lambda j, p, k, g: math.inf  # noqa: E731 - pair throughputs come from the catalogue's table
    assert check_simulation(res, rate_bound=bound) == []


def test_packed_rows_run_as_pairs_and_match_the_catalogue() -> None:
    cluster = hs.Cluster({"v100": 2, "p100": 2, "k80": 2})
    trace = generate_workload(16, rate_per_hour=30.0, seed=1, long_job_prob=0.0, pairs=True,
                              scale_factor_probs={1: 1.0})
    res = hs.simulate(hs.policies.MaxMinFairness(packing="workload"), trace, cluster)
    pair = res.runs[res.runs["partner"] >= 0]
    assert len(pair) > 0  # the LP chose sharing on this overloaded cluster
    cat, rows = trace.catalogue, trace.catalogue_rows
    packing = Packing.from_catalogue(cat, rows, np.arange(trace.n_jobs))
    table = packing.aligned(res.gpu_types)
    idx = {tuple(v): i for i, v in enumerate(packing.pairs.index.tolist())}

    def bound(j, p, k, g):
        if p < 0:
            return math.inf
        a, b = int(rows[j]), int(rows[p])
        lo, hi = min(a, b), max(a, b)
        return float(table[idx[lo, hi], k, 0 if a <= b else 1])

    assert check_simulation(res, rate_bound=bound) == []


def test_sia_hands_its_configuration_back_as_current() -> None:
    sched = PolicyScheduler(hs.policies.Sia(restart_penalty=0.5))
    trace = generate_workload(6, rate_per_hour=10.0, seed=2, long_job_prob=0.0)
    res = hs.simulate(sched, trace, CLUSTER)
    assert res.summary["n_completed"] == 6
    state = sched.initial_state()
    from hetsched.rounds.ledger import Ledger
    from hetsched.rounds.loop import RoundWorkload

    w = RoundWorkload.build(trace, CLUSTER, SimOptions(), sched)
    led = Ledger(w.total, 3, restart_seconds=0.0, record_runs=False)
    view = w.view(led, np.arange(3), 0.0, 0, True)
    rows = sched.plan_round(view, state)
    state = sched.record_round(state, rows, np.full(rows.n_rows, 360.0))
    assert state.current == {int(j): (CLUSTER.gpu_types[k], int(g)) for j, k, g in zip(rows.job, rows.gpu_type, rows.gpus)}


# ----------------------------------------------------------------------------- Hypothesis
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    caps=st.lists(st.integers(0, 5), min_size=1, max_size=3),
    n=st.integers(1, 6),
    seed=st.integers(0, 10_000),
    kind=st.sampled_from(["max_min_fairness", "fifo", "sia", "tiresias", "finish_time_fairness"]),
    restart=st.sampled_from([0.0, 45.0]),
)
def test_random_small_clusters(caps, n, seed, kind, restart) -> None:
    if max(caps) == 0:
        caps[0] = 1
    rng = np.random.default_rng(seed)
    types = [f"t{i}" for i in range(len(caps))]
    T = rng.uniform(0.1, 3.0, (n, len(caps))) * (rng.random((n, len(caps))) < 0.8)  # distinct, some zero
    s = rng.choice([1, 2, 4], n)
    for j in range(n):  # make every job runnable somewhere: a type with room for its gang
        ok = [k for k in range(len(caps)) if caps[k] >= s[j]]
        if not ok:
            s[j] = 1
            ok = [k for k in range(len(caps)) if caps[k] >= 1]
        if not (T[j, ok] > 0).any():
            T[j, ok[0]] = rng.uniform(0.1, 3.0)
    jobs = hs.JobSet(T, gpu_types=types, scale_factors=s, steps_remaining=rng.uniform(100, 5000, n),
                     arrival_times=np.sort(rng.uniform(0, 2000, n)))
    cluster = hs.Cluster(dict(zip(types, caps)))
    sched = hs.Tiresias(thresholds=(500.0,)) if kind == "tiresias" else kind
    res = hs.simulate(sched, jobs, cluster, options=SimOptions(round_seconds=120.0, restart_seconds=restart))
    assert res.summary["status"] == "drained"
    assert res.summary["n_completed"] == n
    bound = None
    if kind == "sia":
        bound = _sia_bound(hs.sim.as_trace(jobs), cluster)
    assert check_simulation(res, rate_bound=bound) == []


# ----------------------------------------------------------------------------- broken plans
class _Broken:
    """A scheduler that returns what ``make(view)`` builds."""

    def __init__(self, make):
        self.make = make

    def initial_state(self, start_time: float = 0.0):
        return None

    def plan_round(self, view, state):
        return self.make(view)

    def record_round(self, state, ran, seconds):
        return state


TWO = hs.JobSet([[1.0], [1.0]], gpu_types=["v100"], ids=["a", "b"], steps_remaining=[100.0, 100.0])


@pytest.mark.parametrize(("make", "match"), [
    (lambda v: RoundRows([0, 1], [0, 0], [1, 1], [1.0, 1.0]), r"round 0 .*'v100' is over-used: 2 GPUs for capacity 1"),
    (lambda v: RoundRows([0, 0], [0, 0], [1, 1], [1.0, 1.0]), r"job 0 is in rows whose shares sum to 2"),
    (lambda v: RoundRows([0], [0], [1], [1.0], partner=[0]), r"a pair needs two different jobs"),
    (lambda v: RoundRows([0], [0], [1], [1.0], partner=[7]), r"job 7 is not active"),
    (lambda v: RoundRows([0], [3], [1], [1.0]), r"GPU type column must be in \[0, 0\]"),
    (lambda v: RoundRows([0], [0], [0], [1.0]), r"at least one GPU"),
    (lambda v: RoundRows([0], [0], [1], [np.nan]), r"rate must be finite"),
    (lambda v: "nope", r"must return RoundRows"),
])
def test_broken_plans_raise_scheduler_error(make, match) -> None:
    with pytest.raises(SchedulerError, match=match):
        hs.simulate(_Broken(make), TWO, hs.Cluster({"v100": 1}))


def test_not_a_scheduler() -> None:
    with pytest.raises(ValidationError, match="`scheduler` must be a policy name"):
        hs.simulate(object(), TWO, hs.Cluster({"v100": 1}))


@pytest.mark.parametrize(("kw", "match"), [
    ({"restart_seconds": -1.0}, "`restart_seconds` must be a finite number"),
    ({"restart_seconds": math.inf}, "`restart_seconds` must be a finite number"),
    ({"restart_seconds": True}, "`restart_seconds` must be a finite number"),
    ({"restart_seconds": 5.0, "mechanism": "ideal"}, "needs `mechanism='rounds'`"),
    ({"no_such_option": 1}, r"unknown simulation option\(s\) \['no_such_option'\]"),
    ({"options": "fast"}, "`options` must be a hetsched.sim.SimOptions"),
])
def test_bad_options(kw, match) -> None:
    with pytest.raises(ValidationError, match=match):
        hs.simulate("fifo", TWO, hs.Cluster({"v100": 1}), **kw)


@pytest.mark.parametrize("kw", [{"reallocate": 720.0}, {"rule": "deficit"}, {"solver": "highs"},
                                {"reset_shares": False}, {"mechanism": "ideal"}])
def test_policy_options_are_not_silently_ignored_beside_a_round_scheduler(kw) -> None:
    with pytest.raises(ValidationError, match="PolicyScheduler|applies to policies"):
        hs.simulate(hs.Tiresias(), TWO, hs.Cluster({"v100": 1}), options=SimOptions(**kw))


def test_options_object_and_keywords_agree() -> None:
    a = hs.simulate("fifo", TWO, hs.Cluster({"v100": 1}), options=SimOptions(round_seconds=60.0))
    with pytest.warns(DeprecationWarning, match=r"\['round_seconds'\] are deprecated.*options=SimOptions"):
        b = hs.simulate("fifo", TWO, hs.Cluster({"v100": 1}), round_seconds=60.0)
    assert a.jobs["jct_s"].tolist() == b.jobs["jct_s"].tolist()


def test_workload_placeholder_is_rejected_outside_simulate() -> None:
    with pytest.raises(ValidationError, match="works only in hetsched.simulate"):
        hs.solve(hs.policies.MaxMinFairness(packing="workload"), TWO, hs.Cluster({"v100": 1}))


def test_workload_placeholder_needs_a_catalogue() -> None:
    with pytest.raises(ValidationError, match="needs a workload sampled from a throughput catalogue"):
        hs.simulate(hs.policies.MaxMinFairness(packing="workload"), TWO, hs.Cluster({"v100": 1}))


def test_consolidated_rows_are_placed_again_from_scratch_when_stickiness_fragments() -> None:
    # Found by a stress run: 7 V100 on servers of 4 + 3, Sia rows of 2, 1, 2, 2 GPUs (all but
    # the 1-GPU row must sit on one server). Keeping last round's GPUs spread a 2-GPU row
    # over both servers, which was dropped every round while two GPUs idled; the round is now
    # placed again without `previous` and everything drains.
    tr = generate_workload(9, rate_per_hour=16.265884682602263, seed=214843, pairs=True, long_job_prob=0.0,
                           scale_factor_probs={1: 0.5, 2: 0.5})
    cl = hs.Cluster.from_servers({"v100": 7, "p100": 3, "k80": 3}, gpus_per_server=4)
    res = hs.simulate("sia", tr, cl, options=SimOptions(reallocate=3600.0, max_time=400 * 3600.0))
    assert res.summary["status"] == "drained"
    assert check_simulation(res, rate_bound=_sia_bound(tr, cl)) == []


def test_a_pending_solve_is_reported_to_the_driver() -> None:
    # With a re-solve period the rounds between solves say a solve is pending, so a round where
    # nothing runs is not taken for a stall; a round that solved says no.
    jobs = hs.JobSet([[1.0], [1.0]], gpu_types=["v100"], ids=["a", "b"], arrival_times=[0.0, 100.0],
                     steps_remaining=[3600.0, 360.0])
    sched = PolicyScheduler("max_min_fairness", reallocate=1800.0, arrivals="wait")
    seen = []
    real = sched.plan_round

    def spy(view, state):
        rows = real(view, state)
        seen.append((view.now, rows.info["solved"], rows.info["solve_pending"]))
        return rows

    sched.plan_round = spy
    res = hs.simulate(sched, jobs, hs.Cluster({"v100": 1}))
    assert res.summary["status"] == "drained"
    assert all(pending == (not solved) for _, solved, pending in seen)
    assert float(res.jobs.set_index("job_id").loc["b", "start_s"]) == 1800.0   # b waited for the periodic solve


@pytest.mark.parametrize("policy", ["max_min_fairness", "sia", "fifo",
                                    hs.policies.MaxMinFairness(packing="workload"),
                                    hs.policies.FinishTimeFairness(placement_sensitivity="workload")])
def test_policy_scheduler_rows_pass_the_rules_it_is_trusted_with(policy) -> None:
    # PolicyScheduler declares rows_checked (the driver skips check_rows for it): verify that
    # claim by checking every round's rows independently.
    from hetsched.rounds.protocol import check_rows

    sched = PolicyScheduler(policy)
    assert sched.rows_checked is True
    real = sched.plan_round
    n_checked = []

    def spy(view, state):
        rows = real(view, state)
        check_rows(rows, view)
        n_checked.append(rows.n_rows)
        return rows

    sched.plan_round = spy
    res = hs.simulate(sched, {"n_jobs": 15, "rate_per_hour": 20.0, "long_job_prob": 0.0},
                      hs.Cluster.from_servers({"v100": 4, "p100": 4, "k80": 8}, gpus_per_server=4),
                      options=SimOptions(seed=5))
    assert res.summary["n_completed"] == 15 and sum(n_checked) > 0


def test_a_failed_certificate_is_counted_by_the_simulator(monkeypatch) -> None:
    # A solve whose certificate fails still hands X over (it has a solution), but the round
    # log marks it not ok and the summary counts it.
    import dataclasses as dc

    import hetsched.rounds.policy_scheduler as ps

    real = ps.solve

    def doctored(policy, jobs, cluster, **kw):
        res = real(policy, jobs, cluster, **kw)
        return dc.replace(res, status="failed_certificate", success=False)

    monkeypatch.setattr(ps, "solve", doctored)
    res = hs.simulate("max_min_fairness", TWO, hs.Cluster({"v100": 1}))
    assert res.summary["n_completed"] == 2
    assert res.summary["certificate_failures"] == res.summary["n_solves"] > 0
    assert res.summary["failed_solves"] == res.summary["n_solves"]


def test_a_pair_table_does_not_change_the_generated_jobs() -> None:
    # A packed policy's generator spec asks for a pair table; the jobs must be the ones every
    # other policy gets with the same seed, or comparisons are between different workloads.
    a = generate_workload(30, rate_per_hour=4.0, seed=7)
    b = generate_workload(30, rate_per_hour=4.0, seed=7, pairs=True)
    assert b.catalogue.pairs is not None and a.catalogue.pairs is None
    np.testing.assert_array_equal(a.jobs.throughputs, b.jobs.throughputs)
    np.testing.assert_array_equal(a.total_steps, b.total_steps)
    np.testing.assert_array_equal(a.arrival_times, b.arrival_times)


@pytest.mark.parametrize(("policy", "kw"), [("max_min_fairness", {}), ("fifo", {"restart_seconds": 45.0}),
                                            ("finish_time_fairness", {"reallocate": 1000.0}),
                                            ("max_min_fairness", {"placement": True, "restart_seconds": 400.0})])
def test_fast_accounting_path_equals_the_general_one(policy, kw, monkeypatch) -> None:
    # Whole one-job rows take a lean accounting path; forcing every round through the general
    # path (pairs, shares) must give exactly the same jobs, rounds and run-log tables.
    from hetsched.rounds.ledger import Ledger

    spec = {"n_jobs": 25, "rate_per_hour": 6.0, "long_job_prob": 0.0}
    cl = hs.Cluster({"v100": 8, "p100": 4, "k80": 4})
    lean = hs.simulate(policy, spec, cl, options=SimOptions(seed=11, **kw))
    monkeypatch.setattr(Ledger, "_whole_rows", staticmethod(lambda rows, fluid: False))
    general = hs.simulate(policy, spec, cl, options=SimOptions(seed=11, **kw))
    pd.testing.assert_frame_equal(lean.jobs, general.jobs)
    timing = [c for c in lean.rounds if c.endswith("_s")]
    pd.testing.assert_frame_equal(lean.rounds.drop(columns=timing), general.rounds.drop(columns=timing))
    pd.testing.assert_frame_equal(lean.runs, general.runs)
    assert len(lean.runs) > 0