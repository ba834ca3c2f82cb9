"""The online scheduler's jobs as growable numpy columns (one row per submitted job, in
submit order; a job's row number is its *number*, the name the round loop uses)."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

__all__ = ["ACTIVE", "CANCELLED", "COMPLETED", "STATUS_NAMES", "JobTable"]

ACTIVE, COMPLETED, CANCELLED = 0, 1, 2
STATUS_NAMES = {ACTIVE: "active", COMPLETED: "completed", CANCELLED: "cancelled"}

#: (name, dtype, fill) of the per-job columns; ``profile``, ``ema``, ``n_measured``,
#: ``matched`` are (n, m) matrices.
_COLUMNS: tuple[tuple[str, Any, Any], ...] = (
    ("sf", np.int64, 1), ("weight", float, 1.0), ("total", float, np.nan), ("arrival", float, 0.0),
    ("deadline", float, np.inf), ("status", np.int64, ACTIVE), ("done", float, 0.0), ("iso_time", float, 0.0),
    ("iso_rate", float, np.nan), ("finish", float, np.nan), ("last_end", float, -np.inf),
    ("pending_s", float, 0.0),
)
_MATRICES: tuple[tuple[str, Any, Any], ...] = (
    ("profile", float, np.nan), ("ema", float, np.nan), ("n_measured", np.int64, 0), ("matched", float, np.nan),
)


def id_key(job_id: Any) -> tuple[str, str]:
    """``(kind, text)`` of a job id (``"i"`` for int, ``"s"`` for str), the store's key."""
    return ("i", str(int(job_id))) if isinstance(job_id, (int, np.integer)) else ("s", str(job_id))


def id_value(kind: str, text: str) -> Any:
    """The job id back from its key."""
    return int(text) if kind == "i" else text


class JobTable:
    """Columns of every submitted job (see the module docstring).

    Parameters
    ----------
    n_types : int
        GPU types (columns of the matrices).
    """

    def __init__(self, n_types: int) -> None:
        self.m = n_types
        self.n = 0
        self.ids: list[Any] = []
        self.job_type: list[str | None] = []
        self.entity: list[str | None] = []
        self.index: dict[tuple[str, str], int] = {}
        self._cap = 0
        for name, dtype, fill in _COLUMNS:
            setattr(self, name, np.full(0, fill, dtype=dtype))
        for name, dtype, fill in _MATRICES:
            setattr(self, name, np.full((0, n_types), fill, dtype=dtype))
        self._ids_array: np.ndarray | None = None
        self._entities_array: np.ndarray | None = None
        self.has_entities = False

    def _grow(self, need: int) -> None:
        if need <= self._cap:
            return
        cap = max(need, 2 * self._cap, 64)
        for name, dtype, fill in _COLUMNS:
            old = getattr(self, name)
            new = np.full(cap, fill, dtype=dtype)
            new[:self.n] = old[:self.n]
            setattr(self, name, new)
        for name, dtype, fill in _MATRICES:
            old = getattr(self, name)
            new = np.full((cap, self.m), fill, dtype=dtype)
            new[:self.n] = old[:self.n]
            setattr(self, name, new)
        self._cap = cap

    def add(self, job_id: Any, *, job_type: str | None, sf: int, weight: float, total: float | None, arrival: float,
            deadline: float | None, entity: str | None, profile: np.ndarray | None) -> int:
        """Append a job; returns its number."""
        j = self.n
        self._grow(j + 1)
        self.n = j + 1
        self.ids.append(job_id)
        self.job_type.append(job_type)
        self.entity.append(entity)
        self.index[id_key(job_id)] = j
        self.sf[j] = sf
        self.weight[j] = weight
        self.total[j] = np.nan if total is None else total
        self.arrival[j] = arrival
        self.deadline[j] = np.inf if deadline is None else deadline
        if profile is not None:
            self.profile[j] = profile
        self._ids_array = None
        self._entities_array = None
        self.has_entities = self.has_entities or entity is not None
        return j

    def pop_last(self) -> None:
        """Undo the last :meth:`add` (a submit whose store write failed)."""
        self.n -= 1
        job_id = self.ids.pop()
        self.job_type.pop()
        self.entity.pop()
        del self.index[id_key(job_id)]
        for name, _, fill in _COLUMNS + _MATRICES:
            getattr(self, name)[self.n] = fill
        self._ids_array = self._entities_array = None
        self.has_entities = any(e is not None for e in self.entity)

    def view(self, name: str) -> np.ndarray:
        """Column ``name`` over the jobs so far (a view, not a copy)."""
        return getattr(self, name)[:self.n]

    @property
    def ids_array(self) -> np.ndarray:
        """Job ids by number (object array, cached)."""
        if self._ids_array is None or self._ids_array.shape[0] != self.n:
            arr = np.empty(self.n, dtype=object)
            arr[:] = self.ids
            self._ids_array = arr
        return self._ids_array

    @property
    def entities_array(self) -> np.ndarray:
        """Entity of each job by number, "" for none (object array, cached)."""
        if self._entities_array is None or self._entities_array.shape[0] != self.n:
            arr = np.empty(self.n, dtype=object)
            arr[:] = ["" if e is None else e for e in self.entity]
            self._entities_array = arr
        return self._entities_array

    def active(self) -> np.ndarray:
        """Numbers of the active jobs, ascending."""
        return np.flatnonzero(self.status[:self.n] == ACTIVE)

    # ------------------------------------------------------------------ store rows
    def job_row(self, j: int, profile_json: str | None) -> tuple:
        """The ``jobs`` table row of job ``j``."""
        kind, text = id_key(self.ids[j])
        total = float(self.total[j])
        dl = float(self.deadline[j])
        return (j, text, kind, self.job_type[j], int(self.sf[j]), float(self.weight[j]),
                None if math.isnan(total) else total, float(self.arrival[j]), None if math.isinf(dl) else dl,
                self.entity[j], profile_json, int(self.status[j]), float(self.done[j]), float(self.iso_time[j]),
                None if math.isnan(self.finish[j]) else float(self.finish[j]))

    def load(self, rows: list[tuple], gpu_types: tuple[str, ...]) -> None:
        """Fill from the ``jobs`` rows in submit order (:meth:`~hetsched.online.store.Store.load_jobs`; the
        table must be empty)."""
        col = {t: k for k, t in enumerate(gpu_types)}
        for (num, text, kind, job_type, sf, weight, total, arrival, deadline, entity, profile, status, done, iso,
             finish) in rows:
            if num != self.n:
                raise ValueError(f"job numbers are not contiguous: expected {self.n}, found {num}")
            prof = None
            if profile is not None:
                prof = np.full(self.m, np.nan)
                for t, v in json.loads(profile).items():
                    prof[col[t]] = v
            j = self.add(id_value(kind, text), job_type=job_type, sf=sf, weight=weight, total=total, arrival=arrival,
                         deadline=deadline, entity=entity, profile=prof)
            self.status[j] = status
            self.done[j] = done
            self.iso_time[j] = iso
            self.finish[j] = np.nan if finish is None else finish
