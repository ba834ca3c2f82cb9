"""Command line: ``python -m hetsched demo`` and ``python -m hetsched policies``.

The command line is the one place in hetsched that prints; the library logs.

Examples
--------
>>> import contextlib, io
>>> from hetsched.cli import main
>>> buf = io.StringIO()
>>> with contextlib.redirect_stdout(buf):
...     code = main(["policies"])
>>> code, "max_min_fairness" in buf.getvalue().split()
(0, True)
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
from collections.abc import Sequence
from typing import TextIO

import numpy as np

from .cluster import Cluster
from .errors import HetschedError, MissingFieldError, ValidationError
from .throughputs import DEFAULT_SPEEDUPS, ThroughputCatalogue, generate_catalogue, load_gavel_throughputs
from .workloads import sample_jobs

__all__ = ["DEMO_PRICES", "main"]

#: $ per GPU-hour used by the demo cluster (Google Cloud on-demand list prices, 2020;
#: see docs/data.md). Only cost-aware policies read them.
DEMO_PRICES: dict[str, float] = {"k80": 0.45, "p100": 1.46, "v100": 2.48, "a100": 2.93}


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m hetsched",
        description="Heterogeneity-aware GPU cluster scheduling policies.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level to stderr")
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("policies", help="list the registered policy names")

    demo = sub.add_parser(
        "demo",
        help="sample jobs from a throughput table and solve every policy on a Gavel-like cluster",
    )
    demo.add_argument("--jobs", type=int, default=100, help="number of jobs (default 100)")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    demo.add_argument("--policies", default=None, help="comma-separated policy names (default: all)")
    demo.add_argument(
        "--gpu-types",
        default=None,
        help="comma-separated GPU types, optionally NAME=SPEEDUP for the generator "
        "(default: v100,p100,k80, or every type of --throughputs)",
    )
    demo.add_argument("--gpus-per-type", type=int, default=36, help="GPUs of each type (default 36, as in Gavel)")
    demo.add_argument(
        "--throughputs",
        default=None,
        metavar="PATH",
        help="a local Gavel-format throughput JSON to use instead of the built-in generator",
    )
    demo.add_argument("--solver", default="auto", help="solver backend (default auto)")
    demo.add_argument("--time-limit", type=float, default=None, help="seconds per policy")
    demo.add_argument(
        "--arrival-rate", type=float, default=20.0, help="Poisson arrivals per hour for arrival_times (default 20)"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments without the program name (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        0 on success; 1 when any solve failed; 2 for bad arguments.
    """
    parser = _build_parser()
    try:
        args = parser.parse_args(None if argv is None else list(argv))
    except SystemExit as exc:  # argparse exits on --help (0) and on bad arguments (2)
        return int(exc.code) if isinstance(exc.code, int) else 2
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    out = sys.stdout
    if args.command == "policies":
        from .formulations.base import list_policies
        from . import policies as _policies  # noqa: F401  (registers every policy)

        for name in list_policies():
            print(name, file=out)
        return 0
    try:
        return _demo(args, out)
    except ValidationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _parse_gpu_types(text: str | None) -> list[str] | dict[str, float] | None:
    if text is None:
        return None
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise ValidationError(f"`--gpu-types` must name at least one GPU type; got {text!r}.")
    if not any("=" in t for t in items):
        return items
    table: dict[str, float] = {}
    for t in items:
        name, _, value = t.partition("=")
        if not value:
            if name not in DEFAULT_SPEEDUPS:
                raise ValidationError(
                    f"`--gpu-types` entry {t!r} needs NAME=SPEEDUP (no default speedup for {name!r})."
                )
            table[name] = DEFAULT_SPEEDUPS[name]
            continue
        try:
            table[name] = float(value)
        except ValueError:
            raise ValidationError(f"`--gpu-types` entry {t!r} must be NAME=SPEEDUP with a number; got {value!r}.") from None
    return table


def _demo(args: argparse.Namespace, out: TextIO) -> int:
    import hetsched as hs

    if args.jobs < 1:
        raise ValidationError(f"`--jobs` must be a positive integer; got {args.jobs}.")
    if args.gpus_per_type < 1:
        raise ValidationError(f"`--gpus-per-type` must be a positive integer; got {args.gpus_per_type}.")
    known = hs.list_policies()
    if args.policies is None:
        names = known
    else:
        names = [p.strip() for p in args.policies.split(",") if p.strip()]
        unknown = [p for p in names if p not in known]
        if unknown or not names:
            raise ValidationError(f"`--policies` must name registered policies {known}; unknown: {unknown or names}.")
    gpu_spec = _parse_gpu_types(args.gpu_types)
    catalogue: ThroughputCatalogue
    if args.throughputs is not None:
        catalogue = load_gavel_throughputs(args.throughputs)
        if gpu_spec is not None:
            catalogue = catalogue.subset(list(gpu_spec))
        source = f"Gavel-format table {args.throughputs}"
    else:
        catalogue = generate_catalogue(gpu_types=gpu_spec or ("v100", "p100", "k80"), seed=args.seed)
        source = "generated catalogue"
    workload = sample_jobs(catalogue, args.jobs, seed=args.seed, arrival_rate_per_hour=args.arrival_rate)
    jobs = workload.jobs
    counts = {t: args.gpus_per_type for t in catalogue.gpu_types}
    prices = {t: DEMO_PRICES[t] for t in catalogue.gpu_types if t in DEMO_PRICES}
    cluster = Cluster(counts, prices=prices or None)
    print(
        f"demo: {jobs.n_jobs} jobs (seed {args.seed}) from {source} "
        f"({len(catalogue.job_type_names)} job types x scale factors {list(catalogue.available_scale_factors)}); "
        f"cluster {cluster.as_dict()}",
        file=out,
    )
    types = "/".join(catalogue.gpu_types)
    header = f"{'policy':<24} {'status':<12} {'objective':>12} {'solve_s':>9} {'mean_thr':>10}  GPUs used ({types})"
    print(header, file=out)
    print("-" * len(header), file=out)
    notes: list[str] = []
    failed = 0
    for name in names:
        try:
            res = hs.solve(name, jobs, cluster, solver=args.solver, time_limit=args.time_limit)
        except MissingFieldError as exc:
            notes.append(f"note: skipped {name!r}: {exc}")
            continue
        except HetschedError as exc:
            failed += 1
            print(f"{name:<24} {'error':<12} {'':>12} {'':>9} {'':>10}  {type(exc).__name__}", file=out)
            notes.append(f"error: {name!r} failed: {exc}")
            continue
        if not res.success:
            failed += 1
        used = (jobs.scale_factors[:, None] * res.X).sum(axis=0) if res.X.size else np.zeros(jobs.n_types)
        mean_thr = float(np.mean(res.effective_throughput)) if res.X.size else math.nan
        used_txt = "/".join(f"{u:.1f}" for u in used)
        print(
            f"{name:<24} {res.status:<12} {res.objective:>12.6g} {res.timings.get('total_s', math.nan):>9.3f} "
            f"{mean_thr:>10.4g}  {used_txt}",
            file=out,
        )
        if not res.success:
            notes.append(f"error: {name!r} did not succeed: {res.message}")
    for line in notes:
        print(line, file=out)
    return 1 if failed else 0
