"""Shared by the scripts of this folder: run one experiment of ``hetsched.reproduce`` through
``python -m hetsched reproduce``, writing CSV files to ``benchmarks/results/reproduce/`` and
the figure to ``docs/img/reproduce_<name>.png``. Extra arguments (``--quick``,
``--workers N``, ``--throughputs PATH``) are passed on."""

from __future__ import annotations

import sys
from pathlib import Path

from hetsched.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "reproduce"
FIGURES = ROOT / "docs" / "img"


def main(*names: str) -> int:
    """Run the named experiments (all when none) with this script's arguments."""
    return cli_main(["reproduce", *names, "--out", str(RESULTS), "--figures", str(FIGURES), *sys.argv[1:]])
