"""OnlineScheduler beyond one job alone on its gang: pair (space-sharing) rates, spread
(unconsolidated) rates and elastic GPU counts (Sia) — given at submit, learned from reports,
stored, and refused where learning could not work. (The equality with simulate for every
kind, and restart equivalence with Hypothesis, are in tests/test_online.py.)"""

from __future__ import annotations

import sqlite3

import numpy as np
import pandas as pd
import pytest

import hetsched as hs
from hetsched.errors import ValidationError
from hetsched.formulations.spaces.packing import Packing
from hetsched.online import OnlineScheduler
from hetsched.sim.replay import simulate_online
from hetsched.inputs.throughputs import generate_catalogue


def _packed(**kw) -> OnlineScheduler:
    return OnlineScheduler(hs.policies.MaxMinFairness(packing="workload"), hs.Cluster({"v100": 1}), **kw)


def test_given_pair_rate_is_shared_then_a_learned_bad_pair_is_dropped():
    """Two jobs, one GPU, 1 step/s alone. Given 0.75 each together, max-min shares the GPU
    (0.75 > the 0.5 of time slicing). Both then report 0.4 with the partner: the pair's rates
    become 0.4 (first report of an EMA), combined 0.8 < 1, so the next solve (a job arrives)
    time-slices instead."""
    s = _packed()
    s.submit("a", throughputs={"v100": 1.0}, total_steps=1e6)
    s.submit("b", throughputs={"v100": 1.0}, total_steps=1e6, pair_throughputs={"a": {"v100": (0.75, 0.75)}})
    plan = s.next_round(0.0)
    assert plan.assignments[["job_id", "partner", "throughput"]].values.tolist() == [["a", "b", 0.75]]
    assert plan.scaling.tolist() == [0.75]                 # the pair rate over a's own 1.0
    s.report("a", "v100", 144.0, 360.0, partner="b")
    s.report("b", "v100", 144.0, 360.0, partner="a")
    assert s.side_rates("a", partner="b").tolist() == [0.4]
    assert float(s.estimates().loc["a", "v100"]) == 1.0    # the job's own rate is untouched
    s.submit("c", throughputs={"v100": 1.0}, total_steps=1e6)
    plan = s.next_round(360.0)
    assert plan.assignments["partner"].isna().all() and len(plan.assignments) == 1
    s.close()


def test_pair_and_spread_rates_follow_gavels_ema_and_survive_a_restart(tmp_path):
    path = tmp_path / "s.db"
    s = OnlineScheduler(hs.policies.MaxMinFairness(packing="workload"), hs.Cluster({"v100": 4}), store=path)
    s.submit("a", scale_factor=2, throughputs={"v100": 2.0}, spread_throughputs={"v100": 1.0})
    s.submit("b", scale_factor=2, throughputs={"v100": 2.0}, pair_throughputs={"a": {"v100": (1.5, 1.2)}})
    s.next_round(0.0)
    assert s.side_rates("b", partner="a").tolist() == [1.5] and s.side_rates("a", partner="b").tolist() == [1.2]
    s.report("a", "v100", 360.0, 360.0, spread=True)      # 1.0 steps/s
    s.report("a", "v100", 1080.0, 360.0, spread=True)     # 3.0: EMA 0.25 * 3 + 0.75 * 1 = 1.5
    s.report("a", "v100", 720.0, 360.0, partner="b")      # 2.0 replaces the given 1.2
    s.close()
    s = OnlineScheduler(hs.policies.MaxMinFairness(packing="workload"), hs.Cluster({"v100": 4}), store=path)
    assert s.side_rates("a", spread=True).tolist() == [1.5]
    assert s.side_rates("a", partner="b").tolist() == [2.0]
    assert s.side_rates("b", partner="a").tolist() == [1.5]
    con = sqlite3.connect(path)
    n = con.execute("SELECT COUNT(*) FROM side_rates").fetchone()[0]
    con.close()
    assert n == 3                                          # (a, spread), (a, b), (b, a) on v100
    s.close()


def test_reference_pairs_by_job_type():
    """Jobs submitted with a job type get pair rates from the reference's pair table."""
    cat = generate_catalogue(3, gpu_types=["v100"], scale_factors=(1,), pairs=True, pair_infeasible_prob=0.0, seed=0)
    s = OnlineScheduler(hs.policies.MaxMinFairness(packing="workload"), hs.Cluster({"v100": 1}), reference=cat,
                        learn=False)
    r0, r1 = 0, 1
    s.submit("a", job_type=str(cat.job_types[r0]), total_steps=1e6)
    s.submit("b", job_type=str(cat.job_types[r1]), total_steps=1e6)
    pairs = s.scheduler.policy.packing   # the unbound "workload"; the bound packing lives in the state
    assert pairs == "workload"
    s.next_round(0.0)
    bound = s._state.policy.packing
    assert isinstance(bound, Packing)
    expect = cat.pairs.lookup(r0, r1)[0]                  # (a's, b's) rate on v100 from the table
    keys = bound.keys.to_numpy()
    got = bound.pairs.lookup(int(keys[0]), int(keys[1]))[bound.gpu_types.index("v100")]
    assert got.tolist() == expect.tolist()
    s.close()


