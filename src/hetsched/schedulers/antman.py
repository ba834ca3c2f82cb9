r"""AntMan (Xiao et al., OSDI'20): guaranteed jobs and opportunistic jobs that use their
spare GPU memory and compute.

"AntMan: Dynamic Scaling on GPU Clusters for Deep Learning", OSDI 2020. Jobs come in two
classes (§4): **guaranteed** jobs receive their GPUs as a quota and must not be slowed much;
**opportunistic** jobs run on what is left: idle GPUs, and the spare memory and compute of
GPUs that guaranteed jobs hold. On one GPU, AntMan's memory manager lets a job's memory grow
and shrink within a mini-batch (universal unified memory spills what does not fit to host
memory), and its GPU operator manager gives the opportunistic job only the compute slots
the guaranteed job leaves idle (§3). When a guaranteed job needs more memory, the
opportunistic job on its GPUs is throttled, or evicted.

Each round
----------
1. **Guaranteed jobs** in arrival order (FIFO: their quota is served first come, first
   served) take whole gangs of the GPU type they ran on last round, else the fastest type
   with room whose GPUs hold their memory (:func:`~hetsched.schedulers.gang_walk.walk_gangs`).
2. **Opportunistic jobs** in arrival order go where GPU utilisation is lowest (§4): first
   idle GPUs (utilisation 0), as a job of their own; else the GPUs of a running guaranteed
   job :math:`G` with no partner yet, whose gang is at least theirs
   (:math:`s_O \le s_G`), whose memory leaves room (:math:`\mu_G(t) + \mu_O \le
   \text{GPU memory}`) and whose utilisation :math:`u_G < 1`: the one with the lowest
   :math:`u_G` (their previous host first, to avoid a move). The two form one
   space-sharing row (``partner``): the row's GPUs count once.
3. **Growth**: a job's memory per GPU may follow a schedule :math:`\mu_j(t)` of the seconds
   it has run. An opportunistic job whose host of last round now needs so much that the
   pair no longer fits is **evicted** (``on_grow="evict"``: it waits this round and then
   queues again), or **throttled** (``"throttle"``: it stays, with the part of its memory
   that no longer fits spilled to host memory; evicted only when nothing fits). Opportunistic
   jobs on idle GPUs give them back whenever guaranteed jobs need them (step 1 runs first).

Interference model
------------------
With utilisations :math:`u_G, u_O \in [0, 1]` (the fraction of time each keeps the GPU busy
when alone) and a slowdown bound :math:`\kappa` (``max_slowdown``), a pair runs at

.. math::

    r_G = T_G\,(1 - \kappa\,u_O), \qquad
    r_O = T_O \cdot \min\Bigl(1, \frac{1 - u_G}{u_O}\Bigr) \cdot \phi, \qquad
    \phi = \min\Bigl(1, \frac{\text{GPU memory} - \mu_G(t)}{\mu_O}\Bigr)

The guaranteed job loses at most :math:`\kappa` (the operator manager runs the guaranteed
job's kernels first; what remains is contention in caches and memory bandwidth, growing
with how busy the opportunistic job keeps the GPU); the opportunistic job gets only the
idle share of the GPU, and, throttled, runs in proportion to the part of its memory still
on the GPU (:math:`\phi = 1` whenever the pair fits). These rules are ours, a documented
stand-in for AntMan's measured behaviour (the paper's evaluation reports the guaranteed
jobs' slowdown as small); :math:`\kappa` defaults to 0.05.

Per-job data
------------
Keyed by trace id: ``job_class`` ("guaranteed" / "opportunistic"), ``gpu_memory`` (GB per
GPU, or a schedule ``[(run_seconds, GB), ...]`` starting at 0) and ``utilization`` (in
[0, 1]). A table, when given, must name every job. None draws from ``seed`` and the job's
id: opportunistic with probability ``opportunistic_fraction``, utilisation uniform in
[0.1, 0.9], constant memory uniform in [2, 8] GB (our choice; AntMan §2 reports low
utilisation and small memory footprints for many production jobs).

Examples
--------
A guaranteed job (8 GB, 30 % busy) and an opportunistic one (4 GB, 50 % busy) on one 16 GB
V100 share it: the guaranteed job runs at :math:`1 - 0.05 \times 0.5 = 0.975` of its speed,
the opportunistic one at :math:`\min(1, 0.7 / 0.5) = 1`. The opportunistic job's 3,600 steps
end at 3,600 s (the end of the sixth 600-second round); by then the guaranteed job has done
:math:`3600 \times 0.975 = 3510` steps and runs its last 90 alone, ending at 3,690 s:

>>> import hetsched as hs
>>> from hetsched.schedulers.antman import AntMan
>>> jobs = hs.JobSet([[1.0], [1.0]], gpu_types=["v100"], ids=["g", "o"], steps_remaining=[3600.0, 3600.0])
>>> sched = AntMan(job_class={"g": "guaranteed", "o": "opportunistic"}, gpu_memory={"g": 8.0, "o": 4.0},
...                utilization={"g": 0.3, "o": 0.5})
>>> res = hs.simulate(sched, jobs, hs.Cluster({"v100": 1}), options=hs.SimOptions(round_seconds=600.0))
>>> res.jobs["jct_s"].round(1).tolist()
[3690.0, 3600.0]
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ..inputs.gpu_memory import gpu_memory_of
from ..inputs.id_draws import id_uniforms
from ..mechanism.history import rows_of
from ..validation import check_choice, check_int, check_probability, check_real
from .gang_walk import walk_gangs

__all__ = ["CLASSES", "AntMan", "AntManJobs", "AntManState", "antman_report"]

log = logging.getLogger(__name__)

#: Job classes.
CLASSES = ("guaranteed", "opportunistic")
#: What happens to an opportunistic job whose host grows out of room.
ON_GROW = ("evict", "throttle")


@dataclass(frozen=True, eq=False)
class AntManJobs:
    """The per-job data of a set of jobs (aligned with the ids asked for).

    Attributes
    ----------
    opportunistic : ndarray of bool
    utilization : ndarray
        In [0, 1].
    mem_starts, mem_values : tuple of ndarray
        Per job the memory schedule: from ``mem_starts[j][i]`` seconds of running on, the
        job needs ``mem_values[j][i]`` GB per GPU (``mem_starts[j][0] == 0``).
    """

    opportunistic: np.ndarray
    utilization: np.ndarray
    mem_starts: tuple[np.ndarray, ...]
    mem_values: tuple[np.ndarray, ...]

    def memory_at(self, run_seconds: np.ndarray) -> np.ndarray:
        """GB per GPU each job needs after ``run_seconds`` of running."""
        if all(v.shape[0] == 1 for v in self.mem_values):
            return np.array([v[0] for v in self.mem_values])
        out = np.empty(len(self.mem_values))
        for j, (st, v) in enumerate(zip(self.mem_starts, self.mem_values)):
            out[j] = v[np.searchsorted(st, run_seconds[j], side="right") - 1]
        return out

    def peak_memory(self) -> np.ndarray:
        """The largest GB per GPU each job's schedule reaches."""
        return np.array([float(v.max()) for v in self.mem_values])


