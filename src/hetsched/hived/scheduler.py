r"""The HiveD round scheduler (Zhao et al., "HiveD: Sharing a GPU Cluster for Deep Learning
Guaranteed", OSDI 2020).

Each round, whole gangs are placed in cells (:mod:`.cells`) of the tenants' virtual
clusters (:mod:`.tenants`):

1. **Requests** (§3, §4). A guaranteed or opportunistic job of :math:`k` GPUs on type
   :math:`t` asks for one cell at the lowest level :math:`l` with :math:`S_t(l) \ge k`, up to
   the server; a gang larger than a server asks for :math:`\lceil k / S_t(\text{server})
   \rceil` server cells (they need not share a rack: HiveD's affinity groups may span
   servers; our rows are then not consolidated and run at the spread rate).
2. **Bad hardware** (§4). GPUs out of service (``bad_gpus``, or
   :meth:`HiveDState.with_bad_gpus`) are reserved in the physical buddy allocator for ever.
   A binding whose physical cell holds one is dropped and its virtual cell re-bound to a
   healthy free cell of its level; when none can be found (tried highest level first, as
   the safety check does) the virtual cell is *lost* for the round and the state lists it
   (``lost_vcell``): the tenant's guarantee is reduced by it, and the rest still holds.
3. **Guaranteed jobs** (§3, §4). Per tenant, its running guaranteed jobs first, then
   its waiting ones in arrival order; a job is admitted on the first of its usable types
   (the one it ran on, then fastest first) where the requests of the tenant's admitted
   jobs plus its own fit the tenant's virtual cells (:func:`.cells.chain_fits`, exact for
   the divisible cell sizes). A job that does not fit waits; later, smaller jobs may run.
4. **Virtual to physical** (§4, Algorithm 1). Virtual cells stay bound to the physical
   cells they had while they hold a job; more are bound (smallest first) until the
   admitted requests fit, each to a physical cell of its level taken by buddy allocation
   (lowest free level first, splitting); a virtual cell left empty is released (merging
   buddies). Inside its bound cells a tenant's jobs are placed by buddy allocation, jobs
   that ran keeping their cells when they can (else the tenant's cells are re-packed,
   highest request first, which always fits).
5. **Opportunistic jobs** (§4). On every GPU no guaranteed job holds (idle cells of any
   tenant included), running ones first, by buddy allocation. A guaranteed job that claims
   a cell an opportunistic job used simply takes it: the opportunistic job is preempted
   (it does not run this round; the round loop counts the preemption).

By the safety condition (checked at the first round, :meth:`Tenants.check`), step 4 never
fails without bad hardware, so a tenant's guaranteed job that fits its free virtual cells
always runs: HiveD has no sharing anomaly (:mod:`.metrics`).

Per-job data and defaults
-------------------------
A job's tenant is its workload entity; ``tenants=None`` makes one tenant, ``"all"``, that
owns every root cell (the demo). A job's class is its tenant's ``priority`` unless
``job_priority`` (trace id -> ``"guaranteed"`` / ``"opportunistic"``) names it. A cluster
without a topology is cut into servers of ``gpus_per_server`` GPUs (the round loop's own
assumption).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import SchedulerError, ValidationError
from ..inputs.cluster import Cluster
from ..validation import check_int
from .cells import BuddyAllocator, CellForest, chain_fits
from .common import (
    GUARANTEED,
    OPPORTUNISTIC,
    ActiveJobs,
    HiveDState,
    cluster_topology,
    default_tenants,
    fragmentation,
    payload_gpus,
)
from .tenants import Tenants, read_tenants

__all__ = ["HiveD", "Setup", "check_tenants_arg", "check_view"]

log = logging.getLogger(__name__)


def check_view(view: Any) -> None:
    """Refuse anything but a round view (a RoundView: ``cluster``, ``jobs``, ``throughputs``...)."""
    if not all(hasattr(view, a) for a in ("cluster", "jobs", "throughputs", "gpu_types", "scale_factors")):
        raise ValidationError(f"`view` must be a hetsched RoundView; got {type(view).__name__}.")


def check_tenants_arg(tenants: Any) -> Tenants | None:
    """``tenants`` as :class:`Tenants`: a Tenants, a mapping (file format), a path, or None."""
    if tenants is None or isinstance(tenants, Tenants):
        return tenants
    if isinstance(tenants, Mapping):
        return Tenants.from_dict(tenants)
    if isinstance(tenants, str):
        return read_tenants(tenants)
    if isinstance(tenants, (list, tuple)):
        return Tenants(tuple(tenants))
    raise ValidationError(f"`tenants` must be a Tenants, a mapping {{'tenants': [...]}}, a JSON file path or None; "
                          f"got {type(tenants).__name__}.")


@dataclass(frozen=True, eq=False)
class Setup:
    """What a scheduler derives once per cluster: cells, tenants, virtual cells, quotas."""

    cluster: Cluster
    forest: CellForest
    tenants: Tenants
    v_tenant: np.ndarray
    v_type: np.ndarray
    v_level: np.ndarray
    quota: np.ndarray
    server_level: int

    @classmethod
    def build(cls, cluster: Cluster, tenants: Tenants | None, gpus_per_server: int, bad_gpus: Sequence[int]) -> Setup:
        forest = CellForest.build(cluster_topology(cluster, gpus_per_server))
        ten = default_tenants(forest) if tenants is None else tenants
        ten.check(forest, bad_gpus=bad_gpus)
        v, k, li = ten.virtual_cells(forest)
        return cls(cluster=cluster, forest=forest, tenants=ten, v_tenant=v, v_type=k, v_level=li,
                   quota=ten.quotas(forest), server_level=forest.topology.level_index("server"))

    def request(self, gpus: int, gpu_type: int) -> tuple[int, int]:
        """``(level, count)`` of the cells a gang of ``gpus`` on ``gpu_type`` asks for; (-1, 0): none."""
        memo = self.__dict__.setdefault("_memo", {})
        key = (gpus, gpu_type)
        if key not in memo:
            memo[key] = self._request(gpus, gpu_type)
        return memo[key]

    def check_fits(self, J: ActiveJobs, r: int, cols: list[int]) -> None:
        """Refuse a guaranteed job that no type's virtual cluster of its tenant could ever hold
        (HiveD rejects such a request at submission: it would wait for ever)."""
        memo = self.__dict__.setdefault("_fits", {})
        v, k = int(J.tenant[r]), int(J.gpus[r])
        usable = tuple(int(c) for c in np.flatnonzero(J.T[r] > 0))
        key = (v, k, usable)
        if key not in memo:
            ok = False
            for kc in usable:
                t = cols[kc]
                lev, cnt = self.request(k, t)
                cells = self.v_level[(self.v_tenant == v) & (self.v_type == t)]
                if lev >= 0 and cells.size and chain_fits(self.forest.sizes[t], cells, [lev] * cnt):
                    ok = True
                    break
            memo[key] = ok
        if not memo[key]:
            topo = self.forest.topology
            have = {}
            for t in {cols[kc] for kc in usable}:
                m = (self.v_tenant == v) & (self.v_type == t)
                have[topo.gpu_types[t]] = {topo.level_names[x]: int((self.v_level[m] == x).sum())
                                           for x in np.unique(self.v_level[m]).tolist()}
            raise ValidationError(
                f"job {J.ids[r]!r} of tenant {self.tenants.names[v]!r} is guaranteed and asks for {k} GPU(s), which "
                f"its virtual cluster can never hold on the types it can use (its cells: {have}); give the tenant "
                "larger cells or run the job as opportunistic (`job_priority`).")

    def _request(self, gpus: int, gpu_type: int) -> tuple[int, int]:
        sizes = self.forest.sizes[gpu_type]
        srv = self.server_level if sizes[self.server_level] else int(np.count_nonzero(sizes)) - 1
        lev = self.forest.cell_level(gpu_type, gpus)
        if 0 <= lev <= srv:
            return lev, 1
        if sizes[srv] == 0:
            return -1, 0
        return srv, -(-gpus // int(sizes[srv]))


class _Cache:
    """Setups by cluster identity (a scheduler is frozen; the cache is not part of its value)."""

    def __init__(self) -> None:
        self.key: Any = None
        self.value: Any = None


@dataclass(frozen=True, kw_only=True)
class HiveD:
    """HiveD: guaranteed cells per tenant, buddy allocation, opportunistic jobs on idle cells.

    Parameters
    ----------
    tenants : Tenants, mapping, str or None
        The tenants and their virtual clusters (:class:`~hetsched.hived.tenants.Tenants`, its
        file format as a mapping, or a JSON file path); None: one tenant owning every cell.
    job_priority : Mapping, optional
        Trace id -> ``"guaranteed"`` or ``"opportunistic"`` (default: the tenant's priority).
    bad_gpus : sequence of int, default ()
        Global GPU ids out of service from the start (§4).
    gpus_per_server : int, default 8
        Server size when the cluster has no topology.

    Raises
    ------
    ValidationError
        Bad parameters; at the first round, virtual clusters that do not fit the physical
        cells, a quota at a level the topology lacks, or a job of an unknown tenant.
    """

    tenants: Any = None
    job_priority: Mapping[Any, str] | None = None
    bad_gpus: Sequence[int] = ()
    gpus_per_server: int = 8

    name = "hived"
    #: rows are whole gangs on distinct jobs within each type's capacity; still checked.
    rows_checked = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "tenants", check_tenants_arg(self.tenants))
        if self.job_priority is not None and not isinstance(self.job_priority, Mapping):
            raise ValidationError(f"`job_priority` must be a mapping trace id -> 'guaranteed' / 'opportunistic' or "
                                  f"None; got {type(self.job_priority).__name__}.")
        if isinstance(self.bad_gpus, (str, bytes)) or not isinstance(self.bad_gpus, Sequence):
            raise ValidationError(f"`bad_gpus` must be a sequence of GPU ids; got {type(self.bad_gpus).__name__}.")
        object.__setattr__(self, "bad_gpus", tuple(check_int(g, f"bad_gpus[{i}]", low=0)
                                                   for i, g in enumerate(self.bad_gpus)))
        check_int(self.gpus_per_server, "gpus_per_server", low=1)
        object.__setattr__(self, "_cache", _Cache())

    # ------------------------------------------------------------------ setup
    def setup(self, cluster: Cluster) -> Setup:
        """Cells, tenants and the safety check for ``cluster`` (refused here, before any round)."""
        if not isinstance(cluster, Cluster):
            raise ValidationError(f"`cluster` must be a hetsched.Cluster; got {type(cluster).__name__}.")
        cache: _Cache = self._cache  # type: ignore[attr-defined]
        if cache.key is not cluster:
            for g in self.bad_gpus:
                if g >= cluster_topology(cluster, self.gpus_per_server).n_gpus:
                    raise ValidationError(f"`bad_gpus` names GPU {g}; the cluster has GPUs 0.."
                                          f"{cluster_topology(cluster, self.gpus_per_server).n_gpus - 1}.")
            cache.value = Setup.build(cluster, self.tenants, self.gpus_per_server, self.bad_gpus)
            cache.key = cluster
        return cache.value

    def placed_gpus(self, rows: Any, cluster: Cluster) -> list[np.ndarray] | None:
        """The GPU ids this scheduler chose for each row (its cells), so that a driver placing
        on ``cluster``'s servers runs the rows there instead of placing them again (see
        :func:`hetsched.rounds.placing.place_round`); None when ``cluster``'s servers are not
        the ones the cells were built on (the driver then places the rows itself)."""
        setup = self._cache.value  # type: ignore[attr-defined]
        if setup is None or setup.forest.topology != cluster.topology:
            return None
        return payload_gpus(rows)

    def result_metrics(self, result: Any, workload: Any, cluster: Cluster) -> dict[str, Any]:
        """Tenant metrics of a simulation of this scheduler (:func:`hetsched.hived.metrics.
        tenant_metrics`: the sharing-anomaly delay per tenant and job, the fragmentation per
        round, type and level); :func:`hetsched.simulate` adds them to ``result.extra``."""
        from .metrics import tenant_metrics

        return tenant_metrics(result, self.setup(cluster), workload, by_entity=self.tenants is not None,
                              job_priority=self.job_priority)

    def initial_state(self, start_time: float = 0.0) -> HiveDState:
        """No job placed, ``bad_gpus`` out of service."""
        return HiveDState.empty(start_time, self.bad_gpus)

    # ------------------------------------------------------------------ plan
    def plan_round(self, view: Any, state: HiveDState) -> Any:
        """Place the round's gangs in cells (steps 1-5 of the module docstring)."""
        from ..rounds.protocol import RoundRows

        t0 = time.perf_counter()
        if not isinstance(state, HiveDState):
            raise ValidationError(f"`state` must be a HiveDState; got {type(state).__name__}.")
        check_view(view)
        st = self.setup(view.cluster)
        f = st.forest
        topo = f.topology
        cols = [topo.type_index(t, argument="cluster") for t in view.gpu_types]   # view column -> topology type
        J = ActiveJobs.of(view, None if self.tenants is None else st.tenants, self.job_priority)
        held = state.held()
        bind_vcell, bind_cell = state.bind_vcell, state.bind_cell
        if (state.cell_ids.size and int(state.cell_ids.max()) >= f.n_cells) or (
                bind_cell.size and int(bind_cell.max()) >= f.n_cells):
            # the state was made on another cluster (an online resize): start the cells afresh
            held = {j: (t, c, g, np.zeros(0, dtype=np.int64)) for j, (t, c, g, _) in held.items()}
            bind_vcell = bind_cell = np.zeros(0, dtype=np.int64)
        bad = state.bad_gpus[state.bad_gpus < topo.n_gpus]
        bad_cells = {int(f.gpu_cell[g]) for g in bad.tolist()}

        phys = BuddyAllocator(f)
        for c in bad_cells:
            phys.reserve(c)
        bad_mask = np.zeros(topo.n_gpus, dtype=bool)
        bad_mask[bad] = True
        bound: dict[int, int] = {}
        for vc, c in zip(bind_vcell.tolist(), bind_cell.tolist()):
            if vc < st.v_tenant.shape[0] and not bad_mask[f.gpus(c)].any() and phys.reserve(c):
                bound[vc] = c
        lost = self._lost(st, phys, bound) if bad.size else set()

        # guaranteed admission, per tenant
        n = J.jobs.shape[0]
        run_type = np.full(n, -1, dtype=np.int64)
        was = np.array([int(j) in held for j in J.jobs.tolist()], dtype=bool)
        prev_type = np.array([held[int(j)][0] if int(j) in held else -1 for j in J.jobs.tolist()], dtype=np.int64)
        prio = np.lexsort((np.arange(n), J.order.argsort(), ~was)) if n else np.zeros(0, dtype=np.int64)
        items: dict[tuple[int, int], list[tuple[int, int, int]]] = {}   # (tenant, type) -> (row, level, count)
        vc_of: dict[tuple[int, int], list[int]] = {}
        for vc in range(st.v_tenant.shape[0]):
            if vc not in lost:
                vc_of.setdefault((int(st.v_tenant[vc]), int(st.v_type[vc])), []).append(vc)
        failed: dict[tuple[int, int], list[tuple[int, int]]] = {}   # requests that did not fit (monotone)
        for r in prio.tolist():
            if J.klass[r] != GUARANTEED:
                continue
            v = int(J.tenant[r])
            st.check_fits(J, r, cols)
            for kcol in self._types(J, r, prev_type[r], cols):
                t = cols[kcol]
                lev, cnt = st.request(int(J.gpus[r]), t)
                cells = vc_of.get((v, t))
                if lev < 0 or not cells:
                    continue
                # the admitted set only grows: a request containing one that failed fails too
                if any(l0 <= lev and c0 <= cnt for l0, c0 in failed.get((v, t), ())):
                    continue
                mine = items.get((v, t), [])
                need = [x[1] for x in mine for _ in range(x[2])] + [lev] * cnt
                if chain_fits(f.sizes[t], st.v_level[cells], need):
                    items.setdefault((v, t), []).append((r, lev, cnt))
                    run_type[r] = kcol
                    break
                failed.setdefault((v, t), []).append((lev, cnt))

        # bind virtual cells and place inside them
        job_cells: dict[int, list[int]] = {}
        for (v, t), its in items.items():
            vcs = vc_of[(v, t)]
            mine = [vc for vc in vcs if vc in bound]
            spare = sorted((vc for vc in vcs if vc not in bound), key=lambda vc: (st.v_level[vc], vc))
            need = [lev for _, lev, cnt in its for _ in range(cnt)]
            while not chain_fits(f.sizes[t], st.v_level[mine], need):
                if not spare:
                    raise SchedulerError(f"HiveD: tenant {st.tenants.names[v]!r} cannot bind the virtual cells its "
                                         "admitted jobs need (the safety condition was broken).")
                vc = spare.pop(0)
                c = phys.allocate(t, int(st.v_level[vc]))
                if c < 0:
                    lost.add(vc)
                    continue
                bound[vc] = c
                mine.append(vc)
            placed = self._inner(f, [bound[vc] for vc in mine], its, held, J)
            job_cells.update(placed)
            used_cells = {c for cs in placed.values() for c in cs}
            for vc in mine:
                c = bound[vc]
                if not any(f.leaf_lo[c] <= f.leaf_lo[u] < f.leaf_hi[c] for u in used_cells):
                    phys.release(c)
                    del bound[vc]

        for vc in [vc for vc in bound if (int(st.v_tenant[vc]), int(st.v_type[vc])) not in items]:
            phys.release(bound.pop(vc))      # a virtual cell without jobs goes back (buddies merge)

        # opportunistic jobs on every GPU no guaranteed job holds
        opp = BuddyAllocator(f)
        for c in bad_cells:
            opp.reserve(c)
        for cs in job_cells.values():
            for c in cs:
                if not opp.reserve(c):
                    raise SchedulerError(f"HiveD: cell {c} is placed twice.")
        for r in prio.tolist():
            if J.klass[r] != OPPORTUNISTIC:
                continue
            got = None
            prev = held.get(int(J.jobs[r]))
            if prev is not None and prev[3].size and all(opp.is_free(int(c)) for c in prev[3].tolist()):
                for c in prev[3].tolist():
                    opp.reserve(int(c))
                got, run_type[r] = prev[3].tolist(), cols.index(prev[0]) if prev[0] in cols else -1
            else:
                for kcol in self._types(J, r, prev_type[r], cols):
                    t = cols[kcol]
                    lev, cnt = st.request(int(J.gpus[r]), t)
                    if lev < 0:
                        continue
                    cells = []
                    for _ in range(cnt):
                        c = opp.allocate(t, lev)
                        if c < 0:
                            break
                        cells.append(c)
                    if len(cells) == cnt:
                        got, run_type[r] = cells, kcol
                        break
                    for c in cells:
                        opp.release(c)
            if got is not None:
                job_cells[r] = got

        rows_idx = np.array(sorted(job_cells), dtype=np.int64)
        payload = self._payload(f, J, rows_idx, run_type, job_cells, bound, lost, cols)
        busy = payload["gpu_ids"]
        frag = fragmentation(f, np.concatenate([busy, bad]))
        payload["frag"] = frag
        k = run_type[rows_idx]
        T = view.throughputs
        U = view.unconsolidated if view.unconsolidated is not None else T
        gp = J.gpus[rows_idx]
        one_server = np.array([st.request(int(g), cols[int(kk)])[1] == 1 for g, kk in zip(gp.tolist(), k.tolist())],
                              dtype=bool)
        info = {"plan_s": time.perf_counter() - t0, "solved": False}
        return RoundRows(view.jobs[rows_idx], k, gp, T[rows_idx, k], spread_rate=U[rows_idx, k],
                         consolidated=one_server & (gp > 1), info=info, payload=payload)

    @staticmethod
    def _types(J: ActiveJobs, r: int, prev: int, cols: list[int]) -> list[int]:
        """View columns a job may use, the one it ran on first, then fastest first."""
        if J.T.shape[1] == 1:
            return [0] if J.T[r, 0] > 0 else []
        order = [int(x) for x in np.argsort(-J.T[r], kind="stable") if J.T[r, x] > 0]
        if prev >= 0 and prev in cols and cols.index(prev) in order:
            p = cols.index(prev)
            order.remove(p)
            order.insert(0, p)
        return order

    @staticmethod
    def _lost(st: Setup, phys: BuddyAllocator, bound: dict[int, int]) -> set[int]:
        """Virtual cells no healthy free physical cell can hold (tried highest level first)."""
        import copy

        trial = copy.deepcopy(phys)
        lost = set()
        unbound = [vc for vc in range(st.v_tenant.shape[0]) if vc not in bound]
        for vc in sorted(unbound, key=lambda x: (-st.v_level[x], x)):
            c = trial.allocate(int(st.v_type[vc]), int(st.v_level[vc]))
            if c < 0:
                lost.add(vc)
        if lost:
            log.warning("HiveD: %d virtual cell(s) lost to bad hardware: %s", len(lost),
                        ", ".join(f"{st.tenants.names[int(st.v_tenant[vc])]}@"
                                  f"{st.forest.topology.level_names[int(st.v_level[vc])]}" for vc in sorted(lost)))
        return lost

    @staticmethod
    def _inner(f: CellForest, cells: list[int], its: list[tuple[int, int, int]], held: dict, J: ActiveJobs
               ) -> dict[int, list[int]]:
        """Place a tenant's admitted requests inside its bound cells: keep cells where possible,
        else re-pack highest request first (always fits, :func:`chain_fits`)."""
        for keep in (True, False):
            inner = BuddyAllocator(f, free=cells)
            out: dict[int, list[int]] = {}
            rest = []
            for r, lev, cnt in its:
                prev = held.get(int(J.jobs[r]))
                ok = keep and prev is not None and prev[3].size == cnt and all(
                    int(f.level[c]) == lev for c in prev[3].tolist())
                if ok and all(inner.reserve(int(c)) for c in prev[3].tolist()):
                    out[r] = prev[3].tolist()
                else:
                    rest.append((r, lev, cnt))
            failed = False
            for r, lev, cnt in sorted(rest, key=lambda x: -x[1]):
                got = [inner.allocate(int(f.gpu_type[cells[0]]), lev) for _ in range(cnt)]
                if min(got) < 0:
                    failed = True
                    break
                out[r] = got
            if not failed:
                return out
        raise SchedulerError("HiveD: a tenant's admitted jobs do not fit its bound cells (internal error).")

    @staticmethod
    def _payload(f: CellForest, J: ActiveJobs, rows_idx: np.ndarray, run_type: np.ndarray,
                 job_cells: dict[int, list[int]], bound: dict[int, int], lost: set[int], cols: list[int]
                 ) -> dict[str, Any]:
        gpu_lists, cell_lists = [], []
        for r in rows_idx.tolist():
            cs = job_cells[r]
            cell_lists.append(np.asarray(cs, dtype=np.int64))
            g = np.concatenate([f.gpus(c) for c in cs])[: int(J.gpus[r])]
            gpu_lists.append(np.sort(g))
        gptr = np.zeros(rows_idx.shape[0] + 1, dtype=np.int64)
        gptr[1:] = np.cumsum([g.shape[0] for g in gpu_lists])
        cptr = np.zeros(rows_idx.shape[0] + 1, dtype=np.int64)
        cptr[1:] = np.cumsum([c.shape[0] for c in cell_lists])
        vcs = np.array(sorted(bound), dtype=np.int64)
        types = np.array(cols, dtype=np.int64)
        return {
            "job_ids": J.jobs[rows_idx], "job_type": types[run_type[rows_idx]] if rows_idx.size else rows_idx.copy(),
            "job_class": J.klass[rows_idx], "gpu_ptr": gptr,
            "gpu_ids": np.concatenate(gpu_lists) if gpu_lists else np.zeros(0, dtype=np.int64),
            "cell_ptr": cptr, "cell_ids": np.concatenate(cell_lists) if cell_lists else np.zeros(0, dtype=np.int64),
            "bind_vcell": vcs, "bind_cell": np.array([bound[v] for v in vcs.tolist()], dtype=np.int64),
            "lost_vcell": np.array(sorted(lost), dtype=np.int64),
        }

    # ------------------------------------------------------------------ record
    def record_round(self, state: HiveDState, ran: Any, seconds: np.ndarray) -> HiveDState:
        """The state after the round: the placements of the rows that ran, the bindings."""
        return record_placed(state, ran, seconds)


