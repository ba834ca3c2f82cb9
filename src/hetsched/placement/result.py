"""The result of placing one round: GPUs per job, reasons, counts and timings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..inputs.topology import Topology

__all__ = ["Placement"]


@dataclass(frozen=True, eq=False)
class Placement:
    """Which GPUs each job of a round got, or why it got none.

    GPUs are global ids of :attr:`topology` (``topology.gpu_label(g)`` gives
    ``(server name, local index)``); job ``j``'s ids are
    ``gpus[gpu_offset[j]:gpu_offset[j+1]]``. A placed job always holds exactly the number
    of GPUs it asked for, all of its type; an unscheduled job holds none.

    Attributes
    ----------
    topology : Topology
    job_ids : ndarray
        Job ids in request order.
    gpu_type : ndarray of int
        Type index per job (into ``topology.gpu_types``).
    num_gpus : ndarray of int
        GPUs asked for per job.
    gpu_offset, gpus : ndarray of int
        CSR of the GPUs each job holds.
    reason : ndarray of str
        "" for a placed job, else one of ``"too_large"``, ``"no_rack"``, ``"no_capacity"``,
        ``"rolled_back"`` (see :data:`hetsched.placement.readback.REASONS`).
    migrated : ndarray of bool
        Jobs that ran last round on their type, run now, and kept fewer than
        ``min(before, now)`` of their GPUs.
    n_placed, migrations, consolidated, multi_gpu_placed, rack_local, idle_gpus : int
        Placed jobs; migrated jobs; placed multi-GPU jobs on one server; placed multi-GPU
        jobs; placed multi-GPU jobs within one rack; usable GPUs left idle.
    flow_cost : int
        Optimal cost of the flow (integer units; a lower bound of the placement's cost).
    solver : str
    timings : dict
        ``build_s``, ``solve_s``, ``readback_s``, ``total_s``.
    info : dict
        Network size and read-back counters (``n_nodes``, ``n_arcs``, ``repaired``,
        ``rolled_back``, ``backfilled``); with an interconnect also ``subset_s`` (seconds of
        the inside-server choice), ``rechosen_chunks`` and ``best_bandwidth`` (per job).
    bandwidth : ndarray of float or None
        With an interconnect: the bandwidth (GB/s) each job's pattern is predicted to see on
        its GPUs (NaN for one GPU, unscheduled jobs and servers without a graph;
        :mod:`hetsched.placement.selection`). None without one.
    """

    topology: Topology
    job_ids: np.ndarray
    gpu_type: np.ndarray
    num_gpus: np.ndarray
    gpu_offset: np.ndarray
    gpus: np.ndarray
    reason: np.ndarray
    migrated: np.ndarray
    flow_cost: int
    solver: str
    timings: dict[str, float] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    bandwidth: np.ndarray | None = None

    # ------------------------------------------------------------------ per job
    @property
    def placed(self) -> np.ndarray:
        """Boolean mask of placed jobs."""
        return np.diff(self.gpu_offset) > 0

    @property
    def servers_used(self) -> np.ndarray:
        """Number of distinct servers per job (0 when unscheduled)."""
        srv = self.topology.gpu_server[self.gpus]
        job = np.repeat(np.arange(self.job_ids.shape[0]), np.diff(self.gpu_offset))
        if srv.size == 0:
            return np.zeros(self.job_ids.shape[0], np.int64)
        first = np.ones(srv.size, bool)
        first[1:] = (srv[1:] != srv[:-1]) | (job[1:] != job[:-1])
        # gpus are sorted by id within a job, so servers are grouped
        return np.bincount(job[first], minlength=self.job_ids.shape[0])

    @property
    def racks_used(self) -> np.ndarray:
        """Number of distinct racks per job (0 when unscheduled)."""
        n = self.job_ids.shape[0]
        if self.gpus.size == 0:
            return np.zeros(n, np.int64)
        rack = self.topology.server_rack[self.topology.gpu_server[self.gpus]]
        job = np.repeat(np.arange(n), np.diff(self.gpu_offset))
        key = np.unique(job * max(self.topology.n_racks, 1) + rack)
        return np.bincount(key // max(self.topology.n_racks, 1), minlength=n)

    def _index(self, job_id: Any) -> int:
        hits = np.flatnonzero(self.job_ids == job_id)
        if hits.size != 1:
            raise ValidationError(f"`job_id` {job_id!r} is not a job of this placement.")
        return int(hits[0])

    def gpu_ids(self, job_id: Any) -> np.ndarray:
        """Global GPU ids of ``job_id`` (empty when unscheduled)."""
        j = self._index(job_id)
        return self.gpus[self.gpu_offset[j] : self.gpu_offset[j + 1]]

    def gpus_of(self, job_id: Any) -> list[tuple[str, int]]:
        """``(server name, gpu index)`` pairs of ``job_id`` (empty when unscheduled)."""
        return [self.topology.gpu_label(int(g)) for g in self.gpu_ids(job_id)]

    def as_mapping(self) -> dict[Any, list[tuple[str, int]]]:
        """Placed job id -> ``(server name, gpu index)`` pairs."""
        names = self.topology.server_names
        srv = self.topology.gpu_server[self.gpus]
        local = self.gpus - self.topology.gpu_offset[srv]
        out: dict[Any, list[tuple[str, int]]] = {}
        for j in np.flatnonzero(self.placed).tolist():
            a, b = self.gpu_offset[j], self.gpu_offset[j + 1]
            out[self.job_ids[j].item() if hasattr(self.job_ids[j], "item") else self.job_ids[j]] = [
                (names[s], int(i)) for s, i in zip(srv[a:b].tolist(), local[a:b].tolist())
            ]
        return out

    # ------------------------------------------------------------------ counts
    @property
    def n_placed(self) -> int:
        """Number of placed jobs."""
        return int(self.placed.sum())

    @property
    def migrations(self) -> int:
        """Number of migrated jobs."""
        return int(self.migrated.sum())

    @property
    def multi_gpu_placed(self) -> int:
        """Placed jobs with more than one GPU."""
        return int((self.placed & (self.num_gpus > 1)).sum())

    @property
    def consolidated(self) -> int:
        """Placed multi-GPU jobs whose GPUs are all on one server."""
        return int(((self.num_gpus > 1) & (self.servers_used == 1)).sum())

    @property
    def consolidated_share(self) -> float:
        """``consolidated / multi_gpu_placed`` (1.0 when no multi-GPU job is placed)."""
        m = self.multi_gpu_placed
        return 1.0 if m == 0 else self.consolidated / m

    @property
    def rack_local(self) -> int:
        """Placed multi-GPU jobs whose GPUs are all in one rack."""
        return int(((self.num_gpus > 1) & (self.racks_used == 1)).sum())

    @property
    def idle_gpus(self) -> int:
        """Usable GPUs that no job holds."""
        return int(self.info.get("usable_gpus", self.topology.n_gpus)) - int(self.gpus.size)

    def summary(self) -> dict[str, Any]:
        """Counts and timings as one flat dict."""
        return {
            "jobs": int(self.job_ids.shape[0]),
            "placed_jobs": self.n_placed,
            "unscheduled_jobs": int(self.job_ids.shape[0]) - self.n_placed,
            "multi_gpu_placed": self.multi_gpu_placed,
            "consolidated": self.consolidated,
            "consolidated_share": self.consolidated_share,
            "rack_local": self.rack_local,
            "migrations": self.migrations,
            "idle_gpus": self.idle_gpus,
            "flow_cost": self.flow_cost,
            "solver": self.solver,
            **self.timings,
            **{k: v for k, v in self.info.items() if isinstance(v, (int, float))},
        }

    def to_frame(self):
        """One row per job: id, gpu_type, num_gpus, placed, reason, servers, gpus, migrated."""
        import pandas as pd

        topo = self.topology
        srv = topo.gpu_server[self.gpus]
        local = self.gpus - topo.gpu_offset[srv]
        rows_srv, rows_gpu = [], []
        for j in range(self.job_ids.shape[0]):
            a, b = self.gpu_offset[j], self.gpu_offset[j + 1]
            rows_srv.append(sorted({topo.server_names[s] for s in srv[a:b].tolist()}))
            rows_gpu.append([(topo.server_names[s], int(i)) for s, i in zip(srv[a:b].tolist(), local[a:b].tolist())])
        return pd.DataFrame(
            {
                "job_id": self.job_ids,
                "gpu_type": [topo.gpu_types[k] for k in self.gpu_type],
                "num_gpus": self.num_gpus,
                "placed": self.placed,
                "reason": self.reason,
                "servers": rows_srv,
                "gpus": rows_gpu,
                "migrated": self.migrated,
            }
        )

    def __repr__(self) -> str:
        return (
            f"Placement({self.n_placed}/{self.job_ids.shape[0]} jobs placed, "
            f"{self.consolidated}/{self.multi_gpu_placed} gangs on one server, "
            f"{self.migrations} migrations, {self.idle_gpus} GPUs idle, solver={self.solver!r})"
        )
