"""The HiveD round scheduler and the quota baseline (issue 26 items 2, 4, 7): a sharing
anomaly derived by hand that appears under quotas and disappears under cells, preemption of
an opportunistic job when its owner claims the cell, bad hardware, bad input, and the
drivers (simulate by name, the online scheduler with a reopened store)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hetsched as hs
from hetsched.errors import ValidationError
from hetsched.hived import HiveD, QuotaScheduler, anomaly_delay
from hetsched.inputs.topology import Level
from hetsched.rounds.protocol import RoundView

ROUND = 360.0
OPTS = hs.SimOptions(round_seconds=ROUND, placement=False, record_runs=True)
TWO_TENANTS = {"tenants": [{"name": "A", "cells": {"v100": {"server": 1}}},
                           {"name": "B", "cells": {"v100": {"server": 1}}}]}


def jobs(rows):
    """rows: (id, tenant, gpus, rounds of work at 1 step/s, arrival)."""
    return hs.JobSet(np.ones((len(rows), 1)), gpu_types=["v100"], ids=[r[0] for r in rows],
                     scale_factors=[r[2] for r in rows], steps_remaining=[r[3] * ROUND for r in rows],
                     arrival_times=[r[4] for r in rows], entities=[r[1] for r in rows])


# b1 takes server 0 for round 0; a1 (3 rounds) lands on server 1 under first fit; at 360 s a2
# goes to server 0 (first fit) and b2 (4 GPUs, within B's 4-GPU quota) finds 3 + 3 free GPUs:
# it waits rounds 1 and 2 until a1 ends (720 s of anomaly). Under HiveD, A's jobs stay in A's
# cell (server 1) and b2 gets B's cell (server 0) at once.
ANOMALY = [("b1", "B", 4, 1, 0.0), ("a1", "A", 1, 3, 0.0), ("a2", "A", 1, 10, ROUND), ("b2", "B", 4, 1, ROUND)]


def two_servers():
    return hs.Cluster.from_servers({"v100": 8}, gpus_per_server=4)


@pytest.mark.parametrize("placement", [False, True])
@pytest.mark.parametrize("sched, b2_wait", [(QuotaScheduler, 2 * ROUND), (HiveD, 0.0)])
def test_sharing_anomaly_by_hand(sched, b2_wait, placement):
    # with placement on, the loop runs the rows on the GPUs the scheduler chose (placed_gpus)
    s = sched(tenants=TWO_TENANTS)
    cl = two_servers()
    w = jobs(ANOMALY)
    res = hs.simulate(s, w, cl, options=hs.SimOptions(round_seconds=ROUND, placement=placement, record_runs=True))
    a = anomaly_delay(res, s.setup(cl), w.entities).set_index("job_id")
    assert a.loc["b2", "queueing_delay_s"] == b2_wait
    assert a.loc["b2", "anomaly_delay_s"] == b2_wait          # every second of it is anomaly
    assert a.loc[["b1", "a1", "a2"], "anomaly_delay_s"].tolist() == [0.0, 0.0, 0.0]
    assert res.jobs.set_index("job_id").loc["b2", "jct_s"] == ROUND + b2_wait
    # the same numbers, per tenant, in the result itself (simulate calls result_metrics)
    t = res.extra["tenant_metrics"].set_index("tenant")
    assert t.loc["B", "anomaly_delay_h"] == b2_wait / 3600 and t.loc["A", "anomaly_delay_h"] == 0.0
    assert t.loc["B", "jobs_with_anomaly"] == (1 if b2_wait else 0) and t.loc["B", "jobs"] == 2
    assert t.loc["B", "avg_queueing_delay_h"] == b2_wait / 2 / 3600      # b1 waited 0, b2 b2_wait
    frag = res.extra["fragmentation_mean"]
    assert set(frag["gpu_type"]) == {"v100"} and frag["fragmentation"].between(0.0, 1.0).all()


def test_tenant_metrics_without_a_run_log_leave_the_anomaly_unknown():
    s = HiveD(tenants=TWO_TENANTS)
    res = hs.simulate(s, jobs(ANOMALY), two_servers(),
                      options=hs.SimOptions(round_seconds=ROUND, placement=False, record_runs=False))
    t = res.extra["tenant_metrics"]
    assert res.extra["anomaly"] is None and t["anomaly_delay_h"].isna().all() and t["jobs"].tolist() == [2, 2]


def test_no_anomaly_when_the_tenant_is_at_its_quota():
    # b2 arrives while b1 (4 GPUs, 3 rounds) still runs: B's quota is full, so b2's wait is
    # ordinary queueing, not an anomaly, under both schedulers
    rows = [("b1", "B", 4, 3, 0.0), ("b2", "B", 4, 1, ROUND)]
    for sched in (QuotaScheduler, HiveD):
        s = sched(tenants=TWO_TENANTS)
        res = hs.simulate(s, jobs(rows), two_servers(), options=OPTS)
        a = anomaly_delay(res, s.setup(two_servers()), ["B", "B"]).set_index("job_id")
        assert a.loc["b2", "queueing_delay_s"] == 2 * ROUND and a.loc["b2", "anomaly_delay_s"] == 0.0


@pytest.mark.parametrize("sched", [HiveD, QuotaScheduler])
def test_opportunistic_job_is_preempted_when_the_owner_claims_its_cell(sched):
    # o1 (B owns no cell: opportunistic) takes the idle server in round 0; g1 of A (the owner)
    # arrives at 360 s and claims it: o1 is preempted in round 1 and resumes in round 2, so
    # its 10 rounds of work end at 11 x 360 s
    ten = {"tenants": [{"name": "A", "cells": {"v100": {"server": 1}}},
                       {"name": "B", "priority": "opportunistic"}]}
    cl = hs.Cluster.from_servers({"v100": 4}, gpus_per_server=4)
    res = hs.simulate(sched(tenants=ten), jobs([("o1", "B", 4, 10, 0.0), ("g1", "A", 2, 1, ROUND)]), cl,
                      options=OPTS)
    j = res.jobs.set_index("job_id")
    assert j.loc["o1", "preemptions"] == 1
    assert j.loc["o1", "finish_s"] == 11 * ROUND
    assert j.loc["g1", "queueing_delay_s"] == 0.0
    ran = res.runs[res.runs["round"] == 1]
    assert ran["job"].tolist() == [1]                          # only g1 (position 1) ran in round 1


def test_job_priority_table_overrides_the_tenant_default():
    ten = {"tenants": [{"name": "A", "cells": {"v100": {"server": 1}}}]}
    cl = hs.Cluster.from_servers({"v100": 4}, gpus_per_server=4)
    w = jobs([("x", "A", 4, 5, 0.0), ("y", "A", 4, 1, ROUND)])
    # x opportunistic: y (guaranteed) preempts it at 360 s; without the table y waits for x
    res = hs.simulate(HiveD(tenants=ten, job_priority={"x": "opportunistic"}), w, cl, options=OPTS)
    assert res.jobs.set_index("job_id").loc["y", "queueing_delay_s"] == 0.0
    res = hs.simulate(HiveD(tenants=ten), w, cl, options=OPTS)
    assert res.jobs.set_index("job_id").loc["y", "queueing_delay_s"] == 4 * ROUND
    with pytest.raises(ValidationError, match="job_priority"):
        hs.simulate(HiveD(tenants=ten, job_priority={"x": "high"}), w, cl, options=OPTS)


def view_of(cluster, rows, now=0.0, rnd=0):
    n = len(rows)
    return RoundView(now=now, round_index=rnd, round_seconds=ROUND, cluster=cluster, gpu_types=("v100",),
                     capacities=cluster.counts, jobs=np.arange(n, dtype=np.int64), throughputs=np.ones((n, 1)),
                     unconsolidated=None, scale_factors=np.array([r[2] for r in rows], dtype=np.int64),
                     weights=np.ones(n), remaining=np.full(n, 1e6), arrival=np.array([r[4] for r in rows]),
                     isolated_time=np.zeros(n), entities=np.array([r[1] for r in rows], dtype=object),
                     context={"ids": np.array([r[0] for r in rows], dtype=object)})


def step(s, state, view):
    rows = s.plan_round(view, state)
    return rows, s.record_round(state, rows, np.full(rows.n_rows, ROUND))


def gpus_of(state, job):
    return state.held()[job][2].tolist()


def test_bad_gpu_remaps_the_cell_and_the_state_says_so():
    cl = hs.Cluster.from_servers({"v100": 12}, gpus_per_server=4)    # servers 0-3, 4-7, 8-11
    s = HiveD(tenants={"tenants": [{"name": "A", "cells": {"v100": {"server": 1}}}]})
    v = view_of(cl, [("a1", "A", 4, 0, 0.0)])
    _, st0 = step(s, s.initial_state(), v)
    assert gpus_of(st0, 0) == [0, 1, 2, 3]                   # A's cell bound to server 0
    st1 = st0.with_bad_gpus([2])
    _, st2 = step(s, st1, v)
    assert gpus_of(st2, 0) == [4, 5, 6, 7]                    # re-mapped to server 1
    assert st2.lost_vcell.size == 0
    # server 1 and 2 break too: no healthy server cell is left for A; its job waits, the state lists the lost cell
    rows, st3 = step(s, st2.with_bad_gpus([5, 9]), v)
    assert rows.n_rows == 0 and st3.lost_vcell.tolist() == [0]


def test_bad_gpus_from_the_start_take_part_in_the_safety_check():
    cl = hs.Cluster.from_servers({"v100": 8}, gpus_per_server=4)
    ten = {"tenants": [{"name": "A", "cells": {"v100": {"server": 1}}}, {"name": "B", "cells": {"v100": {"server": 1}}}]}
    with pytest.raises(ValidationError, match=r"tenant 'B' needs a cell at level 'server'.*1 bad GPU"):
        HiveD(tenants=ten, bad_gpus=[7]).setup(cl)
    with pytest.raises(ValidationError, match="bad_gpus"):
        HiveD(bad_gpus=[8]).setup(cl)


def test_bad_input_is_refused_before_any_round():
    cl = two_servers()
    w = jobs(ANOMALY)
    too_big = {"tenants": [{"name": "A", "cells": {"v100": {"server": 2}}}, {"name": "B", "cells": {"v100": {"server": 1}}}]}
    with pytest.raises(ValidationError, match=r"tenant 'B' needs a cell at level 'server'.*\{'A': 2, 'B': 1\}.*has 2 v100"):
        hs.simulate(HiveD(tenants=too_big), w, cl, options=OPTS)
    with pytest.raises(ValidationError, match="level 'switch', which the topology lacks"):
        hs.simulate(HiveD(tenants={"tenants": [{"name": "A", "cells": {"v100": {"switch": 1}}}]}), w, cl, options=OPTS)
    with pytest.raises(ValidationError, match="job 'b1' belongs to tenant 'B', which does not exist"):
        hs.simulate(QuotaScheduler(tenants={"tenants": [{"name": "A", "cells": {"v100": {"server": 1}}}]}), w, cl,
                    options=OPTS)
    with pytest.raises(ValidationError, match="no entities"):
        hs.simulate(HiveD(tenants=TWO_TENANTS), hs.JobSet([[1.0]], gpu_types=["v100"], steps_remaining=[10.0]), cl,
                    options=OPTS)
    with pytest.raises(ValidationError, match="tenants"):
        HiveD(tenants=3)
    with pytest.raises(ValidationError, match="gpus_per_server"):
        HiveD(gpus_per_server=0)


@pytest.mark.parametrize("sched", [HiveD, QuotaScheduler])
@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 16))
def test_no_overlap_quota_kept_and_no_anomaly_under_hived(sched, seed, n):
    """Random multi-tenant traces (gang sizes 1-8 on 4 servers of 8 in pairs and switches,
    tenants' cells filling the cluster exactly), checked by an independent checker: every
    round's GPUs are disjoint and each job holds exactly its gang; each tenant's guaranteed
    jobs never hold more GPUs than its quota; HiveD's anomaly is 0."""
    lv = [Level("pair", size=2), Level("switch", size=2), Level("server"), Level("rack")]
    cl = hs.Cluster.from_servers({"v100": 32}, gpus_per_server=8, levels=lv)
    ten = {"tenants": [{"name": "e0", "cells": {"v100": {"server": 1, "switch": 1}}},
                       {"name": "e1", "cells": {"v100": {"server": 1, "pair": 2}}},
                       {"name": "e2", "cells": {"v100": {"server": 1}}}]}     # exactly the 4 servers
    w = hs.generate_workload(n, rate_per_hour=40.0, seed=seed, n_entities=3, gpu_types=["v100"], long_job_prob=0.0)
    seen = []

    class Spy(sched):
        def record_round(self, state, ran, seconds):
            out = super().record_round(state, ran, seconds)
            seen.append(out)
            return out

    spy = Spy(tenants=ten)
    res = hs.simulate(spy, w, cl, options=hs.SimOptions(placement=False, record_runs=True, max_time=40 * 3600.0))
    assert res.summary["n_completed"] == n
    quota = spy.setup(cl).quota
    gang = dict(enumerate(w.jobs.scale_factors.tolist()))
    for state in seen:
        assert np.unique(state.gpu_ids).shape == state.gpu_ids.shape
        held = state.held()
        assert all(len(g) == gang[j] for j, (_, _, g, _) in held.items())
        for v in range(3):
            mine = [g for j, (t, c, g, _) in held.items() if c == 0 and w.jobs.entities[j] == f"e{v}"]
            assert sum(len(g) for g in mine) <= quota[v, 0]
    if sched is HiveD:
        a = anomaly_delay(res, spy.setup(cl), w.jobs.entities)
        assert (a["anomaly_delay_s"] == 0).all()


def test_runs_by_name_and_with_the_default_tenant():
    w = hs.generate_workload(8, rate_per_hour=8.0, seed=2, long_job_prob=0.0)
    cl = hs.Cluster({"v100": 8, "k80": 8})
    for name in ("hived", "hived_quota"):
        res = hs.simulate(name, w, cl)
        assert res.summary["n_completed"] == 8


@pytest.mark.parametrize("sched", [HiveD, QuotaScheduler])
def test_online_scheduler_with_a_reopened_store(tmp_path, sched):
    cl = two_servers()
    path = tmp_path / "h.db"

    def fresh():
        return hs.OnlineScheduler(sched(tenants=TWO_TENANTS), cl, store=path, round_seconds=ROUND)

    twin = hs.OnlineScheduler(sched(tenants=TWO_TENANTS), cl, store=tmp_path / "twin.db", round_seconds=ROUND)
    other = fresh()
    for s in (twin, other):
        for jid, ten, g, _, arr in ANOMALY[:2]:
            s.submit(jid, scale_factor=g, throughputs={"v100": 1.0}, total_steps=1e6, entity=ten, arrival=arr)
    plans = [s.next_round(0.0).key() for s in (twin, other)]
    assert plans[0] == plans[1]
    other.close()
    other = fresh()
    for s in (twin, other):
        s.submit("b2", scale_factor=4, throughputs={"v100": 1.0}, total_steps=1e6, entity="B", arrival=ROUND)
    p1, p2 = twin.next_round(ROUND), other.next_round(ROUND)
    assert p1.key() == p2.key()
    running = p1.assignments["job_id"].tolist()
    assert "b1" in running and "a1" in running and "b2" not in running   # B's quota is held by b1: b2 waits
    twin.close()
    other.close()


@pytest.mark.parametrize("wrong", [{"a": 1}, "x", 3.0])
def test_wrong_types_are_refused_by_name(wrong):
    from hetsched.hived import BuddyAllocator, CellForest, TenantPolicy, fragmentation

    s = HiveD(tenants=TWO_TENANTS)
    with pytest.raises(ValidationError, match="`view` must be a hetsched RoundView"):
        s.plan_round(wrong, s.initial_state())
    with pytest.raises(ValidationError, match="`view`"):
        QuotaScheduler().plan_round(wrong, QuotaScheduler().initial_state())
    with pytest.raises(ValidationError, match="`view`"):
        TenantPolicy().plan_round(wrong, TenantPolicy().initial_state())
    with pytest.raises(ValidationError, match="`state` must be a HiveDState"):
        s.plan_round(view_of(two_servers(), []), wrong)
    with pytest.raises(ValidationError, match="`cluster` must be a hetsched.Cluster"):
        s.setup(wrong)
    with pytest.raises(ValidationError, match="`result` must be a SimulationResult"):
        anomaly_delay(wrong, s.setup(two_servers()), [])
    with pytest.raises(ValidationError, match="`forest` must be a CellForest"):
        fragmentation(wrong, [])
    with pytest.raises(ValidationError, match="`forest` must be a CellForest"):
        BuddyAllocator(wrong)
    with pytest.raises(ValidationError, match="`topology` must be a hetsched Topology"):
        CellForest.build(wrong)


@pytest.mark.parametrize("sched", [HiveD, QuotaScheduler])
def test_online_gpu_ids_are_the_schedulers_own(sched):
    """Online, on a cluster with servers, each job runs on the GPUs the scheduler chose (its
    payload), not on a second placement: b1 (B, 4 GPUs) fills one whole server, a1 (A) sits
    on the other."""
    from hetsched.hived.common import payload_gpus

    o = hs.OnlineScheduler(sched(tenants=TWO_TENANTS), two_servers(), round_seconds=ROUND)
    for jid, ten, g, _, arr in ANOMALY[:2]:
        o.submit(jid, scale_factor=g, throughputs={"v100": 1.0}, total_steps=1e6, entity=ten, arrival=arr)
    p = o.next_round(0.0)
    a = p.assignments.set_index("job_id")
    own = dict(zip(p.rows.job.tolist(), payload_gpus(p.rows)))
    for num, jid in enumerate(["b1", "a1"]):
        assert list(a.loc[jid, "gpu_ids"]) == own[num].tolist()
    assert sorted(a.loc["b1", "gpu_ids"]) in ([0, 1, 2, 3], [4, 5, 6, 7])
    assert len(a.loc["b1", "servers"]) == 1 and a.loc["a1", "servers"] != a.loc["b1", "servers"]


def test_scheduler_placed_rows_are_checked():
    """RoundPlacer.place_given: a wrong count, another type's GPU, or one GPU twice is an
    error naming the job; a job that kept its GPUs did not migrate, one that moved did, and a
    row over two servers is spread."""
    from hetsched.errors import SchedulerError
    from hetsched.rounds.placing import RoundPlacer
    from hetsched.rounds.protocol import RoundRows

    cl = hs.Cluster.from_servers({"v100": 8, "k80": 4}, gpus_per_server=4)   # v100: GPUs 0-7, k80: 8-11
    placer = RoundPlacer(cl, ("v100", "k80"))
    rows = RoundRows(np.array([0, 1]), np.array([0, 1]), np.array([2, 1]), np.array([1.0, 1.0]))
    pl = placer.place_given(rows, [np.array([0, 1]), np.array([8])])
    assert pl.placed.all() and not pl.migrated.any() and not pl.spread.any()
    pl = placer.place_given(rows, [np.array([3, 4]), np.array([8])])
    assert pl.migrated.tolist() == [True, False] and pl.spread.tolist() == [True, False]
    with pytest.raises(SchedulerError, match="job 0 on GPUs \\[0\\]: it needs 2 ids"):
        placer.place_given(rows, [np.array([0]), np.array([8])])
    with pytest.raises(SchedulerError, match="job 1 on GPUs \\[7\\], not all of its row's type 'k80'"):
        placer.place_given(rows, [np.array([0, 1]), np.array([7])])
    two = RoundRows(np.array([0, 1]), np.array([0, 0]), np.array([2, 1]), np.array([1.0, 1.0]))
    with pytest.raises(SchedulerError, match="job 1 on GPU\\(s\\) \\[1\\], which another row"):
        placer.place_given(two, [np.array([0, 1]), np.array([1])])
