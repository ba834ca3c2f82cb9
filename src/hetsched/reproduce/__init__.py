"""The papers' headline experiments, reproduced: ``python -m hetsched reproduce [--quick] [NAME...]``.

* ``gavel_fig8`` / ``gavel_fig9``: Gavel (OSDI'20) Figures 8 and 9, average JCT against input
  job rate for heterogeneity-aware vs agnostic LAS (:mod:`.gavel`);
* ``themis_ftf``: finish-time fairness, worst ρ and the ρ CDF for FTF vs max-min vs FIFO
  (:mod:`.themis`);
* ``sia_elastic``: Sia vs Gavel vs Gavel with space sharing on an elastic workload (:mod:`.sia`);
* ``sia_table3``: Sia (SOSP'23) Table 3, Sia vs Pollux vs Gavel+TunedJobs on Sia's Philly
  workloads with adaptive jobs (:mod:`.sia_table3`; needs Sia's artifact data);
* ``sia_table3_newtrace``: the same on Sia's newTrace workloads (Table 3's second half);
* ``hived_anomaly``: HiveD (OSDI'20) vs a quota-based scheduler on one multi-tenant trace: the
  sharing anomaly under quotas and none under cells (:mod:`.hived`).

Each has a quick mode (CI size) and a full mode. :func:`run_experiments` runs them and
writes ``<name>.csv`` (one row per simulation), ``<name>_summary.csv``,
``<name>_published.csv``, extra tables and ``reproduce_<name>.png``. Results are described in
``docs/reproduce.md``.

>>> sorted(EXPERIMENTS)
['gavel_fig8', 'gavel_fig9', 'hived_anomaly', 'sia_elastic', 'sia_table3', 'sia_table3_newtrace', 'themis_ftf']
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from ..errors import DataNotFoundError, ValidationError
from .base import Experiment, ExperimentResult, Settings, find_gavel_table
from .figures import las_figure, rho_figure, sia_figure, table3_figure
from .gavel import run_fig8, run_fig9
from .hived import hived_figure, run_hived_anomaly
from .sia import run_sia
from .sia_table3 import run_sia_table3, run_sia_table3_newtrace
from .themis import run_themis

__all__ = ["EXPERIMENTS", "Experiment", "ExperimentResult", "Settings", "check_names", "find_gavel_table",
           "run_experiments", "write_result"]

log = logging.getLogger(__name__)

EXPERIMENTS: dict[str, Experiment] = {e.name: e for e in (
    Experiment("gavel_fig8", "Gavel Fig. 8: avg JCT vs input job rate, LAS aware vs agnostic, single-GPU jobs",
               run_fig8, las_figure),
    Experiment("gavel_fig9", "Gavel Fig. 9: avg JCT vs input job rate, LAS aware vs agnostic, multi-GPU mix",
               run_fig9, las_figure),
    Experiment("themis_ftf", "Themis-style finish-time fairness: worst rho and rho CDF, FTF vs max-min vs FIFO",
               run_themis, rho_figure),
    Experiment("sia_elastic", "Sia vs Gavel vs Gavel with space sharing on an elastic workload",
               run_sia, sia_figure),
    Experiment("sia_table3", "Sia Table 3: Sia vs Pollux vs Gavel+TunedJobs on Sia's Philly workloads (adaptive jobs)",
               run_sia_table3, table3_figure),
    Experiment("sia_table3_newtrace", "Sia Table 3: the same comparison on Sia's newTrace workloads (adaptive jobs)",
               run_sia_table3_newtrace, table3_figure),
    Experiment("hived_anomaly", "HiveD: sharing anomaly under a quota scheduler vs none under HiveD's cells",
               run_hived_anomaly, hived_figure),
)}


def check_names(names: Sequence[str] | None) -> list[str]:
    """The experiment names to run (all when ``names`` is empty or None), in the order given.

    Raises
    ------
    ValidationError
        A name that is not an experiment; the message lists the valid names.
    """
    if not names:
        return list(EXPERIMENTS)
    unknown = [n for n in names if n not in EXPERIMENTS]
    if unknown:
        raise ValidationError(f"`NAME` must be one of {sorted(EXPERIMENTS)}; unknown: {unknown}.")
    return list(dict.fromkeys(names))


def write_result(result: ExperimentResult, out_dir: str | Path, fig_dir: str | Path | None = None) -> list[Path]:
    """Write a result's tables as CSV into ``out_dir`` and its figure as ``reproduce_<name>.png``
    into ``fig_dir`` (default ``out_dir``; no figure when matplotlib is missing, logged).

    Returns
    -------
    list of Path
        The files written.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    tables = {"": result.runs, "_summary": result.summary, "_published": result.published}
    tables.update({f"_{k}": v for k, v in result.extra.items()})
    for suffix, df in tables.items():
        path = out / f"{result.name}{suffix}.csv"
        df.to_csv(path, index=False)
        written.append(path)
    try:
        fig = EXPERIMENTS[result.name].plot(result)
    except ImportError as exc:
        log.warning("no figure for %s: %s", result.name, exc)
        return written
    fdir = Path(fig_dir) if fig_dir is not None else out
    fdir.mkdir(parents=True, exist_ok=True)
    path = fdir / f"reproduce_{result.name}.png"
    fig.savefig(path, dpi=110)
    import matplotlib.pyplot as plt

    plt.close(fig)
    written.append(path)
    return written


def run_experiments(names: Sequence[str] | None = None, settings: Settings | None = None, *,
                    out_dir: str | Path | None = None, fig_dir: str | Path | None = None) -> list[ExperimentResult]:
    """Run experiments by name (all by default) and, with ``out_dir``, write their files.

    Parameters
    ----------
    names : sequence of str, optional
        Experiment names (see :data:`EXPERIMENTS`).
    settings : Settings, optional
        Quick or full, workers, Gavel's table (default ``Settings()``: full).
    out_dir, fig_dir : path, optional
        Where CSV files (and figures, unless ``fig_dir``) are written; nothing is written
        without ``out_dir``.

    Returns
    -------
    list of ExperimentResult

    Raises
    ------
    ValidationError
        An unknown name, or bad settings.
    DataNotFoundError
        An experiment asked for by name needs data that is not on this machine (when all
        experiments run, such an experiment is skipped with a warning).
    """
    chosen = check_names(names)
    settings = settings if settings is not None else Settings()
    if not isinstance(settings, Settings):
        raise ValidationError(f"`settings` must be a hetsched.reproduce.Settings; got {type(settings).__name__}.")
    results = []
    for name in chosen:
        log.info("reproduce: running %s (%s)", name, "quick" if settings.quick else "full")
        try:
            res = EXPERIMENTS[name].run(settings)
        except DataNotFoundError as exc:
            if names:        # asked for by name: its data must be there
                raise
            log.warning("reproduce: skipping %s: %s", name, exc)   # all experiments: run those that can
            continue
        if out_dir is not None:
            write_result(res, out_dir, fig_dir)
        results.append(res)
    return results
