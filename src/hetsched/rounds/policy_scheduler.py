"""PolicyScheduler: any allocation policy as a round scheduler (solve -> round mechanism).

Each round :meth:`PolicyScheduler.plan_round`

1. re-solves the policy when the active set changed (``reallocate="on_change"``) or the
   re-solve period has passed, else keeps the current allocation (dropping finished jobs
   and carving shares for arrivals, :func:`~hetsched.mechanism.carve_shares`);
2. turns the allocation into this round's rows with the round mechanism
   (:func:`~hetsched.mechanism.plan_round_arrays`).

What the mechanism schedules depends on what the policy returned:

* a plain X (one row per job and type): whole gangs, one type per round (Gavel);
* ``extra["allocation_rows"]`` with pair or unconsolidated rows (``packing=``,
  ``placement_sensitivity=``): the rows themselves, each keyed by its members and kind, so
  the mechanism's shares converge to the time of each *row*; rows that share a job never
  run in the same round; a pair runs both jobs on the same GPUs at their pair throughputs;
  a consolidated row of a placement-sensitive policy must sit on one server, an
  unconsolidated one runs at its unconsolidated throughput when spread;
* ``extra["configurations"]`` (policies that choose a GPU type *and* count, Sia): every
  chosen configuration runs the whole round at its goodput; the job's configuration of the
  last round is handed to the next solve as ``current``, so the restart penalty the
  policy carries sees it.

Parameters that name the workload (``packing="workload"``,
``placement_sensitivity="workload"``) are bound here from the workload's catalogue (a
generated workload carries it).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..api import solve
from ..errors import ValidationError
from ..formulations.base import Policy, make_policy
from ..formulations.tables import WORKLOAD, TableBinding
from ..inputs.jobs import usable_mask
from ..mechanism import ShareHistory, carve_shares, plan_round_arrays
from ..mechanism.plan import MODES
from ..validation import check_choice
from .options import ARRIVALS, MechanismOptions
from .protocol import RoundRows, RoundView

__all__ = ["ARRIVALS", "WORKLOAD", "PolicyScheduler", "PolicyState"]

log = logging.getLogger(__name__)

#: Fields of :class:`MechanismOptions`, read as attributes of a PolicyScheduler too.
_OPTION_NAMES = frozenset(f.name for f in dataclasses.fields(MechanismOptions))


@dataclass
class PolicyState:
    """What a :class:`PolicyScheduler` remembers between rounds (owned by the driver).

    Attributes
    ----------
    X : ndarray or None
        The allocation the mechanism follows; rows follow ``keys``.
    keys : ndarray
        Row keys: job numbers (plain X) or allocation-row keys (``"7"``, ``"7~u"``,
        ``"7+9"``).
    units : dict or None
        For allocation rows: ``members`` (n, 2), ``gang`` (n,), ``rate``, ``partner_rate`` and
        ``spread_rate`` (n, m), ``consolidated`` (n,).
    configs : DataFrame or None
        For configuration policies: the last solve's ``extra["configurations"]``.
    current : dict
        Job number -> (GPU type, GPUs) it ran on last round (configuration policies).
    history : ShareHistory
        Shares received under the current allocation.
    last_solve : float
        Clock of the last solve.
    policy : Policy or None
        The policy with workload-bound parameters resolved (first round).
    pending : bool
        The active set changed since the last solve (a solve is due once
        ``min_solve_interval`` has passed).
    """

    X: np.ndarray | None = None
    keys: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    units: dict[str, np.ndarray] | None = None
    configs: pd.DataFrame | None = None
    current: dict[int, tuple[str, int]] = field(default_factory=dict)
    history: ShareHistory = field(default_factory=ShareHistory.empty)
    last_solve: float = -math.inf
    policy: Policy | None = None
    pending: bool = False


class PolicyScheduler:
    """An allocation policy driven round by round (see the module docstring).

    Parameters
    ----------
    policy : str or Policy
        A registered policy name or a policy object.
    options : MechanismOptions, optional
        When to re-solve, the round mechanism and the solver (a
        :class:`~hetsched.sim.SimOptions` gives its mechanism part). Default: the defaults.
    **changes
        Fields of :class:`MechanismOptions` set on top of ``options`` (``reallocate=``,
        ``rule=``, ``min_solve_interval=``, ...); ``mode=`` is ``mechanism=``.

    Attributes
    ----------
    options : MechanismOptions
        The options in force; each field also reads as an attribute (``sched.backfill``),
        ``mode`` is ``options.mechanism`` and ``period`` the re-solve period in seconds
        (None for ``reallocate="on_change"``).

    Raises
    ------
    ValidationError
        ``options`` is not a MechanismOptions, an unknown option name, or a value that
        breaks its rule (see :class:`MechanismOptions`).

    Examples
    --------
    >>> import hetsched as hs
    >>> sched = PolicyScheduler("max_min_fairness", MechanismOptions(rule="deficit"), backfill=False)
    >>> sched.options.rule, sched.backfill, sched.mode
    ('deficit', False, 'rounds')
    >>> sched = PolicyScheduler("max_min_fairness")
    >>> jobs = hs.JobSet([[2.0, 1.0]], gpu_types=["v100", "k80"], steps_remaining=[7200.0])
    >>> hs.simulate(sched, jobs, hs.Cluster({"v100": 1, "k80": 1})).summary["avg_jct_s"]
    3600.0
    """

    #: Rows come from the round mechanism (capacity, one row per job, members active): the
    #: driver need not check them again (tests check them with ``check_rows`` directly).
    rows_checked = True

    def __init__(self, policy: str | Policy, options: MechanismOptions | None = None, **changes: Any) -> None:
        self.policy = make_policy(policy)
        if options is None:
            options = MechanismOptions()
        elif not isinstance(options, MechanismOptions):
            raise ValidationError(
                f"`options` must be a hetsched.MechanismOptions or None; got {type(options).__name__}.")
        if "mode" in changes:   # the keyword's older name
            if "mechanism" in changes:
                raise ValidationError("give `mode` or `mechanism`, not both (they name the same option).")
            changes["mechanism"] = check_choice(changes.pop("mode"), "mode", MODES)
        options = options.mechanism_options
        self.options: MechanismOptions = options.replace(**changes) if changes else options

    def __getattr__(self, name: str) -> Any:
        """A field of :attr:`options` read as an attribute (``sched.rule``)."""
        opts = self.__dict__.get("options")
        if opts is None or name not in _OPTION_NAMES:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(opts, name)

    @property
    def mode(self) -> str:
        """``options.mechanism``: "rounds" or "ideal"."""
        return self.options.mechanism

    @property
    def period(self) -> float | None:
        """Seconds between re-solves, or None for ``reallocate="on_change"``."""
        r = self.options.reallocate
        return None if isinstance(r, str) else float(r)

    @property
    def name(self) -> str:
        """The policy's name."""
        return self.policy.name

    @property
    def reads(self) -> tuple[str, ...]:
        """Job fields the policy reads or requires."""
        return tuple(set(self.policy.reads) | set(self.policy.requires))

    def __repr__(self) -> str:
        return f"PolicyScheduler({self.policy.name!r}, reallocate={self.options.reallocate!r}, mode={self.mode!r})"

    # ------------------------------------------------------------------ protocol
    def initial_state(self, start_time: float = 0.0) -> PolicyState:
        """A state that knows no allocation yet."""
        return PolicyState()

    def plan_round(self, view: RoundView, state: PolicyState) -> RoundRows:
        """This round's rows (solving first when the policy needs it)."""
        if state.policy is None:
            state.policy = bind_workload(self.policy, view.context)
        info: dict[str, Any] = {"solved": False, "solve_ok": True, "solve_status": "", "solve_s": math.nan,
                                "solve_jobs": 0, "solve_classes": 0}
        state.pending = state.pending or view.changed
        since = view.now - state.last_solve
        if self.period is None:
            due = state.pending and since >= self.options.min_solve_interval - 1e-9
        else:
            due = since >= self.period - 1e-9
        need = due or (state.X is None and state.configs is None) or (view.changed and not _covers_any(state, view.jobs))
        if need:
            self._solve(view, state, info)
        # a later solve may change the plan without any arrival or completion
        info["solve_pending"] = not info["solved"] and (self.period is not None or state.pending)
        if state.configs is not None:
            return self._config_rows(view, state, info)
        return self._mechanism_rows(view, state, info)

    def record_round(self, state: PolicyState, ran: RoundRows, seconds: np.ndarray) -> PolicyState:
        """Update shares (and the current configurations) with what ran."""
        if state.configs is not None:
            types = state.configs.attrs.get("gpu_types", ())
            state.current = {int(j): (types[int(k)], int(g)) for j, k, g in zip(ran.job, ran.gpu_type, ran.gpus)}
            return state
        if ran.payload is not None:
            state.history = state.history.record(ran_plan(ran), ran.payload[0].round_seconds)
        return state

    # ------------------------------------------------------------------ solving
    def _solve(self, view: RoundView, state: PolicyState, info: dict[str, Any]) -> None:
        pol = state.policy
        assert pol is not None
        if getattr(pol, "emits_configurations", False):
            alive = set(view.jobs.tolist())
            cur = {j: c for j, c in state.current.items() if j in alive}
            pol = dataclasses.replace(pol, current=cur or None)
        t0 = time.perf_counter()
        jobs = view.jobset(self.reads)
        alloc = solve(pol, jobs, view.cluster, solver=self.options.solver,
                      time_limit=self.options.solve_time_limit, options=self.options.solver_options)
        info.update(solved=True, solve_s=time.perf_counter() - t0, solve_status=alloc.status,
                    solve_jobs=int(alloc.sizes.get("n_jobs", view.n_jobs)),
                    solve_classes=int(alloc.sizes.get("n_classes", view.n_jobs)))
        state.last_solve = view.now
        state.pending = False
        info["solve_ok"] = bool(alloc.success)   # e.g. a failed certificate: X is used, the round log says so
        if not alloc.has_solution:
            info["solve_ok"] = False
            log.warning("t=%.0f s: %s returned %r (%s); keeping the previous allocation", view.now, pol.name,
                        alloc.status, alloc.message)
            if state.X is None and state.configs is None and not getattr(pol, "emits_configurations", False):
                iso = solve("isolated", jobs, view.cluster)
                state.X, state.keys, state.units = iso.X, view.jobs.copy(), None
            return
        cfg = alloc.extra.get("configurations") if pol.emits_configurations else None  # None: no jobs
        if cfg is not None:
            cfg = cfg.copy()
            cfg.attrs["gpu_types"] = tuple(view.gpu_types)
            state.configs = cfg
            return
        rows = alloc.extra.get("allocation_rows") if pol.emits_allocation_rows else None
        if (rows is not None and (rows["kind"] != "single").any()) or _sensitive(pol):
            state.X, state.keys, state.units = _units_from_rows(rows, view, _sensitive(pol))
        else:
            state.X = np.clip(np.nan_to_num(alloc.X, nan=0.0), 0.0, None)
            state.keys, state.units = view.jobs.copy(), None
        if self.options.reset_shares:
            state.history = state.history.reset()

    # ------------------------------------------------------------------ rows
    def _config_rows(self, view: RoundView, state: PolicyState, info: dict[str, Any]) -> RoundRows:
        cfg = state.configs
        assert cfg is not None
        alive = cfg[cfg["gpu_type"].notna() & cfg.index.isin(view.jobs)]
        col = {t: k for k, t in enumerate(view.gpu_types)}
        job = alive.index.to_numpy(dtype=np.int64)
        k = np.array([col[t] for t in alive["gpu_type"]], dtype=np.int64)
        gpus = alive["gpus"].to_numpy(dtype=np.int64)
        rate = alive["goodput"].to_numpy(dtype=float)
        nodes = alive["nodes"].to_numpy(dtype=np.int64) if "nodes" in alive else np.ones(job.size, np.int64)
        return RoundRows(job, k, gpus, rate, consolidated=(nodes == 1) & (gpus > 1), info=info)

    def _mechanism_rows(self, view: RoundView, state: PolicyState, info: dict[str, Any]) -> RoundRows:
        _follow(state, view, self.options.arrivals)
        cap = view.capacities.astype(np.int64)
        u = state.units
        if u is None:
            pos = np.searchsorted(view.jobs, state.keys)
            gang = view.scale_factors[pos]
            members = None
        else:
            gang = u["gang"]
            members = u["members"]
            pos = np.searchsorted(view.jobs, members[:, 0])
        waiting = None if view.waiting is None else view.waiting[pos]
        plan = plan_round_arrays(
            state.X, gang, cap, state.history, job_ids=state.keys, gpu_types=view.gpu_types,
            round_seconds=view.round_seconds, mode=self.mode, rule=self.options.rule, stickiness=self.options.stickiness,
            work_conserving=self.options.work_conserving, members=members,
            backfill=self.options.backfill or members is not None,
            waiting=waiting,
        )
        info["plan_s"] = plan.timings.get("plan_s", math.nan)
        if self.mode == "ideal":
            r, k = np.nonzero(plan.time_share > 0)
            share = plan.time_share[r, k]
        else:
            r = np.flatnonzero(plan.assignment >= 0)
            k = plan.assignment[r]
            share = np.ones(r.size)
        if u is None:
            p = np.searchsorted(view.jobs, state.keys[r])
            T = view.throughputs
            U = view.unconsolidated if view.unconsolidated is not None else T
            return RoundRows(state.keys[r], k, gang[r], T[p, k], spread_rate=U[p, k], share=share, payload=(plan, r),
                             info=info)
        return RoundRows(u["members"][r, 0], k, gang[r], u["rate"][r, k], partner=u["members"][r, 1],
                         partner_rate=u["partner_rate"][r, k], spread_rate=u["spread_rate"][r, k],
                         partner_spread_rate=u["partner_rate"][r, k], consolidated=u["consolidated"][r],
                         share=share, payload=(plan, r), info=info)


