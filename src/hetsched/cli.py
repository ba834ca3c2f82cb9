"""Command line: ``python -m hetsched {demo,policies,solve,simulate,sweep,bench,plot}``.

The command line is the one place in hetsched that prints; the library logs.

* ``demo`` — a short simulation of generated jobs under every policy; prints the summary.
* ``policies`` — the registered policy names.
* ``solve`` — one allocation for generated (or traced) jobs.
* ``simulate`` — replay a generated workload, a trace file or a TOML experiment; writes
  ``jobs.csv``, ``rounds.csv``, ``summary.json`` and ``provenance.json`` with ``--out``.
* ``sweep`` — policies x loads x seeds of generated workloads, or the policies on one
  ``--trace``, through a process pool (or a TOML experiment); writes ``sweep.csv`` and
  ``provenance.json``.
* ``bench`` — simulation speed on Gavel's setup.
* ``plot`` — runs overlaid (JCT and FTF CDFs, smoothed utilization per GPU type, solver
  time) from ``simulate --out`` directories, or average JCT vs load from sweeps.

Progress bars (``simulate``, ``sweep``) are on when stderr is a terminal and off under CI
or when piped (:func:`hetsched.sim.provenance.progress_wanted`); ``--progress`` /
``--no-progress`` override.

No option is silently ignored (issue 30): one that the rest of the command line makes
ineffective -- ``--jobs`` with ``--trace``, ``--seed`` on ``sweep``, ``--runs`` without
``--out``, any workload flag beside ``--config`` ... -- is an error (exit 2) naming the
option, the rule and the value (:func:`_check_ignored`).
* ``reproduce`` — the papers' headline experiments (see ``hetsched.reproduce``).
* ``slurm`` — drive a Slurm partition with an online scheduler (see ``hetsched.slurm``, ``docs/slurm.md``).

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
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from .api import solve
from .errors import HetschedError, ValidationError
from .formulations.base import list_policies, make_policy
from .inputs.adaptive import read_adaptive_workload
from .inputs.cluster import Cluster
from .inputs.profiles import SIA_MACHINE_SUFFIXES
from .inputs.throughputs import (
    DEFAULT_SPEEDUPS,
    ThroughputCatalogue,
    generate_catalogue,
    load_gavel_throughputs,
)
from .inputs.throughputs.gavel import MISSING_CHOICES
from .inputs.traces.readers import trace_format
from .policies import FinishTimeFairness, MaxMinFairness
from .schedulers import Tiresias
from .schedulers.names import list_schedulers, make_scheduler
from .sim import (
    SimOptions,
    SimulationResult,
    generate_workload,
    load_config,
    load_trace,
    run_config,
    simulate,
    sweep,
)
from .sim.options import make_options
from .sim.provenance import progress_wanted, provenance, write_provenance
from .solvers.certificate import DEFAULT_TOL
from .validation import check_int
from .validation import check_output_path as _check_out

__all__ = ["DEMO_PRICES", "main"]

#: $ per GPU-hour used by the demo cluster (Google Cloud on-demand list prices, 2020;
#: see docs/data.md). Only cost-aware policies read them.
DEMO_PRICES: dict[str, float] = {"k80": 0.45, "p100": 1.46, "v100": 2.48, "a100": 2.93}

#: Default cluster of simulate / sweep / solve: Gavel's 36 V100 + 36 P100 + 36 K80.
DEFAULT_CLUSTER = "v100=36,p100=36,k80=36"

#: Arrival rates (jobs/hour) of ``sweep`` without ``--loads``.
_LOADS = "2,4"

_SUMMARY_ROWS = (
    ("jobs (measured / completed)", None),
    ("avg JCT (h)", "avg_jct_s"),
    ("median JCT (h)", "median_jct_s"),
    ("p99 JCT (h)", "p99_jct_s"),
    ("makespan (h)", "makespan_s"),
    ("avg queueing delay (h)", "avg_queueing_delay_s"),
    ("worst FTF rho", "worst_ftf"),
    ("share FTF rho > 1.05", "share_ftf_above_1_05"),
    ("utilization", "utilization"),
    ("preemptions", "preemptions"),
    ("migrations", "migrations"),
    ("SLO violations", "slo_violations"),
    ("rounds / solves", None),
    ("simulated hours", "simulated_hours"),
    ("wall s (policy/mechanism/placement)", None),
    ("simulated hours per wall s", "sim_hours_per_wall_s"),
)


# ----------------------------------------------------------------------------- parser
def _add_workload_args(p: argparse.ArgumentParser, *, jobs_default: int = 200, sweep: bool = False) -> None:
    """The workload and cluster options of ``solve``, ``simulate`` and ``sweep``. The options of
    a generated workload are refused beside ``--trace``; ``sweep`` refuses ``--seed`` and
    ``--rate`` (its ``--seeds`` and ``--loads``), which its help therefore does not list
    (:func:`_check_ignored`)."""
    g = p.add_argument_group("workload")
    g.add_argument("--jobs", "-n", type=int, default=jobs_default,
                   help=f"generated jobs (default {jobs_default}; not with --trace)")
    g.add_argument("--seed", type=int, default=0,
                   help=argparse.SUPPRESS if sweep else "random seed of the generated workload, or of the job types "
                        "drawn for a cluster log (--trace of format philly, helios or pai) (default 0)")
    g.add_argument("--rate", "--arrival-rate", "--load", dest="rate", type=float, default=4.0,
                   help=argparse.SUPPRESS if sweep else "Poisson arrivals, jobs per hour (default 4; not with --trace)")
    g.add_argument("--single-gpu", action="store_true",
                   help="only 1-GPU jobs (Gavel's continuous-single trace; not with --trace)")
    g.add_argument("--long-job-prob", type=float, default=0.2,
                   help="probability of a long job (default 0.2; not with --trace)")
    g.add_argument("--throughputs", metavar="PATH", default=None,
                   help="local Gavel-format throughput JSON (default: the built-in generator)")
    _add_missing_arg(g)
    g.add_argument("--trace", metavar="PATH", default=None,
                   help="replay a trace file instead of generated jobs (sweep: every policy on this trace)")
    g.add_argument("--profiles", metavar="DIR", default=None,
                   help="Sia/Pollux artifact folder with profiles/ (with --trace-format sia; default: "
                        "$HETSCHED_SIA_DATA, then ../shared/data/sia)")
    g.add_argument("--trace-format", choices=("gavel", "philly", "helios", "pai", "sia"), default=None,
                   help="format of --trace (default from the file name: .json philly, .csv helios, else gavel)")
    g.add_argument("--task-path", metavar="PATH", default=None, help="PAI task table (with --trace-format pai only)")
    g.add_argument("--skip-bad-rows", action="store_true",
                   help="drop the trace rows that cannot be used (unknown job type, unfinished job, malformed "
                        "field...) with a warning and record their counts in the provenance, instead of "
                        "failing (the default); applies to --trace and to a --config trace")
    c = p.add_argument_group("cluster")
    c.add_argument("--cluster", "--gpus", dest="cluster", default=DEFAULT_CLUSTER,
                   help=f"GPU counts TYPE=N,... (default {DEFAULT_CLUSTER})")
    c.add_argument("--gpus-per-server", type=int, default=None,
                   help="cut the cluster into servers of this size (enables placement)")


def _add_missing_arg(g: Any) -> None:
    """``--missing {raise,zero}``: what a (job type, scale factor) row that some GPU type's
    table of ``--throughputs`` lacks means (``missing=`` of :func:`load_gavel_throughputs`)."""
    g.add_argument("--missing", choices=MISSING_CHOICES, default=None,
                   help="a (job type, scale factor) row of --throughputs that some GPU type's table lacks: 'raise' "
                        "(default) is an error naming each such row and the GPU types without it; 'zero' reads it "
                        "as throughput 0 there (the job cannot run on that type), with a warning. Also sets "
                        "`missing` of a --config experiment's table")


def _add_progress_args(p: argparse.ArgumentParser) -> None:
    """``--progress`` / ``--no-progress`` (default None: decided by
    :func:`hetsched.sim.provenance.progress_wanted`)."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--progress", dest="progress", action="store_true", default=None,
                   help="progress bar (default: on a terminal, off under CI or when stderr is not a terminal)")
    g.add_argument("--no-progress", dest="progress", action="store_false")


