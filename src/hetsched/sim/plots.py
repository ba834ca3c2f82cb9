"""Plots of simulation results (matplotlib, the optional ``plot`` extra, imported lazily).

Each function draws on ``ax`` (a new figure when None) and returns the Axes; labels are
set, nothing is shown or saved (``ax.figure.savefig(path)`` does that)::

    import hetsched as hs
    from hetsched.sim import generate_workload, plots, simulate

    res = simulate("max_min_fairness", generate_workload(50, rate_per_hour=3, seed=0),
                   hs.Cluster({"v100": 8, "p100": 8, "k80": 8}))
    plots.jct_cdf(res).figure.savefig("jct_cdf.png")
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError

__all__ = ["ftf_cdf", "jct_cdf", "jct_vs_load", "solver_time_vs_size", "utilization_over_time"]


def _plt():
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError(
            "hetsched plots need matplotlib: pip install 'hetsched[plot]' (or pip install matplotlib)."
        ) from None
    return plt


def _axes(ax):
    if ax is None:
        plt = _plt()
        _, ax = plt.subplots(figsize=(5.0, 3.5), layout="constrained")
    return ax


def _results(results: Any) -> dict[str, Any]:
    """``{label: SimulationResult or DataFrame}`` from one result, a list or a mapping."""
    from .simulator import SimulationResult

    if isinstance(results, (SimulationResult, pd.DataFrame)):
        label = results.config.get("policy", "run") if isinstance(results, SimulationResult) else "run"
        return {label: results}
    if isinstance(results, Mapping):
        return dict(results)
    if isinstance(results, Sequence):
        out = {}
        for i, r in enumerate(results):
            label = r.config.get("policy", f"run {i}") if isinstance(r, SimulationResult) else f"run {i}"
            if label in out:
                label = f"{label} ({i})"
            out[label] = r
        return out
    raise ValidationError(f"`results` must be a SimulationResult, a list or a mapping of them; got {type(results).__name__}.")


def _jobs(r: Any) -> pd.DataFrame:
    df = r if isinstance(r, pd.DataFrame) else r.jobs
    if "in_window" in df:
        df = df[df["in_window"].astype(bool)]
    return df


def _cdf(ax, values: np.ndarray, label: str) -> None:
    v = np.sort(values[np.isfinite(values)])
    if v.size == 0:
        return
    y = np.arange(1, v.size + 1) / v.size
    ax.step(v, y, where="post", label=label)


def jct_cdf(results: Any, *, ax=None, hours: bool = True, log_x: bool = True):
    """CDF of job completion times of the measured jobs, one line per result.

    Parameters
    ----------
    results : SimulationResult, list or mapping label -> result (or a jobs DataFrame)
    ax : matplotlib Axes, optional
    hours : bool, default True
        JCT in hours (else seconds).
    log_x : bool, default True
    """
    ax = _axes(ax)
    for label, r in _results(results).items():
        jct = _jobs(r)["jct"].to_numpy(dtype=float)
        _cdf(ax, jct / 3600 if hours else jct, str(label))
    ax.set_xlabel("JCT (hours)" if hours else "JCT (s)")
    ax.set_ylabel("fraction of jobs")
    if log_x:
        ax.set_xscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return ax


def ftf_cdf(results: Any, *, ax=None, threshold: float = 1.05):
    """CDF of finish-time fairness ρ of the measured jobs, with the ρ threshold marked."""
    ax = _axes(ax)
    for label, r in _results(results).items():
        _cdf(ax, _jobs(r)["ftf"].to_numpy(dtype=float), str(label))
    ax.axvline(threshold, color="grey", ls="--", lw=1)
    ax.set_xlabel("finish-time fairness ρ (JCT / isolated-share time)")
    ax.set_ylabel("fraction of jobs")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return ax


def utilization_over_time(result: Any, *, ax=None, per_type: bool = True, smooth_rounds: int = 1):
    """Busy fraction of the cluster (and of each GPU type) per round, against simulated hours.

    Parameters
    ----------
    result : SimulationResult
    per_type : bool, default True
        One line per GPU type besides the total.
    smooth_rounds : int, default 1
        Rolling mean over this many rounds.
    """
    ax = _axes(ax)
    u = result.utilization_over_time()
    hours = u["start"].to_numpy(dtype=float) / 3600
    cols = list(result.gpu_types) if per_type else []
    for c in cols + ["total"]:
        y = u[c].rolling(max(int(smooth_rounds), 1), min_periods=1).mean().to_numpy()
        ax.plot(hours, y, label=c, lw=2 if c == "total" else 1)
    ax.set_xlabel("simulated time (hours)")
    ax.set_ylabel("GPUs busy (fraction)")
    ax.set_ylim(0, 1.05)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return ax


def jct_vs_load(sweep_df: pd.DataFrame, *, ax=None, x: str = "load", y: str = "avg_jct_hours",
                hue: str = "policy", errorbars: bool = True):
    """Average JCT against load (Gavel's Figure 8 shape), one line per policy.

    Parameters
    ----------
    sweep_df : DataFrame
        The frame :func:`hetsched.sim.sweep` returns (several seeds per point are averaged;
        with ``errorbars`` their standard deviation is drawn).
    x, y, hue : str
        Columns for the axis, the metric and the line grouping.
    """
    ax = _axes(ax)
    if not isinstance(sweep_df, pd.DataFrame):
        raise ValidationError(f"`sweep_df` must be the DataFrame sweep() returns; got {type(sweep_df).__name__}.")
    for col in (x, y, hue):
        if col not in sweep_df:
            raise ValidationError(f"`sweep_df` has no column {col!r}; columns: {list(sweep_df.columns)}.")
    df = sweep_df
    if "error" in df:
        err = df["error"]
        df = df[err.isna().to_numpy() | (err.astype(str) == "").to_numpy()]
    for label, g in df.groupby(hue, sort=False):
        st = g.groupby(x)[y].agg(["mean", "std", "count"]).sort_index()
        if errorbars and (st["count"] > 1).any():
            ax.errorbar(st.index, st["mean"], yerr=st["std"].fillna(0), marker="o", capsize=3, label=str(label))
        else:
            ax.plot(st.index, st["mean"], marker="o", label=str(label))
    ax.set_xlabel("input job rate (jobs/hour)" if x == "load" else x)
    ax.set_ylabel("average JCT (hours)" if y == "avg_jct_hours" else y)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return ax


def solver_time_vs_size(results: Any, *, ax=None, size: str = "solve_jobs"):
    """Per-solve wall time against problem size (active jobs, or ``size="solve_classes"``)."""
    ax = _axes(ax)
    for label, r in _results(results).items():
        rounds = r.rounds if not isinstance(r, pd.DataFrame) else r
        solved = rounds[rounds["solved"].astype(bool)]
        ax.scatter(solved[size], solved["solve_s"] * 1e3, s=6, alpha=0.5, label=str(label))
    ax.set_xlabel("active jobs per solve" if size == "solve_jobs" else "job classes per solve")
    ax.set_ylabel("solve time (ms)")
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return ax
