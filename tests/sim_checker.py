"""Independent checker of a simulation's run log.

It knows nothing of how the simulator works: it takes the run log (one row per job and
round it ran: round, job position, GPU type column, GPUs held, start, end, steps, spread),
the per-job table, the throughputs and the cluster's capacities, and lists every broken
rule:

* capacity: in every round, the GPUs held on each type are at most the type's count;
* rounds: every entry of a round starts at the same time, rounds do not overlap;
* gangs ("rounds" mechanism): a job holds exactly its scale factor, on one type per round;
* progress: steps equal throughput x time (unconsolidated throughput when spread; in the
  ideal mechanism the share-weighted throughput), never before arrival, never after finish;
* conservation: a finished job did exactly its total steps and finished exactly once, at
  the end of its last run; an unfinished one did fewer.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def check_simulation(res, *, tol: float = 1e-6) -> list[str]:
    """Violations found in ``res`` (a SimulationResult with ``runs``); empty when all hold."""
    runs = res.runs
    jobs = res.jobs
    cap = np.asarray(res.capacities, dtype=float)
    T = res.extra["throughputs"]
    U = res.extra["unconsolidated"]
    ideal = res.config["mechanism"] == "ideal"
    L = float(res.config["round_seconds"])
    out: list[str] = []
    if runs is None:
        return ["no run log (record_runs=False)"]
    r = runs["round"].to_numpy(dtype=np.int64)
    j = runs["job"].to_numpy(dtype=np.int64)
    k = runs["gpu_type"].to_numpy(dtype=np.int64)
    g = runs["gpus"].to_numpy(dtype=float)
    t0 = runs["t_start"].to_numpy(dtype=float)
    t1 = runs["t_end"].to_numpy(dtype=float)
    steps = runs["steps"].to_numpy(dtype=float)
    spread = runs["spread"].to_numpy(dtype=bool)
    n = len(jobs)
    sf = jobs["scale_factor"].to_numpy(dtype=float)
    arrival = jobs["arrival"].to_numpy(dtype=float)
    finish = jobs["finish"].to_numpy(dtype=float)
    total = jobs["total_steps"].to_numpy(dtype=float)
    completed = jobs["completed"].to_numpy(dtype=bool)

    # capacity per round and type
    if len(r):
        key = r * len(cap) + k
        used = pd.Series(g).groupby(key).sum()
        for kk, v in used.items():
            rr, tt = divmod(int(kk), len(cap))
            if v > cap[tt] + tol:
                out.append(f"round {rr}: {v} GPUs of type {tt} used, capacity {cap[tt]}")
    # rounds: one start per round, increasing, no overlap
    starts = pd.Series(t0).groupby(r).agg(["min", "max"])
    if (starts["max"] - starts["min"] > tol).any():
        out.append("entries of one round start at different times")
    s = starts["min"].to_numpy()
    if (np.diff(s) < L - tol).any():
        out.append("rounds overlap (start times closer than the round length)")
    if ((t1 - t0) > L + tol).any() or ((t1 - t0) <= 0).any():
        out.append("a run entry lasts more than a round or not at all")
    # gangs
    if not ideal:
        if (np.abs(g - sf[j]) > tol).any():
            out.append("a job held a number of GPUs other than its scale factor")
        if pd.Series(np.ones(len(r))).groupby([r, j]).sum().max() > 1 if len(r) else False:
            out.append("a job ran on two types in one round")
    # progress
    if not ideal:
        rate = np.where(spread & (U is not None), U[j, k] if U is not None else 0.0, T[j, k])
        expect = rate * (t1 - t0)
        bad = np.abs(steps - expect) > tol * np.maximum(1.0, expect)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            out.append(f"entry {i}: {steps[i]} steps, throughput x time gives {expect[i]}")
    else:
        share = g / sf[j]
        expect = T[j, k] * share * (t1 - t0)
        bad = np.abs(steps - expect) > tol * np.maximum(1.0, expect)
        if bad.any():
            out.append("ideal mechanism: steps differ from share x throughput x time")
    if (t0 < arrival[j] - tol).any():
        out.append("a job ran before it arrived")
    fin_known = np.isfinite(finish[j])
    if (t1[fin_known] > finish[j][fin_known] + tol).any():
        out.append("a job ran after it finished")
    # conservation
    done = np.bincount(j, weights=steps, minlength=n)
    last_end = pd.Series(t1).groupby(j).max().reindex(range(n)).to_numpy()
    for q in range(n):
        if completed[q]:
            if abs(done[q] - total[q]) > tol * max(1.0, total[q]):
                out.append(f"job {q}: finished with {done[q]} of {total[q]} steps")
            if not np.isfinite(finish[q]) or abs(last_end[q] - finish[q]) > tol * max(1.0, finish[q]):
                out.append(f"job {q}: finish {finish[q]} is not the end of its last run {last_end[q]}")
        else:
            if done[q] >= total[q] - tol:
                out.append(f"job {q}: did all its steps but is not marked finished")
            if np.isfinite(finish[q]):
                out.append(f"job {q}: has a finish time but is not completed")
    if abs(done.sum() - jobs["steps_done"].sum()) > tol * max(1.0, done.sum()):
        out.append("run log steps differ from the job table's steps_done")
    return out
