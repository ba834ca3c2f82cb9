"""Every experiment of ``hetsched.reproduce`` (Gavel Fig. 8 and 9, Themis FTF, Sia).

Usage: ``python benchmarks/reproduce/all.py [--quick] [--workers N] [--throughputs PATH]``
(results: docs/reproduce.md).
"""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main())
