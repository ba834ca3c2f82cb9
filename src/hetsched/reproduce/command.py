"""``python -m hetsched reproduce [--quick] [NAME...]``: the command-line face of :mod:`hetsched.reproduce`."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

__all__ = ["add_parser", "run"]

#: Columns printed per experiment (all columns are in the CSV files).
_SHOW = ("policy", "mix", "load", "restart_seconds", "seeds", "drained", "avg_jct_hours", "std_jct_hours",
         "agnostic_over_aware", "worst_rho_mean", "worst_rho_max", "p99_rho", "share_rho_above_1_05",
         "p99_jct_hours", "makespan_hours", "utilization", "sia_reduction", "saturated")
#: The experiments that read Gavel's throughput table (``Settings.table``), so take ``--throughputs``;
#: Sia's Table 3 runs on Sia's own profiles.
_READ_TABLE = ("gavel_fig8", "gavel_fig9", "themis_ftf", "sia_elastic")


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``reproduce`` sub-command to an argparse sub-parsers object."""
    p = sub.add_parser("reproduce", help="the papers' headline experiments (Gavel Fig. 8/9, Themis FTF, Sia)",
                       description="Run the papers' headline experiments and write CSV files and figures. "
                                   "NAME: gavel_fig8, gavel_fig9, themis_ftf, sia_elastic (default: all).")
    p.add_argument("names", nargs="*", metavar="NAME", help="experiments to run (default: all)")
    p.add_argument("--quick", action="store_true", help="CI size: seconds to a minute each")
    p.add_argument("--out", "-o", metavar="DIR", default="reproduce_results",
                   help="directory for the CSV files (and figures) (default reproduce_results)")
    p.add_argument("--figures", metavar="DIR", default=None, help="directory for the PNG figures (default: --out)")
    p.add_argument("--workers", type=int, default=None, help="processes (default: CPU count; 1: in process)")
    p.add_argument("--throughputs", metavar="PATH", default=None,
                   help="Gavel's simulation_throughputs.json (default: ../shared/data/gavel/, else the generated "
                        f"table); read by {', '.join(_READ_TABLE)} only")
    return p


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run the experiments named in ``args``; print their tables; return the exit code
    (0; 1 when a simulation failed). Bad arguments raise ``ValidationError`` (exit 2)."""
    import pandas as pd

    from ..errors import ValidationError
    from ..validation import check_output_path as _check_out
    from . import EXPERIMENTS, Settings, check_names, run_experiments

    names = check_names(args.names)
    if args.throughputs is not None and not set(names) & set(_READ_TABLE):   # issue 30: never ignored silently
        raise ValidationError(f"`--throughputs` is Gavel's throughput table, which only the experiments "
                              f"{list(_READ_TABLE)} read; {', '.join(names)} read none (Sia's own profiles); got "
                              f"--throughputs {args.throughputs!r}: drop --throughputs, or name an experiment that "
                              "reads it.")
    _check_out(args.out, "dir")
    _check_out(args.figures, "dir", "--figures")
    settings = Settings(quick=args.quick, workers=args.workers, throughputs=args.throughputs)
    failed = 0
    for name in names:
        print(f"== {name}: {EXPERIMENTS[name].title} ({'quick' if args.quick else 'full'})", file=out, flush=True)
        (res,) = run_experiments([name], settings, out_dir=args.out, fig_dir=args.figures)
        cols = [c for c in _SHOW if c in res.summary]
        with pd.option_context("display.width", 220, "display.max_columns", 30, "display.float_format",
                               "{:.3f}".format):
            print(res.summary[cols].to_string(index=False), file=out)
            if len(res.published):
                print("published:", file=out)
                for r in res.published.itertuples():
                    ours = f"{r.ours:.3g}" if isinstance(r.ours, float) else r.ours
                    print(f"  paper {r.paper_value} vs ours {ours}: {r.claim} [{r.source}]", file=out)
        for note in res.notes:
            print(f"note: {note}", file=out)
        print(f"{name}: {len(res.runs)} simulations in {res.wall_s:.1f} s; wrote {args.out}/{name}*.csv", file=out,
              flush=True)
        if "error" in res.runs:
            failed += int(res.runs["error"].fillna("").astype(str).ne("").sum())
    return 1 if failed else 0
