"""Placement of one round's allocation rows on servers and GPU ids (min-cost flow).

Each row is one placement request under its first member's number: a space-sharing pair
is one gang, and both members hold the GPUs placed for it. The rows of one interleaving
group (``RoundRows.group``, Muri) are one request under the first row's job: every member
gets the GPUs placed for it; the placer remembers them under the first row's job
(:func:`group_leaders` maps every row to that row). A row that must be
consolidated runs only if it lands on one server: rows larger than every server of their
type are not requested at all (reason ``"cannot_consolidate"``), and one that comes back
spread is dropped (``"spread_consolidated"``). Other gangs larger than every server may
span servers of one rack and then progress at their spread (unconsolidated) throughput.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import SchedulerError
from ..inputs.cluster import Cluster
from ..placement import place
from ..placement.network_aware import BoundNetwork
from .ledger import Ledger
from .protocol import RoundRows

__all__ = ["PlacedRound", "RoundPlacer", "group_leaders", "place_round", "true_rates"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class PlacedRound:
    """What placement made of a round's rows (arrays follow the rows).

    Attributes
    ----------
    placed : ndarray of bool
        The row got its GPUs (and runs).
    spread : ndarray of bool
        Its gang spans several servers.
    migrated : ndarray of bool
        It ran last round and kept fewer GPUs than it holds now.
    reason : ndarray of object
        Why a row was not placed ("" when placed).
    seconds : float
        Wall seconds spent placing.
    rate_factor : ndarray of float or None
        With a network model: the factor each row's rates are scaled by for the bandwidth its
        GPUs and links give it (:mod:`hetsched.placement.network_aware`); None without one.
    """

    placed: np.ndarray
    spread: np.ndarray
    migrated: np.ndarray
    reason: np.ndarray
    seconds: float
    rate_factor: np.ndarray | None = None


def place_round(placer: RoundPlacer, sched: Any, rows: RoundRows) -> PlacedRound:
    """``rows`` placed: on the GPUs the scheduler chose when it places its own rows (an
    optional ``placed_gpus(rows, cluster)`` method of the scheduler returning one array of
    global GPU ids of ``cluster`` per row, or None; e.g. HiveD's cells), else by the
    min-cost flow."""
    given = getattr(sched, "placed_gpus", None)
    if callable(given):
        ids = given(rows, placer.cluster)
        if ids is not None:
            return placer.place_given(rows, ids)
    return placer.place(rows)


def group_leaders(rows: RoundRows) -> np.ndarray:
    """Per row, the row placed for it: the first row of its interleaving group, else itself."""
    lead = np.arange(rows.n_rows)
    g = np.flatnonzero(rows.group >= 0)
    if g.size:
        _, first, inv = np.unique(rows.group[g], return_index=True, return_inverse=True)
        lead[g] = g[first][inv]
    return lead


class RoundPlacer:
    """Places rows round after round, remembering the previous placement.

    Parameters
    ----------
    cluster : Cluster
        With a topology (:meth:`Cluster.from_servers`).
    gpu_types : tuple of str
        The simulation's type columns (rows' ``gpu_type`` index them).
    network : BoundNetwork, optional
        Interconnect and per-job communication (indexed by the rows' ``job``): placement then
        chooses GPUs inside servers, weighs communication in its costs, and reports a rate
        factor per row.
    """

    def __init__(self, cluster: Cluster, gpu_types: tuple[str, ...], network: BoundNetwork | None = None) -> None:
        self.cluster = cluster
        self.network = network
        self._factor: np.ndarray | None = None
        self.gpu_types = np.asarray(gpu_types, dtype=object)
        topo = cluster.topology
        largest = {t: 0 for t in gpu_types}
        for k, g in zip(topo.server_type.tolist(), topo.server_gpus.tolist()):
            t = topo.gpu_types[k]
            if t in largest:
                largest[t] = max(largest[t], int(g))
        self.largest_server = np.array([largest[t] for t in gpu_types], dtype=np.int64)
        self.previous: Any = None   # a Placement, or job -> GPU ids of the rows that ran

    def place(self, rows: RoundRows) -> PlacedRound:
        """Place ``rows`` (rows that cannot be consolidated as they must are left out)."""
        t0 = time.perf_counter()
        n = rows.n_rows
        placed = np.zeros(n, bool)
        spread = np.zeros(n, bool)
        migrated = np.zeros(n, bool)
        reason = np.full(n, "", dtype=object)
        ask = ~(rows.consolidated & (rows.gpus > self.largest_server[rows.gpu_type]))
        reason[~ask] = "cannot_consolidate"
        grouped = rows.group >= 0
        lead = group_leaders(rows)
        if grouped.any():
            ask &= lead == np.arange(n)   # one request per interleaving group: its first row's
        idx = np.flatnonzero(ask)
        factor = np.ones(n) if self.network is not None else None
        self._factor = factor
        self.previous = self._place(rows, idx, placed, spread, migrated, reason) if idx.size else None
        if grouped.any():
            follow = np.flatnonzero(lead != np.arange(n))
            for arr in (placed, spread, migrated, reason):
                arr[follow] = arr[lead[follow]]
            if factor is not None:   # the group's members run on its GPUs: its leader's bandwidth
                factor[follow] = factor[lead[follow]]
        if not placed.all():
            log.info("placement left %d planned row(s) unplaced (%s)", int((~placed).sum()),
                     sorted(set(reason[~placed].tolist())))
        return PlacedRound(placed=placed, spread=spread, migrated=migrated & placed, reason=reason,
                           seconds=time.perf_counter() - t0, rate_factor=factor)

    def place_given(self, rows: RoundRows, gpu_ids: list[np.ndarray]) -> PlacedRound:
        """Take the GPUs a scheduler chose itself (one array of global GPU ids per row; the
        rows of an interleaving group or a pair hold their first row's): checked, not solved.
        A row spreads when its GPUs sit on several servers; it migrated when its job held
        other GPUs last round. The placement becomes next round's ``previous``, as with
        :meth:`place`.

        Raises
        ------
        SchedulerError
            A row given another number of GPUs than it holds, GPUs of another type, ids
            outside the cluster, or a GPU given to two rows.
        """
        t0 = time.perf_counter()
        n = rows.n_rows
        topo = self.cluster.topology
        if len(gpu_ids) != n:
            raise SchedulerError(f"the scheduler placed {len(gpu_ids)} row(s); the plan has {n}.")
        lead = group_leaders(rows)
        spread = np.zeros(n, bool)
        migrated = np.zeros(n, bool)
        seen = np.zeros(topo.n_gpus, bool)
        gpu_server = np.repeat(np.arange(topo.n_servers), topo.server_gpus)
        old = self._previous_ids()
        now: dict[int, np.ndarray] = {}
        for i in np.flatnonzero(lead == np.arange(n)).tolist():
            g = np.asarray(gpu_ids[i], dtype=np.int64).reshape(-1)
            job = int(rows.job[i])
            if g.size != int(rows.gpus[i]) or (g.size and (g.min() < 0 or g.max() >= topo.n_gpus)):
                raise SchedulerError(f"the scheduler placed job {job} on GPUs {g.tolist()}: it needs "
                                     f"{int(rows.gpus[i])} ids in 0..{topo.n_gpus - 1}.")
            t = topo.type_index(str(self.gpu_types[rows.gpu_type[i]]))
            if (topo.server_type[gpu_server[g]] != t).any():
                raise SchedulerError(f"the scheduler placed job {job} on GPUs {g.tolist()}, not all of its row's type "
                                     f"{self.gpu_types[rows.gpu_type[i]]!r}.")
            if seen[g].any():
                raise SchedulerError(f"the scheduler placed job {job} on GPU(s) {g[seen[g]].tolist()}, which another "
                                     "row of the round holds.")
            seen[g] = True
            spread[i] = np.unique(gpu_server[g]).size > 1
            before = old.get(job)
            migrated[i] = before is not None and not np.array_equal(np.sort(before), np.sort(g))
            now[job] = g
        follow = np.flatnonzero(lead != np.arange(n))
        spread[follow], migrated[follow] = spread[lead[follow]], migrated[lead[follow]]
        self.previous = now or None
        return PlacedRound(placed=np.ones(n, bool), spread=spread, migrated=migrated,
                           reason=np.full(n, "", dtype=object), seconds=time.perf_counter() - t0,
                           rate_factor=None if self.network is None else np.ones(n))

    def _previous_ids(self) -> dict[int, np.ndarray]:
        """Job -> the GPU ids it held last round (none before a placement)."""
        prev = self.previous
        if prev is None:
            return {}
        if isinstance(prev, dict):
            return {int(j): np.asarray(g) for j, g in prev.items()}
        off, gpus = prev.gpu_offset, prev.gpus
        return {int(j): gpus[off[i]:off[i + 1]] for i, j in enumerate(np.asarray(prev.job_ids).tolist())}

    def _place(self, rows: RoundRows, idx: np.ndarray, placed: np.ndarray, spread: np.ndarray,
               migrated: np.ndarray, reason: np.ndarray) -> Any:
        """Place rows ``idx`` (filling the arrays); the placement of the rows that run is returned
        as the next round's ``previous``.

        Keeping jobs where they were can fragment servers so that a row that must be
        consolidated only fits spread; then the round is placed again from scratch (accepting
        migrations) and the attempt that drops fewer consolidated rows is kept.
        """
        types = self.gpu_types[rows.gpu_type[idx]].astype(str)
        cons = rows.consolidated[idx]
        best = None
        extra = self.network.place_kwargs(rows.job[idx]) if self.network is not None else {}
        for previous in ((self.previous, None) if self.previous else (None,)):
            pl = place(self.cluster, rows.job[idx], types, rows.gpus[idx], previous=previous, split_large_jobs=True,
                       **extra)
            ok = np.asarray(pl.placed, dtype=bool)
            sp = ok & (np.asarray(pl.servers_used) > 1)
            dropped = int((cons & sp).sum())
            if best is None or dropped < best[0]:
                best = (dropped, pl, ok, sp)
            if dropped == 0:
                break
        _, pl, ok, sp = best
        bad = cons & sp
        placed[idx] = ok & ~bad
        spread[idx] = sp & ~bad
        migrated[idx] = np.asarray(pl.migrated, dtype=bool) & ~bad
        reason[idx[~ok]] = np.asarray(pl.reason, dtype=object)[~ok]
        reason[idx[bad]] = "spread_consolidated"
        if self._factor is not None:
            self._factor[idx] = self.network.rate_factors(pl, rows.job[idx])
        if not bad.any():
            return pl   # every placed row runs: the placement itself is next round's `previous`
        off, gpus = pl.gpu_offset, pl.gpus
        jobs = np.asarray(pl.job_ids).tolist()   # the request's order, that of rows.job[idx]
        return {jobs[i]: gpus[off[i]:off[i + 1]] for i in np.flatnonzero(ok & ~bad).tolist()}


def true_rates(adaptive: Any, rows: RoundRows, spread: np.ndarray, moved: np.ndarray, ledger: Ledger, t: float,
               L: float) -> RoundRows:
    """The placed rows at the true progress rates of adaptive jobs.

    ``adaptive`` is the workload's :class:`~hetsched.inputs.adaptive.AdaptiveProgress`. Each
    row's rate becomes the job's mean progress rate over the seconds it computes this round
    (the round less the restart it pays when it starts on GPUs it did not hold, as the ledger
    charges it), on the nodes placement gave it, at the row's batch size, crossing epochs as
    the gradient statistics change. What a scheduler put in ``rate`` is only its belief.
    """
    if rows.is_pair.any():
        raise SchedulerError("adaptive jobs do not share GPUs: the scheduler returned a space-sharing pair "
                             f"(job {int(rows.job[rows.is_pair][0])}, partner {int(rows.partner[rows.is_pair][0])}).")
    j, k, g = rows.job, rows.gpu_type, rows.gpus
    held = (ledger.last_type[j] == k) & (ledger.last_gpus[j] == g) & ~moved
    restart = np.where(held, 0.0, ledger.restart_seconds[j])
    seconds = np.maximum(L - restart, 0.0)
    rate = adaptive.average_rates(j, k, g, rows.batch_size, spread, ledger.done[j], seconds)
    return rows.take(np.arange(rows.n_rows), rate=rate, spread_rate=rate)
