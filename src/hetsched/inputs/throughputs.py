"""Throughput tables: job types x GPU types, their generator and a Gavel-format loader.

A :class:`ThroughputCatalogue` holds, for every *row* ``(job_type, scale_factor)``, the
training throughput (steps/s) of that job on ``scale_factor`` GPUs of each GPU type:

* ``throughputs`` -- the job's GPUs on one server (consolidated);
* ``unconsolidated`` (optional) -- the same job spread over several servers;
* ``pairs`` (optional) -- two rows sharing the same GPUs (space sharing), as arrays.

Two sources fill it:

* :func:`generate_catalogue`, the project's own synthetic generator, whose parameters come
  from published measurements (see ``docs/data.md``); it is the default data everywhere.
* :func:`load_gavel_throughputs`, a reader of the JSON format Gavel publishes its measured
  table in, from a local path the user gives (nothing is ever downloaded).
"""

from __future__ import annotations

import ast
import json
import logging
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import DataNotFoundError, ValidationError
from ..validation import (
    as_rng,
    check_bool,
    check_choice,
    check_int,
    check_interval,
    check_matrix,
    check_names,
    check_nonneg,
    check_positive,
    check_probability,
)

__all__ = [
    "DEFAULT_SPEEDUPS",
    "GAVEL_THROUGHPUTS_ENV",
    "UNCONSOLIDATED_SUFFIX",
    "PairThroughputs",
    "ThroughputCatalogue",
    "gavel_throughputs",
    "gavel_throughputs_path",
    "generate_catalogue",
    "load_gavel_throughputs",
]

log = logging.getLogger(__name__)

#: Median single-GPU speedup of each known GPU type over a K80, used by
#: :func:`generate_catalogue` when ``gpu_types`` is a list of names. Sources in docs/data.md:
#: K80/P100/V100 from Gavel (Narayanan et al., OSDI'20, Fig. 1 and its published
#: measurement table); A100 is a project assumption (about 2x a V100).
DEFAULT_SPEEDUPS: dict[str, float] = {"k80": 1.0, "p100": 3.0, "v100": 4.0, "a100": 8.0}

#: Suffix that marks a GPU type's unconsolidated table in Gavel's JSON format.
UNCONSOLIDATED_SUFFIX = "_unconsolidated"


