"""Column-at-once parsing of trace cells, and the checks every cluster-log reader ends with.

Shared by the trace readers (:mod:`.philly`, :mod:`.helios`, :mod:`.pai`, :mod:`.gavel`): a
column of text cells becomes numbers or times in one pandas call, and only the cells that
call rejects are parsed again one by one, for the message that names the field and the
value (:func:`number`, :func:`timestamp`). :func:`finish_table` checks arrival order,
duplicate ids and cluster fit over the rows a reader kept and builds the job table;
:func:`csv_table`, :func:`job_prefix` and :func:`span_message` are the CSV reading and the
messages the cluster-log readers share.
"""

from __future__ import annotations

import csv
import gc
import io
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...errors import ValidationError
from ...validation import check_bool
from ..cluster import Cluster
from .load_report import LoadReport, RowChecks, skipped_meta

__all__ = [
    "JOB_TABLE_COLUMNS",
    "KINDS",
    "Column",
    "Field",
    "apply_schema",
    "cell_text",
    "check_fields",
    "columns_of",
    "csv_columns",
    "csv_records",
    "csv_table",
    "decode_text",
    "duration_checks",
    "empty_strings",
    "fail_duplicates",
    "fail_fields",
    "fail_parse",
    "finish_table",
    "first_line",
    "gc_paused",
    "is_missing",
    "isin",
    "job_prefix",
    "number",
    "numbers",
    "path_arg",
    "read_fields",
    "selection",
    "span_message",
    "times",
    "timestamp",
]

#: Columns of a job table: id, submission time (s, from the first submission), GPUs held,
#: run time (s), GPU type it ran on (or None), user, final status, and where in the file
#: the job came from (for messages).
JOB_TABLE_COLUMNS = ("job_id", "arrival", "num_gpus", "duration", "gpu_type", "user", "status", "source_row")

_TIME_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S.%f")
_MISSING = ("", "none", "null", "nan")

#: Parse states of a cell: kept, missing, not a (finite) number / time, not an integer.
OK, ABSENT, INVALID, NOT_INT = 0, 1, 2, 3

def path_arg(path: str | Path, name: str = "path") -> Path:
    if not isinstance(path, (str, Path)):
        raise ValidationError(f"`{name}` must be a local file path; got {type(path).__name__}.")
    p = Path(path)
    if not p.is_file():
        raise ValidationError(f"`{name}` must be an existing local file; got {str(p)!r}, which does not exist or is not a file.")
    return p


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while many small containers are built (json of a
    100k-job log: about 3x faster); the objects are acyclic, so nothing is left for it."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def bad_utf8(exc: UnicodeDecodeError, offset: int) -> str:
    """Message for a byte that is not UTF-8: the byte and its offset in the file (from 0)."""
    byte = exc.object[exc.start:exc.start + 1]
    return (f"is not valid UTF-8: byte 0x{byte.hex()} at byte offset {offset + exc.start} of the file "
            f"({exc.reason}); trace files must be UTF-8 text")


def decode_text(p: Path, report: LoadReport, *, header: bool = False) -> str:
    """The text of ``p``. A line with a byte that is not UTF-8 is a malformed row named by
    its line number and the byte's offset in the file; when it does not raise it reads as an
    empty line (later line numbers stay right). ``header=True``: line 1 cannot be skipped."""
    data = p.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    out: list[str] = []
    offset = 0
    for ln, raw in enumerate(data.split(b"\n"), start=1):
        try:
            out.append(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            message = bad_utf8(exc, offset)
            if header and ln == 1:
                raise ValidationError(f"{p}: line 1 (the header) {message}.") from None
            report.fail("not_utf8", f"{p}: line {ln}: {message}", position=ln)
            out.append("")
        offset += len(raw) + 1
    return "\n".join(out)


def is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip().lower() in _MISSING)


