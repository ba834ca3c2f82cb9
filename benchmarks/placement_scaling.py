"""Placement scaling: min-cost-flow placement from 1k to 100k GPUs, with networkx alongside.

Cluster: ``servers`` servers of 8 GPUs, split evenly over three GPU types (v100, p100,
k80), racks of 20 servers. Load = GPUs asked for / GPUs in the cluster, per type. Jobs:
Gavel's Philly-derived mix (1/2/4/8 GPUs with probability 0.70/0.10/0.15/0.05), drawn by
this file's own seeded sampler.

Each row is a *steady-state round*: round 1 places the plan on an empty cluster; then 20 %
of the jobs finish, new jobs arrive until the load is back, jobs left out in round 1 have
waited one round, and round 2 is placed with round 1 as the previous placement. The row
reports round 2 (timings, placed jobs, share of multi-GPU jobs on one server, migrations)
plus ``fresh_share``/``fresh_share_arbitrary``: the round-1 consolidation with the
best-fit-decreasing read-back and with an arbitrary-order decomposition of the same flow.
``violations`` counts what an independent checker (in this file, vectorised, sharing no
code with the read-back) finds in both rounds; it must be 0. Where the network is small
enough (``--nx-max-gpus``) the same round-2 network is solved by networkx's network
simplex: ``nx_solve_s``, ``nx_ratio = nx_solve_s / solve_s`` and whether the optimal costs
agree.

A second table compares flow + read-back with the exact ILP (HiGHS) on tiny random
clusters: consolidated gangs when the plan fits the usable GPUs, placed GPUs when it does
not.

Usage::

    python benchmarks/placement_scaling.py --quick     # < 1 minute
    python benchmarks/placement_scaling.py             # adds 12,500 servers (100k GPUs), repeats
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np
import pandas as pd

from hetsched import Cluster
from hetsched.placement import PlacementCosts, build_network, make_request, oracle_placement, place, solve_flow
from hetsched.inputs.topology import Server, Topology

TYPES = ("v100", "p100", "k80")
SIZES = np.array([1, 2, 4, 8])
PROBS = np.array([0.70, 0.10, 0.15, 0.05])
GPUS_PER_SERVER = 8
SERVERS_PER_RACK = 20


# ---------------------------------------------------------------------------- workload
def sample_jobs(rng: np.random.Generator, demand: dict[str, int], start: int) -> pd.DataFrame:
    """Philly-mix jobs per type until each type's demand (in GPUs) is reached, not exceeded."""
    frames = []
    for t, d in demand.items():
        n = int(d) + 8
        sizes = rng.choice(SIZES, p=PROBS, size=n)
        sizes = sizes[np.cumsum(sizes) <= d]
        frames.append(pd.DataFrame({"gpu_type": t, "num_gpus": sizes}))
    jobs = pd.concat(frames, ignore_index=True)
    jobs = jobs.iloc[rng.permutation(len(jobs))].reset_index(drop=True)
    jobs.insert(0, "job_id", np.arange(start, start + len(jobs)))
    return jobs


