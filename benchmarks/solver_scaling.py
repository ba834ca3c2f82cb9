"""Solver scaling: hetsched.solve against Gavel-style cvxpy programs on the same instances.

For each policy, number of jobs n, number of GPU types m and workload (``random``: i.i.d.
lognormal throughputs, scale factor 1; ``catalogue``: jobs drawn from a generated table of
80 (job type, scale factor) rows with Gavel's scale-factor mix 1/2/4/8 w.p.
.70/.10/.15/.05), this times ``hetsched.solve`` and the reference of
``benchmarks/gavel_reference.py`` in the same process on the same instance, scores both
allocations with one independent numpy formula, prints a fixed-width table and writes CSV.

The cluster is contended: about n/4 GPUs split evenly over the m types (at least 8 per type,
so every gang fits). hetsched runs with its defaults (``solver="auto"``, ``aggregate=True``);
the reference solves the un-aggregated problem with cvxpy's default solver.

Usage::

    python benchmarks/solver_scaling.py --quick          # under a minute on 2 cores
    python benchmarks/solver_scaling.py                  # n up to 16,000 plus 1M catalogue jobs
    python benchmarks/solver_scaling.py --large --ftf8k  # adds n = 64,000 and an 8,000-job FTF reference
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import gavel_reference as ref
import numpy as np
from _table import write_csv

import hetsched as hs
from hetsched.inputs.throughputs import ThroughputCatalogue, generate_catalogue
from hetsched.inputs.workloads import random_jobs, sample_jobs

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "solver_scaling.csv"

#: GPU types (name -> median single-GPU speedup over a K80) for m = 3 and m = 10.
GPU_TYPES: dict[int, dict[str, float]] = {
    3: {"v100": 4.0, "p100": 3.0, "k80": 1.0},
    10: {"h100": 12.0, "a100": 8.0, "l40s": 6.0, "v100": 4.0, "rtx6000": 3.5,
         "p100": 3.0, "a10": 2.5, "l4": 2.0, "t4": 1.5, "k80": 1.0},
}
#: Job types in the catalogue: 20 types x scale factors (1, 2, 4, 8) = 80 rows.
CATALOGUE_JOB_TYPES = 20
#: GPUs per job in the cluster (n/4 GPUs in all).
JOBS_PER_GPU = 4
#: Relative objective difference reported as a difference (``better`` column).
GAP_TOL = 1e-6
#: ``--quick`` leaves out finish-time fairness above this many variables (n * m): at
#: 4000 x 10 hetsched alone needs 6-8 LPs of 40,000 variables, 10-13 s on a shared machine.
QUICK_FTF_MAX_VARS = 20_000


# ------------------------------------------------------------------------------ policies
@dataclass(frozen=True)
class PolicyCase:
    """One benchmarked policy: what hetsched solves and which reference it is compared with."""

    label: str
    policy: Callable[[], str | hs.Policy]
    reference: str
    fields: tuple[str, ...] = ()


POLICIES: tuple[PolicyCase, ...] = (
    PolicyCase("max_min_fairness", lambda: "max_min_fairness", "max_min_fairness"),
    PolicyCase("max_min_fairness[stage1]", lambda: hs.policies.MaxMinFairness(second_stage=False),
               "max_min_fairness"),
    PolicyCase("max_sum_throughput", lambda: "max_sum_throughput", "max_sum_throughput"),
    PolicyCase("min_makespan", lambda: "min_makespan", "min_makespan", ("steps_remaining",)),
    PolicyCase("min_makespan[stage1]", lambda: hs.policies.MinMakespan(second_stage=False), "min_makespan",
               ("steps_remaining",)),
    PolicyCase("finish_time_fairness", lambda: "finish_time_fairness", "finish_time_fairness",
               ("steps_remaining", "time_since_start")),
    PolicyCase("finish_time_fairness[stage1]", lambda: hs.policies.FinishTimeFairness(second_stage=False),
               "finish_time_fairness", ("steps_remaining", "time_since_start")),
)
POLICY_FAMILIES = ("max_min_fairness", "max_sum_throughput", "min_makespan", "finish_time_fairness")


# ----------------------------------------------------------------------------- instances
@dataclass(frozen=True)
class Instance:
    """Plain arrays of one benchmark problem (shared by hetsched and the reference)."""

    workload: str
    gpu_types: tuple[str, ...]
    T: np.ndarray
    s: np.ndarray
    C: np.ndarray
    R: np.ndarray
    t: np.ndarray

    @property
    def n(self) -> int:
        return self.T.shape[0]

    @property
    def m(self) -> int:
        return self.T.shape[1]

    def cluster(self) -> hs.Cluster:
        return hs.Cluster({g: int(c) for g, c in zip(self.gpu_types, self.C)})

    def jobset(self, fields: Iterable[str]) -> hs.JobSet:
        """A JobSet with only ``fields`` (so aggregation merges jobs the policy cannot tell apart)."""
        values = {"steps_remaining": self.R, "time_since_start": self.t}
        return hs.JobSet(self.T, gpu_types=self.gpu_types, scale_factors=self.s,
                         **{f: values[f] for f in fields})


def cluster_counts(n: int, m: int) -> np.ndarray:
    """About n / JOBS_PER_GPU GPUs split evenly over m types, at least 8 per type."""
    per_type = max(8, int(round(n / (JOBS_PER_GPU * m))))
    return np.full(m, float(per_type))


_CATALOGUES: dict[tuple[int, int], ThroughputCatalogue] = {}


def catalogue_for(m: int, seed: int) -> ThroughputCatalogue:
    """The (cached) generated catalogue of 80 rows over the m GPU types."""
    key = (m, seed)
    if key not in _CATALOGUES:
        _CATALOGUES[key] = generate_catalogue(n_job_types=CATALOGUE_JOB_TYPES, gpu_types=GPU_TYPES[m], seed=seed)
    return _CATALOGUES[key]


def make_instance(workload: str, n: int, m: int, seed: int) -> Instance:
    """Jobs (throughputs, scale factors, steps remaining, time since start) and GPU counts."""
    rng = np.random.default_rng([seed, n, m, 0 if workload == "random" else 1])
    types = tuple(GPU_TYPES[m])
    if workload == "random":
        jobs = random_jobs(n, types, seed=rng, id_prefix=None)
    elif workload == "catalogue":
        jobs = sample_jobs(catalogue_for(m, seed), n, seed=rng, id_prefix=None).jobs
    else:
        raise ValueError(f"unknown workload {workload!r}")
    R = np.asarray(jobs.steps_remaining, dtype=float)
    # Seconds since start: a random part of the job's run time alone on its fastest type.
    t = rng.uniform(0.0, 1.0, n) * R / jobs.throughputs.max(axis=1)
    return Instance(workload, jobs.gpu_types, np.asarray(jobs.throughputs), np.asarray(jobs.scale_factors),
                    cluster_counts(n, m), R, t)


# ------------------------------------------------------------------------------ running
@dataclass
class Measurement:
    """One side's result on one instance."""

    seconds: float
    objective: float
    check: float  # the objective recomputed from X by gavel_reference.evaluate
    violation: float
    status: str
    solver: str
    n_programs: int
    extra: dict = field(default_factory=dict)


