"""Adaptive jobs in the online scheduler (hetsched.online.adaptive_jobs): Pollux, the adaptive
Sia and Optimus driven by reports that carry what their models are fitted from.

The synthetic artifact of tests/test_adaptive_loop.py (every time a formula of that file)
is the data. The checks:

* two paths that must agree: the online scheduler driven by the simulated workers
  (``simulate_online``) gives the jobs table of ``hs.simulate`` bit for bit, with and
  without a store, for each adaptive scheduler;
* a store closed and reopened between rounds plans what an uninterrupted twin plans (the
  adaptive state goes through the data-only codec), with a report pending at the reopen;
* what a plan tells the worker (batch, per-GPU batch, accumulation steps) by hand;
* a report without a measurement counts progress and teaches nothing;
* every bad input refused with a message naming the argument, and nothing stored then;
* a version-3 store gains the adaptive tables when opened.
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from test_adaptive_loop import FOUR_JOBS, TYPES, write_model, write_workload

import hetsched as hs
from hetsched.errors import ValidationError
from hetsched.inputs.adaptive import (
    AdaptiveProgress,
    AdaptiveWorkload,
    read_adaptive_workload,
)
from hetsched.online import OnlineScheduler
from hetsched.online.codec import decode, encode
from hetsched.online.store import StoreError
from hetsched.schedulers.goodput_beliefs import GoodputBeliefs
from hetsched.schedulers.optimus import Optimus
from hetsched.schedulers.pollux import Pollux
from hetsched.schedulers.sia_adaptive import AdaptiveSia
from hetsched.sim import simulate
from hetsched.sim.replay import simulate_online

OPTS = hs.SimOptions(round_seconds=60.0)
CLUSTER = hs.Cluster({"t4": 4, "rtx": 8})
SCHEDULERS = {"pollux": Pollux, "sia_adaptive": AdaptiveSia, "optimus": Optimus}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    r = tmp_path_factory.mktemp("online_adaptive")
    write_model(r, "toy")
    write_model(r, "toy2")
    return r


@pytest.fixture(scope="module")
def four(root: Path) -> AdaptiveWorkload:
    return read_adaptive_workload(write_workload(root, FOUR_JOBS), profiles=root, machines=TYPES)


def _measured(truth: AdaptiveProgress, j: int, k: int, gpus: int, batch: int, progress: float) -> dict[str, Any]:
    return truth.report(j, k, gpus, batch, progress)


# ------------------------------------------------------------------------------ two paths agree
@pytest.mark.parametrize("name", sorted(SCHEDULERS))
@pytest.mark.parametrize("stored", [False, True])
def test_online_driver_equals_simulate(four: AdaptiveWorkload, name: str, stored: bool, tmp_path: Path) -> None:
    """The online scheduler fed the simulated workers' reports plans what the in-process
    loop plans: the same jobs table, every column, bit for bit."""
    a = simulate(SCHEDULERS[name](), four, CLUSTER, options=OPTS)
    b = simulate_online(SCHEDULERS[name](), four, CLUSTER, options=OPTS, learn=False,
                        store=tmp_path / "s.db" if stored else None)
    assert a.summary["n_completed"] == 4
    pd.testing.assert_frame_equal(a.jobs, b.jobs, check_exact=True)
    runs_a, runs_b = a.runs, b.runs
    for col in ("job", "gpu_type", "gpus", "batch_size"):
        np.testing.assert_array_equal(np.asarray(runs_a[col]), np.asarray(runs_b[col]))


# ------------------------------------------------------------------------------ a hand-driven worker
class Worker:
    """Plays the cluster for a hand-driven OnlineScheduler: runs each plan's rows for one round
    at the simulated truth and reports progress and measurements."""

    def __init__(self, w: AdaptiveWorkload) -> None:
        self.truth = AdaptiveProgress(w, CLUSTER)
        self.ids = w.table.frame["name"].tolist()
        self.progress = np.zeros(len(self.ids))
        self.done: set[int] = set()

    def submit(self, sched: OnlineScheduler, j: int) -> None:
        t = self.truth
        sched.submit(self.ids[j], model=t.models[j].model, scale_factor=int(t.submitted_replicas[j]),
                     batch_size=int(t.submitted_batch[j]), arrival=0.0)

    def run(self, sched: OnlineScheduler, plan: Any, now: float, seconds: float) -> None:
        t = self.truth
        for _, row in plan.assignments.iterrows():
            j = self.ids.index(row["job_id"])
            k = t.types.index(row["gpu_type"])
            g, b = int(row["gpus"]), int(row["batch_size"])
            rep = _measured(t, j, k, g, b, float(self.progress[j]))
            gained = t.advance(j, k, t.nodes_for(k, g), g, b, float(self.progress[j]), seconds)
            self.progress[j] += gained
            sched.report(row["job_id"], row["gpu_type"], gained, seconds, gpus=g, measured=rep)
            if self.progress[j] >= t.completion[j] - 1e-9:
                sched.complete(row["job_id"], now=now + seconds)
                self.done.add(j)


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_reopen_between_rounds_plans_what_the_twin_plans(four: AdaptiveWorkload, name: str, root: Path,
                                                         tmp_path: Path) -> None:
    """Close the store after a report (its measurement pending), reopen, continue: every plan
    equals the uninterrupted twin's; the fitted beliefs come back equal."""
    profiles = four.profiles
    plans: dict[str, list[Any]] = {"twin": [], "reopened": []}
    beliefs: dict[str, Any] = {}
    for mode in plans:
        path = tmp_path / f"{mode}.db"
        sched = OnlineScheduler(SCHEDULERS[name](), CLUSTER, store=path, round_seconds=60.0, profiles=profiles,
                                synchronous="OFF")
        worker = Worker(four)
        for j in range(4):
            worker.submit(sched, j)
        for r in range(8):
            now = 60.0 * r
            plan = sched.next_round(now)
            plans[mode].append(plan.key())
            worker.run(sched, plan, now, 60.0)
            if mode == "reopened" and r in (2, 5):
                sched.close()
                sched = OnlineScheduler(SCHEDULERS[name](), CLUSTER, store=path, round_seconds=60.0,
                                        profiles=profiles, synchronous="OFF")
        beliefs[mode] = sched._state.beliefs
        sched.close()
    assert plans["twin"] == plans["reopened"]
    assert len(plans["twin"]) == 8 and any(len(p[2]) for p in plans["twin"])
    assert beliefs["twin"].samples == beliefs["reopened"].samples
    assert beliefs["twin"].grad == beliefs["reopened"].grad
    assert beliefs["twin"].fitted == beliefs["reopened"].fitted


