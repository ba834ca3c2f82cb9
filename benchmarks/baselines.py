"""The schedulers papers compare against, on the same workloads and seeds, through one loop.

Every scheduler runs through :func:`hetsched.simulate` (Gavel's round mechanism, 360 s
rounds, re-solve on every arrival and completion, no placement):

* Gavel's max-min fairness, heterogeneity-aware and agnostic, and with space sharing
  (``packing="workload"``: pair throughputs from the workload's catalogue);
* finish-time fairness (Themis), AlloX, Gandiva_fair, DRF, FIFO;
* Sia (goodput ILP; elastic: a job's GPU type and count change from round to round, goodput
  from Sia's bootstrap model);
* Tiresias (discretized 2D-LAS, and 2D-Gittins with a job-size distribution estimated from a
  *different* generated trace: "past jobs").

Three workloads, each from ``hetsched.sim.generate_workload`` (Gavel's Philly-derived
durations, Poisson arrivals): the Philly gang mix (1/2/4/8 GPUs at .70/.10/.15/.05);
single-GPU jobs only (AlloX's setting); and an *elastic* setting: the Philly mix at a
quarter of the load, where idle GPUs are common and Sia may grow (or shrink) any job's GPU
count, while the fixed-gang schedulers run each job on its requested gang (goodput
bootstrapped as ``sia`` does from the job's measured throughput: 10 % synchronisation cost
inside a node, 30 % across nodes). Sia also scales the single-GPU jobs of the second
workload; the others cannot.

A second part runs the Philly mix with a restart cost (seconds without progress whenever a
job starts on GPUs it did not hold the round before) for a few schedulers.

Usage::

    python benchmarks/baselines.py --quick      # 40 jobs per workload, one seed
    python benchmarks/baselines.py              # 120 jobs per workload, 3 seeds

Writes ``benchmarks/results/baselines.csv`` (one row per workload, seed and scheduler:
``avg_jct_s, p99_jct_s, makespan_s, worst_ftf, utilization, restarts, wall_s`` and more),
``benchmarks/results/baselines_restart.csv`` and, unless ``--no-plot``, the JCT CDF
``docs/baselines_jct_cdf.png``.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

import hetsched as hs
from hetsched.schedulers import ServiceDistribution, Tiresias
from hetsched.sim import generate_workload, simulate

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results" / "baselines.csv"
RESTART_RESULTS = ROOT / "results" / "baselines_restart.csv"
PLOT = ROOT.parent / "docs" / "baselines_jct_cdf.png"
WORKLOADS = {
    "philly_mix": dict(scale_factor_probs=(0.70, 0.10, 0.15, 0.05), rate=4.0),
    "single_gpu": dict(scale_factor_probs={1: 1.0}, rate=4.0),
    "elastic": dict(scale_factor_probs=(0.70, 0.10, 0.15, 0.05), rate=1.0),
}
ROUND_SECONDS = 360.0


def schedulers(past: hs.Trace) -> dict[str, object]:
    """Every scheduler of the comparison; Tiresias-Gittins learns job sizes from ``past``."""
    best = past.jobs.throughputs.max(axis=1)
    sizes = past.jobs.scale_factors * past.total_steps / best
    pol = hs.policies
    return {
        "max_min_fairness": pol.MaxMinFairness(),
        "max_min_fairness_agnostic": pol.MaxMinFairness(heterogeneity_aware=False),
        "max_min_fairness+packing": pol.MaxMinFairness(packing="workload"),
        "finish_time_fairness": pol.FinishTimeFairness(),
        "sia": pol.Sia(),
        "tiresias": Tiresias(thresholds=(3600.0, 36000.0), promote_knob=8.0),
        "tiresias_gittins": Tiresias(thresholds=(3600.0, 36000.0), promote_knob=8.0,
                                     distribution=ServiceDistribution(sizes)),
        "allox": "allox",
        "gandiva_fair": "gandiva_fair",
        "drf": "drf",
        "fifo": "fifo",
    }


def _row(res, **keys) -> dict:
    s = res.summary
    return dict(**keys, avg_jct_s=s["avg_jct_s"], p99_jct_s=s["p99_jct_s"], makespan_s=s["makespan_s"], worst_ftf=s["worst_ftf"],
                mean_ftf=s["mean_ftf"], utilization=s["utilization"], restarts=int(res.jobs["restarts"].sum()),
                restart_seconds_lost=float(res.jobs["restart_seconds"].sum()), n_completed=s["n_completed"],
                status=s["status"], wall_s=s["wall_s"])


def run(n_jobs: int, seeds: list[int], counts: dict[str, int], only: set[str] | None):
    rows, jcts = [], []
    cluster = hs.Cluster(counts)
    for wname, spec in WORKLOADS.items():
        for seed in seeds:
            trace = generate_workload(n_jobs, rate_per_hour=spec["rate"], seed=seed, pairs=True,
                                      scale_factor_probs=spec["scale_factor_probs"])
            past = generate_workload(4 * n_jobs, rate_per_hour=spec["rate"], seed=10_000 + seed,
                                     scale_factor_probs=spec["scale_factor_probs"])
            for name, sched in schedulers(past).items():
                if only and name not in only:
                    continue
                opts = hs.SimOptions(round_seconds=ROUND_SECONDS, record_runs=False)
                res = simulate(sched, trace, cluster, options=opts)
                rows.append(_row(res, workload=wname, seed=seed, scheduler=name, n_jobs=n_jobs))
                jcts.append((wname, seed, name, res.jobs.loc[res.jobs["completed"], "jct_s"].to_numpy()))
                print(f"  {wname:11s} seed {seed} {name:26s} avg JCT {rows[-1]['avg_jct_s'] / 3600:7.2f} h  "
                      f"wall {rows[-1]['wall_s']:6.1f} s", flush=True)
    return pd.DataFrame(rows), jcts


def restart_part(n_jobs: int, counts: dict[str, int], costs: list[float]) -> pd.DataFrame:
    """Philly mix, seed 0: the effect of a restart cost on a few schedulers."""
    trace = generate_workload(n_jobs, rate_per_hour=WORKLOADS["philly_mix"]["rate"], seed=0, pairs=True)
    rows = []
    for name in ("max_min_fairness", "sia", "tiresias", "fifo"):
        for cost in costs:
            sched = Tiresias(thresholds=(3600.0, 36000.0), promote_knob=8.0) if name == "tiresias" else name
            opts = hs.SimOptions(round_seconds=ROUND_SECONDS, restart_seconds=cost, record_runs=False)
            res = simulate(sched, trace, hs.Cluster(counts), options=opts)
            rows.append(_row(res, workload="philly_mix", seed=0, scheduler=name, n_jobs=n_jobs, restart_cost=cost))
    return pd.DataFrame(rows)


def plot(jcts, path: Path, setup: str = "") -> None:
    """The JCT CDF of every scheduler, one panel per workload; ``setup`` is the caption."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hetsched.sim.figure_layout import caption, figure_legend, plain_log_labels

    names = list(WORKLOADS)
    fig, axes = plt.subplots(1, len(names), figsize=(4.6 * len(names) + 2.2, 4.2), sharey=True, layout="constrained")
    for ax, wname in zip(np.atleast_1d(axes), names):
        pols = list(dict.fromkeys(p for w, _, p, _ in jcts if w == wname))
        colors = plt.cm.tab20(np.linspace(0, 1, 20))
        for i, pol in enumerate(pols):
            parts = [j for w, _, p, j in jcts if w == wname and p == pol]
            v = np.sort(np.concatenate(parts)) / 3600 if parts else np.zeros(0)
            if v.size:
                ax.step(v, np.arange(1, v.size + 1) / v.size, where="post", label=pol, color=colors[(2 * i) % 20],
                        linestyle="-" if i < 10 else "--")
        ax.set_xscale("log")
        plain_log_labels(ax.xaxis)
        ax.set_xlabel("JCT (hours, log scale)")
        ax.set_title(wname)
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].set_ylabel("fraction of jobs")
    figure_legend(fig, list(np.atleast_1d(axes)))
    if setup:
        caption(fig, setup)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="40 jobs, one seed")
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--seeds", type=int, default=None, help="number of seeds (0, 1, ...)")
    ap.add_argument("--only", default=None, help="comma-separated scheduler names")
    ap.add_argument("--restart-costs", default="0,30,120", help="seconds, comma-separated ('' to skip)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--plot", type=Path, default=PLOT)
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args(argv)
    n = args.jobs or (40 if args.quick else 120)
    seeds = list(range(args.seeds or (1 if args.quick else 3)))
    counts = {"v100": 8, "p100": 8, "k80": 8}
    only = set(args.only.split(",")) if args.only else None
    print(f"# baselines: {n} jobs x {len(seeds)} seed(s) per workload, cluster {counts}, {ROUND_SECONDS:.0f} s rounds; "
          f"{platform.processor() or platform.machine()}, Python {sys.version.split()[0]}, hetsched {hs.__version__}")
    t0 = time.perf_counter()
    df, jcts = run(n, seeds, counts, only)
    agg = (df.groupby(["workload", "scheduler"], sort=False)
             .agg(avg_jct_s=("avg_jct_s", "mean"), p99_jct_s=("p99_jct_s", "mean"), makespan_s=("makespan_s", "mean"),
                  worst_ftf=("worst_ftf", "mean"), utilization=("utilization", "mean"),
                  restarts=("restarts", "mean"), wall_s=("wall_s", "mean"))
             .reset_index())
    print(f"{'workload':11s} {'scheduler':26s} {'avg JCT h':>9s} {'p99 JCT h':>9s} {'makespan h':>10s} "
          f"{'worst FTF':>9s} {'util':>5s} {'restarts':>8s} {'wall s':>7s}")
    for r in agg.itertuples():
        print(f"{r.workload:11s} {r.scheduler:26s} {r.avg_jct_s / 3600:9.2f} {r.p99_jct_s / 3600:9.2f} "
              f"{r.makespan_s / 3600:10.1f} {r.worst_ftf:9.2f} {r.utilization:5.2f} {r.restarts:8.0f} {r.wall_s:7.1f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out, index=False)
    print(f"# wrote {args.out} ({len(df)} rows) in {time.perf_counter() - t0:.1f} s")
    costs = [float(c) for c in args.restart_costs.split(",") if c.strip()]
    if costs:
        rs = restart_part(n, counts, costs)
        print(f"{'scheduler':18s} {'restart s':>9s} {'avg JCT h':>9s} {'makespan h':>10s} {'restarts':>8s} "
              f"{'job-h lost':>10s}")
        for r in rs.itertuples():
            print(f"{r.scheduler:18s} {r.restart_cost:9.0f} {r.avg_jct_s / 3600:9.2f} {r.makespan_s / 3600:10.1f} "
                  f"{r.restarts:8d} {r.restart_seconds_lost / 3600:10.1f}")
        rs.to_csv(RESTART_RESULTS, index=False)
        print(f"# wrote {RESTART_RESULTS}")
    if not args.no_plot:
        gpus = ", ".join(f"{v} {k}" for k, v in counts.items())
        plot(jcts, args.plot, f"Cluster {gpus}; {n} jobs per workload, seeds {', '.join(map(str, seeds))}, "
                              f"{ROUND_SECONDS:.0f} s rounds; "
                              "elastic: the Philly mix at a quarter of the load; the completed jobs of every seed together.")
        print(f"# wrote {args.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
