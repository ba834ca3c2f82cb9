"""Figures of the reproduced experiments (matplotlib, imported lazily through hetsched.sim.plots)."""

from __future__ import annotations

from typing import Any

from ..sim import plots
from .base import ExperimentResult

__all__ = ["las_figure", "rho_figure", "sia_figure", "table3_figure"]


def _figure(ncols: int, width: float = 5.0):
    plt = plots._plt()
    return plt.subplots(1, ncols, figsize=(width * ncols, 3.6), layout="constrained", squeeze=False)


def _log_ticks(axis: Any, set_scale: Any, values: Any) -> None:
    """A log scale with plain ticks at powers of two spanning ``values``."""
    from matplotlib.ticker import FixedLocator, NullFormatter, ScalarFormatter

    set_scale("log")
    v = values[values > 0]
    lo, hi = (float(v.min()), float(v.max())) if len(v) else (0.5, 2.0)
    ticks = [2.0 ** k for k in range(-6, 12) if lo / 2 <= 2.0 ** k <= hi * 2]
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(ScalarFormatter())
    axis.set_minor_formatter(NullFormatter())


def las_figure(result: ExperimentResult) -> Any:
    """Average JCT against input job rate, aware vs agnostic, mean ± std over seeds; saturated
    points (a seed's window did not drain) are marked with a cross."""
    fig, axes = _figure(1)
    ax = axes[0, 0]
    runs = result.runs
    plots.jct_vs_load(runs, ax=ax)
    sat = result.summary[result.summary["saturated"]]
    if len(sat):
        ax.plot(sat["load"], sat["avg_jct_hours"], "kx", ms=9, label="did not drain")
        ax.legend(fontsize="small")
    mix = "single-GPU jobs (Figure 8)" if runs["mix"].iloc[0] == "single" else "Philly multi-GPU mix (Figure 9)"
    ax.set_title(f"36 V100 + 36 P100 + 36 K80, {mix},\njobs {runs['window'].iloc[0]}, preset='gavel'",
                 fontsize="small")
    return fig


def rho_figure(result: ExperimentResult) -> Any:
    """The ρ CDF of every policy (all seeds' measured jobs), and the worst ρ per seed."""
    fig, axes = _figure(2)
    rho = result.extra["rho"]
    frames = {p: g.rename(columns={"rho": "ftf"}) for p, g in rho.groupby("policy", sort=False)}
    ax = plots.ftf_cdf(frames, ax=axes[0, 0])
    _log_ticks(ax.xaxis, ax.set_xscale, rho["rho"])
    ax.set_title("ρ CDF (measured jobs, all seeds)", fontsize="small")
    ax2 = axes[0, 1]
    runs = result.runs
    for i, (p, g) in enumerate(runs.groupby("policy", sort=False)):
        ax2.scatter([i] * len(g), g["worst_ftf"], label=p)
    ax2.set_xticks(range(runs["policy"].nunique()), list(dict.fromkeys(runs["policy"])), fontsize="small")
    _log_ticks(ax2.yaxis, ax2.set_yscale, runs["worst_ftf"])
    ax2.axhline(1.0, color="grey", ls="--", lw=1)
    ax2.set_ylabel("worst ρ (one point per seed)")
    ax2.grid(alpha=0.3)
    return fig


def sia_figure(result: ExperimentResult) -> Any:
    """Average JCT per policy, one panel per restart cost, grouped by load (mean over seeds)."""
    s = result.summary
    costs = list(dict.fromkeys(s["restart_seconds"]))
    fig, axes = _figure(len(costs), width=4.5)
    policies = list(dict.fromkeys(s["policy"]))
    loads = list(dict.fromkeys(s["load"]))
    width = 0.8 / len(policies)
    for ax, cost in zip(axes[0], costs):
        sub = s[s["restart_seconds"] == cost]
        for i, p in enumerate(policies):
            vals = [float(sub[(sub["policy"] == p) & (sub["load"] == x)]["avg_jct_hours"].mean()) for x in loads]
            ax.bar([j + i * width for j in range(len(loads))], vals, width, label=p)
        ax.set_xticks([j + width * (len(policies) - 1) / 2 for j in range(len(loads))], [f"{x:g} jobs/h" for x in loads])
        ax.set_ylabel("average JCT (hours)")
        ax.set_title(f"restart cost {cost:g} s", fontsize="small")
        ax.grid(alpha=0.3, axis="y")
    axes[0, 0].legend(fontsize="small")
    return fig


def table3_figure(result: ExperimentResult) -> Any:
    """Sia's Table 3: average JCT, p99 JCT and makespan per scheduler, ours (mean over the
    workloads run) beside the paper's."""
    s = result.summary
    panels = (("avg_jct_hours", "paper_avg_jct_hours", "average JCT (h)"),
              ("p99_jct_hours", "paper_p99_jct_hours", "p99 JCT (h)"),
              ("makespan_hours", "paper_makespan_hours", "makespan (h)"))
    fig, axes = _figure(3, width=3.6)
    names = list(s["scheduler"])
    x = list(range(len(names)))
    for ax, (ours, paper, label) in zip(axes[0], panels):
        ax.bar([i - 0.2 for i in x], s[ours], 0.4, label="hetsched")
        ax.bar([i + 0.2 for i in x], s[paper], 0.4, label="paper (Table 3)")
        ax.set_xticks(x, names)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3, axis="y")
    axes[0, 0].legend(fontsize="small")
    return fig
