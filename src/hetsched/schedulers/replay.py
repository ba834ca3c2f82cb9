"""A round loop for per-round schedulers: replay jobs with arrival times through ``plan`` /
``record`` and report job completion times.

The accounting follows :func:`hetsched.sim.simulate` (mechanism "rounds", no placement), so
results compare with the simulator's: rounds of ``round_seconds`` start at the first
arrival; a job that arrives during a round joins at the next round; a running job makes
``T[j, k]`` steps per second on its type; a job that finishes mid-round frees its GPUs for
the rest of the round; finish-time fairness ``rho = JCT / T_iso``, where the isolated time
grows by ``steps / iso_j`` each round and ``iso_j`` (the throughput of the job's ``1/n``
share of every type) is recomputed whenever the set of active jobs changes.

Examples
--------
>>> import hetsched as hs
>>> from hetsched.schedulers import Tiresias, replay
>>> jobs = hs.JobSet([[1.0], [1.0]], gpu_types=["v100"], ids=["a", "b"],
...                  arrival_times=[0.0, 0.0], steps_remaining=[720.0, 360.0])
>>> res = replay(Tiresias(thresholds=[360.0]), jobs, hs.Cluster({"v100": 1}), round_seconds=360.0)
>>> res.jobs["jct"].tolist()              # a: rounds 1 and 3; b: round 2 (a was demoted)
[1080.0, 720.0]
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..cluster import Cluster
from ..errors import ValidationError
from ..formulations.common import isolated_throughput
from ..jobs import JobSet

__all__ = ["ReplayResult", "replay"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class ReplayResult:
    """Outcome of :func:`replay`.

    Attributes
    ----------
    jobs : DataFrame
        One row per job (index: job id): ``arrival``, ``start``, ``finish``, ``jct``,
        ``completed``, ``run_seconds``, ``isolated_time``, ``ftf``, ``preemptions``.
    summary : dict
        ``avg_jct``, ``p99_jct``, ``median_jct``, ``makespan``, ``worst_ftf``,
        ``mean_ftf``, ``n_completed``, ``n_rounds``, ``status``, ``wall_s``.
    state : Any
        The scheduler's final state.
    """

    jobs: pd.DataFrame
    summary: dict[str, Any]
    state: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


def replay(scheduler: Any, jobs: JobSet, cluster: Cluster, *, round_seconds: float = 360.0,
           max_time: float | None = None, record_kwargs: Any = None) -> ReplayResult:
    """Run a per-round scheduler over ``jobs`` until every job finishes.

    Parameters
    ----------
    scheduler : object
        Has ``initial_state(start_time)``, ``plan(jobs, cluster, state, round_seconds=)``
        returning a RoundPlan in "rounds" mode, and ``record(state, plan, seconds)``; e.g.
        :class:`~hetsched.schedulers.Tiresias`.
    jobs : JobSet
        Needs ``arrival_times`` and ``steps_remaining`` (total steps of each job).
    cluster : Cluster
    round_seconds : float, default 360
    max_time : float, optional
        Stop at this simulated time (unfinished jobs have ``completed=False``).
    record_kwargs : callable, optional
        ``f(active_rows, steps_this_round) -> dict`` of extra keyword arguments for
        ``record`` (e.g. ``progress`` in epochs for E-LAS).

    Raises
    ------
    ValidationError
        Missing fields; a job no GPU type can run.
    """
    wall0 = time.perf_counter()
    if not isinstance(jobs, JobSet):
        raise ValidationError(f"`jobs` must be a hetsched.JobSet; got {type(jobs).__name__}.")
    for f in ("arrival_times", "steps_remaining"):
        if not jobs.has(f):
            raise ValidationError(f"replay needs job field `{f}`; pass JobSet(..., {f}=...).")
    L = float(round_seconds)
    if not math.isfinite(L) or L <= 0:
        raise ValidationError(f"`round_seconds` must be a positive number of seconds; got {round_seconds!r}.")
    n = jobs.n_jobs
    order = np.argsort(jobs.arrival_times, kind="stable")
    js = jobs.take(order)
    arrival = np.asarray(js.arrival_times, dtype=float)
    total = np.asarray(js.steps_remaining, dtype=float)
    T = js.throughputs
    cap = cluster.capacities(js.gpu_types)
    usable = (T > 0) & (cap[None, :] >= js.scale_factors[:, None])
    if n and not usable.any(axis=1).all():
        j = int(np.flatnonzero(~usable.any(axis=1))[0])
        raise ValidationError(f"job {js.ids[j]!r} cannot run on any GPU type of the cluster.")
    done = np.zeros(n)
    start = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    iso_time = np.zeros(n)
    iso_rate = np.full(n, np.nan)
    run_seconds = np.zeros(n)
    preempt = np.zeros(n, dtype=np.int64)
    t = float(arrival[0]) if n else 0.0
    state = scheduler.initial_state(t)
    active = np.zeros(0, dtype=np.int64)
    ptr = 0
    rounds = 0
    changed = True
    status = "drained"
    while True:
        k_new = int(np.searchsorted(arrival, t, side="right"))
        if k_new > ptr:
            active = np.concatenate([active, np.arange(ptr, k_new)])
            ptr = k_new
            changed = True
        if active.size == 0:
            if ptr >= n:
                break
            t = max(t, float(arrival[ptr]))
            continue
        if max_time is not None and t >= max_time:
            status = "max_time"
            break
        sub = js.take(active)
        if changed:
            iso_rate[active] = isolated_throughput(sub, cap)
            changed = False
        plan = scheduler.plan(sub, cluster, state, round_seconds=L)
        assign = plan.assignment
        run = assign >= 0
        rate = np.zeros(active.size)
        rate[run] = T[active[run], assign[run]]
        rem = total[active] - done[active]
        with np.errstate(divide="ignore", invalid="ignore"):
            fin = run & (rem <= rate * L * (1 + 1e-12))
            dt = np.where(fin, rem / np.where(rate > 0, rate, 1.0), np.where(run, L, 0.0))
        steps = np.where(fin, rem, rate * dt)
        done[active] += steps
        first = run & np.isnan(start[active])
        start[active[first]] = t
        iso_time[active] += np.where(steps > 0, steps / iso_rate[active], 0.0)
        run_seconds[active] += dt
        preempt[active] += plan.preempted
        finish[active[fin]] = t + dt[fin]
        kw = record_kwargs(active, steps) if record_kwargs is not None else {}
        state = scheduler.record(state, plan, np.where(run, dt, L), **kw)
        rounds += 1
        t += L
        if fin.any():
            done[active[fin]] = total[active[fin]]
            active = active[~fin]
            changed = True
        elif not run.any() and ptr >= n:
            status = "stalled"
            log.warning("replay: no job can run and none will arrive; stopping")
            break
    completed = np.isfinite(finish)
    jct = finish - arrival
    with np.errstate(divide="ignore", invalid="ignore"):
        ftf = np.where(completed & (iso_time > 0), jct / iso_time, np.nan)
    frame = pd.DataFrame({"arrival": arrival, "start": start, "finish": finish, "jct": jct, "completed": completed,
                          "run_seconds": run_seconds, "isolated_time": iso_time, "ftf": ftf, "preemptions": preempt},
                         index=pd.Index(js.ids, name="job_id"))
    jc = jct[completed]
    f = ftf[np.isfinite(ftf)]
    summary = {
        "status": status,
        "n_jobs": n,
        "n_completed": int(completed.sum()),
        "avg_jct": float(jc.mean()) if jc.size else math.nan,
        "median_jct": float(np.median(jc)) if jc.size else math.nan,
        "p99_jct": float(np.percentile(jc, 99)) if jc.size else math.nan,
        "makespan": float(finish.max() - arrival.min()) if n and completed.all() else math.nan,
        "worst_ftf": float(f.max()) if f.size else math.nan,
        "mean_ftf": float(f.mean()) if f.size else math.nan,
        "preemptions": int(preempt.sum()),
        "n_rounds": rounds,
        "wall_s": time.perf_counter() - wall0,
    }
    return ReplayResult(jobs=frame, summary=summary, state=state)
