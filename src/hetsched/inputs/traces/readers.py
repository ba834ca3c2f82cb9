"""Trace readers: Gavel, Philly, Helios/Lucid and Alibaba PAI 2020, from local files only.

This module holds :func:`load_trace` (one entry point, the format picked by name or file
suffix) and re-exports every reader: each format has a module of its own
(:mod:`.gavel`, :mod:`.philly`, :mod:`.helios`, :mod:`.pai`), :mod:`.table` turns a job
table into a trace, and :mod:`.cells` holds the checks they share.

Two kinds of source:

* **Gavel's trace** (10 tab-separated columns per line, or 9, 11 or the older 7 of its
  Philly-derived ``msr`` traces; job types named as in the throughput table) becomes a
  trace (a :class:`~hetsched.Workload`) directly with :func:`read_gavel_trace`; the cluster sizes
  of Gavel's msr experiments (``cluster_specs.json``) come from
  :func:`read_gavel_cluster_specs`.
* **Cluster logs** (Philly ``cluster_job_log`` JSON, Helios/Lucid ``cluster_log.csv``,
  Alibaba PAI 2020 job and task tables) record when jobs were submitted, how many GPUs they
  held and for how long, but not what they trained. Their readers return a *job table*
  (a DataFrame with :data:`JOB_TABLE_COLUMNS`); :func:`trace_from_table` then gives every
  job a job type from a throughput catalogue (uniform among the types that have a row at
  the job's GPU count, seeded) and turns its duration into steps at that type's throughput.

**Rows the readers do not keep** (:mod:`hetsched.inputs.traces.load_report`). Real traces hold
jobs that never started, never finished or lasted zero seconds, Gavel's msr traces hold
job types the throughput table lacks, and any file may hold a *malformed* row -- a missing
or non-numeric field, a wrong number of columns, bytes that are not UTF-8, a duplicate id,
arrivals out of order, a job larger than ``cluster``. By default (``on_bad_rows="raise"``)
such rows are an error: the reader reads the whole file, then raises one
:class:`~hetsched.errors.ValidationError` that counts them by reason and names the first
few (``line N`` of a text file, header = line 1; ``entry N`` of a JSON list, from 0) with
the rule and value. ``on_bad_rows="skip"`` (command line: ``--skip-bad-rows``) drops them
with a WARNING log line and counts them by reason in a load report, ``meta["load_report"]``
of the trace (``attrs["meta"]["load_report"]`` of a job table), which a simulation carries
into its ``config["workload_meta"]``; ``meta["skipped"]`` lists the messages of the first 20
dropped rows, ``meta["skipped_counts"]`` counts them all by reason and
``meta["skipped_left_out"]`` says how many are not listed. Rows filtered on purpose
(``statuses``, ``vc``, CPU-only jobs) are counted, never an error; a trace with no job left
is always an error. The older ``errors=`` keyword is deprecated (``"drop"``/``"skip"`` mean
``"skip"``).

The readers parse columns at once (pandas, numpy) and build messages only for the rows
they name. Each format's numeric and time columns are described as data (``_HELIOS``,
``_PAI_JOB_FIELDS``, ...: :class:`~hetsched.inputs.traces.cells.Field`, how a cell is read, what
an absent one means, the rule its value follows) and checked by one routine
(:func:`~hetsched.inputs.traces.cells.apply_schema` and its parts). Nothing is ever downloaded.
"""

from __future__ import annotations

import inspect
from importlib import import_module
from pathlib import Path
from typing import Any

from ...errors import ValidationError
from ...validation import check_choice
from ..cluster import Cluster
from ..throughputs import (
    ThroughputCatalogue,
    generate_catalogue,
    load_gavel_throughputs,
)
from ..workloads import Workload
from .gavel import read_gavel_cluster_specs, read_gavel_trace
from .helios import read_helios_trace
from .load_report import resolve_on_bad_rows
from .pai import read_pai_trace
from .philly import read_philly_trace
from .table import JOB_TABLE_COLUMNS, trace_from_table

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


_FORMATS = ("gavel", "philly", "helios", "pai")


def trace_format(path: str | Path, format: str | None = None) -> str:
    """The format :func:`load_trace` reads ``path`` as: ``format`` when given, else from the
    file name (``.json`` philly, ``.csv`` helios, anything else gavel)."""
    if format is not None:
        return format
    return {".json": "philly", ".csv": "helios"}.get(Path(str(path)).suffix.lower(), "gavel")