def record_placed(state: HiveDState, ran: Any, seconds: np.ndarray) -> HiveDState:
    """The state after ``ran`` (rows whose payload is a placement dict) ran ``seconds``."""
    from dataclasses import replace

    p = ran.payload
    if not isinstance(p, dict):
        return replace(state, job_ids=np.zeros(0, np.int64), job_type=np.zeros(0, np.int64),
                       job_class=np.zeros(0, np.int64), gpu_ptr=np.zeros(1, np.int64), gpu_ids=np.zeros(0, np.int64),
                       cell_ptr=np.zeros(1, np.int64), cell_ids=np.zeros(0, np.int64),
                       time=state.time + float(np.max(seconds, initial=0.0)), rounds=state.rounds + 1)
    ran_jobs = set(np.asarray(ran.job).tolist())
    keep = np.array([j in ran_jobs for j in p["job_ids"].tolist()], dtype=bool)
    idx = np.flatnonzero(keep)

    def ragged(ptr: np.ndarray, vals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        parts = [vals[ptr[i]:ptr[i + 1]] for i in idx.tolist()]
        out_ptr = np.zeros(idx.shape[0] + 1, dtype=np.int64)
        out_ptr[1:] = np.cumsum([x.shape[0] for x in parts])
        return out_ptr, (np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64))

    gptr, gids = ragged(p["gpu_ptr"], p["gpu_ids"])
    cptr, cids = ragged(p["cell_ptr"], p["cell_ids"])
    frag = p.get("frag")
    fr, ft, fl, fv = state.frag_round, state.frag_type, state.frag_level, state.frag_value
    if frag is not None:
        tt, ll = np.nonzero(np.isfinite(frag))
        fr = np.concatenate([fr, np.full(tt.shape[0], state.rounds, dtype=np.int64)])
        ft = np.concatenate([ft, tt.astype(np.int64)])
        fl = np.concatenate([fl, ll.astype(np.int64)])
        fv = np.concatenate([fv, frag[tt, ll]])
    return replace(state, job_ids=p["job_ids"][idx], job_type=p["job_type"][idx], job_class=p["job_class"][idx],
                   gpu_ptr=gptr, gpu_ids=gids, cell_ptr=cptr, cell_ids=cids, bind_vcell=p["bind_vcell"],
                   bind_cell=p["bind_cell"], lost_vcell=p["lost_vcell"], frag_round=fr, frag_type=ft,
                   frag_level=fl, frag_value=fv, time=state.time + float(np.max(seconds, initial=0.0)),
                   rounds=state.rounds + 1)
