r"""Synergy (Mohan et al., OSDI'22): resource-sensitive allocation of host CPUs and memory
on top of a GPU scheduling policy.

"Looking Beyond GPUs for DNN Scheduling on Multi-Tenant Clusters", OSDI 2022. Jobs differ in
how many CPU cores and how much host memory they need per GPU to run at their GPU speed
(§3); giving every job the same share per GPU ("GPU-proportional") starves some and wastes
on others. Synergy keeps the cluster's GPU policy, which decides *which* jobs run, and
changes only *how much CPU and memory* each running job gets (§4).

Each round
----------
1. **Which jobs run** (the GPU policy, §4 runs Synergy under FIFO, SRTF and LAS):
   ``order="fifo"`` by arrival; ``"srtf"`` by remaining steps over the job's fastest
   throughput (shortest first); ``"las"`` by attained GPU-seconds (least first). Whole
   gangs walk onto GPU types in that order (:func:`~hetsched.schedulers.gang_walk.walk_gangs`:
   last round's type first, else the fastest with room; a gang that fits nowhere waits and
   smaller ones behind it may run).
2. **How much CPU and memory** (``allocation``): ``"proportional"`` (the baseline),
   ``"tune"`` (Synergy-TUNE, the greedy on servers) or ``"opt"`` (Synergy-OPT, the LP);
   the math is in :mod:`hetsched.schedulers.synergy_alloc`.
3. **Rates**: a job runs at its throughput times the speed fraction of its allocation
   (:mod:`hetsched.inputs.host_profiles`), carried in the rows' ``rate`` (and ``spread_rate``
   for a gang the loop's placement spreads).

Host resources
--------------
``Cluster(cpus=, memory=)`` give each GPU type's host cores and GB (summed over its
servers); a cluster without them gets ``host_cpus_per_gpu`` and ``host_mem_per_gpu`` per GPU
(default 3 cores and 62.5 GB: the 8-GPU, 24-core, 500 GB servers of Synergy's simulator).
TUNE divides a type's totals over its servers by GPUs (the cluster's topology, or servers of
``gpus_per_server`` GPUs). TUNE's choice of servers decides the CPU and memory, not the
loop's GPU placement (which does not see host resources and may put the gang elsewhere).

Per-job data
------------
``sensitivity`` maps each job's trace id to ``{"cpu_demand", "dataset_gb", "io_ratio"}``;
None (the default) draws every job's numbers from ``seed`` and its id
(:func:`~hetsched.inputs.host_profiles.default_sensitivity`), so the demo, the simulator and
the online scheduler give a job the same numbers.

Examples
--------
>>> import hetsched as hs
>>> from hetsched.schedulers.synergy import Synergy
>>> w = hs.generate_workload(6, rate_per_hour=6.0, seed=1)
>>> cluster = hs.Cluster({"v100": 4, "k80": 4}, cpus={"v100": 12, "k80": 12}, memory={"v100": 250, "k80": 250})
>>> res = hs.simulate(Synergy(allocation="tune"), w, cluster, options=hs.SimOptions(round_seconds=360.0))
>>> int(res.summary["n_completed"])
6
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..inputs.cluster import Cluster
from ..inputs.host_profiles import HostSensitivity, sensitivity_for
from ..mechanism.history import rows_of
from ..solvers.registry import registered_solvers
from ..validation import (
    check_choice,
    check_int,
    check_positive,
    check_real,
)
from .gang_walk import walk_gangs
from .synergy_alloc import HostAllocation, host_servers, opt, proportional, tune

__all__ = ["ALLOCATIONS", "GPU_ORDERS", "Synergy", "SynergyState"]

log = logging.getLogger(__name__)

#: How a round's host CPUs and memory are divided.
ALLOCATIONS = ("proportional", "tune", "opt")
#: The GPU policy that decides which jobs run.
GPU_ORDERS = ("fifo", "srtf", "las")


@dataclass(frozen=True, eq=False)
class SynergyState:
    """What Synergy remembers between rounds (immutable; rows follow ``job_ids``).

    Attributes
    ----------
    job_ids : ndarray of int64
        The driver's numbers of the jobs the state knows.
    attained : ndarray
        GPU-seconds each job has run (LAS' key).
    last_type : ndarray of int64
        Type column the job ran on last round (-1: it did not run).
    time : float
        Clock: start of the next round.
    rounds : int
        Rounds recorded.
    """

    job_ids: np.ndarray
    attained: np.ndarray
    last_type: np.ndarray
    time: float = 0.0
    rounds: int = 0

    @classmethod
    def empty(cls, start_time: float = 0.0) -> SynergyState:
        """A state that knows no job, with the clock at ``start_time``."""
        return cls(np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64), check_real(start_time, "start_time"))

    def aligned(self, job_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(attained, last_type)`` for ``job_ids`` (jobs the state does not know: 0, -1)."""
        rows = rows_of(self.job_ids, job_ids)
        known = rows >= 0
        attained = np.zeros(job_ids.shape[0])
        last = np.full(job_ids.shape[0], -1, np.int64)
        attained[known] = self.attained[rows[known]]
        last[known] = self.last_type[rows[known]]
        return attained, last


@dataclass(frozen=True, kw_only=True)
class Synergy:
    """Synergy: a GPU policy picks the jobs, then CPUs and memory are divided by sensitivity.

    Parameters
    ----------
    allocation : {"tune", "opt", "proportional"}, default "tune"
        Synergy-TUNE, Synergy-OPT, or the GPU-proportional baseline (the same scheduler
        with only this switch changed).
    order : {"fifo", "srtf", "las"}, default "fifo"
        The GPU policy (module docstring).
    sensitivity : mapping, optional
        Trace id -> ``{"cpu_demand": cores per GPU, "dataset_gb": GB, "io_ratio": r}``
        (:mod:`hetsched.inputs.host_profiles`) for every job; None: seeded defaults.
    seed : int, default 0
        Seed of the default sensitivities.
    host_cpus_per_gpu, host_mem_per_gpu : float, default 3.0 and 62.5
        Host cores and GB per GPU for a cluster built without ``cpus`` / ``memory``.
    gpus_per_server : int, default 8
        Server size for TUNE when the cluster has no topology.
    solver : str, default "highs"
        Backend for OPT's LP.
    solve_time_limit : float, optional
        Seconds OPT's solver may spend per round.
    opt_integral : bool, default False
        OPT picks one configuration per job (a MILP, solved to a 0.1 % gap) instead of the
        LP relaxation's mixture of configurations.
    sticky : bool, default True
        A running job keeps its GPU type while it is usable (fewer migrations).

    Raises
    ------
    ValidationError
        An unknown ``allocation`` or ``order``, a negative or non-integer ``seed``, a
        non-positive host share or server size.
    """

    allocation: str = "tune"
    order: str = "fifo"
    sensitivity: Mapping[Any, Mapping[str, float]] | None = None
    seed: int = 0
    host_cpus_per_gpu: float = 3.0
    host_mem_per_gpu: float = 62.5
    gpus_per_server: int = 8
    solver: str = "highs"
    solve_time_limit: float | None = None
    opt_integral: bool = False
    sticky: bool = True

    name = "synergy"

    def __post_init__(self) -> None:
        check_choice(self.allocation, "allocation", ALLOCATIONS)
        check_choice(self.order, "order", GPU_ORDERS)
        check_int(self.seed, "seed", low=0)
        check_positive(self.host_cpus_per_gpu, "host_cpus_per_gpu", unit="cores")
        check_positive(self.host_mem_per_gpu, "host_mem_per_gpu", unit="GB")
        check_int(self.gpus_per_server, "gpus_per_server", low=1)
        check_choice(self.solver, "solver", registered_solvers())
        check_positive(self.solve_time_limit, "solve_time_limit", unit="seconds", allow_none=True)
        for flag in ("sticky", "opt_integral"):
            if not isinstance(getattr(self, flag), bool):
                raise ValidationError(f"`{flag}` must be a bool; got {getattr(self, flag)!r}.")
        if self.sensitivity is not None and not isinstance(self.sensitivity, Mapping):
            raise ValidationError(f"`sensitivity` must be a mapping job id -> {{field: value}} or None; got "
                                  f"{type(self.sensitivity).__name__}.")

    # ---------------------------------------------------------------- pieces
    def initial_state(self, start_time: float = 0.0) -> SynergyState:
        """An empty state with the clock at ``start_time``."""
        return SynergyState.empty(start_time)

    def host_capacity(self, cluster: Cluster, gpu_types: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
        """Each type's host cores and GB: the cluster's, or the per-GPU defaults times its GPUs.

        A type the cluster gives ``inf`` (no limit) counts as 1e12 cores / 1e15 GB, so that
        the programs stay finite.

        Raises
        ------
        ValidationError
            A type with GPUs whose cores are 0 (no job could run on it).
        """
        count = cluster.capacities(gpu_types)
        cpus = cluster.resource_vector("cpus", gpu_types)
        mem = cluster.resource_vector("memory", gpu_types)
        cpus = count * self.host_cpus_per_gpu if cpus is None else np.minimum(cpus, 1e12)
        mem = count * self.host_mem_per_gpu if mem is None else np.minimum(mem, 1e15)
        bad = np.flatnonzero((count > 0) & (cpus <= 0))
        if bad.size:
            raise ValidationError(f"`cluster.cpus` must be positive for every GPU type with GPUs (Synergy needs "
                                  f"cores to feed them); type {gpu_types[bad[0]]!r} has {cpus[bad[0]]:g}.")
        return cpus, mem

    def sensitivity_of(self, ids: Any) -> HostSensitivity:
        """The sensitivity of the jobs with trace ids ``ids`` (table or seeded defaults)."""
        return sensitivity_for(ids, self.sensitivity, self.seed)

    def priority(self, view: Any, attained: np.ndarray) -> np.ndarray:
        """Rows of the view's jobs, highest priority first (module docstring, step 1)."""
        n = view.n_jobs
        if self.order == "fifo":
            key = view.arrival
        elif self.order == "srtf":
            best = view.throughputs.max(axis=1) if n else np.zeros(0)
            with np.errstate(divide="ignore"):
                key = np.where(best > 0, view.remaining / np.where(best > 0, best, 1.0), np.inf)
        else:
            key = attained
        return np.lexsort((np.arange(n), view.arrival, key))

    def allocate(self, job_type: np.ndarray, scale_factors: np.ndarray, in_order: np.ndarray,
                 sens: HostSensitivity, cluster: Cluster, gpu_types: tuple[str, ...]) -> HostAllocation:
        """CPU and memory for jobs already given a GPU type (``in_order``: priority order)."""
        cpus, mem = self.host_capacity(cluster, gpu_types)
        count = np.maximum(cluster.capacities(gpu_types), 1.0)
        pc, pm = cpus / count, mem / count
        if self.allocation == "proportional":
            return proportional(job_type, scale_factors, sens, prop_cpus=pc, prop_mem=pm)
        if self.allocation == "tune":
            servers = host_servers(cluster, gpu_types, cpus, mem, self.gpus_per_server)
            return tune(in_order, job_type, scale_factors, sens, servers, prop_cpus=pc, prop_mem=pm)
        return opt(job_type, scale_factors, sens, cpus=cpus, memory=mem, prop_cpus=pc, prop_mem=pm,
                   solver=self.solver, time_limit=self.solve_time_limit, integral=self.opt_integral)

    # ------------------------------------------------------------ round loop
    def plan_round(self, view: Any, state: SynergyState) -> Any:
        """The rows of the round: the jobs the GPU policy runs, at their host-limited rates."""
        from ..rounds.protocol import RoundRows

        t0 = time.perf_counter()
        if not isinstance(state, SynergyState):
            raise ValidationError(f"`state` must be a SynergyState; got {type(state).__name__}.")
        attained, last = state.aligned(view.jobs)
        order = self.priority(view, attained)
        cap = np.asarray(view.capacities, dtype=np.int64)
        assignment = walk_gangs(order, view.throughputs, view.scale_factors, cap,
                                last_type=last if self.sticky else None)
        run = np.flatnonzero(assignment >= 0)
        run_in_order = order[assignment[order] >= 0]
        pos = np.full(view.n_jobs, -1, np.int64)
        pos[run] = np.arange(run.size)
        ids = np.asarray(view.context["ids"], dtype=object)[view.jobs[run]]
        sens = self.sensitivity_of(ids)
        k = assignment[run]
        s = view.scale_factors[run].astype(np.int64)
        alloc = self.allocate(k, s, pos[run_in_order], sens, view.cluster, tuple(view.gpu_types))
        keep = alloc.placed
        r, k = run[keep], k[keep]
        T = view.throughputs
        U = view.unconsolidated if view.unconsolidated is not None else T
        speed = alloc.speed[keep]
        info: dict[str, Any] = {"plan_s": time.perf_counter() - t0}
        if self.allocation == "opt":
            info.update(solved=True, solve_ok=alloc.info["solve_ok"], solve_status=alloc.info["solve_status"],
                        solve_s=alloc.info["solve_s"], solve_jobs=int(run.size))
        payload = {"rows": r, "type": k, "cpus": alloc.cpus[keep], "mem": alloc.mem[keep], "speed": speed,
                   "round_seconds": float(view.round_seconds), "jobs": view.jobs.copy()}
        return RoundRows(view.jobs[r], k, view.scale_factors[r], T[r, k] * speed, spread_rate=U[r, k] * speed,
                         info=info, payload=payload)

    def record_round(self, state: SynergyState, ran: Any, seconds: np.ndarray) -> SynergyState:
        """The state after ``ran`` ran ``seconds[i]`` each: attained GPU-seconds, last types."""
        pay = ran.payload
        jobs = pay["jobs"]
        attained, _ = state.aligned(jobs)
        last = np.full(jobs.shape[0], -1, np.int64)
        rows = pay["rows"][ran.row_id]
        sec = np.asarray(seconds, dtype=float)
        np.add.at(attained, rows, ran.gpus * sec)
        last[rows] = pay["type"][ran.row_id]
        L = float(sec.max()) if sec.size else pay["round_seconds"]
        return SynergyState(jobs, attained, last, state.time + L, state.rounds + 1)
