"""The Slurm driver against the in-memory FakeSlurm: reading the cluster, reconciling, progress,
applying plans batched, failures, capacity changes, crash recovery, shadow mode (issue 28).
The same driver against a real slurmctld/slurmd: tests/test_slurm_real.py."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections import Counter

import pytest

from hetsched.errors import ValidationError
from hetsched.slurm import (
    FakeSlurm,
    SlurmCommandError,
    SlurmCommands,
    SlurmDriver,
    SlurmNode,
    Start,
    lease,
    read_cluster,
    report,
)
from hetsched.slurm.records import SlurmJob, expand_hostlist, parse_gres
from hetsched.slurm.requests import parse_request

RATES = "hetsched:throughputs=v100:2,k80:1;total_steps=100000"
NODES = {"n1": {"v100": 2, "k80": 4}, "n2": {"v100": 2}}


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def fake(clock):
    return FakeSlurm(NODES, clock=clock)


def driver(tmp_path, fake, clock, scheduler="max_min_fairness", **kw):
    kw.setdefault("gpu_types", ["v100", "k80"])
    return SlurmDriver(scheduler, commands=fake, spool=tmp_path / "spool", store=tmp_path / "s.db",
                       round_seconds=60, clock=clock, sleep=lambda s: None, **kw)


def running(fake, ids):
    return {j: (fake.job(j).gpu_type, fake.job(j).gpus) for j in ids if fake.job(j).running}


# ---------------------------------------------------------------------- parsing Slurm's text
def test_gres_hostlists_and_requests_parse():
    assert parse_gres("gpu:v100:2(S:0-1),gpu:k80:4,gres:gpu:1,mps:200") == ({"v100": 2, "k80": 4}, 1)
    assert expand_hostlist("gpu[08-10],cpu1") == ("gpu08", "gpu09", "gpu10", "cpu1")
    req = parse_request(SlurmJob("3", "PENDING", True, 2, comment="hetsched:job_type=LM;throughputs=v100:3,k80:1;"
                                                               "weight=2;entity=lab"))
    assert (req.gpus, req.job_type, req.throughputs, req.weight, req.entity) == (2, "LM", {"v100": 3.0, "k80": 1.0},
                                                                               2.0, "lab")
    with pytest.raises(ValidationError, match=r"job 3: `--comment` key 'colour' must be one of"):
        parse_request(SlurmJob("3", "PENDING", True, 1, comment="hetsched:colour=red"))
    with pytest.raises(ValidationError, match=r"job 4: `total_steps` in its --comment must be a number; got 'many'"):
        parse_request(SlurmJob("4", "PENDING", True, 1, comment="hetsched:total_steps=many"))
    with pytest.raises(ValidationError, match="job 5: its GPUs"):
        parse_request(SlurmJob("5", "PENDING", True, 0))


def test_a_gres_type_missing_from_the_throughput_table_names_both_lists():
    nodes = [SlurmNode("n1", {"a100": 2, "v100": 1}, True, "idle")]
    with pytest.raises(ValidationError, match=r"GRES GPU types \['a100', 'v100'\] .* table \['v100', 'k80'\]; "
                                              r"\['a100'\] are not"):
        read_cluster(nodes, ["v100", "k80"])
    with pytest.raises(ValidationError, match="a100"):
        SlurmDriver("fifo", commands=FakeSlurm({"n1": {"a100": 1}}), spool="unused", gpu_types=["v100"])


def test_the_real_command_layer_reports_a_missing_binary_and_counts_it(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    cmds = SlurmCommands(partition="p", use_json=True)
    with pytest.raises(SlurmCommandError, match="'squeue' is not on PATH"):
        cmds.jobs()
    assert cmds.stats["failures"] == 1 and cmds.stats["squeue.failures"] == 1


def test_the_real_command_layer_times_out_and_says_so(tmp_path, monkeypatch):
    slow = tmp_path / "scontrol"
    slow.write_text("#!/bin/sh\n/bin/sleep 5\n")
    slow.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    cmds = SlurmCommands(timeout_s=0.2)
    with pytest.raises(SlurmCommandError, match=r"timed out after 0.2 s"):
        cmds.hold(["1", "2"])
    assert cmds.stats["timeouts"] == 1


def test_the_real_command_layer_batches_ids_into_one_command(tmp_path, monkeypatch):
    calls = tmp_path / "calls"
    for name in ("scontrol", "scancel"):
        exe = tmp_path / name
        exe.write_text(f'#!/bin/sh\necho "{name} $*" >> {calls}\n')
        exe.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    cmds = SlurmCommands()
    cmds.start([Start("1", "v100", 1), Start("2", "v100", 1), Start("3", "k80", 2, ("n1",)), Start("4", "k80", 1),
                Start("5", "v100", 2, ("n1", "n2")), Start("6", "v100", 2, (), None, 2)])
    cmds.signal(["1", "2"])
    cmds.requeue_hold(["1", "2"])
    assert calls.read_text().splitlines() == [
        "scontrol update JobId=1,2,3,4,5,6 TresPerNode=",
        "scontrol update JobId=1,2 TresPerNode=gres:gpu:v100:1 StartTime=now",
        "scontrol update JobId=3 TresPerNode=gres:gpu:k80:2 NumNodes=1 NodeList=n1 StartTime=now",
        "scontrol update JobId=4 TresPerNode=gres:gpu:k80:1 StartTime=now",
        "scontrol update JobId=5 TresPerNode=gres:gpu:v100:2 NumNodes=2 NodeList=n1,n2 StartTime=now",
        "scontrol update JobId=6 TresPerNode=gres:gpu:v100:2 NumNodes=2 StartTime=now",
        "scontrol release 1,2,3,4,5,6",
        "scancel --signal=USR1 --full 1 2",
        "scontrol requeuehold 1,2",
    ]


# ---------------------------------------------------------------------- rounds
def test_a_round_starts_planned_jobs_within_capacity_with_batched_commands(tmp_path, fake, clock):
    ids = [fake.submit(1, comment=RATES) for _ in range(6)] + [fake.submit(2, comment=RATES)]
    d = driver(tmp_path, fake, clock, "fifo")   # max-min fairness would rotate the jobs over the types
    fake.log.clear()
    s = d.run_round()
    assert sorted(s.started) == sorted(ids) and not s.preempted
    per_type = Counter()
    for j in ids:
        job = fake.job(j)
        per_type[job.gpu_type] += job.gpus
        assert lease(job_id=j, spool=tmp_path / "spool") == (job.gpu_type, job.gpus)
    assert per_type == {"v100": 4, "k80": 4}
    names = [n for n, _ in fake.log]
    assert names.count("squeue") == 1 and names.count("sinfo") == 1 and names.count("scontrol release") == 1
    gang = fake.job(ids[-1])
    assert gang.gpu_type == "k80" and gang.nodes == ("n1",)   # a gang is pinned where the plan put it
    # leases renewed: the next round keeps them running, no command acts
    clock.t += 60
    fake.log.clear()
    s = d.run_round()
    assert sorted(s.kept) == sorted(ids) and not s.started and not s.preempted
    assert {n for n, _ in fake.log} == {"sinfo", "squeue"}
    d.close()


def test_more_jobs_than_gpus_are_preempted_with_the_grace_signal_and_requeued_held(tmp_path, fake, clock):
    ids = [fake.submit(1, comment=RATES) for _ in range(12)]
    d = driver(tmp_path, fake, clock, grace_s=30.0)
    slept = []
    d.sleep = slept.append
    d.run_round()
    first = set(running(fake, ids))
    assert len(first) == 8
    clock.t += 60
    s = d.run_round()
    assert s.preempted and set(s.preempted) <= first
    assert {j for j, sig in fake.signals} == set(s.preempted) and {sig for _, sig in fake.signals} == {"USR1"}
    assert 30.0 in slept
    for j in s.preempted:
        if j not in s.started:
            assert fake.job(j).held and fake.job(j).state == "PENDING"
    assert sum(fake.restarts.values()) == len(s.preempted)
    assert len(running(fake, ids)) == 8
    d.close()


def test_progress_is_reported_and_reports_that_go_back_are_refused_by_name(tmp_path, fake, clock, caplog):
    a, b = fake.submit(1, comment=RATES), fake.submit(1, comment=RATES)
    d = driver(tmp_path, fake, clock)
    d.run_round()
    spool = tmp_path / "spool"
    kind = fake.job(a).gpu_type
    report(100, job_id=a, spool=spool, now=clock.t + 50)
    report(120, job_id=a, spool=spool, now=clock.t + 60)
    report(90, job_id=b, spool=spool, now=clock.t + 30)
    report(40, job_id=b, spool=spool, now=clock.t + 60)        # goes back
    (spool / f"{b}.progress").open("a").write("garbage\n")
    clock.t += 60
    with caplog.at_level(logging.WARNING, logger="hetsched.slurm"):
        s = d.run_round()
    done = d.online.job_table().set_index("job_id")["steps_done"]
    assert done[a] == 120 and done[b] == 90
    assert s.reports == 2 and s.refused == 2
    assert d.refused_reports == {b: 2}
    assert f"job {b}: report refused (40 steps reported after 90" in caplog.text
    assert d.online.estimates().loc[a, kind] == pytest.approx(2.0)   # 120 steps in 60 s
    # a restarted driver re-reads the files from the start and applies nothing twice
    d.close()
    d = driver(tmp_path, fake, clock)
    clock.t += 60
    d.run_round()
    done = d.online.job_table().set_index("job_id")["steps_done"]
    assert done[a] == 120 and done[b] == 90
    d.close()


def test_progress_of_a_run_that_ended_before_the_driver_read_it_still_counts(tmp_path, fake, clock):
    a = fake.submit(1, comment=RATES)
    d = driver(tmp_path, fake, clock, "fifo")
    d.run_round()
    kind = fake.job(a).gpu_type
    report(90, job_id=a, spool=tmp_path / "spool", now=clock.t + 30)
    fake.requeue_hold([a])                  # requeued outside hetsched (an admin, a node failure)
    clock.t += 60
    s = d.run_round()
    assert s.reports == 1 and s.refused == 0
    assert d.online.job_table().set_index("job_id").loc[a, "steps_done"] == 90
    assert d.online.estimates().loc[a, kind] == pytest.approx(3.0)    # 90 steps in the 30 s since its release
    d.close()


def test_reconciliation_finishes_jobs_slurm_finished_and_preempts_unplanned_runs(tmp_path, fake, clock):
    ids = [fake.submit(1, comment=RATES) for _ in range(4)]
    d = driver(tmp_path, fake, clock)
    d.run_round()
    fake.finish(ids[0], "COMPLETED")
    fake.finish(ids[1], "CANCELLED")
    fake.forget(ids[2])
    late = fake.submit(1, comment=RATES, held=False)   # submitted without --hold, and Slurm ran it
    fake.start([Start(late, "v100", 1)])
    clock.t += 60
    s = d.run_round()
    status = d.online.job_table().set_index("job_id")["status"]
    assert (status[ids[0]], status[ids[1]], status[ids[2]]) == ("completed", "cancelled", "cancelled")
    assert s.completed == 1 and s.cancelled == 2 and s.submitted == 1
    assert status[late] == "active"
    d.close()


def test_a_job_the_grace_signal_ended_is_requeued_not_lost(tmp_path, fake, clock):
    # A job preempted right after it started can die of SIGUSR1 before it installs its handler:
    # Slurm says FAILED (exit signal 10). It must be requeued, not cancelled; other failures end.
    ids = [fake.submit(1, comment=RATES) for _ in range(4)]
    d = driver(tmp_path, fake, clock, "fifo")
    d.run_round()
    assert all(fake.job(j).running for j in ids)
    report(30, job_id=ids[0], spool=tmp_path / "spool", now=clock.t + 30)
    fake.finish(ids[0], "FAILED", exit_signal=10)     # SIGUSR1
    fake.finish(ids[1], "FAILED", exit_signal=9)      # SIGKILL: not the grace signal
    fake.finish(ids[2], "FAILED")                     # a non-zero exit
    fake.fail["scontrol requeuehold"] = 1
    clock.t += 60
    s = d.run_round()                                 # the requeue fails: counted, retried next round
    status = d.online.job_table().set_index("job_id")["status"]
    assert s.requeued_failed == [ids[0]] and s.failures == 1 and s.cancelled == 2
    assert (status[ids[0]], status[ids[1]], status[ids[2]], status[ids[3]]) == \
        ("active", "cancelled", "cancelled", "active")
    assert fake.job(ids[0]).state == "FAILED" and d.stats["requeued_failed"] == 0
    clock.t += 60
    s = d.run_round()
    assert s.requeued_failed == [ids[0]] and s.failures == 0 and d.stats["requeued_failed"] == 1
    assert fake.job(ids[0]).state == "PENDING" and fake.job(ids[0]).held
    assert d.online.job_table().set_index("job_id").loc[ids[0], "steps_done"] == 30   # its progress is kept
    s = d.run_round()                       # the same second: Slurm would fail a start now
    assert ids[0] not in s.started and fake.job(ids[0]).held
    clock.t += 60
    s = d.run_round()                                 # and it runs again
    assert ids[0] in s.started and fake.job(ids[0]).running and not s.requeued_failed
    d.close()


def test_a_shadow_driver_only_says_it_would_requeue_a_job_the_grace_signal_ended(tmp_path, fake, clock, caplog):
    ids = [fake.submit(1, comment=RATES) for _ in range(2)]
    fake.start([Start(ids[0], "v100", 1)])
    d = driver(tmp_path, fake, clock, "fifo", shadow=True)
    d.run_round()
    fake.finish(ids[0], "FAILED", exit_signal=10)
    fake.log.clear()
    clock.t += 60
    with caplog.at_level(logging.WARNING, logger="hetsched.slurm"):
        s = d.run_round()
    assert s.requeued_failed == [ids[0]] and "would requeue them" in caplog.text
    assert fake.job(ids[0]).state == "FAILED" and ("scontrol requeuehold", (ids[0],)) not in fake.log
    assert d.online.job_table().set_index("job_id").loc[ids[0], "status"] == "active"
    d.close()


def test_the_exit_signal_is_read_from_both_json_shapes_of_squeue(tmp_path, monkeypatch):
    jobs = [  # Slurm 22.05: a raw wait status; 23.02 on: a status list and a signal record
        {"job_id": 1, "job_state": "FAILED", "exit_code": 10},
        {"job_id": 2, "job_state": "FAILED", "exit_code": 768},
        {"job_id": 3, "job_state": "FAILED",
         "exit_code": {"status": ["SIGNALED"], "return_code": {"set": True, "number": 0},
                       "signal": {"id": {"set": True, "number": 10}, "name": "USR1"}}},
        {"job_id": 4, "job_state": "FAILED",
         "exit_code": {"status": ["ERROR"], "return_code": {"set": True, "number": 3},
                       "signal": {"id": {"set": False, "number": 0}, "name": ""}}},
        {"job_id": 5, "job_state": "FAILED", "exit_code": 9},
        {"job_id": 6, "job_state": "COMPLETED", "exit_code": 0},
    ]
    (tmp_path / "jobs.json").write_text(json.dumps(
        {"jobs": [{**j, "partition": "p", "priority": 1, "tres_per_node": "gres:gpu:1"} for j in jobs]}))
    exe = tmp_path / "squeue"
    exe.write_text(f"#!/bin/sh\nexec /bin/cat {tmp_path / 'jobs.json'}\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    got = {j.job_id: (j.exit_signal, j.killed_by_grace_signal)
           for j in SlurmCommands(partition="p", use_json=True).jobs()}
    assert got == {"1": (10, True), "2": (None, False), "3": (10, True), "4": (None, False), "5": (9, False),
                   "6": (None, False)}


def test_a_drained_node_shrinks_the_cluster_and_loses_no_job(tmp_path, fake, clock):
    ids = [fake.submit(1, comment=RATES) for _ in range(8)]
    d = driver(tmp_path, fake, clock, "fifo")       # leases are renewed: only the drain moves jobs
    d.run_round()
    on_n2 = [j for j in ids if fake.job(j).nodes == ("n2",)]
    assert len(on_n2) == 2
    for j in ids:
        report(60, job_id=j, spool=tmp_path / "spool", now=clock.t + 30)
    fake.set_node("n2", usable=False)
    clock.t += 60
    s = d.run_round()
    assert d.stats["resizes"] == 1 and d.online.capacities.tolist() == [2, 4]
    assert not any("n2" in fake.job(j).nodes for j in ids if fake.job(j).running)
    assert sum(g for t, g in running(fake, ids).values() if t == "v100") <= 2
    table = d.online.job_table()
    assert (table["status"] == "active").all() and (table["steps_done"] == 60).all()
    assert set(on_n2) <= set(s.preempted)
    fake.set_node("n2", usable=True)
    fake.set_node("n3", gpus={"k80": 4})                         # and a node joins
    clock.t += 60
    d.run_round()
    assert d.online.capacities.tolist() == [4, 8] and d.stats["resizes"] == 2
    assert len(running(fake, ids)) == 8
    d.close()


def test_jobs_on_a_drained_node_move_off_it_even_when_their_gpu_type_stays(tmp_path, fake, clock):
    v100_only = "hetsched:throughputs=v100:2,k80:0;total_steps=100000"
    ids = [fake.submit(1, comment=v100_only) for _ in range(4)]
    d = driver(tmp_path, fake, clock, "fifo")
    d.run_round()
    assert [fake.job(j).nodes for j in ids] == [("n1",), ("n1",), ("n2",), ("n2",)]
    fake.finish(ids[0])
    fake.finish(ids[1])
    fake.set_node("n2", usable=False)
    clock.t += 60
    s = d.run_round()
    assert sorted(s.preempted) == sorted(ids[2:]) and sorted(s.started) == sorted(ids[2:])
    assert [(fake.job(j).gpu_type, fake.job(j).nodes) for j in ids[2:]] == [("v100", ("n1",))] * 2
    d.close()


def test_a_gang_larger_than_every_node_is_refused_by_name_and_stays_held(tmp_path, fake, clock, caplog):
    big = fake.submit(8, comment=RATES)
    small = fake.submit(1, comment=RATES)
    with caplog.at_level(logging.WARNING, logger="hetsched.slurm"):
        d = driver(tmp_path, fake, clock)
        d.run_round()
        d.run_round()
    assert f"job {big} is not scheduled: job {big} asks for 8 GPUs of one type, more than any usable node has (4)" \
        in caplog.text
    assert d.stats["requests_refused"] == 1 and big in d.refused_jobs
    assert fake.job(big).held and fake.job(small).running
    assert list(d.online.job_table()["job_id"]) == [small]
    d.close()


@pytest.mark.parametrize("command", ["squeue", "sinfo", "scontrol release", "scontrol update", "scontrol requeuehold"])
def test_a_failing_command_is_counted_and_the_next_round_catches_up(tmp_path, fake, clock, command):
    ids = [fake.submit(1, comment=RATES) for _ in range(10)]
    d = driver(tmp_path, fake, clock)
    d.run_round()
    fake.fail[command] = 1
    clock.t += 60
    s = d.run_round()
    assert s.failures == 1 and d.stats["command_failures"] == 1
    for _ in range(2):
        clock.t += 60
        s = d.run_round()
        assert s.failures == 0
    assert len(running(fake, ids)) == 8
    assert (d.online.job_table()["status"] == "active").all()
    d.close()


def test_a_driver_that_died_after_planning_applies_the_committed_plan_when_it_restarts(tmp_path, fake, clock):
    ids = [fake.submit(1, comment=RATES) for _ in range(12)]
    d = driver(tmp_path, fake, clock)
    d.run_round()
    clock.t += 60
    d._apply = lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt("killed"))   # dies before acting
    with pytest.raises(KeyboardInterrupt):
        d.run_round()
    planned = d.online.leases()
    want = {str(j): (t, g) for j, t, g in planned[["job_id", "gpu_type", "gpus"]].itertuples(index=False)}
    d.online.close()
    d2 = driver(tmp_path, fake, clock)                       # recover() runs in the constructor
    assert running(fake, ids) == want
    assert d2.online.round_index == 2
    d2.close()


def test_after_a_crash_and_restart_the_driver_plans_what_an_uninterrupted_twin_plans(tmp_path):
    clocks = [Clock(), Clock()]
    fakes = [FakeSlurm(NODES, clock=c) for c in clocks]
    for f in fakes:
        for g in (1, 1, 2, 1, 1, 1, 4, 1, 1, 1):
            f.submit(g, comment=RATES)
    drivers = [driver(tmp_path / name, f, c) for name, f, c in zip("ab", fakes, clocks)]

    def state(f):
        return {j.job_id: (j.state, j.held, j.gpu_type, j.gpus, j.nodes) for j in f.jobs()}

    for r in range(6):
        for c in clocks:
            c.t += 60
        if r == 2:                 # the twin dies after committing its plan, before acting on it
            drivers[1]._apply = lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt("killed"))
            drivers[0].run_round()
            with pytest.raises(KeyboardInterrupt):
                drivers[1].run_round()
            drivers[1].online.close()
            drivers[1] = driver(tmp_path / "b", fakes[1], clocks[1])
        else:
            plans = [d.run_round() for d in drivers]
            assert plans[0].started == plans[1].started and plans[0].preempted == plans[1].preempted
        assert state(fakes[0]) == state(fakes[1]), f"round {r}"
    assert [d.online.round_index for d in drivers] == [6, 6]
    for d in drivers:
        d.close()


def test_shadow_mode_reads_and_plans_but_never_acts(tmp_path, fake, clock, caplog):
    ids = [fake.submit(1, comment=RATES) for _ in range(10)]
    with caplog.at_level(logging.INFO, logger="hetsched.slurm"):
        d = driver(tmp_path, fake, clock, shadow=True)
        s = d.run_round()
    assert len(s.started) == 8 and s.shadow
    assert {n for n, _ in fake.log} == {"sinfo", "squeue"}
    assert all(fake.job(j).held for j in ids)
    assert "shadow: would preempt [], hold [], start" in caplog.text
    now_s, plan_s = s.predicted_mean_finish_s
    assert s.predicted_idle == (10, 2) and plan_s > 0 and now_s != now_s   # nothing runs now: NaN
    d.close()


def test_the_shell_report_command_appends_a_line(tmp_path):
    env = {"HETSCHED_SPOOL": str(tmp_path), "SLURM_JOB_ID": "42", "PATH": "/usr/bin:/bin"}
    (tmp_path / "42.lease").write_text("k80 2\n")
    run = [sys.executable, "-m", "hetsched.slurm"]
    assert subprocess.run([*run, "--lease"], env=env, capture_output=True, text=True).stdout == "k80 2\n"
    out = subprocess.run([*run, "1500"], env=env, capture_output=True, text=True)
    assert out.returncode == 0 and out.stderr == ""
    t, steps, kind = (tmp_path / "42.progress").read_text().split()
    assert (float(steps), kind) == (1500.0, "k80") and float(t) > 1e9
    bad = subprocess.run([*run, "-5"], env=env, capture_output=True, text=True)
    assert bad.returncode == 2 and "`steps` must be a finite number >= 0; got '-5'" in bad.stderr


def test_the_command_line_needs_gpu_types_and_says_when_slurm_cannot_be_read(tmp_path, monkeypatch, capsys):
    from hetsched.cli import main

    base = ["slurm", "--store", str(tmp_path / "s.db"), "--spool", str(tmp_path / "spool")]
    assert main(base) == 2
    assert "`--throughputs` or `--gpu-types` is required" in capsys.readouterr().err
    monkeypatch.setenv("PATH", str(tmp_path))          # no Slurm commands here
    assert main([*base, "--gpu-types", "v100,k80", "--rounds", "1"]) == 1
    assert "error: cannot read Slurm at start: 'sinfo' is not on PATH" in capsys.readouterr().err


def test_a_gang_larger_than_every_node_of_a_type_cannot_run_on_that_type(tmp_path, fake, clock):
    big = fake.submit(4, comment=RATES)          # 4 K80 on n1; V100: 2 per node
    d = driver(tmp_path, fake, clock)
    d.run_round()
    assert d.online.estimates().loc[big].to_dict() == {"v100": 0.0, "k80": 1.0}
    assert (fake.job(big).gpu_type, fake.job(big).gpus, fake.job(big).nodes) == ("k80", 4, ("n1",))
    d.close()


def test_a_scheduler_that_refuses_to_resize_keeps_planning_on_its_cluster(tmp_path, fake, clock, monkeypatch):
    ids = [fake.submit(1, comment=RATES) for _ in range(4)]
    d = driver(tmp_path, fake, clock)
    d.run_round()

    def refuse(cluster):
        raise ValidationError("resizing is not supported for the adaptive scheduler 'pollux'")

    monkeypatch.setattr(d.online, "resize", refuse)
    fake.set_node("n2", usable=False)
    clock.t += 60
    s = d.run_round()
    assert d.stats["resizes_refused"] == 1 and d.stats["resizes"] == 0 and s.round_index == 1
    assert d.online.capacities.tolist() == [4, 4]
    assert (d.online.job_table()["status"] == "active").all() and len(ids) == 4
    d.close()


def test_importing_every_slurm_module_keeps_report_the_function() -> None:
    """No submodule is named like a function of the package: importing it (as the layout and
    import-graph tests do) would replace ``hetsched.slurm.report`` with a module."""
    import importlib
    import pkgutil

    import hetsched.slurm as pkg

    for info in pkgutil.iter_modules(pkg.__path__):
        importlib.import_module(f"hetsched.slurm.{info.name}")
    assert callable(pkg.report) and callable(pkg.lease)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the progress file another owner")
def test_reports_in_a_file_owned_by_another_user_than_the_jobs_are_refused(tmp_path, fake, clock):
    """A job of uid 1234: lines in a progress file owned by uid 4321 are refused and counted,
    naming both uids; once the file is the job's user's, its new lines count."""
    jid = fake.submit(1, comment=RATES, user_id=1234)
    d = driver(tmp_path, fake, clock)
    d.run_round()
    assert fake.job(jid).running
    spool = tmp_path / "spool"
    report(120.0, job_id=jid, spool=spool, now=clock.t + 60)
    os.chown(spool / f"{jid}.progress", 4321, 4321)
    clock.t += 60
    s = d.run_round()
    assert s.refused == 1 and d.refused_reports[jid] == 1
    assert float(d.online.job_table().set_index("job_id").loc[jid, "steps_done"]) == 0.0
    report(240.0, job_id=jid, spool=spool, now=clock.t + 60)
    os.chown(spool / f"{jid}.progress", 1234, 1234)
    clock.t += 60
    s = d.run_round()
    assert s.refused == 0 and s.reports == 1
    assert float(d.online.job_table().set_index("job_id").loc[jid, "steps_done"]) == 240.0
    d.close()
