"""Gavel's published traces through hetsched, with ``preset="gavel"`` and with the defaults.

* The physical-cluster trace of Gavel's heterogeneity-aware max-min experiment
  (``traces/physical_cluster/max_min_fairness.trace``, 96 jobs) on Gavel's physical cluster
  as the paper describes it (OSDI'20 §7: 8 V100 + 16 P100 + 24 K80), for max-min fairness
  (heterogeneity-aware and agnostic), FIFO with Gavel's admission (``Fifo(backfill=False)``)
  and with backfill.
* One Philly-derived per-VC trace (``traces/msr/seed=0/<name>.trace``, Gavel's older
  7-column format) on the cluster of ``traces/msr/cluster_specs.json`` (500 V100), jobs
  without a throughput-table row skipped (counted).
* Gavel's generated 300-job trace (``traces/generated/gavel_generator_n300_lam900_seed5.trace``)
  on 4 V100 + 4 P100 + 4 K80 without placement, for max-min fairness (heterogeneity-aware
  and agnostic): the preset-vs-default table of docs/simulator.md.

Reads ``../shared/data/gavel/`` (skips with a message when it is absent). Prints a table and
writes ``benchmarks/results/gavel_traces.csv``.

Usage::

    python benchmarks/gavel_traces.py            # both traces
    python benchmarks/gavel_traces.py --msr 6c71a0 --max-jobs 400
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pandas as pd

import hetsched as hs
from hetsched.sim import load_trace
from hetsched.sim.options import make_options

ROOT = Path(__file__).resolve().parent
DATA = ROOT.parent.parent / "shared" / "data" / "gavel"
RESULTS = ROOT / "results" / "gavel_traces.csv"
PHYSICAL = {"v100": 8, "p100": 16, "k80": 24}
GENERATED = "gavel_generator_n300_lam900_seed5"
GENERATED_CLUSTER = {"v100": 4, "p100": 4, "k80": 4}


def _run(label: str, trace, cluster: hs.Cluster, policy, **kw) -> dict:
    t0 = time.perf_counter()
    res = hs.simulate(policy, trace, cluster, options=make_options(record_runs=False, **kw))
    s = res.summary
    return {"trace": label, "policy": res.config["policy"], "settings": kw.get("preset", "default"),
            "n_jobs": s["n_jobs"], "completed": s["n_completed"], "status": s["status"],
            "avg_jct_h": s["avg_jct_hours"], "p99_jct_h": s["p99_jct_s"] / 3600, "makespan_h": s["makespan_s"] / 3600,
            "utilization": s["utilization"], "solves": s["n_solves"], "wall_s": time.perf_counter() - t0}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--msr", default="6c71a0", help="msr trace name (default 6c71a0)")
    ap.add_argument("--max-jobs", type=int, default=None, help="first N jobs of the msr trace")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    if not DATA.is_dir():
        print(f"# {DATA} is not present: nothing to run")
        return 0
    cat = hs.load_gavel_throughputs(DATA / "simulation_throughputs.json")
    rows = []
    phys = load_trace(DATA / "traces" / "physical_cluster" / "max_min_fairness.trace", throughputs=cat)
    cluster = hs.Cluster(PHYSICAL)
    pols = {"max_min_fairness": hs.policies.MaxMinFairness(),
            "max_min_fairness_agnostic": hs.policies.MaxMinFairness(heterogeneity_aware=False),
            "fifo (Gavel's admission)": hs.policies.Fifo(backfill=False),
            "fifo (backfill)": hs.policies.Fifo()}
    for pol in pols.values():
        for kw in ({"preset": "gavel"}, {}):
            rows.append(_run("physical_cluster/max_min_fairness", phys, cluster, pol, **kw))
    # Gavel's msr traces hold (job type, scale factor) pairs its own throughput table lacks
    # (scale factors up to 64; Gavel crashes on them): skip them explicitly; the count is in
    # the row label below and in meta["load_report"].
    msr = load_trace(DATA / "traces" / "msr" / "seed=0" / f"{args.msr}.trace", throughputs=cat, on_bad_rows="skip")
    skipped = len(msr.meta.get("skipped", [])) + msr.meta.get("skipped_left_out", 0)
    if args.max_jobs:
        msr = msr.head(args.max_jobs)
    spec = json.loads((DATA / "traces" / "msr" / "cluster_specs.json").read_text())
    v100, p100, k80 = (int(x) for x in spec["philly"][0].split(":"))
    msr_cluster = hs.Cluster({t: n for t, n in (("v100", v100), ("p100", p100), ("k80", k80)) if n > 0})
    for kw in ({"preset": "gavel"}, {}):
        rows.append(_run(f"msr/{args.msr} ({msr.n_jobs} jobs, {skipped} skipped)", msr, msr_cluster,
                         hs.policies.MaxMinFairness(), **kw))
    gen = load_trace(DATA / "traces" / "generated" / f"{GENERATED}.trace", throughputs=cat)
    for pol in list(pols.values())[:2]:
        for kw in ({}, {"preset": "gavel"}):
            rows.append(_run(f"generated/{GENERATED}", gen, hs.Cluster(GENERATED_CLUSTER), pol, placement=False, **kw))
    df = pd.DataFrame(rows)
    with pd.option_context("display.width", 250, "display.max_columns", 20, "display.float_format", "{:.2f}".format):
        print(df.to_string(index=False))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out, index=False)
    print(f"# wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
