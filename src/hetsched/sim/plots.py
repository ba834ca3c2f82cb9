"""Plots of simulation results (matplotlib, the optional ``plot`` extra, imported lazily).

Each function draws on ``ax`` (a new figure when None) and returns the Axes
(:func:`utilization_by_type` returns a Figure of several panels); labels are set, nothing
is shown or saved (``ax.figure.savefig(path)`` does that). Several runs overlay when given
as a list or a mapping label -> result; :func:`run_labels` names runs after their config.

Layout: figures use constrained layout, legends sit right of the axes (never over the
data or a title), and a figure a function makes itself carries a caption line with the
setup it knows (cluster, workload, measured jobs, seeds; :mod:`.figure_layout`). No text
overlaps any other: :func:`hetsched.sim.figure_check.overlapping_text` checks it, and the
tests run it on every figure the command line writes.

Utilization is smoothed by a **centred rolling window of simulated time**: the busy
GPU-seconds of the rounds whose midpoint lies within ``window_hours / 2`` of a point,
divided by the GPU-seconds available there (a time-weighted mean, exact for rounds of
unequal length). Default window: 1/50 of the simulated span, at least one round; the
window used is printed on the figure::

    import hetsched as hs
    from hetsched.sim import generate_workload, plots, simulate

    res = simulate("max_min_fairness", generate_workload(50, rate_per_hour=3, seed=0),
                   hs.Cluster({"v100": 8, "p100": 8, "k80": 8}))
    plots.jct_cdf(res).figure.savefig("jct_cdf.png")
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from .figure_layout import (
    caption,
    dodge,
    dodge_step,
    figure_legend,
    legend_outside,
    plain_log_labels,
)

__all__ = ["ftf_cdf", "jct_cdf", "jct_vs_load", "run_labels", "runs_setup", "smoothed_utilization",
           "solver_time_vs_size", "sweep_setup", "utilization_by_type", "utilization_over_time"]


def _plt():
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError(
            "hetsched plots need matplotlib: pip install 'hetsched[plot]' (or pip install matplotlib)."
        ) from None
    return plt


def _axes(ax) -> tuple[Any, bool]:
    """``(ax, True)`` on a new figure when ``ax`` is None, else ``(ax, False)``."""
    if ax is not None:
        return ax, False
    _, ax = _plt().subplots(figsize=(5.5, 3.5), layout="constrained")
    return ax, True


def _distinct(values: Sequence[Any]) -> str:
    """The distinct values, comma-separated, in order of appearance."""
    return ", ".join(dict.fromkeys(str(v) for v in values))


def _seeds(values: Sequence[Any]) -> str:
    """``"seed 0"``, ``"seeds 0-2"`` (consecutive) or ``"seeds 0, 4"`` (no-break spaces)."""
    seeds = sorted({int(v) for v in values})
    if len(seeds) == 1:
        return f"seed\u00a0{seeds[0]}"
    if seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"seeds\u00a0{seeds[0]}-{seeds[-1]}"
    return "seeds\u00a0" + ",\u00a0".join(map(str, seeds))


def _cluster_text(cluster: Any) -> str:
    """``"v100=8, k80=8"`` from a mapping of counts or the label ``"v100=8,k80=8"`` (with
    no-break spaces: a caption wraps before or after a cluster, not inside it)."""
    if isinstance(cluster, Mapping):
        return ",\u00a0".join(f"{k}={v}" for k, v in cluster.items())
    return str(cluster).replace(",", ",\u00a0")


def runs_setup(results: Any) -> str:
    """The setup of simulation results in words, for a caption: cluster, workload, measured
    jobs, seeds and round length (each once when the runs share it, else their values).

    Parameters
    ----------
    results : SimulationResult, list or mapping label -> result
        DataFrames among them (jobs tables) carry no setup and are left out.

    Returns
    -------
    str
    """
    configs = [r.config for r in _results(results).values() if not isinstance(r, pd.DataFrame)]
    if not configs:
        return ""
    parts = {"cluster": [], "workload": [], "measured": [], "seed": [], "rounds": []}
    for c in configs:
        meta = c.get("workload_meta") or {}
        if c.get("cluster") is not None:
            parts["cluster"].append(_cluster_text(c["cluster"]))
        if c.get("workload") == "generated" and meta:
            parts["workload"].append(f"{meta.get('n_jobs', c.get('n_jobs'))} generated {meta.get('generator', '')} "
                                     f"jobs at {meta.get('rate_per_hour', float('nan')):g}/h")
        elif c.get("workload") is not None:
            parts["workload"].append(f"{c.get('n_jobs')} jobs of {c['workload']}")
        window = c.get("window")
        parts["measured"].append("all jobs measured" if window is None else f"jobs {window[0]}-{window[1]} measured")
        if c.get("seed") is not None:
            parts["seed"].append(c["seed"])
        if c.get("round_seconds") is not None:
            parts["rounds"].append(f"{float(c['round_seconds']):g} s")
    text = [f"cluster {_distinct(parts['cluster'])}" if parts["cluster"] else "", _distinct(parts["workload"]),
            _distinct(parts["measured"]), _seeds(parts["seed"]) if parts["seed"] else "",
            f"rounds {_distinct(parts['rounds'])}" if parts["rounds"] else ""]
    return "; ".join(t for t in text if t)


def sweep_setup(sweep_df: pd.DataFrame, *, cluster: Any = None) -> str:
    """The setup of a sweep table in words, for a caption: cluster, jobs per run, measured
    window and seeds, from the columns it has.

    Parameters
    ----------
    sweep_df : DataFrame
        What :func:`hetsched.sim.sweep` returns (or its ``sweep.csv``).
    cluster : mapping of GPU type -> count, optional
        The cluster to state when the table has no ``cluster`` column.

    Returns
    -------
    str
    """
    if not isinstance(sweep_df, pd.DataFrame):
        raise ValidationError(f"`sweep_df` must be the table hetsched.sweep() returns (a DataFrame); got "
                              f"{type(sweep_df).__name__}.")
    text = []
    if "cluster" in sweep_df:
        text.append(f"cluster {_distinct(_cluster_text(c) for c in sweep_df['cluster'])}")
    elif cluster is not None:
        text.append(f"cluster {_cluster_text(cluster)}")
    if "n_jobs" in sweep_df:
        text.append(f"{_distinct(sweep_df['n_jobs'])} jobs per run")
    if "window" in sweep_df:
        text.append(f"jobs {_distinct(sweep_df['window'])} measured")
    if "seed" in sweep_df and len(sweep_df):
        text.append(_seeds(sweep_df["seed"]))
    return "; ".join(text)


def _results(results: Any, *, frames: bool = True) -> dict[str, Any]:
    """``{label: SimulationResult or DataFrame}`` from one result, a list or a mapping; each
    run must be a SimulationResult (or, with ``frames``, a DataFrame of its table)."""
    from .simulator import SimulationResult

    if isinstance(results, (SimulationResult, pd.DataFrame)):
        label = results.config.get("policy", "run") if isinstance(results, SimulationResult) else "run"
        out = {label: results}
    elif isinstance(results, Mapping):
        out = dict(results)
    elif isinstance(results, Sequence) and not isinstance(results, (str, bytes)):
        out = {}
        for i, r in enumerate(results):
            label = r.config.get("policy", f"run {i}") if isinstance(r, SimulationResult) else f"run {i}"
            if label in out:
                label = f"{label} ({i})"
            out[label] = r
    else:
        raise ValidationError(f"`results` must be a SimulationResult, a list or a mapping of them; got "
                              f"{type(results).__name__}.")
    kinds = (SimulationResult, pd.DataFrame) if frames else SimulationResult
    for label, r in out.items():
        if not isinstance(r, kinds):
            raise ValidationError(f"`results` must hold SimulationResults{' (or their DataFrames)' if frames else ''}; "
                                  f"run {str(label)!r} is {type(r).__name__}.")
    return out


def _result(result: Any) -> Any:
    """``result`` if it is a SimulationResult, else a ValidationError naming its type."""
    from .simulator import SimulationResult

    if not isinstance(result, SimulationResult):
        raise ValidationError(f"`result` must be a hetsched.SimulationResult (what simulate() returns); got "
                              f"{type(result).__name__}.")
    return result


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
    ax, own = _axes(ax)
    runs = _results(results)
    for label, r in runs.items():
        jct = _jobs(r)["jct_s"].to_numpy(dtype=float)
        _cdf(ax, jct / 3600 if hours else jct, str(label))
    return _finish_cdf(ax, "JCT (hours)" if hours else "JCT (s)", log_x, runs_setup(runs) if own else None)


def ftf_cdf(results: Any, *, ax=None, threshold: float = 1.05, log_x: bool | None = None):
    """CDF of finish-time fairness ρ of the measured jobs, with the ρ threshold marked.

    Parameters
    ----------
    results : SimulationResult, list or mapping label -> result (or a jobs DataFrame)
    ax : matplotlib Axes, optional
    threshold : float, default 1.05
        Drawn as a dashed line (jobs to its right were treated unfairly).
    log_x : bool, optional
        Logarithmic ρ axis; default: when the largest ρ is over 20 times the smallest
        (a FIFO run beside fair policies spans two decades).
    """
    ax, own = _axes(ax)
    runs = _results(results)
    values = {str(label): _jobs(r)["ftf"].to_numpy(dtype=float) for label, r in runs.items()}
    for label, v in values.items():
        _cdf(ax, v, label)
    finite = np.concatenate([v[np.isfinite(v) & (v > 0)] for v in values.values()] or [np.zeros(0)])
    if log_x is None:
        log_x = finite.size > 0 and finite.max() > 20 * finite.min()
    ax.axvline(threshold, color="grey", ls="--", lw=1, label=f"ρ = {threshold:g}")
    return _finish_cdf(ax, "finish-time fairness ρ (JCT / isolated-share time)", log_x,
                       runs_setup(runs) if own else None)


def _caption(fig: Any, *parts: str) -> None:
    """The non-empty ``parts`` as the figure's caption, one sentence (none when all are empty)."""
    text = "; ".join(p for p in parts if p)
    if text:
        caption(fig, text[0].upper() + text[1:] + ".")


