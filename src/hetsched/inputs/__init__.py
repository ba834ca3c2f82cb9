"""The inputs of every policy: jobs, the cluster and its topology, throughput tables and
their loaders, workload generators.

* :mod:`.jobs` — :class:`JobSet`, the columnar job table (throughputs, gangs, weights, ...);
* :mod:`.cluster` and :mod:`.topology` — GPU counts, prices, host resources; servers/racks;
* :mod:`.throughputs` — throughput catalogues (:mod:`~.throughputs.tables`), Gavel's
  table (:mod:`~.throughputs.gavel`) and generated ones (:mod:`~.throughputs.generator`);
* :mod:`.workloads` — :class:`Workload`, the one container of jobs with arrivals and their
  source (``hetsched.Trace`` is the same class), job samples and arrival processes;
* :mod:`.trace` — :func:`~.trace.generate_workload` and :func:`~.trace.as_trace`;
* :mod:`.traces` — trace readers, one module per format.
"""

from __future__ import annotations

from .cluster import Cluster
from .jobs import JobSet
from .throughputs import (
    PairThroughputs,
    ThroughputCatalogue,
    gavel_throughputs,
    generate_catalogue,
    load_gavel_throughputs,
)
from .topology import Server, Topology
from .workloads import Workload, poisson_arrivals, random_jobs, sample_jobs

__all__ = [
    "Cluster",
    "JobSet",
    "PairThroughputs",
    "Server",
    "ThroughputCatalogue",
    "Topology",
    "Workload",
    "gavel_throughputs",
    "generate_catalogue",
    "load_gavel_throughputs",
    "poisson_arrivals",
    "random_jobs",
    "sample_jobs",
]
