"""The schedulers papers compare against, on one generated workload, side by side.

Runs the same generated trace (Gavel's Philly-derived job mix, Poisson arrivals,
``hetsched.sim.generate_workload``) through

* the allocation policies ``max_min_fairness``, ``finish_time_fairness``, ``allox``,
  ``gandiva_fair``, ``drf`` and ``fifo`` with :func:`hetsched.sim.simulate` (Gavel's round
  mechanism, 360 s rounds, re-solve on every arrival and completion), and
* Tiresias (discretized 2D-LAS, and 2D-Gittins with a job-size distribution estimated from
  a *different* generated trace: "past jobs") through the per-round interface with
  :func:`hetsched.schedulers.replay`, whose accounting follows the simulator's (see its
  docstring), since ``simulate`` does not take a per-round scheduler yet,

and prints average / p99 JCT, makespan and the worst finish-time fairness rho. Two
workloads: the Philly gang mix (1/2/4/8 GPUs at .70/.10/.15/.05) and single-GPU jobs only
(AlloX's setting: AlloX matches one job per device; gangs use hetsched's heuristic
extension).

Usage::

    python benchmarks/baselines.py --quick      # 60 jobs per workload, ~1 minute
    python benchmarks/baselines.py              # 200 jobs per workload, 3 seeds

Writes ``benchmarks/results/baselines.csv`` (``policy, avg_jct, p99_jct, makespan,
worst_ftf`` and more) and, unless ``--no-plot``, the JCT CDF ``docs/baselines_jct_cdf.png``.
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
from hetsched.schedulers import ServiceDistribution, Tiresias, replay
from hetsched.sim import generate_workload, simulate

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results" / "baselines.csv"
PLOT = ROOT.parent / "docs" / "baselines_jct_cdf.png"
POLICIES = ("max_min_fairness", "finish_time_fairness", "allox", "gandiva_fair", "drf", "fifo")
WORKLOADS = {"philly_mix": (0.70, 0.10, 0.15, 0.05), "single_gpu": {1: 1.0}}
ROUND_SECONDS = 360.0


def tiresias_variants(past: hs.JobSet, total_steps: np.ndarray) -> dict[str, Tiresias]:
    """2D-LAS with two thresholds (1 and 10 GPU-hours) and a starvation knob, and 2D-Gittins
    with the size distribution (GPU-seconds on the fastest type) of ``past`` jobs."""
    best = past.throughputs.max(axis=1)
    sizes = past.scale_factors * total_steps / best
    return {
        "tiresias": Tiresias(thresholds=(3600.0, 36000.0), promote_knob=8.0),
        "tiresias_gittins": Tiresias(thresholds=(3600.0, 36000.0), promote_knob=8.0,
                                     distribution=ServiceDistribution(sizes)),
    }


def run(n_jobs: int, seeds: list[int], rate: float, counts: dict[str, int]):
    rows, jcts = [], []
    cluster = hs.Cluster(counts)
    for wname, probs in WORKLOADS.items():
        for seed in seeds:
            trace = generate_workload(n_jobs, rate_per_hour=rate, seed=seed, scale_factor_probs=probs, n_entities=4)
            past = generate_workload(4 * n_jobs, rate_per_hour=rate, seed=10_000 + seed, scale_factor_probs=probs)
            for pol in POLICIES:
                t0 = time.perf_counter()
                res = simulate(pol, trace, cluster, round_seconds=ROUND_SECONDS)
                wall = time.perf_counter() - t0
                s = res.summary
                rows.append(dict(workload=wname, seed=seed, policy=pol, runner="simulate", n_jobs=n_jobs,
                                 avg_jct=s["avg_jct"], p99_jct=s["p99_jct"], makespan=s["makespan"],
                                 worst_ftf=s["worst_ftf"], mean_ftf=s["mean_ftf"], utilization=s["utilization"],
                                 n_completed=s["n_completed"], wall_s=wall))
                jcts.append((wname, seed, pol, res.jobs.loc[res.jobs["completed"], "jct"].to_numpy()))
            jobs = hs.JobSet(trace.jobs.throughputs, gpu_types=trace.jobs.gpu_types, ids=trace.jobs.ids,
                             scale_factors=trace.jobs.scale_factors, arrival_times=trace.arrival_times,
                             steps_remaining=trace.total_steps).with_columns(cluster.gpu_types)
            for name, sched in tiresias_variants(past.jobs, past.total_steps).items():
                t0 = time.perf_counter()
                res = replay(sched, jobs, cluster, round_seconds=ROUND_SECONDS)
                wall = time.perf_counter() - t0
                s = res.summary
                busy = float((res.jobs["run_seconds"] * jobs.scale_factors).sum())
                span = float(res.jobs["finish"].max() - res.jobs["arrival"].min())
                rows.append(dict(workload=wname, seed=seed, policy=name, runner="replay", n_jobs=n_jobs,
                                 avg_jct=s["avg_jct"], p99_jct=s["p99_jct"], makespan=s["makespan"],
                                 worst_ftf=s["worst_ftf"], mean_ftf=s["mean_ftf"],
                                 utilization=busy / (sum(counts.values()) * span) if span > 0 else np.nan,
                                 n_completed=s["n_completed"], wall_s=wall))
                jcts.append((wname, seed, name, res.jobs.loc[res.jobs["completed"], "jct"].to_numpy()))
    return pd.DataFrame(rows), jcts


def plot(jcts, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(WORKLOADS)
    fig, axes = plt.subplots(1, len(names), figsize=(6 * len(names), 4), sharey=True)
    for ax, wname in zip(np.atleast_1d(axes), names):
        pols = list(dict.fromkeys(p for w, _, p, _ in jcts if w == wname))
        for pol in pols:
            v = np.sort(np.concatenate([j for w, _, p, j in jcts if w == wname and p == pol])) / 3600
            ax.step(v, np.arange(1, v.size + 1) / v.size, where="post", label=pol)
        ax.set_xscale("log")
        ax.set_xlabel("JCT (hours, log scale)")
        ax.set_title(wname)
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].set_ylabel("fraction of jobs")
    np.atleast_1d(axes)[-1].legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="60 jobs, one seed")
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--seeds", type=int, default=None, help="number of seeds (0, 1, ...)")
    ap.add_argument("--rate", type=float, default=6.0, help="arrivals per hour")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--plot", type=Path, default=PLOT)
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args(argv)
    n = args.jobs or (60 if args.quick else 200)
    seeds = list(range(args.seeds or (1 if args.quick else 3)))
    counts = {"v100": 8, "p100": 8, "k80": 8}
    print(f"# baselines: {n} jobs x {len(seeds)} seed(s) per workload, {args.rate}/h, cluster {counts}, "
          f"{ROUND_SECONDS:.0f} s rounds; {platform.processor() or platform.machine()}, Python {sys.version.split()[0]}")
    t0 = time.perf_counter()
    df, jcts = run(n, seeds, args.rate, counts)
    agg = (df.groupby(["workload", "policy"], sort=False)
             .agg(avg_jct=("avg_jct", "mean"), p99_jct=("p99_jct", "mean"), makespan=("makespan", "mean"),
                  worst_ftf=("worst_ftf", "mean"), utilization=("utilization", "mean"), wall_s=("wall_s", "sum"))
             .reset_index())
    print(f"{'workload':12s} {'policy':22s} {'avg JCT h':>10s} {'p99 JCT h':>10s} {'makespan h':>11s} "
          f"{'worst FTF':>10s} {'util':>6s} {'wall s':>7s}")
    for r in agg.itertuples():
        print(f"{r.workload:12s} {r.policy:22s} {r.avg_jct / 3600:10.2f} {r.p99_jct / 3600:10.2f} "
              f"{r.makespan / 3600:11.1f} {r.worst_ftf:10.2f} {r.utilization:6.2f} {r.wall_s:7.1f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out, index=False)
    print(f"# wrote {args.out} ({len(df)} rows) in {time.perf_counter() - t0:.1f} s")
    if not args.no_plot:
        plot(jcts, args.plot)
        print(f"# wrote {args.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
