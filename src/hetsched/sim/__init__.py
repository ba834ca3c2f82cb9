"""Trace-driven simulation: replay a workload through policy -> mechanism -> placement.

>>> import hetsched as hs
>>> from hetsched.sim import generate_workload, simulate
>>> trace = generate_workload(20, rate_per_hour=4.0, seed=0)
>>> res = simulate("max_min_fairness", trace, hs.Cluster({"v100": 8, "p100": 8, "k80": 8}))
>>> res.summary["n_completed"], bool(res.jobs["jct_s"].gt(0).all())
(20, True)

Modules: :mod:`.simulator` (the driver with a simulated clock), :mod:`.replay` (the same
loop around an :class:`~hetsched.OnlineScheduler`), :mod:`.options` (SimOptions: the round
engine's :class:`~hetsched.rounds.RoundOptions` plus learned throughputs), :mod:`.result`
(SimulationResult, assembled from the engine's ledger), :mod:`.metrics` (definitions),
:mod:`.provenance` (command line, versions and git commit of an output directory),
:mod:`.sweep` (grids over an Executor), :mod:`.plots` (matplotlib, imported lazily),
:mod:`.config` (TOML experiment files), :mod:`.bench` (speed measurement). The round engine
(scheduler protocol, PolicyScheduler, loop, ledger, placing) is :mod:`hetsched.rounds`; the
trace readers are :mod:`hetsched.inputs.traces`; both are re-exported here.
"""

from __future__ import annotations

from ..inputs.trace import Trace, as_trace, generate_workload
from ..inputs.traces.readers import (
    JOB_TABLE_COLUMNS,
    load_trace,
    read_gavel_cluster_specs,
    read_gavel_trace,
    read_helios_trace,
    read_pai_trace,
    read_philly_trace,
    trace_from_table,
)
from ..rounds.policy_scheduler import PolicyScheduler
from ..rounds.protocol import RoundRows, RoundScheduler, RoundView
from .config import ExperimentConfig, load_config, run_config
from .metrics import FTF_THRESHOLD, package_versions, window_mask
from .options import SimOptions
from .result import SimulationResult
from .simulator import as_scheduler, simulate
from .sweep import expand_grid, sweep

__all__ = [
    "FTF_THRESHOLD",
    "JOB_TABLE_COLUMNS",
    "ExperimentConfig",
    "PolicyScheduler",
    "RoundRows",
    "RoundScheduler",
    "RoundView",
    "SimOptions",
    "SimulationResult",
    "Trace",
    "as_scheduler",
    "as_trace",
    "expand_grid",
    "generate_workload",
    "load_config",
    "load_trace",
    "package_versions",
    "read_gavel_cluster_specs",
    "read_gavel_trace",
    "read_helios_trace",
    "read_pai_trace",
    "read_philly_trace",
    "run_config",
    "simulate",
    "sweep",
    "trace_from_table",
    "window_mask",
]
