"""Per-job tables of a policy, bound to the way a driver numbers its jobs.

Some policies carry tables keyed by job id: a
:class:`~hetsched.formulations.spaces.packing.Packing` (pair throughputs), a
:class:`~hetsched.formulations.spaces.placement_sensitivity.PlacementSensitivity`
(unconsolidated throughputs) and Sia's ``goodput`` table. The round engine solves over JobSets
whose ids are *job numbers* (positions in arrival order), so before a round such a policy is
re-bound: tables keyed by the caller's ids are re-keyed to numbers, and a table given as
``"workload"`` is built from what the driver knows (a simulated workload's catalogue, or what
an online scheduler has measured).

That is one capability, declared by each policy that has tables
(:attr:`~hetsched.formulations.base.Policy.job_tables` and
:meth:`~hetsched.formulations.base.Policy.bind_tables`); drivers describe their jobs with one
:class:`TableBinding` and never look inside the policy.

Examples
--------
>>> import numpy as np
>>> import hetsched as hs
>>> b = TableBinding(ids=np.array(["a", "b"], dtype=object))
>>> pol = hs.policies.Fifo()
>>> pol.job_tables, pol.bind_tables(b) is pol
((), True)
>>> hs.policies.Sia.job_tables
('goodput',)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError

__all__ = ["WORKLOAD", "TableBinding", "job_numbers"]

#: The value of a table parameter that asks the driver to build the table from its workload.
WORKLOAD = "workload"


@dataclass(frozen=True, eq=False)
class TableBinding:
    """How a driver numbers its jobs, and how it builds tables asked for as ``"workload"``.

    Parameters
    ----------
    ids : ndarray, optional
        The caller's id of each job number (``ids[j]`` is job ``j``'s id). Tables keyed by
        these ids are re-keyed to the numbers; None leaves keyed tables as they are.
    catalogue : ThroughputCatalogue, optional
        The throughput catalogue the jobs were sampled from (a generated workload).
    catalogue_rows : ndarray of int, optional
        The catalogue row of each job number (with ``catalogue``).
    build : callable, optional
        ``build(name) -> table`` for a table parameter ``name`` given as ``"workload"``, keyed
        by job number (the online scheduler builds them from measured rates). Takes
        precedence over ``catalogue``.
    """

    ids: np.ndarray | None = None
    catalogue: Any = None
    catalogue_rows: np.ndarray | None = None
    build: Callable[[str], Any] | None = None

    def workload_table(self, name: str, from_catalogue: Callable[[Any, np.ndarray, np.ndarray], Any]) -> Any:
        """The table for parameter ``name`` given as ``"workload"``.

        ``from_catalogue(catalogue, rows, numbers)`` builds it from the catalogue when no
        ``build`` is given.

        Raises
        ------
        ValidationError
            Neither ``build`` nor a catalogue with rows is available.
        """
        if self.build is not None:
            return self.build(name)
        if self.catalogue is None or self.catalogue_rows is None:
            raise ValidationError(
                f"`{name}='workload'` needs a workload sampled from a throughput catalogue (a generated "
                "workload, or a Trace with `catalogue` and `catalogue_rows`); this workload has none.")
        rows = np.asarray(self.catalogue_rows, dtype=np.int64)
        return from_catalogue(self.catalogue, rows, np.arange(len(rows), dtype=np.int64))


def job_numbers(index: pd.Index, ids: np.ndarray) -> pd.Index:
    """Job numbers of the ids in ``index`` (``-1 - i`` for the i-th id that is not in ``ids``).

    Examples
    --------
    >>> job_numbers(pd.Index(["b", "x", "a"]), np.array(["a", "b"], dtype=object)).tolist()
    [1, -2, 0]
    """
    pos = pd.Index(ids).get_indexer(index)
    return pd.Index(np.where(pos >= 0, pos, -1 - np.arange(len(index))))
