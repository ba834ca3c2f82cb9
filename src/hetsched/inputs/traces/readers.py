"""Trace readers: Gavel, Philly, Helios/Lucid and Alibaba PAI 2020, from local files only.

Two kinds of source:

* **Gavel's trace** (10 tab-separated columns per line, or 9, 11 or the older 7 of its
  Philly-derived ``msr`` traces; job types named as in the throughput table) becomes a
  :class:`~hetsched.sim.Trace` directly with :func:`read_gavel_trace`; the cluster sizes
  of Gavel's msr experiments (``cluster_specs.json``) come from
  :func:`read_gavel_cluster_specs`.
* **Cluster logs** (Philly ``cluster_job_log`` JSON, Helios/Lucid ``cluster_log.csv``,
  Alibaba PAI 2020 job and task tables) record when jobs were submitted, how many GPUs they
  held and for how long, but not what they trained. Their readers return a *job table*
  (a DataFrame with :data:`JOB_TABLE_COLUMNS`); :func:`trace_from_table` then gives every
  job a job type from a throughput catalogue (uniform among the types that have a row at
  the job's GPU count, seeded) and turns its duration into steps at that type's throughput.

**Rows the readers do not keep** (:mod:`hetsched.inputs.traces.load_report`). Real traces hold
jobs that never started, never finished or lasted zero seconds, and Gavel's msr traces
hold job types the throughput table lacks: by default (``errors="drop"``) such rows are
dropped and counted by reason in a load report, ``meta["load_report"]`` of the trace
(``attrs["meta"]["load_report"]`` of a job table). A *malformed* row -- a missing or
non-numeric field, a wrong number of columns, bytes that are not UTF-8, a duplicate id,
arrivals out of order, a job larger than ``cluster`` -- raises a
:class:`~hetsched.errors.ValidationError` naming it (``line N`` of a text file, header =
line 1; ``entry N`` of a JSON list, from 0) and the rule and value; ``errors="skip"``
drops and counts those too, ``errors="raise"`` rejects every row that is not kept (the
first in file order). ``meta["skipped"]`` lists the message of every dropped row.

The readers parse columns at once (pandas, numpy) and build messages only for the rows
they name. Each format's numeric and time columns are described as data (``_HELIOS``,
``_PAI_JOB_FIELDS``, ...: :class:`~hetsched.inputs.traces.cells.Field`, how a cell is read, what
an absent one means, the rule its value follows) and checked by one routine
(:func:`~hetsched.inputs.traces.cells.apply_schema` and its parts). Nothing is ever downloaded.
"""

from __future__ import annotations

import csv
import inspect
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...errors import ValidationError
from ..cluster import Cluster
from ..jobs import JobSet
from ..throughputs import ThroughputCatalogue, load_gavel_throughputs
from ...validation import check_choice
from .gavel import read_gavel_cluster_specs, read_gavel_trace, reference_column
from .load_report import LoadReport, RowChecks
from ..trace import Trace
from .cells import (
    ABSENT,
    JOB_TABLE_COLUMNS,
    OK,
    Field,
    bad_utf8,
    cell_text,
    check_fields,
    columns_of,
    csv_columns,
    csv_records,
    decode_text,
    duration_checks,
    empty_strings,
    fail_duplicates,
    fail_fields,
    finish_table,
    gc_paused,
    isin,
    needs_strip,
    path_arg,
    read_fields,
    selection,
)

__all__ = [
    "JOB_TABLE_COLUMNS",
    "load_trace",
    "read_gavel_cluster_specs",
    "read_gavel_trace",
    "read_helios_trace",
    "read_pai_trace",
    "read_philly_trace",
    "trace_from_table",
]

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------ Philly
def _gpu_count(detail: Any) -> int:
    """GPUs held over the hosts of an attempt's ``detail``; -1 when it is malformed."""
    if type(detail) is not list:
        return -1
    g = 0
    for host in detail:
        hg = host.get("gpus") if type(host) is dict else None
        if type(hg) is not list:
            return -1
        g += len(hg)
    return g


#: The times of a Philly entry and of its last attempt, and what an absent one means.
_PHILLY_FIELDS = (
    Field("submitted_time", "time", invalid="bad_time"),
    Field("attempts[-1].start_time", "time", missing="never_started", invalid="bad_time"),
    Field("attempts[-1].end_time", "time", missing="unfinished", invalid="bad_time"),
)
_PHILLY_TOP = ("status", "vc", "jobid", "user", "submitted_time", "attempts")
_PHILLY_ATTEMPT = ("start_time", "end_time", "detail")


def _columns(rows: list[Any], keys: tuple[str, ...]) -> list[list[Any]]:
    """``[[row.get(k) for row in rows] for k in keys]``; rows that are not dicts give None.
    Fast path: every row is a dict with every key (one C-level ``itemgetter`` pass)."""
    if not rows:
        return [[] for _ in keys]
    try:
        return [list(col) for col in zip(*map(itemgetter(*keys), rows))]
    except (KeyError, TypeError):
        return [[r.get(k) if type(r) is dict else None for r in rows] for k in keys]


def _philly_fields(raw: list[Any]) -> dict[str, Any]:
    """The fields of every entry, one list per field (None where absent): ``object``,
    ``status``, ``vc``, ``jobid``, ``user``, ``submitted_time``, ``attempts`` state (0 a
    non-empty list, 1 empty, 2 not a list), ``last_ok`` (the last attempt is an object),
    its ``start_time`` / ``end_time`` and ``gpus`` (-1: ``detail`` malformed); ``att_repr``
    the ``attempts`` value of entries without a last attempt."""
    obj = [type(j) is dict for j in raw]
    status, vc, jobid, user, sub, att = _columns(raw, _PHILLY_TOP)
    last = [a[-1] if type(a) is list and a else None for a in att]
    start, end, detail = _columns(last, _PHILLY_ATTEMPT)
    return {
        "object": obj, "status": status, "vc": vc, "jobid": jobid, "user": user, "submitted_time": sub,
        "attempts": [0 if x is not None else (1 if type(a) is list else 2) for a, x in zip(att, last)],
        "att_repr": {i: a for i, (a, x) in enumerate(zip(att, last)) if x is None},
        "last_ok": [x is None or type(x) is dict for x in last],
        "start_time": start, "end_time": end,
        "gpus": [_gpu_count(d) if type(x) is dict else -1 for x, d in zip(last, detail)],
    }


