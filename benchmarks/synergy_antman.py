"""Per-round decision time of Synergy (proportional, TUNE, OPT) and AntMan at 1,000 active
jobs on 1,024 GPUs, beside max-min fairness's solve of the same jobs in the same run
(target: each at most 10x max-min).

Each scheduler's ``plan_round`` is called on one round view of the active jobs (the
simulator's view: throughputs from the generated catalogue, Philly-mix gang sizes, seeded
per-job defaults for the host sensitivity and the AntMan classes); max-min fairness is
``hs.solve("max_min_fairness", jobs, cluster)`` on the same jobs (its solve only, which is
what the round loop re-runs when the active set changes). Each is run ``--repeats`` times;
the table shows the median wall and CPU (``time.process_time``) seconds and their ratios
to max-min's. The machine may be shared: CPU seconds are the fairer
figure then.

Usage::

    python benchmarks/synergy_antman.py                       # 1,000 jobs, 1,024 GPUs
    python benchmarks/synergy_antman.py --jobs 200 --repeats 2
    python benchmarks/synergy_antman.py --out benchmarks/results/synergy_antman.csv
    python benchmarks/synergy_antman.py --no-experiments   # only the decision times

Then (unless ``--no-experiments``) two experiments on a generated trace: Synergy's average
JCT with GPU-proportional, TUNE and OPT under FIFO, SRTF and LAS (``synergy_jct.csv``), and
AntMan against the same jobs run exclusively (``antman_report.csv``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

import hetsched as hs
from hetsched.inputs.throughputs import generate_catalogue
from hetsched.rounds.protocol import RoundView, check_rows
from hetsched.schedulers.antman import AntMan, antman_report
from hetsched.schedulers.synergy import Synergy

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import format_header, format_line, write_csv  # noqa: E402

ROOT = Path(__file__).resolve().parent
CLUSTER = {"v100": 384, "p100": 320, "k80": 320}          # 1,024 GPUs in servers of 8
COLUMNS = (("scheduler", "scheduler", "<22"), ("n_jobs", "jobs", ">6"), ("gpus", "GPUs", ">6"),
           ("running", "running", ">7"), ("wall_s", "wall s", ">9.4f"), ("cpu_s", "CPU s", ">9.4f"),
           ("ratio", "x max-min", ">9.2f"), ("cpu_ratio", "CPU x", ">7.2f"))


def view_of(n_jobs: int, seed: int) -> tuple[RoundView, hs.JobSet, hs.Cluster]:
    """The round view of ``n_jobs`` jobs all active at t = 0, their JobSet and the cluster."""
    cat = generate_catalogue(gpu_types=tuple(CLUSTER), seed=seed, pairs=False)
    w = hs.generate_workload(n_jobs, rate_per_hour=1e6, seed=seed, catalogue=cat)
    cluster = hs.Cluster.from_servers(CLUSTER, gpus_per_server=8)
    jobs = w.jobs.with_columns(cluster.gpu_types)
    n = jobs.n_jobs
    view = RoundView(now=0.0, round_index=0, round_seconds=360.0, cluster=cluster, gpu_types=cluster.gpu_types,
                     capacities=cluster.capacities(cluster.gpu_types).astype(np.int64), jobs=np.arange(n),
                     throughputs=np.asarray(jobs.throughputs, float), unconsolidated=None,
                     scale_factors=jobs.scale_factors.astype(np.int64), weights=np.ones(n),
                     remaining=np.asarray(w.total_steps, float), arrival=np.zeros(n), isolated_time=np.zeros(n),
                     context={"ids": jobs.ids})
    steps = hs.JobSet(jobs.throughputs, gpu_types=cluster.gpu_types, ids=jobs.ids, scale_factors=jobs.scale_factors,
                      steps_remaining=np.asarray(w.total_steps, float))
    return view, steps, cluster


def timed(fn, repeats: int) -> tuple[float, float, object]:
    """Median wall and CPU seconds of ``fn()`` over ``repeats`` runs, and its last result."""
    walls, cpus, out = [], [], None
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        out = fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return float(np.median(walls)), float(np.median(cpus)), out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "synergy_antman.csv")
    ap.add_argument("--no-experiments", dest="experiments", action="store_false",
                    help="only the decision-time table (skip the JCT runs)")
    ap.add_argument("--trace-jobs", type=int, default=300, help="jobs of the JCT runs (default 300)")
    ap.add_argument("--trace-rate", type=float, default=60.0, help="arrivals per hour of the JCT runs (default 60)")
    args = ap.parse_args(argv)
    view, jobs, cluster = view_of(args.jobs, args.seed)
    print(f"{view.n_jobs} active jobs on {cluster.total_gpus} GPUs {cluster.as_dict()} (servers of 8); "
          f"median of {args.repeats}; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    rows = []
    wall_ref, cpu_ref, alloc = timed(lambda: hs.solve("max_min_fairness", jobs, cluster), args.repeats)
    if not alloc.success:
        raise SystemExit(f"max-min fairness did not solve: {alloc.status} ({alloc.message})")
    rows.append({"scheduler": "max_min_fairness", "n_jobs": view.n_jobs, "gpus": cluster.total_gpus,
                 "running": int((np.asarray(alloc.X).sum(axis=1) > 0).sum()), "wall_s": wall_ref,
                 "cpu_s": cpu_ref, "ratio": 1.0, "cpu_ratio": 1.0})
    scheds = {"synergy proportional": Synergy(allocation="proportional"), "synergy tune": Synergy(allocation="tune"),
              "synergy opt": Synergy(allocation="opt"), "antman": AntMan()}
    for name, sched in scheds.items():
        state = sched.initial_state()
        wall, cpu, out = timed(lambda s=sched, st=state: s.plan_round(view, st), args.repeats)
        check_rows(out, view)
        rows.append({"scheduler": name, "n_jobs": view.n_jobs, "gpus": cluster.total_gpus,
                     "running": int(out.n_rows + out.is_pair.sum()), "wall_s": wall, "cpu_s": cpu,
                     "ratio": wall / wall_ref, "cpu_ratio": cpu / cpu_ref})
    print(format_header(COLUMNS))
    for row in rows:
        print(format_line(row, COLUMNS))
    write_csv(rows, args.out)
    print(f"wrote {args.out}")
    if args.experiments:
        synergy_jct(args)
        antman_runs(args)
    return 0


JCT_COLUMNS = (("order", "order", "<6"), ("allocation", "allocation", "<13"), ("avg_jct_h", "avg JCT h", ">9.2f"),
               ("p99_jct_h", "p99 JCT h", ">9.2f"), ("makespan_h", "makespan h", ">10.2f"),
               ("vs_proportional", "vs prop", ">7.3f"), ("wall_s", "wall s", ">7.1f"))


def synergy_jct(args: argparse.Namespace) -> None:
    """Average JCT of GPU-proportional, TUNE, OPT (the LP) and OPT with one configuration per
    job (the MILP) under FIFO, SRTF and LAS on a trace of
    seeded CPU-hungry, memory-hungry and insensitive jobs (a third each), on servers of
    Synergy's shape (8 GPUs, 24 cores, 500 GB)."""
    w = hs.generate_workload(args.trace_jobs, rate_per_hour=args.trace_rate, seed=args.seed, long_job_prob=0.0)
    counts = {"v100": 32, "p100": 32, "k80": 32}
    cluster = hs.Cluster.from_servers(counts, gpus_per_server=8, cpus={t: 3.0 * c for t, c in counts.items()},
                                      memory={t: 62.5 * c for t, c in counts.items()})
    print(f"\nSynergy JCT: {w.n_jobs} jobs (Poisson {args.trace_rate:g}/h, seed {args.seed}, seeded sensitivity) on "
          f"{cluster.as_dict()}, 3 cores and 62.5 GB per GPU; rounds of 360 s")
    print(format_header(JCT_COLUMNS))
    rows = []
    for order in ("fifo", "srtf", "las"):
        base = None
        for alloc in ("proportional", "tune", "opt", "opt integral"):
            t0 = time.perf_counter()
            sched = Synergy(order=order, allocation=alloc.split()[0], opt_integral=alloc == "opt integral",
                            seed=args.seed)
            res = hs.simulate(sched, w, cluster, options=hs.SimOptions(round_seconds=360.0, record_runs=False))
            s = res.summary
            base = s["avg_jct_s"] if base is None else base
            row = {"order": order, "allocation": alloc, "avg_jct_h": s["avg_jct_s"] / 3600,
                   "p99_jct_h": s["p99_jct_s"] / 3600, "makespan_h": s["makespan_s"] / 3600,
                   "vs_proportional": s["avg_jct_s"] / base, "wall_s": time.perf_counter() - t0}
            rows.append(row)
            print(format_line(row, JCT_COLUMNS))
    out = args.out.with_name("synergy_jct.csv")
    write_csv(rows, out)
    print(f"wrote {out}")


