"""Public namespace of policy classes: ``hetsched.policies.MaxMinFairness(...)`` etc."""

from __future__ import annotations

from .formulations import _load_all
from .formulations.base import Policy, list_policies, make_policy, register_policy
from .formulations.allox import AlloX
from .formulations.baselines import Isolated, Proportional
from .formulations.drf import DominantResourceFairness
from .formulations.fifo import Fifo
from .formulations.finish_time_fairness import FinishTimeFairness
from .formulations.gandiva_fair import GandivaFair
from .formulations.max_min_fairness import MaxMinFairness
from .formulations.max_sum_throughput import MaxSumThroughput
from .formulations.hierarchical import HierarchicalMaxMinFairness
from .formulations.min_makespan import MinMakespan
from .formulations.packing import Packing
from .formulations.placement_sensitivity import PlacementSensitivity
from .formulations.sia import Sia
from .formulations.water_filling import MaxMinFairnessWaterFilling

from .partition import Partitioned  # noqa: E402  (wraps any policy; not registered by name)

_load_all()

__all__ = [
    "Policy",
    "AlloX",
    "DominantResourceFairness",
    "Fifo",
    "FinishTimeFairness",
    "GandivaFair",
    "HierarchicalMaxMinFairness",
    "Isolated",
    "MaxMinFairness",
    "MaxMinFairnessWaterFilling",
    "MaxSumThroughput",
    "MinMakespan",
    "Packing",
    "Partitioned",
    "PlacementSensitivity",
    "Proportional",
    "Sia",
    "list_policies",
    "make_policy",
    "register_policy",
]