# ----------------------------------------------------------------------------- pairs
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
            If a requested row is not in the catalogue.
        """
        jt = np.asarray(job_types, dtype=object).ravel()
        sf = np.asarray(scale_factors).ravel()
        if sf.shape != jt.shape:
            sf = np.broadcast_to(sf, jt.shape)
        want = pd.MultiIndex.from_arrays([jt, sf.astype(np.int64)])
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
    if reference_gpu_type is None:
        T = catalogue.throughputs
        med = np.array([np.median(T[T[:, k] > 0, k]) if (T[:, k] > 0).any() else 0.0 for k in range(T.shape[1])])
        return int(np.argmax(med))
    check_choice(reference_gpu_type, "reference_gpu_type", catalogue.gpu_types,
                 rule=f"one of the catalogue's GPU types {list(catalogue.gpu_types)}")
    return catalogue.gpu_types.index(reference_gpu_type)


# ---------------------------------------------------------------------- Gavel loader
def load_gavel_throughputs(path: str | Path, *, strict: bool = False) -> ThroughputCatalogue:
    """Read a throughput table in Gavel's JSON format from a local file.

    The format (Gavel's ``simulation_throughputs.json``) is::

        { gpu_type: { "(job_type, scale_factor)": {
              "null": isolated_throughput,
              "(other_job_type, other_scale_factor)": [thr_self, thr_other], ... } } }

    Keys are Python tuple literals and are parsed with :func:`ast.literal_eval` (job type
    names may contain parentheses, e.g. ``"('ResNet-18 (batch size 16)', 1)"``).

    Parameters
    ----------
    path : str or pathlib.Path
        Local JSON file. Nothing is downloaded.
    strict : bool, default False
        Raise when a row (or the unconsolidated table of a type) is missing on some GPU
        type, or when mirrored pair entries disagree, instead of applying the rules below.

    Returns
    -------
    ThroughputCatalogue
        Rows sorted by ``(job_type, scale_factor)``; GPU types in file order.

    Notes
    -----
    Rules for incomplete files (each logged at INFO/WARNING level):

    * GPU types named ``X_unconsolidated`` fill column ``X`` of ``unconsolidated``; such a
      type without a consolidated ``X`` is an error. When some types have an unconsolidated
      table and others do not, the latter's unconsolidated column copies the consolidated
      one. When no type has one, ``unconsolidated`` is ``None``.
    * A row present on some GPU types and absent on others has throughput **0** where it
      is absent (the job cannot run there; Gavel itself writes 0 for what it could not
      run), unless ``strict``.
    * Pairs are stored once per unordered pair of rows; a pair absent on a GPU type has
      throughputs ``(0, 0)`` there (cannot share). When a pair appears under both of its
      rows, the entry under the lower row number is kept (a disagreeing mirror is logged,
      or an error when ``strict``).

    Raises
    ------
    ValidationError
        Missing or unreadable file, malformed JSON or key, a throughput that is not a
        finite non-negative number (the message names the GPU type and the key), a pair
        naming an unknown row, or an incomplete file under ``strict``.

    Examples
    --------
    >>> import json, tempfile, os
    >>> table = {"v100": {"('A (batch size 8)', 1)": {"null": 4.0,
    ...                                          "('A (batch size 8)', 1)": [2.5, 2.5]}},
    ...          "k80": {"('A (batch size 8)', 1)": {"null": 1.0}}}
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = os.path.join(d, "t.json")
    ...     with open(p, "w") as f:
    ...         json.dump(table, f)
    ...     cat = load_gavel_throughputs(p)
    >>> cat.gpu_types, cat.throughputs.tolist()
    (('v100', 'k80'), [[4.0, 1.0]])
    >>> cat.pairs.lookup(0, 0).tolist()
    [[2.5, 2.5], [0.0, 0.0]]
    """
    p = Path(path)
    if not p.is_file():
        raise ValidationError(f"`path` must be an existing file; got {str(p)!r}, which does not exist or is not a file.")
    try:
        with p.open("r", encoding="utf-8") as f:
            raw = json.load(f)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"`path` {str(p)!r} must hold valid JSON; {exc}.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValidationError(f"`path` {str(p)!r} could not be read: {exc}.") from None
    return _catalogue_from_gavel_dict(raw, source=str(p), strict=strict)


#: Environment variable naming Gavel's ``simulation_throughputs.json`` on this machine.
GAVEL_THROUGHPUTS_ENV = "HETSCHED_GAVEL_THROUGHPUTS"

#: Where a source checkout of hetsched finds Gavel's table: ``../shared/data/...`` beside it.
_CHECKOUT_RELATIVE = Path("..") / "shared" / "data" / "gavel" / "simulation_throughputs.json"


def gavel_throughputs_path(path: str | Path | None = None) -> Path:
    """Locate Gavel's measured throughput table (``simulation_throughputs.json``).

    The file is Gavel's ``scheduler/simulation_throughputs.json`` (Narayanan et al.,
    OSDI'20; github.com/stanford-futuredata/gavel). hetsched never downloads it and does not
    ship it. It is looked for, in order:

    1. ``path``, when given;
    2. the environment variable ``HETSCHED_GAVEL_THROUGHPUTS``;
    3. ``../shared/data/gavel/simulation_throughputs.json`` relative to the root of a
       source checkout of hetsched (the directory holding ``pyproject.toml``).

    Parameters
    ----------
    path : str or pathlib.Path, optional
        An explicit location; when given, nothing else is tried.

    Returns
    -------
    pathlib.Path
        The first candidate that is an existing file.

    Raises
    ------
    DataNotFoundError
        No candidate exists; the message lists what was tried and where to get the file.
    """
    tried: list[str] = []
    if path is not None:
        candidates = [(Path(path), "`path`")]
    else:
        candidates = []
        env = os.environ.get(GAVEL_THROUGHPUTS_ENV)
        if env:
            candidates.append((Path(env), f"${GAVEL_THROUGHPUTS_ENV}"))
        root = Path(__file__).resolve().parents[3]  # src/hetsched/inputs/throughputs.py -> the checkout
        if (root / "pyproject.toml").is_file():
            candidates.append(((root / _CHECKOUT_RELATIVE).resolve(), "beside the source checkout"))
    for cand, why in candidates:
        if cand.is_file():
            return cand
        tried.append(f"{str(cand)!r} ({why})")
    raise DataNotFoundError(
        "Gavel's measured throughput table (its scheduler/simulation_throughputs.json, from "
        "github.com/stanford-futuredata/gavel) was not found; tried: "
        + ("; ".join(tried) if tried else f"nothing (${GAVEL_THROUGHPUTS_ENV} is unset and this is not a source checkout)")
        + f". Pass `path=`, or set ${GAVEL_THROUGHPUTS_ENV} to the file."
    )


def gavel_throughputs(path: str | Path | None = None, *, strict: bool = False) -> ThroughputCatalogue:
    """Gavel's measured throughput table, found by :func:`gavel_throughputs_path` and read by
    :func:`load_gavel_throughputs`.

    Parameters
    ----------
    path : str or pathlib.Path, optional
        Explicit location of Gavel's ``simulation_throughputs.json``; default: the
        environment variable ``HETSCHED_GAVEL_THROUGHPUTS``, then
        ``../shared/data/gavel/simulation_throughputs.json`` beside a source checkout.
    strict : bool, default False
        Passed to :func:`load_gavel_throughputs`.

    Returns
    -------
    ThroughputCatalogue

    Raises
    ------
    DataNotFoundError
        The file is not present (nothing is downloaded); the message says where it comes
        from and what was tried.
    ValidationError
        The file is present but malformed (see :func:`load_gavel_throughputs`).

    Examples
    --------
    >>> import hetsched as hs
    >>> try:
    ...     cat = hs.gavel_throughputs()
    ... except hs.DataNotFoundError:
    ...     cat = hs.generate_catalogue(pairs=True)   # the project's own generated table
    >>> "v100" in cat.gpu_types
    True
    """
    return load_gavel_throughputs(gavel_throughputs_path(path), strict=strict)


def _catalogue_from_gavel_dict(raw: Any, *, source: str, strict: bool) -> ThroughputCatalogue:
    """The catalogue of Gavel's table ``raw`` (the parsed JSON; see :func:`load_gavel_throughputs`)
    read from ``source``: check the GPU types, collect the rows, read each type's column and
    pair entries, assemble the pairs."""
    where0 = f"`path` {source!r}"
    all_types, base_types, uncons = _gavel_gpu_types(raw, where0)
    reader = _GavelReader(raw, where0, strict)
    reader.collect_rows(all_types)
    T, U, pair_cols = _gavel_tables(reader, base_types, uncons)
    row_keys = reader.row_keys
    n, m = len(row_keys), len(base_types)
    pairs = _assemble_pairs(pair_cols, m, has_uncons=U is not None, where0=where0, row_keys=row_keys, strict=strict)
    log.info(
        "loaded %d rows x %d GPU types (%s) from %s; unconsolidated=%s; %d pairs",
        n, m, base_types, source, U is not None, 0 if pairs is None else len(pairs),
    )
    return ThroughputCatalogue(
        [k[0] for k in row_keys],
        [k[1] for k in row_keys],
        base_types,
        T,
        unconsolidated=U,
        pairs=pairs,
    )


def _gavel_gpu_types(raw: Any, where0: str) -> tuple[list[str], list[str], dict[str, str]]:
    """Check the top level of Gavel's table ``raw`` (GPU type -> object of rows); returns every
    type name, the consolidated ones and ``{base: base + "_unconsolidated"}``."""
    if not isinstance(raw, dict) or not raw:
        raise ValidationError(f"{where0} must hold a non-empty JSON object of GPU type -> table; got {type(raw).__name__}.")
    for gpu, table in raw.items():
        if not isinstance(table, dict):
            raise ValidationError(f"{where0}: GPU type {gpu!r} must map to an object of rows; got {type(table).__name__}.")
    all_types = list(raw)
    base_types = [t for t in all_types if not t.endswith(UNCONSOLIDATED_SUFFIX)]
    uncons = {t[: -len(UNCONSOLIDATED_SUFFIX)]: t for t in all_types if t.endswith(UNCONSOLIDATED_SUFFIX)}
    for base, name in uncons.items():
        if base not in base_types:
            raise ValidationError(
                f"{where0}: GPU type {name!r} is an unconsolidated table but there is no consolidated "
                f"type {base!r}."
            )
    if not base_types:
        raise ValidationError(f"{where0} must name at least one consolidated GPU type; got {all_types}.")
    return all_types, base_types, uncons


#: One pair entry of a Gavel table: (row, other row, throughput of row, throughput of other).
_PairEntry = tuple[int, int, float, float]


class _GavelReader:
    """Reads the tables of Gavel's ``raw`` dict (checked by :func:`_gavel_gpu_types`): parses
    keys (cached), checks numbers, and once :meth:`collect_rows` has run, reads one GPU type's
    column of isolated throughputs and its pair entries. Errors name ``where0`` (the file)."""

    def __init__(self, raw: dict[str, Any], where0: str, strict: bool) -> None:
        self.raw, self.where0, self.strict = raw, where0, strict
        self._cache: dict[str, tuple[str, int]] = {}
        self.row_keys: list[tuple[str, int]] = []
        self.row_of: dict[tuple[str, int], int] = {}

    def parse(self, key: str, gpu: str) -> tuple[str, int]:
        """``(job_type, scale_factor)`` of ``key``, a tuple literal found under type ``gpu``."""
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        try:
            val = ast.literal_eval(key)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            val = None
        if not (
            isinstance(val, tuple)
            and len(val) == 2
            and isinstance(val[0], str)
            and val[0]
            and isinstance(val[1], int)
            and not isinstance(val[1], bool)
            and val[1] >= 1
        ):
            raise ValidationError(
                f"{self.where0}: GPU type {gpu!r} has key {key!r}; keys must be tuple literals "
                f"\"('job type', scale_factor)\" with a positive integer scale factor."
            )
        self._cache[key] = val
        return val

    def number(self, value: Any, gpu: str, key: str, what: str) -> float:
        """``value`` as a finite non-negative float (``what``: what it is, for the error)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValidationError(
                f"{self.where0}: GPU type {gpu!r}, key {key!r}: {what} must be a finite non-negative "
                f"number; got {value!r:.80}."
            )
        v = float(value)
        if not math.isfinite(v) or v < 0:
            raise ValidationError(
                f"{self.where0}: GPU type {gpu!r}, key {key!r}: {what} must be finite and non-negative; got {v!r}."
            )
        return v

    def collect_rows(self, all_types: list[str]) -> None:
        """Pass 1: the rows, the sorted union of the keys over every type (consolidated and not)."""
        keys: set[tuple[str, int]] = set()
        for gpu in all_types:
            for key in self.raw[gpu]:
                keys.add(self.parse(key, gpu))
        self.row_keys = sorted(keys)
        self.row_of = {k: i for i, k in enumerate(self.row_keys)}

    def read_type(self, gpu: str) -> tuple[np.ndarray, list[_PairEntry]]:
        """Type ``gpu``'s isolated throughput per row (0 where it lacks the row) and its pair entries."""
        where0, row_of = self.where0, self.row_of
        table = np.zeros(len(self.row_keys))
        present = np.zeros(len(self.row_keys), dtype=bool)
        entries: list[_PairEntry] = []
        for key, cell in self.raw[gpu].items():
            r = row_of[self.parse(key, gpu)]
            if not isinstance(cell, dict):
                raise ValidationError(
                    f"{where0}: GPU type {gpu!r}, key {key!r} must map to an object with a \"null\" "
                    f"entry; got {type(cell).__name__}."
                )
            if "null" not in cell:
                raise ValidationError(
                    f"{where0}: GPU type {gpu!r}, key {key!r} must have an isolated throughput under \"null\"."
                )
            table[r] = self.number(cell["null"], gpu, key, "the isolated throughput (\"null\")")
            present[r] = True
            self._read_pairs(gpu, key, r, cell, entries)
        self._report_missing(gpu, present)
        return table, entries

    def _read_pairs(self, gpu: str, key: str, r: int, cell: dict[str, Any], entries: list[_PairEntry]) -> None:
        """Append to ``entries`` the pair entries of row ``r`` (``cell``, under ``key`` of ``gpu``)."""
        where0 = self.where0
        for other, val in cell.items():
            if other == "null":
                continue
            okey = self.parse(other, gpu)
            if okey not in self.row_of:
                raise ValidationError(
                    f"{where0}: GPU type {gpu!r}, key {key!r}: pair key {other!r} must name a row "
                    f"that has an isolated throughput on some GPU type; it has none."
                )
            if not isinstance(val, (list, tuple)) or len(val) != 2:
                raise ValidationError(
                    f"{where0}: GPU type {gpu!r}, key {key!r}, pair {other!r} must be a list "
                    f"[thr_self, thr_other]; got {val!r:.80}."
                )
            a = self.number(val[0], gpu, key, f"pair {other} throughput of self")
            b = self.number(val[1], gpu, key, f"pair {other} throughput of other")
            entries.append((r, self.row_of[okey], a, b))

    def _report_missing(self, gpu: str, present: np.ndarray) -> None:
        """Log (or, when strict, raise) that type ``gpu`` lacks rows (those not ``present``)."""
        missing = np.flatnonzero(~present)
        if missing.size:
            names = [self.row_keys[i] for i in missing[:3]]
            msg = (
                f"{self.where0}: GPU type {gpu!r} lacks {missing.size} row(s) other types have "
                f"(e.g. {names})"
            )
            if self.strict:
                raise ValidationError(msg + "; `strict=True` requires every row on every GPU type.")
            log.info("%s; their throughput there is set to 0.", msg)


def _gavel_tables(
    reader: _GavelReader, base_types: list[str], uncons: dict[str, str]
) -> tuple[np.ndarray, np.ndarray | None, list[tuple[int, bool, list[_PairEntry]]]]:
    """Read every type: the consolidated table T, the unconsolidated U (None when no type has
    one; a type without one copies its T column) and, per table, ``(column, unconsolidated,
    pair entries)``."""
    n, m = len(reader.row_keys), len(base_types)
    col_of = {t: k for k, t in enumerate(base_types)}
    T = np.zeros((n, m))
    U = np.zeros((n, m)) if uncons else None
    pair_cols: list[tuple[int, bool, list[_PairEntry]]] = []
    for gpu in base_types:
        col, entries = reader.read_type(gpu)
        T[:, col_of[gpu]] = col
        pair_cols.append((col_of[gpu], False, entries))
    if U is not None:
        for gpu in base_types:
            k = col_of[gpu]
            if gpu in uncons:
                col, entries = reader.read_type(uncons[gpu])
                U[:, k] = col
                pair_cols.append((k, True, entries))
            else:
                msg = f"{reader.where0}: GPU type {gpu!r} has no {gpu + UNCONSOLIDATED_SUFFIX!r} table"
                if reader.strict:
                    raise ValidationError(msg + "; `strict=True` requires one for every type when any has one.")
                log.info("%s; its unconsolidated throughputs copy the consolidated ones.", msg)
                U[:, k] = T[:, k]
    return T, U, pair_cols


def _assemble_pairs(
    pair_cols: list[tuple[int, bool, list[_PairEntry]]],
    m: int,
    *,
    has_uncons: bool,
    where0: str,
    row_keys: list[tuple[str, int]],
    strict: bool,
) -> PairThroughputs | None:
    if not any(entries for _, _, entries in pair_cols):
        return None
    # Unordered pair codes over every table.
    all_codes = []
    for _, _, entries in pair_cols:
        if entries:
            e = np.asarray([(r, o) for r, o, _, _ in entries], dtype=np.int64)
            lo, hi = e.min(axis=1), e.max(axis=1)
            all_codes.append((lo << 32) | hi)
    codes = np.unique(np.concatenate(all_codes))
    index = np.stack([codes >> 32, codes & 0xFFFFFFFF], axis=1)
    P = index.shape[0]
    cons = np.zeros((P, m, 2))
    unc = np.zeros((P, m, 2)) if has_uncons else None
    for k, is_unc, entries in pair_cols:
        if not entries:
            continue
        target = unc if is_unc else cons
        assert target is not None
        arr = np.asarray(entries, dtype=float)
        r = arr[:, 0].astype(np.int64)
        o = arr[:, 1].astype(np.int64)
        lo, hi = np.minimum(r, o), np.maximum(r, o)
        pos = np.searchsorted(codes, (lo << 32) | hi)
        forward = r <= o  # entry listed under the lower row: (thr_lo, thr_hi) as given
        vals = np.where(forward[:, None], arr[:, 2:4], arr[:, 3:1:-1])
        # Mirrors first, then primary entries overwrite them (the lower row wins).
        mirror = ~forward
        seen = np.zeros(P, dtype=bool)
        target[pos[mirror], k, :] = vals[mirror]
        seen[pos[mirror]] = True
        prim = forward & seen[pos]
        if prim.any():
            diff = ~np.isclose(target[pos[prim], k, :], vals[prim], rtol=1e-9, atol=0.0).all(axis=1)
            if diff.any():
                i = int(np.flatnonzero(prim)[np.flatnonzero(diff)[0]])
                a, b = row_keys[int(lo[i])], row_keys[int(hi[i])]
                msg = (
                    f"{where0}: {int(diff.sum())} pair entr(ies) on GPU column {k}"
                    f"{' (unconsolidated)' if is_unc else ''} disagree with their mirror, e.g. {a} with {b}"
                )
                if strict:
                    raise ValidationError(msg + "; `strict=True` requires mirrored pair entries to agree.")
                log.warning("%s; keeping the entry listed under %s.", msg, a)
        target[pos[forward], k, :] = vals[forward]
    return PairThroughputs(index, cons, unc)


# ------------------------------------------------------------------------- generator
def _speedup_table(gpu_types: Any) -> dict[str, float]:
    if isinstance(gpu_types, Mapping):
        names = check_names(list(gpu_types), "gpu_types", what="GPU type names")
        out: dict[str, float] = {}
        for t in names:
            out[t] = check_positive(gpu_types[t], f"gpu_types[{t!r}]", rule="a positive finite number (a median speedup)")
        return out
    names = check_names(gpu_types, "gpu_types", what="GPU type names")
    unknown = [t for t in names if t not in DEFAULT_SPEEDUPS]
    if unknown:
        raise ValidationError(
            f"`gpu_types` names {unknown}, which have no default median speedup (known: "
            f"{sorted(DEFAULT_SPEEDUPS)}); pass a mapping GPU type -> median speedup instead."
        )
    return {t: DEFAULT_SPEEDUPS[t] for t in names}


def generate_catalogue(
    n_job_types: int = 26,
    gpu_types: Sequence[str] | Mapping[str, float] = ("v100", "p100", "k80"),
    scale_factors: Sequence[int] = (1, 2, 4, 8),
    seed: int | np.random.Generator = 0,
    *,
    speedup_sigma: float = 0.4,
    noise_sigma: float = 0.1,
    base_throughput_range: tuple[float, float] = (0.25, 25.0),
    scaling_efficiency_range: tuple[float, float] = (0.7, 1.0),
    unconsolidated_slowdown_range: tuple[float, float] = (1.0, 3.0),
    pairs: bool = False,
    pair_infeasible_prob: float = 0.6,
    pair_combined_range: tuple[float, float] = (0.9, 1.5),
    pair_share_range: tuple[float, float] = (0.25, 0.75),
) -> ThroughputCatalogue:
    r"""Generate a synthetic throughput table (the project's default data).

    Every job type ("model") gets one row per scale factor. Parameters and their sources
    are listed in ``docs/data.md``; in short, with :math:`\mu_k` the median speedup of
    GPU type :math:`k` over a K80:

    * single-GPU throughput on a speedup-1 GPU: :math:`b_m \sim \mathrm{LogUniform}`
      (``base_throughput_range``, steps/s);
    * speedup of model :math:`m` on type :math:`k`:
      :math:`\log s_{mk} = (1 + \alpha_m) \log \mu_k + \epsilon_{mk}`, with
      :math:`\alpha_m \sim N(0, \sigma_\alpha^2)` (how much the model gains from newer
      GPUs, shared by all types, so speedups are monotone across generations for most
      models) and :math:`\epsilon_{mk} \sim N(0, \sigma_\epsilon^2)`; marginally
      lognormal around :math:`\mu_k`;
    * :math:`T_{m,s,k} = b_m\, s_{mk}\, s\, e_m^{\log_2 s}`, scaling efficiency per
      doubling :math:`e_m \sim U` (``scaling_efficiency_range``);
    * unconsolidated (:math:`s > 1`): :math:`T / (1 + (D - 1) w_k)`, :math:`D \sim U`
      (``unconsolidated_slowdown_range``) and
      :math:`w_k = \log(\mu_k/\mu_{\min}) / \log(\mu_{\max}/\mu_{\min})` (1 when all
      medians are equal): faster GPUs are more communication-bound, so more sensitive to
      placement; :math:`s = 1` rows equal their consolidated value;
    * ``pairs=True``: every unordered pair of rows with the same scale factor, on every
      type, cannot share with probability ``pair_infeasible_prob`` (throughputs (0, 0));
      otherwise the pair's combined normalized throughput :math:`c \sim U`
      (``pair_combined_range``) is split :math:`u : 1-u`, :math:`u \sim U`
      (``pair_share_range``; 1/2 for a row with itself), each member getting its share
      times its isolated throughput. Unconsolidated pair throughputs scale each member by
      its row's unconsolidated/consolidated ratio.

    Parameters
    ----------
    n_job_types : int, default 26
        Number of job types (Gavel's table has 26).
    gpu_types : sequence of str or mapping str -> float, default ("v100", "p100", "k80")
        GPU type names (looked up in :data:`DEFAULT_SPEEDUPS`) or a mapping of any names
        to their median single-GPU speedup over a K80 (or any common reference).
    scale_factors : sequence of int, default (1, 2, 4, 8)
        Scale factors every job type gets a row for.
    seed : int or numpy.random.Generator, default 0
        Source of randomness; the same seed gives the same table.
    speedup_sigma : float, default 0.4
        :math:`\sigma_\alpha`.
    noise_sigma : float, default 0.1
        :math:`\sigma_\epsilon`.
    base_throughput_range : (float, float), default (0.25, 25.0)
        Range of :math:`b_m`, steps/s.
    scaling_efficiency_range : (float, float), default (0.7, 1.0)
        Range of :math:`e_m`.
    unconsolidated_slowdown_range : (float, float), default (1.0, 3.0)
        Range of :math:`D`.
    pairs : bool, default False
        Also generate co-location throughputs.
    pair_infeasible_prob, pair_combined_range, pair_share_range
        Pair model parameters (see above).

    Returns
    -------
    ThroughputCatalogue
        Rows ``("model-00", 1), ("model-00", 2), ...``, columns in ``gpu_types`` order,
        with an unconsolidated table, and pairs when asked.

    Examples
    --------
    >>> cat = generate_catalogue(n_job_types=3, seed=1)
    >>> len(cat), cat.gpu_types, cat.available_scale_factors
    (12, ('v100', 'p100', 'k80'), (1, 2, 4, 8))
    >>> bool((cat.throughputs > 0).all())
    True
    >>> generate_catalogue(n_job_types=3, seed=1).throughputs.tolist() == cat.throughputs.tolist()
    True
    """
    n_models = check_int(n_job_types, "n_job_types", low=1)
    speedups = _speedup_table(gpu_types)
    types = tuple(speedups)
    mu = np.array([speedups[t] for t in types])
    sfs = _check_scale_factors(scale_factors)
    s_sigma = check_nonneg(speedup_sigma, "speedup_sigma")
    e_sigma = check_nonneg(noise_sigma, "noise_sigma")
    b_range = check_interval(base_throughput_range, "base_throughput_range", low=0.0, low_open=True)
    eff_range = check_interval(scaling_efficiency_range, "scaling_efficiency_range", low=0.0, high=1.0, low_open=True)
    d_range = check_interval(unconsolidated_slowdown_range, "unconsolidated_slowdown_range", low=1.0)
    check_bool(pairs, "pairs")
    p_inf = check_probability(pair_infeasible_prob, "pair_infeasible_prob")
    c_range = check_interval(pair_combined_range, "pair_combined_range", low=0.0, low_open=True)
    u_range = check_interval(pair_share_range, "pair_share_range", low=0.0, high=1.0, low_open=True)
    rng = as_rng(seed)

    m_types = len(types)
    n_sf = len(sfs)
    T, U = _draw_tables(rng, n_models, mu, sfs, s_sigma, e_sigma, b_range, eff_range, d_range)
    width = max(2, len(str(n_models - 1)))
    names = [f"model-{i:0{width}d}" for i in range(n_models)]
    job_types = np.repeat(np.array(names, dtype=object), n_sf)
    row_sf = np.tile(sfs, n_models)
    T2 = T.reshape(n_models * n_sf, m_types)
    U2 = U.reshape(n_models * n_sf, m_types)
    pair_table = _draw_pairs(rng, T2, U2, n_models, n_sf, p_inf, c_range, u_range) if pairs else None

    cat = ThroughputCatalogue(job_types, row_sf, types, T2, unconsolidated=U2, pairs=pair_table)
    log.debug("generated %r", cat)
    return cat


def _check_scale_factors(scale_factors: Any) -> np.ndarray:
    """``scale_factors`` checked (distinct positive integers, at least one) and sorted, as int64."""
    if isinstance(scale_factors, (str, bytes)) or not isinstance(scale_factors, (Sequence, np.ndarray)):
        raise ValidationError(f"`scale_factors` must be a sequence of positive integers; got {scale_factors!r}.")
    sfs_list = list(scale_factors)
    if not sfs_list or any(
        isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1 for s in sfs_list
    ) or len(set(sfs_list)) != len(sfs_list):
        raise ValidationError(
            f"`scale_factors` must be distinct positive integers (at least one); got {scale_factors!r}."
        )
    return np.array(sorted(int(s) for s in sfs_list), dtype=np.int64)


def _draw_tables(
    rng: np.random.Generator,
    n_models: int,
    mu: np.ndarray,
    sfs: np.ndarray,
    s_sigma: float,
    e_sigma: float,
    b_range: tuple[float, float],
    eff_range: tuple[float, float],
    d_range: tuple[float, float],
) -> tuple[np.ndarray, np.ndarray]:
    """Draw the consolidated and unconsolidated throughputs of :func:`generate_catalogue`
    (its model, with median speedups ``mu`` and scale factors ``sfs``); returns both as
    (models, scale factors, types) arrays."""
    m_types, n_sf = mu.shape[0], len(sfs)
    (b_lo, b_hi), (eff_lo, eff_hi), (d_lo, d_hi) = b_range, eff_range, d_range
    # Draw order is part of the reproducibility contract: base, alpha, eps, eff, D, pairs.
    base = np.exp(rng.uniform(np.log(b_lo), np.log(b_hi), size=n_models))
    alpha = rng.normal(0.0, s_sigma, size=n_models) if s_sigma > 0 else np.zeros(n_models)
    eps = rng.normal(0.0, e_sigma, size=(n_models, m_types)) if e_sigma > 0 else np.zeros((n_models, m_types))
    eff = rng.uniform(eff_lo, eff_hi, size=n_models)
    D = rng.uniform(d_lo, d_hi, size=(n_models, n_sf, m_types))

    speed = np.exp((1.0 + alpha)[:, None] * np.log(mu)[None, :] + eps)  # (models, types)
    single = base[:, None] * speed
    mult = sfs[None, :] * eff[:, None] ** np.log2(sfs)[None, :]  # (models, sf)
    T = single[:, None, :] * mult[:, :, None]  # (models, sf, types)
    lmu = np.log(mu)
    span = lmu.max() - lmu.min()
    w = (lmu - lmu.min()) / span if span > 0 else np.ones(m_types)
    divisor = 1.0 + (D - 1.0) * w[None, None, :]
    divisor[:, sfs == 1, :] = 1.0
    return T, T / divisor


def _draw_pairs(
    rng: np.random.Generator,
    T2: np.ndarray,
    U2: np.ndarray,
    n_models: int,
    n_sf: int,
    p_inf: float,
    c_range: tuple[float, float],
    u_range: tuple[float, float],
) -> PairThroughputs:
    """Draw :func:`generate_catalogue`'s pair throughputs over the rows' tables ``T2``/``U2``
    (rows model-major, ``n_sf`` per model): every unordered pair of rows with the same scale
    factor, after the tables' draws."""
    m_types = T2.shape[1]
    iu, ju = np.triu_indices(n_models)
    idx = []
    for q in range(n_sf):
        idx.append(np.stack([iu * n_sf + q, ju * n_sf + q], axis=1))
    index = np.concatenate(idx).astype(np.int64)
    P = index.shape[0]
    feasible = rng.random((P, m_types)) >= p_inf
    c = rng.uniform(c_range[0], c_range[1], size=(P, m_types))
    u = rng.uniform(u_range[0], u_range[1], size=(P, m_types))
    u[index[:, 0] == index[:, 1]] = 0.5
    ti, tj = T2[index[:, 0]], T2[index[:, 1]]
    thr = np.stack([c * u * ti, c * (1.0 - u) * tj], axis=2) * feasible[:, :, None]
    ratio_i = U2[index[:, 0]] / ti
    ratio_j = U2[index[:, 1]] / tj
    unc = thr * np.stack([ratio_i, ratio_j], axis=2)
    return PairThroughputs(index, thr, unc)
