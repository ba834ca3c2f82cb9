"""Options and result record of the structured solver (:func:`.solver.solve_separable`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ['StructuredOptions', 'StructuredResult']

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StructuredOptions:
    """Tuning of the structured solver (defaults chosen by measurement, docs/scaling.md).

    Attributes
    ----------
    gap_tol : float
        Relative gap between the certified upper bound and the allocation's value at which
        the solution is accepted as optimal.
    margin : float
        Relative price margin within which a job counts as tied (ambiguous) when the
        master is first built from sampled prices.
    sample_factor : int
        The warm start solves a random 1/sample_factor of the jobs.
    base_size : int
        Problems with at most this many jobs are solved as one LP (no warm start).
    max_rounds : int
        Most master solves before giving up (the caller then falls back to a general LP).
    coarse_gap, coarse_rounds, floor_coarse_rounds : float, int, int
        While the certified gap exceeds ``coarse_gap``, the first ``coarse_rounds`` (level
        mode) or ``floor_coarse_rounds`` (floor mode) master solves only re-assign the fixed
        jobs to the new prices instead of moving violators into the master.
    max_add : int
        Most jobs moved into the master per round (or n/50 if larger): the most violated.
    seed : int
        Seed of the job sample (results are deterministic for a seed).
    init : str
        Where the first prices come from (the candidates of docs/scaling.md): "sample"
        (default: the same solver on a random sample, recursively), "ipx" (HiGHS interior
        point without crossover on the whole LP), "pdlp" (HiGHS PDLP on the whole LP),
        "lagrangian" (proximal cutting planes on the capacity prices, level mode),
        "hybrid" (the sample's prices refined by those cutting planes, level mode),
        "uniform" (prices 1/C: column generation from a cold start, level mode), "none" (no
        prices: all jobs in the master, i.e. the plain LP).
    lagrangian_iters : int
        Most cutting-plane iterations of ``init="lagrangian"`` / ``"hybrid"``.
    lagrangian_tol : float
        They stop when the cutting-plane model is within this (relative) of the best
        dual value found.
    """

    gap_tol: float = 1e-9
    margin: float = 0.02
    bin_width: float = 0.005
    group_ratio: float = 1.15
    column_ratio: float = 1.25
    max_add: int = 2_000
    coarse_gap: float = 1e-3
    coarse_rounds: int = 6
    floor_coarse_rounds: int = 2
    sample_factor: int = 8
    base_size: int = 1_000
    max_rounds: int = 40
    seed: int = 0
    init: str = "sample"
    lagrangian_iters: int = 300
    lagrangian_tol: float = 1e-7


@dataclass
class StructuredResult:
    """Outcome of :func:`solve_separable`."""

    status: str
    message: str
    X: np.ndarray | None = None
    t: float = float("nan")
    objective: float = float("nan")
    lower: float = float("nan")
    upper: float = float("nan")
    lam: np.ndarray | None = None
    y: np.ndarray | None = None
    z: np.ndarray | None = None
    rounds: int = 0
    n_master_jobs: int = 0
    master_rows: np.ndarray | None = None
    master_s: float = 0.0
    pricing_s: float = 0.0
    warm_s: float = 0.0
    warm_info: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)

    @property
    def gap(self) -> float:
        """Certified relative gap ``(upper - lower) / max(|lower|, tiny)``."""
        return (self.upper - self.lower) / max(abs(self.lower), 1e-300)
