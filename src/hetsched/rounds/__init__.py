"""The round engine: what every driver (the simulator's simulated clock, the online
scheduler's real clock) runs each round, and nothing that knows which driver runs it.

Modules: :mod:`.protocol` (the round loop's interface: RoundView, RoundRows,
RoundScheduler; the SchedulerLike and WorkloadLike a driver accepts), :mod:`.options`
(MechanismOptions, RoundOptions: each option declared once), :mod:`.policy_scheduler` (any
policy as a round scheduler), :mod:`.loop` (the simulated-clock loop: arrivals, the clock,
stop conditions), :mod:`.ledger` (per-job accounting), :mod:`.placing` (rows onto servers).
"""

from __future__ import annotations

from .ledger import Ledger
from .options import MechanismOptions, RoundOptions
from .placing import RoundPlacer
from .policy_scheduler import PolicyScheduler, PolicyState
from .protocol import (
           RoundRows,
           RoundScheduler,
           RoundView,
           SchedulerLike,
           WorkloadLike,
           check_rows,
)

__all__ = ["Ledger", "MechanismOptions", "PolicyScheduler", "PolicyState", "RoundOptions", "RoundPlacer", "RoundRows",
           "RoundScheduler", "RoundView", "SchedulerLike", "WorkloadLike", "check_rows"]