def test_sia_learns_each_jobs_rate_through_its_scaling():
    """Sia hidden throughputs: the driver runs each elastic row at the job's true rate times the
    plan's scaling and reports on the row's GPU count; the scheduler divides by the scaling, so
    its estimates converge to the true single-gang throughputs (exactly, without noise)."""
    trace = hs.generate_workload(8, rate_per_hour=6.0, seed=4, long_job_prob=0.0)
    cluster = hs.Cluster({"v100": 8, "p100": 8, "k80": 8})
    res = simulate_online(hs.policies.Sia(), trace, cluster, learn=True, options=hs.SimOptions(seed=0))
    assert res.summary["n_completed"] == 8
    ran = res.jobs[[f"gpu_seconds_{t}" for t in cluster.gpu_types]].to_numpy() > 0
    est, true = res.extra["estimates"], res.extra["throughputs"]
    assert (res.runs["gpus"].to_numpy() != res.jobs["scale_factor"].to_numpy()[res.runs["job"].to_numpy()]).any()
    np.testing.assert_allclose(est[ran], true[ran], rtol=1e-9)


def test_placement_sensitive_learning_runs_in_simulation():
    trace = hs.generate_workload(10, rate_per_hour=6.0, seed=5, long_job_prob=0.0)
    cluster = hs.Cluster.from_servers({"v100": 8, "p100": 8, "k80": 8}, gpus_per_server=2)
    res = simulate_online(hs.policies.MaxSumThroughput(placement_sensitivity="workload"), trace, cluster,
                          learn=True, options=hs.SimOptions(seed=0))
    assert res.summary["n_completed"] == 10


def test_learning_is_refused_at_construction_where_reports_cannot_update_the_table():
    cl = hs.Cluster({"v100": 1})
    fixed = Packing.from_job_pairs(["a"], ["b"], [[[0.75, 0.75]]], gpu_types=["v100"])
    with pytest.raises(ValidationError, match="learn=True.*fixed `packing`"):
        OnlineScheduler(hs.policies.MaxMinFairness(packing=fixed), cl)
    OnlineScheduler(hs.policies.MaxMinFairness(packing=fixed), cl, learn=False).close()
    table = pd.DataFrame([[1.0]], index=["a"], columns=pd.MultiIndex.from_tuples([("v100", 1)]))
    with pytest.raises(ValidationError, match="goodput"):
        OnlineScheduler(hs.policies.Sia(goodput=table), cl)
    trace = hs.generate_workload(5, rate_per_hour=6.0, seed=2, pairs=True)
    with pytest.raises(ValidationError, match="packed policy"):
        simulate_online(hs.policies.MaxMinFairness(packing="workload"), trace, hs.Cluster({"v100": 8}), learn=True)


def _dump(s: OnlineScheduler) -> list:
    conn = s._store.conn
    return [conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in ("jobs", "side_rates", "reports")]


@pytest.mark.parametrize(("call", "match"), [
    (lambda s: s.report("a", "v100", 1.0, 1.0, partner="zz"), "`partner` 'zz' is not a submitted job"),
    (lambda s: s.report("a", "v100", 1.0, 1.0, partner="a"), "itself"),
    (lambda s: s.report("a", "v100", 1.0, 1.0, partner="big"), "equal gangs"),
    (lambda s: s.report("a", "v100", 1.0, 1.0, partner="b", spread=True), "not both"),
    (lambda s: s.report("a", "v100", 1.0, 1.0, spread=1), "`spread` must be True or False"),
    (lambda s: s.report("a", "v100", 1.0, 1.0, gpus=3), "`gpus` 3 is neither"),
    (lambda s: s.report("a", "v100", 1.0, 1.0, gpus=0), "`gpus` must be a positive int"),
    (lambda s: s.submit("c", pair_throughputs={"big": {"v100": (1.0, 1.0)}}), "equal gangs"),
    (lambda s: s.submit("c", pair_throughputs={"a": {"v100": 1.0}}), r"must be a pair \(mine, theirs\)"),
    (lambda s: s.submit("c", pair_throughputs={"a": {"h100": (1.0, 1.0)}}), "h100"),
    (lambda s: s.submit("c", pair_throughputs={"a": {"v100": (-1.0, 1.0)}}), r"must be a number in \[0, 1e\+09\]; got -1\.0"),
    (lambda s: s.submit("c", spread_throughputs={"v100": float("nan")}), "spread_throughputs"),
    (lambda s: s.submit("c", spread_throughputs=[1.0]), "must be a mapping"),
])
def test_bad_side_input_raises_and_changes_nothing(tmp_path, call, match):
    s = OnlineScheduler(hs.policies.MaxMinFairness(packing="workload"), hs.Cluster({"v100": 4}),
                        store=tmp_path / "s.db")
    s.submit("a", throughputs={"v100": 1.0})
    s.submit("b", throughputs={"v100": 1.0}, pair_throughputs={"a": {"v100": (0.7, 0.7)}})
    s.submit("big", scale_factor=2, throughputs={"v100": 1.0})
    s.next_round(0.0)
    before = _dump(s)
    with pytest.raises(ValidationError, match=match):
        call(s)
    assert _dump(s) == before
    assert "c" not in set(s.job_table()["job_id"])
    s.close()
