"""Gandiva (OSDI'18): introspective packing (tried, measured, kept or undone), grow-shrink,
migration to defragment, and the scheduler in every driver."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hetsched as hs
from hetsched.cli import main
from hetsched.errors import ValidationError
from hetsched.rounds.protocol import RoundView, check_rows
from hetsched.schedulers.gandiva import GandivaIntrospective, GandivaState
from hetsched.schedulers.names import make_scheduler


def _view(T, s, cap, *, ids=None, waiting=None, context=None):
    T = np.asarray(T, dtype=float)
    n, m = T.shape
    ctx = {"ids": np.asarray(ids if ids is not None else [f"j{i}" for i in range(n)], dtype=object)}
    ctx.update(context or {})
    return RoundView(now=0.0, round_index=0, round_seconds=360.0,
                     cluster=hs.Cluster({f"t{k}": int(cap[k]) for k in range(m)}),
                     gpu_types=tuple(f"t{k}" for k in range(m)), capacities=np.asarray(cap, np.int64),
                     jobs=np.arange(n, dtype=np.int64), throughputs=T, unconsolidated=None,
                     scale_factors=np.asarray(s, np.int64), weights=np.ones(n), remaining=np.full(n, 1e6),
                     arrival=np.zeros(n), isolated_time=np.zeros(n), context=ctx,
                     waiting=np.zeros(n) if waiting is None else np.asarray(waiting, float))


def _run(sched, view, state):
    rows = sched.plan_round(view, state)
    check_rows(rows, view)
    return rows, sched.record_round(state, rows, np.full(rows.n_rows, 360.0))


# ----------------------------------------------------------------------------- introspective packing
def test_a_packing_tried_measured_and_undone():
    """Two 1-GPU jobs, one GPU, each 2 steps/s alone. Shared, the table says each runs at
    0.6 steps/s: rho = 0.6/2 + 0.6/2 = 0.6 < 1 (worse than taking turns).

    Round 0: "a" gets the GPU, "b" waits; nothing is measured, so the pair is tried (one
    trial per round). The row runs at the table's rates (0.6, 0.6), and recording it
    measures rho = 0.6: undone. Round 1: the pair is not packed again (b waits alone)."""
    g = GandivaIntrospective(pair_rates={("a", "b"): {"t0": (0.6, 0.6)}})
    view = _view([[2.0], [2.0]], [1, 1], [1], ids=["a", "b"], waiting=[0.0, 0.0])
    st0 = g.initial_state()
    assert st0.pair_verdict(0, 1, 0) is None
    rows, st1 = _run(g, view, st0)
    assert rows.n_rows == 1 and rows.partner[0] >= 0 and rows.info["pair_trials"] == 1
    assert sorted([rows.rate[0], rows.partner_rate[0]]) == [0.6, 0.6]
    assert st1.pair_verdict(0, 1, 0) == pytest.approx(0.6) and st1.trials == 1 and st1.undone == 1
    rows2, st2 = _run(g, view, st1)
    assert rows2.n_rows == 1 and rows2.partner[0] < 0 and rows2.info["pair_trials"] == 0
    assert st2.undone == 1


def test_a_good_packing_is_kept():
    """Shared rates (1.6, 1.2) of jobs alone at 2 and 2: rho = 0.8 + 0.6 = 1.4 >= 1: kept,
    packed again next round without a new trial."""
    g = GandivaIntrospective(pair_rates={("a", "b"): {"t0": (1.6, 1.2)}})
    view = _view([[2.0], [2.0]], [1, 1], [1], ids=["a", "b"])
    rows, st1 = _run(g, view, g.initial_state())
    assert st1.pair_verdict(0, 1, 0) == pytest.approx(1.4) and st1.undone == 0
    rows2, st2 = _run(g, view, st1)
    assert rows2.partner[0] >= 0 and rows2.info["pair_trials"] == 0 and st2.trials == 1


def test_the_pair_is_revealed_only_by_running_it():
    """Three 1-GPU jobs, one GPU, max_trials=1: round 0 tries exactly one pair; the other
    waiting job is not packed (nothing is known of it) and the state learns one pair only."""
    rates = {("a", "b"): {"t0": (1.5, 1.5)}, ("a", "c"): {"t0": (1.5, 1.5)}, ("b", "c"): {"t0": (1.5, 1.5)}}
    g = GandivaIntrospective(pair_rates=rates)
    view = _view([[2.0]] * 3, [1, 1, 1], [1], ids=["a", "b", "c"], waiting=[30.0, 20.0, 10.0])
    rows, st1 = _run(g, view, g.initial_state())
    assert rows.n_rows == 1 and rows.info["pair_trials"] == 1
    assert st1.pair_a.size == 1 and st1.pair_verdict(0, 1, 0) == pytest.approx(1.5)
    assert st1.pair_verdict(0, 2, 0) is None and st1.pair_verdict(1, 2, 0) is None


def test_catalogue_pair_table_is_the_simulators_truth():
    """In the simulator the pair's true rates come from the workload's catalogue: the rows
    that ran carry exactly the catalogue's pair rates."""
    c = hs.Cluster({"v100": 2, "k80": 2})
    w = hs.generate_workload(12, rate_per_hour=60.0, seed=2, pairs=True, cluster=c)
    cat = w.catalogue
    res = hs.simulate(GandivaIntrospective(), w, c,
                      options=hs.SimOptions(record_runs=True))
    runs = res.runs
    paired = runs[runs["partner"] >= 0]
    assert len(paired) > 0
    rows = np.asarray(w.catalogue_rows)
    types = list(res.config["cluster"]) if isinstance(res.config.get("cluster"), dict) else None
    assert types is not None
    for _, r in paired.head(20).iterrows():
        j, p = int(r["job"]), int(r["partner"])
        col = list(cat.gpu_types).index(types[int(r["gpu_type"])])
        assert r["rate"] == pytest.approx(float(cat.pairs.lookup(int(rows[j]), int(rows[p]))[col, 0]))


