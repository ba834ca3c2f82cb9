"""The round step of the online scheduler: ``next_round(now)`` records the last round, builds
the :class:`~hetsched.rounds.protocol.RoundView` of the active jobs, calls the round
scheduler, places its rows and records the round in the store (:class:`RoundStep`), and
returns an :class:`OnlinePlan`."""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ..formulations.common import isolated_allocation_arrays
from ..inputs.cluster import Cluster
from ..inputs.jobs import STEPS_MAX
from ..inputs.throughputs import ThroughputCatalogue
from ..rounds.placing import RoundPlacer, group_leaders, place_round
from ..rounds.protocol import RoundRows, RoundScheduler, RoundView, check_rows
from ..schedulers.adaptive_base import forget_cluster, relink
from .adaptive_jobs import OnlineAdaptiveJobs
from .codec import StateEncodingError
from .estimates import Estimates
from .job_tables import JobTables
from .sides import SideRates, online_sensitivity, reference_rows
from .snapshot import placement_data, placement_from_data, read_round, round_tree
from .store import Store, StoreError
from .table import JobTable

__all__ = ["OnlinePlan", "RoundStep"]

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
        :meth:`hetsched.Topology.gpu_label`); for adaptive jobs ``nodes`` (the servers it
        spans, or without a topology the fewest of its type's node size), ``batch_size`` (the
        total batch to run at), ``atomic_bsz`` and ``accum_steps`` (its split per GPU).
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


