"""Online mode: the round loop driven by the caller's clock, with throughputs learned from
reports and state that survives restarts (see ``docs/online.md``).

* :class:`OnlineScheduler` — ``submit`` / ``report`` / ``complete`` / ``cancel`` /
  ``next_round(now)`` over any round scheduler, persisted in SQLite; three rooms behind it:
  intake and reports (:mod:`.intake`), the round step (:mod:`.step`, returning an
  :class:`OnlinePlan`) and persistence (:mod:`.store`, the only module that speaks SQL);
* :class:`ThroughputEstimator` — moving averages of measurements, profiles and completion
  against a reference table (:mod:`.estimator`); :func:`holdout_errors` measures it;
* :func:`register_state_type` — lets a custom round scheduler's state dataclass into the
  store's data-only snapshot (:mod:`.codec`);

Its simulated-clock driver, :func:`hetsched.sim.replay.simulate_online` (what
``hetsched.simulate(..., learn_throughputs=True)`` runs), lives with the simulator.
"""

from __future__ import annotations

from .codec import register_state_type
from .estimator import COMPLETIONS, ThroughputEstimator, holdout_errors
from .scheduler import OnlineScheduler
from .step import OnlinePlan
from .store import (
    SCHEMA_VERSION,
    StoreCorruptError,
    StoreError,
    StoreLockedError,
    StoreVersionError,
)

__all__ = [
    "COMPLETIONS",
    "SCHEMA_VERSION",
    "OnlinePlan",
    "OnlineScheduler",
    "StoreCorruptError",
    "StoreError",
    "StoreLockedError",
    "StoreVersionError",
    "ThroughputEstimator",
    "holdout_errors",
    "register_state_type",
]