def _table(table: Any, name: str) -> Mapping[Any, Any] | None:
    if table is not None and not isinstance(table, Mapping):
        raise ValidationError(f"`{name}` must be a mapping job id -> value or None; got {type(table).__name__}.")
    return table


def _entry(table: Mapping[Any, Any], name: str, jid: Any) -> Any:
    if jid not in table:
        raise ValidationError(f"`{name}` has no entry for job {jid!r}; give one for every job, or leave `{name}` "
                              "None for the seeded defaults.")
    return table[jid]


def _number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_)) \
        and bool(np.isfinite(v))


def _schedule(v: Any, jid: Any) -> tuple[np.ndarray, np.ndarray]:
    """A memory entry as (starts, values): a number, or [(run_seconds, GB), ...] from 0."""
    if _number(v):
        if v <= 0:
            raise ValidationError(f"`gpu_memory[{jid!r}]` must be positive GB per GPU; got {v!r}.")
        return np.zeros(1), np.array([float(v)])
    try:
        pairs = [tuple(p) for p in v]
    except TypeError:
        raise ValidationError(f"`gpu_memory[{jid!r}]` must be GB per GPU or a schedule [(run_seconds, GB), ...]; "
                              f"got {v!r:.80}.") from None
    if not pairs or any(len(p) != 2 or not (_number(p[0]) and _number(p[1])) for p in pairs):
        raise ValidationError(f"`gpu_memory[{jid!r}]` must be a non-empty list of (run_seconds, GB) pairs of finite "
                              f"numbers; got {v!r:.80}.")
    st = np.array([float(p[0]) for p in pairs])
    val = np.array([float(p[1]) for p in pairs])
    if st[0] != 0.0 or (np.diff(st) <= 0).any():
        raise ValidationError(f"`gpu_memory[{jid!r}]` schedule must start at run_seconds 0 and increase strictly; "
                              f"got starts {st.tolist()}.")
    if (val <= 0).any():
        raise ValidationError(f"`gpu_memory[{jid!r}]` must be positive GB per GPU; got {val[val <= 0][0]!r}.")
    return st, val


