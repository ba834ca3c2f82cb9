"""Water-filling max-min fairness: hetsched vs a Gavel-style LP + MILP per level reference.

Workload: Gavel's job mix (scale factors 1/2/4/8 w.p. .70/.10/.15/.05) drawn from Gavel's
measured throughput table when ``../shared/data/gavel/simulation_throughputs.json`` is
present, else from hetsched's generated catalogue. The cluster has ``n/2`` GPUs of each of
v100/p100/k80, light enough that jobs saturate at many different levels (a contended
cluster freezes every job at the first level).

Columns: jobs, classes, levels, hetsched seconds with aggregation (default) and without,
LP re-solves, reference seconds, speedup (reference / default), max relative difference of
the sorted share vectors and which one is lexicographically larger (the reference freezes a
job when it cannot rise by 1e-4 relative, so it may stop early). Writes ``benchmarks/results/water_filling.csv``.

    python benchmarks/water_filling.py --quick     # n = 128, 512 (reference at both)
    python benchmarks/water_filling.py             # n = 512, 2048 (reference at both)
    python benchmarks/water_filling.py --sizes 8192 --ref-max-n 0   # larger, hetsched only
    python benchmarks/water_filling.py --workload distinct --sizes 512 2048 --ref-max-n 512
                                                   # every throughput differs: no classes
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import numpy as np

import hetsched as hs
from hetsched.formulations.max_min_fairness import normalized_share_coefficients

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_targets import distinct_jobs  # noqa: E402
from water_filling_reference import water_filling as gavel_water_filling  # noqa: E402

GAVEL = Path(__file__).resolve().parents[2] / "shared" / "data" / "gavel" / "simulation_throughputs.json"
TYPES = ["v100", "p100", "k80"]


def catalogue() -> tuple[hs.ThroughputCatalogue, str]:
    if GAVEL.exists():
        return hs.load_gavel_throughputs(GAVEL).subset(TYPES), "gavel-table"
    return hs.generate_catalogue(gpu_types=TYPES, seed=0), "generated"


def lex_better(ours: np.ndarray, theirs: np.ndarray, rtol: float = 1e-7) -> str:
    """Which sorted share vector is lexicographically larger ("tie" within rtol)."""
    differ = np.flatnonzero(np.abs(ours - theirs) > rtol * np.abs(ours))
    if differ.size == 0:
        return "tie"
    return "hetsched" if ours[differ[0]] > theirs[differ[0]] else "reference"


def run(n: int, cat, source: str, with_ref: bool, ref_limit: float) -> dict:
    # distinct: every throughput differs (the scale issue's instance), nothing aggregates
    jobs = distinct_jobs(n, 0)[0] if source == "distinct" else hs.sample_jobs(cat, n, seed=n).jobs
    cluster = hs.Cluster({t: n // 2 for t in TYPES})
    t0 = time.perf_counter()
    res = hs.solve("max_min_fairness_water_filling", jobs, cluster)
    ours_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    flat = hs.solve("max_min_fairness_water_filling", jobs, cluster, aggregate=False)
    flat_s = time.perf_counter() - t0
    a = normalized_share_coefficients(jobs, cluster.capacities(TYPES), True)
    ours = np.sort((a * res.X).sum(1))
    row = {"workload": source, "jobs": n, "classes": res.sizes["n_classes"], "levels": res.extra["levels"],
           "hetsched_s": ours_s, "lp_solves": res.sizes["n_programs"], "no_aggregation_s": flat_s,
           "no_aggregation_lp_solves": flat.sizes["n_programs"],
           "flat_vs_default_diff": float(np.max(np.abs(np.sort((a * flat.X).sum(1)) - ours) / ours)),
           "reference_s": float("nan"), "reference_levels": float("nan"), "speedup": float("nan"),
           "share_diff": float("nan"), "lex_better": ""}
    if with_ref:
        t0 = time.perf_counter()
        ref = gavel_water_filling(a, jobs.scale_factors.astype(float), cluster.capacities(TYPES), time_limit=ref_limit)
        row["reference_s"] = time.perf_counter() - t0
        row["reference_levels"] = ref["levels"]
        if not ref["timed_out"]:
            row["speedup"] = row["reference_s"] / ours_s
            theirs = np.sort(ref["shares"])
            row["share_diff"] = float(np.max(np.abs(theirs - ours) / ours))
            row["lex_better"] = lex_better(ours, theirs)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--ref-max-n", type=int, default=None, help="largest n with the reference")
    ap.add_argument("--sizes", type=int, nargs="+", default=None, help="job counts (overrides the defaults)")
    ap.add_argument("--ref-limit", type=float, default=900.0, help="seconds before the reference gives up")
    ap.add_argument("--workload", choices=("catalogue", "distinct"), default="catalogue",
                    help="catalogue jobs (default) or jobs whose throughputs all differ")
    ap.add_argument("--out", type=Path, default=None,
                    help="CSV (default results/water_filling.csv, or water_filling_distinct.csv)")
    args = ap.parse_args(argv)
    if args.out is None:
        name = "water_filling.csv" if args.workload == "catalogue" else "water_filling_distinct.csv"
        args.out = Path(__file__).resolve().parent / "results" / name
    # 8,192 is behind --sizes: its no-aggregation solve ran for more than 8 minutes
    sizes = args.sizes or ([128, 512] if args.quick else [512, 2048])
    ref_max = args.ref_max_n if args.ref_max_n is not None else (512 if args.quick else 2048)
    cat, source = catalogue()
    if args.workload == "distinct":
        source = "distinct"
    hs.solve("max_min_fairness_water_filling", hs.sample_jobs(cat, 32, seed=1).jobs, hs.Cluster({t: 16 for t in TYPES}))
    rows = []
    cols = ["jobs", "classes", "levels", "hetsched_s", "lp_solves", "no_aggregation_s", "reference_s",
            "speedup", "share_diff", "lex_better"]
    print(f"workload: {source}; cluster n/2 GPUs per type of {TYPES}")
    print(" ".join(f"{c:>16}" for c in cols))
    for n in sizes:
        row = run(n, cat, source, n <= ref_max, args.ref_limit)
        rows.append(row)
        print(" ".join(f"{row[c]:>16.4g}" if isinstance(row[c], float) else f"{row[c]:>16}" for c in cols), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
