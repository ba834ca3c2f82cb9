"""Packed max-min fairness (space sharing): hetsched vs a Gavel-style cvxpy reference, and
how much of the optimum pair pruning loses.

Workload: Gavel's job mix (scale factors 1/2/4/8 w.p. .70/.10/.15/.05) drawn from Gavel's
measured table, pairs included, when ``../shared/data/gavel/simulation_throughputs.json``
is present, else from ``generate_catalogue(pairs=True)``. The cluster has about n/4 GPUs
split evenly over v100/p100/k80 (at least 8 per type), so jobs contend and sharing pays.

Reference (``gavel_packed_max_min``): the program written the way Gavel's
``MaxMinFairnessPolicyWithPacking`` writes it — one row of ``cp.Variable((rows, m))`` per
single job and per pair of jobs with equal scale factors (every such pair, as Gavel's
scheduler adds them, zero throughputs included), one ``cp.sum(cp.multiply(...))`` term per
job over the rows it appears in, ``cp.Maximize(cp.minimum(*terms))``, Gavel's base
constraints, cvxpy's default solver, no aggregation, no pruning. Its rows grow as n^2.

hetsched: ``MaxMinFairness(packing=Packing.from_workload(...))`` with its defaults
(pruning threshold 1.05, exact class aggregation, stage 2). ``exact_obj`` is the same with
threshold 1.0 (provably lossless); ``flat_s`` the default threshold without class
aggregation (one row per job, pruned pairs).

Columns: jobs, classes, pair variables (hetsched, after pruning), reference rows x types,
seconds (hetsched, without aggregation, reference), speedup (reference / hetsched),
objectives (min normalized share) and the relative gap to the reference.

Pruning (second table, ``packing_pruning.csv``): for thresholds 1.0 .. 1.5, the loss of
the packed optimum relative to threshold 1.0, for max-min fairness (min share) and max-sum
throughput, and the share of job-level pair variables kept, over several seeds.

    python benchmarks/packing.py --quick   # n = 128, 512, 2048; reference at 128 (< 1 min)
    python benchmarks/packing.py           # reference also at 512; more pruning seeds
"""

from __future__ import annotations

import argparse
import csv
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import hetsched as hs
from hetsched.formulations.spaces.packing import DEFAULT_PAIR_THRESHOLD, Packing
from hetsched.formulations.spaces.space import build_space

GAVEL = Path(__file__).resolve().parents[2] / "shared" / "data" / "gavel" / "simulation_throughputs.json"
TYPES = ["v100", "p100", "k80"]
RESULTS = Path(__file__).resolve().parent / "results"
THRESHOLDS = [1.0, 1.02, 1.05, 1.1, 1.2, 1.3, 1.5]


def catalogue() -> tuple[hs.ThroughputCatalogue, str]:
    if GAVEL.exists():
        return hs.load_gavel_throughputs(GAVEL).subset(TYPES), "gavel-table"
    return hs.generate_catalogue(gpu_types=TYPES, seed=0, pairs=True), "generated"


