"""Large clusters: general LP paths, the exact structured path, POP partitioning, aggregation.

For each workload (``random``: i.i.d. lognormal throughputs; ``catalogue``: jobs drawn from
an 80-row generated table, so aggregation merges them), number of jobs n and number of
GPU types m (3: v100/p100/k80; 10: h100 ... k80), this solves max-min fairness (the
default policy, two stages) on one instance with every path and reports wall seconds of
``hetsched.solve`` (build + solve) and the minimum normalized share relative to the exact
optimum of the same instance (``min_share_ratio``; the exact optimum is the structured
path's certified result). The cluster has about n/4 GPUs split evenly over the types.

Paths (``method``):

* ``highs-simplex`` - HiGHS dual simplex on the whole LP;
* ``highs-ipx`` - HiGHS interior point (IPX) with crossover;
* ``auto`` - ``solver="auto"`` (Clarabel for large LPs);
* ``structured`` - ``solver="structured"`` (hetsched.solvers.structured);
* ``pop-k{4,16,64}`` - ``hetsched.Partitioned(policy=..., k=...)``, sub-problems solved with
  ``solver="structured"`` in a process pool (2 workers here);
* on catalogue rows every path aggregates identical jobs first (``aggregate=True``);
  ``no-aggregation`` is the structured path on the un-aggregated jobs.

General paths run under ``--general-limit`` seconds (status ``time_limit`` when they hit it).

``--candidates`` also measures the candidate exact paths of issue 8 on stage 1 (the
level LP) through :func:`hetsched.solvers.structured.solve_separable` with each source of first
prices (``init``): the sample (default), Lagrangian cutting planes, both (hybrid),
a cold start (pure column generation), HiGHS IPX without crossover + repair and PDLP +
repair; rows go to ``large_cluster_candidates.csv``. ``--policies`` times the structured
path against the general HiGHS path (IPX) for max-min fairness, max-sum throughput, min
makespan and finish-time fairness over the sizes (``large_cluster_policies.csv`` and the log-log plot
``docs/img/scaling_policies.png``; 10^6 with ``--million``, structured only).
``--plot`` draws the figures of docs/scaling.md from the CSVs (needs matplotlib).

Usage::

    python benchmarks/large_cluster.py --quick            # under a minute on 2 cores
    python benchmarks/large_cluster.py                    # n up to 1e5 (general paths up to 1e5)
    python benchmarks/large_cluster.py --million          # adds n = 1e6
    python benchmarks/large_cluster.py --candidates --policies
    python benchmarks/large_cluster.py --no-main --policies --million --general-limit 60
    python benchmarks/large_cluster.py --plot             # figures from the CSVs
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import hetsched as hs
import hetsched.solvers.structured as st
from hetsched.api import Partitioned
from hetsched.executors import default_workers
from hetsched.inputs.throughputs import generate_catalogue
from hetsched.inputs.workloads import random_jobs, sample_jobs

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_OUT = RESULTS / "large_cluster.csv"
CANDIDATES_OUT = RESULTS / "large_cluster_candidates.csv"
POLICIES_OUT = RESULTS / "large_cluster_policies.csv"
FIG_DIR = Path(__file__).resolve().parent.parent / "docs" / "img"

GPU_TYPES: dict[int, dict[str, float]] = {
    3: {"v100": 4.0, "p100": 3.0, "k80": 1.0},
    10: {"h100": 12.0, "a100": 8.0, "l40s": 6.0, "v100": 4.0, "rtx6000": 3.5,
         "p100": 3.0, "a10": 2.5, "l4": 2.0, "t4": 1.5, "k80": 1.0},
}
JOBS_PER_GPU = 4
CATALOGUE_JOB_TYPES = 20


# ----------------------------------------------------------------------------- instances
@dataclass(frozen=True)
class Instance:
    workload: str
    jobs: hs.JobSet
    cluster: hs.Cluster

    @property
    def n(self) -> int:
        return self.jobs.n_jobs

    @property
    def m(self) -> int:
        return self.jobs.n_types


def make_instance(workload: str, n: int, m: int, seed: int) -> Instance:
    """Jobs and a cluster of about n/4 GPUs split evenly over m types (>= 8 per type)."""
    rng = np.random.default_rng([seed, n, m, {"random": 0, "catalogue": 1, "skewed": 2}[workload]])
    types = tuple(GPU_TYPES[m])
    per_type = max(8, int(round(n / (JOBS_PER_GPU * m))))
    counts = {t: per_type for t in types}
    if workload == "random":
        jobs = random_jobs(n, types, seed=rng, id_prefix=None)
    elif workload == "catalogue":
        cat = generate_catalogue(n_job_types=CATALOGUE_JOB_TYPES, gpu_types=GPU_TYPES[m], seed=seed)
        jobs = sample_jobs(cat, n, seed=rng, id_prefix=None).jobs
    elif workload == "skewed":  # GPU speeds matter, unequal counts: prices far from uniform
        speed = np.array(list(GPU_TYPES[m].values()))
        T = (np.exp(rng.normal(0, 1, n))[:, None] * speed[None, :] ** rng.uniform(0.5, 1.5, (n, 1))
             * np.exp(rng.normal(0, 0.3, (n, m))))
        jobs = hs.JobSet(T, gpu_types=types)
        share = rng.dirichlet(np.full(m, 2.0))
        counts = {t: int(max(8, n / JOBS_PER_GPU * s)) for t, s in zip(types, share)}
    else:
        raise ValueError(workload)
    return Instance(workload, jobs, hs.Cluster(counts))


# ------------------------------------------------------------------------------- methods
@dataclass(frozen=True)
class Method:
    name: str
    solver: str
    options: dict | None = None
    k: int = 0
    aggregate: bool = True
    general: bool = False


METHODS = {
    "highs-simplex": Method("highs-simplex", "highs", {"solver": "simplex"}, general=True),
    "highs-ipx": Method("highs-ipx", "highs", {"solver": "ipm", "run_crossover": "on"}, general=True),
    "auto": Method("auto", "auto", general=True),
    "structured": Method("structured", "structured"),
    "no-aggregation": Method("no-aggregation", "structured", aggregate=False),
    "pop-k4": Method("pop-k4", "structured", k=4),
    "pop-k16": Method("pop-k16", "structured", k=16),
    "pop-k64": Method("pop-k64", "structured", k=64),
}


def run_method(method: Method, inst: Instance, policy, limit: float | None) -> dict:
    pol = policy()
    if method.k:
        pol = Partitioned(policy=pol, k=method.k, seed=0)
    t0 = time.perf_counter()
    try:
        res = hs.solve(pol, inst.jobs, inst.cluster, solver=method.solver, options=method.options,
                       aggregate=method.aggregate, time_limit=limit if method.general else None)
    except hs.ValidationError as exc:  # e.g. k too large for the cluster's gangs
        return {"seconds": math.nan, "status": "not applicable", "objective": math.nan, "message": str(exc)[:120]}
    wall = time.perf_counter() - t0
    return {
        "seconds": wall, "status": res.status, "objective": float(res.objective), "message": res.message[:120],
        "classes": res.sizes.get("n_classes", inst.n), "programs": res.sizes.get("n_programs", 0),
        "build_s": res.timings.get("build_s", math.nan), "solve_s": res.timings.get("solve_s", math.nan),
        "sub_max_s": res.extra.get("subproblem_max_s", math.nan), "sub_sum_s": res.extra.get("subproblem_sum_s", math.nan),
        "solver": res.solver,
    }


def make_row(policy: str, inst: Instance, method: Method, r: dict, exact: float) -> dict:
    ratio = r["objective"] / exact if (math.isfinite(exact) and exact and math.isfinite(r["objective"])) else math.nan
    if policy in ("min_makespan", "finish_time_fairness") and math.isfinite(ratio):
        ratio = 1.0 / ratio  # minimized objectives: report optimum / value (<= 1)
    return {
        "policy": policy, "workload": inst.workload, "jobs": inst.n, "types": inst.m,
        "classes": r.get("classes", inst.n), "method": method.name, "k": method.k,
        "seconds": r["seconds"], "build_s": r.get("build_s", math.nan), "solve_s": r.get("solve_s", math.nan),
        "sub_max_s": r.get("sub_max_s", math.nan), "sub_sum_s": r.get("sub_sum_s", math.nan),
        "status": r["status"], "objective": r["objective"], "exact_objective": exact,
        "min_share_ratio": ratio, "loss_pct": 100.0 * (1.0 - ratio) if math.isfinite(ratio) else math.nan,
        "programs": r.get("programs", 0), "solver": r.get("solver", ""), "message": r["message"],
    }


POLICIES = {
    "max_min_fairness": lambda: hs.policies.MaxMinFairness(),
    "max_sum_throughput": lambda: hs.policies.MaxSumThroughput(),
    "min_makespan": lambda: hs.policies.MinMakespan(),
    "finish_time_fairness": lambda: hs.policies.FinishTimeFairness(),
}


# ---------------------------------------------------------------------------------- plan
def methods_for(workload: str, n: int, m: int, args) -> list[str]:
    out = ["structured"]
    if workload == "catalogue":
        out += ["auto"] + (["no-aggregation"] if n <= args.noagg_max_n else [])
        return out
    general = n <= args.general_max_n and (n <= 10_000 or m in args.general_types)
    if general and n <= args.simplex_max_n:
        out.append("highs-simplex")
    if general:
        out += ["highs-ipx", "auto"]
    out += [f"pop-k{k}" for k in args.pop_k if n >= 64 * k]
    return out


def plan(args) -> list[tuple[str, int, int]]:
    sizes = [1000, 10_000] if args.quick else [1000, 10_000, 100_000]
    if args.million:
        sizes.append(1_000_000)
    tasks = []
    for n in sizes:
        for m in args.types:
            for wl in args.workloads:
                if args.quick and wl == "catalogue" and m == 3:
                    continue
                tasks.append((wl, n, m))
    if args.quick:
        tasks.append(("catalogue", 100_000, 10))
    return tasks


# ------------------------------------------------------------------------------- output
COLUMNS = (("policy", "policy", "<20"), ("workload", "workload", "<9"), ("jobs", "jobs", ">8"),
           ("types", "m", ">3"), ("classes", "classes", ">8"), ("method", "method", "<15"),
           ("seconds", "seconds", ">8.2f"), ("sub_max_s", "sub_max", ">8.2f"), ("sub_sum_s", "sub_sum", ">8.2f"),
           ("status", "status", "<11"), ("min_share_ratio", "ratio", ">10.7f"), ("loss_pct", "loss_%", ">7.3f"))


def _cell(v, fmt):
    width = int("".join(c for c in fmt if c.isdigit() or c == ".").split(".")[0])
    if isinstance(v, float) and math.isnan(v):
        return format("-", f">{width}")
    return format(v, fmt)


def header() -> str:
    return " ".join(format(h, f"{f[0]}{''.join(c for c in f if c.isdigit() or c == '.').split('.')[0]}")
                    for _, h, f in COLUMNS)


def line(row: dict) -> str:
    return " ".join(_cell(row[k], f) for k, _, f in COLUMNS)


def write_csv(rows: Sequence[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.9g}" if isinstance(v, float) else v) for k, v in r.items()})


# ---------------------------------------------------------------------------- main table
def run_instance(wl: str, n: int, m: int, args, log) -> list[dict]:
    inst = make_instance(wl, n, m, args.seed)
    results = {}
    for name in methods_for(wl, n, m, args):
        results[name] = run_method(METHODS[name], inst, POLICIES["max_min_fairness"], args.general_limit)
    exact = results["structured"]["objective"] if results["structured"]["status"] == "optimal" else math.nan
    rows = []
    for name, r in results.items():
        row = make_row("max_min_fairness", inst, METHODS[name], r, exact)
        log(line(row))
        rows.append(row)
    return rows


def run_policies(args, log) -> list[dict]:
    """Every structured policy against the general HiGHS path (IPX with crossover) over the
    sizes (random T, m = 10): the rows of the per-policy time-vs-jobs plot
    (``docs/img/scaling_policies.png``). ``auto`` is not the reference: above a few thousand
    variables it takes the structured path itself. The general path runs up to
    ``--general-max-n`` jobs under ``--general-limit``; 10^6 (``--million``) is structured only."""
    rows = []
    sizes = [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000] + ([1_000_000] if args.million else [])
    for n in sizes:
        inst = make_instance("random", n, 10, args.seed)
        for pname in ("max_min_fairness", "max_sum_throughput", "min_makespan", "finish_time_fairness"):
            names = ("structured", "highs-ipx") if n <= args.general_max_n else ("structured",)
            res = {name: run_method(METHODS[name], inst, POLICIES[pname], args.general_limit) for name in names}
            ok = [r["objective"] for r in res.values() if r["status"] == "optimal"]
            exact = res["structured"]["objective"] if res["structured"]["status"] == "optimal" else (ok[0] if ok else math.nan)
            for name, r in res.items():
                row = make_row(pname, inst, METHODS[name], r, exact)
                log(line(row))
                rows.append(row)
    return rows


def plot_policies(path: Path) -> None:
    """Seconds against jobs (log-log), one panel per policy, structured vs auto."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from hetsched.sim.figure_layout import caption, figure_legend

    df = pd.read_csv(path)
    pols = [p for p in POLICIES if p in set(df.policy)]
    fig, axes = plt.subplots(1, len(pols), figsize=(3.6 * len(pols) + 1.2, 3.6), squeeze=False, layout="constrained")
    for ax, pol in zip(axes[0], pols):
        for meth, style in (("structured", "o-"), ("highs-ipx", "s--")):
            d = df[(df.policy == pol) & (df.method == meth)].sort_values("jobs")
            # a two-stage policy whose stage 2 hit the limit returns stage 1's answer as
            # "optimal" and says so in the message: that run did not finish either
            done = (d.status == "optimal") & ~d.message.fillna("").str.contains("stage 2 ended")
            ok = d[done]
            ax.plot(ok.jobs, ok.seconds, style, label=meth)
            hit = d[~done]
            ax.scatter(hit.jobs, hit.seconds, marker="x", color="k", zorder=5,
                       label="time limit / not optimal" if len(hit) else None)
        ax.set(xscale="log", yscale="log", xlabel="jobs", title=pol.replace("_", " "))
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("seconds")
    figure_legend(fig, list(axes[0]), first=["structured", "highs-ipx"])
    caption(fig, "Random lognormal throughputs, m = 10 GPU types, about n/4 GPUs; one instance per size; wall "
                 "seconds of hs.solve (build + solve); highs-ipx: the general LP path (IPX with crossover).")
    FIG_DIR.mkdir(parents=True, exist_ok=True)
    out = FIG_DIR / "scaling_policies.png"
    fig.savefig(out, dpi=110)
    print("wrote", out)


