"""Traces: the jobs a simulation replays, generated or read from files.

A trace is a :class:`~hetsched.inputs.workloads.Workload` -- the one workload container;
:class:`Trace` is another name for that same class (``Trace is Workload``), kept because
the simulator's documents and results speak of traces. A simulation needs its jobs'
``steps_remaining`` (each job's *total* steps) and sorted ``arrival_times``
(:meth:`~hetsched.inputs.workloads.Workload.for_simulation` checks both); beyond a JobSet a
trace may carry the unconsolidated throughputs (the job spread over several servers), the
job types and absolute SLO deadlines.

:func:`generate_workload` draws one with Gavel's Philly-derived generator (Poisson arrivals
at ``rate_per_hour``, scale factors 1/2/4/8 w.p. 0.70/0.10/0.15/0.05, durations
:math:`10^{U(1.5,3)}` min w.p. 0.8 else :math:`10^{U(3,4)}` min, job types from the
throughput table); :mod:`hetsched.inputs.traces` reads traces from files;
:func:`as_trace` turns what a user passes as a workload into a checked one.
"""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..errors import ValidationError
from .cluster import Cluster
from .jobs import JobSet
from .throughputs import ThroughputCatalogue, generate_catalogue
from .workloads import _SCALE_FACTOR_ORDER, Workload, sample_jobs

__all__ = ["Trace", "as_trace", "generate_workload"]

log = logging.getLogger(__name__)

#: Another name for :class:`~hetsched.inputs.workloads.Workload` (the same class object):
#: the jobs of a simulation, in arrival order.
Trace = Workload


def _catalogue_unconsolidated(catalogue: ThroughputCatalogue, rows: np.ndarray,
                              gpu_types: Sequence[str]) -> np.ndarray | None:
    """The unconsolidated throughputs of catalogue ``rows`` over the columns ``gpu_types``
    (None when the catalogue has no unconsolidated table)."""
    if catalogue.unconsolidated is None:
        return None
    cols = [catalogue.gpu_types.index(t) for t in gpu_types]
    return catalogue.unconsolidated[np.ix_(rows, cols)]


def as_trace(workload: Any, *, catalogue: ThroughputCatalogue | None = None) -> Workload:
    """Turn what a user passes as a workload into one a simulation can replay.

    Parameters
    ----------
    workload : Workload (also named Trace) or JobSet
        A JobSet needs ``steps_remaining`` (total steps); ``arrival_times`` default to 0.
    catalogue : ThroughputCatalogue, optional
        The catalogue a workload without unconsolidated throughputs was sampled from (e.g.
        by :func:`~hetsched.inputs.workloads.sample_jobs`): its unconsolidated table fills
        them, and it becomes the workload's ``catalogue``. Ignored for a workload without
        catalogue rows, or one with unconsolidated throughputs.

    Returns
    -------
    Workload
        Checked by :meth:`~hetsched.inputs.workloads.Workload.for_simulation`.

    Raises
    ------
    ValidationError
        Anything else, or jobs that break a simulation rule (``steps_remaining`` present,
        arrivals finite, non-negative and in order).
    """
    if isinstance(workload, JobSet):
        return Workload(workload, source="jobs").for_simulation()
    if not isinstance(workload, Workload):
        raise ValidationError(
            f"`workload` must be a hetsched.sim.Trace, a JobSet or a hetsched.Workload (Trace and Workload are "
            f"the same class); got {type(workload).__name__}."
        )
    if catalogue is not None and workload.catalogue_rows is not None and workload.unconsolidated is None:
        U = _catalogue_unconsolidated(catalogue, workload.catalogue_rows, workload.gpu_types)
        workload = replace(workload, unconsolidated=U, catalogue=catalogue)
    return workload.for_simulation()


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
    cluster: Cluster | None = None,
) -> Workload:
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
    cluster : Cluster, optional
        The cluster the workload is for. Gangs larger than it can run -- more GPUs than
        its largest GPU type has (of the types the jobs can use) -- are not drawn: their
        probability moves to the largest scale factor that fits (with the default mix on 4
        GPUs per type, the 5 % of 8-GPU jobs become 4-GPU jobs), with a logged warning and
        ``meta["scale_factor_cap"]`` / ``meta["notes"]`` saying so. Every other job is the
        one drawn without ``cluster`` (same seed, same stream). Servers do not cap gangs:
        placement spreads a gang over several servers of its type (at its unconsolidated
        throughput). :func:`hetsched.simulate`, :func:`hetsched.sweep` and the command line
        pass their cluster.

    Returns
    -------
    Workload
        A trace (``source="generated"``) with the catalogue, its rows and the sampled
        durations; unconsolidated throughputs when the catalogue has them.

    Raises
    ------
    ValidationError
        Bad arguments (``cluster`` that is not a :class:`~hetsched.Cluster` included).

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
    cap: dict[str, Any] | None = None
    if cluster is not None:
        requested = scale_factor_probs
        scale_factor_probs, cap = _cap_scale_factors(scale_factor_probs, catalogue, cluster)
        if cap is not None:
            cap["requested"] = _jsonable(requested)
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
    jobs = w.jobs
    if n_entities is not None:
        if isinstance(n_entities, bool) or not isinstance(n_entities, (int, np.integer)) or n_entities < 1:
            raise ValidationError(f"`n_entities` must be a positive integer; got {n_entities!r}.")
        ent = np.array([f"e{i}" for i in gen.integers(0, int(n_entities), size=jobs.n_jobs)], dtype=object)
        jobs = JobSet(jobs.throughputs, gpu_types=jobs.gpu_types, ids=jobs.ids, scale_factors=jobs.scale_factors,
                      weights=jobs.weights, steps_remaining=jobs.steps_remaining, arrival_times=jobs.arrival_times,
                      entities=ent)
    meta: dict[str, Any] = {
        "generator": "philly_mix",
        "n_jobs": int(n_jobs),
        "rate_per_hour": float(rate_per_hour),
        "scale_factor_probs": _jsonable(scale_factor_probs),
        "long_job_prob": float(long_job_prob),
        "catalogue": repr(catalogue),
        "mean_duration_h": float(np.mean(w.durations) / 3600) if len(w) else math.nan,
    }
    if cap is not None:
        meta["scale_factor_cap"] = cap
        meta["notes"] = [cap["note"]]
    return Workload(
        jobs,
        unconsolidated=_catalogue_unconsolidated(catalogue, w.catalogue_rows, jobs.gpu_types),
        job_types=w.job_types,
        deadlines=deadlines,
        source="generated",
        catalogue=catalogue,
        catalogue_rows=w.catalogue_rows,
        durations=w.durations,
        meta=meta,
    )