# ---------------------------------------------------------------------- helpers
def ran_plan(ran: RoundRows) -> Any:
    """The RoundPlan in ``ran.payload`` = ``(plan, plan_row_of_each_row)``, trimmed to the rows
    that ran ("rounds" mode: the others get assignment -1; ideal mode is never trimmed)."""
    plan, r = ran.payload
    if plan.mode != "rounds":
        return plan
    kept = np.zeros(plan.n_jobs, dtype=bool)
    kept[r[ran.row_id]] = True
    run = plan.assignment >= 0
    if (kept == run).all():
        return plan
    assign = np.where(kept, plan.assignment, -1)
    share = np.zeros_like(plan.time_share)
    share[np.flatnonzero(kept), assign[kept]] = 1.0
    return dataclasses.replace(plan, assignment=assign, time_share=share)


def _sensitive(pol: Policy) -> bool:
    return "placement_sensitivity" in pol.bound_tables()


def binding_of(context: Mapping[str, Any]) -> TableBinding:
    """The :class:`~hetsched.formulations.tables.TableBinding` of a round's ``context``
    (``ids``: the trace id of each job number; ``catalogue`` / ``catalogue_rows`` of a
    sampled workload)."""
    return TableBinding(ids=context.get("ids"), catalogue=context.get("catalogue"),
                        catalogue_rows=context.get("catalogue_rows"))