def _add_sim_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("simulation")
    g.add_argument("--round-seconds", type=float, default=360.0, help="round length (default 360 s)")
    g.add_argument("--mechanism", choices=("rounds", "ideal"), default="rounds")
    pl = g.add_mutually_exclusive_group()
    pl.add_argument("--placement", dest="placement", action="store_true", default=None,
                    help="place rounds on servers (default: when --gpus-per-server is given)")
    pl.add_argument("--no-placement", dest="placement", action="store_false")
    g.add_argument("--reallocate", default="on_change",
                   help="'on_change' (default) or a re-solve period in seconds")
    g.add_argument("--window", nargs=2, type=float, metavar=("START", "END"), default=None,
                   help="measure jobs START <= position < END (Gavel's -s/-e)")
    g.add_argument("--window-unit", choices=("jobs", "seconds"), default="jobs",
                   help="what the numbers of --window count (default jobs; with --window only)")
    g.add_argument("--max-time", type=float, default=None, help="stop at this simulated time (seconds)")
    g.add_argument("--wall-time-limit", type=float, default=None, help="stop after this many wall seconds")
    g.add_argument("--solver", default="auto", help="solver backend (default auto)")
    g.add_argument("--rule", choices=("gavel", "deficit"), default="gavel",
                   help="priority rule of the round mechanism (default gavel; not with --mechanism ideal)")
    g.add_argument("--preset", choices=("gavel", "hetsched"), default=None,
                   help="named settings; 'gavel': re-solve at most once per 1,920 s, arrivals wait for it")
    g.add_argument("--restart-seconds", type=float, default=0.0,
                   help="seconds without progress when a job starts on new GPUs (default 0)")


def _build_parser() -> argparse.ArgumentParser:
    """The ``python -m hetsched`` parser: one sub-parser per command."""
    parser = argparse.ArgumentParser(
        prog="python -m hetsched",
        description="Heterogeneity-aware GPU cluster scheduling policies.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level to stderr")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("policies", help="list the scheduler names (registered policies and round schedulers)")
    for add in (_add_demo_parser, _add_solve_parser, _add_simulate_parser, _add_sweep_parser, _add_bench_parser,
                _add_plot_parser):
        add(sub)
    from .reproduce.command import add_parser as _add_reproduce_parser

    _add_reproduce_parser(sub)
    from .slurm.command import add_parser as _add_slurm_parser

    _add_slurm_parser(sub)
    return parser


def _add_demo_parser(sub: Any) -> None:
    """``demo``: a short generated workload under every policy."""
    demo = sub.add_parser("demo", help="simulate a short generated workload under every policy and print the summary")
    demo.add_argument("--jobs", type=int, default=30, help="number of jobs (default 30)")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    demo.add_argument("--policies", default=None, help="comma-separated policy names (default: all)")
    demo.add_argument("--gpu-types", default=None,
                      help="comma-separated GPU types, optionally NAME=SPEEDUP for the generator "
                      "(default: v100,p100,k80, or every type of --throughputs)")
    demo.add_argument("--gpus-per-type", type=int, default=8, help="GPUs of each type (default 8)")
    demo.add_argument("--throughputs", default=None, metavar="PATH",
                      help="a local Gavel-format throughput JSON to use instead of the built-in generator")
    _add_missing_arg(demo)
    demo.add_argument("--solver", default="auto", help="solver backend (default auto)")
    demo.add_argument("--time-limit", type=float, default=None, help="seconds per solve")
    demo.add_argument("--arrival-rate", type=float, default=20.0, help="Poisson arrivals per hour (default 20)")
    demo.add_argument("--round-seconds", type=float, default=360.0, help="round length (default 360 s)")


def _add_solve_parser(sub: Any) -> None:
    """``solve``: one allocation for generated jobs."""
    solve = sub.add_parser(
        "solve", help="solve one allocation for generated (or traced) jobs and print it",
        description="Solve one allocation and print it: the status and objective, the GPUs used per type, and "
                    "the allocation itself, one row per job (the fraction of time on each GPU type and the "
                    "effective throughput). Entries within the certificate's tolerance (1e-6) of 0 or 1 are "
                    "printed and written as exactly 0 or 1.")
    solve.add_argument("--policy", default="max_min_fairness", help="policy name (default max_min_fairness)")
    solve.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="policy parameter")
    _add_workload_args(solve, jobs_default=100)
    solve.add_argument("--solver", default="auto")
    solve.add_argument("--time-limit", type=float, default=None)
    solve.add_argument("--out", "-o", metavar="CSV", default=None,
                       help="also write the allocation as CSV (job_id, one column per GPU type, effective_throughput); "
                            "entries within the certificate's tolerance (1e-6) of 0 or 1 are written as exactly 0 or 1")


def _add_simulate_parser(sub: Any) -> None:
    """``simulate``: a workload through one policy."""
    sim = sub.add_parser("simulate", help="replay a workload through a policy; print and write the summary")
    sim.add_argument("--policy", default="max_min_fairness", help="policy name (default max_min_fairness)")
    sim.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                     help="policy parameter, e.g. heterogeneity_aware=false (repeatable)")
    sim.add_argument("--config", metavar="TOML", default=None,
                     help="a TOML experiment: the whole run (with --out, --runs, --progress, --skip-bad-rows and "
                          "--missing only; any other flag is an error)")
    _add_workload_args(sim)
    _add_sim_args(sim)
    sim.add_argument("--out", "-o", "--output", dest="out", metavar="DIR", default=None,
                     help="write DIR/jobs.csv, DIR/rounds.csv and DIR/summary.json")
    sim.add_argument("--runs", action="store_true", help="also write DIR/runs.csv (the run log; with --out only)")
    sim.add_argument("--interconnect", metavar="JSON", default=None,
                     help="GPU interconnect graphs and uplinks (docs/interconnect.md): GPUs are chosen inside servers "
                          "(MAPA), communication-heavy gangs kept whole, jobs slowed by poor subsets and shared links; "
                          "'topology': from the level bandwidths of --topology")
    sim.add_argument("--network-cost", type=float, default=None,
                     help="placement cost of spreading a gang, times its communication intensity (default 20; with "
                          "--interconnect only)")
    sim.add_argument("--topology", metavar="JSON", default=None,
                     help="the cluster as servers and levels (docs/hived.md; replaces --cluster and --gpus-per-server)")
    sim.add_argument("--tenants", metavar="JSON", default=None,
                     help="tenants and their cells for --policy hived / hived_quota (docs/hived.md)")
    _add_progress_args(sim)


def _add_sweep_parser(sub: Any) -> None:
    """``sweep``: policies x loads x seeds (or the policies on a ``--trace``) through a process pool."""
    sw = sub.add_parser("sweep", help="policies x loads x seeds of generated workloads, or the policies on one "
                                      "--trace, through a process pool; writes sweep.csv")
    sw.add_argument("--config", metavar="TOML", default=None,
                    help="a TOML experiment: the whole sweep (with --out, --plot, --workers, --progress, "
                         "--skip-bad-rows and --missing only; any other flag is an error)")
    sw.add_argument("--policies", default="max_min_fairness", help="comma-separated policy names")
    sw.add_argument("--agnostic", action="store_true",
                    help="also run max_min_fairness(heterogeneity_aware=False)")
    sw.add_argument("--loads", default=None,
                    help=f"comma-separated arrival rates of the generated workloads, jobs/hour (default {_LOADS}; "
                         "not with --trace, which brings its own arrivals)")
    sw.add_argument("--seeds", default="0",
                    help="comma-separated seeds of the generated workloads (default 0); with --trace one seed, that "
                         "of the job types drawn for a cluster log (not with a gavel or sia trace, which fixes every "
                         "job; the simulation itself is deterministic)")
    _add_workload_args(sw, sweep=True)
    _add_sim_args(sw)
    sw.add_argument("--workers", type=int, default=None, help="processes (default: CPU count; 1: in process)")
    sw.add_argument("--out", "-o", metavar="DIR", default=None,
                    help="write DIR/sweep.csv and DIR/provenance.json (and DIR/jct_vs_load.png)")
    sw.add_argument("--plot", action="store_true",
                    help="also plot average JCT vs load into DIR/jct_vs_load.png (with --out only)")
    _add_progress_args(sw)


