"""Sia (SOSP'23): goodput-driven elastic allocation as one integer program, with its
configuration sets (which GPU counts of which type a job may get, and its goodput there).

* :mod:`.policy` — the :class:`Sia` policy (ILP, column reduction, Lagrangian bound);
* :mod:`.configurations` — :class:`ConfigurationSet` and the goodput / scaling models.
"""

from __future__ import annotations

from .configurations import ConfigurationSet, configuration_set
from .policy import LagrangianBound, Sia, SiaProblem, lagrangian_bound, polish

__all__ = ["ConfigurationSet", "LagrangianBound", "Sia", "SiaProblem", "configuration_set", "lagrangian_bound",
           "polish"]
