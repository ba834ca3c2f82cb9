r"""Adaptive jobs as a workload: each job is a model with a measured profile per GPU type
(:mod:`hetsched.inputs.profiles`), and its progress is measured as Pollux measures it.

Progress (Pollux, OSDI'21, §3.1; Sia's simulator, ``job.py``)
--------------------------------------------------------------
A job's progress is counted in iterations at its initial batch size :math:`M_0`: an
iteration at total batch :math:`M = K m (s + 1)` (``K`` replicas, per-GPU "atomic" batch
``m``, ``s`` gradient-accumulation steps) advances it by the statistical-efficiency gain

.. math::  g(M) = \frac{\sigma^2 + |g|^2}{\sigma^2 / (M / M_0) + |g|^2},

where :math:`|g|^2` and :math:`\sigma^2` are the gradient's square norm and variance at the
job's current epoch (the model's validation runs, interpolated in batch size). An
iteration takes :math:`T = t_\text{step} + s (t_\text{step} - t_\text{sync})` with the step
and sync times of the placement's profile, so the job progresses at :math:`g(M) / T`
(times the calibration factor Sia's simulator applies per model). It is done when its
progress reaches the start of epoch ``max_epochs`` (:attr:`ModelProfile.completion_progress`).

:class:`AdaptiveWorkload` is the workload (the rows of a Sia/Pollux workload file and the
profiles); :meth:`AdaptiveWorkload.trace` is what a scheduler that does not adapt sees (each
job at the replicas and batch size it was submitted with, as Sia's "TunedJobs");
:class:`AdaptiveProgress` is the simulated truth the round loop progresses jobs by.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ValidationError
from .cluster import Cluster
from .jobs import JobSet
from .profiles import SIA_MACHINES, ModelProfile, load_sia_profiles, sia_data_path
from .traces.sia import AdaptiveJobTable, read_sia_workload
from .workloads import Workload

__all__ = ["REPORT_KEYS", "AdaptiveJobs", "AdaptiveProgress", "AdaptiveWorkload", "node_sizes", "observed_metrics", "split_batch",
           "read_adaptive_workload", "sia_workload"]

#: What a running adaptive job measures in a round (:meth:`AdaptiveJobs.report`): its GPU
#: type, nodes and replicas, per-GPU batch and gradient-accumulation steps, the mean step
#: and synchronisation times (s) of one iteration, and the gradient's square norm and
#: variance (Pollux's ``grad_sqr``/``grad_var``).
REPORT_KEYS = ("gpu_type", "nodes", "replicas", "atomic_bsz", "accum_steps", "step_time", "sync_time", "grad_sqr",
               "grad_var")

log = logging.getLogger(__name__)


def node_sizes(cluster: Cluster, gpu_types: tuple[str, ...] | None = None) -> np.ndarray:
    """GPUs per node of each type: the largest server of the type in the cluster's topology,
    or 8 without a topology (int64, 0 for a type with no GPUs; :class:`AdaptiveProgress`
    uses the profiled machine's node size instead of 8)."""
    types = tuple(cluster.gpu_types) if gpu_types is None else tuple(gpu_types)
    cap = cluster.capacities(types)
    topo = cluster.topology
    R = np.zeros(len(types), np.int64)
    for k, t in enumerate(types):
        if cap[k] == 0:
            continue
        if topo is not None and t in topo.gpu_types:
            R[k] = int(topo.server_sizes(t).max())
        else:
            R[k] = min(8, int(cap[k]))
    return R


@dataclass(frozen=True, eq=False)
class AdaptiveWorkload:
    """Adaptive jobs: the rows of a workload and the profile of every model they name.

    Attributes
    ----------
    table : AdaptiveJobTable
        One row per job: name, arrival (s), model, num_replicas and batch_size (what the job
        was submitted with; a scheduler that does not adapt runs it so).
    profiles : Mapping[str, ModelProfile]
        The measured profile of each model (every model of ``table`` must have one).
    source : str
        Where the jobs came from (recorded in results).
    throughput_units : {"progress", "examples"}
        What a scheduler that does not adapt is given as throughput (:meth:`trace`):
        ``"progress"`` (default), progress per second, the unit of ``steps_remaining``, so that
        every policy that divides remaining work by throughput is consistent; ``"examples"``,
        examples per second, what Gavel's policy is given in Sia's comparison (only
        ``max_sum_throughput``, which compares throughputs and never remaining work, should
        see it).

    Examples
    --------
    >>> import hetsched as hs
    >>> try:
    ...     w = hs.inputs.adaptive.sia_workload("philly", 1)
    ... except hs.DataNotFoundError:
    ...     w = None                 # Sia's artifact data is not on this machine
    >>> w is None or w.n_jobs == 160
    True
    """

    table: AdaptiveJobTable
    profiles: Mapping[str, ModelProfile]
    source: str = "adaptive"
    meta: dict[str, Any] = field(default_factory=dict)
    throughput_units: str = "progress"

    def __post_init__(self) -> None:
        if self.throughput_units not in ("progress", "examples"):
            raise ValidationError(f"`throughput_units` must be 'progress' or 'examples'; got {self.throughput_units!r}.")
        if not isinstance(self.table, AdaptiveJobTable):
            raise ValidationError(f"`table` must be an AdaptiveJobTable; got {type(self.table).__name__}.")
        missing = sorted(set(self.table.frame["model"]) - set(self.profiles))
        if missing:
            first = self.table.frame[self.table.frame["model"] == missing[0]]["name"].iloc[0]
            raise ValidationError(f"job {first!r} names model {missing[0]!r}, which has no profile; profiles: "
                                  f"{sorted(self.profiles)}.")

    @property
    def n_jobs(self) -> int:
        """Number of jobs."""
        return int(self.table.n_jobs)

    @property
    def gpu_types(self) -> tuple[str, ...]:
        """GPU types every model has a profile on (in the first model's order)."""
        per = [tuple(p.machines) for p in self.profiles.values()]
        if not per:
            return ()
        return tuple(t for t in per[0] if all(t in q for q in per))

    def trace(self, cluster: Cluster, progress: AdaptiveProgress | None = None) -> Workload:
        """The workload as a scheduler that does not adapt sees it (Sia's "TunedJobs").

        Each job runs on its submitted ``num_replicas`` GPUs at its submitted batch size, on
        the fewest nodes of each type; its throughput on a type is its progress rate in its
        first epoch (``throughput_units="progress"``) or examples/s times the model's
        calibration factor (``"examples"``), 0 where the type has no profile or the gang does
        not fit. ``steps_remaining`` is the progress at which the job completes (the units of
        :class:`AdaptiveProgress`). ``progress``: this workload's truth on ``cluster`` when the
        caller has built it already.
        """
        prog = progress if progress is not None else AdaptiveProgress(self, cluster)
        f = self.table.frame
        types = prog.types
        n, m = self.n_jobs, len(types)
        T = np.zeros((n, m))
        for j in range(n):
            K, b = int(prog.submitted_replicas[j]), int(prog.submitted_batch[j])
            if self.throughput_units == "examples":
                T[j] = [prog.throughput(j, k, K, b) for k in range(m)]
            else:
                T[j] = prog.first_rates_of(prog.models[j], prog.names[j], K, b)
        jobs = JobSet(T, gpu_types=types, ids=prog.names, scale_factors=prog.submitted_replicas,
                      steps_remaining=prog.completion,
                      arrival_times=f["arrival"].to_numpy(float))
        return Workload(jobs, job_types=f["model"].to_numpy(dtype=object), source=self.source,
                        meta={**self.meta, "adaptive": True, "n_models": len(self.profiles),
                              "throughput_units": self.throughput_units})


class AdaptiveJobs:
    """What an adaptive scheduler may know of its jobs on one cluster: each job's model
    profile (batch limits, restart cost, per-GPU batch range), the replicas and batch it was
    submitted with, and how a batch splits over a placement. The measurements a scheduler
    learns from come through :meth:`report`; a job's validation metric through
    :meth:`observed_metrics`.

    Two kinds exist: :class:`AdaptiveProgress`, the simulated truth (reports computed from
    the profiles), and :class:`hetsched.online.adaptive_jobs.OnlineAdaptiveJobs`, the jobs an
    :class:`~hetsched.online.OnlineScheduler` was given (reports sent by the workers).

    Parameters
    ----------
    cluster : Cluster
        Its GPU types are the columns; a type without a profile of some model cannot run it.
    profiles : Mapping[str, ModelProfile]
        Every model the jobs may name (without servers, a type's node size is the largest
        profiled machine's node size of that type, at most the type's GPU count).
    """

    def __init__(self, cluster: Cluster, profiles: Mapping[str, ModelProfile]) -> None:
        if not isinstance(cluster, Cluster):
            raise ValidationError(f"`cluster` must be a hetsched.Cluster; got {type(cluster).__name__}.")
        self.types = tuple(cluster.gpu_types)
        self._size_nodes(cluster, profiles)
        self.models: list[ModelProfile] = []
        self.names = np.zeros(0, dtype=object)
        self.submitted_replicas = np.zeros(0, np.int64)
        self.submitted_batch = np.zeros(0, np.int64)
        self.completion = np.zeros(0)
        self.restart_seconds = np.zeros(0)
        self.init_batch = np.zeros(0, np.int64)
        self.max_batch = np.zeros(0, np.int64)

    def _size_nodes(self, cluster: Cluster, profiles: Mapping[str, ModelProfile]) -> None:
        """GPUs per type (:attr:`capacity`) and per node (:attr:`node_gpus`) of ``cluster``."""
        self.node_gpus = node_sizes(cluster, self.types)
        self.capacity = cluster.capacities(self.types).astype(np.int64)
        if cluster.topology is None:   # no servers given: the profiled machine's node size
            for k, t in enumerate(self.types):
                sizes = [p.machines[t].gpus_per_node for p in profiles.values() if t in p.machines]
                if sizes and self.capacity[k] > 0:
                    self.node_gpus[k] = min(int(max(sizes)), int(self.capacity[k]))

    def _set_jobs(self, names: list[Any], models: list[ModelProfile], replicas: np.ndarray, batch: np.ndarray) -> None:
        """The per-job columns of ``models`` (job number = position)."""
        for j, prof in enumerate(models):
            if not any(t in prof.machines and self.capacity[k] > 0 for k, t in enumerate(self.types)):
                raise ValidationError(f"job {names[j]!r} (model {prof.model!r}) has a profile on none of the "
                                      f"cluster's GPU types {list(self.types)}; profiled: {sorted(prof.machines)}.")
        self.models = list(models)
        self.names = np.empty(len(names), dtype=object)
        self.names[:] = list(names)
        self.submitted_replicas = np.asarray(replicas, dtype=np.int64)
        self.submitted_batch = np.asarray(batch, dtype=np.int64)
        self.completion = np.array([p.completion_progress for p in models], dtype=float)
        self.restart_seconds = np.array([p.restart_seconds for p in models], dtype=float)
        self.init_batch = np.array([p.init_batch_size for p in models], dtype=np.int64)
        self.max_batch = np.array([p.max_batch_size for p in models], dtype=np.int64)

    # ------------------------------------------------------------------ configurations
    def has_type(self, job: int, k: int) -> bool:
        """Whether job ``job``'s model has a profile on type column ``k``."""
        return self.types[k] in self.models[job].machines

    def nodes_for(self, k: int, replicas: int, spread: bool = False) -> int:
        """Nodes a gang of ``replicas`` GPUs of type ``k`` spans: the fewest, or at least two
        when placement spread it."""
        R = max(int(self.node_gpus[k]), 1)
        nodes = max(math.ceil(replicas / R), 1)
        return max(nodes, 2) if spread and replicas > 1 else nodes

    def split_batch(self, job: int, k: int, nodes: int, replicas: int, batch: int) -> tuple[int, int]:
        """(atomic batch, accumulation steps) that run total batch ``batch`` on the
        placement: the per-GPU batch ``ceil(batch / replicas)`` split into the fewest
        accumulation steps that fit the profiled per-GPU maximum, kept within the profiled
        per-GPU range and the model's maximum batch (as Sia's simulator does)."""
        return split_batch(self.models[job], self.types[k], nodes, replicas, batch)

    def batch_of(self, job: int, batch: int) -> int:
        """A row's batch size: ``batch``, or the job's submitted one when 0."""
        return int(batch) if batch > 0 else int(self.submitted_batch[job])

    def rate(self, job: int, k: int, nodes: int, replicas: int, batch: int, epoch: int) -> float:
        """Progress per second of ``job`` on the placement at total batch ``batch`` during
        ``epoch`` (0 where the model has no profile on the type)."""
        return self.rate_of(self.models[job], self.names[job], k, nodes, replicas, batch, epoch)

    def rate_of(self, prof: ModelProfile, name: Any, k: int, nodes: int, replicas: int, batch: int,
                epoch: int) -> float:
        """:meth:`rate` of a job of model ``prof`` (named ``name`` in the log)."""
        if self.types[k] not in prof.machines:
            return 0.0
        try:
            atomic, accum = split_batch(prof, self.types[k], nodes, replicas, batch)
            return float(prof.progress_rate(self.types[k], nodes, replicas, atomic, accum, epoch))
        except ValidationError as exc:   # a placement or batch outside the profile: the job cannot run so
            log.info("job %s cannot run on %d GPU(s) of %s over %d node(s) at batch %d: %s", name,
                     replicas, self.types[k], nodes, batch, exc)
            return 0.0

    def first_rates_of(self, prof: ModelProfile, name: Any, replicas: int, batch: int) -> list[float]:
        """Per GPU type column, the first-epoch progress rate of a job of model ``prof`` (named
        ``name`` in the log) at ``replicas`` GPUs and total batch ``batch`` on the fewest
        nodes (what a scheduler that does not adapt sees, :meth:`AdaptiveWorkload.trace`); 0
        where the model has no profile or the gang does not fit."""
        K, b = int(replicas), int(batch)
        return [self.rate_of(prof, name, k, self.nodes_for(k, K), K, b, 0) if K <= self.capacity[k] else 0.0
                for k in range(len(self.types))]

    def throughput(self, job: int, k: int, replicas: int, batch: int) -> float:
        """Examples/s (times the calibration factor) of ``job`` on ``replicas`` GPUs of type
        ``k`` at total batch ``batch``, on the fewest nodes; 0 where it cannot run."""
        if not self.has_type(job, k) or replicas > self.capacity[k]:
            return 0.0
        nodes = self.nodes_for(k, replicas)
        try:
            atomic, accum = self.split_batch(job, k, nodes, replicas, batch)
            return float(self.models[job].throughput(self.types[k], nodes, replicas, atomic, accum))
        except ValidationError as exc:
            log.info("job %s cannot run on %d GPU(s) of %s at batch %d: %s", self.names[job], replicas,
                     self.types[k], batch, exc)
            return 0.0

    # ------------------------------------------------------------------ what a scheduler learns from
    def report(self, job: int, k: int, gpus: int, batch: int, progress: float, spread: bool = False
               ) -> dict[str, Any] | None:
        """What ``job`` measured in the round it just ran on ``gpus`` GPUs of type column
        ``k`` at total batch ``batch`` from ``progress`` (see :data:`REPORT_KEYS`), or None
        when it reported nothing."""
        raise NotImplementedError

    def observed_metrics(self, job: int, progress: float) -> tuple[np.ndarray, np.ndarray]:
        """``(progress at the end of each epoch the job completed, its validation metric
        there)`` as far as the job has observed them at ``progress``."""
        raise NotImplementedError

    def ended_at(self, job: int) -> float:
        """The progress at which ``job`` ended, once it has left the jobs: its target (a job
        finishes when its progress reaches ``completion``); NaN where it did not end by
        finishing (an online job cancelled)."""
        return float(self.completion[job])

class AdaptiveProgress(AdaptiveJobs):
    """The simulated truth for adaptive jobs on one cluster: how fast a job progresses on a
    configuration (see the module docstring), and what a running job reports.

    Parameters
    ----------
    workload : AdaptiveWorkload
    cluster : Cluster
        Its GPU types are the columns; a type without a profile of some model cannot run it.
    """

    def __init__(self, workload: AdaptiveWorkload, cluster: Cluster) -> None:
        super().__init__(cluster, workload.profiles)
        self.workload = workload
        f = workload.table.frame
        self._set_jobs(f["name"].tolist(), [workload.profiles[name] for name in f["model"]],
                       f["num_replicas"].to_numpy(np.int64), f["batch_size"].to_numpy(np.int64))

    # ------------------------------------------------------------------ the truth, per round
    def advance(self, job: int, k: int, nodes: int, replicas: int, batch: int, progress: float,
                seconds: float) -> float:
        """Progress ``job`` makes in ``seconds`` from ``progress``, crossing epochs (the
        efficiency changes with the epoch), capped at completion."""
        return self.advance_timed(job, k, nodes, replicas, batch, progress, seconds)[0]

    def advance_timed(self, job: int, k: int, nodes: int, replicas: int, batch: int, progress: float,
                      seconds: float) -> tuple[float, float]:
        """``(progress made, seconds it took)``: as :meth:`advance`, and the time spent, which
        is less than ``seconds`` when the job completes inside them."""
        prof = self.models[job]
        done, p, left = self.completion[job], float(progress), float(seconds)
        while left > 1e-12 and p < done:
            epoch = int(prof.epoch_of(p))
            r = self.rate(job, k, nodes, replicas, batch, epoch)
            if r <= 0:
                break
            nxt = min(float(prof.epoch_progress(epoch + 1)), done)
            if nxt <= p:        # a boundary the float arithmetic left us on
                nxt = min(float(prof.epoch_progress(min(epoch + 2, prof.max_epochs))), done)
                if nxt <= p:
                    break
            dt = (nxt - p) / r
            if dt >= left:
                p += r * left
                left = 0.0
                break
            p, left = nxt, left - dt
        return min(p, done) - float(progress), float(seconds) - left

    def average_rates(self, job: np.ndarray, k: np.ndarray, gpus: np.ndarray, batch: np.ndarray,
                      spread: np.ndarray, progress: np.ndarray, seconds: np.ndarray) -> np.ndarray:
        """Mean progress rate of each row over the ``seconds`` it computes this round (one
        entry per row; a row of 0 seconds gets the rate at its start; a job that completes
        within them, its mean up to completion)."""
        out = np.zeros(job.shape[0])
        for i in range(job.shape[0]):
            j, kk, n = int(job[i]), int(k[i]), int(gpus[i])
            nodes = self.nodes_for(kk, n, bool(spread[i]))
            b = self.batch_of(j, int(batch[i]))
            s = float(seconds[i])
            if s > 0:
                gained, used = self.advance_timed(j, kk, nodes, n, b, float(progress[i]), s)
                # the mean over the time it computes: a job that completes inside the round
                # completes at the exact time (the ledger finishes it at remaining / rate)
                out[i] = gained / used if used > 0 else 0.0
            else:
                out[i] = self.rate(j, kk, nodes, n, b, int(self.models[j].epoch_of(float(progress[i]))))
        return out

    def report(self, job: int, k: int, gpus: int, batch: int, progress: float, spread: bool = False
               ) -> dict[str, Any]:
        """What a running job reports after a round (what Pollux's agent measures): its
        placement, atomic batch and accumulation steps, step and sync time, and the gradient
        statistics at its batch and epoch."""
        prof = self.models[job]
        nodes = self.nodes_for(k, gpus, spread)
        b = self.batch_of(job, batch)
        atomic, accum = self.split_batch(job, k, nodes, gpus, b)
        step, sync = prof.machines[self.types[k]].times(np.array([nodes]), np.array([gpus]), np.array([atomic]))
        epoch = int(prof.epoch_of(progress))
        sqr, var = prof.grad_stats(np.array([gpus * atomic * (accum + 1)]), epoch)
        return {"gpu_type": self.types[k], "nodes": nodes, "replicas": gpus, "atomic_bsz": atomic,
                "accum_steps": accum, "step_time": float(np.asarray(step).reshape(-1)[0]),
                "sync_time": float(np.asarray(sync).reshape(-1)[0]), "grad_sqr": float(np.asarray(sqr).reshape(-1)[0]),
                "grad_var": float(np.asarray(var).reshape(-1)[0]), "epoch": epoch}

    def observed_metrics(self, job: int, progress: float) -> tuple[np.ndarray, np.ndarray]:
        """What job ``job`` has observed at ``progress`` at its submitted batch
        (:func:`observed_metrics`)."""
        return observed_metrics(self.models[job], int(self.submitted_batch[job]), progress)


def split_batch(prof: ModelProfile, gpu_type: str, nodes: int, replicas: int, batch: int) -> tuple[int, int]:
    """:meth:`AdaptiveJobs.split_batch` for model ``prof`` on ``gpu_type``."""
    mach = prof.machines[gpu_type]
    max_atomic = int(mach.max_atomic_bsz(nodes, replicas))
    local = math.ceil(batch / replicas - 1e-8)
    accum = max(math.ceil(local / max(max_atomic, 1) - 1e-8) - 1, 0)
    atomic = math.ceil(local / (accum + 1) - 1e-8)
    atomic = min(atomic, int(prof.max_batch_size // (replicas * (accum + 1))) or 1, max_atomic)
    return max(atomic, int(mach.min_local_bsz)), accum


def observed_metrics(profile: ModelProfile, batch: int, progress: float) -> tuple[np.ndarray, np.ndarray]:
    """What a job at ``batch`` has observed at ``progress``: the progress at the end of each
    epoch it has completed and the metric of the profile's validation run nearest (in ratio)
    to ``batch`` at those epochs (nothing of a later epoch).

    Parameters
    ----------
    profile : ModelProfile
    batch : int
        The job's total batch size.
    progress : float
        Its progress so far.
    """
    done = int(profile.epoch_of(float(progress)))
    runs = sorted(int(b) for b in profile.validation)
    near = min(runs, key=lambda b: (abs(math.log(b / max(int(batch), 1))), b))
    if done <= 0:
        return np.zeros(0), np.zeros(0)
    x = np.asarray(profile.epoch_progress(np.arange(1, done + 1)), dtype=float)
    y = profile.validation[near]["metric"].to_numpy(dtype=float)[:done]
    return x, y


def sia_workload(kind: str, number: int, *, path: str | Path | None = None,
                 machines: Mapping[str, str] | None = None) -> AdaptiveWorkload:
    """One of Sia's published workloads with the profiles of its models.

    Parameters
    ----------
    kind : {"philly", "newtrace"}
        Philly: 8 workloads of 160 jobs (8 busy hours); newTrace: 10 workloads of 960 jobs.
    number : int
        Workload number (1-8 for philly, 1-10 for newtrace).
    path : str or Path, optional
        The folder holding ``profiles/`` and ``workloads/`` (default: ``$HETSCHED_SIA_DATA``,
        then ``../shared/data/sia`` beside a source checkout).
    machines : Mapping[str, str], optional
        GPU type -> profile suffix (default: the paper's cluster, ``SIA_MACHINES``).

    Raises
    ------
    DataNotFoundError
        The data is not on this machine.
    ValidationError
        ``kind`` or ``number`` unknown, or a file breaks a rule of its reader.
    """
    if kind not in ("philly", "newtrace"):
        raise ValidationError(f"`kind` must be 'philly' or 'newtrace'; got {kind!r}.")
    root = sia_data_path(path)
    file = root / "workloads" / kind / f"workload-{number}.csv"
    if not file.is_file():
        have = sorted(p.stem for p in (root / "workloads" / kind).glob("workload-*.csv"))
        raise ValidationError(f"`number` {number!r}: no {kind} workload file {str(file)!r}; have {have}.")
    return read_adaptive_workload(file, profiles=root, machines=machines, meta={"kind": kind, "number": int(number)})


def read_adaptive_workload(path: str | Path, *, profiles: str | Path | None = None,
                           machines: Mapping[str, str] | None = None,
                           meta: Mapping[str, Any] | None = None) -> AdaptiveWorkload:
    """A workload file in the Sia/Pollux artifact format with the profiles of its models.

    Parameters
    ----------
    path : str or Path
        The workload CSV (``name, time, application, num_replicas, batch_size``).
    profiles : str or Path, optional
        The folder holding ``profiles/`` (default: found as :func:`sia_workload` finds it).
    machines : Mapping[str, str], optional
        GPU type -> profile suffix (default: the paper's cluster).
    meta : Mapping, optional
        Recorded with the workload.
    """
    root = sia_data_path(profiles)
    machines = dict(SIA_MACHINES) if machines is None else dict(machines)
    table = read_sia_workload(path)
    models = sorted(set(table.frame["model"]))
    loaded = load_sia_profiles(root, models=models, machines=machines)
    return AdaptiveWorkload(table, loaded, source=str(path), meta=dict(meta or {}))
