"""Gavel (OSDI'20) Figure 8: average JCT vs input job rate, LAS aware vs agnostic, single-GPU jobs.

Usage: ``python benchmarks/reproduce/gavel_fig8.py [--quick] [--workers N] [--throughputs PATH]``
(definition: ``hetsched.reproduce``; results: docs/reproduce.md).
"""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("gavel_fig8"))
