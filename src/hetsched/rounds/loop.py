"""The round loop shared by the simulated-clock drivers: the workload as arrays
(:class:`RoundWorkload`), the clock (:class:`RoundClock`: arrivals, stop conditions, stall
detection), :func:`run_rounds` (one iteration per round around a driver's per-round call)
and turning a policy or name into a round scheduler (:func:`as_scheduler`).

The loop knows nothing of its drivers: it runs on :class:`~hetsched.rounds.RoundOptions`
and leaves its accounting in the :class:`~hetsched.rounds.Ledger` and its clock (status,
rounds, time); :func:`hetsched.simulate` and :func:`hetsched.sim.replay.simulate_online`
(the two drivers, which differ only in the per-round call) assemble the result from them.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..api import validate_problem
from ..errors import ValidationError, show
from ..formulations.base import Policy
from ..formulations.common import isolated_allocation_arrays
from ..inputs.adaptive import AdaptiveProgress, AdaptiveWorkload
from ..inputs.cluster import Cluster, check_gpu_type_names
from ..inputs.jobs import JobSet, usable_mask
from ..inputs.trace import Trace, as_trace, generate_workload
from .ledger import Ledger
from .options import MechanismOptions, RoundOptions, window_mask
from .policy_scheduler import PolicyScheduler, bind_workload
from .protocol import NO_SLO, RoundScheduler, RoundView, SchedulerLike, WorkloadLike

__all__ = ["RoundClock", "RoundWorkload", "add_plan_time", "as_scheduler", "prepare", "run_rounds", "scheduler_label"]

log = logging.getLogger(__name__)


def add_plan_time(timing: dict[str, float], info: Mapping[str, Any], plan_wall: float) -> None:
    """Split a plan's wall time into the solve (policy) and the rest (mechanism)."""
    solve_s = float(info.get("solve_s", math.nan))
    solve_s = solve_s if math.isfinite(solve_s) else 0.0
    timing["policy_s"] += solve_s
    timing["mechanism_s"] += plan_wall - solve_s


def run_rounds(w: RoundWorkload, opts: RoundOptions, ledger: Ledger, step: Any, wall0: float
               ) -> tuple[RoundClock, float]:
    """The round loop of every driver with a simulated clock (see the module docstring).

    ``step`` is the driver's per-round call, the only part that differs between
    :func:`hetsched.simulate` (the round scheduler called directly) and
    :func:`hetsched.sim.replay.simulate_online` (an :class:`~hetsched.OnlineScheduler` told what
    arrived, asked for the plan, told what ran): ``start(t)``, ``submit(arrived)``,
    ``plan(ledger, active, t, round, changed) -> (rows, spread, migrated, place_s)`` (the
    rows at the rates they progress at) and ``ran(ledger, rows, progress, active)``.
    Arrivals, the clock, progress at the rows' rates, the round log and when to stop are
    this function's. Returns the clock (status, rounds, time) and the first round's time.
    """
    n, L = w.n, opts.round_seconds
    fluid = opts.mechanism == "ideal"
    c = RoundClock(w, opts, wall0)
    t_first = c.t
    step.start(c.t)
    hook, close = opts.progress_hook(n)
    try:
        while True:
            arrived = c.admit()
            if arrived is None:
                break
            if arrived.size:
                step.submit(arrived)
            if not arrived.size and not c.active.size:
                continue
            active, t, rnd, changed = c.active, c.t, c.rnd, c.changed
            if changed:
                ledger.iso_rate[active] = w.isolated_rates(active)
            rows, spread, moved, place_s = step.plan(ledger, active, t, rnd, changed)
            out = ledger.progress(rows, spread, moved, active, t, L, rnd, fluid=fluid)
            step.ran(ledger, rows, out, active)
            fin = out["finished"]
            ledger.log_round(round=rnd, start_s=t, seconds=L, n_active=int(active.size), n_running=out["n_running"],
                             arrived=int(arrived.size), completed=int(fin.sum()), place_s=place_s,
                             preempted=out["preempted"], migrated=out["migrated"], restarts=out["restarts"],
                             busy=out["busy"], **_solve_columns(rows.info))
            if not c.end_round(fin, out["n_running"], rows.info):
                break
            if hook is not None:
                hook(c.t, c.n_done)
    finally:
        close()
    return c, t_first


