"""Themis-style finish-time fairness: worst rho and the rho CDF, FTF vs max-min fairness vs FIFO.

Usage: ``python benchmarks/reproduce/themis_ftf.py [--quick] [--workers N] [--throughputs PATH]``
(definition: ``hetsched.reproduce``; results: docs/reproduce.md).
"""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("themis_ftf"))
