"""simulate_online(): an :class:`~hetsched.online.OnlineScheduler` driven by a simulated clock.

The driver plays the cluster: it submits each job when it arrives, asks ``next_round(t)``
for the plan, runs the plan's rows on the simulator's :class:`~hetsched.rounds.ledger.Ledger`
at the jobs' *true* throughputs, reports what each job did (``report(job, type, steps,
seconds, partner=, spread=, gpus=)``), completes the jobs that finished and moves the clock
one round. The loop is :func:`hetsched.rounds.loop.run_rounds`, the one
:func:`hetsched.simulate` runs (arrivals, idle jumps, stalls, windows, the result tables);
only the per-round call differs. So with the true throughputs given at submit (pair rates
from the workload's catalogue by job type, spread rates at submit) and exact reports the two
give the same jobs table for every scheduler kind (``tests/test_online.py`` checks it), and
with ``learn=True`` the only difference is what the scheduler knows about throughputs:

* ``learn=True``: jobs are submitted without throughputs or job type; the scheduler starts
  from the estimator's prior and learns from the reports (spread rates from reports of
  spread gangs; Sia's rows through its scaling, ``OnlinePlan.scaling``); packed policies are
  refused (without a job type no pair has a prior);
* ``report_noise=s``: each reported step count is the true one times
  :math:`e^{s Z}`, :math:`Z \\sim N(0, 1)` (seeded by ``seed``), so both the measured
  throughput and the steps the scheduler believes done are noisy; completion is decided by
  the true progress.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..inputs.cluster import Cluster
from ..inputs.throughputs import ThroughputCatalogue
from ..online.scheduler import OnlineScheduler
from ..rounds.ledger import Ledger
from ..rounds.loop import RoundWorkload, add_plan_time, prepare, run_rounds
from ..rounds.placing import true_rates
from ..rounds.protocol import RoundRows, SchedulerLike, WorkloadLike
from ..validation import check_bool, check_nonneg
from .options import SimOptions, call_options
from .result import SimulationResult, assemble_result

__all__ = ["simulate_online"]

log = logging.getLogger(__name__)


def simulate_online(scheduler: SchedulerLike, workload: WorkloadLike, cluster: Cluster, *, learn: bool = True,
                    report_noise: float = 0.0, reference: ThroughputCatalogue | None = None,
                    completion: str = "nearest", ema_alpha: float = 0.25, store: Any = None,
                    options: SimOptions | None = None, preset: str | None = None,
                    **kwargs: Any) -> SimulationResult:
    """Simulate ``workload`` with an :class:`OnlineScheduler` in the loop (see the module docstring).

    Parameters
    ----------
    scheduler, workload, cluster, options, preset, **kwargs
        As for :func:`hetsched.simulate` (``mechanism`` must be "rounds"; ``learn_throughputs``,
        ``report_noise`` and ``throughput_reference`` there map to the keywords here; option
        keywords are deprecated there and here alike).
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
    opts = call_options("simulate_online", options, preset, kwargs)
    if opts.network is not None:
        raise ValidationError("`network` (the interconnect model) runs in hetsched.simulate only; the online "
                              "scheduler does not apply it yet.")
    if opts.mechanism != "rounds":
        raise ValidationError("the online scheduler runs whole GPUs per round: `mechanism` must be 'rounds'.")
    check_nonneg(report_noise, "report_noise")
    check_bool(learn, "learn")
    sched, w = prepare(scheduler, workload, cluster, opts)
    w.config.update({"learn_throughputs": bool(learn), "report_noise": float(report_noise),
                     "throughput_reference": None if reference is None else repr(reference), "driver": "online"})
    pol = getattr(sched, "policy", None)
    tables = () if pol is None else pol.bound_tables()
    packed = "packing" in tables
    if learn and packed:
        raise ValidationError(
            "`learn_throughputs=True` with a packed policy: simulated jobs are submitted without their job type "
            "(it would reveal their throughputs), so their pair rates have no prior and no pair would ever be tried. "
            "Simulate packed policies with learn_throughputs=False, or drive an OnlineScheduler with pair rates "
            "given at submit (`pair_throughputs=`) and learned from reports (`report(..., partner=)`).")
    # pairs of a catalogue workload come from its catalogue, looked up by each job's type
    typed = not learn and pol is not None and "packing" in pol.workload_tables() and w.context.get("catalogue") is not None
    if typed and reference is None:
        reference = w.context["catalogue"]
    sensitive = "placement_sensitivity" in tables and w.U is not None
    online = OnlineScheduler(sched, w.place_cluster if w.use_place else _no_topology(cluster),
                             store=store, round_seconds=opts.round_seconds, reference=reference,
                             ema_alpha=ema_alpha, completion=completion, learn=bool(learn), options=None,
                             synchronous="OFF",
                             profiles=None if w.adaptive is None else w.adaptive.workload.profiles)
    try:
        return _drive(online, w, opts, wall0, learn=bool(learn), noise=float(report_noise),
                      submit=_Submitter(w, learn=bool(learn), typed=typed, spread=sensitive and not learn))
    finally:
        online.close()


