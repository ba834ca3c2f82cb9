"""Alibaba PAI 2020: its job table joined with its task table (GPUs per task instance), read
into a job table by :func:`read_pai_trace`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..cluster import Cluster
from .cells import (
    ABSENT,
    Field,
    cell_text,
    check_fields,
    csv_table,
    decode_text,
    duration_checks,
    fail_duplicates,
    fail_fields,
    finish_table,
    first_line,
    isin,
    job_prefix,
    needs_strip,
    path_arg,
    read_fields,
    selection,
    span_message,
)
from .load_report import LoadReport, RowChecks, resolve_on_bad_rows

__all__ = ["read_pai_trace"]


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



def _pai_table(p: Path, columns: tuple[str, ...], report: LoadReport, numeric: Sequence[str],
               used: Sequence[str]) -> tuple[RowChecks, dict[str, Any]]:
    """Rows of a PAI table (blank rows and an optional header line left out), their cells
    stripped, and a checker whose first check is the cell count. ``numeric`` columns may be
    float arrays (NaN: missing); columns not in ``used`` may be None."""
    text = decode_text(p, report)
    header = [c.strip() for c in first_line(text)[: len(columns)]] == list(columns) and text[:1].strip() != ""
    lines, width, cols = csv_table(text, len(columns), fill="", numeric=[columns.index(c) for c in numeric],
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
    on_bad_rows: str = "raise",
    errors: str | None = None,
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
    * Rows the real tables hold (bad rows: an error by default, dropped and counted with
      ``on_bad_rows="skip"``): no ``start_time`` (``never_started``), no ``end_time``
      (``unfinished``: PAI's running jobs), end equal to start.
    * Malformed (bad rows too): wrong cell counts, a missing job name, a duplicate job,
      non-numeric times, an end before the start, a task naming a job the job table lacks,
      a task with a non-numeric or out-of-range ``inst_num`` / ``plan_gpu`` (its job is a
      bad row too: ``bad_task``), arrivals out of order.

    The task table's own counts are in ``meta["load_report"]["tasks"]`` (rows, malformed,
    filtered: ``cpu_task`` tasks without GPUs, ``job_not_kept`` tasks of jobs not kept).

    Parameters
    ----------
    job_path, task_path : str or Path
    statuses : str or sequence of str, optional
        Keep only jobs with these statuses (e.g. ``["Terminated"]``); default all.
    cluster, sort, on_bad_rows, errors
        As for :func:`read_philly_trace` (the error of ``on_bad_rows="raise"`` counts and
        names the bad rows of both tables).

    Returns
    -------
    DataFrame
        A job table; ``attrs["meta"]`` holds ``load_report`` (with ``tasks``),
        ``skipped``, ``cpu_jobs``, ``filtered_status``.

    Raises
    ------
    ValidationError
        A missing file; under ``on_bad_rows="raise"`` any bad row of either table; a trace
        with no job kept.
    """
    mode = resolve_on_bad_rows(on_bad_rows, errors)
    pj = path_arg(job_path, "job_path")
    pt = path_arg(task_path, "task_path")
    report = LoadReport(str(pj), mode)
    treport = LoadReport(str(pt), mode)
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
    df = finish_table(chk, report, cols, meta=meta, sort=sort, cluster=cluster,
                      counts={"cpu_jobs": "cpu_only", "filtered_status": "status"}, others=(treport,))
    meta["load_report"]["tasks"] = {k: v for k, v in treport.to_dict().items() if k != "on_bad_rows"}
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
    named = job_prefix(name)
    c = read_fields(job, _PAI_JOB_FIELDS)
    fail_fields(chk, c, _PAI_JOB_FIELDS, prefix=named)
    st, en = c["start_time"], c["end_time"]
    dur = en.values - st.values
    duration_checks(chk, dur, span_message(named, job["start_time"], job["end_time"], cell_text))
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
    """Fail (``bad_task``) every job one of whose tasks was malformed, naming the first such
    task's row of ``pt``."""
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

