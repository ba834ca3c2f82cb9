r"""The round loop's vocabulary: what a scheduler sees (:class:`RoundView`), what it returns
(:class:`RoundRows`) and the interface every scheduler implements (:class:`RoundScheduler`).

One loop drives every scheduler. Each round the *driver* (the simulator, with a simulated
clock; an online service, with a real one) builds a :class:`RoundView` of the active jobs
and calls

* ``state = scheduler.initial_state(start_time)`` once;
* ``rows = scheduler.plan_round(view, state)`` each round: the allocation rows that run;
* ``state = scheduler.record_round(state, ran, seconds)`` after the round, with the rows
  that actually ran (placement may drop some) and how long each ran.

The scheduler never reads a clock: ``view.now`` is the only time it knows, so the same
object runs in simulation and against a real cluster.

Allocation rows
---------------
A row is one unit of work with a footprint: one job, or two for a space-sharing pair; one
GPU type; a number of GPUs (a gang, or Sia's chosen configuration); whether it must sit on
one server; and each member's throughput while the row runs (consolidated, and when its
gang is spread over servers). In the "rounds" mechanism a row runs the whole round
(``share = 1``); in the ideal (fluid) mechanism a job may have one row per type with
``share = X[j, k]``. Rules the driver checks (:func:`check_rows`), raising
:class:`~hetsched.errors.SchedulerError` naming the round, the job and the rule:

* per type, :math:`\sum_{\text{rows}} \text{gpus} \times \text{share} \le C_k` (a pair's GPUs
  count once);
* per job, the shares of the rows it is a member of sum to at most 1 (in "rounds": one row);
* members are active jobs, a pair has two different members, GPU counts are positive
  integers, throughputs finite and non-negative;
* rows of one interleaving group (``group >= 0``, Muri) have one GPU type and GPU count,
  hold no pair, and their shares sum to at most 1 (they take turns on the same GPUs).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeAlias, runtime_checkable

import numpy as np

from ..errors import SchedulerError
from ..formulations.base import Policy
from ..inputs.adaptive import AdaptiveWorkload
from ..inputs.cluster import Cluster
from ..inputs.jobs import JobSet
from ..inputs.trace import Trace
from ..inputs.workloads import Workload

__all__ = ["NO_SLO", "RoundRows", "RoundScheduler", "RoundView", "SchedulerLike", "WorkloadLike", "check_rows"]

#: SLO passed to policies for a job without a deadline (seconds; never binding).
NO_SLO = 1e12


@dataclass(frozen=True, eq=False)
class RoundView:
    """The active jobs at the start of a round, as a scheduler sees them (read-only).

    Attributes
    ----------
    now : float
        Start of the round (the driver's clock, seconds).
    round_index : int
        Rounds run before this one.
    round_seconds : float
        Length of the round being planned.
    cluster : Cluster
    gpu_types : tuple of str
        Columns of every matrix below (the cluster's types).
    capacities : ndarray of int64
        GPUs per type.
    jobs : ndarray of int64
        The driver's numbers of the active jobs (positions in arrival order), ascending;
        rows of every per-job array below follow it.
    throughputs : ndarray, shape (n_active, n_types)
        Steps/s of each job on its gang of each type, consolidated.
    unconsolidated : ndarray or None
        Steps/s when the gang is spread over servers (None: as consolidated).
    scale_factors, weights, remaining, arrival, isolated_time : ndarray
        Gang sizes, weights, steps left, arrival times and the isolated-equivalent time
        received so far (finish-time fairness).
    deadlines, entities : ndarray or None
        Absolute SLO deadlines and entity labels, when the workload has them.
    changed : bool
        Whether the active set changed since the previous round (arrival or completion).
    waiting : ndarray or None
        Seconds each job has waited since it last ran, or since it arrived if it never ran.
    context : dict
        Workload facts a scheduler may need (e.g. ``"catalogue"`` and ``"catalogue_rows"``
        of a generated workload).
    """

    now: float
    round_index: int
    round_seconds: float
    cluster: Cluster
    gpu_types: tuple[str, ...]
    capacities: np.ndarray
    jobs: np.ndarray
    throughputs: np.ndarray
    unconsolidated: np.ndarray | None
    scale_factors: np.ndarray
    weights: np.ndarray
    remaining: np.ndarray
    arrival: np.ndarray
    isolated_time: np.ndarray
    deadlines: np.ndarray | None = None
    entities: np.ndarray | None = None
    changed: bool = False
    context: dict[str, Any] = field(default_factory=dict)
    waiting: np.ndarray | None = None

    @property
    def n_jobs(self) -> int:
        """Number of active jobs."""
        return int(self.jobs.shape[0])

    def jobset(self, fields: Any = ()) -> JobSet:
        """The active jobs as a :class:`~hetsched.JobSet` (ids: the driver's job numbers).

        Parameters
        ----------
        fields : iterable of str
            Optional fields to include: ``steps_remaining``, ``time_since_start``,
            ``arrival_times``, ``isolated_time_elapsed``, ``slos`` (seconds to each
            deadline, at least one round; :data:`NO_SLO` without one). Entities are always
            included when the workload has them.
        """
        fields = set(fields)
        kw: dict[str, Any] = {}
        if self.entities is not None:
            kw["entities"] = self.entities
        if "steps_remaining" in fields:
            kw["steps_remaining"] = np.maximum(self.remaining, 1e-9)
        if "time_since_start" in fields:
            kw["time_since_start"] = np.maximum(self.now - self.arrival, 0.0)
        if "arrival_times" in fields:
            kw["arrival_times"] = self.arrival
        if "isolated_time_elapsed" in fields:
            kw["isolated_time_elapsed"] = self.isolated_time
        if "slos" in fields and self.deadlines is not None:
            left = np.maximum(self.deadlines - self.now, self.round_seconds)
            kw["slos"] = np.where(np.isfinite(left), left, NO_SLO)
        return JobSet(self.throughputs, gpu_types=self.gpu_types, ids=self.jobs, scale_factors=self.scale_factors,
                      weights=self.weights, **kw)


def _i64(v: Any, n: int, fill: int) -> np.ndarray:
    if v is None:
        return np.full(n, fill, np.int64)
    a = np.asarray(v)
    return a if a.dtype == np.int64 and a.ndim == 1 else a.astype(np.int64).reshape(-1)


def _f64(v: Any, n: int, fill: float) -> np.ndarray:
    if v is None:
        return np.full(n, fill, dtype=float)
    a = np.asarray(v)
    return a if a.dtype == np.float64 and a.ndim == 1 else a.astype(float).reshape(-1)


@dataclass(frozen=True, eq=False)
class RoundRows:
    """The allocation rows a scheduler runs in one round (see the module docstring).

    Attributes
    ----------
    job : ndarray of int64
        First member (driver job number).
    gpu_type : ndarray of int64
        Type column.
    gpus : ndarray of int64
        GPUs the row holds while it runs (a pair's GPUs, once).
    rate : ndarray
        Steps/s of ``job`` while the row runs, consolidated.
    partner : ndarray of int64
        Second member of a space-sharing pair, -1 for none.
    partner_rate : ndarray
        Steps/s of ``partner`` in the row (0 without one).
    spread_rate, partner_spread_rate : ndarray
        Steps/s when placement spreads the row's gang over several servers (default:
        the consolidated rates).
    consolidated : ndarray of bool
        The row must sit on one server; placement that cannot do so drops it for the round.
    share : ndarray
        Fraction of the round the row runs (1 in the "rounds" mechanism).
    row_id : ndarray of int64
        Number of each row in the plan as the scheduler returned it (default ``0..n-1``;
        kept by :meth:`take`, so ``record_round`` can tell which of its rows ran).
    batch_size : ndarray of int64
        Total batch size an adaptive job runs at in the row (Pollux, Sia; the round loop
        progresses adaptive jobs at their true goodput at this batch); 0 (the default): the
        job's own batch size.
    group : ndarray of int64
        Interleaving group (Muri) of the row, -1 (the default) for none. Rows with the same
        group number hold *the same* GPUs in turn: they must have one GPU type and GPU count,
        their shares sum to at most 1 (each member holds the GPUs for its ``share`` of the
        round and progresses at ``rate`` while it does), and placement places them as one
        request. Capacity counts ``gpus x share`` per row, so a group's GPUs count once.
    info : dict
        What the scheduler did this round, for the round log: ``solved``, ``solve_ok``,
        ``solve_status``, ``solve_s``, ``solve_jobs``, ``solve_classes``, ``plan_s``; and
        ``solve_pending`` (True: a later solve may change the plan without any arrival or
        completion, so a round where nothing runs is not a stall).
    payload : Any
        The scheduler's own record of the plan (handed back to ``record_round`` trimmed to
        the rows that ran, e.g. a :class:`~hetsched.mechanism.RoundPlan`).
    """

    job: np.ndarray
    gpu_type: np.ndarray
    gpus: np.ndarray
    rate: np.ndarray
    partner: np.ndarray | None = None
    partner_rate: np.ndarray | None = None
    spread_rate: np.ndarray | None = None
    partner_spread_rate: np.ndarray | None = None
    consolidated: np.ndarray | None = None
    share: np.ndarray | None = None
    row_id: np.ndarray | None = None
    batch_size: np.ndarray | None = None
    group: np.ndarray | None = None
    info: dict[str, Any] = field(default_factory=dict)
    payload: Any = None

    def __post_init__(self) -> None:
        job = _i64(self.job, 0, -1)
        n = job.shape[0]
        set_ = object.__setattr__
        set_(self, "job", job)
        set_(self, "gpu_type", _i64(self.gpu_type, n, -1))
        set_(self, "gpus", _i64(self.gpus, n, 0))
        set_(self, "rate", _f64(self.rate, n, 0.0))
        set_(self, "partner", _i64(self.partner, n, -1))
        set_(self, "partner_rate", _f64(self.partner_rate, n, 0.0))
        set_(self, "spread_rate", _f64(self.spread_rate, n, 0.0) if self.spread_rate is not None else self.rate)
        set_(self, "partner_spread_rate", _f64(self.partner_spread_rate, n, 0.0)
             if self.partner_spread_rate is not None else self.partner_rate)
        set_(self, "consolidated", np.zeros(n, bool) if self.consolidated is None
             else np.asarray(self.consolidated, dtype=bool).reshape(-1))
        set_(self, "share", _f64(self.share, n, 1.0))
        set_(self, "row_id", np.arange(n, dtype=np.int64) if self.row_id is None
             else np.asarray(self.row_id, dtype=np.int64).reshape(-1))
        set_(self, "batch_size", _i64(self.batch_size, n, 0))
        set_(self, "group", _i64(self.group, n, -1))
        for name in ("row_id", "batch_size", "group", "gpu_type", "gpus", "rate", "partner", "partner_rate", "spread_rate", "partner_spread_rate",
                     "consolidated", "share"):
            if getattr(self, name).shape != (n,):
                raise SchedulerError(f"RoundRows.{name} must have one entry per row ({n}); got shape "
                                     f"{getattr(self, name).shape}.")

    @classmethod
    def empty(cls, **kw: Any) -> RoundRows:
        """No rows (nothing runs)."""
        return cls(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), **kw)

    @property
    def n_rows(self) -> int:
        """Number of rows."""
        return int(self.job.shape[0])

    @property
    def is_pair(self) -> np.ndarray:
        """Mask of space-sharing rows."""
        return self.partner >= 0

    def take(self, keep: np.ndarray, **changes: Any) -> RoundRows:
        """The rows where ``keep`` (bool mask or indices), with fields replaced by ``changes``."""
        k = np.asarray(keep)
        arrays = {name: getattr(self, name)[k] for name in (
            "job", "gpu_type", "gpus", "rate", "partner", "partner_rate", "spread_rate", "partner_spread_rate",
            "consolidated", "share", "row_id", "batch_size", "group")}
        arrays.update(changes)
        return replace(self, **arrays)

    def members(self) -> tuple[np.ndarray, np.ndarray]:
        """``(row, job)`` for every member of every row (pairs give two entries)."""
        rows = np.arange(self.n_rows, dtype=np.int64)
        pair = self.is_pair
        return (np.concatenate([rows, rows[pair]]), np.concatenate([self.job, self.partner[pair]]))

    def __repr__(self) -> str:
        return (f"RoundRows(rows={self.n_rows}, pairs={int(self.is_pair.sum())}, "
                f"gpus={int((self.gpus * self.share).sum())})")


@runtime_checkable
class RoundScheduler(Protocol):
    """Anything the round loop can drive (see the module docstring).

    Implemented by :class:`~hetsched.sim.PolicyScheduler` (any allocation policy: solve ->
    round mechanism) and :class:`~hetsched.schedulers.Tiresias`.

    A scheduler whose rows are built by the round mechanism's whole-gang packer (which
    never over-uses a type or runs a job twice) may declare ``rows_checked = True``; the
    driver then skips :func:`check_rows` for it. Any other scheduler's rows are checked
    every round.

    A scheduler of adaptive jobs (Pollux, the adaptive Sia, Optimus) declares
    ``adaptive = True``: it reads the jobs' :class:`~hetsched.inputs.adaptive.AdaptiveJobs`
    from ``view.context["adaptive"]`` and chooses each row's GPUs and batch size; the online
    scheduler then takes the models' profiles and measurements in reports.

    A scheduler that chooses GPU ids itself (HiveD's cells) may define
    ``placed_gpus(rows, cluster)``: one array of global GPU ids of ``cluster`` per row (None:
    let the driver place); a driver with servers then runs each row on those GPUs, checked
    but not placed again (:func:`~hetsched.rounds.placing.place_round`).
    """

    def initial_state(self, start_time: float = 0.0) -> Any:
        """The state before the first round."""

    def plan_round(self, view: RoundView, state: Any) -> RoundRows:
        """The rows to run this round."""

    def record_round(self, state: Any, ran: RoundRows, seconds: np.ndarray) -> Any:
        """The state after ``ran`` (the rows that actually ran) ran ``seconds[i]`` each."""


#: What a driver accepts as its scheduler: a registered policy name, a policy object (both
#: run through :class:`~hetsched.rounds.PolicyScheduler`) or any round scheduler.
SchedulerLike: TypeAlias = str | Policy | RoundScheduler

#: What a driver accepts as its workload: a trace, a JobSet with ``steps_remaining``, a
#: sampled Workload, adaptive jobs (:class:`~hetsched.inputs.adaptive.AdaptiveWorkload`), or a
#: mapping (a generator spec for :func:`~hetsched.inputs.trace.generate_workload`).
WorkloadLike: TypeAlias = Trace | JobSet | Workload | AdaptiveWorkload | Mapping[str, Any]


def check_rows(rows: RoundRows, view: RoundView, *, tol: float = 1e-9) -> None:
    """Raise :class:`~hetsched.errors.SchedulerError` when ``rows`` break a rule of the loop.

    Parameters
    ----------
    rows : RoundRows
        What the scheduler returned.
    view : RoundView
        What it was given (active jobs, capacities).
    tol : float
        Slack for shares and capacities.
    """
    if not isinstance(rows, RoundRows):
        raise SchedulerError(f"round {view.round_index}: a scheduler must return RoundRows from plan_round; "
                             f"got {type(rows).__name__}.")
    rnd = view.round_index
    if rows.n_rows == 0:
        return
    m = len(view.gpu_types)

    def fail(i: int, rule: str) -> None:
        raise SchedulerError(f"round {rnd} (t={view.now:.0f} s): row {i} (job {int(rows.job[i])}"
                             f"{'' if rows.partner[i] < 0 else f', partner {int(rows.partner[i])}'}, "
                             f"type column {int(rows.gpu_type[i])}): {rule}.")

    rates = np.concatenate([rows.rate, rows.partner_rate, rows.spread_rate, rows.partner_spread_rate])
    if not (((rows.gpu_type >= 0) & (rows.gpu_type < m) & (rows.gpus >= 1) & (rows.share > 0)
             & (rows.share <= 1 + tol)).all() and np.isfinite(rates).all() and (rates >= 0).all()):
        bad = np.flatnonzero((rows.gpu_type < 0) | (rows.gpu_type >= m))
        if bad.size:
            fail(int(bad[0]), f"GPU type column must be in [0, {m - 1}]")
        bad = np.flatnonzero(rows.gpus < 1)
        if bad.size:
            fail(int(bad[0]), f"a row must hold at least one GPU; got {int(rows.gpus[bad[0]])}")
        bad = np.flatnonzero(~(rows.share > 0) | ~(rows.share <= 1 + tol))
        if bad.size:
            fail(int(bad[0]), f"share must be in (0, 1]; got {rows.share[bad[0]]!r}")
        for name in ("rate", "partner_rate", "spread_rate", "partner_spread_rate"):
            v = getattr(rows, name)
            bad = np.flatnonzero(~np.isfinite(v) | (v < 0))
            if bad.size:
                fail(int(bad[0]), f"{name} must be finite and non-negative; got {v[bad[0]]!r}")
    bad = np.flatnonzero(rows.partner == rows.job)
    if bad.size:
        fail(int(bad[0]), "a pair needs two different jobs")
    if (rows.group >= 0).any():
        _check_groups(rows, fail, tol)
    cap = np.asarray(view.capacities, dtype=float)
    if not rows.is_pair.any() and (rows.share == 1.0).all() and (rows.n_rows < 2 or (rows.job[1:] > rows.job[:-1]).all()):
        # the common case (whole rows of distinct jobs in order): members active, capacity
        pos = np.minimum(np.searchsorted(view.jobs, rows.job), max(view.n_jobs - 1, 0))
        used = np.bincount(rows.gpu_type, weights=rows.gpus, minlength=m)
        if view.n_jobs and (view.jobs[pos] == rows.job).all() and (used <= cap + tol * np.maximum(cap, 1.0)).all():
            return
    r, j = rows.members()
    if view.n_jobs == 0:
        fail(0, f"job {int(j[0])} is not active (no job is)")
    pos = np.minimum(np.searchsorted(view.jobs, j), view.n_jobs - 1)
    inactive = np.flatnonzero(view.jobs[pos] != j)
    if inactive.size:
        fail(int(r[inactive[0]]), f"job {int(j[inactive[0]])} is not active")
    share_of = np.bincount(pos, weights=rows.share[r], minlength=view.n_jobs)
    over = np.flatnonzero(share_of > 1 + tol)
    if over.size:
        jj = int(view.jobs[over[0]])
        first = int(r[np.flatnonzero(j == jj)[0]])
        fail(first, f"job {jj} is in rows whose shares sum to {share_of[over[0]]:.6g} > 1 (a job runs in at most "
                    "one row at a time)")
    used = np.bincount(rows.gpu_type, weights=rows.gpus * rows.share, minlength=m)
    over = np.flatnonzero(used > cap + tol * np.maximum(cap, 1.0))
    if over.size:
        k = int(over[0])
        first = int(np.flatnonzero(rows.gpu_type == k)[0])
        fail(first, f"GPU type {view.gpu_types[k]!r} is over-used: {used[k]:.6g} GPUs for capacity {int(cap[k])}")


def _check_groups(rows: RoundRows, fail: Any, tol: float) -> None:
    """The rules of interleaving groups (see :func:`check_rows`)."""
    g = np.flatnonzero(rows.group >= 0)
    bad = g[rows.is_pair[g]]
    if bad.size:
        fail(int(bad[0]), "a row of an interleaving group cannot also be a space-sharing pair")
    ids, first, inv = np.unique(rows.group[g], return_index=True, return_inverse=True)
    lead = g[first][inv]
    bad = g[(rows.gpu_type[g] != rows.gpu_type[lead]) | (rows.gpus[g] != rows.gpus[lead])]
    if bad.size:
        fail(int(bad[0]), f"rows of interleaving group {int(rows.group[bad[0]])} must share one GPU type and GPU count")
    total = np.bincount(inv, weights=rows.share[g], minlength=ids.size)
    over = np.flatnonzero(total > 1 + tol)
    if over.size:
        fail(int(g[first[over[0]]]), f"the shares of interleaving group {int(ids[over[0]])} sum to "
                                     f"{total[over[0]]:.6g} > 1 (its members take turns on the same GPUs)")
