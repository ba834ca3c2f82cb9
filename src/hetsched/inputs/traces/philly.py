"""Microsoft Philly's ``cluster_job_log``, a JSON list of jobs with their attempts, read into
a job table by :func:`read_philly_trace` (the last attempt's GPUs and run time).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...errors import ValidationError
from ..cluster import Cluster
from .cells import (
    Field,
    bad_utf8,
    duration_checks,
    empty_strings,
    fail_fields,
    finish_table,
    gc_paused,
    isin,
    job_prefix,
    path_arg,
    read_fields,
    selection,
    span_message,
)
from .load_report import LoadReport, RowChecks, resolve_on_bad_rows

__all__ = ["read_philly_trace"]


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
    on_bad_rows: str = "raise",
    errors: str | None = None,
) -> pd.DataFrame:
    """Read Microsoft Philly's ``cluster_job_log`` (a JSON list of jobs) into a job table.

    Each entry has ``jobid``, ``vc`` (virtual cluster), ``user``, ``status`` ("Pass",
    "Killed", "Failed"), ``submitted_time`` and ``attempts``, a list of ``{"start_time",
    "end_time", "detail": [{"ip": host, "gpus": ["gpu0", ...]}]}``. Times are
    "YYYY-MM-DD HH:MM:SS" (or seconds).

    * arrival: ``submitted_time``; duration: the last attempt's ``end_time - start_time``
      (earlier attempts failed and were retried); GPUs: the number of GPUs the last attempt
      held (summed over its hosts).
    * Rows the real log holds (bad rows: an error by default, dropped and counted with
      ``on_bad_rows="skip"``): no attempt or a last attempt without ``start_time``
      (``never_started``), ``end_time`` missing or ``"None"`` (``unfinished``), no GPUs
      (``no_gpus``), end equal to start (``zero_duration``).
    * Malformed (bad rows too): a missing or unreadable ``jobid`` /
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
    on_bad_rows : {"raise", "skip"}, default "raise"
        Rows that cannot be used: "raise" reads the whole file, then raises one error that
        counts them by reason and names the first few (``entry N``, from 0); "skip" drops
        them with a WARNING log line and counts them in ``attrs["meta"]["load_report"]``
        (see :mod:`hetsched.inputs.traces.load_report`).
    errors : {"drop", "skip", "raise"}, optional
        Deprecated (``DeprecationWarning``): "drop" and "skip" mean ``on_bad_rows="skip"``,
        "raise" means "raise".

    Returns
    -------
    DataFrame
        A job table (:data:`JOB_TABLE_COLUMNS`); ``gpu_type`` is None (Philly does not
        say); ``attrs["meta"]`` holds ``load_report``, ``skipped``, ``filtered_status``,
        ``filtered_vc``.

    Raises
    ------
    ValidationError
        A missing file or one that is not a JSON list; a ``vc`` the file does not hold;
        under ``on_bad_rows="raise"`` any bad row (counted, the first few named); a log
        with no row kept.
    """
    mode = resolve_on_bad_rows(on_bad_rows, errors)
    p = path_arg(path)
    report = LoadReport(str(p), mode)
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
    return finish_table(chk, report, cols, meta=meta, sort=sort, cluster=cluster,
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
    named = job_prefix(jid)
    c = read_fields(dict(zip((x.name for x in _PHILLY_FIELDS), (sub_r, st_r, en_r))), _PHILLY_FIELDS)
    sub, st, en = c.values()
    fail_fields(chk, c, _PHILLY_FIELDS[:1], prefix=named)
    chk.fail(~np.array(f["last_ok"], dtype=bool), "bad_attempts", lambda i: f"job {jid[i]!r}: `attempts[-1]` must be an object")
    fail_fields(chk, c, _PHILLY_FIELDS[1:], prefix=named)
    g = np.array(f["gpus"], dtype=np.int64)
    chk.fail(g < 0, "bad_detail", lambda i: f"job {jid[i]!r}: `attempts[-1].detail` must be a list of {{'ip', 'gpus': [...]}}")
    chk.fail(g == 0, "no_gpus", lambda i: f"job {jid[i]!r}: the last attempt holds no GPUs (GPU count must be positive)")
    dur = en.values - st.values
    duration_checks(chk, dur, span_message(named, st_r, en_r))
    with np.errstate(invalid="ignore"):
        chk.fail(sub.values > st.values, "submitted_after_start",
                 lambda i: f"job {jid[i]!r}: submitted_time {sub_r[i]!r} is after the start of its last attempt")
    return sub.values, dur, g



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
