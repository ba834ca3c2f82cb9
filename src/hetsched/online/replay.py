"""simulate_online(): an :class:`~hetsched.online.OnlineScheduler` driven by a simulated clock.

The driver plays the cluster: it submits each job when it arrives, asks ``next_round(t)``
for the plan, runs the plan's rows on the simulator's :class:`~hetsched.sim.ledger.Ledger`
at the jobs' *true* throughputs, reports what each job did (``report(job, type, steps,
seconds)``), completes the jobs that finished and moves the clock one round. It follows
:func:`hetsched.simulate` step for step (arrivals, idle jumps, stalls, windows, the
result tables), so with the true throughputs given at submit and exact reports the two give
the same jobs table (``tests/test_online.py`` checks it), and with ``learn=True`` the only
difference is what the scheduler knows about throughputs:

* ``learn=True``: jobs are submitted without throughputs or job type; the scheduler starts
  from the estimator's prior and learns from the reports;
* ``report_noise=s``: each reported step count is the true one times
  :math:`e^{s Z}`, :math:`Z \\sim N(0, 1)` (seeded by ``seed``), so both the measured
  throughput and the steps the scheduler believes done are noisy; completion is decided by
  the true progress.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import numpy as np

from ..cluster import Cluster
from ..errors import ValidationError
from ..sim.ledger import Ledger
from ..sim.options import SimOptions
from ..sim.result import SimulationResult
from ..sim.simulator import (
    RoundClock,
    _options,
    _result,
    _solve_columns,
    _trace,
    _Workload,
    as_scheduler,
)
from ..throughputs import ThroughputCatalogue
from .scheduler import OnlineScheduler

__all__ = ["simulate_online"]

log = logging.getLogger(__name__)


def simulate_online(scheduler: Any, workload: Any, cluster: Cluster, *, learn: bool = True,
                    report_noise: float = 0.0, reference: ThroughputCatalogue | None = None,
                    completion: str = "nearest", ema_alpha: float = 0.25, store: Any = None,
                    options: SimOptions | None = None, **kwargs: Any) -> SimulationResult:
    """Simulate ``workload`` with an :class:`OnlineScheduler` in the loop (see the module docstring).

    Parameters
    ----------
    scheduler, workload, cluster, options, **kwargs
        As for :func:`hetsched.simulate` (``mechanism`` must be "rounds"; ``learn_throughputs``,
        ``report_noise`` and ``throughput_reference`` there map to the keywords here).
    learn : bool, default True
        Hide the throughputs from the scheduler (learn them from reports); False: give each
        job its true throughputs at submit and do not learn (the oracle).
    report_noise : float, default 0
        Log-normal noise of the reported steps.
    reference : ThroughputCatalogue, optional
        Profiled job types the estimator completes against (see
        :class:`ThroughputEstimator`); the jobs are never matched to it by name.
    completion, ema_alpha
        Estimator options.
    store : path or None
        Where the scheduler keeps its state (default in memory).

    Returns
    -------
    SimulationResult
        As :func:`hetsched.simulate`; ``config`` also records ``learn_throughputs``,
        ``report_noise`` and ``throughput_reference``; ``extra["estimates"]`` holds the
        scheduler's last estimate for every job (rows: jobs in arrival order).
    """
    wall0 = time.perf_counter()
    opts = _options(options, kwargs)
    if not isinstance(cluster, Cluster):
        raise ValidationError(f"`cluster` must be a hetsched.Cluster; got {type(cluster).__name__}.")
    if opts.mechanism != "rounds":
        raise ValidationError("the online scheduler runs whole GPUs per round: `mechanism` must be 'rounds'.")
    if isinstance(report_noise, bool) or not isinstance(report_noise, (int, float, np.integer, np.floating)) \
            or not (math.isfinite(float(report_noise)) and report_noise >= 0):
        raise ValidationError(f"`report_noise` must be a finite number >= 0; got {report_noise!r}.")
    sched = as_scheduler(scheduler, opts)
    trace = _trace(workload, opts, sched)
    w = _Workload.build(trace, cluster, opts, sched)
    w.config.update({"learn_throughputs": bool(learn), "report_noise": float(report_noise),
                     "throughput_reference": None if reference is None else repr(reference), "driver": "online"})
    online = OnlineScheduler(sched, w.place_cluster if w.use_place else _no_topology(cluster),
                             store=store, round_seconds=opts.round_seconds, reference=reference,
                             ema_alpha=ema_alpha, completion=completion, learn=bool(learn), options=None,
                             synchronous="OFF")
    try:
        return _drive(online, w, opts, wall0, learn=bool(learn), noise=float(report_noise))
    finally:
        online.close()


def _no_topology(cluster: Cluster) -> Cluster:
    """``cluster`` without its topology (placement off)."""
    return cluster if cluster.topology is None else Cluster(cluster.as_dict())


def _drive(online: OnlineScheduler, w: _Workload, opts: SimOptions, wall0: float, *, learn: bool,
           noise: float) -> SimulationResult:
    n, L = w.n, opts.round_seconds
    rng = np.random.default_rng(opts.seed)
    # the run log holds each job's exact steps of the round (reported as they are, so the
    # scheduler's books add the same numbers as the ledger's); dropped at the end if not asked for
    ledger = Ledger(w.total, len(w.types), restart_seconds=opts.restart_seconds, record_runs=True)
    T, U = w.T, (w.U if w.U is not None else w.T)
    timing = {"policy_s": 0.0, "mechanism_s": 0.0, "placement_s": 0.0}
    c = RoundClock(w, opts, wall0)
    t_first = c.t
    hook, close = opts.progress_hook(n)
    try:
        while True:
            arrived = c.admit()
            if arrived is None:
                break
            for i in arrived.tolist():
                _submit(online, w, i, learn)
            if not arrived.size and not c.active.size:
                continue
            active, t, rnd = c.active, c.t, c.rnd
            if c.changed:
                ledger.iso_rate[active] = w.isolated_rates(active)   # the metric uses the true throughputs
            plan = online.next_round(t)
            rows = plan.rows
            solve_s = float(rows.info.get("solve_s", math.nan))
            timing["policy_s"] += solve_s if math.isfinite(solve_s) else 0.0
            timing["mechanism_s"] += plan.timings["plan_s"] - (solve_s if math.isfinite(solve_s) else 0.0)
            timing["placement_s"] += plan.timings["place_s"]
            whole = not rows.is_pair.any() and bool((rows.gpus == w.s[rows.job]).all())
            if learn and not whole:
                raise ValidationError("learned throughputs need rows of one job on its own gang (no space "
                                      "sharing, no elastic GPU counts); this scheduler returned others.")
            if whole and rows.n_rows:
                # progress at the true throughputs (consolidated, and spread over servers: the
                # scheduler is not told the unconsolidated table, the cluster still has it)
                rows = rows.take(np.arange(rows.n_rows), rate=T[rows.job, rows.gpu_type],
                                 spread_rate=U[rows.job, rows.gpu_type])
            logged = len(ledger.runs["job"])
            out = ledger.progress(rows, plan.spread, plan.migrated, active, t, L, rnd, fluid=False)
            if len(ledger.runs["job"]) > logged:
                j, k = ledger.runs["job"][-1], ledger.runs["gpu_type"][-1]
                steps, secs = ledger.runs["steps"][-1], out["row_seconds"][ledger.runs["unit"][-1]]
                if noise > 0:
                    steps = steps * np.exp(noise * rng.standard_normal(j.size))
                for jj, kk, st, sc in zip(j.tolist(), k.tolist(), steps.tolist(), secs.tolist()):
                    if sc > 0:
                        online.report(jj, w.types[kk], st, sc)
            fin = out["finished"]
            for jj in active[fin].tolist():
                online.complete(jj, now=float(ledger.finish[jj]))
            ledger.log_round(round=rnd, start=t, seconds=L, n_active=int(active.size), n_running=out["n_running"],
                             arrived=int(arrived.size), completed=int(fin.sum()), place_s=plan.timings["place_s"],
                             preempted=out["preempted"], migrated=out["migrated"], restarts=out["restarts"],
                             busy=out["busy"], **_solve_columns(rows.info))
            if not c.end_round(fin, out["n_running"], rows.info):
                break
            if hook is not None:
                hook(c.t, c.n_done)
    finally:
        close()
    ledger.record_runs = opts.record_runs
    res = _result(w, ledger, opts, c.status, c.rnd, c.t, t_first, wall0, timing)
    res.extra["estimates"] = online.estimates(all_jobs=True).to_numpy() if n else np.zeros((0, len(w.types)))
    return res


def _submit(online: OnlineScheduler, w: _Workload, i: int, learn: bool) -> None:
    """Submit job ``i`` (its number is its id, so the loop's job numbers agree)."""
    thr = None if learn else {t: float(v) for t, v in zip(w.types, w.T[i])}
    online.submit(i, scale_factor=int(w.s[i]), throughputs=thr, total_steps=float(w.total[i]),
                  weight=float(w.weights[i]), arrival=float(w.arrival[i]),
                  deadline=None if w.deadlines is None or not np.isfinite(w.deadlines[i]) else float(w.deadlines[i]),
                  entity=None if w.entities is None else str(w.entities[i]))
