"""Cost terms of the placement flow network and their one conversion to integers.

Every arc cost of the network is a sum of the named terms below, each a non-negative
weight in *cost units per GPU*. The min-cost-flow solvers need integers, so float costs
are turned into integers in exactly one place, :func:`integer_costs`.

Terms (per GPU of the plan)
---------------------------
``unscheduled``
    Leaving a GPU of a job's request unplaced this round. Large, so that every GPU that
    can be placed is placed.
``waiting``
    Added to ``unscheduled`` per round (or whatever unit ``waiting`` is given in) the job
    has already waited: ``unscheduled + waiting * waited_j``. Quincy's guarantee of
    progress: the longer a job waits, the more it costs to leave it out, so under
    overload old jobs win GPUs from new ones.
``preemption``
    Added to ``unscheduled`` for a job that ran last round on its type: stopping a running
    job costs more than not starting a new one (Firmament's preemption cost).
``plan_order``
    Added to ``unscheduled``, from ``plan_order`` for the first job of the plan down to 0
    for the last: a tie-break in plan order. Without it the flow, which is indifferent
    between equal jobs, cuts many of them a little (measured: 539 partly served jobs at
    100k GPUs and 130 % load, 17 with it) and the read-back must repair each. Keep it
    below ``fragmentation / G`` so that it only breaks ties.
``continuation``
    Keeping a GPU the job held last round (Firmament's continuation cost; usually 0, the
    cheapest path in the network).
``migration``
    Added to every *other* path of a job that ran last round (same GPU type): moving a
    running job costs a checkpoint/restore.
``spread``
    Consolidation term: a gang routed through the "anywhere of its type" aggregator, i.e.
    one that may end up on several servers. Whole-server paths do not pay it.
``network``
    Network-awareness term (CASSINI, NSDI'24, §3: keep communication-heavy jobs off shared
    links): added to the spread and rack paths of a gang of two or more GPUs, times the job's
    communication intensity in [0, 1] (``place(..., comm_intensity=...)``). Where whole
    servers are scarce, the gangs that communicate most get them and the others are spread.
    Default 0 (off). Keep ``spread + network`` below ``unscheduled`` so that no job is left
    out to avoid spreading it.
``fragmentation``
    Packing term, *per job*: a gang of ``s`` GPUs placed whole on a server with ``c``
    usable GPUs pays ``fragmentation * (c - s) / G`` per GPU (``G`` the largest server
    of the type), so jobs prefer the tightest server that holds them whole (best fit).
    It is a job-level preference (depends on the gang's size), never a per-GPU discount
    for fuller servers: that discount scatters multi-GPU jobs over the leftover GPUs of
    fuller servers at low load.

With ``spread > fragmentation`` a gang always prefers a whole server that fits over
being spread; with ``unscheduled > spread + migration + fragmentation`` every placeable GPU
is placed. The unscheduled cost of job ``j`` (position ``i`` of ``n`` in the plan) is::

    unscheduled + waiting * waited_j + preemption * ran_j + plan_order * (1 - i / n)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, fields

import numpy as np

from ..errors import ValidationError
from ..validation import check_nonneg

__all__ = ["COST_SCALE", "PlacementCosts", "integer_costs"]

log = logging.getLogger(__name__)

#: Integer cost units per float cost unit (the one scaling of float weights to integers).
COST_SCALE = 1000


@dataclass(frozen=True)
class PlacementCosts:
    """Weights of the placement cost terms (cost units per GPU; all non-negative).

    Parameters
    ----------
    unscheduled : float, default 1000.0
        Per GPU of a request left unplaced this round.
    waiting : float, default 100.0
        Added to ``unscheduled`` per unit of the job's waiting time.
    preemption : float, default 20.0
        Added to ``unscheduled`` for a job that ran last round on its type.
    plan_order : float, default 0.4
        Tie-break: added to ``unscheduled``, linearly from this value (first job) to 0.
    continuation : float, default 0.0
        Per GPU kept where the job ran last round.
    migration : float, default 50.0
        Added per GPU on any other path of a job that ran last round on the same type.
    spread : float, default 10.0
        Per GPU of a gang routed where it may be split over servers.
    fragmentation : float, default 4.0
        Per GPU, times the share of the server's usable GPUs the gang leaves unused.
    network : float, default 0.0
        Per GPU of a gang routed where it may be split over servers, times the job's
        communication intensity.

    Examples
    --------
    >>> PlacementCosts(migration=0.0).migration
    0.0
    >>> PlacementCosts(spread=-1)
    Traceback (most recent call last):
    ...
    hetsched.errors.ValidationError: `costs.spread` must be a finite number >= 0; got -1.
    """

    unscheduled: float = 1000.0
    waiting: float = 100.0
    preemption: float = 20.0
    plan_order: float = 0.4
    continuation: float = 0.0
    migration: float = 50.0
    spread: float = 10.0
    fragmentation: float = 4.0
    network: float = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):
            object.__setattr__(self, f.name, check_nonneg(getattr(self, f.name), f"costs.{f.name}"))
        if self.unscheduled <= self.spread + self.network + self.migration + self.fragmentation:
            log.warning(
                "placement costs: unscheduled (%g) <= spread + network + migration + fragmentation (%g); "
                "some placeable GPUs may be left unscheduled",
                self.unscheduled,
                self.spread + self.network + self.migration + self.fragmentation,
            )


def integer_costs(costs: np.ndarray, *, scale: int = COST_SCALE) -> np.ndarray:
    """Round float arc costs (cost units) to int64 solver costs: the only float->int step.

    Parameters
    ----------
    costs : ndarray of float
        Arc costs in cost units.
    scale : int, default :data:`COST_SCALE`
        Integer units per cost unit.

    Returns
    -------
    ndarray of int64

    Raises
    ------
    ValidationError
        If a cost is not finite or too large to sum safely in 63 bits.
    """
    costs = np.asarray(costs, dtype=np.float64)
    if costs.size and not np.all(np.isfinite(costs)):
        raise ValidationError("arc costs must be finite; got inf or NaN (check `waiting` and `costs`).")
    scaled = np.rint(costs * scale)
    if scaled.size and np.max(np.abs(scaled)) > 2.0**40:
        raise ValidationError(
            f"arc costs must stay below {2.0**40 / scale:.3g} cost units; got "
            f"{np.max(np.abs(costs)):.3g} (lower `costs.waiting` or the waiting times)."
        )
    return scaled.astype(np.int64)
