"""Scale, part 2: the target table of the scale issue, each row against a reference run in
the same invocation.

Rows (``case``):

* ``maxmin_1e5`` / ``maxmin_1e6``: default ``solve("max_min_fairness")`` (both stages) on
  random lognormal throughputs, 10 GPU types, about n/4 GPUs (``large_cluster.make_instance``);
  reference: the general HiGHS path (dual simplex, then the same with IPX + crossover) on the
  same two programs, under ``--general-limit`` seconds each (1e5 only).
* ``makespan_1e5``: ``min_makespan`` both stages, same instance kind; reference as above.
* ``maxsum_1e5``: ``max_sum_throughput``; reference: Clarabel (the previous ``auto`` choice).
* ``water_filling_2048`` / ``water_filling_8192``: water filling on jobs whose throughputs
  all differ (lognormal, 3 types, n/2 GPUs per type: light enough that jobs end at many
  levels); reference: one default max-min solve on the same jobs (the issue's ratio).
* ``hierarchical_2048``: hierarchical max-min with 8 entities on the same kind of jobs;
  reference: one max-min solve.
* ``maxsum_pack_place_2048``: max-sum with packing and placement sensitivity on 2,048 jobs
  drawn from Gavel's table (generated catalogue without it), by classes (default);
  reference: the same program job by job (``aggregate=False`` on both options).
* ``cpu_rows_1e5``: max-min with a CPU demand per job and CPUs per type (one more capacity
  row per type); reference: the same jobs without CPU rows.
* ``maxmin_16k_gavel`` / ``maxmin_16k_cvxpy``: default max-min on 16,384 distinct random
  jobs, 3 types; reference: the same program in cvxpy (default solver) built the way Gavel's
  packing policies build it, one expression per job (``gavel_reference.
  max_min_fairness_per_job``), or vectorized as Gavel's plain max-min policy builds it
  (``gavel_reference.max_min_fairness``); ``agree`` compares the objectives computed from
  both allocations by the same numpy formula.

``ratio`` is reference seconds / hetsched seconds (for the water-filling and hierarchical rows:
hetsched seconds / one max-min solve); where the reference stopped at its time limit it is
a lower bound (``agree`` then says so). Each case runs in a fresh subprocess, so ``peak_rss_mib`` is that case's own peak resident
memory, and ``user_s`` / ``sys_s`` the user and system CPU seconds of hetsched's own solve
(system time, page faults of fresh memory, is what varies most between runs on a VM). Writes
``benchmarks/results/scale_targets.csv`` (rows of the cases run replace the recorded ones;
the others stay).

``*_hard`` cases: the same calls on the hard family of ``hard_instances.py`` (weights, mixed
gangs up to 8, distinct throughputs, uneven and tiny capacities); ``ftf_1e5_hard`` is
finish-time fairness.

Regression guard: a case that runs more than ``--guard-factor`` (2) times slower than its
recorded row, or loses the recorded "optimal", is printed as ``REGRESSION`` and the run
exits 1, leaving the recorded CSV as it was (this run goes to
``scale_targets.rejected.csv``; ``--accept`` records it anyway). Every run first times a
fixed workload that uses none of hetsched's code (:func:`machine_seconds`, column
``machine_s``); where the recorded row has that column too, its seconds are scaled by the
ratio of the two machines' times before the comparison, so a slower (shared or throttled)
machine does not read as a regression and a faster one does not hide one.

    python benchmarks/scale_targets.py                 # every case
    python benchmarks/scale_targets.py --cases maxmin_1e5 water_filling_2048
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import hetsched as hs

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hard_instances import hard_instance, with_progress  # noqa: E402
from large_cluster import make_instance  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "scale_targets.csv"
COLUMNS = ["case", "n", "m", "seconds", "status", "detail", "ref_method", "ref_seconds", "ref_status", "ratio",
           "agree", "peak_rss_mib", "machine_s", "user_s", "sys_s"]
#: CPU seconds (user, system) of the first timed call of this process: every case times
#: hetsched's own solve first. System time is mostly page faults of fresh memory; on the
#: project's VM it varies from run to run far more than user time does.
FIRST_CPU: dict[str, float] = {}


def machine_seconds(repeats: int = 3) -> float:
    """Seconds of a fixed workload that uses none of hetsched's code, the fastest of
    ``repeats``: HiGHS dual simplex on a seeded random covering LP (4,000 variables, 800
    rows, 0.2 % dense: about 1,600 iterations, 0.17 s on the 2-core VM) and a numpy sort of
    10^6 numbers. The regression guard
    compares a row's seconds with the recorded ones scaled by the ratio of this value now to
    the recorded row's (:func:`regressions`)."""
    import highspy
    import scipy.sparse as sp

    rng = np.random.default_rng(2026)
    n_vars, n_rows = 4_000, 800
    A = sp.random(n_rows, n_vars, density=0.002, random_state=rng, format="csc") * 10.0
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n_vars, n_rows
    lp.col_cost_ = rng.uniform(1.0, 2.0, n_vars)
    lp.col_lower_, lp.col_upper_ = np.zeros(n_vars), np.ones(n_vars)
    lp.row_lower_ = 0.3 * np.asarray(A.sum(axis=1)).ravel()
    lp.row_upper_ = np.full(n_rows, np.inf)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = n_vars, n_rows
    lp.a_matrix_.start_ = A.indptr.astype(np.int32)
    lp.a_matrix_.index_ = A.indices.astype(np.int32)
    lp.a_matrix_.value_ = A.data.astype(np.float64)
    x = rng.random(1_000_000)
    best = math.inf
    for _ in range(repeats):
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("simplex_strategy", 1)
        h.passModel(lp)
        t0 = time.perf_counter()
        h.run()
        np.sort(x * 1.0001)
        best = min(best, time.perf_counter() - t0)
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            raise RuntimeError(f"machine_seconds: the calibration LP ended {h.modelStatusToString(h.getModelStatus())}")
    return best


