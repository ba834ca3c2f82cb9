r"""How a job's throughput depends on the host CPU cores and memory it gets (Synergy's
resource sensitivity).

Mohan et al., "Looking Beyond GPUs for DNN Scheduling on Multi-Tenant Clusters" (OSDI'22),
§3, observe that a training job's speed depends on the CPU cores that pre-process its input
and on the host memory that caches its dataset, and that jobs differ widely in both. The
paper profiles each job ("optimistic profiling": throughput against CPU cores with the whole
dataset cached, then an analytical model for memory, because with a MinIO-style cache the
misses per epoch are fixed by the cached fraction). We use a parametric model of the same
shape, with three numbers per job.

The model
---------
A job with gang size :math:`s` gets :math:`c` CPU cores and :math:`m` GB of host memory *per
GPU*. Its speed, as a fraction of its GPU-bound throughput :math:`T` (the throughput table's
value), is the slowest of its input pipeline's stages:

.. math::

    f(c, m) = \min\bigl(f_{cpu}(c),\ f_{mem}(m)\bigr), \qquad
    f_{cpu}(c) = \min\Bigl(1, \frac{c}{c^*}\Bigr),

    h = \min\Bigl(1, \frac{s\,m}{D}\Bigr), \qquad
    f_{mem}(m) = \begin{cases} 1 & r (1 - h) \le 1 \\ \dfrac{1}{r (1 - h)} & \text{otherwise} \end{cases}

* :math:`c^*` (``cpu_demand``): CPU cores per GPU at which pre-processing keeps up with the
  GPU; fewer cores slow the job in proportion (pre-processing is data-parallel over cores).
* :math:`D` (``dataset_gb``): dataset size; :math:`h` is the fraction the job's memory caches
  (:math:`h = 1` for :math:`D = 0`, and for sizes below the smallest normal float, whose
  per-GPU demand would underflow).
* :math:`r` (``io_ratio``): time to read the whole dataset from storage divided by the time
  of one epoch at full speed. Each epoch reads the uncached :math:`(1 - h) D` from storage
  (the MinIO cache of §3 keeps a fixed set of items, so every miss is a storage read), which
  takes :math:`r (1 - h)` epochs' worth of time; when that exceeds one epoch, storage is
  the bottleneck. :math:`r \le 1` means storage keeps up even with nothing cached.

The best-case demand (the least that reaches full speed, what Synergy-TUNE asks for first)
is :math:`c^*` cores and :math:`m^* = \frac{D}{s}\max(0, 1 - 1/r)` GB per GPU.

In plain numpy: ``np.minimum(np.minimum(1, c / c_star), f_mem)``.

Defaults
--------
:func:`default_sensitivity` draws each job's numbers from a seed and the job's id (the same
job gets the same numbers in simulation and online): a third of the jobs are CPU-hungry
(image-like: 6-12 cores per GPU, a 140 GB dataset, storage fast enough), a third
memory-hungry (2-4 cores, 200-600 GB datasets, storage 2-5x slower than an epoch), a third
insensitive (1-2 cores, small data). These classes follow the paper's §2-3 observation that
image and speech models need several cores per GPU and language models one or two, and
that large datasets that do not fit the page cache are storage-bound; the numbers
themselves are our choice, not the paper's measurements.

Examples
--------
A job that needs 4 cores per GPU gets 2: half speed; caching half of a dataset whose full
read takes 4 epochs' time leaves :math:`4 \times 0.5 = 2` epochs of reads per epoch: half speed:

>>> import numpy as np
>>> from hetsched.inputs.host_profiles import speed_fraction
>>> speed_fraction(np.array([2.0, 8.0]), np.array([100.0, 50.0]), np.array([1, 1]),
...                cpu_demand=np.array([4.0, 4.0]), dataset_gb=np.array([100.0, 100.0]),
...                io_ratio=np.array([4.0, 4.0])).tolist()
[0.5, 0.5]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..validation import check_int
from .id_draws import id_uniforms

__all__ = ["HostSensitivity", "SENSITIVITY_FIELDS", "best_case_demand", "default_sensitivity",
           "sensitivity_for", "speed_fraction"]

#: Datasets smaller than the smallest normal float (GB) count as none: their demand would underflow.
_TINY = float(np.finfo(float).tiny)

#: The per-job fields of the model and their rules.
SENSITIVITY_FIELDS = {"cpu_demand": "positive", "dataset_gb": "non-negative", "io_ratio": "non-negative"}


@dataclass(frozen=True, eq=False)
class HostSensitivity:
    """The model's numbers for a set of jobs (arrays aligned with the jobs asked for).

    Attributes
    ----------
    cpu_demand : ndarray
        :math:`c^*`, CPU cores per GPU for full speed (> 0).
    dataset_gb : ndarray
        :math:`D`, dataset size in GB (>= 0).
    io_ratio : ndarray
        :math:`r`, full-dataset read time over full-speed epoch time (>= 0).
    """

    cpu_demand: np.ndarray
    dataset_gb: np.ndarray
    io_ratio: np.ndarray

    @property
    def n_jobs(self) -> int:
        """Number of jobs."""
        return int(self.cpu_demand.shape[0])


def speed_fraction(cpus_per_gpu: Any, mem_per_gpu: Any, scale_factors: Any, *, cpu_demand: Any,
                   dataset_gb: Any, io_ratio: Any) -> np.ndarray:
    """:math:`f(c, m)` of the module docstring, element-wise (broadcasting numpy arrays)."""
    c = np.asarray(cpus_per_gpu, dtype=float)
    m = np.asarray(mem_per_gpu, dtype=float)
    s = np.asarray(scale_factors, dtype=float)
    c_star = np.asarray(cpu_demand, dtype=float)
    D = np.asarray(dataset_gb, dtype=float)
    r = np.asarray(io_ratio, dtype=float)
    f_cpu = np.minimum(1.0, c / c_star)
    has = D >= _TINY
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        h = np.where(has, np.minimum(1.0, s * m / np.where(has, D, 1.0)), 1.0)
        load = r * (1.0 - h)
        f_mem = np.where(load <= 1.0, 1.0, 1.0 / np.where(load > 1.0, load, 1.0))
    return np.minimum(f_cpu, f_mem)


def best_case_demand(sens: HostSensitivity, scale_factors: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(cpus, mem)`` per GPU: the least that gives full speed (:math:`c^*`, :math:`m^*`)."""
    s = np.asarray(scale_factors, dtype=float)
    r = sens.io_ratio
    with np.errstate(divide="ignore"):
        need = np.where(r > 1.0, 1.0 - 1.0 / np.where(r > 1.0, r, 1.0), 0.0)
    return sens.cpu_demand.copy(), np.where(sens.dataset_gb >= _TINY, sens.dataset_gb * need / s, 0.0)


