"""Gavel's trace files: its job traces (10/9/11 columns, and the older 7-column form of its
Philly-derived ``msr`` traces) and the ``cluster_specs.json`` of its msr experiments.

Read from local files only; rows are checked column at once (:mod:`.cells`) and the
rows not kept are counted in a load report (:mod:`.load_report`). Re-exported by
:mod:`hetsched.inputs.traces.readers` and :mod:`hetsched.sim`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ValidationError
from ..cluster import Cluster
from ..jobs import JobSet, usable_mask
from ..throughputs import (
    ThroughputCatalogue,
    load_gavel_throughputs,
    reference_column,
)
from ..workloads import Workload
from .cells import Column, Field, apply_schema, decode_text, path_arg
from .load_report import LoadReport, RowChecks, resolve_on_bad_rows, skipped_meta

__all__ = ["read_gavel_cluster_specs", "read_gavel_trace", "reference_column"]

# ------------------------------------------------------------------------------ Gavel
#: Column positions of (job_type, total_steps, scale_factor, priority_weight, SLO,
#: arrival_time) per column count; None: not in that form (weight 1, no SLO).
_GAVEL_COLUMNS: dict[int, tuple[int, int, int, int | None, int | None, int]] = {
    10: (0, 5, 6, 7, 8, 9), 11: (0, 5, 6, 8, 9, 10), 9: (0, 4, 5, 6, 7, 8), 7: (0, 4, 6, None, None, 5),
}
#: The numeric columns of every form, in the order of :data:`_GAVEL_COLUMNS` after job_type.
_GAVEL_SCHEMA = (
    Field("total_steps", "int", low=0, low_open=True, rule="a positive integer"),
    Field("scale_factor", "int", low=1, rule="a positive integer"),
    Field("priority_weight", low=0, low_open=True),
    Field("SLO"),
    Field("arrival_time", low=0),
)


def read_gavel_trace(
    path: str | Path,
    throughputs: str | Path | ThroughputCatalogue,
    *,
    cluster: Cluster | None = None,
    reference_gpu_type: str | None = None,
    on_bad_rows: str = "raise",
    errors: str | None = None,
) -> Workload:
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
    factor 0; here they are malformed rows like any non-positive scale factor. Rows whose
    ``(job_type, scale_factor)`` has no throughput-table row (Gavel crashes on those: the
    msr files hold scale factors up to 64, the table only 1, 2, 4 and 8) are bad rows
    (``no_throughput_row``): an error by default, dropped and counted with
    ``on_bad_rows="skip"`` (``meta["load_report"]``, also ``meta["no_throughput_row"]``). Arrival times are kept as in the file (Gavel's msr
    files start at 0). The cluster of those experiments is in
    ``traces/msr/cluster_specs.json`` (:func:`read_gavel_cluster_specs`; Gavel's copy holds
    only ``{"philly": ["500:0:0"]}``, i.e. 500 V100s). Each line is read by its own column
    count.

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
        When given, a job larger than every GPU type of the cluster it can run on raises.
    reference_gpu_type : str, optional
        Type whose throughput turns SLO multipliers into deadlines (default: the
        catalogue's fastest, the V100 for Gavel's table).
    on_bad_rows : {"raise", "skip"}, default "raise"
        Rows that cannot be used (a job type the throughput table lacks, a malformed field,
        arrivals out of order...): "raise" reads the whole file, then raises one error that
        counts them by reason and names the first few by line; "skip" drops them with a
        WARNING log line and counts them in ``meta["load_report"]`` (see
        :mod:`hetsched.inputs.traces.load_report`).
    errors : {"drop", "skip", "raise"}, optional
        Deprecated (``DeprecationWarning``): "drop" and "skip" mean ``on_bad_rows="skip"``,
        "raise" means "raise".

    Returns
    -------
    Workload
        A trace. Job ids are positions ``0, 1, ...`` of the kept rows (as Gavel numbers jobs); job
        types as in the file; unconsolidated throughputs when the table has them;
        ``meta["load_report"]``, ``meta["skipped"]`` / ``["skipped_counts"]`` /
        ``["skipped_left_out"]`` (:func:`~hetsched.inputs.traces.load_report.skipped_meta`),
        ``meta["columns"]`` (column counts seen).

    Raises
    ------
    ValidationError
        A missing file; under ``on_bad_rows="raise"`` any bad row (counted, the first few
        named by line number); a trace with no row kept.
    """
    mode = resolve_on_bad_rows(on_bad_rows, errors)
    p = path_arg(path)
    report = LoadReport(str(p), mode)
    cat = throughputs if isinstance(throughputs, ThroughputCatalogue) else load_gavel_throughputs(throughputs)
    ref = reference_column(cat, reference_gpu_type)
    chk, cells = _gavel_rows(p, report)
    ncols, formats = _check_gavel_forms(chk, cells)
    jt, cols = _read_gavel_columns(chk, cells, ncols)
    _check_gavel_rows(chk, cat, jt, cols["scale_factor"].values, cols["arrival_time"].values)
    chk.resolve()
    keep = np.flatnonzero(chk.alive)
    report.kept = int(keep.size)
    meta = _gavel_meta(p, report, cat, formats)
    report.check()
    report.log_summary()
    kept = {name: col.values[keep] for name, col in cols.items()}
    return _gavel_trace_of(p, chk, keep, cat, ref, [jt[i] for i in keep.tolist()], kept, cluster, meta)


