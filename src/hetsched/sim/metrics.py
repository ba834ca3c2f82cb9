"""Metrics of a simulation: the per-job table, the summary, windows, package versions.

Definitions (all times in seconds; every time column of the job table and every time key
of the summary says so in its name: ``jct_s``, ``avg_jct_s``, ``makespan_s``, ...):

* **JCT** ``finish - arrival`` (``jct_s``); **queueing delay** ``start - arrival`` (first
  round the job ran; ``queueing_delay_s``); **makespan** ``max(finish) - min(arrival)``
  over the measured jobs (``makespan_s``).
* **Finish-time fairness** (Themis; Gavel's accounting) ``rho = JCT / T_iso``, where
  ``T_iso`` is the *isolated-equivalent* time of the work the job did: every round it ran,
  ``steps done / iso_j``, with ``iso_j`` the throughput the job would get from its
  isolated share (``1/n`` of every GPU type, ``n`` = jobs present at the last solve; see
  :func:`hetsched.formulations.common.isolated_throughput`). ``rho > 1`` means the job
  finished later than on its own ``1/n`` of the cluster.
* **Utilization** busy GPU-seconds over ``total GPUs x simulated span`` (a job that
  finishes mid-round frees its GPUs for the rest of that round: idle time, as in Gavel).
* **SLO violation** a job with a deadline that finished after it (or never finished).
"""

from __future__ import annotations

import importlib.metadata
import math
import platform
import sys
import warnings
from typing import Any

import numpy as np
import pandas as pd

from ..rounds.options import (
    window_mask,  # the engine measures windows; re-exported here
)

__all__ = ["FTF_THRESHOLD", "RENAMED_JOB_COLUMNS", "RENAMED_ROUND_COLUMNS", "RENAMED_RUN_COLUMNS",
           "RENAMED_SUMMARY_KEYS", "Summary", "package_versions", "renamed_round_columns", "summarize", "window_mask"]

#: Jobs with finish-time fairness above this count as unfairly treated (Gavel/Themis).
FTF_THRESHOLD = 1.05

#: Summary keys before their unit was in their name -> the current names (all seconds).
RENAMED_SUMMARY_KEYS: dict[str, str] = {
    "avg_jct": "avg_jct_s", "median_jct": "median_jct_s", "p99_jct": "p99_jct_s", "makespan": "makespan_s",
    "avg_queueing_delay": "avg_queueing_delay_s", "sim_start": "sim_start_s", "sim_end": "sim_end_s",
}
#: Job-table columns before their unit was in their name -> the current names (all seconds).
RENAMED_JOB_COLUMNS: dict[str, str] = {
    "arrival": "arrival_s", "start": "start_s", "finish": "finish_s", "jct": "jct_s",
    "queueing_delay": "queueing_delay_s", "isolated_time": "isolated_time_s", "deadline": "deadline_s",
}
#: Round-log columns before their unit was in their name -> the current names (seconds); the
#: per-type ``busy_<type>`` columns became ``gpu_seconds_<type>`` (:func:`renamed_round_columns`).
RENAMED_ROUND_COLUMNS: dict[str, str] = {"start": "start_s"}
#: Run-log columns before their unit was in their name -> the current names (seconds).
RENAMED_RUN_COLUMNS: dict[str, str] = {"t_start": "start_s", "t_end": "end_s", "restart": "restart_s"}


def renamed_round_columns(gpu_types: tuple[str, ...] | list[str]) -> dict[str, str]:
    """Round-log columns before their unit was in their name -> the current names, for a
    cluster of ``gpu_types``: :data:`RENAMED_ROUND_COLUMNS` and ``busy_<type>`` ->
    ``gpu_seconds_<type>`` (busy GPU-seconds of the round).

    Parameters
    ----------
    gpu_types : sequence of str
        The cluster's GPU types.

    Returns
    -------
    dict
        Old name -> new name.

    Examples
    --------
    >>> renamed_round_columns(["v100"])
    {'start': 'start_s', 'busy_v100': 'gpu_seconds_v100'}
    """
    return {**RENAMED_ROUND_COLUMNS, **{f"busy_{t}": f"gpu_seconds_{t}" for t in gpu_types}}


class Summary(dict):
    """The summary of a simulation: a dict whose time keys name their unit (``avg_jct_s``).

    The former names (``avg_jct``, ``makespan``, ... in :data:`RENAMED_SUMMARY_KEYS`) still
    read, with a :class:`DeprecationWarning`; only the new names are stored and written.

    Examples
    --------
    >>> import warnings
    >>> s = Summary({"avg_jct_s": 7200.0})
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     old = s["avg_jct"]
    >>> old, caught[0].category.__name__, list(s)
    (7200.0, 'DeprecationWarning', ['avg_jct_s'])
    """

    def __missing__(self, key: Any) -> Any:
        new = RENAMED_SUMMARY_KEYS.get(key) if isinstance(key, str) else None
        if new is None or not dict.__contains__(self, new):
            raise KeyError(key)
        warnings.warn(f"summary key {key!r} is deprecated; use {new!r} (seconds)", DeprecationWarning, stacklevel=2)
        return dict.__getitem__(self, new)

    def get(self, key: Any, default: Any = None) -> Any:
        if dict.__contains__(self, key):
            return dict.__getitem__(self, key)
        new = RENAMED_SUMMARY_KEYS.get(key) if isinstance(key, str) else None
        if new is None or not dict.__contains__(self, new):
            return default
        warnings.warn(f"summary key {key!r} is deprecated; use {new!r} (seconds)", DeprecationWarning, stacklevel=2)
        return dict.__getitem__(self, new)