def number(text: Any, what: str, *, integer: bool = False) -> float:
    """One cell as a number, or ValueError naming the field and the value."""
    if text is None:
        raise ValueError(f"`{what}` is missing")
    if isinstance(text, str):
        text = text.strip()
        if text == "" or text.lower() in ("none", "null", "nan"):
            raise ValueError(f"`{what}` is missing (got {text!r})")
    try:
        v = float(text)
    except (TypeError, ValueError):
        raise ValueError(f"`{what}` must be a number; got {text!r}") from None
    if not math.isfinite(v):
        raise ValueError(f"`{what}` must be finite; got {text!r}")
    if integer and v != int(v):
        raise ValueError(f"`{what}` must be an integer; got {text!r}")
    return v


def timestamp(text: Any, what: str) -> float:
    """Seconds: a number as is, or a date-time string (naive, treated as UTC)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return number(text, what)
    if not isinstance(text, str) or text.strip() == "" or text.strip().lower() in ("none", "null", "nan"):
        raise ValueError(f"`{what}` is missing (got {text!r})")
    s = text.strip()
    try:
        return number(s, what)
    except ValueError:
        pass
    for fmt in _TIME_FORMATS:
        try:
            dt = datetime.strptime(s, fmt)
        except ValueError:
            continue
        return (dt - datetime(1970, 1, 1)).total_seconds()
    raise ValueError(f"`{what}` must be seconds or a date-time 'YYYY-MM-DD HH:MM:SS'; got {text!r}")


class Column:
    """A column parsed at once: ``values`` (float, NaN where it failed), ``state`` per row
    (``OK``, ``ABSENT``, ``INVALID``, ``NOT_INT``) and ``message(i)`` for a failed row
    (worded as :func:`number` / :func:`timestamp` word it, built when asked for)."""

    def __init__(self, cells: Sequence[Any], values: np.ndarray, state: np.ndarray,
                 parse: Callable[[Any], float]) -> None:
        self.cells = cells
        self.values = values
        self.state = state
        self.parse = parse

    def message(self, i: int) -> str:
        try:
            self.parse(self.cells[i])
        except ValueError as exc:
            return str(exc)
        return f"cell {self.cells[i]!r} was rejected"  # not reached: only failed rows are named


def numbers(cells: Sequence[Any], what: str, *, integer: bool = False) -> Column:
    """Parse text cells as finite numbers (integers with ``integer``), column at once; the
    rows the fast path rejects go through :func:`number` for their message. ``cells`` may
    be a float array already (:func:`csv_columns`; NaN: missing)."""
    if isinstance(cells, np.ndarray) and cells.dtype.kind == "f":
        vals = np.array(cells, dtype=float)
        with np.errstate(invalid="ignore"):
            ok = np.isfinite(vals)
            if integer:
                ok &= np.floor(vals) == vals
        state = np.where(ok, OK, np.where(np.isnan(vals), ABSENT, np.where(np.isinf(vals), INVALID, NOT_INT)))
        vals[~ok] = np.nan
        return Column(cells, vals, state.astype(np.int8),
                      lambda v: number(None if math.isnan(v) else repr(float(v)), what, integer=integer))
    vals = np.array(pd.to_numeric(pd.Series(cells, dtype=object), errors="coerce")
                    .to_numpy(dtype=float, na_value=np.nan))
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(vals)
        if integer:
            ok &= np.floor(vals) == vals
    return _slow_cells(cells, vals, ok, lambda v: number(v, what, integer=integer))


def _slow_cells(cells: Sequence[Any], vals: np.ndarray, ok: np.ndarray, parse: Callable[[Any], float]) -> Column:
    """The rows a fast path rejected, one by one: the value, or the state and message."""
    state = np.zeros(len(cells), dtype=np.int8)
    for i in np.flatnonzero(~ok).tolist():
        if is_missing(cells[i]):
            vals[i] = np.nan
            state[i] = ABSENT
            continue
        try:
            vals[i] = parse(cells[i])
        except ValueError as exc:
            vals[i] = np.nan
            state[i] = NOT_INT if "must be an integer" in str(exc) else INVALID
    return Column(cells, vals, state, parse)


_EPOCH = np.datetime64("1970-01-01T00:00:00", "ns")


def times(cells: Sequence[Any], what: str) -> Column:
    """Parse time cells ('YYYY-MM-DD HH:MM:SS' read as UTC, or seconds) column at once; the
    rows the fast paths reject go through :func:`timestamp`."""
    n = len(cells)
    vals = np.full(n, np.nan)
    if set(map(type, cells)) <= {str, type(None)}:  # to_datetime reads None as NaT
        is_str = np.ones(n, dtype=bool)
    else:
        is_str = np.fromiter((type(v) is str for v in cells), dtype=bool, count=n)
    if is_str.any():
        where = np.flatnonzero(is_str)
        text = pd.Series(cells, dtype=object).iloc[where]
        dt = pd.to_datetime(text, format="%Y-%m-%d %H:%M:%S", errors="coerce").to_numpy(dtype="datetime64[ns]")
        good = ~np.isnat(dt)
        vals[where[good]] = (dt[good] - _EPOCH) / np.timedelta64(1, "s")
        rest = where[~good]
        if rest.size:
            vals[rest] = pd.to_numeric(text[~good], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    return _slow_cells(cells, vals, np.isfinite(vals), lambda v: timestamp(v, what))


def fail_parse(chk: RowChecks, col: Column, *, missing: str, invalid: str = "not_a_number",
                prefix: Callable[[int], str] | None = None) -> None:
    """Mark the rows ``col`` could not parse: reason ``missing`` for absent cells, ``invalid``
    (or ``bad_value`` for non-integers) otherwise."""
    def msg(i: int) -> str:
        return (prefix(i) if prefix else "") + col.message(i)

    chk.fail(col.state == ABSENT, missing, msg)
    chk.fail(col.state == INVALID, invalid, msg)
    chk.fail(col.state == NOT_INT, "bad_value", msg)


def duration_checks(chk: RowChecks, dur: np.ndarray, message: Callable[[int], str]) -> None:
    """A zero duration is a row real traces contain; a negative one is malformed."""
    with np.errstate(invalid="ignore"):
        chk.fail(dur == 0, "zero_duration", message)
        chk.fail(dur < 0, "negative_duration", message)


def job_prefix(ids: Sequence[Any]) -> Callable[[int], str]:
    """The message prefix naming row ``i`` by its job id: ``"job '<id>': "``."""
    def named(i: int) -> str:
        return f"job {ids[i]!r}: "

    return named


def _as_is(cells: Sequence[Any], i: int) -> Any:
    """Cell ``i`` of ``cells`` as it is."""
    return cells[i]


def span_message(named: Callable[[int], str], start: Sequence[Any], end: Sequence[Any],
                 text: Callable[[Sequence[Any], int], Any] = _as_is) -> Callable[[int], str]:
    """Message of a row whose end is not after its start, quoting both cells (as ``text``
    gives them)."""
    def message(i: int) -> str:
        return (f"{named(i)}duration must be positive; end_time {text(end, i)!r} is not "
                f"after start_time {text(start, i)!r}")

    return message


# ------------------------------------------------------------------------------ column schemas
#: How a cell is read: a finite number, an integer, or a time (seconds or a date-time).
KINDS = ("number", "int", "time")


@dataclass(frozen=True)
class Field:
    """One column of a trace format, as data: how its cells are read and the rule its values
    must follow. :func:`apply_schema` applies a sequence of them, column at once.

    Parameters
    ----------
    name : str
        The column as the file names it (and as messages name it: ``` `name` ```).
    kind : {"number", "int", "time"}, default "number"
        How a cell is read (:func:`numbers`, ``numbers(..., integer=True)``, :func:`times`).
    missing : str, default "missing_field"
        The load-report reason of an absent cell (e.g. ``"unfinished"`` for an end time:
        a row real traces contain, dropped by default; see :mod:`.load_report`).
    invalid : str, default "not_a_number"
        The reason of a cell that is not a number / time (``"bad_time"`` for times).
    low : float, optional
        Rule: values must be ``>= low`` (``> low`` with ``low_open``); a row breaking it
        fails with reason ``"bad_value"``.
    rule : str, optional
        The rule's wording in the message (default "non-negative" / "positive" / ">= low").
    """

    name: str
    kind: str = "number"
    missing: str = "missing_field"
    invalid: str = "not_a_number"
    low: float | None = None
    low_open: bool = False
    rule: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Field {self.name!r}: kind must be one of {list(KINDS)}; got {self.kind!r}")

    @property
    def wording(self) -> str:
        """The rule as the message words it."""
        if self.rule is not None:
            return self.rule
        if self.low == 0:
            return "positive" if self.low_open else "non-negative"
        return f"{'>' if self.low_open else '>='} {self.low:g}"

    def parse(self, cells: Sequence[Any]) -> Column:
        """The column's cells read column at once."""
        if self.kind == "time":
            return times(cells, self.name)
        return numbers(cells, self.name, integer=self.kind == "int")

    def broken(self, values: np.ndarray) -> np.ndarray:
        """Rows whose (parsed) value breaks the rule (NaN never does: it failed parsing)."""
        if self.low is None:
            return np.zeros(values.shape, dtype=bool)
        with np.errstate(invalid="ignore"):
            return values <= self.low if self.low_open else values < self.low


