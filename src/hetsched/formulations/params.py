"""Policy-parameter checks that only policies need; the general rules live in
:mod:`hetsched.validation` (one wording, ``"`name` must be <rule>; got <value>."``).

Examples
--------
>>> check_space_option(None, "packing") is None
True
"""

from __future__ import annotations

from typing import Any

from ..errors import ValidationError
from ..validation import check_bool, check_choice, check_int, check_real, fail, is_real

# Re-exported for code written against this module before hetsched.validation existed.
__all__ = ["check_bool", "check_choice", "check_int", "check_real", "check_space_option", "fail", "is_real"]


def check_space_option(value: Any, name: str) -> Any:
    """``packing`` / ``placement_sensitivity``: None, ``"workload"`` (bound by the simulator), or
    the option object (:class:`~hetsched.formulations.spaces.packing.Packing`,
    :class:`~hetsched.formulations.spaces.placement_sensitivity.PlacementSensitivity`)."""
    if value is None or (isinstance(value, str) and value == "workload"):
        return value
    if name == "packing":
        from .spaces.packing import Packing as cls
    else:
        from .spaces.placement_sensitivity import PlacementSensitivity as cls
    if not isinstance(value, cls):
        raise ValidationError(
            f"`{name}` must be a {cls.__module__}.{cls.__name__}, 'workload' (in hetsched.simulate) or None; "
            f"got {type(value).__name__}."
        )
    return value
