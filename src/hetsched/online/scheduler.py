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
2. builds a :class:`~hetsched.rounds.protocol.RoundView` of the active jobs with the
   estimated throughputs (:class:`~hetsched.online.ThroughputEstimator`), remaining steps
   (total minus reported), arrivals, isolated-equivalent time and waiting time;
3. calls ``plan_round`` (a policy re-solves when it needs to, under ``solve_time_limit``),
   checks the rows, places them on servers and GPU ids when the cluster has a topology;
4. commits the scheduler's state, the rows, the placement and the round's log in one
   transaction (the state as a data-only tree whose arrays are written as small deltas of
   their last stored version, :mod:`.codec`), and returns an :class:`OnlinePlan`.

The object is three rooms behind one lock: intake and reports (:mod:`.intake`: what callers
send, checked and applied to the job table), the round step (:mod:`.step`, with the policy's
per-job tables in :mod:`.job_tables` and the stored round state in :mod:`.snapshot`) and
persistence (:mod:`.store`, the only module that speaks SQL).

The simulator with ``learn_throughputs=True`` (:func:`hetsched.sim.replay.simulate_online`)
is a driver of this same object with a simulated clock.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ..inputs.cluster import Cluster
from ..inputs.profiles import ModelProfile
from ..inputs.throughputs import ThroughputCatalogue
from ..rounds.loop import as_scheduler, scheduler_label
from ..rounds.options import MechanismOptions
from ..rounds.policy_scheduler import PolicyScheduler
from ..rounds.protocol import RoundRows
from ..validation import check_bool, check_positive, check_real
from .adaptive_jobs import OnlineAdaptiveJobs
from .estimates import Estimates
from .estimator import ThroughputEstimator
from .intake import Intake
from .job_tables import JobTables
from .sides import SideRates
from .step import OnlinePlan, RoundStep
from .store import Store, StoreError
from .table import CANCELLED, COMPLETED, JobTable

__all__ = ["OnlinePlan", "OnlineScheduler"]

log = logging.getLogger(__name__)

#: What a store reopened with ``resize=True`` may differ in (:meth:`OnlineScheduler.resize`).
_RESIZABLE = frozenset({"capacities", "servers"})