def read_fields(cells: Mapping[str, Sequence[Any]], schema: Sequence[Field]) -> dict[str, Column]:
    """Every column of ``schema`` read from ``cells`` (name -> cells), column at once."""
    return {f.name: f.parse(cells[f.name]) for f in schema}


def fail_fields(chk: RowChecks, columns: Mapping[str, Column], schema: Sequence[Field], *,
                prefix: Callable[[int], str] | None = None) -> None:
    """Fail the rows a column of ``schema`` could not read (reason ``field.missing`` /
    ``field.invalid``; :func:`fail_parse`), in schema order."""
    for f in schema:
        fail_parse(chk, columns[f.name], missing=f.missing, invalid=f.invalid, prefix=prefix)


def check_fields(chk: RowChecks, columns: Mapping[str, Column], schema: Sequence[Field], *,
                 prefix: Callable[[int], str] | None = None,
                 notes: Mapping[str, Callable[[int], str]] | None = None) -> None:
    """Fail the rows whose value breaks a field's rule (reason ``"bad_value"``), in schema
    order, each named ``"`<field>` must be <rule>; got '<cell as written>'"`` (plus
    ``notes[field](i)`` where given)."""
    for f in schema:
        if f.low is None:
            continue
        col = columns[f.name]

        def message(i: int, f: Field = f, col: Column = col) -> str:
            note = notes.get(f.name) if notes else None
            return ((prefix(i) if prefix else "") + f"`{f.name}` must be {f.wording}; got {cell_text(col.cells, i).strip()!r}"
                    + (note(i) if note else ""))

        chk.fail(f.broken(col.values), "bad_value", message)


