"""Policies, one per module, each a small class with ``formulate()`` (or ``solve()``).

A policy registers itself where it is defined (``@register_policy`` on its class). Importing
this package imports every module in it (found with :func:`pkgutil.iter_modules`), so a new
policy needs nothing but its module file: :func:`make_policy`, :func:`list_policies`,
``hetsched.policies`` and the CLI see it from there.
"""

from __future__ import annotations

import importlib
import pkgutil

from .base import (
    Policy,
    PolicyOutcome,
    list_policies,
    make_policy,
    policy_parameters,
    register_policy,
    registered_policies,
)

__all__ = ["Policy", "PolicyOutcome", "list_policies", "make_policy", "policy_parameters", "register_policy",
           "registered_policies"]


def _import_modules() -> None:
    """Import every module of this package (each policy module registers its policies)."""
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")


_import_modules()
