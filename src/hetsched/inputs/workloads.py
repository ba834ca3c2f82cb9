"""Workloads: the one container of jobs with arrivals and their source (:class:`Workload`),
job mixes sampled from a throughput catalogue, random benchmark jobs, arrivals.

All randomness goes through an explicit ``seed`` (an int or a ``numpy.random.Generator``);
the same seed gives the same jobs. Distributions and their sources are in ``docs/data.md``:
the scale-factor mix and the duration distribution are those Gavel (Narayanan et al.,
OSDI'20) derived from Microsoft's Philly trace (Jeon et al., ATC'19).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError, show
from ..validation import (
    as_rng,
    check_bool,
    check_int,
    check_interval,
    check_matrix,
    check_names,
    check_nonneg,
    check_positive,
    check_probability,
    check_real,
)
from .jobs import JobSet
from .throughputs import ThroughputCatalogue, reference_column

__all__ = [
    "DEFAULT_SCALE_FACTOR_PROBS",
    "Workload",
    "catalogue_rows_of",
    "make_job_ids",
    "poisson_arrivals",
    "random_jobs",
    "sample_durations",
    "sample_jobs",
]

log = logging.getLogger(__name__)

#: Gavel's Philly-derived scale-factor mix: P(1, 2, 4, 8 GPUs) = (0.70, 0.10, 0.15, 0.05).
DEFAULT_SCALE_FACTOR_PROBS: dict[int, float] = {1: 0.70, 2: 0.10, 4: 0.15, 8: 0.05}

_SCALE_FACTOR_ORDER = (1, 2, 4, 8)


@dataclass(frozen=True, eq=False)
class Workload:
    """Jobs with arrivals and their source: the one workload container.

    Generators (:func:`sample_jobs`, :func:`hetsched.generate_workload`), the trace readers
    (:mod:`hetsched.inputs.traces`), the simulator and the ``from_workload`` constructors of
    :class:`~hetsched.formulations.spaces.packing.Packing` and
    :class:`~hetsched.formulations.spaces.placement_sensitivity.PlacementSensitivity` all
    take and give this class; :class:`hetsched.Trace` is another name for it (``Trace is
    Workload``).

    The constructor checks the shapes and values of every field. What only a simulation
    needs -- ``steps_remaining`` on every job and arrivals in order -- is checked by
    :meth:`for_simulation` (which :func:`hetsched.simulate` calls), so that a job sample
    without steps (``sample_jobs(..., with_steps=False)``) is a workload too.

    Attributes
    ----------
    jobs : JobSet
        Throughputs (consolidated, steps/s on ``scale_factor`` GPUs of each type), ids,
        scale factors, weights and, to be simulated, ``steps_remaining`` (the job's
        **total** steps, positive) and ``arrival_times`` (seconds, finite, non-negative,
        non-decreasing; absent: all 0).
    unconsolidated : ndarray of shape (n_jobs, n_gpu_types), optional
        Throughputs when a multi-GPU job's gang spans several servers (used when placement
        spreads a gang); ``None``: spreading costs nothing.
    job_types : ndarray of object, optional
        Job type (model) of each job, for reports.
    deadlines : ndarray of float, optional
        Absolute SLO deadline of each job in seconds (``inf``: none).
    source : str
        Where the jobs came from, in words (recorded in results): ``"workload"`` for
        :func:`sample_jobs`, ``"generated"`` for :func:`hetsched.generate_workload`, the
        file for a trace read from disk.
    meta : dict
        Free-form details of the source (generator parameters, file names, skipped rows).
    catalogue : ThroughputCatalogue, optional
        The throughput catalogue the jobs were sampled from (a sampled or generated
        workload keeps it): policies with ``packing="workload"`` or
        ``placement_sensitivity="workload"`` take the pair and unconsolidated tables from
        it in :func:`~hetsched.sim.simulate`.
    catalogue_rows : ndarray of int64, optional
        The catalogue row of each job (with ``catalogue``; :attr:`rows` is the same array).
    durations : ndarray of float, optional
        Sampled isolated run time of each job on its reference GPU type, seconds (sampled
        and generated workloads).

    Examples
    --------
    >>> from hetsched.inputs.throughputs import generate_catalogue
    >>> w = sample_jobs(generate_catalogue(n_job_types=4, seed=0), 3, seed=1)
    >>> w.n_jobs, w.rows is w.catalogue_rows, w.source
    (3, True, 'workload')
    >>> w.for_simulation() is w
    True
    """

    jobs: JobSet
    unconsolidated: np.ndarray | None = None
    job_types: np.ndarray | None = None
    deadlines: np.ndarray | None = None
    source: str = "jobs"
    meta: dict[str, Any] = field(default_factory=dict)
    catalogue: ThroughputCatalogue | None = None
    catalogue_rows: np.ndarray | None = None
    durations: np.ndarray | None = None

    def __post_init__(self) -> None:
        jobs = self.jobs
        if not isinstance(jobs, JobSet):
            raise ValidationError(f"`jobs` must be a hetsched.JobSet; got {type(jobs).__name__}.")
        n, m = jobs.n_jobs, jobs.n_types
        if self.unconsolidated is not None:
            U = check_matrix(self.unconsolidated, "unconsolidated", shape=(n, m),
                             shape_text=f"(n_jobs, n_gpu_types) = ({n}, {m})",
                             where=lambda i: f"job {show(jobs.ids[i[0]])}, GPU type {jobs.gpu_types[i[1]]!r}")
            U.setflags(write=False)
            object.__setattr__(self, "unconsolidated", U)
        if self.job_types is not None:
            object.__setattr__(self, "job_types", _object_column(self.job_types, n))
        if self.deadlines is not None:
            arr = self.arrival_times
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
        if self.durations is not None:
            object.__setattr__(self, "durations", check_matrix(
                self.durations, "durations", shape=(n,), shape_text=f"(n_jobs,) = ({n},)",
                where=lambda i: f"job {show(jobs.ids[i[0]])}"))

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
        """Arrival time of each job, seconds (0 where the jobs carry none)."""
        return self.jobs.field("arrival_times", 0.0) if self.n_jobs else np.zeros(0)

    @property
    def total_steps(self) -> np.ndarray:
        """Total steps of each job."""
        return self.jobs.steps_remaining if self.n_jobs else np.zeros(0)

    @property
    def rows(self) -> np.ndarray | None:
        """The catalogue row of each job: another name for :attr:`catalogue_rows` (read-only)."""
        return self.catalogue_rows

    def for_simulation(self) -> Workload:
        """This workload, once checked to be one a simulation can replay.

        Returns
        -------
        Workload
            ``self``.

        Raises
        ------
        ValidationError
            A job without ``steps_remaining``; an arrival that is not finite and
            non-negative, or that comes before the previous job's (jobs must be in arrival
            order).
        """
        jobs = self.jobs
        if not jobs.n_jobs:
            return self
        if not jobs.has("steps_remaining"):
            raise ValidationError(
                "`jobs` must carry `steps_remaining` (each job's total steps) to be simulated; "
                "pass JobSet(..., steps_remaining=...)."
            )
        arr = self.arrival_times
        bad = ~np.isfinite(arr) | (arr < 0)
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            raise ValidationError(
                f"`arrival_times` must be finite and non-negative; job {show(jobs.ids[j])} (row {j}) has {show(arr[j])}."
            )
        down = np.flatnonzero(arr[1:] < arr[:-1])
        if down.size:
            j = int(down[0]) + 1
            raise ValidationError(
                f"`arrival_times` must be non-decreasing (jobs in arrival order); job {show(jobs.ids[j])} (row {j}) "
                f"arrives at {show(arr[j])}, before job {show(jobs.ids[j - 1])} (row {j - 1}) at {show(arr[j - 1])}."
            )
        return self

    def to_frame(self) -> pd.DataFrame:
        """One row per job: ``jobs.to_frame()`` plus the columns of the fields present:
        ``job_type`` (first), ``U_<type>``, ``deadline_s``, ``catalogue_row`` and ``duration_s``.

        Every column that holds a time names its unit (``arrival_s``, ``deadline_s``,
        ``duration_s``; seconds).
        """
        df = self.jobs.to_frame()
        if self.job_types is not None:
            df.insert(0, "job_type", self.job_types)
        if self.unconsolidated is not None:
            for k, t in enumerate(self.gpu_types):
                df[f"U_{t}"] = self.unconsolidated[:, k]
        if self.deadlines is not None:
            df["deadline_s"] = self.deadlines
        if self.catalogue_rows is not None:
            df["catalogue_row"] = self.catalogue_rows
        if self.durations is not None:
            df["duration_s"] = self.durations
        return df

    def head(self, n: int) -> Workload:
        """The first ``n`` jobs (by arrival) as a new workload."""
        n = check_int(n, "n")
        idx = np.arange(min(max(n, 0), self.n_jobs))

        def take(a: np.ndarray | None) -> np.ndarray | None:
            return None if a is None else a[idx]

        return Workload(self.jobs.take(idx), unconsolidated=take(self.unconsolidated), job_types=take(self.job_types),
                        deadlines=take(self.deadlines), source=self.source, meta=dict(self.meta),
                        catalogue=self.catalogue, catalogue_rows=take(self.catalogue_rows),
                        durations=take(self.durations))

    def __repr__(self) -> str:
        arr = self.arrival_times
        span = float(arr[-1] - arr[0]) / 3600 if self.n_jobs else 0.0
        return (
            f"Workload(n_jobs={self.n_jobs}, gpu_types={list(self.gpu_types)}, arrivals over {span:.3g} h, "
            f"unconsolidated={self.unconsolidated is not None}, source={self.source!r})"
        )


def _object_column(values: Any, n: int) -> np.ndarray:
    """``values`` as a new object array of length ``n`` (one entry per job)."""
    if isinstance(values, np.ndarray) and values.dtype == object and values.shape == (n,):
        return values.copy()
    vals = list(values)
    if len(vals) != n:
        raise ValidationError(f"`job_types` must have length n_jobs = {n}; got {len(vals)}.")
    out = np.empty(n, dtype=object)
    out[:] = vals
    return out


def catalogue_rows_of(workload: Any, catalogue: ThroughputCatalogue | None = None
                      ) -> tuple[ThroughputCatalogue, np.ndarray, np.ndarray]:
    """The catalogue, catalogue rows and job ids of a workload sampled from a catalogue.

    What the ``from_workload`` constructors of per-job tables (packing, placement
    sensitivity) read.

    Parameters
    ----------
    workload : Workload
        Sampled from a catalogue (:func:`sample_jobs`, :func:`hetsched.generate_workload`):
        it carries ``catalogue_rows``.
    catalogue : ThroughputCatalogue, optional
        The catalogue the rows index (default: the workload's own).

    Returns
    -------
    (ThroughputCatalogue, ndarray of int64, ndarray)
        The catalogue, each job's row in it and the job ids.

    Raises
    ------
    ValidationError
        ``workload`` is not a :class:`Workload`, carries no catalogue rows, or has a row
        that ``catalogue`` lacks; ``catalogue`` is not a ThroughputCatalogue.
    """
    if not isinstance(workload, Workload):
        raise ValidationError(
            f"`workload` must be a hetsched.Workload (from sample_jobs, generate_workload or a trace reader); "
            f"got {type(workload).__name__}.")
    if workload.catalogue_rows is None:
        raise ValidationError(
            f"`workload` must be sampled from a throughput catalogue (carry `catalogue_rows`, as sample_jobs and "
            f"generate_workload give); this one (source {workload.source!r}) has none.")
    cat = workload.catalogue if catalogue is None else catalogue
    if not isinstance(cat, ThroughputCatalogue):
        raise ValidationError(f"`catalogue` must be a ThroughputCatalogue; got {type(cat).__name__}.")
    rows = workload.catalogue_rows
    if rows.size and rows.max() >= len(cat):
        raise ValidationError(
            f"`catalogue` must hold every row of `workload`; it has {len(cat)} rows, the workload names row "
            f"{int(rows.max())}.")
    return cat, rows, workload.jobs.ids


def make_job_ids(n: int, prefix: str | None = "j") -> np.ndarray:
    """Job ids ``prefix + "0" .. prefix + str(n-1)`` (object array), or ``0..n-1`` when ``prefix`` is None.

    Examples
    --------
    >>> make_job_ids(3).tolist(), make_job_ids(2, None).tolist()
    (['j0', 'j1', 'j2'], [0, 1])
    """
    if prefix is None:
        return np.arange(n, dtype=np.int64)
    if not isinstance(prefix, str):
        raise ValidationError(f"`id_prefix` must be a string or None; got {prefix!r}.")
    out = np.empty(n, dtype=object)
    out[:] = [f"{prefix}{i}" for i in range(n)]
    return out


def sample_durations(
    n: int,
    rng: int | np.random.Generator,
    *,
    long_job_prob: float = 0.2,
    short_log10_minutes: tuple[float, float] = (1.5, 3.0),
    long_log10_minutes: tuple[float, float] = (3.0, 4.0),
) -> np.ndarray:
    r"""Job durations in seconds: :math:`60 \cdot 10^{U(1.5, 3)}` w.p. 0.8, else :math:`60 \cdot 10^{U(3, 4)}`.

    Gavel's Philly-derived distribution (``long_job_prob`` = 0.2).

    Parameters
    ----------
    n : int
        Number of durations.
    rng : int or numpy.random.Generator
        Seed or generator.
    long_job_prob : float, default 0.2
        Probability of drawing from the long range.
    short_log10_minutes, long_log10_minutes : (float, float)
        Ranges of :math:`\log_{10}` of the duration in minutes.

    Examples
    --------
    >>> d = sample_durations(1000, 0)
    >>> bool(d.min() >= 60 * 10**1.5 and d.max() <= 60 * 10**4)
    True
    """
    n = check_int(n, "n", low=0)
    p_long = check_probability(long_job_prob, "long_job_prob")
    s_lo, s_hi = check_interval(short_log10_minutes, "short_log10_minutes")
    l_lo, l_hi = check_interval(long_log10_minutes, "long_log10_minutes")
    gen = as_rng(rng, "rng")
    is_long = gen.random(n) < p_long
    e = gen.random(n)
    log10_min = np.where(is_long, l_lo + (l_hi - l_lo) * e, s_lo + (s_hi - s_lo) * e)
    return 60.0 * np.power(10.0, log10_min)


def poisson_arrivals(n: int, rate_per_hour: float, seed: int | np.random.Generator = 0, *, start: float = 0.0) -> np.ndarray:
    """Arrival times (seconds) of a Poisson process with ``rate_per_hour`` jobs per hour.

    Inter-arrival gaps are i.i.d. exponential with mean ``3600 / rate_per_hour`` s (as in
    Gavel's generated traces); the first job arrives one gap after ``start``.

    Parameters
    ----------
    n : int
        Number of arrivals.
    rate_per_hour : float
        Positive arrival rate, jobs per hour.
    seed : int or numpy.random.Generator, default 0
        Seed or generator.
    start : float, default 0.0
        Time origin, seconds.

    Returns
    -------
    numpy.ndarray of float, shape (n,)
        Non-decreasing arrival times.

    Examples
    --------
    >>> t = poisson_arrivals(4, rate_per_hour=60.0, seed=0)
    >>> t.shape, bool((t[1:] >= t[:-1]).all()), bool(t[0] > 0)
    ((4,), True, True)
    """
    n = check_int(n, "n", low=0)
    check_positive(rate_per_hour, "rate_per_hour")
    check_real(start, "start", unit="seconds")
    gen = as_rng(seed, "seed")
    gaps = gen.exponential(3600.0 / float(rate_per_hour), size=n)
    return float(start) + np.cumsum(gaps)


def _scale_factor_mix(
    probs: Sequence[float] | Mapping[int, float], available: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(probs, Mapping):
        items = list(probs.items())
    else:
        if isinstance(probs, (str, bytes)):
            raise ValidationError(f"`scale_factor_probs` must be a sequence or mapping of probabilities; got {probs!r}.")
        seq = list(probs)
        if len(seq) != len(_SCALE_FACTOR_ORDER):
            raise ValidationError(
                f"`scale_factor_probs` as a sequence must give probabilities for scale factors "
                f"{_SCALE_FACTOR_ORDER} (length 4); got length {len(seq)}. Pass a mapping "
                f"{{scale_factor: probability}} for other scale factors."
            )
        items = list(zip(_SCALE_FACTOR_ORDER, seq))
    sfs, ps = [], []
    for s, p in items:
        sfs.append(check_int(s, "scale_factor_probs", low=1, rule="a mapping with positive integer keys"))
        ps.append(check_nonneg(p, f"scale_factor_probs[{int(s)}]"))
    total = sum(ps)
    if not math.isclose(total, 1.0, rel_tol=0, abs_tol=1e-6):
        raise ValidationError(f"`scale_factor_probs` must sum to 1; got {total!r} for {dict(zip(sfs, ps))}.")
    avail = set(int(a) for a in available)
    keep = [(s, p) for s, p in zip(sfs, ps) if s in avail and p > 0]
    dropped = [s for s, p in zip(sfs, ps) if s not in avail and p > 0]
    if not keep:
        raise ValidationError(
            f"`scale_factor_probs` gives no positive probability to a scale factor the catalogue "
            f"has ({sorted(avail)}); got {dict(zip(sfs, ps))}."
        )
    if dropped:
        log.info("scale factors %s are not in the catalogue; renormalizing the mix over %s", dropped, [s for s, _ in keep])
    s_arr = np.array([s for s, _ in keep], dtype=np.int64)
    p_arr = np.array([p for _, p in keep])
    return s_arr, p_arr / p_arr.sum()


def sample_jobs(
    catalogue: ThroughputCatalogue,
    n_jobs: int,
    *,
    seed: int | np.random.Generator,
    scale_factor_probs: Sequence[float] | Mapping[int, float] = (0.70, 0.10, 0.15, 0.05),
    with_steps: bool = True,
    reference_gpu_type: str | None = None,
    consolidated: bool = True,
    arrival_rate_per_hour: float | None = None,
    long_job_prob: float = 0.2,
    id_prefix: str | None = "j",
) -> Workload:
    """Sample a job mix from a throughput catalogue (Gavel's Philly-derived generator).

    For each job, independently:

    1. its scale factor ``s`` is drawn from ``scale_factor_probs`` restricted to the scale
       factors the catalogue has rows for (renormalized);
    2. its job type is drawn uniformly among the job types with a row at scale factor ``s``
       that can run on at least one GPU type of the chosen table;
    3. its duration ``d`` (seconds) is :math:`60 \\cdot 10^{U(1.5,3)}` with probability
       0.8, else :math:`60 \\cdot 10^{U(3,4)}` (see :func:`sample_durations`);
    4. ``steps_remaining = ceil(d * T_ref)``, where ``T_ref`` is the row's consolidated
       throughput on ``reference_gpu_type``: ``d`` is the job's run time alone on
       ``s`` GPUs of that type (Gavel uses the V100). When the row's throughput on the
       reference type is 0, its largest throughput over all types is used instead.

    Parameters
    ----------
    catalogue : ThroughputCatalogue
        Source of job types and throughputs.
    n_jobs : int
        Number of jobs (vectorized: a million jobs take well under a second with integer
        ids).
    seed : int or numpy.random.Generator
        Source of randomness (keyword-only, required).
    scale_factor_probs : sequence of 4 floats or mapping int -> float
        Probabilities of scale factors (1, 2, 4, 8) (a sequence) or of any scale factors
        (a mapping); must sum to 1. Default: Gavel's Philly-derived (0.70, 0.10, 0.15, 0.05).
    with_steps : bool, default True
        Fill ``steps_remaining``.
    reference_gpu_type : str, optional
        Type whose throughput turns durations into steps; default: the catalogue's
        fastest type (largest median throughput over rows), e.g. ``"v100"``.
    consolidated : bool, default True
        Use the consolidated table for the jobs' throughputs (False: the unconsolidated
        one, which the catalogue must have).
    arrival_rate_per_hour : float, optional
        When given, ``arrival_times`` from :func:`poisson_arrivals` at this rate.
    long_job_prob : float, default 0.2
        Probability of a long job (Philly: 0.2).
    id_prefix : str or None, default "j"
        Ids are ``"j0" .. "j{n-1}"``; None gives integer ids ``0 .. n-1`` (faster at
        millions of jobs, where hashing string ids dominates).

    Returns
    -------
    Workload
        ``jobs`` (a JobSet), ``job_types``, the ``catalogue`` with each job's
        ``catalogue_rows`` (also :attr:`Workload.rows`) and ``durations``; ``source``
        ``"workload"``, no unconsolidated throughputs.

    Raises
    ------
    ValidationError
        Bad arguments; no runnable row at any scale factor with positive probability.

    Examples
    --------
    >>> from hetsched.inputs.throughputs import generate_catalogue
    >>> cat = generate_catalogue(n_job_types=4, seed=0)
    >>> w = sample_jobs(cat, 5, seed=1)
    >>> w.jobs.ids.tolist()
    ['j0', 'j1', 'j2', 'j3', 'j4']
    >>> w.jobs.gpu_types, bool((w.jobs.steps_remaining > 0).all())
    (('v100', 'p100', 'k80'), True)
    """
    if not isinstance(catalogue, ThroughputCatalogue):
        raise ValidationError(f"`catalogue` must be a ThroughputCatalogue; got {type(catalogue).__name__}.")
    n = check_int(n_jobs, "n_jobs", low=0)
    check_bool(with_steps, "with_steps")
    check_bool(consolidated, "consolidated")
    if consolidated:
        table = catalogue.throughputs
    else:
        if catalogue.unconsolidated is None:
            raise ValidationError("`consolidated=False` needs a catalogue with an unconsolidated table; this one has none.")
        table = catalogue.unconsolidated
    gen = as_rng(seed, "seed")
    sf_values, sf_p = _scale_factor_mix(scale_factor_probs, catalogue.available_scale_factors)

    runnable = (table > 0).any(axis=1)
    pools = [np.flatnonzero((catalogue.scale_factors == s) & runnable) for s in sf_values]
    empty = [int(s) for s, pool in zip(sf_values, pools) if pool.size == 0]
    if empty:
        keep = np.array([pool.size > 0 for pool in pools])
        if not keep.any():
            raise ValidationError(
                "`catalogue` has no row that can run on any of its GPU types at the scale factors "
                f"{sf_values.tolist()} that `scale_factor_probs` allows."
            )
        log.info("no runnable rows at scale factors %s; renormalizing the mix without them", empty)
        sf_values, sf_p = sf_values[keep], sf_p[keep] / sf_p[keep].sum()
        pools = [p for p, k in zip(pools, keep) if k]
    counts = np.array([p.size for p in pools], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])
    pool_rows = np.concatenate(pools)

    # Draw order (part of the reproducibility contract): scale factor, type, duration, arrivals.
    which = gen.choice(len(sf_values), size=n, p=sf_p) if len(sf_values) > 1 else np.zeros(n, dtype=np.int64)
    u = gen.random(n)
    pick = offsets[which] + np.minimum((u * counts[which]).astype(np.int64), counts[which] - 1)
    rows = pool_rows[pick]
    durations = sample_durations(n, gen, long_job_prob=long_job_prob)

    fields: dict[str, np.ndarray] = {}
    if with_steps:
        ref_col = reference_column(catalogue, reference_gpu_type)
        ref = catalogue.throughputs[:, ref_col]
        ref = np.where(ref > 0, ref, catalogue.throughputs.max(axis=1))
        ref = np.where(ref > 0, ref, table.max(axis=1))  # runnable only unconsolidated
        fields["steps_remaining"] = np.ceil(durations * ref[rows])
    if arrival_rate_per_hour is not None:
        fields["arrival_times"] = poisson_arrivals(n, arrival_rate_per_hour, gen)
    jobs = JobSet(
        np.take(table, rows, axis=0),
        gpu_types=catalogue.gpu_types,
        ids=make_job_ids(n, id_prefix),
        scale_factors=catalogue.scale_factors[rows],
        **fields,
    )
    log.debug("sampled %d jobs from %r", n, catalogue)
    return Workload(jobs, job_types=catalogue.job_types[rows], source="workload", catalogue=catalogue,
                    catalogue_rows=rows, durations=durations)


def random_jobs(
    n_jobs: int,
    gpu_types: int | Sequence[str],
    *,
    seed: int | np.random.Generator,
    zero_prob: float = 0.0,
    sigma: float = 1.0,
    with_steps: bool = True,
    id_prefix: str | None = "j",
) -> JobSet:
    """Jobs with i.i.d. lognormal throughputs, for benchmarks and property tests.

    ``T[j, k] = exp(N(0, sigma^2))`` independently; then each entry is set to 0 with
    probability ``zero_prob`` (the job cannot run on that type), except that a job whose
    entries would all be 0 keeps its largest one. Scale factors are 1. With
    ``with_steps``, ``steps_remaining = ceil(d * max_k T[j, k])`` with ``d`` from
    :func:`sample_durations`.

    Parameters
    ----------
    n_jobs : int
        Number of jobs.
    gpu_types : int or sequence of str
        GPU type names, or their number (names ``"gpu0"``, ``"gpu1"``, ...).
    seed : int or numpy.random.Generator
        Source of randomness (keyword-only, required).
    zero_prob : float, default 0.0
        Probability that an entry is 0.
    sigma : float, default 1.0
        Log-scale standard deviation.
    with_steps : bool, default True
        Fill ``steps_remaining``.
    id_prefix : str or None, default "j"
        Id prefix (None: integer ids).

    Examples
    --------
    >>> jobs = random_jobs(4, ["a", "b"], seed=0, zero_prob=0.5)
    >>> jobs.throughputs.shape, bool(((jobs.throughputs > 0).sum(axis=1) >= 1).all())
    ((4, 2), True)
    """
    n = check_int(n_jobs, "n_jobs", low=0)
    if isinstance(gpu_types, (int, np.integer)) and not isinstance(gpu_types, bool):
        if gpu_types < 1:
            raise ValidationError(f"`gpu_types` as a count must be a positive integer; got {gpu_types!r}.")
        types: tuple[str, ...] = tuple(f"gpu{k}" for k in range(int(gpu_types)))
    else:
        types = check_names(gpu_types, "gpu_types", what="GPU type names")
    p0 = check_probability(zero_prob, "zero_prob")
    check_nonneg(sigma, "sigma")
    check_bool(with_steps, "with_steps")
    gen = as_rng(seed, "seed")
    m = len(types)
    T = np.exp(gen.normal(0.0, float(sigma), size=(n, m)))
    if p0 > 0:
        zero = gen.random((n, m)) < p0
        all_zero = zero.all(axis=1)
        if all_zero.any():
            zero[np.flatnonzero(all_zero), T[all_zero].argmax(axis=1)] = False
        T[zero] = 0.0
    fields: dict[str, np.ndarray] = {}
    if with_steps:
        fields["steps_remaining"] = np.ceil(sample_durations(n, gen) * T.max(axis=1, initial=0.0))
    return JobSet(T, gpu_types=types, ids=make_job_ids(n, id_prefix), **fields)
