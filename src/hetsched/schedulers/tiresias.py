r"""Tiresias (Gu et al., NSDI'19): discretized two-dimensional least-attained-service.

A priority scheduler, not an allocation LP: each round it decides which jobs run, from what
each job has *attained* so far, and returns a :class:`~hetsched.mechanism.RoundPlan` (the
same record :func:`hetsched.mechanism.plan_round` returns), so a round loop can use either.

Algorithm (per round)
---------------------
* **Attained service** (2D): GPUs x seconds the job has run since it last entered the top
  queue (``service="gpu_time"``; ``"time"``: seconds only, 1D LAS; ``"epochs"``: epochs
  completed, E-LAS' progress measure, supplied to :meth:`Tiresias.record`).
* **K queues** with thresholds :math:`0 < \theta_1 < \dots < \theta_{K-1}`: a job with
  attained service :math:`a` is in queue :math:`q = \#\{i : \theta_i \le a\}` (Tiresias'
  simulator demotes when :math:`a \ge \theta_q`). New jobs start in queue 0. Queues are
  served in order; within a queue jobs go first-in-first-out: a job entering a queue
  (arrival, demotion, promotion) joins its tail, and after each round the jobs that ran
  move ahead of those that waited, keeping their order (exactly the list discipline of
  Tiresias' simulator, at round granularity); or, with a job-size distribution,
  by the **2D-Gittins index** of their attained service (higher first; see
  :mod:`hetsched.schedulers.gittins`), or least attained first (``order="las"``).
* **Starvation guard**: a waiting job below the top queue whose time waiting since it was
  last promoted reaches ``promote_knob`` x its running time since then goes back to queue
  0 with its attained service reset (Tiresias' ``PROMOTE_KNOB``; off when None).
* **Placement**: walking jobs in priority order, each whole gang takes the fastest GPU type
  that still has room (``sticky``: its last type first); jobs that do not fit are skipped
  and later, smaller jobs may run (Tiresias' simulator also skips). The walk is
  :func:`hetsched.mechanism.greedy_pack`.

Demotions and promotions are applied at round boundaries by :meth:`Tiresias.record`
(Tiresias' event-driven simulator applies them the instant a threshold is crossed); a job
may pass several thresholds in one long round.

State
-----
:class:`TiresiasState` is immutable: ``plan = sched.plan(jobs, cluster, state)``, then
``state = sched.record(state, plan, seconds)`` returns the next state. Jobs are matched
by id; jobs the state does not know are new (queue 0), jobs it knows that are absent from
``jobs`` are dropped (finished).

Examples
--------
Two 1-GPU jobs and one GPU, one queue threshold at 100 GPU-seconds; job "a" runs first
(FIFO), is demoted after its first 100-second round, and "b" takes over:

>>> import hetsched as hs
>>> from hetsched.schedulers import Tiresias
>>> jobs = hs.JobSet([[1.0], [1.0]], gpu_types=["v100"], ids=["a", "b"])
>>> cluster = hs.Cluster({"v100": 1})
>>> sched = Tiresias(thresholds=[100.0])
>>> state = sched.initial_state()
>>> plan = sched.plan(jobs, cluster, state, round_seconds=100.0)
>>> plan.jobs_on("v100").tolist()
['a']
>>> state = sched.record(state, plan)
>>> state.queue.tolist()
[1, 0]
>>> sched.plan(jobs, cluster, state, round_seconds=100.0).jobs_on("v100").tolist()
['b']
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ..inputs.cluster import Cluster
from ..inputs.jobs import JobSet, usable_mask
from ..mechanism.history import rows_of
from ..mechanism.packing import greedy_pack, greedy_pack_blocking
from ..mechanism.plan import RoundPlan
from ..validation import (
    check_bool,
    check_choice,
    check_matrix,
    check_positive,
    check_real,
)
from .gittins import ServiceDistribution, gittins_index

__all__ = ["ORDERS", "SERVICES", "Tiresias", "TiresiasPlan", "TiresiasState"]

log = logging.getLogger(__name__)

#: How attained service is measured.
SERVICES = ("gpu_time", "time", "epochs")
#: Order of jobs within a queue.
ORDERS = ("fifo", "las", "gittins")


@dataclass(frozen=True, eq=False)
class TiresiasState:
    """What Tiresias remembers between rounds (immutable; rows follow ``job_ids``).

    Attributes
    ----------
    job_ids : ndarray
        Jobs the state knows.
    attained : ndarray
        Attained service since the job last entered queue 0 (GPU-seconds, seconds or
        epochs, per the scheduler's ``service``); decides the queue.
    total_service : ndarray
        Attained service since the job was first seen (never reset).
    executed, pending : ndarray
        Seconds run / seconds waiting (after first running) since the last promotion;
        the starvation guard compares them.
    queue : ndarray of int64
        Current queue (0 = highest priority).
    entered : ndarray
        Clock time the job entered its current queue.
    position : ndarray
        Place of the job in its queue (0 = head; the FIFO key).
    first_seen : ndarray
        Clock time the job was first seen (arrival time when the JobSet carried it).
    last_type : ndarray of int64
        Column (in ``gpu_types``) the job ran on last round, -1 if it did not run.
    promotions : ndarray of int64
        Times the starvation guard promoted the job.
    gpu_types : tuple of str or None
        Column labels of ``last_type``.
    time : float
        Clock: start of the next round.
    rounds : int
        Rounds recorded.
    """

    job_ids: np.ndarray
    attained: np.ndarray
    total_service: np.ndarray
    executed: np.ndarray
    pending: np.ndarray
    queue: np.ndarray
    entered: np.ndarray
    position: np.ndarray
    first_seen: np.ndarray
    last_type: np.ndarray
    promotions: np.ndarray
    gpu_types: tuple[str, ...] | None = None
    time: float = 0.0
    rounds: int = 0

    @classmethod
    def empty(cls, start_time: float = 0.0) -> TiresiasState:
        """A state that knows no job, with the clock at ``start_time``."""
        t = check_real(start_time, "start_time")
        z = np.zeros(0)
        zi = np.zeros(0, dtype=np.int64)
        return cls(job_ids=np.zeros(0, dtype=np.int64), attained=z, total_service=z, executed=z, pending=z,
                   queue=zi, entered=z, position=z, first_seen=z, last_type=zi, promotions=zi, gpu_types=None, time=t)

    @property
    def n_jobs(self) -> int:
        """Number of jobs the state knows."""
        return int(self.job_ids.shape[0])

    def to_frame(self) -> pd.DataFrame:
        """One row per job: queue, attained service, executed/pending seconds, promotions."""
        return pd.DataFrame(
            {"queue": self.queue, "attained": self.attained, "total_service": self.total_service,
             "executed": self.executed, "pending": self.pending, "entered": self.entered,
             "position": self.position,
             "promotions": self.promotions},
            index=pd.Index(self.job_ids, name="job_id"),
        )

    def aligned(self, job_ids: np.ndarray, gpu_types: Sequence[str], arrival: np.ndarray | None = None) -> dict:
        """The state's arrays matched to ``job_ids`` (new jobs: queue 0, nothing attained).

        New jobs enter at ``arrival`` when given (else at the clock). Also returns
        ``rows`` (-1 for new jobs) and ``dropped_ids``.
        """
        n = int(job_ids.shape[0])
        rows = rows_of(self.job_ids, job_ids)
        known = rows >= 0
        src = rows[known]
        enter = np.full(n, self.time) if arrival is None else np.minimum(np.asarray(arrival, float), self.time)

        def pick(arr, fill, dtype=float):
            out = np.full(n, fill, dtype=dtype) if np.ndim(fill) == 0 else np.asarray(fill, dtype=dtype).copy()
            out[known] = arr[src]
            return out

        last = np.full(n, -1, dtype=np.int64)
        if known.any() and self.gpu_types is not None:
            types = tuple(gpu_types)
            lut = np.array([types.index(t) if t in types else -1 for t in self.gpu_types] + [-1], dtype=np.int64)
            last[known] = lut[self.last_type[src]]
        kept = np.zeros(self.n_jobs, dtype=bool)
        kept[src] = True
        return {
            "rows": rows,
            "dropped_ids": self.job_ids[~kept],
            "attained": pick(self.attained, 0.0),
            "total_service": pick(self.total_service, 0.0),
            "executed": pick(self.executed, 0.0),
            "pending": pick(self.pending, 0.0),
            "queue": pick(self.queue, 0, np.int64),
            "entered": pick(self.entered, enter),
            "position": pick(self.position, np.inf),
            "first_seen": pick(self.first_seen, enter),
            "last_type": last,
            "promotions": pick(self.promotions, 0, np.int64),
        }

    def __repr__(self) -> str:
        counts = np.bincount(self.queue, minlength=1).tolist() if self.n_jobs else []
        return f"TiresiasState(jobs={self.n_jobs}, per_queue={counts}, time={self.time:g}, rounds={self.rounds})"


@dataclass(frozen=True, eq=False)
class TiresiasPlan(RoundPlan):
    """A :class:`~hetsched.mechanism.RoundPlan` with Tiresias' view of each job.

    Extra attributes (rows follow ``job_ids``): ``queue``, ``rank`` (position in the
    priority order, 0 first), ``attained``, ``entered``, ``first_seen``, ``gittins`` (index
    per job, or None).
    """

    queue: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    rank: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    attained: np.ndarray = field(default_factory=lambda: np.zeros(0))
    entered: np.ndarray = field(default_factory=lambda: np.zeros(0))
    first_seen: np.ndarray = field(default_factory=lambda: np.zeros(0))
    gittins: np.ndarray | None = None


@dataclass(frozen=True, kw_only=True)
class Tiresias:
    """Discretized 2D-LAS (or 2D-Gittins) with K queues and a starvation guard.

    Parameters
    ----------
    thresholds : sequence of float, default (3600, 36000)
        Queue thresholds in the unit of ``service`` (GPU-seconds by default): strictly
        increasing and positive; K = len + 1 queues. Empty: one queue.
    promote_knob : float, optional
        Starvation guard: a waiting job below queue 0 whose waiting time since its last
        promotion reaches ``promote_knob`` times its running time since then returns to
        queue 0 (attained service reset). None (default) disables it.
    distribution : ServiceDistribution, optional
        Distribution of job sizes (same unit as ``service``), e.g. from past jobs; enables
        2D-Gittins ordering within queues.
    order : {"fifo", "las", "gittins"}, optional
        Order within a queue. Default "gittins" when ``distribution`` is given, else
        "fifo" (Tiresias' discretized 2D-LAS).
    gittins_quantum : float, optional
        Fixed quantum for the Gittins index (Tiresias' simulator); default the supremum.
    service : {"gpu_time", "time", "epochs"}, default "gpu_time"
        What attained service counts (see module docstring); "epochs" needs ``progress``
        in :meth:`record`.
    sticky : bool, default False
        Prefer the GPU type a job ran on last round (fewer migrations) over the fastest.
    running_first : bool, default True
        After each round, jobs that ran move ahead of the jobs that waited in their queue
        (Tiresias' simulator); False keeps pure entry order.
    backfill : bool, default True
        A job that does not fit is skipped and later, smaller jobs may run (Tiresias'
        simulator skips); False stops the walk at the first job that fits no type
        (:func:`hetsched.mechanism.packing.greedy_pack_blocking`).

    Raises
    ------
    ValidationError
        Thresholds not strictly increasing positive numbers; a non-positive knob; an
        unknown ``order`` or ``service``; "gittins" without a distribution.
    """

    thresholds: Sequence[float] = (3600.0, 36000.0)
    promote_knob: float | None = None
    distribution: ServiceDistribution | None = None
    order: str | None = None
    gittins_quantum: float | None = None
    service: str = "gpu_time"
    sticky: bool = False
    running_first: bool = True
    backfill: bool = True

    name = "tiresias"

    def __post_init__(self) -> None:
        thr = self.theta
        if thr.size and ((~np.isfinite(thr)).any() or (thr <= 0).any() or (np.diff(thr) <= 0).any()):
            raise ValidationError(
                f"`thresholds` must be strictly increasing positive numbers; got {list(self.thresholds)!r}."
            )
        check_positive(self.promote_knob, "promote_knob", allow_none=True)
        if self.distribution is not None and not isinstance(self.distribution, ServiceDistribution):
            raise ValidationError(
                f"`distribution` must be a ServiceDistribution (e.g. ServiceDistribution(past_sizes)); "
                f"got {type(self.distribution).__name__}."
            )
        if self.order is not None:
            check_choice(self.order, "order", ORDERS)
        if self.within_order == "gittins" and self.distribution is None:
            raise ValidationError("`order='gittins'` needs a job-size `distribution`.")
        check_choice(self.service, "service", SERVICES)
        check_positive(self.gittins_quantum, "gittins_quantum", allow_none=True)
        for flag in ("sticky", "running_first", "backfill"):
            check_bool(getattr(self, flag), flag)

    # ------------------------------------------------------------ properties
    @property
    def theta(self) -> np.ndarray:
        """Thresholds as a float array."""
        try:
            thr = np.asarray(list(self.thresholds), dtype=float).reshape(-1)
        except (TypeError, ValueError):
            raise ValidationError(
                f"`thresholds` must be a sequence of numbers; got {self.thresholds!r}."
            ) from None
        return thr

    @property
    def n_queues(self) -> int:
        """K, the number of queues."""
        return int(self.theta.size) + 1

    @property
    def within_order(self) -> str:
        """The order used within a queue."""
        if self.order is not None:
            return self.order
        return "gittins" if self.distribution is not None else "fifo"

    def initial_state(self, start_time: float = 0.0) -> TiresiasState:
        """An empty state with the clock at ``start_time``."""
        return TiresiasState.empty(start_time)

    def queue_of(self, attained: Any) -> np.ndarray:
        """Queue of each attained-service value: ``#{i : theta_i <= a}``."""
        return np.searchsorted(self.theta, np.asarray(attained, dtype=float), side="right").astype(np.int64)

    # ------------------------------------------------------------------ plan
    def priority_order(self, jobs: JobSet, state: TiresiasState | None = None) -> tuple[np.ndarray, dict]:
        """Rows of ``jobs`` in priority order (first = served first) and the aligned state."""
        st = self.initial_state() if state is None else state
        if not isinstance(st, TiresiasState):
            raise ValidationError(f"`state` must be a TiresiasState or None; got {type(st).__name__}.")
        al = st.aligned(jobs.ids, jobs.gpu_types, arrival=jobs.arrival_times)
        n = jobs.n_jobs
        rows = np.arange(n)
        within = self.within_order
        gitt = None
        keys: list[np.ndarray] = [rows, al["first_seen"], al["position"]]
        if within == "las":
            keys.append(al["attained"])
        elif within == "gittins":
            gitt = gittins_index(al["attained"], self.distribution, self.gittins_quantum)
            keys.append(-gitt)
        keys.append(al["queue"])
        order = np.lexsort(keys)  # last key is primary
        al["gittins"] = gitt
        return order, al

    def plan(self, jobs: JobSet, cluster: Cluster, state: TiresiasState | None = None, *,
             round_seconds: float = 360.0) -> TiresiasPlan:
        """Which jobs run this round, on which GPU type (whole gangs).

        Parameters
        ----------
        jobs : JobSet
            The active jobs (ids match the state's); throughputs pick the type.
        cluster : Cluster
            GPU counts.
        state : TiresiasState, optional
            What was attained so far (default: nothing).
        round_seconds : float, default 360
            Length of the round (recorded in the plan).

        Returns
        -------
        TiresiasPlan
            A RoundPlan (mode "rounds", rule "tiresias") with queues and ranks.
        """
        t0 = time.perf_counter()
        if not isinstance(jobs, JobSet):
            raise ValidationError(f"`jobs` must be a hetsched.JobSet; got {type(jobs).__name__}.")
        if not isinstance(cluster, Cluster):
            raise ValidationError(f"`cluster` must be a hetsched.Cluster; got {type(cluster).__name__}.")
        L = check_positive(round_seconds, "round_seconds", unit="seconds")
        order, al = self.priority_order(jobs, state)
        n, m = jobs.n_jobs, jobs.n_types
        types = tuple(jobs.gpu_types)
        cap = cluster.capacities(types).astype(np.int64)
        s = jobs.scale_factors
        T = jobs.throughputs
        usable = usable_mask(T, s, cap)
        # entries job-major in priority order; per job its usable types, best first
        pref = np.where(usable, T, -np.inf)
        if self.sticky:
            last = al["last_type"]
            has = np.flatnonzero(last >= 0)
            has = has[usable[has, last[has]]]
            pref[has, last[has]] = np.inf
        type_rank = np.argsort(-pref, axis=1, kind="stable")          # (n, m)
        cand_j = np.repeat(order, m)
        cand_k = type_rank[order].ravel()
        ok = usable[cand_j, cand_k]
        if self.backfill:
            assignment, _ = greedy_pack(cand_j[ok], cand_k[ok], s, cap, n)
        else:
            assignment = greedy_pack_blocking(cand_j[ok], cand_k[ok], s, cap, n)
        share = np.zeros((n, m))
        run = assignment >= 0
        share[np.flatnonzero(run), assignment[run]] = 1.0
        prev = al["last_type"]
        preempted = (prev >= 0) & (assignment != prev)
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n)
        used = np.bincount(assignment[run], weights=s[run], minlength=m).astype(int)
        per_q = np.bincount(al["queue"], minlength=self.n_queues).tolist() if n else []
        message = (f"tiresias: {int(run.sum())} of {n} job(s) run; GPUs used "
                   + ", ".join(f"{t} {u}/{c}" for t, u, c in zip(types, used, cap))
                   + f"; jobs per queue {per_q}")
        new = int((al["rows"] < 0).sum())
        if new:
            message += f"; {new} new job(s)"
        if al["dropped_ids"].size:
            message += f"; dropped {al['dropped_ids'].size} job(s) not in `jobs`"
        return TiresiasPlan(
            job_ids=jobs.ids, gpu_types=types, scale_factors=s, capacities=cap, mode="rounds", rule="tiresias",
            round_seconds=L, assignment=assignment, time_share=share, previous_type=prev, preempted=preempted,
            migrated=preempted & run, new_jobs=new, dropped_ids=al["dropped_ids"], message=message,
            timings={"plan_s": time.perf_counter() - t0},
            queue=al["queue"], rank=rank, attained=al["attained"], entered=al["entered"],
            first_seen=al["first_seen"], gittins=al["gittins"],
        )

    # ---------------------------------------------------------------- record
    def _positions(self, al: dict, running: np.ndarray, queue: np.ndarray, moved: np.ndarray) -> np.ndarray:
        """Places in the queues after a round: stayers keep their order (those that ran first,
        with ``running_first``), then jobs that entered the queue, by first-seen time."""
        n = queue.shape[0]
        rows = np.arange(n)
        ran_key = (~running).astype(np.int64) if self.running_first else np.zeros(n, dtype=np.int64)
        # stayers: (queue, moved=0, ran_key, old position, first_seen, row); movers: (queue, 1, first_seen, row)
        k1 = np.where(moved, 0, ran_key)
        k2 = np.where(moved, 0.0, al["position"])
        order = np.lexsort((rows, al["first_seen"], k2, k1, moved.astype(np.int64), queue))
        pos = np.empty(n)
        q_sorted = queue[order]
        starts = np.searchsorted(q_sorted, q_sorted, side="left")
        pos[order] = np.arange(n) - starts
        return pos

    # ------------------------------------------------------------ round loop
    def plan_round(self, view: Any, state: TiresiasState) -> Any:
        """The round loop's entry (:class:`~hetsched.sim.RoundScheduler`): :meth:`plan` on the
        view's active jobs, as allocation rows (whole gangs at their consolidated throughput,
        or the unconsolidated one when placement spreads them)."""
        from ..rounds.protocol import RoundRows

        if self.service == "epochs":
            raise ValidationError(
                "Tiresias(service='epochs') needs epochs completed per round, which the simulator does not model; "
                "use service='gpu_time' or 'time' in simulate().")
        jobs = view.jobset(("arrival_times", "steps_remaining"))
        plan = self.plan(jobs, view.cluster, state, round_seconds=view.round_seconds)
        r = np.flatnonzero(plan.assignment >= 0)
        k = plan.assignment[r]
        T = view.throughputs
        U = view.unconsolidated if view.unconsolidated is not None else T
        return RoundRows(view.jobs[r], k, plan.scale_factors[r], T[r, k], spread_rate=U[r, k], payload=(plan, r))

    def record_round(self, state: TiresiasState, ran: Any, seconds: np.ndarray) -> TiresiasState:
        """The round loop's record: :meth:`record` with the rows that ran and how long each ran
        (jobs that did not run wait the whole round)."""
        from ..rounds.policy_scheduler import ran_plan

        plan = ran_plan(ran)
        per_job = np.full(plan.n_jobs, float(plan.round_seconds))
        r = ran.payload[1][ran.row_id]
        per_job[r] = seconds
        return self.record(state, plan, per_job)

    def record(self, state: TiresiasState | None, plan: RoundPlan, seconds: Any = None, *,
               progress: Any = None) -> TiresiasState:
        """The state after ``plan`` ran: attained service, demotions, promotions, clock.

        Parameters
        ----------
        state : TiresiasState or None
            The state the plan was made from (None: empty).
        plan : RoundPlan
            What ran (from :meth:`plan`, or any RoundPlan in "rounds" mode).
        seconds : float or array-like, optional
            Length of the round (default ``plan.round_seconds``), or per job of the plan the
            seconds it actually ran (a job that finished early); waiting jobs wait for the
            longest of them.
        progress : array-like, optional
            Per job of the plan, epochs completed this round (required for
            ``service="epochs"``, ignored otherwise).

        Returns
        -------
        TiresiasState
            A new state for exactly the plan's jobs.
        """
        st = self.initial_state() if state is None else state
        if not isinstance(st, TiresiasState):
            raise ValidationError(f"`state` must be a TiresiasState or None; got {type(st).__name__}.")
        if not isinstance(plan, RoundPlan):
            raise ValidationError(f"`plan` must be a RoundPlan; got {type(plan).__name__}.")
        if plan.mode != "rounds":
            raise ValidationError(f"Tiresias records whole-GPU rounds; got a plan in mode {plan.mode!r}.")
        n = plan.n_jobs
        if seconds is None:
            ran = np.full(n, float(plan.round_seconds))
        else:
            try:
                ran = np.broadcast_to(np.asarray(seconds, dtype=float), (n,)).copy()
            except (TypeError, ValueError):
                raise ValidationError(
                    f"`seconds` must be a number or one number per job of the plan ({n}); got {seconds!r:.80}."
                ) from None
            check_matrix(ran, "seconds")
        if seconds is not None and np.ndim(seconds) == 0:
            L = float(seconds)
        else:
            L = float(ran.max()) if n else float(plan.round_seconds)
        arrival = getattr(plan, "first_seen", None)
        arrival = arrival if isinstance(arrival, np.ndarray) and arrival.shape == (n,) else None
        al = st.aligned(plan.job_ids, plan.gpu_types, arrival=arrival)
        running = plan.assignment >= 0
        s = plan.scale_factors.astype(float)
        if self.service == "gpu_time":
            inc = s * ran
        elif self.service == "time":
            inc = ran.copy()
        else:
            if progress is None:
                raise ValidationError("`progress` (epochs completed per job this round) is required for service='epochs'.")
            try:
                inc = np.broadcast_to(np.asarray(progress, dtype=float), (n,)).copy()
            except (TypeError, ValueError):
                raise ValidationError(f"`progress` must be one number per job of the plan ({n}).") from None
            check_matrix(inc, "progress")
        inc = np.where(running, inc, 0.0)
        attained = al["attained"] + inc
        total = al["total_service"] + inc
        executed = al["executed"] + np.where(running, ran, 0.0)
        pending = al["pending"] + np.where(~running & (al["executed"] > 0), L, 0.0)
        queue = self.queue_of(attained)
        promotions = al["promotions"].copy()
        if self.promote_knob is not None:
            promote = (~running) & (queue > 0) & (executed > 0) & (pending >= self.promote_knob * executed)
            if promote.any():
                attained[promote] = 0.0
                executed[promote] = 0.0
                pending[promote] = 0.0
                queue[promote] = 0
                promotions[promote] += 1
                log.debug("tiresias: promoted %d starving job(s) to queue 0", int(promote.sum()))
        t_end = st.time + L
        moved = (queue != al["queue"]) | (promotions != al["promotions"])
        entered = np.where(moved, t_end, al["entered"])
        position = self._positions(al, running, queue, moved)
        return TiresiasState(
            job_ids=plan.job_ids, attained=attained, total_service=total, executed=executed, pending=pending,
            queue=queue, entered=entered, position=position, first_seen=al["first_seen"], last_type=plan.assignment.copy(),
            promotions=promotions, gpu_types=tuple(plan.gpu_types), time=t_end, rounds=st.rounds + 1,
        )
