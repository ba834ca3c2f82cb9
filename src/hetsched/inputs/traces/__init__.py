"""Trace readers: jobs with arrivals read from local files, one module per format.

Modules: :mod:`.gavel` (Gavel's traces and cluster specs), :mod:`.philly` (Microsoft
Philly), :mod:`.helios` (Helios / Lucid), :mod:`.pai` (Alibaba PAI 2020), :mod:`.table` (a
job table turned into a trace), :mod:`.readers` (:func:`load_trace`, the format picked by
name, and every reader again), :mod:`.cells` (column-at-once checks of trace cells, shared),
:mod:`.load_report` (what a reader dropped and why). Every reader gives a
:class:`~hetsched.Workload` (a trace) or a job table.
"""

from __future__ import annotations

from .gavel import read_gavel_cluster_specs, read_gavel_trace
from .helios import read_helios_trace
from .pai import read_pai_trace
from .philly import read_philly_trace
from .readers import load_trace
from .table import JOB_TABLE_COLUMNS, trace_from_table

__all__ = ["JOB_TABLE_COLUMNS", "load_trace", "read_gavel_cluster_specs", "read_gavel_trace", "read_helios_trace",
           "read_pai_trace", "read_philly_trace", "trace_from_table"]