def _cap_scale_factors(probs: Sequence[float] | Mapping[int, float], catalogue: ThroughputCatalogue,
                       cluster: Cluster) -> tuple[Sequence[float] | Mapping[int, float], dict[str, Any] | None]:
    """``probs`` with the mass of gangs larger than ``cluster`` can run moved to the largest
    scale factor that fits, and a record of what moved (None when nothing did).

    A job can run when one GPU type has as many GPUs as its gang (the rule
    :func:`hetsched.solve` checks); the types counted are the catalogue's that the cluster
    has (every cluster type when they share none). Probabilities are checked afterwards by
    :func:`~hetsched.inputs.workloads.sample_jobs`; a mix it cannot read is left alone.
    """
    if not isinstance(cluster, Cluster):
        raise ValidationError(f"`cluster` must be a hetsched.Cluster; got {type(cluster).__name__}.")
    counts = cluster.as_dict()
    shared = {t: counts[t] for t in catalogue.gpu_types if t in counts}
    pool = shared or counts
    if not pool:
        return probs, None
    biggest_type = max(pool, key=lambda t: pool[t])
    largest = int(pool[biggest_type])
    if isinstance(probs, Mapping):
        items = list(probs.items())
    elif isinstance(probs, (str, bytes)):
        return probs, None
    else:
        seq = list(probs)
        if len(seq) != len(_SCALE_FACTOR_ORDER):
            return probs, None
        items = list(zip(_SCALE_FACTOR_ORDER, seq))
    try:
        items = [(int(s), float(p)) for s, p in items]
    except (TypeError, ValueError):
        return probs, None
    over = {s: p for s, p in items if s > largest and p > 0}
    fits = [s for s in catalogue.available_scale_factors if s <= largest]
    if not over or not fits:
        return probs, None
    target = int(max(fits))
    capped: dict[int, float] = {}
    for s, p in items:
        key = target if s > largest else s
        capped[key] = capped.get(key, 0.0) + p
    moved = float(sum(over.values()))
    note = (f"gang sizes capped at {target} GPUs for cluster {counts}: its largest GPU type ({biggest_type!r}) has "
            f"{largest}, so the probability {moved:.4g} of {sorted(over)}-GPU jobs went to {target}-GPU jobs")
    log.warning("generate_workload: %s", note)
    record = {"max_gpus": target, "largest_type": biggest_type, "largest_type_gpus": largest,
              "moved": {str(s): p for s, p in sorted(over.items())}, "note": note}
    return capped, record


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): float(v) for k, v in value.items()}
    return [float(v) for v in value]
