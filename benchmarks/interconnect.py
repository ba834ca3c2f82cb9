"""Inside-server GPU selection and network-aware placement: speed at scale, and the JCT effect.

Part 1, speed (issue 26, speed row 2). The cluster and jobs of ``placement_scaling.py``
(servers of 8 GPUs over three types, racks of 20 servers, Gavel's Philly-derived gang mix,
load 0.9) are placed in a steady-state round (round 2, with round 1 as the previous
placement), once as today's two-level placement (servers and racks, lowest free GPU ids) and
once with the multi-level one: every server a DGX-1 (V100) NVLink graph, the GPUs inside each
server chosen by the MAPA-style rule, per-job predicted bandwidth, and the network term in the
flow's costs (each job's communication intensity drawn uniformly in [0, 1]). Each is timed
``--repeat`` times in the same process; the row keeps the fastest wall time of each and its CPU
time (``time.process_time``), and ``ratio = multi-level wall / two-level wall`` (target <= 2 at
100k GPUs). ``bw_GB/s`` is the mean predicted bandwidth of the multi-GPU jobs on one server;
``blind_bw`` the same for the read-back's lowest free ids (``choose_gpus=False``);
``fresh_bw`` / ``fresh_bl`` the same two for round 1 on the empty cluster, where no chunk is
held in place by continuation.

Part 2, JCT (issue 26, item 6). A generated workload on a cluster of DGX-1 servers (v100,
p100) and PCIe servers (k80), one server per rack, 12.5 GB/s server and rack uplinks, run
through max-min fairness four ways: without a network model (the tables' throughputs, what
the simulator did before); with the network model but placement blind to it (lowest free ids,
no network cost: ``choose_gpus=False, network_cost=0``) -- the truth the first run ignores;
with the inside-server choice only; with the choice and the network cost. The last three share
the same bandwidth and contention model, so their differences are what the placement does.

Usage::

    python benchmarks/interconnect.py --quick        # 1k and 10k GPUs, a small trace
    python benchmarks/interconnect.py                # adds 100k GPUs and a larger trace
    python benchmarks/interconnect.py --part speed   # only part 1 (--part jct: only part 2)
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np
import pandas as pd
from _table import format_header, format_line, write_csv
from placement_scaling import make_cluster, sample_jobs

import hetsched as hs
from hetsched.placement import (
    Interconnect,
    NetworkAware,
    PlacementCosts,
    place,
    preset_graph,
)

RESULTS = Path(__file__).parent / "results"
TYPES = ("v100", "p100", "k80")


def timed(fn):
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def speed_row(servers: int, load: float, seed: int, repeat: int) -> dict:
    rng = np.random.default_rng([seed, servers])
    cluster = make_cluster(servers)
    cap = cluster.as_dict()
    ic = Interconnect({"dgx": preset_graph("dgx1_v100")}, types={t: "dgx" for t in TYPES})
    bound = ic.bind(cluster.topology)
    bound.stacked()   # the per-graph tables are built once per graph, as in a simulation
    jobs1 = sample_jobs(rng, {t: int(round(load * c)) for t, c in cap.items()}, 0)
    kw = dict(allow_overcommit=True)
    p1 = place(cluster, jobs1["job_id"], jobs1["gpu_type"], jobs1["num_gpus"], **kw)
    # round 1 on an empty cluster: what the choice buys when every chunk is free to move
    comm1 = rng.random(len(jobs1))
    fresh = {flag: place(cluster, jobs1["job_id"], jobs1["gpu_type"], jobs1["num_gpus"], interconnect=bound,
                         comm_intensity=comm1, choose_gpus=flag, **kw) for flag in (True, False)}
    stay = rng.random(len(jobs1)) >= 0.2
    kept = jobs1[stay]
    left = kept.groupby("gpu_type")["num_gpus"].sum().reindex(list(cap), fill_value=0)
    new = sample_jobs(rng, {t: max(int(round(load * cap[t])) - int(left[t]), 0) for t in cap},
                      int(jobs1["job_id"].max()) + 1)
    jobs2 = pd.concat([kept, new], ignore_index=True)
    waiting = np.zeros(len(jobs2))
    waiting[: len(kept)] = (~p1.placed[stay]).astype(float)
    comm = rng.random(len(jobs2))
    args = (cluster, jobs2["job_id"], jobs2["gpu_type"], jobs2["num_gpus"])
    kw.update(previous=p1, waiting=waiting)
    two, multi = [], []
    for _ in range(repeat):
        two.append(timed(lambda: place(*args, **kw)))
        multi.append(timed(lambda: place(*args, interconnect=bound, comm_intensity=comm,
                                         costs=PlacementCosts(network=20.0), **kw)))
    blind = place(*args, interconnect=bound, comm_intensity=comm, costs=PlacementCosts(network=20.0),
                  choose_gpus=False, **kw)
    t_best = min(two, key=lambda r: r[1])
    m_best = min(multi, key=lambda r: r[1])
    pm = m_best[0]
    placed_multi = pm.placed & (pm.num_gpus > 1) & (pm.servers_used == 1)
    return {
        "servers": servers, "gpus": servers * 8, "jobs": len(jobs2), "load": load,
        "two_level_wall_s": t_best[1], "two_level_cpu_s": t_best[2],
        "multi_level_wall_s": m_best[1], "multi_level_cpu_s": m_best[2],
        "subset_s": float(pm.info["subset_s"]), "ratio": m_best[1] / t_best[1],
        "placed_two": t_best[0].n_placed, "placed_multi": pm.n_placed,
        "mean_bw_gb_s": float(np.nanmean(pm.bandwidth[placed_multi])) if placed_multi.any() else float("nan"),
        "mean_bw_blind_gb_s": _mean_bw(blind),
        "fresh_bw_gb_s": _mean_bw(fresh[True]), "fresh_bw_blind_gb_s": _mean_bw(fresh[False]),
        "rechosen_chunks": int(pm.info["rechosen_chunks"]),
    }


def _mean_bw(p) -> float:
    """Mean predicted bandwidth of the multi-GPU jobs placed on one server."""
    one = p.placed & (p.num_gpus > 1) & (p.servers_used == 1)
    return float(np.nanmean(p.bandwidth[one])) if one.any() else float("nan")


SPEED_COLUMNS = [
    ("gpus", "GPUs", ">8d"), ("jobs", "jobs", ">7d"), ("two_level_wall_s", "2lvl_s", ">8.3f"),
    ("two_level_cpu_s", "2lvl_cpu", ">8.3f"), ("multi_level_wall_s", "multi_s", ">8.3f"),
    ("multi_level_cpu_s", "multi_cpu", ">9.3f"), ("subset_s", "subset_s", ">8.3f"), ("ratio", "ratio", ">6.2f"),
    ("placed_two", "placed2", ">8d"), ("placed_multi", "placedM", ">8d"), ("mean_bw_gb_s", "bw_GB/s", ">8.1f"),
    ("mean_bw_blind_gb_s", "blind_bw", ">8.1f"), ("fresh_bw_gb_s", "fresh_bw", ">8.1f"),
    ("fresh_bw_blind_gb_s", "fresh_bl", ">8.1f"),
]


def jct_rows(n_jobs: int, rate: float, seeds: list[int]) -> list[dict]:
    cluster = hs.Cluster.from_servers({"v100": 32, "p100": 32, "k80": 32}, gpus_per_server=8, servers_per_rack=1)
    ic = Interconnect({"dgx": preset_graph("dgx1_v100"), "pcie": preset_graph("pcie8")},
                      types={"v100": "dgx", "p100": "dgx", "k80": "pcie"}, server_uplink_gb_s=12.5,
                      rack_uplink_gb_s=12.5)
    variants = {
        "no network model": None,
        "blind placement": NetworkAware(ic, choose_gpus=False, network_cost=0.0),
        "inside-server choice": NetworkAware(ic, network_cost=0.0),
        "choice + network cost": NetworkAware(ic, network_cost=20.0),
    }
    rows = []
    for seed in seeds:
        w = hs.generate_workload(n_jobs, rate_per_hour=rate, seed=seed)
        for name, net in variants.items():
            res, wall, cpu = timed(lambda: hs.simulate("max_min_fairness", w, cluster,
                                                       options=hs.SimOptions(network=net, record_runs=False)))
            s = res.summary
            rows.append({"seed": seed, "variant": name, "jobs": n_jobs, "rate_per_hour": rate,
                         "avg_jct_hours": s["avg_jct_s"] / 3600, "p99_jct_hours": s["p99_jct_s"] / 3600,
                         "makespan_hours": s["makespan_s"] / 3600, "migrations": s["migrations"],
                         "wall_s": wall, "cpu_s": cpu})
    return rows


JCT_COLUMNS = [("seed", "seed", ">4d"), ("variant", "variant", "<24s"), ("avg_jct_hours", "avgJCT_h", ">9.2f"),
               ("p99_jct_hours", "p99JCT_h", ">9.2f"), ("makespan_hours", "mkspan_h", ">9.2f"),
               ("migrations", "migr", ">6d"), ("wall_s", "wall_s", ">7.1f"), ("cpu_s", "cpu_s", ">7.1f")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--part", choices=("all", "speed", "jct"), default="all")
    args = ap.parse_args()
    print(f"machine: {platform.node()} ({os.cpu_count()} CPUs), load average {os.getloadavg()}")
    sizes = [125, 1250] if args.quick else [125, 1250, 12500]
    if args.part in ("all", "speed"):
        rows = []
        print(format_header(SPEED_COLUMNS))
        for servers in sizes:
            row = speed_row(servers, 0.9, args.seed, args.repeat)
            rows.append(row)
            print(format_line(row, SPEED_COLUMNS), flush=True)
        write_csv(rows, RESULTS / ("interconnect_speed_quick.csv" if args.quick else "interconnect_speed.csv"))
    if args.part == "speed":
        return
    n_jobs, rate, seeds = (60, 12.0, [0, 1]) if args.quick else (200, 12.0, [0, 1, 2])
    jrows = jct_rows(n_jobs, rate, seeds)
    print()
    print(format_header(JCT_COLUMNS))
    for r in jrows:
        print(format_line(r, JCT_COLUMNS), flush=True)
    write_csv(jrows, RESULTS / ("interconnect_jct_quick.csv" if args.quick else "interconnect_jct.csv"))
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