def _finish_cdf(ax, xlabel: str, log_x: bool, setup: str | None):
    """Label, scale, grid, legend (and, with ``setup``, the caption) of a CDF plot; returns ``ax``."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of jobs")
    if log_x:
        ax.set_xscale("log")
        plain_log_labels(ax.xaxis)
    ax.grid(alpha=0.3)
    legend_outside(ax)
    if setup is not None:
        _caption(ax.figure, "CDF over the measured jobs", setup)
    return ax


def run_labels(results: Sequence[Any], names: Sequence[str] | None = None) -> list[str]:
    """Legend labels for runs: each run's policy label (``config["policy"]``); runs that
    share one get the config entries that tell them apart (``"fifo (seed=1)"``), else their
    ``names`` (e.g. directory names), else their position.

    Parameters
    ----------
    results : sequence of SimulationResult
    names : sequence of str, optional
        Fallback names, one per run.
    """
    from .simulator import SimulationResult

    if isinstance(results, (str, bytes, Mapping)) or not isinstance(results, Sequence):
        raise ValidationError(f"`results` must be a sequence of SimulationResults; got {type(results).__name__}.")
    for i, r in enumerate(results):
        if not isinstance(r, SimulationResult):
            raise ValidationError(f"`results` must be a sequence of SimulationResults; item {i} is {type(r).__name__}.")
    base = [str(r.config.get("policy", f"run {i}")) for i, r in enumerate(results)]
    out = list(base)
    for label in set(base):
        group = [i for i, b in enumerate(base) if b == label]
        if len(group) < 2:
            continue
        keys = sorted({k for i in group for k, v in results[i].config.items()
                       if isinstance(v, (str, int, float, bool)) and k not in ("policy", "workload_meta")})
        differ = [k for k in keys if len({repr(results[i].config.get(k)) for i in group}) > 1]
        for i in group:
            if differ:
                out[i] = f"{label} ({', '.join(f'{k}={results[i].config.get(k)}' for k in differ[:3])})"
            elif names is not None:
                out[i] = f"{label} ({names[i]})"
            else:
                out[i] = f"{label} (run {i})"
    return out


def _window_seconds(rounds: pd.DataFrame, window_hours: float | None) -> float:
    if window_hours is not None:
        w = float(window_hours)
        if not (math.isfinite(w) and w > 0):
            raise ValidationError(f"`window_hours` must be a positive number of hours; got {window_hours!r}.")
        return w * 3600.0
    if len(rounds) == 0:
        return 3600.0
    span = float((rounds["start_s"] + rounds["seconds"]).max() - rounds["start_s"].min())
    return max(span / 50.0, float(rounds["seconds"].max()))


def smoothed_utilization(result: Any, *, window_hours: float | None = None) -> tuple[pd.DataFrame, float]:
    """Busy fraction per GPU type and in all, smoothed over a centred window of simulated time.

    Parameters
    ----------
    result : SimulationResult
    window_hours : float, optional
        Window width in hours (default: 1/50 of the simulated span, at least one round).

    Returns
    -------
    (DataFrame, float)
        Columns ``hours`` (round midpoints, simulated hours), one per GPU type and
        ``total``; and the window width used, in hours.
    """
    r = _result(result).rounds
    w = _window_seconds(r, window_hours)
    sec = r["seconds"].to_numpy(dtype=float)
    mid = r["start_s"].to_numpy(dtype=float) + sec / 2
    index = pd.to_timedelta(mid, unit="s")
    out = pd.DataFrame({"hours": mid / 3600.0})

    def roll(values: np.ndarray) -> np.ndarray:
        return pd.Series(values, index=index).rolling(pd.Timedelta(seconds=w), center=True, min_periods=1).sum().to_numpy()

    busy_all = np.zeros(len(r))
    cap_all = np.zeros(len(r))
    for k, t in enumerate(result.gpu_types):
        busy = r[f"gpu_seconds_{t}"].to_numpy(dtype=float)
        cap = float(result.capacities[k]) * sec
        busy_all += busy
        cap_all += cap
        with np.errstate(invalid="ignore", divide="ignore"):
            out[t] = roll(busy) / roll(cap) if float(result.capacities[k]) > 0 else np.nan
    with np.errstate(invalid="ignore", divide="ignore"):
        out["total"] = roll(busy_all) / roll(cap_all)
    return out, w / 3600.0


def _window_text(hours: float) -> str:
    return f"{hours * 60:.0f} min" if hours < 1 else f"{hours:.3g} h"


def utilization_over_time(result: Any, *, ax=None, per_type: bool = True, smooth_rounds: int | None = None,
                          window_hours: float | None = None):
    """Busy fraction of the cluster (and of each GPU type) against simulated hours, smoothed.

    Parameters
    ----------
    result : SimulationResult
    per_type : bool, default True
        One line per GPU type besides the total.
    smooth_rounds : int, optional
        Rolling mean over this many rounds instead of a time window (1: raw rounds).
    window_hours : float, optional
        Width of the centred time window (see the module docstring; default 1/50 of the
        simulated span, at least one round).
    """
    cols = list(_result(result).gpu_types) if per_type else []
    ax, own = _axes(ax)
    if smooth_rounds is not None:
        u = result.utilization_over_time()
        x = u["start_s"].to_numpy(dtype=float) / 3600
        series = {c: u[c].rolling(max(int(smooth_rounds), 1), min_periods=1).mean().to_numpy() for c in cols + ["total"]}
        note = f"rolling mean over {max(int(smooth_rounds), 1)} rounds"
    else:
        u, hours = smoothed_utilization(result, window_hours=window_hours)
        x = u["hours"].to_numpy()
        series = {c: u[c].to_numpy() for c in cols + ["total"]}
        note = f"centred mean over {_window_text(hours)}"
    for c, y in series.items():
        ax.plot(x, y, label="all GPUs" if c == "total" else c, lw=2.2 if c == "total" else 1.3,
                color="black" if c == "total" else None)
    ax.set_xlabel(f"simulated time (hours); {note}")
    ax.set_ylabel("GPUs busy (fraction)")
    ax.set_ylim(0, 1.05)
    ax.grid(alpha=0.3)
    legend_outside(ax)
    if own:
        _caption(ax.figure, runs_setup(result))
    return ax


def utilization_by_type(results: Any, *, window_hours: float | None = None, gpu_types: Sequence[str] | None = None):
    """One panel per GPU type (and one for all GPUs), one smoothed line per run.

    Parameters
    ----------
    results : SimulationResult, list or mapping label -> result
    window_hours : float, optional
        Smoothing window (default: 1/50 of the longest run's simulated span, at least one
        round; the same window for every run, printed in the title).
    gpu_types : sequence of str, optional
        Panels to draw (default: every type of any run).

    Returns
    -------
    matplotlib.figure.Figure
    """
    runs = _results(results, frames=False)
    if not runs:
        raise ValidationError("`results` must hold at least one run.")
    if window_hours is None:
        window_hours = max(_window_seconds(r.rounds, None) for r in runs.values()) / 3600.0
    types = list(gpu_types) if gpu_types is not None else list(dict.fromkeys(t for r in runs.values() for t in r.gpu_types))
    panels = types + ["total"]
    plt = _plt()
    ncol = min(2, len(panels))
    nrow = math.ceil(len(panels) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(5.0 * ncol, 2.6 * nrow), sharex=True, sharey=True,
                             layout="constrained", squeeze=False)
    smoothed = {label: smoothed_utilization(r, window_hours=window_hours)[0] for label, r in runs.items()}
    for ax, panel in zip(axes.flat, panels):
        for label, u in smoothed.items():
            if panel in u:
                ax.plot(u["hours"], u[panel], lw=1.5, label=str(label))
        ax.set_title("all GPUs" if panel == "total" else panel, fontsize="medium")
        ax.set_ylim(0, 1.05)
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("simulated time (hours)")
    for ax in axes[:, 0]:
        ax.set_ylabel("GPUs busy (fraction)")
    figure_legend(fig, list(axes.flat[:len(panels)]))
    fig.suptitle(f"Utilization, centred mean over {_window_text(window_hours)} of simulated time", fontsize="medium")
    _caption(fig, runs_setup(runs))
    return fig


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
    if not isinstance(sweep_df, pd.DataFrame):
        raise ValidationError(f"jct_vs_load needs the table hetsched.sweep() returns (a DataFrame, as in sweep.csv); "
                              f"got {type(sweep_df).__name__}.")
    df = sweep_df
    if "error" in df:
        err = df["error"]
        ok = err.isna().to_numpy() | (err.astype(str) == "").to_numpy()
        if len(df) and not ok.any():
            first = str(err.iloc[0])
            raise ValidationError(
                f"every run of the sweep failed ({len(df)} run(s)), so there is no {y!r} to plot; "
                f"the first error: {first}")
        df = df[ok]
    for col in (x, y, hue):
        if col not in df:
            raise ValidationError(f"the sweep table has no column {col!r} to plot; its columns: {list(df.columns)}.")
    ax, own = _axes(ax)
    stats = [(label, g.groupby(x)[y].agg(["mean", "std", "count"]).sort_index())
             for label, g in df.groupby(hue, sort=False)]
    spread = max((int(st["count"].max()) for _, st in stats if len(st)), default=0) if errorbars else 0
    spread = spread if spread > 1 else 0
    shifted = spread and len(stats) > 1
    step = dodge_step(np.concatenate([st.index.to_numpy(dtype=float) for _, st in stats] or [np.zeros(0)]), len(stats))
    for i, (label, st) in enumerate(stats):
        at = dodge(st.index, i, len(stats), step=step) if shifted else st.index
        if spread:
            ax.errorbar(at, st["mean"], yerr=st["std"].fillna(0), marker="o", capsize=3, label=str(label))
        else:
            ax.plot(at, st["mean"], marker="o", label=str(label))
    ax.set_xlabel("input job rate (jobs/hour)" if x == "load" else x)
    ylabel = "average JCT (hours)" if y == "avg_jct_hours" else y
    note = f"mean ± s.d. over up to {spread} runs per point" if spread else ""
    ax.grid(alpha=0.3)
    legend_outside(ax)
    if own:
        ax.set_ylabel(ylabel)
        offset = "series offset sideways so their error bars stand apart" if shifted else ""
        _caption(ax.figure, sweep_setup(df), note, offset)
    else:
        ax.set_ylabel(ylabel + (f"\n{note}" if note else ""))
    return ax


def solver_time_vs_size(results: Any, *, ax=None, size: str = "solve_jobs"):
    """Per-solve wall time against problem size (active jobs, or ``size="solve_classes"``)."""
    ax, own = _axes(ax)
    runs = _results(results)
    for label, r in runs.items():
        rounds = r.rounds if not isinstance(r, pd.DataFrame) else r
        solved = rounds[rounds["solved"].astype(bool)]
        ax.scatter(solved[size], solved["solve_s"] * 1e3, s=8, alpha=0.6, label=str(label))
    ax.set_xlabel("active jobs per solve" if size == "solve_jobs" else "job classes per solve")
    ax.set_ylabel("solve time (ms)")
    ax.set_yscale("log")
    plain_log_labels(ax.yaxis)
    ax.grid(alpha=0.3)
    legend_outside(ax)
    if own:
        _caption(ax.figure, "one point per solve", runs_setup(runs))
    return ax
