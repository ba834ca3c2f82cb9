r"""Exact structured path for the block-angular allocation LPs.

Every level LP (max-min fairness, min makespan, each finish-time-fairness step, and
their second stages) and the throughput LP have one small block of rows per job and only
m capacity rows that couple the jobs. :func:`solve_separable` exploits that: closed-form
per-job pricing, a small restricted master over the jobs near a tie plus aggregated
columns for all others, and a dual certificate that proves the result optimal for the
whole LP (see :mod:`hetsched.solvers.structured.solver` and ``docs/scaling.md``).

The backend ``solver="structured"`` registers itself (:mod:`.backend`):

>>> import hetsched as hs, hetsched.solvers.structured
>>> jobs = hs.JobSet([[2.0, 1.0], [1.0, 1.0]], gpu_types=["fast", "slow"])
>>> res = hs.solve("max_min_fairness", jobs, hs.Cluster({"fast": 1, "slow": 1}), solver="structured")
>>> res.status, round(res.objective, 6)
('optimal', 1.0)
"""

from __future__ import annotations

from .backend import StructuredBackend, structured_options
from .problem import SeparableProblem, recognize
from .solver import StructuredOptions, StructuredResult, solve_separable

__all__ = [
    "SeparableProblem",
    "StructuredBackend",
    "StructuredOptions",
    "StructuredResult",
    "recognize",
    "solve_separable",
    "structured_options",
]
