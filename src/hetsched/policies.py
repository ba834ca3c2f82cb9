"""Public namespace of policy classes: ``hetsched.policies.MaxMinFairness(...)`` etc."""

from __future__ import annotations

from .formulations import _load_all
from .formulations.base import Policy, list_policies, make_policy, register_policy

_load_all()

from .formulations.max_min_fairness import MaxMinFairness  # noqa: E402

__all__ = ["Policy", "MaxMinFairness", "list_policies", "make_policy", "register_policy"]
