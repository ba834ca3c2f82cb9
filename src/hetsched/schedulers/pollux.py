r"""Pollux (Qiao et al., OSDI'21) as a round scheduler for adaptive jobs.

Each round Pollux gives every job a number of GPUs (and, inside the job, the batch size that
maximises its goodput there). Its objective (§4.2, and its artifact's ``pollux`` policy) is
the power mean of the jobs' *speedups*

.. math::  \text{FITNESS}_p(A) = \Big(\frac1J \sum_j (\,r_j\,s_j(A_j) + \epsilon)^p\Big)^{1/p},
           \qquad s_j(a) = \frac{\text{GOODPUT}_j(a)}{\text{GOODPUT}_j(a_\text{fair})}\cdot\frac{H}{G},

with :math:`p = -1`, :math:`\epsilon = 10^{-3}`, :math:`a_\text{fair}` the job's even share
of the :math:`G` GPUs on one node, :math:`H/G` the node share of a GPU (:math:`H` servers),
and the restart discount :math:`r_j = \max(\text{age}_j - \text{restarts}_j\,\delta, 0) /
(\text{age}_j + \delta)` (:math:`\delta` = 30 s) on every allocation other than the one the
job holds. An unallocated job has speedup 0. Pollux is heterogeneity-unaware: one goodput
model per job, fitted to its measurements on whatever GPUs it ran; its speedup does not
depend on the GPU type.

Search. Pollux's artifact searches allocation matrices with a genetic algorithm (NSGA-II,
population 100, 100 generations, every 60 s round). Here the same objective is searched over
Sia's configuration set (one node, or whole nodes; see
:mod:`hetsched.schedulers.adaptive_base`) by ``search="exact"`` (an integer program: the
objective is separable over jobs, so its optimum is the best fitness) or ``search="genetic"``
(the genetic search on the same space). The exact search is never worse than the genetic one
on the same round (``benchmarks/pollux_search.py``). Differences from the artifact are listed
in ``docs/adaptive.md``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..adaptive.search import SearchProblem, exact_search, genetic_search
from ..rounds.protocol import RoundRows, RoundView
from ..validation import check_choice, check_int, check_real
from .adaptive_base import (
    AdaptiveRounds,
    AdaptiveState,
    adaptive_progress,
    fair_replicas,
    held_configs,
    prepare_state,
    restart_factor,
    rows_for_choice,
)

__all__ = ["Pollux"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Pollux(AdaptiveRounds):
    """Pollux's co-adaptive scheduling (see the module docstring).

    Parameters
    ----------
    p : float, default -1
        Exponent of the power mean (more negative: fairer).
    restart_delay : float, default 30
        Seconds of the restart discount (:math:`\\delta`).
    search : {"exact", "genetic"}, default "exact"
        How the allocation is searched.
    seed : int, default 0
        Seed of the genetic search.
    population, generations : int, default 100, 100
        Genetic search size (Pollux's).
    max_gpus_per_job : int, default 64
        Largest allocation.
    time_limit : float, optional
        Seconds for the exact search per round (its best allocation so far is used).

    Examples
    --------
    >>> import hetsched as hs
    >>> from hetsched.schedulers.pollux import Pollux
    >>> Pollux(search="genetic", seed=1).search
    'genetic'
    """

    name: ClassVar[str] = "pollux"
    p: float = -1.0
    restart_delay: float = 30.0
    search: str = "exact"
    seed: int = 0
    population: int = 100
    generations: int = 100
    max_gpus_per_job: int = 64
    time_limit: float | None = None

    def __post_init__(self) -> None:
        check_real(self.p, "p")
        check_real(self.restart_delay, "restart_delay", low=0.0)
        check_choice(self.search, "search", ("exact", "genetic"))
        check_int(self.seed, "seed", low=0)
        check_int(self.population, "population", low=2)
        check_int(self.generations, "generations", low=1)
        check_int(self.max_gpus_per_job, "max_gpus_per_job", low=1)
        check_real(self.time_limit, "time_limit", low=0.0, allow_none=True)

    def speedups(self, view: RoundView, state: AdaptiveState) -> tuple[np.ndarray, np.ndarray]:
        """``(value, batch)``: each active job's discounted, scaled speedup and best batch on
        every configuration (rows: active jobs; columns: the configuration set)."""
        cs = state.configs
        beliefs = state.beliefs
        n, C = view.n_jobs, cs.n_configs
        G = int(view.capacities.sum())
        topo = view.cluster.topology
        H = int(topo.n_servers) if topo is not None else max(1, G // 8)
        fair = fair_replicas(G, n)
        value = np.zeros((n, C))
        batch = np.zeros((n, C), np.int64)
        jobs = view.jobs.tolist()
        base = np.full(n, np.nan)
        for k in range(len(view.gpu_types)):
            cols = np.flatnonzero(cs.type_index == k)
            if not cols.size:
                continue
            good, b, known = beliefs.table(jobs, k, cs.nodes[cols], cs.gpus[cols])
            K = min(fair, int(cs.gpus[cols].max()))
            fair_good = beliefs.table(jobs, k, np.array([beliefs.progress.nodes_for(k, K)]), np.array([K]))[0][:, 0]
            for i, j in enumerate(jobs):
                if not known[i]:     # nothing reported yet: linear speedup (Pollux's prior)
                    value[i, cols] = cs.gpus[cols] / fair
                    batch[i, cols] = [beliefs.initial_batch(j, g, view.gpu_types[k]) for g in cs.gpus[cols].tolist()]
                    continue
                if not np.isfinite(base[i]) and beliefs.progress.has_type(j, k):
                    # its fair share's goodput; where that share cannot run it, its smallest runnable one
                    row = good[i]
                    base[i] = fair_good[i] if fair_good[i] > 0 else (float(row[row > 0][0]) if (row > 0).any() else 0.0)
                value[i, cols] = good[i] / base[i] if np.isfinite(base[i]) and base[i] > 0 else 0.0
                batch[i, cols] = b[i]
        value *= H / max(G, 1)
        # restart discount on every allocation but the one held
        age = view.now - view.arrival
        restarts = np.array([state.restarts.get(j, 0) for j in view.jobs.tolist()])
        factor = restart_factor(age, restarts, self.restart_delay)
        held = held_configs(view, state)
        # a first start is not a restart: a job that never ran keeps its full value (see docs/adaptive.md)
        factor = np.where([j in state.ever_ran for j in view.jobs.tolist()], factor, 1.0)
        disc = np.repeat(factor[:, None], C, axis=1)
        rows = np.flatnonzero(held >= 0)
        disc[rows, held[rows]] = 1.0
        return value * disc, batch

    def plan_round(self, view: RoundView, state: AdaptiveState) -> RoundRows:
        """Search the allocation with the best fitness; each job at its best batch."""
        t0 = time.perf_counter()
        adaptive_progress(view, "Pollux")
        prepare_state(state, view, per_type=False, seed_single_gpu=False, max_gpus=self.max_gpus_per_job)
        value, batch = self.speedups(view, state)
        cs = state.configs
        allowed = value > 0
        prob = SearchProblem(value=value, allowed=allowed, config_type=cs.type_index.astype(np.int64),
                             config_gpus=cs.gpus.astype(np.int64), capacities=view.capacities.astype(np.int64),
                             p=self.p)
        held = held_configs(view, state)
        initial = np.where((held >= 0) & allowed[np.arange(view.n_jobs), np.maximum(held, 0)], held, -1)
        t1 = time.perf_counter()
        if self.search == "exact":
            res = exact_search(prob, time_limit=self.time_limit,
                               incumbent=initial if prob.feasible(initial) else None)
            if res.status not in ("optimal", "time_limit"):
                log.warning("round %d: Pollux's exact search ended %s (%s); using the genetic search",
                            view.round_index, res.status, res.info.get("message", ""))
                res = genetic_search(prob, seed=self.seed + view.round_index, initial=initial)
        else:
            res = genetic_search(prob, seed=self.seed + view.round_index, population=self.population,
                                 generations=self.generations, initial=initial)
        solve_s = time.perf_counter() - t1
        choice = np.asarray(res.choice, dtype=np.int64)
        idx = np.arange(view.n_jobs)
        c = np.maximum(choice, 0)
        b = np.where(choice >= 0, batch[idx, c], 0)
        rate = np.where(choice >= 0, value[idx, c], 0.0)
        info = {"solved": True, "solve_ok": res.status in ("optimal", "time_limit", "feasible"),
                "solve_status": res.status, "solve_s": solve_s, "solve_jobs": view.n_jobs,
                "plan_s": time.perf_counter() - t0, "fitness": float(res.fitness)}
        return rows_for_choice(view, state, choice, b, rate, info)

    def params(self) -> dict[str, Any]:
        """The parameters (for result labels)."""
        return {"p": self.p, "restart_delay": self.restart_delay, "search": self.search, "seed": self.seed,
                "population": self.population, "generations": self.generations,
                "max_gpus_per_job": self.max_gpus_per_job, "time_limit": self.time_limit}
