"""Checks for policy parameters, run by each policy's ``__post_init__``.

Every check raises :class:`~hetsched.errors.ValidationError` with one wording,
``"`name` must be <rule>; got <value>."``, so a bad parameter fails at construction, never
halfway through a solve. Booleans must be real booleans (``numpy.bool_`` too: a string such
as ``"no"`` is truthy and would silently switch an option on); integers must be integers
(``numpy`` integers too, never ``bool``); numbers must be real, finite unless said otherwise,
and in range.

Examples
--------
>>> check_bool(True, "second_stage")
True
>>> check_bool("no", "second_stage")
Traceback (most recent call last):
...
hetsched.errors.ValidationError: `second_stage` must be True or False; got 'no'.
>>> check_int(3, "max_steps", low=1)
3
>>> check_real(0.5, "alpha", low=0.0, high=1.0, low_open=True)
0.5
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..errors import ValidationError, show

__all__ = ["check_bool", "check_choice", "check_int", "check_real", "check_space_option", "fail", "is_real"]


def fail(name: str, rule: str, value: Any) -> ValidationError:
    """The error for parameter ``name`` breaking ``rule`` with ``value`` (to ``raise``)."""
    return ValidationError(f"`{name}` must be {rule}; got {show(value)}.")


def is_real(value: Any) -> bool:
    """Whether ``value`` is a real number (Python or numpy int / float, not bool)."""
    return not isinstance(value, (bool, np.bool_)) and isinstance(value, (int, float, np.integer, np.floating))


def check_bool(value: Any, name: str) -> bool:
    """``value`` as a bool; it must be ``True`` / ``False`` (or ``numpy.bool_``)."""
    if not isinstance(value, (bool, np.bool_)):
        raise fail(name, "True or False", value)
    return bool(value)


def check_int(value: Any, name: str, *, low: int | None = None, allow_none: bool = False,
              rule: str | None = None) -> int | None:
    """``value`` as an int; an integer (not bool) >= ``low``, or None when ``allow_none``."""
    if value is None and allow_none:
        return None
    if rule is None:
        rule = "a positive integer" if low == 1 else ("an integer" if low is None else f"an integer >= {low}")
        if allow_none:
            rule += " or None"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise fail(name, rule, value)
    if low is not None and value < low:
        raise fail(name, rule, value)
    return int(value)


def _range_rule(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    if low is not None and high is not None:
        return f"a number in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    if low is not None:
        return f"a finite number {'>' if low_open else '>='} {low:g}"
    if high is not None:
        return f"a finite number {'<' if high_open else '<='} {high:g}"
    return "a finite number"


def check_real(value: Any, name: str, *, low: float | None = None, high: float | None = None,
               low_open: bool = False, high_open: bool = False, allow_none: bool = False,
               rule: str | None = None) -> float | None:
    """``value`` as a float: a finite real number (not bool) within the bounds given.

    ``low_open`` / ``high_open`` exclude the bound itself. ``rule`` overrides the wording.
    """
    if value is None and allow_none:
        return None
    if rule is None:
        rule = _range_rule(low, high, low_open, high_open) + (" or None" if allow_none else "")
    if not is_real(value) or not math.isfinite(value):
        raise fail(name, rule, value)
    v = float(value)
    if low is not None and (v < low or (low_open and v == low)):
        raise fail(name, rule, value)
    if high is not None and (v > high or (high_open and v == high)):
        raise fail(name, rule, value)
    return v


def check_choice(value: Any, name: str, choices: Iterable[Any]) -> Any:
    """``value`` if it is one of ``choices`` (compared with ``==``, strings only match strings)."""
    options = list(choices)
    if not any(type(value) is type(c) and value == c for c in options):
        listed = ", ".join(repr(c) for c in options)
        raise fail(name, f"one of {listed}", value)
    return value


def check_space_option(value: Any, name: str) -> Any:
    """``packing`` / ``placement_sensitivity``: None, ``"workload"`` (bound by the simulator), or
    the option object (:class:`~hetsched.formulations.packing.Packing`,
    :class:`~hetsched.formulations.placement_sensitivity.PlacementSensitivity`)."""
    if value is None or (isinstance(value, str) and value == "workload"):
        return value
    if name == "packing":
        from .packing import Packing as cls
    else:
        from .placement_sensitivity import PlacementSensitivity as cls
    if not isinstance(value, cls):
        raise ValidationError(
            f"`{name}` must be a {cls.__module__}.{cls.__name__}, 'workload' (in hetsched.simulate) or None; "
            f"got {type(value).__name__}."
        )
    return value
