"""Sia (SOSP'23) Table 3, newTrace half: Sia vs Pollux vs Gavel+TunedJobs (and Optimus) on Sia's
newTrace workloads (10 x 960 jobs).

Usage: ``python benchmarks/reproduce/sia_table3_newtrace.py [--quick] [--workers N]`` (needs
Sia's artifact data; definition: ``hetsched.reproduce.sia_table3``; results: docs/adaptive.md).
"""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("sia_table3_newtrace"))
