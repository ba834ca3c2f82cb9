r"""The quota baseline of HiveD's evaluation: a YARN Capacity Scheduler-like round scheduler
(Zhao et al., OSDI 2020, §2 and §5: "YARN-CS").

Each tenant :math:`v` has, per GPU type :math:`t`, a GPU quota :math:`Q_{v,t}` equal to the
GPU count of its virtual cluster (:meth:`~hetsched.hived.tenants.Tenants.quotas`); there are
no cells. Each round:

* guaranteed jobs that ran keep their GPUs; waiting guaranteed jobs of tenant :math:`v`, in
  arrival order, are admitted on type :math:`t` when :math:`U_{v,t} + k \le Q_{v,t}`
  (:math:`U`: GPUs its admitted jobs hold) and placed **first fit**: the lowest-numbered
  server of type :math:`t` with :math:`k` free GPUs (a gang larger than a server takes
  :math:`\lceil k / G \rceil` wholly free servers). GPUs held by opportunistic jobs count as
  free (those jobs are preempted, as YARN-CS preempts containers over capacity);
* opportunistic jobs then take what is left, first fit, running ones keeping their GPUs.

A job that is within its tenant's quota but finds no server with :math:`k` free GPUs waits:
that is the *sharing anomaly* HiveD removes (§2): free GPUs are fragmented across
servers by other tenants' jobs. :mod:`hetsched.hived.metrics` measures it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..inputs.cluster import Cluster
from ..validation import check_int
from .common import (
    GUARANTEED,
    OPPORTUNISTIC,
    ActiveJobs,
    HiveDState,
    fragmentation,
)
from .scheduler import HiveD, Setup, check_tenants_arg, check_view, record_placed

__all__ = ["QuotaScheduler"]


@dataclass(frozen=True, kw_only=True)
class QuotaScheduler:
    """Per-tenant GPU quotas with first-fit placement (the YARN-CS baseline).

    Parameters
    ----------
    tenants, job_priority, bad_gpus, gpus_per_server
        As in :class:`~hetsched.hived.scheduler.HiveD` (the same tenant file: quotas are
        the GPU counts of the virtual clusters).
    """

    tenants: Any = None
    job_priority: Mapping[Any, str] | None = None
    bad_gpus: Sequence[int] = ()
    gpus_per_server: int = 8

    name = "hived_quota"
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
        # the same setup (cells give the quotas; the safety check is HiveD's, kept so that
        # both schedulers accept exactly the same tenant files)
        object.__setattr__(self, "_hived", HiveD(tenants=self.tenants, bad_gpus=self.bad_gpus,
                                                 gpus_per_server=self.gpus_per_server))

    def setup(self, cluster: Cluster) -> Setup:
        """The tenants' quotas on ``cluster`` (validated as HiveD validates them)."""
        return self._hived.setup(cluster)  # type: ignore[attr-defined]

    def placed_gpus(self, rows: Any, cluster: Cluster) -> list[np.ndarray] | None:
        """The GPU ids this scheduler chose for each row (its cells), so that a driver placing
        on ``cluster``'s servers runs the rows there instead of placing them again (see
        :func:`hetsched.rounds.placing.place_round`); None when ``cluster``'s servers are not
        the ones the cells were built on (the driver then places the rows itself)."""
        return self._hived.placed_gpus(rows, cluster)  # type: ignore[attr-defined]   # the same cells

    def result_metrics(self, result: Any, workload: Any, cluster: Cluster) -> dict[str, Any]:
        """Tenant metrics of a simulation of this scheduler (:func:`hetsched.hived.metrics.
        tenant_metrics`: the sharing-anomaly delay per tenant and job, the fragmentation per
        round, type and level); :func:`hetsched.simulate` adds them to ``result.extra``."""
        from .metrics import tenant_metrics

        return tenant_metrics(result, self.setup(cluster), workload, by_entity=self.tenants is not None,
                              job_priority=self.job_priority)

    def initial_state(self, start_time: float = 0.0) -> HiveDState:
        """No job placed."""
        return HiveDState.empty(start_time, self.bad_gpus)

    def plan_round(self, view: Any, state: HiveDState) -> Any:
        """Admit by quota, place first fit (see the module docstring)."""
        from ..rounds.protocol import RoundRows

        t0 = time.perf_counter()
        if not isinstance(state, HiveDState):
            raise ValidationError(f"`state` must be a HiveDState; got {type(state).__name__}.")
        check_view(view)
        st = self.setup(view.cluster)
        topo = st.forest.topology
        cols = [topo.type_index(t, argument="cluster") for t in view.gpu_types]
        J = ActiveJobs.of(view, None if self.tenants is None else st.tenants, self.job_priority)
        held = state.held()
        n = J.jobs.shape[0]
        free = np.ones(topo.n_gpus, dtype=bool)
        free[state.bad_gpus[state.bad_gpus < topo.n_gpus]] = False
        used = np.zeros_like(st.quota)
        run_type = np.full(n, -1, dtype=np.int64)
        got: dict[int, np.ndarray] = {}
        was = np.array([int(j) in held for j in J.jobs.tolist()], dtype=bool)
        prev_type = np.array([held[int(j)][0] if int(j) in held else -1 for j in J.jobs.tolist()], dtype=np.int64)
        prio = np.lexsort((np.arange(n), J.order.argsort(), ~was)) if n else np.zeros(0, dtype=np.int64)
        for klass in (GUARANTEED, OPPORTUNISTIC):
            for r in prio.tolist():
                if J.klass[r] != klass:
                    continue
                v, k = int(J.tenant[r]), int(J.gpus[r])
                if klass == GUARANTEED:
                    st.check_fits(J, r, cols)
                prev = held.get(int(J.jobs[r]))
                if prev is not None and prev[1] == klass and prev[0] in cols and prev[2].size and \
                        int(prev[2].max()) < topo.n_gpus and free[prev[2]].all() and (
                        klass == OPPORTUNISTIC or used[v, prev[0]] + k <= st.quota[v, prev[0]]):
                    g = prev[2]
                    kcol = cols.index(prev[0])
                else:
                    g, kcol = None, -1
                    for kc in HiveD._types(J, r, prev_type[r], cols):
                        t = cols[kc]
                        if klass == GUARANTEED and used[v, t] + k > st.quota[v, t]:
                            continue
                        g = _first_fit(topo, free, t, k)
                        if g is not None:
                            kcol = kc
                            break
                if g is None:
                    continue
                free[g] = False
                got[r] = g
                run_type[r] = kcol
                if klass == GUARANTEED:
                    used[v, cols[kcol]] += k
        rows_idx = np.array(sorted(got), dtype=np.int64)
        gl = [np.sort(got[r]) for r in rows_idx.tolist()]
        gptr = np.zeros(rows_idx.shape[0] + 1, dtype=np.int64)
        gptr[1:] = np.cumsum([g.shape[0] for g in gl])
        types = np.array(cols, dtype=np.int64)
        busy = np.flatnonzero(~free)
        payload = {"job_ids": J.jobs[rows_idx], "job_type": types[run_type[rows_idx]] if rows_idx.size else rows_idx,
                   "job_class": J.klass[rows_idx], "gpu_ptr": gptr,
                   "gpu_ids": np.concatenate(gl) if gl else np.zeros(0, dtype=np.int64),
                   "cell_ptr": np.zeros(rows_idx.shape[0] + 1, dtype=np.int64), "cell_ids": np.zeros(0, np.int64),
                   "bind_vcell": np.zeros(0, np.int64), "bind_cell": np.zeros(0, np.int64),
                   "lost_vcell": np.zeros(0, np.int64), "frag": fragmentation(st.forest, busy)}
        kk = run_type[rows_idx]
        T = view.throughputs
        U = view.unconsolidated if view.unconsolidated is not None else T
        gp = J.gpus[rows_idx]
        spans = np.array([np.unique(topo.gpu_server[g]).shape[0] > 1 for g in gl], dtype=bool)
        return RoundRows(view.jobs[rows_idx], kk, gp, T[rows_idx, kk], spread_rate=U[rows_idx, kk],
                         consolidated=~spans & (gp > 1), info={"plan_s": time.perf_counter() - t0, "solved": False},
                         payload=payload)

    def record_round(self, state: HiveDState, ran: Any, seconds: np.ndarray) -> HiveDState:
        """The placements of the rows that ran."""
        return record_placed(state, ran, seconds)


def _first_fit(topo: Any, free: np.ndarray, t: int, k: int) -> np.ndarray | None:
    """GPUs for a gang of ``k`` on type ``t``: the first server with ``k`` free GPUs, or for a
    gang larger than every server, wholly free servers (None when there are none)."""
    servers = np.flatnonzero(topo.server_type == t)
    if servers.size == 0:
        return None
    off = topo.gpu_offset
    nfree = np.add.reduceat(free.astype(np.int64), off[:-1])[servers] if topo.n_gpus else np.zeros(0, np.int64)
    size = topo.server_gpus[servers]
    if k <= int(size.max()):
        ok = np.flatnonzero(nfree >= k)
        if ok.size == 0:
            return None
        s = int(servers[ok[0]])
        ids = np.arange(off[s], off[s + 1])
        return ids[free[ids]][:k]
    whole = servers[nfree == size]
    take, total = [], 0
    for s in whole.tolist():
        take.append(np.arange(off[s], off[s + 1]))
        total += int(topo.server_gpus[s])
        if total >= k:
            return np.concatenate(take)[:k]
    return None
