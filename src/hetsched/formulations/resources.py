r"""Host-resource (CPU cores, memory) capacity rows for every LP policy.

Jobs may state host CPU cores and host memory per GPU (``JobSet(cpus_per_gpu=...,
mem_per_gpu=...)``); the cluster states what the servers of each GPU type offer
(``Cluster(cpus=..., memory=...)``, per type, summed over that type's servers). Synergy
(Mohan et al., OSDI'22) shows that splitting CPUs in proportion to GPUs starves CPU-hungry
jobs; with these rows an allocation never asks a type's servers for more than they have.

Math
----
For each resource :math:`r` a job states (demand :math:`d_{jr}` per GPU) and each GPU type
:math:`k` with capacity :math:`R_{kr}`:

.. math::

    \sum_j \mu_j\, s_j\, d_{jr}\, X_{jk} \le R_{kr},
    \qquad X_{jk} = 0 \ \text{ where } s_j d_{jr} > R_{kr}\ \text{(the gang never fits)}.

A row is added only where it can bind, i.e. where :math:`\sum_j \mu_j s_j d_{jr} > R_{kr}`
(each :math:`X_{jk} \le 1`), so a cluster with ample CPU and memory yields exactly the
GPU-only program. In numpy: ``(mu * s * d)[:, None] * X).sum(axis=0) <= R``.

Per-type totals are a relaxation of per-server limits: a gang placed on one server also
needs that server to have ``s_j d_jr`` free; placement (:mod:`hetsched.placement`) does not
model host resources yet.
"""

from __future__ import annotations

import numpy as np

from ..errors import ValidationError
from ..inputs.jobs import RESOURCE_FIELDS, JobSet
from .builder import AllocationVars, ProgramBuilder

__all__ = ["add_resource_rows", "host_fit_mask", "resource_terms", "resource_usage"]


def resource_terms(jobs: JobSet, cluster) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """``(field, per-GPU demand (n,), capacity per type (m,))`` for each resource the jobs state.

    Empty when no job field of :data:`~hetsched.inputs.jobs.RESOURCE_FIELDS` is present.

    Raises
    ------
    ValidationError
        A demand field is present but ``cluster`` is None or lacks the matching capacity.

    Examples
    --------
    >>> import hetsched as hs
    >>> jobs = hs.JobSet([[1.0]], gpu_types=["v100"], cpus_per_gpu=[4.0])
    >>> [(f, d.tolist(), c.tolist()) for f, d, c in resource_terms(jobs, hs.Cluster({"v100": 2}, cpus={"v100": 6}))]
    [('cpus_per_gpu', [4.0], [6.0])]
    """
    out = []
    for field, capacity in RESOURCE_FIELDS.items():
        if not jobs.has(field):
            continue
        if cluster is None:
            raise ValidationError(
                f"job field `{field}` is set but this program was built without the cluster, so its "
                f"`{capacity}` capacity cannot be enforced; pass `cluster=` to add_base_rows / level_program."
            )
        cap = cluster.resource_vector(capacity, jobs.gpu_types)
        if cap is None:
            raise ValidationError(
                f"job field `{field}` needs host capacities: pass Cluster(..., {capacity}={{gpu_type: amount}}) "
                f"(use inf for no limit); the cluster has none."
            )
        out.append((field, np.asarray(jobs.field(field), dtype=float), cap))
    return out


def add_resource_rows(b: ProgramBuilder, X: AllocationVars, jobs: JobSet, cluster) -> dict:
    """Add the host-resource capacity rows (and zero rows for gangs that never fit).

    Returns what was added, for solvers that read the program's structure
    (:mod:`hetsched.solvers.structured`): ``{"coupling": [(first row, binding types, coefficient
    per job, capacities of those types), ...], "zero": [(first row, variable's job, its
    type), ...], "n_rows": rows added}``. No effect when ``jobs`` states no resource demand
    (then ``cluster`` may be None).
    """
    added: dict = {"coupling": [], "zero": [], "n_rows": 0}
    terms = resource_terms(jobs, cluster)
    if not terms:
        return added
    load = (jobs.multiplicity * jobs.scale_factors).astype(float)
    for _, demand, cap in terms:
        per_job = jobs.scale_factors * demand                    # one gang's need
        coef = (load * demand)[X.job]                             # mu_j s_j d_j per variable
        total = np.bincount(X.gpu, weights=coef, minlength=cap.shape[0])
        binding = np.flatnonzero(total > cap * (1 + 1e-12))
        if binding.size:
            sel = np.isin(X.gpu, binding) & (coef > 0)
            local = np.full(cap.shape[0], -1, dtype=np.int64)
            local[binding] = np.arange(binding.size)
            r = b.add_rows(rows=local[X.gpu[sel]], cols=X.cols[sel], vals=coef[sel], lb=-np.inf,
                           ub=cap[binding], n_rows=int(binding.size))
            added["coupling"].append((r, binding, load * demand, cap[binding]))
            added["n_rows"] += int(binding.size)
        never = np.flatnonzero(per_job[X.job] > cap[X.gpu] * (1 + 1e-12))
        if never.size:
            r = b.add_rows(rows=np.arange(never.size), cols=X.cols[never], vals=1.0, lb=-np.inf, ub=0.0,
                           n_rows=int(never.size))
            added["zero"].append((r, X.job[never], X.gpu[never]))
            added["n_rows"] += int(never.size)
    return added


def host_fit_mask(jobs: JobSet, cluster) -> np.ndarray:
    """(n, m) bool: one gang of job j fits the host resources of type k (all True without demands)."""
    fit = np.ones((jobs.n_jobs, jobs.n_types), dtype=bool)
    for _, demand, cap in resource_terms(jobs, cluster):
        fit &= (jobs.scale_factors * demand)[:, None] <= cap[None, :] * (1 + 1e-12)
    return fit


def resource_usage(X: np.ndarray, jobs: JobSet, field: str) -> np.ndarray:
    """Amount of a job resource field used per GPU type by allocation ``X`` (multiplicities counted)."""
    d = np.asarray(jobs.field(field, 0.0), dtype=float)
    return ((jobs.multiplicity * jobs.scale_factors * d)[:, None] * X).sum(axis=0)
