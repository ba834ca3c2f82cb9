"""One round of each seed scheduler at 10^4-10^5 active jobs, beside max-min fairness.

The decision-time benchmarks of the seed schedulers (``themis_auction.py``,
``synergy_antman.py``, ``muri_gandiva.py``) stop at 1,000 active jobs. This one times the
first round (every job active, nothing run yet) of Themis (f = 0.8 and f = 0), Synergy
(proportional, TUNE, OPT), AntMan, Muri and Gandiva at larger sizes, on a cluster with as many
GPUs as jobs (v100, p100, k80 in servers of 8), against ``hs.solve("max_min_fairness")`` on
the same jobs in the same run. Each scheduler runs in a child process with a time limit
(``--limit``, seconds): a case that does not finish is recorded as such, not left out.

Wall and CPU seconds (``time.process_time``, the child's); the machine may be shared: the
load average is printed and written.

Usage::

    python benchmarks/seed_schedulers_scale.py [--sizes 10000 100000] [--limit 600]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import format_header, format_line, write_csv  # noqa: E402

ROOT = Path(__file__).resolve().parent
COLUMNS = (("scheduler", "scheduler", "<22"), ("n_jobs", "jobs", ">7"), ("gpus", "GPUs", ">7"),
           ("wall_s", "wall s", ">9.3f"), ("cpu_s", "CPU s", ">9.3f"), ("ratio", "x max-min", ">9.2f"),
           ("rows", "rows", ">7"), ("note", "note", "<40"))
SCHEDULERS = ("max_min_fairness", "themis f=0.8", "themis f=0", "synergy proportional", "synergy tune",
              "synergy opt", "antman", "muri", "gandiva")


def view_of(n_jobs: int, seed: int):
    """The round view of ``n_jobs`` jobs all active at t = 0 on ``n_jobs`` GPUs, and its JobSet."""
    import hetsched as hs
    from hetsched.rounds.protocol import RoundView

    third = n_jobs // 3 // 8 * 8
    counts = {"v100": n_jobs // 8 * 8 - 2 * third, "p100": third, "k80": third}
    cluster = hs.Cluster.from_servers(counts, gpus_per_server=8)
    w = hs.generate_workload(n_jobs, rate_per_hour=1e9, seed=seed, pairs=True, cluster=cluster)
    types = tuple(cluster.gpu_types)
    jobs = w.jobs.with_columns(types)
    n = jobs.n_jobs
    T = np.asarray(jobs.throughputs, float)
    view = RoundView(now=0.0, round_index=0, round_seconds=360.0, cluster=cluster, gpu_types=types,
                     capacities=cluster.capacities(types).astype(np.int64), jobs=np.arange(n, dtype=np.int64),
                     throughputs=T, unconsolidated=None, scale_factors=jobs.scale_factors.astype(np.int64),
                     weights=np.ones(n), remaining=np.asarray(w.total_steps, float), arrival=np.zeros(n),
                     isolated_time=np.zeros(n),
                     context={"ids": np.asarray(jobs.ids), "catalogue": w.catalogue,
                              "catalogue_rows": w.catalogue_rows},
                     waiting=np.zeros(n))
    js = hs.JobSet(T, gpu_types=types, scale_factors=jobs.scale_factors, steps_remaining=np.asarray(w.total_steps))
    return view, js, cluster


def _make(name: str):
    from hetsched.schedulers import Themis
    from hetsched.schedulers.antman import AntMan
    from hetsched.schedulers.gandiva import GandivaIntrospective
    from hetsched.schedulers.muri import Muri
    from hetsched.schedulers.synergy import Synergy

    return {"themis f=0.8": lambda: Themis(fairness_knob=0.8), "themis f=0": lambda: Themis(fairness_knob=0.0),
            "synergy proportional": lambda: Synergy(allocation="proportional"),
            "synergy tune": lambda: Synergy(allocation="tune"), "synergy opt": lambda: Synergy(allocation="opt"),
            "antman": AntMan, "muri": Muri, "gandiva": GandivaIntrospective}[name]()


def _child(name: str, n_jobs: int, seed: int, queue) -> None:
    import hetsched as hs

    view, js, cluster = view_of(n_jobs, seed)
    w0, c0 = time.perf_counter(), time.process_time()
    if name == "max_min_fairness":
        out = hs.solve("max_min_fairness", js, cluster)
        rows, note = int((np.asarray(out.X).sum(axis=1) > 0).sum()), out.status
    else:
        sched = _make(name)
        out = sched.plan_round(view, sched.initial_state())
        rows = int(out.n_rows)
        info = getattr(out, "info", {}) or {}
        note = ", ".join(f"{k} {info[k]}" for k in ("bidders", "solve_classes", "groups", "pairs", "solve_status")
                         if k in info)
    queue.put((time.perf_counter() - w0, time.process_time() - c0, rows, note))


def run_case(name: str, n_jobs: int, seed: int, limit: float) -> dict:
    """One scheduler's first round in a child process (killed after ``limit`` seconds)."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(name, n_jobs, seed, q))
    p.start()
    p.join(limit)
    if p.is_alive():
        p.kill()
        p.join()
        return {"scheduler": name, "n_jobs": n_jobs, "wall_s": np.nan, "cpu_s": np.nan, "rows": -1,
                "note": f"did not finish in {limit:g} s"}
    if q.empty():
        return {"scheduler": name, "n_jobs": n_jobs, "wall_s": np.nan, "cpu_s": np.nan, "rows": -1,
                "note": f"failed (exit code {p.exitcode})"}
    wall, cpu, rows, note = q.get()
    return {"scheduler": name, "n_jobs": n_jobs, "wall_s": wall, "cpu_s": cpu, "rows": rows, "note": note}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--limit", type=float, default=600.0, help="seconds per case before it is killed")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--schedulers", nargs="+", default=list(SCHEDULERS), choices=SCHEDULERS)
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "seed_schedulers_scale.csv")
    args = ap.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; limit {args.limit:g} s per case")
    print(format_header(COLUMNS))
    rows = []
    for n in args.sizes:
        ref = None
        for name in ["max_min_fairness"] + [s for s in args.schedulers if s != "max_min_fairness"]:
            row = run_case(name, n, args.seed, args.limit)
            row["gpus"] = n // 8 * 8
            if name == "max_min_fairness":
                ref = row["wall_s"]
            row["ratio"] = row["wall_s"] / ref if ref else np.nan
            row["load"] = os.getloadavg()[0]
            print(format_line(row, COLUMNS), flush=True)
            rows.append(row)
    write_csv(rows, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
