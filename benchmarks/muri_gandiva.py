"""Muri (SIGCOMM'22) and Gandiva (OSDI'18): per-round decision time at scale, and what each
gains on a trace.

Part 1 (``decision``): one round's decision at 1,000 active jobs on 1,024 GPUs
(384 V100 + 320 P100 + 320 K80; Gavel-mix gangs, so the jobs ask for ~1.9x the GPUs and
Muri groups): ``Muri.plan_round`` and ``GandivaIntrospective.plan_round`` (a fresh state, and
one that measured the pairs of a first round) beside the max-min fairness solve
(``hs.solve(MaxMinFairness(), ...)``, HiGHS) of the same jobs, in the same process. Median
of ``--repeats`` runs; wall and CPU seconds (``time.process_time``) and the ratio to the
max-min solve. Target (issue 27): each <= 10x max-min.

Part 2 (``trace``): a generated trace (Gavel's mix, default phases, the catalogue's pair
table) simulated with Muri (groups of 4), Muri with pairs only, Muri without interleaving,
Gavel's max-min fairness with pair packing (space sharing from the same pair table),
Gandiva, and Gandiva without packing / grow-shrink: average and p99 JCT, makespan (hours).

Usage::

    python benchmarks/muri_gandiva.py                 # both parts
    python benchmarks/muri_gandiva.py --part decision --repeats 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import hetsched as hs
from hetsched.rounds.protocol import RoundView
from hetsched.schedulers.gandiva import GandivaIntrospective
from hetsched.schedulers.muri import Muri

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import format_header, format_line, write_csv  # noqa: E402

ROOT = Path(__file__).resolve().parent
BIG = {"v100": 384, "p100": 320, "k80": 320}


def _timed(fn, repeats: int) -> tuple[float, float, object]:
    walls, cpus, out = [], [], None
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus), out


def decision(n_jobs: int, repeats: int, seed: int) -> list[dict]:
    cluster = hs.Cluster(BIG)
    w = hs.generate_workload(n_jobs, rate_per_hour=1e6, seed=seed, pairs=True, cluster=cluster)
    types = tuple(cluster.gpu_types)
    T = np.asarray(w.jobs.with_columns(types).throughputs, dtype=float)
    s = w.jobs.scale_factors.astype(np.int64)
    n = T.shape[0]
    view = RoundView(now=0.0, round_index=0, round_seconds=360.0, cluster=cluster, gpu_types=types,
                     capacities=cluster.capacities(types).astype(np.int64), jobs=np.arange(n, dtype=np.int64),
                     throughputs=T, unconsolidated=None, scale_factors=s, weights=np.ones(n),
                     remaining=np.asarray(w.total_steps, float), arrival=np.zeros(n), isolated_time=np.zeros(n),
                     context={"ids": w.jobs.ids, "catalogue": w.catalogue, "catalogue_rows": w.catalogue_rows},
                     waiting=np.random.default_rng(seed).uniform(0, 3600, n))
    jobs = hs.JobSet(T, gpu_types=types, ids=np.arange(n), scale_factors=s)
    rows = []
    mm_wall, mm_cpu, alloc = _timed(lambda: hs.solve(hs.policies.MaxMinFairness(), jobs, cluster), repeats)
    rows.append({"what": "max_min_fairness solve (reference)", "n_jobs": n, "gpus": int(sum(BIG.values())),
                 "wall_s": mm_wall, "cpu_s": mm_cpu, "ratio_wall": 1.0, "ratio_cpu": 1.0,
                 "note": f"status {alloc.status}"})
    muri = Muri()
    st = muri.initial_state()
    wall, cpu, r = _timed(lambda: muri.plan_round(view, st), repeats)
    rows.append({"what": "muri plan_round", "n_jobs": n, "gpus": int(sum(BIG.values())), "wall_s": wall, "cpu_s": cpu,
                 "ratio_wall": wall / mm_wall, "ratio_cpu": cpu / mm_cpu,
                 "note": f"{r.info['groups']} groups, {r.n_rows} rows"})
    g = GandivaIntrospective()
    st = g.initial_state()
    wall, cpu, r = _timed(lambda: g.plan_round(view, st), repeats)
    rows.append({"what": "gandiva plan_round (nothing measured)", "n_jobs": n, "gpus": int(sum(BIG.values())),
                 "wall_s": wall, "cpu_s": cpu, "ratio_wall": wall / mm_wall, "ratio_cpu": cpu / mm_cpu,
                 "note": f"{r.info['pairs']} pairs, {r.n_rows} rows"})
    g8 = GandivaIntrospective(max_trials=64)
    st = g8.initial_state()
    for _ in range(5):          # measure some pairs first
        rr = g8.plan_round(view, st)
        st = g8.record_round(st, rr, np.full(rr.n_rows, 360.0))
    wall, cpu, r = _timed(lambda: g8.plan_round(view, st), repeats)
    rows.append({"what": "gandiva plan_round (max_trials=64, after 5 rounds)", "n_jobs": n,
                 "gpus": int(sum(BIG.values())), "wall_s": wall, "cpu_s": cpu, "ratio_wall": wall / mm_wall,
                 "ratio_cpu": cpu / mm_cpu, "note": f"{st.pair_a.size} pairs measured, {r.info['pairs']} packed"})
    return rows


def trace(n_jobs: int, seed: int) -> list[dict]:
    cluster = hs.Cluster({"v100": 8, "p100": 8, "k80": 8})
    w = hs.generate_workload(n_jobs, rate_per_hour=12.0, seed=seed, pairs=True, cluster=cluster)
    runs = {
        "muri (groups of <= 4)": Muri(),
        "muri (pairs only)": Muri(max_group=2),
        "muri (no interleaving)": Muri(max_group=1),
        "max_min_fairness + pair packing": hs.policies.MaxMinFairness(packing="workload"),
        "gandiva": GandivaIntrospective(),
        "gandiva (no packing)": GandivaIntrospective(max_trials=0),
        "gandiva (no packing, no grow)": GandivaIntrospective(max_trials=0, grow=False),
    }
    rows = []
    for name, sched in runs.items():
        w0, c0 = time.perf_counter(), time.process_time()
        res = hs.simulate(sched, w, cluster)
        sm = res.summary
        rows.append({"what": name, "n_jobs": n_jobs, "completed": int(sm["n_completed"]),
                     "avg_jct_h": float(sm["avg_jct_s"]) / 3600, "p99_jct_h": float(sm["p99_jct_s"]) / 3600,
                     "makespan_h": float(sm["makespan_s"]) / 3600, "wall_s": time.perf_counter() - w0,
                     "cpu_s": time.process_time() - c0})
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["decision", "trace", "both"], default="both")
    ap.add_argument("--jobs", type=int, default=1000, help="active jobs of the decision part")
    ap.add_argument("--trace-jobs", type=int, default=120)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=ROOT / "results")
    args = ap.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs (shared machine: compare CPU seconds)")
    if args.part in ("decision", "both"):
        rows = decision(args.jobs, args.repeats, args.seed)
        cols = [("what", "what", "<52"), ("n_jobs", "jobs", ">6d"), ("gpus", "GPUs", ">6d"), ("wall_s", "wall s", ">9.3f"),
                ("cpu_s", "CPU s", ">9.3f"), ("ratio_wall", "x wall", ">7.2f"), ("ratio_cpu", "x CPU", ">7.2f"),
                ("note", "note", "<30")]
        print(format_header(cols))
        for r in rows:
            print(format_line(r, cols))
        write_csv(rows, args.out / "muri_gandiva_decision.csv")
    if args.part in ("trace", "both"):
        rows = trace(args.trace_jobs, args.seed)
        cols = [("what", "what", "<34"), ("completed", "done", ">5d"), ("avg_jct_h", "avg JCT h", ">10.2f"),
                ("p99_jct_h", "p99 JCT h", ">10.2f"), ("makespan_h", "makespan h", ">11.2f"),
                ("wall_s", "wall s", ">8.2f"), ("cpu_s", "CPU s", ">8.2f")]
        print(format_header(cols))
        for r in rows:
            print(format_line(r, cols))
        write_csv(rows, args.out / "muri_gandiva_trace.csv")


if __name__ == "__main__":
    main()
