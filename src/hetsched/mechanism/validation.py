"""Checks at the planner's boundary: X, gang sizes, capacities, ids, options."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ..validation import check_integer_array

__all__ = ["check_allocation_arrays", "label"]


def label(value: Any) -> Any:
    """A job id as a plain Python value (``7`` rather than ``np.int64(7)`` in messages)."""
    return value.item() if isinstance(value, np.generic) else value


def as_id_array(job_ids: Any) -> np.ndarray:
    """Job ids as a 1-D array; a list mixing strings and numbers stays object (not all str)."""
    if isinstance(job_ids, np.ndarray):
        return job_ids
    seq = list(job_ids)
    ids = np.asarray(seq)
    if ids.dtype.kind in "US" and not all(isinstance(v, (str, bytes)) for v in seq):
        ids = np.array(seq, dtype=object)
    return ids


def check_allocation_arrays(
    X: Any,
    scale_factors: Any,
    capacities: Any,
    job_ids: Any,
    gpu_types: Any,
    *,
    tolerance: float,
    zero_tol: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple[str, ...]]:
    """Validate the planner's array inputs; return them as clean arrays.

    Rules (each violation names the argument, the rule and the first offending value):

    * ``X`` is a finite 2-D array of shape ``(n_jobs, len(gpu_types))``, ``X >= -tolerance``;
    * every row sums to at most ``1 + tolerance`` (a job cannot run more than all the time);
    * per type, ``sum_j s_j X[j, k] <= C_k + tolerance * max(1, C_k)`` (no over-subscription);
    * where ``X[j, k] > zero_tol``, the gang fits: ``s_j <= C_k``;
    * ``scale_factors`` are positive integers, ``capacities`` non-negative integers;
    * ``job_ids`` unique, ``gpu_types`` unique strings.

    ``tolerance=inf`` turns the row and capacity checks off (for what-if runs with an
    over-subscribed X; the plans still never over-subscribe a type).

    The checks run in this order, the first failure raising: GPU types, the shape of X,
    job ids, gang sizes and capacities, X finite and non-negative, row sums and
    capacities, gangs fitting their types.
    """
    types = _check_gpu_types(gpu_types)
    m = len(types)
    X = _check_x_shape(X, m)
    n = X.shape[0]
    ids = _check_job_ids(job_ids, n)
    s, cap = _check_gangs_and_capacities(scale_factors, capacities, ids, types)
    _check_x_values(X, ids, types, tolerance)
    if math.isfinite(tolerance):
        _check_x_sums(X, s, cap, ids, types, tolerance)
    _check_gangs_fit(X, s, cap, ids, types, zero_tol)
    return X, s, cap, ids, types


def _check_gpu_types(gpu_types: Any) -> tuple[str, ...]:
    """``gpu_types`` as a tuple of unique names (not a bare string)."""
    if isinstance(gpu_types, str):
        raise ValidationError(f"`gpu_types` must be a sequence of names; got the string {gpu_types!r}.")
    try:
        types = tuple(str(t) for t in gpu_types)
    except TypeError:
        raise ValidationError(f"`gpu_types` must be a sequence of names; got {gpu_types!r}.") from None
    if len(set(types)) != len(types):
        dup = sorted({t for t in types if types.count(t) > 1})
        raise ValidationError(f"`gpu_types` must be unique; {dup} appear more than once.")
    return types


def _check_x_shape(X: Any, m: int) -> np.ndarray:
    """``X`` as a float array of shape ``(n_jobs, m)`` (its values are checked later)."""
    try:
        X = np.asarray(X, dtype=float)
    except (TypeError, ValueError):
        raise ValidationError(f"`X` must be a numeric array; got {type(X).__name__}.") from None
    if X.ndim != 2 or X.shape[1] != m:
        raise ValidationError(f"`X` must have shape (n_jobs, n_gpu_types) = (n, {m}); got {X.shape}.")
    return X


def _check_job_ids(job_ids: Any, n: int) -> np.ndarray:
    """``n`` unique job ids (default ``0 .. n-1``); increasing integers skip the hashing."""
    ids = np.arange(n) if job_ids is None else as_id_array(job_ids)
    if ids.ndim != 1 or ids.shape[0] != n:
        raise ValidationError(f"`job_ids` must have length n_jobs = {n}; got shape {ids.shape}.")
    increasing = ids.dtype.kind in "iu" and (n < 2 or bool((ids[1:] > ids[:-1]).all()))  # unique, cheaply
    if n and not increasing and not pd.Index(ids).is_unique:
        idx = pd.Index(ids)
        raise ValidationError(f"`job_ids` must be unique; duplicated: {idx[idx.duplicated()].unique().tolist()[:5]}.")
    return ids


def _check_gangs_and_capacities(
    scale_factors: Any, capacities: Any, ids: np.ndarray, types: tuple[str, ...]
) -> tuple[np.ndarray, np.ndarray]:
    """Gang sizes (positive integers, default 1, a scalar broadcast to every job) and
    capacities (non-negative integers, one per type) as int64 arrays ``(s, cap)``."""
    n, m = ids.shape[0], len(types)
    s_raw = np.asarray(scale_factors, dtype=float) if scale_factors is not None else np.ones(n)
    if s_raw.ndim == 0:
        s_raw = np.full(n, float(s_raw))
    if s_raw.shape != (n,):
        raise ValidationError(f"`scale_factors` must have shape (n_jobs,) = ({n},); got {s_raw.shape}.")
    s = check_integer_array(s_raw, "scale_factors", lambda j: f"job {label(ids[j])!r}")
    c_raw = np.asarray(capacities, dtype=float)
    if c_raw.shape != (m,):
        raise ValidationError(f"`capacities` must have shape (n_gpu_types,) = ({m},); got {c_raw.shape}.")
    cap = check_integer_array(c_raw, "capacities", lambda k: f"type {types[k]!r}", low=0)
    return s, cap


def _check_x_values(X: np.ndarray, ids: np.ndarray, types: tuple[str, ...], tolerance: float) -> None:
    """Refuse a non-finite entry of ``X``, then one below ``-tolerance``."""
    if not np.isfinite(X).all():
        j, k = np.argwhere(~np.isfinite(X))[0]
        raise ValidationError(
            f"`X` must be finite; X[{label(ids[j])!r}, {types[k]!r}] is {X[j, k]:g} "
            f"(an allocation without a solution cannot be planned)."
        )
    if X.size and X.min() < -tolerance:
        j, k = np.argwhere(X < -tolerance)[0]
        raise ValidationError(f"`X` must be non-negative; X[{label(ids[j])!r}, {types[k]!r}] = {X[j, k]:g}.")


def _check_x_sums(
    X: np.ndarray, s: np.ndarray, cap: np.ndarray, ids: np.ndarray, types: tuple[str, ...], tolerance: float
) -> None:
    """Refuse a row of ``X`` summing above ``1 + tolerance``, then a type whose GPUs
    ``sum_j s_j X[j, k]`` exceed its capacity (with ``tolerance`` relative slack)."""
    rows = X.sum(axis=1)
    over = rows > 1.0 + tolerance
    if over.any():
        j = int(np.argmax(np.where(over, rows, -np.inf)))
        raise ValidationError(
            f"`X` rows must sum to at most 1 (a job cannot run more than all the time; "
            f"tolerance {tolerance:g}); job {label(ids[j])!r} sums to {rows[j]:.6g} "
            f"({int(over.sum())} such job(s))."
        )
    used = s.astype(float) @ X
    oversub = used > cap + tolerance * np.maximum(1, cap)
    if oversub.any():
        k = int(np.argmax(np.where(oversub, used - cap, -np.inf)))
        raise ValidationError(
            f"`X` over-subscribes GPU type {types[k]!r}: sum_j scale_factor_j * X[j, {types[k]!r}] = "
            f"{used[k]:.6g} > {int(cap[k])} GPUs (tolerance {tolerance:g}; "
            f"{int(oversub.sum())} such type(s))."
        )


def _check_gangs_fit(
    X: np.ndarray, s: np.ndarray, cap: np.ndarray, ids: np.ndarray, types: tuple[str, ...], zero_tol: float
) -> None:
    """Refuse an entry ``X[j, k] > zero_tol`` whose gang ``s_j`` exceeds the ``cap[k]`` GPUs."""
    m = len(types)
    big = s > (cap.min() if m else 0)
    too_big = np.zeros(X.shape, dtype=bool)
    if big.any():  # only jobs whose gang exceeds some type's count can break this rule
        too_big[big] = (X[big] > zero_tol) & (s[big, None] > cap[None, :])
    if too_big.any():
        j, k = np.argwhere(too_big)[0]
        raise ValidationError(
            f"job {label(ids[j])!r} has X[{label(ids[j])!r}, {types[k]!r}] = {X[j, k]:.6g} > 0 but its gang of "
            f"{int(s[j])} GPUs exceeds the {int(cap[k])} {types[k]!r} GPUs of the cluster "
            f"({int(too_big.sum())} such entries)."
        )
