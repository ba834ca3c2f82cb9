"""``python -m hetsched slurm``: run the :class:`~hetsched.slurm.SlurmDriver` against Slurm."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from typing import Any, TextIO

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``slurm`` sub-command to an argparse sub-parsers object."""
    p = sub.add_parser("slurm", help="drive a Slurm partition: every round read it, plan, start and preempt jobs",
                       description="Drive a Slurm partition with an online scheduler (docs/slurm.md). Runs until "
                                   "SIGTERM/SIGINT, or for --rounds rounds.")
    p.add_argument("--store", required=True, metavar="PATH", help="the online store (SQLite; reopened to continue)")
    p.add_argument("--spool", required=True, metavar="DIR",
                   help="spool directory the jobs report progress to (their $HETSCHED_SPOOL)")
    p.add_argument("--partition", default="hetsched", help="the partition hetsched schedules (default hetsched)")
    p.add_argument("--scheduler", default="max_min_fairness",
                   help="a policy or round scheduler name (python -m hetsched policies; default max_min_fairness)")
    p.add_argument("--throughputs", metavar="PATH", default=None,
                   help="Gavel-format throughput JSON: its GPU types and the jobs' job_type priors")
    p.add_argument("--gpu-types", default=None, help="comma-separated GPU types, without --throughputs")
    p.add_argument("--profiles", metavar="DIR", default=None,
                   help="Sia/Pollux artifact folder with profiles/: the models of an adaptive scheduler (pollux, "
                        "sia_adaptive, optimus); jobs name theirs with --comment=hetsched:model=NAME")
    p.add_argument("--round-seconds", type=float, default=360.0, help="round length (default 360 s)")
    p.add_argument("--grace-seconds", type=float, default=0.0,
                   help="seconds between USR1 and the requeue of a preempted job (default 0: no USR1)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds a Slurm command may take (default 30)")
    p.add_argument("--rounds", type=int, default=None, help="stop after this many rounds (default: run on)")
    p.add_argument("--shadow", action="store_true", help="read and plan, never act: log what it would do")
    return p


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run the driver as ``args`` say; returns the exit code (0 when it stopped as asked, 1 when
    Slurm cannot be read at start).

    Bad arguments raise ``ValidationError`` (exit 2 from the command line)."""
    from ..errors import ValidationError
    from ..inputs.throughputs import load_gavel_throughputs
    from .commands import SlurmCommandError, SlurmCommands
    from .driver import SlurmDriver

    if args.throughputs is None and args.gpu_types is None:
        raise ValidationError("`--throughputs` or `--gpu-types` is required: the GPU types Slurm's GRES types are "
                              "checked against; got neither.")
    if args.rounds is not None and args.rounds < 1:
        raise ValidationError(f"`--rounds` must be an integer >= 1; got {args.rounds}.")
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                            stream=sys.stderr)
    reference = load_gavel_throughputs(args.throughputs) if args.throughputs else None
    types = None if args.gpu_types is None else [t.strip() for t in args.gpu_types.split(",") if t.strip()]
    extra = {}
    if args.profiles is not None:
        from ..inputs.profiles import load_sia_profiles

        extra["profiles"] = load_sia_profiles(args.profiles)
    commands = SlurmCommands(partition=args.partition, timeout_s=args.timeout)
    try:
        driver = SlurmDriver(args.scheduler, commands=commands, spool=args.spool, reference=reference,
                             gpu_types=types, store=args.store, round_seconds=args.round_seconds,
                             grace_s=args.grace_seconds, shadow=args.shadow, **extra)
    except SlurmCommandError as exc:   # it needs Slurm's nodes once to start
        print(f"error: cannot read Slurm at start: {exc}", file=sys.stderr)
        return 1
    stopping: list[bool] = []
    old = {sig: signal.signal(sig, lambda *_: stopping.append(True)) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        with driver:
            driver.run(args.rounds, stop=lambda: bool(stopping))
            stats = dict(driver.stats) | {f"slurm_{k}": v for k, v in commands.stats.items() if "." not in k}
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    print(" ".join(f"{k}={v}" for k, v in sorted(stats.items())), file=out)
    return 0
