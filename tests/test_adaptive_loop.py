"""Adaptive jobs in the round loop: the simulated truth (hetsched.inputs.adaptive), the
loop's true rates and per-model restarts, Pollux and adaptive Sia end to end, the
configuration search on the problems Pollux builds, bad input, a fuzz and the CLI.

Synthetic data (written to tmp_path; nothing of the real data is copied). Every machine's
times are a formula of this file (:func:`times`), written out at the profiled points, so
any expectation below is computed from the formula, never from the code under test:

* per-GPU ("local") batch 25, 50, 100 on every placement of the file;
* accumulation-step (compute) time ``c0 + c1 * b``; synchronisation ``s1`` on one GPU,
  ``si + sk (k - 2)`` on one node, ``sn + snk (k - 2)`` across nodes; step = compute + sync
  (Pollux's throughput model with no overlap, so a fit can reproduce it);
* model ``toy``: validation runs at total batch 100 and 400 (init 100, max 400), three
  epochs; epoch starts 0, min(100, 90) = 90, min(250, 260) = 250, completion min(400, 380)
  = 380; model ``toy2``: runs at 50, 200, 800, two epochs, starts 0, 40, completion 120;
  model ``toy3``: runs at 50 and 60 (a narrow batch range), starts 0, 28, completion 60;
* neither name is in Sia's tables: restart 30 s, calibration 1/1.2, max_epochs = rows.
"""

from __future__ import annotations

import dataclasses
import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hetsched as hs
from hetsched.adaptive.goodput import iteration_time
from hetsched.adaptive.search import SearchProblem, exact_search, genetic_search
from hetsched.cli import main
from hetsched.errors import DataNotFoundError, UnknownPolicyError, ValidationError
from hetsched.inputs.adaptive import (
    AdaptiveProgress,
    AdaptiveWorkload,
    read_adaptive_workload,
    sia_workload,
)
from hetsched.inputs.profiles import load_sia_profiles
from hetsched.inputs.traces.sia import AdaptiveJobTable, read_sia_workload
from hetsched.schedulers.names import list_schedulers, make_scheduler
from hetsched.schedulers.pollux import Pollux
from hetsched.schedulers.sia_adaptive import AdaptiveSia
from hetsched.sim import simulate

# ------------------------------------------------------------------------------ the synthetic truth
GPN = {"aws": 4, "rtx": 8, "dgx-ext": 8}                       # GPUs per node (the loader's table)
COMPUTE = {"aws": (0.1, 0.019), "rtx": (0.05, 0.008), "dgx-ext": (0.02, 0.004)}
SYNC = {"aws": (0.002, 0.2, 0.05, 0.6, 0.1), "rtx": (0.001, 0.1, 0.02, 0.4, 0.05),
        "dgx-ext": (0.001, 0.05, 0.01, 0.3, 0.02)}
LOCAL_BSZ = (25, 50, 100)
TYPES = {"t4": "aws", "rtx": "rtx"}
CALIB = 1 / 1.2
# model -> total batch -> per-epoch (progress at the end of the epoch, grad_sqr, grad_var)
STATS = {
    "toy": {100: [(100.0, 1.0, 3.0), (250.0, 1.0, 1.0), (400.0, 2.0, 0.0)],
            400: [(90.0, 2.0, 6.0), (260.0, 1.0, 1.0), (380.0, 1.0, 0.5)]},
    "toy2": {50: [(50.0, 1.0, 5.0), (120.0, 1.0, 2.0)],
             200: [(45.0, 1.5, 6.0), (125.0, 1.0, 3.0)],
             800: [(40.0, 2.0, 8.0), (130.0, 1.0, 4.0)]},
    # a narrow batch range: 4 GPUs x the profiled minimum 25 = 100 > the maximum 60
    "toy3": {50: [(30.0, 1.0, 2.0), (60.0, 1.0, 1.0)], 60: [(28.0, 1.0, 2.0), (62.0, 1.0, 1.0)]},
}
STARTS = {"toy": [0.0, 90.0, 250.0, 380.0], "toy2": [0.0, 40.0, 120.0], "toy3": [0.0, 28.0, 60.0]}
COMPLETION = {"toy": 380.0, "toy2": 120.0, "toy3": 60.0}
HEADER = "name,time,application,num_replicas,batch_size"


def times(machine: str, n: int, k: int, b: float) -> tuple[float, float]:
    """(step, sync) seconds of ``k`` replicas on ``n`` nodes at per-GPU batch ``b``."""
    c0, c1 = COMPUTE[machine]
    s1, si, sk, sn, snk = SYNC[machine]
    sync = s1 if k == 1 else (si + sk * (k - 2) if n == 1 else sn + snk * (k - 2))
    return c0 + c1 * b + sync, sync


def _write(path: Path, header: str, rows: list[tuple]) -> None:
    path.write_text(header + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))


def write_model(root: Path, name: str, machines: tuple[str, ...] = ("aws", "rtx")) -> Path:
    """The model folder: every single-node power of two, spread layouts and two whole nodes
    as placements; three and four whole nodes as scalability rows."""
    d = root / "profiles" / name
    d.mkdir(parents=True)
    for m in machines:
        R = GPN[m]
        layouts = [str(2 ** i) for i in range(4) if 2 ** i <= R] + ["11", "22", f"{R}{R}"]
        rows = [(p, b, *times(m, len(p), sum(map(int, p)), b)) for p in layouts for b in LOCAL_BSZ]
        _write(d / f"placements-{m}.csv", "placement,local_bsz,step_time,sync_time", rows)
        srows = [(b, *times(m, n, n * R, b), n, n * R) for n in (3, 4) for b in LOCAL_BSZ]
        _write(d / f"scalability-{m}.csv", "local_bsz,step_time,sync_time,num_nodes,num_replicas", srows)
    for batch, epochs in STATS[name].items():
        _write(d / f"validation-{batch}.csv", "progress,iteration,metric,grad_sqr,grad_var",
               [(p, i, 0.1 * i, sqr, var) for i, (p, sqr, var) in enumerate(epochs)])
    return d


def write_workload(root: Path, rows: list[tuple], name: str = "workload.csv") -> Path:
    p = root / name
    _write(p, HEADER, rows)
    return p


def grad_stats(model: str, M: float, epoch: int) -> tuple[float, float]:
    """(sqr, var): linear in the total batch between the validated batches, clipped."""
    batches = sorted(STATS[model])
    M = min(max(M, batches[0]), batches[-1])
    for lo, hi in zip(batches, batches[1:]):
        if lo <= M <= hi:
            w = (M - lo) / (hi - lo)
            a, b = STATS[model][lo][epoch], STATS[model][hi][epoch]
            return (1 - w) * a[1] + w * b[1], (1 - w) * a[2] + w * b[2]
    a = STATS[model][batches[0]][epoch]
    return a[1], a[2]


