"""One name space for everything a driver can run: the registered allocation policies
(``hetsched.list_policies()``) and the round schedulers of this package.

:func:`make_scheduler` is what the command line (``simulate --policy NAME``, ``sweep
--policies``) and :func:`hetsched.simulate` with a name use; :func:`list_schedulers` lists
every name. A round scheduler's parameters are its constructor's keywords.

>>> from hetsched.schedulers.names import list_schedulers, make_scheduler
>>> {"pollux", "sia_adaptive", "tiresias", "max_min_fairness"} <= set(list_schedulers())
True
>>> make_scheduler("pollux", search="genetic").search
'genetic'
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ..errors import UnknownPolicyError, ValidationError
from ..formulations.base import list_policies, make_policy
from ..hived import HiveD, QuotaScheduler, TenantPolicy
from .antman import AntMan
from .gandiva import GandivaIntrospective
from .muri import Muri
from .optimus import Optimus
from .pollux import Pollux
from .sia_adaptive import AdaptiveSia
from .synergy import Synergy
from .themis import Themis
from .tiresias import Tiresias

__all__ = ["ROUND_SCHEDULERS", "list_schedulers", "make_scheduler"]

#: Round schedulers by name: what builds each (keywords are its parameters).
ROUND_SCHEDULERS: dict[str, Callable[..., Any]] = {
    "tiresias": Tiresias,
    "pollux": Pollux,
    "sia_adaptive": AdaptiveSia,
    "optimus": Optimus,
    "hived": HiveD,
    "hived_quota": QuotaScheduler,
    "hived_policy": TenantPolicy,
    "muri": Muri,
    "gandiva": GandivaIntrospective,
    "synergy": Synergy,
    "antman": AntMan,
    "themis": Themis,
}


def list_schedulers() -> list[str]:
    """Every name :func:`make_scheduler` accepts: policies and round schedulers, sorted."""
    return sorted(set(list_policies()) | set(ROUND_SCHEDULERS))


def make_scheduler(name: str, **params: Any) -> Any:
    """The policy or round scheduler called ``name`` with ``params``.

    Raises
    ------
    UnknownPolicyError
        ``name`` is neither a policy nor a round scheduler (the message lists both).
    ValidationError
        A parameter the scheduler does not have, or a value its rule rejects.
    """
    if not isinstance(name, str):
        raise ValidationError(f"`name` must be a scheduler name (str); got {type(name).__name__}.")
    if name in ROUND_SCHEDULERS:
        cls = ROUND_SCHEDULERS[name]
        known = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else None
        unknown = sorted(set(params) - known) if known is not None else []
        if unknown:
            raise ValidationError(f"scheduler {name!r} has no parameter {unknown[0]!r}; its parameters: {sorted(known)}.")
        try:
            return cls(**params)
        except TypeError as exc:
            raise ValidationError(f"scheduler {name!r}: {exc}.") from None
    try:
        return make_policy(name, **params)
    except UnknownPolicyError:
        raise UnknownPolicyError(f"{name!r} is not a known policy or scheduler; known: {list_schedulers()}.") from None