def read_philly_trace(
    path: str | Path,
    *,
    statuses: Sequence[str] | str | None = None,
    vc: Sequence[str] | str | None = None,
    cluster: Cluster | None = None,
    sort: bool = False,
    errors: str = "drop",
) -> pd.DataFrame:
    """Read Microsoft Philly's ``cluster_job_log`` (a JSON list of jobs) into a job table.

    Each entry has ``jobid``, ``vc`` (virtual cluster), ``user``, ``status`` ("Pass",
    "Killed", "Failed"), ``submitted_time`` and ``attempts``, a list of ``{"start_time",
    "end_time", "detail": [{"ip": host, "gpus": ["gpu0", ...]}]}``. Times are
    "YYYY-MM-DD HH:MM:SS" (or seconds).

    * arrival: ``submitted_time``; duration: the last attempt's ``end_time - start_time``
      (earlier attempts failed and were retried); GPUs: the number of GPUs the last attempt
      held (summed over its hosts).
    * Dropped and counted by default (rows the real log holds): no attempt or a last
      attempt without ``start_time`` (``never_started``), ``end_time`` missing or
      ``"None"`` (``unfinished``), no GPUs (``no_gpus``), end equal to start
      (``zero_duration``).
    * Malformed (raise by default): a missing or unreadable ``jobid`` /
      ``submitted_time``, a time that is neither seconds nor a date-time, ``attempts`` or
      ``detail`` of the wrong shape, an end before the start, a submission after the
      start, arrivals out of order (unless ``sort``), a duplicate id, a job larger than
      ``cluster``.

    Parameters
    ----------
    path : str or Path
    statuses : str or sequence of str, optional
        Keep only jobs with these statuses (default all; filtered rows are counted, not
        errors).
    vc : str or sequence of str, optional
        Keep only jobs of these virtual clusters (the entries' ``vc``). A name the file
        does not hold raises, listing the ones it does.
    cluster : Cluster, optional
        Jobs larger than every GPU type of the cluster are malformed rows.
    sort : bool, default False
        Sort by submission time instead of requiring the file to be in order.
    errors : {"drop", "skip", "raise"}, default "drop"
        See :mod:`hetsched.inputs.traces.load_report`.

    Returns
    -------
    DataFrame
        A job table (:data:`JOB_TABLE_COLUMNS`); ``gpu_type`` is None (Philly does not
        say); ``attrs["meta"]`` holds ``load_report``, ``skipped``, ``filtered_status``,
        ``filtered_vc``.
    """
    p = path_arg(path)
    report = LoadReport(str(p), errors)
    wanted_status = selection(statuses, "statuses")
    wanted_vc = selection(vc, "vc")
    text, escaped = _decode_json(p, report)
    f, kinds, bad_bytes = _parse_philly(p, text, escaped)
    _check_vc_names(p, wanted_vc, f["vc"])
    where = [f"entry {i}" for i in range(len(f["object"]))]
    chk = RowChecks(report, where)
    _check_philly_entries(chk, f, kinds, bad_bytes, wanted_status, wanted_vc)
    sub, dur, g = _check_philly_attempts(chk, f)
    chk.resolve()
    cols = {"job_id": f["jobid"], "arrival": sub, "num_gpus": np.maximum(g, 0), "duration": dur,
            "gpu_type": [None] * chk.n, "user": f["user"], "status": f["status"], "source_row": where}
    meta = {"format": "philly", "path": str(p)}
    return _finish(chk, report, cols, meta, sort=sort, cluster=cluster,
                   counts={"filtered_status": "status", "filtered_vc": "vc"})


def _decode_json(p: Path, report: LoadReport) -> tuple[str, str | None]:
    """Open phase of a JSON log: the text of ``p`` and, when it holds bytes that are not UTF-8,
    the message naming the first (raised at once when ``not_utf8`` raises under ``report``;
    else the bytes become lone surrogates and the entries holding one are failed later)."""
    data = p.read_bytes()
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        ln = data.count(b"\n", 0, exc.start) + 1
        escaped = f"{p}: line {ln}: {bad_utf8(exc, 0)}"
        if report.raises("not_utf8"):
            raise ValidationError(escaped) from None
        return data.decode("utf-8", errors="surrogateescape"), escaped


def _parse_philly(p: Path, text: str, escaped: str | None) -> tuple[dict[str, Any], dict[int, str], dict[int, int]]:
    """Parse phase: the JSON list of ``text`` as field lists (:func:`_philly_fields`), the type
    name of every entry that is not an object, and the first undecodable byte of every object
    that holds one (when ``escaped``: the message of the first bad byte, raised if the JSON
    itself is broken)."""
    # The parsed JSON (millions of small objects for a real log) lives only inside this
    # block, with the collector paused: nothing but the field lists survives it.
    with gc_paused():
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            if escaped is not None:  # the bad byte broke the JSON itself: nothing to skip
                raise ValidationError(escaped) from None
            raise ValidationError(f"{p}: must hold valid JSON (a list of jobs); {exc}.") from None
        if not isinstance(raw, list):
            raise ValidationError(f"{p}: must hold a JSON list of jobs; got {type(raw).__name__}.")
        f = _philly_fields(raw)
        n = len(raw)
        kinds = {i: type(raw[i]).__name__ for i in range(n) if not f["object"][i]}
        bad_bytes = {} if escaped is None else {
            i: b for i in range(n) if f["object"][i] and (b := _undecoded(raw[i])) is not None}
        del raw
    return f, kinds, bad_bytes


def _check_vc_names(p: Path, wanted_vc: list[str] | None, vcs: list[Any]) -> None:
    """Raise when ``wanted_vc`` names a virtual cluster no entry of ``p`` holds (listing those
    it does)."""
    if wanted_vc is None:
        return
    available = sorted({v for v in vcs if isinstance(v, str)})
    unknown = [v for v in wanted_vc if v not in available]
    if unknown:
        shown = available if len(available) <= 30 else available[:30] + [f"... ({len(available)} in all)"]
        raise ValidationError(f"`vc` must name virtual clusters of {p}; unknown {unknown}; "
                              + (f"available: {shown}." if available else "its entries have no `vc` field."))


