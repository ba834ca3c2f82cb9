"""Kinds of allocation-space variables (:mod:`~hetsched.formulations.spaces.space`).

Shared by the allocation space and the options that add variables to it
(:mod:`~hetsched.formulations.spaces.packing`, :mod:`~hetsched.formulations.spaces.placement_sensitivity`),
so that neither has to import the other.
"""

from __future__ import annotations

__all__ = ["KIND_NAMES", "PAIR", "SINGLE", "UNCONSOLIDATED"]

#: Variable kinds, in the order of ``AllocationSpace.var_kind`` codes.
KIND_NAMES = ("single", "unconsolidated", "pair")
SINGLE, UNCONSOLIDATED, PAIR = 0, 1, 2