class OnlineScheduler:
    """A round scheduler driven by the caller's clock, learning throughputs, persisted in SQLite.

    Parameters
    ----------
    scheduler : str, Policy or RoundScheduler
        A policy name or object (run through :class:`~hetsched.rounds.PolicyScheduler` with
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
    options : MechanismOptions, optional
        Mechanism options for a policy (``reallocate``, ``rule``, ``min_solve_interval``,
        ``arrivals``, ``backfill``, ...; :class:`~hetsched.rounds.options.MechanismOptions`,
        or a record that embeds them such as :class:`~hetsched.SimOptions`); ``mechanism``
        must be "rounds".
    synchronous : {"FULL", "NORMAL", "OFF", "EXTRA"}, default "FULL"
        SQLite durability (see :class:`~hetsched.online.store.Store`).
    resize : bool, default False
        Reopening a store written for other GPU counts or servers (the same GPU types, round
        length and scheduler): False refuses it; True keeps every job and takes ``cluster``
        as a :meth:`resize` (a node lost or added while the process was down).
    consolidate : bool, default False
        With servers: every row of more than one GPU must be placed on one server (a cluster
        manager whose gang is one node, as Slurm's per-node ``--gres``); a row placement can
        only spread waits for the next plan instead of running spread. An adaptive
        scheduler's row of more GPUs than a server of its type has (a configuration of
        several nodes) is placed over servers.
    profiles : Mapping[str, ModelProfile], optional
        Required by (and only for) the adaptive schedulers (Pollux, AdaptiveSia, Optimus of
        :mod:`hetsched.schedulers`): the models jobs are submitted with
        (``submit(..., model=)``), e.g. :func:`hetsched.inputs.profiles.load_sia_profiles`.
        Their workers report what they measured (``report(..., measured=)``) and the
        scheduler fits its goodput models to it (:mod:`hetsched.online.adaptive_jobs`).

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
                 learn: bool = True, solve_time_limit: float | None = None, options: MechanismOptions | None = None,
                 synchronous: str = "FULL", profiles: Mapping[str, ModelProfile] | None = None,
                 resize: bool = False, consolidate: bool = False) -> None:
        if not isinstance(cluster, Cluster):
            raise ValidationError(f"`cluster` must be a hetsched.Cluster; got {type(cluster).__name__}.")
        check_bool(learn, "learn")
        self._resize_on_open = check_bool(resize, "resize")
        opts = options if options is not None else MechanismOptions()
        if not isinstance(opts, MechanismOptions):
            raise ValidationError("`options` must be a hetsched.rounds.MechanismOptions (hetsched.SimOptions is one) "
                                  f"or None; got {type(options).__name__}.")
        if opts.mechanism != "rounds":
            raise ValidationError(f"`options.mechanism` must be 'rounds' online (whole GPUs per round); "
                                  f"got {opts.mechanism!r}.")
        if solve_time_limit is not None:
            check_positive(solve_time_limit, "solve_time_limit")
            opts = opts.replace(solve_time_limit=float(solve_time_limit))
        self.round_seconds = check_positive(round_seconds, "round_seconds")
        self.cluster = cluster
        self.gpu_types = tuple(cluster.gpu_types)
        self.scheduler = as_scheduler(scheduler, opts)
        adaptive = getattr(self.scheduler, "adaptive", False) is True
        if adaptive and profiles is None:
            raise ValidationError(f"`profiles` is required: {scheduler_label(self.scheduler)!r} plans adaptive jobs, "
                                  "each submitted with the name of its model's profile (e.g. "
                                  "profiles=hetsched.inputs.profiles.load_sia_profiles()).")
        if not adaptive and profiles is not None:
            raise ValidationError(f"`profiles` is for adaptive schedulers (Pollux, AdaptiveSia, Optimus); "
                                  f"{scheduler_label(self.scheduler)!r} plans jobs with fixed throughputs.")
        #: the adaptive jobs and their workers' measurements (None for other schedulers)
        self.adaptive_jobs = OnlineAdaptiveJobs(cluster, profiles) if adaptive else None
        self.learn = bool(learn)
        self.estimator = ThroughputEstimator(self.gpu_types, reference, ema_alpha=ema_alpha, completion=completion)
        self.reference = reference
        policy = self.scheduler.policy if isinstance(self.scheduler, PolicyScheduler) else None
        tables = JobTables(policy, learn=self.learn)
        self.jobs = JobTable(len(self.gpu_types))
        if self.adaptive_jobs is not None:
            self.adaptive_jobs.table = self.jobs
        self.sides = SideRates(len(self.gpu_types))
        self._lock = threading.RLock()
        self._broken: str | None = None
        self._store = Store(store, synchronous=synchronous)
        try:
            self._step = RoundStep(self.scheduler, cluster, self.round_seconds, jobs=self.jobs, sides=self.sides,
                                   estimates=Estimates(self.jobs, self.estimator), tables=tables,
                                   reference=reference, store=self._store,
                                   elastic=policy is not None and policy.emits_configurations,
                                   adaptive=self.adaptive_jobs, consolidate=check_bool(consolidate, "consolidate"))
            self.capacities = self._step.capacities
            self._intake = Intake(self._step, self._store, self.estimator, learn=self.learn,
                                  requires=() if policy is None else tuple(policy.requires),
                                  policy_name=None if policy is None else policy.name, adaptive=self.adaptive_jobs)
            self._open()
        except BaseException:
            self._store.close()
            raise

    # ------------------------------------------------------------------ the store
    def _config(self) -> dict[str, Any]:
        """What a reopened store must match: GPU types and counts, servers, round length, scheduler."""
        topo = self.cluster.topology
        servers = None if topo is None else [[str(n), str(topo.gpu_types[int(k)]), int(g)] for n, k, g in
                                             zip(topo.server_names, topo.server_type, topo.server_gpus)]
        return {"gpu_types": list(self.gpu_types), "capacities": self.capacities.tolist(), "servers": servers,
                "round_seconds": self.round_seconds, "scheduler": scheduler_label(self.scheduler)}

    def _open(self) -> None:
        cfg = self._config()
        st = self._store
        if st.is_new:
            self._step.start()
            st.save_config(cfg)
            return
        old = st.config()
        diff = sorted(k for k in cfg if old.get(k) != cfg[k])
        resized = bool(diff) and self._resize_on_open and set(diff) <= _RESIZABLE
        if resized:
            self._check_resize(self.cluster)
        elif diff:
            k = diff[0]
            raise ValidationError(f"store {st.where!r} was written for {k}={old.get(k)!r}; this scheduler has "
                                  f"{k}={cfg[k]!r}. Open it with the same cluster, round length and scheduler, "
                                  "or use a new store.")
        try:
            self._intake.restore()
            self._step.restore(placement=not resized)
        except (KeyError, ValueError, IndexError, AttributeError, TypeError) as exc:
            raise StoreError(f"store {st.where!r}: its contents could not be read back ({type(exc).__name__}: {exc}); "
                             "it is not reset.") from None
        log.info("opened store %s: %d jobs (%d active), %d rounds planned", st.where, self.jobs.n,
                 self.jobs.active().size, self._step.round_index)
        if resized:
            log.info("store %s was written for capacities %s, servers %s: resized", st.where, old["capacities"],
                     old["servers"])
            self._save_resize()
            self._step.changed = True

    # ------------------------------------------------------------------ capacity changes
    def _check_resize(self, cluster: Any) -> None:
        if not isinstance(cluster, Cluster):
            raise ValidationError(f"`cluster` must be a hetsched.Cluster; got {type(cluster).__name__}.")
        if tuple(cluster.gpu_types) != self.gpu_types:
            raise ValidationError(f"`cluster` must have this scheduler's GPU types {list(self.gpu_types)} in this "
                                  f"order (a type may have 0 GPUs); got {list(cluster.gpu_types)}.")
        if (cluster.topology is None) != (self.cluster.topology is None):
            had = "has" if self.cluster.topology is not None else "has no"
            raise ValidationError(f"`cluster` must have servers exactly when the scheduler's cluster has them (it {had} "
                                  "a topology); build both with Cluster.from_servers or neither.")

    def _save_resize(self) -> None:
        """Record the scheduler's (new) cluster in the store with the last round's state minus its placement."""
        step = self._step
        snap = None
        if step.last_now is not None:
            tree, arrays = step.snapshot(step.rows)
            snap = None if tree is None else (tree, arrays)
        self._store.save_cluster(self._config(), snap)

    def resize(self, cluster: Cluster) -> None:
        """Plan on ``cluster`` from the next plan on: a node lost, drained or added.

        Every job keeps its state (steps, estimates, the scheduler's history); the GPU counts
        and servers change, the next plan re-solves and places afresh (jobs may move), and
        the store records the new cluster in one transaction, so a reopen continues with it.

        Parameters
        ----------
        cluster : Cluster
            The same GPU types in the same order (a type may have 0 GPUs), with servers
            (:meth:`Cluster.from_servers`) exactly when this scheduler's cluster has them.

        Raises
        ------
        ValidationError
            Other GPU types, or servers added or taken away. Nothing changes then.
        """
        with self._lock:
            self._usable()
            self._check_resize(cluster)
            if cluster == self.cluster and self._servers(cluster) == self._servers(self.cluster):
                return
            old = self.cluster
            self.cluster = cluster
            self._step.resize(cluster)
            try:
                self._save_resize()
            except BaseException:
                self.cluster = old
                self._step.resize(old)
                raise
            log.info("resized to %s", cluster.as_dict())

    @staticmethod
    def _servers(cluster: Cluster) -> Any:
        topo = cluster.topology
        return None if topo is None else (topo.server_names, topo.server_type.tolist(), topo.server_gpus.tolist())

    def close(self) -> None:
        """Close the store (idempotent); the state stays in the file."""
        with self._lock:
            self._store.close()

    def __enter__(self) -> OnlineScheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _usable(self) -> None:
        if not self._store.is_open:
            raise StoreError(f"this OnlineScheduler's store {self._store.where!r} is closed.")
        if self._broken is not None:
            raise StoreError(f"this OnlineScheduler stopped after an error ({self._broken}); its "
                             f"in-memory state may be partial. Open a new OnlineScheduler on {self._store.where!r} "
                             "(the store holds the last committed state).")

    # ------------------------------------------------------------------ intake and reports
    def submit(self, job_id: str | int, *, job_type: str | None = None, scale_factor: int = 1,
               throughputs: Mapping[str, float] | None = None, total_steps: float | None = None,
               weight: float = 1.0, entity: str | None = None, arrival: float | None = None,
               deadline: float | None = None, spread_throughputs: Mapping[str, float] | None = None,
               pair_throughputs: Mapping[Any, Mapping[str, Any]] | None = None, model: str | None = None,
               batch_size: int | None = None) -> None:
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
        model : str, optional
            Adaptive schedulers only, and required there: the job's model, a key of the
            scheduler's ``profiles``. ``scale_factor`` is then the GPUs it was submitted with,
            ``total_steps`` its target progress (default the model's completion progress:
            Pollux's statistical-efficiency-weighted iterations at its initial batch), and
            ``throughputs`` default to its first-epoch progress rate per type at its submitted
            GPUs and batch. ``job_type`` must be None or the model.
        batch_size : int, optional
            Adaptive jobs: the total batch it was submitted with (default the model's initial
            batch; Optimus runs every job at it).

        Raises
        ------
        ValidationError
            Duplicate id; a gang larger than every type; unknown GPU types; a value out of range;
            a field the policy requires missing; a pair partner not submitted, the job itself or
            of another gang size; ``model`` missing, unknown or given to a scheduler that does
            not adapt jobs. Nothing is stored then.
        """
        with self._lock:
            self._usable()
            self._intake.submit(job_id, job_type=job_type, scale_factor=scale_factor, throughputs=throughputs,
                                total_steps=total_steps, weight=weight, entity=entity, arrival=arrival,
                                deadline=deadline, spread_throughputs=spread_throughputs,
                                pair_throughputs=pair_throughputs, model=model, batch_size=batch_size)

    def _finish(self, job_id: Any, now: float | None, status: int) -> None:
        with self._lock:
            self._usable()
            self._intake.finish(job_id, now, status)

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
               spread: bool = False, gpus: int | None = None, measured: Mapping[str, Any] | None = None) -> None:
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

        An adaptive job (an adaptive scheduler) reports its progress as ``steps`` (Pollux's
        statistical-efficiency-weighted iterations) and, in ``measured``, what its agent
        measured over the round (:data:`hetsched.inputs.adaptive.REPORT_KEYS`: ``gpu_type``,
        ``nodes``, ``replicas``, ``atomic_bsz``, ``accum_steps``, ``step_time``,
        ``sync_time``, ``grad_sqr``, ``grad_var``; optionally ``epoch`` and ``metrics``, the
        pairs (progress at the end of an epoch, validation metric) completed since its last
        report, which Optimus fits its convergence curve to). The next plan fits the job's
        goodput model to it; the last measurement before a plan counts. Its throughput
        estimates are not learned (the scheduler does not read them).

        Raises
        ------
        ValidationError
            Unknown or inactive job; a GPU type the cluster lacks; negative or non-finite
            steps; seconds not positive; a partner that is unknown, the job itself or of
            another gang size; ``partner`` with ``spread``; ``gpus`` other than the job's gang
            that no plan gave it (nothing to scale by); ``measured`` missing a key, out of
            range, for another GPU type, or sent to a scheduler that does not adapt jobs.
            Nothing is stored then.
        """
        with self._lock:
            self._usable()
            self._intake.report(job_id, gpu_type, steps, seconds, partner=partner, spread=spread, gpus=gpus,
                                measured=measured)

    # ------------------------------------------------------------------ reading
    def estimates(self, *, all_jobs: bool = False) -> pd.DataFrame:
        """Current throughput estimates (steps/s), one row per active job (``all_jobs``: every
        job), indexed by job id, one column per GPU type."""
        with self._lock:
            self._usable()
            est = self._step.estimates
            nums = np.arange(self.jobs.n) if all_jobs else self.jobs.active()
            T = est.of_any(nums) if all_jobs else est.of(nums)
            return pd.DataFrame(T, index=pd.Index(self.jobs.ids_array[nums], name="job_id"),
                                columns=list(self.gpu_types))

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
            num = self._intake.number(job_id, need_active=False)
            other = self._intake.other(num, partner, check_bool(spread, "spread"))
            if other is None:
                raise ValidationError("give `partner` (a pair rate) or `spread=True` (a spread rate); the job's own "
                                      "rates are in estimates().")
            return pd.Series(self.sides.value(num, other), index=list(self.gpu_types), name=job_id)

    def job_table(self) -> pd.DataFrame:
        """Every submitted job, one row each (index: submission number).

        Returns
        -------
        DataFrame
            ``job_id``, ``job_type``, ``scale_factor``, ``status``, ``steps_done``,
            ``total_steps``, ``arrival_s`` and ``finish_s`` (seconds on the scheduler's
            clock; ``finish_s`` NaN until the job completes) and ``weight``.
        """
        with self._lock:
            return self._intake.table()

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Make the calls of the block (submits, reports, completions, ...) one store transaction:
        one commit instead of one per call, for a driver that sends thousands per round.

        A call that raises inside the block still changes nothing (it is a savepoint of its
        own). An exception that leaves the block rolls back every call of it; the object
        then refuses further calls (its memory holds them): open a new one on the store. A
        crash inside the block loses the whole block, which a driver that re-reads its
        sources (as :class:`hetsched.slurm.SlurmDriver` does) sends again.

        Examples
        --------
        >>> import hetsched as hs
        >>> sched = hs.OnlineScheduler("fifo", hs.Cluster({"v100": 2}))
        >>> with sched.batch():
        ...     for i in range(3):
        ...         sched.submit(i, throughputs={"v100": 1.0})
        >>> sched.job_table()["job_id"].tolist()
        [0, 1, 2]
        """
        with self._lock:
            self._usable()
            try:
                with self._store.batch():
                    yield
            except BaseException as exc:
                self._broken = f"a batch of calls was rolled back ({type(exc).__name__}: {exc})"
                raise

    def leases(self) -> pd.DataFrame | None:
        """What the last plan runs until the next one: its ``assignments`` (as
        :attr:`OnlinePlan.assignments`), also after the store was reopened (a driver that
        crashed between planning and acting applies it again). None before any plan with
        jobs; after a :meth:`resize` its servers and GPU ids are empty (placement restarts)."""
        with self._lock:
            self._usable()
            return self._step.last_assignments()

    @property
    def elastic(self) -> bool:
        """Whether the scheduler chooses GPU counts (Sia): rows may differ from the jobs' gangs."""
        return self._step.elastic

    @property
    def round_index(self) -> int:
        """Plans made so far."""
        return self._step.round_index

    @property
    def last_now(self) -> float | None:
        """Time of the last plan (None before the first)."""
        return self._step.last_now

    @property
    def _state(self) -> Any:
        """The round scheduler's state after the last plan (the round step's)."""
        return self._step.state

    @property
    def _rows(self) -> RoundRows | None:
        """The last plan's rows, to be recorded by the next plan (None: nothing to record)."""
        return self._step.rows

    def _snapshot(self, rows: RoundRows | None) -> tuple[str | None, dict[str, np.ndarray]]:
        """The round state with ``rows`` as the store would keep it (see :meth:`RoundStep.snapshot
        <hetsched.online.step.RoundStep.snapshot>`)."""
        return self._step.snapshot(rows)

    # ------------------------------------------------------------------ the round step
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
            last = self._step.last_now
            if last is not None and t < last:
                raise ValidationError(f"`now` must not go back: the last plan was at {last!r}; got {now!r}.")
            try:
                return self._step.next_round(t)
            except Exception as exc:   # the in-memory state may be partly advanced: refuse more calls
                self._broken = f"in next_round: {type(exc).__name__}: {exc}"
                raise

    def __repr__(self) -> str:
        return (f"OnlineScheduler({scheduler_label(self.scheduler)!r}, store={self._store.where!r}, "
                f"jobs={self.jobs.n}, active={self.jobs.active().size}, rounds={self._step.round_index})")
