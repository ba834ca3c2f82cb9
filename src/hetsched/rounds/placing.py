"""Placement of one round's allocation rows on servers and GPU ids (min-cost flow).

Each row is one placement request under its first member's number: a space-sharing pair
is one gang, and both members hold the GPUs placed for it. A row that must be
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
from .ledger import Ledger
from .protocol import RoundRows

__all__ = ["PlacedRound", "RoundPlacer", "true_rates"]

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
    """

    placed: np.ndarray
    spread: np.ndarray
    migrated: np.ndarray
    reason: np.ndarray
    seconds: float


class RoundPlacer:
    """Places rows round after round, remembering the previous placement.

    Parameters
    ----------
    cluster : Cluster
        With a topology (:meth:`Cluster.from_servers`).
    gpu_types : tuple of str
        The simulation's type columns (rows' ``gpu_type`` index them).
    """

    def __init__(self, cluster: Cluster, gpu_types: tuple[str, ...]) -> None:
        self.cluster = cluster
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
        idx = np.flatnonzero(ask)
        self.previous = self._place(rows, idx, placed, spread, migrated, reason) if idx.size else None
        if not placed.all():
            log.info("placement left %d planned row(s) unplaced (%s)", int((~placed).sum()),
                     sorted(set(reason[~placed].tolist())))
        return PlacedRound(placed=placed, spread=spread, migrated=migrated & placed, reason=reason,
                           seconds=time.perf_counter() - t0)

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
        for previous in ((self.previous, None) if self.previous else (None,)):
            pl = place(self.cluster, rows.job[idx], types, rows.gpus[idx], previous=previous, split_large_jobs=True)
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
