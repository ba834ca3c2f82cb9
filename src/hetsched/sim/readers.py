"""Trace readers: Gavel, Philly, Helios/Lucid and Alibaba PAI 2020, from local files only.

Two kinds of source:

* **Gavel's trace** (10 tab-separated columns per line, or 9, 11 or the older 7 of its
  Philly-derived ``msr`` traces; job types named as in the throughput table) becomes a
  :class:`~hetsched.sim.Trace` directly with :func:`read_gavel_trace`.
* **Cluster logs** (Philly ``cluster_job_log`` JSON, Helios/Lucid ``cluster_log.csv``,
  Alibaba PAI 2020 job and task tables) record when jobs were submitted, how many GPUs they
  held and for how long, but not what they trained. Their readers return a *job table*
  (a DataFrame with :data:`JOB_TABLE_COLUMNS`); :func:`trace_from_table` then gives every
  job a job type from a throughput catalogue (uniform among the types that have a row at
  the job's GPU count, seeded) and turns its duration into steps at that type's throughput.

Every reader validates its rows and names the offending one (``line N`` of a text file,
header = line 1; ``entry N`` of a JSON list, from 0): missing or non-numeric fields, NaNs,
non-positive steps, durations or GPU counts, negative or out-of-order arrivals, unknown job
types, GPU counts larger than the cluster (when ``cluster`` is given), bytes that are not
UTF-8 (named by line and byte offset; a CSV header or a Philly file whose JSON structure
they break cannot be skipped). ``errors="skip"``
drops bad rows instead (each logged, counted in ``meta["skipped"]``). Nothing is ever
downloaded.
"""

from __future__ import annotations

import csv
import json
import logging
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import closing
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..cluster import Cluster
from ..errors import ValidationError
from ..jobs import JobSet
from ..throughputs import ThroughputCatalogue, load_gavel_throughputs
from .trace import Trace

__all__ = [
    "JOB_TABLE_COLUMNS",
    "load_trace",
    "read_gavel_trace",
    "read_helios_trace",
    "read_pai_trace",
    "read_philly_trace",
    "trace_from_table",
]

log = logging.getLogger(__name__)

#: Columns of a job table: id, submission time (s, from the first submission), GPUs held,
#: run time (s), GPU type it ran on (or None), user, final status, and where in the file
#: the job came from (for messages).
JOB_TABLE_COLUMNS = ("job_id", "arrival", "num_gpus", "duration", "gpu_type", "user", "status", "source_row")

_TIME_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S.%f")


class _Rows:
    """Collects bad rows: raise at the first one, or skip and count them."""

    def __init__(self, source: str, errors: str) -> None:
        if errors not in ("raise", "skip"):
            raise ValidationError(f"`errors` must be 'raise' or 'skip'; got {errors!r}.")
        self.source = source
        self.errors = errors
        self.skipped: list[str] = []

    def bad(self, where: str, message: str) -> None:
        text = f"{self.source}: {where}: {message}"
        if self.errors == "raise":
            raise ValidationError(text)
        self.skipped.append(text)
        log.warning("skipping %s", text)


def _path(path: str | Path, name: str = "path") -> Path:
    if not isinstance(path, (str, Path)):
        raise ValidationError(f"`{name}` must be a local file path; got {type(path).__name__}.")
    p = Path(path)
    if not p.is_file():
        raise ValidationError(f"`{name}` must be an existing local file; got {str(p)!r}, which does not exist or is not a file.")
    return p


def _bad_utf8(exc: UnicodeDecodeError, offset: int) -> str:
    """Message for a byte that is not UTF-8: the byte and its offset in the file (from 0)."""
    byte = exc.object[exc.start:exc.start + 1]
    return (f"is not valid UTF-8: byte 0x{byte.hex()} at byte offset {offset + exc.start} of the file "
            f"({exc.reason}); trace files must be UTF-8 text")


