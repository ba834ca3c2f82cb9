"""Throughput tables: :class:`ThroughputCatalogue` (rows ``(job_type, scale_factor)`` x GPU
types, with optional unconsolidated and pair tables) and :class:`PairThroughputs`.

:func:`reference_column` picks the GPU type that turns durations into steps. The tables are
filled by :mod:`.generator` (the project's synthetic generator) or :mod:`.gavel` (Gavel's
measured table).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ...errors import ValidationError
from ...validation import check_choice, check_matrix, check_names

__all__ = ["PairThroughputs", "ThroughputCatalogue", "reference_column"]


class PairThroughputs:
    """Co-location (space-sharing) throughputs of pairs of catalogue rows, as arrays.

    Pair ``p`` is the unordered pair of catalogue rows ``index[p] = (i, j)`` with
    ``i <= j`` (``i == j``: two jobs of the same row). ``throughputs[p, k, 0]`` is the
    throughput of row ``i`` and ``throughputs[p, k, 1]`` that of row ``j`` while they share
    GPUs of type ``k``; ``(0, 0)`` means the pair cannot share that type (e.g. it does not
    fit in memory), the convention of Gavel's measured table.

    Parameters
    ----------
    index : array-like of int, shape (n_pairs, 2)
        Row pairs, ``index[:, 0] <= index[:, 1]``, no pair listed twice.
    throughputs : array-like of float, shape (n_pairs, n_gpu_types, 2)
        Consolidated co-location throughputs, finite and non-negative.
    unconsolidated : array-like of float, shape (n_pairs, n_gpu_types, 2), optional
        The same for jobs spread over several servers.

    Examples
    --------
    >>> pairs = PairThroughputs([[0, 1]], [[[2.0, 1.5]]])
    >>> len(pairs), pairs.lookup(1, 0).tolist()
    (1, [[1.5, 2.0]])
    >>> pairs.positions([0, 1], [1, 1]).tolist()
    [0, -1]
    """

    __slots__ = ("_codes", "index", "throughputs", "unconsolidated")

    def __init__(self, index: Any, throughputs: Any, unconsolidated: Any = None) -> None:
        idx = np.asarray(index)
        if idx.size == 0:
            idx = idx.reshape(0, 2)
        if idx.ndim != 2 or idx.shape[1] != 2:
            raise ValidationError(f"`index` must have shape (n_pairs, 2); got {idx.shape}.")
        if idx.size and (idx.dtype.kind not in "iu"):
            raise ValidationError(f"`index` must hold integer row numbers; got dtype {idx.dtype}.")
        idx = idx.astype(np.int64)
        if (idx < 0).any():
            p = int(np.flatnonzero((idx < 0).any(axis=1))[0])
            raise ValidationError(f"`index` must hold non-negative row numbers; pair {p} is {idx[p].tolist()}.")
        if (idx[:, 0] > idx[:, 1]).any():
            p = int(np.flatnonzero(idx[:, 0] > idx[:, 1])[0])
            raise ValidationError(f"`index` pairs must be ordered (i <= j); pair {p} is {idx[p].tolist()}.")
        codes = (idx[:, 0] << 32) | idx[:, 1]
        order = np.argsort(codes, kind="stable")
        sorted_codes = codes[order]
        dup = np.flatnonzero(sorted_codes[1:] == sorted_codes[:-1])
        if dup.size:
            p = int(order[dup[0]])
            raise ValidationError(f"`index` must list each pair once; {idx[p].tolist()} appears twice.")
        self.index = idx
        self.index.setflags(write=False)
        self.throughputs = _pair_array(throughputs, idx.shape[0], "throughputs")
        self.unconsolidated = (
            None if unconsolidated is None else _pair_array(unconsolidated, idx.shape[0], "unconsolidated")
        )
        if self.unconsolidated is not None and self.unconsolidated.shape != self.throughputs.shape:
            raise ValidationError(
                f"`unconsolidated` must have the shape of `throughputs` {self.throughputs.shape}; "
                f"got {self.unconsolidated.shape}."
            )
        self._codes = codes

    @property
    def n_gpu_types(self) -> int:
        """Number of GPU types (second axis of ``throughputs``)."""
        return int(self.throughputs.shape[1])

    def __len__(self) -> int:
        return int(self.index.shape[0])

    def positions(self, rows_a: Any, rows_b: Any) -> np.ndarray:
        """Pair position of each ``(rows_a[n], rows_b[n])``, in either order; -1 when absent."""
        a = np.asarray(rows_a, dtype=np.int64)
        b = np.asarray(rows_b, dtype=np.int64)
        want = (np.minimum(a, b) << 32) | np.maximum(a, b)
        if len(self._codes) == 0:
            return np.full(want.shape, -1, dtype=np.int64)
        order = np.argsort(self._codes, kind="stable")
        sorted_codes = self._codes[order]
        pos = np.minimum(np.searchsorted(sorted_codes, want), len(sorted_codes) - 1)
        return np.where(sorted_codes[pos] == want, order[pos], -1).astype(np.int64)

    def lookup(self, row_a: int, row_b: int, *, unconsolidated: bool = False) -> np.ndarray:
        """Throughputs of rows ``(row_a, row_b)`` sharing each GPU type, shape (n_gpu_types, 2).

        Column 0 is ``row_a``'s throughput, column 1 ``row_b``'s (swapped from storage
        order when ``row_a > row_b``).

        Raises
        ------
        KeyError
            If the pair is not in the table.
        """
        p = int(self.positions([row_a], [row_b])[0])
        if p < 0:
            raise KeyError((row_a, row_b))
        table = self.throughputs
        if unconsolidated:
            if self.unconsolidated is None:
                raise KeyError("this pair table has no unconsolidated throughputs")
            table = self.unconsolidated
        out = table[p].copy()
        return out[:, ::-1].copy() if row_a > row_b else out

    def take_columns(self, columns: Any) -> PairThroughputs:
        """A pair table restricted to GPU-type columns ``columns`` (integer positions)."""
        cols = np.asarray(columns, dtype=np.int64)
        return PairThroughputs(
            self.index,
            self.throughputs[:, cols, :],
            None if self.unconsolidated is None else self.unconsolidated[:, cols, :],
        )

    def __repr__(self) -> str:
        return (
            f"PairThroughputs(n_pairs={len(self)}, n_gpu_types={self.n_gpu_types}, "
            f"unconsolidated={self.unconsolidated is not None})"
        )


def _pair_array(value: Any, n_pairs: int, name: str) -> np.ndarray:
    arr = check_matrix(value, name, shape=(n_pairs, -1, 2),
                       shape_text=f"(n_pairs, n_gpu_types, 2) with n_pairs = {n_pairs}",
                       where=lambda i: f"pair {i[0]}, GPU column {i[1]}, member {i[2]}")
    arr.setflags(write=False)
    return arr


# ------------------------------------------------------------------------- catalogue
class ThroughputCatalogue:
    """A throughput table: rows ``(job_type, scale_factor)`` x GPU types, values in steps/s.

    Parameters
    ----------
    job_types : sequence of str, length n_rows
        Job type (model and batch size) of each row.
    scale_factors : sequence of int, length n_rows
        GPUs the row's job uses at once (positive integers). ``(job_type, scale_factor)``
        must be unique.
    gpu_types : sequence of str
        Column labels (unique, non-empty).
    throughputs : array-like, shape (n_rows, n_gpu_types)
        Consolidated throughput: steps/s of the row's job on ``scale_factor`` GPUs of the
        type on one server. Finite, non-negative; 0 means the job cannot run on that type.
    unconsolidated : array-like, shape (n_rows, n_gpu_types), optional
        Throughput when the job's GPUs are spread over several servers.
    pairs : PairThroughputs, optional
        Co-location throughputs; its row numbers refer to this catalogue's rows and its
        GPU axis to ``gpu_types``.

    Attributes
    ----------
    job_types : numpy.ndarray of object
        Per-row job type.
    scale_factors : numpy.ndarray of int64
        Per-row scale factor.
    gpu_types : tuple of str
        Column labels.
    throughputs, unconsolidated : numpy.ndarray or None
        Read-only tables.
    pairs : PairThroughputs or None

    Examples
    --------
    >>> cat = ThroughputCatalogue(["resnet", "resnet", "lm"], [1, 2, 1], ["v100", "k80"],
    ...                           [[10.0, 2.0], [18.0, 3.5], [4.0, 1.0]])
    >>> len(cat), cat.gpu_types
    (3, ('v100', 'k80'))
    >>> float(cat.rows.loc[("resnet", 2), "v100"])
    18.0
    >>> cat.subset(["k80"]).throughputs[:, 0].tolist()
    [2.0, 3.5, 1.0]
    """

    __slots__ = ("_index", "gpu_types", "job_types", "pairs", "scale_factors", "throughputs", "unconsolidated")

    def __init__(
        self,
        job_types: Sequence[str],
        scale_factors: Sequence[int],
        gpu_types: Sequence[str],
        throughputs: Any,
        *,
        unconsolidated: Any = None,
        pairs: PairThroughputs | None = None,
    ) -> None:
        self.gpu_types = check_names(gpu_types, "gpu_types", what="GPU type names")
        if isinstance(job_types, str):
            raise ValidationError(f"`job_types` must be a sequence of names; got the string {job_types!r}.")
        jt = np.empty(len(job_types), dtype=object)
        jt[:] = list(job_types)
        for v in jt:
            if not isinstance(v, str) or not v:
                raise ValidationError(f"`job_types` must hold non-empty strings; got {v!r}.")
        n = jt.shape[0]
        sf_raw = np.asarray(scale_factors)
        if sf_raw.shape != (n,):
            raise ValidationError(f"`scale_factors` must have shape (n_rows,) = ({n},); got {sf_raw.shape}.")
        if n:
            try:
                sf_f = sf_raw.astype(float)
            except (TypeError, ValueError):
                raise ValidationError(f"`scale_factors` must be positive integers; got {scale_factors!r:.80}.") from None
            bad = ~np.isfinite(sf_f) | (sf_f < 1) | (sf_f != np.round(sf_f))
            if sf_raw.dtype == bool:
                bad = np.ones(n, dtype=bool)
            if bad.any():
                r = int(np.flatnonzero(bad)[0])
                raise ValidationError(
                    f"`scale_factors` must be positive integers; row {r} ({jt[r]!r}) has {sf_raw[r]!r}."
                )
        sf = sf_raw.astype(np.int64) if n else np.zeros(0, dtype=np.int64)
        index = pd.MultiIndex.from_arrays([jt, sf], names=["job_type", "scale_factor"])
        if not index.is_unique:
            dup = index[index.duplicated()].unique().tolist()[:5]
            raise ValidationError(f"rows `(job_type, scale_factor)` must be unique; duplicated: {dup}.")
        self.job_types = jt
        self.scale_factors = sf
        self.job_types.setflags(write=False)
        self.scale_factors.setflags(write=False)
        self._index = index
        self.throughputs = self._table(throughputs, "throughputs")
        self.unconsolidated = None if unconsolidated is None else self._table(unconsolidated, "unconsolidated")
        if pairs is not None:
            if not isinstance(pairs, PairThroughputs):
                raise ValidationError(f"`pairs` must be a PairThroughputs; got {type(pairs).__name__}.")
            if pairs.n_gpu_types != len(self.gpu_types):
                raise ValidationError(
                    f"`pairs` must have one GPU column per GPU type ({len(self.gpu_types)}); "
                    f"got {pairs.n_gpu_types}."
                )
            if len(pairs) and int(pairs.index.max()) >= n:
                raise ValidationError(
                    f"`pairs.index` must refer to rows 0..{n - 1}; got row {int(pairs.index.max())}."
                )
        self.pairs = pairs

    def _table(self, value: Any, name: str) -> np.ndarray:
        n, m = len(self.job_types), len(self.gpu_types)
        T = check_matrix(value, name, shape=(n, m), shape_text=f"(n_rows, n_gpu_types) = ({n}, {m})",
                         where=lambda i: f"row {self.key(i[0])!r} on GPU type {self.gpu_types[i[1]]!r}")
        T.setflags(write=False)
        return T

    # ---------------------------------------------------------------- queries
    def __len__(self) -> int:
        return int(self.job_types.shape[0])

    @property
    def n_gpu_types(self) -> int:
        """Number of GPU types (columns)."""
        return len(self.gpu_types)

    def key(self, row: int) -> tuple[str, int]:
        """The ``(job_type, scale_factor)`` of row number ``row``."""
        return (str(self.job_types[row]), int(self.scale_factors[row]))

    @property
    def rows(self) -> pd.DataFrame:
        """Consolidated throughputs as a DataFrame indexed by ``(job_type, scale_factor)``."""
        return self.to_frame()

    def to_frame(self, *, unconsolidated: bool = False) -> pd.DataFrame:
        """The consolidated (or unconsolidated) table as a DataFrame, one column per GPU type.

        Raises
        ------
        ValidationError
            If ``unconsolidated=True`` and the catalogue has no unconsolidated table.
        """
        table = self.throughputs
        if unconsolidated:
            if self.unconsolidated is None:
                raise ValidationError("`unconsolidated=True` needs a catalogue with an unconsolidated table; this one has none.")
            table = self.unconsolidated
        return pd.DataFrame(table, index=self._index.copy(), columns=list(self.gpu_types))

    @property
    def job_type_names(self) -> tuple[str, ...]:
        """Distinct job types, in order of first appearance."""
        return tuple(pd.unique(self.job_types))

    @property
    def available_scale_factors(self) -> tuple[int, ...]:
        """Distinct scale factors, ascending."""
        return tuple(int(s) for s in np.unique(self.scale_factors))

    def index_of(self, job_types: Any, scale_factors: Any) -> np.ndarray:
        """Row numbers of the rows ``(job_types[n], scale_factors[n])`` (vectorized).

        Raises
        ------
        ValidationError
            If a requested row is not in the catalogue, or the arguments are not a sequence
            of job type names and integer scale factors.
        """
        if isinstance(job_types, Mapping) or isinstance(scale_factors, Mapping):
            bad, name = (job_types, "job_types") if isinstance(job_types, Mapping) else (scale_factors, "scale_factors")
            raise ValidationError(f"`{name}` must be a sequence (one entry per requested row); got {type(bad).__name__}.")
        jt = np.asarray(job_types, dtype=object).ravel()
        sf = np.asarray(scale_factors).ravel()
        if sf.dtype.kind not in "iu" and not (sf.dtype.kind == "f" and np.all(np.isfinite(sf)) and np.all(sf == np.round(sf))):
            raise ValidationError(f"`scale_factors` must be integers; got {sf.tolist()[:5]!r} (dtype {sf.dtype}).")
        try:
            if sf.shape != jt.shape:
                sf = np.broadcast_to(sf, jt.shape)
            want = pd.MultiIndex.from_arrays([jt, sf.astype(np.int64)])
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"`job_types` must be job type names and `scale_factors` integers, one per "
                                  f"requested row ({len(jt)} job types, {sf.size} scale factors): {exc}.") from None
        pos = self._index.get_indexer(want)
        if (pos < 0).any():
            i = int(np.flatnonzero(pos < 0)[0])
            raise ValidationError(
                f"row ({jt[i]!r}, {int(sf[i])}) is not in the catalogue "
                f"({int((pos < 0).sum())} requested row(s) missing)."
            )
        return pos.astype(np.int64)

    def subset(self, gpu_types: Sequence[str]) -> ThroughputCatalogue:
        """A catalogue with only (and in the order of) the GPU types ``gpu_types``.

        Rows are kept even when they become all zero (such rows are never sampled by
        :func:`hetsched.inputs.workloads.sample_jobs`).

        Raises
        ------
        ValidationError
            If a type is not in the catalogue, is repeated, or none is given.
        """
        wanted = check_names(gpu_types, "gpu_types", what="GPU type names")
        pos = {t: i for i, t in enumerate(self.gpu_types)}
        missing = [t for t in wanted if t not in pos]
        if missing:
            raise ValidationError(
                f"`gpu_types` must name types of the catalogue {list(self.gpu_types)}; unknown: {missing}."
            )
        cols = np.array([pos[t] for t in wanted], dtype=np.int64)
        return ThroughputCatalogue(
            self.job_types,
            self.scale_factors,
            wanted,
            self.throughputs[:, cols],
            unconsolidated=None if self.unconsolidated is None else self.unconsolidated[:, cols],
            pairs=None if self.pairs is None else self.pairs.take_columns(cols),
        )

    def __repr__(self) -> str:
        return (
            f"ThroughputCatalogue(n_rows={len(self)}, job_types={len(self.job_type_names)}, "
            f"scale_factors={list(self.available_scale_factors)}, gpu_types={list(self.gpu_types)}, "
            f"unconsolidated={self.unconsolidated is not None}, "
            f"pairs={0 if self.pairs is None else len(self.pairs)})"
        )


def reference_column(catalogue: ThroughputCatalogue, reference_gpu_type: str | None = None) -> int:
    """Column of ``reference_gpu_type`` in ``catalogue`` (default: the type with the largest
    median positive throughput, the V100 for Gavel's table): the type whose throughput turns
    a duration into steps or an SLO multiplier into a deadline."""
    if not isinstance(catalogue, ThroughputCatalogue):
        raise ValidationError(f"`catalogue` must be a hetsched.ThroughputCatalogue; got {type(catalogue).__name__}.")
    if reference_gpu_type is None:
        T = catalogue.throughputs
        med = np.array([np.median(T[T[:, k] > 0, k]) if (T[:, k] > 0).any() else 0.0 for k in range(T.shape[1])])
        return int(np.argmax(med))
    check_choice(reference_gpu_type, "reference_gpu_type", catalogue.gpu_types,
                 rule=f"one of the catalogue's GPU types {list(catalogue.gpu_types)}")
    return catalogue.gpu_types.index(reference_gpu_type)

