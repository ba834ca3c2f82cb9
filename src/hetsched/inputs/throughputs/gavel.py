"""Gavel's measured throughput table: the reader of its JSON format
(:func:`load_gavel_throughputs`) and where the file is looked for on this machine
(:func:`gavel_throughputs_path`, :func:`gavel_throughputs`). Nothing is ever downloaded.
"""

from __future__ import annotations

import ast
import json
import logging
import math
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ValidationError
from ...validation import check_bool, check_choice
from ..data_paths import locate_data
from .tables import PairThroughputs, ThroughputCatalogue

__all__ = [
    "GAVEL_THROUGHPUTS_ENV",
    "MISSING_CHOICES",
    "UNCONSOLIDATED_SUFFIX",
    "gavel_throughputs",
    "gavel_throughputs_path",
    "load_gavel_throughputs",
]

log = logging.getLogger(__name__)

#: Suffix that marks a GPU type's unconsolidated table in Gavel's JSON format.
UNCONSOLIDATED_SUFFIX = "_unconsolidated"

#: What ``missing`` accepts: a row absent from a GPU type's table is an error, or throughput 0.
MISSING_CHOICES = ("raise", "zero")

#: Rows named per GPU type in the error for missing rows.
_N_NAMED = 5


def load_gavel_throughputs(path: str | Path, *, strict: bool = False, missing: str = "raise") -> ThroughputCatalogue:
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
    missing : {"raise", "zero"}, default "raise"
        A row ``(job type, scale factor)`` that some GPU type's table has and another's
        lacks: "raise" is an error naming each such row and the GPU types without it (a
        missing entry is not a measurement; write 0 in the file where a job cannot run);
        "zero" reads it as throughput 0 there (the job cannot run on that type), logged at
        WARNING. A 0 written in the file is always read as 0.

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
    * A row present on some GPU types and absent on others is an error naming the row and
      the types (``missing="raise"``, the default), or throughput **0** where it is absent
      with ``missing="zero"`` (the job cannot run there; Gavel itself writes 0 for what it
      could not run). ``strict`` rejects it whatever ``missing`` says.
    * A row that a type's ``X_unconsolidated`` table lacks (its consolidated ``X`` table
      has it) has unconsolidated throughput 0 on ``X`` (logged at WARNING; an error when
      ``strict``): Gavel's own table lacks six multi-GPU ResNet-50 rows of
      ``k80_unconsolidated``, read as "cannot run spread over K80 servers".
    * Pairs are stored once per unordered pair of rows; a pair absent on a GPU type has
      throughputs ``(0, 0)`` there (cannot share). When a pair appears under both of its
      rows, the entry under the lower row number is kept (a disagreeing mirror is logged,
      or an error when ``strict``).

    Raises
    ------
    ValidationError
        Missing or unreadable file, malformed JSON or key, a throughput that is not a
        finite non-negative number (the message names the GPU type and the key), a pair
        naming an unknown row, a row missing on some GPU type (unless ``missing="zero"``),
        or an incomplete file under ``strict``.

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
    check_bool(strict, "strict")
    check_choice(missing, "missing", MISSING_CHOICES)
    if not isinstance(path, (str, Path)):
        raise ValidationError(f"`path` must be a str or pathlib.Path (a local JSON file); got {type(path).__name__}.")
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
    return _catalogue_from_gavel_dict(raw, source=str(p), strict=strict, missing=missing)


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
    return locate_data(path, env=GAVEL_THROUGHPUTS_ENV, checkout_relative=_CHECKOUT_RELATIVE,
                       accept=lambda cand: None if cand.is_file() else "",
                       what="Gavel's measured throughput table (its scheduler/simulation_throughputs.json, from "
                            "github.com/stanford-futuredata/gavel)")


def gavel_throughputs(path: str | Path | None = None, *, strict: bool = False,
                      missing: str = "raise") -> ThroughputCatalogue:
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
    missing : {"raise", "zero"}, default "raise"
        Passed to :func:`load_gavel_throughputs` (Gavel's own table has every row on every
        consolidated type: it loads with the default).

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
    return load_gavel_throughputs(gavel_throughputs_path(path), strict=strict, missing=missing)