def load_trace(
    path: str | Path,
    format: str | None = None,
    *,
    throughputs: str | Path | ThroughputCatalogue | None = None,
    task_path: str | Path | None = None,
    seed: int = 0,
    cluster: Cluster | None = None,
    on_bad_rows: str = "raise",
    errors: str | None = None,
    **options: Any,
) -> Workload:
    """Read any supported trace into a trace, a :class:`~hetsched.Workload` (reader + :func:`trace_from_table`).

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
    on_bad_rows : {"raise", "skip"}, default "raise"
        Rows that cannot be used (see :mod:`hetsched.inputs.traces.load_report`): "raise"
        is one error counting them and naming the first few; "skip" drops them with a
        WARNING log line and counts them in ``meta["load_report"]``.
    errors : {"drop", "skip", "raise"}, optional
        Deprecated (``DeprecationWarning``): "drop" and "skip" mean ``on_bad_rows="skip"``.
    **options
        Passed to the reader (e.g. ``sort=True``, ``states=[...]``, ``vc=[...]`` for Philly) or to
        :func:`trace_from_table` (``unmatched``, ``gpu_type_map``, ``reference_gpu_type``).

    Returns
    -------
    Workload
        Ready to simulate (steps and sorted arrivals); ``meta["load_report"]`` counts what
        the reader did not keep.

    Raises
    ------
    ValidationError
        An unknown format or option, a missing ``throughputs`` (Gavel) or ``task_path``
        (PAI), or any error of the reader (bad rows under ``on_bad_rows="raise"``, a trace
        with no job left).
    """
    mode = resolve_on_bad_rows(on_bad_rows, errors)
    p = Path(path) if isinstance(path, (str, Path)) else path
    fmt = trace_format(p, format)
    check_choice(fmt, "format", _FORMATS)
    table_opts = {k: options.pop(k) for k in ("unmatched", "gpu_type_map", "reference_gpu_type") if k in options}
    reader = {"gavel": read_gavel_trace, "philly": read_philly_trace, "helios": read_helios_trace,
              "pai": read_pai_trace}[fmt]
    accepted = set(inspect.signature(reader).parameters) - {"path", "throughputs", "task_path", "cluster", "errors",
                                                            "on_bad_rows"}
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise ValidationError(
            f"`load_trace` options for format {fmt!r} must be among {sorted(accepted)} (reader) or "
            f"['gpu_type_map', 'reference_gpu_type', 'unmatched'] (trace_from_table); got {unknown}."
        )
    if fmt == "gavel":
        if throughputs is None:
            raise ValidationError("a Gavel trace needs `throughputs` (the Gavel-format throughput JSON or a catalogue).")
        return read_gavel_trace(p, throughputs, cluster=cluster, on_bad_rows=mode,
                                reference_gpu_type=table_opts.get("reference_gpu_type"), **options)
    if throughputs is None:
        cat = generate_catalogue(seed=seed)
    elif isinstance(throughputs, ThroughputCatalogue):
        cat = throughputs
    else:
        cat = load_gavel_throughputs(throughputs)
    if fmt == "philly":
        table = read_philly_trace(p, cluster=cluster, on_bad_rows=mode, **options)
    elif fmt == "helios":
        table = read_helios_trace(p, cluster=cluster, on_bad_rows=mode, **options)
    else:
        if task_path is None:
            raise ValidationError("a PAI trace needs `task_path` (pai_task_table.csv) beside the job table.")
        table = read_pai_trace(p, task_path, cluster=cluster, on_bad_rows=mode, **options)
    return trace_from_table(table, cat, seed=seed, **table_opts)


#: The modules that hold what this module held before each format got one (issue 24).
_SPLIT_INTO = ("philly", "helios", "pai", "table", "gavel", "cells", "load_report")
#: Helpers shared by the readers that kept their name but lost the underscore in :mod:`.cells`.
_RENAMED = {"_job_prefix": "job_prefix", "_span_message": "span_message", "_csv_table": "csv_table",
            "_first_line": "first_line", "Trace": "Workload"}


def __getattr__(name: str) -> Any:
    """Names this module held before the split (e.g. ``Trace``, ``reference_column`` or a
    private helper): found in the module that holds them now."""
    wanted = _RENAMED.get(name, name)
    for mod in _SPLIT_INTO:
        found = vars(import_module(f".{mod}", __package__)).get(wanted)
        if found is not None:
            return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
