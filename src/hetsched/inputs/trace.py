"""Traces: the jobs a simulation replays, generated or read from files.

A :class:`Trace` is a :class:`~hetsched.JobSet` whose ``steps_remaining`` holds each
job's *total* steps and whose ``arrival_times`` are sorted, plus what the simulator needs
beyond a JobSet: the unconsolidated throughputs (the job spread over several servers), the
job types and absolute SLO deadlines.

:func:`generate_workload` draws one with Gavel's Philly-derived generator (Poisson arrivals
at ``rate_per_hour``, scale factors 1/2/4/8 w.p. 0.70/0.10/0.15/0.05, durations
:math:`10^{U(1.5,3)}` min w.p. 0.8 else :math:`10^{U(3,4)}` min, job types from the
throughput table); :mod:`hetsched.inputs.traces.readers` reads traces from files.
"""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError, show
from .jobs import JobSet
from .throughputs import ThroughputCatalogue, generate_catalogue
from .workloads import Workload, sample_jobs
from ..validation import check_matrix

__all__ = ["Trace", "as_trace", "generate_workload"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class Trace:
    """The jobs of a simulation, in arrival order.

    Attributes
    ----------
    jobs : JobSet
        Throughputs (consolidated, steps/s on ``scale_factor`` GPUs of each type), ids,
        scale factors, weights, ``steps_remaining`` (the job's **total** steps, positive)
        and ``arrival_times`` (seconds, finite, non-negative, non-decreasing).
    unconsolidated : ndarray of shape (n_jobs, n_gpu_types), optional
        Throughputs when a multi-GPU job's gang spans several servers (used when placement
        spreads a gang); ``None``: spreading costs nothing.
    job_types : ndarray of object, optional
        Job type (model) of each job, for reports.
    deadlines : ndarray of float, optional
        Absolute SLO deadline of each job in seconds (``inf``: none).
    source : str
        Where the trace came from, in words (recorded in results).
    meta : dict
        Free-form details of the source (generator parameters, file names, skipped rows).
    catalogue : ThroughputCatalogue, optional
        The throughput catalogue the jobs were sampled from (a generated workload keeps
        it): policies with ``packing="workload"`` or ``placement_sensitivity="workload"``
        take the pair and unconsolidated tables from it in :func:`~hetsched.sim.simulate`.
    catalogue_rows : ndarray of int64, optional
        The catalogue row of each job (with ``catalogue``).
    """

    jobs: JobSet
    unconsolidated: np.ndarray | None = None
    job_types: np.ndarray | None = None
    deadlines: np.ndarray | None = None
    source: str = "jobs"
    meta: dict[str, Any] = field(default_factory=dict)
    catalogue: ThroughputCatalogue | None = None
    catalogue_rows: np.ndarray | None = None

    def __post_init__(self) -> None:
        jobs = self.jobs
        if not isinstance(jobs, JobSet):
            raise ValidationError(f"`jobs` must be a hetsched.JobSet; got {type(jobs).__name__}.")
        n, m = jobs.n_jobs, jobs.n_types
        if n and not jobs.has("steps_remaining"):
            raise ValidationError(
                "`jobs` must carry `steps_remaining` (each job's total steps) to be simulated; "
                "pass JobSet(..., steps_remaining=...)."
            )
        arr = jobs.field("arrival_times", 0.0) if n else np.zeros(0)
        _check_arrivals(arr, jobs.ids)
        if self.unconsolidated is not None:
            U = check_matrix(self.unconsolidated, "unconsolidated", shape=(n, m),
                             shape_text=f"(n_jobs, n_gpu_types) = ({n}, {m})",
                             where=lambda i: f"job {show(jobs.ids[i[0]])}, GPU type {jobs.gpu_types[i[1]]!r}")
            U.setflags(write=False)
            object.__setattr__(self, "unconsolidated", U)
        if self.job_types is not None:
            jt = np.empty(n, dtype=object)
            vals = list(self.job_types)
            if len(vals) != n:
                raise ValidationError(f"`job_types` must have length n_jobs = {n}; got {len(vals)}.")
            jt[:] = vals
            object.__setattr__(self, "job_types", jt)
        if self.deadlines is not None:
            d = np.array(self.deadlines, dtype=float)
            if d.shape != (n,):
                raise ValidationError(f"`deadlines` must have shape (n_jobs,) = ({n},); got {d.shape}.")
            bad = np.isnan(d) | (d <= arr)
            if bad.any():
                j = int(np.flatnonzero(bad)[0])
                raise ValidationError(
                    f"`deadlines` must be later than the job's arrival (inf for none); job "
                    f"{show(jobs.ids[j])} arrives at {show(arr[j])} with deadline {show(d[j])}."
                )
            object.__setattr__(self, "deadlines", d)
        if (self.catalogue is None) != (self.catalogue_rows is None):
            raise ValidationError("`catalogue` and `catalogue_rows` must be given together.")
        if self.catalogue is not None:
            if not isinstance(self.catalogue, ThroughputCatalogue):
                raise ValidationError(
                    f"`catalogue` must be a ThroughputCatalogue; got {type(self.catalogue).__name__}.")
            rows = np.asarray(self.catalogue_rows)
            if rows.shape != (n,) or (n and (rows.dtype.kind not in "iu" or rows.min() < 0
                                             or rows.max() >= len(self.catalogue))):
                raise ValidationError(
                    f"`catalogue_rows` must hold one catalogue row number in [0, {len(self.catalogue) - 1}] per job "
                    f"({n}); got shape {rows.shape}.")
            object.__setattr__(self, "catalogue_rows", rows.astype(np.int64))

    # ------------------------------------------------------------------ access
    @property
    def n_jobs(self) -> int:
        """Number of jobs."""
        return self.jobs.n_jobs

    def __len__(self) -> int:
        return self.jobs.n_jobs

    @property
    def gpu_types(self) -> tuple[str, ...]:
        """Column labels of the throughput tables."""
        return self.jobs.gpu_types

    @property
    def arrival_times(self) -> np.ndarray:
        """Arrival time of each job, seconds."""
        return self.jobs.field("arrival_times", 0.0)

    @property
    def total_steps(self) -> np.ndarray:
        """Total steps of each job."""
        return self.jobs.steps_remaining if self.n_jobs else np.zeros(0)

    def to_frame(self) -> pd.DataFrame:
        """One row per job: ``jobs.to_frame()`` plus ``job_type``, ``deadline`` and ``U_<type>``."""
        df = self.jobs.to_frame()
        if self.job_types is not None:
            df.insert(0, "job_type", self.job_types)
        if self.unconsolidated is not None:
            for k, t in enumerate(self.gpu_types):
                df[f"U_{t}"] = self.unconsolidated[:, k]
        if self.deadlines is not None:
            df["deadline"] = self.deadlines
        return df

    def head(self, n: int) -> Trace:
        """The first ``n`` jobs (by arrival) as a new trace."""
        n = int(n)
        idx = np.arange(min(max(n, 0), self.n_jobs))
        return Trace(
            self.jobs.take(idx),
            unconsolidated=None if self.unconsolidated is None else self.unconsolidated[idx],
            job_types=None if self.job_types is None else self.job_types[idx],
            deadlines=None if self.deadlines is None else self.deadlines[idx],
            source=self.source,
            meta=dict(self.meta),
            catalogue=self.catalogue,
            catalogue_rows=None if self.catalogue_rows is None else self.catalogue_rows[idx],
        )

    def __repr__(self) -> str:
        span = float(self.arrival_times[-1] - self.arrival_times[0]) / 3600 if self.n_jobs else 0.0
        return (
            f"Trace(n_jobs={self.n_jobs}, gpu_types={list(self.gpu_types)}, arrivals over {span:.3g} h, "
            f"unconsolidated={self.unconsolidated is not None}, source={self.source!r})"
        )


def _check_arrivals(arr: np.ndarray, ids: np.ndarray) -> None:
    if arr.size == 0:
        return
    bad = ~np.isfinite(arr) | (arr < 0)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise ValidationError(
            f"`arrival_times` must be finite and non-negative; job {show(ids[j])} (row {j}) has {show(arr[j])}."
        )
    down = np.flatnonzero(arr[1:] < arr[:-1])
    if down.size:
        j = int(down[0]) + 1
        raise ValidationError(
            f"`arrival_times` must be non-decreasing (jobs in arrival order); job {show(ids[j])} (row {j}) "
            f"arrives at {show(arr[j])}, before job {show(ids[j - 1])} (row {j - 1}) at {show(arr[j - 1])}."
        )


def as_trace(workload: Any, *, catalogue: ThroughputCatalogue | None = None) -> Trace:
    """Turn what a user passes as a workload into a :class:`Trace`.

    Parameters
    ----------
    workload : Trace, JobSet or hetsched.inputs.workloads.Workload
        A JobSet needs ``steps_remaining`` (total steps); ``arrival_times`` default to 0.
        A Workload takes its unconsolidated throughputs from ``catalogue`` when given.
    catalogue : ThroughputCatalogue, optional
        The catalogue a Workload was sampled from.

    Returns
    -------
    Trace

    Raises
    ------
    ValidationError
        Anything else, or a job set that breaks a trace rule (see :class:`Trace`).
    """
    if isinstance(workload, Trace):
        return workload
    if isinstance(workload, JobSet):
        return Trace(workload, source="jobs")
    if isinstance(workload, Workload):
        U = None
        if catalogue is not None and catalogue.unconsolidated is not None:
            cols = [catalogue.gpu_types.index(t) for t in workload.jobs.gpu_types]
            U = catalogue.unconsolidated[np.ix_(workload.rows, cols)]
        return Trace(workload.jobs, unconsolidated=U, job_types=workload.job_types, source="workload",
                     catalogue=catalogue, catalogue_rows=None if catalogue is None else workload.rows)
    raise ValidationError(
        f"`workload` must be a hetsched.sim.Trace, a JobSet or a hetsched.inputs.workloads.Workload; "
        f"got {type(workload).__name__}."
    )


def generate_workload(
    n_jobs: int,
    *,
    rate_per_hour: float,
    seed: int | np.random.Generator = 0,
    catalogue: ThroughputCatalogue | None = None,
    gpu_types: Sequence[str] | Mapping[str, float] | None = None,
    scale_factor_probs: Sequence[float] | Mapping[int, float] = (0.70, 0.10, 0.15, 0.05),
    long_job_prob: float = 0.2,
    reference_gpu_type: str | None = None,
    slo_factors: Sequence[float] | None = None,
    n_entities: int | None = None,
    id_prefix: str | None = "j",
    pairs: bool = False,
) -> Trace:
    r"""A generated trace: Gavel's Philly-derived job mix with Poisson arrivals.

    Parameters
    ----------
    n_jobs : int
        Number of jobs.
    rate_per_hour : float
        Poisson arrival rate :math:`\lambda`, jobs per hour (the first job arrives one
        exponential gap after 0).
    seed : int or numpy.random.Generator, default 0
        Source of all randomness (the catalogue too when it is generated).
    catalogue : ThroughputCatalogue, optional
        Throughput table (e.g. :func:`hetsched.load_gavel_throughputs`); default
        :func:`hetsched.generate_catalogue` over ``gpu_types`` with ``seed``.
    gpu_types : sequence or mapping, optional
        GPU types of the generated catalogue (default v100, p100, k80).
    scale_factor_probs : sequence of 4 floats or mapping, default (0.70, 0.10, 0.15, 0.05)
        Probabilities of 1/2/4/8-GPU jobs (``{1: 1.0}`` for single-GPU jobs only).
    long_job_prob : float, default 0.2
        Probability of a long job (:math:`10^{U(3,4)}` minutes).
    reference_gpu_type : str, optional
        Type on which a job's sampled duration is its run time (default: fastest, as Gavel).
    slo_factors : sequence of float, optional
        When given, each job gets a deadline ``arrival + f * duration`` with ``f`` drawn
        uniformly from these factors (Gavel uses 1.2, 2 and 10).
    n_entities : int, optional
        When given, each job belongs to an entity (user) ``"e0" .. "e{n-1}"`` drawn
        uniformly (``JobSet.entities``, read by hierarchical policies).
    id_prefix : str or None, default "j"
        Job ids ``"j0"...`` (None: integers).
    pairs : bool, default False
        Give the generated catalogue a pair table (space sharing; see
        :func:`hetsched.generate_catalogue`). The jobs are the same either way. Ignored with
        a ``catalogue``.

    Returns
    -------
    Trace
        With unconsolidated throughputs when the catalogue has them.

    Examples
    --------
    >>> tr = generate_workload(5, rate_per_hour=2.0, seed=0)
    >>> tr.n_jobs, tr.gpu_types, bool((tr.arrival_times[1:] >= tr.arrival_times[:-1]).all())
    (5, ('v100', 'p100', 'k80'), True)
    """
    if isinstance(seed, bool) or (not isinstance(seed, (int, np.integer, np.random.Generator))) or (
        isinstance(seed, (int, np.integer)) and seed < 0
    ):
        raise ValidationError(f"`seed` must be a non-negative int or a numpy.random.Generator; got {seed!r}.")
    gen = np.random.default_rng(int(seed)) if not isinstance(seed, np.random.Generator) else seed
    if catalogue is None:
        if not isinstance(pairs, bool):
            raise ValidationError(f"`pairs` must be True or False; got {pairs!r}.")
        types = gpu_types or ("v100", "p100", "k80")
        before = copy.deepcopy(gen.bit_generator.state)
        catalogue = generate_catalogue(gpu_types=types, seed=gen)
        if pairs:
            # the same catalogue with a pair table, drawn from a copy of the stream, so that the
            # jobs sampled below do not depend on `pairs` (a packed policy sees the same workload)
            twin = np.random.default_rng()
            twin.bit_generator.state = before
            with_pairs = generate_catalogue(gpu_types=types, seed=twin, pairs=True)
            if not np.array_equal(with_pairs.throughputs, catalogue.throughputs):
                raise AssertionError("generate_catalogue(pairs=True) changed the base table")  # pragma: no cover
            catalogue = with_pairs
    elif gpu_types is not None:
        catalogue = catalogue.subset(list(gpu_types))
    w = sample_jobs(
        catalogue,
        n_jobs,
        seed=gen,
        scale_factor_probs=scale_factor_probs,
        arrival_rate_per_hour=rate_per_hour,
        long_job_prob=long_job_prob,
        reference_gpu_type=reference_gpu_type,
        id_prefix=id_prefix,
    )
    deadlines = None
    if slo_factors is not None:
        f = np.asarray(list(slo_factors), dtype=float)
        if f.ndim != 1 or f.size == 0 or not np.isfinite(f).all() or (f <= 0).any():
            raise ValidationError(f"`slo_factors` must be a non-empty sequence of positive numbers; got {slo_factors!r}.")
        pick = f[gen.integers(0, f.size, size=w.jobs.n_jobs)]
        deadlines = w.jobs.field("arrival_times", 0.0) + pick * w.durations
    tr = as_trace(w, catalogue=catalogue)
    jobs = tr.jobs
    if n_entities is not None:
        if isinstance(n_entities, bool) or not isinstance(n_entities, (int, np.integer)) or n_entities < 1:
            raise ValidationError(f"`n_entities` must be a positive integer; got {n_entities!r}.")
        ent = np.array([f"e{i}" for i in gen.integers(0, int(n_entities), size=jobs.n_jobs)], dtype=object)
        jobs = JobSet(jobs.throughputs, gpu_types=jobs.gpu_types, ids=jobs.ids, scale_factors=jobs.scale_factors,
                      weights=jobs.weights, steps_remaining=jobs.steps_remaining, arrival_times=jobs.arrival_times,
                      entities=ent)
    return Trace(
        jobs,
        unconsolidated=tr.unconsolidated,
        job_types=tr.job_types,
        deadlines=deadlines,
        source="generated",
        catalogue=catalogue,
        catalogue_rows=tr.catalogue_rows,
        meta={
            "generator": "philly_mix",
            "n_jobs": int(n_jobs),
            "rate_per_hour": float(rate_per_hour),
            "scale_factor_probs": _jsonable(scale_factor_probs),
            "long_job_prob": float(long_job_prob),
            "catalogue": repr(catalogue),
            "mean_duration_h": float(np.mean(w.durations) / 3600) if len(w) else math.nan,
        },
    )


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): float(v) for k, v in value.items()}
    return [float(v) for v in value]
