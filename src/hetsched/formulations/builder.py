"""Bulk assembly of LinearProgram records from index arrays (no per-variable objects)."""

from __future__ import annotations

from functools import cached_property
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..solvers.program import LinearProgram

__all__ = ["AllocationVars", "ProgramBuilder"]


def _cat(parts: list[np.ndarray], dtype: type = float) -> np.ndarray:
    """The concatenation of accumulated blocks (an empty array of ``dtype`` when none)."""
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


class AllocationVars:
    """The X block of a program: one variable per (job, type) pair that can be used.

    A pair is usable when the job has positive throughput on the type and the cluster has
    at least ``scale_factor`` GPUs of it (a gang never splits across types within a
    slice of time).

    Attributes
    ----------
    mask : ndarray of bool, shape (n, m)
    x_index : ndarray of int, shape (n, m)
        Variable index of X[j, k], -1 where unusable.
    job, gpu : ndarray of int, shape (n_x,)
        Job row and type column of each X variable, in variable order.
    start, size : int
        Position of the block in x and its length.
    """

    def __init__(self, mask: np.ndarray, start: int) -> None:
        self.mask = mask
        self.start = start
        if mask.all():    # every pair usable (large benchmarks): the indices are a plain range
            self.size = int(mask.size)
            self.x_index = np.arange(start, start + self.size, dtype=np.int64).reshape(mask.shape)
        else:
            flat = np.flatnonzero(mask)
            self.size = int(flat.shape[0])
            self.x_index = np.full(mask.shape, -1, dtype=np.int64)
            self.x_index.reshape(-1)[flat] = np.arange(start, start + self.size, dtype=np.int64)

    @cached_property
    def _job_gpu(self) -> tuple[np.ndarray, np.ndarray]:
        """(job, type) of each X variable, computed on first use: the level program's direct
        assembly never needs them, and at 10^6 x 10 they are 160 MB."""
        return np.nonzero(self.mask)

    @property
    def job(self) -> np.ndarray:
        """Job row of each X variable."""
        return self._job_gpu[0]

    @property
    def gpu(self) -> np.ndarray:
        """Type column of each X variable."""
        return self._job_gpu[1]

    @property
    def cols(self) -> np.ndarray:
        """Variable indices of the block, in order."""
        return np.arange(self.start, self.start + self.size, dtype=np.int64)


class ProgramBuilder:
    """Accumulates columns and COO row blocks, then assembles one CSR matrix.

    Examples
    --------
    >>> b = ProgramBuilder()
    >>> x = b.add_vars(2, lb=0.0, ub=np.inf, cost=[1.0, 1.0])
    >>> _ = b.add_rows(rows=[0, 0], cols=[x, x + 1], vals=[1.0, 2.0], lb=-np.inf, ub=4.0, n_rows=1)
    >>> lp = b.build(sense="max", x_index=np.array([[0, 1]]))
    >>> lp.n_vars, lp.n_rows
    (2, 1)
    """

    def __init__(self) -> None:
        self._c: list[np.ndarray] = []
        self._lb: list[np.ndarray] = []
        self._ub: list[np.ndarray] = []
        self._int: list[np.ndarray] = []
        self.n_vars = 0
        self._r: list[np.ndarray] = []
        self._k: list[np.ndarray] = []
        self._v: list[np.ndarray] = []
        self._rlb: list[np.ndarray] = []
        self._rub: list[np.ndarray] = []
        self.n_rows = 0
        self._first_row = 0  # rows below this one existed before the builder (see appending)

    @classmethod
    def appending(cls, n_vars: int, n_rows: int) -> ProgramBuilder:
        """A builder for rows added below ``n_rows`` existing rows over ``n_vars`` existing
        variables (read them back with :meth:`row_block`)."""
        b = cls()
        b.n_vars, b.n_rows = int(n_vars), int(n_rows)
        b._first_row = int(n_rows)
        return b

    def row_block(self) -> tuple[sp.csr_array, np.ndarray, np.ndarray]:
        """The rows added to an :meth:`appending` builder: (matrix, row_lb, row_ub)."""
        first = self._first_row
        A = sp.csr_array((_cat(self._v), (_cat(self._r, np.int64) - first, _cat(self._k, np.int64))),
                         shape=(self.n_rows - first, self.n_vars))
        return A, _cat(self._rlb), _cat(self._rub)

    def add_vars(self, n: int, *, lb: Any = 0.0, ub: Any = np.inf, cost: Any = 0.0, integer: bool = False) -> int:
        """Add ``n`` variables; returns the index of the first."""
        start = self.n_vars
        self._c.append(np.broadcast_to(np.asarray(cost, dtype=float), (n,)).copy())
        self._lb.append(np.broadcast_to(np.asarray(lb, dtype=float), (n,)).copy())
        self._ub.append(np.broadcast_to(np.asarray(ub, dtype=float), (n,)).copy())
        self._int.append(np.full(n, bool(integer)))
        self.n_vars += n
        return start

    def add_allocation(self, mask: np.ndarray, *, cost: Any = 0.0, ub: Any = np.inf) -> AllocationVars:
        """Add one variable per True entry of ``mask`` (row-major) and return the block."""
        block = AllocationVars(mask, self.n_vars)
        self.add_vars(block.size, lb=0.0, ub=ub, cost=cost)
        return block

    def add_rows(self, *, rows: Any, cols: Any, vals: Any, lb: Any, ub: Any, n_rows: int) -> int:
        """Add ``n_rows`` rows given as COO triplets with *local* row numbers 0..n_rows-1."""
        start = self.n_rows
        r = np.asarray(rows, dtype=np.int64)
        self._r.append(r + start)
        self._k.append(np.asarray(cols, dtype=np.int64))
        self._v.append(np.broadcast_to(np.asarray(vals, dtype=float), r.shape).copy())
        self._rlb.append(np.broadcast_to(np.asarray(lb, dtype=float), (n_rows,)).copy())
        self._rub.append(np.broadcast_to(np.asarray(ub, dtype=float), (n_rows,)).copy())
        self.n_rows += n_rows
        return start

    def set_cost(self, index: Any, value: Any) -> None:
        """Overwrite objective coefficients at global variable indices."""
        c = np.concatenate(self._c) if self._c else np.zeros(0)
        c[np.asarray(index)] = value
        self._c = [c]

    def build(self, *, sense: str, x_index: np.ndarray, name: str = "lp", offset: float = 0.0,
              meta: dict[str, Any] | None = None) -> LinearProgram:
        """Assemble the :class:`LinearProgram` (duplicates in COO are summed)."""
        A = sp.csr_array(
            (_cat(self._v), (_cat(self._r, np.int64), _cat(self._k, np.int64))),
            shape=(self.n_rows, self.n_vars),
        )
        integ = _cat(self._int, bool)
        return LinearProgram(
            c=_cat(self._c),
            A=A,
            row_lb=_cat(self._rlb),
            row_ub=_cat(self._rub),
            col_lb=_cat(self._lb),
            col_ub=_cat(self._ub),
            x_index=x_index,
            sense=sense,
            integrality=integ if integ.any() else None,
            offset=offset,
            name=name,
            meta=dict(meta or {}),
        )
