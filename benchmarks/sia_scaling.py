"""Sia scaling: the goodput ILP on clusters of 64 to 8,192 GPUs.

For each cluster size (64, 512, 2,048, 8,192 GPUs), number of GPU types (3 or 6; types
alternate 8-GPU and 4-GPU servers, as in Sia's testbeds) and load (0.5, 1 and 2 jobs per
GPU), this draws jobs from the project's generated throughput catalogue (Gavel's
scale-factor mix 1/2/4/8 w.p. .70/.10/.15/.05; ``T`` is the measurement at the job's scale
factor and Sia's bootstrap extrapolates it to every configuration), times
``hs.solve(Sia(...), jobs, cluster)`` and reports:

* ``build_s`` — configurations, goodput, utilities, and the LP bound (Kelley on the
  capacity prices; see ``hetsched.formulations.sia.policy``), plus building the program(s);
* ``solve_s`` — the MIP solver (HiGHS, ``mip_rel_gap``) on the program(s) it gets;
* ``gap`` — the proven relative gap of the returned solution; ``lp_gap`` —
  ``(LP bound - ILP value) / ILP value``; ``objective`` and ``lp_bound`` in Sia's units;
* ``columns`` — binary variables of the full ILP; ``reduced`` — of the program solved last;
* ``alloc`` — jobs given GPUs; ``used`` — fraction of GPUs given out;
* ``full_s`` / ``speedup`` — the reference: the same ILP with every column through HiGHS's
  MIP (``column_reduction=False``), as Sia's artifact solves it (one MIP over all jobs and
  configurations), where it has at most ``--ref-max-columns`` columns; ``full_objective``.

Every solution is checked independently (each job at most one configuration; the chosen
GPU counts per type within capacity); ``violation`` is the largest excess.

Usage::

    python benchmarks/sia_scaling.py --quick     # 64-2,048 GPUs, under a minute on 2 cores
    python benchmarks/sia_scaling.py             # adds 8,192 GPUs and larger references
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from _table import format_header, format_line, write_csv

import hetsched as hs
from hetsched.formulations.sia.policy import Sia
from hetsched.inputs.throughputs import generate_catalogue
from hetsched.inputs.workloads import sample_jobs

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "sia_scaling.csv"

#: GPU types (name -> median speedup over a K80), the first m are used.
GPU_TYPES = {"a100": 8.0, "v100": 4.0, "t4": 1.5, "p100": 3.0, "rtx6000": 3.5, "k80": 1.0}
#: Servers alternate 8 and 4 GPUs by type (Sia's testbeds mix 8-GPU and 4-GPU nodes).
SERVER_SIZES = (8, 4)


def make_instance(gpus: int, m: int, ratio: float, seed: int) -> tuple[hs.JobSet, hs.Cluster]:
    """Jobs drawn from a generated catalogue, and a cluster of ``gpus`` GPUs over m types."""
    rng = np.random.default_rng([seed, gpus, m, int(ratio * 100)])
    types = dict(list(GPU_TYPES.items())[:m])
    catalogue = generate_catalogue(n_job_types=20, gpu_types=types, seed=seed)
    jobs = sample_jobs(catalogue, max(1, int(round(gpus * ratio))), seed=rng, id_prefix=None).jobs
    per = gpus // m
    counts = {t: per + (1 if k < gpus - per * m else 0) for k, t in enumerate(types)}
    sizes = {t: SERVER_SIZES[k % 2] for k, t in enumerate(types)}
    return jobs, hs.Cluster.from_servers(counts, gpus_per_server=sizes)


def check(res: hs.Allocation, cluster: hs.Cluster) -> float:
    """Largest capacity excess of the chosen counts (0 when feasible); inf when X is not 0/1."""
    X = res.X
    if not np.isin(X, (0.0, 1.0)).all() or (X.sum(axis=1) > 1).any():
        return math.inf
    gpus = res.extra["configurations"]["gpus"].to_numpy(dtype=float)
    used = gpus @ X
    return float(np.max(used - cluster.capacities(res.gpu_types), initial=0.0))


def run_one(gpus: int, m: int, ratio: float, args: argparse.Namespace) -> dict:
    jobs, cluster = make_instance(gpus, m, ratio, args.seed)
    pol = Sia(fairness_power=args.p, mip_gap=args.mip_gap)
    t0 = time.perf_counter()
    res = hs.solve(pol, jobs, cluster, time_limit=args.time_limit)
    total = time.perf_counter() - t0
    ex = res.extra
    cfg = ex["configurations"]
    n_cols = int(ex["n_columns"])
    row = {
        "gpus": gpus, "types": m, "jobs": jobs.n_jobs, "ratio": ratio,
        "configs": len(ex["configuration_set"]), "columns": n_cols,
        "reduced": ex["rounds"][-1]["columns"], "programs": len(ex["rounds"]),
        "build_s": res.timings["build_s"], "solve_s": res.timings["solve_s"], "total_s": total,
        "gap": ex["mip_gap"] if ex["mip_gap"] is not None else math.nan,
        "lp_gap": ex["lp_gap"], "objective": res.objective, "lp_bound": ex["lp_bound"],
        "alloc": int((cfg["gpus"] > 0).sum()),
        "used": float(cfg["gpus"].sum()) / cluster.total_gpus,
        "violation": check(res, cluster) if res.has_solution else math.nan,
        "status": res.status, "full_s": math.nan, "speedup": math.nan, "full_objective": math.nan,
        "full_status": "skipped",
    }
    if not args.no_reference and n_cols <= args.ref_max_columns:
        t0 = time.perf_counter()
        full = hs.solve(Sia(fairness_power=args.p, mip_gap=args.mip_gap, column_reduction=False), jobs, cluster,
                        time_limit=args.ref_time_limit)
        row["full_s"] = time.perf_counter() - t0
        row["speedup"] = row["full_s"] / total
        row["full_objective"] = full.objective
        row["full_status"] = full.status
    return row


COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("gpus", "gpus", ">6"), ("types", "m", ">2"), ("jobs", "jobs", ">6"), ("configs", "cfgs", ">5"),
    ("columns", "columns", ">8"), ("reduced", "reduced", ">7"), ("programs", "ILPs", ">4"),
    ("build_s", "build_s", ">8.3f"), ("solve_s", "solve_s", ">8.3f"), ("total_s", "total_s", ">8.3f"),
    ("gap", "gap", ">8.1e"), ("lp_gap", "lp_gap", ">8.1e"), ("objective", "objective", ">11.5g"),
    ("lp_bound", "lp_bound", ">11.5g"), ("alloc", "alloc", ">6"), ("used", "used", ">5.2f"),
    ("full_s", "full_s", ">7.2f"), ("speedup", "speedup", ">7.1f"), ("status", "status", "<10"),
)


def notes(rows: Sequence[dict], mip_gap: float) -> list[str]:
    out = []
    for r in rows:
        tag = f"{r['gpus']} GPUs m={r['types']} jobs={r['jobs']}"
        if r["status"] != "optimal":
            out.append(f"{tag}: status {r['status']!r}")
        if not (r["violation"] <= 1e-9):
            out.append(f"{tag}: capacity check failed ({r['violation']})")
        if r["gap"] > mip_gap + 1e-12:
            out.append(f"{tag}: gap {r['gap']:.2e} above the requested {mip_gap}")
        if r["full_status"] == "optimal":
            rel = (r["full_objective"] - r["objective"]) / max(abs(r["objective"]), 1e-300)
            if rel > mip_gap:
                out.append(f"{tag}: the full ILP found a better objective ({r['full_objective']:.9g} vs {r['objective']:.9g})")
        elif r["full_status"] != "skipped":
            out.append(f"{tag}: full ILP ended {r['full_status']!r} (time limit {r['full_s']:.0f}s)")
    return out


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="64, 512 and 2,048 GPUs; references up to 20,000 columns")
    p.add_argument("--sizes", nargs="+", type=int, default=None, help="cluster sizes in GPUs")
    p.add_argument("--types", nargs="+", type=int, default=[3, 6], help="numbers of GPU types (3-6)")
    p.add_argument("--ratios", nargs="+", type=float, default=[0.5, 1.0, 2.0], help="jobs per GPU")
    p.add_argument("--p", type=float, default=-0.5, help="Sia's fairness power (default -0.5)")
    p.add_argument("--mip-gap", type=float, default=0.01)
    p.add_argument("--time-limit", type=float, default=None, help="seconds per hetsched solve")
    p.add_argument("--ref-max-columns", type=int, default=None,
                   help="largest full ILP given a reference solve (default 20,000; 130,000 without --quick)")
    p.add_argument("--ref-time-limit", type=float, default=120.0, help="seconds per reference solve")
    p.add_argument("--no-reference", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"CSV path (default {DEFAULT_OUT})")
    args = p.parse_args(argv)
    if args.sizes is None:
        args.sizes = [64, 512, 2048] if args.quick else [64, 512, 2048, 8192]
    if args.ref_max_columns is None:
        args.ref_max_columns = 20_000 if args.quick else 130_000
    if any(not 1 <= m <= len(GPU_TYPES) for m in args.types):
        p.error(f"--types must be between 1 and {len(GPU_TYPES)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    t0, cpu0 = time.perf_counter(), time.process_time()
    jobs, cluster = make_instance(16, 2, 1.0, args.seed)  # warm-up: imports, first HiGHS call
    hs.solve(Sia(), jobs, cluster)
    print(f"Sia ILP, p = {args.p}, mip_gap = {args.mip_gap}; {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs", flush=True)
    print(format_header(COLUMNS), flush=True)
    rows = []
    for gpus in args.sizes:
        for m in args.types:
            for ratio in args.ratios:
                row = run_one(gpus, m, ratio, args)
                print(format_line(row, COLUMNS), flush=True)
                rows.append(row)
    write_csv(rows, args.out, digits=6)
    for line in notes(rows, args.mip_gap):
        print("note:", line)
    print(f"wrote {args.out} ({len(rows)} rows); {time.perf_counter() - t0:.1f}s wall, "
          f"{time.process_time() - cpu0:.1f}s CPU")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
