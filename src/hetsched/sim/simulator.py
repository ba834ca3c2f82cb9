"""simulate(): drive one round loop over a workload with a simulated clock.

The loop (one iteration per round of ``round_seconds``)::

    admit jobs that have arrived by now                          (arrivals)
    rows  = scheduler.plan_round(view, state)                    (the scheduler's step)
    check the rows (capacity, one row per job, pairs)            (a broken rule raises)
    place = RoundPlacer.place(rows)                               (servers and GPU ids; optional)
    progress every row's members at the row's throughput          (Ledger.progress)
    state = scheduler.record_round(state, rows that ran, seconds)
    jobs whose remaining steps fit in the round finish inside it, at the exact time
    t += round_seconds

The scheduler is any :class:`~hetsched.sim.RoundScheduler`: a policy (name or object)
runs through :class:`~hetsched.sim.PolicyScheduler` (solve -> round mechanism); Tiresias
implements the interface itself. The loop itself (:func:`~hetsched.rounds.loop.run_rounds`,
in the round engine) is shared with :func:`hetsched.sim.replay.simulate_online`, which
drives an :class:`~hetsched.OnlineScheduler` instead; the two differ only in the per-round
call (``_PlanStep`` here). The engine leaves its ledger and clock; the result is assembled
here (:func:`~hetsched.sim.result.assemble_result`).

When no job is active the clock jumps to the next arrival, and the next round starts
there (so a job that arrives at an idle cluster starts at once); a job that arrives while
a round runs waits for the next round boundary, as in Gavel. GPUs a job frees when it
finishes mid-round stay idle until the round ends.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..inputs.cluster import Cluster
from ..placement.network_aware import BoundNetwork
from ..rounds.ledger import Ledger
from ..rounds.loop import (
    RoundWorkload,
    add_plan_time,
    as_scheduler,
    prepare,
    run_rounds,
)
from ..rounds.placing import RoundPlacer, place_round, true_rates
from ..rounds.protocol import (
    RoundRows,
    RoundScheduler,
    SchedulerLike,
    WorkloadLike,
    check_rows,
)
from ..schedulers.names import ROUND_SCHEDULERS, make_scheduler
from .options import SimOptions, call_options
from .result import SimulationResult, assemble_result

__all__ = ["SimulationResult", "as_scheduler", "simulate"]

log = logging.getLogger(__name__)


def simulate(scheduler: SchedulerLike, workload: WorkloadLike, cluster: Cluster, *, options: SimOptions | None = None,
             preset: str | None = None, **kwargs: Any) -> SimulationResult:
    """Replay ``workload`` through ``scheduler`` on ``cluster``, round by round.

    Every option is a field of ``options`` (:class:`~hetsched.sim.SimOptions`), listed under
    Other Parameters; ``simulate(..., options=SimOptions(round_seconds=60.0))``.

    Parameters
    ----------
    scheduler : str, Policy or RoundScheduler
        A registered policy or round-scheduler name
        (:func:`hetsched.schedulers.names.list_schedulers`), a policy object, e.g.
        ``hetsched.policies.MaxMinFairness(heterogeneity_aware=False)`` (both run through
        :class:`~hetsched.sim.PolicyScheduler`), or any round scheduler
        (:class:`~hetsched.sim.RoundScheduler`), e.g. :class:`hetsched.Tiresias`.
    workload : Trace, JobSet, Workload, AdaptiveWorkload or Mapping
        The jobs (see :class:`~hetsched.sim.Trace`); a JobSet needs ``steps_remaining``
        (total steps). Adaptive jobs (:class:`~hetsched.inputs.adaptive.AdaptiveWorkload`)
        progress at their true goodput on whatever the scheduler gives them, and each start on
        new GPUs costs the model's restart time (``docs/adaptive.md``). A mapping is a generator spec passed to
        :func:`~hetsched.sim.generate_workload` with ``seed``, e.g.
        ``{"n_jobs": 200, "rate_per_hour": 2.0}``; it gets entities when the policy needs
        them and a pair table when it packs ``"workload"`` pairs.
    cluster : Cluster
        GPU counts per type (its GPU types are the simulation's columns); with a topology
        (:meth:`Cluster.from_servers`) placement uses it.
    options : SimOptions, optional
        The options below as one record (default: the defaults).
    preset : {"gavel", "hetsched"}, optional
        Named settings instead of ``options`` (:meth:`SimOptions.preset`; for a preset with
        changes pass ``options=SimOptions.preset(name, ...)``). ``preset="gavel"`` is Gavel's
        simulator: 360 s rounds, re-solve on change at most once per 1,920 s, arrivals wait
        for the next re-solve, shares reset at each re-solve, Gavel's rule.
    **kwargs
        Deprecated: fields of :class:`SimOptions` as keywords (they override ``options`` or
        the preset). They still work for this release and raise one DeprecationWarning.

    Other Parameters
    ----------------
    round_seconds : float, default 360
        Round length (Gavel: 360 s).
    mechanism : {"rounds", "ideal"}, default "rounds"
        "rounds": whole gangs on one type per round (Gavel's mechanism). "ideal": every job
        receives exactly its X each round (fluid; no placement).
    placement : bool, optional
        Map each round onto servers and GPU ids by min-cost flow and progress spread gangs
        at their unconsolidated throughput. Default: on when the cluster has a topology.
        True for a cluster without one cuts it into servers of ``gpus_per_server``.
    reallocate : "on_change" or float, default "on_change"
        Re-solve when the set of active jobs changed (arrival or completion; Gavel also
        waits at least 1,920 s between re-solves, see ``preset="gavel"``), or every that many
        seconds (jobs arriving in between get a share carved
        from the current X, :func:`hetsched.mechanism.carve_shares`).
    window : (start, end), optional
        Measured jobs (Gavel's ``-s/-e``): positions in arrival order (``window_unit="jobs"``)
        or arrival times (``"seconds"``). Every job is simulated; the summary covers the
        window.
    window_unit : {"jobs", "seconds"}
    stop_after_window : bool, default True
        With a window, stop once every measured job has finished.
    seed : int, default 0
        Seed of a generated workload; recorded in the result (the loop itself is
        deterministic).
    progress : None, True, "auto" or callable
        Progress bar (tqdm; "auto": only when stderr is a terminal) or a callable
        ``f(sim_time, n_completed, n_total)`` called every round.
    max_time : float, optional
        Stop at this simulated time (workloads that never drain); unfinished jobs have
        ``completed=False``.
    wall_time_limit : float, optional
        Stop after this many wall-clock seconds (status ``"wall_time_limit"``; the result
        then depends on machine speed).
    solver, solve_time_limit, solver_options
        Passed to :func:`hetsched.solve` as ``solver``, ``time_limit`` and ``options``.
    rule, work_conserving, stickiness
        Mechanism options (:func:`hetsched.mechanism.plan_round_arrays`).
    reset_shares : bool, default True
        Forget received shares whenever a new allocation is computed (Gavel).
    gpus_per_server : int, default 8
        Server size used when ``placement=True`` and the cluster has no topology.
    record_runs : bool, default True
        Keep the run log (``result.runs``).

    restart_seconds : float, default 0
        Seconds without progress after a job starts on GPUs it did not hold the round
        before: first start, resume after preemption, migration, change of type or GPU
        count (Sia). 0 keeps Gavel's accounting (see ``docs/simulator.md``).
    learn_throughputs, report_noise, throughput_reference
        Hide the throughputs from the scheduler and reveal them through (noisy) per-round
        reports: the loop then runs an :class:`~hetsched.OnlineScheduler` with a simulated
        clock (:func:`hetsched.sim.replay.simulate_online`, ``docs/online.md``). Default off.
    min_solve_interval, arrivals, backfill
        Re-solve timing, what arrivals between solves get, and whether smaller jobs may run
        past one that does not fit (see :class:`~hetsched.rounds.MechanismOptions`); defaults
        0, "carve" and True.

    Returns
    -------
    SimulationResult

    Raises
    ------
    SchedulerError
        The scheduler returned rows that over-use a type, run a job twice, split a pair or
        name an inactive job (a bug in the scheduler; the message names round, job and rule).
    ValidationError
        Bad options; arrivals negative or out of order; a job no GPU type of the cluster
        can run (zero throughput, or a gang larger than every usable type); a window that
        selects no jobs; a policy that needs a job field the trace lacks.

    Examples
    --------
    >>> import hetsched as hs
    >>> from hetsched.sim import simulate
    >>> jobs = hs.JobSet([[2.0, 1.0]], gpu_types=["v100", "k80"], steps_remaining=[7200.0])
    >>> res = simulate("max_min_fairness", jobs, hs.Cluster({"v100": 1, "k80": 1}))
    >>> res.summary["avg_jct_s"]        # 7200 steps at 2 steps/s on the V100
    3600.0
    >>> simulate("max_min_fairness", jobs, hs.Cluster({"v100": 1, "k80": 1}),
    ...          options=hs.SimOptions(round_seconds=60.0)).summary["n_rounds"]
    60
    """
    wall0 = time.perf_counter()
    opts = call_options("simulate", options, preset, kwargs)
    if opts.learn_throughputs:   # the same loop with an OnlineScheduler learning throughputs in it
        from .replay import simulate_online

        return simulate_online(scheduler, workload, cluster, learn=True, report_noise=opts.report_noise,
                               reference=opts.throughput_reference, options=opts)
    if isinstance(scheduler, str) and scheduler in ROUND_SCHEDULERS:   # one name space: policies and schedulers
        scheduler = make_scheduler(scheduler)
    sched, w = prepare(scheduler, workload, cluster, opts)
    ledger = Ledger(w.total, len(w.types), restart_seconds=w.restart_seconds, record_runs=opts.record_runs)
    network = _network(opts, w)
    step = _PlanStep(sched, RoundPlacer(w.place_cluster, w.types, network=network) if w.use_place else None, w)
    c, t_first = run_rounds(w, opts, ledger, step, wall0)
    res = assemble_result(w, ledger, c, t_first, wall0, step.timing)
    res.extra["scheduler_state"] = step.state   # the round scheduler's last state (e.g. HiveD's fragmentation log)
    metrics = getattr(scheduler, "result_metrics", None)
    if callable(metrics):   # what the scheduler measures on a finished run (HiveD: tenants' anomaly, fragmentation)
        res.extra.update(metrics(res, w.trace, cluster))
    return res


def _network(opts: SimOptions, w: RoundWorkload) -> BoundNetwork | None:
    """``opts.network`` bound to the workload (None without one)."""
    if opts.network is None:
        return None
    if not w.use_place:
        raise ValidationError("`network` needs placement: give the cluster servers (Cluster.from_servers, or "
                              "--gpus-per-server on the command line) or set placement=True.")
    return opts.network.bind(w.place_cluster.topology, w.ids, w.s, w.T, w.U)


class _PlanStep:
    """simulate's per-round call: the round scheduler's ``plan_round`` on a view of the
    ledger, the row checks and placement; after the round, its ``record_round``."""

    def __init__(self, sched: RoundScheduler, placer: RoundPlacer | None, w: RoundWorkload) -> None:
        self.sched, self.placer, self.w = sched, placer, w
        self.checked = getattr(sched, "rows_checked", False) is True   # rows built under the loop's rules already
        self.timing = {"policy_s": 0.0, "mechanism_s": 0.0, "placement_s": 0.0}
        self.state: Any = None

    def start(self, t: float) -> None:
        self.state = self.sched.initial_state(t)

    def submit(self, arrived: np.ndarray) -> None:
        """Nothing to tell: the view is built from the ledger each round."""

    def plan(self, ledger: Ledger, active: np.ndarray, t: float, rnd: int, changed: bool
             ) -> tuple[RoundRows, np.ndarray, np.ndarray, float]:
        view = self.w.view(ledger, active, t, rnd, changed)
        t0 = time.perf_counter()
        rows = self.sched.plan_round(view, self.state)
        if not (self.checked and isinstance(rows, RoundRows)):
            check_rows(rows, view)
        add_plan_time(self.timing, rows.info, time.perf_counter() - t0)
        spread = moved = np.zeros(rows.n_rows, bool)
        place_s = 0.0
        if self.placer is not None and rows.n_rows:
            pl = place_round(self.placer, self.sched, rows)
            place_s = pl.seconds
            self.timing["placement_s"] += place_s
            rows, spread, moved = rows.take(pl.placed), pl.spread[pl.placed], pl.migrated[pl.placed]
            if pl.rate_factor is not None:   # bandwidth of the GPUs and links placement gave (network model)
                f = pl.rate_factor[pl.placed]
                rows = rows.take(np.arange(rows.n_rows), rate=rows.rate * f, spread_rate=rows.spread_rate * f,
                                 partner_rate=rows.partner_rate * f, partner_spread_rate=rows.partner_spread_rate * f)
        if self.w.adaptive is not None and rows.n_rows:
            rows = true_rates(self.w.adaptive, rows, spread, moved, ledger, t, float(self.w.config["round_seconds"]))
        return rows, spread, moved, place_s

    def ran(self, ledger: Ledger, rows: RoundRows, out: dict[str, Any], active: np.ndarray) -> None:
        t0 = time.perf_counter()
        self.state = self.sched.record_round(self.state, rows, out["row_seconds"])
        self.timing["mechanism_s"] += time.perf_counter() - t0