def _catalogue_from_gavel_dict(raw: Any, *, source: str, strict: bool, missing: str = "raise") -> ThroughputCatalogue:
    """The catalogue of Gavel's table ``raw`` (the parsed JSON; see :func:`load_gavel_throughputs`)
    read from ``source``: check the GPU types, collect the rows, read each type's column and
    pair entries, assemble the pairs."""
    where0 = f"`path` {source!r}"
    all_types, base_types, uncons = _gavel_gpu_types(raw, where0)
    reader = _GavelReader(raw, where0, strict, missing)
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
    column of isolated throughputs and its pair entries. Errors name ``where0`` (the file).
    ``missing``: what a row absent from a consolidated type's table is (see
    :func:`load_gavel_throughputs`); such rows are collected in :attr:`absent` and raised
    together by :meth:`raise_absent`."""

    def __init__(self, raw: dict[str, Any], where0: str, strict: bool, missing: str = "raise") -> None:
        self.raw, self.where0, self.strict, self.missing = raw, where0, strict, missing
        #: Consolidated GPU type -> positions of the rows its table lacks.
        self.absent: dict[str, np.ndarray] = {}
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

    def read_type(self, gpu: str, *, consolidated: bool = True) -> tuple[np.ndarray, list[_PairEntry]]:
        """Type ``gpu``'s isolated throughput per row (0 where it lacks the row) and its pair
        entries (``consolidated``: ``gpu`` is a consolidated table, whose missing rows
        :attr:`missing` governs)."""
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
        self._report_missing(gpu, present, consolidated=consolidated)
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

    def _report_missing(self, gpu: str, present: np.ndarray, *, consolidated: bool = True) -> None:
        """Type ``gpu`` lacks rows (those not ``present``): raise when strict; for a
        consolidated type keep them for :meth:`raise_absent` (``missing="raise"``) or log
        them (``missing="zero"``); for an unconsolidated table log them."""
        missing = np.flatnonzero(~present)
        if missing.size:
            names = [self.row_keys[i] for i in missing[:3]]
            msg = (
                f"{self.where0}: GPU type {gpu!r} lacks {missing.size} row(s) other types have "
                f"(e.g. {names})"
            )
            if self.strict:
                raise ValidationError(msg + "; `strict=True` requires every row on every GPU type.")
            if consolidated and self.missing == "raise":
                self.absent[gpu] = missing
                return
            log.warning("%s; their %sthroughput there is set to 0%s.", msg, "" if consolidated else "unconsolidated ",
                        " (missing='zero')" if consolidated else "")

    def raise_absent(self) -> None:
        """Raise one error naming every row a consolidated type lacks and the types that lack
        it (``missing="raise"``); nothing when none does."""
        if not self.absent:
            return
        lacking: dict[int, list[str]] = {}
        for gpu, rows in self.absent.items():
            for r in rows.tolist():
                lacking.setdefault(int(r), []).append(gpu)
        named = "; ".join(f"{self.row_keys[r]} on {types}" for r, types in sorted(lacking.items())[:_N_NAMED])
        more = f"; and {len(lacking) - _N_NAMED} more" if len(lacking) > _N_NAMED else ""
        raise ValidationError(
            f"{self.where0}: {len(lacking)} row(s) (job type, scale factor) have no isolated throughput on "
            f"some GPU type: {named}{more}. A missing entry is not a throughput of 0: write 0 in the file where "
            f"a job cannot run, or pass missing=\"zero\" (command line: --missing zero; a TOML experiment: "
            f"missing = \"zero\" in [workload]) to read every missing entry as 0.")


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
    reader.raise_absent()
    if U is not None:
        for gpu in base_types:
            k = col_of[gpu]
            if gpu in uncons:
                col, entries = reader.read_type(uncons[gpu], consolidated=False)
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

