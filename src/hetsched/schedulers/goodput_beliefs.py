"""What an adaptive scheduler knows about each job's goodput, learned from what the job
reports (Pollux, OSDI'21, §4.1; Sia, SOSP'23, §3.2).

A running job reports, after each round, its placement (nodes, replicas), its per-GPU batch
and accumulation steps, the measured step and sync times, and its gradient statistics
(:meth:`hetsched.inputs.adaptive.AdaptiveJobs.report`: simulated, or sent to an online
scheduler). :class:`GoodputBeliefs` keeps
these measurements per job -- pooled over GPU types (Pollux, which does not know types) or
per type (Sia) -- fits Pollux's throughput model to them
(:func:`hetsched.adaptive.goodput.fit_perf_params`) and evaluates goodput, with the batch
size that maximises it, for any configuration.

Before a job has run on a type the beliefs are what the scheduler would have then:

* Sia profiles each new job on one GPU of every type (its bootstrap, §3.2): the one-GPU rows
  of the job's profile on each type are added as measurements at arrival
  (``seed_single_gpu=True``). A type with only one-GPU measurements is projected from the
  type whose multi-GPU behaviour has been measured, scaled by the ratio of their one-GPU
  goodputs (Sia's rule for unseen configurations); with none measured, the fitted model
  with its optimistic network prior applies.
* Pollux starts from nothing: until a job reports, its speedup is linear in its GPUs
  (``goodput`` returns ``None`` and the scheduler uses that prior).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..adaptive.goodput import (
    GoodputModel,
    GradParams,
    PerfParams,
    fit_perf_params,
    optimize_many,
)
from ..errors import ValidationError

__all__ = ["GoodputBeliefs"]

log = logging.getLogger(__name__)

_POOLED = "*"


@dataclass(eq=False)
class GoodputBeliefs:
    """Measurements and fitted goodput models of adaptive jobs.

    Parameters
    ----------
    progress : AdaptiveJobs
        The jobs (:class:`~hetsched.inputs.adaptive.AdaptiveJobs`: their models' profiles give
        batch-size limits and, with ``seed_single_gpu``, the one-GPU profiling run). Not
        part of the stored state: re-linked when an online store is opened.
    per_type : bool
        One model per (job, GPU type) (Sia) or one per job over all types (Pollux).
    seed_single_gpu : bool
        Add each job's one-GPU profile on every type when it is first seen (Sia).

    Attributes
    ----------
    samples : dict
        (job, model key) -> (GPU type, nodes, replicas, atomic batch) -> (step, sync) seconds;
        the model key is the GPU type (Sia) or ``"*"`` (Pollux, pooled: the type is kept in
        the sample so that a pooled model keeps every type's measurement of a placement).
    grad : dict
        Job -> its last reported gradient statistics.
    fitted : dict
        (job, model key) -> the fit of its current samples (None: none yet).
    last_fit : dict
        (job, model key) -> the previous fit, the next fit's warm start.
    seen : set
        Jobs seen (Sia's one-GPU seed added).
    fits : int
        Fits run so far.
    """

    progress: Any = None
    per_type: bool = False
    seed_single_gpu: bool = False
    samples: dict[tuple[int, str], dict[tuple[str, int, int, int], tuple[float, float]]] = field(default_factory=dict)
    grad: dict[int, GradParams] = field(default_factory=dict)
    fitted: dict[tuple[int, str], PerfParams | None] = field(default_factory=dict)
    last_fit: dict[tuple[int, str], PerfParams] = field(default_factory=dict)
    seen: set[int] = field(default_factory=set)
    fits: int = 0
    _hi: dict[tuple[str, str, int, int], int] = field(default_factory=dict)   # per-GPU batch limits (cache)

    def __post_init__(self) -> None:
        self.per_type = bool(self.per_type)
        self.seed_single_gpu = bool(self.seed_single_gpu)

    # ------------------------------------------------------------------ learning
    def _key(self, gpu_type: str) -> str:
        return gpu_type if self.per_type else _POOLED

    def see(self, job: int) -> None:
        """First sight of ``job`` (Sia: profile it on one GPU of every type)."""
        if job in self.seen:
            return
        self.seen.add(job)
        if not self.seed_single_gpu:
            return
        prof = self.progress.models[job]
        for t, mach in prof.machines.items():
            if t not in self.progress.types:
                continue
            one = mach.single_gpu_samples()
            store = self.samples.setdefault((job, self._key(t)), {})
            for bsz, step, sync in zip(one["local_bsz"], one["step_time"], one["sync_time"]):
                store.setdefault((t, 1, 1, int(bsz)), (float(step), float(sync)))
            self.fitted.pop((job, self._key(t)), None)

    def observe(self, job: int, report: Mapping[str, Any]) -> None:
        """Add what ``job`` reported after a round (see the module docstring)."""
        self.see(job)
        key = (job, self._key(str(report["gpu_type"])))
        store = self.samples.setdefault(key, {})
        cfg = (str(report["gpu_type"]), int(report["nodes"]), int(report["replicas"]), int(report["atomic_bsz"]))
        if cfg not in store:
            store[cfg] = (float(report["step_time"]), float(report["sync_time"]))
            self.fitted.pop(key, None)
        self.grad[job] = GradParams(float(report["grad_sqr"]), float(report["grad_var"]))

    def perf(self, job: int, gpu_type: str) -> PerfParams | None:
        """The fitted throughput model of ``job`` on ``gpu_type`` (pooled for Pollux), or None
        without measurements."""
        key = (job, self._key(gpu_type))
        if key in self.fitted:
            return self.fitted[key]
        store = self.samples.get(key)
        if not store:
            return None
        cfg = np.array([key[1:] for key in store], dtype=np.int64)
        times = np.array(list(store.values()), dtype=float)
        step, sync = times[:, 0], times[:, 1]
        fit = fit_perf_params(cfg[:, 0], cfg[:, 1], cfg[:, 2], np.maximum(step - sync, 1e-9), step,
                              initial=self.last_fit.get(key))
        self.last_fit[key] = fit.params
        self.fits += 1
        if not fit.success:
            log.warning("job %s on %s: throughput fit did not converge (%s); using its parameters anyway",
                        self.progress.names[job], gpu_type, fit.message)
        self.fitted[key] = fit.params
        return fit.params

    def multi_gpu_measured(self, job: int, gpu_type: str) -> bool:
        """Whether ``job`` has a measurement on more than one GPU of ``gpu_type``."""
        return any(t == gpu_type and r > 1 for (t, _, r, _) in self.samples.get((job, self._key(gpu_type)), {}))

    # ------------------------------------------------------------------ evaluating
    def model(self, job: int, gpu_type: str) -> GoodputModel | None:
        """Goodput model of ``job`` on ``gpu_type`` (None without measurements)."""
        perf = self.perf(job, gpu_type)
        if perf is None:
            return None
        grad = self.grad.get(job, GradParams(1.0, 0.0))
        return GoodputModel(perf, grad, int(self.progress.init_batch[job]))

    def table(self, jobs: list[int], k: int, nodes: np.ndarray, replicas: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Goodput and total batch of each of ``jobs`` on type column ``k`` for each (nodes,
        replicas), at the batch that maximises its goodput under the believed model, within
        the model's batch limits and the profiled per-GPU range, in one vectorised evaluation
        (:func:`~hetsched.adaptive.goodput.optimize_many`). Configurations a job cannot run
        (its smallest per-GPU batch times the replicas above its maximum batch, a placement its
        profile cannot interpolate, or no profile on the type) get goodput 0.

        Returns
        -------
        goodput, batch : ndarray, shape (len(jobs), len(replicas))
        known : ndarray of bool, shape (len(jobs),)
            False for a job without a model on the type (no measurement yet; its rows are 0);
            a job whose model has no profile on the type is known, at 0.
        """
        t = self.progress.types[k]
        nodes = np.asarray(nodes, dtype=np.int64).reshape(-1)
        replicas = np.asarray(replicas, dtype=np.int64).reshape(-1)
        J, C = len(jobs), replicas.shape[0]
        good = np.zeros((J, C))
        batch = np.zeros((J, C), np.int64)
        known = np.ones(J, bool)
        rows, models, lo, hi, max_b = [], [], [], [], []
        for i, j in enumerate(jobs):
            prof = self.progress.models[j]
            if t not in prof.machines:
                continue
            m = self.model(j, t)
            if m is None:
                known[i] = False
                continue
            mach = prof.machines[t]
            rows.append(i)
            models.append(m)
            lo.append(int(mach.min_local_bsz))
            max_b.append(int(prof.max_batch_size))
            hi.append([self._max_atomic(prof.model, t, mach, N, K) for N, K in zip(nodes.tolist(), replicas.tolist())])
        if rows:
            g, atomic, accum = optimize_many(models, nodes, replicas, max_batch_size=np.array(max_b),
                                             atomic_bsz_range=(np.array(lo), np.array(hi)))
            good[rows] = g
            batch[rows] = replicas[None, :] * atomic * (accum + 1)
        return good, batch, known

    def _max_atomic(self, model: str, gpu_type: str, mach: Any, nodes: int, replicas: int) -> int:
        """The profiled per-GPU batch limit of a placement (cached; 0 where none)."""
        key = (model, gpu_type, nodes, replicas)
        if key not in self._hi:
            try:
                self._hi[key] = int(mach.max_atomic_bsz(nodes, replicas))
            except ValidationError:     # a placement the profile cannot interpolate: not runnable
                self._hi[key] = 0
        return self._hi[key]

    def initial_batch(self, job: int, replicas: int, gpu_type: str | None = None) -> int:
        """The batch a job runs at before the scheduler has a model of it (Sia's simulator:
        the larger of the initial batch and the smallest per-GPU batch of ``gpu_type`` (of
        any type when None) on every replica, at most the model's maximum)."""
        prof = self.progress.models[job]
        lo = (int(prof.machines[gpu_type].min_local_bsz) if gpu_type in prof.machines
              else min(int(m.min_local_bsz) for m in prof.machines.values()))
        return int(min(max(int(prof.init_batch_size), lo * int(replicas)), int(prof.max_batch_size)))
