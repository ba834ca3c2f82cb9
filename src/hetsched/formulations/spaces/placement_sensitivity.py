r"""Placement sensitivity: a multi-GPU job runs faster when its gang sits on one server.

Gavel's measured table has, per GPU type, a *consolidated* throughput (all of the job's
GPUs on one server) and an *unconsolidated* one (spread over servers): median 2.35x apart
on V100, up to 9.6x; Gavel's policies never read the second. Here a policy sees both.
Each multi-GPU job j gets, per usable type k, two variables in the allocation space
(:mod:`.space`): the consolidated row :math:`X_{jk}` (throughput :math:`T_{jk}`, the JobSet's
throughputs) and the unconsolidated row :math:`U_{jk}` (throughput :math:`T^u_{jk}`, relative
speed :math:`T^u_{jk} / T_{jk}`). Both count toward the job's time and the type's
capacity. Consolidated gangs need servers; with :math:`g_\sigma` the GPUs of server
:math:`\sigma` of type k, at most :math:`B_k(q) = \sum_\sigma q \lfloor g_\sigma / q \rfloor`
GPUs can hold consolidated gangs whose size is a multiple of q at once, so for every gang
size q > 1 present:

.. math::

    \sum_{j:\ q \mid s_j,\ s_j > 1} \mu_j s_j X_{jk} \;+ \sum_{\text{pairs } (a,b):\ q \mid s} s\, y_{ab,k}
    \;\le\; B_k(q) \qquad \text{(added only where } B_k(q) < C_k\text{)}.

(For power-of-two gangs on servers whose sizes are multiples of the largest gang, these
rows are exactly "at most :math:`C_k` GPUs", i.e. no constraint: any mix fits.) Without a
topology, ``consolidated_gpus`` may give one bound :math:`B_k` per type on all
consolidated multi-GPU gangs; with neither, every gang may be consolidated. Single-GPU
jobs are always consolidated. Pair rows (space sharing) count as consolidated gangs.

Every policy's coefficients extend by the relative speed, so max-min fairness, max-sum
throughput, min makespan and finish-time fairness all choose between the two rows. The
choice is in ``extra["time_unconsolidated"]`` and ``extra["allocation_rows"]`` (kind
"single" = consolidated, "unconsolidated"); ``X`` is the isolated-equivalent consolidated
time (see :mod:`.space`), so ``(T * X).sum(1)`` is each job's throughput.

With :math:`T^u = T` the optimum equals the placement-insensitive policy's (both rows are
the same job at the same speed). :math:`T^u > T` is allowed (measurement noise; Gavel's
table has a few such entries): then the unconsolidated row is simply the better one.
:math:`T^u > 0` where :math:`T = 0` is an error: the job's own row must say it can run there.

Examples
--------
Two 2-GPU jobs, four GPUs on a 2-GPU server and two 1-GPU servers: only one gang can be
consolidated. Job "a" gains 3x from consolidation, job "b" 1.1x; max-sum throughput
consolidates "a":

>>> import hetsched as hs
>>> import pandas as pd
>>> from hetsched.formulations.spaces.placement_sensitivity import PlacementSensitivity
>>> cluster = hs.Cluster.from_servers([("s0", "v100", 2), ("s1", "v100", 1), ("s2", "v100", 1)])
>>> jobs = hs.JobSet([[3.0], [1.1]], gpu_types=["v100"], ids=["a", "b"], scale_factors=[2, 2])
>>> ps = PlacementSensitivity(pd.DataFrame({"v100": [1.0, 1.0]}, index=["a", "b"]))
>>> res = hs.solve(hs.policies.MaxSumThroughput(placement_sensitivity=ps), jobs, cluster)
>>> round(res.objective, 6), res.extra["time_unconsolidated"][:, 0].round(6).tolist()
(4.0, [0.0, 1.0])
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ...errors import ValidationError, show
from ...inputs.jobs import JobSet
from ...inputs.throughputs import ThroughputCatalogue
from ...inputs.workloads import Workload, catalogue_rows_of
from ...validation import check_bool, check_instance, check_matrix, check_nonneg
from ..tables import job_numbers
from .kinds import PAIR, SINGLE

__all__ = ["PlacementSensitivity", "consolidated_bounds", "consolidation_rows", "unconsolidated_variables"]

log = logging.getLogger(__name__)


class PlacementSensitivity:
    """Placement-sensitivity parameters of a policy: unconsolidated throughputs and bounds.

    Parameters
    ----------
    unconsolidated : pandas.DataFrame
        Index: job ids; columns: GPU types; values: steps/s of the job when its gang is
        spread over several servers. Finite, non-negative. Job GPU types without a column
        have no placement sensitivity there (unconsolidated = consolidated).
    consolidated_gpus : Mapping[str, float], optional
        GPU type -> GPUs that can host consolidated multi-GPU gangs at once. Default: from
        the cluster's topology (:meth:`hetsched.Cluster.from_servers`); without a
        topology, no bound.
    aggregate : bool, default True
        Solve identical jobs (including their unconsolidated throughputs) as one class
        (exact; :func:`~hetsched.formulations.spaces.space.space_classes`).
    """

    __slots__ = ("aggregate", "consolidated_gpus", "unconsolidated")

    def __init__(self, unconsolidated: pd.DataFrame, *, consolidated_gpus: Mapping[str, float] | None = None,
                 aggregate: bool = True) -> None:
        check_instance(unconsolidated, "unconsolidated", pd.DataFrame,
                       "a pandas DataFrame (index: job ids, columns: GPU types)")
        if not unconsolidated.index.is_unique:
            dup = unconsolidated.index[unconsolidated.index.duplicated()].unique().tolist()[:5]
            raise ValidationError(f"`unconsolidated` must have one row per job; duplicated ids: {dup}.")
        U = check_matrix(unconsolidated, "unconsolidated",
                         where=lambda i: f"job {show(unconsolidated.index[i[0]])} on {unconsolidated.columns[i[1]]!r}")
        bounds = None
        if consolidated_gpus is not None:
            if not isinstance(consolidated_gpus, Mapping):
                raise ValidationError(
                    f"`consolidated_gpus` must map GPU type -> GPUs; got {type(consolidated_gpus).__name__}."
                )
            bounds = {}
            for t, v in consolidated_gpus.items():
                bounds[str(t)] = check_nonneg(v, f"consolidated_gpus[{t!r}]")
        self.unconsolidated = pd.DataFrame(U, index=unconsolidated.index.copy(),
                                           columns=[str(c) for c in unconsolidated.columns])
        self.consolidated_gpus = bounds
        self.aggregate = check_bool(aggregate, "aggregate")

    def __repr__(self) -> str:
        return (f"PlacementSensitivity(n_jobs={len(self.unconsolidated)}, gpu_types={list(self.unconsolidated.columns)}, "
                f"consolidated_gpus={self.consolidated_gpus})")

    @classmethod
    def from_catalogue(cls, catalogue: ThroughputCatalogue, rows: Any, job_ids: Any, *,
                       consolidated_gpus: Mapping[str, float] | None = None, aggregate: bool = True
                       ) -> PlacementSensitivity:
        """Unconsolidated throughputs of catalogue rows ``rows[i]`` for jobs ``job_ids[i]``."""
        if not isinstance(catalogue, ThroughputCatalogue):
            raise ValidationError(f"`catalogue` must be a ThroughputCatalogue; got {type(catalogue).__name__}.")
        if catalogue.unconsolidated is None:
            raise ValidationError("`catalogue` has no unconsolidated table.")
        r = np.asarray(rows)
        ids = np.asarray(job_ids)
        if r.shape != ids.shape or r.ndim != 1:
            raise ValidationError(f"`rows` and `job_ids` must be 1-D of equal length; got {r.shape} and {ids.shape}.")
        frame = pd.DataFrame(catalogue.unconsolidated[r], index=pd.Index(ids), columns=list(catalogue.gpu_types))
        return cls(frame, consolidated_gpus=consolidated_gpus, aggregate=aggregate)

    @classmethod
    def from_workload(cls, workload: Workload, catalogue: ThroughputCatalogue | None = None, *,
                      consolidated_gpus: Mapping[str, float] | None = None, aggregate: bool = True
                      ) -> PlacementSensitivity:
        """The unconsolidated rows of a sampled workload's jobs: :meth:`from_catalogue` with the
        rows and ids that :func:`~hetsched.inputs.workloads.catalogue_rows_of` reads from
        ``workload`` (a :class:`~hetsched.Workload` drawn, consolidated, by ``sample_jobs`` or
        ``generate_workload``) and ``catalogue`` (default: the workload's own, which must have
        an unconsolidated table); ``consolidated_gpus`` and ``aggregate`` as for the
        constructor. Anything else as ``workload`` raises a ValidationError naming it.
        """
        cat, rows, ids = catalogue_rows_of(workload, catalogue)
        return cls.from_catalogue(cat, rows, ids, consolidated_gpus=consolidated_gpus, aggregate=aggregate)

    def rekeyed(self, ids: np.ndarray) -> PlacementSensitivity:
        """This option with its rows indexed by job number (``ids[j]`` is job ``j``'s id)."""
        frame = self.unconsolidated.set_axis(job_numbers(self.unconsolidated.index, ids), axis=0)
        return PlacementSensitivity(frame, consolidated_gpus=self.consolidated_gpus, aggregate=self.aggregate)

    def table(self, jobs: JobSet) -> np.ndarray:
        """Unconsolidated throughputs aligned with ``jobs`` (n_jobs, n_types).

        Raises
        ------
        ValidationError
            A job without a row; an unconsolidated throughput where ``T`` is 0.
        """
        pos = self.unconsolidated.index.get_indexer(pd.Index(jobs.ids))
        if (pos < 0).any():
            j = int(np.flatnonzero(pos < 0)[0])
            raise ValidationError(
                f"job {show(jobs.ids[j])} has no row in `placement_sensitivity.unconsolidated` "
                f"({int((pos < 0).sum())} such job(s))."
            )
        T = jobs.throughputs
        U = T.copy()
        cols = {c: i for i, c in enumerate(self.unconsolidated.columns)}
        vals = self.unconsolidated.to_numpy()
        for k, t in enumerate(jobs.gpu_types):
            if t in cols:
                U[:, k] = vals[pos, cols[t]]
        bad = (U > 0) & (T <= 0)
        if bad.any():
            j, k = (int(v) for v in np.argwhere(bad)[0])
            raise ValidationError(
                f"job {show(jobs.ids[j])} has unconsolidated throughput {U[j, k]!r} on {jobs.gpu_types[k]!r} "
                f"but consolidated throughput 0 there; give the job a positive throughput in the JobSet "
                f"({int(bad.sum())} such entries)."
            )
        faster = int(((U > T) & (jobs.scale_factors[:, None] > 1)).sum())
        if faster:
            log.info("%d (job, type) entries run faster unconsolidated than consolidated; allowed", faster)
        return U


def unconsolidated_variables(jobs: JobSet, usable: np.ndarray, ps: PlacementSensitivity
                             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(job, type, relative speed)`` of the unconsolidated rows: multi-GPU jobs, usable types, ``T^u > 0``."""
    U = ps.table(jobs)
    T = jobs.throughputs
    sel = usable & (U > 0) & (jobs.scale_factors[:, None] > 1)
    j, k = np.nonzero(sel)
    return j.astype(np.int64), k.astype(np.int64), U[j, k] / T[j, k]


def consolidated_bounds(jobs: JobSet, cluster: Any, ps: PlacementSensitivity, sizes: np.ndarray
                        ) -> list[tuple[int, int, float]]:
    """``(type column, gang size q, bound)`` of every binding consolidated-GPU row.

    ``q = 0`` means "every multi-GPU gang" (an explicit ``consolidated_gpus`` bound).
    Rows whose bound is at least the type's capacity are left out (capacity implies them).
    """
    cap = cluster.capacities(jobs.gpu_types)
    out: list[tuple[int, int, float]] = []
    if ps.consolidated_gpus is not None:
        for k, t in enumerate(jobs.gpu_types):
            if t in ps.consolidated_gpus and ps.consolidated_gpus[t] < cap[k]:
                out.append((k, 0, ps.consolidated_gpus[t]))
        return out
    topo = getattr(cluster, "topology", None)
    if topo is None:
        return out
    for k, t in enumerate(jobs.gpu_types):
        if t not in topo.gpu_types:
            continue
        g = topo.server_sizes(t)
        for q in sizes:
            b = float((q * (g // q)).sum())
            if b < cap[k]:
                out.append((k, int(q), b))
    return out


def consolidation_rows(space: Any, jobs: JobSet, cluster: Any, ps: PlacementSensitivity
                       ) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], list[str]]:
    """Side rows ``(rows, vars, vals, ub)`` bounding GPUs held by consolidated gangs, and their labels."""
    kind = space.var_kind
    gang = np.where(kind == PAIR, space.var_gang,
                    jobs.scale_factors[np.maximum(space.var_jobs[:, 0], 0)].astype(float))
    weight = space.weights((jobs.multiplicity * jobs.scale_factors).astype(float))
    cons = ((kind == SINGLE) | (kind == PAIR)) & (gang > 1)
    sizes = np.unique(gang[cons]).astype(np.int64)
    rows, vars_, vals, ub, labels = [], [], [], [], []
    for k, q, bound in consolidated_bounds(jobs, cluster, ps, sizes):
        sel = cons & (space.var_type == k)
        if q > 0:
            sel &= (gang.astype(np.int64) % q) == 0
        v = np.flatnonzero(sel)
        rows.append(np.full(v.shape[0], len(ub), dtype=np.int64))
        vars_.append(v)
        vals.append(weight[v])
        ub.append(bound)
        labels.append(f"consolidated GPUs of {jobs.gpu_types[k]!r}" + (f" for gangs of a multiple of {q}" if q else ""))
    if not ub:
        return (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0)), []
    return (np.concatenate(rows), np.concatenate(vars_), np.concatenate(vals), np.asarray(ub, dtype=float)), labels
