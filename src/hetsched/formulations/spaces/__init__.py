"""Allocation spaces beyond one variable per (job, type): space sharing (pairs of jobs on one
gang, :mod:`.packing`) and placement sensitivity (consolidated and unconsolidated
variables, :mod:`.placement_sensitivity`), combined by :mod:`.space`; :mod:`.kinds` names
the variable kinds they share.
"""

from __future__ import annotations

from .packing import Packing
from .placement_sensitivity import PlacementSensitivity
from .space import AllocationSpace, SpaceOptions

__all__ = ["AllocationSpace", "Packing", "PlacementSensitivity", "SpaceOptions"]
