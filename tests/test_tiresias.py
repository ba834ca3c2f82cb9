"""Tiresias (discretized 2D-LAS / 2D-Gittins) through the per-round interface (issue 9, part 3).

Queue moves are worked by hand for short sequences of rounds; the Gittins index is
checked against a direct evaluation of its definition on a discrete distribution.
"""

from __future__ import annotations

import numpy as np
import pytest
from checker import assert_feasible
from sim_checker import check_simulation

import hetsched as hs
from hetsched.errors import ValidationError
from hetsched.mechanism import RoundPlan, ShareHistory
from hetsched.schedulers import ServiceDistribution, Tiresias, gittins_index


def run(sched, jobs, cluster, rounds, L):
    """Plan and record ``rounds`` rounds; return the jobs run each round and the states."""
    state = sched.initial_state()
    ran, states = [], []
    for _ in range(rounds):
        plan = sched.plan(jobs, cluster, state, round_seconds=L)
        ran.append(plan.jobs_on(jobs.gpu_types[0]).tolist())
        state = sched.record(state, plan)
        states.append(state)
    return ran, states


ABC = hs.JobSet([[1.0]] * 3, gpu_types=["v100"], ids=["a", "b", "c"], scale_factors=[2, 1, 1])
TWO_GPUS = hs.Cluster({"v100": 2})


def test_queue_moves_without_starvation_guard() -> None:
    """2 GPUs; a is a 2-GPU gang, b and c take one GPU; thresholds 100 and 300 GPU-s; 50 s rounds.

    r1: Q0 = [a, b, c]: a takes both GPUs -> attained 2 x 50 = 100 >= 100: a demoted to Q1.
    r2, r3: Q0 = [b, c] run (1 GPU each) -> after r3 both have 100: demoted, they join Q1
        *behind* a: Q1 = [a, b, c].
    r4: a (head of Q1) runs on both GPUs; b, c wait (attained 200 < 300 for a).
    r5: a ran last round, so it stays ahead: runs again -> 300: demoted to Q2.
    r6: Q1 = [b, c] run.
    """
    ran, states = run(Tiresias(thresholds=[100.0, 300.0]), ABC, TWO_GPUS, 6, 50.0)
    assert ran == [["a"], ["b", "c"], ["b", "c"], ["a"], ["a"], ["b", "c"]]
    assert [s.queue.tolist() for s in states] == [[1, 0, 0], [1, 0, 0], [1, 1, 1], [1, 1, 1], [2, 1, 1], [2, 1, 1]]
    assert states[-1].attained.tolist() == [300.0, 150.0, 150.0]
    assert states[4].entered.tolist() == [250.0, 150.0, 150.0]


def test_starvation_guard_promotes_waiting_job() -> None:
    """Same jobs, PROMOTE_KNOB = 2: a waiting job below Q0 returns to Q0 (attained reset) once
    its waiting time since its last promotion reaches 2 x its running time since then.

    a ran 50 s in r1, then waits in r2 and r3: 100 >= 2 x 50 after r3 -> promoted to Q0 while
    b and c drop to Q1; r4: a runs (Q0), reaching 100 -> Q1 again, behind b and c; r5: b, c
    run; r6: b, c run again (they ran last round); after r6 a has waited 100 >= 2 x 50: promoted
    a second time.
    """
    ran, states = run(Tiresias(thresholds=[100.0, 300.0], promote_knob=2.0), ABC, TWO_GPUS, 6, 50.0)
    assert ran == [["a"], ["b", "c"], ["b", "c"], ["a"], ["b", "c"], ["b", "c"]]
    assert states[2].queue.tolist() == [0, 1, 1] and states[2].attained[0] == 0.0
    assert states[3].queue.tolist() == [1, 1, 1]
    assert states[5].queue.tolist() == [0, 1, 1]
    assert states[5].promotions.tolist() == [2, 0, 0]
    assert states[5].total_service.tolist() == [200.0, 200.0, 200.0]


