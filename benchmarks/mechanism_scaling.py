"""Round-based mechanism: plan time per round and convergence of shares to X.

For 1k / 10k / 100k jobs on 100 / 1k / 10k GPUs (four GPU types) this program

* builds an *integer-friendly* allocation X: the average of P = 20 random whole-gang round
  plans that fill every type (so X saturates the cluster and is exactly reachable), with
  Gavel's Philly-derived gang sizes 1/2/4/8 at probability 0.70/0.10/0.15/0.05;
* runs the planner round after round (default options: work-conserving, no stickiness)
  for each rule, and reports the mean plan time per round and the share error
  ``max |received/elapsed - X|`` (and its under-service side ``max (X - share)``) after
  10 / 100 / 1000 rounds;
* runs a reference in the same process at the small sizes: Gavel's priority rule written
  the straightforward way (dict-of-dict state, one Python loop over job x type pairs, a
  sorted list of tuples, a greedy walk), checks it makes the *same* plan every round, and
  reports its time and the speed-up;
* adds one allocation from a real policy (max-min fairness on a random throughput table,
  1k jobs), whose X is not integer-friendly: its error shows the residual that whole
  gangs leave.

Usage::

    python benchmarks/mechanism_scaling.py --quick     # < 1 minute
    python benchmarks/mechanism_scaling.py             # adds 10k x 1000 and 100k x 1000

Writes ``benchmarks/results/mechanism_scaling.csv``.
"""

from __future__ import annotations

import argparse
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

import hetsched as hs
from hetsched.mechanism import ShareHistory, plan_round_arrays
from hetsched.mechanism.priority import TIE_DECIMALS

GPU_TYPES = ("a100", "v100", "p100", "k80")
TYPE_SPLIT = np.array([0.25, 0.25, 0.25, 0.25])
GANGS = np.array([1, 2, 4, 8])
GANG_P = np.array([0.70, 0.10, 0.15, 0.05])
PERIOD = 20
ROUND_SECONDS = 360.0
CHECKPOINTS = (10, 100, 1000)
RESULTS = Path(__file__).resolve().parent / "results" / "mechanism_scaling.csv"


# ----------------------------------------------------------------------------- instances
def capacities(n_gpus: int) -> np.ndarray:
    cap = np.floor(TYPE_SPLIT * n_gpus).astype(np.int64)
    cap[0] += n_gpus - cap.sum()
    return cap


def periodic_allocation(rng: np.random.Generator, n_jobs: int, cap: np.ndarray, period: int):
    """X = average of ``period`` whole-gang plans that fill every type (vectorized).

    Each plan: every job draws a type; per type, jobs in random order are taken while the
    running GPU count fits (a prefix), then single-GPU jobs of that type fill the rest.
    """
    m = cap.shape[0]
    s = rng.choice(GANGS, p=GANG_P, size=n_jobs)
    counts = np.zeros((n_jobs, m))
    for _ in range(period):
        perm = rng.permutation(n_jobs)
        typ = rng.integers(0, m, size=n_jobs)
        for k in range(m):  # loop over types only
            jobs_k = perm[typ[perm] == k]
            fit = np.cumsum(s[jobs_k]) <= cap[k]
            taken = jobs_k[fit]
            rest = jobs_k[~fit]
            ones = rest[s[rest] == 1][: int(cap[k] - s[taken].sum())]
            counts[taken, k] += 1
            counts[ones, k] += 1
    return counts / period, s


def max_min_allocation(rng: np.random.Generator, n_jobs: int, cap: np.ndarray):
    """A real policy's X: max-min fairness on a random throughput table."""
    speed = np.array([4.0, 2.5, 1.5, 1.0])
    T = speed[None, :] * rng.lognormal(0.0, 0.3, size=(n_jobs, len(GPU_TYPES)))
    s = rng.choice(GANGS, p=GANG_P, size=n_jobs)
    jobs = hs.JobSet(T, gpu_types=GPU_TYPES, scale_factors=s)
    cluster = hs.Cluster(dict(zip(GPU_TYPES, cap.tolist())))
    alloc = hs.solve("max_min_fairness", jobs, cluster)
    if not alloc.success:
        raise RuntimeError(f"max-min fairness solve failed: {alloc.status}")
    return alloc.X, s