def split(model: str, machine: str, n: int, k: int, batch: int) -> tuple[int, int]:
    """The documented rule: per-GPU batch ceil(batch / k), the fewest accumulation steps that
    fit the profiled per-GPU maximum, within the per-GPU range and the model's maximum."""
    max_batch = max(STATS[model])
    local = math.ceil(batch / k)
    accum = math.ceil(local / LOCAL_BSZ[-1]) - 1
    atomic = math.ceil(local / (accum + 1))
    atomic = min(atomic, max_batch // (k * (accum + 1)) or 1, LOCAL_BSZ[-1])
    return max(atomic, LOCAL_BSZ[0]), accum


def true_rate(model: str, machine: str, n: int, k: int, batch: int, epoch: int) -> float:
    """gain / iteration time * calibration, by the module's formulas."""
    atomic, accum = split(model, machine, n, k, batch)
    step, sync = times(machine, n, k, atomic)
    M = k * atomic * (accum + 1)
    sqr, var = grad_stats(model, M, epoch)
    scale = M / min(STATS[model])
    gain = (var + sqr) / (var / scale + sqr)
    return gain / (step + accum * (step - sync)) * CALIB


def integrate(model: str, machine: str, n: int, k: int, batch: int, p: float, seconds: float) -> float:
    """Progress made in ``seconds`` from ``p``, epoch by epoch, capped at completion."""
    starts, done = STARTS[model], COMPLETION[model]
    q, left = p, seconds
    while left > 1e-12 and q < done - 1e-12:
        e = max(i for i in range(len(starts) - 1) if starts[i] <= q)
        r = true_rate(model, machine, n, k, batch, e)
        dt = (starts[e + 1] - q) / r
        if dt >= left:
            return q + r * left - p
        q, left = starts[e + 1], left - dt
    return min(q, done) - p


class Recorder:
    """A round scheduler that runs another one and keeps its rows and its state."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.rows: list[dict[str, np.ndarray]] = []
        self.state: Any = None

    def params(self) -> dict[str, Any]:
        return self.inner.params()

    def initial_state(self, start_time: float = 0.0) -> Any:
        self.state = self.inner.initial_state(start_time)
        return self.state

    def plan_round(self, view: Any, state: Any) -> Any:
        rows = self.inner.plan_round(view, state)
        self.rows.append({"round": view.round_index, "job": rows.job.copy(), "gpu_type": rows.gpu_type.copy(),
                          "gpus": rows.gpus.copy(), "batch_size": rows.batch_size.copy()})
        return rows

    def record_round(self, state: Any, ran: Any, seconds: np.ndarray) -> Any:
        self.state = self.inner.record_round(state, ran, seconds)
        return self.state


OPTS = hs.SimOptions(round_seconds=60.0)


# ------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    r = tmp_path_factory.mktemp("adaptive")
    write_model(r, "toy")
    write_model(r, "toy2")
    write_model(r, "toy3")
    return r


def _workload(root: Path, rows: list[tuple], name: str = "workload.csv", **replace: dict[str, Any]
              ) -> AdaptiveWorkload:
    w = read_adaptive_workload(write_workload(root, rows, name), profiles=root, machines=TYPES)
    if replace:
        profiles = {m: dataclasses.replace(p, **replace.get(m, {})) for m, p in w.profiles.items()}
        w = AdaptiveWorkload(w.table, profiles, source=w.source)
    return w


FOUR_JOBS = [("j0", 0, "toy", 1, 100), ("j1", 30, "toy2", 2, 100), ("j2", 100, "toy", 4, 200),
             ("j3", 100, "toy2", 1, 50)]
RESTART = {"toy": 30.0, "toy2": 12.0}


@pytest.fixture(scope="module")
def four(root: Path) -> AdaptiveWorkload:
    """Four jobs of two models; toy2 restarts in 12 s (per-model restart seconds)."""
    return _workload(root, FOUR_JOBS, "four.csv", toy2={"restart_seconds": RESTART["toy2"]})


CLUSTER = hs.Cluster({"t4": 4, "rtx": 8})     # no topology: no placement, no migrations


@pytest.fixture(scope="module")
def runs(four: AdaptiveWorkload) -> dict[str, Any]:
    """The four jobs through Pollux (exact; its search problems recorded), adaptive Sia and
    max_sum_throughput (Gavel on the submitted configurations)."""
    import hetsched.schedulers.pollux as pollux_mod

    problems: list[SearchProblem] = []
    original = pollux_mod.exact_search

    def recording(problem: SearchProblem, *args: Any, **kwargs: Any) -> Any:
        problems.append(problem)
        return original(problem, *args, **kwargs)

    out: dict[str, Any] = {"problems": problems}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pollux_mod, "exact_search", recording)
        rec = Recorder(Pollux())
        out["pollux"] = (simulate(rec, four, CLUSTER, options=OPTS), rec)
    rec = Recorder(AdaptiveSia())
    out["sia"] = (simulate(rec, four, CLUSTER, options=OPTS), rec)
    out["gavel"] = (simulate("max_sum_throughput", four, CLUSTER, options=OPTS), None)
    return out


# ------------------------------------------------------------------------------ 1. the truth by hand
def test_rate_by_hand(four: AdaptiveWorkload) -> None:
    p = AdaptiveProgress(four, CLUSTER)
    assert p.types == ("t4", "rtx") and p.node_gpus.tolist() == [4, 8]
    assert p.completion.tolist() == [380.0, 120.0, 380.0, 120.0]
    assert p.restart_seconds.tolist() == [30.0, 12.0, 30.0, 12.0]
    # one T4 at the initial batch 100: scale 1, gain 1 whatever the statistics; T = 2.0 + 0.002
    for epoch in (0, 1, 2):
        assert p.rate(0, 0, 1, 1, 100, epoch) == pytest.approx(1 / 2.002 / 1.2, rel=1e-12)
    # one T4 at batch 200: per-GPU 200 > 100, so 1 accumulation step of 100; T = 2.002 + 2.0
    assert p.split_batch(0, 0, 1, 1, 200) == (100, 1)
    # statistics a third of the way from the 100-run to the 400-run
    gains = [(4 + 4 / 3) / (4 / 2 + 4 / 3), 2 / (0.5 + 1), (1 / 6 + 5 / 3) / (1 / 12 + 5 / 3)]
    assert gains == pytest.approx([1.6, 4 / 3, 22 / 21])
    for epoch, g in enumerate(gains):
        assert p.rate(0, 0, 1, 1, 200, epoch) == pytest.approx(g / 4.002 / 1.2, rel=1e-12)
    # two T4s on one node at 200: 100 each, no accumulation, step 2.0 + 0.2
    assert p.split_batch(0, 0, 1, 2, 200) == (100, 0)
    assert p.rate(0, 0, 1, 2, 200, 0) == pytest.approx(1.6 / 2.2 / 1.2, rel=1e-12)
    assert p.throughput(0, 0, 2, 200) == pytest.approx(200 / 2.2 / 1.2, rel=1e-12)
    # rtx, 8 GPUs on one node at 400 (50 each): step 0.05 + 0.4 + 0.1 + 0.12; stats of the 400-run
    step = 0.05 + 0.008 * 50 + 0.1 + 0.02 * 6
    assert p.rate(0, 1, 1, 8, 400, 1) == pytest.approx(2 / (0.25 + 1) / step / 1.2, rel=1e-12)
    # the edges of the profiled range: 400 on one GPU = 4 x 100; 1000 is capped at the
    # model's maximum (10 steps of 40); 40 on 2 GPUs is lifted to the profiled minimum 25
    assert p.split_batch(0, 0, 1, 1, 400) == (100, 3)
    assert p.split_batch(0, 0, 1, 1, 1000) == (40, 9)
    assert p.split_batch(0, 0, 1, 2, 40) == (25, 0)
    assert p.nodes_for(0, 4) == 1 and p.nodes_for(1, 8) == 1 and p.nodes_for(1, 2, spread=True) == 2
    assert p.batch_of(0, 0) == 100 and p.batch_of(0, 64) == 64
    for k, machine, n, g, b in ((0, "aws", 1, 2, 200), (1, "rtx", 1, 8, 400)):
        rep = p.report(0, k, g, b, 95.0)
        atomic, accum = split("toy", machine, n, g, b)
        step, sync = times(machine, n, g, atomic)
        sqr, var = grad_stats("toy", g * atomic * (accum + 1), 1)
        assert (rep["gpu_type"], rep["nodes"], rep["replicas"], rep["atomic_bsz"], rep["accum_steps"], rep["epoch"]) \
            == (("t4", "rtx")[k], n, g, atomic, accum, 1)
        assert (rep["step_time"], rep["sync_time"], rep["grad_sqr"], rep["grad_var"]) == pytest.approx(
            (step, sync, sqr, var), rel=1e-12)


def test_advance_crosses_epochs_by_hand(four: AdaptiveWorkload) -> None:
    p = AdaptiveProgress(four, CLUSTER)
    r0, r1, r2 = (g / 4.002 / 1.2 for g in (1.6, 4 / 3, 22 / 21))
    # from 80, 60 s at batch 200 on one T4: 10 to the epoch start 90 at r0, the rest at r1
    to_90 = 10 / r0
    assert 0 < to_90 < 60
    assert p.advance(0, 0, 1, 1, 200, 80.0, 60.0) == pytest.approx(10 + r1 * (60 - to_90), rel=1e-12)
    # within one epoch it is linear
    assert p.advance(0, 0, 1, 1, 200, 100.0, 30.0) == pytest.approx(30 * r1, rel=1e-12)
    # two boundaries: 80 -> 90 -> 250 -> 260
    secs = 10 / r0 + 160 / r1 + 10 / r2
    assert p.advance(0, 0, 1, 1, 200, 80.0, secs) == pytest.approx(180.0, rel=1e-12)
    # never past completion (380), from anywhere, however long
    for start in (0.0, 240.0, 379.9, 380.0):
        got = p.advance(0, 0, 1, 1, 200, start, 1e7)
        assert got == pytest.approx(380.0 - start, abs=1e-9) and start + got <= 380.0 + 1e-12
    # the mean rate of a row over a round is the same hand sum over the seconds
    got = p.average_rates(np.array([0]), np.array([0]), np.array([1]), np.array([200]), np.array([False]),
                          np.array([80.0]), np.array([60.0]))
    assert got[0] == pytest.approx((10 + r1 * (60 - to_90)) / 60, rel=1e-12)
    # a row of 0 seconds gets the rate at its start
    got = p.average_rates(np.array([0]), np.array([0]), np.array([1]), np.array([200]), np.array([False]),
                          np.array([95.0]), np.array([0.0]))
    assert got[0] == pytest.approx(r1, rel=1e-12)
    # the oracle of this file agrees
    assert integrate("toy", "aws", 1, 1, 200, 80.0, 60.0) == pytest.approx(10 + r1 * (60 - to_90), rel=1e-12)


def test_model_without_profile_on_type_has_rate_zero(root: Path, tmp_path: Path) -> None:
    write_model(tmp_path, "toy", machines=("aws",))
    wl = write_workload(tmp_path, [("a", 0, "toy", 1, 100)])
    w = read_adaptive_workload(wl, profiles=tmp_path, machines={"t4": "aws"})
    p = AdaptiveProgress(w, CLUSTER)
    assert not p.has_type(0, 1) and p.rate(0, 1, 1, 1, 100, 0) == 0.0 and p.throughput(0, 1, 1, 100) == 0.0
    T = w.trace(CLUSTER).jobs.throughputs            # progress/s: gain 1 at the initial batch
    assert T[0, 1] == 0.0 and T[0, 0] == pytest.approx(1 / 2.002 / 1.2)
    T = dataclasses.replace(w, throughput_units="examples").trace(CLUSTER).jobs.throughputs   # examples/s
    assert T[0, 1] == 0.0 and T[0, 0] == pytest.approx(100 / 2.002 / 1.2)


# ------------------------------------------------------------------------------ 2. one job, whole simulation
def test_one_job_constant_rate_jct(root: Path) -> None:
    """One T4 at the initial batch: rate 1 / (2.002 * 1.2) in every epoch, so the job ends
    30 s (restart) + 380 * 2.002 * 1.2 s after it starts, inside its 16th round."""
    w = _workload(root, [("solo", 0, "toy", 1, 100)], "solo.csv")
    res = simulate("max_sum_throughput", w, hs.Cluster({"t4": 1}), options=OPTS)
    job = res.jobs.iloc[0]
    assert bool(job.completed) and res.summary["status"] == "drained"
    assert job.restarts == 1 and job.restart_seconds == 30.0
    assert job.steps_done == pytest.approx(380.0)
    expected = 30.0 + 380.0 * 2.002 * 1.2          # 942.912 s, not a round boundary
    assert job.jct_s == pytest.approx(expected, rel=1e-9), "the finish time is rounded up to the round's end"


def test_one_job_piecewise_rate_jct(root: Path) -> None:
    """Batch 200 on one T4 (1 accumulation step): three epochs at three rates."""
    w = _workload(root, [("solo", 0, "toy", 1, 200)], "solo200.csv")
    res = simulate("max_sum_throughput", w, hs.Cluster({"t4": 1}), options=OPTS)
    r = [g / 4.002 / 1.2 for g in (1.6, 4 / 3, 22 / 21)]
    expected = 30.0 + 90 / r[0] + 160 / r[1] + 130 / r[2]
    job = res.jobs.iloc[0]
    assert bool(job.completed) and job.steps_done == pytest.approx(380.0)
    # every full round progressed by the hand integral of its seconds
    log = res.runs.sort_values("round")
    done = 0.0
    for row in log.itertuples():
        secs = 60.0 - row.restart_s
        if row.Index != log.index[-1]:
            assert row.steps == pytest.approx(integrate("toy", "aws", 1, 1, 200, done, secs), rel=1e-9)
        done += row.steps
    assert job.jct_s == pytest.approx(expected, rel=1e-9), "the finish time is rounded up to the round's end"


# ------------------------------------------------------------------------------ 3. restarts and the run log
def _check_restarts(res: Any, w: AdaptiveWorkload) -> None:
    models = w.table.frame["model"].tolist()
    log = res.runs.sort_values(["job", "round"])
    for j, entries in log.groupby("job"):
        prev = None
        count, secs = 0, 0.0
        for e in entries.itertuples():
            cfg = (int(e.gpu_type), int(e.gpus))
            new = prev is None or prev[0] != e.round - 1 or prev[1] != cfg
            want = RESTART[models[j]] if new else 0.0
            assert e.restart_s == pytest.approx(want), (j, e.round, cfg, prev)
            count += new
            secs += want
            prev = (e.round, cfg)
        assert res.jobs.restarts.iloc[j] == count and res.jobs.restart_seconds.iloc[j] == pytest.approx(secs)


def test_ledger_per_job_restart_seconds() -> None:
    """Two jobs at 1 step/s, restarts of 10 s and 20 s: charged on the first start and on
    every change of type or GPU count, not while a job keeps its GPUs; batch sizes logged."""
    from hetsched.rounds.ledger import Ledger
    from hetsched.rounds.protocol import RoundRows

    led = Ledger(np.array([1000.0, 1000.0]), 2, restart_seconds=np.array([10.0, 20.0]), record_runs=True)
    active = np.array([0, 1])
    plan = [  # (type, gpus, batch) of job 0 and job 1, per round
        ((0, 1, 0), (0, 2, 64)),
        ((0, 1, 0), (0, 2, 128)),    # the same GPUs at another batch: no restart
        ((1, 1, 0), (0, 4, 128)),    # both change configuration
        ((1, 1, 0), None),           # job 1 preempted
        ((1, 1, 0), (0, 4, 128)),    # and back: a restart again
    ]
    for rnd, (a, b) in enumerate(plan):
        rows = [(0, *a)] + ([(1, *b)] if b is not None else [])
        rr = RoundRows(np.array([r[0] for r in rows]), np.array([r[1] for r in rows]), np.array([r[2] for r in rows]),
                       np.ones(len(rows)), batch_size=np.array([r[3] for r in rows]))
        led.progress(rr, np.zeros(len(rows), bool), np.zeros(len(rows), bool), active, 60.0 * rnd, 60.0, rnd,
                     fluid=False)
    log = led.run_frame()
    assert log.restart_s.tolist() == [10.0, 20.0, 0.0, 0.0, 10.0, 20.0, 0.0, 0.0, 20.0]
    assert log.steps.tolist() == [50.0, 40.0, 60.0, 60.0, 50.0, 40.0, 60.0, 60.0, 40.0]
    assert log.batch_size.tolist() == [0, 64, 0, 128, 0, 128, 0, 0, 128]
    assert led.restarts.tolist() == [2, 3] and led.restart_sec.tolist() == [20.0, 60.0]
    assert led.done.tolist() == [280.0, 180.0]


def test_restarts_charged_per_model(runs: dict[str, Any], four: AdaptiveWorkload) -> None:
    for name in ("pollux", "sia", "gavel"):
        _check_restarts(runs[name][0], four)
    # Gavel keeps each job on one configuration: one restart each, at its model's cost
    g = runs["gavel"][0]
    assert g.jobs.restarts.tolist() == [1, 1, 1, 1]
    assert g.jobs.restart_seconds.tolist() == [30.0, 12.0, 30.0, 12.0]
    # the adaptive schedulers changed some configuration at least once
    assert max(runs["pollux"][0].jobs.restarts.max(), runs["sia"][0].jobs.restarts.max()) > 1


def test_run_log_batch_size(runs: dict[str, Any], four: AdaptiveWorkload) -> None:
    assert "batch_size" in runs["gavel"][0].runs.columns
    assert (runs["gavel"][0].runs.batch_size == 0).all()     # the job's own
    for name in ("pollux", "sia"):
        res, rec = runs[name]
        planned = {(r["round"], int(j)): int(b) for r in rec.rows for j, b in zip(r["job"], r["batch_size"])}
        log = res.runs
        got = {(int(a), int(b)): int(c) for a, b, c in zip(log["round"], log["job"], log["batch_size"])}
        assert got and all(got[key] == planned[key] for key in got)
        assert (log.batch_size > 0).all()


# ------------------------------------------------------------------------------ 4. Pollux and Sia end to end
def _check_run(res: Any, w: AdaptiveWorkload, cap: dict[str, int], adaptive: bool) -> None:
    assert res.summary["status"] == "drained" and res.jobs.completed.all()
    log = res.runs
    used = log.groupby(["round", "gpu_type"]).gpus.sum()
    caps = np.array([cap[t] for t in res.gpu_types])
    for (rnd, k), g in used.items():
        assert g <= caps[int(k)], (rnd, k, g)
    assert not log.duplicated(["round", "job"]).any()
    f = w.table.frame
    models = f["model"].tolist()
    for j, entries in log.groupby("job"):
        m = models[j]
        prof = w.profiles[m]
        # the job's progress sums to its completion, in steps that are the truth's
        assert entries.steps.sum() == pytest.approx(COMPLETION[m], rel=1e-9)
        done = 0.0
        for e in entries.sort_values("round").itertuples():
            machine = TYPES[res.gpu_types[int(e.gpu_type)]]
            k = int(e.gpus)
            n = math.ceil(k / GPN[machine])
            b = int(e.batch_size) or int(f["batch_size"].iloc[j])
            if adaptive:
                assert prof.init_batch_size <= e.batch_size <= prof.max_batch_size, (j, e.round, e.batch_size)
            want = integrate(m, machine, n, k, b, done, 60.0 - e.restart_s)
            assert e.steps == pytest.approx(want, rel=1e-9, abs=1e-9), (j, e.round)
            done += e.steps


@pytest.mark.parametrize("name", ["pollux", "sia", "gavel"])
def test_end_to_end(runs: dict[str, Any], four: AdaptiveWorkload, name: str) -> None:
    res, _ = runs[name]
    _check_run(res, four, {"t4": 4, "rtx": 8}, adaptive=name != "gavel")
    assert res.config["policy_name"] == {"pollux": "pollux", "sia": "sia_adaptive"}.get(name, "max_sum_throughput")


def _beliefs_close(rec: Recorder, res: Any, w: AdaptiveWorkload, per_type: bool) -> int:
    """Every measured configuration's fitted step time is within 10% of the formula's."""
    beliefs = rec.state.beliefs
    log = res.runs
    checked = 0
    for (j, key), store in beliefs.samples.items():
        ran = sorted(set(log.loc[log.job == j, "gpu_type"].astype(int)))
        if per_type:
            machine = TYPES[key]
        elif len(ran) == 1:            # Pollux pools the types: check jobs that ran on one only
            machine = TYPES[res.gpu_types[ran[0]]]
        else:
            continue
        perf = beliefs.perf(j, key if per_type else res.gpu_types[ran[0]])
        for (_t, n, k, atomic) in store:
            want = times(machine, n, k, atomic)[0]
            got = float(iteration_time(perf, n, k, atomic, 0))
            assert got == pytest.approx(want, rel=0.10), (j, key, n, k, atomic, got, want)
            checked += 1
    return checked


def test_learned_step_times_match_profiles(runs: dict[str, Any], four: AdaptiveWorkload) -> None:
    res, rec = runs["sia"]
    assert _beliefs_close(rec, res, four, per_type=True) >= 8
    res, rec = runs["pollux"]
    assert _beliefs_close(rec, res, four, per_type=False) >= 1


# ------------------------------------------------------------------------------ 5. exact >= genetic
def _brute_force(prob: SearchProblem) -> float:
    J, C = prob.n_jobs, prob.n_configs
    best = -math.inf
    for idx in np.ndindex(*([C + 1] * J)):
        choice = np.array(idx) - 1
        if prob.feasible(choice):
            best = max(best, prob.fitness(choice))
    return best


def test_exact_beats_genetic_on_recorded_rounds(runs: dict[str, Any]) -> None:
    problems = runs["problems"]
    assert len(problems) >= 5 and any(p.allowed.any() for p in problems)
    brute = 0
    for prob in problems:
        ex = exact_search(prob)
        assert ex.status == "optimal" and prob.feasible(ex.choice)
        f_ex = prob.fitness(ex.choice)
        for seed in (0, 1, 2):
            gen = genetic_search(prob, seed=seed, population=10, generations=10)
            assert prob.feasible(gen.choice)
            assert f_ex >= prob.fitness(gen.choice) - 1e-12
        if (prob.n_configs + 1) ** prob.n_jobs <= 20000:
            assert f_ex == pytest.approx(_brute_force(prob), rel=1e-12)
            brute += 1
    assert brute >= 3


def test_genetic_pollux_end_to_end(four: AdaptiveWorkload) -> None:
    res = simulate(Pollux(search="genetic", generations=10, population=10, seed=3), four, CLUSTER, options=OPTS)
    _check_run(res, four, {"t4": 4, "rtx": 8}, adaptive=True)


# ------------------------------------------------------------------------------ 6. bad input
def test_scheduler_names() -> None:
    assert {"pollux", "sia_adaptive", "tiresias", "max_sum_throughput"} <= set(list_schedulers())
    with pytest.raises(UnknownPolicyError, match=r"'polux'.*pollux"):
        make_scheduler("polux")
    assert isinstance(make_scheduler("pollux", search="genetic"), Pollux)
    assert isinstance(make_scheduler("sia_adaptive"), AdaptiveSia)
    with pytest.raises(ValidationError, match="nope"):
        make_scheduler("pollux", nope=1)
    with pytest.raises(ValidationError):
        make_scheduler(3)


@pytest.mark.parametrize("kwargs, match", [
    ({"search": "x"}, "search"), ({"p": float("nan")}, "p"), ({"p": float("inf")}, "p"),
    ({"restart_delay": -1.0}, "restart_delay"), ({"population": 1}, "population"),
    ({"generations": 0}, "generations"), ({"max_gpus_per_job": 0}, "max_gpus_per_job"),
    ({"seed": -1}, "seed"), ({"time_limit": -1.0}, "time_limit"),
])
def test_bad_pollux_parameters(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        Pollux(**kwargs)


@pytest.mark.parametrize("kwargs, match", [
    ({"fairness_power": float("nan")}, "fairness_power"), ({"lambda_unallocated": -1.0}, "lambda_unallocated"),
    ({"max_gpus_per_job": 0}, "max_gpus_per_job"), ({"mip_gap": -0.1}, "mip_gap"),
])
def test_bad_sia_parameters(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        AdaptiveSia(**kwargs)


@pytest.mark.parametrize("sched", [Pollux(), AdaptiveSia(), "pollux", "sia_adaptive"])
def test_adaptive_scheduler_needs_adaptive_workload(sched: Any) -> None:
    jobs = hs.JobSet([[2.0, 1.0]], gpu_types=["t4", "rtx"], steps_remaining=[600.0])
    with pytest.raises(ValidationError, match="AdaptiveWorkload"):
        simulate(sched, jobs, CLUSTER, options=OPTS)


def test_adaptive_workload_option_conflicts(four: AdaptiveWorkload) -> None:
    with pytest.raises(ValidationError, match="restart_seconds"):
        simulate(Pollux(), four, CLUSTER, options=hs.SimOptions(round_seconds=60.0, restart_seconds=30.0))
    with pytest.raises(ValidationError, match="restart_seconds"):
        simulate("max_sum_throughput", four, CLUSTER, options=hs.SimOptions(restart_seconds=30.0))
    from hetsched.sim.replay import simulate_online

    with pytest.raises(ValidationError, match="adaptive"):
        simulate_online("max_sum_throughput", four, CLUSTER, options=OPTS)
    with pytest.raises(ValidationError, match="adaptive"):
        simulate("max_sum_throughput", four, CLUSTER, options=hs.SimOptions(round_seconds=60.0,
                                                                             learn_throughputs=True))


def test_workload_model_without_profile(root: Path, four: AdaptiveWorkload, tmp_path: Path) -> None:
    wl = write_workload(tmp_path, [("a", 0, "toy", 1, 100), ("b", 5, "ghost", 1, 100)])
    with pytest.raises(ValidationError, match=r"ghost"):
        read_adaptive_workload(wl, profiles=root, machines=TYPES)
    table = read_sia_workload(wl)
    with pytest.raises(ValidationError, match=r"job 'b' names model 'ghost', which has no profile"):
        AdaptiveWorkload(table, {"toy": four.profiles["toy"]})
    with pytest.raises(ValidationError, match="AdaptiveJobTable"):
        AdaptiveWorkload(table.frame, four.profiles)
    with pytest.raises(ValidationError, match="Cluster"):
        AdaptiveProgress(four, {"t4": 4})
    # a model the workload uses that lacks a machine asked for
    write_model(tmp_path, "toy", machines=("aws",))
    with pytest.raises(ValidationError, match=r"'toy'.*'rtx'"):
        read_adaptive_workload(write_workload(tmp_path, [("a", 0, "toy", 1, 100)], "one.csv"), profiles=tmp_path,
                               machines=TYPES)
    with pytest.raises(DataNotFoundError):
        read_adaptive_workload(wl, profiles=tmp_path / "absent", machines=TYPES)


def test_sia_workload_arguments(root: Path) -> None:
    with pytest.raises(ValidationError, match="kind"):
        sia_workload("bogus", 1, path=root)
    with pytest.raises(ValidationError, match="number"):
        sia_workload("philly", 99, path=root)


# ------------------------------------------------------------------------------ 7. jobs an adaptive scheduler must run
def test_pollux_runs_a_lone_job(root: Path) -> None:
    """A job alone at the start has age 0, so Pollux's restart discount max(age - 0, 0) /
    (age + 30) makes every configuration worth 0; no later arrival is pending, and the loop
    must not stop with the job never run."""
    w = _workload(root, [("solo", 0, "toy", 1, 100)], "solo.csv")
    res = simulate(Pollux(), w, hs.Cluster({"t4": 4}), options=OPTS)
    assert res.summary["status"] == "drained" and bool(res.jobs.completed.iloc[0])


def test_sia_runs_a_lone_job(root: Path) -> None:
    w = _workload(root, [("solo", 0, "toy", 1, 100)], "solo.csv")
    res = simulate(AdaptiveSia(), w, hs.Cluster({"t4": 4}), options=OPTS)
    assert res.summary["status"] == "drained" and bool(res.jobs.completed.iloc[0])
    assert res.runs.steps.sum() == pytest.approx(380.0)


@pytest.mark.parametrize("sched", [Pollux(), AdaptiveSia()], ids=["pollux", "sia"])
def test_adaptive_job_submitted_larger_than_the_cluster(root: Path, sched: Any) -> None:
    """An adaptive scheduler picks the job's GPU count itself: a job submitted with 2 GPUs
    runs on a cluster of one T4 and one RTX (its submitted gang fits no type, but one GPU
    does), instead of being refused before the first round."""
    w = _workload(root, [("a", 0, "toy", 2, 100), ("b", 30, "toy2", 1, 50)], "wide.csv")
    res = simulate(sched, w, hs.Cluster({"t4": 1, "rtx": 1}), options=OPTS)
    assert res.summary["status"] == "drained" and res.jobs.completed.all()
    assert (res.runs.gpus == 1).all()


def test_pollux_job_whose_fair_share_cannot_run_it(root: Path) -> None:
    """toy3 can run on 1 or 2 GPUs (50 <= total <= 60 with per-GPU batches >= 25) but not on
    4 (4 x 25 = 100 > 60). Pollux divides a job's goodput by its goodput at the fair share
    (here 4 GPUs, 8 GPUs / 2 jobs): that is 0, so once toy3 has reported, every
    configuration is worth 0 to it and it never runs again; the run must still finish it."""
    w = _workload(root, [("a", 0, "toy3", 1, 50), ("b", 30, "toy", 1, 100)], "narrow.csv")
    cluster = hs.Cluster({"t4": 4, "rtx": 4})
    sia = simulate(AdaptiveSia(), w, cluster, options=OPTS)       # Sia runs it
    assert sia.summary["status"] == "drained" and sia.jobs.completed.all()
    res = simulate(Pollux(), w, cluster, options=OPTS)
    assert res.summary["status"] == "drained" and res.jobs.completed.all(), res.jobs[["job_id", "steps_done"]]


def test_gang_wider_than_the_profiles_node(root: Path) -> None:
    """Without a topology the loop takes min(8, GPUs of the type) per node, but the T4
    machine's profile has 4 GPUs per node: an 8-GPU T4 gang is then '8 replicas on 1 node
    of 4 GPUs', which the profile refuses, and a job submitted with 8 T4s is refused as
    unrunnable. The profile measures 8 T4s on two nodes ("44"): the job should run there."""
    w = _workload(root, [("wide", 0, "toy", 8, 400)], "eight.csv")
    p = AdaptiveProgress(w, hs.Cluster({"t4": 8}))
    assert p.throughput(0, 0, 8, 400) == pytest.approx(400 / times("aws", 2, 8, 50)[0] / 1.2)
    res = simulate("max_sum_throughput", w, hs.Cluster({"t4": 8}), options=OPTS)
    assert res.summary["status"] == "drained" and bool(res.jobs.completed.iloc[0])


# ------------------------------------------------------------------------------ 8. fuzz
def _random_model(folder: Path, name: str, machines: tuple[str, ...], draw: Any, var_zero: bool) -> dict:
    """Random distinct times (sync a random fraction of step), random statistics."""
    folder.mkdir(parents=True)
    bsz = sorted(draw(st.sets(st.integers(4, 128), min_size=2, max_size=3)))
    for m in machines:
        R = GPN[m]
        layouts = [str(2 ** i) for i in range(4) if 2 ** i <= R] + ["11", "22", f"{R}{R}"]
        n_rows = len(layouts) * len(bsz)
        steps = draw(st.lists(st.floats(0.05, 5.0), min_size=n_rows, max_size=n_rows, unique=True))
        fracs = draw(st.lists(st.floats(0.01, 0.9), min_size=n_rows, max_size=n_rows))
        rows = []
        for i, (p, b) in enumerate((p, b) for p in layouts for b in bsz):
            rows.append((p, b, steps[i], steps[i] * fracs[i]))
        _write(folder / f"placements-{m}.csv", "placement,local_bsz,step_time,sync_time", rows)
        srows = []
        for n in (3, 4):
            for b in bsz:
                s = draw(st.floats(0.05, 5.0))
                srows.append((b, s, s * draw(st.floats(0.01, 0.9)), n, n * R))
        _write(folder / f"scalability-{m}.csv", "local_bsz,step_time,sync_time,num_nodes,num_replicas", srows)
    # validated total batches: from about the smallest per-GPU batch up; one run (init = max)
    # a quarter of the time; sometimes below the profiled per-GPU range altogether
    init = draw(st.one_of(st.integers(bsz[0], 2 * bsz[-1]), st.integers(1, bsz[0])))
    batches = sorted({init * f for f in draw(st.sets(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=3))})
    epochs = draw(st.integers(1, 3))
    ends = np.cumsum(draw(st.lists(st.floats(5.0, 60.0), min_size=epochs, max_size=epochs)))
    for b in batches:
        rows = []
        for e in range(epochs):
            sqr = draw(st.floats(0.0, 5.0))
            var = 0.0 if var_zero else draw(st.floats(0.0, 5.0))
            if sqr == 0 and var == 0:
                sqr = 1.0
            rows.append((float(ends[e]) + draw(st.floats(0.0, 2.0)), e, 0.0, sqr, var))
        _write(folder / f"validation-{b}.csv", "progress,iteration,metric,grad_sqr,grad_var", rows)
    return {"min_local": bsz[0], "max_local": bsz[-1], "init": batches[0], "max": batches[-1]}


@settings(max_examples=10, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_fuzz_adaptive_simulation(data: st.DataObject) -> None:
    draw = data.draw
    sched = draw(st.sampled_from(["pollux", "sia", "gavel"]))
    if draw(st.booleans()):     # servers (placement on): up to two T4 servers of 4
        counts = {"t4": draw(st.integers(1, 8)), "rtx": draw(st.integers(1, 8))}
        cluster = hs.Cluster.from_servers(counts, gpus_per_server={"t4": 4, "rtx": 8})
    else:       # no topology: one node's worth of T4s at most (test_gang_wider_than_the_profiles_node)
        cluster = hs.Cluster({"t4": draw(st.integers(1, 4)), "rtx": draw(st.integers(1, 8))})
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        both = _random_model(root / "profiles" / "both", "both", ("aws", "rtx"), draw, draw(st.booleans()))
        only = _random_model(root / "profiles" / "only", "only", ("aws",), draw, draw(st.booleans()))
        lim = {"both": both, "only": only}
        n_jobs = draw(st.integers(1, 3))
        rows = []
        for i in range(n_jobs):
            model = draw(st.sampled_from(["both", "only"]))
            L = lim[model]
            replicas = draw(st.sampled_from([1, 2]))
            batch = draw(st.sampled_from([L["init"], L["max"], L["min_local"] * replicas, L["max_local"] * replicas]))
            rows.append((f"j{i}", draw(st.sampled_from([0, 0, 30, 75])), model, replicas, batch))
        wl = write_workload(root, rows)
        table = read_sia_workload(wl)
        profiles = {"both": load_sia_profiles(root, models=["both"], machines=TYPES)["both"],
                    "only": load_sia_profiles(root, models=["only"], machines={"t4": "aws"})["only"]}
        used = {m: profiles[m] for m in set(table.frame["model"])}
        w = AdaptiveWorkload(table, used, source=str(wl))
        scheduler = {"pollux": Pollux(), "sia": AdaptiveSia(), "gavel": "max_sum_throughput"}[sched]
        opts = hs.SimOptions(round_seconds=60.0, max_time=1200.0)
        try:
            res = simulate(scheduler, w, cluster, options=opts)
        except ValidationError as exc:
            # only Gavel may refuse up front (a submitted gang no type can run); an adaptive
            # scheduler picks the GPU count itself (see test_adaptive_job_submitted_larger_than_the_cluster)
            assert sched == "gavel" and ("cannot run" in str(exc) or "zero throughput" in str(exc)), exc
            return
    assert res.summary["status"] in ("drained", "max_time", "stalled")
    if res.summary["status"] == "drained":
        assert res.jobs.completed.all()
    log = res.runs
    if log is None or log.empty:
        return
    caps = cluster.capacities(res.gpu_types)
    used_gpus = log.groupby(["round", "gpu_type"]).gpus.sum()
    for (rnd, k), g in used_gpus.items():
        assert g <= caps[int(k)]
    models = table.frame["model"].tolist()
    for e in log.itertuples():
        t = res.gpu_types[int(e.gpu_type)]
        assert t in w.profiles[models[int(e.job)]].machines, (models[int(e.job)], t)
        assert e.steps >= 0 and math.isfinite(e.steps)
    if sched == "gavel":        # every job it admitted runs on its submitted configuration
        assert res.summary["status"] in ("drained", "max_time")


# ------------------------------------------------------------------------------ 9. CLI
def test_cli_simulate_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--trace-format" in out and "sia" in out and "--profiles" in out
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "hetsched", "simulate", "--help"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "--trace-format" in done.stdout, done.stderr


def test_cli_simulate_pollux(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the CLI reads the paper's machines (t4, rtx, a100): give the model all three
    write_model(tmp_path, "toy", machines=("aws", "rtx", "dgx-ext"))
    wl = write_workload(tmp_path, [("a", 0, "toy", 1, 100), ("b", 30, "toy", 2, 200)])
    out_dir = tmp_path / "out"
    code = main(["simulate", "--policy", "pollux", "--trace", str(wl), "--trace-format", "sia",
                 "--profiles", str(tmp_path), "--round-seconds", "60", "--cluster", "t4=4,rtx=8",
                 "--out", str(out_dir), "--runs", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "pollux" in out and "avg JCT" in out
    jobs = pd.read_csv(out_dir / "jobs.csv")
    assert jobs.completed.all() and len(jobs) == 2
    log = pd.read_csv(out_dir / "runs.csv")
    assert (log.batch_size >= 100).all() and (log.batch_size <= 400).all()
    assert jobs.steps_done.tolist() == pytest.approx([380.0, 380.0])


def test_cli_bad_policy_and_missing_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_model(tmp_path, "toy", machines=("aws", "rtx", "dgx-ext"))
    wl = write_workload(tmp_path, [("a", 0, "toy", 1, 100)])
    code = main(["simulate", "--policy", "polux", "--trace", str(wl), "--trace-format", "sia",
                 "--profiles", str(tmp_path), "--cluster", "t4=4", "--no-progress"])
    assert code == 2 and "pollux" in capsys.readouterr().err
    wl2 = write_workload(tmp_path, [("a", 0, "ghost", 1, 100)], "ghost.csv")
    code = main(["simulate", "--policy", "pollux", "--trace", str(wl2), "--trace-format", "sia",
                 "--profiles", str(tmp_path), "--cluster", "t4=4", "--no-progress"])
    assert code == 2 and "ghost" in capsys.readouterr().err


# ------------------------------------------------------------------------------ real data (fixture sia_root: conftest.py)


PAPER = {"t4": 4, "rtx": 8, "a100": 8}


def _paper_cluster() -> hs.Cluster:
    return hs.Cluster.from_servers({"t4": 24, "rtx": 24, "a100": 16}, gpus_per_server=PAPER)


def _one_server_each() -> hs.Cluster:
    """One server per type: every configuration is a measured single-node placement."""
    return hs.Cluster.from_servers(PAPER, gpus_per_server=PAPER)


def test_real_workload_trace(sia_root: Path) -> None:
    w = sia_workload("philly", 1, path=sia_root)
    assert w.n_jobs == 160 and w.gpu_types == ("t4", "rtx", "a100")
    cluster = _paper_cluster()
    trace = dataclasses.replace(w, throughput_units="examples").trace(cluster)   # Sia's Gavel view
    T = np.asarray(trace.jobs.throughputs)
    assert T.shape == (160, 3) and (T.max(axis=1) > 0).all()
    # examples/s of the submitted configuration, times the calibration, on the fewest nodes
    p = AdaptiveProgress(w, cluster)
    f = w.table.frame
    j = 0
    prof = w.profiles[f.model.iloc[j]]
    k, g, b = 2, int(f.num_replicas.iloc[j]), int(f.batch_size.iloc[j])
    nodes = math.ceil(g / 8)
    atomic, accum = p.split_batch(j, k, nodes, g, b)
    step, sync = prof.machines["a100"].times(nodes, g, atomic)
    M = g * atomic * (accum + 1)
    assert T[j, k] == pytest.approx(M / (float(step) + accum * (float(step) - float(sync))) * prof.calibration)
    assert np.asarray(trace.total_steps).tolist() == pytest.approx(p.completion.tolist())


def test_real_pollux_exact_vs_genetic(sia_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import hetsched.schedulers.pollux as pollux_mod

    full = sia_workload("philly", 1, path=sia_root)
    frame = full.table.frame
    frame = frame[frame.num_replicas <= 8].iloc[:5].reset_index(drop=True)   # gangs one server holds
    models = set(frame.model)
    w = AdaptiveWorkload(AdaptiveJobTable(frame, full.table.source), {m: full.profiles[m] for m in models})
    problems: list[SearchProblem] = []
    original = pollux_mod.exact_search

    def recording(problem: SearchProblem, *args: Any, **kwargs: Any) -> Any:
        problems.append(problem)
        return original(problem, *args, **kwargs)

    monkeypatch.setattr(pollux_mod, "exact_search", recording)
    cluster = _one_server_each()
    opts = hs.SimOptions(round_seconds=60.0, max_time=float(frame.arrival.iloc[-1]) + 480.0)
    res = simulate(Pollux(), w, cluster, options=opts)
    assert res.summary["status"] in ("max_time", "drained")
    log = res.runs
    assert not log.empty and (log.batch_size > 0).all()
    used = log.groupby(["round", "gpu_type"]).gpus.sum()
    caps = cluster.capacities(res.gpu_types)
    assert all(g <= caps[int(k)] for (_, k), g in used.items())
    assert len(problems) >= 5
    for prob in problems:
        f_ex = prob.fitness(original(prob).choice)
        for seed in (0, 1):
            gen = genetic_search(prob, seed=seed, population=10, generations=10)
            assert f_ex >= prob.fitness(gen.choice) - 1e-12


def test_trace_throughput_units_progress_matches_remaining_work_and_examples_is_gavels() -> None:
    """What a non-adaptive policy sees: by default throughputs in progress/s (the unit of
    steps_remaining: remaining / throughput is the job's time in its first epoch at its
    submitted configuration); "examples" gives examples/s (Sia's Gavel view), a different unit."""
    from hetsched.errors import DataNotFoundError
    from hetsched.inputs.adaptive import AdaptiveProgress, sia_workload
    from hetsched.reproduce.sia_table3 import table3_cluster

    try:
        w = sia_workload("philly", 1)
    except DataNotFoundError:
        pytest.skip("Sia's artifact data is not on this machine")
    cluster = table3_cluster()
    prog = AdaptiveProgress(w, cluster)
    f = w.table.frame
    tr = w.trace(cluster)
    ex = dataclasses.replace(w, throughput_units="examples").trace(cluster)
    for j in (0, 1, 2):
        K, b = int(f["num_replicas"].iloc[j]), int(f["batch_size"].iloc[j])
        for k in range(3):
            nodes = prog.nodes_for(k, K)
            atomic, accum = prog.split_batch(j, k, nodes, K, b)
            prof = prog.models[j]
            sqr, var = (float(np.asarray(v).reshape(-1)[0]) for v in prof.grad_stats(np.array([K * atomic * (accum + 1)]), 0))
            step, sync = (float(np.asarray(v).reshape(-1)[0]) for v in prof.machines[prog.types[k]].times(
                np.array([nodes]), np.array([K]), np.array([atomic])))
            scale = K * atomic * (accum + 1) / prof.init_batch_size
            rate = (var + sqr) / (var / scale + sqr) / (step + accum * (step - sync)) * prof.calibration
            assert tr.jobs.throughputs[j, k] == pytest.approx(rate, rel=1e-9)
            assert ex.jobs.throughputs[j, k] == pytest.approx(K * atomic * (accum + 1) / (step + accum * (step - sync))
                                                              * prof.calibration, rel=1e-9)
    assert tr.meta["throughput_units"] == "progress" and ex.meta["throughput_units"] == "examples"
    with pytest.raises(ValidationError, match="throughput_units"):
        dataclasses.replace(w, throughput_units="steps")
