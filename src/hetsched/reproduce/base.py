"""The records every reproduced experiment shares: settings, results, where Gavel's table is.

An experiment is a function ``settings -> ExperimentResult``; its result holds one row per
simulation (``runs``), the aggregated table the docs quote (``summary``), optional extra
tables (for example per-job ρ), what the paper states beside it (``published``) and notes
in words (the throughput table used, runs that did not drain, ...).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import DataNotFoundError, ValidationError
from ..inputs.throughputs import (
    ThroughputCatalogue,
    gavel_throughputs_path,
    generate_catalogue,
)
from ..sim.bench import GAVEL_CLUSTER, gavel_catalogue
from ..validation import check_bool, check_int

__all__ = ["Experiment", "ExperimentResult", "Settings", "find_gavel_table", "read_result", "throughput_table"]

log = logging.getLogger(__name__)


def find_gavel_table(path: str | Path | None = None) -> Path | None:
    """Gavel's ``simulation_throughputs.json`` as :func:`hetsched.inputs.throughputs.gavel_throughputs_path`
    finds it (``path``, then ``$HETSCHED_GAVEL_THROUGHPUTS``, then ``../shared/data/gavel/``
    beside a source checkout), or None when it is nowhere.

    Raises
    ------
    ValidationError
        ``path`` is given but is not a file.
    """
    try:
        return gavel_throughputs_path(path)
    except DataNotFoundError:
        if path is not None:
            raise ValidationError(f"`throughputs` must be a Gavel-format throughput JSON file; got {str(path)!r}, "
                                  "which is not a file.") from None
        return None


def throughput_table(path: Path | None, *, pairs: bool = False) -> tuple[ThroughputCatalogue, str]:
    """The catalogue of Gavel's three GPU types and a sentence saying which table it is.

    Gavel's measured table when ``path`` is a file (it has pair throughputs); else the
    project's generated table (with a pair table when ``pairs``), and the note says so.
    """
    if path is not None:
        cat, _ = gavel_catalogue(path)
        return cat, f"throughputs: Gavel's measured table ({path})"
    if pairs:
        cat = generate_catalogue(gpu_types=tuple(GAVEL_CLUSTER), seed=0, pairs=True)
    else:
        cat, _ = gavel_catalogue(None)
    return cat, ("throughputs: the project's GENERATED table — Gavel's simulation_throughputs.json was not found "
                 "(pass --throughputs PATH or set $HETSCHED_GAVEL_THROUGHPUTS); numbers are not comparable with "
                 "the papers'")


@dataclass(frozen=True)
class Settings:
    """How to run an experiment.

    Parameters
    ----------
    quick : bool, default False
        CI size (seconds to a minute) instead of the full experiment.
    workers : int, optional
        Processes for the simulations (default: the CPU count; 1 runs in this process).
    throughputs : str or Path, optional
        Gavel's ``simulation_throughputs.json`` (default: found by :func:`find_gavel_table`;
        without it the project's generated table is used and the notes say so).
    """

    quick: bool = False
    workers: int | None = None
    throughputs: str | Path | None = None

    def __post_init__(self) -> None:
        check_bool(self.quick, "quick")
        check_int(self.workers, "workers", low=1, allow_none=True)

    def table(self, *, pairs: bool = False) -> tuple[ThroughputCatalogue, str]:
        """The throughput catalogue of these settings and its note (see :func:`throughput_table`)."""
        return throughput_table(find_gavel_table(self.throughputs), pairs=pairs)


@dataclass
class ExperimentResult:
    """What one experiment produced.

    Attributes
    ----------
    name : str
    runs : DataFrame
        One row per simulation (every summary metric of :func:`hetsched.sim.simulate`).
    summary : DataFrame
        The aggregated table (means over seeds, ratios between policies).
    published : DataFrame
        What the paper states, with its source; empty when nothing could be sourced.
    extra : dict of str -> DataFrame
        Further tables, written as ``<name>_<key>.csv``.
    notes : list of str
        Sentences for the reader (throughput table used, runs that did not drain, ...).
    wall_s : float
        Wall-clock seconds of the whole experiment.
    """

    name: str
    runs: pd.DataFrame
    summary: pd.DataFrame
    published: pd.DataFrame = field(default_factory=pd.DataFrame)
    extra: dict[str, pd.DataFrame] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    wall_s: float = float("nan")


@dataclass(frozen=True)
class Experiment:
    """A named experiment: what it reproduces, how to run it and how to draw it.

    Attributes
    ----------
    name : str
        The name on the command line.
    title : str
        One line: the paper, the figure, the comparison.
    run : callable
        ``run(settings) -> ExperimentResult``.
    plot : callable
        ``plot(result) -> matplotlib Figure``.
    """

    name: str
    title: str
    run: Callable[[Settings], ExperimentResult]
    plot: Callable[[ExperimentResult], Any]


def published_table(rows: list[Mapping[str, Any]]) -> pd.DataFrame:
    """The ``published`` table: one row per sourced statement (claim, value, source)."""
    return pd.DataFrame(list(rows), columns=["claim", "paper_value", "ours", "source"])


def read_result(name: str, directory: str | Path) -> ExperimentResult:
    """An experiment's result read back from the CSV files it wrote into ``directory``
    (``<name>.csv``, ``<name>_summary.csv``, ``<name>_published.csv`` and any other
    ``<name>_<key>.csv`` as ``extra[key]``, except the files of another experiment whose
    name starts with this one's): enough to draw its figure again without running it.
    Notes and wall time are not stored, so they are empty.

    Raises
    ------
    DataNotFoundError
        ``<name>.csv`` or ``<name>_summary.csv`` is not in ``directory``.
    """
    d = Path(directory)

    def read(path: Path) -> pd.DataFrame:
        return pd.read_csv(path, keep_default_na=False, na_values=["", "nan", "NaN"])

    for need in (d / f"{name}.csv", d / f"{name}_summary.csv"):
        if not need.is_file():
            raise DataNotFoundError(f"no {need.name} in {str(d)!r}: run `python -m hetsched reproduce {name} "
                                    f"--out {d}` first.")
    keys = [p.stem[len(name) + 1:] for p in sorted(d.glob(f"{name}_*.csv"))]
    others = [k for k in keys if (d / f"{name}_{k}_summary.csv").is_file()]
    tables = {k: read(d / f"{name}_{k}.csv") for k in keys
              if not any(k == o or k.startswith(f"{o}_") for o in others)}
    return ExperimentResult(name, read(d / f"{name}.csv"), tables.pop("summary"),
                            tables.pop("published", pd.DataFrame()), extra=tables)
