"""Figures of the reproduced experiments (matplotlib, imported lazily through hetsched.sim.plots).

Every figure uses constrained layout, puts its legend right of the panels and states the
setup in a caption line under them; :func:`hetsched.sim.figure_check.overlapping_text`
finds no text over any other (the tests check each experiment's figure).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..sim import plots
from ..sim.bench import GAVEL_CLUSTER
from ..sim.figure_layout import caption, dodge, dodge_step, figure_legend, wrap_label
from ..sim.metrics import FTF_THRESHOLD
from .base import ExperimentResult

__all__ = ["las_figure", "rho_figure", "sia_figure", "table3_figure"]


def _figure(ncols: int, width: float = 5.0, height: float = 3.6, **kwargs: Any):
    plt = plots._plt()
    return plt.subplots(1, ncols, figsize=(width * ncols, height), layout="constrained", squeeze=False, **kwargs)


def _log2_ticks(axis: Any, set_scale: Any, values: Any, most: int = 7) -> None:
    """A log scale with at most ``most`` plain ticks at powers of two spanning ``values``
    (``1/8``, ``1``, ``8``...), every other power (or fewer) when they would crowd."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    set_scale("log")
    v = values[values > 0]
    lo, hi = (float(v.min()), float(v.max())) if len(v) else (0.5, 2.0)
    powers = [k for k in range(-12, 16) if lo / 2 <= 2.0 ** k <= hi * 2]
    stride = -(-len(powers) // most)
    ticks = [2.0 ** k for k in powers if k % stride == 0]
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}" if x >= 1 else f"1/{1 / x:g}"))
    axis.set_minor_formatter(NullFormatter())


def _category_ticks(ax: Any, at: list[float], names: list[str], panel_inches: float) -> None:
    """Category tick labels at ``at``, each wrapped to the width one category gets (of a
    panel ``panel_inches`` wide, less a third for its labels and the legend's share)."""
    chars = max(int(0.7 * panel_inches * 72 / (len(names) * 0.6 * 10)), 6)
    ax.set_xticks(at, [wrap_label(str(n), chars) for n in names])


def las_figure(result: ExperimentResult) -> Any:
    """Average JCT against input job rate, aware vs agnostic, mean ± s.d. over seeds;
    saturated points (a seed's window did not drain) are marked with a cross."""
    fig, axes = _figure(1, width=6.0)
    ax = axes[0, 0]
    runs = result.runs
    plots.jct_vs_load(runs, ax=ax)
    ax.set_ylabel("average JCT (hours)")
    sat = result.summary[result.summary["saturated"].astype(bool)]
    if len(sat):
        # on the same sideways offsets jct_vs_load gave each policy's points
        order = list(dict.fromkeys(runs["policy"]))
        step = dodge_step(runs["load"], len(order))
        for policy, g in sat.groupby("policy", sort=False):
            at = dodge(g["load"], order.index(policy), len(order), step=step) if policy in order else g["load"]
            ax.plot(at, g["avg_jct_hours"], "kx", ms=9, ls="none", label="did not drain")
    figure_legend(fig, [ax], first=list(dict.fromkeys(runs["policy"])))
    single = runs["mix"].iloc[0] == "single"
    ax.set_title("Gavel Figure 8: single-GPU jobs" if single else "Gavel Figure 9: Philly multi-GPU mix",
                 fontsize="medium")
    caption(fig, f"LAS, heterogeneity-aware vs agnostic, preset 'gavel'; {plots.sweep_setup(runs)}; mean ± s.d. over seeds, "
                 "the two policies' points offset sideways.")
    return fig


