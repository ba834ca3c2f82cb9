"""hetsched: heterogeneity-aware GPU cluster scheduling policies as fast, exact LPs/ILPs.

>>> import hetsched as hs
>>> cluster = hs.Cluster({"v100": 2, "k80": 2})
>>> jobs = hs.JobSet([[3.0, 1.0], [2.0, 1.0]], gpu_types=["v100", "k80"])
>>> hs.solve("max_min_fairness", jobs, cluster).success
True
"""

from __future__ import annotations

import logging

from . import mechanism, policies, schedulers, sim
from .api import Partitioned, solve, validate_problem
from .errors import (
    CapabilityError,
    DataNotFoundError,
    HetschedError,
    MainModuleGuardError,
    MissingFieldError,
    SchedulerError,
    SolverError,
    UnknownPolicyError,
    UnknownSolverError,
    ValidationError,
)
from .formulations.base import Policy, list_policies
from .inputs import (
    Cluster,
    JobSet,
    PairThroughputs,
    Server,
    ThroughputCatalogue,
    Topology,
    Workload,
    gavel_throughputs,
    generate_catalogue,
    load_gavel_throughputs,
    poisson_arrivals,
    random_jobs,
    sample_jobs,
)
from .mechanism import RoundPlan, ShareHistory, carve_shares, plan_round
from .online import OnlineScheduler
from .placement import Placement, PlacementCosts, place, place_plan
from .result import Allocation
from .rounds import MechanismOptions
from .schedulers import (
    ServiceDistribution,
    Themis,
    ThemisState,
    Tiresias,
    TiresiasState,
)
from .sim import (
    PolicyScheduler,
    RoundRows,
    RoundScheduler,
    RoundView,
    SimOptions,
    SimulationResult,
    Trace,
    generate_workload,
    load_trace,
    simulate,
    sweep,
)
from .solvers import available_solvers
from .solvers.program import LinearProgram

logging.getLogger(__name__).addHandler(logging.NullHandler())

__version__ = "0.1.0"

#: The public face: entry points, policies, inputs (:mod:`hetsched.inputs`), results, mechanism,
#: placement, simulator and errors (:mod:`hetsched.errors`).
__all__ = [
    "Allocation", "CapabilityError", "Cluster", "DataNotFoundError", "HetschedError", "JobSet",
    "LinearProgram", "MainModuleGuardError", "MechanismOptions", "MissingFieldError", "OnlineScheduler", "PairThroughputs",
    "Partitioned", "Placement", "PlacementCosts", "Policy", "PolicyScheduler", "RoundPlan", "RoundRows",
    "RoundScheduler", "RoundView", "SchedulerError", "Server", "ServiceDistribution", "ShareHistory",
    "SimOptions", "SimulationResult", "SolverError", "Themis", "ThemisState", "ThroughputCatalogue", "Tiresias",
    "TiresiasState",
    "Topology", "Trace", "UnknownPolicyError", "UnknownSolverError", "ValidationError", "Workload",
    "__version__", "available_solvers", "carve_shares", "gavel_throughputs", "generate_catalogue",
    "generate_workload", "list_policies", "load_gavel_throughputs", "load_trace", "mechanism", "place",
    "place_plan", "plan_round", "poisson_arrivals", "policies", "random_jobs", "sample_jobs", "schedulers",
    "sim", "simulate", "solve", "sweep", "validate_problem"
]