# ----------------------------------------------------------------------------- grow-shrink
def test_grow_when_idle_by_hand():
    """One 1-GPU job at 3 steps/s, four idle GPUs. max_grow=2: 2 GPUs at
    3 x (1 + 0.8 x (2/1 - 1)) = 5.4 steps/s. max_grow=4: 4 GPUs at 3 x (1 + 0.8 x 3) = 10.2."""
    view = _view([[3.0]], [1], [4])
    rows = GandivaIntrospective().plan_round(view, GandivaIntrospective().initial_state())
    assert rows.gpus.tolist() == [2] and rows.rate[0] == pytest.approx(5.4)
    g4 = GandivaIntrospective(max_grow=4)
    rows = g4.plan_round(view, g4.initial_state())
    assert rows.gpus.tolist() == [4] and rows.rate[0] == pytest.approx(10.2)
    off = GandivaIntrospective(grow=False)
    assert off.plan_round(view, off.initial_state()).gpus.tolist() == [1]


def test_shrink_when_jobs_wait():
    """Five 1-GPU jobs on four GPUs: someone waits, so nobody grows (all gangs of 1)."""
    view = _view([[3.0]] * 5, [1] * 5, [4], waiting=[5.0, 4.0, 3.0, 2.0, 1.0])
    g = GandivaIntrospective(max_trials=0)
    rows = g.plan_round(view, g.initial_state())
    assert rows.gpus.tolist() == [1, 1, 1, 1] and 4 not in rows.job.tolist()