def default_sensitivity(ids: Any, seed: int = 0) -> HostSensitivity:
    """The seeded default numbers of each job (see "Defaults" in the module docstring).

    Parameters
    ----------
    ids : array-like
        Job ids (trace ids); each job's numbers depend only on ``seed`` and its id.
    seed : int, default 0
    """
    check_int(seed, "seed", low=0)
    ids = np.asarray(ids, dtype=object).reshape(-1)
    u = id_uniforms(ids, int(seed), 4, salt="synergy")
    kind = np.minimum((u[:, 0] * 3).astype(int), 2)          # 0 CPU-hungry, 1 memory-hungry, 2 insensitive
    cpu = np.select([kind == 0, kind == 1], [6.0 + 6.0 * u[:, 1], 2.0 + 2.0 * u[:, 1]], 1.0 + u[:, 1])
    data = np.select([kind == 0, kind == 1], [np.full(ids.shape[0], 140.0), 200.0 + 400.0 * u[:, 2]],
                     1.0 + 9.0 * u[:, 2])
    ratio = np.select([kind == 0, kind == 1], [0.5 + 0.5 * u[:, 3], 2.0 + 3.0 * u[:, 3]], 0.5 * u[:, 3])
    return HostSensitivity(cpu_demand=cpu, dataset_gb=data, io_ratio=ratio)


def sensitivity_for(ids: Any, table: Mapping[Any, Mapping[str, float]] | None, seed: int = 0, *,
                    argument: str = "sensitivity") -> HostSensitivity:
    """Numbers for ``ids``: from ``table`` (trace id -> {field: value}) when given, else the
    seeded defaults.

    Raises
    ------
    ValidationError
        ``table`` is not a mapping of mappings; a job of ``ids`` missing from it; an entry
        missing a field, naming an unknown one, or with a value that breaks its rule
        (:data:`SENSITIVITY_FIELDS`). Each message names the job, the field and the value.
    """
    ids = np.asarray(ids, dtype=object).reshape(-1)
    if table is None:
        return default_sensitivity(ids, seed)
    if not isinstance(table, Mapping):
        raise ValidationError(f"`{argument}` must be a mapping job id -> {{field: value}}; got "
                              f"{type(table).__name__}.")
    cols = {name: np.empty(ids.shape[0]) for name in SENSITIVITY_FIELDS}
    for i, jid in enumerate(ids.tolist()):
        entry = table.get(jid)
        if entry is None:
            raise ValidationError(f"`{argument}` has no entry for job {jid!r}; give one for every job "
                                  f"(fields {sorted(SENSITIVITY_FIELDS)}), or leave `{argument}` None for the "
                                  "seeded defaults.")
        if not isinstance(entry, Mapping):
            raise ValidationError(f"`{argument}[{jid!r}]` must be a mapping field -> value; got "
                                  f"{type(entry).__name__}.")
        unknown = sorted(set(entry) - set(SENSITIVITY_FIELDS))
        if unknown:
            raise ValidationError(f"`{argument}[{jid!r}]` has unknown field {unknown[0]!r}; fields: "
                                  f"{sorted(SENSITIVITY_FIELDS)}.")
        for name, rule in SENSITIVITY_FIELDS.items():
            if name not in entry:
                raise ValidationError(f"`{argument}[{jid!r}]` must give {name!r} ({rule}); it gives "
                                      f"{sorted(entry)}.")
            v = entry[name]
            ok = isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_)) \
                and np.isfinite(v) and (v > 0 if rule == "positive" else v >= 0)
            if not ok:
                raise ValidationError(f"`{argument}[{jid!r}][{name!r}]` must be a finite {rule} number; "
                                      f"got {v!r}.")
            cols[name][i] = float(v)
    return HostSensitivity(**cols)
