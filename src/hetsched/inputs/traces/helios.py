"""Helios / Lucid (SC'21, ASPLOS'23): their ``cluster_log.csv``, one job per line under a
header, read into a job table by :func:`read_helios_trace`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import ValidationError
from ..cluster import Cluster
from .cells import (
    OK,
    Field,
    check_fields,
    csv_table,
    decode_text,
    duration_checks,
    fail_fields,
    finish_table,
    first_line,
    isin,
    job_prefix,
    path_arg,
    read_fields,
    selection,
)
from .load_report import LoadReport, RowChecks, resolve_on_bad_rows

__all__ = ["read_helios_trace"]


def read_helios_trace(
    path: str | Path,
    *,
    states: Sequence[str] | str | None = None,
    gpu_type: str | None = None,
    cluster: Cluster | None = None,
    sort: bool = False,
    on_bad_rows: str = "raise",
    errors: str | None = None,
) -> pd.DataFrame:
    """Read a Helios / Lucid ``cluster_log.csv`` into a job table.

    Header columns (Helios, SC'21; Lucid, ASPLOS'23 reuses them): ``job_id, user,
    gpu_num, cpu_num, node_num, state, submit_time, start_time, end_time, duration, queue``;
    only ``job_id``, ``gpu_num`` and ``submit_time`` plus either ``duration`` or
    ``start_time``/``end_time`` are required, other columns are ignored. Times are
    "YYYY-MM-DD HH:MM:SS" or seconds. The duration is the ``duration`` cell, or
    ``end_time - start_time`` where that cell is empty or the column absent.

    * CPU-only jobs (``gpu_num == 0``) are filtered (``cpu_only``; ``meta["cpu_jobs"]``).
    * Rows real logs contain (bad rows: an error by default, dropped and counted with
      ``on_bad_rows="skip"``): a zero duration (``zero_duration``: Helios's cancelled
      jobs), a ``duration`` of NaN or a missing ``end_time`` (``unfinished``), a missing
      ``start_time`` (``never_started``).
    * Malformed (bad rows too): extra cells, a missing ``job_id``, a ``gpu_num`` that
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
    cluster, sort, on_bad_rows, errors
        As for :func:`read_philly_trace`.

    Returns
    -------
    DataFrame
        A job table; ``attrs["meta"]`` holds ``load_report``, ``skipped``, ``cpu_jobs``,
        ``filtered_state``.

    Raises
    ------
    ValidationError
        A missing file, a header without the required columns, an empty file; under
        ``on_bad_rows="raise"`` any bad row (counted, the first few named by line); a log
        with no row kept.
    """
    mode = resolve_on_bad_rows(on_bad_rows, errors)
    p = path_arg(path)
    report = LoadReport(str(p), mode)
    wanted = selection(states, "states")
    text = decode_text(p, report, header=True)
    header = first_line(text) if text.split("\n", 1)[0].strip("\r") else []
    numeric = [header.index("gpu_num")] if "gpu_num" in header else []
    lines, width, table = csv_table(text, None, fill=None, numeric=numeric, skip_first=bool(header))
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
    named = job_prefix(jid)
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
    return finish_table(chk, report, cols, meta=meta, sort=sort, cluster=cluster,
                        counts={"cpu_jobs": "cpu_only", "filtered_state": "status"})


#: Helios / Lucid ``cluster_log.csv``: the columns read as numbers or times, and their rules.
_HELIOS = {f.name: f for f in (
    Field("gpu_num", "int", low=0, rule="a non-negative integer"),
    Field("submit_time", "time", invalid="bad_time", low=0),
    Field("duration", missing="unfinished"),
    Field("start_time", "time", missing="never_started", invalid="bad_time"),
    Field("end_time", "time", missing="unfinished", invalid="bad_time"),
)}
