"""Public namespace of policy classes: ``hetsched.policies.MaxMinFairness(...)`` etc.

Every registered policy class is an attribute here under its class name, taken from the
registry (:func:`registered_policies`), so a policy module with ``@register_policy`` is enough
to appear here; nothing lists the policies a second time. The names are real module
attributes: ``dir()``, ``help()`` and interactive completion (IPython, Jupyter) show them.
Static analyzers that do not run code cannot see them; :func:`__getattr__` makes them read an
unknown name as ``Any`` rather than report an error. Beside the policies: the option objects
of the allocation spaces (:class:`Packing`, :class:`PlacementSensitivity`) and the
:class:`Partitioned` wrapper, which are not policies by name.
"""

from __future__ import annotations

from typing import Any

from .api import Partitioned
from .formulations.base import (
    Policy,
    list_policies,
    make_policy,
    register_policy,
    registered_policies,
)
from .formulations.spaces.packing import Packing
from .formulations.spaces.placement_sensitivity import PlacementSensitivity

_CLASSES: dict[str, type[Policy]] = {cls.__name__: cls for cls in registered_policies().values()}
globals().update(_CLASSES)

__all__ = sorted([*_CLASSES, "Packing", "Partitioned", "PlacementSensitivity", "Policy", "list_policies",
                  "make_policy", "register_policy"])


def __getattr__(name: str) -> Any:
    """A policy class registered after this module was imported, else AttributeError."""
    for cls in registered_policies().values():
        if cls.__name__ == name:
            return cls
    raise AttributeError(f"module 'hetsched.policies' has no attribute {name!r}; policy classes: {sorted(_CLASSES)}.")


def __dir__() -> list[str]:
    return sorted(set(globals()) | {cls.__name__ for cls in registered_policies().values()})