def rho_figure(result: ExperimentResult) -> Any:
    """The ρ CDF of every policy (all seeds' measured jobs), and the worst ρ per seed."""
    fig, axes = _figure(2, width=4.6)
    rho = result.extra["rho"]
    frames = {p: g.rename(columns={"rho": "ftf"}) for p, g in rho.groupby("policy", sort=False)}
    ax = plots.ftf_cdf(frames, ax=axes[0, 0])
    _log2_ticks(ax.xaxis, ax.set_xscale, rho["rho"])
    ax.set_xlabel("finish-time fairness ρ")
    ax.set_title("ρ CDF (measured jobs, all seeds)", fontsize="medium")
    ax2 = axes[0, 1]
    runs = result.runs
    policies = list(dict.fromkeys(runs["policy"]))
    for i, p in enumerate(policies):
        g = runs[runs["policy"] == p]
        ax2.scatter([i] * len(g), g["worst_ftf"], label=p, color=f"C{i}")
    _category_ticks(ax2, list(range(len(policies))), policies, 4.6)
    ax2.set_xlim(-0.5, len(policies) - 0.5)
    _log2_ticks(ax2.yaxis, ax2.set_yscale, runs["worst_ftf"])
    ax2.axhline(FTF_THRESHOLD, color="grey", ls="--", lw=1)
    ax2.set_ylabel("worst ρ (one point per seed)")
    ax2.set_title("worst ρ per run", fontsize="medium")
    ax2.grid(alpha=0.3)
    figure_legend(fig, [ax])
    load = _distinct_loads(runs)
    caption(fig, f"Philly multi-GPU mix at {load} jobs/h, preset 'gavel'; {plots.sweep_setup(runs, cluster=GAVEL_CLUSTER)}; "
                 "ρ = JCT / time on a 1/n share of the cluster, ρ ≤ 1 is fair.")
    return fig


def _distinct_loads(runs: pd.DataFrame) -> str:
    return ", ".join(f"{x:g}" for x in dict.fromkeys(runs["load"]))


def sia_figure(result: ExperimentResult) -> Any:
    """Average JCT per policy, one panel per restart cost, grouped by load (mean over seeds)."""
    s = result.summary
    costs = list(dict.fromkeys(s["restart_seconds"]))
    fig, axes = _figure(len(costs), width=4.2, sharey=True)
    policies = list(dict.fromkeys(s["policy"]))
    loads = list(dict.fromkeys(s["load"]))
    width = 0.8 / len(policies)
    for ax, cost in zip(axes[0], costs):
        sub = s[s["restart_seconds"] == cost]
        for i, p in enumerate(policies):
            vals = [float(sub[(sub["policy"] == p) & (sub["load"] == x)]["avg_jct_hours"].mean()) for x in loads]
            ax.bar([j + i * width for j in range(len(loads))], vals, width, label=p, color=f"C{i}")
        _category_ticks(ax, [j + width * (len(policies) - 1) / 2 for j in range(len(loads))],
                        [f"{x:g} jobs/h" for x in loads], 4.2)
        ax.set_title(f"restart cost {cost:g} s", fontsize="medium")
        ax.grid(alpha=0.3, axis="y")
    axes[0, 0].set_ylabel("average JCT (hours)")
    figure_legend(fig, list(axes[0]))
    caption(fig, f"Elastic Philly multi-GPU mix; {plots.sweep_setup(result.runs)}; mean over seeds; every job measured.")
    return fig


def table3_figure(result: ExperimentResult) -> Any:
    """Sia's Table 3: average JCT, p99 JCT and makespan per scheduler, ours (mean over the
    workloads run) beside the paper's."""
    from .sia_table3 import SIA_TABLE3_CLUSTER

    s = result.summary
    panels = (("avg_jct_hours", "paper_avg_jct_hours", "average JCT (h)"),
              ("p99_jct_hours", "paper_p99_jct_hours", "p99 JCT (h)"),
              ("makespan_hours", "paper_makespan_hours", "makespan (h)"))
    fig, axes = _figure(3, width=3.4)
    names = list(s["scheduler"])
    x = list(range(len(names)))
    for ax, (ours, paper, label) in zip(axes[0], panels):
        ax.bar([i - 0.2 for i in x], s[ours], 0.4, label="hetsched", color="C0")
        ax.bar([i + 0.2 for i in x], s[paper], 0.4, label="paper (Table 3)", color="C1")
        _category_ticks(ax, x, names, 3.4)
        ax.set_title(label, fontsize="medium")
        ax.grid(alpha=0.3, axis="y")
    figure_legend(fig, list(axes[0]))
    runs = result.runs
    gpus = ", ".join(f"{n}\u00a0{t}" for t, (n, _) in SIA_TABLE3_CLUSTER.items())
    total = sum(n for n, _ in SIA_TABLE3_CLUSTER.values())
    workloads = list(dict.fromkeys(runs["workload"])) if "workload" in runs else []
    which = f"{len(workloads)} workload(s) ({workloads[0]} to {workloads[-1]})" if workloads else "the workloads"
    jobs = ", ".join(str(n) for n in dict.fromkeys(runs["n_jobs"])) if "n_jobs" in runs else "?"
    caption(fig, f"Cluster of {total} GPUs ({gpus}); {which}, {jobs} jobs each; "
                 "ours: mean over the workloads; no paper bar: not in the paper's table.")
    return fig