# ----------------------------------------------------------------------------- reference
def _round(v: float) -> float:
    """``np.round(v, TIE_DECIMALS)`` on a Python float (numpy scales, rounds half to even, divides)."""
    return round(v * _SCALE) / _SCALE


_SCALE = 10.0**TIE_DECIMALS


def gavel_reference_plan(X, s, cap, received, elapsed, waited, waiting, L, job_ids, gpu_types, zero_tol=1e-9):
    """Gavel's priority rule, written the straightforward way (per-job Python loops).

    ``X``, ``received``: dict job -> dict type -> value; ``elapsed``: dict job -> seconds;
    ``waited``: dict job -> seconds since the job last ran; ``waiting``: dict job -> rounds
    since it last ran; ``s``: dict job -> gang size; ``cap``: dict type -> GPUs. Returns dict
    job -> type. The library's rule (hetsched.mechanism.priority): priority ``x e / r``, then
    the deficit ``x (max(e, waited) + L) - r`` in rounds, both rounded to TIE_DECIMALS, then
    the rounds waited, then job and type order; the greedy walk takes an entry when the job
    is not placed yet and its gang fits. The plans must agree.
    """
    queue = []
    for jpos, j in enumerate(job_ids):
        e = elapsed[j]
        claim = max(e, waited[j])
        for kpos, t in enumerate(gpu_types):
            x = X[j][t]
            if x <= zero_tol:
                continue
            r = received[j][t]
            priority = _round(x * e / r) if r > 0 else math.inf
            deficit = _round((x * (claim + L) - r) / L)
            queue.append((-priority, -deficit, -waiting[j], jpos, kpos, j, t))
    queue.sort()
    free = dict(cap)
    scheduled = {}
    for *_, j, t in queue:
        if j in scheduled or s[j] > free[t]:
            continue
        scheduled[j] = t
        free[t] -= s[j]
    return scheduled


