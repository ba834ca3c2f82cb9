"""Draw ``docs/img/reproduce_<name>.png`` again from the results in ``benchmarks/results/reproduce/``,
without running the experiments (after a change to the figures; minutes instead of hours).

Usage: ``python benchmarks/reproduce/replot.py [NAME...]`` (default: every experiment whose
results are there).
"""

from __future__ import annotations

import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from _common import FIGURES, RESULTS  # noqa: E402

from hetsched.reproduce import EXPERIMENTS  # noqa: E402
from hetsched.reproduce.base import read_result  # noqa: E402


def main(names: list[str]) -> int:
    """Draw the named experiments' figures (all with results when none)."""
    names = names or [n for n in EXPERIMENTS if (RESULTS / f"{n}_summary.csv").is_file()]
    for name in names:
        fig = EXPERIMENTS[name].plot(read_result(name, RESULTS))
        path = FIGURES / f"reproduce_{name}.png"
        fig.savefig(path, dpi=110)          # as hetsched.reproduce.write_result saves it
        plt.close(fig)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