def _check_philly_entries(chk: RowChecks, f: dict[str, Any], kinds: dict[int, str], bad_bytes: dict[int, int],
                          wanted_status: list[str] | None, wanted_vc: list[str] | None) -> None:
    """Entry phase: fail the entries that are not objects or hold undecodable bytes, filter
    the statuses and virtual clusters not asked for, then fail a missing ``jobid`` and an
    ``attempts`` that is not a non-empty list (``f``: :func:`_philly_fields`)."""
    jid = f["jobid"]
    obj = np.array(f["object"], dtype=bool)
    chk.fail(~obj, "not_an_object", lambda i: f"each entry must be an object; got {kinds[i]}")
    if bad_bytes:
        mask = np.zeros(chk.n, dtype=bool)
        mask[list(bad_bytes)] = True
        chk.fail(mask, "not_utf8", lambda i: f"is not valid UTF-8: holds the byte 0x{bad_bytes[i]:02x}; trace files must be UTF-8 text")
    if wanted_status is not None:
        chk.fail(obj & ~isin(f["status"], wanted_status), "status", None)
    if wanted_vc is not None:
        chk.fail(obj & ~isin(f["vc"], wanted_vc), "vc", None)
    chk.fail(empty_strings(jid), "missing_field",
             lambda i: f"`jobid` must be a non-empty string; got {jid[i]!r}")
    att = np.array(f["attempts"], dtype=np.int8)
    att_repr = f["att_repr"]
    chk.fail(att == 1, "never_started", lambda i: f"job {jid[i]!r}: `attempts` must be a non-empty list; got []")
    chk.fail(att == 2, "bad_attempts", lambda i: f"job {jid[i]!r}: `attempts` must be a non-empty list; got {att_repr[i]!r:.60}")


