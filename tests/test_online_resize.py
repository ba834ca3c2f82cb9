"""OnlineScheduler.resize: a node lost or added changes the cluster in the store without
losing job state (issue 28 item 3); reopening a store with another cluster (``resize=True``)."""

from __future__ import annotations

import pytest

import hetsched as hs
from hetsched.errors import ValidationError


def _cluster(*servers):
    return hs.Cluster.from_servers(list(servers), gpu_types=["v100", "k80"])


BIG = _cluster(("n1/v100", "v100", 2), ("n1/k80", "k80", 4), ("n2/v100", "v100", 2))
SMALL = _cluster(("n1/v100", "v100", 2), ("n1/k80", "k80", 4))


def _filled(path):
    s = hs.OnlineScheduler("max_min_fairness", BIG, store=path)
    s.submit("gang", throughputs={"v100": 4.0, "k80": 2.0}, total_steps=1e6, scale_factor=4)
    for i in range(5):
        s.submit(f"j{i}", throughputs={"v100": 2.0, "k80": 1.0}, total_steps=1e6)
    s.next_round(0.0)
    s.report("j0", "v100", steps=700.0, seconds=360.0)
    return s


def test_resize_keeps_jobs_and_plans_on_the_new_gpus(tmp_path):
    s = _filled(tmp_path / "s.db")
    before = s.job_table()[["job_id", "status", "steps_done"]]
    est = s.estimates()
    s.resize(SMALL)
    assert s.capacities.tolist() == [2, 4]
    plan = s.next_round(360.0)
    a = plan.assignments
    used = a.groupby("gpu_type")["gpus"].sum().to_dict()
    assert used.get("v100", 0) <= 2 and used.get("k80", 0) <= 4
    assert not any("n2" in srv for servers in a["servers"] for srv in servers)
    assert s.job_table()[["job_id", "status", "steps_done"]].equals(before)
    assert s.estimates().loc["j0", "v100"] == est.loc["j0", "v100"] != 2.0   # the report's estimate is kept
    s.close()
    with pytest.raises(ValidationError, match="use a new store"):
        hs.OnlineScheduler("max_min_fairness", BIG, store=tmp_path / "s.db")
    again = hs.OnlineScheduler("max_min_fairness", SMALL, store=tmp_path / "s.db")   # the store holds SMALL now
    assert again.job_table()[["job_id", "status", "steps_done"]].equals(before)
    again.close()


def test_reopening_with_resize_takes_the_new_cluster_and_drops_the_old_placement(tmp_path):
    s = _filled(tmp_path / "s.db")
    s.close()
    s = hs.OnlineScheduler("max_min_fairness", SMALL, store=tmp_path / "s.db", resize=True)
    leases = s.leases()
    assert leases is not None and len(leases) and all(g == () for g in leases["gpu_ids"])
    used = s.next_round(360.0).assignments.groupby("gpu_type")["gpus"].sum().to_dict()
    assert used.get("v100", 0) <= 2 and used.get("k80", 0) <= 4
    assert float(s.job_table().set_index("job_id").loc["j0", "steps_done"]) == 700.0
    s.close()
    # and it was recorded: a plain reopen with SMALL works
    hs.OnlineScheduler("max_min_fairness", SMALL, store=tmp_path / "s.db").close()


def test_a_gang_larger_than_every_type_waits_until_gpus_come_back(tmp_path):
    s = _filled(tmp_path / "s.db")
    tiny = _cluster(("n1/v100", "v100", 2), ("n1/k80", "k80", 2))
    s.resize(tiny)
    plan = s.next_round(360.0)
    assert "gang" not in set(plan.assignments["job_id"])
    assert s.job_table().set_index("job_id").loc["gang", "status"] == "active"
    s.resize(BIG)
    seen = set()
    for t in range(2, 8):
        seen |= set(s.next_round(360.0 * t).assignments["job_id"])
    assert "gang" in seen
    s.close()


