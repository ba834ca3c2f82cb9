"""Pollux configuration search: exact ILP (HiGHS) against Pollux's genetic search.

Random instances shaped like Pollux rounds on a 3-type cluster (a100 and v100 in 8-GPU
nodes, t4 in 4-GPU nodes; the GPUs split about evenly in whole nodes). Configurations are
Sia's set (``hetsched.formulations.sia.configurations.configuration_set``: in-node powers of
two, then whole nodes, at most ``--max-gpus`` GPUs). Each job's value of configuration
(k, n over N nodes) is

    s = f_j * r_jk * g_j(n, N) * (1 - d_j if the job runs elsewhere now)

with f_j lognormal (per-job factor), r_jk the type's speed (1, 0.6, 0.3) times lognormal
noise, g_j a concave speedup (``scaling_factor``: sync overheads o_j inside a node and
2.5 o_j across nodes, statistical efficiency with noise-scale ratio nu_j), and a restart
discount d_j ~ U(0.05, 0.3) on every configuration but the job's current one. The current
configurations are last round's: the exact optimum (gap 1e-4) for the jobs that ran then —
all but ``--pending`` (default 10 %), the arrivals since — on values that have drifted since
(each times a lognormal factor, sigma 0.2). The fitness is Pollux's power mean
(p = -1, eps = 1e-3). Both searches get the same instance; the genetic search starts from
the current configurations (population 100, 100 generations).

Columns: ``gpus, jobs, configs, columns`` (ILP binaries after pruning), ``exact_s``,
``exact_fitness``, ``exact_status``, ``gap`` (HiGHS's relative gap), ``ga_s``,
``ga_fitness``, ``ratio = ga_fitness / exact_fitness``, ``speedup = ga_s / exact_s``.

Usage::

    python benchmarks/pollux_search.py --quick     # 64 GPUs x 50 jobs
    python benchmarks/pollux_search.py             # adds 256 x 100 and 1,024 x 500
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
from hetsched.adaptive.search import SearchProblem, exact_search, genetic_search
from hetsched.formulations.sia.configurations import configuration_set, scaling_factor
from hetsched.validation import check_output_path

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "pollux_search.csv"

#: (type, GPUs per node, relative speed)
TYPES = (("a100", 8, 1.0), ("v100", 8, 0.6), ("t4", 4, 0.3))
SIZES = ((64, 50), (256, 100), (1024, 500))


def make_cluster(gpus: int) -> hs.Cluster:
    """``gpus`` GPUs over the three types: the 8-GPU types get about a third each in whole
    nodes, the 4-GPU type the rest."""
    third = gpus / len(TYPES)
    counts = {}
    for name, per, _ in TYPES[:-1]:
        counts[name] = max(per, int(third // per) * per)
    last, per_last, _ = TYPES[-1]
    counts[last] = max(per_last, (gpus - sum(counts.values())) // per_last * per_last)
    return hs.Cluster.from_servers(counts, gpus_per_server={t: per for t, per, _ in TYPES})


def make_instance(gpus: int, jobs: int, seed: int, max_gpus: int,
                  pending: float = 0.1) -> tuple[SearchProblem, np.ndarray]:
    """A Pollux-like round: (problem, current configurations)."""
    rng = np.random.default_rng([seed, gpus, jobs, int(pending * 1000)])
    cluster = make_cluster(gpus)
    types = [t for t, _, _ in TYPES]
    cs = configuration_set(cluster, types, max_gpus=max_gpus)
    cap = cluster.capacities(types).astype(np.int64)
    speed = np.array([s for _, _, s in TYPES])
    f = rng.lognormal(0.0, 0.5, size=jobs)
    r = speed[None, :] * rng.lognormal(0.0, 0.3, size=(jobs, len(TYPES)))
    o = rng.uniform(0.02, 0.25, size=jobs)
    nu = rng.lognormal(np.log(8.0), 1.0, size=jobs)
    g = np.stack([scaling_factor(cs.gpus, cs.nodes, intra_node_overhead=o[j], inter_node_overhead=2.5 * o[j],
                                 noise_scale_ratio=nu[j]) for j in range(jobs)])
    value = f[:, None] * r[:, cs.type_index] * g
    allowed = np.ones_like(value, dtype=bool)
    # current configurations: last round's optimum for the jobs that ran then (all but a
    # `pending` share, the arrivals since), with values that have drifted since (x lognormal)
    arrived = np.zeros(jobs, dtype=bool)
    arrived[rng.permutation(jobs)[: int(round(jobs * pending))]] = True
    before = value * rng.lognormal(0.0, 0.2, size=value.shape)
    last = SearchProblem(value=before, allowed=np.repeat(~arrived[:, None], cs.n_configs, axis=1),
                         config_type=cs.type_index, config_gpus=cs.gpus, capacities=cap, p=-1.0, eps=1e-3)
    current = exact_search(last, mip_gap=1e-4, time_limit=60.0).choice.copy()
    discount = rng.uniform(0.05, 0.3, size=jobs)
    running = current >= 0
    factor = np.where(running[:, None], 1.0 - discount[:, None], 1.0) * np.ones_like(value)
    factor[np.flatnonzero(running), current[running]] = 1.0
    problem = SearchProblem(value=value * factor, allowed=allowed, config_type=cs.type_index,
                            config_gpus=cs.gpus, capacities=cap, p=-1.0, eps=1e-3)
    return problem, current


def run_one(gpus: int, jobs: int, args: argparse.Namespace) -> dict:
    problem, current = make_instance(gpus, jobs, args.seed, args.max_gpus, args.pending)
    ex = exact_search(problem, time_limit=args.time_limit, mip_gap=args.mip_gap)
    ga = genetic_search(problem, seed=args.seed, population=args.population, generations=args.generations,
                        initial=current)
    for res in (ex, ga):
        if res.status != "failed" and not problem.feasible(res.choice):
            raise AssertionError(f"{res.method} search returned an infeasible assignment")
    return {
        "gpus": int(problem.capacities.sum()), "jobs": jobs, "configs": problem.n_configs,
        "columns": ex.info["columns"], "exact_s": ex.seconds, "exact_fitness": ex.fitness,
        "exact_status": ex.status, "gap": ex.gap if ex.gap is not None else math.nan,
        "ga_s": ga.seconds, "ga_fitness": ga.fitness, "ratio": ga.fitness / ex.fitness,
        "speedup": ga.seconds / ex.seconds,
        "exact_alloc": int((ex.choice >= 0).sum()), "ga_alloc": int((ga.choice >= 0).sum()),
        "running_now": int((current >= 0).sum()), "current_fitness": problem.fitness(current),
    }


COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("gpus", "gpus", ">6"), ("jobs", "jobs", ">5"), ("configs", "cfgs", ">5"), ("columns", "columns", ">8"),
    ("exact_s", "exact_s", ">8.3f"), ("exact_fitness", "exact_fit", ">10.5f"), ("exact_status", "status", "<10"),
    ("gap", "gap", ">8.1e"), ("ga_s", "ga_s", ">7.3f"), ("ga_fitness", "ga_fit", ">10.5f"),
    ("ratio", "ratio", ">7.4f"), ("speedup", "ga/ex_s", ">7.2f"), ("running_now", "run_now", ">7"),
    ("exact_alloc", "ex_alloc", ">8"), ("ga_alloc", "ga_alloc", ">8"),
)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="64 GPUs x 50 jobs only")
    p.add_argument("--mip-gap", type=float, default=1e-6, help="HiGHS relative gap (default 1e-6)")
    p.add_argument("--time-limit", type=float, default=120.0, help="seconds per exact search (default 120)")
    p.add_argument("--population", type=int, default=100)
    p.add_argument("--generations", type=int, default=100)
    p.add_argument("--max-gpus", type=int, default=64, help="largest configuration (default 64, Sia's)")
    p.add_argument("--pending", type=float, default=0.1,
                   help="share of jobs without GPUs now (arrivals since the last round; default 0.1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"CSV path (default {DEFAULT_OUT})")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    check_output_path(str(args.out), "file")
    t0, cpu0 = time.perf_counter(), time.process_time()
    warm, cur = make_instance(16, 8, args.seed, args.max_gpus)  # warm-up: imports, first HiGHS call
    exact_search(warm)
    genetic_search(warm, seed=0, population=4, generations=2, initial=cur)
    print(f"Pollux search, p = -1, mip_gap = {args.mip_gap}, time limit {args.time_limit}s, "
          f"GA {args.population} x {args.generations}; {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs", flush=True)
    print(format_header(COLUMNS), flush=True)
    rows = []
    for gpus, jobs in SIZES[:1] if args.quick else SIZES:
        row = run_one(gpus, jobs, args)
        print(format_line(row, COLUMNS), flush=True)
        rows.append(row)
    write_csv(rows, args.out, digits=8)
    for r in rows:
        if r["ratio"] > 1 + 1e-9:
            print(f"note: {r['gpus']} GPUs x {r['jobs']} jobs: the genetic search beat the exact one "
                  f"(exact status {r['exact_status']!r})")
    print(f"wrote {args.out} ({len(rows)} rows); {time.perf_counter() - t0:.1f}s wall, "
          f"{time.process_time() - cpu0:.1f}s CPU")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
