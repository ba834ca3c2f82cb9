"""Policies, one per module, each a small class with ``formulate()`` (or ``solve()``)."""

from __future__ import annotations

import importlib

from .base import Policy, PolicyOutcome, list_policies, make_policy, register_policy

__all__ = ["Policy", "PolicyOutcome", "list_policies", "make_policy", "register_policy"]

_MODULES = (
    "max_min_fairness",
    "water_filling",
    "hierarchical",
    "max_sum_throughput",
    "min_makespan",
    "finish_time_fairness",
    "fifo",
    "baselines",
    "sia",
    "allox",
    "gandiva_fair",
    "drf",
)


def _load_all() -> None:
    """Import every policy module so that each registers itself."""
    for mod in _MODULES:
        try:
            importlib.import_module(f"{__name__}.{mod}")
        except ModuleNotFoundError as exc:  # a module not written yet
            if exc.name != f"{__name__}.{mod}":
                raise
