r"""Sia (Jayaram Subramanya et al., SOSP'23) as its paper runs it: goodput models per GPU
type, learned as jobs run, feeding Sia's configuration ILP every round.

The ILP is hetsched's ``sia`` policy (:class:`hetsched.policies.Sia`, ``docs/sia.md``); this
scheduler is the model and the loop around it (§3.2-3.4):

* **Bootstrap.** A new job is profiled on one GPU of every type (the one-GPU rows of its
  profile become measurements), so each type has a throughput model from the start.
* **Per-type models refined online.** After each round the job reports its step and sync
  times on the configuration it ran (and its gradient statistics); the model of that type
  is refitted (Pollux's throughput model, :mod:`hetsched.adaptive.goodput`). A type the job
  has not run on with more than one GPU is projected from the type it has: its multi-GPU
  goodput scaled by the ratio of the two types' one-GPU goodputs.
* **Batch size per configuration**: the goodput of a configuration is at the batch that
  maximises it under the type's model (within the model's batch limits); the job runs at it.
* **Restart factor**: a configuration other than the job's current one keeps
  :math:`r = \max(\text{age} - \text{restarts}\cdot t, 0) / (\text{age} + t)` of its value
  (:math:`t` the model's checkpoint-restore time), passed to the ILP as
  ``restart_penalty = 1 - r``.
* 60 s rounds, :math:`p = -0.5`, :math:`\lambda = 1.1` (Sia's defaults; ``docs/adaptive.md``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from ..api import solve
from ..inputs.jobs import JobSet
from ..policies import Sia
from ..rounds.protocol import RoundRows, RoundView
from ..validation import check_int, check_real
from .adaptive_base import (
    AdaptiveRounds,
    AdaptiveState,
    adaptive_progress,
    prepare_state,
    restart_factor,
    rows_for_choice,
)

__all__ = ["AdaptiveSia"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AdaptiveSia(AdaptiveRounds):
    """Sia with goodput models learned per GPU type (see the module docstring).

    Parameters
    ----------
    fairness_power : float, default -0.5
        Sia's ``p``.
    lambda_unallocated : float, default 1.1
        Sia's cost of leaving a job without GPUs.
    max_gpus_per_job : int, default 64
        Largest configuration.
    mip_gap : float, default 0.01
        Relative gap at which the ILP stops.
    """

    name: ClassVar[str] = "sia_adaptive"
    fairness_power: float = -0.5
    lambda_unallocated: float = 1.1
    max_gpus_per_job: int = 64
    mip_gap: float = 0.01

    def __post_init__(self) -> None:
        check_real(self.fairness_power, "fairness_power")
        check_real(self.lambda_unallocated, "lambda_unallocated", low=0.0)
        check_int(self.max_gpus_per_job, "max_gpus_per_job", low=1)
        check_real(self.mip_gap, "mip_gap", low=0.0)

    def goodputs(self, view: RoundView, state: AdaptiveState) -> tuple[np.ndarray, np.ndarray]:
        """``(goodput, batch)`` of every active job on every configuration, per-type models with
        Sia's projection for types without multi-GPU measurements."""
        cs = state.configs
        beliefs = state.beliefs
        n, C, m = view.n_jobs, cs.n_configs, len(view.gpu_types)
        good = np.zeros((n, C))
        batch = np.zeros((n, C), np.int64)
        jobs = view.jobs.tolist()
        tables = {}
        for k in range(m):
            cols = np.flatnonzero(cs.type_index == k)
            if cols.size:
                tables[k] = (cols, *beliefs.table(jobs, k, cs.nodes[cols], cs.gpus[cols]))
        for i, j in enumerate(jobs):
            per = {k: (g[i], b[i]) for k, (_, g, b, known) in tables.items() if known[i]}
            measured = [k for k in per if beliefs.multi_gpu_measured(j, view.gpu_types[k])]
            ref = max(measured, key=lambda k: len(beliefs.samples.get((j, view.gpu_types[k]), {})), default=None)
            for k, (g, b) in per.items():
                cols = tables[k][0]
                if ref is not None and k not in measured:
                    g = _project(cs, cols, per[ref], view, ref, g)
                good[i, cols] = g
                batch[i, cols] = b
        return good, batch

    def plan_round(self, view: RoundView, state: AdaptiveState) -> RoundRows:
        """Solve Sia's ILP over the learned goodputs; each job at its best batch."""
        t0 = time.perf_counter()
        prog = adaptive_progress(view, "AdaptiveSia")
        prepare_state(state, view, per_type=True, seed_single_gpu=True, max_gpus=self.max_gpus_per_job)
        cs = state.configs
        good, batch = self.goodputs(view, state)
        ids = view.jobs
        labels = pd.MultiIndex.from_tuples(cs.labels(), names=["gpu_type", "gpus"])
        table = pd.DataFrame(good, index=ids, columns=labels)
        current = {}
        for j in ids.tolist():
            cur = state.current.get(j)
            if cur is not None:
                current[j] = (view.gpu_types[cur[0]], int(cur[1]))
        restarts = np.array([state.restarts.get(j, 0) for j in ids.tolist()])
        r = restart_factor(view.now - view.arrival, restarts, prog.restart_seconds[ids])
        young = (view.now - view.arrival) < prog.restart_seconds[ids]
        r = np.where(young, 1.0, r)
        penalty = np.clip(1.0 - r, 0.0, 1.0 - 1e-9)
        usable = good.max(axis=1) > 0
        T = np.zeros((view.n_jobs, len(view.gpu_types)))
        for k in range(len(view.gpu_types)):
            cols = np.flatnonzero(cs.type_index == k)
            if cols.size:
                T[:, k] = good[:, cols].max(axis=1)
        choice = np.full(view.n_jobs, -1, np.int64)
        info: dict[str, Any] = {"solved": True, "solve_jobs": int(usable.sum())}
        if usable.any():
            sel = np.flatnonzero(usable)
            jobs = JobSet(T[sel], gpu_types=view.gpu_types, ids=ids[sel])
            pol = Sia(goodput=table.iloc[sel], current={j: current[j] for j in ids[sel].tolist() if j in current},
                      restart_penalty=penalty[sel], fairness_power=self.fairness_power,
                      lambda_unallocated=self.lambda_unallocated, max_gpus_per_job=self.max_gpus_per_job,
                      mip_gap=self.mip_gap)
            t1 = time.perf_counter()
            res = solve(pol, jobs, view.cluster)
            info.update(solve_s=time.perf_counter() - t1, solve_ok=bool(res.success), solve_status=res.status)
            if res.success:
                conf = res.extra["configurations"]
                pos = {lab: c for c, lab in enumerate(cs.labels())}
                for i, j in zip(sel.tolist(), ids[sel].tolist()):
                    t, g = conf.loc[j, "gpu_type"], conf.loc[j, "gpus"]
                    if t is not None and int(g) > 0:
                        choice[i] = pos[(t, int(g))]
            else:
                log.warning("round %d: Sia's ILP ended %s (%s); nothing runs this round", view.round_index,
                            res.status, res.message)
        idx = np.arange(view.n_jobs)
        c = np.maximum(choice, 0)
        b = np.where(choice >= 0, batch[idx, c], 0)
        rate = np.where(choice >= 0, good[idx, c], 0.0)
        info["plan_s"] = time.perf_counter() - t0
        return rows_for_choice(view, state, choice, b, rate, info)

    def params(self) -> dict[str, Any]:
        """The parameters (for result labels)."""
        return {"fairness_power": self.fairness_power, "lambda_unallocated": self.lambda_unallocated,
                "max_gpus_per_job": self.max_gpus_per_job, "mip_gap": self.mip_gap}


def _project(cs: Any, cols: np.ndarray, ref: tuple[np.ndarray, np.ndarray], view: RoundView, k_ref: int,
             own: np.ndarray) -> np.ndarray:
    """Sia's projection: a type without multi-GPU measurements gets the reference type's
    goodput on the same (GPUs, nodes) scaled by their one-GPU goodput ratio (its own where
    the reference lacks the configuration)."""
    ref_cols = np.flatnonzero(cs.type_index == k_ref)
    ref_good = ref[0]
    one_ref = ref_good[cs.gpus[ref_cols] == 1]
    one_own = own[cs.gpus[cols] == 1]
    if not one_ref.size or not one_own.size or one_ref[0] <= 0:
        return own
    ratio = one_own[0] / one_ref[0]
    by_shape = dict(zip(zip(cs.gpus[ref_cols].tolist(), cs.nodes[ref_cols].tolist()), ref_good.tolist()))
    out = own.copy()
    for i, shape in enumerate(zip(cs.gpus[cols].tolist(), cs.nodes[cols].tolist())):
        if shape[0] > 1 and shape in by_shape:   # same GPUs on the same number of nodes
            out[i] = by_shape[shape] * ratio
    return out