def make_cluster(n: int) -> hs.Cluster:
    return hs.Cluster({t: max(8, n // 12) for t in TYPES})


def pair_rows(jobs: hs.JobSet, packing: Packing) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every pair (i < j) with equal scale factors and its throughputs per type (0 where the
    table has none), as Gavel's scheduler builds them. Same-key pairs get the mean entry."""
    n = jobs.n_jobs
    s = jobs.scale_factors
    ii, jj = np.triu_indices(n, 1)
    keep = s[ii] == s[jj]
    ii, jj = ii[keep], jj[keep]
    key = packing.job_keys(jobs)
    tab = packing.aligned(jobs.gpu_types)
    pos = packing.pairs.positions(key[ii], key[jj])
    thr = np.where((pos >= 0)[:, None, None], tab[np.maximum(pos, 0)], 0.0)
    flip = key[ii] > key[jj]
    thr[flip] = thr[flip][:, :, ::-1]
    same = key[ii] == key[jj]
    thr[same] = thr[same].mean(axis=2, keepdims=True)
    return ii, jj, thr[:, :, 0], thr[:, :, 1]


def gavel_packed_max_min(jobs: hs.JobSet, cluster: hs.Cluster, packing: Packing) -> tuple[float, int]:
    """Gavel-style packed max-min fairness (stage 1); returns (objective, rows)."""
    import cvxpy as cp

    T = jobs.throughputs
    n, m = T.shape
    s = jobs.scale_factors.astype(float)
    C = cluster.capacities(jobs.gpu_types)
    ii, jj, ti, tj = pair_rows(jobs, packing)
    rows = n + ii.shape[0]
    scale = s / (jobs.weights * (T @ C / C.sum()))  # s_j / (w_j p_j), p_j proportional throughput
    member_rows: list[list[int]] = [[j] for j in range(n)]
    member_thr: list[list[np.ndarray]] = [[T[j]] for j in range(n)]
    for p in range(ii.shape[0]):
        member_rows[ii[p]].append(n + p)
        member_thr[ii[p]].append(ti[p])
        member_rows[jj[p]].append(n + p)
        member_thr[jj[p]].append(tj[p])
    x = cp.Variable((rows, m))
    row_scale = np.concatenate([s, s[ii]])
    terms, cons = [], [x >= 0, x <= 1]
    with warnings.catch_warnings():
        # cvxpy's Sum.shape_from_args sums an uninitialized array: a spurious "invalid value" warning
        warnings.simplefilter("ignore", RuntimeWarning)
        for j in range(n):
            idx = np.asarray(member_rows[j])
            terms.append(cp.sum(cp.multiply(np.vstack(member_thr[j]), x[idx])) * scale[j])
            cons.append(cp.sum(x[idx]) <= 1)
    for k in range(m):
        cons.append(cp.sum(cp.multiply(row_scale, x[:, k])) <= C[k])
    prob = cp.Problem(cp.Maximize(cp.minimum(*terms)), cons)
    prob.solve()
    if prob.status not in ("optimal", "optimal_inaccurate"):
        return float("nan"), rows
    return float(prob.value), rows


def run(n: int, cat, with_ref: bool, with_flat: bool) -> dict:
    w = hs.sample_jobs(cat, n, seed=n)
    cluster = make_cluster(n)
    packing = Packing.from_workload(w, cat)
    t0 = time.perf_counter()
    res = hs.solve(hs.policies.MaxMinFairness(packing=packing), w.jobs, cluster)
    ours_s = time.perf_counter() - t0
    exact = hs.solve(hs.policies.MaxMinFairness(packing=Packing.from_workload(w, cat, threshold=1.0)), w.jobs, cluster)
    plain = hs.solve("max_min_fairness", w.jobs, cluster)
    row = {"jobs": n, "gpus": int(cluster.total_gpus), "classes": res.extra["space"].get("n_classes", n),
           "pair_vars": res.extra["space"]["n_pair"], "ref_vars": float("nan"),
           "hetsched_s": ours_s, "flat_s": float("nan"), "flat_pair_vars": float("nan"),
           "reference_s": float("nan"), "speedup": float("nan"),
           "unpacked_obj": plain.objective, "obj": res.objective, "exact_obj": exact.objective,
           "ref_obj": float("nan"), "gap_vs_ref": float("nan"), "status": res.status}
    if with_flat:
        flat_pk = Packing.from_workload(w, cat, aggregate=False)
        t0 = time.perf_counter()
        flat = hs.solve(hs.policies.MaxMinFairness(packing=flat_pk), w.jobs, cluster)
        row["flat_s"] = time.perf_counter() - t0
        row["flat_pair_vars"] = flat.extra["space"]["n_pair"]
    if with_ref:
        t0 = time.perf_counter()
        ref_obj, ref_rows = gavel_packed_max_min(w.jobs, cluster, packing)
        row["reference_s"] = time.perf_counter() - t0
        row["ref_vars"] = ref_rows * len(TYPES)
        row["ref_obj"] = ref_obj
        row["speedup"] = row["reference_s"] / ours_s
        row["gap_vs_ref"] = (ref_obj - res.objective) / ref_obj
    return row


def pruning(cat, n: int, seeds: list[int]) -> list[dict]:
    """Loss of the packed optimum at each threshold, relative to threshold 1.0 (exact)."""
    out = []
    for seed in seeds:
        w = hs.sample_jobs(cat, n, seed=1000 + seed)
        cluster = make_cluster(n)
        base: dict[str, float] = {}
        for th in THRESHOLDS:
            pk = Packing.from_workload(w, cat, threshold=th)
            flat = build_space(w.jobs, cluster, packing=Packing.from_workload(w, cat, threshold=th, aggregate=False))
            for pol in (hs.policies.MaxMinFairness(packing=pk), hs.policies.MaxSumThroughput(packing=pk)):
                res = hs.solve(pol, w.jobs, cluster)
                if th == THRESHOLDS[0]:
                    base[pol.name] = res.objective
                out.append({"seed": seed, "jobs": n, "policy": pol.name, "threshold": th,
                            "objective": res.objective, "loss": (base[pol.name] - res.objective) / base[pol.name],
                            "job_pairs_kept": flat.info["pairs_kept"], "job_pair_candidates": flat.info["pair_candidates"],
                            "kept_fraction": flat.info["pairs_kept"] / max(flat.info["pair_candidates"], 1)})
    return out


def write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {path}")


def fmt(v) -> str:
    return f"{v:>12.4g}" if isinstance(v, float) else f"{v!s:>12}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--ref-max-n", type=int, default=None, help="largest n given the reference")
    ap.add_argument("--flat-max-n", type=int, default=None, help="largest n solved also without aggregation")
    ap.add_argument("--out", type=Path, default=RESULTS / "packing.csv")
    args = ap.parse_args(argv)
    sizes = [128, 512, 2048]
    ref_max = args.ref_max_n if args.ref_max_n is not None else (128 if args.quick else 512)
    flat_max = args.flat_max_n if args.flat_max_n is not None else (128 if args.quick else 512)
    cat, source = catalogue()
    hs.solve(hs.policies.MaxMinFairness(packing=Packing.from_workload(w := hs.sample_jobs(cat, 16, seed=1), cat)),
             w.jobs, make_cluster(16))  # warm-up (imports, HiGHS)
    print(f"workload: {source}; cluster ~n/4 GPUs over {TYPES}; pruning threshold {DEFAULT_PAIR_THRESHOLD}; "
          f"{platform.processor() or platform.machine()}")
    cols = ["jobs", "classes", "pair_vars", "ref_vars", "hetsched_s", "flat_s", "reference_s", "speedup",
            "unpacked_obj", "obj", "exact_obj", "ref_obj", "gap_vs_ref"]
    print(" ".join(f"{c:>12}" for c in cols))
    rows = []
    for n in sizes:
        row = run(n, cat, n <= ref_max, n <= flat_max)
        row["workload"] = source
        rows.append(row)
        print(" ".join(fmt(row[c]) for c in cols), flush=True)
    write(args.out, rows)

    seeds = [0, 1] if args.quick else [0, 1, 2, 3, 4]
    n_prune = 128 if args.quick else 512
    prows = pruning(cat, n_prune, seeds)
    for r in prows:
        r["workload"] = source
    print(f"\npruning loss vs threshold 1.0 (exact), n = {n_prune}, seeds {seeds}:")
    pcols = ["policy", "threshold", "max_loss", "mean_loss", "kept_fraction"]
    print(" ".join(f"{c:>18}" for c in pcols))
    for pol in ("max_min_fairness", "max_sum_throughput"):
        for th in THRESHOLDS:
            sel = [r for r in prows if r["policy"] == pol and r["threshold"] == th]
            vals = [pol, th, max(r["loss"] for r in sel), float(np.mean([r["loss"] for r in sel])),
                    float(np.mean([r["kept_fraction"] for r in sel]))]
            print(" ".join(f"{v:>18.4g}" if isinstance(v, float) else f"{v!s:>18}" for v in vals))
    write(args.out.with_name(args.out.stem + "_pruning.csv"), prows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