def _gavel_rows(p: Path, report: LoadReport) -> tuple[RowChecks, list[list[str]]]:
    """Open phase: the non-empty lines of ``p`` (:func:`~.cells.decode_text`), split at
    tabs, and a row checker on ``report`` naming each row by its line number."""
    lines_no: list[int] = []
    cells: list[list[str]] = []
    for ln, line in enumerate(decode_text(p, report).split("\n"), start=1):
        line = line.rstrip("\r")
        if line.strip():
            lines_no.append(ln)
            cells.append(line.split("\t"))
    return RowChecks(report, [f"line {ln}" for ln in lines_no]), cells


def _check_gavel_forms(chk: RowChecks, cells: list[list[str]]) -> tuple[np.ndarray, list[int]]:
    """Form phase: fail the rows whose column count is not one of :data:`_GAVEL_COLUMNS`, and the
    7-column rows whose ``needs_data_dir`` is not 0 or 1. Returns every row's column count and
    the (sorted) column counts of the rows still alive."""
    ncols = np.array([len(c) for c in cells], dtype=np.int64)
    chk.fail(~np.isin(ncols, list(_GAVEL_COLUMNS)), "bad_columns", lambda i: (
        f"a Gavel trace line has 10 tab-separated columns (7, 9 or 11 accepted); got {ncols[i]}"))
    seven = ncols == 7
    ndd = [c[3].strip() if len(c) == 7 else "0" for c in cells]
    chk.fail(seven & ~np.isin(np.array(ndd, dtype=object), ["0", "1"]), "bad_value", lambda i: (
        f"`needs_data_dir` (column 4 of the 7-column form) must be 0 or 1; got {ndd[i]!r}"))
    return ncols, sorted(set(ncols[chk.alive].tolist()))


def _form_cells(cells: list[list[str]], k: int, default: str) -> list[str]:
    """Field ``k`` of :data:`_GAVEL_COLUMNS` of every row, by the row's own form (``default``
    where the form lacks it or the row has no known form)."""
    out = []
    for c in cells:
        spec = _GAVEL_COLUMNS.get(len(c))
        j = None if spec is None else spec[k]
        out.append(default if j is None else c[j])
    return out


