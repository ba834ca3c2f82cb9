"""No starvation under ties: equal allocation rows and shares reset every round.

With X equal for every job (what an interior-point solver returns for a symmetric LP) and
the share history reset at every round (a re-solve on every arrival or completion), Gavel's
priorities are all infinite and the deficits equal, so the tie-break decides. Breaking ties
by the rounds a job has waited makes the schedule a round robin: among n single-GPU jobs
on C GPUs, no job waits more than ceil(n / C) - 1 rounds in a row.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hetsched as hs
from hetsched.errors import ValidationError
from sim_checker import check_simulation
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


@pytest.mark.skipif(not (DATA / "traces" / "generated").is_dir(), reason="../shared/data/gavel is not present")
def test_interior_solution_does_not_starve_on_gavels_trace() -> None:
    from hetsched.sim import load_trace

    cat = hs.load_gavel_throughputs(DATA / "simulation_throughputs.json")
    tr = load_trace(DATA / "traces" / "generated" / "gavel_generator_n300_lam900_seed5.trace", throughputs=cat)
    cl = hs.Cluster({"v100": 4, "p100": 4, "k80": 4})
    pol = hs.policies.MaxMinFairness(heterogeneity_aware=False, second_stage=False)
    p99 = {s: hs.simulate(pol, tr, cl, placement=False, solver=s, record_runs=False).summary["p99_jct"]
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
        finish[backfill] = res.jobs.set_index("job_id")["finish"].to_dict()
    assert finish[True] == {"A": 3600.0, "B": 7200.0, "C": 360.0}
    assert finish[False] == {"A": 3600.0, "B": 7200.0, "C": 3960.0}


def test_backfill_option_reaches_the_mechanism() -> None:
    # same jobs under max-min fairness with X from the LP: C (2 GPUs) only fits beside one 4-GPU gang
    jobs = hs.JobSet([[1.0]] * 3, gpu_types=["v100"], ids=["A", "B", "C"], scale_factors=[4, 4, 2],
                     steps_remaining=[3600.0, 3600.0, 360.0])
    cl = hs.Cluster({"v100": 6})
    a = hs.simulate("max_min_fairness", jobs, cl, backfill=True)
    b = hs.simulate("max_min_fairness", jobs, cl, backfill=False)
    assert a.config["backfill"] is True and b.config["backfill"] is False
    assert check_simulation(a) == [] and check_simulation(b) == []
    from hetsched.sim import SimOptions, as_scheduler

    assert as_scheduler("max_min_fairness", SimOptions(backfill=False)).backfill is False
    assert as_scheduler("max_min_fairness", SimOptions.preset("gavel")).backfill is True  # Gavel's helper skips
    with pytest.raises(ValidationError, match="`backfill` must be True or False"):
        hs.simulate("max_min_fairness", jobs, cl, backfill="no")


def test_fifo_admission_with_and_without_backfill() -> None:
    # 6 GPUs, gangs of 4, 4, 2 in arrival order: backfill admits the 2-GPU job past the second
    # 4-GPU gang; Gavel's fifo_perf (backfill=False) stops at the gang that does not fit.
    jobs = hs.JobSet([[1.0]] * 3, gpu_types=["v100"], ids=["A", "B", "C"], scale_factors=[4, 4, 2],
                     arrival_times=[0.0, 1.0, 2.0])
    cl = hs.Cluster({"v100": 6})
    assert hs.solve(hs.policies.Fifo(), jobs, cl).X[:, 0].tolist() == [1.0, 0.0, 1.0]
    assert hs.solve(hs.policies.Fifo(backfill=False), jobs, cl).X[:, 0].tolist() == [1.0, 0.0, 0.0]