# --------------------------------------------------------------------------- pieces
def as_scheduler(scheduler: SchedulerLike, options: MechanismOptions | None = None) -> RoundScheduler:
    """The round scheduler for ``scheduler``: a policy (name or object) becomes a
    :class:`PolicyScheduler` with the mechanism options of ``options`` (any
    :class:`MechanismOptions`, e.g. the simulator's options); a round scheduler is returned
    as it is.

    Raises
    ------
    ValidationError
        Neither a policy nor an object with ``initial_state``, ``plan_round`` and
        ``record_round``; ``options`` not a MechanismOptions; a PolicyScheduler whose mode
        differs from ``options.mechanism``; mechanism options other than the defaults beside
        a round scheduler (they configure only the PolicyScheduler built here).
    """
    if options is None:
        options = MechanismOptions()
    elif not isinstance(options, MechanismOptions):
        raise ValidationError(f"`options` must be a hetsched.MechanismOptions or None; got {type(options).__name__}.")
    opts = options.mechanism_options
    if isinstance(scheduler, (str, Policy)):
        return PolicyScheduler(scheduler, opts)
    if isinstance(scheduler, PolicyScheduler) and scheduler.mode != opts.mechanism:
        raise ValidationError(f"the PolicyScheduler's mode {scheduler.mode!r} differs from `mechanism` "
                              f"{opts.mechanism!r}; pass the same to both.")
    if isinstance(scheduler, RoundScheduler):
        defaults = MechanismOptions()
        ignored = [f.name for f in dataclasses.fields(opts)
                   if f.name != "mechanism" and getattr(opts, f.name) != getattr(defaults, f.name)]
        if ignored:
            raise ValidationError(
                f"{sorted(ignored)} configure the PolicyScheduler that simulate builds from a policy name or object; "
                f"they do not apply to {type(scheduler).__name__} (pass them to the scheduler itself).")
        if opts.mechanism != "rounds" and not isinstance(scheduler, PolicyScheduler):
            raise ValidationError(f"`mechanism={opts.mechanism!r}` applies to policies; a round scheduler "
                                  f"({type(scheduler).__name__}) decides its own rows.")
        return scheduler
    raise ValidationError(
        "`scheduler` must be a policy name, a hetsched.policies object or a round scheduler (an object with "
        f"initial_state, plan_round and record_round, e.g. hetsched.Tiresias()); got {type(scheduler).__name__}.")


def _policy_of(sched: Any) -> Policy | None:
    return sched.policy if isinstance(sched, PolicyScheduler) else None


def _trace(workload: Any, opts: RoundOptions, sched: Any, cluster: Cluster) -> Trace:
    if not isinstance(workload, Mapping):
        return as_trace(workload)
    spec = dict(workload)
    if "n_jobs" not in spec or "rate_per_hour" not in spec:
        raise ValidationError(
            f"`workload` as a mapping is a generator spec and needs 'n_jobs' and 'rate_per_hour'; got {sorted(spec)}.")
    pol = _policy_of(sched)
    if pol is not None and "entities" in pol.requires:
        spec.setdefault("n_entities", 4)
    if pol is not None and "packing" in pol.workload_tables():
        spec.setdefault("pairs", True)
    spec.setdefault("cluster", cluster)  # gangs no larger than the cluster can run
    return generate_workload(seed=opts.seed, **spec)


def prepare(scheduler: SchedulerLike, workload: WorkloadLike, cluster: Cluster, opts: RoundOptions
            ) -> tuple[RoundScheduler, RoundWorkload]:
    """What every driver does before its first round: check ``cluster``, turn ``scheduler``
    into a round scheduler, ``workload`` into a trace, and the trace into arrays.

    Raises
    ------
    ValidationError
        ``cluster`` is not a :class:`~hetsched.Cluster`, or any check of :func:`as_scheduler`,
        the trace or the workload fails.
    """
    if not isinstance(cluster, Cluster):
        raise ValidationError(f"`cluster` must be a hetsched.Cluster; got {type(cluster).__name__}.")
    sched = as_scheduler(scheduler, opts)
    if isinstance(workload, AdaptiveWorkload):
        # adaptive jobs: the trace is what a non-adaptive scheduler sees; the loop progresses
        # every row at the job's true goodput (context "adaptive") and restarts cost each model's time
        if opts.restart_seconds:
            raise ValidationError(f"`restart_seconds` ({opts.restart_seconds!r}) must be 0 with adaptive jobs: each "
                                  "model's checkpoint-restore time from its profile applies.")
        progress = AdaptiveProgress(workload, cluster)
        return sched, RoundWorkload.build(workload.trace(cluster, progress), cluster, opts, sched,
                                          {"adaptive": progress})
    trace = _trace(workload, opts, sched, cluster)
    return sched, RoundWorkload.build(trace, cluster, opts, sched)