@pytest.mark.parametrize("cluster, match", [
    (hs.Cluster.from_servers([("n1/k80", "k80", 4), ("n1/v100", "v100", 2)], gpu_types=["k80", "v100"]),
     r"GPU types \['v100', 'k80'\] in this order"),
    (hs.Cluster({"v100": 2, "k80": 4}), "servers exactly when"),
    ("v100", "must be a hetsched.Cluster"),
])
def test_resize_refuses_other_types_or_topology_and_changes_nothing(tmp_path, cluster, match):
    s = _filled(tmp_path / "s.db")
    with pytest.raises(ValidationError, match=match):
        s.resize(cluster)
    assert s.capacities.tolist() == [4, 4]
    s.close()
    hs.OnlineScheduler("max_min_fairness", BIG, store=tmp_path / "s.db").close()   # the store still says BIG


@pytest.mark.parametrize("consolidate", [False, True])
def test_consolidate_keeps_every_gang_on_one_server(consolidate):
    # (issue 28: Slurm's --gres is per node, so the Slurm driver plans with consolidate=True)
    c = hs.Cluster.from_servers([("n1/v100", "v100", 2), ("n2/v100", "v100", 2)], gpu_types=["v100"])
    s = hs.OnlineScheduler("fifo", c, consolidate=consolidate)
    for j in "abc":
        s.submit(j, throughputs={"v100": 1.0})
    s.next_round(0.0)                                  # a, b on n1; c on n2
    s.complete("a")
    s.submit("g", throughputs={"v100": 2.0}, scale_factor=2)
    a = s.next_round(360.0).assignments.set_index("job_id")
    assert len(a.loc["g", "servers"]) == (1 if consolidate else 2)   # without it, one free GPU on each server
    assert a["gpus"].sum() == 4


# ------------------------------------------------------------------------------ adaptive schedulers
ADAPTIVE = ("pollux", "sia_adaptive", "optimus")


@pytest.mark.parametrize("name", ADAPTIVE)
def test_adaptive_scheduler_resizes_like_a_reopen_on_the_new_cluster(name, tmp_path):
    """Pollux, the adaptive Sia and Optimus keep every job and what they learned across a
    resize, and plan on the new GPUs. Two paths must agree: resizing in place, and closing
    the store and reopening it on the small cluster with ``resize=True`` (which rebuilds the
    scheduler from the stored state); both then plan the same rounds."""
    from test_adaptive_loop import FOUR_JOBS, TYPES, write_model, write_workload
    from test_online_adaptive import Worker

    from hetsched.inputs.adaptive import AdaptiveProgress, read_adaptive_workload
    from hetsched.schedulers.names import make_scheduler

    write_model(tmp_path, "toy")
    write_model(tmp_path, "toy2")
    w = read_adaptive_workload(write_workload(tmp_path, FOUR_JOBS), profiles=tmp_path, machines=TYPES)
    big, small = hs.Cluster({"t4": 4, "rtx": 8}), hs.Cluster({"t4": 4, "rtx": 2})
    plans, beliefs = {}, {}
    for mode in ("in_place", "reopened"):
        path = tmp_path / f"{mode}.db"
        kw = dict(store=path, round_seconds=60.0, profiles=w.profiles, synchronous="OFF")
        sched = hs.OnlineScheduler(make_scheduler(name), big, **kw)
        worker = Worker(w)
        for j in range(4):
            worker.submit(sched, j)
        keys = []
        for r in range(6):
            if r == 3:
                if mode == "in_place":
                    sched.resize(small)
                else:
                    sched.close()
                    sched = hs.OnlineScheduler(make_scheduler(name), small, resize=True, **kw)
                worker.truth = AdaptiveProgress(w, small)
                learned = len(sched._state.beliefs.samples)
            plan = sched.next_round(60.0 * r)
            keys.append(plan.key())
            a = plan.assignments
            if r >= 3 and a is not None and len(a):
                used = a.groupby("gpu_type")["gpus"].sum().to_dict()
                assert used.get("rtx", 0) <= 2 and used.get("t4", 0) <= 4, used
            worker.run(sched, plan, 60.0 * r, 60.0)
        table = sched.job_table()
        assert len(table) == 4
        assert learned > 0    # what was learned before the resize was kept through it
        plans[mode], beliefs[mode] = keys, sched._state.beliefs
        sched.close()
    assert plans["in_place"] == plans["reopened"]
    assert beliefs["in_place"].samples == beliefs["reopened"].samples
