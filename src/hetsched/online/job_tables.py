"""The policy's per-job tables online (pair rates, spread rates, Sia's goodput), part of the
round step: which policies hold them, where learning cannot update them, and binding them to
the submitted jobs each round.

Every reading of those tables by parameter name is here, in one place (:class:`JobTables`,
:func:`has_job_tables`, :func:`check_learnable`, :func:`bind_online`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ..formulations.base import Policy
from ..formulations.spaces.placement_sensitivity import PlacementSensitivity
from ..formulations.tables import TableBinding
from ..inputs.throughputs import ThroughputCatalogue
from ..rounds.policy_scheduler import PolicyState
from .sides import SideRates, online_packing, online_sensitivity

__all__ = ["JobTables", "bind_online", "check_learnable", "has_job_tables"]


def has_job_tables(policy: Policy | None) -> bool:
    """Whether ``policy`` holds per-job tables that are bound to the jobs (pairs, spread
    rates, Sia's goodput table): :meth:`~hetsched.formulations.base.Policy.bound_tables`."""
    return policy is not None and bool(policy.bound_tables())


#: What a fixed table holds, for the refusal of ``learn=True`` (error text only).
_FIXED = {"packing": "pair rates", "placement_sensitivity": "unconsolidated rates", "goodput": "goodput"}


def check_learnable(policy: Policy | None) -> None:
    """Refuse ``learn=True`` for a policy whose per-job rates are a fixed table the reports
    could not update (raised at construction, never mid-run)."""
    if policy is None:
        return
    for name in policy.bound_tables():
        if name in policy.workload_tables():
            continue
        value = getattr(policy, name)
        if policy.emits_configurations:  # Sia: the goodput table
            raise ValidationError(
                f"`learn=True` with Sia's fixed `{name}` table: reports could not update it. Use Sia without "
                f"`{name}` (goodput from the learned throughputs by Sia's scaling model) or learn=False.")
        raise ValidationError(
            f"`learn=True` with a fixed `{name}` table ({type(value).__name__}): its {_FIXED.get(name, name)} would "
            f"never follow what workers report. Use {name}='workload' (rates given at submit and learned from "
            "reports) or learn=False.")
    if np.ndim(getattr(policy, "restart_penalty", 0.0)) != 0:
        raise ValidationError("Sia's per-job `restart_penalty` vector is indexed by the jobs of one solve; online "
                              "the jobs change, so give one number.")


def bind_online(policy: Policy, *, ids: np.ndarray, active: np.ndarray, scale_factors: np.ndarray, T: np.ndarray,
                sides: SideRates, reference: ThroughputCatalogue | None, rows: np.ndarray,
                gpu_types: Sequence[str]) -> Policy:
    """``policy`` with its per-job tables bound to the jobs submitted so far
    (:meth:`~hetsched.formulations.base.Policy.bind_tables`): tables keyed by job id
    re-keyed to job numbers, ``"workload"`` tables built from the measured rates by
    :func:`~hetsched.online.sides.online_packing` /
    :func:`~hetsched.online.sides.online_sensitivity`."""

    def build(name: str) -> Any:
        if name == "packing":
            return online_packing(active, scale_factors, T, sides, reference, rows, gpu_types)
        U = online_sensitivity(active, T, sides, reference, rows, gpu_types)
        return PlacementSensitivity(pd.DataFrame(U, index=active, columns=list(gpu_types)))

    return policy.bind_tables(TableBinding(ids=ids, build=build))


class JobTables:
    """The per-job tables of the round scheduler's policy, as the round step uses them.

    Parameters
    ----------
    policy : Policy or None
        The policy a :class:`~hetsched.rounds.policy_scheduler.PolicyScheduler` runs (None
        for any other round scheduler: no tables).
    learn : bool
        Whether reports update the estimates (refused for a fixed table, see
        :func:`check_learnable`).

    Raises
    ------
    ValidationError
        ``learn=True`` with a fixed table; Sia with a per-job ``restart_penalty`` vector.
    """

    def __init__(self, policy: Policy | None, *, learn: bool) -> None:
        self.policy = policy
        #: The policy has tables to bind each round.
        self.binds = has_job_tables(policy)
        #: The policy reads spread (unconsolidated) rates.
        self.sensitive = policy is not None and "placement_sensitivity" in policy.bound_tables()
        if learn or np.ndim(getattr(policy, "restart_penalty", 0.0)) != 0:
            check_learnable(policy)

    def applies(self, state: Any) -> bool:
        """Whether :meth:`bind` binds anything into ``state`` (a ``PolicyState`` of a policy
        with tables)."""
        return self.binds and isinstance(state, PolicyState)

    def bind(self, state: Any, *, ids: np.ndarray, active: np.ndarray, scale_factors: np.ndarray, T: np.ndarray,
             sides: SideRates, reference: ThroughputCatalogue | None, rows: np.ndarray,
             gpu_types: Sequence[str]) -> None:
        """Bind the policy's tables in ``state`` (a ``PolicyState``; anything else is left as
        it is) to the ``active`` jobs and their estimates ``T``, every round: a function of
        the stored data only, so a reopened store binds the same (the stored state holds no
        policy)."""
        if not self.applies(state):
            return
        state.policy = bind_online(self.policy, ids=ids, active=active, scale_factors=scale_factors, T=T,
                                   sides=sides, reference=reference, rows=rows, gpu_types=gpu_types)