def timed(fn):
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    res = fn()
    s = time.perf_counter() - t0
    if not FIRST_CPU:
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        FIRST_CPU.update(user_s=r1.ru_utime - r0.ru_utime, sys_s=r1.ru_stime - r0.ru_stime)
    return res, s


def general(policy: str, jobs, cluster, limit: float):
    """Best general HiGHS path within ``limit``: dual simplex, then IPX with crossover."""
    for name, opts in (("highs-simplex", {"solver": "simplex"}), ("highs-ipx", {"solver": "ipm", "run_crossover": "on"})):
        res, s = timed(lambda: hs.solve(policy, jobs, cluster, solver="highs", options=opts, time_limit=limit))
        if res.status == "optimal":
            return name, res, s
    return name, res, s


def distinct_jobs(n: int, seed: int, entities: int = 0):
    rng = np.random.default_rng([seed, n])
    types = ["v100", "p100", "k80"]
    T = np.exp(rng.normal(0.0, 1.0, (n, 3)))
    kw = {"entities": rng.choice([f"e{i}" for i in range(entities)], n)} if entities else {}
    jobs = hs.JobSet(T, gpu_types=types, scale_factors=rng.choice([1, 2, 4], n, p=[0.7, 0.2, 0.1]), **kw)
    return jobs, hs.Cluster({t: n // 2 for t in types})


def agree(res, ref, rel: float = 1e-6) -> str:
    """Whether two results' objectives agree; "n/a" when the reference did not finish."""
    if ref.status != "optimal":
        return f"n/a (reference {ref.status})"
    a, b = float(res.objective), float(ref.objective)
    if not (math.isfinite(a) and math.isfinite(b)):
        return ""
    return "yes" if abs(a - b) <= rel * max(abs(a), abs(b), 1e-12) else f"no ({a:.9g} vs {b:.9g})"


def run_case(case: str, limit: float, seed: int) -> dict:
    row: dict = {"case": case}
    if case.endswith("_hard"):
        row.update(_hard_case(case, limit, seed))
    elif case in ("maxmin_1e5", "maxmin_1e6", "makespan_1e5", "maxsum_1e5"):
        policy = {"maxmin": "max_min_fairness", "makespan": "min_makespan", "maxsum": "max_sum_throughput"}[case.split("_")[0]]
        n = int(float(case.split("_")[1]))
        inst = make_instance("random", n, 10, seed)
        jobs, cluster = inst.jobs, inst.cluster
        if policy == "min_makespan":
            rng = np.random.default_rng(seed)
            jobs = hs.JobSet(jobs.throughputs, gpu_types=jobs.gpu_types, scale_factors=jobs.scale_factors,
                             steps_remaining=rng.uniform(1e3, 1e6, n))
        res, s = timed(lambda: hs.solve(policy, jobs, cluster))
        row.update(n=n, m=10, seconds=s, status=res.status, detail=res.message[:90])
        if n <= 100_000:
            if policy == "max_sum_throughput":
                name = "clarabel"
                ref, rs = timed(lambda: hs.solve(policy, jobs, cluster, solver="clarabel", time_limit=limit))
            else:
                name, ref, rs = general(policy, jobs, cluster, limit)
            row.update(ref_method=name, ref_seconds=rs, ref_status=ref.status, ratio=rs / s,
                       agree=agree(res, ref))
        else:
            row.update(ref_method="general HiGHS: not run at 1e6 (see the 1e5 row)")
    elif case.startswith(("water_filling_", "hierarchical_")):
        n = int(case.rsplit("_", 1)[1])
        hier = case.startswith("hierarchical")
        jobs, cluster = distinct_jobs(n, seed, entities=8 if hier else 0)
        policy = "hierarchical_max_min_fairness" if hier else "max_min_fairness_water_filling"
        res, s = timed(lambda: hs.solve(policy, jobs, cluster))
        ref, rs = timed(lambda: hs.solve("max_min_fairness", jobs, cluster))
        row.update(n=n, m=3, seconds=s, status=res.status, detail=res.message[:90], ref_method="one max-min solve",
                   ref_seconds=rs, ref_status=ref.status, ratio=s / rs)
    elif case == "maxsum_pack_place_2048":
        from hetsched.formulations.spaces.packing import Packing
        from hetsched.formulations.spaces.placement_sensitivity import PlacementSensitivity

        try:
            cat = hs.gavel_throughputs()
            source = "gavel-table"
        except hs.DataNotFoundError:
            cat = hs.generate_catalogue(pairs=True, seed=0)
            source = "generated"
        w = hs.sample_jobs(cat, 2048, seed=0)
        cluster = hs.Cluster.from_servers({"v100": 64, "p100": 64, "k80": 64}, gpus_per_server=4)

        def policy(aggregate: bool):
            return hs.policies.MaxSumThroughput(
                packing=Packing.from_workload(w, cat, aggregate=aggregate),
                placement_sensitivity=PlacementSensitivity.from_workload(w, cat, aggregate=aggregate))

        res, s = timed(lambda: hs.solve(policy(True), w.jobs, cluster))
        ref, rs = timed(lambda: hs.solve(policy(False), w.jobs, cluster, time_limit=limit))
        row.update(n=2048, m=3, seconds=s, status=res.status,
                   detail=f"{source}; {res.extra['space'].get('n_classes', 2048)} classes, {res.sizes['max_vars']} vars",
                   ref_method=f"job by job ({ref.sizes['max_vars']} vars)", ref_seconds=rs, ref_status=ref.status,
                   ratio=rs / s, agree=agree(res, ref))
    elif case == "cpu_rows_1e5":
        n = 100_000
        inst = make_instance("random", n, 10, seed)
        rng = np.random.default_rng(seed)
        j = inst.jobs
        jobs = hs.JobSet(j.throughputs, gpu_types=j.gpu_types, scale_factors=j.scale_factors,
                         cpus_per_gpu=rng.choice([2.0, 4.0, 8.0], n))
        counts = {t: int(c) for t, c in zip(j.gpu_types, inst.cluster.capacities(j.gpu_types))}
        cluster = hs.Cluster(counts, cpus={t: 3.0 * c for t, c in counts.items()})
        res, s = timed(lambda: hs.solve("max_min_fairness", jobs, cluster))
        ref, rs = timed(lambda: hs.solve("max_min_fairness", j, inst.cluster))
        row.update(n=n, m=10, seconds=s, status=res.status, detail=res.message[:90], ref_method="same jobs, GPU rows only",
                   ref_seconds=rs, ref_status=ref.status, ratio=s / rs)
    elif case in ("maxmin_16k_gavel", "maxmin_16k_cvxpy"):
        import gavel_reference as gr

        n = 16_384
        inst = make_instance("random", n, 3, seed)
        jobs, cluster = inst.jobs, inst.cluster
        T = np.asarray(jobs.throughputs, dtype=float)
        sf = jobs.scale_factors.astype(float)
        C = cluster.capacities(jobs.gpu_types).astype(float)
        res, s = timed(lambda: hs.solve("max_min_fairness", jobs, cluster))
        build = gr.max_min_fairness_per_job if case.endswith("gavel") else gr.max_min_fairness
        ref = build(T, sf, C)
        ours = gr.evaluate("max_min_fairness", res.X, T, sf, C)
        theirs = gr.evaluate("max_min_fairness", ref.X, T, sf, C)
        same = abs(ours - theirs) <= 1e-6 * max(abs(ours), abs(theirs))
        row.update(n=n, m=3, seconds=s, status=res.status, detail=res.message[:90],
                   ref_method=f"cvxpy {'one expression per job' if case.endswith('gavel') else 'vectorized'} "
                              f"({ref.solver})",
                   ref_seconds=ref.seconds, ref_status=ref.status, ratio=ref.seconds / s,
                   agree="yes" if same else f"no ({ours:.9g} vs {theirs:.9g})")
    else:
        raise SystemExit(f"unknown case {case!r}")
    row["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    row.update(FIRST_CPU)
    return row


HARD_POLICIES = {"maxmin": "max_min_fairness", "makespan": "min_makespan", "ftf": "finish_time_fairness"}


def _hard_case(case: str, limit: float, seed: int) -> dict:
    """A ``*_hard`` case: the same call on the hard family (``hard_instances.py``)."""
    kind, size = case[: -len("_hard")].rsplit("_", 1)
    n = int(float(size))
    if kind in ("water_filling", "hierarchical"):
        hier = kind == "hierarchical"
        jobs, cluster = hard_instance(n, 3, seed, entities=8 if hier else 0)
        policy = "hierarchical_max_min_fairness" if hier else "max_min_fairness_water_filling"
        res, s = timed(lambda: hs.solve(policy, jobs, cluster))
        ref, rs = timed(lambda: hs.solve("max_min_fairness", jobs, cluster))
        return dict(n=n, m=3, seconds=s, status=res.status, detail=res.message[:90], ref_method="one max-min solve",
                    ref_seconds=rs, ref_status=ref.status, ratio=s / rs)
    policy = HARD_POLICIES[kind]
    jobs, cluster = hard_instance(n, 10, seed)
    if policy != "max_min_fairness":
        jobs = with_progress(jobs, seed)
    res, s = timed(lambda: hs.solve(policy, jobs, cluster))
    row = dict(n=n, m=10, seconds=s, status=res.status, detail=res.message[:90])
    if kind == "maxmin" and n <= 100_000:
        name, ref, rs = general(policy, jobs, cluster, limit)
        row.update(ref_method=name, ref_seconds=rs, ref_status=ref.status, ratio=rs / s, agree=agree(res, ref))
    return row


HARD_CASES = ["maxmin_1e5_hard", "makespan_1e5_hard", "ftf_1e5_hard", "water_filling_2048_hard",
              "water_filling_8192_hard", "hierarchical_2048_hard", "maxmin_1e6_hard"]
CASES = ["maxmin_1e5", "makespan_1e5", "maxsum_1e5", "water_filling_2048", "water_filling_8192", "hierarchical_2048",
         "maxsum_pack_place_2048", "cpu_rows_1e5", "maxmin_1e6", *HARD_CASES, "maxmin_16k_gavel", "maxmin_16k_cvxpy"]
#: Cases run only when named (``--cases``): hierarchical 8,192 x 3 hard, 8 entities (issue 29's < 60 s target).
EXTRA_CASES = ["hierarchical_8192_hard"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", nargs="+", default=CASES, choices=[*CASES, *EXTRA_CASES])
    ap.add_argument("--general-limit", type=float, default=120.0, help="seconds for each reference path")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # child mode: run one case, print JSON
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--guard-factor", type=float, default=2.0,
                    help="a row slower than this many times its recorded seconds is a regression (exit 1)")
    ap.add_argument("--accept", action="store_true", help="record this run even where it regressed")
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(run_case(args.one, args.general_limit, args.seed)))
        return 0
    recorded = read_recorded(args.out)
    machine = machine_seconds()
    print(f"machine_s={machine:.3g} (fixed workload; the guard scales recorded seconds by it)", flush=True)
    rows = []
    for case in args.cases:
        proc = subprocess.run([sys.executable, __file__, "--one", case, "--general-limit", str(args.general_limit),
                               "--seed", str(args.seed)], capture_output=True, text=True)
        if proc.returncode != 0:
            row = {"case": case, "status": "error", "detail": proc.stderr.strip().splitlines()[-1][:200]}
        else:
            row = json.loads(proc.stdout.strip().splitlines()[-1])
        row["machine_s"] = machine
        rows.append(row)
        fmt = {k: (f"{v:.3g}" if isinstance(v, float) else v) for k, v in row.items()}
        print(" | ".join(f"{k}={fmt.get(k, '')}" for k in COLUMNS if k in fmt), flush=True)
    bad = regressions(rows, recorded, args.guard_factor, machine)
    for line in bad:
        print(f"REGRESSION: {line}", file=sys.stderr)
    merged = {**recorded, **{r["case"]: r for r in rows}}
    out = args.out
    if bad and not args.accept:
        out = args.out.with_name(args.out.stem + ".rejected.csv")
        print(f"{len(bad)} row(s) regressed by more than {args.guard_factor}x against {args.out}; it is kept, and "
              f"this run goes to {out} (rerun with --accept to record it)", file=sys.stderr)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        wr.writeheader()
        wr.writerows([merged[c] for c in [*CASES, *sorted(set(merged) - set(CASES))] if c in merged])
    print(f"wrote {out}")
    return 1 if bad and not args.accept else 0


def read_recorded(path: Path) -> dict[str, dict]:
    """The recorded rows of ``path`` by case (none when it does not exist)."""
    if not path.exists():
        return {}
    with path.open(newline="") as f:
        return {r["case"]: r for r in csv.DictReader(f)}


def regressions(rows: list[dict], recorded: dict[str, dict], factor: float,
                machine: float | None = None) -> list[str]:
    """Rows that ran more than ``factor`` times slower than the recorded row of their case, or
    that lost an optimal status the recorded row had (the regression guard).

    ``machine``: this run's :func:`machine_seconds`. Where the recorded row has a
    ``machine_s`` too, its seconds count as ``seconds * machine / machine_s`` (what they
    would be on this machine); otherwise they are compared as recorded.
    """
    bad = []
    for row in rows:
        old = recorded.get(row["case"])
        if not old or old.get("status") != "optimal":
            continue
        if row.get("status") != "optimal":
            bad.append(f"{row['case']}: status {row.get('status')!r} (recorded: optimal)")
            continue
        was, now = float(old["seconds"]), float(row["seconds"])
        speed, note = 1.0, ""
        if machine is not None and old.get("machine_s") not in (None, ""):
            speed = machine / float(old["machine_s"])
            note = f"; this machine takes {speed:.2f}x the recorded one's time on the fixed workload"
        if now > factor * was * speed:
            bad.append(f"{row['case']}: {now:.3g} s against {was:.3g} s recorded ({now / was:.1f}x{note})")
    return bad


if __name__ == "__main__":
    sys.exit(main())
