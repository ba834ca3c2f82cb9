"""Validated input of one placement round: which jobs need how many GPUs of which type.

The round's plan arrives as aligned arrays (one entry per job) and is checked once here;
everything downstream works on integer arrays.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ..inputs.topology import Topology
from ..validation import check_bool, check_instance, check_integer_array, check_matrix

__all__ = ["PlacementRequest", "make_request"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class PlacementRequest:
    """One round's plan in integer arrays, validated against a topology.

    Attributes
    ----------
    topology : Topology
    job_ids : ndarray, shape (n_jobs,)
        Unique job ids as given.
    job_type : ndarray of int, shape (n_jobs,)
        GPU type index per job.
    size : ndarray of int, shape (n_jobs,)
        GPUs the job needs (its gang size), positive.
    waiting : ndarray of float, shape (n_jobs,)
        Time the job has waited (any unit consistent with ``PlacementCosts.waiting``).
    prev_offset, prev_gpu : ndarray of int
        Previous placement in CSR form: job ``j`` held global GPU ids
        ``prev_gpu[prev_offset[j]:prev_offset[j+1]]`` last round (sorted; only GPUs of the
        type it asks for now; blocked ones included, they are simply not usable).
    prev_same_type : ndarray of bool, shape (n_jobs,)
        Whether the job ran last round on GPUs of the type it asks for now.
    usable : ndarray of bool, shape (n_gpus,)
        False for blocked GPUs (down, reserved).
    split_large_jobs : bool
        Whether a job larger than every server of its type may span servers of one rack.
    comm : ndarray of float, shape (n_jobs,), optional
        Communication intensity in [0, 1] per job (``None``: all 0); weights the
        ``network`` cost of :class:`~hetsched.placement.PlacementCosts`.
    """

    topology: Topology
    job_ids: np.ndarray
    job_type: np.ndarray
    size: np.ndarray
    waiting: np.ndarray
    prev_offset: np.ndarray
    prev_gpu: np.ndarray
    prev_same_type: np.ndarray
    usable: np.ndarray
    split_large_jobs: bool
    comm: np.ndarray | None = None

    @property
    def n_jobs(self) -> int:
        """Number of jobs in the plan."""
        return int(self.size.shape[0])

    @property
    def server_free(self) -> np.ndarray:
        """Usable GPUs per server (all GPUs minus blocked ones)."""
        topo = self.topology
        return np.add.reduceat(self.usable.astype(np.int64), topo.gpu_offset[:-1]) if topo.n_gpus else np.zeros(0, np.int64)

    def prev_of(self, j: int) -> np.ndarray:
        """Global GPU ids of the job's type that job ``j`` held last round."""
        return self.prev_gpu[self.prev_offset[j] : self.prev_offset[j + 1]]


def make_request(topology: Topology, job_ids: Any, gpu_types: Any, num_gpus: Any, *, previous: Any = None,
                 waiting: Any = None, blocked: Any = None, split_large_jobs: bool = False,
                 allow_overcommit: bool = False) -> PlacementRequest:
    """Validate a round's plan and return a :class:`PlacementRequest`.

    See :func:`hetsched.placement.place` for the meaning of the arguments.
    """
    check_instance(topology, "topology", Topology, "a Topology")
    ids, index = _job_ids(job_ids)
    n = ids.shape[0]
    job_type = _job_types(topology, gpu_types, n)
    size = _sizes(num_gpus, ids)
    wait = _waiting(waiting, ids)
    usable = np.ones(topology.n_gpus, dtype=bool)
    if blocked is not None:
        usable[_gpu_ids(topology, blocked, "blocked")] = False
    _check_capacity(topology, ids, job_type, size, allow_overcommit)
    prev_offset, prev_gpu, prev_same = _previous(topology, index, ids, job_type, previous)
    check_bool(split_large_jobs, "split_large_jobs")
    return PlacementRequest(
        topology=topology,
        job_ids=ids,
        job_type=job_type,
        size=size,
        waiting=wait,
        prev_offset=prev_offset,
        prev_gpu=prev_gpu,
        prev_same_type=prev_same,
        usable=usable,
        split_large_jobs=bool(split_large_jobs),
    )