def test_new_jobs_join_queue_zero_and_finished_jobs_drop() -> None:
    """A job arriving later starts in Q0 and overtakes jobs that were demoted."""
    sched = Tiresias(thresholds=[100.0])
    cluster = hs.Cluster({"v100": 1})
    first = hs.JobSet([[1.0]], gpu_types=["v100"], ids=["old"])
    state = sched.record(None, sched.plan(first, cluster, None, round_seconds=100.0))
    assert state.queue.tolist() == [1]
    both = hs.JobSet([[1.0], [1.0]], gpu_types=["v100"], ids=["old", "new"])
    plan = sched.plan(both, cluster, state, round_seconds=100.0)
    assert plan.jobs_on("v100").tolist() == ["new"] and plan.new_jobs == 1
    assert plan.queue.tolist() == [1, 0] and plan.rank.tolist() == [1, 0]
    only_new = hs.JobSet([[1.0]], gpu_types=["v100"], ids=["new"])
    plan2 = sched.plan(only_new, cluster, sched.record(state, plan), round_seconds=100.0)
    assert plan2.dropped_ids.tolist() == ["old"]


def direct_gittins(a, values, probs, quantum=None):
    """G(a) = sup_Delta P(S - a <= Delta | S > a) / E[min(S - a, Delta) | S > a], by brute force."""
    alive = [(v, p) for v, p in zip(values, probs) if v > a]
    if not alive:
        return 0.0
    mass = sum(p for _, p in alive)
    deltas = [quantum] if quantum is not None else sorted({v - a for v, _ in alive} | set(np.linspace(1e-3, max(values), 400)))
    best = 0.0
    for d in deltas:
        num = sum(p for v, p in alive if v - a <= d) / mass
        den = sum(p * min(v - a, d) for v, p in alive) / mass
        best = max(best, num / den)
    return best


@pytest.mark.parametrize("quantum", [None, 50.0, 400.0])
def test_gittins_index_matches_direct_computation(quantum) -> None:
    values = [30.0, 100.0, 100.0, 250.0, 900.0]
    weights = [2.0, 1.0, 1.0, 3.0, 1.0]
    dist = ServiceDistribution(values, weights)
    attained = [0.0, 10.0, 30.0, 99.0, 100.0, 240.0, 500.0, 900.0, 1000.0]
    got = gittins_index(attained, dist, quantum)
    v, p = dist.values.tolist(), dist.probabilities.tolist()
    want = [direct_gittins(a, v, p, quantum) for a in attained]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def test_gittins_hand_values() -> None:
    """Sizes 1 or 10, probability 1/2 each. At a = 0: Delta = 1 gives (1/2) / 1 = 1/2; Delta = 10
    gives 1 / (1/2 + 5) = 2/11; so G = 1/2. At a = 1 only size 10 remains: G = 1/9. At 10: 0."""
    np.testing.assert_allclose(gittins_index([0.0, 1.0, 10.0], ServiceDistribution([1.0, 10.0])), [0.5, 1 / 9, 0.0])


def test_gittins_order_within_a_queue() -> None:
    """Sizes 100 or 1000 GPU-s (1/2 each). 'old' has run 100 GPU-s, so it must be a 1000 job:
    G = 1/900; a fresh job has G = 1/200. FIFO runs 'old' (head of Q0); 2D-Gittins runs 'new'."""
    cluster = hs.Cluster({"v100": 1})
    dist = ServiceDistribution([100.0, 1000.0])
    one = hs.JobSet([[1.0]], gpu_types=["v100"], ids=["old"])
    both = hs.JobSet([[1.0], [1.0]], gpu_types=["v100"], ids=["old", "new"])
    for sched, expect in ((Tiresias(thresholds=[5000.0]), "old"),
                          (Tiresias(thresholds=[5000.0], distribution=dist), "new")):
        state = sched.record(None, sched.plan(one, cluster, None, round_seconds=100.0))
        plan = sched.plan(both, cluster, state, round_seconds=100.0)
        assert plan.jobs_on("v100").tolist() == [expect]
    np.testing.assert_allclose(plan.gittins, [1 / 900, 1 / 200])


def test_epoch_based_service() -> None:
    """E-LAS-style: service counts epochs (given to record); threshold at 2 epochs."""
    sched = Tiresias(thresholds=[2.0], service="epochs")
    jobs = hs.JobSet([[1.0], [1.0]], gpu_types=["v100"], ids=["x", "y"])
    cluster = hs.Cluster({"v100": 1})
    plan = sched.plan(jobs, cluster, None)
    with pytest.raises(ValidationError, match="`progress`"):
        sched.record(None, plan)
    state = sched.record(None, plan, progress=[1.5, 0.0])
    assert state.queue.tolist() == [0, 0] and state.attained.tolist() == [1.5, 0.0]
    plan = sched.plan(jobs, cluster, state)
    state = sched.record(state, plan, progress=[0.5, 0.0])       # x reaches 2 epochs: Q1
    assert state.queue.tolist() == [1, 0]
    assert sched.plan(jobs, cluster, state).jobs_on("v100").tolist() == ["y"]


