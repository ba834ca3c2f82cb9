"""Sia (SOSP'23) Table 3: Sia vs Pollux vs Gavel with TunedJobs on Sia's published workloads.

The paper's heterogeneous cluster of 64 GPUs (6 nodes x 4 T4, 3 x 8 RTX 2080 Ti, 2 x 8 A100),
Sia's Philly workloads (8 x 160 jobs; ``sia_table3``) and newTrace workloads (10 x 960 jobs;
``sia_table3_newtrace``) with its published per-model profiles, read from
Sia's artifact data (``../shared/data/sia/``, or ``$HETSCHED_SIA_DATA``; never copied into
the project). Schedulers, all through :func:`hetsched.simulate` on the same adaptive jobs:

* ``sia``: :class:`~hetsched.schedulers.sia_adaptive.AdaptiveSia` (per-type goodput models
  learned online, Sia's ILP), 60 s rounds;
* ``pollux``: :class:`~hetsched.schedulers.pollux.Pollux` (one model per job, power-mean
  fitness p = -1, exact search), 60 s rounds;
* ``gavel``: hetsched's ``max_sum_throughput`` policy on each job's submitted GPU count and
  batch size (Sia's "TunedJobs"), Gavel's round mechanism, 360 s rounds;
* ``optimus``: :class:`~hetsched.schedulers.optimus.Optimus` beside them (not in the paper's
  table), 60 s rounds.

Every job progresses at its true goodput (:class:`hetsched.inputs.adaptive.AdaptiveProgress`):
the profiles' step and sync times, the validation runs' gradient statistics, the model's
restart time on every configuration change. Quick mode: workload 1, its first 48 jobs.
"""

from __future__ import annotations

import dataclasses
import logging
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np
import pandas as pd

from ..errors import DataNotFoundError, ValidationError
from ..inputs.adaptive import AdaptiveWorkload, sia_workload
from ..inputs.cluster import Cluster
from ..inputs.traces.sia import AdaptiveJobTable
from ..schedulers.optimus import Optimus
from ..schedulers.pollux import Pollux
from ..schedulers.sia_adaptive import AdaptiveSia
from ..sim.options import SimOptions
from ..sim.simulator import simulate
from .base import ExperimentResult, Settings, published_table

__all__ = ["PAPER_TABLE3", "SIA_TABLE3_CLUSTER", "run_sia_table3", "run_sia_table3_newtrace", "table3_cluster",
           "table3_result"]

log = logging.getLogger(__name__)

#: The paper's cluster: GPUs and GPUs per server of each type.
SIA_TABLE3_CLUSTER = {"t4": (24, 4), "rtx": (24, 8), "a100": (16, 8)}

#: Table 3 of the paper (hours: avg JCT, p99 JCT, makespan), from the artifact's README.
PAPER_TABLE3 = {
    "philly": {"sia": (0.6, 9.5, 14.2), "pollux": (1.0, 14.9, 24.5), "gavel": (1.9, 30.0, 33.8)},
    "newtrace": {"sia": (0.7, 4.6, 52.2), "pollux": (1.5, 10.3, 62.3), "gavel": (11.3, 98.1, 110.0)},
}
#: Sia's own simulator, run unmodified on the same workloads (data README; 8 Philly workloads).
ARTIFACT_PHILLY = {"sia": (0.66, 10.45, 14.45), "gavel": (1.87, 31.34, 33.86)}
_BLAS_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
PAPER_SOURCE = "Sia, SOSP'23, Table 3 (artifact README); artifact rerun: ../shared/data/sia/README.md"


def table3_cluster() -> Cluster:
    """The paper's 64-GPU cluster with its servers."""
    return Cluster.from_servers({t: n for t, (n, _) in SIA_TABLE3_CLUSTER.items()},
                                gpus_per_server={t: r for t, (_, r) in SIA_TABLE3_CLUSTER.items()})


def schedulers() -> dict[str, tuple[Any, float]]:
    """Name -> (scheduler, round seconds)."""
    return {"sia": (AdaptiveSia(), 60.0), "pollux": (Pollux(), 60.0), "gavel": ("max_sum_throughput", 360.0),
            "optimus": (Optimus(), 60.0)}


def _first_jobs(w: AdaptiveWorkload, n: int) -> AdaptiveWorkload:
    frame = w.table.frame.iloc[:n].reset_index(drop=True)
    return AdaptiveWorkload(AdaptiveJobTable(frame, w.table.source), w.profiles, source=w.source,
                            meta={**w.meta, "first_jobs": n})


def _one(args: tuple[str, int, int | None, str]) -> dict[str, Any]:
    kind, number, first, name = args
    w = sia_workload(kind, number)
    if first is not None:
        w = _first_jobs(w, first)
    sched, seconds = schedulers()[name]
    if name == "gavel":   # Gavel is given examples/s, as in Sia's comparison (Job.get_throughputs)
        w = dataclasses.replace(w, throughput_units="examples")
    t0 = time.perf_counter()
    res = simulate(sched, w, table3_cluster(), options=SimOptions(round_seconds=seconds, record_runs=True))
    jobs = res.jobs
    jct = jobs["jct_s"].to_numpy(float)
    done = jobs["completed"].to_numpy(bool)
    runs = res.runs
    batches = runs["batch_size"][runs["batch_size"] > 0] if runs is not None else pd.Series(dtype=float)
    return {"workload": f"{kind}-{number}", "scheduler": name, "n_jobs": len(jobs), "n_completed": int(done.sum()),
            "avg_jct_hours": float(np.mean(jct[done])) / 3600 if done.any() else np.nan,
            "p99_jct_hours": float(np.percentile(jct[done], 99)) / 3600 if done.any() else np.nan,
            "makespan_hours": float(res.summary["makespan_s"]) / 3600, "status": res.summary.get("status", ""),
            "restarts": int(jobs["restarts"].sum()), "mean_batch": float(batches.mean()) if len(batches) else np.nan,
            "round_seconds": seconds, "wall_s": time.perf_counter() - t0}


