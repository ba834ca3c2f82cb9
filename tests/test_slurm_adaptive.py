"""Adaptive schedulers (Pollux, the adaptive Sia, Optimus) through the Slurm driver (issue 28):
jobs name their model in ``--comment``, the lease tells a job the batch the plan runs it at,
progress lines carry what the job's agent measured, and the scheduler fits its goodput model
to them; a drained node resizes the scheduler without losing what it learned.

The jobs are played by this file against FakeSlurm: each round every running job advances
at the synthetic truth of tests/test_adaptive_loop.py (its own formula) on the GPUs Slurm
gave it, at the batch its lease names, and reports through :func:`hetsched.slurm.report`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_adaptive_loop import FOUR_JOBS, TYPES, write_model, write_workload

from hetsched.errors import ValidationError
from hetsched.inputs.adaptive import AdaptiveProgress, read_adaptive_workload
from hetsched.schedulers.names import make_scheduler
from hetsched.slurm import FakeSlurm, SlurmDriver, Start, lease, lease_batch, report
from hetsched.slurm.progress import main as progress_main
from hetsched.slurm.spool import Spool

NODES = {"a1": {"t4": 4}, "a2": {"t4": 4}, "r1": {"rtx": 8}}


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture(scope="module")
def four(tmp_path_factory):
    root = tmp_path_factory.mktemp("slurm_adaptive")
    write_model(root, "toy")
    write_model(root, "toy2")
    return read_adaptive_workload(write_workload(root, FOUR_JOBS), profiles=root, machines=TYPES)


def _driver(tmp_path, fake, clock, name, four, **kw):
    return SlurmDriver(make_scheduler(name), commands=fake, spool=tmp_path / "spool", store=tmp_path / "s.db",
                       gpu_types=["t4", "rtx"], round_seconds=60, clock=clock, sleep=lambda s: None,
                       profiles=four.profiles, **kw)


def _submit_all(fake, four):
    """The four jobs as Slurm jobs: their submitted GPUs as --gres, model and batch in the comment."""
    ids = {}
    for j, (_, _, model, replicas, batch) in enumerate(FOUR_JOBS):
        ids[fake.submit(replicas, comment=f"hetsched:model={model};batch_size={batch}")] = j
    return ids


def _play(d, fake, clock, ids, truth, progress, spool):
    """One round of the jobs: each running job runs 60 s at the truth and reports; returns
    the most nodes a job ran on."""
    leases = d.online.leases()
    clock.t += 60.0
    if leases is None:
        return 0
    plan = leases.set_index("job_id")
    most = 0
    for jid, j in ids.items():
        job = fake.job(jid)
        if not job.running:
            continue
        kind, per_node = lease(job_id=jid, spool=spool)
        batch = lease_batch(job_id=jid, spool=spool)
        row = plan.loc[jid]
        assert (kind, per_node * len(job.nodes)) == (row["gpu_type"], int(row["gpus"]))
        assert batch == (int(row["batch_size"]), int(row["atomic_bsz"]), int(row["accum_steps"]))
        k = truth.types.index(kind)
        gpus = per_node * len(job.nodes)
        rep = truth.report(j, k, gpus, batch[0], float(progress[j]))
        progress[j] += truth.advance(j, k, truth.nodes_for(k, gpus), gpus, batch[0], float(progress[j]), 60.0)
        report(float(progress[j]), job_id=jid, spool=spool, now=clock.t, measured=rep)
        most = max(most, len(job.nodes))
        if progress[j] >= truth.completion[j] - 1e-9:
            fake.finish(jid)
    return most


@pytest.mark.parametrize("name", ["pollux", "sia_adaptive", "optimus"])
def test_adaptive_scheduler_learns_from_the_jobs_reports_through_slurm(tmp_path, four, name):
    clock = Clock()
    fake = FakeSlurm(NODES, clock=clock)
    ids = _submit_all(fake, four)
    d = _driver(tmp_path, fake, clock, name, four)
    truth = AdaptiveProgress(four, d.online.cluster)
    spool = tmp_path / "spool"
    progress = np.zeros(4)
    spans = []
    for _ in range(6):
        s = d.run_round()
        assert s.failures == 0
        spans.append(_play(d, fake, clock, ids, truth, progress, spool))
    assert max(spans) >= 1
    if name == "pollux":    # Pollux gives j2 a configuration of two nodes: started on both, reports accepted
        assert max(spans) == 2
    d.run_round()                       # reads the last round's reports
    assert d.stats["submitted"] == 4 and d.stats["reports"] > 0
    assert d.stats["reports_refused"] == 0, dict(d.refused_reports)
    assert d.online._state.beliefs.samples     # the measurements reached the goodput model
    done = d.online.job_table().set_index("job_id")["steps_done"].astype(float)
    for jid, j in ids.items():
        assert done[jid] == pytest.approx(progress[j]) or d.online.job_table().set_index("job_id").loc[
            jid, "status"] == "completed"
    d.close()


def test_a_drained_node_resizes_an_adaptive_scheduler_and_keeps_what_it_learned(tmp_path, four):
    clock = Clock()
    fake = FakeSlurm(NODES, clock=clock)
    ids = _submit_all(fake, four)
    d = _driver(tmp_path, fake, clock, "pollux", four)
    truth = AdaptiveProgress(four, d.online.cluster)
    spool = tmp_path / "spool"
    progress = np.zeros(4)
    for _ in range(3):
        d.run_round()
        _play(d, fake, clock, ids, truth, progress, spool)
    d.run_round()                       # the third round's reports are fitted at this plan
    learned = dict(d.online._state.beliefs.samples)
    assert learned
    fake.set_node("r1", usable=False)
    _play(d, fake, clock, ids, truth, progress, spool)
    d.run_round()
    assert d.stats["resizes"] == 1 and d.stats.get("resizes_refused", 0) == 0
    assert d.online.capacities.tolist() == [8, 0]
    used = d.online.leases().groupby("gpu_type")["gpus"].sum().to_dict()
    assert used.get("rtx", 0) == 0 and used.get("t4", 0) <= 8
    now = d.online._state.beliefs.samples
    assert all(set(v) <= set(now[key]) for key, v in learned.items())   # nothing learned was lost
    assert (d.online.job_table()["status"] != "cancelled").all()
    d.close()


def test_a_job_without_its_model_is_held_with_the_reason(tmp_path, four):
    clock = Clock()
    fake = FakeSlurm(NODES, clock=clock)
    jid = fake.submit(1, comment="hetsched:total_steps=100")
    d = _driver(tmp_path, fake, clock, "pollux", four)
    assert "`model` is required" in d.refused_jobs[jid] and fake.job(jid).held
    d.close()
    clock2 = Clock()
    fake2 = FakeSlurm(NODES, clock=clock2)
    jid2 = fake2.submit(1, comment="hetsched:model=toy;throughputs=t4:1")
    d2 = SlurmDriver("max_min_fairness", commands=fake2, spool=tmp_path / "sp2", gpu_types=["t4", "rtx"],
                     clock=clock2, sleep=lambda s: None)
    assert "`model` and `batch_size` are for adaptive schedulers" in d2.refused_jobs[jid2]
    d2.close()


def test_an_even_multi_node_plan_starts_on_all_its_nodes(tmp_path, four):
    """A plan row of 8 t4 GPUs whose ids are 4 on a1 and 4 on a2 starts as 4 GPUs per node on
    both nodes (NumNodes=2, NodeList=a1,a2); one of 3 + 1 (uneven: --gres is per node) asks
    for the larger count, 3, on 2 nodes Slurm chooses, and is counted."""
    clock = Clock()
    fake = FakeSlurm(NODES, clock=clock)
    d = _driver(tmp_path, fake, clock, "pollux", four)
    topo = d.online.cluster.topology
    a1 = [topo.gpu_id(s, i) for s in topo.server_names if d._cluster.node_of[s] == "a1" for i in range(4)]
    a2 = [topo.gpu_id(s, i) for s in topo.server_names if d._cluster.node_of[s] == "a2" for i in range(4)]
    leases = pd.DataFrame({"job_id": ["x", "y"], "gpu_type": ["t4", "t4"], "gpus": [8, 4],
                           "gpu_ids": [tuple(a1 + a2), tuple(a1[:3] + a2[:1])], "batch_size": [400, 100],
                           "atomic_bsz": [50, 25], "accum_steps": [0, 0]})
    want = d._desired(leases)
    assert want["x"] == Start("x", "t4", 4, ("a1", "a2"), (400, 50, 0))
    assert want["y"] == Start("y", "t4", 3, (), (100, 25, 0), 2)
    assert d.stats["uneven_gangs"] == 1
    fake.submit(4, comment="hetsched:model=toy")
    fake.submit(4, comment="hetsched:model=toy")
    jobs = fake.jobs()
    fake.start([Start(jobs[0].job_id, "t4", 4, ("a1", "a2"), (400, 50, 0)),
                Start(jobs[1].job_id, "t4", 3, (), (100, 25, 0), 2)])
    assert fake.job(jobs[0].job_id).nodes == ("a1", "a2")
    assert not fake.job(jobs[1].job_id).running            # no two nodes with 3 t4 free: it waits
    d.close()


def test_measured_progress_lines_round_trip_and_bad_ones_are_refused(tmp_path, monkeypatch):
    spool = tmp_path / "spool"
    sp = Spool(spool)
    sp.write_lease("7", "t4", 2, (128, 64, 0))
    assert lease(job_id="7", spool=spool) == ("t4", 2) and lease_batch(job_id="7", spool=spool) == (128, 64, 0)
    rep = {"nodes": 1, "replicas": 2, "atomic_bsz": 64, "accum_steps": 0, "step_time": 0.5, "sync_time": 0.1,
           "grad_sqr": 1.0, "grad_var": 2.0}
    report(10.0, job_id="7", spool=spool, now=5.0, measured=rep)
    lines, bad = sp.read_new("7")
    assert bad == [] and lines[0].measured == {**rep, "gpu_type": "t4"} and lines[0].gpu_type == "t4"
    with pytest.raises(ValidationError, match="finite numbers"):
        report(11.0, job_id="7", spool=spool, measured={"step_time": float("nan")})
    with pytest.raises(ValidationError, match="`measured` must be a mapping"):
        report(11.0, job_id="7", spool=spool, measured=[1, 2])
    with open(spool / "7.progress", "a") as fh:
        fh.write("6.0 12 t4 [1,2]\n7.0 13 t4 {not json}\n")
    lines, bad = sp.read_new("7")
    assert lines == [] and len(bad) == 2
    # the shell form: --lease prints the batch too; a report with a measurement
    monkeypatch.setenv("HETSCHED_SPOOL", str(spool))
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    assert progress_main(["--lease"]) == 0
    assert progress_main(["14", json.dumps(rep)]) == 0
    assert progress_main(["15", "{oops"]) == 2
    lines, _ = sp.read_new("7")
    assert [ln.steps for ln in lines] == [14.0] and lines[0].measured["atomic_bsz"] == 64
    assert sp.read_new("7") == ([], []) and os.path.exists(spool / "7.progress")
    assert Path(spool / "7.lease").read_text() == "t4 2 128 64 0\n"
