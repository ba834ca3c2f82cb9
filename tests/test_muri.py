"""Muri (SIGCOMM'22): the interleaving model, grouping by matching, the scheduler in every driver."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hetsched as hs
from hetsched.cli import main
from hetsched.errors import SchedulerError, ValidationError
from hetsched.rounds.protocol import RoundRows, RoundView, check_rows
from hetsched.schedulers.interleaving import (
    RESOURCES,
    batch_best_cycles,
    batch_pair_cycles,
    best_cycle,
    cycle_time,
    default_phase_fractions,
    efficiency,
    phase_table,
    speed_factors,
)
from hetsched.schedulers.muri import Muri, MuriState
from hetsched.schedulers.names import make_scheduler

# Four jobs, each heavy (4 s) on a different resource and light (1 s) on the others.
A, B, C, D = (4, 1, 1, 1), (1, 4, 1, 1), (1, 1, 4, 1), (1, 1, 1, 4)
QUAD = np.array([A, B, C, D], dtype=float)


# ----------------------------------------------------------------------------- the model, by hand
def test_four_job_interleaving_computed_by_hand():
    """In order (A, D, C, B) job i of the order uses resource (s - i) mod 4 in slot s:
    slot 0: A storage 4, D network 4, C gpu 4, B cpu 4 -> 4 s; slots 1-3: every stage used
    is a light one -> 1 s each. Cycle 4 + 1 + 1 + 1 = 7 s. Each job's iteration alone is
    4 + 1 + 1 + 1 = 7 s, so every member keeps its full speed (7 / 7) and the resources are
    always busy: efficiency = (4 x 7) / (4 x 7) = 1.

    In the order (A, B, C, D) the heavy stages fall in slots 0 (A storage, C gpu) and 2
    (B cpu, D network): 4 + 1 + 4 + 1 = 10 s, efficiency 28 / 40 = 0.7. No order does better
    than 7 (every slot lasts at least 1 s, one lasts 4 s), and (A, D, C, B) is the first
    order reaching it in lexicographic order ((B, A, D, C) is the other alignment)."""
    assert cycle_time(QUAD, (0, 3, 2, 1)) == 7.0
    assert cycle_time(QUAD, (0, 1, 2, 3)) == 10.0
    assert best_cycle(QUAD) == (7.0, (0, 3, 2, 1))
    assert efficiency(QUAD) == pytest.approx(1.0)
    np.testing.assert_allclose(speed_factors(QUAD), [1.0, 1.0, 1.0, 1.0])


def test_identical_jobs_interleave_by_hand():
    """Four copies of (1, 2, 3, 4): in any order every slot holds one stage of each length,
    so every slot lasts 4 s: cycle 16 s; efficiency (4 x 10) / (4 x 16) = 0.625; each job
    runs at 10 / 16 of its speed alone."""
    P = np.tile([1.0, 2.0, 3.0, 4.0], (4, 1))
    for perm in itertools.permutations(range(4)):
        assert cycle_time(P, perm) == 16.0
    assert efficiency(P) == pytest.approx(0.625)
    np.testing.assert_allclose(speed_factors(P), 10 / 16)


def test_a_pair_by_hand():
    """a = (3, 1, 0, 0), b = (0, 0, 3, 1). Order (a, b): slots max(a_s, b_{s-1}):
    max(3, 1) + max(1, 0) + max(0, 0) + max(0, 3) = 3 + 1 + 0 + 3 = 7. Order (b, a):
    max(0, 0) + max(0, 3) + max(3, 1) + max(1, 0) = 0 + 3 + 3 + 1 = 7. Cycle 7 < 4 + 4:
    each job at 4 / 7 of its speed; together 8 / 7 jobs' worth; efficiency 8 / 28 = 2 / 7.
    One job alone: efficiency 1 / 4 (one of four resources busy at a time)."""
    P = np.array([[3, 1, 0, 0], [0, 0, 3, 1]], dtype=float)
    assert cycle_time(P, (0, 1)) == 7.0 and cycle_time(P, (1, 0)) == 7.0
    assert efficiency(P) == pytest.approx(2 / 7)
    np.testing.assert_allclose(speed_factors(P), [4 / 7, 4 / 7])
    assert efficiency([[5.0, 1.0, 2.0, 0.5]]) == pytest.approx(0.25)


@st.composite
def groups(draw):
    k = draw(st.integers(1, 4))
    scale = draw(st.sampled_from([1e-6, 1.0, 1e6]))
    vals = draw(st.lists(st.lists(st.floats(0.0, 10.0, allow_nan=False), min_size=4, max_size=4), min_size=k,
                         max_size=k))
    P = np.array(vals) * scale
    P[:, 2] += scale * 1e-3          # every job takes some time
    return P


@settings(max_examples=150, deadline=None)
@given(P=groups())
def test_cycle_bounds_and_two_formulations_agree(P):
    """max_j T_j <= C <= sum_j T_j (each member visits each resource once per cycle; a slot
    lasts at most the sum of its stages); the batched forms and a brute force over every
    order agree with best_cycle."""
    c, order = best_cycle(P)
    T = P.sum(axis=1)
    assert T.max() * (1 - 1e-9) <= c <= T.sum() * (1 + 1e-9)
    brute = min(cycle_time(P, p) for p in itertools.permutations(range(P.shape[0])))
    assert c == pytest.approx(brute, rel=1e-12)
    assert cycle_time(P, order) == pytest.approx(c, rel=1e-12)
    assert float(batch_best_cycles(P[None])[0]) == pytest.approx(c, rel=1e-12)
    if P.shape[0] == 2:
        assert float(batch_pair_cycles(P[:1], P[1:])[0]) == pytest.approx(c, rel=1e-12)
    f = speed_factors(P)
    assert ((f > 0) & (f <= 1 + 1e-9)).all()
    assert 0 < efficiency(P) <= 1 + 1e-9


def test_default_fractions_are_deterministic_per_type_and_seed():
    f = default_phase_fractions("resnet50", 0)
    np.testing.assert_array_equal(f, default_phase_fractions("resnet50", 0))
    assert f.sum() == pytest.approx(1.0) and (f > 0).all()
    assert not np.array_equal(f, default_phase_fractions("resnet50", 1))
    assert not np.array_equal(f, default_phase_fractions("lm", 0))
    assert f[2] == f.max() or f[2] >= 0.3 / (0.3 + 0.3 + 1.0 + 0.4)   # GPU stage drawn from the top range


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("phases, words", [
    ({"j1": (1.0, -0.5, 2.0, 1.0)}, ["'j1'", "'cpu'", "-0.5", ">= 0"]),
    ({"j1": (0, 0, 0, 0)}, ["'j1'", "all zero"]),
    ({"j2": {"storage": 0.0, "cpu": 0.0, "gpu": 0.0, "network": 0.0}}, ["'j2'", "all zero"]),
    ({"j1": (1.0, float("nan"), 2.0, 1.0)}, ["'j1'", "'cpu'", "nan"]),
    ({"j1": (1.0, 2.0, float("inf"), 1.0)}, ["'j1'", "'gpu'", "inf"]),
    ({"j1": (1.0, True, 2.0, 1.0)}, ["'j1'", "'cpu'", "True"]),
    ({"j1": (1.0, 2.0, 3.0)}, ["'j1'", "4 durations"]),
    ({"j1": {"storage": 1, "cpu": 1, "gpu": 1, "disk": 1}}, ["'j1'", "disk", "network"]),
    ([1, 2, 3, 4], ["mapping"]),
])
def test_bad_phases_name_the_job_field_and_value(phases, words):
    with pytest.raises(ValidationError) as exc:
        Muri(phases=phases)
    for w in words:
        assert w in str(exc.value), (w, str(exc.value))


@pytest.mark.parametrize("kw, word", [({"priority": "fifo"}, "priority"), ({"max_group": 5}, "max_group"),
                                      ({"max_group": 0}, "max_group"), ({"candidates": 0}, "candidates"),
                                      ({"seed": -1}, "seed"), ({"max_group": True}, "max_group")])
def test_bad_parameters(kw, word):
    with pytest.raises(ValidationError, match=word):
        Muri(**kw)


def test_phase_table_takes_sequences_and_mappings():
    t = phase_table({"a": [1, 2, 3, 4], 7: dict(zip(RESOURCES, (0, 0, 1.5, 0)))})
    np.testing.assert_array_equal(t["a"], [1, 2, 3, 4])
    np.testing.assert_array_equal(t[7], [0, 0, 1.5, 0])


def test_missing_job_in_given_phases_is_an_error():
    jobs = hs.JobSet([[1.0], [1.0]], gpu_types=["v100"], ids=["a", "b"], steps_remaining=[10.0, 10.0])
    with pytest.raises(ValidationError, match="no entry for job 'b'"):
        hs.simulate(Muri(phases={"a": A}), jobs, hs.Cluster({"v100": 1}))


# ----------------------------------------------------------------------------- scheduling, by hand
def _quad_jobs(steps_each: float = 3600.0) -> hs.JobSet:
    # throughput 1 step/s each; steps = one hour alone
    return hs.JobSet(np.ones((4, 1)), gpu_types=["v100"], ids=["A", "B", "C", "D"],
                     steps_remaining=np.full(4, steps_each))


def test_perfect_quad_shares_one_gpu_at_full_speed():
    """The four complementary jobs on one GPU: Muri interleaves all four at speed 7 / 7 = 1,
    so each finishes after its hour alone, 3600 s (10 rounds of 360 s). Without interleaving
    (max_group=1) SRSF runs them one after another: 3600, 7200, 10800, 14400 s, mean 9000 s."""
    phases = dict(zip("ABCD", (A, B, C, D)))
    cluster = hs.Cluster({"v100": 1})
    res = hs.simulate(Muri(phases=phases), _quad_jobs(), cluster, options=hs.SimOptions(restart_seconds=0.0))
    np.testing.assert_allclose(res.jobs["jct_s"], 3600.0)
    alone = hs.simulate(Muri(phases=phases, max_group=1), _quad_jobs(), cluster, options=hs.SimOptions(restart_seconds=0.0))
    np.testing.assert_allclose(np.sort(alone.jobs["jct_s"]), [3600.0, 7200.0, 10800.0, 14400.0])
    # pairs only: (A,C) and (B,D) are the complementary pairs: a = (4,1,1,1), c = (1,1,4,1):
    # order (a, c): max(4,1) + max(1,1) + max(1,1) + max(1,4) = 4+1+1+4 = 10;
    # order (c, a): max(1,1) + max(1,4) + max(4,1) + max(1,1) = 1+4+4+1 = 10 -> speed 7/10.
    # (A,B): order (b, a): max(1,1)+max(4,4)+max(1,1)+max(1,1) = 7 -> speed 1: better.
    # Two perfect pairs of two jobs: each pair takes turns with... but only one GPU, so the
    # two pairs cannot both run: the better-priority pair runs first at speed 1 (2 jobs in
    # 3600 s), then the other: JCTs 3600, 3600, 7200, 7200.
    pairs = hs.simulate(Muri(phases=phases, max_group=2), _quad_jobs(), cluster, options=hs.SimOptions(restart_seconds=0.0))
    np.testing.assert_allclose(np.sort(pairs.jobs["jct_s"]), [3600.0, 3600.0, 7200.0, 7200.0])


def _view(T, s, cap, *, remaining=None, ids=None, waiting=None):
    T = np.asarray(T, dtype=float)
    n, m = T.shape
    return RoundView(now=0.0, round_index=0, round_seconds=360.0, cluster=hs.Cluster(
        {f"t{k}": int(cap[k]) for k in range(m)}), gpu_types=tuple(f"t{k}" for k in range(m)),
        capacities=np.asarray(cap, np.int64), jobs=np.arange(n, dtype=np.int64), throughputs=T,
        unconsolidated=None, scale_factors=np.asarray(s, np.int64), weights=np.ones(n),
        remaining=np.full(n, 1000.0) if remaining is None else np.asarray(remaining, float),
        arrival=np.zeros(n), isolated_time=np.zeros(n),
        context={"ids": np.asarray(ids if ids is not None else [f"j{i}" for i in range(n)], dtype=object)},
        waiting=None if waiting is None else np.asarray(waiting, float))


def test_group_rows_share_gpus_and_pass_the_checks():
    """Four 1-GPU jobs on one GPU form one group: four rows, one group number, shares 1/4,
    rate 4 x throughput x speed (speed 1 here: rate 4 x 2 = 8 steps/s while holding the GPU,
    2 steps/s on average)."""
    view = _view(np.full((4, 1), 2.0), [1, 1, 1, 1], [1], ids=list("ABCD"))
    sched = Muri(phases=dict(zip("ABCD", (A, B, C, D))))
    rows = sched.plan_round(view, sched.initial_state())
    check_rows(rows, view)
    assert rows.n_rows == 4 and len(set(rows.group.tolist())) == 1 and rows.group[0] >= 0
    np.testing.assert_allclose(rows.share, 0.25)
    np.testing.assert_allclose(rows.rate, 8.0)
    assert rows.info["groups"] == 1


def test_no_grouping_when_everyone_fits():
    """Muri packs only while the selected jobs demand more GPUs than there are."""
    view = _view(np.full((4, 1), 2.0), [1, 1, 1, 1], [4], ids=list("ABCD"))
    sched = Muri(phases=dict(zip("ABCD", (A, B, C, D))))
    rows = sched.plan_round(view, sched.initial_state())
    assert (rows.group < 0).all() and rows.n_rows == 4 and (rows.share == 1).all()


def test_groups_need_the_same_gang_size():
    view = _view(np.full((4, 1), 2.0), [1, 2, 1, 2], [2], ids=list("ABCD"))
    sched = Muri(phases=dict(zip("ABCD", (A, B, C, D))))
    rows = sched.plan_round(view, sched.initial_state())
    check_rows(rows, view)
    for g in np.unique(rows.group[rows.group >= 0]).tolist():
        assert len(set(rows.gpus[rows.group == g].tolist())) == 1


def test_check_rows_rejects_broken_groups():
    view = _view(np.full((3, 2), 1.0), [1, 1, 1], [2, 2])
    ok = dict(job=[0, 1], gpu_type=[0, 0], gpus=[1, 1], rate=[1.0, 1.0], share=[0.5, 0.5], group=[0, 0])
    check_rows(RoundRows(**ok), view)
    with pytest.raises(SchedulerError, match="share one GPU type"):
        check_rows(RoundRows(**{**ok, "gpu_type": [0, 1]}), view)
    with pytest.raises(SchedulerError, match="sum to 1.2"):
        check_rows(RoundRows(**{**ok, "share": [0.6, 0.6]}), view)
    with pytest.raises(SchedulerError, match="over-used"):
        check_rows(RoundRows(job=[0, 1, 2], gpu_type=[0, 0, 0], gpus=[2, 2, 1], rate=[1.0] * 3,
                             share=[0.5, 0.5, 1.0], group=[0, 0, -1]), view)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 14), m=st.integers(1, 2), data=st.data())
def test_plans_always_pass_the_loop_checks(n, m, data):
    """Random jobs (gangs up to the largest type, tiny capacities, distinct throughputs):
    every plan passes check_rows, no job twice, groups of at most max_group, one gang size
    and GPU type per group, and the rates are the isolated ones times k x speed <= k."""
    cap = data.draw(st.lists(st.integers(1, 8), min_size=m, max_size=m))
    s = data.draw(st.lists(st.sampled_from([1, 2, 4, 8]), min_size=n, max_size=n))
    s = np.minimum(s, max(cap))
    T = np.array(data.draw(st.lists(st.lists(st.floats(0.01, 1e4), min_size=m, max_size=m), min_size=n,
                                    max_size=n)))
    mg = data.draw(st.integers(1, 4))
    view = _view(T, s, cap, remaining=data.draw(st.lists(st.floats(1.0, 1e7), min_size=n, max_size=n)))
    sched = Muri(max_group=mg, priority=data.draw(st.sampled_from(["srsf", "las"])),
                 matching=data.draw(st.sampled_from(["auto", "blossom", "greedy"])))
    rows = sched.plan_round(view, sched.initial_state())
    check_rows(rows, view)
    assert len(set(rows.job.tolist())) == rows.n_rows
    for g in np.unique(rows.group[rows.group >= 0]).tolist():
        sel = rows.group == g
        k = int(sel.sum())
        assert 2 <= k <= mg
        np.testing.assert_allclose(rows.share[sel], 1.0 / k)
        assert len(set(s[rows.job[sel]].tolist())) == 1
        iso = T[rows.job[sel], rows.gpu_type[sel]]
        assert (rows.rate[sel] <= k * iso * (1 + 1e-9)).all()
    if rows.n_rows:
        state = sched.record_round(sched.initial_state(), rows, np.full(rows.n_rows, 360.0))
        np.testing.assert_allclose(state.attained_of(rows.job), rows.gpus * rows.share * 360.0)


# ----------------------------------------------------------------------------- every driver
def test_simulate_with_placement_places_a_group_as_one_gang():
    """On servers (placement on), the group of four holds the one GPU together."""
    phases = dict(zip("ABCD", (A, B, C, D)))
    cluster = hs.Cluster.from_servers({"v100": 1}, gpus_per_server=1)
    res = hs.simulate(Muri(phases=phases), _quad_jobs(), cluster, options=hs.SimOptions(restart_seconds=0.0))
    np.testing.assert_allclose(res.jobs["jct_s"], 3600.0)


def test_simulate_by_name_and_default_phases_beat_no_interleaving():
    """Generated workload, default phases: interleaving lowers the makespan against Muri
    without interleaving on an oversubscribed cluster (measured numbers are in docs/muri.md)."""
    w = hs.generate_workload(30, rate_per_hour=60.0, seed=5)
    c = hs.Cluster({"v100": 4, "k80": 4})
    a = hs.simulate("muri", w, c)
    b = hs.simulate(Muri(max_group=1), w, c)
    assert a.summary["n_completed"] == b.summary["n_completed"] == 30
    assert a.summary["makespan_s"] < b.summary["makespan_s"]
    assert make_scheduler("muri", max_group=2).max_group == 2


def test_online_scheduler_runs_muri_and_reopens_its_store(tmp_path):
    path = tmp_path / "muri.db"
    phases = dict(zip("ABCD", (A, B, C, D)))
    s = hs.OnlineScheduler(Muri(phases=phases), hs.Cluster({"v100": 1}), store=path)
    for j in "ABCD":
        s.submit(j, throughputs={"v100": 1.0}, total_steps=3600.0, arrival=0.0)
    plan = s.next_round(0.0)
    assert sorted(plan.assignments["job_id"].tolist()) == list("ABCD")
    for j in "ABCD":
        s.report(j, "v100", 360.0, 360.0)
    first = s.next_round(360.0)
    s.close()
    again = hs.OnlineScheduler(Muri(phases=phases), hs.Cluster({"v100": 1}), store=path)
    assert again.next_round(720.0).key() is not None
    assert sorted(first.assignments["job_id"].tolist()) == list("ABCD")
    again.close()


def test_cli_simulate_muri(capsys):
    assert main(["simulate", "--policy", "muri", "--param", "max_group=2", "--jobs", "6", "--no-progress"]) == 0
    assert "muri" in capsys.readouterr().out
    assert main(["simulate", "--policy", "muri", "--param", "max_group=9", "--jobs", "3"]) == 2


def test_demo_runs_muri(capsys):
    assert main(["demo", "--jobs", "6", "--policies", "muri"]) == 0
    assert "muri" in capsys.readouterr().out


def test_state_type():
    st_ = Muri().initial_state(5.0)
    assert isinstance(st_, MuriState) and st_.time == 5.0 and st_.attained_of(np.array([3])).tolist() == [0.0]


def test_online_with_servers_gives_every_member_the_groups_gpus(tmp_path):
    """With a topology the group is placed once and every member's assignment names the
    same GPU; reopening the store keeps the placement."""
    phases = dict(zip("ABCD", (A, B, C, D)))
    cluster = hs.Cluster.from_servers({"v100": 1}, gpus_per_server=1)
    s = hs.OnlineScheduler(Muri(phases=phases), cluster, store=tmp_path / "m.db")
    for j in "ABCD":
        s.submit(j, throughputs={"v100": 1.0}, total_steps=3600.0, arrival=0.0)
    a = s.next_round(0.0).assignments
    assert sorted(a["job_id"].tolist()) == list("ABCD")
    assert a["gpu_ids"].tolist() == [(0,)] * 4
    s.close()
    again = hs.OnlineScheduler(Muri(phases=phases), cluster, store=tmp_path / "m.db")
    back = again.leases()
    assert sorted(back["job_id"].tolist()) == list("ABCD") and back["gpu_ids"].tolist() == [(0,)] * 4
    again.close()


@pytest.mark.parametrize("matching", ["blossom", "greedy"])
def test_both_matchings_find_the_perfect_quad(matching):
    """Blossom and the greedy class matching both put the four complementary jobs together
    (their union is the only group with efficiency 1)."""
    view = _view(np.full((4, 1), 2.0), [1, 1, 1, 1], [1], ids=list("ABCD"))
    sched = Muri(phases=dict(zip("ABCD", (A, B, C, D))), matching=matching)
    rows = sched.plan_round(view, sched.initial_state())
    assert rows.n_rows == 4 and len(set(rows.group.tolist())) == 1
    np.testing.assert_allclose(rows.rate, 8.0)


def test_a_harmful_group_is_not_formed():
    """Two GPU-only jobs (0, 0, 5, 0) and (0, 0, 3, 0): interleaved, the GPU stages cannot
    overlap: order (a, b) gives max(0,0) + max(0,0) + max(5,0) + max(0,3) = 8 = 5 + 3, no
    better than one after the other (C < T_a + T_b fails), so no edge and no group: one job
    runs, the other waits."""
    view = _view(np.full((2, 1), 1.0), [1, 1], [1], ids=["a", "b"])
    sched = Muri(phases={"a": (0, 0, 5, 0), "b": (0, 0, 3, 0)})
    rows = sched.plan_round(view, sched.initial_state())
    assert rows.n_rows == 1 and (rows.group < 0).all()