@dataclass(frozen=True, eq=False)
class AntManState:
    """What AntMan remembers between rounds (immutable; rows follow ``job_ids``).

    Attributes
    ----------
    job_ids : ndarray of int64
        The driver's numbers of the jobs the state knows.
    run_seconds : ndarray
        Seconds each job has run (its memory schedule's clock).
    last_type, partner : ndarray of int64
        Type column and space-sharing partner (driver number) of last round (-1: none).
    evictions : ndarray of int64
        Times each opportunistic job was evicted by its host's growth.
    time : float
    rounds : int
    """

    job_ids: np.ndarray
    run_seconds: np.ndarray
    last_type: np.ndarray
    partner: np.ndarray
    evictions: np.ndarray
    time: float = 0.0
    rounds: int = 0

    @classmethod
    def empty(cls, start_time: float = 0.0) -> AntManState:
        """A state that knows no job."""
        z = np.zeros(0, np.int64)
        return cls(z, np.zeros(0), z, z, z, check_real(start_time, "start_time"))

    def aligned(self, job_ids: np.ndarray) -> dict[str, np.ndarray]:
        """The state's arrays for ``job_ids`` (unknown jobs: nothing run, no type, no partner)."""
        rows = rows_of(self.job_ids, job_ids)
        known = rows >= 0
        out = {"run_seconds": np.zeros(job_ids.shape[0]), "last_type": np.full(job_ids.shape[0], -1, np.int64),
               "partner": np.full(job_ids.shape[0], -1, np.int64), "evictions": np.zeros(job_ids.shape[0], np.int64)}
        for name, arr in out.items():
            arr[known] = getattr(self, name)[rows[known]]
        return out