def _rename_jobs(message: str, ids: np.ndarray) -> str:
    """Replace "job 12" (a position) in a validation message by the trace's job id."""

    def sub(mt: re.Match) -> str:
        j = int(mt.group(1))
        return f"job {show(ids[j])}" if 0 <= j < ids.shape[0] else mt.group(0)

    return re.sub(r"job (\d+)\b", sub, message)


def _params(obj: Any) -> dict[str, Any]:
    if callable(getattr(obj, "params", None)):
        return obj.params()
    if dataclasses.is_dataclass(obj):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    return {}


def _label(obj: Any, name: str) -> str:
    """``name(param=value, ...)`` with the parameters that differ from the defaults."""
    params = _params(obj)
    defaults = {}
    try:
        defaults = _params(type(obj)())
    except Exception:
        pass
    changed = {k: v for k, v in params.items() if defaults.get(k, object()) != v}
    if not changed:
        return name
    return name + "(" + ", ".join(f"{k}={v!r}" for k, v in changed.items()) + ")"


def _scheduler_label(sched: Any) -> tuple[str, str, dict[str, Any]]:
    obj = _policy_of(sched) or sched
    name = str(getattr(obj, "name", type(obj).__name__.lower()))
    return _label(obj, name), name, _params(obj)


def scheduler_label(scheduler: Any) -> str:
    """A short label for a policy or round scheduler: its name and the parameters that differ
    from their defaults, e.g. ``"max_min_fairness(heterogeneity_aware=False)"``."""
    return _scheduler_label(scheduler)[0]


class RoundClock:
    """The loop's clock and active set, shared by every driver with a simulated clock
    (:func:`hetsched.simulate`, :func:`hetsched.sim.replay.simulate_online`).

    Each round: :meth:`admit` moves arrivals up to ``t`` into ``active`` and decides whether
    the run ends before the round; the driver plans and runs the round; :meth:`end_round`
    removes finished jobs and advances ``t`` by one round. ``status`` says why the run
    ended ("drained", "window_done", "max_time", "wall_time_limit", "stalled").
    """

    def __init__(self, w: RoundWorkload, opts: RoundOptions, wall0: float) -> None:
        self.w, self.opts, self.wall0 = w, opts, wall0
        self.active = np.zeros(0, np.int64)
        self.ptr = self.rnd = self.n_done = 0
        self.t = float(w.arrival[0]) if w.n else 0.0
        self.changed = False
        self.status = "drained"
        self.remaining_measured = int(w.measured.sum())

    def admit(self) -> np.ndarray | None:
        """Jobs arrived by ``t`` join ``active``; returns them (positions), or None when the
        run ends here (``status`` set). With nothing active and arrivals still to come,
        ``t`` jumps to the next arrival and an empty array is returned with ``active`` empty:
        call again."""
        w, opts = self.w, self.opts
        k_new = int(np.searchsorted(w.arrival, self.t, side="right"))
        arrived = np.arange(self.ptr, k_new, dtype=np.int64)
        if arrived.size:
            self.active = np.concatenate([self.active, arrived])
            self.ptr, self.changed = k_new, True
        if opts.window is not None and opts.stop_after_window and self.remaining_measured == 0:
            self.status = "window_done"
            return None
        if self.active.size == 0:
            if self.ptr >= w.n:
                return None
            self.t = max(self.t, float(w.arrival[self.ptr]))
            return arrived
        if opts.max_time is not None and self.t >= opts.max_time:
            self.status = "max_time"
            return None
        if opts.wall_time_limit is not None and time.perf_counter() - self.wall0 > opts.wall_time_limit:
            self.status = "wall_time_limit"
            return None
        return arrived

    def end_round(self, finished: np.ndarray, n_running: int, info: Mapping[str, Any]) -> bool:
        """After a round: drop the ``finished`` active jobs and advance one round. Returns
        False when the run stalls (nothing ran, nothing will arrive, no solve pending)."""
        self.changed = False
        if n_running == 0 and self.ptr >= self.w.n and not info.get("solve_pending", False):
            self.status = "stalled"
            log.warning("t=%.0f s: no job can run and none will arrive (%d active job(s) stalled); stopping",
                        self.t, self.active.size)
            self.rnd, self.t = self.rnd + 1, self.t + self.opts.round_seconds
            return False
        n_fin = int(finished.sum())
        if n_fin:
            self.remaining_measured -= int(self.w.measured[self.active[finished]].sum())
            self.active = self.active[~finished]
            self.changed = True
            self.n_done += n_fin
        self.rnd, self.t = self.rnd + 1, self.t + self.opts.round_seconds
        return True


