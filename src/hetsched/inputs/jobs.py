"""JobSet: the columnar description of the jobs a policy divides the cluster among."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError, show
from ..validation import (
    check_integer_array,
    check_matrix,
    check_names,
    check_vector,
    fail_at,
)

__all__ = ["OPTIONAL_FIELDS", "RESOURCE_FIELDS", "STEPS_MAX", "THROUGHPUT_RANGE", "TIME_FIELD_COLUMNS", "TIME_MAX",
           "WEIGHT_RANGE", "JobSet", "usable_mask"]

#: Optional per-job numeric fields, with the rule each must satisfy.
OPTIONAL_FIELDS: dict[str, str] = {
    "steps_remaining": "positive",
    "time_since_start": "non-negative",
    "slos": "positive",
    "arrival_times": "finite",
    "isolated_time_elapsed": "non-negative",
    "cpus_per_gpu": "non-negative",
    "mem_per_gpu": "non-negative",
}

#: Optional fields that hold seconds -> their column in :meth:`JobSet.to_frame` (named with the unit).
TIME_FIELD_COLUMNS: dict[str, str] = {
    "time_since_start": "time_since_start_s",
    "slos": "slo_s",
    "arrival_times": "arrival_s",
    "isolated_time_elapsed": "isolated_time_elapsed_s",
}

#: Per-GPU host-resource demands (job field) and the Cluster capacity each is checked against.
RESOURCE_FIELDS: dict[str, str] = {"cpus_per_gpu": "cpus", "mem_per_gpu": "memory"}


def usable_mask(T: np.ndarray, scale_factors: np.ndarray, capacities: np.ndarray) -> np.ndarray:
    """The usable-GPU rule, the one place it is written: job j can use type k iff its
    throughput there is positive and its gang fits the type's count.

    Parameters
    ----------
    T : numpy.ndarray
        (n, m) throughputs (0: cannot run there).
    scale_factors : numpy.ndarray
        (n,) GPUs per job (its gang size).
    capacities : numpy.ndarray
        (m,) GPUs of each type (the whole cluster's, or the free ones).

    Returns
    -------
    numpy.ndarray
        (n, m) bool: ``T > 0`` and ``capacities >= scale_factors``.

    Examples
    --------
    >>> usable_mask(np.array([[1.0, 0.0], [2.0, 3.0]]), np.array([1, 4]), np.array([2, 8])).tolist()
    [[True, False], [False, True]]
    """
    return (T > 0) & (capacities[None, :] >= scale_factors[:, None])

# Magnitudes the policies solve reliably. Measured with the default solver (HiGHS, solver="auto")
# on 3-job x 2-type instances, every registered policy, values 10**e (e = -16 .. 30): all
# throughputs scaled, one entry or one job's row set, one job's or every job's field set.
# Outside these ranges HiGHS returned model status 'Unknown' (SolverError) or, worse,
# 'optimal' with a wrong X; inside them (with the margin noted) every case solved.
#: Positive throughputs (steps/s) must lie in this closed range (0 means "cannot run there").
#: max_sum_throughput fails from 1e19 and returns a wrong optimum (objective off by 26-100 %)
#: when every throughput is <= 1e-9; margin >= 100 on each side.
THROUGHPUT_RANGE: tuple[float, float] = (1e-6, 1e9)
#: Largest ``steps_remaining``. Every policy solved up to 1e30 when all jobs were scaled alike;
#: only the spread between jobs matters beyond that (min_makespan refuses spreads above
#: :data:`~hetsched.formulations.min_makespan.RATE_SPREAD_MAX`); 1e15 is far above any real job.
STEPS_MAX: float = 1e15
#: Largest ``slos``, ``time_since_start`` and ``isolated_time_elapsed`` (seconds, about 31,700
#: years). finish_time_fairness fails from time_since_start / isolated_time_elapsed = 1e18 and
#: max_sum_throughput (before its SLO rows were rescaled) from slos = 1e18; both solved at 1e15.
TIME_MAX: float = 1e12
#: Positive ``weights`` must lie in this closed range: the max-min policies failed when one
#: weight was 1e15 times another and solved at 1e12.
WEIGHT_RANGE: tuple[float, float] = (1e-6, 1e6)
_FIELD_MAX: dict[str, float] = {"steps_remaining": STEPS_MAX, "slos": TIME_MAX, "time_since_start": TIME_MAX,
                                "isolated_time_elapsed": TIME_MAX}


class JobSet:
    """Jobs as columns of arrays, one row per job.

    Parameters
    ----------
    throughputs : array-like of shape (n_jobs, n_gpu_types) or pandas.DataFrame
        ``T[j, k]``: steps/s of job ``j`` when it runs on ``scale_factors[j]`` GPUs of type
        ``gpu_types[k]``; 0 means the job cannot run on that type. A DataFrame supplies
        ``gpu_types`` from its columns and ``ids`` from its index (unless a RangeIndex).
    gpu_types : sequence of str, optional
        Column labels of ``throughputs``; required for a plain array. May be a subset or a
        reordering of the cluster's types; types the cluster lacks count as 0 GPUs.
    ids : sequence, optional
        Unique job ids (default ``0 .. n_jobs-1``).
    scale_factors : array-like of int, optional
        GPUs a job uses at once (its gang size); positive integers, default 1.
    weights : array-like of float, optional
        Priority weights, positive, default 1.
    steps_remaining, time_since_start, slos, arrival_times, isolated_time_elapsed : array-like, optional
        Per-job fields some policies need: steps left to run (positive), seconds since the
        job started (non-negative), SLO in seconds from now (positive), arrival time
        (finite), and the isolated-equivalent time the job has already used (Themis'
        finish-time fairness; non-negative).
    entities : sequence, optional
        Owner (user, team) of each job, for hierarchical policies.
    cpus_per_gpu, mem_per_gpu : array-like, optional
        Host CPU cores and host memory (GiB) the job needs per GPU it uses (non-negative);
        a gang of ``s`` GPUs needs ``s`` times as much. LP policies then respect the
        cluster's ``cpus`` / ``memory`` capacities (see :class:`~hetsched.Cluster`).

    Examples
    --------
    >>> jobs = JobSet([[3.0, 1.0], [2.0, 2.0]], gpu_types=["v100", "k80"], ids=["a", "b"])
    >>> len(jobs), jobs.gpu_types
    (2, ('v100', 'k80'))
    """

    def __init__(
        self,
        throughputs: Any,
        gpu_types: Sequence[str] | None = None,
        ids: Sequence[Any] | None = None,
        scale_factors: Any = None,
        weights: Any = None,
        steps_remaining: Any = None,
        time_since_start: Any = None,
        slos: Any = None,
        arrival_times: Any = None,
        isolated_time_elapsed: Any = None,
        entities: Sequence[Any] | None = None,
        cpus_per_gpu: Any = None,
        mem_per_gpu: Any = None,
    ) -> None:
        T, gpu_types, ids = _throughput_matrix(throughputs, gpu_types, ids)
        n = T.shape[0]
        self._T = T
        self._T.setflags(write=False)
        self.gpu_types: tuple[str, ...] = gpu_types
        self._ids = _job_ids(ids, n)
        _check_range(T, "throughputs", THROUGHPUT_RANGE, "0 (cannot run) or in", ids=self._ids, types=gpu_types)
        self._scale = _scale_factors(scale_factors, n, self._ids)
        self._weights = _weights(weights, n, self._ids)
        given = {
            "steps_remaining": steps_remaining,
            "time_since_start": time_since_start,
            "slos": slos,
            "arrival_times": arrival_times,
            "isolated_time_elapsed": isolated_time_elapsed,
            "cpus_per_gpu": cpus_per_gpu,
            "mem_per_gpu": mem_per_gpu,
        }
        self._fields: dict[str, np.ndarray] = _optional_fields(given, n, self._ids)
        self._multiplicity = np.ones(n, dtype=np.int64)
        self._multiplicity.setflags(write=False)
        self._entities: np.ndarray | None = _entities(entities, n, self._ids)

    # --------------------------------------------------------------- accessors
    @property
    def throughputs(self) -> np.ndarray:
        """``T``, shape (n_jobs, n_gpu_types), read-only."""
        return self._T

    @property
    def ids(self) -> np.ndarray:
        """Job ids, read-only array."""
        return self._ids

    @property
    def scale_factors(self) -> np.ndarray:
        """GPUs per job (gang size), int64."""
        return self._scale

    @property
    def weights(self) -> np.ndarray:
        """Priority weights."""
        return self._weights

    @property
    def multiplicity(self) -> np.ndarray:
        """How many identical jobs each row stands for (1 unless built by aggregation)."""
        return self._multiplicity

    @property
    def n_total(self) -> int:
        """Number of jobs represented, counting multiplicities."""
        return int(self._multiplicity.sum())

    @property
    def n_jobs(self) -> int:
        """Number of rows."""
        return int(self._T.shape[0])

    @property
    def n_types(self) -> int:
        """Number of GPU types (columns)."""
        return len(self.gpu_types)

    def __len__(self) -> int:
        return self.n_jobs

    def has(self, field: str) -> bool:
        """Whether optional field ``field`` (or ``"entities"``) was given."""
        if field == "entities":
            return self._entities is not None
        return field in self._fields

    def field(self, field: str, default: float | None = None) -> np.ndarray:
        """An optional field's array; ``default`` fills it when absent.

        Raises
        ------
        KeyError
            If the field is absent and no default is given.
        """
        if field in self._fields:
            return self._fields[field]
        if field not in OPTIONAL_FIELDS:
            raise KeyError(f"unknown job field {field!r}; known: {sorted(OPTIONAL_FIELDS)}")
        if default is None:
            raise KeyError(field)
        return np.full(self.n_jobs, float(default))

    @property
    def entities(self) -> np.ndarray | None:
        """Entity (user, team) owning each job, for hierarchical policies, or ``None``."""
        return self._entities

    @property
    def steps_remaining(self) -> np.ndarray | None:
        """Steps left per job, or ``None``."""
        return self._fields.get("steps_remaining")

    @property
    def time_since_start(self) -> np.ndarray | None:
        """Seconds since each job started, or ``None``."""
        return self._fields.get("time_since_start")

    @property
    def slos(self) -> np.ndarray | None:
        """SLO (seconds from now) per job, or ``None``."""
        return self._fields.get("slos")

    @property
    def arrival_times(self) -> np.ndarray | None:
        """Arrival time per job, or ``None``."""
        return self._fields.get("arrival_times")

    @property
    def isolated_time_elapsed(self) -> np.ndarray | None:
        """Isolated-equivalent seconds already used per job, or ``None``."""
        return self._fields.get("isolated_time_elapsed")

    # -------------------------------------------------------------- transforms
    def take(self, index: Any) -> JobSet:
        """A new JobSet with the rows selected by ``index`` (integer array or boolean mask)."""
        rule = f"integer positions or a boolean mask of the {self.n_jobs} jobs"
        if isinstance(index, (str, bytes, Mapping)):
            raise ValidationError(f"`index` must be {rule}; got {type(index).__name__}.")
        idx = np.asarray(index)
        if idx.dtype == bool:
            if idx.shape != (self.n_jobs,):
                raise ValidationError(f"`index` as a boolean mask must have shape ({self.n_jobs},); got {idx.shape}.")
            idx = np.flatnonzero(idx)
        elif idx.size == 0:
            idx = idx.astype(np.int64).ravel()
        elif idx.dtype.kind not in "iu":
            raise ValidationError(f"`index` must be {rule}; got {type(index).__name__} of dtype {idx.dtype}.")
        elif int(idx.max()) >= self.n_jobs or int(idx.min()) < -self.n_jobs:
            bad = int(idx.max()) if int(idx.max()) >= self.n_jobs else int(idx.min())
            raise ValidationError(f"`index` positions must be in [0, {self.n_jobs}); got {bad}.")
        out = JobSet.__new__(JobSet)
        out._T = self._T[idx]
        out.gpu_types = self.gpu_types
        out._ids = self._ids[idx]
        out._scale = self._scale[idx]
        out._weights = self._weights[idx]
        out._fields = {k: v[idx] for k, v in self._fields.items()}
        out._multiplicity = self._multiplicity[idx]
        out._entities = None if self._entities is None else self._entities[idx]
        return out

    def with_columns(self, gpu_types: Sequence[str]) -> JobSet:
        """A JobSet whose columns follow ``gpu_types`` (types not present get throughput 0)."""
        gpu_types = check_names(gpu_types, "gpu_types", what="GPU type names", allow_empty=True)
        pos = {t: i for i, t in enumerate(self.gpu_types)}
        T = np.zeros((self.n_jobs, len(gpu_types)))
        for k, t in enumerate(gpu_types):
            if t in pos:
                T[:, k] = self._T[:, pos[t]]
        out = self.take(np.arange(self.n_jobs))
        out._T = T
        out.gpu_types = tuple(gpu_types)
        return out

    def _with_multiplicity(self, multiplicity: np.ndarray) -> JobSet:
        # a shallow copy: a JobSet never changes its arrays in place, so the copy shares them
        # (copying them row by row cost 0.3 s at 10^6 jobs)
        out = copy.copy(self)
        out._multiplicity = np.asarray(multiplicity, dtype=np.int64)
        return out

    def to_frame(self) -> pd.DataFrame:
        """All columns as a DataFrame indexed by job id: throughputs prefixed ``T_``,
        ``scale_factor``, ``weight``, the optional fields present, ``entity``. Fields that
        hold seconds are named with their unit (:data:`TIME_FIELD_COLUMNS`: ``arrival_times``
        is column ``arrival_s``, ``slos`` is ``slo_s``, ...).

        Examples
        --------
        >>> JobSet([[2.0]], gpu_types=["v100"], arrival_times=[30.0]).to_frame().columns.tolist()
        ['T_v100', 'scale_factor', 'weight', 'arrival_s']
        """
        data: dict[str, Any] = {f"T_{t}": self._T[:, k] for k, t in enumerate(self.gpu_types)}
        data["scale_factor"] = self._scale
        data["weight"] = self._weights
        data.update({TIME_FIELD_COLUMNS.get(k, k): v for k, v in self._fields.items()})
        if self._entities is not None:
            data["entity"] = self._entities
        return pd.DataFrame(data, index=pd.Index(self._ids, name="job_id"))

    def __repr__(self) -> str:
        fields = ", ".join(sorted(self._fields))
        return f"JobSet(n_jobs={self.n_jobs}, gpu_types={list(self.gpu_types)}, fields=[{fields}])"


def _check_range(values: np.ndarray, name: str, bounds: tuple[float, float], rule: str,
                 ids: np.ndarray, types: tuple[str, ...] = ()) -> None:
    """Positive entries of ``values`` must lie in ``bounds`` (the range the solvers handle reliably)."""
    lo, hi = bounds
    bad = (values > 0) & ((values < lo) | (values > hi))
    if not bad.any():
        return
    where = tuple(np.argwhere(bad)[0])
    at = f"job {show(ids[where[0]])}" + (f" on {types[where[1]]!r}" if values.ndim == 2 else "")
    raise fail_at(name, f"{rule} [{lo:g}, {hi:g}] (the range the solvers handle reliably; rescale the units "
                        "otherwise)", at, values[where], verb="has")


# ------------------------------------------------------------ construction phases
def _throughput_matrix(throughputs: Any, gpu_types: Sequence[str] | None,
                       ids: Sequence[Any] | None) -> tuple[np.ndarray, tuple[str, ...], Sequence[Any] | None]:
    """The checked throughput matrix (float, shape (n, m)), the GPU types and the ids.

    A DataFrame supplies ``gpu_types`` from its columns (which must equal ``gpu_types`` when
    both are given) and ``ids`` from its index unless a RangeIndex; a plain array needs
    ``gpu_types``. The returned matrix is not yet made read-only nor range-checked.
    """
    if isinstance(throughputs, pd.DataFrame):
        if gpu_types is None:
            gpu_types = [str(c) for c in throughputs.columns]
        elif list(gpu_types) != [str(c) for c in throughputs.columns]:
            raise ValidationError(
                f"`gpu_types` {list(gpu_types)} must equal the DataFrame's columns "
                f"{list(throughputs.columns)} when `throughputs` is a DataFrame."
            )
        if ids is None and not isinstance(throughputs.index, pd.RangeIndex):
            ids = throughputs.index.tolist()
        throughputs = throughputs.to_numpy()
    if gpu_types is None:
        raise ValidationError("`gpu_types` is required when `throughputs` is not a DataFrame.")
    types = check_names(gpu_types, "gpu_types", allow_empty=True)
    m = len(types)
    T = check_matrix(throughputs, "throughputs", shape=(-1, m), shape_text=f"(n_jobs, n_gpu_types) = (n, {m})",
                     where=lambda i: f"row {i[0]}, column {i[1]}")
    return T, types, ids


def _job_ids(ids: Sequence[Any] | None, n: int) -> np.ndarray:
    """Job ids as a read-only array: ``0 .. n-1`` by default, else ``ids`` (length ``n``, unique)."""
    if ids is None:
        out = np.arange(n)
    else:
        out = np.asarray(list(ids) if not isinstance(ids, np.ndarray) else ids)
        if out.ndim != 1 or out.shape[0] != n:
            raise ValidationError(f"`ids` must have length n_jobs = {n}; got shape {out.shape}.")
        index = pd.Index(out)
        if not index.is_unique:
            dup = index[index.duplicated()].unique().tolist()[:5]
            raise ValidationError(f"`ids` must be unique; duplicated ids: {dup}.")
    out.setflags(write=False)
    return out


def _scale_factors(scale_factors: Any, n: int, ids: np.ndarray) -> np.ndarray:
    """Gang sizes as a read-only int64 array: 1 by default, else positive integers (length ``n``)."""
    if scale_factors is None:
        s = np.ones(n, dtype=np.int64)
    else:
        s = check_integer_array(check_vector(scale_factors, "scale_factors", n), "scale_factors",
                                lambda j: f"job {show(ids[j])}")
    s.setflags(write=False)
    return s


def _weights(weights: Any, n: int, ids: np.ndarray) -> np.ndarray:
    """Priority weights as a read-only array: 1 by default, else positive and in :data:`WEIGHT_RANGE`."""
    if weights is None:
        w = np.ones(n)
    else:
        w = check_vector(weights, "weights", n)
        _check_rule(w, "weights", "positive", ids)
        _check_range(w, "weights", WEIGHT_RANGE, "in", ids=ids)
    w.setflags(write=False)
    return w


def _optional_fields(given: dict[str, Any], n: int, ids: np.ndarray) -> dict[str, np.ndarray]:
    """The optional per-job fields given (not None), in ``given``'s order, as read-only arrays
    of length ``n``, each checked against its :data:`OPTIONAL_FIELDS` rule and its
    ``_FIELD_MAX`` bound."""
    fields: dict[str, np.ndarray] = {}
    for name, value in given.items():
        if value is None:
            continue
        arr = check_vector(value, name, n)
        _check_rule(arr, name, OPTIONAL_FIELDS[name], ids)
        if name in _FIELD_MAX and (arr > _FIELD_MAX[name]).any():
            j = int(np.flatnonzero(arr > _FIELD_MAX[name])[0])
            raise fail_at(name, f"at most {_FIELD_MAX[name]:g} (the range the solvers handle reliably)",
                          f"job {show(ids[j])}", arr[j], verb="has")
        arr.setflags(write=False)
        fields[name] = arr
    return fields


def _entities(entities: Sequence[Any] | None, n: int, ids: np.ndarray) -> np.ndarray | None:
    """Each job's entity as a read-only object array of shape (n,), or None when not given."""
    if entities is None:
        return None
    ent = np.asarray(list(entities), dtype=object)
    if ent.shape != (n,):
        raise ValidationError(f"`entities` must have shape (n_jobs,) = ({n},); got {ent.shape}.")
    missing = pd.isna(ent)
    if missing.any():
        j = int(np.flatnonzero(missing)[0])
        raise ValidationError(f"`entities` must name an entity for every job; job {show(ids[j])} has none.")
    ent.setflags(write=False)
    return ent


def _check_rule(values: np.ndarray, name: str, rule: str, ids: np.ndarray) -> None:
    """Every entry of ``values`` must be finite and, by ``rule``, "positive" or "non-negative"
    (any other rule: finite only); the first job that is not fails."""
    if rule == "positive":
        bad = ~np.isfinite(values) | (values <= 0)
    elif rule == "non-negative":
        bad = ~np.isfinite(values) | (values < 0)
    else:
        bad = ~np.isfinite(values)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise fail_at(name, rule, f"job {show(ids[j])}", values[j], verb="has")