def test_plans_are_round_plans_on_heterogeneous_clusters() -> None:
    """Gangs on three types: capacity holds, the fastest type with room is used, and the plan
    feeds ShareHistory like the mechanism's plans."""
    rng = np.random.default_rng(0)
    n = 30
    T = rng.uniform(0.5, 3.0, (n, 3))
    s = rng.choice([1, 2, 4], n)
    jobs = hs.JobSet(T, gpu_types=["v100", "p100", "k80"], scale_factors=s)
    counts = [4, 4, 8]
    cluster = hs.Cluster(dict(zip(jobs.gpu_types, counts)))
    sched = Tiresias(thresholds=[1000.0, 10000.0])
    state, hist = sched.initial_state(), ShareHistory.empty()
    for _ in range(5):
        plan = sched.plan(jobs, cluster, state, round_seconds=360.0)
        assert isinstance(plan, RoundPlan)
        assert_feasible(plan.time_share, T, s, counts)
        run = plan.assignment >= 0
        # no higher-priority job was left out while a type it can use had room for it
        free = np.array(counts) - plan.gpus_used
        for j in np.flatnonzero(~run):
            assert not ((T[j] > 0) & (free >= s[j])).any()
        state = sched.record(state, plan)
        hist = hist.record(plan, 360.0)
    assert hist.rounds == 5 and state.rounds == 5


def test_sticky_keeps_the_last_type() -> None:
    """Round 1: p takes the V100 and q the K80 (r waits); p then finishes. In round 2 q (ahead
    of r: it ran) picks first: the faster V100, or with ``sticky`` its K80 (no migration)."""
    jobs = hs.JobSet([[2.0, 1.0]] * 3, gpu_types=["v100", "k80"], ids=["p", "q", "r"])
    cluster = hs.Cluster({"v100": 1, "k80": 1})
    for sticky, q_type, r_type in ((False, "v100", "k80"), (True, "k80", "v100")):
        sched = Tiresias(thresholds=[1e9], sticky=sticky)
        p1 = sched.plan(jobs, cluster)
        assert p1.to_frame()["gpu_type"].tolist() == ["v100", "k80", None]
        p2 = sched.plan(jobs.take([1, 2]), cluster, sched.record(None, p1))
        assert p2.to_frame()["gpu_type"].tolist() == [q_type, r_type]
        assert p2.migrated.tolist() == [not sticky, False]


def test_simulate_completes_every_job() -> None:
    rng = np.random.default_rng(2)
    n = 40
    jobs = hs.JobSet(rng.uniform(0.5, 3.0, (n, 2)), gpu_types=["v100", "k80"], scale_factors=rng.choice([1, 2], n),
                     arrival_times=np.sort(rng.uniform(0, 20000, n)), steps_remaining=rng.uniform(1e3, 5e4, n))
    res = hs.simulate(Tiresias(thresholds=[3600.0], promote_knob=4.0), jobs, hs.Cluster({"v100": 4, "k80": 4}))
    assert res.summary["n_completed"] == n and res.summary["status"] == "drained"
    assert (res.jobs["jct_s"] > 0).all() and res.summary["worst_ftf"] > 0
    assert check_simulation(res) == []


def test_two_jobs_through_simulate_by_hand() -> None:
    # a: 720 steps, b: 360 steps, 1 step/s, one GPU, 360 s rounds, threshold 360 GPU-s.
    # Round 1: a (FIFO head) runs 360 s and is demoted; round 2: b (queue 0) runs and
    # finishes at 720; round 3: a finishes at 1080.
    jobs = hs.JobSet([[1.0], [1.0]], gpu_types=["v100"], ids=["a", "b"], arrival_times=[0.0, 0.0],
                     steps_remaining=[720.0, 360.0])
    res = hs.simulate(Tiresias(thresholds=[360.0]), jobs, hs.Cluster({"v100": 1}),
                      options=hs.SimOptions(round_seconds=360.0))
    assert res.jobs["jct_s"].tolist() == [1080.0, 720.0]