def _job_ids(job_ids: Any) -> tuple[np.ndarray, pd.Index]:
    """The job ids as a one-dimensional array, unique, and as a pandas Index."""
    ids = np.asarray(job_ids)
    if ids.ndim != 1:
        raise ValidationError(f"`job_ids` must be one-dimensional; got shape {ids.shape}.")
    index = pd.Index(ids)
    if not index.is_unique:
        dup = [_jid(x) for x in index[index.duplicated()].unique().tolist()[:5]]
        raise ValidationError(f"`job_ids` must be unique; repeated: {dup}.")
    return ids, index


def _job_types(topology: Topology, gpu_types: Any, n: int) -> np.ndarray:
    """Each job's GPU type index (int64, shape (n,)) from type indices or type names."""
    types = np.asarray(gpu_types)
    if types.shape != (n,):
        raise ValidationError(f"`gpu_types` must have shape ({n},) like `job_ids`; got {types.shape}.")
    if n and np.issubdtype(types.dtype, np.integer):
        bad = (types < 0) | (types >= len(topology.gpu_types))
        if np.any(bad):
            j = int(np.flatnonzero(bad)[0])
            raise ValidationError(
                f"`gpu_types[{j}]` = {types[j]} is not a valid type index "
                f"(0..{len(topology.gpu_types) - 1} for {list(topology.gpu_types)})."
            )
        return types.astype(np.int64)
    job_type = pd.Index(list(topology.gpu_types)).get_indexer(types.astype(object)) if n else np.zeros(0, np.int64)
    job_type = np.asarray(job_type, dtype=np.int64)
    if np.any(job_type < 0):
        unknown = sorted({str(t) for t in types[job_type < 0]})
        raise ValidationError(
            f"`gpu_types` names unknown GPU types {unknown}; the cluster has {list(topology.gpu_types)}."
        )
    return job_type


def _sizes(num_gpus: Any, ids: np.ndarray) -> np.ndarray:
    """GPUs per job (positive integers, shape (n,)) from ``num_gpus`` (integers or whole floats)."""
    n = ids.shape[0]
    sizes = np.asarray(num_gpus)
    if sizes.shape != (n,):
        raise ValidationError(f"`num_gpus` must have shape ({n},) like `job_ids`; got {sizes.shape}.")
    if n and (sizes.dtype == bool or not (np.issubdtype(sizes.dtype, np.integer) or np.issubdtype(sizes.dtype, np.floating))):
        raise ValidationError(f"`num_gpus` must hold positive integers; got dtype {sizes.dtype}.")
    return check_integer_array(sizes.astype(float), "num_gpus", lambda j: f"job {_jid(ids[j])!r}")


def _waiting(waiting: Any, ids: np.ndarray) -> np.ndarray:
    """Time each job has waited (float, shape (n,), finite; zeros when not given)."""
    n = ids.shape[0]
    if waiting is None:
        return np.zeros(n)
    wait = np.asarray(waiting, dtype=float)
    if wait.shape != (n,):
        raise ValidationError(f"`waiting` must have shape ({n},) like `job_ids`; got {wait.shape}.")
    check_matrix(wait, "waiting", where=lambda idx: f"job {_jid(ids[idx[0]])!r}")
    return wait


def _check_capacity(topology: Topology, ids: np.ndarray, job_type: np.ndarray, size: np.ndarray,
                    allow_overcommit: bool) -> None:
    """The plan may not ask for more GPUs of a type than exist: no job larger than its type's
    count, and (unless ``allow_overcommit``) no type's total demand above it."""
    n = ids.shape[0]
    counts = np.bincount(topology.server_type, weights=topology.server_gpus, minlength=len(topology.gpu_types)).astype(np.int64)
    demand = np.bincount(job_type, weights=size, minlength=len(topology.gpu_types)).astype(np.int64)
    if np.any(size > counts[job_type]) if n else False:
        j = int(np.flatnonzero(size > counts[job_type])[0])
        t = topology.gpu_types[job_type[j]]
        raise ValidationError(
            f"job {_jid(ids[j])!r} asks for {size[j]} GPUs of type {t!r} but the cluster has {counts[job_type[j]]}."
        )
    over = np.flatnonzero(demand > counts)
    if over.size and not allow_overcommit:
        detail = ", ".join(f"{demand[k]} of type {topology.gpu_types[k]!r} (cluster has {counts[k]})" for k in over)
        raise ValidationError(
            f"the plan asks for more GPUs than exist: {detail}; pass allow_overcommit=True to "
            f"leave the excess unscheduled."
        )