# ------------------------------------------------------------------ moved modules (one release)
#: Modules that moved when the package was laid out along the data flow (docs/architecture.md):
#: the old import paths still work for one release and warn (DeprecationWarning) on use.
MOVED_MODULES = {
    "hetsched.jobs": "hetsched.inputs.jobs",
    "hetsched.cluster": "hetsched.inputs.cluster",
    "hetsched.topology": "hetsched.inputs.topology",
    "hetsched.throughputs": "hetsched.inputs.throughputs",
    "hetsched.workloads": "hetsched.inputs.workloads",
    "hetsched.configurations": "hetsched.formulations.sia.configurations",
    "hetsched.formulations.space": "hetsched.formulations.spaces.space",
    "hetsched.formulations.packing": "hetsched.formulations.spaces.packing",
    "hetsched.formulations.placement_sensitivity": "hetsched.formulations.spaces.placement_sensitivity",
    "hetsched.formulations.variable_kinds": "hetsched.formulations.spaces.kinds",
    "hetsched.aggregation": "hetsched.formulations.aggregation",
    "hetsched.program": "hetsched.solvers.program",
    "hetsched.engine": "hetsched.solvers.context",
    "hetsched.partition": "hetsched.api",
    "hetsched.certificate": "hetsched.solvers.certificate",
    "hetsched.structured": "hetsched.solvers.structured",
    **{f"hetsched.structured.{m}": f"hetsched.solvers.structured.{m}"
       for m in ("backend", "floor", "level", "master", "options", "pricing", "problem", "solver")},
    # issue 24: the round engine has a package of its own, trace readers joined the inputs
    "hetsched.sim.rounds": "hetsched.rounds.protocol",
    "hetsched.sim.policy_scheduler": "hetsched.rounds.policy_scheduler",
    "hetsched.sim.placing": "hetsched.rounds.placing",
    "hetsched.sim.ledger": "hetsched.rounds.ledger",
    "hetsched.sim.loop": "hetsched.rounds.loop",
    "hetsched.sim.readers": "hetsched.inputs.traces.readers",
    "hetsched.sim.gavel_trace": "hetsched.inputs.traces.gavel",
    "hetsched.sim.trace_cells": "hetsched.inputs.traces.cells",
    "hetsched.sim.load_report": "hetsched.inputs.traces.load_report",
    "hetsched.sim.trace": "hetsched.inputs.trace",
    "hetsched.online.replay": "hetsched.sim.replay",
    # POP partitioning runs whole solves: it moved up to the api stage (solvers sit below it)
    "hetsched.solvers.partition": "hetsched.api",
}

#: Names that moved to another package (issue 24), as ``(package, name) -> new module``: the
#: old attribute still works for one release and warns when called.
MOVED_NAMES = {
    ("hetsched.online", "simulate_online"): "hetsched.sim.replay",
    ("hetsched.online.sides", "bind_online"): "hetsched.online.job_tables",
}


def _install_moved_modules() -> None:
    """Register a forwarding module under each old name (``sys.modules`` and the parent's
    attribute), so ``import hetsched.jobs`` and ``from hetsched.structured import X`` keep
    working; reading a name from one warns once per call site."""
    import importlib
    import sys
    import types
    import warnings

    class _Moved(types.ModuleType):
        def __getattr__(self, name: str):
            new = self.__dict__["_moved_to"]
            if name.startswith("__"):
                raise AttributeError(name)
            if name.startswith("_"):  # private names (and tools probing for markers) forward silently
                return getattr(importlib.import_module(new), name)
            warnings.warn(f"module {self.__name__!r} moved to {new!r}; import from there (the old path will be "
                          "removed in the next release).", DeprecationWarning, stacklevel=2)
            return getattr(importlib.import_module(new), name)

    for old, new in MOVED_MODULES.items():
        mod = _Moved(old, f"Moved to {new}.")
        mod.__dict__["_moved_to"] = new
        sys.modules.setdefault(old, mod)
        parent, _, child = old.rpartition(".")
        parent_mod = sys.modules.get(parent)
        if parent_mod is not None and child not in vars(parent_mod):
            setattr(parent_mod, child, sys.modules[old])

    for (package, name), new in MOVED_NAMES.items():
        target = getattr(importlib.import_module(new), name)

        def forward(*args, _target=target, _old=f"{package}.{name}", _new=f"{new}.{name}", **kwargs):
            warnings.warn(f"{_old} moved to {_new}; import it from there (the old name will be removed in the "
                          "next release).", DeprecationWarning, stacklevel=2)
            return _target(*args, **kwargs)

        forward.__name__, forward.__doc__ = name, target.__doc__
        setattr(importlib.import_module(package), name, forward)


_install_moved_modules()
