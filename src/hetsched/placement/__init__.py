"""Placement: map a round's plan onto servers and GPU ids with a min-cost flow.

A round plan says how many GPUs of which type each job gets; placement decides which
servers and GPU ids, in the style of Quincy, Firmament and Aladdin: a flow network with one
node per job, costs for continuation, migration, consolidation and fragmentation, solved
by OR-Tools (networkx as a cross-check), then a gang-aware read-back with repair.

Modules
-------
costs       named cost terms and the one float->integer conversion
request     validation of a round's plan into integer arrays
network     the flow network, built with arrays
solvers     OR-Tools and networkx min-cost flow
readback    best-fit-decreasing decomposition, repair, backfill, GPU ids
result      the Placement record
oracle      exact ILP (HiGHS) for tiny clusters, a test oracle
pipeline    place(): all of the above in order
interconnect  GPU graphs per server shape, MAPA-style best-subset tables, the JSON format
selection   inside-server GPU choice on a placement, predicted bandwidth per job
contention  max-min fair shares of inter-server links
network_aware  per-job communication tables and the simulator's rate factors
"""

from __future__ import annotations

from .contention import max_min_shares
from .costs import COST_SCALE, PlacementCosts, integer_costs
from .interconnect import (
    PATTERNS,
    GpuGraph,
    Interconnect,
    load_interconnect,
    preset_graph,
)
from .network import FlowNetwork, build_network
from .network_aware import NetworkAware
from .oracle import OracleResult, oracle_placement
from .pipeline import place, place_plan
from .readback import REASONS
from .request import PlacementRequest, make_request
from .result import Placement
from .solvers import FLOW_SOLVERS, FlowSolution, solve_flow

__all__ = [
    "COST_SCALE",
    "FLOW_SOLVERS",
    "PATTERNS",
    "REASONS",
    "FlowNetwork",
    "FlowSolution",
    "GpuGraph",
    "Interconnect",
    "NetworkAware",
    "OracleResult",
    "Placement",
    "PlacementCosts",
    "PlacementRequest",
    "build_network",
    "integer_costs",
    "load_interconnect",
    "make_request",
    "max_min_shares",
    "oracle_placement",
    "place",
    "place_plan",
    "preset_graph",
    "solve_flow",
]