AM_COLUMNS = (("run", "run", "<26"), ("guaranteed_avg_jct_h", "G JCT h", ">8.2f"),
              ("opportunistic_avg_jct_h", "O JCT h", ">8.2f"), ("guaranteed_slowdown", "G slowdown", ">10.4f"),
              ("gpu_allocated", "GPU held", ">8.3f"), ("gpu_busy", "GPU busy", ">8.3f"),
              ("evictions", "evictions", ">9d"))


def antman_runs(args: argparse.Namespace) -> None:
    """AntMan on a generated trace (half the jobs opportunistic, seeded utilisation and
    memory; memory of every guaranteed job doubles after an hour of running) against the same
    jobs with no sharing (every job exclusive, FIFO): JCT of each class, the guaranteed jobs'
    slowdown, GPU time held and busy, evictions."""
    w = hs.generate_workload(args.trace_jobs, rate_per_hour=args.trace_rate, seed=args.seed, long_job_prob=0.0)
    ids = w.jobs.ids
    cluster = hs.Cluster({"v100": 32, "p100": 32, "k80": 32})
    probe = AntMan(seed=args.seed)
    data = probe.jobs_of(ids)
    grow = {jid: ([(0, float(v[0])), (3600, min(2 * float(v[0]), 11.0))] if not o else float(v[0]))
            for jid, v, o in zip(ids.tolist(), data.mem_values, data.opportunistic)}
    classes = {jid: ("opportunistic" if o else "guaranteed") for jid, o in zip(ids.tolist(), data.opportunistic)}
    util = dict(zip(ids.tolist(), data.utilization.tolist()))
    print(f"\nAntMan: {w.n_jobs} jobs ({int(data.opportunistic.sum())} opportunistic) on {cluster.as_dict()}")
    print(format_header(AM_COLUMNS))
    rows = []
    for run, sched in (("antman evict", AntMan(job_class=classes, gpu_memory=grow, utilization=util)),
                       ("antman throttle", AntMan(job_class=classes, gpu_memory=grow, utilization=util,
                                                  on_grow="throttle")),
                       ("exclusive (no sharing)", AntMan(job_class=dict.fromkeys(ids.tolist(), "guaranteed"),
                                                         gpu_memory=grow, utilization=util))):
        res = hs.simulate(sched, w, cluster, options=hs.SimOptions(round_seconds=360.0))
        rep = antman_report(res, sched)
        jct = res.jobs["jct_s"].to_numpy(float)
        opp = data.opportunistic
        row = {"run": run, "guaranteed_avg_jct_h": float(np.nanmean(jct[~opp])) / 3600,
               "opportunistic_avg_jct_h": float(np.nanmean(jct[opp])) / 3600,
               "guaranteed_slowdown": rep["guaranteed_slowdown"], "gpu_allocated": rep["gpu_allocated"],
               "gpu_busy": rep["gpu_busy"], "evictions": int(rep["evictions"])}
        rows.append(row)
        print(format_line(row, AM_COLUMNS))
    out = args.out.with_name("antman_report.csv")
    write_csv(rows, out)
    print(f"wrote {out}")


if __name__ == "__main__":
    raise SystemExit(main())