def apply_schema(chk: RowChecks, cells: Mapping[str, Sequence[Any]], schema: Sequence[Field], *,
                 prefix: Callable[[int], str] | None = None,
                 notes: Mapping[str, Callable[[int], str]] | None = None) -> dict[str, Column]:
    """:func:`read_fields`, :func:`fail_fields`, then :func:`check_fields`: every column read
    and checked, the rows that fail marked on ``chk``."""
    columns = read_fields(cells, schema)
    fail_fields(chk, columns, schema, prefix=prefix)
    check_fields(chk, columns, schema, prefix=prefix, notes=notes)
    return columns


def selection(value: Any, name: str) -> list[str] | None:
    """``statuses`` / ``states`` / ``vc``: None, one string, or a sequence of strings."""
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, Sequence) and value and all(isinstance(v, str) for v in value):
        return list(value)
    raise ValidationError(f"`{name}` must be a string, a non-empty sequence of strings or None; got {value!r}.")


def empty_strings(values: Sequence[Any]) -> np.ndarray:
    """Mask of the values that are not non-empty strings."""
    if set(map(type, values)) <= {str}:
        return (pd.Series(values, dtype=object) == "").to_numpy()
    return np.array([not (isinstance(v, str) and v) for v in values], dtype=bool)


def isin(values: Sequence[Any], wanted: list[str]) -> np.ndarray:
    return pd.Series(values, dtype=object).isin(wanted).to_numpy()


