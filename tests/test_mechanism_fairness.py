"""No starvation: how long a job with a positive allocation entry can wait in a row.

Ties (equal rows, what an interior-point solver returns for a symmetric LP) with the share
history reset at every round: the waiting tie-break makes the schedule a round robin, so
among n single-GPU jobs on C GPUs no job waits more than ceil(n / C) - 1 rounds in a row.

Unequal rows: a never-served entry's deficit is measured over max(elapsed, seconds waited),
so a job that keeps waiting outranks jobs that just ran. ``docs/mechanism.md`` ("Ties and
starvation") proves the bound that :func:`wait_bound` computes (written here from the
statement, independently of the planner); the tests drive the planner for many rounds with
X from a vertex (HiGHS), an interior point (Clarabel) and arbitrary capacity-feasible rows,
with resets every round and at random rounds, and check every waiting stretch against it.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sim_checker import check_simulation

import hetsched as hs
from hetsched.errors import ValidationError
from hetsched.mechanism import ShareHistory, plan_round_arrays

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "gavel"


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 12), cap=st.integers(1, 5), rounds=st.integers(1, 30),
       noise=st.floats(0.0, 1e-9), rule=st.sampled_from(["gavel", "deficit"]), seed=st.integers(0, 1000))
def test_equal_rows_with_resets_every_round_are_a_round_robin(n, cap, rounds, noise, rule, seed) -> None:
    rng = np.random.default_rng(seed)
    x = min(1.0, cap / n)
    X = np.full((n, 1), x) * (1.0 - noise * rng.random((n, 1)))   # interior-point noise on equal rows
    h = ShareHistory.empty()
    waited = np.zeros(n, dtype=int)
    worst = 0
    bound = math.ceil(n / cap) - 1
    for _ in range(rounds + bound + 1):
        plan = plan_round_arrays(X, np.ones(n, int), [cap], h, gpu_types=["v100"], rule=rule)
        run = plan.assignment >= 0
        assert run.sum() == min(n, cap)  # work conserving
        waited = np.where(run, 0, waited + 1)
        worst = max(worst, int(waited.max()))
        h = h.record(plan, 360.0).reset()   # a new allocation every round
    assert worst <= bound


def test_old_tie_break_would_starve() -> None:
    # Without the waiting key the same job wins every fresh start: show the test above can fail.
    from hetsched.mechanism.priority import priority_order

    X = np.full((3, 1), 1 / 3)
    zeros = np.zeros((3, 1))
    first = [priority_order(X, zeros, np.zeros(3), np.full(3, -1), 360.0, rule="gavel", stickiness=0.0,
                            zero_tol=1e-9)[0][0] for _ in range(3)]
    assert first == [0, 0, 0]
    waits = np.array([2, 0, 1])
    assert priority_order(X, zeros, np.zeros(3), np.full(3, -1), 360.0, rule="gavel", stickiness=0.0,
                          zero_tol=1e-9, waiting=waits)[0].tolist() == [0, 2, 1]


# ----------------------------------------------------------------------------- unequal X
DELTA = 1e-6   # keys are compared at 6 decimals (in rounds): a tie within 1e-6 may go either way


def wait_bound(X: np.ndarray, s: np.ndarray, cap: np.ndarray, j: int, zero_tol: float = 1e-9) -> float:
    """The bound of docs/mechanism.md on tau, the rounds job j waits in a row once it has not
    run since the last share reset: the least, over j's types k with x' = X[j,k] - 1e-6 > 0,
    of two bounds that both hold:

    * window:  tau <= 2 * floor(B_k / a_k), B_k = sum_{i != j, X[i,k] > 0} s_i * ceil(X[i,k] / x'),
      a_k = C_k - s_j + 1;
    * log:     a_k * t <= sum_i s_i * (1 + floor(ln t / ln(1 / q_ik))) for every t <= tau,
      q_ik = max(0, 1 - x' / X[i,k]) (q = 0 contributes s_i).
    """
    best = math.inf
    for k in range(X.shape[1]):
        xp = X[j, k] - DELTA
        if X[j, k] <= zero_tol or xp <= 0 or s[j] > cap[k]:
            continue
        a = int(cap[k]) - int(s[j]) + 1
        others = [i for i in range(X.shape[0]) if i != j and X[i, k] > zero_tol]
        window = 2 * (sum(int(s[i]) * math.ceil(X[i, k] / xp) for i in others) // a)
        q = [max(0.0, 1.0 - xp / X[i, k]) for i in others]
        t = 0
        while t < window:
            nxt = t + 1
            rhs = sum(int(s[i]) * (1 + (0 if qi == 0.0 else math.floor(math.log(nxt) / -math.log(qi))))
                      for i, qi in zip(others, q))
            if a * nxt > rhs:
                break
            t = nxt
        best = min(best, window, t)
    return best


def drive(X, s, cap, rounds, resets, rule, *, backfill=True, old_rule=False):
    """Run the planner for ``rounds`` rounds with a fixed X; ``resets[r]`` resets all shares
    before round r. Returns, per job, the longest run of rounds it waited while it had not
    run since the last reset (the stretch the bound speaks of), and the planned assignments.
    ``old_rule`` forgets the seconds waited before every plan (the rule before this change)."""
    n, m = X.shape
    h = ShareHistory.empty()
    unserved = np.ones(n, dtype=bool)     # fresh history: nobody has run since the "reset"
    tau = np.zeros(n, dtype=int)
    worst = np.zeros(n, dtype=int)
    plans = []
    for r in range(rounds):
        if resets[r] and r > 0:
            h = h.reset()
            unserved[:] = True
        if old_rule:
            h = dataclasses.replace(h, seconds_waiting=np.zeros(h.n_jobs))
        plan = plan_round_arrays(X, s, cap, h, gpu_types=[f"t{k}" for k in range(m)], rule=rule,
                                 backfill=backfill)
        run = plan.assignment >= 0
        assert plan.gpus_used.tolist() == np.bincount(plan.assignment[run], weights=s[run], minlength=m).tolist()
        tau = np.where(run, 0, np.where(unserved, tau + 1, 0))
        unserved &= ~run
        worst = np.maximum(worst, tau)
        plans.append(plan.assignment.copy())
        h = h.record(plan, 360.0)
    return worst, np.array(plans)


def _check_bound(X, s, cap, worst) -> None:
    for j in range(X.shape[0]):
        bound = wait_bound(X, s, cap, j)
        assert worst[j] <= bound, (j, worst[j], bound, X.round(4).tolist())


@st.composite
def feasible_rows(draw, gangs=(1,)):
    """Arbitrary unequal X: random sparse rows summing to at most 1, capacity-feasible."""
    n = draw(st.integers(2, 9))
    m = draw(st.integers(1, 3))
    cap = np.array(draw(st.lists(st.integers(1, 6), min_size=m, max_size=m)))
    s = np.array(draw(st.lists(st.sampled_from(gangs), min_size=n, max_size=n)))
    seed = draw(st.integers(0, 10_000))
    rng = np.random.default_rng(seed)
    X = rng.random((n, m)) ** 2 * (rng.random((n, m)) < 0.8)
    X[s[:, None] > cap[None, :]] = 0.0
    X /= np.maximum(X.sum(axis=1, keepdims=True), 1.0) * rng.uniform(1.0, 1.5, (n, 1))
    load = (s[:, None] * X).sum(axis=0)
    X *= np.minimum(1.0, cap / np.maximum(load, 1e-12))[None, :]
    return X, s, cap, seed


@settings(max_examples=40, deadline=None)
@given(case=feasible_rows(), rule=st.sampled_from(["gavel", "deficit"]))
def test_unequal_rows_reset_every_round_wait_within_bound(case, rule) -> None:
    X, s, cap, _ = case
    worst, _ = drive(X, s, cap, 80, np.ones(80, bool), rule)
    _check_bound(X, s, cap, worst)


@settings(max_examples=40, deadline=None)
@given(case=feasible_rows(gangs=(1, 1, 2, 4)), p=st.floats(0.05, 1.0), seed=st.integers(0, 1000))
def test_gavel_rule_random_resets_and_gangs_wait_within_bound(case, p, seed) -> None:
    # rule="gavel" with backfill: from the first round at which a waiting job has not run
    # since the last reset, it waits at most the bound, whatever the reset pattern.
    X, s, cap, _ = case
    resets = np.random.default_rng(seed).random(80) < p
    worst, _ = drive(X, s, cap, 80, resets, "gavel")
    _check_bound(X, s, cap, worst)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(3, 10), m=st.integers(1, 3), seed=st.integers(0, 10_000),
       solver=st.sampled_from(["highs", "clarabel"]), aware=st.booleans(), every=st.booleans())
def test_lp_vertex_and_interior_allocations_wait_within_bound(n, m, seed, solver, aware, every) -> None:
    # X from an actual solve: a vertex (HiGHS) or an interior point (Clarabel); the agnostic
    # single-stage LP is symmetric in the jobs, so the interior point spreads X over them.
    rng = np.random.default_rng(seed)
    types = ["v100", "p100", "k80"][:m]
    s = rng.choice([1, 1, 1, 2], size=n)
    cap = rng.integers(2, 5, size=m)
    jobs = hs.JobSet(rng.uniform(0.5, 4.0, (n, m)), gpu_types=types, scale_factors=s)
    policy = (hs.policies.MaxMinFairness() if aware
              else hs.policies.MaxMinFairness(heterogeneity_aware=False, second_stage=False))
    alloc = hs.solve(policy, jobs, hs.Cluster(dict(zip(types, cap.tolist()))), solver=solver)
    assert alloc.has_solution, alloc.message
    X = np.clip(alloc.X, 0.0, None)
    resets = np.ones(60, bool) if every else rng.random(60) < 0.3
    rule = "gavel" if not every else ("gavel", "deficit")[seed % 2]
    worst, _ = drive(X, s, cap, 60, resets, rule)
    _check_bound(X, s, cap, worst)


def test_old_rule_starves_a_smaller_row_by_hand() -> None:
    # One GPU, X = (0.6, 0.4), shares reset before every round. Old rule: both entries +inf,
    # deficits 0.6 and 0.4 rounds every round, so job 0 always wins and job 1 never runs.
    # New rule: job 1's claim grows with its wait, 0.4 * (w + 1) in rounds:
    #   round 1: 0.6 vs 0.4 -> job 0; round 2: job 0 just ran (0.6) vs 0.8 -> job 1;
    #   round 3: job 0 waited one round (1.2) vs 0.4 -> job 0; ... alternating.
    X = np.array([[0.6], [0.4]])
    s, cap = np.array([1, 1]), np.array([1])
    worst_old, plans_old = drive(X, s, cap, 12, np.ones(12, bool), "gavel", old_rule=True)
    assert plans_old[:, 1].tolist() == [-1] * 12 and worst_old[1] == 12
    assert wait_bound(X, s, cap, 1) == 1      # window 2*floor(2/1) = 4; log: 2 > 1 + floor(ln 2 / ln 3)
    worst, plans = drive(X, s, cap, 12, np.ones(12, bool), "gavel")
    assert plans[:, 0].tolist() == [0, -1] * 6 and worst.tolist() == [1, 1]
    _, plans_d = drive(X, s, cap, 12, np.ones(12, bool), "deficit")
    assert plans_d.tolist() == plans.tolist()   # at a reset both rules order by x * (w / L + 1)


def test_old_rule_exceeds_the_bound_on_random_rows() -> None:
    # The Hypothesis tests above can fail: the old rule breaks the bound on unequal rows.
    rng = np.random.default_rng(3)
    X = np.array([[0.9], [0.8], [0.7], [0.35], [0.15], [0.1]])
    s, cap = np.ones(6, dtype=int), np.array([3])
    worst_old, _ = drive(X, s, cap, 60, np.ones(60, bool), "gavel", old_rule=True)
    bounds = [wait_bound(X, s, cap, j) for j in range(6)]
    assert any(w > b for w, b in zip(worst_old, bounds)), (worst_old, bounds)
    worst, _ = drive(X, s, cap, 60, rng.random(60) < 0.5, "gavel")
    assert all(w <= b for w, b in zip(worst, bounds))


@settings(max_examples=30, deadline=None)
@given(case=feasible_rows(gangs=(1, 2)), rule=st.sampled_from(["gavel", "deficit"]),
       wc=st.booleans(), sticky=st.sampled_from([0.0, 0.2]))
def test_waited_seconds_change_nothing_without_resets(case, rule, wc, sticky) -> None:
    # With no reset, a job's seconds waited never exceed its elapsed time, so the new claim
    # max(e, w) is e and every plan equals the one planned without the seconds waited.
    from hetsched.mechanism.packing import greedy_pack
    from hetsched.mechanism.priority import priority_order

    X, s, cap, _ = case
    n = X.shape[0]
    h = ShareHistory.empty()
    for _ in range(25):
        plan = plan_round_arrays(X, s, cap, h, gpu_types=[f"t{k}" for k in range(X.shape[1])], rule=rule,
                                 work_conserving=wc, stickiness=sticky)
        assert (h.seconds_waiting <= h.elapsed).all()
        ej, ek = priority_order(X, h.received if h.n_jobs else np.zeros_like(X),
                                h.elapsed if h.n_jobs else np.zeros(n),
                                h.last_type if h.n_jobs else np.full(n, -1), 360.0, rule=rule, stickiness=sticky,
                                zero_tol=1e-9, work_conserving=wc,
                                waiting=h.rounds_waiting if h.n_jobs else np.zeros(n))
        assert plan.assignment.tolist() == greedy_pack(ej, ek, s, cap, n)[0].tolist()
        h = h.record(plan, 360.0)


def test_seconds_waiting_is_recorded_and_survives_resets() -> None:
    X = np.array([[0.6], [0.4]])
    h = ShareHistory.empty()
    plan = plan_round_arrays(X, [1, 1], [1], h, gpu_types=["v100"])     # deficits 0.6 > 0.4 round: job 0
    h = h.record(plan, 300.0)
    assert h.seconds_waiting.tolist() == [0.0, 300.0]
    h = h.reset().reset(decay=0.5)
    assert h.seconds_waiting.tolist() == [0.0, 300.0] and h.elapsed.tolist() == [0.0, 0.0]
    # both +inf; deficits (rounds): job 0: 0.6 * (0 + 360) / 360 = 0.6, job 1: 0.4 * (300 + 360) / 360 = 0.733
    plan = plan_round_arrays(X, [1, 1], [1], h, gpu_types=["v100"])
    assert plan.assignment.tolist() == [-1, 0]
    h = h.record(plan, 360.0)
    assert h.seconds_waiting.tolist() == [360.0, 0.0]
    # a history stored before the field existed reads as zeros
    old = ShareHistory(gpu_types=("v100",), job_ids=np.array([4]), received=np.zeros((1, 1)), elapsed=np.zeros(1),
                       attained=np.zeros((1, 1)), last_type=np.array([-1]), preemptions=np.zeros(1, int),
                       rounds_waiting=np.zeros(1, int))
    assert old.seconds_waiting.tolist() == [0.0]


@pytest.mark.skipif(not (DATA / "traces" / "generated").is_dir(), reason="../shared/data/gavel is not present")
def test_interior_solution_does_not_starve_on_gavels_trace() -> None:
    from hetsched.sim import load_trace

    cat = hs.load_gavel_throughputs(DATA / "simulation_throughputs.json")
    tr = load_trace(DATA / "traces" / "generated" / "gavel_generator_n300_lam900_seed5.trace", throughputs=cat)
    cl = hs.Cluster({"v100": 4, "p100": 4, "k80": 4})
    pol = hs.policies.MaxMinFairness(heterogeneity_aware=False, second_stage=False)
    p99 = {s: hs.simulate(pol, tr, cl,
                          options=hs.SimOptions(placement=False, solver=s, record_runs=False)).summary["p99_jct_s"]
           for s in ("highs", "clarabel")}
    # before the waiting tie-break: 43.8 h (clarabel) against 29.2 h (highs)
    assert p99["clarabel"] <= 1.15 * p99["highs"]


# ----------------------------------------------------------------------------- backfill or not
def _blocking_reference(entry_job, entry_type, s, cap, n):
    """Jobs in order of first appearance; each tries its entries in order; stop at the first misfit."""
    free = list(cap)
    out = [-1] * n
    seen = []
    for j in entry_job:
        if j not in seen:
            seen.append(j)
    for j in seen:
        types = [k for jj, k in zip(entry_job, entry_type) if jj == j]
        fit = [k for k in types if s[j] <= free[k]]
        if not fit:
            break
        out[j] = fit[0]
        free[fit[0]] -= s[j]
    return out


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_blocking_walk_matches_reference(data) -> None:
    from hetsched.mechanism.packing import greedy_pack_blocking

    n = data.draw(st.integers(1, 8))
    m = data.draw(st.integers(1, 3))
    s = data.draw(st.lists(st.integers(1, 4), min_size=n, max_size=n))
    cap = data.draw(st.lists(st.integers(0, 6), min_size=m, max_size=m))
    entries = data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, m - 1)), max_size=3 * n, unique=True))
    ej = np.array([e[0] for e in entries], dtype=np.int64)
    ek = np.array([e[1] for e in entries], dtype=np.int64)
    got = greedy_pack_blocking(ej, ek, np.array(s), np.array(cap), n).tolist()
    assert got == _blocking_reference(ej.tolist(), ek.tolist(), s, cap, n)


def test_backfill_choice_by_hand() -> None:
    # 6 GPUs; A (4 GPUs, 3,600 s), B (4 GPUs, 3,600 s), C (2 GPUs, 360 s), all at t=0, FIFO order.
    # Backfill: A and C start at 0 (B does not fit), C ends at 360; B starts when A ends (3,600).
    # No backfill: the walk stops at B, C waits behind it and both start at 3,600 (C ends 3,960).
    jobs = hs.JobSet([[1.0]] * 3, gpu_types=["v100"], ids=["A", "B", "C"], scale_factors=[4, 4, 2],
                     arrival_times=[0.0, 0.0, 0.0], steps_remaining=[3600.0, 3600.0, 360.0])
    cl = hs.Cluster({"v100": 6})
    finish = {}
    for backfill in (True, False):
        res = hs.simulate(hs.Tiresias(thresholds=(1e9,), backfill=backfill), jobs, cl)
        finish[backfill] = res.jobs.set_index("job_id")["finish_s"].to_dict()
    assert finish[True] == {"A": 3600.0, "B": 7200.0, "C": 360.0}
    assert finish[False] == {"A": 3600.0, "B": 7200.0, "C": 3960.0}


def test_backfill_option_reaches_the_mechanism() -> None:
    # same jobs under max-min fairness with X from the LP: C (2 GPUs) only fits beside one 4-GPU gang
    jobs = hs.JobSet([[1.0]] * 3, gpu_types=["v100"], ids=["A", "B", "C"], scale_factors=[4, 4, 2],
                     steps_remaining=[3600.0, 3600.0, 360.0])
    cl = hs.Cluster({"v100": 6})
    a = hs.simulate("max_min_fairness", jobs, cl, options=hs.SimOptions(backfill=True))
    b = hs.simulate("max_min_fairness", jobs, cl, options=hs.SimOptions(backfill=False))
    assert a.config["backfill"] is True and b.config["backfill"] is False
    assert check_simulation(a) == [] and check_simulation(b) == []
    from hetsched.sim import SimOptions, as_scheduler

    assert as_scheduler("max_min_fairness", SimOptions(backfill=False)).backfill is False
    assert as_scheduler("max_min_fairness", SimOptions.preset("gavel")).backfill is True  # Gavel's helper skips
    with pytest.raises(ValidationError, match="`backfill` must be True or False"):
        hs.simulate("max_min_fairness", jobs, cl, options=hs.SimOptions(backfill="no"))


def test_fifo_admission_with_and_without_backfill() -> None:
    # 6 GPUs, gangs of 4, 4, 2 in arrival order: backfill admits the 2-GPU job past the second
    # 4-GPU gang; Gavel's fifo_perf (backfill=False) stops at the gang that does not fit.
    jobs = hs.JobSet([[1.0]] * 3, gpu_types=["v100"], ids=["A", "B", "C"], scale_factors=[4, 4, 2],
                     arrival_times=[0.0, 1.0, 2.0])
    cl = hs.Cluster({"v100": 6})
    assert hs.solve(hs.policies.Fifo(), jobs, cl).X[:, 0].tolist() == [1.0, 0.0, 1.0]
    assert hs.solve(hs.policies.Fifo(backfill=False), jobs, cl).X[:, 0].tolist() == [1.0, 0.0, 0.0]