# ----------------------------------------------------------------------------- migration
def test_migration_defragments_for_a_waiting_gang():
    """Types t0, t1 with 2 GPUs each. x (1 GPU, fastest on t0) and y (1 GPU, fastest on t1)
    take one GPU of each: 1 + 1 GPUs free, and the 2-GPU job z fits nowhere. Migration moves
    x to t1 (its other type has room): t0 is then free for z."""
    T = [[2.0, 1.0], [1.0, 2.0], [1.0, 1.0]]
    view = _view(T, [1, 1, 2], [2, 2], waiting=[30.0, 20.0, 10.0])
    g = GandivaIntrospective(max_trials=0, grow=False)
    rows = g.plan_round(view, g.initial_state())
    placed = dict(zip(rows.job.tolist(), rows.gpu_type.tolist()))
    assert placed == {0: 1, 1: 1, 2: 0}
    assert rows.rate[rows.job == 0][0] == 1.0      # x runs at its t1 rate
    off = GandivaIntrospective(max_trials=0, grow=False, migrate=False)
    rows = off.plan_round(view, off.initial_state())
    assert 2 not in rows.job.tolist()


# ----------------------------------------------------------------------------- properties, bad input
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 12), m=st.integers(1, 3), data=st.data())
def test_plans_pass_the_loop_checks(n, m, data):
    """Random jobs (gangs up to the largest type, tiny capacities): every plan passes
    check_rows; pairs have one gang size; grown jobs hold a power-of-two multiple of their
    gang no larger than max_grow x; a grown row is never a pair."""
    cap = data.draw(st.lists(st.integers(1, 8), min_size=m, max_size=m))
    s = np.minimum(data.draw(st.lists(st.sampled_from([1, 2, 4, 8]), min_size=n, max_size=n)), max(cap))
    T = np.array(data.draw(st.lists(st.lists(st.floats(0.0, 1e3), min_size=m, max_size=m), min_size=n, max_size=n)))
    T[:, 0] = np.maximum(T[:, 0], 0.5)
    waiting = data.draw(st.lists(st.floats(0.0, 1e4), min_size=n, max_size=n))
    g = GandivaIntrospective(max_trials=data.draw(st.integers(0, 3)), max_grow=data.draw(st.sampled_from([1, 2, 4])),
                             migrate=data.draw(st.booleans()))
    view = _view(T, s, cap, waiting=waiting)
    state = g.initial_state()
    for _ in range(3):
        rows = g.plan_round(view, state)
        check_rows(rows, view)
        pair = rows.partner >= 0
        assert (s[rows.job[pair]] == s[rows.partner[pair]]).all()
        mult = rows.gpus / s[rows.job]
        assert ((mult >= 1) & (mult <= g.max_grow)).all() and ((rows.gpus[pair] == s[rows.job[pair]]).all())
        state = g.record_round(state, rows, np.full(rows.n_rows, 360.0))


@pytest.mark.parametrize("kw, word", [
    ({"keep_threshold": -1.0}, "keep_threshold"), ({"max_trials": -1}, "max_trials"),
    ({"pair_prior": 1.5}, "pair_prior"), ({"grow": "yes"}, "grow"), ({"max_grow": 3}, "power of two"),
    ({"grow_efficiency": 2.0}, "grow_efficiency"), ({"migrate": 1}, "migrate"),
    ({"pair_rates": {("a", "a"): {"v100": (1, 1)}}}, "two different"),
    ({"pair_rates": {("a", "b"): {"v100": (1, -1)}}}, ">= 0"),
    ({"pair_rates": {("a", "b"): {"v100": 3}}}, "two rates"),
    ({"pair_rates": [1]}, "mapping"),
])
def test_bad_parameters(kw, word):
    with pytest.raises(ValidationError, match=word):
        GandivaIntrospective(**kw)


def test_wrong_state_is_refused():
    g = GandivaIntrospective()
    with pytest.raises(ValidationError, match="GandivaState"):
        g.plan_round(_view([[1.0]], [1], [1]), object())