# ----------------------------------------------------------------------------- one run
def run_case(source, rule, X, s, cap, max_rounds, ref_rounds):
    n = X.shape[0]
    ids = np.arange(n)
    types = list(GPU_TYPES)
    h = ShareHistory.empty()
    times = []
    rows = []
    ref = None
    if ref_rounds:
        ref = {
            "X": {j: dict(zip(types, X[j].tolist())) for j in range(n)},
            "s": {j: int(s[j]) for j in range(n)},
            "cap": dict(zip(types, cap.tolist())),
            "received": {j: dict.fromkeys(types, 0.0) for j in range(n)},
            "elapsed": dict.fromkeys(range(n), 0.0),
            "waited": dict.fromkeys(range(n), 0.0),
            "waiting": dict.fromkeys(range(n), 0),
            "times": [],
        }
    for r in range(1, max_rounds + 1):
        t0 = time.perf_counter()
        plan = plan_round_arrays(X, s, cap, h, job_ids=ids, gpu_types=types, round_seconds=ROUND_SECONDS, rule=rule)
        times.append(time.perf_counter() - t0)
        if ref is not None and r <= ref_rounds:
            t0 = time.perf_counter()
            sched = gavel_reference_plan(
                ref["X"], ref["s"], ref["cap"], ref["received"], ref["elapsed"], ref["waited"], ref["waiting"],
                ROUND_SECONDS, range(n), types,
            )
            ref["times"].append(time.perf_counter() - t0)
            mine = {int(j): types[k] for j, k in enumerate(plan.assignment) if k >= 0}
            if mine != sched:
                raise AssertionError(f"round {r}: reference and vectorized plans differ")
            for j, t in sched.items():
                ref["received"][j][t] += ROUND_SECONDS
            for j in range(n):
                ref["elapsed"][j] += ROUND_SECONDS
                ran = j in sched
                ref["waited"][j] = 0.0 if ran else ref["waited"][j] + ROUND_SECONDS
                ref["waiting"][j] = 0 if ran else ref["waiting"][j] + 1
        h = h.record(plan)
        if r in CHECKPOINTS or r == max_rounds:
            share = h.received / h.elapsed[:, None]
            err = float(np.abs(share - X).max())
            under = float((X - share).max())
            row = dict(
                source=source, rule=rule, jobs=n, gpus=int(cap.sum()), types=len(types), rounds=r,
                plan_ms=1e3 * float(np.mean(times)), plan_p95_ms=1e3 * float(np.quantile(times, 0.95)),
                max_share_error=err, max_under_error=under, err_times_R=err * r,
                preemptions_per_round=float(h.preemptions.sum()) / r,
                ref_ms=np.nan, ref_rounds=0, speedup=np.nan,
            )
            if ref is not None:
                k = len(ref["times"])
                row["ref_ms"] = 1e3 * float(np.mean(ref["times"]))
                row["ref_rounds"] = k
                row["speedup"] = row["ref_ms"] / (1e3 * float(np.mean(times[:k])))
            rows.append(row)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only (< 1 minute)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)

    # (jobs, gpus, rounds, reference rounds)
    cases = [(1_000, 100, 1000, 20), (10_000, 1_000, 100, 5)]
    if not args.quick:
        cases = [(1_000, 100, 1000, 20), (10_000, 1_000, 1000, 5), (100_000, 10_000, 1000, 2)]
    t_start = time.perf_counter()
    rows = []
    for n, g, rounds, ref_rounds in cases:
        cap = capacities(g)
        X, s = periodic_allocation(rng, n, cap, PERIOD)
        for rule in ("gavel", "deficit"):
            rows += run_case("periodic", rule, X, s, cap, rounds, ref_rounds if rule == "gavel" else 0)
    cap = capacities(100)
    X, s = max_min_allocation(rng, 1_000, cap)
    for rule in ("gavel", "deficit"):
        rows += run_case("max_min_fairness", rule, X, s, cap, 1000, 0)
    df = pd.DataFrame(rows)
    df.insert(0, "run", "quick" if args.quick else "full")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out, index=False)

    show = df[["source", "rule", "jobs", "gpus", "rounds", "plan_ms", "plan_p95_ms", "max_share_error",
               "max_under_error", "err_times_R", "preemptions_per_round", "ref_ms", "speedup"]]
    fmt = {
        "plan_ms": "{:.2f}".format, "plan_p95_ms": "{:.2f}".format, "max_share_error": "{:.4f}".format,
        "max_under_error": "{:.4f}".format, "err_times_R": "{:.2f}".format,
        "preemptions_per_round": "{:.1f}".format,
        "ref_ms": lambda v: "-" if np.isnan(v) else f"{v:.1f}",
        "speedup": lambda v: "-" if np.isnan(v) else f"{v:.0f}x",
    }
    print(f"mechanism_scaling ({'quick' if args.quick else 'full'}; python {platform.python_version()}, "
          f"numpy {np.__version__}; {len(GPU_TYPES)} GPU types, round {ROUND_SECONDS:g} s, X period {PERIOD})")
    print(show.to_string(index=False, formatters=fmt, na_rep="-"))
    print("ref = Gavel's priority rule with per-job Python loops (same plans, asserted); "
          "speedup = ref_ms / plan_ms over the same rounds.")
    target = df[(df.jobs == 10_000) & (df.gpus == 1_000) & (df.rule == "gavel")]["plan_ms"].max()
    print(f"target < 50 ms/round at 10k jobs on 1k GPUs: {target:.2f} ms "
          f"({'met' if target < 50 else 'MISSED'}); total {time.perf_counter() - t_start:.1f} s; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