#: Per kind: the workload numbers and what they are.
WORKLOADS = {"philly": (range(1, 9), "Philly workloads 1-8, 160 jobs each"),
             "newtrace": (range(1, 11), "newTrace workloads 1-10, 960 jobs each")}
QUICK_JOBS = 48


def run_sia_table3(settings: Settings) -> ExperimentResult:
    """Sia vs Pollux vs Gavel+TunedJobs on Sia's Philly workloads (see the module docstring)."""
    return _run_table3(settings, "philly")


def run_sia_table3_newtrace(settings: Settings) -> ExperimentResult:
    """The same comparison on Sia's newTrace workloads (the second half of Table 3).

    newTrace's jobs are longer and arrive over days (makespans of ~50 h in the paper) instead
    of Philly's 8 busy hours; quick mode runs workload 1's first 48 jobs.
    """
    return _run_table3(settings, "newtrace")


def _run_table3(settings: Settings, kind: str) -> ExperimentResult:
    t0 = time.perf_counter()
    try:
        sia_workload(kind, 1)
    except DataNotFoundError as exc:
        raise DataNotFoundError(f"Table 3 ({kind}) needs Sia's artifact data: {exc}") from None
    numbers, _ = WORKLOADS[kind]
    if settings.quick:
        tasks = [(kind, 1, QUICK_JOBS, s) for s in schedulers()]
    else:
        tasks = [(kind, i, None, s) for i in numbers for s in schedulers()]
    runs = pd.DataFrame(_map(_one, tasks, settings.workers or 1))
    return table3_result(kind, runs, quick=settings.quick, wall_s=time.perf_counter() - t0)


def table3_result(kind: str, runs: pd.DataFrame, *, quick: bool = False, wall_s: float = 0.0) -> ExperimentResult:
    """The experiment's result from its runs (one row per workload and scheduler, as ``_one``
    returns them): the summary over workloads, the paper's numbers beside it, the notes.

    Parameters
    ----------
    kind : {"philly", "newtrace"}
        Which half of Table 3.
    runs : pandas.DataFrame
        The simulations' rows; they may have been run apart (e.g. one workload at a time).
    quick : bool, default False
        Whether the runs are the quick variant (said in the notes).
    wall_s : float, default 0.0
        Wall seconds the runs took.
    """
    if kind not in WORKLOADS:
        raise ValidationError(f"`kind` must be one of {sorted(WORKLOADS)}; got {kind!r}.")
    name = "sia_table3" if kind == "philly" else "sia_table3_newtrace"
    _, described = WORKLOADS[kind]
    summary = runs.groupby("scheduler", sort=False).agg(
        workloads=("workload", "count"), avg_jct_hours=("avg_jct_hours", "mean"),
        avg_jct_std_hours=("avg_jct_hours", "std"), makespan_std_hours=("makespan_hours", "std"),
        p99_jct_hours=("p99_jct_hours", "mean"), makespan_hours=("makespan_hours", "mean"),
        completed=("n_completed", "sum"), jobs=("n_jobs", "sum"), wall_s=("wall_s", "sum")).reset_index()
    paper = PAPER_TABLE3[kind]
    for col, i in (("paper_avg_jct_hours", 0), ("paper_p99_jct_hours", 1), ("paper_makespan_hours", 2)):
        summary[col] = [paper[s][i] if s in paper else np.nan for s in summary["scheduler"]]
    avg = dict(zip(summary["scheduler"], summary["avg_jct_hours"]))
    order = "Sia < Pollux < Gavel" if avg["sia"] < avg["pollux"] < avg["gavel"] else "NOT Sia < Pollux < Gavel"
    label = "Philly" if kind == "philly" else "newTrace"
    published = published_table([
        {"claim": f"{label} avg JCT (h), {s}", "paper_value": paper[s][0],
         "ours": round(avg[s], 2), "source": PAPER_SOURCE} for s in ("sia", "pollux", "gavel")
    ] + [{"claim": "order of avg JCT", "paper_value": "Sia < Pollux < Gavel", "ours": order, "source": PAPER_SOURCE}])
    notes = [(f"quick: {label} workload 1, first {QUICK_JOBS} jobs" if quick else described),
             f"cluster: {SIA_TABLE3_CLUSTER} (GPUs, GPUs per server)"]
    if kind == "philly":
        notes.append(f"Sia's simulator on the same 8 workloads (data README): {ARTIFACT_PHILLY}")
    return ExperimentResult(name, runs, summary, published, notes=notes, wall_s=wall_s)


def _map(fn: Any, tasks: list[tuple[str, int, int | None, str]], workers: int) -> list[dict[str, Any]]:
    """``fn`` over ``tasks``, in ``workers`` fresh processes when more than one."""
    if workers <= 1:
        return [fn(t) for t in tasks]
    # fresh interpreters with one BLAS thread each: the matrices are tiny, and BLAS threads
    # of several workers only contend for the cores (see docs/adaptive.md)
    env = {v: os.environ.get(v) for v in _BLAS_VARS}
    os.environ.update({v: "1" for v in _BLAS_VARS if env[v] is None})
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as ex:
            return list(ex.map(fn, tasks))
    finally:
        for v, old in env.items():
            if old is None:
                os.environ.pop(v, None)