def _read_gavel_columns(chk: RowChecks, cells: list[list[str]],
                        ncols: np.ndarray) -> tuple[list[str], dict[str, Column]]:
    """Parse phase: the job types and the :data:`_GAVEL_SCHEMA` columns of every row (weight 1
    and SLO -1 where the form has none), read and checked column at once (failures marked on
    ``chk``). Returns the job types and the parsed columns by name."""
    names = [f.name for f in _GAVEL_SCHEMA]
    jt, *texts = (_form_cells(cells, k, d) for k, d in enumerate(("", "", "", "1", "-1", "")))

    def old_reader_note(i: int) -> str:
        return (" (Gavel's older reader drops such rows silently)"
                if ncols[i] == 7 and cols["scale_factor"].values[i] == 0 else "")

    cols = apply_schema(chk, dict(zip(names, texts)), _GAVEL_SCHEMA, notes={"scale_factor": old_reader_note})
    return jt, cols


def _check_gavel_rows(chk: RowChecks, cat: ThroughputCatalogue, jt: list[str], scale: np.ndarray,
                      arrival: np.ndarray) -> None:
    """Table phase: fail rows whose arrival is before an earlier row that would be kept
    (``out_of_order``), then rows whose ``(job_type, scale_factor)`` is not a row of ``cat``
    (``no_throughput_row``, with a hint at similar job types)."""
    known = set(zip(cat.job_types.tolist(), cat.scale_factors.tolist()))
    has_row = np.array([chk.alive[i] and (jt[i], int(scale[i])) in known for i in range(chk.n)], dtype=bool)
    # Order among the rows that would be kept (a dropped row never moves the bar: it is
    # below the running maximum already, or it has no table row).
    settled = np.flatnonzero(chk.alive & has_row)
    prev = np.full(chk.n, -np.inf)
    if chk.n:
        best = np.full(chk.n, -np.inf)
        best[settled] = arrival[settled]
        prev[1:] = np.maximum.accumulate(best)[:-1]
    chk.fail(chk.alive & (arrival < prev), "out_of_order", lambda i: (
        f"`arrival_time` must be non-decreasing; got {arrival[i]:.6g} after {prev[i]:.6g}"))
    table_scales: dict[str, list[int]] = {}
    for t, k in sorted(known):
        table_scales.setdefault(t, []).append(int(k))

    def no_row(i: int) -> str:
        names = sorted(table_scales)
        similar = [t for t in names if t.split(" (")[0] == jt[i].split(" (")[0]][:4]
        hint = f" (similar: {similar})" if similar else f" ({len(names)} job types, e.g. {names[:3]})"
        if jt[i] in table_scales:
            hint = f" (the table has {jt[i]!r} at scale factors {table_scales[jt[i]]} only; similar: {similar})"
        return f"unknown job type ({jt[i]!r}, scale factor {int(scale[i])}): not a row of the throughput table" + hint

    chk.fail(~has_row, "no_throughput_row", no_row)


def _gavel_meta(p: Path, report: LoadReport, cat: ThroughputCatalogue, formats: list[int]) -> dict[str, Any]:
    """The trace's ``meta`` once the rows are settled: path, skipped rows, catalogue, column
    counts seen, the ``no_throughput_row`` count and the load report."""
    return {"path": str(p), **skipped_meta(report), "throughputs": repr(cat), "columns": formats,
            "no_throughput_row": report.counts["dropped"].get("no_throughput_row", 0)
            + report.counts["malformed"].get("no_throughput_row", 0),
            "load_report": report.to_dict()}


