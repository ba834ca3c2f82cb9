"""Online mode: next_round speed at scale, the estimator's hold-out errors, and the JCT cost of
learning throughputs instead of knowing them.

Three parts (each prints a table and writes a CSV under ``benchmarks/results/``):

1. ``online_speed.csv`` — ``OnlineScheduler.next_round`` with ``--jobs`` active jobs (default
   10,000, Gavel's Philly gang mix 1/2/4/8 GPUs with probability 0.70/0.10/0.15/0.05, job
   types drawn from a generated 26-type catalogue) on ``--gpus`` GPUs (default 1,000: 334
   V100, 333 P100, 333 K80), max-min fairness, store on local disk. The store is built,
   the first round solves, then ``--rounds`` rounds are timed without a re-solve, in two
   cases: no reports between rounds, and one report per running job between rounds (the
   estimator then refreshes). Per case: median and p95 of the whole call and of its parts
   (``record_s``, ``estimate_s``, ``plan_s``, ``place_s``, ``store_s`` = encoding the round
   state and writing it, ``commit_s`` = the SQLite COMMIT alone) and the bytes of round
   state the commit wrote (``stored_kb``: the JSON tree plus array deltas), for ``synchronous`` FULL and NORMAL, without a
   topology and with servers of 8 GPUs (placement in the call). A last row times a round
   with a re-solve (one job submitted) and reports the call minus the solve.
2. ``online_estimator.csv`` — :func:`hetsched.online.holdout_errors` on Gavel's table (when
   ``../shared/data`` has it) and on generated catalogues: quantiles of |log error| per
   number of measured types and completion method.
3. ``online_jct.csv`` — ``simulate(..., learn_throughputs=True)`` against the oracle (same
   workload, same settings, true throughputs known): average JCT and its change, for report
   noise 0, 0.1 and 0.3 and with or without a reference table (a generated catalogue with
   another seed: profiled types that are not the workload's).
4. ``online_drivers.csv`` (``--parts drivers``, not in the default set) — the rows of
   ``benchmarks/simulation_speed.py --quick`` (Gavel's cluster and table, window 100-400,
   800 jobs, max-min fairness) through ``simulate``'s own per-round call and through the
   ``OnlineScheduler`` driver (``simulate_online(learn=False)``, in-memory store), run
   interleaved, best of ``--repeats``; then one more online run per row with the time
   inside the store's transactions (SQL and commit) counted, to split the online driver's
   extra time per round into the store part and the rest.

Usage::

    python benchmarks/online.py --quick      # 2,000 jobs / 200 GPUs, fewer seeds (~1 min)
    python benchmarks/online.py              # the sizes above
    python benchmarks/online.py --parts drivers --repeats 3
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

import hetsched as hs
from hetsched.online import OnlineScheduler, holdout_errors

RESULTS = Path(__file__).resolve().parent / "results"
GAVEL = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "gavel" / "simulation_throughputs.json"
PARTS = ("total_s", "record_s", "estimate_s", "plan_s", "place_s", "store_s", "commit_s")


def _jobs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, hs.ThroughputCatalogue]:
    rng = np.random.default_rng(seed)
    cat = hs.generate_catalogue(seed=seed)
    sf = rng.choice([1, 2, 4, 8], size=n, p=[0.70, 0.10, 0.15, 0.05])
    models = np.unique(cat.job_types)
    types = rng.choice(models, size=n)
    return sf, types, cat


def _build(path: Path, cluster: hs.Cluster, n_jobs: int, seed: int) -> hs.ThroughputCatalogue:
    sf, types, cat = _jobs(n_jobs, seed)
    with OnlineScheduler("max_min_fairness", cluster, store=path, reference=cat, synchronous="OFF") as s:
        for i in range(n_jobs):
            s.submit(f"job-{i}", job_type=str(types[i]), scale_factor=int(sf[i]), total_steps=1e9, arrival=0.0)
    return cat


def speed(n_jobs: int, n_gpus: int, rounds: int, seed: int) -> pd.DataFrame:
    counts = {"v100": n_gpus - 2 * (n_gpus // 3), "p100": n_gpus // 3, "k80": n_gpus // 3}
    rows = []
    for topo in (False, True):
        cluster = hs.Cluster.from_servers(counts, gpus_per_server=8) if topo else hs.Cluster(counts)
        for sync in ("FULL", "NORMAL"):
            with tempfile.TemporaryDirectory() as d:
                path = Path(d) / "bench.db"
                cat = _build(path, cluster, n_jobs, seed)
                t0 = time.perf_counter()
                s = OnlineScheduler("max_min_fairness", cluster, store=path, reference=cat, synchronous=sync)
                open_s = time.perf_counter() - t0
                first = s.next_round(0.0)
                now = 0.0
                for case in ("no_reports", "reports"):
                    samples = []
                    for _ in range(rounds):
                        if case == "reports":
                            for r in first.assignments.itertuples():
                                s.report(r.job_id, r.gpu_type, 100.0, 360.0)
                        now += 360.0
                        plan = s.next_round(now)
                        assert not plan.solved, "a round without a change must not re-solve"
                        samples.append({**plan.timings, "stored_kb": plan.stored_bytes / 1024})
                        first = plan
                    df = pd.DataFrame(samples)
                    row = {"case": case, "topology": topo, "synchronous": sync, "n_jobs": n_jobs, "n_gpus": n_gpus,
                           "rows": int(first.rows.n_rows), "open_s": open_s, "first_round_s": None}
                    for p in PARTS:
                        row[f"{p}_median_ms"] = 1e3 * float(df[p].median())
                        row[f"{p}_p95_ms"] = 1e3 * float(df[p].quantile(0.95))
                    row["stored_kb_median"] = float(df["stored_kb"].median())
                    row["stored_kb_p95"] = float(df["stored_kb"].quantile(0.95))
                    rows.append(row)
                # a round with a re-solve: one more job
                s.submit("extra", job_type=str(cat.job_types[0]), total_steps=1e9, arrival=now)
                now += 360.0
                plan = s.next_round(now)
                t = plan.timings
                rows.append({"case": "resolve", "topology": topo, "synchronous": sync, "n_jobs": n_jobs + 1,
                             "n_gpus": n_gpus, "rows": int(plan.rows.n_rows), "open_s": open_s,
                             "solve_s": float(plan.info.get("solve_s", np.nan)),
                             "total_minus_solve_ms": 1e3 * (t["total_s"] - float(plan.info.get("solve_s", 0.0))),
                             "stored_kb_median": plan.stored_bytes / 1024,
                             **{f"{p}_median_ms": 1e3 * t[p] for p in PARTS}})
                s.close()
    return pd.DataFrame(rows)


def estimator(seeds: list[int]) -> pd.DataFrame:
    tables = []
    if GAVEL.exists():
        tables.append(("gavel", hs.load_gavel_throughputs(GAVEL)))
    for s in seeds:
        tables.append((f"generated-seed{s}", hs.generate_catalogue(seed=s)))
    out = []
    for name, cat in tables:
        df = holdout_errors(cat)
        df["abs"] = df["log_error"].abs()
        for (n, c), g in df.groupby(["n_observed", "completion"]):
            q = g["abs"].quantile([0.5, 0.9]).to_numpy()
            out.append({"table": name, "n_observed": int(n), "completion": c, "entries": len(g),
                        "median_abs_log_err": q[0], "p90_abs_log_err": q[1], "mean_abs_log_err": g["abs"].mean(),
                        "median_rel_err": float(np.median(np.abs(np.exp(g["log_error"]) - 1)))})
    return pd.DataFrame(out)


def jct(n_jobs: int, seeds: list[int], policies: list[str]) -> pd.DataFrame:
    cluster = hs.Cluster({"v100": 8, "p100": 8, "k80": 8})
    ref = hs.generate_catalogue(seed=99)
    rows = []
    for pol in policies:
        for seed in seeds:
            wl = {"n_jobs": n_jobs, "rate_per_hour": 3.0}
            oracle = hs.simulate(pol, wl, cluster, options=hs.SimOptions(seed=seed))
            base = oracle.summary["avg_jct_s"]
            rows.append({"policy": pol, "seed": seed, "mode": "oracle", "noise": 0.0, "reference": "-",
                         "avg_jct_h": base / 3600, "jct_change_pct": 0.0})
            for noise in (0.0, 0.1, 0.3):
                for rname, r in (("none", None), ("generated-seed99", ref)):
                    opts = hs.SimOptions(seed=seed, learn_throughputs=True, report_noise=noise, throughput_reference=r)
                    res = hs.simulate(pol, wl, cluster, options=opts)
                    v = res.summary["avg_jct_s"]
                    rows.append({"policy": pol, "seed": seed, "mode": "learned", "noise": noise, "reference": rname,
                                 "avg_jct_h": v / 3600, "jct_change_pct": 100 * (v / base - 1)})
    return pd.DataFrame(rows)


def drivers(repeats: int) -> pd.DataFrame:
    """Part 4: simulate's loop against the OnlineScheduler driver on the quick speed rows."""
    import contextlib

    from hetsched.online import store as store_module
    from hetsched.sim.bench import GAVEL_CLUSTER, MIXES, gavel_catalogue
    from hetsched.sim.replay import simulate_online

    cat, cat_name = gavel_catalogue(GAVEL)
    out = []
    for mix, load, placement in [("single", 4.0, False), ("single", 4.0, True), ("multi", 1.5, False)]:
        tr = hs.generate_workload(800, rate_per_hour=load, seed=0, catalogue=cat, scale_factor_probs=MIXES[mix])
        cl = hs.Cluster.from_servers(GAVEL_CLUSTER, gpus_per_server=8) if placement else hs.Cluster(GAVEL_CLUSTER)
        kw = {"options": hs.SimOptions(window=(100, 400), max_time=200 * 24 * 3600.0, placement=placement, seed=0,
                                       record_runs=False)}
        runs = {"simulate": hs.simulate, "online": lambda p, t, c, **k: simulate_online(p, t, c, learn=False, **k)}
        wall: dict[str, list[float]] = {name: [] for name in runs}
        jct = {}
        for _ in range(repeats):              # interleaved: both see the same machine noise
            for name, fn in runs.items():
                t0 = time.perf_counter()
                res = fn("max_min_fairness", tr, cl, **kw)
                wall[name].append(time.perf_counter() - t0)
                jct[name] = res.summary["avg_jct_s"]
                n_rounds = res.summary["n_rounds"]
        spent = [0.0]
        original = store_module.Store.transaction

        @contextlib.contextmanager
        def timed(self, _orig=original, _spent=spent):
            t0 = time.perf_counter()
            with _orig(self) as cur:
                yield cur
            _spent[0] += time.perf_counter() - t0

        store_module.Store.transaction = timed
        try:
            t0 = time.perf_counter()
            simulate_online("max_min_fairness", tr, cl, learn=False, **kw)
            split_wall = time.perf_counter() - t0
        finally:
            store_module.Store.transaction = original
        best_old, best_new = min(wall["simulate"]), min(wall["online"])
        extra = (best_new - best_old) / n_rounds
        store_ms = 1e3 * spent[0] / n_rounds
        out.append({"mix": mix, "load": load, "placement": placement, "throughputs": cat_name, "rounds": n_rounds,
                    "simulate_best_s": best_old, "online_best_s": best_new,
                    "simulate_all_s": " ".join(f"{x:.2f}" for x in wall["simulate"]),
                    "online_all_s": " ".join(f"{x:.2f}" for x in wall["online"]),
                    "online_over_simulate": best_new / best_old, "same_avg_jct": jct["simulate"] == jct["online"],
                    "extra_ms_per_round": 1e3 * extra, "store_ms_per_round": store_ms,
                    "rest_ms_per_round": 1e3 * extra - store_ms, "split_run_s": split_wall})
        print(f"  drivers {mix} {load} placement={placement}: simulate {best_old:.2f} s, online {best_new:.2f} s "
              f"({best_new / best_old:.2f}x), {n_rounds} rounds", flush=True)
    return pd.DataFrame(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--gpus", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--parts", default="speed,estimator,jct")
    ap.add_argument("--repeats", type=int, default=3, help="best of this many runs (part drivers)")
    args = ap.parse_args()
    n_jobs = args.jobs or (2000 if args.quick else 10_000)
    n_gpus = args.gpus or (200 if args.quick else 1000)
    rounds = args.rounds or (5 if args.quick else 20)
    RESULTS.mkdir(exist_ok=True)
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.python_version()}, hetsched "
          f"{hs.__version__}; load average {os.getloadavg()[0]:.1f} (other processes share the CPUs)")
    pd.set_option("display.width", 200)
    parts = set(args.parts.split(","))
    if "speed" in parts:
        load0 = os.getloadavg()[0]
        df = speed(n_jobs, n_gpus, rounds, seed=0)
        df["loadavg_before"], df["loadavg_after"] = load0, os.getloadavg()[0]
        df.to_csv(RESULTS / "online_speed.csv", index=False)
        cols = ["case", "topology", "synchronous", "rows"] + [c for c in df.columns if c.endswith("_median_ms")] \
            + ["total_s_p95_ms", "stored_kb_median", "solve_s", "total_minus_solve_ms"]
        print(df[[c for c in cols if c in df]].round(2).to_string(index=False))
    if "estimator" in parts:
        df = estimator([0] if args.quick else [0, 1, 2])
        df.to_csv(RESULTS / "online_estimator.csv", index=False)
        print(df.round(3).to_string(index=False))
    if "jct" in parts:
        df = jct(40 if args.quick else 100, [0] if args.quick else [0, 1, 2],
                 ["max_min_fairness"] if args.quick else ["max_min_fairness", "finish_time_fairness"])
        df.to_csv(RESULTS / "online_jct.csv", index=False)
        summary = df.groupby(["policy", "mode", "noise", "reference"])[["avg_jct_h", "jct_change_pct"]].mean()
        print(summary.round(2).to_string())
    if "drivers" in parts:
        load0 = os.getloadavg()[0]
        df = drivers(args.repeats)
        df["loadavg_before"], df["loadavg_after"] = load0, os.getloadavg()[0]
        df.to_csv(RESULTS / "online_drivers.csv", index=False)
        print(df.drop(columns=["simulate_all_s", "online_all_s"]).round(3).to_string(index=False))


if __name__ == "__main__":
    main()