@dataclass(frozen=True, kw_only=True)
class AntMan:
    """AntMan's two job classes on shared GPUs (see the module docstring).

    Parameters
    ----------
    job_class, gpu_memory, utilization : mapping, optional
        Per trace id: "guaranteed" / "opportunistic"; GB per GPU or a schedule
        ``[(run_seconds, GB), ...]``; GPU utilisation in [0, 1]. None: seeded defaults.
    opportunistic_fraction : float, default 0.5
        Probability that a job without a class table is opportunistic.
    seed : int, default 0
    gpu_memory_gb : mapping, optional
        GB per GPU by type, over :data:`hetsched.inputs.gpu_memory.GPU_MEMORY_GB`.
    max_slowdown : float, default 0.05
        :math:`\\kappa`, the guaranteed job's slowdown when its partner keeps the GPU busy.
    on_grow : {"evict", "throttle"}, default "evict"
    share_idle : bool, default True
        Opportunistic jobs may run alone on idle GPUs.

    Raises
    ------
    ValidationError
        A parameter out of range; at plan time, a per-job value that breaks its rule (a
        class not in :data:`CLASSES`, utilisation outside [0, 1], memory not positive or
        larger than every GPU the job can use), naming the job, the field and the value.
    """

    job_class: Mapping[Any, str] | None = None
    gpu_memory: Mapping[Any, Any] | None = None
    utilization: Mapping[Any, float] | None = None
    opportunistic_fraction: float = 0.5
    seed: int = 0
    gpu_memory_gb: Mapping[str, float] | None = None
    max_slowdown: float = 0.05
    on_grow: str = "evict"
    share_idle: bool = True

    name = "antman"

    def __post_init__(self) -> None:
        for name in ("job_class", "gpu_memory", "utilization"):
            _table(getattr(self, name), name)
        check_probability(self.opportunistic_fraction, "opportunistic_fraction")
        check_int(self.seed, "seed", low=0)
        check_real(self.max_slowdown, "max_slowdown", low=0.0, high=1.0)
        check_choice(self.on_grow, "on_grow", ON_GROW)
        if not isinstance(self.share_idle, bool):
            raise ValidationError(f"`share_idle` must be a bool; got {self.share_idle!r}.")
        if self.gpu_memory_gb is not None:
            gpu_memory_of(list(self.gpu_memory_gb), self.gpu_memory_gb)

    def initial_state(self, start_time: float = 0.0) -> AntManState:
        """An empty state with the clock at ``start_time``."""
        return AntManState.empty(start_time)

    def jobs_of(self, ids: Any) -> AntManJobs:
        """The per-job data of the jobs with trace ids ``ids`` (tables or seeded defaults)."""
        ids = np.asarray(ids, dtype=object).reshape(-1).tolist()
        tables = (self.job_class, self.gpu_memory, self.utilization)
        u = id_uniforms(ids, int(self.seed), 3, salt="antman") if None in tables else None
        opp = np.empty(len(ids), bool)
        util = np.empty(len(ids))
        starts, values = [], []
        for i, jid in enumerate(ids):
            if self.job_class is None:
                opp[i] = u[i, 0] < self.opportunistic_fraction
            else:
                c = _entry(self.job_class, "job_class", jid)
                if c not in CLASSES:
                    raise ValidationError(f"`job_class[{jid!r}]` must be one of {list(CLASSES)}; got {c!r}.")
                opp[i] = c == "opportunistic"
            if self.utilization is None:
                util[i] = 0.1 + 0.8 * u[i, 1]
            else:
                v = _entry(self.utilization, "utilization", jid)
                if not _number(v) or not 0.0 <= v <= 1.0:
                    raise ValidationError(f"`utilization[{jid!r}]` must be a number in [0, 1]; got {v!r}.")
                util[i] = float(v)
            if self.gpu_memory is None:
                st, val = np.zeros(1), np.array([2.0 + 6.0 * u[i, 2]])
            else:
                st, val = _schedule(_entry(self.gpu_memory, "gpu_memory", jid), jid)
            starts.append(st)
            values.append(val)
        return AntManJobs(opp, util, tuple(starts), tuple(values))

    # ------------------------------------------------------------ round loop
    def plan_round(self, view: Any, state: AntManState) -> Any:
        """The rows of the round: guaranteed gangs (some with an opportunistic partner) and
        opportunistic jobs on idle GPUs."""
        from ..rounds.protocol import RoundRows

        t0 = time.perf_counter()
        if not isinstance(state, AntManState):
            raise ValidationError(f"`state` must be an AntManState; got {type(state).__name__}.")
        n, m = view.n_jobs, len(view.gpu_types)
        ids = np.asarray(view.context["ids"], dtype=object)[view.jobs]
        data = self.jobs_of(ids)
        cap_mem = gpu_memory_of(list(view.gpu_types), self.gpu_memory_gb)
        T = view.throughputs
        U = view.unconsolidated if view.unconsolidated is not None else T
        s = view.scale_factors.astype(np.int64)
        can = T > 0
        peak = data.peak_memory()
        biggest = np.where(can, cap_mem[None, :], 0.0).max(axis=1) if m else np.zeros(n)
        bad = np.flatnonzero(peak > biggest)
        if bad.size:
            j = int(bad[0])
            raise ValidationError(f"job {ids[j]!r}: `gpu_memory` reaches {peak[j]:g} GB per GPU, more than the largest "
                                  f"GPU it can use ({biggest[j]:g} GB); give a smaller demand or a larger GPU.")
        al = state.aligned(view.jobs)
        mem = data.memory_at(al["run_seconds"])
        fits = mem[:, None] <= cap_mem[None, :]
        fifo = np.lexsort((np.arange(n), view.arrival))
        opp = data.opportunistic
        cap = np.asarray(view.capacities, dtype=np.int64)
        g_order = fifo[~opp[fifo]]
        assign = walk_gangs(g_order, T, s, cap, last_type=al["last_type"], allowed=fits)
        free = cap - np.bincount(assign[assign >= 0], weights=s[assign >= 0], minlength=m).astype(np.int64)
        g_run = np.flatnonzero(assign >= 0)
        host_of = np.full(n, -1, np.int64)              # opportunistic row -> guaranteed row it shares with
        evicted = np.zeros(n, bool)
        number_to_row = {int(v): i for i, v in enumerate(view.jobs.tolist())}
        phi = np.ones(n)
        hosts = _Hosts(g_run, assign[g_run], s[g_run], cap_mem[assign[g_run]] - mem[g_run], data.utilization[g_run])
        pos_of = np.full(n, -1, np.int64)
        pos_of[g_run] = np.arange(g_run.size)
        for o in fifo[opp[fifo]].tolist():
            prev = number_to_row.get(int(al["partner"][o]), -1)
            room_after = cap_mem[assign[prev]] - mem[prev] if prev >= 0 and assign[prev] >= 0 else np.inf
            if prev >= 0 and assign[prev] >= 0 and room_after < mem[o] \
                    and (self.on_grow == "evict" or room_after <= 0):
                evicted[o] = True                        # its host grew out of room: out for this round
                continue
            if self.share_idle:
                ok = (free >= s[o]) & can[o] & fits[o]
                if ok.any():
                    k = int(np.argmax(np.where(ok, T[o], -np.inf)))
                    assign[o] = k
                    free[k] -= s[o]
                    continue
            pick = hosts.pick(int(s[o]), can[o], float(mem[o]), int(pos_of[prev]) if prev >= 0 else -1,
                              spill=self.on_grow != "evict")
            if pick < 0:
                continue
            host_of[o] = g_run[pick]
            assign[o] = hosts.kind[pick]
            phi[o] = min(1.0, hosts.room[pick] / mem[o])
        partner_of = np.full(n, -1, np.int64)
        pairs_o = np.flatnonzero(host_of >= 0)
        partner_of[host_of[pairs_o]] = pairs_o
        u = data.utilization
        solo_o = np.flatnonzero(opp & (assign >= 0) & (host_of < 0))
        lead = np.concatenate([g_run, solo_o])
        k = assign[lead]
        po = partner_of[lead]
        has = po >= 0
        po_safe = np.where(has, po, 0)
        g_factor = np.where(has, 1.0 - self.max_slowdown * u[po_safe], 1.0)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):   # tiny u_O: the share is 1
            idle_share = np.where(u[po_safe] > 0, (1.0 - u[lead]) / np.where(u[po_safe] > 0, u[po_safe], 1.0), 1.0)
        o_factor = np.where(has, np.minimum(1.0, idle_share) * phi[po_safe], 0.0)
        rows = RoundRows(
            view.jobs[lead], k, s[lead], T[lead, k] * g_factor,
            partner=np.where(has, view.jobs[po_safe], -1), partner_rate=np.where(has, T[po_safe, k] * o_factor, 0.0),
            spread_rate=U[lead, k] * g_factor, partner_spread_rate=np.where(has, U[po_safe, k] * o_factor, 0.0),
            info={"plan_s": time.perf_counter() - t0},
            payload={"jobs": view.jobs.copy(), "lead": lead, "partner": np.where(has, po, -1), "type": k,
                     "evicted": evicted, "round_seconds": float(view.round_seconds)})
        if evicted.any():
            log.debug("antman: %d opportunistic job(s) evicted by their host's memory growth", int(evicted.sum()))
        return rows

    def record_round(self, state: AntManState, ran: Any, seconds: np.ndarray) -> AntManState:
        """The state after ``ran`` ran ``seconds[i]`` each: run seconds, types, partners, evictions."""
        pay = ran.payload
        jobs = pay["jobs"]
        al = state.aligned(jobs)
        sec = np.asarray(seconds, dtype=float)
        lead = pay["lead"][ran.row_id]
        po = pay["partner"][ran.row_id]
        run_s = al["run_seconds"].copy()
        np.add.at(run_s, lead, sec)
        has = po >= 0
        np.add.at(run_s, po[has], sec[has])
        last = np.full(jobs.shape[0], -1, np.int64)
        last[lead] = pay["type"][ran.row_id]
        last[po[has]] = pay["type"][ran.row_id][has]
        partner = np.full(jobs.shape[0], -1, np.int64)
        partner[lead[has]] = jobs[po[has]]
        partner[po[has]] = jobs[lead[has]]
        ev = al["evictions"] + pay["evicted"].astype(np.int64)
        L = float(sec.max()) if sec.size else pay["round_seconds"]
        return AntManState(jobs, run_s, last, partner, ev, state.time + L, state.rounds + 1)


