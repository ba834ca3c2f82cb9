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
from .api import solve, validate_problem
from .cluster import Cluster
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
from .jobs import JobSet
from .program import LinearProgram
from .result import Allocation
from .mechanism import RoundPlan, ShareHistory, carve_shares, plan_round
from .partition import Partitioned
from .online import OnlineScheduler
from .placement import Placement, PlacementCosts, place, place_plan
from .schedulers import ServiceDistribution, Tiresias, TiresiasState
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
from .topology import Server, Topology
from .throughputs import (
    PairThroughputs,
    ThroughputCatalogue,
    gavel_throughputs,
    generate_catalogue,
    load_gavel_throughputs,
)
from .workloads import Workload, poisson_arrivals, random_jobs, sample_jobs

logging.getLogger(__name__).addHandler(logging.NullHandler())

__version__ = "0.1.0"

__all__ = [
    "Allocation",
    "CapabilityError",
    "Cluster",
    "DataNotFoundError",
    "MainModuleGuardError",
    "HetschedError",
    "JobSet",
    "LinearProgram",
    "MissingFieldError",
    "Policy",
    "SolverError",
    "UnknownPolicyError",
    "UnknownSolverError",
    "ValidationError",
    "PairThroughputs",
    "Partitioned",
    "OnlineScheduler",
    "RoundPlan",
    "ServiceDistribution",
    "PolicyScheduler",
    "RoundRows",
    "RoundScheduler",
    "RoundView",
    "SchedulerError",
    "SimOptions",
    "SimulationResult",
    "Tiresias",
    "TiresiasState",
    "schedulers",
    "Trace",
    "generate_workload",
    "load_trace",
    "sim",
    "simulate",
    "sweep",
    "ShareHistory",
    "carve_shares",
    "mechanism",
    "plan_round",
    "Placement",
    "PlacementCosts",
    "Server",
    "Topology",
    "place",
    "place_plan",
    "ThroughputCatalogue",
    "Workload",
    "available_solvers",
    "gavel_throughputs",
    "generate_catalogue",
    "load_gavel_throughputs",
    "poisson_arrivals",
    "random_jobs",
    "sample_jobs",
    "list_policies",
    "policies",
    "solve",
    "validate_problem",
    "__version__",
]