# Expectations measured with the old per-scheduler replay loop (hetsched.schedulers.replay,
# deleted after this measurement) at commit bc042462b17c98e35052f42a584423d66f45f9fd, on
# generate_workload(40, rate_per_hour=6.0, seed=seed), cluster v100/p100/k80 x 8, 360 s
# rounds: (avg JCT, makespan, p99 JCT, preemptions, rounds). The round loop must give the same.
REPLAY_EXPECTED = {
    (0, "las"): (91153.23395628575, 589037.5401518376, 485899.4758169082, 542, 1637),
    (0, "las_time"): (93332.82290170211, 570148.8214501224, 481799.5779049298, 217, 1584),
    (1, "las"): (72014.50225955872, 395088.02008624986, 323360.12458437716, 342, 1098),
    (1, "las_time"): (78728.58063280457, 386322.42608641053, 314306.7623026689, 237, 1074),
    (2, "las"): (147089.09390534292, 695021.7081483536, 656879.8074192416, 414, 1931),
    (2, "las_time"): (163001.31003271468, 806619.6741990147, 728346.8010480274, 220, 2241),
}


@pytest.mark.parametrize(("seed", "name"), sorted(REPLAY_EXPECTED))
def test_round_loop_equals_old_replay(seed: int, name: str) -> None:
    from hetsched.sim import generate_workload

    trace = generate_workload(40, rate_per_hour=6.0, seed=seed)
    sched = {"las": Tiresias(thresholds=(3600.0, 36000.0), promote_knob=8.0),
             "las_time": Tiresias(thresholds=(1800.0,), service="time")}[name]
    res = hs.simulate(sched, trace, hs.Cluster({"v100": 8, "p100": 8, "k80": 8}),
                      options=hs.SimOptions(round_seconds=360.0))
    s = res.summary
    got = (s["avg_jct_s"], s["makespan_s"], s["p99_jct_s"], int(res.jobs["preemptions"].sum()), s["n_rounds"])
    assert got[3:] == REPLAY_EXPECTED[seed, name][3:]
    np.testing.assert_allclose(got[:3], REPLAY_EXPECTED[seed, name][:3], rtol=1e-12)
    assert check_simulation(res) == []


def test_epochs_service_is_rejected_in_simulate() -> None:
    jobs = hs.JobSet([[1.0]], gpu_types=["v100"], steps_remaining=[10.0])
    with pytest.raises(ValidationError, match="service='epochs'"):
        hs.simulate(Tiresias(service="epochs"), jobs, hs.Cluster({"v100": 1}))


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("thr", [[100.0, 50.0], [100.0, 100.0], [0.0], [-5.0, 10.0], [np.inf]])
def test_thresholds_must_increase(thr) -> None:
    with pytest.raises(ValidationError, match="`thresholds` must be strictly increasing positive numbers"):
        Tiresias(thresholds=thr)


@pytest.mark.parametrize(("values", "match"), [([], "at least one"), ([10.0, 0.0], "positive"),
                                               ([5.0, -1.0], "positive"), ([np.nan], "positive")])
def test_bad_gittins_distribution(values, match) -> None:
    with pytest.raises(ValidationError, match=match):
        ServiceDistribution(values)


def test_other_bad_options() -> None:
    with pytest.raises(ValidationError, match="needs a job-size `distribution`"):
        Tiresias(order="gittins")
    with pytest.raises(ValidationError, match="`promote_knob` must be a positive finite number or None; got 0"):
        Tiresias(promote_knob=0)
    with pytest.raises(ValidationError, match="`service` must be one of"):
        Tiresias(service="flops")
    with pytest.raises(ValidationError, match="`distribution` must be a ServiceDistribution"):
        Tiresias(distribution=[1.0, 2.0])
    sched = Tiresias()
    with pytest.raises(ValidationError, match="`state` must be a TiresiasState"):
        sched.plan(ABC, TWO_GPUS, state="nope")
    with pytest.raises(ValidationError, match="`round_seconds` must be a positive finite number of seconds; got 0"):
        sched.plan(ABC, TWO_GPUS, round_seconds=0)


@pytest.mark.parametrize("module", ['hetsched.schedulers.tiresias', 'hetsched.schedulers.gittins'])
def test_doctests(module: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.failed == 0 and result.attempted > 0