# ------------------------------------------------------------------------------ job tables
def fail_duplicates(chk: RowChecks, order: np.ndarray, ids: Sequence[Any], what: str) -> bool:
    """Fail (reason ``"duplicate_id"``) and resolve every row of ``order`` whose id an earlier
    row of ``order`` holds, named ``"<what> '<id>' appears twice (first at <row>)"``; whether
    any row did."""
    id_s = pd.Series(np.asarray(ids, dtype=object)[order], dtype=object)
    dup = id_s.duplicated(keep="first").to_numpy()
    if not dup.any():
        return False
    first_at: dict[Any, str] = {}
    for i, v in zip(order[~dup].tolist(), id_s[~dup].tolist()):
        first_at.setdefault(v, chk.where[i])
    bad = np.zeros(chk.n, dtype=bool)
    bad[order[dup]] = True
    chk.fail(bad, "duplicate_id", lambda i: f"{what} {ids[i]!r} appears twice (first at {first_at[ids[i]]})")
    chk.resolve()
    return True


def finish_table(chk: RowChecks, report: LoadReport, cols: dict[str, Any], *, sort: bool,
                 cluster: Cluster | None, meta: dict[str, Any], counts: Mapping[str, str] | None = None,
                 others: Sequence[LoadReport] = ()) -> pd.DataFrame:
    """Arrival order, duplicates and cluster fit over the rows still alive; the job table.

    ``cols`` holds full-length arrays (one entry per row of ``chk``) for every column of
    :data:`JOB_TABLE_COLUMNS`. Then ``meta[key]`` = the count of rows filtered for
    ``reason``, for every ``key -> reason`` of ``counts``. The bad rows of ``report`` and
    ``others`` raise under ``on_bad_rows="raise"`` (:meth:`LoadReport.check`).
    """
    check_bool(sort, "sort")
    arrival = np.asarray(cols["arrival"], dtype=float)
    ids = cols["job_id"]
    alive = np.flatnonzero(chk.alive)
    if sort:
        order = alive[np.argsort(arrival[alive], kind="stable")]
    else:
        a = arrival[alive]
        prev = np.maximum.accumulate(np.concatenate([[-np.inf], a]))[:-1] if a.size else a
        bad = np.zeros(chk.n, dtype=bool)
        bad[alive[a < prev]] = True
        last = np.full(chk.n, -np.inf)
        last[alive] = prev
        chk.fail(bad, "out_of_order", lambda i: (
            f"arrivals must be non-decreasing (rows in submission order; pass sort=True to sort); "
            f"submitted at {arrival[i]:.6g} s, before the previous job at {last[i]:.6g} s"))
        chk.resolve()
        order = np.flatnonzero(chk.alive)
    if fail_duplicates(chk, order, ids, "job id"):
        order = order[chk.alive[order]]
    g = np.asarray(cols["num_gpus"], dtype=float)
    if cluster is not None and order.size:
        largest = int(cluster.counts.max()) if cluster.counts.size else 0
        gt = np.asarray(cols["gpu_type"], dtype=object)
        limit = np.full(chk.n, largest, dtype=np.int64)
        own = np.zeros(chk.n, dtype=bool)
        for t in {v for v in gt[order].tolist() if v is not None}:
            c = cluster.count(t)
            if c > 0:
                sel = gt == t
                limit[sel] = c
                own[sel] = True
        bad = np.zeros(chk.n, dtype=bool)
        bad[order] = g[order] > limit[order]

        def too_large(i: int) -> str:
            where = f"type {gt[i]!r} has {limit[i]}" if own[i] else f"the largest GPU type has {largest}"
            return f"job {ids[i]!r} asks for {int(g[i])} GPUs but {where}"

        chk.fail(bad, "too_large", too_large)
        chk.resolve()
        order = order[chk.alive[order]]
    df = pd.DataFrame({c: np.asarray(cols[c], dtype=object)[order] if c in ("job_id", "gpu_type", "user", "status",
                                                                            "source_row")
                       else np.asarray(cols[c])[order] for c in JOB_TABLE_COLUMNS})
    df["num_gpus"] = df["num_gpus"].astype(np.int64)
    df["arrival"] = df["arrival"].astype(float)
    df["duration"] = df["duration"].astype(float)
    if len(df):
        t0 = float(df["arrival"].min())
        df["arrival"] = df["arrival"] - t0
        meta["time_origin"] = t0
    report.kept = len(df)
    report.check(*others)
    meta.update(skipped_meta(report, *others))
    meta["load_report"] = report.to_dict()
    df.attrs["source"] = report.source
    df.attrs["meta"] = meta
    report.log_summary()
    for key, reason in (counts or {}).items():
        meta[key] = report.counts["filtered"].get(reason, 0)
    return df



