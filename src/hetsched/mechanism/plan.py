"""RoundPlan: what runs where during one round (the planner's output)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["MODES", "RULES", "RoundPlan"]

#: Planning modes: whole gangs for one round, or X applied exactly as fractions.
MODES = ("rounds", "ideal")
#: Priority rules: Gavel's ratio rule (default) and largest-deficit-first.
RULES = ("gavel", "deficit")


@dataclass(frozen=True, eq=False)
class RoundPlan:
    """One round's decision, returned by :func:`plan_round`.

    Attributes
    ----------
    job_ids : ndarray
        Jobs of the allocation the plan was made for, in its row order.
    gpu_types : tuple of str
        Column labels (the allocation's GPU types).
    scale_factors : ndarray of int
        Gang size of each job.
    capacities : ndarray of int
        Whole GPUs of each type in the cluster.
    mode : {"rounds", "ideal"}
        "rounds": whole gangs on one type for the whole round. "ideal": every job receives
        exactly ``X[j, k]`` of the round on each type (fluid; for simulator comparisons).
    rule : {"gavel", "deficit"}
        Priority rule used ("rounds" mode).
    round_seconds : float
        Round length the plan was made for (its lookahead).
    assignment : ndarray of int64, shape (n_jobs,)
        Column of the type each job runs on this round, -1 when it does not run. In
        "ideal" mode, -1 everywhere (see ``time_share``).
    time_share : ndarray, shape (n_jobs, n_gpu_types)
        Fraction of the round each job spends on each type: one-hot rows of ``assignment``
        in "rounds" mode, ``X`` itself in "ideal" mode.
    previous_type : ndarray of int64, shape (n_jobs,)
        Column each job ran on last round (-1: did not run or is new).
    preempted : ndarray of bool
        Ran last round and does not run on the same type this round (stopped or moved).
    migrated : ndarray of bool
        Ran last round and runs on a *different* type this round (subset of ``preempted``).
    new_jobs : int
        Jobs of the allocation that the history did not know (start with no shares).
    dropped_ids : ndarray
        Jobs the history knew that are not in the allocation (dropped from the history).
    message : str
        What happened, in words (dropped jobs, idle GPUs, passes).
    timings : dict
        ``plan_s``: seconds spent in the planner.
    """

    job_ids: np.ndarray
    gpu_types: tuple[str, ...]
    scale_factors: np.ndarray
    capacities: np.ndarray
    mode: str
    rule: str
    round_seconds: float
    assignment: np.ndarray
    time_share: np.ndarray
    previous_type: np.ndarray
    preempted: np.ndarray
    migrated: np.ndarray
    new_jobs: int
    dropped_ids: np.ndarray
    message: str
    timings: dict[str, float] = field(default_factory=dict)
    # The history (version) the plan was made from, aligned to the plan's rows, so that
    # ShareHistory.record() need not align again.
    _base_version: int = -1
    _base: Any = None

    @property
    def n_jobs(self) -> int:
        """Number of jobs in the plan."""
        return int(self.job_ids.shape[0])

    @property
    def running(self) -> np.ndarray:
        """Boolean mask of jobs that run (on some type) this round."""
        if self.mode == "ideal":
            return self.time_share.sum(axis=1) > 0
        return self.assignment >= 0

    @property
    def gpus_used(self) -> np.ndarray:
        """GPUs busy per type (fractional in "ideal" mode: the average over the round)."""
        return (self.time_share * self.scale_factors[:, None]).sum(axis=0)

    @property
    def idle_gpus(self) -> np.ndarray:
        """Capacity minus ``gpus_used`` per type."""
        return self.capacities - self.gpus_used

    @property
    def n_preempted(self) -> int:
        """Number of preempted jobs (see ``preempted``)."""
        return int(self.preempted.sum())

    def jobs_on(self, gpu_type: str) -> np.ndarray:
        """Ids of the jobs that run on ``gpu_type`` this round ("rounds" mode)."""
        k = self.gpu_types.index(gpu_type)
        return self.job_ids[self.assignment == k]

    def to_frame(self) -> pd.DataFrame:
        """One row per job: ``gpu_type`` (None when idle), ``gpus``, ``preempted``, ``migrated``."""
        types = np.array(list(self.gpu_types) + [None], dtype=object)
        run = self.assignment >= 0
        index = pd.Index(self.job_ids, name="job_id")
        return pd.DataFrame(
            {
                "gpu_type": pd.Series(types[self.assignment], index=index, dtype=object),
                "gpus": np.where(run, self.scale_factors, 0),
                "preempted": self.preempted,
                "migrated": self.migrated,
            },
            index=index,
        )

    def __repr__(self) -> str:
        used = ", ".join(f"{t}: {u:g}/{int(c)}" for t, u, c in zip(self.gpu_types, self.gpus_used, self.capacities))
        return (
            f"RoundPlan(mode={self.mode!r}, jobs={self.n_jobs}, running={int(self.running.sum())}, "
            f"gpus={{{used}}}, preempted={self.n_preempted})"
        )
