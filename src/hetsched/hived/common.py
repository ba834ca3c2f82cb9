"""What the HiveD scheduler and the quota baseline share: their state, the active jobs as
they see them (tenant, class, request) and the rows they return.

Both schedulers place whole gangs on GPU ids themselves (cells, or first fit on servers):
the state holds, per job that ran last round, its GPU type, class and GPU ids (and, for
HiveD, the cells it holds and the binding of virtual cells to physical ones). Run them with
``placement=False`` when the cluster has a topology, so that their placement is the one the
round loop uses (see ``docs/hived.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..inputs.cluster import Cluster
from ..inputs.topology import Topology
from ..validation import check_choice, check_real
from .cells import CellForest
from .tenants import PRIORITIES, Tenant, Tenants

__all__ = ["GUARANTEED", "OPPORTUNISTIC", "ActiveJobs", "HiveDState", "cluster_topology", "default_tenants",
           "fragmentation", "payload_gpus", "with_job_priority"]

#: Class codes in the state.
GUARANTEED, OPPORTUNISTIC = 0, 1
_EMPTY_I = np.zeros(0, dtype=np.int64)


def _i(a: Any = None) -> np.ndarray:
    return _EMPTY_I.copy() if a is None else np.asarray(a, dtype=np.int64).reshape(-1)


@dataclass(frozen=True, eq=False)
class HiveDState:
    """What the HiveD scheduler and the quota baseline remember between rounds (immutable).

    Attributes
    ----------
    job_ids : ndarray of int64
        Driver numbers of the jobs that ran last round.
    job_type, job_class : ndarray of int64
        Their GPU type (column of the cluster) and class (0 guaranteed, 1 opportunistic).
    gpu_ptr, gpu_ids : ndarray of int64
        Job ``i`` held global GPU ids ``gpu_ids[gpu_ptr[i]:gpu_ptr[i + 1]]``.
    cell_ptr, cell_ids : ndarray of int64
        HiveD: the cells job ``i`` held (empty for the quota baseline).
    bind_vcell, bind_cell : ndarray of int64
        HiveD: virtual cell (row of :meth:`Tenants.virtual_cells`) -> bound physical cell.
    lost_vcell : ndarray of int64
        HiveD: virtual cells that no healthy physical cell could hold last round (their
        tenant's guarantee is reduced by them until hardware comes back).
    bad_gpus : ndarray of int64
        GPUs out of service (§4).
    frag_round, frag_type, frag_level : ndarray of int64
    frag_value : ndarray
        Fragmentation log: per round, type and level, :func:`fragmentation` of the
        cluster after the round was placed.
    time : float
        Start of the next round.
    rounds : int
        Rounds recorded.
    """

    job_ids: np.ndarray = field(default_factory=_i)
    job_type: np.ndarray = field(default_factory=_i)
    job_class: np.ndarray = field(default_factory=_i)
    gpu_ptr: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    gpu_ids: np.ndarray = field(default_factory=_i)
    cell_ptr: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    cell_ids: np.ndarray = field(default_factory=_i)
    bind_vcell: np.ndarray = field(default_factory=_i)
    bind_cell: np.ndarray = field(default_factory=_i)
    lost_vcell: np.ndarray = field(default_factory=_i)
    bad_gpus: np.ndarray = field(default_factory=_i)
    frag_round: np.ndarray = field(default_factory=_i)
    frag_type: np.ndarray = field(default_factory=_i)
    frag_level: np.ndarray = field(default_factory=_i)
    frag_value: np.ndarray = field(default_factory=lambda: np.zeros(0))
    time: float = 0.0
    rounds: int = 0

    @classmethod
    def empty(cls, start_time: float = 0.0, bad_gpus: Any = ()) -> HiveDState:
        """A state that knows no job."""
        return cls(bad_gpus=np.unique(_i(list(bad_gpus))), time=check_real(start_time, "start_time"))

    def held(self) -> dict[int, tuple[int, int, np.ndarray, np.ndarray]]:
        """job -> (type, class, GPU ids, cells) of the jobs that ran last round."""
        out = {}
        for i, j in enumerate(self.job_ids.tolist()):
            out[j] = (int(self.job_type[i]), int(self.job_class[i]), self.gpu_ids[self.gpu_ptr[i]:self.gpu_ptr[i + 1]],
                      self.cell_ids[self.cell_ptr[i]:self.cell_ptr[i + 1]])
        return out

    def with_bad_gpus(self, gpus: Any) -> HiveDState:
        """The state with ``gpus`` (global ids) also out of service from the next round (§4)."""
        return replace(self, bad_gpus=np.union1d(self.bad_gpus, _i(list(np.atleast_1d(gpus)))))

    def fragmentation_frame(self, topology: Topology | None = None) -> Any:
        """The fragmentation log as a DataFrame (``round``, ``gpu_type``, ``level``, ``fragmentation``);
        types and levels by name when ``topology`` is given."""
        import pandas as pd

        df = pd.DataFrame({"round": self.frag_round, "gpu_type": self.frag_type, "level": self.frag_level,
                           "fragmentation": self.frag_value})
        if topology is not None:
            df["gpu_type"] = [topology.gpu_types[k] for k in self.frag_type.tolist()]
            df["level"] = [topology.level_names[x] for x in self.frag_level.tolist()]
        return df

    def __repr__(self) -> str:
        return (f"HiveDState(running={self.job_ids.shape[0]}, bound={self.bind_vcell.shape[0]}, "
                f"lost={self.lost_vcell.shape[0]}, bad_gpus={self.bad_gpus.shape[0]}, rounds={self.rounds})")


def cluster_topology(cluster: Cluster, gpus_per_server: int = 8) -> Topology:
    """The cluster's topology, or servers of ``gpus_per_server`` GPUs in one rack per type
    (what the round loop assumes for a cluster given by counts)."""
    if cluster.topology is not None:
        return cluster.topology
    return Topology.from_counts(cluster.as_dict(), gpus_per_server=gpus_per_server)


def default_tenants(forest: CellForest) -> Tenants:
    """One tenant, ``"all"``, owning every root cell (HiveD with a single virtual cluster)."""
    topo = forest.topology
    cells: dict[str, dict[str, int]] = {}
    for c in forest.roots().tolist():
        t = topo.gpu_types[int(forest.gpu_type[c])]
        lev = topo.level_names[int(forest.level[c])]
        cells.setdefault(t, {})
        cells[t][lev] = cells[t].get(lev, 0) + 1
    return Tenants((Tenant("all", cells),))


@dataclass(frozen=True, eq=False)
class ActiveJobs:
    """The active jobs as both schedulers see them (rows follow ``view.jobs``)."""

    jobs: np.ndarray          # driver numbers
    ids: np.ndarray           # trace ids
    tenant: np.ndarray        # tenant index
    klass: np.ndarray         # GUARANTEED / OPPORTUNISTIC
    gpus: np.ndarray          # gang size
    T: np.ndarray             # throughputs (n, n_types)
    order: np.ndarray         # rows in arrival order (ties by driver number)

    @classmethod
    def of(cls, view: Any, tenants: Tenants | None, job_priority: Mapping[Any, str] | None) -> ActiveJobs:
        n = view.n_jobs
        ids_all = view.context.get("ids") if isinstance(view.context, Mapping) else None
        ids = np.asarray(ids_all)[view.jobs] if ids_all is not None else view.jobs
        if tenants is None:
            tenant = np.zeros(n, dtype=np.int64)
            default = np.zeros(1, dtype=np.int64)
        else:
            if view.entities is None:
                raise ValidationError(f"the workload has no entities, so its jobs belong to no tenant (tenants: "
                                      f"{list(tenants.names)}); give the jobs entities (JobSet(entities=...), "
                                      "generate_workload(n_entities=...)) or leave `tenants` out.")
            ents = np.asarray(view.entities, dtype=object)
            uniq, inv = np.unique(ents.astype(str), return_inverse=True)
            first = {u: int(np.flatnonzero(inv == i)[0]) for i, u in enumerate(uniq.tolist())}
            lut = np.array([tenants.index(str(u), job=_show(ids[first[u]])) for u in uniq.tolist()], dtype=np.int64)
            tenant = lut[inv.reshape(-1)] if n else np.zeros(0, dtype=np.int64)
            default = np.array([PRIORITIES.index(t.priority) for t in tenants.tenants], dtype=np.int64)
        klass = with_job_priority(default[tenant] if n else np.zeros(0, dtype=np.int64), ids, job_priority)
        order = np.lexsort((view.jobs, view.arrival)) if n else np.zeros(0, dtype=np.int64)
        return cls(jobs=view.jobs, ids=ids, tenant=tenant, klass=klass, gpus=view.scale_factors.astype(np.int64),
                   T=np.asarray(view.throughputs, dtype=float), order=order)


def payload_gpus(rows: Any) -> list[np.ndarray] | None:
    """Per row of ``rows`` (a plan of HiveD or the quota baseline, possibly trimmed with
    ``take``), the global GPU ids its payload holds for it (None without a payload)."""
    p = rows.payload
    if not isinstance(p, dict) or "gpu_ptr" not in p:
        return None
    ptr, ids = p["gpu_ptr"], p["gpu_ids"]
    return [ids[ptr[r]:ptr[r + 1]] for r in np.asarray(rows.row_id).tolist()]


def with_job_priority(klass: np.ndarray, ids: np.ndarray, job_priority: Mapping[Any, str] | None) -> np.ndarray:
    """``klass`` (class per job, from its tenant's priority) with the jobs ``job_priority``
    names (trace id -> ``"guaranteed"`` / ``"opportunistic"``) set to their class."""
    if not job_priority:
        return klass
    klass = klass.copy()
    pos = {_key(x): i for i, x in enumerate(np.asarray(ids).tolist())}
    for jid, cls_name in job_priority.items():
        i = pos.get(_key(jid))
        if i is not None:
            klass[i] = PRIORITIES.index(check_choice(cls_name, f"job_priority[{jid!r}]", PRIORITIES))
    return klass


def _key(x: Any) -> Any:
    return x.item() if isinstance(x, np.generic) else x


def _show(x: Any) -> Any:
    return _key(x)


def fragmentation(forest: CellForest, busy_gpus: np.ndarray) -> np.ndarray:
    r"""Per type and level, the share of free GPUs that no free cell of that level holds.

    .. math:: F_{t,l} = 1 - \frac{S_t(l)\,\#\{\text{free cells of type } t \text{ available at level } l\}}
              {\#\{\text{free GPUs of type } t\}}

    where a free cell is one with every GPU free (a free cell of a higher level counts as
    :math:`S_t(l') / S_t(l)` cells). 0: every free GPU sits in a free cell of that level (no
    fragmentation); 1: no request of that level can run although GPUs are free. ``nan``
    where a type has no free GPU or no cell at that level. Shape ``(n_types, n_levels)``.
    """
    if not isinstance(forest, CellForest):
        raise ValidationError(f"`forest` must be a CellForest; got {type(forest).__name__}.")
    topo = forest.topology
    busy = np.zeros(topo.n_gpus, dtype=bool)
    try:
        ids = np.asarray(busy_gpus, dtype=np.int64).reshape(-1)
    except (TypeError, ValueError):
        raise ValidationError(f"`busy_gpus` must be GPU ids (integers); got {type(busy_gpus).__name__}.") from None
    if ids.size and (ids.min() < 0 or ids.max() >= topo.n_gpus):
        raise ValidationError(f"`busy_gpus` must be GPU ids in [0, {topo.n_gpus - 1}]; got {ids.min()}..{ids.max()}.")
    busy[ids] = True
    # GPUs in cell order; a cell is free iff its busy count is 0
    pos_busy = busy[forest.leaf_order].astype(np.int64)
    cum = np.concatenate([[0], np.cumsum(pos_busy)])
    cell_busy = cum[forest.leaf_hi] - cum[forest.leaf_lo]
    free_cell = cell_busy == 0
    gpu_type = topo.server_type[topo.gpu_server]
    n_t, n_l = forest.sizes.shape
    out = np.full((n_t, n_l), np.nan)
    free_gpus = np.bincount(gpu_type[~busy], minlength=n_t)
    for t in range(n_t):
        if free_gpus[t] == 0:
            continue
        for li in range(n_l):
            s = int(forest.sizes[t, li])
            if s == 0:
                continue
            # maximal free cells are not needed: count free cells at exactly level li
            n_free = int((free_cell & (forest.gpu_type == t) & (forest.level == li)).sum())
            out[t, li] = 1.0 - n_free * s / free_gpus[t]
    return out
