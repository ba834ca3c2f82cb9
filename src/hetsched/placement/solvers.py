"""Min-cost-flow solvers for a :class:`~hetsched.placement.network.FlowNetwork`.

* ``"ortools"`` (default): OR-Tools ``SimpleMinCostFlow`` (cost scaling), filled in bulk from
  the arc arrays.
* ``"networkx"``: :func:`networkx.network_simplex`, pure Python; a cross-check, tens of
  times slower.

Both return a :class:`FlowSolution` whose ``flow`` is aligned with the network's arcs. Both
see the same integer costs, so their optimal costs must be equal (the flows may differ when
the optimum is not unique).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import SolverError
from ..validation import check_choice
from .network import FlowNetwork

__all__ = ["FLOW_SOLVERS", "FlowSolution", "solve_flow"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class FlowSolution:
    """An optimal flow.

    Attributes
    ----------
    flow : ndarray of int64, shape (n_arcs,)
    cost : int
        Total integer cost (scaled units).
    solver : str
    solve_s : float
        Seconds in the solver, including loading the arcs.
    """

    flow: np.ndarray
    cost: int
    solver: str
    solve_s: float


def _solve_ortools(net: FlowNetwork) -> FlowSolution:
    from ortools.graph.python import min_cost_flow

    t0 = time.perf_counter()
    mcf = min_cost_flow.SimpleMinCostFlow()
    arcs = mcf.add_arcs_with_capacity_and_unit_cost(net.tails, net.heads, net.capacity, net.cost)
    nodes = np.arange(net.n_nodes, dtype=np.int32)
    mcf.set_nodes_supplies(nodes, net.supply)
    status = mcf.solve()
    if status != mcf.OPTIMAL:
        raise SolverError(
            f"OR-Tools min-cost flow returned status {status!r} on the placement network "
            f"({net.n_nodes} nodes, {net.n_arcs} arcs); the network is always feasible, so this is a bug or an overflow."
        )
    flow = np.asarray(mcf.flows(arcs), dtype=np.int64)
    cost = int(mcf.optimal_cost())
    return FlowSolution(flow=flow, cost=cost, solver="ortools", solve_s=time.perf_counter() - t0)


def _solve_networkx(net: FlowNetwork) -> FlowSolution:
    import networkx as nx

    t0 = time.perf_counter()
    g = nx.MultiDiGraph()
    # networkx: demand = -supply
    g.add_nodes_from((int(v), {"demand": -int(b)}) for v, b in enumerate(net.supply))
    g.add_edges_from(
        (int(t), int(h), i, {"capacity": int(c), "weight": int(w)})
        for i, (t, h, c, w) in enumerate(zip(net.tails, net.heads, net.capacity, net.cost))
    )
    try:
        cost, flow_dict = nx.network_simplex(g)
    except nx.NetworkXUnfeasible as exc:  # pragma: no cover - the network is always feasible
        raise SolverError(f"networkx found the placement network infeasible: {exc}") from exc
    flow = np.fromiter(
        (flow_dict[int(t)][int(h)][i] for i, (t, h) in enumerate(zip(net.tails, net.heads))),
        dtype=np.int64,
        count=net.n_arcs,
    )
    return FlowSolution(flow=flow, cost=int(cost), solver="networkx", solve_s=time.perf_counter() - t0)


#: Solver name -> function(network) -> FlowSolution.
FLOW_SOLVERS: dict[str, Callable[[FlowNetwork], FlowSolution]] = {
    "ortools": _solve_ortools,
    "networkx": _solve_networkx,
}


def solve_flow(net: FlowNetwork, solver: str = "ortools") -> FlowSolution:
    """Solve ``net`` with the named solver.

    Parameters
    ----------
    net : FlowNetwork
    solver : {"ortools", "networkx"}

    Returns
    -------
    FlowSolution

    Raises
    ------
    ValidationError
        For an unknown solver name.
    SolverError
        If the solver fails (it never should: every job has an unscheduled arc).
    """
    sol = FLOW_SOLVERS[check_choice(solver, "solver", sorted(FLOW_SOLVERS))](net)
    log.debug("%s min-cost flow: cost %d in %.3fs (%d arcs)", solver, sol.cost, sol.solve_s, net.n_arcs)
    return sol