def _text_lines(p: Path, checker: _Rows, *, header: bool = False) -> Iterator[str]:
    """The lines of ``p`` (line ends kept), decoded as UTF-8 one by one.

    A line with a byte that is not UTF-8 is a bad row named by its line number and the
    byte's offset in the file: with ``errors="raise"`` a :class:`ValidationError`; with
    ``errors="skip"`` it is counted in ``meta["skipped"]`` and reads as an empty line (so
    later line numbers stay right). ``header=True``: line 1 is a header and cannot be
    skipped.
    """
    offset = 0
    with p.open("rb") as f:
        for ln, raw in enumerate(f, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                message = _bad_utf8(exc, offset)
                if header and ln == 1:
                    raise ValidationError(f"{checker.source}: line 1 (the header) {message}.") from None
                checker.bad(f"line {ln}", message)
                text = "\n"
            offset += len(raw)
            yield text


def _number(text: Any, what: str, *, integer: bool = False) -> float:
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


def _timestamp(text: Any, what: str) -> float:
    """Seconds: a number as is, or a date-time string (naive, treated as UTC)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return _number(text, what)
    if not isinstance(text, str) or text.strip() == "" or text.strip().lower() in ("none", "null", "nan"):
        raise ValueError(f"`{what}` is missing (got {text!r})")
    s = text.strip()
    try:
        return _number(s, what)
    except ValueError:
        pass
    for fmt in _TIME_FORMATS:
        try:
            dt = datetime.strptime(s, fmt)
        except ValueError:
            continue
        return (dt - datetime(1970, 1, 1)).total_seconds()
    raise ValueError(f"`{what}` must be seconds or a date-time 'YYYY-MM-DD HH:MM:SS'; got {text!r}")


def _finish_table(rows: list[dict[str, Any]], source: str, checker: _Rows, *, sort: bool,
                  cluster: Cluster | None, meta: dict[str, Any]) -> pd.DataFrame:
    """Arrival order, relative arrivals, duplicates, cluster fit; the job table."""
    if sort:
        rows = sorted(rows, key=lambda r: r["arrival"])
    else:
        kept: list[dict[str, Any]] = []
        last = -math.inf
        for r in rows:
            if r["arrival"] < last:
                checker.bad(
                    r["source_row"],
                    f"arrivals must be non-decreasing (rows in submission order; pass sort=True to sort); "
                    f"submitted at {r['arrival']:.6g} s, before the previous job at {last:.6g} s",
                )
                continue
            last = r["arrival"]
            kept.append(r)
        rows = kept
    seen: dict[Any, str] = {}
    kept = []
    for r in rows:
        if r["job_id"] in seen:
            checker.bad(r["source_row"], f"job id {r['job_id']!r} appears twice (first at {seen[r['job_id']]})")
            continue
        seen[r["job_id"]] = r["source_row"]
        kept.append(r)
    rows = kept
    if cluster is not None:
        kept = []
        largest = int(cluster.counts.max()) if cluster.counts.size else 0
        for r in rows:
            gt = r.get("gpu_type")
            limit = cluster.count(gt) if gt is not None and cluster.count(gt) > 0 else largest
            if r["num_gpus"] > limit:
                where = f"type {gt!r} has {limit}" if gt is not None and cluster.count(gt) > 0 else f"the largest GPU type has {largest}"
                checker.bad(r["source_row"], f"job {r['job_id']!r} asks for {r['num_gpus']} GPUs but {where}")
                continue
            kept.append(r)
        rows = kept
    df = pd.DataFrame(rows, columns=list(JOB_TABLE_COLUMNS))
    if len(df):
        t0 = float(df["arrival"].min())
        df["arrival"] = df["arrival"] - t0
        meta["time_origin"] = t0
    df["num_gpus"] = df["num_gpus"].astype(np.int64)
    df["arrival"] = df["arrival"].astype(float)
    df["duration"] = df["duration"].astype(float)
    meta["skipped"] = list(checker.skipped)
    df.attrs["source"] = source
    df.attrs["meta"] = meta
    log.info("%s: %d jobs read, %d rows skipped", source, len(df), len(checker.skipped))
    return df


# ------------------------------------------------------------------------------ Gavel
def read_gavel_trace(
    path: str | Path,
    throughputs: str | Path | ThroughputCatalogue,
    *,
    cluster: Cluster | None = None,
    reference_gpu_type: str | None = None,
    errors: str = "raise",
) -> Trace:
    """Read a Gavel trace (tab-separated, one job per line) with its throughput table.

    Columns (Gavel's ``utils.parse_trace``): ``job_type, command, working_directory,
    num_steps_arg, needs_data_dir, total_steps, scale_factor, priority_weight, SLO,
    arrival_time``. The 9-column form without ``working_directory`` and the 11-column form
    with a ``mode`` column before ``priority_weight`` are accepted too.

    **Older 7-column form** (Gavel's Philly-derived per-virtual-cluster traces,
    ``scheduler/traces/msr/seed=N/<vc>.trace``): ``job_type, command, num_steps_arg,
    needs_data_dir, total_steps, arrival_time, scale_factor`` -- note the arrival *before*
    the scale factor, and no priority weight or SLO. Checked against the older
    ``parse_trace(trace_file, run_dir)`` of Gavel's ``scheduler/utils.py`` (the version
    that ``scheduler/run_throughput_vs_latency_msr_trace.py`` at commit ``a009cc0`` calls on
    those files); the current ``parse_trace`` (commit ``52d9895``) reads the 9-column form.
    Read here with priority weight 1 (as Gavel sets it) and no SLO; ``needs_data_dir`` must
    be 0 or 1 (it is otherwise unused). Gavel's old reader silently drops rows with scale
    factor 0; here they are bad rows like any non-positive scale factor, and so are the
    rows whose ``(job_type, scale_factor)`` has no throughput-table row (Gavel crashes on
    those: the msr files hold scale factors up to 64, the table only 1, 2, 4 and 8).
    Arrival times are kept as in the file (Gavel's msr files start at 0). The
    cluster of those experiments is in ``traces/msr/cluster_specs.json`` (virtual cluster
    name -> list of ``"#v100:#p100:#k80"``; Gavel's copy holds only ``{"philly":
    ["500:0:0"]}``, i.e. 500 V100s); build it with ``Cluster({"v100": 500})``. Each line is
    read by its own column count.

    * ``(job_type, scale_factor)`` must be a row of the throughput table (with
      ``errors="skip"`` such rows are dropped and counted in ``meta["no_throughput_row"]``
      as well as listed in ``meta["skipped"]``);
    * ``total_steps`` and ``scale_factor`` positive integers, ``priority_weight`` positive;
    * ``SLO < 0`` means none; otherwise the deadline is ``arrival + SLO * d`` with ``d``
      the job's run time alone on ``reference_gpu_type`` (``total_steps / T_ref``; Gavel
      multiplies the SLO by the job's duration);
    * ``arrival_time`` finite, non-negative, non-decreasing.

    Parameters
    ----------
    path : str or Path
        The trace file.
    throughputs : str, Path or ThroughputCatalogue
        Gavel-format throughput JSON (read with :func:`hetsched.load_gavel_throughputs`)
        or a catalogue.
    cluster : Cluster, optional
        When given, a job larger than every GPU type of the cluster is a bad row.
    reference_gpu_type : str, optional
        Type whose throughput turns SLO multipliers into deadlines (default: the
        catalogue's fastest, the V100 for Gavel's table).
    errors : {"raise", "skip"}

    Returns
    -------
    Trace
        Job ids are line positions ``0, 1, ...`` (as Gavel numbers jobs); job types as in
        the file; unconsolidated throughputs when the table has them.

    Raises
    ------
    ValidationError
        A missing file or a bad row (named by its line number).
    """
    p = _path(path)
    cat = throughputs if isinstance(throughputs, ThroughputCatalogue) else load_gavel_throughputs(throughputs)
    checker = _Rows(str(p), errors)
    known = set(zip(cat.job_types.tolist(), cat.scale_factors.tolist()))
    ref = _reference_column(cat, reference_gpu_type)
    table_scales: dict[str, list[int]] = {}
    for t, k in sorted(known):
        table_scales.setdefault(t, []).append(int(k))
    rows: list[tuple[int, str, int, int, float, float, float]] = []
    last = -math.inf
    formats: set[int] = set()
    no_row = 0
    with closing(_text_lines(p, checker)) as lines:
        for ln, line in enumerate(lines, start=1):
            line = line.rstrip("\n").rstrip("\r")
            if not line.strip():
                continue
            cells = line.split("\t")
            where = f"line {ln}"
            if len(cells) == 10:
                jt, steps, sf, weight, slo, arr = cells[0], cells[5], cells[6], cells[7], cells[8], cells[9]
            elif len(cells) == 11:
                jt, steps, sf, weight, slo, arr = cells[0], cells[5], cells[6], cells[8], cells[9], cells[10]
            elif len(cells) == 9:
                jt, steps, sf, weight, slo, arr = cells[0], cells[4], cells[5], cells[6], cells[7], cells[8]
            elif len(cells) == 7:
                # Older form: job_type, command, num_steps_arg, needs_data_dir, total_steps,
                # arrival_time, scale_factor; no weight (1) and no SLO (-1: none).
                jt, steps, arr, sf, weight, slo = cells[0], cells[4], cells[5], cells[6], "1", "-1"
                if cells[3].strip() not in ("0", "1"):
                    checker.bad(where, f"`needs_data_dir` (column 4 of the 7-column form) must be 0 or 1; "
                                       f"got {cells[3].strip()!r}")
                    continue
            else:
                checker.bad(where, f"a Gavel trace line has 10 tab-separated columns (7, 9 or 11 accepted); "
                                   f"got {len(cells)}")
                continue
            formats.add(len(cells))
            try:
                n_steps = _number(steps, "total_steps", integer=True)
                scale = _number(sf, "scale_factor", integer=True)
                w = _number(weight, "priority_weight")
                slo_v = _number(slo, "SLO")
                a = _number(arr, "arrival_time")
            except ValueError as exc:
                checker.bad(where, str(exc))
                continue
            if n_steps <= 0:
                checker.bad(where, f"`total_steps` must be a positive integer; got {steps.strip()!r}")
                continue
            if scale < 1:
                note = " (Gavel's older reader drops such rows silently)" if len(cells) == 7 and scale == 0 else ""
                checker.bad(where, f"`scale_factor` must be a positive integer; got {sf.strip()!r}{note}")
                continue
            if w <= 0:
                checker.bad(where, f"`priority_weight` must be positive; got {weight.strip()!r}")
                continue
            if a < 0:
                checker.bad(where, f"`arrival_time` must be non-negative; got {arr.strip()!r}")
                continue
            if a < last:
                checker.bad(where, f"`arrival_time` must be non-decreasing; got {a:.6g} after {last:.6g}")
                continue
            if (jt, int(scale)) not in known:
                no_row += 1
                names = sorted(table_scales)
                similar = [t for t in names if t.split(" (")[0] == jt.split(" (")[0]][:4]
                hint = f" (similar: {similar})" if similar else f" ({len(names)} job types, e.g. {names[:3]})"
                if jt in table_scales:
                    hint = f" (the table has {jt!r} at scale factors {table_scales[jt]} only; similar: {similar})"
                checker.bad(
                    where,
                    f"unknown job type ({jt!r}, scale factor {int(scale)}): not a row of the throughput table" + hint,
                )
                continue
            last = a
            rows.append((ln, jt, int(n_steps), int(scale), w, slo_v, a))
    if not rows:
        T = np.zeros((0, len(cat.gpu_types)))
        return Trace(JobSet(T, gpu_types=cat.gpu_types, steps_remaining=np.zeros(0), arrival_times=np.zeros(0)),
                     source=f"gavel:{p.name}", meta={"path": str(p), "skipped": checker.skipped,
                                                     "columns": sorted(formats), "no_throughput_row": no_row})
    jt_arr = [r[1] for r in rows]
    sf_arr = np.array([r[3] for r in rows], dtype=np.int64)
    idx = cat.index_of(jt_arr, sf_arr)
    T = cat.throughputs[idx]
    U = None if cat.unconsolidated is None else cat.unconsolidated[idx]
    steps_arr = np.array([r[2] for r in rows], dtype=float)
    arrivals = np.array([r[6] for r in rows], dtype=float)
    slo = np.array([r[5] for r in rows], dtype=float)
    deadlines = None
    if (slo >= 0).any():
        tref = T[:, ref]
        tref = np.where(tref > 0, tref, T.max(axis=1))
        dur = steps_arr / np.where(tref > 0, tref, np.inf)
        deadlines = np.where(slo > 0, arrivals + slo * dur, np.inf)
        deadlines = np.where(deadlines > arrivals, deadlines, np.inf)
    if cluster is not None:
        cap = cluster.capacities(cat.gpu_types)
        fits = ((T > 0) & (cap[None, :] >= sf_arr[:, None])).any(axis=1)
        if not fits.all():
            j = int(np.flatnonzero(~fits)[0])
            raise ValidationError(
                f"{p}: line {rows[j][0]}: job {j} ({jt_arr[j]!r}) asks for {int(sf_arr[j])} GPUs but no GPU type "
                f"of the cluster {cluster.as_dict()} it can run on has that many."
            )
    jobs = JobSet(T, gpu_types=cat.gpu_types, ids=np.arange(len(rows)), scale_factors=sf_arr,
                  weights=np.array([r[4] for r in rows]), steps_remaining=steps_arr, arrival_times=arrivals)
    return Trace(jobs, unconsolidated=U, job_types=jt_arr, deadlines=deadlines, source=f"gavel:{p.name}",
                 meta={"path": str(p), "skipped": checker.skipped, "throughputs": repr(cat),
                       "columns": sorted(formats), "no_throughput_row": no_row})


def _reference_column(cat: ThroughputCatalogue, reference_gpu_type: str | None) -> int:
    if reference_gpu_type is None:
        T = cat.throughputs
        med = np.array([np.median(T[T[:, k] > 0, k]) if (T[:, k] > 0).any() else 0.0 for k in range(T.shape[1])])
        return int(np.argmax(med))
    if reference_gpu_type not in cat.gpu_types:
        raise ValidationError(
            f"`reference_gpu_type` must be one of the catalogue's GPU types {list(cat.gpu_types)}; got {reference_gpu_type!r}."
        )
    return cat.gpu_types.index(reference_gpu_type)


# ------------------------------------------------------------------------------ Philly
def read_philly_trace(
    path: str | Path,
    *,
    statuses: Sequence[str] | None = None,
    cluster: Cluster | None = None,
    sort: bool = False,
    errors: str = "raise",
) -> pd.DataFrame:
    """Read Microsoft Philly's ``cluster_job_log`` (a JSON list of jobs) into a job table.

    Each entry has ``jobid``, ``user``, ``status`` ("Pass", "Killed", "Failed"),
    ``submitted_time`` and ``attempts``, a list of ``{"start_time", "end_time",
    "detail": [{"ip": host, "gpus": ["gpu0", ...]}]}``. Times are "YYYY-MM-DD HH:MM:SS".

    * arrival: ``submitted_time``; duration: the last attempt's ``end_time - start_time``
      (earlier attempts failed and were retried); GPUs: the number of GPUs the last attempt
      held (summed over its hosts).
    * An entry without an attempt that has both times, with an end before its start, a
      submission after its start, or no GPUs is a bad row.

    Parameters
    ----------
    path : str or Path
    statuses : sequence of str, optional
        Keep only jobs with these statuses (default all; not an error).
    cluster : Cluster, optional
        Jobs larger than every GPU type of the cluster become bad rows.
    sort : bool, default False
        Sort by submission time instead of requiring the file to be in order.
    errors : {"raise", "skip"}

    Returns
    -------
    DataFrame
        A job table (:data:`JOB_TABLE_COLUMNS`); ``gpu_type`` is None (Philly does not say).
    """
    p = _path(path)
    checker = _Rows(str(p), errors)
    data = p.read_bytes()
    escaped = None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        ln = data.count(b"\n", 0, exc.start) + 1
        escaped = f"{p}: line {ln}: {_bad_utf8(exc, 0)}"
        if errors != "skip":
            raise ValidationError(escaped) from None
        # Undecodable bytes become lone surrogates; the entries that hold one are skipped below.
        text = data.decode("utf-8", errors="surrogateescape")
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        if escaped is not None:  # the bad byte broke the JSON itself: nothing to skip
            raise ValidationError(escaped) from None
        raise ValidationError(f"{p}: must hold valid JSON (a list of jobs); {exc}.") from None
    if not isinstance(raw, list):
        raise ValidationError(f"{p}: must hold a JSON list of jobs; got {type(raw).__name__}.")
    rows: list[dict[str, Any]] = []
    filtered = 0
    for i, job in enumerate(raw):
        where = f"entry {i}"
        if not isinstance(job, dict):
            checker.bad(where, f"each entry must be an object; got {type(job).__name__}")
            continue
        bad_byte = None if escaped is None else _undecoded(job)
        if bad_byte is not None:
            checker.bad(where, f"is not valid UTF-8: holds the byte 0x{bad_byte:02x}; trace files must be UTF-8 text")
            continue
        status = job.get("status")
        if statuses is not None and status not in statuses:
            filtered += 1
            continue
        jid = job.get("jobid")
        if not isinstance(jid, str) or not jid:
            checker.bad(where, f"`jobid` must be a non-empty string; got {jid!r}")
            continue
        attempts = job.get("attempts")
        if not isinstance(attempts, list) or not attempts:
            checker.bad(where, f"job {jid!r}: `attempts` must be a non-empty list; got {attempts!r:.60}")
            continue
        last = attempts[-1]
        try:
            sub = _timestamp(job.get("submitted_time"), "submitted_time")
            st = _timestamp(last.get("start_time") if isinstance(last, dict) else None, "attempts[-1].start_time")
            en = _timestamp(last.get("end_time"), "attempts[-1].end_time")
        except ValueError as exc:
            checker.bad(where, f"job {jid!r}: {exc}")
            continue
        detail = last.get("detail")
        gpus = 0
        ok = isinstance(detail, list)
        if ok:
            for host in detail:
                g = host.get("gpus") if isinstance(host, dict) else None
                if not isinstance(g, list):
                    ok = False
                    break
                gpus += len(g)
        if not ok:
            checker.bad(where, f"job {jid!r}: `attempts[-1].detail` must be a list of {{'ip', 'gpus': [...]}}")
            continue
        if gpus < 1:
            checker.bad(where, f"job {jid!r}: the last attempt holds no GPUs (GPU count must be positive)")
            continue
        if en <= st:
            checker.bad(where, f"job {jid!r}: duration must be positive; end_time {last.get('end_time')!r} is not after start_time {last.get('start_time')!r}")
            continue
        if sub > st:
            checker.bad(where, f"job {jid!r}: submitted_time {job.get('submitted_time')!r} is after the start of its last attempt")
            continue
        rows.append({"job_id": jid, "arrival": sub, "num_gpus": gpus, "duration": en - st, "gpu_type": None,
                     "user": job.get("user"), "status": status, "source_row": where})
    return _finish_table(rows, str(p), checker, sort=sort, cluster=cluster,
                         meta={"format": "philly", "path": str(p), "filtered_status": filtered})


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
    states: Sequence[str] | None = None,
    gpu_type: str | None = None,
    cluster: Cluster | None = None,
    sort: bool = False,
    errors: str = "raise",
) -> pd.DataFrame:
    """Read a Helios / Lucid ``cluster_log.csv`` into a job table.

    Header columns (Helios, SC'21; Lucid, ASPLOS'23 reuses them): ``job_id, user,
    gpu_num, cpu_num, node_num, state, submit_time, start_time, end_time, duration, queue``;
    only ``job_id``, ``gpu_num`` and ``submit_time`` plus either ``duration`` or
    ``start_time``/``end_time`` are required, other columns are ignored. Times are
    "YYYY-MM-DD HH:MM:SS" or seconds.

    * CPU-only jobs (``gpu_num == 0``) are dropped (counted in ``meta["cpu_jobs"]``), not
      errors; ``gpu_num`` must otherwise be a positive integer; the duration positive.

    Parameters
    ----------
    path : str or Path
    states : sequence of str, optional
        Keep only jobs in these states (e.g. ``["COMPLETED"]``); default all.
    gpu_type : str, optional
        GPU type of the cluster the log comes from (Helios clusters are homogeneous); it
        becomes the jobs' ``gpu_type`` (its throughput then sets the steps).
    cluster, sort, errors
        As for :func:`read_philly_trace`.
    """
    p = _path(path)
    checker = _Rows(str(p), errors)
    rows: list[dict[str, Any]] = []
    cpu_jobs = filtered = 0
    with closing(_text_lines(p, checker, header=True)) as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        missing = [c for c in ("job_id", "gpu_num", "submit_time") if c not in header]
        if "duration" not in header and not {"start_time", "end_time"} <= set(header):
            missing.append("duration (or start_time and end_time)")
        if missing:
            raise ValidationError(f"{p}: line 1: the header must name {missing}; got {header}.")
        for rec in reader:
            where = f"line {reader.line_num}"
            if None in rec:
                checker.bad(where, f"has more cells than the header's {len(header)} columns")
                continue
            state = rec.get("state")
            if states is not None and state not in states:
                filtered += 1
                continue
            jid = (rec.get("job_id") or "").strip()
            if not jid:
                checker.bad(where, "`job_id` is missing")
                continue
            try:
                g = _number(rec.get("gpu_num"), "gpu_num", integer=True)
                sub = _timestamp(rec.get("submit_time"), "submit_time")
                if "duration" in header and (rec.get("duration") or "").strip() != "":
                    dur = _number(rec.get("duration"), "duration")
                else:
                    dur = _timestamp(rec.get("end_time"), "end_time") - _timestamp(rec.get("start_time"), "start_time")
            except ValueError as exc:
                checker.bad(where, f"job {jid!r}: {exc}")
                continue
            if g == 0:
                cpu_jobs += 1
                continue
            if g < 0:
                checker.bad(where, f"job {jid!r}: `gpu_num` must be a non-negative integer; got {rec.get('gpu_num')!r}")
                continue
            if dur <= 0:
                checker.bad(where, f"job {jid!r}: duration must be positive; got {dur:.6g} s")
                continue
            if sub < 0:
                checker.bad(where, f"job {jid!r}: `submit_time` must be non-negative; got {rec.get('submit_time')!r}")
                continue
            rows.append({"job_id": jid, "arrival": sub, "num_gpus": int(g), "duration": dur, "gpu_type": gpu_type,
                         "user": rec.get("user"), "status": state, "source_row": where})
    return _finish_table(rows, str(p), checker, sort=sort, cluster=cluster,
                         meta={"format": "helios", "path": str(p), "cpu_jobs": cpu_jobs, "filtered_state": filtered})


# ------------------------------------------------------------------------------ PAI
_PAI_JOB = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
_PAI_TASK = ("job_name", "task_name", "inst_num", "status", "start_time", "end_time", "plan_cpu", "plan_mem",
             "plan_gpu", "gpu_type")


def _pai_rows(p: Path, columns: tuple[str, ...], checker: _Rows):
    with closing(_text_lines(p, checker)) as f:
        reader = csv.reader(f)
        for cells in reader:
            ln = reader.line_num
            if not cells or all(not c.strip() for c in cells):
                continue
            if ln == 1 and [c.strip() for c in cells[: len(columns)]] == list(columns):
                continue  # optional header line
            if len(cells) != len(columns):
                checker.bad(f"line {ln}", f"has {len(cells)} comma-separated cells; the table has {len(columns)} columns {list(columns)}")
                continue
            yield ln, dict(zip(columns, (c.strip() for c in cells)))


def read_pai_trace(
    job_path: str | Path,
    task_path: str | Path,
    *,
    statuses: Sequence[str] | None = None,
    cluster: Cluster | None = None,
    sort: bool = False,
    errors: str = "raise",
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
    (lower-cased) when they agree, else None ("MISC" counts as None). Jobs without GPU
    tasks are dropped (``meta["cpu_jobs"]``); a task naming an unknown job, or a job with
    missing times, is a bad row.

    Parameters
    ----------
    job_path, task_path : str or Path
    statuses : sequence of str, optional
        Keep only jobs with these statuses (e.g. ``["Terminated"]``); default all.
    cluster, sort, errors
        As for :func:`read_philly_trace`.
    """
    pj = _path(job_path, "job_path")
    pt = _path(task_path, "task_path")
    jcheck = _Rows(str(pj), errors)
    tcheck = _Rows(str(pt), errors)
    jobs: dict[str, dict[str, Any]] = {}
    filtered = 0
    for ln, rec in _pai_rows(pj, _PAI_JOB, jcheck):
        where = f"line {ln}"
        name = rec["job_name"]
        if not name:
            jcheck.bad(where, "`job_name` is missing")
            continue
        if name in jobs:
            jcheck.bad(where, f"job {name!r} appears twice (first at {jobs[name]['source_row']})")
            continue
        if statuses is not None and rec["status"] not in statuses:
            filtered += 1
            jobs[name] = {"skip": True, "source_row": where}
            continue
        try:
            st = _number(rec["start_time"], "start_time")
            en = _number(rec["end_time"], "end_time")
        except ValueError as exc:
            jcheck.bad(where, f"job {name!r}: {exc}")
            continue
        if en <= st:
            jcheck.bad(where, f"job {name!r}: duration must be positive; end_time {rec['end_time']!r} is not after start_time {rec['start_time']!r}")
            continue
        if st < 0:
            jcheck.bad(where, f"job {name!r}: `start_time` must be non-negative; got {rec['start_time']!r}")
            continue
        jobs[name] = {"job_id": name, "arrival": st, "duration": en - st, "user": rec["user"] or None,
                      "status": rec["status"], "source_row": f"{pj.name} {where}", "gpus": 0, "types": set()}
    for ln, rec in _pai_rows(pt, _PAI_TASK, tcheck):
        where = f"line {ln}"
        name = rec["job_name"]
        job = jobs.get(name)
        if job is None:
            tcheck.bad(where, f"task {rec['task_name']!r} names job {name!r}, which is not in the job table")
            continue
        if job.get("skip"):
            continue
        if rec["plan_gpu"] == "" or rec["plan_gpu"].lower() in ("nan", "none"):
            continue  # a CPU task
        try:
            inst = _number(rec["inst_num"], "inst_num", integer=True)
            pg = _number(rec["plan_gpu"], "plan_gpu")
        except ValueError as exc:
            tcheck.bad(where, f"task {rec['task_name']!r} of job {name!r}: {exc}")
            continue
        if inst < 1 or pg < 0:
            tcheck.bad(where, f"task {rec['task_name']!r} of job {name!r}: `inst_num` must be positive and `plan_gpu` non-negative; got {rec['inst_num']!r}, {rec['plan_gpu']!r}")
            continue
        if pg == 0:
            continue
        job["gpus"] += int(inst) * int(math.ceil(pg / 100.0 - 1e-9))
        gt = rec["gpu_type"].strip().lower()
        if gt and gt != "misc":
            job["types"].add(gt)
    rows = []
    cpu_jobs = 0
    for job in jobs.values():
        if job.get("skip"):
            continue
        if job["gpus"] == 0:
            cpu_jobs += 1
            continue
        gt = next(iter(job["types"])) if len(job["types"]) == 1 else None
        rows.append({"job_id": job["job_id"], "arrival": job["arrival"], "num_gpus": job["gpus"],
                     "duration": job["duration"], "gpu_type": gt, "user": job["user"], "status": job["status"],
                     "source_row": job["source_row"]})
    checker = _Rows(f"{pj}", errors)
    checker.skipped = jcheck.skipped + tcheck.skipped
    return _finish_table(rows, f"{pj} + {pt.name}", checker, sort=sort, cluster=cluster,
                         meta={"format": "pai", "job_path": str(pj), "task_path": str(pt), "cpu_jobs": cpu_jobs,
                               "filtered_status": filtered})


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
    if not isinstance(table, pd.DataFrame):
        raise ValidationError(f"`table` must be a pandas DataFrame (a job table); got {type(table).__name__}.")
    missing = [c for c in ("job_id", "arrival", "num_gpus", "duration") if c not in table.columns]
    if missing:
        raise ValidationError(f"`table` must have columns {list(JOB_TABLE_COLUMNS)}; missing {missing}.")
    if not isinstance(catalogue, ThroughputCatalogue):
        raise ValidationError(f"`catalogue` must be a ThroughputCatalogue; got {type(catalogue).__name__}.")
    if unmatched not in ("raise", "round_up", "skip"):
        raise ValidationError(f"`unmatched` must be 'raise', 'round_up' or 'skip'; got {unmatched!r}.")
    src = source or table.attrs.get("source", "table")
    rows_label = table["source_row"].tolist() if "source_row" in table.columns else [f"row {i}" for i in range(len(table))]
    gen = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(int(seed))
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
    runnable = (catalogue.throughputs > 0).any(axis=1)
    avail = np.array(sorted({int(x) for x in catalogue.scale_factors[runnable]}), dtype=np.int64)
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
    idx = np.flatnonzero(keep)
    sf, d, a = sf[idx], d[idx], a[idx]
    pools = {int(x): np.flatnonzero((catalogue.scale_factors == x) & runnable) for x in avail}
    u = gen.random(idx.size)
    rows = np.empty(idx.size, dtype=np.int64)
    for x, pool in pools.items():
        sel = sf == x
        rows[sel] = pool[np.minimum((u[sel] * pool.size).astype(np.int64), pool.size - 1)]
    ref = _reference_column(catalogue, reference_gpu_type)
    T = catalogue.throughputs[rows]
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
    tref = T[np.arange(idx.size), col]
    tref = np.where(tref > 0, tref, T.max(axis=1))
    steps = np.ceil(d * tref)
    ids = table["job_id"].to_numpy()[idx]
    ent = None
    if entity_column is not None and entity_column in table.columns:
        vals = table[entity_column].to_numpy()[idx]
        if len(vals) and all(v is not None and v == v and str(v) != "" for v in vals):
            ent = np.array([str(v) for v in vals], dtype=object)
    jobs = JobSet(T, gpu_types=catalogue.gpu_types, ids=ids, scale_factors=sf, steps_remaining=steps, arrival_times=a,
                  entities=ent)
    U = None if catalogue.unconsolidated is None else catalogue.unconsolidated[rows]
    meta = dict(table.attrs.get("meta", {}))
    meta.update({"catalogue": repr(catalogue), "dropped_unmatched": int((~keep).sum())})
    return Trace(jobs, unconsolidated=U, job_types=catalogue.job_types[rows], source=str(src), meta=meta)


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
    errors: str = "raise",
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
    errors : {"raise", "skip"}
    **options
        Passed to the reader (e.g. ``sort=True``, ``states=[...]``) or to
        :func:`trace_from_table` (``unmatched``, ``gpu_type_map``, ``reference_gpu_type``).
    """
    p = Path(path) if isinstance(path, (str, Path)) else path
    fmt = format
    if fmt is None:
        suffix = Path(str(p)).suffix.lower()
        fmt = {".json": "philly", ".csv": "helios"}.get(suffix, "gavel")
    if fmt not in _FORMATS:
        raise ValidationError(f"`format` must be one of {list(_FORMATS)}; got {format!r}.")
    table_opts = {k: options.pop(k) for k in ("unmatched", "gpu_type_map", "reference_gpu_type") if k in options}
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