def _gavel_trace_of(p: Path, chk: RowChecks, keep: np.ndarray, cat: ThroughputCatalogue, ref: int, jt: list[str],
                    kept: dict[str, np.ndarray], cluster: Cluster | None, meta: dict[str, Any]) -> Workload:
    """Build phase: the trace of the rows ``keep`` of ``chk`` (``jt``: their job types,
    ``kept``: their :data:`_GAVEL_SCHEMA` values by name), with throughputs from ``cat``, SLO
    deadlines at reference column ``ref``, and a check that every job fits ``cluster``."""
    sf = kept["scale_factor"].astype(np.int64)
    idx = cat.index_of(jt, sf)
    T = cat.throughputs[idx]
    U = None if cat.unconsolidated is None else cat.unconsolidated[idx]
    steps, arrivals, slo = kept["total_steps"], kept["arrival_time"], kept["SLO"]
    deadlines = None
    if (slo >= 0).any():
        tref = T[:, ref]
        tref = np.where(tref > 0, tref, T.max(axis=1))
        dur = steps / np.where(tref > 0, tref, np.inf)
        deadlines = np.where(slo > 0, arrivals + slo * dur, np.inf)
        deadlines = np.where(deadlines > arrivals, deadlines, np.inf)
    if cluster is not None:
        cap = cluster.capacities(cat.gpu_types)
        fits = usable_mask(T, sf, cap).any(axis=1)
        if not fits.all():
            j = int(np.flatnonzero(~fits)[0])
            raise ValidationError(
                f"{p}: {chk.where[keep[j]]}: job {j} ({jt[j]!r}) asks for {int(sf[j])} GPUs but no GPU type "
                f"of the cluster {cluster.as_dict()} it can run on has that many."
            )
    jobs = JobSet(T, gpu_types=cat.gpu_types, ids=np.arange(len(jt)), scale_factors=sf,
                  weights=kept["priority_weight"], steps_remaining=steps, arrival_times=arrivals)
    return Workload(jobs, unconsolidated=U, job_types=jt, deadlines=deadlines, source=f"gavel:{p.name}",
                    meta=meta).for_simulation()


def read_gavel_cluster_specs(
    path: str | Path, *, gpu_types: Sequence[str] = ("v100", "p100", "k80")
) -> dict[str, tuple[Cluster, ...]]:
    """Read Gavel's ``cluster_specs.json``: the clusters of its msr (Philly-derived) runs.

    The file maps a trace name to a list of ``"V:P:K"`` strings, GPU counts in the order
    V100, P100, K80 (Gavel's ``scheduler/traces/msr/cluster_specs.json``; its copy holds
    ``{"philly": ["500:0:0"]}``).

    Parameters
    ----------
    path : str or Path
    gpu_types : sequence of str, default ("v100", "p100", "k80")
        Names of the counts, in order.

    Returns
    -------
    dict of str -> tuple of Cluster
        One cluster per spec string, with every type of ``gpu_types`` (a count may be 0).

    Raises
    ------
    ValidationError
        A missing file, JSON that is not an object of lists of strings, or a spec that is
        not ``len(gpu_types)`` non-negative integers separated by ``:`` (named by key and
        position).
    """
    p = path_arg(path)
    types = [str(t) for t in gpu_types]
    if not types or len(set(types)) != len(types):
        raise ValidationError(f"`gpu_types` must be distinct GPU type names; got {list(gpu_types)!r}.")
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValidationError(f"{p}: must hold a JSON object of trace name -> list of 'V:P:K' specs; {exc}.") from None
    if not isinstance(raw, dict):
        raise ValidationError(f"{p}: must hold a JSON object of trace name -> list of 'V:P:K' specs; got {type(raw).__name__}.")
    out: dict[str, tuple[Cluster, ...]] = {}
    for name, specs in raw.items():
        if not isinstance(specs, list) or not specs:
            raise ValidationError(f"{p}: {name!r} must map to a non-empty list of spec strings; got {specs!r}.")
        clusters = []
        for k, spec in enumerate(specs):
            parts = spec.split(":") if isinstance(spec, str) else []
            if len(parts) != len(types) or not all(x.strip().isdigit() for x in parts):
                raise ValidationError(
                    f"{p}: {name!r}[{k}] must be {len(types)} non-negative integers separated by ':' "
                    f"({':'.join(types)}); got {spec!r}.")
            counts = {t: int(x) for t, x in zip(types, parts)}
            if sum(counts.values()) == 0:
                raise ValidationError(f"{p}: {name!r}[{k}] must hold at least one GPU; got {spec!r}.")
            clusters.append(Cluster(counts))
        out[str(name)] = tuple(clusters)
    return out
