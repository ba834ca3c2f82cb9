"""The hard-instance family of the scale benchmarks (scale issue, part 3): instances drawn
the way a user's cluster looks rather than the way our generators draw them.

Every instance has, together:

* weights: a fifth of the jobs weight 5, the rest 1;
* gang sizes 1, 2, 4 and 8 mixed (60 / 20 / 15 / 5 %), up to the largest server (8 GPUs);
* throughputs that follow a per-type speed trend (1x to 10x across the types, log-spaced,
  in a random order) times independent per-job log-normal noise (sigma 0.5): every job is
  distinct, nothing merges into classes;
* GPU counts split unevenly over the types: a Dirichlet(0.5) split of half the total GPU
  demand, at least 1 GPU per type, so that some types hold only a handful of GPUs (and some
  fewer than one server: a gang of 8 cannot run there).

``hard_instance(n, m, seed)`` returns ``(JobSet, Cluster)``; the scale benchmarks run it next
to the older generators (``benchmarks/scale_targets.py``, cases ``*_hard``).
"""

from __future__ import annotations

import numpy as np

import hetsched as hs

GANGS = np.array([1, 2, 4, 8])
GANG_P = np.array([0.60, 0.20, 0.15, 0.05])
HEAVY_SHARE, HEAVY_WEIGHT = 0.2, 5.0


def hard_instance(n: int, m: int, seed: int, *, entities: int = 0) -> tuple[hs.JobSet, hs.Cluster]:
    """``n`` jobs on ``m`` GPU types drawn as the module docstring says (``entities`` > 0:
    each job also belongs to one of that many entities, for hierarchical fairness)."""
    if n < 1 or m < 1:
        raise ValueError(f"n and m must be >= 1; got n={n}, m={m}")
    rng = np.random.default_rng([seed, n, m, 29])
    types = [f"g{k:02d}" for k in range(m)]
    trend = np.exp(rng.permutation(np.linspace(0.0, np.log(10.0), m)))
    T = trend[None, :] * np.exp(rng.normal(0.0, 0.5, (n, m)))
    gangs = rng.choice(GANGS, n, p=GANG_P)
    weights = np.where(rng.random(n) < HEAVY_SHARE, HEAVY_WEIGHT, 1.0)
    share = rng.dirichlet(np.full(m, 0.5))
    counts = np.maximum(1, np.floor(share * gangs.sum() / 2)).astype(int)
    kw = {"entities": rng.choice([f"e{i}" for i in range(entities)], n)} if entities else {}
    jobs = hs.JobSet(T, gpu_types=types, scale_factors=gangs, weights=weights, **kw)
    return jobs, hs.Cluster(dict(zip(types, counts.tolist())))


def with_progress(jobs: hs.JobSet, seed: int) -> hs.JobSet:
    """The same jobs with the fields min makespan and finish-time fairness need: steps
    remaining uniform in [1e3, 1e6] and time since start uniform in [0, 3600] s (seeded by
    ``seed`` and the number of jobs)."""
    n = jobs.n_jobs
    rng = np.random.default_rng([seed, n])
    return hs.JobSet(jobs.throughputs, gpu_types=jobs.gpu_types, scale_factors=jobs.scale_factors,
                     weights=jobs.weights, steps_remaining=rng.uniform(1e3, 1e6, n),
                     time_since_start=rng.uniform(0.0, 3600.0, n))