def _check_philly_attempts(chk: RowChecks, f: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Time phase: read :data:`_PHILLY_FIELDS` and fail the entries whose times, last attempt or
    its ``detail`` are unreadable, that hold no GPU, last no time or were submitted after
    they started (``f``: :func:`_philly_fields`). Returns submission times, durations and GPU
    counts (NaN / -1 where unreadable)."""
    jid, sub_r, st_r, en_r = f["jobid"], f["submitted_time"], f["start_time"], f["end_time"]
    named = _job_prefix(jid)
    c = read_fields(dict(zip((x.name for x in _PHILLY_FIELDS), (sub_r, st_r, en_r))), _PHILLY_FIELDS)
    sub, st, en = c.values()
    fail_fields(chk, c, _PHILLY_FIELDS[:1], prefix=named)
    chk.fail(~np.array(f["last_ok"], dtype=bool), "bad_attempts", lambda i: f"job {jid[i]!r}: `attempts[-1]` must be an object")
    fail_fields(chk, c, _PHILLY_FIELDS[1:], prefix=named)
    g = np.array(f["gpus"], dtype=np.int64)
    chk.fail(g < 0, "bad_detail", lambda i: f"job {jid[i]!r}: `attempts[-1].detail` must be a list of {{'ip', 'gpus': [...]}}")
    chk.fail(g == 0, "no_gpus", lambda i: f"job {jid[i]!r}: the last attempt holds no GPUs (GPU count must be positive)")
    dur = en.values - st.values
    duration_checks(chk, dur, _span_message(named, st_r, en_r))
    with np.errstate(invalid="ignore"):
        chk.fail(sub.values > st.values, "submitted_after_start",
                 lambda i: f"job {jid[i]!r}: submitted_time {sub_r[i]!r} is after the start of its last attempt")
    return sub.values, dur, g


def _job_prefix(ids: Sequence[Any]) -> Callable[[int], str]:
    """The message prefix naming row ``i`` by its job id: ``"job '<id>': "``."""
    def named(i: int) -> str:
        return f"job {ids[i]!r}: "

    return named


def _as_is(cells: Sequence[Any], i: int) -> Any:
    """Cell ``i`` of ``cells`` as it is."""
    return cells[i]


def _span_message(named: Callable[[int], str], start: Sequence[Any], end: Sequence[Any],
                  text: Callable[[Sequence[Any], int], Any] = _as_is) -> Callable[[int], str]:
    """Message of a row whose end is not after its start, quoting both cells (as ``text``
    gives them)."""
    def message(i: int) -> str:
        return (f"{named(i)}duration must be positive; end_time {text(end, i)!r} is not "
                f"after start_time {text(start, i)!r}")

    return message


def _finish(chk: RowChecks, report: LoadReport, cols: dict[str, Any], meta: dict[str, Any], *, sort: bool,
            cluster: Cluster | None, counts: Mapping[str, str]) -> pd.DataFrame:
    """Build phase of the cluster-log readers: the job table
    (:func:`~hetsched.inputs.traces.cells.finish_table`), then ``meta[key]`` = the count of rows
    filtered for ``reason`` for every ``key -> reason`` of ``counts``."""
    df = finish_table(chk, report, cols, sort=sort, cluster=cluster, meta=meta)
    for key, reason in counts.items():
        meta[key] = report.counts["filtered"].get(reason, 0)
    return df


def _undecoded(value: Any) -> int | None:
    """The first byte that was not UTF-8 (a surrogate escape) in a parsed JSON value, or None."""
    if isinstance(value, str):
        for ch in value:
            if "\udc80" <= ch <= "\udcff":
                return ord(ch) - 0xDC00
        return None
    if isinstance(value, dict):
        items = [*value.keys(), *value.values()]
    elif isinstance(value, list):
        items = value
    else:
        return None
    for v in items:
        b = _undecoded(v)
        if b is not None:
            return b
    return None


# ------------------------------------------------------------------------------ Helios
def read_helios_trace(
    path: str | Path,
    *,
    states: Sequence[str] | str | None = None,
    gpu_type: str | None = None,
    cluster: Cluster | None = None,
    sort: bool = False,
    errors: str = "drop",
) -> pd.DataFrame:
    """Read a Helios / Lucid ``cluster_log.csv`` into a job table.

    Header columns (Helios, SC'21; Lucid, ASPLOS'23 reuses them): ``job_id, user,
    gpu_num, cpu_num, node_num, state, submit_time, start_time, end_time, duration, queue``;
    only ``job_id``, ``gpu_num`` and ``submit_time`` plus either ``duration`` or
    ``start_time``/``end_time`` are required, other columns are ignored. Times are
    "YYYY-MM-DD HH:MM:SS" or seconds. The duration is the ``duration`` cell, or
    ``end_time - start_time`` where that cell is empty or the column absent.

    * CPU-only jobs (``gpu_num == 0``) are filtered (``cpu_only``; ``meta["cpu_jobs"]``).
    * Dropped and counted by default: a zero duration (``zero_duration``: Helios's
      cancelled jobs), a ``duration`` of NaN or a missing ``end_time`` (``unfinished``), a
      missing ``start_time`` (``never_started``).
    * Malformed (raise by default): extra cells, a missing ``job_id``, a ``gpu_num`` that
      is not a non-negative integer, a missing or unreadable ``submit_time``, a negative
      duration or submission, arrivals out of order (unless ``sort``), a duplicate id, a job
      larger than ``cluster``.

    Parameters
    ----------
    path : str or Path
    states : str or sequence of str, optional
        Keep only jobs in these states (e.g. ``["COMPLETED"]``); default all.
    gpu_type : str, optional
        GPU type of the cluster the log comes from (Helios clusters are homogeneous); it
        becomes the jobs' ``gpu_type`` (its throughput then sets the steps).
    cluster, sort, errors
        As for :func:`read_philly_trace`.
    """
    p = path_arg(path)
    report = LoadReport(str(p), errors)
    wanted = selection(states, "states")
    text = decode_text(p, report, header=True)
    header = _first_line(text) if text.split("\n", 1)[0].strip("\r") else []
    numeric = [header.index("gpu_num")] if "gpu_num" in header else []
    lines, width, table = _csv_table(text, None, fill=None, numeric=numeric, skip_first=bool(header))
    missing = [c for c in ("job_id", "gpu_num", "submit_time") if c not in header]
    if "duration" not in header and not {"start_time", "end_time"} <= set(header):
        missing.append("duration (or start_time and end_time)")
    if missing:
        raise ValidationError(f"{p}: line 1: the header must name {missing}; got {header}.")
    pos = {c: k for k, c in enumerate(header)}
    where = [f"line {ln}" for ln in lines]
    chk = RowChecks(report, where)
    n = len(lines)
    chk.fail(width > len(header), "bad_columns", lambda i: f"has more cells than the header's {len(header)} columns")

    def cells_of(name: str) -> list[str | None]:
        return table[pos[name]] if name in pos else [None] * n

    state = cells_of("state")
    if wanted is not None:
        chk.fail(~isin(state, wanted), "status", None)
    jid = [(c or "").strip() for c in cells_of("job_id")]
    chk.fail(np.array([not j for j in jid], dtype=bool), "missing_field", lambda i: "`job_id` is missing")
    named = _job_prefix(jid)
    F = _HELIOS
    c = read_fields({name: cells_of(name) for name in ("gpu_num", "submit_time")}, (F["gpu_num"], F["submit_time"]))
    g, sub = c["gpu_num"], c["submit_time"]
    fail_fields(chk, c, (F["gpu_num"],), prefix=named)
    chk.fail(g.values == 0, "cpu_only", None)
    fail_fields(chk, c, (F["submit_time"],), prefix=named)
    # The duration cell where given, else end_time - start_time.
    dur_raw = cells_of("duration")
    given = np.array([c is not None and c.strip() != "" for c in dur_raw], dtype=bool)
    dur = np.full(n, np.nan)
    for fields, rows in (((F["duration"],), given), ((F["start_time"], F["end_time"]), ~given)):
        if rows.any():
            c = read_fields({f.name: cells_of(f.name) for f in fields}, fields)
            for col in c.values():
                col.state[~rows] = OK
            fail_fields(chk, c, fields, prefix=named)
            values = c["duration"].values if "duration" in c else c["end_time"].values - c["start_time"].values
            dur[rows] = values[rows]
    check_fields(chk, {"gpu_num": g}, (F["gpu_num"],), prefix=named)
    duration_checks(chk, dur, lambda i: f"job {jid[i]!r}: duration must be positive; got {dur[i]:.6g} s")
    check_fields(chk, {"submit_time": sub}, (F["submit_time"],), prefix=named)
    chk.resolve()
    cols = {"job_id": jid, "arrival": sub.values, "num_gpus": np.nan_to_num(g.values), "duration": dur,
            "gpu_type": [gpu_type] * n, "user": cells_of("user"), "status": state, "source_row": where}
    meta = {"format": "helios", "path": str(p)}
    return _finish(chk, report, cols, meta, sort=sort, cluster=cluster,
                   counts={"cpu_jobs": "cpu_only", "filtered_state": "status"})


#: Helios / Lucid ``cluster_log.csv``: the columns read as numbers or times, and their rules.
_HELIOS = {f.name: f for f in (
    Field("gpu_num", "int", low=0, rule="a non-negative integer"),
    Field("submit_time", "time", invalid="bad_time", low=0),
    Field("duration", missing="unfinished"),
    Field("start_time", "time", missing="never_started", invalid="bad_time"),
    Field("end_time", "time", missing="unfinished", invalid="bad_time"),
)}


# ------------------------------------------------------------------------------ PAI
_PAI_JOB = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
_PAI_TASK = ("job_name", "task_name", "inst_num", "status", "start_time", "end_time", "plan_cpu", "plan_mem",
             "plan_gpu", "gpu_type")
#: The numeric columns of the job and task tables (times in seconds) and their rules.
_PAI_JOB_FIELDS = (
    Field("start_time", missing="never_started", low=0),
    Field("end_time", missing="unfinished"),
)
_PAI_TASK_FIELDS = (
    Field("inst_num", "int", low=1, rule="positive"),
    Field("plan_gpu", low=0),
)


def _csv_table(text: str, width: int | None, *, fill: str | None, numeric: Sequence[int] = (),
               skip_first: bool = False, usecols: Sequence[int] | None = None) -> tuple[list[int], np.ndarray, list[Any]]:
    """Line numbers, cell counts and the first ``width`` columns (default: as many as the
    first record has; ``fill`` where a record is shorter) of the non-empty CSV records
    (without the first with ``skip_first``); ``numeric`` columns may come as float arrays,
    and columns not in ``usecols`` as None (:func:`~hetsched.inputs.traces.cells.csv_columns`)."""
    fast = csv_columns(text, width, numeric=numeric, skip_first=skip_first, usecols=usecols)
    if fast is not None:
        lines, cols = fast
        return lines, np.full(len(lines), len(cols), dtype=np.int64), cols
    lines, rows = csv_records(text)
    if skip_first:
        lines, rows = lines[1:], rows[1:]
    counts = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    ncols = width if width is not None else (len(rows[0]) if rows else 0)
    return lines, counts, columns_of(rows, ncols, strip=False, fill=fill)


def _first_line(text: str) -> list[str]:
    """Cells of the first non-empty line (for a header check)."""
    for line in text.split("\n", 64)[:64]:
        if line.strip("\r"):
            return next(csv.reader([line]), [])
    return []


def _pai_table(p: Path, columns: tuple[str, ...], report: LoadReport, numeric: Sequence[str],
               used: Sequence[str]) -> tuple[RowChecks, dict[str, Any]]:
    """Rows of a PAI table (blank rows and an optional header line left out), their cells
    stripped, and a checker whose first check is the cell count. ``numeric`` columns may be
    float arrays (NaN: missing); columns not in ``used`` may be None."""
    text = decode_text(p, report)
    header = [c.strip() for c in _first_line(text)[: len(columns)]] == list(columns) and text[:1].strip() != ""
    lines, width, cols = _csv_table(text, len(columns), fill="", numeric=[columns.index(c) for c in numeric],
                                    skip_first=header, usecols=[columns.index(c) for c in used])
    if needs_strip(text):
        cols = [[x.strip() for x in col] if isinstance(col, list) else col for col in cols]
    # rows of blank cells are not rows
    drop = [k for k, x in enumerate(cols[0]) if x == "" and all(cell_text(c, k).strip() == "" for c in cols
                                                                if c is not None)]
    if drop:
        keep = np.setdiff1d(np.arange(len(lines)), drop)
        lines = [lines[k] for k in keep.tolist()]
        width = width[keep]
        cols = [None if c is None else [c[k] for k in keep.tolist()] if isinstance(c, list) else c[keep] for c in cols]
    chk = RowChecks(report, [f"line {ln}" for ln in lines])
    chk.fail(width != len(columns), "bad_columns", lambda i: (
        f"has {width[i]} comma-separated cells; the table has {len(columns)} columns {list(columns)}"))
    return chk, dict(zip(columns, cols))


def read_pai_trace(
    job_path: str | Path,
    task_path: str | Path,
    *,
    statuses: Sequence[str] | str | None = None,
    cluster: Cluster | None = None,
    sort: bool = False,
    errors: str = "drop",
) -> pd.DataFrame:
    """Read Alibaba PAI 2020's ``pai_job_table`` and ``pai_task_table`` into a job table.

    Both are CSV without a header (a header line naming the columns is accepted):

    * job table: ``job_name, inst_id, user, status, start_time, end_time`` (times in
      seconds);
    * task table: ``job_name, task_name, inst_num, status, start_time, end_time, plan_cpu,
      plan_mem, plan_gpu, gpu_type`` (``plan_gpu`` in percent of one GPU per instance).

    A job's GPUs are ``sum over its tasks of inst_num * ceil(plan_gpu / 100)`` (fractional
    GPUs round up to a whole one); its arrival is its ``start_time`` (PAI's submission
    time); its duration ``end_time - start_time``; its GPU type the tasks' ``gpu_type``
    (lower-cased) when they agree, else None ("MISC" counts as None).

    * Filtered (counted): jobs without GPU tasks (``cpu_only``, also ``meta["cpu_jobs"]``),
      statuses not asked for.
    * Dropped and counted by default: no ``start_time`` (``never_started``), no
      ``end_time`` (``unfinished``: PAI's running jobs), end equal to start.
    * Malformed (raise by default): wrong cell counts, a missing job name, a duplicate
      job, non-numeric times, an end before the start, a task naming a job the job table
      lacks, a task with a non-numeric or out-of-range ``inst_num`` / ``plan_gpu`` (with
      ``errors="skip"`` its job is dropped too: ``bad_task``), arrivals out of order.

    The task table's own counts are in ``meta["load_report"]["tasks"]`` (rows, malformed,
    filtered: ``cpu_task`` tasks without GPUs, ``job_not_kept`` tasks of jobs not kept).

    Parameters
    ----------
    job_path, task_path : str or Path
    statuses : str or sequence of str, optional
        Keep only jobs with these statuses (e.g. ``["Terminated"]``); default all.
    cluster, sort, errors
        As for :func:`read_philly_trace`.
    """
    pj = path_arg(job_path, "job_path")
    pt = path_arg(task_path, "task_path")
    report = LoadReport(str(pj), errors)
    treport = LoadReport(str(pt), errors)
    wanted = selection(statuses, "statuses")
    chk, job, in_table, arrival, dur = _pai_jobs(pj, report, wanted)
    name = job["job_name"]
    tchk, task, owner, inst, pg = _pai_tasks(pt, treport, chk, name, in_table)
    _fail_bad_task_jobs(chk, tchk, owner, name, pt)
    gpus, gpu_type = _pai_gpus(chk.n, tchk, task["gpu_type"], owner, inst, pg)
    chk.fail(gpus == 0, "cpu_only", None)
    chk.resolve()
    label = pj.name
    cols = {"job_id": name, "arrival": arrival, "num_gpus": gpus, "duration": dur, "gpu_type": gpu_type,
            "user": [u or None for u in job["user"]], "status": job["status"],
            "source_row": [f"{label} {w}" for w in chk.where]}
    meta = {"format": "pai", "job_path": str(pj), "task_path": str(pt)}
    report.source = f"{pj} + {pt.name}"
    df = _finish(chk, report, cols, meta, sort=sort, cluster=cluster,
                 counts={"cpu_jobs": "cpu_only", "filtered_status": "status"})
    meta["load_report"]["tasks"] = {k: v for k, v in treport.to_dict().items() if k != "errors"}
    meta["skipped"] = list(report.skipped) + list(treport.skipped)
    return df


def _pai_jobs(pj: Path, report: LoadReport,
              wanted: list[str] | None) -> tuple[RowChecks, dict[str, Any], np.ndarray, np.ndarray, np.ndarray]:
    """Job-table phase: read ``pj`` (:func:`_pai_table`) and fail missing and duplicate job
    names (resolved: tasks join the jobs left, ``in_table``), then filter the statuses not
    ``wanted`` and fail unreadable or out-of-range times and non-positive durations
    (resolved). Returns the checker, the columns, ``in_table``, start times and durations."""
    chk, job = _pai_table(pj, _PAI_JOB, report, ("start_time", "end_time"),
                          ("job_name", "user", "status", "start_time", "end_time"))
    name = job["job_name"]
    chk.fail(np.array([not x for x in name], dtype=bool), "missing_field", lambda i: "`job_name` is missing")
    chk.resolve()
    # Duplicates first: tasks join their job by name.
    fail_duplicates(chk, np.flatnonzero(chk.alive), name, "job")
    in_table = chk.alive.copy()
    if wanted is not None:
        chk.fail(~isin(job["status"], wanted), "status", None)
    named = _job_prefix(name)
    c = read_fields(job, _PAI_JOB_FIELDS)
    fail_fields(chk, c, _PAI_JOB_FIELDS, prefix=named)
    st, en = c["start_time"], c["end_time"]
    dur = en.values - st.values
    duration_checks(chk, dur, _span_message(named, job["start_time"], job["end_time"], cell_text))
    check_fields(chk, c, _PAI_JOB_FIELDS, prefix=named)
    chk.resolve()
    return chk, job, in_table, st.values, dur


def _pai_tasks(pt: Path, treport: LoadReport, chk: RowChecks, name: list[str],
               in_table: np.ndarray) -> tuple[RowChecks, dict[str, Any], np.ndarray, np.ndarray, np.ndarray]:
    """Task-table phase: read ``pt``, join every task to its job (``owner``: the job's row,
    -1 for a name not among the rows ``in_table`` of ``name``), fail or filter the tasks of
    unknown or dropped jobs, without GPUs or with unreadable ``inst_num`` / ``plan_gpu``
    (resolved; ``treport.kept`` set). Returns the task checker and columns, ``owner``, and
    the ``inst_num`` and ``plan_gpu`` values."""
    tchk, task = _pai_table(pt, _PAI_TASK, treport, ("inst_num", "plan_gpu"),
                            ("job_name", "task_name", "inst_num", "plan_gpu", "gpu_type"))
    rows = np.flatnonzero(in_table)
    index = pd.Index([name[i] for i in rows.tolist()])
    pos_in = index.get_indexer(pd.Series(task["job_name"], dtype=object))
    owner = np.where(pos_in >= 0, rows[np.maximum(pos_in, 0)] if index.size else -1, -1)
    tname = task["task_name"]
    tchk.fail(owner < 0, "unknown_job", lambda i: (
        f"task {tname[i]!r} names job {task['job_name'][i]!r}, which is not in the job table"))
    kept_job = np.zeros(tchk.n, dtype=bool)
    kept_job[owner >= 0] = chk.alive[owner[owner >= 0]]
    tchk.fail(~kept_job, "job_not_kept", None)
    c = read_fields(task, _PAI_TASK_FIELDS)
    inst, pg = c["inst_num"], c["plan_gpu"]
    tchk.fail(pg.state == ABSENT, "cpu_task", None)

    def tnamed(i: int) -> str:
        return f"task {tname[i]!r} of job {task['job_name'][i]!r}: "

    fail_fields(tchk, c, _PAI_TASK_FIELDS, prefix=tnamed)
    check_fields(tchk, c, _PAI_TASK_FIELDS, prefix=tnamed)
    tchk.fail(pg.values == 0, "cpu_task", None)
    tchk.resolve()
    treport.kept = int(tchk.alive.sum())
    return tchk, task, owner, inst.values, pg.values


def _fail_bad_task_jobs(chk: RowChecks, tchk: RowChecks, owner: np.ndarray, name: list[str], pt: Path) -> None:
    """Fail (``bad_task``) every job one of whose tasks was malformed (only reached with
    ``errors="skip"``), naming the first such task's row of ``pt``."""
    bad_task = np.zeros(chk.n, dtype=bool)
    task_where: dict[int, str] = {}
    for i in tchk.failed_rows("malformed").tolist():
        j = int(owner[i])
        if j >= 0:
            bad_task[j] = True
            task_where.setdefault(j, tchk.where[i])
    chk.fail(bad_task, "bad_task", lambda i: f"job {name[i]!r}: its task at {pt.name} {task_where[i]} is malformed")