_PACKAGES = ("hetsched", "numpy", "scipy", "pandas", "highspy", "ortools", "cvxpy", "clarabel")


def package_versions() -> dict[str, str]:
    """Python, platform and installed versions of hetsched and the packages it computes with."""
    out = {"python": sys.version.split()[0], "platform": platform.platform()}
    for name in _PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def _stat(values: np.ndarray, fn) -> float:
    return float(fn(values)) if values.size else math.nan


def summarize(jobs: pd.DataFrame, rounds: pd.DataFrame, *, gpu_types: tuple[str, ...], capacities: np.ndarray,
              span: tuple[float, float], timings: dict[str, float], status: str) -> Summary:
    """The summary dict of a simulation (see the module docstring for definitions).

    Parameters
    ----------
    jobs : DataFrame
        The per-job table (``in_window`` marks measured jobs).
    rounds : DataFrame
        The round log.
    gpu_types, capacities
        Cluster columns and GPU counts.
    span : (float, float)
        Simulated start and end time.
    timings : dict
        Wall-clock seconds by phase.
    status : str
        How the simulation ended.
    """
    meas = jobs[jobs["in_window"].to_numpy()]
    done = meas[meas["completed"].to_numpy()]
    jct = done["jct_s"].to_numpy(dtype=float)
    ftf = done["ftf"].to_numpy(dtype=float)
    ftf = ftf[np.isfinite(ftf)]
    qd = meas["queueing_delay_s"].to_numpy(dtype=float)
    qd = qd[np.isfinite(qd)]
    t0, t1 = span
    elapsed = max(t1 - t0, 0.0)
    total = float(np.sum(capacities))
    busy_by_type = np.array([float(jobs[f"gpu_seconds_{t}"].sum()) for t in gpu_types]) if len(jobs) else np.zeros(len(gpu_types))
    util = float(busy_by_type.sum() / (total * elapsed)) if elapsed > 0 and total > 0 else math.nan
    all_done = bool(len(meas)) and bool(meas["completed"].all())
    if len(done):
        makespan = float(done["finish_s"].max() - meas["arrival_s"].min()) if all_done else math.nan
    else:
        makespan = math.nan
    has_deadline = (np.isfinite(meas["deadline_s"].to_numpy(dtype=float)) if "deadline_s" in meas
                    else np.zeros(len(meas), bool))
    solved = rounds[rounds["solved"].to_numpy()] if len(rounds) else rounds
    solve_s = solved["solve_s"].to_numpy(dtype=float) if len(solved) else np.zeros(0)
    out = Summary({
        "status": status,
        "n_jobs": int(len(jobs)),
        "n_measured": int(len(meas)),
        "n_completed": int(len(done)),
        "n_unfinished": int(len(meas) - len(done)),
        "avg_jct_s": _stat(jct, np.mean),
        "median_jct_s": _stat(jct, np.median),
        "p99_jct_s": _stat(jct, lambda v: np.percentile(v, 99)),
        "avg_jct_hours": _stat(jct, np.mean) / 3600,
        "makespan_s": makespan,
        "worst_ftf": _stat(ftf, np.max),
        "mean_ftf": _stat(ftf, np.mean),
        "share_ftf_above_1_05": float(np.mean(ftf > FTF_THRESHOLD)) if ftf.size else math.nan,
        "utilization": util,
        "avg_queueing_delay_s": _stat(qd, np.mean),
        "preemptions": int(meas["preemptions"].sum()) if len(meas) else 0,
        "migrations": int(meas["migrations"].sum()) if len(meas) else 0,
        "slo_jobs": int(has_deadline.sum()),
        "slo_violations": int(meas["slo_violated"].sum()) if len(meas) else 0,
        "sim_start_s": float(t0),
        "sim_end_s": float(t1),
        "simulated_hours": elapsed / 3600,
        "n_rounds": int(len(rounds)),
        "n_solves": int(len(solved)),
        "failed_solves": int((~rounds["solve_ok"].to_numpy(dtype=bool)).sum()) if len(rounds) else 0,
        "certificate_failures": int((rounds["solve_status"] == "failed_certificate").sum()) if len(rounds) else 0,
        "solver_s_total": float(solve_s.sum()),
        "solver_s_mean": _stat(solve_s, np.mean),
        "solver_s_max": _stat(solve_s, np.max),
        "max_active_jobs": int(rounds["n_active"].max()) if len(rounds) else 0,
    })
    for k, t in enumerate(gpu_types):
        out[f"gpu_hours_{t}"] = float(busy_by_type[k] / 3600)
        out[f"utilization_{t}"] = (
            float(busy_by_type[k] / (capacities[k] * elapsed)) if elapsed > 0 and capacities[k] > 0 else math.nan
        )
    wall = float(timings.get("wall_s", math.nan))
    out.update({f"{k}": float(v) for k, v in timings.items()})
    out["sim_hours_per_wall_s"] = (elapsed / 3600) / wall if wall and wall > 0 else math.nan
    out["rounds_per_wall_s"] = len(rounds) / wall if wall and wall > 0 else math.nan
    return out
