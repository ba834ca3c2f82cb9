"""Independent checker of a simulation's run log.

It knows nothing of how the simulator works: it takes the run log (one row per job and
round it ran: round, job position, GPU type column, GPUs its row holds, share of the round,
row number ``unit`` within the round, partner, rate, start, end, restart seconds, steps,
spread), the per-job table, the throughputs and the cluster's capacities, and lists every
broken rule:

* capacity: in every round, the GPUs held on each type are at most the type's count, a
  space-sharing pair's GPUs counted once (its two members share one ``unit``);
* pairs: both members of a unit run on the same type with the same GPUs, and each names
  the other as partner;
* rounds: every entry of a round starts at the same time, rounds do not overlap;
* gangs ("rounds" mechanism): one row per job per round, running the whole round; with
  ``fixed_gangs`` a job holds exactly its scale factor (not so for elastic schedulers);
* progress: steps equal rate x (time - restart); the rate is the job's own throughput T
  (U when spread) for single rows, or what ``rate_bound(job, partner, type, gpus)`` allows
  (pair tables, Sia goodput), never more;
* restarts: with ``restart_seconds`` r, an entry is charged r (or the whole entry when
  shorter) exactly when the job did not hold the same type and GPU count in the previous
  round (or placement moved it; ``moved`` entries may be charged), else nothing;
* conservation: a finished job did exactly its total steps and finished exactly once, at
  the end of its last run; an unfinished one did fewer.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd


def check_simulation(res, *, tol: float = 1e-6, fixed_gangs: bool | None = None,
                     rate_bound: Callable[[int, int, int, int], float] | None = None) -> list[str]:
    """Violations found in ``res`` (a SimulationResult with ``runs``); empty when all hold.

    Parameters
    ----------
    res : SimulationResult
    tol : float
        Relative tolerance.
    fixed_gangs : bool, optional
        Whether every row must hold the job's scale factor (default: unless the policy
        chooses configurations, i.e. ``res.config["policy_name"] == "sia"``).
    rate_bound : callable, optional
        ``f(job, partner, type, gpus) -> steps/s`` the entry may progress at, for rows the
        trace's T and U do not describe (pairs, elastic configurations). Without it, pair
        members and non-scale-factor rows must not exceed T of the job on the type.
    """
    runs = res.runs
    jobs = res.jobs
    cap = np.asarray(res.capacities, dtype=float)
    T = res.extra["throughputs"]
    U = res.extra["unconsolidated"]
    ideal = res.config["mechanism"] == "ideal"
    L = float(res.config["round_seconds"])
    restart_s = float(res.config.get("restart_seconds", 0.0))
    if fixed_gangs is None:
        fixed_gangs = res.config.get("policy_name") != "sia"
    out: list[str] = []
    if runs is None:
        return ["no run log (record_runs=False)"]
    r = runs["round"].to_numpy(dtype=np.int64)
    j = runs["job"].to_numpy(dtype=np.int64)
    k = runs["gpu_type"].to_numpy(dtype=np.int64)
    g = runs["gpus"].to_numpy(dtype=float)
    share = runs["share"].to_numpy(dtype=float)
    unit = runs["unit"].to_numpy(dtype=np.int64)
    partner = runs["partner"].to_numpy(dtype=np.int64)
    rate = runs["rate"].to_numpy(dtype=float)
    t0 = runs["start_s"].to_numpy(dtype=float)
    t1 = runs["end_s"].to_numpy(dtype=float)
    restart = runs["restart_s"].to_numpy(dtype=float)
    steps = runs["steps"].to_numpy(dtype=float)
    spread = runs["spread"].to_numpy(dtype=bool)
    n = len(jobs)
    sf = jobs["scale_factor"].to_numpy(dtype=float)
    arrival = jobs["arrival_s"].to_numpy(dtype=float)
    finish = jobs["finish_s"].to_numpy(dtype=float)
    total = jobs["total_steps"].to_numpy(dtype=float)
    completed = jobs["completed"].to_numpy(dtype=bool)

    # capacity per round and type, one count per unit
    if len(r):
        units = pd.DataFrame({"r": r, "u": unit, "k": k, "g": g * share}).drop_duplicates(["r", "u"])
        used = units.groupby(["r", "k"])["g"].sum()
        for (rr, tt), v in used.items():
            if v > cap[tt] + tol:
                out.append(f"round {rr}: {v} GPUs of type {tt} used, capacity {cap[tt]}")
        per_unit = pd.DataFrame({"r": r, "u": unit, "k": k, "g": g}).groupby(["r", "u"]).agg(["min", "max", "size"])
        if ((per_unit[("k", "min")] != per_unit[("k", "max")]) | (per_unit[("g", "min")] != per_unit[("g", "max")])).any():
            out.append("the members of a pair ran on different types or GPU counts")
        if (per_unit[("k", "size")] > 2).any():
            out.append("a unit has more than two members")
    pair = partner >= 0
    if pair.any():
        key = pd.Series(partner, index=pd.MultiIndex.from_arrays([r, j]))
        back = key.reindex(pd.MultiIndex.from_arrays([r[pair], partner[pair]])).to_numpy()
        if not np.array_equal(back, j[pair].astype(float)) and not np.array_equal(back, j[pair]):
            out.append("a pair member's partner does not name it back (a split pair)")
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
        if fixed_gangs and (np.abs(g - sf[j]) > tol).any():
            out.append("a job held a number of GPUs other than its scale factor")
        if (np.abs(share - 1.0) > tol).any():
            out.append("a row of the rounds mechanism ran for part of a round")
        if len(r) and pd.Series(np.ones(len(r))).groupby([r, j]).sum().max() > 1:
            out.append("a job ran in two rows in one round")
    else:
        if len(r) and pd.Series(share).groupby([r, j]).sum().max() > 1 + tol:
            out.append("ideal mechanism: a job's shares in one round sum to more than 1")
    # rate: what the row's throughput allows
    own = np.where(spread & (U is not None), U[j, k] if U is not None else 0.0, T[j, k])
    plain = (partner < 0) & (np.abs(g - sf[j]) <= tol)
    bound = own.copy()
    if rate_bound is not None:
        for i in np.flatnonzero(~plain):
            bound[i] = rate_bound(int(j[i]), int(partner[i]), int(k[i]), int(round(g[i])))
    if (rate > bound * (1 + tol) + tol).any():
        i = int(np.flatnonzero(rate > bound * (1 + tol) + tol)[0])
        out.append(f"entry {i}: rate {rate[i]} exceeds what the row allows ({bound[i]})")
    if (np.abs(rate[plain] - own[plain]) > tol * np.maximum(1.0, own[plain])).any():
        out.append("a single row progressed at a rate other than the job's throughput")
    # progress
    expect = rate * share * np.maximum(t1 - t0 - restart, 0.0)
    if ideal:
        pass  # in ideal mode the entries of one job share one finish time; steps split by rate
    bad = np.abs(steps - expect) > tol * np.maximum(1.0, expect)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        out.append(f"entry {i}: {steps[i]} steps, rate x share x (time - restart) gives {expect[i]}")
    # restarts: charged exactly where the job's GPUs changed
    if len(r):
        prev = pd.DataFrame({"r": r + 1, "j": j, "k": k, "g": g}).set_index(["r", "j"])
        idx = pd.MultiIndex.from_arrays([r, j])
        pk = prev["k"].reindex(idx).to_numpy()
        pg = prev["g"].reindex(idx).to_numpy()
        held = (pk == k) & (pg == g)
        charge = np.minimum(restart_s, t1 - t0)
        if ((~held) & (np.abs(restart - charge) > tol) & (restart_s > 0)).any():
            out.append("a job started on new GPUs without the restart cost")
        # held GPUs: no charge unless placement moved the job (a migration; allowed)
        moved_ok = jobs["migrations"].to_numpy()[j] > 0
        if (held & (restart > tol) & ~moved_ok).any():
            out.append("a restart was charged to a job that kept its GPUs")
        if restart_s == 0 and (restart > 0).any():
            out.append("restart seconds charged with restart_seconds = 0")
        if "restarts" in jobs and not ideal:
            # every start on GPUs not held the round before is a restart event; placement may
            # add events (a job moved on the same type), at most one per migration
            events = np.bincount(j, weights=~held, minlength=n)
            got = jobs["restarts"].to_numpy()
            mig = jobs["migrations"].to_numpy()
            if (got < events - 0.5).any() or (got > events + mig + 0.5).any():
                out.append("the job table's restart counts differ from the run log")
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
