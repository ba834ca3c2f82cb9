"""The Slurm driver's own time per round (issue 28 "Speed"): ``SlurmDriver.run_round`` against
the in-memory command layer (:class:`hetsched.slurm.FakeSlurm`), so that what is timed is the
driver — reading the queue, reconciling it with the store, reading the spool, turning the plan
into batched commands — and, reported beside it, the plan (``OnlineScheduler.next_round``,
the solve included).

Per size (``--jobs``, default 1,000 and 10,000): a partition of nodes with 8 GPUs of one type
each (V100, P100, K80 in turn) holding half as many GPUs as there are jobs; jobs of 1, 2 or 4
GPUs (probabilities 0.8/0.15/0.05, seed ``--seed``), submitted held with their throughputs in
``--comment``; the store on local disk (``synchronous=NORMAL``). The first round (every job
submitted, the first solve) is timed apart; then ``--rounds`` rounds are timed, each after
every running job appended a progress line to the spool. Per round: the driver's seconds
(``run_round`` minus ``next_round``), the plan's seconds, the Slurm commands it ran and the
jobs it started and preempted. Prints a table and writes ``benchmarks/results/slurm_driver.csv``.

Usage::

    python benchmarks/slurm_driver.py            # 1,000 and 10,000 jobs
    python benchmarks/slurm_driver.py --dir /tmp /dev/shm   # on disk, and in memory (no fsync waits)
    python benchmarks/slurm_driver.py --quick    # 1,000 jobs, 3 rounds
"""

from __future__ import annotations

import argparse
import logging
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from _table import format_header, format_line, write_csv

from hetsched.slurm import FakeSlurm, SlurmDriver, report

RESULTS = Path(__file__).resolve().parent / "results"
TYPES = ("v100", "p100", "k80")
RATES = {"v100": 3.0, "p100": 2.0, "k80": 1.0}
COLUMNS = [("dir", "store in", "<9s"), ("jobs", "jobs", ">7d"), ("gpus", "GPUs", ">6d"), ("first_s", "first round (s)", ">15.2f"),
           ("driver_s", "driver median (s)", ">17.3f"), ("driver_max_s", "driver max (s)", ">14.3f"),
           ("plan_s", "plan median (s)", ">15.3f"), ("commands", "commands/round", ">14.1f"),
           ("started", "started/round", ">13.1f"), ("preempted", "preempted/round", ">15.1f")]


def run_size(n_jobs: int, rounds: int, seed: int, scheduler: str, where: str | None = None) -> dict:
    """One size: build, run the first round, time ``rounds`` more; returns the CSV row. The
    store and the spool live in a temporary folder under ``where`` (default: the system's)."""
    rng = np.random.default_rng(seed)
    n_nodes = max(3, n_jobs // 16)
    clock = [1.0e9]
    fake = FakeSlurm({f"node{i:05d}": {TYPES[i % 3]: 8} for i in range(n_nodes)}, clock=lambda: clock[0])
    gangs = rng.choice([1, 2, 4], size=n_jobs, p=[0.8, 0.15, 0.05])
    speed = rng.uniform(0.5, 2.0, size=n_jobs)
    ids = []
    for g, s in zip(gangs.tolist(), speed.tolist()):
        rates = ",".join(f"{t}:{RATES[t] * s * g:.3f}" for t in TYPES)
        ids.append(fake.submit(int(g), comment=f"hetsched:throughputs={rates};total_steps=1e9"))
    with tempfile.TemporaryDirectory(dir=where) as tmp:
        spool = Path(tmp) / "spool"
        t0 = time.perf_counter()
        driver = SlurmDriver(scheduler, commands=fake, spool=spool, gpu_types=TYPES, store=Path(tmp) / "s.db",
                             round_seconds=360.0, clock=lambda: clock[0], sleep=lambda s: None,
                             synchronous="NORMAL")
        driver.run_round()
        first = time.perf_counter() - t0
        done = dict.fromkeys(ids, 0.0)
        rows = []
        for _ in range(rounds):
            clock[0] += 360.0
            for jid in ids:
                job = fake.job(jid)
                if job.running:
                    done[jid] += 360.0 * RATES[job.gpu_type]
                    report(done[jid], job_id=jid, spool=spool, now=clock[0] - 1.0)
            calls = fake.stats["calls"]
            s = driver.run_round()
            rows.append((s.driver_s, s.plan_s, fake.stats["calls"] - calls, len(s.started), len(s.preempted)))
        driver.close()
    d = [r[0] for r in rows]
    return {"jobs": n_jobs, "gpus": n_nodes * 8, "first_s": first, "driver_s": statistics.median(d),
            "driver_max_s": max(d), "plan_s": statistics.median(r[1] for r in rows),
            "commands": float(np.mean([r[2] for r in rows])), "started": float(np.mean([r[3] for r in rows])),
            "preempted": float(np.mean([r[4] for r in rows])), "rounds": rounds,
            "driver_each_s": " ".join(f"{x:.3f}" for x in d), "scheduler": scheduler,
            "dir": where or tempfile.gettempdir(),
            "machine": platform.node()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scheduler", default="max_min_fairness")
    ap.add_argument("--quick", action="store_true", help="1,000 jobs, 3 rounds")
    ap.add_argument("--dir", nargs="+", default=[None],
                    help="folders to put the store and the spool in, one run each (default: the system's temporary "
                         "folder; e.g. --dir /tmp /dev/shm to tell disk waits from the driver's own work)")
    ap.add_argument("--out", type=Path, default=RESULTS / "slurm_driver.csv")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    sizes, rounds = ([1000], 3) if args.quick else (args.jobs, args.rounds)
    print(format_header(COLUMNS))
    out = []
    for where in args.dir:
        for n in sizes:
            row = run_size(n, rounds, args.seed, args.scheduler, where)
            print(format_line(row, COLUMNS), flush=True)
            out.append(row)
    write_csv(out, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