def _add_bench_parser(sub: Any) -> None:
    """``bench``: simulation speed on Gavel's setup."""
    b = sub.add_parser("bench", help="simulation speed on Gavel's setup (36 V100 + 36 P100 + 36 K80)")
    b.add_argument("--loads", default="2", help="comma-separated arrival rates, jobs/hour (default 2)")
    b.add_argument("--window", nargs=2, type=int, default=(100, 300), metavar=("START", "END"))
    b.add_argument("--mix", choices=("single", "multi"), default="single")
    b.add_argument("--placement", action="store_true")
    b.add_argument("--throughputs", metavar="PATH", default=None, help="Gavel's measured table (default: generated)")
    _add_missing_arg(b)
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--out", "-o", metavar="CSV", default=None)


def _add_plot_parser(sub: Any) -> None:
    """``plot``: figures from simulate or sweep outputs."""
    pt = sub.add_parser("plot", help="overlay simulate --out directories, or plot a sweep (average JCT vs load)")
    pt.add_argument("input", nargs="+",
                    help="directories written by simulate --out (overlaid, one line per run), or sweep CSVs / "
                         "directories holding sweep.csv")
    pt.add_argument("--kind", choices=_PLOT_KINDS, default=None,
                    help="one figure of this kind to --out (default: every figure, into the directory --out; "
                         "an --out ending in .png/.pdf/.svg gets jct_cdf for runs, jct_vs_load for a sweep)")
    pt.add_argument("--out", "-o", metavar="PATH", required=True, help="a figure file, or a directory for every figure")
    pt.add_argument("--window-hours", type=float, default=None,
                    help="utilization smoothing window, hours of simulated time (default: 1/50 of the span; only "
                         "when a utilization figure is drawn)")


