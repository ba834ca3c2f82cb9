"""Simulation speed on Gavel's standard setup (used by ``benchmarks/simulation_speed.py``
and ``python -m hetsched bench``).

Gavel's setup (OSDI'20 §7.2): 36 V100 + 36 P100 + 36 K80 GPUs, Poisson arrivals at
``load`` jobs/hour, jobs measured in a window of positions (Gavel measures a window of
jobs well after the start), the simulation stops when the window's jobs have finished.
Throughputs come from Gavel's measured table when a path is given, else from the project's
generator.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pandas as pd

from ..inputs.cluster import Cluster
from ..inputs.throughputs import (
    ThroughputCatalogue,
    generate_catalogue,
    load_gavel_throughputs,
)
from ..inputs.trace import generate_workload
from ..policies import MaxMinFairness
from .options import SimOptions
from .simulator import simulate

__all__ = ["GAVEL_CLUSTER", "gavel_catalogue", "speed_run"]

#: Gavel's simulated cluster.
GAVEL_CLUSTER = {"v100": 36, "p100": 36, "k80": 36}

#: Single-GPU jobs (Gavel's "continuous-single" trace) and the Philly multi-GPU mix.
MIXES = {"single": {1: 1.0}, "multi": {1: 0.70, 2: 0.10, 4: 0.15, 8: 0.05}}


def gavel_catalogue(path: str | Path | None = None, *, seed: int = 0,
                    missing: str = "raise") -> tuple[ThroughputCatalogue, str]:
    """Gavel's measured table from ``path`` when it exists (a row some GPU type lacks read as
    ``missing`` says, see :func:`~hetsched.inputs.throughputs.load_gavel_throughputs`), else
    the generated one; and its name."""
    if path is not None and Path(path).is_file():
        return load_gavel_throughputs(path, missing=missing).subset(list(GAVEL_CLUSTER)), "gavel-measured"
    return generate_catalogue(gpu_types=tuple(GAVEL_CLUSTER), seed=seed), "generated"


def speed_run(
    *,
    policy: Any = None,
    load: float,
    window: tuple[int, int] = (500, 1500),
    n_jobs: int | None = None,
    seed: int = 0,
    mix: str = "single",
    placement: bool = False,
    catalogue: ThroughputCatalogue | None = None,
    gpus_per_server: int = 8,
    max_time: float | None = 200 * 24 * 3600.0,
    wall_time_limit: float | None = None,
) -> dict[str, Any]:
    """One timed simulation on Gavel's setup; a flat dict of sizes, timings and metrics.

    Parameters
    ----------
    policy : Policy or str, optional
        Default: heterogeneity-aware max-min fairness.
    load : float
        Arrival rate, jobs/hour.
    window : (int, int)
        Measured job positions.
    n_jobs : int, optional
        Jobs generated (default ``2 * window[1]``, so arrivals go on while the window
        drains, as in Gavel's endless generator).
    mix : {"single", "multi"}
    placement : bool
        Min-cost-flow placement on servers of ``gpus_per_server``.
    """
    pol = policy if policy is not None else MaxMinFairness()
    cat = catalogue if catalogue is not None else gavel_catalogue(None)[0]
    n = int(n_jobs) if n_jobs is not None else 2 * int(window[1])
    tr = generate_workload(n, rate_per_hour=load, seed=seed, catalogue=cat, scale_factor_probs=MIXES[mix])
    cluster = Cluster.from_servers(GAVEL_CLUSTER, gpus_per_server=gpus_per_server) if placement else Cluster(GAVEL_CLUSTER)
    t0 = time.perf_counter()
    opts = SimOptions(window=window, max_time=max_time, wall_time_limit=wall_time_limit, placement=placement,
                      seed=seed, record_runs=False)
    res = simulate(pol, tr, cluster, options=opts)
    wall = time.perf_counter() - t0
    s = res.summary
    admitted = int(res.jobs["start_s"].notna().sum())
    return {
        "policy": res.config["policy"],
        "mix": mix,
        "load": float(load),
        "seed": seed,
        "placement": bool(placement),
        "window": f"{window[0]}-{window[1]}",
        "jobs_started": admitted,
        "status": s["status"],
        "rounds": s["n_rounds"],
        "solves": s["n_solves"],
        "max_active": s["max_active_jobs"],
        "sim_hours": s["simulated_hours"],
        "wall_s": wall,
        "sim_h_per_wall_s": s["simulated_hours"] / wall if wall > 0 else math.nan,
        "rounds_per_s": s["n_rounds"] / wall if wall > 0 else math.nan,
        "policy_s": s["policy_s"],
        "mechanism_s": s["mechanism_s"],
        "placement_s": s["placement_s"],
        "other_s": s["other_s"],
        "ms_per_solve": 1e3 * s["policy_s"] / max(s["n_solves"], 1),
        "avg_jct_hours": s["avg_jct_hours"],
        "p99_jct_hours": s["p99_jct_s"] / 3600 if s["p99_jct_s"] == s["p99_jct_s"] else math.nan,
        "worst_ftf": s["worst_ftf"],
        "utilization": s["utilization"],
        "n_unfinished": s["n_unfinished"],
    }


def speed_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The rows of :func:`speed_run` as a DataFrame, rounded for printing."""
    df = pd.DataFrame(rows)
    return df
