"""The round engine: what every driver (the simulator's simulated clock, the online
scheduler's real clock) runs each round, and nothing that knows which driver runs it.

Modules: :mod:`.protocol` (the round loop's interface: RoundView, RoundRows,
RoundScheduler), :mod:`.policy_scheduler` (any policy as a round scheduler),
:mod:`.loop` (the simulated-clock loop: arrivals, the clock, stop conditions),
:mod:`.ledger` (per-job accounting), :mod:`.placing` (rows onto servers).
"""

from __future__ import annotations

from .ledger import Ledger
from .placing import RoundPlacer
from .policy_scheduler import PolicyScheduler, PolicyState
from .protocol import RoundRows, RoundScheduler, RoundView, check_rows

__all__ = ["Ledger", "PolicyScheduler", "PolicyState", "RoundPlacer", "RoundRows", "RoundScheduler", "RoundView",
           "check_rows"]
