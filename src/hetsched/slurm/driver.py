"""SlurmDriver: an :class:`~hetsched.online.OnlineScheduler` driving a Slurm partition.

Every round (:meth:`SlurmDriver.run_round`):

1. **read** the partition's nodes (one ``sinfo``) and, when the usable GPUs changed (a node
   drained, down, back or added), :meth:`~hetsched.online.OnlineScheduler.resize` the
   online scheduler's cluster, keeping every job;
2. **read** the partition's jobs (one ``squeue``) and **reconcile** them with the store:
   a job new to hetsched is submitted (its gang from ``--gres=gpu:N``, the rest from its
   ``--comment``, :mod:`.requests`; an adaptive scheduler's job names its ``model``);
3. **read progress** from the spool directory (:mod:`.spool`) and report it to the online
   scheduler; a report below an earlier one is refused, logged and counted, naming the job;
   then a job finished or cancelled outside hetsched, or gone from Slurm, is completed or
   cancelled, except a job the grace signal ended before it could catch it (FAILED by
   ``SIGUSR1``: it had just started), which is requeued held to resume from its checkpoint;
4. **plan** the next round (:meth:`OnlineScheduler.next_round`, committed to the store);
5. **apply** it, batched (:mod:`.commands`): a running job whose lease is renewed on the same
   GPU type, count and nodes keeps running; the other running jobs get the grace signal
   (``USR1``, :attr:`grace_s` seconds to checkpoint) and are requeued held (Slurm then
   sends SIGTERM, and SIGKILL after its ``KillWait``); planned jobs get a lease file, their
   GRES type and count and nodes, and are released. An adaptive job's lease also holds the
   batch the plan runs it at, rewritten in place when only the batch changes.

A round acts only on what the store committed, and applying a plan twice is applying it
once, so a driver killed at any point and started again (:meth:`SlurmDriver.recover`, run
by the constructor) re-applies the last committed plan: no job is lost or run twice.
In shadow mode it reads and plans but never acts; it logs what it would do.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ..inputs.throughputs import ThroughputCatalogue
from ..online import OnlineScheduler
from ..validation import check_bool, check_nonneg, check_positive
from .cluster import SlurmCluster, read_cluster
from .commands import CommandLayer, SlurmCommandError
from .records import SlurmJob, Start
from .requests import parse_request
from .spool import ProgressLine, Spool

__all__ = ["RoundSummary", "SlurmDriver"]

log = logging.getLogger(__name__)

#: Seconds between a requeue and a restart of the same job (Slurm's credentials have one-second
#: resolution: a job restarted in the second its last run was stopped is killed as "revoked").
REQUEUE_SETTLE_S = 2.0
#: Seconds between two looks at the queue while requeued jobs settle.
REQUEUE_POLL_S = 0.5


@dataclass
class RoundSummary:
    """What one round of the driver read and did.

    Attributes
    ----------
    round_index : int
        The online scheduler's plan number (-1: no plan, the round was skipped).
    now : float
    skipped : str or None
        Why the round planned nothing (``squeue`` failed, no usable GPU), else None.
    submitted, completed, cancelled, reports, refused : int
        Jobs submitted, completed and cancelled this round; reports applied and refused.
    kept, started, preempted : list of str
        Job ids whose lease was renewed, that were (or in shadow mode would be) started,
        and preempted.
    requeued_failed : list of str
        Jobs that Slurm called FAILED because the grace signal ended their run (it arrived
        before they installed their handler), requeued held instead of ended (in shadow
        mode: that would be).
    failures : int
        Slurm commands that failed this round.
    shadow : bool
    predicted_mean_finish_s : tuple of float
        Shadow mode: mean predicted time to finish of the active jobs, as Slurm runs them
        now and as the plan would (remaining steps over the estimated rate; jobs that would
        not run are left out of the mean and counted in ``predicted_idle``).
    predicted_idle : tuple of int
        Active jobs without GPUs now and under the plan.
    driver_s, plan_s : float
        Seconds of the round outside ``next_round``, and inside it.
    """

    round_index: int
    now: float
    skipped: str | None = None
    submitted: int = 0
    completed: int = 0
    cancelled: int = 0
    reports: int = 0
    refused: int = 0
    kept: list[str] = field(default_factory=list)
    started: list[str] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    requeued_failed: list[str] = field(default_factory=list)
    failures: int = 0
    shadow: bool = False
    predicted_mean_finish_s: tuple[float, float] = (math.nan, math.nan)
    predicted_idle: tuple[int, int] = (0, 0)
    driver_s: float = 0.0
    plan_s: float = 0.0


class SlurmDriver:
    """Drives a Slurm partition with an online scheduler (see the module docstring and
    ``docs/slurm.md``).

    Parameters
    ----------
    scheduler : str, Policy or RoundScheduler
        Any scheduler :class:`~hetsched.online.OnlineScheduler` takes (a policy name such
        as ``"max_min_fairness"``, :class:`hetsched.Tiresias`, ...).
    commands : CommandLayer
        The command layer: :class:`~hetsched.slurm.commands.SlurmCommands` on a real
        cluster, :class:`~hetsched.slurm.fake.FakeSlurm` in memory.
    spool : path
        The spool directory jobs report to (:mod:`hetsched.slurm.progress`).
    reference : ThroughputCatalogue, optional
        The throughput table: its GPU types are the cluster's types (every GRES type must
        be one) and its rows are the priors of the jobs' ``job_type``.
    gpu_types : sequence of str, optional
        The GPU types without a table (required then; ignored with one).
    store : path, optional
        The online store (SQLite); None keeps the state in memory (nothing survives).
    round_seconds : float, default 360
    grace_s : float, default 0
        Seconds between the ``USR1`` sent to a preempted job and its requeue (0: no
        ``USR1``; Slurm's SIGTERM and ``KillWait`` are the only grace).
    restart_wait_s : float, default 10
        How long a round waits for the jobs it preempted to be back in the queue when the
        plan starts them elsewhere (another GPU type or count); those not back by then start
        next round.
    shadow : bool, default False
        Read and plan, never act: log the starts and preemptions it would make.
    clock : callable, default time.time
        Seconds (the online scheduler's clock: arrivals, rounds).
    sleep : callable, default time.sleep
    **online : Any
        Passed to :class:`OnlineScheduler` (``options``, ``solve_time_limit``,
        ``synchronous``, ``learn``, ...); ``consolidate`` defaults to True (a gang is one
        node: Slurm's ``--gres`` is per node).

    Raises
    ------
    ValidationError
        Bad arguments; a GRES type missing from the throughput table.
    SlurmCommandError
        Slurm cannot be read at start (the driver needs its nodes once).
    """

    def __init__(self, scheduler: Any, *, commands: CommandLayer, spool: str | os.PathLike,
                 reference: ThroughputCatalogue | None = None, gpu_types: Any = None, store: Any = None,
                 round_seconds: float = 360.0, grace_s: float = 0.0, restart_wait_s: float = 10.0,
                 shadow: bool = False,
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], Any] = time.sleep,
                 **online: Any) -> None:
        if reference is not None:
            if not isinstance(reference, ThroughputCatalogue):
                raise ValidationError(f"`reference` must be a hetsched ThroughputCatalogue or None; got "
                                      f"{type(reference).__name__}.")
            types = list(reference.gpu_types)
        elif gpu_types is not None:
            types = [str(t) for t in gpu_types]
        else:
            raise ValidationError("`gpu_types` is required without a `reference` throughput table; got neither.")
        if not types:
            raise ValidationError(f"`gpu_types` must name at least one GPU type; got {types}.")
        self.gpu_types = tuple(types)
        self.commands = commands
        self.spool = Spool(spool)
        self.round_seconds = check_positive(round_seconds, "round_seconds", unit="seconds")
        self.grace_s = check_nonneg(grace_s, "grace_s", unit="seconds")
        self.shadow = bool(check_bool(shadow, "shadow"))
        self.restart_wait_s = check_nonneg(restart_wait_s, "restart_wait_s", unit="seconds")
        self.clock, self.sleep = clock, sleep
        #: counts over the driver's life: rounds, submitted, completed, cancelled, reports,
        #: reports_refused, requests_refused, started, preempted, held, command_failures, resizes,
        #: requeued_failed (jobs the grace signal ended, requeued: see SlurmJob.killed_by_grace_signal)
        self.stats: Counter[str] = Counter()
        #: job id -> reports of it refused (they went backwards, named a GPU type the cluster
        #: lacks, could not be read, came from another user, or have no GPU type)
        self.refused_reports: Counter[str] = Counter()
        #: job id -> why hetsched does not schedule it (left held in Slurm)
        self.refused_jobs: dict[str, str] = {}
        self._progress: dict[str, list[float]] = {}   # job id -> [highest steps seen, time of the last line]
        # job id -> when its latest run started: Slurm's start time while it runs, else when it was released
        self._started: dict[str, float] = {}
        # job id -> clock() when this driver requeued it: Slurm fails a job started again in the
        # second its last run was stopped (its credential is revoked), so it waits REQUEUE_SETTLE_S
        self._requeued_at: dict[str, float] = {}
        self._cluster = self._read_cluster_or_raise()
        online.setdefault("consolidate", True)     # --gres is per node: a gang runs on one node
        self.online = OnlineScheduler(scheduler, self._cluster.cluster, store=store, round_seconds=self.round_seconds,
                                      reference=reference, resize=True, **online)
        self.recover()

    # ------------------------------------------------------------------ reading Slurm
    def _read_cluster_or_raise(self) -> SlurmCluster:
        sc = read_cluster(self.commands.nodes(), self.gpu_types)
        if sc.cluster is None:
            raise ValidationError(f"the partition has no usable node with a GPU of the types {list(self.gpu_types)} "
                                  f"(unusable: {list(sc.unusable)}); the driver needs one to start.")
        return sc

    def _failed(self, what: str, exc: Exception, summary: RoundSummary | None) -> None:
        self.stats["command_failures"] += 1
        if summary is not None:
            summary.failures += 1
        log.error("%s failed; the driver keeps its state and retries next round: %s", what, exc)

    def _refresh_cluster(self, summary: RoundSummary) -> bool:
        """Resize the online scheduler when Slurm's usable GPUs changed; False when none is usable."""
        try:
            sc = read_cluster(self.commands.nodes(), self.gpu_types)
        except SlurmCommandError as exc:
            self._failed("reading the nodes (sinfo)", exc, summary)
            return self._cluster.cluster is not None
        if sc.cluster is None:
            log.warning("no usable GPU in the partition (unusable nodes: %s): nothing is planned", list(sc.unusable))
            self._cluster = sc
            return False
        if sc != self._cluster:
            log.info("the partition's usable GPUs changed: %s (unusable: %s)", sc.cluster.as_dict(), list(sc.unusable))
            try:
                self.online.resize(sc.cluster)
            except ValidationError as exc:   # a scheduler that cannot resize: it plans on the cluster it has
                self.stats["resizes_refused"] += 1
                log.error("the online scheduler cannot be resized (%s); planning on the previous cluster", exc)
                return True
            self.stats["resizes"] += 1
        self._cluster = sc
        return True

    # ------------------------------------------------------------------ reconciliation
    def _reconcile(self, jobs: list[SlurmJob], now: float, summary: RoundSummary) -> None:
        """Submit the jobs new to hetsched; read the progress of the active ones; then complete
        or cancel the store's jobs that Slurm finished (after their last reports)."""
        with self.online.batch():      # one commit for the round's submits, reports and completions
            ended = self._reconcile_in_batch(jobs, now, summary)
        if not self.shadow:            # once the store holds their last reports
            for jid in ended:
                self.spool.remove(jid)
        if summary.requeued_failed:
            self._requeue_failed(summary)
        alive = {j.job_id for j in jobs if j.alive}
        for jid in [j for j in self.refused_jobs if j not in alive]:
            del self.refused_jobs[jid]

    def _reconcile_in_batch(self, jobs: list[SlurmJob], now: float, summary: RoundSummary) -> list[str]:
        table = self.online.job_table()
        status = dict(zip(table["job_id"].astype(str), table["status"]))
        seen, ended = set(), []
        for job in jobs:
            seen.add(job.job_id)
            st = status.get(job.job_id)
            if job.alive and st is None:
                self._submit(job, now, summary)
            elif not job.alive and st == "active" and job.killed_by_grace_signal:
                summary.requeued_failed.append(job.job_id)    # still active: requeued below
            elif not job.alive and st == "active":
                because = f" ({job.reason})" if job.reason and job.reason != "None" else ""
                ended.append((job.job_id, job.state == "COMPLETED", f"Slurm says {job.state}{because}"))
        ended += [(jid, False, "gone from Slurm's queue") for jid, st in status.items()
                  if st == "active" and jid not in seen]
        self._read_progress(self.online.job_table() if summary.submitted else table,
                            {j.job_id: j for j in jobs}, summary)
        for jid, completed, why in ended:
            self._finish(jid, now, completed, why, summary)
        return [jid for jid, _, _ in ended]

    def _requeue_failed(self, summary: RoundSummary) -> None:
        """Requeue, held, the jobs the grace signal ended before they could catch it (Slurm
        requeues a failed batch job): a preemption must not lose a job that had just started
        and not yet installed its ``SIGUSR1`` handler. It resumes from its last checkpoint
        when a plan starts it again; a failed requeue is retried next round (the job stays
        active and FAILED)."""
        ids = summary.requeued_failed
        log.warning("jobs %s failed on the grace signal (SIGUSR1 arrived before their handler was installed); "
                    "%s held, to resume from their checkpoints", ids,
                    "would requeue them" if self.shadow else "requeued")
        if not self.shadow:
            self._requeue_hold(ids, "jobs the grace signal ended", "requeued_failed", summary)

    def _submit(self, job: SlurmJob, now: float, summary: RoundSummary) -> None:
        try:
            req = parse_request(job)
            rates = dict(req.throughputs)
            adaptive = {}
            if self.online.adaptive_jobs is not None:
                # the scheduler chooses its GPU type, count and nodes: the submitted gang is a start
                adaptive = {"model": req.model, "batch_size": req.batch_size}
            else:
                if req.gpus > self._cluster.largest:
                    raise ValidationError(f"job {job.job_id} asks for {req.gpus} GPUs of one type, more than any "
                                          f"usable node has ({self._cluster.largest}); it stays held until a node "
                                          "that large joins.")
                for t, most in self._cluster.largest_of.items():
                    if most < req.gpus:        # no node has the gang's GPUs of this type: it cannot run there
                        rates[t] = 0.0
                if req.model is not None or req.batch_size is not None:
                    adaptive = {"model": req.model, "batch_size": req.batch_size}   # refused by submit, named
            self.online.submit(job.job_id, job_type=req.job_type, scale_factor=req.gpus,
                               throughputs=rates or None, total_steps=req.total_steps, weight=req.weight,
                               entity=req.entity, arrival=now, **adaptive)
        except ValidationError as exc:
            if self.refused_jobs.get(job.job_id) != str(exc):
                self.stats["requests_refused"] += 1
                log.warning("job %s is not scheduled: %s", job.job_id, exc)
            self.refused_jobs[job.job_id] = str(exc)
            return
        self.refused_jobs.pop(job.job_id, None)
        self.stats["submitted"] += 1
        summary.submitted += 1
        log.info("job %s submitted (%d GPUs)", job.job_id, req.gpus)

    def _finish(self, job_id: str, now: float, completed: bool, why: str, summary: RoundSummary) -> None:
        if completed:
            self.online.complete(job_id, now=now)
            self.stats["completed"] += 1
            summary.completed += 1
        else:
            self.online.cancel(job_id, now=now)
            self.stats["cancelled"] += 1
            summary.cancelled += 1
        log.info("job %s %s: %s", job_id, "completed" if completed else "cancelled", why)
        self._progress.pop(job_id, None)
        self._started.pop(job_id, None)

    # ------------------------------------------------------------------ progress
    def _read_progress(self, table: pd.DataFrame, jobs: Mapping[str, SlurmJob], summary: RoundSummary) -> None:
        active = table[table["status"] == "active"]
        done = dict(zip(active["job_id"].astype(str), active["steps_done"].astype(float)))
        try:
            files = self.spool.changed()
        except OSError as exc:
            log.error("the spool directory %s cannot be read: %s", self.spool.path, exc)
            return
        for jid in files.intersection(done):
            lines, bad = self.spool.read_new(jid)
            for raw in bad:
                self._refuse(jid, f"a line that is not '<time> <steps> [<GPU type>]': {raw!r}", summary)
            if lines:
                job = jobs.get(jid)
                if job is not None and job.user_id not in (None, 0, os.getuid()) and \
                        self.spool.owner(jid) not in (job.user_id, 0, os.getuid()):
                    self._refuse(jid, f"{len(lines)} line(s) in a file owned by uid {self.spool.owner(jid)}, "
                                 f"not the job's user {job.user_id}", summary)
                    continue
                if job is not None and job.running and job.start_time:
                    self._started[jid] = job.start_time
                self._apply_lines(jid, lines, job, done[jid], summary)

    def _refuse(self, job_id: str, why: str, summary: RoundSummary) -> None:
        self.refused_reports[job_id] += 1
        self.stats["reports_refused"] += 1
        summary.refused += 1
        log.warning("job %s: report refused (%s)", job_id, why)

    def _apply_lines(self, job_id: str, lines: list[ProgressLine], job: SlurmJob | None, steps_done: float,
                     summary: RoundSummary) -> None:
        """Report ``lines`` (in order) to the online scheduler: one report per run of lines on
        one GPU type; lines at or below what the store holds were applied before a restart."""
        st = self._progress.setdefault(job_id, [-math.inf, -math.inf])
        # [type, steps at its start, steps at its end, seconds, the last measurement (adaptive jobs)]
        seg: list[Any] | None = None
        segments = []
        for ln in lines:
            if ln.steps < st[0]:
                self._refuse(job_id, f"{ln.steps:g} steps reported after {st[0]:g}: reports must not go back", summary)
                continue
            kind = ln.gpu_type or (job.gpu_type if job is not None else None)
            began = st[1]
            started = self._started.get(job_id, 0.0)
            if started and ln.time >= started:
                began = max(began, started)   # the previous line (if any) was before the run's start
            st[0], st[1] = ln.steps, ln.time
            if ln.steps <= steps_done:
                continue
            if kind not in self.gpu_types:
                self._refuse(job_id, f"GPU type {kind!r} is not one of {list(self.gpu_types)}", summary)
                steps_done = ln.steps
                continue
            secs = ln.time - began if math.isfinite(began) else 0.0
            if seg is None or seg[0] != kind:
                seg = [kind, steps_done, ln.steps, 0.0, None]
                segments.append(seg)
            seg[2] = ln.steps
            seg[3] += max(secs, 0.0)
            if ln.measured is not None:
                seg[4] = ln.measured
            steps_done = ln.steps
        for kind, first, last, secs, measured in segments:
            if secs <= 0:
                self._refuse(job_id, f"{last - first:g} steps on {kind} in no measurable time", summary)
                continue
            try:
                self.online.report(job_id, kind, steps=last - first, seconds=secs, measured=measured)
            except ValidationError as exc:
                self._refuse(job_id, str(exc), summary)
                continue
            self.stats["reports"] += 1
            summary.reports += 1

    # ------------------------------------------------------------------ acting
    def _desired(self, leases: pd.DataFrame | None) -> dict[str, Start]:
        """The plan as starts: job id -> GRES type, GPUs per node and nodes."""
        out: dict[str, Start] = {}
        if leases is None or not len(leases):
            return out
        topo = self._cluster.cluster.topology if self._cluster.cluster is not None else None
        has_ids = "gpu_ids" in leases.columns
        has_batch = "batch_size" in leases.columns
        for row in leases.itertuples(index=False):
            jid, kind, gpus = str(row.job_id), str(row.gpu_type), int(row.gpus)
            ids = tuple(row.gpu_ids) if has_ids else ()
            batch = (int(row.batch_size), int(row.atomic_bsz), int(row.accum_steps)) if has_batch else None
            nodes: tuple[str, ...] = ()
            per_node: Counter[str] = Counter()
            if gpus > 1 and ids and topo is not None:
                per_node = Counter(self._cluster.node_of[topo.gpu_label(int(g))[0]] for g in ids)
                nodes = tuple(sorted(per_node))
            if len(nodes) > 1 and len(set(per_node.values())) == 1:
                # the same GPUs on every node (an adaptive job's multi-node configuration): Slurm's
                # --gres per node with NumNodes and NodeList expresses it exactly
                out[jid] = Start(jid, kind, gpus // len(nodes), nodes, batch)
                continue
            if len(nodes) > 1 and batch is not None:
                # an adaptive job's configuration of several nodes, unevenly split: --gres is per node, so it
                # asks for the larger count on as many nodes (Slurm chooses them; docs/slurm.md, Limits)
                self.stats["uneven_gangs"] += 1
                most = max(per_node.values())
                log.warning("job %s: the plan puts its %d GPUs of %s unevenly on nodes %s; asking Slurm for %d "
                            "per node on %d nodes", jid, gpus, kind, dict(per_node), most, len(nodes))
                out[jid] = Start(jid, kind, most, (), batch, len(nodes))
                continue
            if len(nodes) > 1:
                # --gres is per node: a gang the plan spread over nodes asks Slurm for one node with all
                # its GPUs, which may wait for one to free up (docs/slurm.md, Limits)
                self.stats["spread_gangs"] += 1
                log.warning("job %s: the plan spreads its %d GPUs of %s over nodes %s; asking Slurm for one node",
                            jid, gpus, kind, list(nodes))
            if len(nodes) != 1:
                # one GPU goes wherever its type is free (pinning costs one scontrol per job); after a
                # resize placement restarts and Slurm chooses
                nodes = ()
            out[jid] = Start(jid, kind, gpus, nodes, batch)
        return out

    def _apply(self, desired: Mapping[str, Start], jobs: list[SlurmJob], summary: RoundSummary) -> None:
        preempt, hold, starts, restarts = [], [], [], []
        usable = set(self._cluster.node_of.values())
        settling = self._settling()
        for job in jobs:
            want = desired.get(job.job_id)
            same = (want is not None and job.gpu_type == want.gpu_type and job.gpus == want.gpus
                    and (not want.nodes or not job.running or set(job.nodes) == set(want.nodes))
                    and (not job.running or len(job.nodes) == want.node_count)
                    and usable.issuperset(job.nodes))          # not on a node drained, down or gone
            if job.running:
                if same:
                    summary.kept.append(job.job_id)
                    if want.batch is not None and not self.shadow:    # an adaptive job's new batch, in place
                        self.spool.write_lease(want.job_id, want.gpu_type, want.gpus, want.batch)
                    continue
                preempt.append(job.job_id)
                if want is not None:
                    restarts.append(want)
            elif job.state == "PENDING":
                if not job.held:                 # released before, not started yet
                    if same:
                        summary.kept.append(job.job_id)
                        continue
                    hold.append(job.job_id)
                if want is not None and job.job_id not in settling:
                    starts.append(want)
            # other states (COMPLETING, REQUEUED, ...) are passing: the next round sees where they went
        summary.preempted = preempt
        summary.started = [s.job_id for s in starts + restarts]
        if self.shadow:
            if preempt or starts or restarts or hold:
                log.info("shadow: would preempt %s, hold %s, start %s", preempt, hold,
                         [f"{s.job_id}:{s.tres}@{','.join(s.nodes) or '*'}" for s in starts + restarts])
            return
        if preempt:
            log.info("preempting %s (grace %g s)", preempt, self.grace_s)
            if self.grace_s > 0:
                self._try("signalling preempted jobs (scancel --signal=USR1)", self.commands.signal, preempt,
                          summary=summary)
                self.sleep(self.grace_s)
            if not self._requeue_hold(preempt, "preempted jobs", "preempted", summary):
                restarts = []
        if hold and self._try("holding released jobs (scontrol hold)", self.commands.hold, hold, summary=summary):
            self.stats["held"] += len(hold)
        if restarts:
            starts += self._requeued(restarts, summary)
        if starts:
            for s in starts:
                self.spool.write_lease(s.job_id, s.gpu_type, s.gpus, s.batch)
            released = float(self.clock())
            if self._try("starting jobs (scontrol update/release)", self.commands.start, starts, summary=summary):
                self.stats["started"] += len(starts)
                for s in starts:
                    self._started[s.job_id] = released
        summary.started = [s.job_id for s in starts]
        if preempt or starts:
            log.info("round %d: kept %d, preempted %s, started %s", summary.round_index, len(summary.kept), preempt,
                     [f"{s.job_id}:{s.tres}" for s in starts])

    def _requeue_hold(self, ids: list[str], what: str, stat: str, summary: RoundSummary) -> bool:
        """``scontrol requeuehold`` the jobs ``ids``; on success count them in ``stats[stat]``
        and note when (see :meth:`_settling`). False when the command failed (logged, counted)."""
        if not self._try(f"requeueing {what} (scontrol requeuehold)", self.commands.requeue_hold, ids,
                         summary=summary):
            return False
        self.stats[stat] += len(ids)
        now = float(self.clock())
        self._requeued_at.update((j, now) for j in ids)
        return True

    def _settling(self) -> set[str]:
        """Jobs this driver requeued less than :data:`REQUEUE_SETTLE_S` ago (not started yet)."""
        now = float(self.clock())
        for jid in [j for j, t in self._requeued_at.items() if now - t >= REQUEUE_SETTLE_S]:
            del self._requeued_at[jid]
        if self._requeued_at:
            log.debug("jobs %s were requeued less than %g s ago: they start next round", sorted(self._requeued_at),
                      REQUEUE_SETTLE_S)
        return set(self._requeued_at)

    def _requeued(self, restarts: list[Start], summary: RoundSummary) -> list[Start]:
        """The jobs of ``restarts`` (just requeued, to start elsewhere) that are back in the queue
        within :attr:`restart_wait_s`, at least :data:`REQUEUE_SETTLE_S` after their requeue (Slurm
        fails a job started in the second its old run's credential was revoked); the others start
        next round."""
        want = {s.job_id: s for s in restarts}
        ready: list[Start] = []
        settle = math.ceil(REQUEUE_SETTLE_S / REQUEUE_POLL_S)
        for poll in range(1, max(settle, math.ceil(self.restart_wait_s / REQUEUE_POLL_S)) + 1):
            self.sleep(REQUEUE_POLL_S)
            if poll < settle:
                continue
            try:
                jobs = self.commands.jobs()
            except SlurmCommandError as exc:
                self._failed("reading the requeued jobs (squeue)", exc, summary)
                break
            for job in jobs:
                if job.job_id in want and job.state == "PENDING":
                    ready.append(want.pop(job.job_id))
            if not want:
                break
        if want:
            log.info("jobs %s are not back in the queue after %g s: they start next round", sorted(want),
                     self.restart_wait_s)
        return ready

    def _try(self, what: str, fn: Callable[..., Any], *args: Any, summary: RoundSummary) -> bool:
        try:
            fn(*args)
        except SlurmCommandError as exc:
            self._failed(what, exc, summary)
            return False
        return True

    # ------------------------------------------------------------------ rounds
    def recover(self) -> RoundSummary:
        """Reconcile the store with Slurm and apply the last committed plan (run by the
        constructor: after a crash this finishes what the crashed round started)."""
        t0 = time.perf_counter()
        now = max(float(self.clock()), self.online.last_now or -math.inf)
        summary = RoundSummary(round_index=self.online.round_index - 1, now=now, shadow=self.shadow)
        try:
            jobs = self.commands.jobs()
        except SlurmCommandError as exc:
            self._failed("reading the jobs (squeue)", exc, summary)
            summary.skipped = "squeue failed"
            return summary
        self._reconcile(jobs, now, summary)
        self._apply(self._desired(self.online.leases()), jobs, summary)
        summary.driver_s = time.perf_counter() - t0
        log.info("recovered: %d jobs in the store, %d started, %d preempted, %d kept", self.online.jobs.n,
                 len(summary.started), len(summary.preempted), len(summary.kept))
        return summary

    def run_round(self, now: float | None = None) -> RoundSummary:
        """One round (see the module docstring); a failed Slurm command is logged and counted
        and the round goes on with what it has (or plans nothing when ``squeue`` failed).

        Parameters
        ----------
        now : float, optional
            The round's time (default ``clock()``; never before the last round).

        Returns
        -------
        RoundSummary
        """
        t0 = time.perf_counter()
        t = float(self.clock()) if now is None else float(now)
        t = max(t, self.online.last_now or -math.inf)
        summary = RoundSummary(round_index=-1, now=t, shadow=self.shadow)
        self.stats["rounds"] += 1
        usable = self._refresh_cluster(summary)
        try:
            jobs = self.commands.jobs()
        except SlurmCommandError as exc:
            self._failed("reading the jobs (squeue)", exc, summary)
            summary.skipped = "squeue failed"
            summary.driver_s = time.perf_counter() - t0
            return summary
        by_id = {j.job_id: j for j in jobs}
        self._reconcile(jobs, t, summary)
        if not usable:
            summary.skipped = "no usable GPU"
            summary.driver_s = time.perf_counter() - t0
            return summary
        t1 = time.perf_counter()
        plan = self.online.next_round(t)
        t2 = time.perf_counter()
        summary.round_index, summary.plan_s = plan.round_index, t2 - t1
        desired = self._desired(plan.assignments)
        if self.shadow:
            self._predict(desired, by_id, summary)
        self._apply(desired, jobs, summary)
        summary.driver_s = (t1 - t0) + (time.perf_counter() - t2)
        return summary

    def _predict(self, desired: Mapping[str, Start], jobs: Mapping[str, SlurmJob], summary: RoundSummary) -> None:
        """Shadow mode: mean time to finish of the active jobs as Slurm runs them and as planned."""
        est = self.online.estimates()
        table = self.online.job_table().set_index("job_id")
        col = {t: i for i, t in enumerate(est.columns)}
        now_t, plan_t = [], []
        idle = [0, 0]
        E = est.to_numpy()
        for i, jid in enumerate(est.index.astype(str)):
            left = float(table.at[jid, "total_steps"]) - float(table.at[jid, "steps_done"])
            if not math.isfinite(left):
                continue
            for which, kind, out in ((0, getattr(jobs.get(jid), "gpu_type", None) if getattr(jobs.get(jid), "running",
                                                                                             False) else None, now_t),
                                     (1, desired[jid].gpu_type if jid in desired else None, plan_t)):
                rate = E[i, col[kind]] if kind in col else 0.0
                if rate > 0:
                    out.append(max(left, 0.0) / rate)
                else:
                    idle[which] += 1
        summary.predicted_mean_finish_s = (float(np.mean(now_t)) if now_t else math.nan,
                                           float(np.mean(plan_t)) if plan_t else math.nan)
        summary.predicted_idle = (idle[0], idle[1])
        log.info("shadow: predicted mean time to finish %.0f s as Slurm runs the jobs, %.0f s as planned "
                 "(jobs without GPUs: %d now, %d planned)", *summary.predicted_mean_finish_s, *idle)

    def run(self, rounds: int | None = None, *, stop: Callable[[], bool] | None = None) -> None:
        """Run rounds every :attr:`round_seconds` (``rounds`` of them, or until ``stop()``)."""
        done = 0
        while (rounds is None or done < rounds) and not (stop is not None and stop()):
            start = float(self.clock())
            self.run_round()
            done += 1
            if rounds is not None and done >= rounds:
                break
            wait = start + self.round_seconds - float(self.clock())
            while wait > 0 and not (stop is not None and stop()):
                self.sleep(min(wait, 1.0))
                wait = start + self.round_seconds - float(self.clock())

    def close(self) -> None:
        """Close the store (the state stays in it)."""
        self.online.close()

    def __enter__(self) -> SlurmDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
