r"""Tenant guarantees with throughput awareness: any allocation policy of ours (max-min
fairness, finish-time fairness, ...) run inside each tenant's cells, plus an idle pool.

HiveD (Zhao et al., OSDI 2020, §3) guarantees each tenant its cells but schedules inside
them without looking at throughputs; Gavel (Narayanan et al., OSDI 2020, §3-§4) allocates
by throughput across GPU types but guarantees no tenant anything. :class:`TenantPolicy`
offers both:

* **Guaranteed part.** Each tenant :math:`v` gets the sub-cluster :math:`Q_{v,\cdot}` (its
  quota: the GPU count of its cells per type, :meth:`Tenants.quotas`). The policy is solved
  for :math:`v`'s jobs on that sub-cluster, and the round mechanism turns its allocation into
  whole-gang rows, exactly as :class:`~hetsched.rounds.PolicyScheduler` does for a whole
  cluster. Because the sub-clusters are disjoint (:math:`\sum_v Q_{v,t} \le C_t`, the
  safety check), solving per tenant is exact for the constrained problem

  .. math:: \max \; f(X) \quad \text{s.t.} \quad \sum_{j \in v} s_j X_{jt} \le Q_{v,t}
            \;\; \forall v, t

  when the objective is separable over tenants (max-min fairness within a tenant, total
  throughput, ...): the tenants' rows are the constraint rows of that program, and they
  share no variable. A tenant's guaranteed rows never hold more than :math:`Q_{v,t}` GPUs of
  type :math:`t` (tested), whatever the other tenants do.
* **Idle pool** (``share_idle=True``). GPUs the tenants' rows leave idle this round go to
  waiting jobs of any tenant, in arrival order, each whole gang on the fastest type with
  room (the greedy walk of Tiresias and Gavel's round mechanism). They run opportunistically:
  next round their owner's jobs come first again (HiveD's low-priority jobs, §4).

What differs from HiveD's cells: the guarantee here is per GPU count and type; the
placement of the rows inside each tenant's cells (the topology part) is left to the round
loop's placement. :class:`~hetsched.hived.HiveD` gives the topology guarantee without
throughput awareness; this gives throughput awareness with the count guarantee.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..inputs.cluster import Cluster
from ..validation import check_bool, check_int
from .common import ActiveJobs
from .scheduler import HiveD, Setup, check_tenants_arg, check_view

__all__ = ["TenantPolicy", "TenantPolicyState"]


@dataclass(frozen=True, eq=False)
class TenantPolicyState:
    """One :class:`~hetsched.rounds.policy_scheduler.PolicyState` per tenant, and the clock.

    Attributes
    ----------
    sub : tuple
        Per tenant (in the tenants' order), its policy scheduler's state.
    rounds : int
        Rounds recorded.
    """

    sub: tuple = field(default_factory=tuple)
    rounds: int = 0


@dataclass(frozen=True, kw_only=True)
class TenantPolicy:
    """A policy solved inside each tenant's quota, with an idle pool (module docstring).

    Parameters
    ----------
    policy : str or Policy, default "max_min_fairness"
        Any registered allocation policy (a name or an object).
    tenants : Tenants, mapping, str or None
        As in :class:`~hetsched.hived.HiveD` (None: one tenant owning every cell, which is
        the unconstrained policy).
    share_idle : bool, default True
        Give the GPUs the tenants leave idle to waiting jobs of any tenant.
    gpus_per_server : int, default 8
        Server size when the cluster has no topology.
    """

    policy: Any = "max_min_fairness"
    tenants: Any = None
    share_idle: bool = True
    gpus_per_server: int = 8

    name = "hived_policy"
    rows_checked = False

    def __post_init__(self) -> None:
        from ..rounds.policy_scheduler import PolicyScheduler

        object.__setattr__(self, "tenants", check_tenants_arg(self.tenants))
        check_bool(self.share_idle, "share_idle")
        check_int(self.gpus_per_server, "gpus_per_server", low=1)
        object.__setattr__(self, "_hived", HiveD(tenants=self.tenants, gpus_per_server=self.gpus_per_server))
        object.__setattr__(self, "_inner", PolicyScheduler(self.policy))

    def setup(self, cluster: Cluster) -> Setup:
        """Cells, tenants and quotas on ``cluster`` (validated as HiveD validates them)."""
        return self._hived.setup(cluster)  # type: ignore[attr-defined]

    def initial_state(self, start_time: float = 0.0) -> TenantPolicyState:
        """No tenant has a policy state yet (made at the first round)."""
        return TenantPolicyState()

    def plan_round(self, view: Any, state: TenantPolicyState) -> Any:
        """Each tenant's rows on its quota, then the idle pool."""
        from ..rounds.protocol import RoundRows

        if not isinstance(state, TenantPolicyState):
            raise ValidationError(f"`state` must be a TenantPolicyState; got {type(state).__name__}.")
        check_view(view)
        st = self.setup(view.cluster)
        topo = st.forest.topology
        cols = [topo.type_index(t, argument="cluster") for t in view.gpu_types]
        J = ActiveJobs.of(view, None if self.tenants is None else st.tenants, None)
        subs = list(state.sub) or [self._inner.initial_state(view.now) for _ in range(len(st.tenants))]
        parts: list[RoundRows] = []
        segments: list[tuple[int, int, int, Any]] = []      # (tenant, first row, rows, payload)
        info = {"solved": False, "solve_ok": True, "solve_status": "", "solve_s": 0.0, "solve_jobs": 0,
                "solve_classes": 0, "solve_pending": False}
        off = 0
        for v in range(len(st.tenants)):
            m = np.flatnonzero(J.tenant == v)
            quota = st.quota[v, cols]
            if m.size == 0 or quota.sum() == 0:
                continue
            sub = self._sub_view(view, m, quota)
            try:
                rows = self._inner.plan_round(sub, subs[v])
            except ValidationError as exc:
                raise ValidationError(f"tenant {st.tenants.names[v]!r} (quota {dict(zip(view.gpu_types, quota.tolist()))}"
                                      f"): {exc}") from None
            parts.append(rows)
            segments.append((v, off, rows.n_rows, rows.payload))
            off += rows.n_rows
            ri = rows.info
            info["solved"] |= bool(ri.get("solved", False))
            info["solve_ok"] &= bool(ri.get("solve_ok", True))
            info["solve_pending"] |= bool(ri.get("solve_pending", False))
            s = float(ri.get("solve_s", math.nan))
            info["solve_s"] += 0.0 if math.isnan(s) else s
            info["solve_jobs"] += int(ri.get("solve_jobs", 0))
            info["solve_classes"] += int(ri.get("solve_classes", 0))
            if ri.get("solve_status"):
                info["solve_status"] = str(ri["solve_status"])
        rows = _concat(parts)
        pool = self._pool(view, J, rows) if self.share_idle else RoundRows.empty()
        all_rows = _concat([rows, pool])
        payload = {"segments": [(v, o, n) for v, o, n, _ in segments], "payloads": [p for *_, p in segments],
                   "n_tenant_rows": rows.n_rows, "subs": subs}
        return dataclasses.replace(all_rows, info=info, payload=payload,
                                   row_id=np.arange(all_rows.n_rows, dtype=np.int64))

    @staticmethod
    def _sub_view(view: Any, m: np.ndarray, quota: np.ndarray) -> Any:
        """The view of one tenant's jobs on its quota."""
        def pick(a: Any) -> Any:
            return None if a is None else a[m]

        cluster = Cluster(dict(zip(view.gpu_types, (int(q) for q in quota))))
        return dataclasses.replace(view, cluster=cluster, capacities=np.asarray(quota, dtype=np.int64),
                                   jobs=view.jobs[m], throughputs=view.throughputs[m],
                                   unconsolidated=pick(view.unconsolidated), scale_factors=view.scale_factors[m],
                                   weights=view.weights[m], remaining=view.remaining[m], arrival=view.arrival[m],
                                   isolated_time=view.isolated_time[m], deadlines=pick(view.deadlines),
                                   entities=pick(view.entities), waiting=pick(view.waiting))

    @staticmethod
    def _pool(view: Any, J: ActiveJobs, rows: Any) -> Any:
        """Waiting jobs on the GPUs the tenants' rows leave idle (arrival order, fastest type)."""
        from ..rounds.protocol import RoundRows

        m = len(view.gpu_types)
        idle = np.asarray(view.capacities, dtype=np.int64) - np.bincount(
            rows.gpu_type, weights=rows.gpus * rows.share, minlength=m).astype(np.int64)
        running = np.zeros(view.n_jobs, dtype=bool)
        if rows.n_rows:
            r, j = rows.members()
            running[np.searchsorted(view.jobs, j)] = True
        out_j, out_k = [], []
        for r in J.order.tolist():
            if running[r]:
                continue
            k = int(J.gpus[r])
            for kc in np.argsort(-J.T[r], kind="stable").tolist():
                if J.T[r, kc] > 0 and idle[kc] >= k:
                    idle[kc] -= k
                    out_j.append(r)
                    out_k.append(kc)
                    break
        if not out_j:
            return RoundRows.empty()
        r = np.asarray(out_j, dtype=np.int64)
        k = np.asarray(out_k, dtype=np.int64)
        U = view.unconsolidated if view.unconsolidated is not None else view.throughputs
        return RoundRows(view.jobs[r], k, J.gpus[r], view.throughputs[r, k], spread_rate=U[r, k])

    def record_round(self, state: TenantPolicyState, ran: Any, seconds: np.ndarray) -> TenantPolicyState:
        """Each tenant's policy state records its own rows that ran (pool rows are not part of
        any tenant's allocation)."""
        p = ran.payload
        if not isinstance(p, dict):
            return dataclasses.replace(state, rounds=state.rounds + 1)
        subs = list(p["subs"])        # the states plan_round used (made there at the first round)
        secs = np.asarray(seconds, dtype=float)
        for (v, off, n), pay in zip(p["segments"], p["payloads"]):
            mask = (ran.row_id >= off) & (ran.row_id < off + n)
            sub = ran.take(mask, row_id=ran.row_id[mask] - off)
            sub = dataclasses.replace(sub, payload=pay)
            subs[v] = self._inner.record_round(subs[v], sub, secs[mask])
        return TenantPolicyState(sub=tuple(subs), rounds=state.rounds + 1)


def _concat(parts: Sequence[Any]) -> Any:
    from ..rounds.protocol import RoundRows

    parts = [p for p in parts if p.n_rows]
    if not parts:
        return RoundRows.empty()
    if len(parts) == 1:
        return parts[0]
    names = ("job", "gpu_type", "gpus", "rate", "partner", "partner_rate", "spread_rate", "partner_spread_rate",
             "consolidated", "share", "batch_size")
    return RoundRows(**{n: np.concatenate([getattr(p, n) for p in parts]) for n in names})