# ----------------------------------------------------------------------------- every driver
def test_simulate_by_name_with_packing_and_without():
    c = hs.Cluster({"v100": 2, "k80": 2})
    w = hs.generate_workload(20, rate_per_hour=60.0, seed=4, pairs=True, cluster=c)
    a = hs.simulate("gandiva", w, c)
    b = hs.simulate(GandivaIntrospective(max_trials=0), w, c)
    assert a.summary["n_completed"] == b.summary["n_completed"] == 20
    assert make_scheduler("gandiva", max_grow=4).max_grow == 4


def test_online_scheduler_runs_gandiva_and_reopens_its_store(tmp_path):
    path = tmp_path / "g.db"
    g = GandivaIntrospective(pair_rates={("a", "b"): {"v100": (0.6, 0.6)}})
    s = hs.OnlineScheduler(g, hs.Cluster({"v100": 1}), store=path)
    s.submit("a", throughputs={"v100": 2.0}, total_steps=1e5, arrival=0.0)
    s.submit("b", throughputs={"v100": 2.0}, total_steps=1e5, arrival=0.0)
    plan = s.next_round(0.0)
    a = plan.assignments
    assert a["job_id"].tolist() == ["a"] and a["partner"].tolist() == ["b"]     # the trial
    assert a["throughput"].tolist() == [0.6]
    s.report("a", "v100", 216.0, 360.0, partner="b")
    s.report("b", "v100", 216.0, 360.0, partner="a")
    s.close()
    again = hs.OnlineScheduler(g, hs.Cluster({"v100": 1}), store=path)
    plan2 = again.next_round(360.0)      # the reopened state remembers the undone pair
    a2 = plan2.assignments
    assert a2["job_id"].tolist() in (["a"], ["b"]) and a2["partner"].isna().all()
    again.close()


@pytest.mark.parametrize(("steps", "packed_again"), [(216.0, False), (432.0, True)])
def test_online_gandiva_judges_a_pair_by_what_its_workers_report(tmp_path, steps, packed_again):
    """Online the planned pair rates are only a prior: 0.5 x 2.0 = 1.0 steps/s each, so the
    planned rho = 1.0/2.0 + 1.0/2.0 = 1.0 would be kept (keep_threshold 1). The verdict must
    come from the reports instead: each worker did ``steps`` in 360 s beside its partner.
    216 steps: 0.6 steps/s each, rho = 0.6/2 + 0.6/2 = 0.6 < 1, undone (the next plan
    time-slices the two jobs, no pair); 432 steps: 1.2 steps/s, rho = 1.2, kept (packed again)."""
    s = hs.OnlineScheduler(GandivaIntrospective(), hs.Cluster({"v100": 1}), store=tmp_path / "g.db")
    s.submit("a", throughputs={"v100": 2.0}, total_steps=1e6, arrival=0.0)
    s.submit("b", throughputs={"v100": 2.0}, total_steps=1e6, arrival=0.0)
    a = s.next_round(0.0).assignments
    assert a["partner"].notna().all() and a["throughput"].tolist() == [1.0]     # the trial, at the prior
    first, second = a["job_id"].iloc[0], a["partner"].iloc[0]
    s.report(first, "v100", steps, 360.0, partner=second)
    s.report(second, "v100", steps, 360.0, partner=first)
    a2 = s.next_round(360.0).assignments
    assert len(a2) == 1 and a2["partner"].notna().all() == packed_again
    s.close()


def test_cli_simulate_gandiva(capsys):
    assert main(["simulate", "--policy", "gandiva", "--param", "max_grow=4", "--jobs", "6", "--no-progress"]) == 0
    assert "gandiva" in capsys.readouterr().out
    assert main(["simulate", "--policy", "gandiva", "--param", "max_grow=3", "--jobs", "3"]) == 2


def test_demo_runs_gandiva(capsys):
    assert main(["demo", "--jobs", "6", "--policies", "gandiva"]) == 0
    assert "gandiva" in capsys.readouterr().out


def test_state_type():
    st_ = GandivaIntrospective().initial_state(3.0)
    assert isinstance(st_, GandivaState) and st_.time == 3.0 and st_.verdicts() == {}
