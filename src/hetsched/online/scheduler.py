"""OnlineScheduler: any round scheduler driven by the caller's clock, with throughputs learned
from what workers report and every change committed to an SQLite store.

The caller owns the clock and the workers::

    sched = OnlineScheduler("max_min_fairness", cluster, store="sched.db")
    sched.submit("job-1", job_type="ResNet-18 (batch size 64)", total_steps=1e5, arrival=now)
    plan = sched.next_round(now)          # who runs where for the next round
    ...                                   # workers run, then report what they measured:
    sched.report("job-1", "v100", steps=7000, seconds=360)
    sched.complete("job-1")               # when a job finishes (or cancel())
    plan = sched.next_round(now + 360)    # records the last round, plans the next

``next_round(now)``

1. applies the last round: the wrapped scheduler's ``record_round(state, rows, seconds)``
   with the rows of the last plan and, for each row, the seconds its members reported since
   that plan (the largest, for a pair), or ``now`` minus the last plan's time for a row
   nobody reported on (the row held its GPUs the whole time);
2. builds a :class:`~hetsched.sim.RoundView` of the active jobs with the estimated
   throughputs (:class:`~hetsched.online.ThroughputEstimator`), remaining steps (total minus
   reported), arrivals, isolated-equivalent time and waiting time;
3. calls ``plan_round`` (a policy re-solves when it needs to, under ``solve_time_limit``),
   checks the rows, places them on servers and GPU ids when the cluster has a topology;
4. commits the scheduler's state, the rows, the placement and the round's log in one
   transaction (the state as a data-only tree whose arrays are written as small deltas of
   their last stored version, :mod:`.codec`), and returns an :class:`OnlinePlan`.

The simulator with ``learn_throughputs=True`` (:func:`hetsched.online.simulate_online`) is
a driver of this same object with a simulated clock.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ..formulations.common import isolated_allocation_arrays
from ..inputs.cluster import Cluster
from ..inputs.jobs import STEPS_MAX, THROUGHPUT_RANGE, WEIGHT_RANGE
from ..inputs.throughputs import ThroughputCatalogue
from ..placement.result import Placement
from ..rounds.loop import as_scheduler, scheduler_label
from ..sim.options import SimOptions
from ..rounds.placing import RoundPlacer
from ..rounds.policy_scheduler import WORKLOAD, PolicyState
from ..rounds.protocol import RoundRows, RoundView, check_rows
from ..validation import (
    check_bool,
    check_int,
    check_mapping,
    check_nonempty_str,
    check_nonneg,
    check_positive,
    check_real,
)
from .codec import StateEncodingError, decode, encode
from .estimator import ThroughputEstimator
from .sides import SPREAD, SideRates, bind_online, online_sensitivity, reference_rows
from .store import ArrayTable, Store, StoreError
from .table import ACTIVE, CANCELLED, COMPLETED, STATUS_NAMES, JobTable, id_key

__all__ = ["OnlinePlan", "OnlineScheduler"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class OnlinePlan:
    """One round's plan.

    Attributes
    ----------
    round_index : int
        Plans made before this one.
    now : float
        The round's start (the caller's clock).
    assignments : DataFrame
        One row per job that runs: ``job_id``, ``gpu_type``, ``gpus``, ``partner`` (the other
        job of a space-sharing pair, or None), ``throughput`` (the estimate the plan used,
        steps/s), and with a topology ``servers`` (names) and ``gpu_ids`` (global ids, see
        :meth:`hetsched.Topology.gpu_label`).
    rows : RoundRows
        The rows as the round loop sees them (job numbers), after placement.
    spread, migrated : ndarray of bool
        Per row: gang spread over servers; placement moved it (both False without topology).
    solved : bool
        The policy was solved for this round.
    info : dict
        The scheduler's round info (``solve_status``, ``solve_s``, ...).
    timings : dict
        Wall seconds: ``record_s`` (applying the last round), ``estimate_s``, ``plan_s``
        (plan_round and checks), ``place_s``, ``store_s`` (serializing and committing),
        ``commit_s`` (the SQLite commit alone), ``total_s``.
    stored_bytes : int
        Bytes of round state (snapshot tree, array deltas and rewritten arrays) the commit
        wrote; 0 for an in-memory store, which keeps no snapshot.
    scaling : ndarray
        Per row: its rate over the job's own estimate on that type (1 for a job alone on its
        gang; a pair member's relative speed; for an elastic configuration, Sia's scaling of
        the job's measured rate to that GPU count). A report on the row's GPU count is
        divided by it before it updates the job's estimate.
    """

    round_index: int
    now: float
    rows: RoundRows
    spread: np.ndarray
    migrated: np.ndarray
    solved: bool
    info: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    stored_bytes: int = 0
    scaling: np.ndarray = field(default_factory=lambda: np.zeros(0))
    _table: Any = field(default=None, repr=False)   # builds ``assignments`` when first read

    @functools.cached_property
    def assignments(self) -> pd.DataFrame:
        """The rows by job id (see the class docstring); built on first access."""
        return self._table() if callable(self._table) else pd.DataFrame()

    def key(self) -> tuple:
        """What the plan decides, as plain values (for comparing two plans)."""
        a = self.assignments
        cols = [c for c in ("job_id", "gpu_type", "gpus", "partner", "gpu_ids") if c in a]
        return (self.round_index, self.now, tuple(map(tuple, a[cols].astype(object).to_numpy().tolist())))



def _has_job_tables(policy: Any) -> bool:
    """Whether ``policy`` holds per-job tables that are bound to the jobs (pairs, spread
    rates, Sia's goodput table)."""
    if policy is None:
        return False
    return (getattr(policy, "packing", None) is not None or getattr(policy, "placement_sensitivity", None) is not None
            or isinstance(getattr(policy, "goodput", None), pd.DataFrame))


def _check_learnable(policy: Any) -> None:
    """Refuse ``learn=True`` for a policy whose per-job rates are a fixed table the reports
    could not update (raised at construction, never mid-run)."""
    if policy is None:
        return
    for name, how in (("packing", "pair rates"), ("placement_sensitivity", "unconsolidated rates")):
        value = getattr(policy, name, None)
        if value is not None and not (isinstance(value, str) and value == WORKLOAD):
            raise ValidationError(
                f"`learn=True` with a fixed `{name}` table ({type(value).__name__}): its {how} would never follow "
                f"what workers report. Use {name}='workload' (rates given at submit and learned from reports) or "
                "learn=False.")
    if isinstance(getattr(policy, "goodput", None), pd.DataFrame):
        raise ValidationError(
            "`learn=True` with Sia's fixed `goodput` table: reports could not update it. Use Sia without `goodput` "
            "(goodput from the learned throughputs by Sia's scaling model) or learn=False.")
    if np.ndim(getattr(policy, "restart_penalty", 0.0)) != 0:
        raise ValidationError("Sia's per-job `restart_penalty` vector is indexed by the jobs of one solve; online "
                              "the jobs change, so give one number.")


class OnlineScheduler:
    """A round scheduler driven by the caller's clock, learning throughputs, persisted in SQLite.

    Parameters
    ----------
    scheduler : str, Policy or RoundScheduler
        A policy name or object (run through :class:`~hetsched.sim.PolicyScheduler` with
        the mechanism options of ``options``) or any round scheduler (e.g.
        :class:`hetsched.Tiresias`).
    cluster : Cluster
        GPU counts per type; with a topology (:meth:`Cluster.from_servers`) each plan is
        placed on servers and GPU ids.
    store : str, os.PathLike or None
        SQLite file holding the state (created when absent; reopened to continue). None: an
        in-memory database (nothing survives the process).
    round_seconds : float, default 360
        Planned round length: what the policy's mechanism assumes, and what a row nobody
        reported on is charged when the next round is planned sooner or later.
    reference : ThroughputCatalogue, optional
        Profiled job types: a job submitted with a ``job_type`` found here starts from its
        row; unseen types are completed against it (:class:`ThroughputEstimator`).
    ema_alpha, completion
        Estimator options (:class:`ThroughputEstimator`); Gavel's 0.25 and "nearest".
    learn : bool, default True
        Update estimates from reports. False: the throughputs given at submit (or from the
        reference) are used as they are; reports still count steps and seconds.
    solve_time_limit : float, optional
        Wall-time budget of one solve (passed to :func:`hetsched.solve`); a solve that hits
        it keeps its best allocation and the round log says so.
    options : SimOptions, optional
        Mechanism options for a policy (``reallocate``, ``rule``, ``min_solve_interval``,
        ``arrivals``, ``backfill``, ...); ``mechanism`` must be "rounds".
    synchronous : {"FULL", "NORMAL", "OFF", "EXTRA"}, default "FULL"
        SQLite durability (see :class:`~hetsched.online.store.Store`).

    Raises
    ------
    ValidationError
        Bad arguments; a store written for another cluster, round length or scheduler.
    StoreLockedError, StoreCorruptError, StoreVersionError
        The store is open elsewhere, unreadable, or newer than this version.

    Examples
    --------
    >>> import hetsched as hs
    >>> sched = hs.OnlineScheduler("max_min_fairness", hs.Cluster({"v100": 1, "k80": 1}))
    >>> sched.submit("a", throughputs={"v100": 2.0, "k80": 1.0}, total_steps=7200.0)
    >>> plan = sched.next_round(0.0)
    >>> plan.assignments[["job_id", "gpu_type", "gpus"]].values.tolist()
    [['a', 'v100', 1]]
    >>> sched.report("a", "v100", steps=720.0, seconds=360.0)
    >>> float(sched.estimates().loc["a", "v100"])
    2.0
    >>> sched.close()
    """

    def __init__(self, scheduler: Any, cluster: Cluster, *, store: Any = None, round_seconds: float = 360.0,
                 reference: ThroughputCatalogue | None = None, ema_alpha: float = 0.25, completion: str = "nearest",
                 learn: bool = True, solve_time_limit: float | None = None, options: SimOptions | None = None,
                 synchronous: str = "FULL") -> None:
        if not isinstance(cluster, Cluster):
            raise ValidationError(f"`cluster` must be a hetsched.Cluster; got {type(cluster).__name__}.")
        check_bool(learn, "learn")
        opts = options if options is not None else SimOptions()
        if not isinstance(opts, SimOptions):
            raise ValidationError(f"`options` must be a hetsched.SimOptions or None; got {type(options).__name__}.")
        if opts.mechanism != "rounds":
            raise ValidationError(f"`options.mechanism` must be 'rounds' online (whole GPUs per round); "
                                  f"got {opts.mechanism!r}.")
        if solve_time_limit is not None:
            check_positive(solve_time_limit, "solve_time_limit")
            opts = opts.replace(solve_time_limit=float(solve_time_limit))
        self.round_seconds = check_positive(round_seconds, "round_seconds")
        self.cluster = cluster
        self.gpu_types = tuple(cluster.gpu_types)
        self.capacities = cluster.capacities(self.gpu_types).astype(np.int64)
        self.scheduler = as_scheduler(scheduler, opts)
        self.learn = bool(learn)
        self.estimator = ThroughputEstimator(self.gpu_types, reference, ema_alpha=ema_alpha, completion=completion)
        self.reference = reference
        self._policy = getattr(self.scheduler, "policy", None)
        self._requires = set(getattr(self._policy, "requires", ()))
        self._elastic = bool(getattr(self._policy, "emits_configurations", False))
        self._binds = _has_job_tables(self._policy)
        self._sensitive = getattr(self._policy, "placement_sensitivity", None) is not None
        if self.learn or np.ndim(getattr(self._policy, "restart_penalty", 0.0)) != 0:
            _check_learnable(self._policy)
        self.sides = SideRates(len(self.gpu_types))
        self._row_base: np.ndarray | None = None      # per row of the last plan: the job's own estimate there
        self._checked = getattr(self.scheduler, "rows_checked", False) is True
        self._placer = RoundPlacer(cluster, self.gpu_types) if cluster.topology is not None else None
        self._lock = threading.RLock()
        self._broken: str | None = None
        self.jobs = JobTable(len(self.gpu_types))
        self._state: Any = None
        self._rows: RoundRows | None = None
        self._round = 0
        self._last_now: float | None = None
        self._changed = False
        self._est_cache: tuple[np.ndarray, np.ndarray] | None = None   # (active, T) of the last view
        self._obs_dirty = True
        self._offsets: np.ndarray | None = None
        self._match_dirty: set[int] = set()
        self._arrays = ArrayTable()
        self._server_of_gpu: list[str] | None = None   # server name of each global GPU id
        self._stored = 0                                # bytes of round state the last commit wrote
        self._store = Store(store, synchronous=synchronous)
        try:
            self._open()
        except BaseException:
            self._store.close()
            raise

    # ------------------------------------------------------------------ store
    def _config(self) -> dict[str, Any]:
        topo = self.cluster.topology
        servers = None if topo is None else [[str(n), str(topo.gpu_types[int(k)]), int(g)] for n, k, g in
                                             zip(topo.server_names, topo.server_type, topo.server_gpus)]
        return {"gpu_types": list(self.gpu_types), "capacities": self.capacities.tolist(), "servers": servers,
                "round_seconds": self.round_seconds, "scheduler": scheduler_label(self.scheduler)}

    def _open(self) -> None:
        cfg = self._config()
        st = self._store
        if st.is_new:
            self._state = self.scheduler.initial_state(0.0)
            self._snapshot(None)   # a state with no data-only encoding fails here, not at the first plan
            with st.transaction() as cur:
                cur.execute("INSERT INTO meta VALUES ('config', ?)", (json.dumps(cfg, sort_keys=True),))
            return
        old = st.config()
        diff = sorted(k for k in cfg if old.get(k) != cfg[k])
        if diff:
            k = diff[0]
            raise ValidationError(f"store {st.where!r} was written for {k}={old.get(k)!r}; this scheduler has "
                                  f"{k}={cfg[k]!r}. Open it with the same cluster, round length and scheduler, "
                                  "or use a new store.")
        conn = st.conn
        assert conn is not None
        try:
            self.jobs.load(conn.execute("SELECT * FROM jobs ORDER BY num").fetchall(), self.gpu_types)
            J = self.jobs
            for num, k, ema, n in conn.execute("SELECT num, type, ema, n FROM measured"):
                J.ema[num, k] = ema
                J.n_measured[num, k] = n
            self._match_dirty = set(np.flatnonzero((J.view("n_measured") > 0).sum(axis=1) >= 2).tolist())
            self.sides.load(conn.execute("SELECT num, other, type, given, ema, n FROM side_rates ORDER BY num, other, "
                                         "type"))
            snap = conn.execute("SELECT round, now, tree FROM snapshot WHERE id = 1").fetchone()
            if snap is None:
                self._state = self.scheduler.initial_state(0.0)
            else:
                self._round, self._last_now = int(snap[0]), float(snap[1])
                data = decode(json.loads(snap[2]), self._arrays.load(conn))
                self._state, self._rows = data["state"], data["rows"]
                self._row_base = data.get("row_base")
                if self._placer is not None:
                    self._placer.previous = self._placement_from_data(data["placer"])
                n_old = data["iso_rate"].shape[0]
                J.iso_rate[:n_old] = data["iso_rate"]
                J.last_end[:n_old] = data["last_end"]
                for num, secs in conn.execute("SELECT num, SUM(seconds) FROM reports WHERE round = ? GROUP BY num "
                                              "ORDER BY num", (self._round,)):
                    J.pending_s[num] = secs
            self._changed = st.get_meta("changed") == "1"
        except (KeyError, ValueError, IndexError, AttributeError, TypeError) as exc:
            raise StoreError(f"store {st.where!r}: its contents could not be read back ({type(exc).__name__}: {exc}); "
                             "it is not reset.") from None
        log.info("opened store %s: %d jobs (%d active), %d rounds planned", st.where, J.n, J.active().size,
                 self._round)

    def close(self) -> None:
        """Close the store (idempotent); the state stays in the file."""
        with self._lock:
            self._store.close()

    def __enter__(self) -> OnlineScheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _usable(self) -> None:
        if self._store.conn is None:
            raise StoreError(f"this OnlineScheduler's store {self._store.where!r} is closed.")
        if self._broken is not None:
            raise StoreError(f"this OnlineScheduler stopped after an error in next_round ({self._broken}); its "
                             f"in-memory state may be partial. Open a new OnlineScheduler on {self._store.where!r} "
                             "(the store holds the last committed state).")

    # ------------------------------------------------------------------ jobs
    def _num(self, job_id: Any, *, need_active: bool = True) -> int:
        if isinstance(job_id, bool) or not isinstance(job_id, (str, int, np.integer)):
            raise ValidationError(f"`job_id` must be a str or int; got {job_id!r}.")
        num = self.jobs.index.get(id_key(job_id))
        if num is None:
            raise ValidationError(f"`job_id` {job_id!r} is not a submitted job.")
        status = int(self.jobs.status[num])
        if need_active and status != ACTIVE:
            raise ValidationError(f"`job_id` {job_id!r} is {STATUS_NAMES[status]}; only active jobs can be reported, "
                                  "completed or cancelled.")
        return num

    def submit(self, job_id: str | int, *, job_type: str | None = None, scale_factor: int = 1,
               throughputs: Mapping[str, float] | None = None, total_steps: float | None = None,
               weight: float = 1.0, entity: str | None = None, arrival: float | None = None,
               deadline: float | None = None, spread_throughputs: Mapping[str, float] | None = None,
               pair_throughputs: Mapping[Any, Mapping[str, Any]] | None = None) -> None:
        """Add a job (active from the next plan on).

        Parameters
        ----------
        job_id : str or int
            Unique among all jobs ever submitted to this store.
        job_type : str, optional
            Its model; with a ``reference`` row for ``(job_type, scale_factor)`` the job starts
            from that profile.
        scale_factor : int, default 1
            GPUs the job uses at once (its gang).
        throughputs : mapping GPU type -> steps/s, optional
            Measured or estimated throughputs (override the reference; 0: cannot run there);
            types left out are estimated.
        total_steps : float, optional
            Steps to run, when known (policies that need remaining steps require it).
        weight : float, default 1
        entity : str, optional
            Owner (hierarchical policies require it).
        arrival : float, optional
            Arrival time on the caller's clock; default the last plan's time (0 before any).
        deadline : float, optional
            Absolute deadline (SLO policies).
        spread_throughputs : mapping GPU type -> steps/s, optional
            Unconsolidated throughputs: the job's gang spread over several servers
            (placement-sensitive policies, ``placement_sensitivity="workload"``). Types left
            out come from the reference's unconsolidated table for ``job_type``, else equal
            the consolidated estimate (no penalty) until a report with ``spread=True``.
        pair_throughputs : mapping partner id -> (mapping GPU type -> (mine, theirs)), optional
            Space-sharing throughputs with jobs submitted earlier (same gang size): on each
            type, this job's and the partner's steps/s while they share the same GPUs
            (``(0, 0)``: they cannot share there). Used by packed policies
            (``packing="workload"``) before reports with ``partner=`` refine them; pairs given
            for neither job come from the reference's pair table for their ``job_type``.

        Raises
        ------
        ValidationError
            Duplicate id; a gang larger than every type; unknown GPU types; a value out of range;
            a field the policy requires missing; a pair partner not submitted, the job itself or
            of another gang size. Nothing is stored then.
        """
        with self._lock:
            self._usable()
            if isinstance(job_id, bool) or not isinstance(job_id, (str, int, np.integer)) or \
                    (isinstance(job_id, str) and not job_id):
                raise ValidationError(f"`job_id` must be a non-empty str or an int; got {job_id!r}.")
            if id_key(job_id) in self.jobs.index:
                raise ValidationError(f"`job_id` {job_id!r} was already submitted (ids are unique per store).")
            check_nonempty_str(job_type, "job_type", allow_none=True)
            sf = check_int(scale_factor, "scale_factor", low=1)
            if sf > int(self.capacities.max()):
                raise ValidationError(f"`scale_factor` {sf} is larger than every GPU type of the cluster "
                                      f"(largest: {int(self.capacities.max())} GPUs).")
            w = check_real(weight, "weight", low=WEIGHT_RANGE[0], high=WEIGHT_RANGE[1])
            total = check_real(total_steps, "total_steps", low=0.0, low_open=True, high=STEPS_MAX, allow_none=True)
            if total is None and "steps_remaining" in self._requires:
                raise ValidationError(f"`total_steps` is required: policy {self._policy.name!r} needs remaining steps.")
            check_nonempty_str(entity, "entity", allow_none=True)
            if entity is None and "entities" in self._requires:
                raise ValidationError(f"`entity` is required: policy {self._policy.name!r} needs entities.")
            arr = (self._last_now or 0.0) if arrival is None else check_real(arrival, "arrival")
            dl = check_real(deadline, "deadline", allow_none=True)
            profile = self._profile(throughputs, job_type, sf)
            if profile is not None and not (profile > 0).any() and not np.isnan(profile).any():
                raise ValidationError(f"`throughputs` of job {job_id!r} are 0 on every GPU type; it could never run.")
            prof_json = None if profile is None else json.dumps(
                {t: float(v) for t, v in zip(self.gpu_types, profile) if not math.isnan(v)})
            spread = None if spread_throughputs is None else self._rates(spread_throughputs, "spread_throughputs")
            pairs = self._pair_rates(pair_throughputs, sf)
            j = self.jobs.n
            side = SideRates(len(self.gpu_types))      # this job's rates, checked before anything is stored
            if spread is not None:
                side.give(j, SPREAD, spread)
            for p, mine, theirs in pairs:
                side.give(j, p, mine)
                side.give(p, j, theirs)
            side_rows = [r for key in side.given for r in side.store_rows(*key)]
            with self._store.transaction() as cur:
                self.jobs.add(job_id, job_type=job_type, sf=sf, weight=w, total=total, arrival=arr, deadline=dl,
                              entity=entity, profile=profile)
                try:
                    cur.execute("INSERT INTO jobs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", self.jobs.job_row(j, prof_json))
                    cur.executemany("INSERT INTO side_rates VALUES (?,?,?,?,?,?)", side_rows)
                    cur.execute("UPDATE meta SET value = '1' WHERE key = 'changed'")
                except BaseException:
                    self.jobs.pop_last()
                    raise
            for key, v in side.given.items():
                self.sides.give(*key, v)
            self._changed = True

    def _rates(self, rates: Any, name: str) -> np.ndarray:
        """A mapping GPU type -> steps/s as a vector over the cluster's types (NaN: not given)."""
        check_mapping(rates, name, rule="a mapping GPU type -> steps/s")
        out = np.full(len(self.gpu_types), np.nan)
        for t, v in rates.items():
            if t not in self.gpu_types:
                raise ValidationError(f"`{name}` names GPU type {t!r}, which the cluster lacks "
                                      f"(types: {list(self.gpu_types)}).")
            x = check_real(v, f"{name}[{t!r}]", low=0.0, high=THROUGHPUT_RANGE[1])
            if 0 < x < THROUGHPUT_RANGE[0]:
                raise ValidationError(f"`{name}[{t!r}]` must be 0 or in [{THROUGHPUT_RANGE[0]:g}, "
                                      f"{THROUGHPUT_RANGE[1]:g}] steps/s; got {v!r}.")
            out[self.gpu_types.index(t)] = x
        return out

    def _pair_rates(self, pairs: Any, sf: int) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """``pair_throughputs`` of a submit as (partner number, mine, theirs) vectors."""
        if pairs is None:
            return []
        if not isinstance(pairs, Mapping):
            raise ValidationError("`pair_throughputs` must be a mapping partner id -> {GPU type: (mine, theirs)}; "
                                  f"got {type(pairs).__name__}.")
        out = []
        for pid, rates in pairs.items():
            p = self._num(pid, need_active=False)
            if int(self.jobs.sf[p]) != sf:
                raise ValidationError(f"`pair_throughputs` partner {pid!r} uses {int(self.jobs.sf[p])} GPUs and this "
                                      f"job {sf}; only jobs with equal gangs share GPUs.")
            if not isinstance(rates, Mapping):
                raise ValidationError(f"`pair_throughputs[{pid!r}]` must be a mapping GPU type -> (mine, theirs); "
                                      f"got {type(rates).__name__}.")
            both = {}
            for t, v in rates.items():
                if not isinstance(v, (tuple, list)) or len(v) != 2:
                    raise ValidationError(f"`pair_throughputs[{pid!r}][{t!r}]` must be a pair (mine, theirs) of "
                                          f"steps/s; got {v!r}.")
                both[t] = v
            mine = self._rates({t: v[0] for t, v in both.items()}, f"pair_throughputs[{pid!r}] (mine)")
            theirs = self._rates({t: v[1] for t, v in both.items()}, f"pair_throughputs[{pid!r}] (theirs)")
            out.append((p, mine, theirs))
        return out

    def _profile(self, throughputs: Mapping[str, float] | None, job_type: str | None, sf: int) -> np.ndarray | None:
        """The reference row of the job's type and gang (NaN where unknown), overridden by the
        ``throughputs`` a submit gives (checked as :meth:`_rates` checks rates)."""
        prof = self.estimator.profile(job_type, sf)
        if throughputs is None:
            return prof
        given = self._rates(throughputs, "throughputs")
        out = np.full(len(self.gpu_types), np.nan) if prof is None else prof
        named = ~np.isnan(given)  # a given rate is finite (check_real refuses NaN)
        out[named] = given[named]
        return out

    def _finish(self, job_id: Any, now: float | None, status: int) -> None:
        with self._lock:
            self._usable()
            num = self._num(job_id)
            t = check_real(now, "now", allow_none=True)
            with self._store.transaction() as cur:
                cur.execute("UPDATE jobs SET status = ?, finish = ? WHERE num = ?", (status, t, num))
                cur.execute("UPDATE meta SET value = '1' WHERE key = 'changed'")
            self.jobs.status[num] = status
            self.jobs.finish[num] = np.nan if t is None else t
            self._changed = True

    def complete(self, job_id: str | int, *, now: float | None = None) -> None:
        """Mark an active job finished (at ``now``, when given); it leaves the next plan.

        Raises
        ------
        ValidationError
            Unknown id, or a job already completed or cancelled.
        """
        self._finish(job_id, now, COMPLETED)

    def cancel(self, job_id: str | int, *, now: float | None = None) -> None:
        """Remove an active job without completing it (see :meth:`complete`)."""
        self._finish(job_id, now, CANCELLED)

    def report(self, job_id: str | int, gpu_type: str, steps: float, seconds: float, *, partner: str | int | None = None,
               spread: bool = False, gpus: int | None = None) -> None:
        """What a worker measured: ``steps`` done in ``seconds`` on ``gpu_type``.

        Updates the job's steps done and (with ``learn=True``) a moving average
        (:meth:`ThroughputEstimator.update`): of the job's own throughput on that type, or,
        for a row that is not the job alone on its gang, of that row's rate:

        * ``partner``: the job shared its GPUs with ``partner`` (space sharing): the pair
          rate ``(job, partner, type)`` is learned (packed policies read it);
        * ``spread=True``: the gang ran spread over servers: its unconsolidated rate is
          learned (placement-sensitive policies read it);
        * ``gpus``: the job ran on this many GPUs (elastic policies, Sia): the measured rate
          is divided by the plan's scaling of the job's rate to that count (``OnlinePlan.
          scaling``; Sia's bootstrap model) and updates the job's own estimate. Default: the
          GPUs the last plan gave the job on that type, else its gang.

        The seconds also tell the next :meth:`next_round` how long the job's row ran.

        Raises
        ------
        ValidationError
            Unknown or inactive job; a GPU type the cluster lacks; negative or non-finite
            steps; seconds not positive; a partner that is unknown, the job itself or of
            another gang size; ``partner`` with ``spread``; ``gpus`` other than the job's gang
            that no plan gave it (nothing to scale by). Nothing is stored then.
        """
        with self._lock:
            self._usable()
            num = self._num(job_id)
            if not isinstance(gpu_type, str) or gpu_type not in self.gpu_types:
                raise ValidationError(f"`gpu_type` must be one of the cluster's types {list(self.gpu_types)}; "
                                      f"got {gpu_type!r}.")
            k = self.gpu_types.index(gpu_type)
            st = check_nonneg(steps, "steps")
            sec = check_positive(seconds, "seconds")
            other = self._other(num, partner, check_bool(spread, "spread"))
            factor = self._factor(num, k, gpus)
            J = self.jobs
            learn = self.learn and (other is not None or factor is not None)
            if other is None:
                old, n_old = float(J.ema[num, k]), int(J.n_measured[num, k])
                obs = st / sec / (factor if factor is not None else 1.0)
            else:
                old, n_old = self.sides.ema_of(num, other, k)
                obs = st / sec
            ema = self.estimator.update(old, obs) if learn else old
            n_meas = n_old + (1 if learn else 0)
            rate = float(J.iso_rate[num])
            iso = float(J.iso_time[num]) + (st / rate if st > 0 and math.isfinite(rate) and rate > 0 else 0.0)
            done = float(J.done[num]) + st
            with self._store.transaction() as cur:
                cur.execute("INSERT INTO reports (round, num, type, steps, seconds) VALUES (?,?,?,?,?)",
                            (self._round, num, k, st, sec))
                if learn and other is None:
                    cur.execute("INSERT OR REPLACE INTO measured VALUES (?,?,?,?)", (num, k, ema, n_meas))
                elif learn:
                    g = self.sides.given.get((num, other))
                    given = None if g is None or math.isnan(g[k]) else float(g[k])
                    cur.execute("INSERT OR REPLACE INTO side_rates VALUES (?,?,?,?,?,?)",
                                (num, other, k, given, ema, n_meas))
                cur.execute("UPDATE jobs SET steps_done = ?, iso_time = ? WHERE num = ?", (done, iso, num))
            J.done[num] = done
            J.iso_time[num] = iso
            J.pending_s[num] += sec
            if learn and other is None:
                J.ema[num, k] = ema
                J.n_measured[num, k] = n_meas
                self._obs_dirty = True
                self._match_dirty.add(num)
            elif learn:
                self.sides.learn(num, other, k, ema, n_meas)

    def _other(self, num: int, partner: Any, spread: bool) -> int | None:
        """The ``other`` of a side rate a report is about (None: the job's own rate)."""
        if partner is None:
            return SPREAD if spread else None
        if spread:
            raise ValidationError("give `partner` (space sharing) or `spread=True` (a spread gang), not both: a "
                                  "shared gang is consolidated.")
        if isinstance(partner, bool) or not isinstance(partner, (str, int, np.integer)):
            raise ValidationError(f"`partner` must be a job id (str or int) or None; got {partner!r}.")
        p = self.jobs.index.get(id_key(partner))
        if p is None:
            raise ValidationError(f"`partner` {partner!r} is not a submitted job.")
        if p == num:
            raise ValidationError(f"`partner` {partner!r} is the reporting job itself; a job cannot share with itself.")
        if int(self.jobs.sf[p]) != int(self.jobs.sf[num]):
            raise ValidationError(f"`partner` {partner!r} uses {int(self.jobs.sf[p])} GPUs and the job "
                                  f"{int(self.jobs.sf[num])}; only jobs with equal gangs share GPUs.")
        return p

    def _factor(self, num: int, k: int, gpus: Any) -> float | None:
        """What a report on ``gpus`` GPUs of type ``k`` is divided by to give the job's own rate
        (None: it cannot be scaled, learn nothing)."""
        sf = int(self.jobs.sf[num])
        check_int(gpus, "gpus", low=1, allow_none=True)
        row = self._lease_row(num, k)
        if gpus is None:
            gpus = sf if row is None else int(self._rows.gpus[row])
        if row is not None and int(self._rows.gpus[row]) == int(gpus):
            base = float(self._row_base[row]) if self._row_base is not None else math.nan
            f = float(self._rows.rate[row]) / base if base > 0 else math.nan
            return f if math.isfinite(f) and f > 0 else None
        if int(gpus) == sf:
            return 1.0
        raise ValidationError(f"`gpus` {int(gpus)} is neither the job's gang ({sf}) nor what the last plan gave it on "
                              f"{self.gpu_types[k]!r}; a rate on that many GPUs cannot be scaled to the job's own.")

    def _lease_row(self, num: int, k: int) -> int | None:
        """The last plan's row of job ``num`` on type ``k`` when the scheduler is elastic (else None)."""
        rows = self._rows
        if not self._elastic or rows is None:
            return None
        hit = np.flatnonzero((rows.job == num) & (rows.gpu_type == k))
        return int(hit[0]) if hit.size else None

    # ------------------------------------------------------------------ estimates
    def _estimates(self, active: np.ndarray) -> np.ndarray:
        J = self.jobs
        if (self._est_cache is not None and not self._obs_dirty and self._est_cache[0].shape == active.shape
                and np.array_equal(self._est_cache[0], active)):
            return self._est_cache[1]
        if self._obs_dirty or self._offsets is None:
            measured = J.view("n_measured") > 0
            self._offsets = self.estimator.offsets(np.where(measured, J.view("ema"), np.nan))
        if self._match_dirty:
            rows = np.fromiter(sorted(self._match_dirty), dtype=np.int64)
            obs = np.where(J.n_measured[rows] > 0, J.ema[rows], np.nan)
            J.matched[rows] = self.estimator.match(obs, J.sf[rows])
            self._match_dirty.clear()
        obs = np.where(J.n_measured[active] > 0, J.ema[active], np.nan)
        T = self.estimator.complete(obs, J.sf[active], J.profile[active], offsets=self._offsets,
                                    matched=J.matched[active])
        self._est_cache = (active.copy(), T)
        self._obs_dirty = False
        return T

    def estimates(self, *, all_jobs: bool = False) -> pd.DataFrame:
        """Current throughput estimates (steps/s), one row per active job (``all_jobs``: every
        job), indexed by job id, one column per GPU type."""
        with self._lock:
            self._usable()
            nums = np.arange(self.jobs.n) if all_jobs else self.jobs.active()
            T = self._estimates(nums) if not all_jobs else self._estimates_uncached(nums)
            return pd.DataFrame(T, index=pd.Index(self.jobs.ids_array[nums], name="job_id"),
                                columns=list(self.gpu_types))

    def _estimates_uncached(self, nums: np.ndarray) -> np.ndarray:
        self._estimates(self.jobs.active())   # refresh offsets and matches
        J = self.jobs
        obs = np.where(J.n_measured[nums] > 0, J.ema[nums], np.nan)
        return self.estimator.complete(obs, J.sf[nums], J.profile[nums], offsets=self._offsets,
                                       matched=J.matched[nums])

    def side_rates(self, job_id: str | int, *, partner: str | int | None = None, spread: bool = False) -> pd.Series:
        """The job's own rate per GPU type for a pair (``partner``) or a spread gang
        (``spread=True``): the moving average of its reports where it has some, else what was
        given at submit, else NaN (the reference's table, or for spread rates the consolidated
        estimate, is used there).

        Raises
        ------
        ValidationError
            Unknown job or partner; neither ``partner`` nor ``spread``, or both.
        """
        with self._lock:
            self._usable()
            num = self._num(job_id, need_active=False)
            other = self._other(num, partner, check_bool(spread, "spread"))
            if other is None:
                raise ValidationError("give `partner` (a pair rate) or `spread=True` (a spread rate); the job's own "
                                      "rates are in estimates().")
            return pd.Series(self.sides.value(num, other), index=list(self.gpu_types), name=job_id)

    def job_table(self) -> pd.DataFrame:
        """Every submitted job: id, type, gang, status, steps done and total, arrival, finish."""
        with self._lock:
            J = self.jobs
            n = J.n
            return pd.DataFrame({
                "job_id": J.ids_array, "job_type": J.job_type, "scale_factor": J.view("sf").copy(),
                "status": [STATUS_NAMES[int(s)] for s in J.view("status")], "steps_done": J.view("done").copy(),
                "total_steps": J.view("total").copy(), "arrival": J.view("arrival").copy(),
                "finish": J.view("finish").copy(), "weight": J.view("weight").copy(),
            }, index=pd.RangeIndex(n, name="number"))

    @property
    def elastic(self) -> bool:
        """Whether the scheduler chooses GPU counts (Sia): rows may differ from the jobs' gangs."""
        return self._elastic

    @property
    def round_index(self) -> int:
        """Plans made so far."""
        return self._round

    @property
    def last_now(self) -> float | None:
        """Time of the last plan (None before the first)."""
        return self._last_now

    # ------------------------------------------------------------------ the round
    def _row_seconds(self, now: float) -> np.ndarray:
        rows = self._rows
        assert rows is not None and self._last_now is not None
        r, j = rows.members()
        rep = self.jobs.pending_s[j]
        secs = np.zeros(rows.n_rows)
        np.maximum.at(secs, r, rep)
        return np.where(secs > 0, secs, now - self._last_now)

    def _view(self, now: float, active: np.ndarray, T: np.ndarray, U: np.ndarray | None) -> RoundView:
        J = self.jobs
        total = J.total[active]
        # reported steps can exceed the total (noisy counters) while the job is not complete:
        # it is then taken to have 1 % of its steps left, never zero or negative
        left = total - J.done[active]
        remaining = np.where(np.isnan(total), STEPS_MAX, np.where(left > 0, left, 0.01 * total))
        dl = J.deadline[active]
        entities = J.entities_array[active] if J.has_entities else None
        return RoundView(
            now=now, round_index=self._round, round_seconds=self.round_seconds, cluster=self.cluster,
            gpu_types=self.gpu_types, capacities=self.capacities, jobs=active, throughputs=T, unconsolidated=U,
            scale_factors=J.sf[active], weights=J.weight[active], remaining=remaining, arrival=J.arrival[active],
            isolated_time=J.iso_time[active], deadlines=dl if np.isfinite(dl).any() else None, entities=entities,
            changed=self._changed, context={"ids": J.ids_array},
            waiting=now - np.maximum(J.arrival[active], J.last_end[active]))

    def next_round(self, now: float) -> OnlinePlan:
        """Record the last round and plan the next one, starting at ``now`` (see the module docstring).

        Parameters
        ----------
        now : float
            The caller's clock (seconds); never smaller than the last plan's.

        Returns
        -------
        OnlinePlan

        Raises
        ------
        ValidationError
            ``now`` not finite or earlier than the last plan.
        SchedulerError
            The scheduler returned rows that break a rule of the round loop. The store keeps
            the last committed state; this object refuses further calls (reopen the store).
        """
        with self._lock:
            self._usable()
            t = check_real(now, "now")
            if self._last_now is not None and t < self._last_now:
                raise ValidationError(f"`now` must not go back: the last plan was at {self._last_now!r}; got {now!r}.")
            try:
                return self._next_round(t)
            except Exception as exc:   # the in-memory state may be partly advanced: refuse more calls
                self._broken = f"{type(exc).__name__}: {exc}"
                raise

    def _next_round(self, now: float) -> OnlinePlan:
        t0 = time.perf_counter()
        J = self.jobs
        if self._rows is not None:
            sec = self._row_seconds(now)
            self._state = self.scheduler.record_round(self._state, self._rows, sec)
            r, j = self._rows.members()
            J.last_end[j] = self._last_now + sec[r]
        J.pending_s[:J.n] = 0.0
        t1 = time.perf_counter()
        active = J.active()
        T = self._estimates(active)
        if self._changed and active.size:
            s = J.sf[active]
            J.iso_rate[active] = (T * isolated_allocation_arrays(s, self.capacities, s.shape[0])).sum(axis=1)
        t2 = time.perf_counter()
        if active.size:
            U = self._spread(active, T)
            self._bind(active, T)
            view = self._view(now, active, T, U)
            rows = self.scheduler.plan_round(view, self._state)
            if not (self._checked and isinstance(rows, RoundRows)):
                check_rows(rows, view)
        else:
            rows = RoundRows.empty(info={"solved": False})
        t3 = time.perf_counter()
        spread = migrated = np.zeros(rows.n_rows, bool)
        gpu_ids: list[list[int]] | None = None
        if self._placer is not None and rows.n_rows:
            pl = self._placer.place(rows)
            rows, spread, migrated = rows.take(pl.placed), pl.spread[pl.placed], pl.migrated[pl.placed]
            gpu_ids = self._gpu_ids(rows)
        elif self._placer is not None:
            self._placer.previous = None
            gpu_ids = []
        t4 = time.perf_counter()
        info = dict(rows.info)
        if active.size and rows.n_rows:
            self._row_base = T[np.searchsorted(active, rows.job), rows.gpu_type]
        else:
            self._row_base = np.zeros(0)
        commit_s = self._commit(now, rows, gpu_ids, info, t4 - t0, active.size)
        t5 = time.perf_counter()
        plan = OnlinePlan(
            round_index=self._round, now=now, _table=functools.partial(self._assignments, rows, gpu_ids), rows=rows,
            spread=spread, migrated=migrated, solved=bool(info.get("solved", False)), info=info,
            stored_bytes=self._stored, scaling=self._scaling(rows),
            timings={"record_s": t1 - t0, "estimate_s": t2 - t1, "plan_s": t3 - t2, "place_s": t4 - t3,
                     "store_s": t5 - t4, "commit_s": commit_s, "total_s": t5 - t0})
        self._rows = rows if active.size else None
        self._last_now = now
        self._round += 1
        self._changed = False
        return plan

    def _spread(self, active: np.ndarray, T: np.ndarray) -> np.ndarray | None:
        """The spread (unconsolidated) rates the round loop sees, when anything is known of them."""
        if not (self._sensitive or self.sides.spread_known):
            return None
        return online_sensitivity(active, T, self.sides, self.reference, self._ref_rows(active), self.gpu_types)

    def _ref_rows(self, active: np.ndarray) -> np.ndarray:
        J = self.jobs
        return reference_rows(self.reference, [J.job_type[j] for j in active.tolist()], J.sf[active])

    def _bind(self, active: np.ndarray, T: np.ndarray) -> None:
        """Bind the policy's per-job tables to the active jobs and the current estimates, every
        round (a function of the stored data only, so a reopened store binds the same; the
        stored state holds no policy)."""
        st = self._state
        if not (self._binds and isinstance(st, PolicyState)):
            return
        J = self.jobs
        st.policy = bind_online(self._policy, ids=J.ids_array, active=active, scale_factors=J.sf[active], T=T,
                                sides=self.sides, reference=self.reference, rows=self._ref_rows(active),
                                gpu_types=self.gpu_types)

    def _scaling(self, rows: RoundRows) -> np.ndarray:
        base = self._row_base
        if base is None or not rows.n_rows:
            return np.ones(rows.n_rows)
        with np.errstate(divide="ignore", invalid="ignore"):
            f = rows.rate / base
        return np.where(base > 0, f, 1.0)

    def _gpu_ids(self, rows: RoundRows) -> list[list[int]]:
        prev = self._placer.previous
        if prev is None:
            return [[] for _ in range(rows.n_rows)]
        if isinstance(prev, dict):
            return [np.asarray(prev[j]).tolist() for j in rows.job.tolist()]
        pos = {j: i for i, j in enumerate(np.asarray(prev.job_ids).tolist())}
        off, gpus = prev.gpu_offset.tolist(), prev.gpus.tolist()
        return [gpus[off[p]:off[p + 1]] for p in [pos[j] for j in rows.job.tolist()]]

    def _snapshot(self, rows: RoundRows | None) -> tuple[str | None, dict[str, np.ndarray]]:
        """The round state as a JSON tree and its arrays (:mod:`.codec`); ``(None, {})`` for an
        in-memory store, which cannot be reopened."""
        if self._store.path is None:
            return None, {}
        J = self.jobs
        try:
            tree, arrays = encode({
                "state": self._state, "rows": rows,
                "placer": None if self._placer is None else self._placement_data(self._placer.previous),
                "iso_rate": J.view("iso_rate"), "last_end": J.view("last_end"), "row_base": self._row_base})
        except StateEncodingError as exc:
            raise StoreError(f"store {self._store.where!r}: the scheduler's state cannot be stored ({exc}).") from None
        return json.dumps(tree, separators=(",", ":")), arrays

    @staticmethod
    def _placement_data(prev: Any) -> dict[str, Any] | None:
        """The placer's memory of the last placement as plain arrays (see ``_placement_from_data``)."""
        if prev is None:
            return None
        if isinstance(prev, Placement):
            return {"kind": "placement", "job_ids": np.asarray(prev.job_ids), "gpu_type": prev.gpu_type,
                    "num_gpus": prev.num_gpus, "gpu_offset": prev.gpu_offset, "gpus": prev.gpus,
                    "reason": np.asarray(prev.reason), "migrated": prev.migrated, "flow_cost": int(prev.flow_cost),
                    "solver": str(prev.solver)}
        keys = list(prev)
        lists = [np.asarray(prev[k], dtype=np.int64) for k in keys]
        off = np.zeros(len(keys) + 1, np.int64)
        np.cumsum([x.size for x in lists], out=off[1:])
        return {"kind": "mapping", "job_ids": np.asarray(keys, dtype=np.int64), "gpu_offset": off,
                "gpus": np.concatenate(lists) if lists else np.zeros(0, np.int64)}

    def _placement_from_data(self, data: dict[str, Any] | None) -> Any:
        """What the placer remembered (a Placement on this cluster's topology, or job -> GPU ids)."""
        if data is None:
            return None
        off, gpus = data["gpu_offset"], data["gpus"]
        if data["kind"] == "mapping":
            return {int(j): gpus[off[i]:off[i + 1]] for i, j in enumerate(data["job_ids"].tolist())}
        if data["kind"] != "placement":
            raise ValueError(f"unknown placement kind {data['kind']!r}")
        return Placement(topology=self.cluster.topology, job_ids=data["job_ids"], gpu_type=data["gpu_type"],
                         num_gpus=data["num_gpus"], gpu_offset=off, gpus=gpus, reason=data["reason"],
                         migrated=data["migrated"], flow_cost=data["flow_cost"], solver=data["solver"])

    def _commit(self, now: float, rows: RoundRows, gpu_ids: list[list[int]] | None, info: dict[str, Any],
                plan_s: float, n_active: int) -> float:
        tree, arrays = self._snapshot(rows if n_active else None)   # an empty round records nothing
        nxt = self._round + 1
        rnd = self._round
        ids = [None] * rows.n_rows if gpu_ids is None else [" ".join(map(str, g)) for g in gpu_ids]
        leases = list(zip(rows.job.tolist(), [rnd] * rows.n_rows, rows.gpu_type.tolist(), rows.gpus.tolist(),
                          rows.partner.tolist(), ids))
        solve_s = float(info.get("solve_s", math.nan))
        with self._store.transaction() as cur:
            self._stored = 0
            if tree is not None:
                cur.execute("INSERT OR REPLACE INTO snapshot VALUES (1, ?, ?, ?)", (nxt, now, tree))
                self._arrays.write(cur, arrays)
                self._stored = len(tree) + self._arrays.written
            cur.execute("DELETE FROM leases")
            cur.executemany("INSERT INTO leases VALUES (?,?,?,?,?,?)", leases)
            cur.execute("INSERT INTO rounds VALUES (?,?,?,?,?,?,?,?)",
                        (self._round, now, n_active, rows.n_rows, int(bool(info.get("solved", False))),
                         str(info.get("solve_status", "")), None if math.isnan(solve_s) else solve_s, plan_s))
            cur.execute("UPDATE meta SET value = '0' WHERE key = 'changed'")
            c0 = time.perf_counter()
        return time.perf_counter() - c0

    def _assignments(self, rows: RoundRows, gpu_ids: list[list[int]] | None) -> pd.DataFrame:
        ids = self.jobs.ids_array
        partner = [None if p < 0 else ids[p] for p in rows.partner.tolist()]
        data: dict[str, Any] = {"job_id": ids[rows.job], "gpu_type": np.asarray(self.gpu_types, dtype=object)[rows.gpu_type],
                                "gpus": rows.gpus, "partner": partner, "throughput": rows.rate}
        if gpu_ids is not None:
            if self._server_of_gpu is None:
                topo = self.cluster.topology
                self._server_of_gpu = [topo.server_names[k] for k in topo.gpu_server.tolist()]
            names = self._server_of_gpu
            data["servers"] = [sorted({names[g] for g in gl}) for gl in gpu_ids]
            data["gpu_ids"] = [tuple(gl) for gl in gpu_ids]
        return pd.DataFrame(data)

    def __repr__(self) -> str:
        return (f"OnlineScheduler({scheduler_label(self.scheduler)!r}, store={self._store.where!r}, "
                f"jobs={self.jobs.n}, active={self.jobs.active().size}, rounds={self._round})")