def _pai_gpus(n: int, tchk: RowChecks, task_gpu_type: list[str], owner: np.ndarray, inst: np.ndarray,
              pg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GPU phase: each of the ``n`` jobs' GPUs (over its kept tasks, ``inst_num *
    ceil(plan_gpu / 100)``) and its GPU type (the kept tasks' lower-cased ``gpu_type`` when
    they name exactly one, ignoring "" and "misc"; else None)."""
    ok = tchk.alive
    contrib = np.zeros(tchk.n)
    with np.errstate(invalid="ignore"):
        contrib[ok] = inst[ok] * np.ceil(pg[ok] / 100.0 - 1e-9)
    gpus = np.bincount(owner[ok], weights=contrib[ok], minlength=n).astype(np.int64)
    gt = pd.DataFrame({"job": owner[ok], "t": [task_gpu_type[i].lower() for i in np.flatnonzero(ok).tolist()]})
    gt = gt[(gt["t"] != "") & (gt["t"] != "misc")].drop_duplicates()
    counts = gt.groupby("job")["t"].agg(["count", "first"])
    single = counts[counts["count"] == 1]["first"]
    gpu_type = np.full(n, None, dtype=object)
    gpu_type[single.index.to_numpy(dtype=np.int64)] = single.to_numpy(dtype=object)
    return gpus, gpu_type


# ------------------------------------------------------------------------------ table -> trace
def trace_from_table(
    table: pd.DataFrame,
    catalogue: ThroughputCatalogue,
    *,
    seed: int | np.random.Generator = 0,
    reference_gpu_type: str | None = None,
    gpu_type_map: Mapping[str, str] | None = None,
    unmatched: str = "raise",
    entity_column: str | None = "user",
    source: str | None = None,
) -> Trace:
    """Give every job of a job table a job type and steps; return a :class:`Trace`.

    For job ``j`` with ``g`` GPUs and duration ``d``:

    1. its job type is drawn uniformly (with ``seed``) among the catalogue rows with scale
       factor ``g`` that can run on some GPU type;
    2. its steps are ``ceil(d * T[row, k])`` with ``k`` the GPU type it ran on (its
       ``gpu_type``, mapped through ``gpu_type_map``, when the catalogue has that type
       and a positive throughput there), else ``reference_gpu_type`` (default: the
       catalogue's fastest): the job would take ``d`` again on the hardware it used.

    Parameters
    ----------
    table : DataFrame
        A job table (:data:`JOB_TABLE_COLUMNS`), e.g. from :func:`read_philly_trace`.
    catalogue : ThroughputCatalogue
        Job types and throughputs.
    seed : int or numpy.random.Generator, default 0
    reference_gpu_type : str, optional
    gpu_type_map : Mapping[str, str], optional
        Trace GPU type names -> catalogue names (e.g. ``{"v100m32": "v100"}``).
    unmatched : {"raise", "round_up", "skip"}, default "raise"
        What to do with a GPU count the catalogue has no row for (e.g. 3 GPUs when rows
        exist for 1/2/4/8): a bad row naming the job, use the next larger scale factor, or
        drop the job.
    entity_column : str or None, default "user"
        Column that becomes ``JobSet.entities`` (the owner hierarchical policies share by)
        when every kept job has a value in it; None: no entities.
    source : str, optional
        Label recorded in the trace (default: the table's ``attrs["source"]``).

    Returns
    -------
    Trace
        Ids from ``job_id``; arrivals from ``arrival`` (must be non-decreasing); job types
        and unconsolidated throughputs from the catalogue.
    """
    src, rows_label = _check_table_args(table, catalogue, unmatched, source)
    gen = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(int(seed))
    g, d, a = _table_numbers(table, src, rows_label)
    runnable = (catalogue.throughputs > 0).any(axis=1)
    avail = np.array(sorted({int(x) for x in catalogue.scale_factors[runnable]}), dtype=np.int64)
    sf, keep = _match_scale_factors(table, g, avail, unmatched, src, rows_label)
    idx = np.flatnonzero(keep)
    sf, d, a = sf[idx], d[idx], a[idx]
    rows = _draw_job_types(gen, sf, catalogue, runnable, avail)
    ref = reference_column(catalogue, reference_gpu_type)
    T = catalogue.throughputs[rows]
    col = _run_columns(table, idx, T, catalogue, ref, gpu_type_map)
    tref = T[np.arange(idx.size), col]
    tref = np.where(tref > 0, tref, T.max(axis=1))
    steps = np.ceil(d * tref)
    ids = table["job_id"].to_numpy()[idx]
    jobs = JobSet(T, gpu_types=catalogue.gpu_types, ids=ids, scale_factors=sf, steps_remaining=steps, arrival_times=a,
                  entities=_entities(table, entity_column, idx))
    U = None if catalogue.unconsolidated is None else catalogue.unconsolidated[rows]
    meta = dict(table.attrs.get("meta", {}))
    meta.update({"catalogue": repr(catalogue), "dropped_unmatched": int((~keep).sum())})
    return Trace(jobs, unconsolidated=U, job_types=catalogue.job_types[rows], source=str(src), meta=meta)


def _check_table_args(table: Any, catalogue: Any, unmatched: Any, source: str | None) -> tuple[Any, list[str]]:
    """Argument phase of :func:`trace_from_table`: raise unless ``table`` is a job table,
    ``catalogue`` a catalogue and ``unmatched`` a known choice. Returns the source label and
    every row's label (its ``source_row``, else ``row i``)."""
    if not isinstance(table, pd.DataFrame):
        raise ValidationError(f"`table` must be a pandas DataFrame (a job table); got {type(table).__name__}.")
    missing = [c for c in ("job_id", "arrival", "num_gpus", "duration") if c not in table.columns]
    if missing:
        raise ValidationError(f"`table` must have columns {list(JOB_TABLE_COLUMNS)}; missing {missing}.")
    if not isinstance(catalogue, ThroughputCatalogue):
        raise ValidationError(f"`catalogue` must be a ThroughputCatalogue; got {type(catalogue).__name__}.")
    check_choice(unmatched, "unmatched", ("raise", "round_up", "skip"))
    src = source or table.attrs.get("source", "table")
    rows_label = table["source_row"].tolist() if "source_row" in table.columns else [f"row {i}" for i in range(len(table))]
    return src, rows_label


def _table_numbers(table: pd.DataFrame, src: Any, rows_label: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``num_gpus``, ``duration`` and ``arrival`` columns of ``table``; raise naming the
    first row where one is not finite, then where a GPU count or duration is not positive."""
    g = table["num_gpus"].to_numpy()
    d = table["duration"].to_numpy(dtype=float)
    a = table["arrival"].to_numpy(dtype=float)
    for name, arr in (("num_gpus", g.astype(float)), ("duration", d), ("arrival", a)):
        bad = ~np.isfinite(arr)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValidationError(f"{src}: {rows_label[i]}: `{name}` must be a finite number; got {arr[i]!r}.")
    for name, arr in (("num_gpus", g.astype(float)), ("duration", d)):
        bad = arr <= 0
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValidationError(f"{src}: {rows_label[i]}: `{name}` must be positive; got {arr[i]!r}.")
    return g, d, a


def _match_scale_factors(table: pd.DataFrame, g: np.ndarray, avail: np.ndarray, unmatched: str, src: Any,
                         rows_label: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Every job's scale factor: its GPU count ``g`` where the catalogue has runnable rows at
    it (``avail``), else as ``unmatched`` says (the next larger one, drop it with a warning,
    or raise). Returns the scale factors and the mask of jobs kept."""
    sf = g.astype(np.int64)
    keep = np.ones(len(table), dtype=bool)
    for i in np.flatnonzero(~np.isin(sf, avail)):
        if unmatched == "round_up" and (avail >= sf[i]).any():
            sf[i] = int(avail[avail >= sf[i]][0])
        elif unmatched == "skip":
            keep[i] = False
            log.warning("%s: %s: no catalogue row with %d GPUs; job dropped", src, rows_label[i], sf[i])
        else:
            raise ValidationError(
                f"{src}: {rows_label[i]}: job {table['job_id'].iloc[i]!r} uses {int(g[i])} GPUs, but the throughput "
                f"table has rows only for scale factors {avail.tolist()} (pass unmatched='round_up' or 'skip')."
            )
    return sf, keep


def _draw_job_types(gen: np.random.Generator, sf: np.ndarray, catalogue: ThroughputCatalogue, runnable: np.ndarray,
                    avail: np.ndarray) -> np.ndarray:
    """The catalogue row of every job: drawn uniformly with ``gen`` among the ``runnable``
    rows at its scale factor ``sf`` (one uniform draw per job, in order)."""
    pools = {int(x): np.flatnonzero((catalogue.scale_factors == x) & runnable) for x in avail}
    u = gen.random(sf.size)
    rows = np.empty(sf.size, dtype=np.int64)
    for x, pool in pools.items():
        sel = sf == x
        rows[sel] = pool[np.minimum((u[sel] * pool.size).astype(np.int64), pool.size - 1)]
    return rows


def _run_columns(table: pd.DataFrame, idx: np.ndarray, T: np.ndarray, catalogue: ThroughputCatalogue, ref: int,
                 gpu_type_map: Mapping[str, str] | None) -> np.ndarray:
    """The catalogue column of the GPU type each kept job (rows ``idx`` of ``table``, with
    throughputs ``T``) ran on: its ``gpu_type`` mapped through ``gpu_type_map`` when the
    catalogue has it with a positive throughput, else ``ref``."""
    col = np.full(idx.size, ref, dtype=np.int64)
    if "gpu_type" in table.columns:
        gmap = {str(k).lower(): v for k, v in (gpu_type_map or {}).items()}
        pos = {t: k for k, t in enumerate(catalogue.gpu_types)}
        for i, gt in enumerate(table["gpu_type"].to_numpy()[idx]):
            if isinstance(gt, str) and gt:
                name = gmap.get(gt.lower(), gt.lower())
                k = pos.get(name)
                if k is not None and T[i, k] > 0:
                    col[i] = k
    return col


def _entities(table: pd.DataFrame, entity_column: str | None, idx: np.ndarray) -> np.ndarray | None:
    """``entity_column`` of the kept rows ``idx`` as strings, or None when there is no such
    column or a kept row has no value in it."""
    if entity_column is not None and entity_column in table.columns:
        vals = table[entity_column].to_numpy()[idx]
        if len(vals) and all(pd.notna(v) and str(v) != "" for v in vals):
            return np.array([str(v) for v in vals], dtype=object)
    return None


# ------------------------------------------------------------------------------ dispatch
_FORMATS = ("gavel", "philly", "helios", "pai")


def load_trace(
    path: str | Path,
    format: str | None = None,
    *,
    throughputs: str | Path | ThroughputCatalogue | None = None,
    task_path: str | Path | None = None,
    seed: int = 0,
    cluster: Cluster | None = None,
    errors: str = "drop",
    **options: Any,
) -> Trace:
    """Read any supported trace into a :class:`Trace` (reader + :func:`trace_from_table`).

    Parameters
    ----------
    path : str or Path
        The trace (for "pai": the job table).
    format : {"gavel", "philly", "helios", "pai"}, optional
        Default from the file name: ``.json`` philly, ``.csv`` helios, anything else gavel.
    throughputs : path or ThroughputCatalogue, optional
        Gavel-format table (required for "gavel"; default for the others: the project's
        generated catalogue, :func:`hetsched.generate_catalogue` with ``seed``).
    task_path : str or Path, optional
        The PAI task table (required for "pai").
    seed : int, default 0
        Seeds the job-type draw of cluster logs.
    cluster : Cluster, optional
        Checks that every job fits.
    errors : {"drop", "skip", "raise"}, default "drop"
        Rows real traces contain are dropped and counted (``meta["load_report"]``),
        malformed rows raise; see :mod:`hetsched.inputs.traces.load_report`.
    **options
        Passed to the reader (e.g. ``sort=True``, ``states=[...]``, ``vc=[...]`` for Philly) or to
        :func:`trace_from_table` (``unmatched``, ``gpu_type_map``, ``reference_gpu_type``).
    """
    p = Path(path) if isinstance(path, (str, Path)) else path
    fmt = format
    if fmt is None:
        suffix = Path(str(p)).suffix.lower()
        fmt = {".json": "philly", ".csv": "helios"}.get(suffix, "gavel")
    check_choice(fmt, "format", _FORMATS)
    table_opts = {k: options.pop(k) for k in ("unmatched", "gpu_type_map", "reference_gpu_type") if k in options}
    reader = {"gavel": read_gavel_trace, "philly": read_philly_trace, "helios": read_helios_trace,
              "pai": read_pai_trace}[fmt]
    accepted = set(inspect.signature(reader).parameters) - {"path", "throughputs", "task_path", "cluster", "errors"}
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise ValidationError(
            f"`load_trace` options for format {fmt!r} must be among {sorted(accepted)} (reader) or "
            f"['gpu_type_map', 'reference_gpu_type', 'unmatched'] (trace_from_table); got {unknown}."
        )
    if fmt == "gavel":
        if throughputs is None:
            raise ValidationError("a Gavel trace needs `throughputs` (the Gavel-format throughput JSON or a catalogue).")
        return read_gavel_trace(p, throughputs, cluster=cluster, errors=errors,
                                reference_gpu_type=table_opts.get("reference_gpu_type"), **options)
    if throughputs is None:
        from ..throughputs import generate_catalogue

        cat = generate_catalogue(seed=seed)
    elif isinstance(throughputs, ThroughputCatalogue):
        cat = throughputs
    else:
        cat = load_gavel_throughputs(throughputs)
    if fmt == "philly":
        table = read_philly_trace(p, cluster=cluster, errors=errors, **options)
    elif fmt == "helios":
        table = read_helios_trace(p, cluster=cluster, errors=errors, **options)
    else:
        if task_path is None:
            raise ValidationError("a PAI trace needs `task_path` (pai_task_table.csv) beside the job table.")
        table = read_pai_trace(p, task_path, cluster=cluster, errors=errors, **options)
    return trace_from_table(table, cat, seed=seed, **table_opts)