def run_hetsched(case: PolicyCase, inst: Instance) -> Measurement:
    """Time ``hs.solve`` (wall clock of the call) and score its X."""
    jobs, cluster = inst.jobset(case.fields), inst.cluster()
    t0 = time.perf_counter()
    res = hs.solve(case.policy(), jobs, cluster)
    wall = time.perf_counter() - t0
    return Measurement(
        seconds=wall,
        objective=float(res.objective),
        check=ref.evaluate(case.reference, res.X, inst.T, inst.s, inst.C, inst.R, inst.t),
        violation=ref.max_violation(res.X, inst.s, inst.C),
        status=res.status,
        solver=res.solver,
        n_programs=int(res.sizes.get("n_programs", 0)),
        extra={**res.timings, **res.sizes},
    )


def run_reference(key: str, inst: Instance) -> Measurement:
    """Time the Gavel-style cvxpy program and score its (clipped) X."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # cvxpy: "Objective contains too many subexpressions"
        out = ref.REFERENCES[key](inst.T, inst.s, inst.C, R=inst.R, t=inst.t)
    value = ref.evaluate(key, out.X, inst.T, inst.s, inst.C, inst.R, inst.t)
    return Measurement(seconds=out.seconds, objective=value, check=value,
                       violation=ref.max_violation(out.X, inst.s, inst.C), status=out.status,
                       solver=out.solver, n_programs=out.n_programs)


def relative_gap(a: float, b: float) -> float:
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.nan
    return abs(a - b) / max(abs(b), 1e-300)


def better_side(key: str, ours: float, theirs: float, gap: float) -> str:
    if not (gap > GAP_TOL):
        return ""
    ours_larger = ours > theirs
    return "hetsched" if ours_larger == (ref.SENSE[key] == "max") else "reference"


def make_row(case: PolicyCase, inst: Instance, ours: Measurement, theirs: Measurement | None) -> dict:
    nan = math.nan
    ref_s = theirs.seconds if theirs else nan
    ref_obj = theirs.objective if theirs else nan
    gap = relative_gap(ours.objective, ref_obj)
    return {
        "policy": case.label,
        "jobs": inst.n,
        "types": inst.m,
        "workload": inst.workload,
        "classes": ours.extra.get("n_classes", inst.n),
        "variables": ours.extra.get("max_vars", 0),
        "rows": ours.extra.get("max_rows", 0),
        "aggregate_s": ours.extra.get("aggregate_s", nan),
        "build_s": ours.extra.get("build_s", nan),
        "solve_s": ours.extra.get("solve_s", nan),
        "total_s": ours.seconds,
        "reference_s": ref_s,
        "speedup": ref_s / ours.seconds if theirs else nan,
        "objective": ours.objective,
        "objective_check": ours.check,
        "reference_objective": ref_obj,
        "objective_gap": gap,
        "better": better_side(case.reference, ours.objective, ref_obj, gap),
        "violation": ours.violation,
        "reference_violation": theirs.violation if theirs else nan,
        "n_programs": ours.n_programs,
        "reference_programs": theirs.n_programs if theirs else 0,
        "status": ours.status,
        "reference_status": theirs.status if theirs else "skipped",
        "solver": ours.solver,
        "reference_solver": theirs.solver if theirs else "",
    }


# --------------------------------------------------------------------------------- plan
@dataclass(frozen=True)
class Task:
    """Policies to run on one instance, and which of them get a reference."""

    workload: str
    n: int
    m: int
    cases: tuple[PolicyCase, ...]
    with_reference: frozenset[str]


def reference_allowed(key: str, n: int, args: argparse.Namespace) -> bool:
    if args.no_reference or n > args.ref_max_n:
        return False
    if key == "finish_time_fairness":
        return n <= args.ftf_ref_max_n
    return True


def plan(args: argparse.Namespace) -> list[Task]:
    """Every instance to run, in order."""
    cases = tuple(c for c in POLICIES if c.reference in args.policies)
    sizes = [1000, 4000] if args.quick else [1000, 4000, 16000]
    if args.large:
        sizes += [64000]
    tasks = []
    for n in sizes:
        for m in args.types:
            here = tuple(c for c in cases if not (args.quick and c.reference == "finish_time_fairness"
                                                  and n * m > QUICK_FTF_MAX_VARS))
            for wl in args.workloads:
                refs = frozenset(c.reference for c in here if reference_allowed(c.reference, n, args))
                tasks.append(Task(wl, n, m, here, refs))
    ftf = tuple(c for c in cases if c.reference == "finish_time_fairness")
    if args.ftf8k and ftf:
        tasks.append(Task("random", 8000, 3, ftf, frozenset({"finish_time_fairness"})))
    million = (not args.quick) if args.million is None else args.million
    mmf = tuple(c for c in cases if c.label == "max_min_fairness")
    if million and mmf:
        for m in args.types:
            tasks.append(Task("catalogue", 1_000_000, m, mmf, frozenset()))
    return tasks


def run_task(task: Task, seed: int, log: Callable[[str], None]) -> list[dict]:
    inst = make_instance(task.workload, task.n, task.m, seed)
    references: dict[str, Measurement] = {}  # max-min's two rows share one reference solve
    rows = []
    for case in task.cases:
        ours = run_hetsched(case, inst)
        theirs = None
        if case.reference in task.with_reference:
            if case.reference not in references:
                references[case.reference] = run_reference(case.reference, inst)
            theirs = references[case.reference]
        row = make_row(case, inst, ours, theirs)
        log(format_line(row))
        rows.append(row)
    return rows


def warm_up(seed: int) -> None:
    """Import solvers and fill caches on a tiny instance so the first timed row is fair."""
    inst = make_instance("catalogue", 64, 3, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for case in POLICIES:
            run_hetsched(case, inst)
        for key in ref.REFERENCES:
            run_reference(key, inst)


# ------------------------------------------------------------------------------- output
COLUMNS: tuple[tuple[str, str, str], ...] = (
    # (key, header, format)
    ("policy", "policy", "<24"),
    ("jobs", "jobs", ">8"),
    ("types", "m", ">3"),
    ("workload", "workload", "<9"),
    ("classes", "classes", ">8"),
    ("variables", "vars", ">7"),
    ("rows", "rows", ">7"),
    ("build_s", "build_s", ">8.3f"),
    ("solve_s", "solve_s", ">8.3f"),
    ("total_s", "total_s", ">8.3f"),
    ("reference_s", "ref_s", ">8.2f"),
    ("speedup", "speedup", ">8.1f"),
    ("objective", "objective", ">12.6g"),
    ("objective_gap", "gap", ">8.1e"),
    ("better", "better", "<9"),
    ("n_programs", "LPs", ">4"),
    ("solver", "solver", "<10"),
)


def _cell(value, fmt: str) -> str:
    width = "".join(ch for ch in fmt if ch.isdigit() or ch == ".").split(".")[0]
    if isinstance(value, float) and math.isnan(value):
        return format("-", f">{width}")
    return format(value, fmt)


def format_header() -> str:
    return " ".join(format(h, f"{fmt[0]}{''.join(c for c in fmt if c.isdigit() or c == '.').split('.')[0]}")
                    for _, h, fmt in COLUMNS)


def format_line(row: dict) -> str:
    return " ".join(_cell(row[key], fmt) for key, _, fmt in COLUMNS)


def notes(rows: Sequence[dict]) -> list[str]:
    """Lines about rows worth a second look: objective gaps, failed solves, check mismatches."""
    out = []
    for r in rows:
        tag = f"{r['policy']} n={r['jobs']} m={r['types']} {r['workload']}"
        if r["better"]:
            out.append(
                f"{tag}: gap {r['objective_gap']:.2e}, {r['better']} better "
                f"(hetsched {r['objective']:.9g}, viol {r['violation']:.1e}; "
                f"reference {r['reference_objective']:.9g}, viol {r['reference_violation']:.1e})"
            )
        if relative_gap(r["objective"], r["objective_check"]) > GAP_TOL:
            out.append(f"{tag}: res.objective {r['objective']:.9g} != objective of res.X {r['objective_check']:.9g}")
        if r["status"] != "optimal" or r["reference_status"] not in ("optimal", "skipped"):
            out.append(f"{tag}: status {r['status']!r}, reference {r['reference_status']!r}")
    return out


# --------------------------------------------------------------------------------- main
def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="n in {1000, 4000}, references only at n = 1000, finish-time fairness only up to "
                        f"n * m = {QUICK_FTF_MAX_VARS} (under a minute on 2 cores)")
    p.add_argument("--large", action="store_true", help="add n = 64,000 (hetsched only unless --ref-max-n)")
    p.add_argument("--ftf8k", action="store_true", help="add one 8,000-job finish-time-fairness row with its reference")
    p.add_argument("--million", action=argparse.BooleanOptionalAction, default=None,
                   help="max-min fairness on 1,000,000 catalogue jobs (default: on unless --quick)")
    p.add_argument("--policies", nargs="+", choices=POLICY_FAMILIES, default=list(POLICY_FAMILIES))
    p.add_argument("--types", nargs="+", type=int, choices=sorted(GPU_TYPES), default=sorted(GPU_TYPES))
    p.add_argument("--workloads", nargs="+", choices=("random", "catalogue"), default=["random", "catalogue"])
    p.add_argument("--ref-max-n", type=int, default=None,
                   help="largest n given a reference (default 16000; 1000 with --quick)")
    p.add_argument("--ftf-ref-max-n", type=int, default=None,
                   help="largest n given the finish-time-fairness reference (default 4000; 1000 with --quick)")
    p.add_argument("--no-reference", action="store_true", help="time hetsched only")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"CSV path (default {DEFAULT_OUT})")
    args = p.parse_args(argv)
    if args.ref_max_n is None:
        args.ref_max_n = 1000 if args.quick else 16000
    if args.ftf_ref_max_n is None:
        args.ftf_ref_max_n = 1000 if args.quick else 4000
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    t0, cpu0 = time.perf_counter(), time.process_time()
    warm_up(args.seed)
    print(format_header(), flush=True)

    def log(line: str) -> None:
        print(line, flush=True)

    rows: list[dict] = []
    for task in plan(args):
        rows.extend(run_task(task, args.seed, log))
    write_csv(rows, args.out)
    for line in notes(rows):
        print("note:", line)
    print(f"\n{len(rows)} rows in {time.perf_counter() - t0:.1f} s wall, "
          f"{time.process_time() - cpu0:.1f} s CPU; CSV: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
