"""A job table (what the cluster-log readers return) turned into a trace.

:data:`JOB_TABLE_COLUMNS` names the table's columns; :func:`trace_from_table` gives every
job a job type from a throughput catalogue and turns its duration into steps.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ...errors import ValidationError
from ...validation import check_choice
from ..jobs import JobSet
from ..throughputs import ThroughputCatalogue, reference_column
from ..workloads import Workload
from .cells import JOB_TABLE_COLUMNS

__all__ = ["JOB_TABLE_COLUMNS", "trace_from_table"]

log = logging.getLogger(__name__)


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
) -> Workload:
    """Give every job of a job table a job type and steps; return a trace (a :class:`~hetsched.Workload`).

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
    Workload
        Ids from ``job_id``; arrivals from ``arrival`` (must be non-decreasing); job types
        and unconsolidated throughputs from the catalogue.

    Raises
    ------
    ValidationError
        Bad arguments; a row whose GPU count, duration or arrival is unusable (naming it);
        arrivals out of order.
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
    return Workload(jobs, unconsolidated=U, job_types=catalogue.job_types[rows], source=str(src),
                    meta=meta).for_simulation()


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