class RoundStep:
    """The round scheduler between plans, and what a plan needs of the jobs (see the module
    docstring of :mod:`hetsched.online.scheduler` for the steps of a round).

    Parameters
    ----------
    scheduler : RoundScheduler
    cluster : Cluster
    round_seconds : float
    jobs, sides, estimates
        The job table, its pair / spread rates and its estimates (shared with the intake).
    tables : JobTables
        The policy's per-job tables.
    reference : ThroughputCatalogue or None
    store : Store
    elastic : bool
        The scheduler chooses GPU counts (a row may differ from its job's gang).
    adaptive : OnlineAdaptiveJobs or None
        The adaptive jobs and their measurements (the view's ``context["adaptive"]``), when
        the scheduler adapts jobs.
    consolidate : bool
        Every multi-GPU row must run on one server (:class:`OnlineScheduler`'s ``consolidate``),
        except an adaptive job's row of more GPUs than a server of its type has (a
        configuration of several nodes, which its scheduler chose).
    """

    def __init__(self, scheduler: RoundScheduler, cluster: Cluster, round_seconds: float, *, jobs: JobTable,
                 sides: SideRates, estimates: Estimates, tables: JobTables, reference: ThroughputCatalogue | None,
                 store: Store, elastic: bool, adaptive: OnlineAdaptiveJobs | None = None,
                 consolidate: bool = False) -> None:
        self.scheduler = scheduler
        self.consolidate = consolidate
        self.cluster = cluster
        self.gpu_types = tuple(cluster.gpu_types)
        self.capacities = cluster.capacities(self.gpu_types).astype(np.int64)
        self.round_seconds = round_seconds
        self.jobs, self.sides, self.estimates, self.tables = jobs, sides, estimates, tables
        self.reference = reference
        self.store = store
        self.elastic = elastic
        self.adaptive = adaptive
        self.checked = getattr(scheduler, "rows_checked", False) is True   # the protocol's optional declaration
        self.placer = RoundPlacer(cluster, self.gpu_types) if cluster.topology is not None else None
        self.state: Any = None
        self.rows: RoundRows | None = None          # the last plan's rows (None: nothing to record)
        self.row_base: np.ndarray | None = None     # per row of the last plan: the job's own estimate there
        self.round_index = 0
        self.last_now: float | None = None
        self.changed = False                        # the active set changed since the last plan
        self._server_of_gpu: list[str] | None = None   # server name of each global GPU id

    # ------------------------------------------------------------------ state in the store
    def start(self) -> None:
        """The state of a fresh store; a state with no data-only encoding fails here, not at
        the first plan."""
        self.state = self.scheduler.initial_state(0.0)
        self.snapshot(None)

    def restore(self, *, placement: bool = True) -> None:
        """Read the last round back from the store (after the jobs, :meth:`Intake.restore
        <hetsched.online.intake.Intake.restore>`); ``placement=False`` drops the stored
        placement (it was made on servers the cluster no longer has, :meth:`resize`)."""
        snap = self.store.load_snapshot()
        J = self.jobs
        if snap is None:
            self.state = self.scheduler.initial_state(0.0)
        else:
            self.round_index, self.last_now, tree, arrays = snap
            data = read_round(tree, arrays)
            self.state, self.rows = data["state"], data["rows"]
            self.row_base = data.get("row_base")
            if self.placer is not None and placement:
                self.placer.previous = placement_from_data(data["placer"], self.cluster.topology)
            n_old = data["iso_rate"].shape[0]
            J.iso_rate[:n_old] = data["iso_rate"]
            J.last_end[:n_old] = data["last_end"]
            for num, secs in self.store.reported_seconds(self.round_index):
                J.pending_s[num] = secs
        if self.adaptive is not None:
            relink(self.state, self.adaptive)
            for rnd, num, data in self.store.load_adaptive_reports():
                d = json.loads(data)
                points = [(float(x), float(y)) for x, y in d["metrics"]]
                if rnd == self.round_index:
                    self.adaptive.measured(num, d["report"], points)
                elif points:
                    self.adaptive.metrics.setdefault(num, []).extend(points)
        self.changed = self.store.changed

    def resize(self, cluster: Cluster) -> None:
        """Plan on ``cluster`` (the same GPU types) from the next plan on: the capacities change
        in place (the intake reads the same array), placement starts afresh on its servers,
        and the next plan re-solves."""
        self.cluster = cluster
        self.capacities[:] = cluster.capacities(self.gpu_types).astype(np.int64)
        self.placer = RoundPlacer(cluster, self.gpu_types) if cluster.topology is not None else None
        self._server_of_gpu = None
        self.changed = True
        if self.adaptive is not None:
            self.adaptive.resize(cluster)
            forget_cluster(self.state)

    def snapshot(self, rows: RoundRows | None) -> tuple[str | None, dict[str, np.ndarray]]:
        """The round state as a JSON tree and its arrays (:mod:`.snapshot`); ``(None, {})``
        for an in-memory store, which cannot be reopened."""
        if self.store.path is None:
            return None, {}
        J = self.jobs
        try:
            return round_tree(state=self.state, rows=rows,
                              placer=None if self.placer is None else placement_data(self.placer.previous),
                              iso_rate=J.view("iso_rate"), last_end=J.view("last_end"), row_base=self.row_base)
        except StateEncodingError as exc:
            raise StoreError(f"store {self.store.where!r}: the scheduler's state cannot be stored ({exc}).") from None

    # ------------------------------------------------------------------ the round
    def lease(self, num: int, k: int) -> tuple[int, float] | None:
        """``(GPUs, rate over the job's own estimate)`` of the last plan's row of job ``num``
        on type ``k`` when the scheduler is elastic (else None)."""
        rows = self.rows
        if not self.elastic or rows is None:
            return None
        hit = np.flatnonzero((rows.job == num) & (rows.gpu_type == k))
        if not hit.size:
            return None
        row = int(hit[0])
        base = float(self.row_base[row]) if self.row_base is not None else math.nan
        return int(rows.gpus[row]), float(rows.rate[row]) / base if base > 0 else math.nan

    def next_round(self, now: float) -> OnlinePlan:
        """Record the last round and plan the next one at ``now`` (checked by the caller)."""
        t0 = time.perf_counter()
        J = self.jobs
        if self.rows is not None:
            sec = self._row_seconds(now)
            self.state = self.scheduler.record_round(self.state, self.rows, sec)
            r, j = self.rows.members()
            J.last_end[j] = self.last_now + sec[r]
        J.pending_s[:J.n] = 0.0
        if self.adaptive is not None:
            self.adaptive.clear_pending()
        t1 = time.perf_counter()
        active = self._fitting(J.active())
        T = self.estimates.of(active)
        if self.changed and active.size:
            s = J.sf[active]
            J.iso_rate[active] = (T * isolated_allocation_arrays(s, self.capacities, s.shape[0])).sum(axis=1)
        t2 = time.perf_counter()
        if active.size:
            U = self._spread(active, T)
            if self.tables.applies(self.state):
                self.tables.bind(self.state, ids=J.ids_array, active=active, scale_factors=J.sf[active], T=T,
                                 sides=self.sides, reference=self.reference, rows=self._ref_rows(active),
                                 gpu_types=self.gpu_types)
            view = self._view(now, active, T, U)
            rows = self.scheduler.plan_round(view, self.state)
            if not (self.checked and isinstance(rows, RoundRows)):
                check_rows(rows, view)
        else:
            rows = RoundRows.empty(info={"solved": False})
        t3 = time.perf_counter()
        spread = migrated = np.zeros(rows.n_rows, bool)
        gpu_ids: list[list[int]] | None = None
        if self.placer is not None and rows.n_rows:
            if self.consolidate:     # every gang on one server: a row placement can only spread waits
                one = rows.gpus > 1
                if self.adaptive is not None:   # except an adaptive job's configuration of several nodes
                    one &= rows.gpus <= self.adaptive.node_gpus[rows.gpu_type]
                rows = dataclasses.replace(rows, consolidated=rows.consolidated | one)
            pl = place_round(self.placer, self.scheduler, rows)
            rows, spread, migrated = rows.take(pl.placed), pl.spread[pl.placed], pl.migrated[pl.placed]
            gpu_ids = self._gpu_ids(rows)
        elif self.placer is not None:
            self.placer.previous = None
            gpu_ids = []
        t4 = time.perf_counter()
        info = dict(rows.info)
        if active.size and rows.n_rows:
            self.row_base = T[np.searchsorted(active, rows.job), rows.gpu_type]
        else:
            self.row_base = np.zeros(0)
        commit_s = self._commit(now, rows, gpu_ids, info, t4 - t0, active.size)
        t5 = time.perf_counter()
        plan = OnlinePlan(
            round_index=self.round_index, now=now, _table=functools.partial(self._assignments, rows, gpu_ids),
            rows=rows, spread=spread, migrated=migrated, solved=bool(info.get("solved", False)), info=info,
            stored_bytes=self.store.stored, scaling=self._scaling(rows),
            timings={"record_s": t1 - t0, "estimate_s": t2 - t1, "plan_s": t3 - t2, "place_s": t4 - t3,
                     "store_s": t5 - t4, "commit_s": commit_s, "total_s": t5 - t0})
        self.rows = rows if active.size else None
        self.last_now = now
        self.round_index += 1
        self.changed = False
        return plan

    def last_assignments(self) -> pd.DataFrame | None:
        """The last plan's assignments (as :attr:`OnlinePlan.assignments`), None before a plan
        with jobs; after a reopen too (the rows and placement come from the store)."""
        if self.rows is None:
            return None
        return self._assignments(self.rows, self._gpu_ids(self.rows) if self.placer is not None else None)

    def _fitting(self, active: np.ndarray) -> np.ndarray:
        """The active jobs whose gang fits the largest GPU type; the others (possible only
        after :meth:`resize` took GPUs away) wait out of the plan until GPUs come back."""
        sf = self.jobs.sf[active]
        fits = sf <= int(self.capacities.max(initial=0))
        if fits.all():
            return active
        log.warning("%d job(s) wait: their gang is larger than every GPU type now (largest %d GPUs): %s",
                    int((~fits).sum()), int(self.capacities.max(initial=0)),
                    ", ".join(map(str, self.jobs.ids_array[active[~fits]][:10])))
        return active[fits]

    def _row_seconds(self, now: float) -> np.ndarray:
        """Per row of the last plan: the seconds its members reported (the largest, for a
        pair), or the time since that plan for a row nobody reported on."""
        rows = self.rows
        assert rows is not None and self.last_now is not None
        r, j = rows.members()
        rep = self.jobs.pending_s[j]
        secs = np.zeros(rows.n_rows)
        np.maximum.at(secs, r, rep)
        return np.where(secs > 0, secs, now - self.last_now)

    def _measured_pair_rates(self, a: int, b: int, k: int) -> tuple[float, float] | None:
        """The rates jobs ``a`` and ``b`` (job numbers) reported while sharing GPUs of type
        column ``k`` (moving averages of ``report(..., partner=...)``, learned with
        ``learn=True``), or None unless both reported: what a scheduler that learns pairs
        by trying them (Gandiva) reads online, through the view's
        ``context["measured_pair_rates"]``."""
        ra, na = self.sides.ema_of(a, b, k)
        rb, nb = self.sides.ema_of(b, a, k)
        return (ra, rb) if na > 0 and nb > 0 else None

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
            now=now, round_index=self.round_index, round_seconds=self.round_seconds, cluster=self.cluster,
            gpu_types=self.gpu_types, capacities=self.capacities, jobs=active, throughputs=T, unconsolidated=U,
            scale_factors=J.sf[active], weights=J.weight[active], remaining=remaining, arrival=J.arrival[active],
            isolated_time=J.iso_time[active], deadlines=dl if np.isfinite(dl).any() else None, entities=entities,
            changed=self.changed,
            context={"ids": J.ids_array, "measured_pair_rates": self._measured_pair_rates} if self.adaptive is None
            else {"ids": J.ids_array, "adaptive": self.adaptive},
            waiting=now - np.maximum(J.arrival[active], J.last_end[active]))

    def _spread(self, active: np.ndarray, T: np.ndarray) -> np.ndarray | None:
        """The spread (unconsolidated) rates the round loop sees, when anything is known of them."""
        if not (self.tables.sensitive or self.sides.spread_known):
            return None
        return online_sensitivity(active, T, self.sides, self.reference, self._ref_rows(active), self.gpu_types)

    def _ref_rows(self, active: np.ndarray) -> np.ndarray:
        J = self.jobs
        return reference_rows(self.reference, [J.job_type[j] for j in active.tolist()], J.sf[active])

    def _scaling(self, rows: RoundRows) -> np.ndarray:
        base = self.row_base
        if base is None or not rows.n_rows:
            return np.ones(rows.n_rows)
        with np.errstate(divide="ignore", invalid="ignore"):
            f = rows.rate / base
        return np.where(base > 0, f, 1.0)

    def _gpu_ids(self, rows: RoundRows) -> list[list[int]]:
        assert self.placer is not None
        prev = self.placer.previous
        if prev is None:
            return [[] for _ in range(rows.n_rows)]
        held = rows.job[group_leaders(rows)].tolist()   # a Muri group's members hold its first row's GPUs
        if isinstance(prev, dict):
            return [np.asarray(prev[j]).tolist() for j in held]
        pos = {j: i for i, j in enumerate(np.asarray(prev.job_ids).tolist())}
        off, gpus = prev.gpu_offset.tolist(), prev.gpus.tolist()
        return [gpus[off[p]:off[p + 1]] for p in [pos[j] for j in held]]

    def _commit(self, now: float, rows: RoundRows, gpu_ids: list[list[int]] | None, info: dict[str, Any],
                plan_s: float, n_active: int) -> float:
        tree, arrays = self.snapshot(rows if n_active else None)   # an empty round records nothing
        ids = [None] * rows.n_rows if gpu_ids is None else [" ".join(map(str, g)) for g in gpu_ids]
        leases = list(zip(rows.job.tolist(), rows.gpu_type.tolist(), rows.gpus.tolist(), rows.partner.tolist(), ids))
        solve_s = float(info.get("solve_s", math.nan))
        return self.store.save_round(self.round_index, now, tree=tree, arrays=arrays, leases=leases,
                                     n_active=n_active, solved=bool(info.get("solved", False)),
                                     solve_status=str(info.get("solve_status", "")),
                                     solve_s=None if math.isnan(solve_s) else solve_s, plan_s=plan_s)

    def _batches(self, rows: RoundRows, gpu_ids: list[list[int]] | None) -> dict[str, np.ndarray]:
        """Adaptive rows: the nodes each job runs on (placement's servers, else the fewest of
        its type's node size), the total batch it is to run at, and its split into the per-GPU
        batch and accumulation steps there (0 where its profile cannot split it)."""
        A = self.adaptive
        assert A is not None
        n = rows.n_rows
        atomic, accum, n_nodes = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
        topo = self.cluster.topology
        for i in range(n):
            j, k, g = int(rows.job[i]), int(rows.gpu_type[i]), int(rows.gpus[i])
            nodes = (len({int(topo.gpu_server[x]) for x in gpu_ids[i]}) if gpu_ids is not None and gpu_ids[i]
                     else A.nodes_for(k, g))
            n_nodes[i] = nodes
            try:
                atomic[i], accum[i] = A.split_batch(j, k, nodes, g, A.batch_of(j, int(rows.batch_size[i])))
            except ValidationError as exc:
                log.warning("job %s: batch %d on %d GPU(s) of %s over %d node(s) cannot be split (%s)",
                            A.names[j], int(rows.batch_size[i]), g, self.gpu_types[k], nodes, exc)
        return {"nodes": n_nodes, "batch_size": rows.batch_size.copy(), "atomic_bsz": atomic, "accum_steps": accum}

    def _assignments(self, rows: RoundRows, gpu_ids: list[list[int]] | None) -> pd.DataFrame:
        ids = self.jobs.ids_array
        partner = [None if p < 0 else ids[p] for p in rows.partner.tolist()]
        data: dict[str, Any] = {"job_id": ids[rows.job], "gpu_type": np.asarray(self.gpu_types, dtype=object)[rows.gpu_type],
                                "gpus": rows.gpus, "partner": partner, "throughput": rows.rate}
        if self.adaptive is not None:
            data.update(self._batches(rows, gpu_ids))
        if gpu_ids is not None:
            if self._server_of_gpu is None:
                topo = self.cluster.topology
                self._server_of_gpu = [topo.server_names[k] for k in topo.gpu_server.tolist()]
            names = self._server_of_gpu
            data["servers"] = [sorted({names[g] for g in gl}) for gl in gpu_ids]
            data["gpu_ids"] = [tuple(gl) for gl in gpu_ids]
        return pd.DataFrame(data)