def _jid(value: Any) -> Any:
    """A job id as the user wrote it (numpy scalars unwrapped) for messages."""
    return value.item() if isinstance(value, np.generic) else value


def _gpu_ids(topology: Topology, spec: Any, argument: str) -> np.ndarray:
    """Global GPU ids from ints, ``(server, local)`` pairs or whole-server names."""
    if isinstance(spec, np.ndarray) and np.issubdtype(spec.dtype, np.integer):
        out = spec.astype(np.int64).ravel()
    else:
        items = list(spec)
        if items and all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in items):
            out = np.asarray(items, dtype=np.int64)
        else:
            acc: list[int] = []
            for x in items:
                if isinstance(x, str):
                    s = topology.server_index(x, argument=argument)
                    acc.extend(range(int(topology.gpu_offset[s]), int(topology.gpu_offset[s + 1])))
                elif isinstance(x, (tuple, list)) and len(x) == 2:
                    acc.append(topology.gpu_id(x[0], x[1], argument=argument))
                elif isinstance(x, (int, np.integer)) and not isinstance(x, bool):
                    acc.append(int(x))
                else:
                    raise ValidationError(
                        f"`{argument}` entries must be global GPU ids, (server, gpu index) pairs or "
                        f"server names; got {x!r}."
                    )
            out = np.asarray(acc, dtype=np.int64)
    bad = (out < 0) | (out >= topology.n_gpus)
    if np.any(bad):
        raise ValidationError(
            f"`{argument}` names GPU id {int(out[bad][0])}; valid ids are 0..{topology.n_gpus - 1}."
        )
    return out


def _previous(
    topology: Topology,
    index: pd.Index,
    ids: np.ndarray,
    job_type: np.ndarray,
    previous: Any,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The previous placement in CSR form (prev_offset, prev_gpu, prev_same_type): from a
    Placement on the same topology or a mapping job id -> GPUs, kept only for the jobs of
    this plan and the GPUs of the type each asks for now (sorted per job)."""
    n = ids.shape[0]
    if previous is None:
        return np.zeros(n + 1, np.int64), np.zeros(0, np.int64), np.zeros(n, bool)
    # Lazy import: result.py imports this module's types only for annotations.
    from .result import Placement

    if isinstance(previous, Placement):
        if previous.topology is not topology and previous.topology != topology:
            raise ValidationError("`previous` is a Placement on a different topology than `cluster`.")
        p_ids, p_off, p_gpu = previous.job_ids, previous.gpu_offset, previous.gpus
    elif isinstance(previous, Mapping):
        keys = list(previous.keys())
        lists = [_gpu_ids(topology, previous[k], f"previous[{k!r}]") for k in keys]
        p_ids = np.empty(len(keys), dtype=object)
        p_ids[:] = keys
        p_off = np.zeros(len(keys) + 1, np.int64)
        np.cumsum([len(x) for x in lists], out=p_off[1:])
        p_gpu = np.concatenate(lists) if lists else np.zeros(0, np.int64)
    else:
        raise ValidationError(
            f"`previous` must be a Placement or a mapping job id -> GPUs; got {type(previous).__name__}."
        )
    if p_gpu.size:
        uniq, cnt = np.unique(p_gpu, return_counts=True)
        if np.any(cnt > 1):
            g = int(uniq[cnt > 1][0])
            raise ValidationError(
                f"`previous` gives GPU {topology.gpu_label(g)} (id {g}) to more than one job."
            )
    pos = index.get_indexer(pd.Index(p_ids)) if len(p_ids) else np.zeros(0, np.int64)
    job_of_gpu = np.repeat(pos, np.diff(p_off))
    keep = job_of_gpu >= 0
    # Only GPUs of the type the job asks for now can be continued; a job that changes type
    # starts afresh (its old GPUs are free for others).
    keep[keep] &= topology.server_type[topology.gpu_server[p_gpu[keep]]] == job_type[job_of_gpu[keep]]
    job_of_gpu, gpus = job_of_gpu[keep], p_gpu[keep]
    order = np.lexsort((gpus, job_of_gpu))
    job_of_gpu, gpus = job_of_gpu[order], gpus[order]
    prev_offset = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(job_of_gpu, minlength=n), out=prev_offset[1:])
    same = np.diff(prev_offset) > 0
    log.debug("previous placement: %d of %d jobs held %d GPUs of their type", int(same.sum()), n, gpus.size)
    return prev_offset, gpus, same
