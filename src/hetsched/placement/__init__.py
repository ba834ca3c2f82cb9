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
"""

from __future__ import annotations

from .costs import COST_SCALE, PlacementCosts, integer_costs
from .network import FlowNetwork, build_network
from .oracle import OracleResult, oracle_placement
from .pipeline import place, place_plan
from .readback import REASONS
from .request import PlacementRequest, make_request
from .result import Placement
from .solvers import FLOW_SOLVERS, FlowSolution, solve_flow

__all__ = [
    "COST_SCALE",
    "FLOW_SOLVERS",
    "REASONS",
    "FlowNetwork",
    "FlowSolution",
    "OracleResult",
    "Placement",
    "PlacementCosts",
    "PlacementRequest",
    "build_network",
    "integer_costs",
    "make_request",
    "oracle_placement",
    "place",
    "place_plan",
    "solve_flow",
]
