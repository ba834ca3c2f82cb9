"""Shared by the benchmark scripts of this folder: a fixed-width table on stdout and its CSV.

``columns`` is a sequence of ``(key, header, format)``; a NaN cell prints as ``-``.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path


def _width(fmt: str) -> str:
    return "".join(ch for ch in fmt if ch.isdigit() or ch == ".").split(".")[0]


def format_header(columns: Sequence[tuple[str, str, str]]) -> str:
    """The header line of the table."""
    return " ".join(format(h, f"{fmt[0]}{_width(fmt)}") for _, h, fmt in columns)


def format_line(row: dict, columns: Sequence[tuple[str, str, str]]) -> str:
    """One row of the table."""
    cells = []
    for key, _, fmt in columns:
        v = row[key]
        cells.append(format("-", f">{_width(fmt)}") if isinstance(v, float) and math.isnan(v) else format(v, fmt))
    return " ".join(cells)


def write_csv(rows: Sequence[dict], path: Path, *, digits: int = 6) -> None:
    """``rows`` as CSV (floats to ``digits`` significant digits), creating the folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (f"{v:.{digits}g}" if isinstance(v, float) else v) for k, v in row.items()})