def _no_topology(cluster: Cluster) -> Cluster:
    """``cluster`` without its topology (placement off)."""
    return cluster if cluster.topology is None else Cluster(cluster.as_dict())


def _drive(online: OnlineScheduler, w: RoundWorkload, opts: SimOptions, wall0: float, *, learn: bool,
           noise: float, submit: _Submitter) -> SimulationResult:
    # the run log holds each job's exact steps of the round (reported as they are, so the
    # scheduler's books add the same numbers as the ledger's); dropped at the end if not asked for
    ledger = Ledger(w.total, len(w.types), restart_seconds=w.restart_seconds, record_runs=True)
    step = _OnlineStep(online, w, submit, learn=learn, noise=noise, seed=opts.seed)
    c, t_first = run_rounds(w, opts, ledger, step, wall0)
    ledger.record_runs = opts.record_runs
    res = assemble_result(w, ledger, c, t_first, wall0, step.timing)
    res.extra["estimates"] = online.estimates(all_jobs=True).to_numpy() if w.n else np.zeros((0, len(w.types)))
    return res


class _OnlineStep:
    """simulate_online's per-round call (see :func:`hetsched.rounds.loop.run_rounds`): submit
    arrivals, ``next_round``, run the rows at the true rates, report what each job did and
    complete the jobs that finished."""

    def __init__(self, online: OnlineScheduler, w: RoundWorkload, submit: _Submitter, *, learn: bool, noise: float,
                 seed: int) -> None:
        self.online, self.w, self.key, self.learn, self.noise = online, w, submit, learn, noise
        self.rng = np.random.default_rng(seed)
        self.T, self.U = w.T, (w.U if w.U is not None else w.T)
        self.timing = {"policy_s": 0.0, "mechanism_s": 0.0, "placement_s": 0.0}
        self.last: Any = None    # the last OnlinePlan
        self.logged = 0
        self.truth = w.adaptive            # adaptive jobs: the simulated truth the workers measure
        self.progress = np.zeros(0)        # adaptive jobs: progress of every job when the round was planned
        self.metrics_sent: dict[int, int] = {}   # adaptive jobs: validation points reported so far

    def start(self, t: float) -> None:
        """The scheduler starts empty."""

    def submit(self, arrived: np.ndarray) -> None:
        for i in arrived.tolist():
            self.key(self.online, i)

    def plan(self, ledger: Ledger, active: np.ndarray, t: float, rnd: int, changed: bool
             ) -> tuple[RoundRows, np.ndarray, np.ndarray, float]:
        plan = self.last = self.online.next_round(t)
        self.logged = len(ledger.runs["job"])
        add_plan_time(self.timing, plan.rows.info, plan.timings["plan_s"])
        self.timing["placement_s"] += plan.timings["place_s"]
        rows = plan.rows
        if self.truth is not None:
            self.progress = ledger.done.copy()
            if rows.n_rows:
                rows = true_rates(self.truth, rows, plan.spread, plan.migrated, ledger, t,
                                  float(self.w.config["round_seconds"]))
        elif rows.n_rows:
            rows = _true_rates(rows, rows.is_pair, plan.scaling, self.T, self.U, self.w.s,
                               elastic=self.online.elastic, learn=self.learn)
        return rows, plan.spread, plan.migrated, plan.timings["place_s"]

    def ran(self, ledger: Ledger, rows: RoundRows, out: dict[str, Any], active: np.ndarray) -> None:
        online, key, plan = self.online, self.key.key, self.last
        if len(ledger.runs["job"]) > self.logged:      # the rows of this round that ran
            j, k = ledger.runs["job"][-1], ledger.runs["gpu_type"][-1]
            u = ledger.runs["unit"][-1]
            steps, secs = ledger.runs["steps"][-1], out["row_seconds"][u]
            if self.noise > 0:
                steps = steps * np.exp(self.noise * self.rng.standard_normal(j.size))
            mate = np.where(rows.job[u] == j, rows.partner[u], rows.job[u])
            spread = plan.spread[u] if plan.spread.size else np.zeros(u.size, bool)
            types = self.w.types
            for jj, kk, st, sc, p, sp, g, b in zip(j.tolist(), k.tolist(), steps.tolist(), secs.tolist(),
                                                   mate.tolist(), spread.tolist(), rows.gpus[u].tolist(),
                                                   rows.batch_size[u].tolist()):
                if sc > 0:
                    online.report(key(jj), types[kk], st, sc, partner=None if p < 0 else key(p),
                                  spread=sp and p < 0, gpus=g,
                                  measured=None if self.truth is None else self._measured(ledger, jj, kk, g, b))
        for jj in active[out["finished"]].tolist():
            online.complete(key(jj), now=float(ledger.finish[jj]))


    def _measured(self, ledger: Ledger, j: int, k: int, gpus: int, batch: int) -> dict[str, Any]:
        """What an adaptive job's worker measured in the round (the truth's report at the
        job's progress when the round was planned, as :func:`hetsched.simulate`'s scheduler
        reads it) and the validation points of the epochs it completed since its last report."""
        rep = dict(self.truth.report(j, k, gpus, batch, float(self.progress[j])))
        x, y = self.truth.observed_metrics(j, float(ledger.done[j]))
        sent = self.metrics_sent.get(j, 0)
        if x.size > sent:
            rep["metrics"] = list(zip(x[sent:].tolist(), y[sent:].tolist()))
            self.metrics_sent[j] = int(x.size)
        return rep


