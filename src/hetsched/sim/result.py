"""SimulationResult: what :func:`hetsched.sim.simulate` returns, its CSV/JSON round trip, and
:func:`assemble_result` (the result of a round-engine run: its ledger, clock and timings)."""

from __future__ import annotations

import logging
import math
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ..rounds.ledger import Ledger
from ..rounds.loop import RoundClock, RoundWorkload
from .metrics import (
    RENAMED_JOB_COLUMNS,
    RENAMED_RUN_COLUMNS,
    RENAMED_SUMMARY_KEYS,
    Summary,
    package_versions,
    renamed_round_columns,
    summarize,
)
from .provenance import json_clean as _json_clean

__all__ = ["SimulationResult", "assemble_result"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class SimulationResult:
    """What :func:`simulate` returns.

    Attributes
    ----------
    jobs : DataFrame
        One row per job (index: position in arrival order): ``job_id``, ``job_type``,
        ``scale_factor``, ``arrival_s``, ``start_s``, ``finish_s``, ``jct_s``,
        ``queueing_delay_s``, ``total_steps``, ``steps_done``, ``completed``, ``run_seconds``,
        ``isolated_time_s``, ``ftf``, ``preemptions``, ``migrations``, ``restarts``,
        ``restart_seconds``, ``gpu_seconds_<type>``, ``deadline_s``, ``slo_violated``,
        ``in_window``. Times are seconds, and every time column names its unit.
    rounds : DataFrame
        One row per round: ``round``, ``start_s`` (when it started), ``seconds`` (its
        length), ``n_active``, ``n_running``, ``arrived``, ``completed``, ``solved``,
        ``solve_ok``, ``solve_status``, ``solve_s``, ``solve_jobs``, ``solve_classes``,
        ``plan_s``, ``place_s``, ``preempted``, ``migrated``, ``restarts``,
        ``gpu_seconds_<type>`` (busy GPU-seconds of the round per type).
    runs : DataFrame or None
        The run log (``record_runs=True``): one row per job and round it ran — ``round``,
        ``job`` (position), ``gpu_type`` (column), ``gpus`` (GPUs the job's row holds while
        it runs), ``share`` (fraction of the round the row runs: 1, or X in the ideal
        mechanism), ``unit`` (row number within the round; the two members of a
        space-sharing pair have the same unit and hold the same GPUs), ``partner`` (the
        other member's position, -1), ``rate`` (steps/s while running), ``start_s``,
        ``end_s`` (when the entry ran), ``restart_s`` (seconds without progress at the
        start of the entry), ``steps``, ``spread`` (gang over several servers),
        ``batch_size`` (0: the job's own). Enough for an independent conservation check
        (``tests/sim_checker.py``).
    summary : Summary (a dict)
        Aggregates over the measured jobs (see :mod:`hetsched.sim.metrics`); time keys name
        their unit (``avg_jct_s``, ``p99_jct_s``, ``makespan_s``, ``avg_jct_hours``). The
        former names (``avg_jct``, ``makespan``, ...) still read, with a DeprecationWarning.
    config : dict
        Every option the simulation ran with (policy name and parameters, cluster, trace
        source, seed).
    versions : dict
        Python and package versions.
    gpu_types : tuple of str
        Cluster columns.
    capacities : ndarray
        GPUs per type.
    """

    jobs: pd.DataFrame
    rounds: pd.DataFrame
    runs: pd.DataFrame | None
    summary: dict[str, Any]
    config: dict[str, Any]
    versions: dict[str, str]
    gpu_types: tuple[str, ...]
    capacities: np.ndarray
    extra: dict[str, Any] = field(default_factory=dict)

    def utilization_over_time(self) -> pd.DataFrame:
        """Per round: ``start_s``, ``seconds`` (its length), busy fraction of each type and ``total``."""
        r = self.rounds
        out = pd.DataFrame({"start_s": r["start_s"], "seconds": r["seconds"]})
        busy = np.zeros(len(r))
        for k, t in enumerate(self.gpu_types):
            col = r[f"gpu_seconds_{t}"].to_numpy(dtype=float)
            busy += col
            cap = float(self.capacities[k])
            out[t] = col / (cap * r["seconds"].to_numpy(dtype=float)) if cap > 0 else np.nan
        out["total"] = busy / (float(np.sum(self.capacities)) * r["seconds"].to_numpy(dtype=float))
        return out

    def to_dir(self, path: str | Path, *, runs: bool = False, provenance: Mapping[str, Any] | None = None) -> Path:
        """Write ``jobs.csv``, ``rounds.csv``, ``summary.json`` (summary + config + versions)
        and ``provenance.json`` (command line, config, seed, versions, git commit).

        Parameters
        ----------
        path : str or Path
            Directory (created if missing).
        runs : bool, default False
            Also write ``runs.csv`` (the run log).
        provenance : Mapping, optional
            The record to write (the command line passes its own); default
            :func:`hetsched.sim.provenance.provenance` with ``sys.argv``, this result's
            config and seed.

        Returns
        -------
        Path
            The directory.
        """
        import json

        from .provenance import provenance as _provenance
        from .provenance import write_provenance

        out = Path(path)
        out.mkdir(parents=True, exist_ok=True)
        self.jobs.to_csv(out / "jobs.csv", index=False)
        self.rounds.to_csv(out / "rounds.csv", index=False)
        if runs and self.runs is not None:
            self.runs.to_csv(out / "runs.csv", index=False)
        doc = dict(_json_clean(self.summary))
        doc["config"] = _json_clean(self.config)
        doc["versions"] = dict(self.versions)
        (out / "summary.json").write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n")
        record = provenance if provenance is not None else _provenance(config=self.config, seed=self.config.get("seed"))
        write_provenance(out, record)
        return out

    @classmethod
    def from_dir(cls, path: str | Path) -> SimulationResult:
        """Read back a result written by :meth:`to_dir` (``runs`` when ``runs.csv`` exists;
        ``extra["provenance"]`` when ``provenance.json`` does).

        A directory written before time columns named their unit (``jct``, ``avg_jct``,
        ``makespan``, ... in ``jobs.csv`` and ``summary.json``; ``start``, ``busy_<type>``
        in ``rounds.csv``; ``t_start``, ``t_end``, ``restart`` in ``runs.csv``) is read with
        the current names and a DeprecationWarning.

        Raises
        ------
        ValidationError
            The directory lacks ``jobs.csv``, ``rounds.csv`` or ``summary.json``.
        """
        import json

        d = Path(path)
        missing = [f for f in ("jobs.csv", "rounds.csv", "summary.json") if not (d / f).is_file()]
        if missing:
            raise ValidationError(f"`path` {str(d)!r} must be a directory written by SimulationResult.to_dir(); missing {missing}.")
        doc = json.loads((d / "summary.json").read_text())
        config = doc.pop("config", {})
        versions = doc.pop("versions", {})
        summary = Summary({RENAMED_SUMMARY_KEYS.get(k, k): (math.nan if v is None else v) for k, v in doc.items()})
        cl = config.get("cluster", {})
        runs = pd.read_csv(d / "runs.csv") if (d / "runs.csv").is_file() else None
        extra = {}
        if (d / "provenance.json").is_file():
            extra["provenance"] = json.loads((d / "provenance.json").read_text())
        jobs = pd.read_csv(d / "jobs.csv")
        rounds = pd.read_csv(d / "rounds.csv", keep_default_na=False, na_values=[""])
        renames = ((jobs, RENAMED_JOB_COLUMNS), (rounds, renamed_round_columns(tuple(cl))),
                   (runs, RENAMED_RUN_COLUMNS))
        old = [c for frame, names in renames if frame is not None for c in frame.columns if c in names]
        old += [k for k in doc if k in RENAMED_SUMMARY_KEYS]
        if old:
            warnings.warn(f"{str(d)!r} was written by an older hetsched (time columns without their unit: {old}); "
                          "read with the current names (jct -> jct_s, start -> start_s, ...)", DeprecationWarning,
                          stacklevel=2)
            jobs, rounds, runs = (None if frame is None else frame.rename(columns=names) for frame, names in renames)
        return cls(jobs=jobs, rounds=rounds, runs=runs, summary=summary, config=config, versions=versions,
                   gpu_types=tuple(cl), capacities=np.array([float(v) for v in cl.values()]), extra=extra)

    def __repr__(self) -> str:
        s = self.summary
        return (
            f"SimulationResult(policy={self.config.get('policy')!r}, jobs={s.get('n_jobs')}, "
            f"completed={s.get('n_completed')}, avg_jct={s.get('avg_jct_hours', math.nan):.3g} h, "
            f"makespan={s.get('makespan_s', math.nan) / 3600:.3g} h, rounds={s.get('n_rounds')}, "
            f"status={s.get('status')!r})"
        )


def assemble_result(w: RoundWorkload, ledger: Ledger, clock: RoundClock, t_first: float, wall0: float,
                    timing: Mapping[str, float]) -> SimulationResult:
    """The :class:`SimulationResult` of a finished :func:`~hetsched.rounds.loop.run_rounds`.

    Parameters
    ----------
    w : RoundWorkload
        The run's workload (:func:`~hetsched.rounds.loop.prepare`).
    ledger : Ledger
        Its accounting after the last round.
    clock : RoundClock
        Its clock after the last round (``status``, ``rnd``, ``t``).
    t_first : float
        Start of the first round.
    wall0 : float
        ``time.perf_counter()`` when the driver started.
    timing : Mapping
        Wall seconds by phase (``policy_s``, ``mechanism_s``, ``placement_s``).
    """
    status, rnd, t = clock.status, clock.rnd, clock.t
    t_end = t if rnd else t_first
    if w.n and ledger.completed.all():
        t_end = max(float(np.nanmax(ledger.finish)), t_first) if rnd else t_first
    wall = time.perf_counter() - wall0
    timings = {"wall_s": wall, **timing, "other_s": max(wall - sum(timing.values()), 0.0)}
    rounds_df = ledger.round_frame(w.types)
    jobs_df = ledger.job_frame(w.trace, w.ids, w.s, w.arrival, w.types, w.deadlines, w.measured)
    summary = summarize(jobs_df, rounds_df, gpu_types=w.types, capacities=w.cap, span=(t_first, t_end),
                        timings=timings, status=status)
    log.info("simulate %s: %s after %d rounds, %.1f simulated h in %.2f s", w.config["policy"], status, rnd,
             (t_end - t_first) / 3600, wall)
    return SimulationResult(jobs=jobs_df, rounds=rounds_df, runs=ledger.run_frame(), summary=summary,
                            config=w.config, versions=package_versions(), gpu_types=w.types, capacities=w.cap,
                            extra={"throughputs": w.T, "unconsolidated": w.U})
