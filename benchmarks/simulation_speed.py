"""Simulation speed and Gavel's Figure 8 on Gavel's standard setup.

Setup (Gavel, OSDI'20 §7.2): 36 V100 + 36 P100 + 36 K80 GPUs, Poisson arrivals at
``load`` jobs/hour, Gavel's measured throughput table (``../shared/data/gavel/``; the
project's generated table when it is absent), jobs measured in a window of positions
(default 500 <= i < 1500: a 1,000-job window after 500 warm-up jobs), the simulation stops
when the window has drained; 2 x window-end jobs are generated so arrivals go on meanwhile.

Three parts:

1. **Speed**: max-min fairness at a few loads, single-GPU jobs (Gavel's continuous-single
   trace) and the Philly multi-GPU mix, with and without min-cost-flow placement: rounds,
   solves, simulated hours per wall second, rounds per second, and the wall time split
   into policy (``hs.solve``), mechanism (plan + history) and placement.
2. **Reference**: the same simulation written the way Gavel's simulator is written
   (dict-of-dict per-job state, a Python loop over job x type entries, a cvxpy LP per
   change from ``gavel_reference.py``), on a small window in the same process; both sides
   use single-stage max-min fairness. Reports the wall-time ratio.
3. **Figure 8**: average JCT of the window against load for heterogeneity-aware max-min
   fairness and its heterogeneity-agnostic variant (``hs.sweep`` over a process pool),
   plotted to ``docs/simulator_fig8.png``.

Usage::

    python benchmarks/simulation_speed.py --quick   # small windows, a few minutes
    python benchmarks/simulation_speed.py           # the full run
    python benchmarks/simulation_speed.py --skip-speed --workers 1   # part 3 (Figure 8) only
    python benchmarks/simulation_speed.py --plot-only   # draw the figure again from the CSV

Writes ``benchmarks/results/simulation_speed.csv`` (parts 1 and 2) and
``benchmarks/results/simulation_fig8.csv`` (part 3).
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

import hetsched as hs
from hetsched.policies import MaxMinFairness
from hetsched.sim import generate_workload, simulate, sweep
from hetsched.sim.bench import GAVEL_CLUSTER, MIXES, gavel_catalogue, speed_run

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
GAVEL_TABLE = ROOT.parent / "shared" / "data" / "gavel" / "simulation_throughputs.json"
FIGURE = ROOT / "docs" / "simulator_fig8.png"
ROUND = 360.0


# ----------------------------------------------------------------------------- reference
def reference_simulate(T: np.ndarray, s: np.ndarray, steps: np.ndarray, arrivals: np.ndarray, C: np.ndarray,
                       L: float = ROUND) -> tuple[np.ndarray, int, int]:
    """Gavel-style simulator: per-job dicts, Python loops, a cvxpy max-min LP per change.

    Returns finish times, rounds and solves.
    """
    sys.path.insert(0, str(HERE))
    import gavel_reference as ref

    n, m = T.shape
    remaining = {j: float(steps[j]) for j in range(n)}
    finish = np.full(n, np.nan)
    time_run = {}      # job -> {type: seconds since the last reset}
    elapsed = {}       # job -> seconds since the last reset
    active: list[int] = []
    X = {}
    nxt = 0
    t = float(arrivals[0])
    changed = False
    rounds = solves = 0
    while True:
        while nxt < n and arrivals[nxt] <= t:
            active.append(nxt)
            time_run[nxt] = {k: 0.0 for k in range(m)}
            elapsed[nxt] = 0.0
            nxt += 1
            changed = True
        if not active:
            if nxt >= n:
                break
            t = float(arrivals[nxt])
            continue
        if changed:
            res = ref.max_min_fairness(T[active], s[active], C)
            solves += 1
            X = {j: {k: float(res.X[i, k]) for k in range(m)} for i, j in enumerate(active)}
            for j in active:  # Gavel resets the time run so far on every new allocation
                time_run[j] = {k: 0.0 for k in range(m)}
                elapsed[j] = 0.0
            changed = False
        entries = []
        for j in active:
            for k in range(m):
                x = X[j][k]
                if x <= 1e-9:
                    continue
                got = time_run[j][k] / elapsed[j] if elapsed[j] > 0 else 0.0
                prio = math.inf if got == 0 else x / got
                deficit = x * (elapsed[j] + L) - time_run[j][k]
                entries.append((prio, deficit, x, -j, -k, j, k))
        entries.sort(reverse=True)
        free = {k: int(C[k]) for k in range(m)}
        placed = {}
        for *_, j, k in entries:
            if j in placed or free[k] < s[j]:
                continue
            free[k] -= int(s[j])
            placed[j] = k
        done_now = []
        for j in active:
            elapsed[j] += L
            if j not in placed:
                continue
            k = placed[j]
            rate = T[j, k]
            if remaining[j] <= rate * L:
                finish[j] = t + remaining[j] / rate
                remaining[j] = 0.0
                done_now.append(j)
            else:
                remaining[j] -= rate * L
            time_run[j][k] += L
        for j in done_now:
            active.remove(j)
            changed = True
        rounds += 1
        t += L
    return finish, rounds, solves


def reference_part(cat, window: tuple[int, int], load: float, seed: int) -> list[dict]:
    tr = generate_workload(window[1], rate_per_hour=load, seed=seed, catalogue=cat, scale_factor_probs=MIXES["single"],
                           long_job_prob=0.0)
    C = np.array([GAVEL_CLUSTER[t] for t in tr.gpu_types], dtype=float)
    rows = []
    t0 = time.perf_counter()
    res = simulate(MaxMinFairness(second_stage=False), tr, hs.Cluster(dict(zip(tr.gpu_types, C.astype(int)))),
                   options=hs.SimOptions(record_runs=False))
    ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    fin, rounds, solves = reference_simulate(np.asarray(tr.jobs.throughputs), tr.jobs.scale_factors,
                                             tr.total_steps, tr.arrival_times, C)
    theirs = time.perf_counter() - t0
    ref_jct = float(np.nanmean(fin - tr.arrival_times))
    ref_hours = float(np.nanmax(fin) - tr.arrival_times[0]) / 3600
    for name, wall, r, sv, jct, hours in (("hetsched", ours, res.summary["n_rounds"], res.summary["n_solves"],
                                           res.summary["avg_jct_hours"], res.summary["simulated_hours"]),
                                          ("gavel-style reference", theirs, rounds, solves, ref_jct / 3600, ref_hours)):
        rows.append({"part": "reference", "policy": "max_min_fairness(second_stage=False)", "mix": "single",
                     "load": load, "window": f"0-{window[1]}", "placement": False, "implementation": name,
                     "rounds": r, "solves": sv, "wall_s": wall, "rounds_per_s": r / wall,
                     "sim_hours": hours, "sim_h_per_wall_s": hours / wall, "avg_jct_hours": jct,
                     "speedup_vs_reference": theirs / wall if name == "hetsched" else 1.0})
    return rows


# ----------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small windows and fewer loads")
    ap.add_argument("--workers", type=int, default=None, help="processes for the Figure-8 sweep (default: CPUs)")
    ap.add_argument("--skip-fig8", action="store_true")
    ap.add_argument("--skip-speed", action="store_true",
                    help="skip parts 1 and 2 and leave simulation_speed.csv as it is (e.g. to re-run Figure 8 only)")
    ap.add_argument("--skip-reference", action="store_true")
    ap.add_argument("--plot-only", action="store_true",
                    help="only draw docs/simulator_fig8.png again from results/simulation_fig8.csv (full-run window)")
    args = ap.parse_args(argv)
    window = (100, 400) if args.quick else (500, 1500)
    if args.plot_only:
        plot_fig8(pd.read_csv(RESULTS / "simulation_fig8.csv"), window)
        return 0
    cat, cat_name = gavel_catalogue(GAVEL_TABLE)
    print(f"simulation_speed: Gavel setup {GAVEL_CLUSTER}, {cat_name} throughputs, window {window}, "
          f"python {platform.python_version()}, {os.cpu_count()} CPUs (shared with other work)")

    rows = []
    if args.skip_speed:
        args.skip_reference = True
    speed_cases = [("single", 2.0, False), ("single", 4.0, False), ("single", 4.0, True), ("multi", 1.5, False),
                   ("multi", 1.5, True)]
    if args.quick:
        speed_cases = [("single", 4.0, False), ("single", 4.0, True), ("multi", 1.5, False)]
    if args.skip_speed:
        speed_cases = []
    for mix, load, placement in speed_cases:
        r = speed_run(load=load, window=window, mix=mix, placement=placement, catalogue=cat)
        r["part"] = "speed"
        r["implementation"] = "hetsched"
        rows.append(r)
        print(f"  speed {mix:6s} load {load:4.1f} placement {placement!s:5s}: {r['rounds']:6d} rounds, "
              f"{r['solves']:5d} solves, {r['sim_hours']:8.1f} sim h in {r['wall_s']:6.1f} s = "
              f"{r['sim_h_per_wall_s']:6.1f} sim h/s, {r['rounds_per_s']:6.0f} rounds/s "
              f"(policy {r['policy_s']:.1f} s, mechanism {r['mechanism_s']:.1f} s, placement {r['placement_s']:.1f} s, "
              f"other {r['other_s']:.1f} s)")
    if not args.skip_reference:
        ref_window = (0, 40) if args.quick else (0, 120)
        for r in reference_part(cat, ref_window, 4.0, 0):
            rows.append(r)
        a, b = rows[-2], rows[-1]
        print(f"  reference ({ref_window[1]} single-GPU jobs, short): hetsched {a['wall_s']:.2f} s, "
              f"Gavel-style {b['wall_s']:.2f} s -> {a['speedup_vs_reference']:.0f}x; avg JCT "
              f"{a['avg_jct_hours']:.2f} h vs {b['avg_jct_hours']:.2f} h")
    df = pd.DataFrame(rows)
    RESULTS.mkdir(parents=True, exist_ok=True)
    if rows:
        df.to_csv(RESULTS / "simulation_speed.csv", index=False)
    cols = ["part", "implementation", "mix", "load", "placement", "rounds", "solves", "sim_hours", "wall_s",
            "sim_h_per_wall_s", "rounds_per_s", "policy_s", "mechanism_s", "placement_s", "other_s", "avg_jct_hours"]
    with pd.option_context("display.width", 250, "display.max_columns", 30, "display.float_format", "{:.2f}".format):
        print(df[[c for c in cols if c in df]].to_string(index=False))

    if not args.skip_fig8:
        loads = [1.0, 2.0, 3.0, 4.0, 5.0] if args.quick else [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
        grid = {
            "policy": {"heterogeneity-aware max-min (Gavel)": MaxMinFairness(),
                       "heterogeneity-agnostic max-min (LAS)": MaxMinFairness(heterogeneity_aware=False)},
            "load": loads,
            "seed": [0],
            "n_jobs": 2 * window[1],
            "catalogue": cat,
            "scale_factor_probs": MIXES["single"],
            "cluster": hs.Cluster(GAVEL_CLUSTER),
            "window": window,
            "max_time": 2000 * 3600.0,
            "wall_time_limit": 120.0 if args.quick else 240.0,
        }
        t0 = time.perf_counter()
        fig = sweep(grid, max_workers=args.workers)
        wall = time.perf_counter() - t0
        fig.to_csv(RESULTS / "simulation_fig8.csv", index=False)
        show = fig[["policy", "load", "status", "n_completed", "avg_jct_hours", "worst_ftf", "utilization",
                    "n_rounds", "wall_s"]]
        with pd.option_context("display.width", 250, "display.float_format", "{:.2f}".format):
            print(show.to_string(index=False))
        print(f"  figure-8 sweep: {len(fig)} runs in {wall:.0f} s")
        plot_fig8(fig, window)
    return 0


def plot_fig8(table: pd.DataFrame, window: tuple[int, int]) -> None:
    """``docs/simulator_fig8.png`` from the Figure-8 sweep table (``simulation_fig8.csv``);
    a load whose runs did not drain their window is marked with a grey x at the top."""
    try:
        import matplotlib
    except ImportError:
        print("  matplotlib not installed: no figure")
        return
    matplotlib.use("Agg")
    from hetsched.sim import plots
    from hetsched.sim.figure_layout import caption

    ax = plots.jct_vs_load(table[table["status"] == "window_done"], errorbars=False)
    ax.set_title("Gavel Figure 8 setup: single-GPU jobs", fontsize="medium")
    bad = table.loc[table["status"] != "window_done", "load"].unique()
    for load in bad:
        ax.annotate("x", (load, ax.get_ylim()[1] * 0.95), ha="center", color="grey")
    marks = "; x: runs that did not drain the window" if len(bad) else ""
    caption(ax.figure, f"{ax.figure.get_supxlabel()} Gavel's throughputs; jobs {window[0]}-{window[1]} "
                       f"measured{marks}.")
    ax.figure.savefig(FIGURE, dpi=120)
    print(f"  wrote {FIGURE.relative_to(ROOT)}")


if __name__ == "__main__":
    sys.exit(main())