def antman_report(result: Any, scheduler: AntMan) -> dict[str, float]:
    """What AntMan's evaluation reports, from a simulation run with ``record_runs=True``.

    Returns
    -------
    dict
        ``guaranteed_slowdown`` (run-time-weighted mean over guaranteed jobs of the rate alone
        over the rate they ran at, 1 = none) and its ``guaranteed_slowdown_max`` over jobs;
        ``guaranteed_avg_jct_s`` and ``opportunistic_avg_jct_s`` (completed jobs);
        ``gpu_allocated`` (the result's utilisation: GPUs held over GPUs present) and
        ``gpu_busy`` (busy GPU time by the jobs' utilisations: per row and second,
        :math:`\\min(1, \\sum_{members} u_j \\cdot \\text{rate}_j / T_j)`, over GPU time present);
        ``evictions`` (pairs of one round whose host ran the next round with a memory
        that no longer fits its partner's, recomputed from the run log).

    Raises
    ------
    ValidationError
        The result has no run log.
    """
    runs = getattr(result, "runs", None)
    if runs is None:
        raise ValidationError("`result` has no run log; simulate with SimOptions(record_runs=True).")
    jobs = result.jobs
    ids = jobs["job_id"].to_numpy(dtype=object)
    data = scheduler.jobs_of(ids)
    T = np.asarray(result.extra["throughputs"], dtype=float)
    j = runs["job"].to_numpy(np.int64)
    k = runs["gpu_type"].to_numpy(np.int64)
    sec = (runs["end_s"] - runs["start_s"]).to_numpy(float)
    alone = T[j, k]
    ratio = np.where(runs["rate"].to_numpy(float) > 0, runs["rate"].to_numpy(float) / alone, 0.0)
    g = ~data.opportunistic[j]
    ideal = np.bincount(j[g], weights=sec[g] * ratio[g], minlength=len(ids))
    spent = np.bincount(j[g], weights=sec[g], minlength=len(ids))
    has = spent > 0
    per_job = np.where(has, spent / np.where(ideal > 0, ideal, 1.0), np.nan)
    busy_entry = data.utilization[j] * ratio * sec
    unit_key = runs["round"].to_numpy(np.int64) * (len(ids) + 1) + runs["unit"].to_numpy(np.int64)
    uk, inv = np.unique(unit_key, return_inverse=True)
    unit_busy = np.bincount(inv, weights=busy_entry, minlength=uk.size)
    unit_sec = np.bincount(inv, weights=sec, minlength=uk.size) / np.maximum(np.bincount(inv, minlength=uk.size), 1)
    unit_gpus = np.zeros(uk.size)
    unit_gpus[inv] = runs["gpus"].to_numpy(float)
    busy = float((np.minimum(unit_sec, unit_busy) * unit_gpus).sum())
    span = float(result.summary["makespan_s"]) * float(np.sum(result.capacities))
    done = jobs["completed"].to_numpy(bool)
    jct = jobs["jct_s"].to_numpy(float)
    opp = data.opportunistic
    return {
        "guaranteed_slowdown": float(spent[has & ~opp].sum() / max(ideal[has & ~opp].sum(), 1e-300))
        if (has & ~opp).any() else float("nan"),
        "guaranteed_slowdown_max": float(np.nanmax(per_job[~opp])) if (has & ~opp).any() else float("nan"),
        "guaranteed_avg_jct_s": float(jct[done & ~opp].mean()) if (done & ~opp).any() else float("nan"),
        "opportunistic_avg_jct_s": float(jct[done & opp].mean()) if (done & opp).any() else float("nan"),
        "gpu_allocated": float(result.summary["utilization"]),
        "gpu_busy": busy / span if span > 0 else float("nan"),
        "evictions": _evictions(runs, data, scheduler, result),
    }