# ------------------------------------------------------------------------------ CSV
def csv_records(text: str) -> tuple[list[int], list[list[str]]]:
    """Line number (of the record's last line) and cells of every non-empty CSV record."""
    reader = csv.reader(io.StringIO(text, newline=""))
    lines: list[int] = []
    rows: list[list[str]] = []
    with gc_paused():
        for row in reader:
            if row:
                lines.append(reader.line_num)
                rows.append(row)
    return lines, rows


#: Cells read as missing in a numeric column (as :func:`number` reads them).
_NA_CELLS = ["", "nan", "NaN", "NAN", "none", "None", "NONE", "null", "NULL", "Null"]


def csv_columns(text: str, width: int | None = None, *, numeric: Sequence[int] = (),
                skip_first: bool = False, usecols: Sequence[int] | None = None) -> tuple[list[int], list[Any]] | None:
    """Line numbers and columns of a *regular* CSV text, parsed by pandas' C reader: no
    quotes, no carriage return but in a CRLF line end, and every non-empty line has the same
    number of cells (``width`` when given). None for any other text (read it with
    :func:`csv_records`).

    Columns are lists of str, except those in ``numeric``: float arrays (NaN for a missing
    cell) when every cell of every such column is a number or missing, else str lists too.
    ``skip_first``: leave out the first non-empty line (a header). ``usecols``: parse only
    these columns (the others come back as None).
    """
    if not text or '"' in text or text.count("\r") != text.count("\r\n"):
        return None
    b = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    nl = np.flatnonzero(b == 10)
    starts = np.concatenate([[0], nl + 1])
    ends = np.append(nl, b.size)
    lengths = ends - starts
    if "\r" in text:
        lengths -= (lengths > 0) & (b[np.maximum(ends - 1, 0)] == 13)
    cells = np.bincount(np.searchsorted(nl, np.flatnonzero(b == 44)), minlength=starts.size) + 1
    full = lengths > 0
    counts = np.unique(cells[full])
    if counts.size != 1 or (width is not None and counts[0] != width):
        return None
    w = int(counts[0])
    lines = (np.flatnonzero(full) + 1).tolist()
    first = lines[0] - 1 if lines else 0
    if skip_first:
        lines = lines[1:]
    if not lines:   # a header and no record: the row-by-row path (pandas would raise EmptyDataError)
        return None
    used = list(range(w)) if usecols is None else sorted(set(usecols))
    kw: dict[str, Any] = {"header": None, "keep_default_na": False, "skip_blank_lines": True, "usecols": used,
                          "quoting": csv.QUOTE_NONE, "engine": "c", "skiprows": [first] if skip_first else None}
    df = None
    if numeric:
        dtype: dict[int, Any] = {k: str for k in used}
        dtype.update({k: "float64" for k in numeric if k in used})
        try:
            df = pd.read_csv(io.StringIO(text), dtype=dtype, na_values={k: _NA_CELLS for k in numeric}, **kw)
        except (ValueError, TypeError, OverflowError):
            df = None
    if df is None:
        df = pd.read_csv(io.StringIO(text), dtype=str, na_filter=False, **kw)
    if len(df) != len(lines) or df.shape[1] != len(used):
        return None
    cols: list[Any] = [None] * w
    for k in used:
        cols[k] = df[k].to_numpy() if df[k].dtype.kind == "f" else df[k].tolist()
    return lines, cols