def make_cluster(servers: int) -> Cluster:
    per = [servers // 3 + (1 if i < servers % 3 else 0) for i in range(3)]
    return Cluster.from_servers(
        {t: n * GPUS_PER_SERVER for t, n in zip(TYPES, per)},
        gpus_per_server=GPUS_PER_SERVER,
        servers_per_rack=SERVERS_PER_RACK,
    )


# ---------------------------------------------------------------------------- checker
def count_violations(topo: Topology, jobs: pd.DataFrame, p, blocked: np.ndarray | None = None) -> int:
    """Independent check: whole gangs of the right type and size, no GPU twice, counters right.

    Uses only the server table (sizes, types in order) and the placement's raw GPU ids.
    """
    frame = topo.to_frame()
    first = np.concatenate([[0], np.cumsum(frame["num_gpus"].to_numpy())])
    stype = frame["gpu_type"].to_numpy()
    sizes = jobs["num_gpus"].to_numpy()
    held = np.diff(p.gpu_offset)
    gpus = p.gpus
    v = 0
    v += int(np.sum((gpus < 0) | (gpus >= first[-1])))
    v += int(gpus.size - np.unique(gpus).size)  # double-booked
    if blocked is not None:
        v += int(np.isin(gpus, blocked).sum())
    placed = held > 0
    v += int(np.sum(placed & (held != sizes)))  # partial gangs
    v += int(np.sum(~placed & (p.reason == "")))  # unscheduled without a reason
    v += int(np.sum(placed & (p.reason != "")))
    srv = np.searchsorted(first, gpus, side="right") - 1
    job = np.repeat(np.arange(len(jobs)), held)
    v += int(np.sum(stype[srv] != jobs["gpu_type"].to_numpy()[job]))  # wrong type
    # counters
    nsrv = pd.Series(srv).groupby(job).nunique().reindex(range(len(jobs)), fill_value=0).to_numpy()
    consolidated = int(np.sum(placed & (sizes > 1) & (nsrv == 1)))
    v += int(consolidated != p.consolidated) + int(int(placed.sum()) != p.n_placed)
    return v


# ---------------------------------------------------------------------------- one row
def run_row(servers: int, load: float, *, seed: int, repeat: int, nx_max_gpus: int) -> dict:
    rng = np.random.default_rng([seed, servers, int(load * 100)])
    cluster = make_cluster(servers)
    topo = cluster.topology
    cap = cluster.as_dict()
    jobs1 = sample_jobs(rng, {t: int(round(load * c)) for t, c in cap.items()}, 0)
    kw = dict(allow_overcommit=True)
    p1 = place(cluster, jobs1["job_id"], jobs1["gpu_type"], jobs1["num_gpus"], **kw)
    p1_arb = place(cluster, jobs1["job_id"], jobs1["gpu_type"], jobs1["num_gpus"], order="arbitrary", **kw)
    # round 2: 20 % finish, new arrivals restore the load, the left-out have waited a round
    stay = rng.random(len(jobs1)) >= 0.2
    kept = jobs1[stay]
    left = kept.groupby("gpu_type")["num_gpus"].sum().reindex(list(cap), fill_value=0)
    arrivals = sample_jobs(
        rng, {t: max(int(round(load * cap[t])) - int(left[t]), 0) for t in cap}, int(jobs1["job_id"].max()) + 1
    )
    jobs2 = pd.concat([kept, arrivals], ignore_index=True)
    waiting = np.zeros(len(jobs2))
    waiting[: len(kept)] = (~p1.placed[stay]).astype(float)
    runs = []
    for _ in range(repeat):
        runs.append(
            place(cluster, jobs2["job_id"], jobs2["gpu_type"], jobs2["num_gpus"], previous=p1, waiting=waiting, **kw)
        )
    runs.sort(key=lambda r: r.timings["total_s"])
    p2 = runs[len(runs) // 2]
    violations = count_violations(topo, jobs1, p1) + count_violations(topo, jobs1, p1_arb) + count_violations(topo, jobs2, p2)
    row = {
        "gpus": topo.n_gpus,
        "servers": topo.n_servers,
        "load": load,
        "jobs": len(jobs2),
        "arcs": p2.info["n_arcs"],
        "build_s": p2.timings["build_s"],
        "solve_s": p2.timings["solve_s"],
        "readback_s": p2.timings["readback_s"],
        "total_s": p2.timings["total_s"],
        "placed_jobs": p2.n_placed,
        "consolidated_share": p2.consolidated_share,
        "migrations": p2.migrations,
        "idle_gpus": p2.idle_gpus,
        "rolled_back": p2.info["rolled_back"],
        "fresh_share": p1.consolidated_share,
        "fresh_share_arbitrary": p1_arb.consolidated_share,
        "fresh_total_s": p1.timings["total_s"],
        "violations": violations,
        "nx_solve_s": np.nan,
        "nx_ratio": np.nan,
        "nx_same_cost": "",
    }
    if topo.n_gpus <= nx_max_gpus:
        req = make_request(
            topo, jobs2["job_id"], jobs2["gpu_type"], jobs2["num_gpus"], previous=p1, waiting=waiting, **kw
        )
        net = build_network(req, PlacementCosts())
        t0 = time.perf_counter()
        nx_sol = solve_flow(net, "networkx")
        nx_s = time.perf_counter() - t0
        row["nx_solve_s"] = nx_s
        row["nx_ratio"] = nx_s / max(p2.timings["solve_s"], 1e-9)
        row["nx_same_cost"] = "yes" if nx_sol.cost == p2.flow_cost else "NO"
    return row


# ---------------------------------------------------------------------------- oracle table
def tiny_instance(rng: np.random.Generator, fit: bool):
    types = ["a", "b"][: int(rng.integers(1, 3))]
    servers = [
        Server(f"s{i}", str(rng.choice(types)), int(rng.choice([2, 4, 8])), f"r{int(rng.integers(0, 2))}")
        for i in range(int(rng.integers(2, 7)))
    ]
    topo = Topology(servers)
    blocked = np.flatnonzero(rng.random(topo.n_gpus) < rng.uniform(0, 0.4))
    usable = np.ones(topo.n_gpus, bool)
    usable[blocked] = False
    ids, jt, js = [], [], []
    load = rng.uniform(0.3, 1.0) if fit else rng.uniform(1.05, 1.5)
    for k, t in enumerate(topo.gpu_types):
        srv = np.flatnonzero(topo.server_type == k)
        cap = int(sum(usable[topo.gpu_offset[s] : topo.gpu_offset[s + 1]].sum() for s in srv))
        big = int(topo.server_gpus[srv].max())
        total = 0
        for _ in range(60):
            size = min(int(rng.choice(SIZES, p=PROBS)), big)
            if total + size > load * cap:
                if fit:
                    continue
                break
            ids.append(len(ids))
            jt.append(t)
            js.append(size)
            total += size
    return topo, ids, jt, js, blocked


def oracle_table(n: int, seed: int) -> pd.DataFrame:
    rows = []
    for regime, fit in (("plan fits", True), ("overloaded", False)):
        rng = np.random.default_rng([seed, int(fit)])
        ours_c = orc_c = ours_g = orc_g = worse = count = 0
        t_flow = t_ilp = 0.0
        for _ in range(n):
            topo, ids, jt, js, blocked = tiny_instance(rng, fit)
            if not ids:
                continue
            t0 = time.perf_counter()
            p = place(topo, ids, jt, js, blocked=blocked, allow_overcommit=True)
            t1 = time.perf_counter()
            o = oracle_placement(make_request(topo, ids, jt, js, blocked=blocked, allow_overcommit=True))
            t2 = time.perf_counter()
            t_flow += t1 - t0
            t_ilp += t2 - t1
            count += 1
            ours_c += p.consolidated
            orc_c += o.consolidated
            ours_g += int(np.asarray(js)[p.placed].sum())
            orc_g += o.placed_gpus
            worse += p.consolidated < o.consolidated
        rows.append(
            {
                "regime": regime,
                "instances": count,
                "consolidated_flow": ours_c,
                "consolidated_ilp": orc_c,
                "consolidated_ratio": ours_c / max(orc_c, 1),
                "instances_fewer_consolidated": worse,
                "placed_gpus_flow": ours_g,
                "placed_gpus_ilp": orc_g,
                "placed_gpus_ratio": ours_g / max(orc_g, 1),
                "flow_ms_per_instance": 1e3 * t_flow / max(count, 1),
                "ilp_ms_per_instance": 1e3 * t_ilp / max(count, 1),
            }
        )
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="100/1k/10k servers, one repeat, small oracle table")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--nx-max-gpus", type=int, default=None, help="largest cluster networkx solves")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "placement_scaling.csv")
    args = ap.parse_args(argv)
    servers = [100, 1_000, 10_000] if args.quick else [100, 1_000, 10_000, 12_500]
    repeat = 1 if args.quick else 3
    nx_max = args.nx_max_gpus if args.nx_max_gpus is not None else (800 if args.quick else 8_000)
    loads = [0.1, 0.5, 0.9, 1.3]
    import networkx
    import ortools

    print(
        f"placement scaling ({'quick' if args.quick else 'full'}): {GPUS_PER_SERVER} GPUs/server, "
        f"{SERVERS_PER_RACK} servers/rack, types {TYPES}; ortools {ortools.__version__}, "
        f"networkx {networkx.__version__}; python {platform.python_version()}, {os.cpu_count()} CPUs"
    )
    t_start = time.perf_counter()
    rows = []
    for n in servers:
        for load in loads:
            rows.append(run_row(n, load, seed=args.seed, repeat=repeat, nx_max_gpus=nx_max))
    df = pd.DataFrame(rows)
    cols = [
        "gpus", "servers", "load", "jobs", "build_s", "solve_s", "readback_s", "total_s", "placed_jobs",
        "consolidated_share", "migrations", "fresh_share", "fresh_share_arbitrary", "violations",
        "nx_solve_s", "nx_ratio", "nx_same_cost",
    ]
    fmt = {
        "build_s": "{:.3f}".format, "solve_s": "{:.3f}".format, "readback_s": "{:.3f}".format,
        "total_s": "{:.3f}".format, "consolidated_share": "{:.3f}".format, "fresh_share": "{:.3f}".format,
        "fresh_share_arbitrary": "{:.3f}".format, "nx_solve_s": lambda x: "-" if np.isnan(x) else f"{x:.2f}",
        "nx_ratio": lambda x: "-" if np.isnan(x) else f"{x:.0f}x", "load": "{:.0%}".format,
    }
    print(df[cols].to_string(index=False, formatters=fmt))
    ot = oracle_table(60 if args.quick else 300, args.seed)
    print("\nflow + read-back vs exact ILP (HiGHS) on tiny clusters (2-6 servers, 25% GPUs blocked on average):")
    print(ot.to_string(index=False, float_format="{:.3f}".format))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out, index=False)
    ot.to_csv(args.out.with_name(args.out.stem + "_oracle.csv"), index=False)
    print(f"\nwrote {args.out} and {args.out.with_name(args.out.stem + '_oracle.csv').name} "
          f"in {time.perf_counter() - t_start:.1f}s")
    return 1 if int(df["violations"].sum()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