# ----------------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments without the program name (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        0 on success; 1 when a solve or simulation failed or an output could not be written;
        2 for bad arguments (including an ``--out`` that cannot be written, checked before the
        run).
    """
    parser = _build_parser()
    try:
        args = parser.parse_args(None if argv is None else list(argv))
    except SystemExit as exc:  # argparse exits on --help (0) and on bad arguments (2)
        return int(exc.code) if isinstance(exc.code, int) else 2
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    # The command as it can be run again (recorded in every output directory's provenance.json).
    given_argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    args.command_line = [sys.executable, "-m", "hetsched", *given_argv]
    out = sys.stdout
    if args.command == "policies":   # every name simulate --policy takes: policies and round schedulers
        for name in list_schedulers():
            print(name, file=out)
        return 0
    handlers = {"demo": _demo, "solve": _solve, "simulate": _simulate, "sweep": _sweep, "bench": _bench,
                "plot": _plot, "reproduce": _reproduce, "slurm": _slurm}
    try:
        _check_ignored(args, _given_options(given_argv))
        _check_missing(args)
        return handlers[args.command](args, out)
    except ValidationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ImportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # e.g. the disk filled up while writing --out: one line, not a traceback
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


# ----------------------------------------------------------------------------- helpers
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


def _parse_cluster(text: str, gpus_per_server: int | None) -> Cluster:
    counts: dict[str, int] = {}
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        name, sep, value = item.partition("=")
        try:
            n = int(value)
        except ValueError:
            n = -1
        if not sep or not name or n < 0:
            raise ValidationError(f"`--cluster` must be TYPE=COUNT,... with non-negative integer counts; got {item!r}.")
        counts[name.strip()] = n
    if not counts:
        raise ValidationError(f"`--cluster` must name at least one GPU type; got {text!r}.")
    if gpus_per_server is not None:
        check_int(gpus_per_server, "--gpus-per-server", low=1)
        return Cluster.from_servers(counts, gpus_per_server=gpus_per_server)
    return Cluster(counts)


def _parse_list(text: str, kind: type, name: str) -> list:
    try:
        vals = [kind(t.strip()) for t in text.split(",") if t.strip()]
    except ValueError:
        raise ValidationError(f"`{name}` must be a comma-separated list of {kind.__name__}s; got {text!r}.") from None
    if not vals:
        raise ValidationError(f"`{name}` must name at least one value; got {text!r}.")
    return vals


def _parse_value(text: str) -> Any:
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _make_policy(name: str, params: Sequence[str], *, schedulers: bool = True):
    """``--policy NAME --param KEY=VALUE ...`` parsed here, built by
    :func:`~hetsched.schedulers.names.make_scheduler` (any policy or round scheduler) or, for
    ``solve`` (``schedulers=False``), :func:`make_policy`."""

    kw = {}
    for item in params:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValidationError(f"`--param` must be KEY=VALUE; got {item!r}.")
        kw[key.strip()] = _parse_value(value)
    return make_scheduler(name, **kw) if schedulers else make_policy(name, **kw)


def _check_missing(args: argparse.Namespace) -> None:
    """``--missing`` names how to read the table of ``--throughputs`` (or of a ``--config``
    experiment, see :func:`_experiment`): without either it would change nothing, so it is an
    error rather than ignored."""
    missing = getattr(args, "missing", None)
    if missing is None or getattr(args, "config", None) is not None or args.throughputs is not None:
        return
    raise ValidationError(f"`--missing {missing}` applies to the throughput table of `--throughputs` (or of a "
                          "--config experiment), and none is given: the built-in generator has every row on every "
                          "GPU type.")


def _given_options(argv: Sequence[str]) -> dict[str, str]:
    """The options given on the command line ``argv`` (not left at their defaults): dest ->
    the option as given, e.g. ``{"jobs": "--jobs 10", "single_gpu": "--single-gpu"}``.

    ``argv`` is parsed again by a parser whose options have no defaults
    (``argparse.SUPPRESS``), so that only the options given land in the namespace. ``argv``
    has parsed once already, so this parse cannot fail. An option given with its default
    value counts as given (``--jobs 200`` with ``--trace`` is refused like ``--jobs 10``).
    """
    parser = _build_parser()
    subs: dict[str, argparse.ArgumentParser] = {}

    def no_defaults(p: argparse.ArgumentParser) -> None:
        for action in p._actions:   # argparse has no public list of a parser's actions
            if isinstance(action, argparse._SubParsersAction):
                subs.update(action.choices)
                for sp in action.choices.values():
                    no_defaults(sp)
            elif action.option_strings:
                action.default = argparse.SUPPRESS

    no_defaults(parser)
    ns = vars(parser.parse_args(list(argv)))
    actions = [a for a in (*parser._actions, *subs[ns["command"]]._actions) if a.option_strings]
    given: dict[str, str] = {}
    for dest, value in ns.items():
        same = [a for a in actions if a.dest == dest]
        if not same:   # the command, a positional
            continue
        # --placement / --no-placement share a dest: the one whose constant was stored
        action = next((a for a in same if a.nargs == 0 and a.const == value), same[0])
        flag = next((o for o in action.option_strings if o.startswith("--")), action.option_strings[0])
        if action.nargs == 0:
            given[dest] = flag
        elif isinstance(action, argparse._AppendAction):
            given[dest] = " ".join(f"{flag} {shlex.quote(str(v))}" for v in value)
        elif isinstance(value, (list, tuple)):
            given[dest] = " ".join([flag, *(shlex.quote(str(v)) for v in value)])
        else:
            given[dest] = f"{flag} {shlex.quote(str(value))}"
    return given


#: Options of a generated workload (solve, simulate, sweep): dest -> what it sets. A
#: ``--trace`` brings its own jobs and arrivals, so each is refused beside one.
_GENERATOR_OPTIONS = {
    "jobs": "sets the number of jobs of a generated workload",
    "rate": "sets the arrival rate of a generated workload",
    "single_gpu": "makes a generated workload of 1-GPU jobs only",
    "long_job_prob": "sets the share of long jobs of a generated workload",
}
#: Options of simulate / sweep that apply beside ``--config`` (the TOML file holds the rest).
_WITH_CONFIG = frozenset({"config", "out", "runs", "plot", "workers", "progress", "skip_bad_rows", "missing",
                          "verbose"})
#: Trace formats whose jobs the trace fixes: no seed draws anything from them.
_FIXED_FORMATS = ("gavel", "sia")


def _flag(option: str) -> str:
    """The option name of a given option (``"--jobs 10"`` -> ``"--jobs"``)."""
    return option.split(" ", 1)[0]


def _check_ignored(args: argparse.Namespace, given: dict[str, str]) -> None:
    """Refuse the options that the rest of the command line would make ineffective (issue 30:
    no option is silently ignored), before anything runs.

    ``given`` is :func:`_given_options`. Refused, on ``solve``, ``simulate`` and ``sweep``:
    the options of a generated workload (``--jobs``, ``--rate``, ``--single-gpu``,
    ``--long-job-prob``) with ``--trace``; ``--trace-format``, ``--profiles`` or
    ``--task-path`` without ``--trace``, ``--profiles`` with a trace not of format sia,
    ``--task-path`` with one not of format pai, ``--throughputs`` with a sia trace; ``--seed``
    (``sweep``: ``--seeds``) with a gavel or sia trace, which fixes every job; on
    ``simulate`` and ``sweep``: every option but those of :data:`_WITH_CONFIG` beside
    ``--config``; ``--window-unit`` without ``--window``; ``--rule`` with ``--mechanism
    ideal``; ``--runs`` (simulate) and ``--plot`` (sweep) without ``--out``; on ``sweep``:
    ``--seed`` and ``--rate`` (its ``--seeds`` and ``--loads`` say them), and more than one
    seed with ``--trace``. (``sweep --trace`` refuses ``--loads`` and ``--plot`` in
    :func:`_sweep_trace`; ``plot`` refuses ``--window-hours`` without a utilization figure
    in :func:`_plot`; ``reproduce`` refuses ``--throughputs`` for experiments that read no
    throughput table.)

    Raises
    ------
    ValidationError
        One line naming each option refused, the rule and the value given.
    """
    cmd = args.command
    if cmd not in ("solve", "simulate", "sweep"):
        return
    problems: list[str] = []
    for dest, writes in (("runs", "DIR/runs.csv"), ("plot", "DIR/jct_vs_load.png")):
        if dest in given and cmd in ("simulate", "sweep") and args.out is None:
            problems.append(f"`{given[dest]}` writes {writes} into the directory of `--out DIR`, and no --out is "
                            f"given; got {given[dest]}: add --out DIR or drop {given[dest]}.")
    if getattr(args, "config", None) is not None:
        extra = [v for k, v in given.items() if k not in _WITH_CONFIG]
        if extra:
            names = ", ".join(f"`{_flag(v)}`" for v in extra)
            beside = ", ".join("--" + d.replace("_", "-") for d in sorted(_WITH_CONFIG - {"config", "verbose"})
                               if hasattr(args, d))
            problems.append(
                f"{names} would be ignored: `--config` {args.config!r} describes the whole "
                f"{'sweep' if cmd == 'sweep' else 'run'} (policy, workload, cluster and simulation options; only "
                f"{beside} apply beside it); got {' '.join(extra)}: drop {'them' if len(extra) > 1 else 'it'} (the "
                "TOML file can set the value), or drop --config.")
        if problems:
            raise ValidationError(" ".join(problems))
        return
    trace = args.trace
    fmt = None if trace is None else (args.trace_format or trace_format(trace))
    if trace is not None:
        for dest, what in _GENERATOR_OPTIONS.items():
            if dest in given:
                flag = _flag(given[dest])
                problems.append(f"`{flag}` {what}; `--trace` {trace!r} brings its own jobs and arrival times; got "
                                f"{given[dest]}: drop {flag} or --trace.")
    else:
        for dest, what in (("trace_format", "is the format of `--trace`"),
                           ("profiles", "is the profile folder of a Sia `--trace` (--trace-format sia)"),
                           ("task_path", "is the task table of a PAI `--trace` (--trace-format pai)")):
            if dest in given:
                flag = _flag(given[dest])
                problems.append(f"`{flag}` {what}, and no --trace is given (the workload is generated); got "
                                f"{given[dest]}: drop {flag} or add --trace PATH.")
    if trace is not None and "profiles" in given and fmt != "sia":
        problems.append(f"`--profiles` is the profile folder of a Sia workload (--trace-format sia); `--trace` "
                        f"{trace!r} is read as a {fmt} trace; got {given['profiles']}: drop --profiles or pass "
                        "--trace-format sia.")
    if trace is not None and "task_path" in given and fmt != "pai":
        problems.append(f"`--task-path` is the task table of a PAI trace (--trace-format pai); `--trace` {trace!r} "
                        f"is read as a {fmt} trace; got {given['task_path']}: drop --task-path or pass "
                        "--trace-format pai.")
    if fmt == "sia" and "throughputs" in given:
        problems.append(f"`--throughputs` is the throughput table of a generated workload or of a gavel, philly, "
                        f"helios or pai trace; a Sia workload (--trace-format sia) takes its throughputs from its "
                        f"profiles (--profiles); got {given['throughputs']}: drop --throughputs.")
    for dest in ("seed", "seeds"):
        if fmt in _FIXED_FORMATS and dest in given:
            problems.append(f"`--{dest}` seeds a generated workload, or the job types drawn for a cluster log (a "
                            f"--trace of format philly, helios or pai); `--trace` {trace!r} is a {fmt} trace, which "
                            f"fixes every job, and the {'solve' if cmd == 'solve' else 'simulation'} itself is "
                            f"deterministic, so it would change nothing; got {given[dest]}: drop --{dest}.")
    if cmd == "sweep":
        if trace is not None and fmt not in _FIXED_FORMATS and len(_parse_list(args.seeds, int, "--seeds")) > 1:
            problems.append(f"`--seeds` lists the seeds of generated workloads; a sweep over `--trace` {trace!r} "
                            "reads the trace once (a cluster log's job types drawn with one seed) and each "
                            "simulation is deterministic, so every seed after the first would repeat the runs of "
                            f"the first; got {given['seeds']}: give one seed (it draws the job types), or sweep "
                            "generated workloads without --trace.")
        if "seed" in given and fmt not in _FIXED_FORMATS:
            problems.append(f"`--seed` sets the seed of one run; a sweep runs every seed of --seeds; got "
                            f"{given['seed']}: use --seeds (e.g. --seeds {args.seed}).")
        if "rate" in given and trace is None:
            problems.append(f"`--rate` sets the arrival rate of one generated workload; a sweep runs every rate of "
                            f"--loads; got {given['rate']}: use --loads (e.g. --loads {args.rate:g}).")
    if cmd in ("simulate", "sweep"):
        if "window_unit" in given and args.window is None:
            problems.append(f"`--window-unit` says what the numbers of `--window` count, and no --window is given; "
                            f"got {given['window_unit']}: drop --window-unit or add --window START END.")
        if "rule" in given and args.mechanism == "ideal":
            problems.append(f"`--rule` orders the jobs of the round mechanism (--mechanism rounds); `--mechanism "
                            f"ideal` gives every job exactly its allocation, in no order; got {given['rule']}: drop "
                            "--rule or --mechanism ideal.")
    if problems:
        raise ValidationError(" ".join(problems))


def _table(args: argparse.Namespace) -> ThroughputCatalogue:
    """The table of ``--throughputs``, a missing row read as ``--missing`` says."""
    return load_gavel_throughputs(args.throughputs, missing=getattr(args, "missing", None) or "raise")


def _catalogue(args: argparse.Namespace, gpu_types: Sequence[str] | None = None, *,
               pairs: bool = False) -> ThroughputCatalogue:
    if args.throughputs is not None:
        cat = _table(args)
        if gpu_types is not None:
            known = [t for t in gpu_types if t in cat.gpu_types]
            if known:
                cat = cat.subset(known)
        return cat
    types = tuple(gpu_types) if gpu_types is not None else ("v100", "p100", "k80")
    spec = {t: DEFAULT_SPEEDUPS[t] for t in types if t in DEFAULT_SPEEDUPS}
    unknown = [t for t in types if t not in DEFAULT_SPEEDUPS]
    if unknown:
        raise ValidationError(
            f"`--cluster` names GPU types {unknown} that the generator has no speedup for "
            f"(known: {sorted(DEFAULT_SPEEDUPS)}); pass --throughputs with a table that has them."
        )
    return generate_catalogue(gpu_types=spec, seed=args.seed, pairs=pairs)


def _needs_pairs(pol: Any) -> bool:
    """Whether a policy packs pairs from the workload's table (``--param packing=workload``):
    the generated catalogue then carries a pair table."""
    tables = getattr(pol, "workload_tables", None)
    return callable(tables) and "packing" in tables()


def _workload(args: argparse.Namespace, cluster: Cluster, *, pairs: bool = False, n_entities: int | None = None):
    """The run's jobs: ``--trace`` read, or generated (``n_entities`` tenants e0, e1, .. when
    given)."""
    if getattr(args, "skip_bad_rows", False) and (args.trace is None or args.trace_format == "sia"):
        raise ValidationError("`--skip-bad-rows` applies to the rows of a --trace of format gavel, philly, helios or "
                              "pai; " + ("Sia's reader never drops rows." if args.trace is not None
                                         else "this workload is generated."))
    if args.trace is not None and args.trace_format == "sia":
        unknown = [t for t in cluster.gpu_types if t not in SIA_MACHINE_SUFFIXES]
        if unknown:
            raise ValidationError(f"`--cluster` names GPU types {unknown} that Sia's profiles have no machine for; "
                                  f"known: {sorted(SIA_MACHINE_SUFFIXES)}.")
        return read_adaptive_workload(args.trace, profiles=args.profiles,
                                      machines={t: SIA_MACHINE_SUFFIXES[t] for t in cluster.gpu_types})
    if args.trace is not None:
        table = None if args.throughputs is None else _table(args)
        trace = load_trace(args.trace, args.trace_format, throughputs=table, task_path=args.task_path,
                           seed=args.seed, cluster=cluster, on_bad_rows="skip" if args.skip_bad_rows else "raise")
        rep = trace.meta.get("load_report") or {}
        bad = {**rep.get("dropped", {}), **rep.get("malformed", {})}
        filtered = rep.get("filtered", {})
        if bad or filtered:  # rows the trace holds that were not kept: say so (details in meta["load_report"])
            print(f"note: {args.trace}: {rep.get('rows')} rows, {rep.get('kept')} kept"
                  + (f"; skipped (--skip-bad-rows): {bad}" if bad else "")
                  + (f"; filtered: {filtered}" if filtered else ""), file=sys.stderr)
        return trace
    check_int(args.jobs, "--jobs", low=0)
    cat = _catalogue(args, cluster.gpu_types, pairs=pairs)
    probs = {1: 1.0} if args.single_gpu else (0.70, 0.10, 0.15, 0.05)
    trace = generate_workload(args.jobs, rate_per_hour=args.rate, seed=args.seed, catalogue=cat,
                              scale_factor_probs=probs, long_job_prob=args.long_job_prob, cluster=cluster,
                              n_entities=n_entities)
    for note in trace.meta.get("notes", []):  # e.g. gangs capped at what a small cluster can run
        print(f"note: {note}", file=sys.stderr)
    return trace


def _sim_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    realloc: Any = args.reallocate
    if realloc != "on_change":
        try:
            realloc = float(realloc)
        except ValueError:
            raise ValidationError(f"`--reallocate` must be 'on_change' or seconds; got {args.reallocate!r}.") from None
    return {
        "round_seconds": args.round_seconds,
        "mechanism": args.mechanism,
        "placement": args.placement,
        "reallocate": realloc,
        "window": None if args.window is None else (args.window[0], args.window[1]),
        "window_unit": args.window_unit,
        "max_time": args.max_time,
        "wall_time_limit": args.wall_time_limit,
        "solver": args.solver,
        "rule": args.rule,
        "restart_seconds": args.restart_seconds,
        **({} if getattr(args, "preset", None) is None else {"preset": args.preset}),
    }


def _h(value: Any) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value / 3600:.3f}"


def _num(value: Any, fmt: str = ".3f") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return format(value, fmt)


def _print_summary(res, out: TextIO) -> None:
    s = res.summary
    rows = []
    for label, key in _SUMMARY_ROWS:
        if label.startswith("jobs"):
            val = f"{s['n_measured']} / {s['n_completed']}"
        elif label.startswith("rounds"):
            val = f"{s['n_rounds']} / {s['n_solves']}"
        elif label.startswith("wall"):
            val = f"{s['wall_s']:.2f} ({s['policy_s']:.2f}/{s['mechanism_s']:.2f}/{s['placement_s']:.2f})"
        elif label.endswith("(h)"):
            val = _h(s.get(key))
        else:
            val = _num(s.get(key))
        rows.append((label, val))
    width = max(len(r[0]) for r in rows)
    print(f"policy {res.config['policy']} on {res.config['cluster']} — {s['status']}", file=out)
    for label, val in rows:
        print(f"  {label:<{width}}  {val}", file=out)


# ----------------------------------------------------------------------------- commands
def _demo_schedulers() -> dict[str, Any]:
    """Schedulers the demo runs beside the registered policies: name -> f(catalogue)."""

    def packed(cat: Any) -> Any:
        if cat.pairs is None:
            raise ValidationError("the throughput table has no pair throughputs (space sharing)")
        return MaxMinFairness(packing="workload")

    def sensitive(cat: Any) -> Any:
        if cat.unconsolidated is None:
            raise ValidationError("the throughput table has no unconsolidated throughputs")
        return FinishTimeFairness(placement_sensitivity="workload")

    return {"tiresias": lambda cat: Tiresias(thresholds=(3600.0, 36000.0), promote_knob=8.0),
            "muri": lambda cat: make_scheduler("muri"),
            "gandiva": lambda cat: make_scheduler("gandiva"),
            "synergy": lambda cat: make_scheduler("synergy"),
            "antman": lambda cat: make_scheduler("antman"),
            "themis": lambda cat: make_scheduler("themis"),
            "hived": lambda cat: make_scheduler("hived"),
            "hived_quota": lambda cat: make_scheduler("hived_quota"),
            "hived_policy": lambda cat: make_scheduler("hived_policy"),
            "max_min_fairness+packing": packed,
            "finish_time_fairness+placement": sensitive}


def _demo(args: argparse.Namespace, out: TextIO) -> int:


    check_int(args.jobs, "--jobs", low=1)
    check_int(args.gpus_per_type, "--gpus-per-type", low=1)
    extras = _demo_schedulers()
    known = list_policies() + list(extras)
    if args.policies is None:
        names = known
    else:
        names = [p.strip() for p in args.policies.split(",") if p.strip()]
        unknown = [p for p in names if p not in known]
        if unknown or not names:
            raise ValidationError(f"`--policies` must name registered policies {known}; unknown: {unknown or names}.")
    gpu_spec = _parse_gpu_types(args.gpu_types)
    if args.throughputs is not None:
        catalogue = _table(args)
        if gpu_spec is not None:
            catalogue = catalogue.subset(list(gpu_spec))
        source = f"Gavel-format table {args.throughputs}"
    else:
        catalogue = generate_catalogue(gpu_types=gpu_spec or ("v100", "p100", "k80"), seed=args.seed, pairs=True)
        source = "generated catalogue"
    # Short jobs only (32 min to 17 h) so that the demo drains in seconds; four entities for
    # hierarchical fairness.
    trace = generate_workload(args.jobs, rate_per_hour=args.arrival_rate, seed=args.seed, catalogue=catalogue,
                              long_job_prob=0.0, n_entities=4)
    counts = {t: args.gpus_per_type for t in catalogue.gpu_types}
    prices = {t: DEMO_PRICES[t] for t in catalogue.gpu_types if t in DEMO_PRICES}
    cluster = Cluster(counts, prices=prices or None)
    print(
        f"demo: simulated {trace.n_jobs} jobs (seed {args.seed}, Poisson {args.arrival_rate:g}/h, short jobs) from "
        f"{source} ({len(catalogue.job_type_names)} job types x scale factors "
        f"{list(catalogue.available_scale_factors)}); cluster {cluster.as_dict()}; rounds of {args.round_seconds:g} s",
        file=out,
    )
    header = (f"{'policy':<32} {'avg JCT h':>9} {'p99 JCT h':>9} {'makespan h':>10} {'worst FTF':>9} "
              f"{'util':>6} {'preempt':>7} {'solves':>6} {'wall s':>7}")
    print(header, file=out)
    print("-" * len(header), file=out)
    notes: list[str] = []
    failed = 0
    for name in names:
        try:
            sched = extras[name](catalogue) if name in extras else name
            opts = SimOptions(round_seconds=args.round_seconds, solver=args.solver, solve_time_limit=args.time_limit,
                              record_runs=False)
            res = simulate(sched, trace, cluster, options=opts)
        except HetschedError as exc:
            if isinstance(exc, ValidationError):
                notes.append(f"note: skipped {name!r}: {exc}")
                continue
            failed += 1
            print(f"{name:<32} {'error':>9}  {type(exc).__name__}", file=out)
            notes.append(f"error: {name!r} failed: {exc}")
            continue
        s = res.summary
        if s["failed_solves"]:
            notes.append(f"note: {name!r}: {s['failed_solves']} solve(s) did not succeed; the previous allocation was kept")
        print(
            f"{name:<32} {_h(s['avg_jct_s']):>9} {_h(s['p99_jct_s']):>9} {_h(s['makespan_s']):>10} "
            f"{_num(s['worst_ftf']):>9} {_num(s['utilization']):>6} {s['preemptions']:>7} {s['n_solves']:>6} "
            f"{s['wall_s']:>7.2f}",
            file=out,
        )
    modelled = [n for n in ("synergy", "antman") if n in names]
    if modelled:   # their rows are not like for like with the others'
        verb = "models" if len(modelled) == 1 else "model"
        notes.insert(0, f"note: {' and '.join(modelled)} {verb} what the other rows ignore (host CPUs and memory per GPU "
                        "with seeded per-job sensitivities; GPU memory and opportunistic jobs): compare them with "
                        "their own baselines (docs/synergy.md, docs/antman.md), not row for row")
    failed += _demo_adaptive(args, out, notes)
    for line in notes:
        print(line, file=out)
    return 1 if failed else 0


def _demo_adaptive(args: argparse.Namespace, out: TextIO, notes: list[str]) -> int:
    """The demo's adaptive part: built-in synthetic profiles (illustrative, not measured;
    ``hetsched.inputs.adaptive_synthetic``) under Sia, Pollux, Optimus and Gavel with Sia's
    TunedJobs; returns the number of schedulers that failed."""
    from .inputs.adaptive_synthetic import synthetic_adaptive_workload
    from .schedulers.names import make_scheduler

    w = synthetic_adaptive_workload(min(args.jobs, 24), seed=args.seed)
    cluster = Cluster.from_servers({"t4": 8, "rtx": 8, "a100": 8}, gpus_per_server={"t4": 4, "rtx": 8, "a100": 8})
    print(f"\nadaptive jobs: {w.n_jobs} jobs of built-in synthetic profiles (illustrative, not measured; seed "
          f"{args.seed}) on {cluster.as_dict()}; the scheduler picks GPUs and batch size (docs/adaptive.md)", file=out)
    header = f"{'scheduler':<32} {'avg JCT h':>9} {'p99 JCT h':>9} {'makespan h':>10} {'restarts':>8} {'wall s':>7}"
    print(header, file=out)
    print("-" * len(header), file=out)
    failed = 0
    for name, seconds in (("sia_adaptive", 60.0), ("pollux", 60.0), ("optimus", 60.0), ("max_sum_throughput", 360.0)):
        try:
            sched = name if name == "max_sum_throughput" else make_scheduler(name)
            res = simulate(sched, w, cluster, options=SimOptions(round_seconds=seconds, record_runs=False))
        except HetschedError as exc:
            failed += 1
            print(f"{name:<32} {'error':>9}  {type(exc).__name__}", file=out)
            notes.append(f"error: adaptive {name!r} failed: {exc}")
            continue
        s = res.summary
        label = "gavel_tunedjobs" if name == "max_sum_throughput" else name
        print(f"{label:<32} {_h(s['avg_jct_s']):>9} {_h(s['p99_jct_s']):>9} {_h(s['makespan_s']):>10} "
              f"{int(res.jobs['restarts'].sum()):>8} {s['wall_s']:>7.2f}", file=out)
    return failed


def _solve(args: argparse.Namespace, out: TextIO) -> int:

    _check_out(args.out, "file")
    cluster = _parse_cluster(args.cluster, args.gpus_per_server)
    trace = _workload(args, cluster)
    pol = _make_policy(args.policy, args.param, schedulers=False)
    jobs = trace.jobs.with_columns(cluster.gpu_types)
    res = solve(pol, jobs, cluster, solver=args.solver, time_limit=args.time_limit)
    # solvers stop within a tolerance: entries the certificate accepts as 0 (or 1) are shown and written as such
    tol = res.certificate.tol if res.certificate is not None else DEFAULT_TOL
    frame = res.to_frame(snap=tol)
    X = frame[list(res.gpu_types)].to_numpy(dtype=float)
    used = (jobs.scale_factors[:, None] * X).sum(axis=0) if res.has_solution and X.size else np.zeros(jobs.n_types)
    print(f"{pol.name}: {res.status} objective={res.objective:.6g} ({jobs.n_jobs} jobs, {res.sizes.get('n_classes')} classes, "
          f"{res.timings.get('total_s', math.nan):.3f} s, solver {res.solver})", file=out)
    print("GPUs used: " + ", ".join(f"{t} {u:.2f}/{c}" for t, u, c in zip(jobs.gpu_types, used, cluster.capacities(jobs.gpu_types).astype(int))), file=out)
    if res.has_solution:
        print(f"allocation (fraction of time per GPU type; within {tol:g} of 0 or 1 shown as 0 or 1):", file=out)
        print(frame.to_string(float_format="{:.6g}".format), file=out)
    else:
        print(f"no allocation: {res.message}", file=out)
    if args.out is not None:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(args.out)
        print(f"wrote {args.out}", file=out)
    return 0 if res.success else 1


def _config_file(args: argparse.Namespace) -> dict[str, Any]:
    """The TOML experiment of ``--config`` (path and text) for the provenance record."""
    if getattr(args, "config", None) is None:
        return {}
    p = Path(args.config)
    text = p.read_text(encoding="utf-8") if p.is_file() else None
    return {"config_file": str(p.resolve()), "config_toml": text}


def _experiment(args: argparse.Namespace) -> Any:
    """The ``--config`` experiment to run: its path, or with ``--skip-bad-rows`` / ``--missing``
    the loaded experiment whose trace is read with ``on_bad_rows="skip"`` / whose throughput
    table is read with ``missing``."""
    if not args.skip_bad_rows and args.missing is None:
        return args.config
    cfg = load_config(args.config)
    if args.skip_bad_rows:
        if cfg.workload.get("kind", "generated") == "generated":
            raise ValidationError(f"`--skip-bad-rows` applies to the rows of a trace; the [workload] of `--config` "
                                  f"{args.config!r} is generated.")
        cfg.workload["on_bad_rows"] = "skip"
    if args.missing is not None:
        if "throughputs" not in cfg.workload:
            raise ValidationError(f"`--missing {args.missing}` applies to a throughput table; the [workload] of "
                                  f"`--config` {args.config!r} names none (`throughputs`).")
        cfg.workload["missing"] = args.missing
    return cfg


def _topology(args: argparse.Namespace) -> Cluster:
    """``--topology JSON``: the cluster as servers and levels."""
    from .inputs.topology import read_topology

    if args.gpus_per_server is not None:
        raise ValidationError("`--gpus-per-server` cuts --cluster counts into servers; with --topology the file "
                              "gives the servers: drop one of them.")
    return Cluster.from_servers(read_topology(args.topology))


def _hived_options(pol: Any, tenants: str | None, cluster: Cluster) -> Any:
    """``--tenants JSON`` given to a HiveD scheduler, whose setup (the safety check) runs now,
    before the simulation starts."""
    import dataclasses

    from .hived import HiveD, QuotaScheduler, TenantPolicy, read_tenants

    kinds = (HiveD, QuotaScheduler, TenantPolicy)
    if tenants is not None:
        if not isinstance(pol, kinds):
            raise ValidationError(f"`--tenants` applies to --policy hived, hived_quota or hived_policy; got --policy "
                                  f"{getattr(pol, 'name', pol)!r}.")
        pol = dataclasses.replace(pol, tenants=read_tenants(tenants))
    if isinstance(pol, kinds):
        pol.setup(cluster)
    return pol


def _simulate(args: argparse.Namespace, out: TextIO) -> int:

    _check_out(args.out, "dir")
    progress = progress_wanted(args.progress)
    if args.config is not None:
        res = run_config(_experiment(args), progress=progress)
        if not isinstance(res, SimulationResult):
            raise ValidationError(f"`--config` {args.config!r} describes {len(res)} runs; use `sweep --config` for it.")
    else:
        cluster = _parse_cluster(args.cluster, args.gpus_per_server) if args.topology is None else _topology(args)
        pol = _make_policy(args.policy, args.param)
        pol = _hived_options(pol, args.tenants, cluster)
        # generated jobs belong to tenants e0, e1, ... (docs/hived.md)
        tenants = len(pol.tenants) if args.tenants is not None and args.trace is None else None
        trace = _workload(args, cluster, pairs=_needs_pairs(pol), n_entities=tenants)
        opts = make_options(seed=args.seed, progress=progress, record_runs=args.runs, **_sim_kwargs(args))
        if args.placement is None and getattr(pol, "name", None) in ("hived", "hived_quota"):
            opts = opts.replace(placement=False)     # HiveD places gangs in its cells itself
        if args.interconnect is not None:
            from .placement import NetworkAware, load_interconnect

            cost = {} if args.network_cost is None else {"network_cost": args.network_cost}
            if args.interconnect == "topology":   # the bandwidths of the --topology file's levels
                if args.topology is None:
                    raise ValidationError("`--interconnect topology` takes the graphs from the levels of --topology "
                                          "JSON, and no --topology is given: add it, or give an interconnect file.")
                from .placement import Interconnect

                ic = Interconnect.from_topology(cluster.topology)
            else:
                ic = load_interconnect(args.interconnect)
            opts = opts.replace(network=NetworkAware(ic, **cost))
        elif args.network_cost is not None:
            raise ValidationError(f"`--network-cost` weighs communication in placement, which needs --interconnect; "
                                  f"got --network-cost {args.network_cost:g}: add --interconnect JSON or drop it.")
        res = simulate(pol, trace, cluster, options=opts)
    _print_summary(res, out)
    if args.out is not None:
        record = provenance(argv=args.command_line, config=res.config, seed=res.config.get("seed"),
                            extra=_config_file(args))
        res.to_dir(args.out, runs=args.runs, provenance=record)
        print(f"wrote {Path(args.out) / 'jobs.csv'}, rounds.csv, summary.json, provenance.json", file=out)
    return 0 if res.summary["failed_solves"] == 0 else 1


def _sweep(args: argparse.Namespace, out: TextIO) -> int:

    _check_out(args.out, "dir")
    progress = True if progress_wanted(args.progress) else None
    grid: dict[str, Any] = {}
    if args.config is not None:
        df = run_config(_experiment(args), max_workers=args.workers, progress=progress)
        if not hasattr(df, "columns"):
            raise ValidationError(f"`--config` {args.config!r} describes one run; use `simulate --config` for it.")
    else:
        if args.skip_bad_rows and args.trace is None:
            raise ValidationError("`--skip-bad-rows` applies to the rows of a trace (`--trace`, or a [workload] of a "
                                  "trace kind in `--config`); this sweep's workloads are generated.")
        cluster = _parse_cluster(args.cluster, args.gpus_per_server)
        policies: dict[str, Any] = {}
        for name in (p.strip() for p in args.policies.split(",") if p.strip()):
            pol = _make_policy(name, [])
            policies[name] = pol
        if args.agnostic:

            policies["max_min_fairness(heterogeneity_aware=False)"] = MaxMinFairness(heterogeneity_aware=False)
        seeds = _parse_list(args.seeds, int, "--seeds")
        if args.trace is not None:   # the policies on the one trace (one seed: _check_ignored)
            grid = {"policy": policies, "seed": seeds, "cluster": cluster,
                    "workload": _sweep_trace(args, cluster, seeds)}
        else:
            grid = {
                "policy": policies,
                "load": _parse_list(_LOADS if args.loads is None else args.loads, float, "--loads"),
                "seed": seeds,
                "n_jobs": args.jobs,
                "cluster": cluster,
                "long_job_prob": args.long_job_prob,
            }
            if args.single_gpu:
                grid["scale_factor_probs"] = {1: 1.0}
            if args.throughputs is not None:
                grid["catalogue"] = _catalogue(args, cluster.gpu_types)
        for k, v in _sim_kwargs(args).items():
            if v is not None:
                grid[k] = v
        if args.trace is None:
            # the generator caps gangs at what the cluster can run; say so once here (the runs only log it)
            probe = generate_workload(0, rate_per_hour=1.0, cluster=cluster, catalogue=grid.get("catalogue"),
                                      **({"scale_factor_probs": grid["scale_factor_probs"]} if args.single_gpu else {}))
            for note in probe.meta.get("notes", []):
                print(f"note: {note}", file=sys.stderr)
        df = sweep(grid, max_workers=args.workers, progress=progress)
        if args.trace is not None:
            df.insert(int(df.columns.get_loc("policy")) + 1, "trace", str(args.trace))
    cols = [c for c in ("policy", "load", "seed", "n_completed", "avg_jct_hours", "worst_ftf", "utilization",
                        "status", "error") if c in df]
    with_pd_opts(lambda: print(df[cols].to_string(index=False), file=out))
    failed = int((df["error"].notna() & (df["error"].astype(str) != "")).sum()) if "error" in df else 0
    if args.out is not None:
        d = Path(args.out)
        _write_sweep(df, d, args, grid)
        print(f"wrote {d / 'sweep.csv'}, provenance.json", file=out)
        if args.plot and failed == len(df):
            print(f"error: no figure written: every run of the sweep failed ({failed}); see the error column "
                  f"of {d / 'sweep.csv'}", file=sys.stderr)
        elif args.plot:
            from .sim import plots

            ax = plots.jct_vs_load(df)
            ax.figure.savefig(d / "jct_vs_load.png", dpi=120)
            print(f"wrote {d / 'jct_vs_load.png'}", file=out)
    return 1 if failed else 0


def _sweep_trace(args: argparse.Namespace, cluster: Cluster, seeds: list[int]) -> Any:
    """The workload of ``sweep --trace``: the trace, read once (a cluster log's job types drawn
    with ``seeds``' one seed, as a ``--config`` trace is); every run replays it.

    Raises
    ------
    ValidationError
        ``--loads`` (arrival rates of generated workloads) or ``--plot`` (average JCT against
        load) with ``--trace``: a sweep over one trace has no load axis.
    """
    if args.loads is not None:
        raise ValidationError(f"`--loads` sets the arrival rates of generated workloads; a sweep over `--trace` "
                              f"{args.trace!r} replays the trace's own arrivals, so it cannot vary them; got "
                              f"--loads {args.loads!r}. Drop --loads (the sweep runs --policies on the "
                              "trace), or sweep generated workloads without --trace.")
    if args.plot:
        raise ValidationError(f"`--plot` draws average JCT against load; a sweep over `--trace` {args.trace!r} has "
                              "no load axis (the runs are in sweep.csv, one per policy).")
    return _workload(argparse.Namespace(**{**vars(args), "seed": seeds[0]}), cluster)


def _write_sweep(df: Any, d: Path, args: argparse.Namespace, grid: dict[str, Any]) -> None:
    """``d/sweep.csv`` (with ``git_commit`` and ``hetsched_version`` columns) and
    ``d/provenance.json`` (command line, grid settings, seeds, package versions)."""

    settings = {k: ({str(label): repr(pol) for label, pol in v.items()} if k == "policy"
                    else v.as_dict() if isinstance(v, Cluster)
                    else {"source": v.source, "n_jobs": v.n_jobs, "meta": v.meta} if k == "workload"
                    else v) for k, v in grid.items()}
    record = provenance(argv=args.command_line, config=settings or None,
                        seed=grid.get("seed", sorted({int(x) for x in df["seed"]}) if "seed" in df else None),
                        extra=_config_file(args))
    d.mkdir(parents=True, exist_ok=True)
    stamped = df.assign(git_commit=record["git_commit"] or "", hetsched_version=record["versions"]["hetsched"])
    stamped.to_csv(d / "sweep.csv", index=False)
    write_provenance(d, record)


def with_pd_opts(fn) -> None:
    import pandas as pd

    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.float_format", "{:.3f}".format):
        fn()


def _bench(args: argparse.Namespace, out: TextIO) -> int:
    import pandas as pd

    from .sim.bench import gavel_catalogue, speed_run

    _check_out(args.out, "file")
    if args.throughputs is not None and not Path(args.throughputs).is_file():
        raise ValidationError(f"`--throughputs` must be an existing Gavel-format throughput JSON file; got "
                              f"{args.throughputs!r}, which does not exist or is not a file.")
    cat, name = gavel_catalogue(args.throughputs, seed=args.seed, missing=args.missing or "raise")
    rows = []
    for load in _parse_list(args.loads, float, "--loads"):
        rows.append(speed_run(load=load, window=tuple(args.window), seed=args.seed, mix=args.mix,
                              placement=args.placement, catalogue=cat))
    df = pd.DataFrame(rows)
    print(f"bench: Gavel setup 36 V100 + 36 P100 + 36 K80, {name} throughputs, mix {args.mix}", file=out)
    cols = ["load", "jobs_started", "rounds", "solves", "sim_hours", "wall_s", "sim_h_per_wall_s", "rounds_per_s",
            "policy_s", "mechanism_s", "placement_s", "other_s", "avg_jct_hours"]
    with_pd_opts(lambda: print(df[cols].to_string(index=False), file=out))
    if args.out is not None:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(args.out, index=False)
        print(f"wrote {args.out}", file=out)
    return 0


_RUN_KINDS = ("jct_cdf", "ftf_cdf", "utilization", "solver_time")
_PLOT_KINDS = (*_RUN_KINDS, "jct_vs_load")


def _plot_inputs(paths: Sequence[str]) -> tuple[str, list[Path]]:
    """("runs", run directories) or ("sweeps", sweep CSVs); bad or mixed inputs raise."""
    kinds: list[str] = []
    files: list[Path] = []
    for text in paths:
        p = Path(text)
        if p.is_dir() and (p / "summary.json").is_file():
            kinds.append("runs")
            files.append(p)
        elif p.is_dir() and (p / "sweep.csv").is_file():
            kinds.append("sweeps")
            files.append(p / "sweep.csv")
        elif p.is_file() and p.suffix.lower() == ".csv":
            kinds.append("sweeps")
            files.append(p)
        else:
            why = "which does not exist" if not p.exists() else (
                "a directory without summary.json or sweep.csv" if p.is_dir() else "not a .csv file")
            raise ValidationError(f"`input` must be a simulate --out directory, a sweep CSV or a directory holding "
                                  f"sweep.csv; got {text!r}, {why}.")
    if len(set(kinds)) > 1:
        raise ValidationError(f"`input` must be all simulate --out directories or all sweeps, not both; got {list(paths)}.")
    return kinds[0], files


def _plot(args: argparse.Namespace, out: TextIO) -> int:
    import pandas as pd

    from .sim import plots

    what, files = _plot_inputs(args.input)
    default = "jct_cdf" if what == "runs" else "jct_vs_load"
    single = args.kind is not None or Path(args.out).suffix.lower() in (".png", ".pdf", ".svg", ".jpg")
    kinds = [args.kind or default] if single else (list(_RUN_KINDS) if what == "runs" else ["jct_vs_load"])
    if args.window_hours is not None and "utilization" not in kinds:   # issue 30: never ignored silently
        raise ValidationError(f"`--window-hours` smooths the utilization figure, and this plot draws none (it draws "
                              f"{', '.join(kinds)}); got --window-hours {args.window_hours:g}: drop --window-hours, "
                              "or draw utilization (--kind utilization, or a directory --out for every figure of "
                              "simulate --out runs).")
    bad = [k for k in kinds if (k == "jct_vs_load") != (what == "sweeps")]
    if bad:
        need = "a sweep (sweep.csv)" if bad[0] == "jct_vs_load" else "simulate --out directories"
        raise ValidationError(f"`--kind` {bad[0]!r} needs {need}; got {what.rstrip('s')} input(s) {list(args.input)}.")
    _check_out(args.out, "file" if single else "dir")
    if what == "runs":
        results = [SimulationResult.from_dir(f) for f in files]
        runs = dict(zip(plots.run_labels(results, [f.name for f in files]), results))
    else:
        frames = [pd.read_csv(f, keep_default_na=False, na_values=["", "nan", "NaN"]) for f in files]
        table = pd.concat(frames, ignore_index=True)
    written = []
    for kind in kinds:
        if kind == "jct_vs_load":
            try:
                fig = plots.jct_vs_load(table).figure
            except ValidationError as exc:
                raise ValidationError(f"{', '.join(map(str, files))}: {exc}") from None
        elif kind == "utilization":
            fig = (plots.utilization_over_time(results[0], window_hours=args.window_hours).figure if len(runs) == 1
                   else plots.utilization_by_type(runs, window_hours=args.window_hours))
        else:
            fig = {"jct_cdf": plots.jct_cdf, "ftf_cdf": plots.ftf_cdf, "solver_time": plots.solver_time_vs_size}[kind](runs).figure
        target = Path(args.out) if single else Path(args.out) / f"{kind}.png"
        target.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(target, dpi=150)
        plots._plt().close(fig)
        written.append(str(target))
    print("wrote " + ", ".join(written), file=out)
    return 0


def _reproduce(args: argparse.Namespace, out: TextIO) -> int:
    from .reproduce.command import run

    return run(args, out)


def _slurm(args: argparse.Namespace, out: TextIO) -> int:
    from .slurm.command import run

    return run(args, out)
