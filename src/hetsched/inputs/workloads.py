"""Job mixes: sample JobSets from a throughput catalogue, random benchmark jobs, arrivals.

All randomness goes through an explicit ``seed`` (an int or a ``numpy.random.Generator``);
the same seed gives the same jobs. Distributions and their sources are in ``docs/data.md``:
the scale-factor mix and the duration distribution are those Gavel (Narayanan et al.,
OSDI'20) derived from Microsoft's Philly trace (Jeon et al., ATC'19).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ..validation import (
    as_rng,
    check_bool,
    check_int,
    check_interval,
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
    """Jobs sampled from a :class:`~hetsched.inputs.throughputs.ThroughputCatalogue`.

    Attributes
    ----------
    jobs : JobSet
        The jobs (throughputs, scale factors, and ``steps_remaining`` / ``arrival_times``
        when asked for).
    job_types : numpy.ndarray of object, shape (n_jobs,)
        Job type of each job.
    rows : numpy.ndarray of int64, shape (n_jobs,)
        Catalogue row of each job (for pair lookups: ``catalogue.pairs.positions``).
    durations : numpy.ndarray of float, shape (n_jobs,)
        Sampled isolated run time of each job on its reference GPU type, seconds.
    """

    jobs: JobSet
    job_types: np.ndarray
    rows: np.ndarray
    durations: np.ndarray

    def __len__(self) -> int:
        return self.jobs.n_jobs

    def to_frame(self) -> pd.DataFrame:
        """``jobs.to_frame()`` with ``job_type``, ``catalogue_row`` and ``duration_s`` columns."""
        df = self.jobs.to_frame()
        df.insert(0, "job_type", self.job_types)
        df["catalogue_row"] = self.rows
        df["duration_s"] = self.durations
        return df


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
        ``jobs`` (a JobSet), ``job_types``, catalogue ``rows`` and ``durations``.

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
    return Workload(jobs=jobs, job_types=catalogue.job_types[rows], rows=rows, durations=durations)


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