def csv_table(text: str, width: int | None, *, fill: str | None, numeric: Sequence[int] = (),
              skip_first: bool = False, usecols: Sequence[int] | None = None) -> tuple[list[int], np.ndarray, list[Any]]:
    """Line numbers, cell counts and the first ``width`` columns (default: as many as the
    first record has; ``fill`` where a record is shorter) of the non-empty CSV records
    (without the first with ``skip_first``); ``numeric`` columns may come as float arrays,
    and columns not in ``usecols`` as None (:func:`csv_columns`)."""
    fast = csv_columns(text, width, numeric=numeric, skip_first=skip_first, usecols=usecols)
    if fast is not None:
        lines, cols = fast
        return lines, np.full(len(lines), len(cols), dtype=np.int64), cols
    lines, rows = csv_records(text)
    ncols = width if width is not None else (len(rows[0]) if rows else 0)   # the header's width, with skip_first
    if skip_first:
        lines, rows = lines[1:], rows[1:]
    counts = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    return lines, counts, columns_of(rows, ncols, strip=False, fill=fill)


def first_line(text: str) -> list[str]:
    """Cells of the first non-empty line (for a header check)."""
    for line in text.split("\n", 64)[:64]:
        if line.strip("\r"):
            return next(csv.reader([line]), [])
    return []



def cell_text(col: Any, i: int) -> str:
    """Cell ``i`` of a column from :func:`csv_columns` as text (numbers as Python writes them)."""
    v = col[i]
    if isinstance(v, str):
        return v
    v = float(v)
    return "" if math.isnan(v) else repr(v)


def columns_of(rows: list[list[str]], width: int, *, strip: bool, fill: str | None = None) -> list[list[Any]]:
    """The first ``width`` columns of ``rows`` (``fill`` where a row is too short), cells
    stripped with ``strip``."""
    if not rows:
        return [[] for _ in range(width)]
    with gc_paused():
        if all(len(r) == width for r in rows):
            cols = [list(c) for c in zip(*rows)]
        else:
            cols = [[r[k] if k < len(r) else fill for r in rows] for k in range(width)]
        if strip:
            cols = [[x.strip() if isinstance(x, str) else x for x in col] for col in cols]
    return cols


def needs_strip(text: str) -> bool:
    """Whether any comma-separated cell of ``text`` may start or end with white space."""
    edges = (", ", " ,", ",\t", "\t,", "\n ", " \n", "\n\t", "\t\n", " \r", "\t\r")
    return text[:1] in (" ", "\t") or text[-1:] in (" ", "\t") or any(e in text for e in edges)