def _true_rates(rows: RoundRows, pair: np.ndarray, scaling: np.ndarray, T: np.ndarray, U: np.ndarray,
                s: np.ndarray, *, elastic: bool, learn: bool) -> RoundRows:
    """The plan's rows at the cluster's true rates: a job alone on its gang at its true
    throughput (consolidated, and spread over servers: the scheduler need not know the
    unconsolidated table, the cluster still has it); with learned estimates, an elastic row at
    the job's true throughput scaled as the plan scaled its estimate. Pair rows (and elastic
    rows when the scheduler knows the truth) run at the plan's rates, which are then true."""
    j, k = rows.job, rows.gpu_type
    if elastic:
        if not learn:
            return rows
        rate = T[j, k] * scaling
        return rows.take(np.arange(rows.n_rows), rate=rate, spread_rate=rate)
    own = ~pair & (rows.gpus == s[j])
    if not own.any():
        return rows
    return rows.take(np.arange(rows.n_rows), rate=np.where(own, T[j, k], rows.rate),
                     spread_rate=np.where(own, U[j, k], rows.spread_rate))


class _Submitter:
    """Submits the trace's jobs in arrival order, under their trace ids when those are str or
    int (so tables keyed by job id bind as in :func:`hetsched.simulate`), else under their
    numbers; either way the scheduler's job numbers are the loop's."""

    def __init__(self, w: RoundWorkload, *, learn: bool, typed: bool, spread: bool) -> None:
        self.w, self.learn, self.typed, self.spread = w, learn, typed, spread
        ids = w.ids.tolist()
        ok = all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in ids) and len(set(ids)) == len(ids)
        self.ids = [str(v) if isinstance(v, str) else int(v) for v in ids] if ok else list(range(w.n))
        cat = w.context.get("catalogue")
        self.types = None if not typed else [str(cat.job_types[r]) for r in w.context["catalogue_rows"]]

    def key(self, i: int) -> str | int:
        """The id job ``i`` was submitted under."""
        return self.ids[i]

    def __call__(self, online: OnlineScheduler, i: int) -> None:
        w = self.w
        if w.adaptive is not None:    # its model, submitted GPUs and batch; its throughputs from the profile
            a = w.adaptive
            online.submit(self.ids[i], model=a.models[i].model, scale_factor=int(a.submitted_replicas[i]),
                          batch_size=int(a.submitted_batch[i]), total_steps=float(w.total[i]),
                          weight=float(w.weights[i]), arrival=float(w.arrival[i]))
            return
        thr = None if self.learn else {t: float(v) for t, v in zip(w.types, w.T[i])}
        online.submit(self.ids[i], scale_factor=int(w.s[i]), throughputs=thr, total_steps=float(w.total[i]),
                      weight=float(w.weights[i]), arrival=float(w.arrival[i]),
                      deadline=None if w.deadlines is None or not np.isfinite(w.deadlines[i]) else float(w.deadlines[i]),
                      entity=None if w.entities is None else str(w.entities[i]),
                      job_type=None if self.types is None else self.types[i],
                      spread_throughputs=None if not self.spread else {t: float(v) for t, v in zip(w.types, w.U[i])})
