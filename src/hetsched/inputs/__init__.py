"""The inputs of every policy: jobs, the cluster and its topology, throughput tables and
their loaders, workload generators.

* :mod:`.jobs` — :class:`JobSet`, the columnar job table (throughputs, gangs, weights, ...);
* :mod:`.cluster` and :mod:`.topology` — GPU counts, prices, host resources; servers/racks;
* :mod:`.throughputs` — throughput catalogues (Gavel's table, generated ones, pair and
  placement variants);
* :mod:`.workloads` — job samples and arrival processes drawn from a catalogue.
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