@dataclass(frozen=True, eq=False)
class RoundWorkload:
    """The trace as arrays over the cluster's columns, plus what the run was asked to do."""

    trace: Trace
    cluster: Cluster
    types: tuple[str, ...]
    cap: np.ndarray
    T: np.ndarray
    U: np.ndarray | None
    ids: np.ndarray
    s: np.ndarray
    weights: np.ndarray
    arrival: np.ndarray
    total: np.ndarray
    deadlines: np.ndarray | None
    entities: np.ndarray | None
    measured: np.ndarray
    use_place: bool
    place_cluster: Cluster
    context: dict[str, Any]
    config: dict[str, Any]

    @property
    def n(self) -> int:
        return int(self.ids.shape[0])

    @property
    def adaptive(self) -> AdaptiveProgress | None:
        """The adaptive jobs' truth, when the workload is adaptive."""
        return self.context.get("adaptive")

    @property
    def restart_seconds(self) -> float | np.ndarray:
        """Restart cost per job: each model's with adaptive jobs, else the option's."""
        a = self.adaptive
        return a.restart_seconds if a is not None else float(self.config["restart_seconds"])

    @classmethod
    def build(cls, trace: Trace, cluster: Cluster, opts: RoundOptions, sched: Any,
              extra_context: Mapping[str, Any] | None = None) -> RoundWorkload:
        types = tuple(cluster.gpu_types)
        m = len(types)
        cap = cluster.capacities(types)
        n = trace.n_jobs
        if n:
            check_gpu_type_names(trace.gpu_types, cluster, argument="workload")
        dropped = [t for t in trace.gpu_types if t not in types]
        if dropped and n:
            log.info("trace GPU types %s are not in the cluster; jobs cannot use them", dropped)
        jobs_all = trace.jobs.with_columns(types) if n else trace.jobs
        T = np.array(jobs_all.throughputs, dtype=float) if n else np.zeros((0, m))
        U = None
        if trace.unconsolidated is not None and n:
            pos = {t: k for k, t in enumerate(trace.gpu_types)}
            U = np.zeros((n, m))
            for k, t in enumerate(types):
                U[:, k] = trace.unconsolidated[:, pos[t]] if t in pos else 0.0
        s = jobs_all.scale_factors.astype(np.int64) if n else np.zeros(0, np.int64)
        arrival = trace.arrival_times.astype(float) if n else np.zeros(0)
        entities = getattr(jobs_all, "entities", None) if n else None
        use_place = opts.mechanism == "rounds" and cluster.topology is not None if opts.placement is None \
            else bool(opts.placement)
        place_cluster = cluster
        if use_place and cluster.topology is None:
            place_cluster = Cluster.from_servers(cluster.as_dict(), gpus_per_server=opts.gpus_per_server)
            log.info("placement: cluster has no topology; using servers of %d GPUs", opts.gpus_per_server)
        context: dict[str, Any] = {"ids": trace.jobs.ids}
        if trace.catalogue is not None:
            context.update(catalogue=trace.catalogue, catalogue_rows=trace.catalogue_rows)
        context.update(extra_context or {})
        label, name, params = _scheduler_label(sched)
        w = cls(trace=trace, cluster=cluster, types=types, cap=cap, T=T, U=U, ids=trace.jobs.ids, s=s,
                weights=jobs_all.weights if n else np.zeros(0), arrival=arrival,
                total=trace.total_steps.astype(float) if n else np.zeros(0), deadlines=trace.deadlines,
                entities=entities, measured=window_mask(opts.window, arrival, unit=opts.window_unit),
                use_place=use_place, place_cluster=place_cluster, context=context, config={})
        w._check(sched)
        w.config.update({
            "policy": label, "policy_name": name, "policy_params": params, "cluster": cluster.as_dict(),
            "topology_servers": None if place_cluster.topology is None else int(place_cluster.topology.n_servers),
            "workload": trace.source, "workload_meta": dict(trace.meta), "n_jobs": n,
            "round_seconds": opts.round_seconds, "mechanism": opts.mechanism, "placement": use_place,
            "reallocate": opts.reallocate,
            "window": None if opts.window is None else [float(opts.window[0]), float(opts.window[1])],
            "window_unit": opts.window_unit, "stop_after_window": opts.stop_after_window, "seed": opts.seed,
            "max_time": opts.max_time, "wall_time_limit": opts.wall_time_limit, "solver": opts.solver,
            "solve_time_limit": opts.solve_time_limit, "rule": opts.rule, "work_conserving": opts.work_conserving,
            "stickiness": float(opts.stickiness), "reset_shares": opts.reset_shares,
            "restart_seconds": opts.restart_seconds, "min_solve_interval": opts.min_solve_interval,
            "arrivals": opts.arrivals, "backfill": opts.backfill,
        })
        return w

    def _check(self, sched: Any) -> None:
        """Reject jobs the scheduler can never run, naming them by their trace id."""
        n = self.n
        if not n:
            return
        pol = _policy_of(sched)
        if pol is not None:
            pol = bind_workload(pol, self.context)
        if pol is None and self.adaptive is not None:
            return   # a round scheduler of adaptive jobs chooses their GPU counts (every job has a profiled type)
        if pol is None:
            usable = usable_mask(self.T, self.s, self.cap)
            bad = np.flatnonzero(~usable.any(axis=1))
            if bad.size:
                raise ValidationError(f"job {show(self.ids[bad[0]])} cannot run on any GPU type of the cluster "
                                      f"(zero throughput, or a gang of {int(self.s[bad[0]])} larger than every type).")
            return
        fields: dict[str, Any] = {"steps_remaining": self.total, "arrival_times": self.arrival,
                                  "time_since_start": np.zeros(n), "isolated_time_elapsed": np.zeros(n)}
        if self.deadlines is not None:
            left = np.maximum(self.deadlines - self.arrival, 1.0)
            fields["slos"] = np.where(np.isfinite(left), left, NO_SLO)
        if self.entities is not None:
            fields["entities"] = self.entities
        check = JobSet(self.T, gpu_types=self.types, ids=np.arange(n), scale_factors=self.s, weights=self.weights,
                       **fields)
        try:
            validate_problem(pol, check, self.cluster)
        except ValidationError as exc:
            raise type(exc)(_rename_jobs(str(exc), self.ids)) from None

    def isolated_rates(self, active: np.ndarray) -> np.ndarray:
        """Throughput of each active job on its isolated share (1/n of every type)."""
        s = self.s[active]
        return (self.T[active] * isolated_allocation_arrays(s, self.cap, s.shape[0])).sum(axis=1)

    def view(self, ledger: Ledger, active: np.ndarray, t: float, rnd: int, changed: bool) -> RoundView:
        """What the scheduler sees this round."""
        return RoundView(
            now=t, round_index=rnd, round_seconds=float(self.config["round_seconds"]), cluster=self.cluster,
            gpu_types=self.types, capacities=self.cap.astype(np.int64), jobs=active, throughputs=self.T[active],
            unconsolidated=None if self.U is None else self.U[active], scale_factors=self.s[active],
            weights=self.weights[active], remaining=self.total[active] - ledger.done[active],
            arrival=self.arrival[active], isolated_time=ledger.iso_time[active],
            deadlines=None if self.deadlines is None else self.deadlines[active],
            entities=None if self.entities is None else self.entities[active], changed=changed,
            context=self.context, waiting=t - np.maximum(self.arrival[active], ledger.last_end[active]))


def _solve_columns(info: Mapping[str, Any]) -> dict[str, Any]:
    return {"solved": bool(info.get("solved", False)), "solve_ok": bool(info.get("solve_ok", True)),
            "solve_status": str(info.get("solve_status", "")), "solve_s": float(info.get("solve_s", math.nan)),
            "solve_jobs": int(info.get("solve_jobs", 0)), "solve_classes": int(info.get("solve_classes", 0)),
            "plan_s": float(info.get("plan_s", math.nan))}
