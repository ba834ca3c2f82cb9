"""HiveD (issue 26, speed rows 1 and 3): buddy cell allocation and a multi-tenant simulation.

Two tables, each against a reference measured in the same run:

1. **Buddy allocation**: ``--requests`` allocate/release requests (60 % allocations of a cell
   at a random level: GPU, pair, switch, server; 40 % releases of a random held cell) against a
   cell tree of ``--gpus`` GPUs (servers of 8 GPUs in NVLink pairs and PCIe switches, racks
   of 4 servers). Ours: :class:`hetsched.hived.BuddyAllocator` (heaps of free cells, split
   and merge along one path). Reference: a linear scan for the first aligned free block of
   the cell's size in a GPU occupancy array (what an allocator without free lists does).
   Both see the same request sequence and must give the same cells. Target: 10,000 requests
   against 10,000 GPUs in < 1 s.
2. **Simulation**: a ``--jobs``-job trace (Gavel's Philly-derived mix, 4 tenants, arrivals at
   :func:`hetsched.reproduce.hived.hived_rate`) on
   ``--sim-gpus`` V100s in the same topology, the 4 tenants of ``reproduce hived_anomaly``
   (:func:`hetsched.reproduce.hived.hived_tenants`: servers and switches), HiveD against the quota baseline
   (:class:`hetsched.hived.QuotaScheduler`) on the same trace, with the sharing anomaly of
   each. Target: HiveD on 2,000 jobs and 512 GPUs in < 60 s.

3. **Guarantees with throughput awareness** (``--guarantees``, issue 26 item 3): the trace of
   docs/hived.md §7 (``--guarantee-jobs`` jobs of Gavel's multi-GPU mix, 5 jobs/h, 3 x 16 GPUs
   of V100, P100 and K80, three tenants each owning two server cells of two types), seeds 0-2:
   average JCT of ``hived_policy`` (max-min fairness inside each tenant's quota) with and
   without the idle pool against unconstrained max-min fairness, and, without the pool (every
   row is then a tenant's own), the largest share of a tenant's quota of a type that its jobs
   held in any round (must be <= 1). Written to
   ``benchmarks/results/hived_guarantees.csv``.

Wall and CPU (``time.process_time``) seconds. The machine these numbers come from may be
shared: say how loaded it was beside them.

Usage::

    python benchmarks/hived.py [--quick] [--out benchmarks/results/hived.csv]
    python benchmarks/hived.py --guarantees [--guarantee-jobs 120]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import hetsched as hs
from hetsched.hived import (
    BuddyAllocator,
    CellForest,
    HiveD,
    QuotaScheduler,
    anomaly_delay,
)
from hetsched.inputs.topology import Topology
from hetsched.reproduce.hived import LEVELS, hived_cluster, hived_rate, hived_tenants

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import format_header, format_line, write_csv  # noqa: E402

COLUMNS = [("case", "case", "<26"), ("size", "size", "<22"), ("ours_wall_s", "ours wall s", ">11.4f"),
           ("ours_cpu_s", "ours cpu s", ">10.4f"), ("ref", "reference", "<16"), ("ref_wall_s", "ref wall s", ">10.4f"),
           ("ref_cpu_s", "ref cpu s", ">9.4f"), ("ratio", "ours/ref", ">8.3f"), ("note", "note", "<40")]


def _requests(forest, n, seed):
    rng = np.random.default_rng(seed)
    levels = rng.integers(0, 4, size=n)
    kinds = rng.random(n) < 0.6
    picks = rng.integers(0, 1 << 30, size=n)
    return list(zip(kinds.tolist(), levels.tolist(), picks.tolist()))


def run_buddy(forest, reqs):
    b = BuddyAllocator(forest)
    held, out = [], []
    for alloc, lev, pick in reqs:
        if alloc or not held:
            c = b.allocate(0, lev)
            out.append(c)
            if c >= 0:
                held.append(c)
        else:
            b.release(held.pop(pick % len(held)))
    return out


def run_scan(forest, reqs):
    """The reference: the same rule (lowest level >= l with a maximal free cell, lowest id,
    split by first children) found by recomputing every cell's occupancy from a GPU array
    on each request: O(n) per request instead of O(depth log n)."""
    n = forest.topology.n_gpus
    busy = np.zeros(n, dtype=np.int64)       # in cell order (leaf positions)
    lo, hi, par, lev_of = forest.leaf_lo, forest.leaf_hi, forest.parent, forest.level
    n_l = int(np.count_nonzero(forest.sizes[0]))
    held, out = [], []
    for alloc, lev, pick in reqs:
        if alloc or not held:
            cum = np.concatenate([[0], np.cumsum(busy)])
            free = (cum[hi] - cum[lo]) == 0
            maximal = free & ~np.where(par >= 0, free[np.maximum(par, 0)], False)
            c = -1
            for up in range(lev, n_l):
                cand = np.flatnonzero(maximal & (lev_of == up))
                if cand.size:
                    c = int(cand[0])
                    while lev_of[c] > lev:
                        c = int(forest.children(c)[0])
                    break
            out.append(c)
            if c >= 0:
                busy[lo[c]:hi[c]] = 1
                held.append(c)
        else:
            c = held.pop(pick % len(held))
            busy[lo[c]:hi[c]] = 0
    return out


def _timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


GUARANTEE_TENANTS = {"tenants": [{"name": "e0", "cells": {"v100": {"server": 1}, "k80": {"server": 1}}},
                                 {"name": "e1", "cells": {"p100": {"server": 1}, "k80": {"server": 1}}},
                                 {"name": "e2", "cells": {"v100": {"server": 1}, "p100": {"server": 1}}}]}


def run_guarantees(jobs: int, out: Path) -> None:
    """Table 3 of the module docstring."""
    from hetsched.hived import TenantPolicy

    cl = hs.Cluster({"v100": 16, "p100": 16, "k80": 16})
    rows = []
    for seed in (0, 1, 2):
        w = hs.generate_workload(jobs, rate_per_hour=5.0, seed=seed, n_entities=3)
        got = {}
        for name, sched in (("max_min_fairness", "max_min_fairness"),
                            ("hived_policy+pool", TenantPolicy(tenants=GUARANTEE_TENANTS)),
                            ("hived_policy", TenantPolicy(tenants=GUARANTEE_TENANTS, share_idle=False))):
            r, wall, cpu = _timed(lambda s=sched: hs.simulate(s, w, cl, options=hs.SimOptions(record_runs=True)))
            got[name] = r
            held = _quota_use(r, sched, cl, w) if name == "hived_policy" else float("nan")
            rows.append({"seed": seed, "scheduler": name, "avg_jct_h": r.summary["avg_jct_hours"],
                         "ratio_to_unconstrained": r.summary["avg_jct_hours"] / got["max_min_fairness"].summary[
                             "avg_jct_hours"], "n_completed": r.summary["n_completed"], "max_quota_share": held,
                         "wall_s": wall, "cpu_s": cpu})
            print(", ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in rows[-1].items()),
                  flush=True)
    import csv

    with out.open("w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=list(rows[0]))
        wr.writeheader()
        wr.writerows(rows)
    print(f"wrote {out}")


def _quota_use(res, sched, cl, w) -> float:
    """Largest share of a tenant's quota of one type that its jobs held in a round (no idle pool)."""
    setup = sched.setup(cl)
    runs = res.runs
    ents = np.asarray(w.jobs.entities, dtype=object)
    tenant = np.array([setup.tenants.index(str(e)) for e in ents.tolist()])
    types = list(res.gpu_types)
    cols = [setup.forest.topology.type_index(t) for t in types]
    worst = 0.0
    for (rnd, k), g in runs.groupby(["round", "gpu_type"]):
        by_tenant = np.bincount(tenant[g["job"].to_numpy()], weights=g["gpus"].to_numpy(), minlength=len(setup.tenants))
        quota = setup.quota[:, cols[int(k)]]
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(quota > 0, by_tenant / quota, np.where(by_tenant > 0, np.inf, 0.0))
        worst = max(worst, float(share.max()))
    return worst


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    ap.add_argument("--gpus", type=int, default=10_000)
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--sim-gpus", type=int, default=512)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "hived.csv"))
    ap.add_argument("--guarantees", action="store_true", help="run table 3 only (hived_policy against max-min)")
    ap.add_argument("--guarantee-jobs", type=int, default=120)
    args = ap.parse_args(argv)
    if args.guarantees:
        run_guarantees(args.guarantee_jobs, Path(args.out).with_name("hived_guarantees.csv"))
        return
    if args.quick:
        args.gpus, args.requests, args.jobs, args.sim_gpus = 1024, 1000, 100, 64
    rows = []
    print(format_header(COLUMNS))
    # 1. buddy
    topo = Topology.from_counts({"v100": args.gpus}, gpus_per_server=8, servers_per_rack=4, levels=list(LEVELS))
    forest, build_s, _ = _timed(lambda: CellForest.build(topo))
    reqs = _requests(forest, args.requests, seed=0)
    ours, w1, c1 = _timed(lambda: run_buddy(forest, reqs))
    ref, w2, c2 = _timed(lambda: run_scan(forest, reqs))
    same = ours == ref
    row = {"case": "buddy allocate/release", "size": f"{args.requests} req, {args.gpus} GPUs", "ours_wall_s": w1,
           "ours_cpu_s": c1, "ref": "linear scan", "ref_wall_s": w2, "ref_cpu_s": c2, "ratio": w1 / w2,
           "note": f"same cells: {same}; forest built in {build_s:.2f} s"}
    rows.append(row)
    print(format_line(row, COLUMNS), flush=True)
    if not same:
        raise SystemExit("the buddy allocator and the scan disagree")
    # 2. simulation
    cl = hived_cluster(args.sim_gpus)
    w = hs.generate_workload(args.jobs, rate_per_hour=hived_rate(args.sim_gpus), seed=1, n_entities=4,
                             gpu_types=["v100"])
    ten = hived_tenants(args.sim_gpus)
    opts = hs.SimOptions(placement=False, record_runs=True)
    res = {}
    for name, sched in (("hived", HiveD(tenants=ten)), ("quota", QuotaScheduler(tenants=ten))):
        r, wall, cpu = _timed(lambda s=sched: hs.simulate(s, w, cl, options=opts))
        a = anomaly_delay(r, sched.setup(cl), w.jobs.entities)
        res[name] = (r, wall, cpu, a)
    (rh, wh, ch, ah), (rq, wq, cq, aq) = res["hived"], res["quota"]
    note = (f"avg JCT {rh.summary['avg_jct_hours']:.2f} h vs {rq.summary['avg_jct_hours']:.2f} h; anomaly "
            f"{ah['anomaly_delay_s'].sum() / 3600:.1f} h vs {aq['anomaly_delay_s'].sum() / 3600:.1f} h")
    row = {"case": "simulate HiveD", "size": f"{args.jobs} jobs, {args.sim_gpus} GPUs", "ours_wall_s": wh,
           "ours_cpu_s": ch, "ref": "quota baseline", "ref_wall_s": wq, "ref_cpu_s": cq, "ratio": wh / wq,
           "note": note}
    rows.append(row)
    print(format_line(row, COLUMNS), flush=True)
    write_csv(rows, Path(args.out))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