def _evictions(runs: pd.DataFrame, data: AntManJobs, scheduler: AntMan, result: Any) -> int:
    """Recount evictions from the run log: a pair (G, O) of round r whose G runs in round
    r + 1 while O does not, with G then needing more than the GPU's memory minus O's."""
    cap_mem = gpu_memory_of(list(result.gpu_types), scheduler.gpu_memory_gb)

    def need(j: int, t: float) -> float:
        st, v = data.mem_starts[j], data.mem_values[j]
        return float(v[np.searchsorted(st, t, side="right") - 1])

    run_s: dict[int, float] = {}
    pairs: dict[int, tuple[int, int, int]] = {}        # O -> (G, round, type) of its last pair
    count = 0
    for rnd, grp in runs.sort_values(["round", "start_s"]).groupby("round", sort=True):
        running = set(grp["job"].tolist())
        for o, (gj, prnd, k) in pairs.items():
            if prnd == rnd - 1 and gj in running and o not in running \
                    and need(gj, run_s.get(gj, 0.0)) + need(o, run_s.get(o, 0.0)) > cap_mem[k]:
                count += 1
        for row in grp.itertuples(index=False):
            if row.partner >= 0 and data.opportunistic[row.job]:
                pairs[int(row.job)] = (int(row.partner), int(rnd), int(row.gpu_type))
            run_s[int(row.job)] = run_s.get(int(row.job), 0.0) + float(row.end_s - row.start_s)
    return count


