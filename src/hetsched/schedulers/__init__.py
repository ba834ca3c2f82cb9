"""Per-round priority schedulers (not allocation LPs): Tiresias' discretized 2D-LAS / 2D-Gittins.

A scheduler here has the per-round interface a round loop (such as the simulator) calls:

* ``state = sched.initial_state()``;
* ``plan = sched.plan(jobs, cluster, state, round_seconds=L)`` -> a
  :class:`~hetsched.mechanism.RoundPlan` (whole gangs on one GPU type, mode "rounds");
* ``state = sched.record(state, plan, seconds)`` -> the next (immutable) state.

The same object also implements the round loop's interface
(:class:`~hetsched.sim.RoundScheduler`: ``plan_round`` / ``record_round``), so
``hetsched.simulate(hetsched.Tiresias(), workload, cluster)`` runs it on any trace.
"""

from __future__ import annotations

from .antman import AntMan, AntManState
from .gittins import ServiceDistribution, gittins_index
from .synergy import Synergy, SynergyState
from .themis import Themis, ThemisState
from .tiresias import ORDERS, SERVICES, Tiresias, TiresiasPlan, TiresiasState

__all__ = [
    "ORDERS",
    "SERVICES",
    "ServiceDistribution",
    "Tiresias",
    "TiresiasPlan",
    "TiresiasState",
    "Themis",
    "ThemisState",
    "AntMan",
    "AntManState",
    "Synergy",
    "SynergyState",
    "gittins_index",
]