def test_plan_tells_the_worker_its_batch_split(four: AdaptiveWorkload) -> None:
    """Optimus runs every job at its submitted batch: j0 (toy, 1 GPU, batch 100) and j2 (toy,
    4 GPUs, batch 200). Profiled per-GPU batches are 25-100, so batch 100 on g GPUs is
    ceil(100 / g) per GPU without accumulation, and 200 on one GPU needs 2 steps of 100."""
    sched = OnlineScheduler(Optimus(), CLUSTER, round_seconds=60.0, profiles=four.profiles)
    sched.submit("a", model="toy", scale_factor=1, batch_size=100)
    sched.submit("b", model="toy", scale_factor=4, batch_size=200)
    plan = sched.next_round(0.0)
    a = plan.assignments.set_index("job_id")
    for job, batch in (("a", 100), ("b", 200)):
        g = int(a.loc[job, "gpus"])
        local = -(-batch // g)
        accum = 0 if local <= 100 else -(-local // 100) - 1
        atomic = -(-local // (accum + 1))
        assert int(a.loc[job, "batch_size"]) == batch
        assert (int(a.loc[job, "atomic_bsz"]), int(a.loc[job, "accum_steps"])) == (max(atomic, 25), accum)
    sched.close()


def test_report_without_measurement_counts_progress_only(four: AdaptiveWorkload) -> None:
    sched = OnlineScheduler(Pollux(), CLUSTER, round_seconds=60.0, profiles=four.profiles)
    sched.submit("a", model="toy", scale_factor=1)
    plan = sched.next_round(0.0)
    row = plan.assignments.iloc[0]
    sched.report("a", row["gpu_type"], 5.0, 60.0, gpus=int(row["gpus"]))
    sched.next_round(60.0)
    assert sched._state.beliefs.samples == {}             # nothing measured, nothing learned
    assert float(sched.job_table().set_index("job_id").loc["a", "steps_done"]) == 5.0
    truth = AdaptiveProgress(AdaptiveWorkload(four.table, four.profiles), CLUSTER)
    row = sched.next_round(120.0).assignments.iloc[0]
    k = truth.types.index(row["gpu_type"])
    rep = truth.report(0, k, int(row["gpus"]), int(row["batch_size"]), 5.0)
    sched.report("a", row["gpu_type"], 5.0, 60.0, gpus=int(row["gpus"]), measured=rep)
    sched.next_round(180.0)
    key = (rep["gpu_type"], rep["nodes"], rep["replicas"], rep["atomic_bsz"])
    assert sched._state.beliefs.samples[(0, "*")][key] == (rep["step_time"], rep["sync_time"])
    sched.close()


def test_default_target_and_throughputs_come_from_the_profile(four: AdaptiveWorkload) -> None:
    """Model toy completes at progress 380 (tests/test_adaptive_loop.py); the estimates are
    its first-epoch progress rates, which the truth gives for job j0 (toy, 1 GPU, batch 100)."""
    sched = OnlineScheduler(Pollux(), CLUSTER, profiles=four.profiles)
    sched.submit("x", model="toy", scale_factor=1, batch_size=100)
    jt = sched.job_table().set_index("job_id")
    assert float(jt.loc["x", "total_steps"]) == 380.0 and jt.loc["x", "job_type"] == "toy"
    truth = AdaptiveProgress(four, CLUSTER)
    want = [truth.rate(0, k, 1, 1, 100, 0) for k in range(2)]
    np.testing.assert_allclose(sched.estimates().loc["x"].to_numpy(), want, rtol=1e-12)
    sched.close()


# ------------------------------------------------------------------------------ bad input
GOOD = {"gpu_type": "t4", "nodes": 1, "replicas": 1, "atomic_bsz": 100, "accum_steps": 0, "step_time": 2.0,
        "sync_time": 0.1, "grad_sqr": 1.0, "grad_var": 3.0}


@pytest.mark.parametrize(("change", "match"), [
    ({"gpu_type": "rtx"}, r"`measured\['gpu_type'\]` 'rtx' differs"),
    ({"replicas": 5}, r"`measured\['replicas'\]` 5 exceeds the 4 GPU"),
    ({"nodes": 2}, r"`measured\['nodes'\]` 2 exceeds"),
    ({"sync_time": 3.0}, r"measured\['sync_time'\]"),
    ({"step_time": 0.0}, r"measured\['step_time'\]"),
    ({"grad_var": -1.0}, r"measured\['grad_var'\]"),
    ({"grad_sqr": float("nan")}, r"measured\['grad_sqr'\]"),
    ({"atomic_bsz": 1.5}, r"measured\['atomic_bsz'\]"),
    ({"extra": 1}, r"unknown key\(s\) \['extra'\]"),
    ({"metrics": [(10.0, 0.5), (5.0, 0.4)]}, "must add epochs in order"),
    ({"metrics": [(10.0,)]}, r"measured\['metrics'\]\[0\]"),
])
def test_bad_measurements_are_refused_and_nothing_stored(four: AdaptiveWorkload, change: dict[str, Any],
                                                         match: str, tmp_path: Path) -> None:
    sched = OnlineScheduler(Pollux(), CLUSTER, store=tmp_path / "s.db", profiles=four.profiles)
    sched.submit("a", model="toy")
    sched.next_round(0.0)
    with pytest.raises(ValidationError, match=match):
        sched.report("a", "t4", 1.0, 60.0, measured={**GOOD, **change})
    assert float(sched.job_table()["steps_done"].iloc[0]) == 0.0
    assert sched.adaptive_jobs.pending == {} and sched.adaptive_jobs.metrics == {}
    sched.close()
    con = sqlite3.connect(tmp_path / "s.db")
    assert con.execute("SELECT COUNT(*) FROM adaptive_reports").fetchone()[0] == 0
    con.close()


def test_missing_measurement_key(four: AdaptiveWorkload) -> None:
    sched = OnlineScheduler(Pollux(), CLUSTER, profiles=four.profiles)
    sched.submit("a", model="toy")
    sched.submit("b", model="toy")
    sched.next_round(0.0)
    bad = {k: v for k, v in GOOD.items() if k != "grad_var"}
    with pytest.raises(ValidationError, match=r"`measured` lacks \['grad_var'\]"):
        sched.report("a", "t4", 1.0, 60.0, measured=bad)
    with pytest.raises(ValidationError, match="`measured` must be a mapping"):
        sched.report("a", "t4", 1.0, 60.0, measured=[1, 2])
    with pytest.raises(ValidationError, match="`partner`: adaptive jobs do not share GPUs"):
        sched.report("a", "t4", 1.0, 60.0, partner="b")
    sched.close()


def test_bad_submits(four: AdaptiveWorkload) -> None:
    with pytest.raises(ValidationError, match="`profiles` is required: 'pollux'"):
        OnlineScheduler(Pollux(), CLUSTER)
    with pytest.raises(ValidationError, match="`profiles` is for adaptive schedulers"):
        OnlineScheduler("fifo", CLUSTER, profiles=four.profiles)
    with pytest.raises(ValidationError, match="`profiles` must be a non-empty mapping"):
        OnlineScheduler(Pollux(), CLUSTER, profiles={})
    with pytest.raises(ValidationError, match=r"`profiles\['toy'\]` must be a ModelProfile"):
        OnlineScheduler(Pollux(), CLUSTER, profiles={"toy": "toy"})
    sched = OnlineScheduler(Pollux(), CLUSTER, profiles=four.profiles)
    for kwargs, match in [({}, "`model` is required"),
                          ({"model": "resnet"}, r"`model` of adaptive job 'x' must name one of .*\['toy', 'toy2'\]"),
                          ({"model": "toy", "batch_size": 401}, "above model 'toy''s largest batch 400"),
                          ({"model": "toy", "batch_size": 0}, "`batch_size`"),
                          ({"model": "toy", "job_type": "toy2"}, "`job_type` 'toy2' differs from `model` 'toy'"),
                          ({"model": "toy", "spread_throughputs": {"t4": 1.0}}, "are for fixed-throughput jobs"),
                          ({"model": "toy", "scale_factor": 0}, "`scale_factor`")]:
        with pytest.raises(ValidationError, match=match):
            sched.submit("x", **kwargs)
    assert sched.job_table().empty and len(sched.adaptive_jobs.models) == 0
    sched.close()
    fixed = OnlineScheduler("fifo", CLUSTER)
    with pytest.raises(ValidationError, match="`model` and `batch_size` are for adaptive schedulers"):
        fixed.submit("x", model="toy", throughputs={"t4": 1.0, "rtx": 1.0})
    fixed.submit("x", throughputs={"t4": 1.0, "rtx": 1.0})
    fixed.next_round(0.0)
    with pytest.raises(ValidationError, match="`measured` is for adaptive jobs"):
        fixed.report("x", "t4", 1.0, 60.0, measured=GOOD)
    fixed.close()


def test_model_on_no_cluster_type(root: Path, four: AdaptiveWorkload) -> None:
    sched = OnlineScheduler(Pollux(), hs.Cluster({"a100": 8}), profiles=four.profiles)
    with pytest.raises(ValidationError, match="model 'toy' of job 'x' has a profile on none of the cluster's"):
        sched.submit("x", model="toy")
    sched.close()


# ------------------------------------------------------------------------------ the store
def test_store_without_the_jobs_model_is_refused(four: AdaptiveWorkload, tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with OnlineScheduler(Pollux(), CLUSTER, store=path, profiles=four.profiles) as s:
        s.submit("a", model="toy2")
    with pytest.raises(StoreError, match="runs model 'toy2', which `profiles` lacks"):
        OnlineScheduler(Pollux(), CLUSTER, store=path, profiles={"toy": four.profiles["toy"]})


def test_version_3_store_gains_the_adaptive_tables(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with OnlineScheduler("fifo", CLUSTER, store=path) as s:
        s.submit("a", throughputs={"t4": 1.0, "rtx": 2.0}, total_steps=100.0)
        s.next_round(0.0)
    con = sqlite3.connect(path)
    con.execute("DROP TABLE adaptive_jobs")
    con.execute("DROP TABLE adaptive_reports")
    con.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    with OnlineScheduler("fifo", CLUSTER, store=path) as s:
        assert s.job_table()["job_id"].tolist() == ["a"]
        s.next_round(60.0)
    con = sqlite3.connect(path)
    assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "4"
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"adaptive_jobs", "adaptive_reports"} <= tables
    con.close()


def test_adaptive_state_round_trips_through_the_codec(four: AdaptiveWorkload) -> None:
    res_state: dict[str, Any] = {}
    sched = OnlineScheduler(AdaptiveSia(), CLUSTER, profiles=four.profiles)
    worker = Worker(four)
    for j in range(4):
        worker.submit(sched, j)
    for r in range(4):
        plan = sched.next_round(60.0 * r)
        worker.run(sched, plan, 60.0 * r, 60.0)
    sched.next_round(240.0)
    state = sched._state
    tree, arrays = encode(state)
    back = decode(tree, arrays)
    res_state["back"] = back
    assert isinstance(back.beliefs, GoodputBeliefs) and back.beliefs.progress is None   # re-linked when opened
    assert back.configs is None                                                          # rebuilt from the cluster
    for f in ("current", "restarts", "progress", "ever_ran", "rounds"):
        assert getattr(back, f) == getattr(state, f), f
    for f in ("samples", "grad", "fitted", "last_fit", "seen", "fits", "per_type", "seed_single_gpu"):
        assert getattr(back.beliefs, f) == getattr(state.beliefs, f), f
    assert state.beliefs.samples and isinstance(back.ever_ran, set)
    sched.close()


# ------------------------------------------------------------------------------ Sia's real data
@pytest.mark.parametrize("name", ["pollux", "sia_adaptive"])
def test_online_equals_simulate_on_sias_workload(sia_root: Path, name: str) -> None:
    """The first 12 jobs of Sia's Philly workload 1 on Table 3's cluster: the online path (a
    store, measurements in reports) and hs.simulate give the same jobs table."""
    from hetsched.inputs.adaptive import sia_workload
    from hetsched.inputs.traces.sia import AdaptiveJobTable
    from hetsched.reproduce.sia_table3 import table3_cluster

    w = sia_workload("philly", 1, path=sia_root)
    first = AdaptiveWorkload(AdaptiveJobTable(w.table.frame.iloc[:12].reset_index(drop=True), w.table.source),
                             w.profiles, source=w.source)
    a = simulate(SCHEDULERS[name](), first, table3_cluster(), options=OPTS)
    b = simulate_online(SCHEDULERS[name](), first, table3_cluster(), options=OPTS, learn=False)
    assert a.summary["n_completed"] == 12
    pd.testing.assert_frame_equal(a.jobs, b.jobs, check_exact=True)


def test_optimus_estimates_equal_online_and_simulated(sia_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every remaining-work estimate Optimus makes (its convergence fits and its prior from
    finished jobs of the same model) is the same online and in hs.simulate, on the first 12
    jobs of Sia's Philly workload 1. (The prior once read the rows' rates, which are the true
    ones in simulate and the scheduler's beliefs online: the jobs tables then differed from
    round 236 of the full workload.)"""
    from hetsched.inputs.adaptive import sia_workload
    from hetsched.inputs.traces.sia import AdaptiveJobTable
    from hetsched.reproduce.sia_table3 import table3_cluster

    w = sia_workload("philly", 1, path=sia_root)
    first = AdaptiveWorkload(AdaptiveJobTable(w.table.frame.iloc[:12].reset_index(drop=True), w.table.source),
                             w.profiles, source=w.source)
    seen: list[tuple[str, float, float, str]] = []
    plain = Optimus.remaining

    def spy(self, state, prog, job):
        got = plain(self, state, prog, job)
        seen.append((prog.names[job], float(state.progress.get(job, 0.0)), *got))
        return got

    monkeypatch.setattr(Optimus, "remaining", spy)
    a = simulate(Optimus(), first, table3_cluster(), options=OPTS)
    in_simulate, seen[:] = list(seen), []
    b = simulate_online(Optimus(), first, table3_cluster(), options=OPTS, learn=False)
    assert a.summary["n_completed"] == 12
    assert {s for *_, s in in_simulate} == {"prior", "finished", "fit"}    # every source is exercised
    assert seen == in_simulate
    pd.testing.assert_frame_equal(a.jobs, b.jobs, check_exact=True)


def test_ended_at_is_the_reported_progress_unless_cancelled(four: AdaptiveWorkload) -> None:
    """Online, a finished job ended where its workers' reports put it (its target when they
    reach it); a cancelled job did not end by finishing (NaN, not a finished job's end)."""
    online = OnlineScheduler(Optimus(), CLUSTER, round_seconds=60.0, profiles=four.profiles)
    jobs = online.adaptive_jobs
    for name in ("a", "b", "c"):
        online.submit(name, model="toy", scale_factor=1)
    online.next_round(now=0.0)
    target = float(jobs.completion[0])
    online.report("a", "t4", steps=target * 0.25, seconds=60.0)
    online.report("b", "t4", steps=target, seconds=60.0)
    online.complete("a")
    online.complete("b")
    online.cancel("c")
    assert jobs.ended_at(0) == pytest.approx(target * 0.25)
    assert jobs.ended_at(1) == target
    assert math.isnan(jobs.ended_at(2))
    truth = AdaptiveProgress(four, CLUSTER)
    assert truth.ended_at(3) == float(truth.completion[3])
