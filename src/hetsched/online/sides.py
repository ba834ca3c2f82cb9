"""Rates of rows that are not one job alone on its gang, online: pair (space-sharing) rates
and spread (unconsolidated) rates, and the tables a policy solves with built from them.

:class:`SideRates` keeps, per ``(job, other, GPU type)`` (``other`` the partner's number for a
pair, :data:`SPREAD` for the job spread over servers), the rate given at submit and the
moving average of reports (:meth:`~hetsched.online.ThroughputEstimator.update`). The value
the scheduler uses is the average once a report came in, else the given rate, else the
reference table's (pairs and unconsolidated rows of the jobs' ``job_type``), else none (a
pair nobody knows is not offered; an unknown spread rate is taken equal to the
consolidated one).

:func:`online_packing` and :func:`online_sensitivity` build the :class:`Packing` and
:class:`PlacementSensitivity` that a policy with ``packing="workload"`` /
``placement_sensitivity="workload"`` solves with, over the active jobs (keyed by job number,
as the round loop names jobs). Without given or learned pair rates the packing is exactly
:meth:`Packing.from_catalogue` over the reference rows of the jobs' types, which is what
:func:`hetsched.simulate` binds for a catalogue workload. The round step binds them into the
policy (:mod:`.job_tables`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..formulations.spaces.packing import Packing
from ..inputs.throughputs import PairThroughputs, ThroughputCatalogue

__all__ = ["SPREAD", "SideRates", "online_packing", "online_sensitivity", "reference_rows"]

#: ``other`` of a spread (unconsolidated) rate.
SPREAD = -1


class SideRates:
    """Given and learned pair / spread rates (see the module docstring).

    Parameters
    ----------
    n_types : int
        GPU types (length of each rate vector).
    """

    def __init__(self, n_types: int) -> None:
        self.m = n_types
        self.given: dict[tuple[int, int], np.ndarray] = {}
        self.ema: dict[tuple[int, int], np.ndarray] = {}
        self.count: dict[tuple[int, int], np.ndarray] = {}
        self.linked: set[int] = set()      # jobs with a pair rate of their own (given or learned)
        self.spread_known = False          # some job has a spread rate of its own
        self.version = 0                   # bumped on every change (the bound policy is then stale)

    def _vec(self, table: dict, key: tuple[int, int], fill: float, dtype: Any = float) -> np.ndarray:
        v = table.get(key)
        if v is None:
            v = table[key] = np.full(self.m, fill, dtype=dtype)
        return v

    def _touch(self, num: int, other: int) -> None:
        if other == SPREAD:
            self.spread_known = True
        else:
            self.linked.update((num, other))
        self.version += 1

    def give(self, num: int, other: int, values: np.ndarray) -> None:
        """Rates given for ``(num, other)`` per type (NaN: not given)."""
        vec = self._vec(self.given, (num, other), np.nan)
        known = ~np.isnan(values)
        vec[known] = values[known]
        self._touch(num, other)

    def learn(self, num: int, other: int, k: int, ema: float, n: int) -> None:
        """Set the moving average of ``(num, other)`` on type ``k`` after ``n`` reports."""
        self._vec(self.ema, (num, other), np.nan)[k] = ema
        self._vec(self.count, (num, other), 0, np.int64)[k] = n
        self._touch(num, other)

    def ema_of(self, num: int, other: int, k: int) -> tuple[float, int]:
        """``(moving average, reports)`` of ``(num, other)`` on type ``k`` (NaN, 0 when none)."""
        e = self.ema.get((num, other))
        return (np.nan, 0) if e is None else (float(e[k]), int(self.count[(num, other)][k]))

    def value(self, num: int, other: int) -> np.ndarray:
        """The rate per type: learned where reported, else given, else NaN."""
        out = self.given.get((num, other))
        out = np.full(self.m, np.nan) if out is None else out.copy()
        e = self.ema.get((num, other))
        if e is not None:
            seen = self.count[(num, other)] > 0
            out[seen] = e[seen]
        return out

    def store_rows(self, num: int, other: int) -> list[tuple]:
        """``side_rates`` rows of ``(num, other)``: ``(num, other, type, given, ema, n)``."""
        g = self.given.get((num, other))
        e = self.ema.get((num, other))
        c = self.count.get((num, other))
        out = []
        for k in range(self.m):
            gk = None if g is None or np.isnan(g[k]) else float(g[k])
            ek = None if e is None or np.isnan(e[k]) else float(e[k])
            nk = 0 if c is None else int(c[k])
            if gk is not None or ek is not None:
                out.append((num, other, k, gk, ek, nk))
        return out

    def load(self, rows: Iterable[tuple]) -> None:
        """Fill from ``(num, other, type, given, ema, n)`` rows
        (:meth:`~hetsched.online.store.Store.load_side_rates`)."""
        for num, other, k, g, e, n in rows:
            if g is not None:
                self._vec(self.given, (num, other), np.nan)[k] = g
            if e is not None:
                self._vec(self.ema, (num, other), np.nan)[k] = e
                self._vec(self.count, (num, other), 0, np.int64)[k] = n
            self._touch(num, other)


def reference_rows(reference: ThroughputCatalogue | None, job_types: Sequence[str | None],
                   scale_factors: np.ndarray) -> np.ndarray:
    """Row of each ``(job_type, scale_factor)`` in ``reference`` (-1: none)."""
    if reference is None:
        return np.full(len(job_types), -1, np.int64)
    where = {(str(a), int(s)): i for i, (a, s) in enumerate(zip(reference.job_types, reference.scale_factors))}
    return np.array([-1 if t is None else where.get((t, int(s)), -1) for t, s in zip(job_types, scale_factors)],
                    dtype=np.int64)


def _aligned(values: np.ndarray, src_types: Sequence[str], gpu_types: Sequence[str]) -> np.ndarray:
    """``values[..., src type]`` re-ordered to ``gpu_types`` along the last axis but one or
    last (NaN for types ``src_types`` lacks); ``values`` has types on axis 1."""
    pos = {t: i for i, t in enumerate(src_types)}
    shape = list(values.shape)
    shape[1] = len(gpu_types)
    out = np.full(shape, np.nan)
    for k, t in enumerate(gpu_types):
        if t in pos:
            out[:, k] = values[:, pos[t]]
    return out


def online_sensitivity(active: np.ndarray, T: np.ndarray, sides: SideRates, reference: ThroughputCatalogue | None,
                       rows: np.ndarray, gpu_types: Sequence[str]) -> np.ndarray:
    """Spread (unconsolidated) rate of each active job per type (n_active, m): its own
    (learned, else given), else its reference row's, else its consolidated estimate; 0 where
    the job cannot run."""
    U = T.copy()
    if reference is not None and reference.unconsolidated is not None and (rows >= 0).any():
        has = rows >= 0
        ref = _aligned(reference.unconsolidated[rows[has]], reference.gpu_types, gpu_types)
        sub = U[has]
        U[has] = np.where(np.isnan(ref), sub, ref)
    if sides.spread_known:
        for i, j in enumerate(active.tolist()):
            if (j, SPREAD) in sides.given or (j, SPREAD) in sides.ema:
                v = sides.value(j, SPREAD)
                U[i] = np.where(np.isnan(v), U[i], v)
    return np.where(T > 0, U, 0.0)


def online_packing(active: np.ndarray, scale_factors: np.ndarray, T: np.ndarray, sides: SideRates,
                   reference: ThroughputCatalogue | None, rows: np.ndarray, gpu_types: Sequence[str]) -> Packing:
    """The pair table the policy solves with (see the module docstring).

    Jobs of a reference type without pair rates of their own share the reference's keys
    (one class per type, as :meth:`Packing.from_catalogue`); every other job gets a key of
    its own, paired with reference classes through its type's reference row and with other
    such jobs through their given or learned rates (else the reference's).
    """
    ref_pairs = None if reference is None else reference.pairs
    own = np.array([j in sides.linked for j in active.tolist()], dtype=bool) | (rows < 0)
    if ref_pairs is not None and not own.any():
        return Packing.from_catalogue(reference, rows, active)
    R = 0 if reference is None else len(reference)
    m = len(gpu_types)
    keys = np.where(own, R + np.cumsum(own) - 1, rows).astype(np.int64)
    idx: list[np.ndarray] = []
    thr: list[np.ndarray] = []
    if ref_pairs is not None:
        idx.append(np.asarray(ref_pairs.index, dtype=np.int64))
        thr.append(np.nan_to_num(_aligned(ref_pairs.throughputs, reference.gpu_types, gpu_types), nan=0.0))
    ref_thr = thr[0] if thr else None

    def ref_rate(ra: int, rb: int) -> np.ndarray:
        """(m, 2): ra's and rb's rates sharing, from the reference (zeros when unknown)."""
        if ref_thr is None or ra < 0 or rb < 0:
            return np.zeros((m, 2))
        p = int(ref_pairs.positions([ra], [rb])[0])
        if p < 0:
            return np.zeros((m, 2))
        v = ref_thr[p]
        return v[:, ::-1] if ra > rb else v

    linked = [i for i in np.flatnonzero(own).tolist() if int(active[i]) in sides.linked or rows[i] >= 0]
    classes = sorted(set(rows[~own].tolist()))
    for i in linked:
        j, ra, s = int(active[i]), int(rows[i]), int(scale_factors[i])
        for c in classes:          # this job with every reference class in use
            if ra < 0 or int(reference.scale_factors[c]) != s:
                continue
            v = ref_rate(c, ra)
            v = np.where(T[i][:, None] > 0, v, 0.0)
            if (v > 0).any():
                idx.append(np.array([[c, keys[i]]]))
                thr.append(v[None])
        for i2 in linked:          # and with every other such job
            if i2 <= i or int(scale_factors[i2]) != s:
                continue
            j2, rb = int(active[i2]), int(rows[i2])
            v = ref_rate(ra, rb).copy()
            mine, theirs = sides.value(j, j2), sides.value(j2, j)
            v[:, 0] = np.where(np.isnan(mine), v[:, 0], mine)
            v[:, 1] = np.where(np.isnan(theirs), v[:, 1], theirs)
            v = np.where((T[i] > 0) & (T[i2] > 0), v.T, 0.0).T
            if (v > 0).any():
                idx.append(np.array([[keys[i], keys[i2]]]))
                thr.append(v[None])
    index = np.concatenate(idx) if idx else np.zeros((0, 2), np.int64)
    table = np.concatenate(thr) if thr else np.zeros((0, m, 2))
    return Packing(PairThroughputs(index, table), gpu_types=gpu_types, keys=pd.Series(keys, index=active))

