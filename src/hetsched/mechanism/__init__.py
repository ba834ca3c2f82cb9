"""Round-based mechanism: turn an allocation X into whole-GPU rounds that converge to it.

Each round (Gavel: 360 s) the planner decides which jobs run on which GPU type, whole
gangs only, so that the time each job receives converges to X:

>>> import numpy as np
>>> from hetsched.mechanism import ShareHistory, plan_round_arrays
>>> X = np.array([[0.5], [0.5]])                      # two jobs share one GPU
>>> h = ShareHistory.empty()
>>> for _ in range(10):
...     plan = plan_round_arrays(X, [1, 1], [1], h, gpu_types=["v100"])
...     h = h.record(plan, 360.0)
>>> h.shares.ravel().tolist()
[0.5, 0.5]

Modules: :mod:`.priority` (the rules), :mod:`.packing` (vectorized greedy whole-gang
packing), :mod:`.history` (ShareHistory), :mod:`.plan` (RoundPlan), :mod:`.planner`
(plan_round), :mod:`.arrivals` (shares for jobs that arrive between solves).
"""

from __future__ import annotations

from .arrivals import carve_shares
from .history import ShareHistory
from .packing import greedy_pack, greedy_pack_blocking
from .plan import MODES, RULES, RoundPlan
from .planner import DEFAULT_ROUND_SECONDS, plan_round, plan_round_arrays

__all__ = [
    "DEFAULT_ROUND_SECONDS",
    "MODES",
    "RULES",
    "RoundPlan",
    "ShareHistory",
    "carve_shares",
    "greedy_pack",
    "greedy_pack_blocking",
    "plan_round",
    "plan_round_arrays",
]
