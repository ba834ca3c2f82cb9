"""Trace readers: jobs with arrivals read from local files, one module per format.

Modules: :mod:`.readers` (Philly, Helios/Lucid, Alibaba PAI, a job table, :func:`load_trace`),
:mod:`.gavel` (Gavel's traces and cluster specs), :mod:`.cells` (column-at-once checks of
trace cells), :mod:`.load_report` (what a reader dropped and why).
"""

from __future__ import annotations

from .readers import (
    JOB_TABLE_COLUMNS,
    load_trace,
    read_gavel_cluster_specs,
    read_gavel_trace,
    read_helios_trace,
    read_pai_trace,
    read_philly_trace,
    trace_from_table,
)

__all__ = ["JOB_TABLE_COLUMNS", "load_trace", "read_gavel_cluster_specs", "read_gavel_trace", "read_helios_trace",
           "read_pai_trace", "read_philly_trace", "trace_from_table"]
