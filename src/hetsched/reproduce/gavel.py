"""Gavel (OSDI'20) Figures 8 and 9: average JCT against input job rate for LAS, aware vs agnostic.

Setup, from Gavel's artifact (``EXPERIMENTS.md``, "Figure 8" and "Figure 9";
``scheduler/scripts/sweeps/run_sweep_continuous.py``): 36 V100 + 36 P100 + 36 K80, Gavel's
measured throughput table, Poisson arrivals at the input job rate, seeds 0, 1, 2, and the
average JCT of the jobs with ids 4000 to 5000 (``-s 4000 -e 5000``: the sweep passes
``jobs_to_complete`` = that id range to ``Scheduler.simulate``, which keeps generating jobs
until all of them have completed, and ``Scheduler.get_average_jct(jobs_to_complete)``
averages their JCTs). Figure 8 uses single-GPU jobs ("continuous-single"), Figure 9 the
Philly multi-GPU mix (``--generate-multi-gpu-jobs``). The policies are ``max_min_fairness``
(LAS, heterogeneity-agnostic) and ``max_min_fairness_perf`` (Gavel's heterogeneity-aware
LAS): here ``MaxMinFairness(heterogeneity_aware=False)`` and ``MaxMinFairness()``, simulated
with ``preset="gavel"``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..inputs.cluster import Cluster
from ..inputs.throughputs import ThroughputCatalogue
from ..policies import MaxMinFairness
from ..sim.bench import GAVEL_CLUSTER, MIXES
from ..sim.sweep import sweep
from .base import ExperimentResult, Settings, published_table

__all__ = ["FIG8", "FIG9", "LAS_POLICIES", "LasSetup", "las_runs", "las_summary", "run_fig8", "run_fig9"]

#: Gavel's measurement window of job ids (EXPERIMENTS.md: ``-s 4000 -e 5000``).
GAVEL_WINDOW = (4000, 5000)
QUICK_WINDOW = (100, 300)
SEEDS = (0, 1, 2)

#: The two policies, labelled as in Gavel's notebook (``continuous_jobs.ipynb``: LAS / Gavel).
LAS_POLICIES = {"aware": MaxMinFairness(), "agnostic": MaxMinFairness(heterogeneity_aware=False)}

#: Gavel's abstract (OSDI'20; https://www.usenix.org/conference/osdi20/presentation/narayanan-deepak).
GAVEL_ABSTRACT = "https://www.usenix.org/conference/osdi20/presentation/narayanan-deepak"


@dataclass(frozen=True)
class LasSetup:
    """One of the two figures: its job mix and the input job rates swept (jobs/hour)."""

    name: str
    mix: str
    loads: tuple[float, ...]
    quick_loads: tuple[float, ...]


#: Gavel sweeps 0-6 jobs/h for Figure 8 (``-a 0.0 -b 6.0 -n 16``) and 0-3 for Figure 9
#: (``-a 0.0 -b 3.0 -n 11``); we take one point on the flat part and more around the knee
#: (low rates cost the most: the window's 5,000 arrivals span 5000 / rate hours), so that
#: the full Figure-8 sweep stays within a few minutes on 2 cores.
FIG8 = LasSetup("gavel_fig8", "single", (3.0, 5.0, 6.0, 7.0), (2.0, 4.0, 6.0))
FIG9 = LasSetup("gavel_fig9", "multi", (1.0, 2.0, 2.5, 3.0), (1.5, 3.0))


def las_runs(setup: LasSetup, catalogue: ThroughputCatalogue, *, loads: tuple[float, ...],
             seeds: tuple[int, ...], window: tuple[int, int], workers: int | None = None) -> pd.DataFrame:
    """One row per (policy, load, seed): ``hetsched.sim.sweep`` over Gavel's setup with ``preset="gavel"``.

    ``2 * window[1]`` jobs are generated (arrivals go on while the window drains, as with
    Gavel's endless generator). A run stops when the window has drained, or at
    ``4 * n_jobs / min(loads) + 1000`` simulated hours (status ``max_time``: far past what the
    policy sustains; the longest job runs 10^4 minutes on its fastest GPU).
    """
    n_jobs = 2 * int(window[1])
    grid = {
        "policy": dict(LAS_POLICIES),
        "load": [float(x) for x in loads],
        "seed": [int(s) for s in seeds],
        "n_jobs": n_jobs,
        "catalogue": catalogue,
        "scale_factor_probs": MIXES[setup.mix],
        "cluster": Cluster(GAVEL_CLUSTER),
        "window": (int(window[0]), int(window[1])),
        "preset": "gavel",
        "max_time": (4.0 * n_jobs / min(loads) + 1000.0) * 3600.0,
    }
    df = sweep(grid, max_workers=workers)
    df.insert(1, "mix", setup.mix)
    df.insert(2, "window", f"{window[0]}-{window[1]}")
    return df


def las_summary(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (policy, load): mean and std over seeds of the average JCT, and agnostic / aware.

    A (policy, load) with a seed whose window did not drain is marked ``saturated`` and its
    mean is over the completed jobs only (a lower bound).
    """
    ok = runs["status"].eq("window_done")
    g = runs.assign(drained=ok).groupby(["policy", "load"], sort=False)
    out = g.agg(seeds=("seed", "count"), drained=("drained", "sum"),
                avg_jct_hours=("avg_jct_hours", "mean"), std_jct_hours=("avg_jct_hours", "std"),
                p99_jct_hours=("p99_jct_s", lambda v: float(np.mean(v)) / 3600), worst_ftf=("worst_ftf", "mean"),
                utilization=("utilization", "mean"), wall_s=("run_wall_s", "sum")).reset_index()
    out["saturated"] = out["drained"] < out["seeds"]
    wide = out.pivot(index="load", columns="policy", values="avg_jct_hours")
    if {"aware", "agnostic"} <= set(wide.columns):
        ratio = (wide["agnostic"] / wide["aware"]).rename("agnostic_over_aware")
        out = out.merge(ratio, left_on="load", right_index=True, how="left")
    return out


def _run(setup: LasSetup, settings: Settings) -> ExperimentResult:
    t0 = time.perf_counter()
    cat, table_note = settings.table()
    quick = settings.quick
    loads = setup.quick_loads if quick else setup.loads
    seeds = SEEDS[:1] if quick else SEEDS
    window = QUICK_WINDOW if quick else GAVEL_WINDOW
    runs = las_runs(setup, cat, loads=loads, seeds=seeds, window=window, workers=settings.workers)
    summary = las_summary(runs)
    best = float(summary["agnostic_over_aware"].max()) if "agnostic_over_aware" in summary else float("nan")
    published = published_table([
        {"claim": "heterogeneity-aware policies improve average JCT by up to 3.5x over heterogeneity-agnostic "
                  "ones (abstract; the figure's curves themselves are not stated as numbers in the text)",
         "paper_value": 3.5, "ours": best, "source": GAVEL_ABSTRACT},
    ])
    notes = [table_note,
             (f"window: job ids {window[0]}-{window[1]} ({'quick: not steady state' if quick else 'Gavel: -s 4000 -e 5000'}),"
             f" seeds {list(seeds)}, loads {list(loads)} jobs/h, preset='gavel'")]
    sat = summary[summary["saturated"]]
    if len(sat):
        notes.append("did not drain within max_time (past saturation; mean over completed jobs): "
                     + ", ".join(f"{r.policy} at {r.load:g}/h" for r in sat.itertuples()))
    errors = runs["error"].astype(str).ne("").sum() if "error" in runs else 0
    if errors:
        notes.append(f"{errors} run(s) failed: see the 'error' column")
    return ExperimentResult(setup.name, runs, summary, published, notes=notes, wall_s=time.perf_counter() - t0)


def run_fig8(settings: Settings) -> ExperimentResult:
    """Gavel Figure 8: LAS aware vs agnostic on single-GPU jobs (continuous-single)."""
    return _run(FIG8, settings)


def run_fig9(settings: Settings) -> ExperimentResult:
    """Gavel Figure 9: LAS aware vs agnostic on the Philly multi-GPU mix (continuous-multiple)."""
    return _run(FIG9, settings)