def run_candidates(args, log) -> list[dict]:
    """Stage 1 of max-min fairness with each source of first prices (init), same repair."""
    rows = []
    sizes = args.candidate_sizes
    print(f"\n{'workload':<9} {'jobs':>8} {'init':<11} {'seconds':>8} {'warm_s':>8} {'master_s':>8} "
          f"{'rounds':>6} {'m_jobs':>7} {'status':<15} {'rel_err':>8}")
    for wl in ("random", "skewed"):
        for n in sizes:
            inst = make_instance(wl, n, 10, args.seed)
            lp = hs.policies.MaxMinFairness(second_stage=False).formulate(inst.jobs, inst.cluster)
            P, _ = st.recognize(lp)
            ref = None
            inits = args.candidate_inits or (["sample", "lagrangian", "hybrid", "uniform"]
                                             + (["ipx", "pdlp"] if n <= 10_000 and not args.quick else []))
            for init in inits:
                opts = st.StructuredOptions(init=init)
                t0 = time.perf_counter()
                r = st.solve_separable(P, opts, time_limit=args.general_limit)
                wall = time.perf_counter() - t0
                if ref is None and r.status == "optimal":
                    ref = r.t
                err = abs(r.t - ref) / ref if (ref and math.isfinite(r.t)) else math.nan
                row = {"workload": wl, "jobs": n, "types": 10, "init": init, "seconds": wall, "warm_s": r.warm_s,
                       "master_s": r.master_s, "pricing_s": r.pricing_s, "rounds": r.rounds,
                       "master_jobs": r.n_master_jobs, "status": r.status, "level": r.t, "rel_err": err,
                       "whole_lp_s": r.warm_info.get("whole_lp_s", math.nan),
                       "lagrangian_iterations": r.warm_info.get("lagrangian_iterations", 0)}
                rows.append(row)
                msg = (f"{wl:<9} {n:>8} {init:<11} {wall:>8.2f} {r.warm_s:>8.2f} {r.master_s:>8.2f} {r.rounds:>6} "
                       f"{r.n_master_jobs:>7} {r.status:<15} {err:>8.1e}")
                log(msg)
    return rows


