"""Policy-parameter checks, re-exported for code written against this module: the general
rules live in :mod:`hetsched.validation` (one wording, ``"`name` must be <rule>; got
<value>."``), :func:`check_space_option` beside the allocation-space options it checks
(:mod:`hetsched.formulations.spaces.space`)."""

from __future__ import annotations

from ..validation import check_bool, check_choice, check_int, check_real, fail, is_real
from .spaces.space import check_space_option

__all__ = ["check_bool", "check_choice", "check_int", "check_real", "check_space_option", "fail", "is_real"]
