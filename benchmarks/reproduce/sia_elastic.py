"""Sia (SOSP'23) style: Sia vs Gavel vs Gavel with space sharing on an elastic workload.

Usage: ``python benchmarks/reproduce/sia_elastic.py [--quick] [--workers N] [--throughputs PATH]``
(definition: ``hetsched.reproduce``; results: docs/reproduce.md).
"""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("sia_elastic"))
