"""Throughput tables: job types x GPU types, their generator and a Gavel-format loader.

A :class:`ThroughputCatalogue` holds, for every *row* ``(job_type, scale_factor)``, the
training throughput (steps/s) of that job on ``scale_factor`` GPUs of each GPU type:

* ``throughputs`` -- the job's GPUs on one server (consolidated);
* ``unconsolidated`` (optional) -- the same job spread over several servers;
* ``pairs`` (optional) -- two rows sharing the same GPUs (space sharing), as arrays.

Two sources fill it:

* :func:`generate_catalogue`, the project's own synthetic generator, whose parameters come
  from published measurements (see ``docs/data.md``); it is the default data everywhere.
* :func:`load_gavel_throughputs`, a reader of the JSON format Gavel publishes its measured
  table in, from a local path the user gives (nothing is ever downloaded).

Modules: :mod:`.tables` (the catalogue, pair tables, :func:`reference_column`),
:mod:`.gavel` (the Gavel-format loader and where Gavel's file is found), :mod:`.generator`
(:func:`generate_catalogue`). Every public name is re-exported here.
"""

from __future__ import annotations

import inspect

from .gavel import (
    GAVEL_THROUGHPUTS_ENV,
    UNCONSOLIDATED_SUFFIX,
    gavel_throughputs,
    gavel_throughputs_path,
    load_gavel_throughputs,
)
from .generator import DEFAULT_SPEEDUPS, generate_catalogue
from .tables import PairThroughputs, ThroughputCatalogue, reference_column

__all__ = [
    "DEFAULT_SPEEDUPS",
    "GAVEL_THROUGHPUTS_ENV",
    "UNCONSOLIDATED_SUFFIX",
    "PairThroughputs",
    "ThroughputCatalogue",
    "gavel_throughputs",
    "gavel_throughputs_path",
    "generate_catalogue",
    "load_gavel_throughputs",
    "reference_column",
]

#: The examples of the re-exported classes and functions, for ``doctest.testmod`` of this
#: package (doctest looks only at what a module defines itself).
__test__ = {name: obj for name, obj in list(globals().items())
            if not name.startswith("_") and (inspect.isclass(obj) or inspect.isfunction(obj))
            and obj.__module__.startswith(__name__ + ".")}