class _Hosts:
    """Guaranteed gangs an opportunistic job may share with, searched in AntMan's order.

    A job takes its previous host when that host can still have it; otherwise the free host
    with the lowest utilisation (ties: the earlier gang) among those on a type it can use,
    with at least its GPUs, utilisation below 1 and room for its memory. Hosts are grouped by
    (type, gang size) and sorted by (utilisation, position) once, so each job looks at the
    first free hosts of a few groups instead of every gang.
    """

    def __init__(self, rows: np.ndarray, kind: np.ndarray, size: np.ndarray, room: np.ndarray, util: np.ndarray):
        self.kind, self.size, self.room, self.util = kind, size, room, util
        self.free = np.ones(rows.size, bool)
        order = np.lexsort((np.arange(rows.size), util))
        self.rank = np.empty(rows.size, np.int64)
        self.rank[order] = np.arange(rows.size)
        usable = order[util[order] < 1.0]
        self.groups: dict[tuple[int, int], list] = {}
        for key in {(int(a), int(b)) for a, b in zip(kind[usable], size[usable])}:
            members = usable[(kind[usable] == key[0]) & (size[usable] == key[1])]
            self.groups[key] = [members, 0]             # sorted by rank; first maybe-free index

    def pick(self, gpus: int, can: np.ndarray, mem: float, prev: int, *, spill: bool) -> int:
        """Position of the host for a job of ``gpus`` GPUs and ``mem`` GB that can use the
        types ``can``, taken (no longer free); -1 if none. ``prev``: its previous host's
        position (-1 if none); ``spill``: the previous host may keep it with any room > 0."""
        if prev >= 0 and self.free[prev] and self.size[prev] >= gpus and can[self.kind[prev]] \
                and self.util[prev] < 1.0 and (self.room[prev] >= mem or (spill and self.room[prev] > 0)):
            self.free[prev] = False
            return prev
        best = -1
        for (k, size), group in self.groups.items():
            if size < gpus or not can[k]:
                continue
            members, start = group
            while start < members.size and not self.free[members[start]]:
                start += 1                               # taken hosts never come back
            group[1] = start
            for lo in range(start, members.size, 64):
                chunk = members[lo:lo + 64]
                ok = np.flatnonzero(self.free[chunk] & (self.room[chunk] >= mem))
                if ok.size:
                    h = int(chunk[ok[0]])
                    if best < 0 or self.rank[h] < self.rank[best]:
                        best = h
                    break
                if best >= 0 and self.rank[chunk[-1]] > self.rank[best]:
                    break                                # the rest of this group ranks lower
        if best >= 0:
            self.free[best] = False
        return best