# ----------------------------------------------------------------------------------- plot
def plot(args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from hetsched.sim.figure_layout import caption, figure_legend

    df = pd.read_csv(args.out)
    df = df[df.policy == "max_min_fairness"]
    FIG_DIR.mkdir(parents=True, exist_ok=True)
    for wl in sorted(df.workload.unique()):
        sub = df[df.workload == wl]
        fig, axes = plt.subplots(1, 2 * len(sub.types.unique()), figsize=(3.3 * 2 * len(sub.types.unique()) + 1.4, 3.8),
                                 layout="constrained")
        axes = np.atleast_1d(axes)
        for i, m in enumerate(sorted(sub.types.unique())):
            s = sub[sub.types == m]
            ax_t, ax_q = axes[2 * i], axes[2 * i + 1]
            for meth in s.method.unique():
                d = s[s.method == meth].sort_values("jobs")
                ok = d[d.status.isin(["optimal", "time_limit"])]
                ax_t.plot(ok.jobs, ok.seconds, marker="o", label=meth)
                hit = d[d.status == "time_limit"]
                ax_t.scatter(hit.jobs, hit.seconds, marker="x", color="k", zorder=5,
                             label="time limit" if len(hit) else None)
                q = d[d.status == "optimal"]
                ax_q.plot(q.jobs, q.min_share_ratio, marker="o", label=meth)
            ax_t.set(xscale="log", yscale="log", xlabel="jobs", ylabel="seconds", title=f"{wl}, m = {m}: time")
            ax_q.set(xscale="log", xlabel="jobs", ylabel="min share / optimum", title=f"{wl}, m = {m}: quality")
            ax_t.grid(True, which="both", alpha=0.3)
            ax_q.grid(True, alpha=0.3)
        figure_legend(fig, list(axes), first=list(dict.fromkeys(sub.method)))
        what = {"random": "random lognormal throughputs", "catalogue": "jobs drawn from an 80-row generated table "
                "(identical jobs aggregated)"}.get(wl, wl)
        caption(fig, f"Max-min fairness, {what}, about n/4 GPUs over m types; one instance per size; wall seconds "
                     "of hs.solve (build + solve); quality: min normalized share / the exact optimum.")
        path = FIG_DIR / f"scaling_{wl}.png"
        fig.savefig(path, dpi=110)
        print("wrote", path)


# ----------------------------------------------------------------------------------- main
def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="n in {1e3, 1e4} (+ one 1e5 catalogue row), under a minute")
    p.add_argument("--million", action="store_true", help="add n = 1e6 (structured, POP, aggregation only)")
    p.add_argument("--types", nargs="+", type=int, choices=sorted(GPU_TYPES), default=sorted(GPU_TYPES))
    p.add_argument("--workloads", nargs="+", choices=("random", "catalogue", "skewed"), default=["random", "catalogue"])
    p.add_argument("--pop-k", nargs="+", type=int, default=None, help="POP k's (default 4 16 64; quick: 4 16)")
    p.add_argument("--general-limit", type=float, default=120.0, help="seconds for each general LP path")
    p.add_argument("--general-max-n", type=int, default=None, help="largest n for IPX/auto (default 1e5; quick 1e4)")
    p.add_argument("--simplex-max-n", type=int, default=None, help="largest n for dual simplex (default 1e5; quick 1e3)")
    p.add_argument("--general-types", nargs="+", type=int, default=[10],
                   help="above n = 1e4, run the general paths only for these m (default 10)")
    p.add_argument("--noagg-max-n", type=int, default=100_000)
    p.add_argument("--candidate-sizes", nargs="+", type=int, default=None,
                   help="n for --candidates (default 1e4 1e5; quick 1e4)")
    p.add_argument("--candidate-inits", nargs="+", default=None,
                   help="inits for --candidates (default: all; ipx/pdlp only at n <= 1e4 unless listed)")
    p.add_argument("--candidates", action="store_true", help="also measure the candidate exact paths (stage 1)")
    p.add_argument("--policies", action="store_true", help="also time the other policies, structured vs auto")
    p.add_argument("--plot", action="store_true", help="only draw docs/img/scaling_*.png from the CSV")
    p.add_argument("--only-workloads-n", nargs="+", default=None, metavar="WORKLOAD:N",
                   help="main table: only these (workload, n) pairs, e.g. catalogue:100000")
    p.add_argument("--no-main", action="store_true", help="skip the main table (with --policies / --candidates)")
    p.add_argument("--merge", action="store_true",
                   help="replace matching rows (policy, workload, jobs, types, method) of the existing CSV "
                        "instead of overwriting it")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    a = p.parse_args(argv)
    a.pop_k = a.pop_k or ([4, 16] if a.quick else [4, 16, 64])
    a.general_max_n = a.general_max_n or (10_000 if a.quick else 100_000)
    a.simplex_max_n = a.simplex_max_n or (1_000 if a.quick else 100_000)
    a.candidate_sizes = a.candidate_sizes or ([10_000] if a.quick else [10_000, 100_000])
    if a.quick:
        a.general_limit = min(a.general_limit, 30.0)
        a.noagg_max_n = min(a.noagg_max_n, 10_000)
    return a


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.plot:
        plot(args)
        if POLICIES_OUT.exists():
            plot_policies(POLICIES_OUT)
        return 0
    warnings.simplefilter("ignore", category=RuntimeWarning)
    t0, cpu0 = time.perf_counter(), time.process_time()
    make_instance("random", 200, 3, args.seed)  # warm imports
    hs.solve("max_min_fairness", make_instance("random", 200, 3, 1).jobs, make_instance("random", 200, 3, 1).cluster,
             solver="structured")
    print(f"# {default_workers()} CPU(s) available; POP uses a process pool of min(k, CPUs) workers")
    print(header(), flush=True)

    def log(s):
        print(s, flush=True)

    rows = []
    only = None if not args.only_workloads_n else {(w, int(n)) for w, n in (x.split(":") for x in args.only_workloads_n)}
    for wl, n, m in ([] if args.no_main else plan(args)):
        if only is None or (wl, n) in only:
            rows += run_instance(wl, n, m, args, log)
    if args.policies:
        print("\n# policies: structured vs auto over the sizes (random, m = 10)")
        print(header())
        prow = run_policies(args, log)
        write_csv(prow, POLICIES_OUT)
        plot_policies(POLICIES_OUT)
    if args.merge and args.out.exists():
        import pandas as pd

        key = ["policy", "workload", "jobs", "types", "method"]
        old = pd.read_csv(args.out)
        new = pd.DataFrame(rows)
        if len(new):
            keep = ~old.set_index(key).index.isin(new.set_index(key).index)
            rows = old[keep].to_dict("records") + rows
        else:
            rows = old.to_dict("records")
    if rows:
        write_csv(rows, args.out)
    if args.candidates:
        write_csv(run_candidates(args, log), CANDIDATES_OUT)
    print(f"\n{len(rows)} rows in {time.perf_counter() - t0:.1f} s wall, {time.process_time() - cpu0:.1f} s CPU "
          f"(this process); CSV: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