def bind_workload(policy: Policy, context: Mapping[str, Any]) -> Policy:
    """``policy`` with its per-job tables keyed the way the round loop names jobs
    (:meth:`~hetsched.formulations.base.Policy.bind_tables` with :func:`binding_of`)."""
    return policy.bind_tables(binding_of(context))


_KIND_TAG = {"single": "", "unconsolidated": "~u"}


def _units_from_rows(rows: pd.DataFrame | None, view: RoundView, sensitive: bool
                     ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Allocation rows grouped into mechanism units (members + kind), with their X and rates."""
    m = len(view.gpu_types)
    T = view.throughputs
    U = view.unconsolidated if view.unconsolidated is not None else T
    if rows is None or len(rows) == 0:
        rows = pd.DataFrame({"kind": [], "gpu_type": [], "job": [], "partner": [], "fraction": [],
                             "throughput": [], "partner_throughput": []})
    job = rows["job"].to_numpy(dtype=np.int64)
    partner = np.array([-1 if p is None or (isinstance(p, float) and math.isnan(p)) else int(p)
                        for p in rows["partner"]], dtype=np.int64)
    kind = rows["kind"].to_numpy(dtype=object)
    key = np.array([f"{a}+{b}" if b >= 0 else f"{a}{_KIND_TAG.get(kd, '?')}" for a, b, kd in zip(job, partner, kind)],
                   dtype=object)
    col = {t: i for i, t in enumerate(view.gpu_types)}
    k = np.array([col[t] for t in rows["gpu_type"]], dtype=np.int64)
    keys, inv = np.unique(key, return_inverse=True) if len(key) else (np.zeros(0, object), np.zeros(0, np.int64))
    n_u = keys.shape[0]
    Xu = np.zeros((n_u, m))
    np.add.at(Xu, (inv, k), rows["fraction"].to_numpy(dtype=float))
    first = np.zeros(n_u, np.int64)
    first[inv[::-1]] = np.arange(len(inv))[::-1]
    ma, mb, mk = job[first], partner[first], kind[first]
    pa = np.searchsorted(view.jobs, ma)
    rate = np.zeros((n_u, m))
    prate = np.zeros((n_u, m))
    np.maximum.at(rate, (inv, k), rows["throughput"].to_numpy(dtype=float))
    np.maximum.at(prate, (inv, k), rows["partner_throughput"].to_numpy(dtype=float))
    single = mb < 0
    unc = mk == "unconsolidated"
    # consolidated-speed rate of unconsolidated rows is the job's own T (used when placement
    # happens to keep the gang on one server); their spread rate is the row's throughput
    spread = rate.copy()
    rate[unc] = T[pa[unc]]
    spread[single & ~unc] = U[pa[single & ~unc]] if not sensitive else rate[single & ~unc]
    gang = view.scale_factors[pa].astype(np.int64)
    units = {"members": np.stack([ma, mb], axis=1), "gang": gang, "rate": rate, "partner_rate": prate,
             "spread_rate": spread, "consolidated": sensitive & single & ~unc & (gang > 1)}
    return np.clip(Xu, 0.0, None), keys, units


def _covers_any(state: PolicyState, jobs: np.ndarray) -> bool:
    """Whether the current allocation has a row for at least one of ``jobs``."""
    if state.configs is not None:
        return bool(state.configs.index.isin(jobs).any())
    if state.X is None:
        return False
    keys = state.keys if state.units is None else state.units["members"][:, 0]
    return bool(np.isin(keys, jobs).any())


def _follow(state: PolicyState, view: RoundView, arrivals: str = "carve") -> None:
    """Rows of the allocation for the active jobs: drop finished jobs; jobs new to it get a
    carved share (``arrivals="carve"``) or nothing until the next solve (``"wait"``)."""
    if state.X is None:
        return
    active = view.jobs
    u = state.units
    if u is None and state.keys.shape == active.shape and np.array_equal(state.keys, active):
        return   # the allocation's rows are exactly the active jobs
    if u is None:
        keep = np.isin(state.keys, active)
        known = state.keys[keep]
    else:
        mem = u["members"]
        keep = np.isin(mem[:, 0], active) & ((mem[:, 1] < 0) | np.isin(mem[:, 1], active))
        known = np.unique(mem[keep].ravel())
    new = active[~np.isin(active, known)]
    if arrivals == "wait":
        new = new[:0]
    if keep.all() and new.size == 0:
        return
    Xk = state.X[keep]
    gang_k = (view.scale_factors[np.searchsorted(active, state.keys[keep])] if u is None else u["gang"][keep])
    state.keys = state.keys[keep]
    if u is not None:
        state.units = u = {name: v[keep] for name, v in u.items()}
    if new.size == 0:
        state.X = Xk
        return
    pn = np.searchsorted(active, new)
    s_new = view.scale_factors[pn].astype(np.int64)
    usable = usable_mask(view.throughputs[pn], s_new, view.capacities)
    Xn = carve_shares(Xk, gang_k.astype(np.int64), view.capacities.astype(np.int64), s_new, new_usable=usable)
    if u is None:
        ids = np.concatenate([state.keys, new])
        order = np.argsort(ids, kind="stable")  # positions are arrival order
        state.X, state.keys = Xn[order], ids[order]
        return
    T = view.throughputs
    Ufull = view.unconsolidated if view.unconsolidated is not None else T
    state.X = Xn
    state.keys = np.concatenate([state.keys, np.array([str(j) for j in new], dtype=object)])
    state.units = {
        "members": np.concatenate([u["members"], np.stack([new, np.full(new.size, -1)], axis=1)]),
        "gang": np.concatenate([u["gang"], s_new]),
        "rate": np.concatenate([u["rate"], T[pn]]),
        "partner_rate": np.concatenate([u["partner_rate"], np.zeros((new.size, T.shape[1]))]),
        "spread_rate": np.concatenate([u["spread_rate"], Ufull[pn]]),
        "consolidated": np.concatenate([u["consolidated"], np.zeros(new.size, bool)]),
    }
