"""Starvation check: a vertex (HiGHS) against an interior (Clarabel) allocation on 300-job traces.

The heterogeneity-agnostic, single-stage max-min LP is symmetric in the jobs; an
interior-point solver returns a non-vertex X (equal or unequal rows), a simplex solver a
vertex. Shares are reset at every re-solve. If the round mechanism starves some job, the
interior solution's p99 JCT rises far above the vertex's while its average does not.

Traces (4 V100 + 4 P100 + 4 K80, Gavel's throughput table, no placement):

* Gavel's generated ``traces/generated/gavel_generator_n300_lam900_seed5.trace``
  (read from ``../shared/data/gavel/``; skipped with a message when absent);
* two overloaded single-GPU traces, ``generate_workload(300, rate_per_hour=4,
  seed=1|2, scale_factor_probs={1: 1.0})`` with Gavel's table.

Columns: average, p99 and largest JCT (hours), and the longest time any job waited between
two of its runs (or from arrival to its first run), in hours and in rounds.

Usage::

    python benchmarks/starvation.py                     # default settings
    python benchmarks/starvation.py --preset gavel      # also Gavel's preset
    python benchmarks/starvation.py --out benchmarks/results/starvation.csv
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

import hetsched as hs
from hetsched.sim import generate_workload, load_trace
from hetsched.sim.options import make_options

ROOT = Path(__file__).resolve().parent
DATA = ROOT.parent.parent / "shared" / "data" / "gavel"
GENERATED = DATA / "traces" / "generated" / "gavel_generator_n300_lam900_seed5.trace"
CLUSTER = {"v100": 4, "p100": 4, "k80": 4}


def longest_wait(result) -> float:
    """Longest gap (s) between a job's arrival or the end of one of its runs and its next run."""
    runs = result.runs.sort_values(["job", "start_s"])
    arrival = result.jobs["arrival_s"].to_numpy()
    job = runs["job"].to_numpy()
    start = runs["start_s"].to_numpy()
    prev_end = np.empty_like(start)
    first = np.r_[True, job[1:] != job[:-1]]
    prev_end[first] = arrival[job[first]]
    prev_end[~first] = runs["end_s"].to_numpy()[:-1][~first[1:]]
    return float((start - prev_end).max()) if start.size else 0.0


def traces(catalogue) -> dict:
    out = {}
    if GENERATED.is_file():
        out["gavel_n300_seed5"] = load_trace(GENERATED, throughputs=catalogue)
    else:
        print(f"skipping Gavel's generated trace: {GENERATED} not found", file=sys.stderr)
    for seed in (1, 2):
        out[f"overloaded_seed{seed}"] = generate_workload(300, rate_per_hour=4.0, seed=seed, catalogue=catalogue,
                                                          scale_factor_probs={1: 1.0})
    return out


def main(argv: list[str] | None = None) -> pd.DataFrame:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", choices=["gavel"], default=None, help="also run with this preset")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "starvation.csv")
    args = ap.parse_args(argv)
    try:
        catalogue = hs.gavel_throughputs()
    except hs.errors.DataNotFoundError as exc:
        print(f"skipping: {exc}", file=sys.stderr)
        return pd.DataFrame()
    cluster = hs.Cluster(CLUSTER)
    policy = hs.policies.MaxMinFairness(heterogeneity_aware=False, second_stage=False)
    settings = [("default", {})] + ([(args.preset, {"preset": args.preset})] if args.preset else [])
    rows = []
    for name, trace in traces(catalogue).items():
        for label, kw in settings:
            for solver in ("highs", "clarabel"):
                res = hs.simulate(policy, trace, cluster, options=make_options(placement=False, solver=solver, **kw))
                s = res.summary
                wait = longest_wait(res)
                rows.append({"trace": name, "settings": label, "solver": solver,
                             "avg_jct_h": s["avg_jct_s"] / 3600, "p99_jct_h": s["p99_jct_s"] / 3600,
                             "max_jct_h": float(res.jobs["jct_s"].max()) / 3600,
                             "longest_wait_h": wait / 3600, "longest_wait_rounds": wait / 360.0,
                             "solves": s["n_solves"]})
                print(f"{name:18s} {label:8s} {solver:9s} avg {rows[-1]['avg_jct_h']:7.2f} h  "
                      f"p99 {rows[-1]['p99_jct_h']:7.2f} h  max {rows[-1]['max_jct_h']:7.2f} h  "
                      f"longest wait {rows[-1]['longest_wait_h']:6.2f} h", flush=True)
    df = pd.DataFrame(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out, index=False, float_format="%.4f")
    print(f"wrote {args.out}")
    return df


if __name__ == "__main__":
    main()
