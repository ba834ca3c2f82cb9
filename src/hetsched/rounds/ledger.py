"""The simulator's books: per-job progress, what each round ran, and the tables built from them.

:meth:`Ledger.progress` executes one round of rows. For every member of every row that
runs, its throughput is the row's (the pair throughput for a space-sharing pair, the
configuration's goodput for Sia, the spread throughput when placement spread the gang), and

* a job that starts on GPUs it did not hold the round before (it did not run, or ran on
  another type, another GPU count, or placement moved it) first loses
  ``restart_seconds`` without progress;
* a job whose remaining steps fit in what is left of the round finishes inside it, at the
  exact time; its row's GPUs stay busy until its last member finishes and then idle until
  the round ends (as in Gavel).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from .protocol import RoundRows

__all__ = ["ROUND_COLUMNS", "RUN_COLUMNS", "Ledger"]

#: Columns of the round log (besides ``gpu_seconds_<type>``, the busy GPU-seconds of the round
#: per type). Times in seconds: ``start_s`` the round's start, ``seconds`` its length.
ROUND_COLUMNS = ("round", "start_s", "seconds", "n_active", "n_running", "arrived", "completed", "solved", "solve_ok",
                 "solve_status", "solve_s", "solve_jobs", "solve_classes", "plan_s", "place_s", "preempted",
                 "migrated", "restarts")
#: Columns of the run log (``start_s``, ``end_s``: when the entry ran; ``restart_s``: seconds of it
#: without progress).
RUN_COLUMNS = ("round", "job", "gpu_type", "gpus", "share", "unit", "partner", "rate", "start_s", "end_s", "restart_s",
               "steps", "spread", "batch_size")


class Ledger:
    """Per-job arrays of a simulation (rows: jobs in arrival order) and the logs.

    Parameters
    ----------
    total : ndarray
        Total steps of each job.
    n_types : int
        GPU types (columns).
    restart_seconds : float or ndarray
        Seconds without progress on every start on new GPUs: one value for every job, or
        one per job (adaptive jobs: each model's checkpoint-restore time).
    record_runs : bool
        Keep the run log.
    """

    def __init__(self, total: np.ndarray, n_types: int, *, restart_seconds: float | np.ndarray,
                 record_runs: bool) -> None:
        n = total.shape[0]
        self.total = total
        self.m = n_types
        rs = np.asarray(restart_seconds, dtype=float)
        if rs.ndim > 1 or (rs.ndim == 1 and rs.shape[0] != n) or not (np.isfinite(rs) & (rs >= 0)).all():
            raise ValidationError(f"`restart_seconds` must be one finite number >= 0 or one per job ({n}); got "
                                  f"shape {rs.shape}.")
        self.restart_seconds = np.broadcast_to(rs, (n,)).copy()
        self._restarts = bool((self.restart_seconds > 0).any())
        self.record_runs = record_runs
        self.done = np.zeros(n)
        self.finish = np.full(n, np.nan)
        self.start = np.full(n, np.nan)
        self.iso_time = np.zeros(n)
        self.iso_rate = np.full(n, np.nan)
        self.run_seconds = np.zeros(n)
        self.gpu_sec = np.zeros((n, n_types))
        self.preempt = np.zeros(n, np.int64)
        self.migr = np.zeros(n, np.int64)
        self.restarts = np.zeros(n, np.int64)
        self.restart_sec = np.zeros(n)
        self.completed = np.zeros(n, bool)
        self.last_type = np.full(n, -1, np.int64)
        self.last_gpus = np.zeros(n, np.int64)
        self.last_end = np.full(n, -np.inf)
        self.rounds: dict[str, list] = {k: [] for k in ROUND_COLUMNS}
        self.busy: list[np.ndarray] = []
        self.runs: dict[str, list[np.ndarray]] = {k: [] for k in RUN_COLUMNS}

    # ------------------------------------------------------------------ one round
    def progress(self, rows: RoundRows, spread: np.ndarray, moved: np.ndarray, active: np.ndarray, t: float,
                 L: float, rnd: int, *, fluid: bool) -> dict[str, Any]:
        """Run ``rows`` (those that got GPUs) for the round starting at ``t``.

        Parameters
        ----------
        rows : RoundRows
            The rows that run.
        spread, moved : ndarray of bool, one per row
            Gang spread over servers; placement moved the row's GPUs.
        active : ndarray of int64
            The active jobs (ascending).
        t, L : float
            Round start and length.
        rnd : int
            Round number (for the run log).
        fluid : bool
            Ideal mechanism (rows are fractions of the round; no starts to charge).

        Returns
        -------
        dict
            ``finished`` (mask over ``active``), ``row_seconds`` (busy seconds of each row),
            ``busy`` (GPU-seconds per type), ``n_running``, ``preempted``, ``migrated``,
            ``restarts`` (jobs that started on GPUs they did not hold the round before, whether
            or not ``restart_seconds`` charges for it; never in the ideal mechanism).
        """
        if self._whole_rows(rows, fluid):
            return self._progress_whole_rows(rows, spread, moved, active, t, L, rnd)
        n_act = active.size
        r, j = rows.members()
        is_b = np.arange(r.size) >= rows.n_rows
        sp = spread[r]
        rate_e = np.where(is_b, np.where(sp, rows.partner_spread_rate[r], rows.partner_rate[r]),
                          np.where(sp, rows.spread_rate[r], rows.rate[r]))
        share_e = rows.share[r]
        pos = np.searchsorted(active, j)
        job_rate = np.bincount(pos, weights=rate_e * share_e, minlength=n_act)
        running = np.bincount(pos, weights=share_e, minlength=n_act) > 0
        now_type = np.full(n_act, -1, np.int64)
        now_gpus = np.zeros(n_act, np.int64)
        if not fluid:
            now_type[pos] = rows.gpu_type[r]
            now_gpus[pos] = rows.gpus[r]
        # restarts: a job on GPUs it did not hold the round before
        held = (self.last_type[j] == rows.gpu_type[r]) & (self.last_gpus[j] == rows.gpus[r]) & ~moved[r]
        event = ~(held | fluid)
        started = np.zeros(n_act, bool)
        started[pos] = event
        restart_job = np.zeros(n_act)
        if self._restarts:
            restart_e = np.where(event, self.restart_seconds[j], 0.0)
            restart_job[pos] = restart_e
            avail = np.maximum(L - restart_job, 0.0)
        else:
            restart_e = np.zeros(r.size)
            avail = np.full(n_act, L)
        rem = self.total[active] - self.done[active]
        with np.errstate(divide="ignore", invalid="ignore"):
            fin = running & (job_rate > 0) & (rem <= job_rate * avail * (1 + 1e-12))
            dt = np.where(fin, restart_job + rem / np.where(job_rate > 0, job_rate, 1.0), np.where(running, L, 0.0))
        dt = np.minimum(dt, L)
        steps = np.where(fin, rem, job_rate * avail)
        row_dt = np.zeros(rows.n_rows)
        np.maximum.at(row_dt, r, dt[pos])
        busy = np.bincount(rows.gpu_type, weights=rows.gpus * rows.share * row_dt, minlength=self.m)
        # per-job accounting
        n_members = np.bincount(r, minlength=rows.n_rows)[r]
        np.add.at(self.gpu_sec.reshape(-1), j * self.m + rows.gpu_type[r], rows.gpus[r] * share_e * dt[pos] / n_members)
        ran_before = self.last_type[active] >= 0
        preempted = np.zeros(n_act, bool) if fluid else ran_before & (now_type != self.last_type[active])
        migrated = preempted & running
        if moved.any():
            migrated[pos[moved[r]]] = True
        self.preempt[active] += preempted
        self.migr[active] += migrated
        self.restarts[active] += started
        if self._restarts:
            self.restart_sec[active] += np.minimum(restart_job, L)
        self._advance(active, running, steps, dt, fin, t)
        self.last_type[active] = now_type
        self.last_gpus[active] = now_gpus
        self.last_end[active] = np.where(running, t + dt, self.last_end[active])
        if self.record_runs and r.size:
            with np.errstate(divide="ignore", invalid="ignore"):
                frac = np.where(job_rate[pos] > 0, rate_e * share_e / job_rate[pos], 0.0)
            self._log_runs(rnd, j, rows.gpu_type[r], rows.gpus[r], share_e, r, np.where(is_b, rows.job[r], rows.partner[r]),
                           rate_e, t, t + dt[pos], np.minimum(restart_e, dt[pos]), steps[pos] * frac, sp,
                           rows.batch_size[r])
        return {"finished": fin, "row_seconds": row_dt, "busy": busy, "n_running": int(running.sum()),
                "preempted": int(preempted.sum()), "migrated": int(migrated.sum()), "restarts": int(started.sum())}

    def _advance(self, jobs: np.ndarray, running: np.ndarray | None, steps: np.ndarray, dt: np.ndarray,
                 fin: np.ndarray, t: float) -> None:
        """Book one round of ``jobs`` (``running``: those that ran; None: all): first start,
        isolated-share time, run seconds, ``steps`` done, and the finish of those in ``fin``
        (``dt``: seconds each ran from ``t``)."""
        first = np.isnan(self.start[jobs]) if running is None else running & np.isnan(self.start[jobs])
        self.start[jobs[first]] = t
        with np.errstate(divide="ignore", invalid="ignore"):
            self.iso_time[jobs] += np.where(steps > 0, steps / self.iso_rate[jobs], 0.0)
        self.run_seconds[jobs] += dt
        self.done[jobs] += steps
        fin_jobs = jobs[fin]
        self.done[fin_jobs] = self.total[fin_jobs]
        self.finish[fin_jobs] = t + dt[fin]
        self.completed[fin_jobs] = True

    @staticmethod
    def _whole_rows(rows: RoundRows, fluid: bool) -> bool:
        """Whether every row is one job running the whole round (the lean path applies)."""
        return not fluid and not rows.is_pair.any() and bool((rows.share == 1.0).all())

    def _log_runs(self, rnd: int, job: np.ndarray, gpu_type: np.ndarray, gpus: np.ndarray, share: np.ndarray,
                  unit: np.ndarray, partner: np.ndarray, rate: np.ndarray, t: float, t_end: np.ndarray,
                  restart: np.ndarray, steps: np.ndarray, spread: np.ndarray, batch_size: np.ndarray) -> None:
        """Append one round's entries to the run log (columns :data:`RUN_COLUMNS`; ``batch_size``
        0: the job's own, not chosen by the scheduler)."""
        n = job.size
        for name, v in zip(RUN_COLUMNS, (np.full(n, rnd, np.int64), job, gpu_type, gpus.astype(float), share, unit,
                                         partner, rate, np.full(n, t), t_end, restart, steps, spread, batch_size)):
            self.runs[name].append(v)

    def _progress_whole_rows(self, rows: RoundRows, spread: np.ndarray, moved: np.ndarray, active: np.ndarray,
                             t: float, L: float, rnd: int) -> dict[str, Any]:
        """:meth:`progress` for whole rows of one job each (:meth:`_whole_rows`): the same
        accounting done on the jobs that run only (tests check it equals the general path)."""
        jr, k, g = rows.job, rows.gpu_type, rows.gpus
        rate = np.where(spread, rows.spread_rate, rows.rate) if spread.any() else rows.rate
        event = ~((self.last_type[jr] == k) & (self.last_gpus[jr] == g) & ~moved)
        rem = self.total[jr] - self.done[jr]
        if self._restarts:
            restart = np.where(event, self.restart_seconds[jr], 0.0)
            avail = np.maximum(L - restart, 0.0)
        else:
            restart = 0.0
            avail = L
        with np.errstate(divide="ignore", invalid="ignore"):
            fin = (rate > 0) & (rem <= rate * avail * (1 + 1e-12))
            dt = np.minimum(np.where(fin, restart + rem / np.where(rate > 0, rate, 1.0), L), L)
        steps = np.where(fin, rem, rate * avail)
        busy = np.bincount(k, weights=g * dt, minlength=self.m)
        self.gpu_sec[jr, k] += g * dt
        last = self.last_type[active]
        pos = np.searchsorted(active, jr)
        now_type = np.full(active.size, -1, np.int64)
        now_type[pos] = k
        preempted = (last >= 0) & (now_type != last)
        migrated = preempted & (now_type >= 0)
        if moved.any():
            migrated[pos[moved]] = True
        self.preempt[active] += preempted
        self.migr[active] += migrated
        self.restarts[jr] += event
        if self._restarts:
            self.restart_sec[jr] += np.minimum(restart, L)
        self._advance(jr, None, steps, dt, fin, t)
        self.last_type[active] = now_type
        self.last_gpus[active] = 0
        self.last_gpus[jr] = g
        self.last_end[jr] = t + dt
        if self.record_runs and jr.size:
            self._log_runs(rnd, jr, k, g, rows.share, np.arange(jr.size), rows.partner, rate, t, t + dt,
                           np.minimum(restart, dt), steps, spread, rows.batch_size)
        finished = np.zeros(active.size, bool)
        finished[pos[fin]] = True
        return {"finished": finished, "row_seconds": dt, "busy": busy, "n_running": int(jr.size),
                "preempted": int(preempted.sum()), "migrated": int(migrated.sum()), "restarts": int(event.sum())}

    def log_round(self, **values: Any) -> None:
        """Append one row to the round log (``busy``: GPU-seconds per type)."""
        self.busy.append(values.pop("busy"))
        for k in ROUND_COLUMNS:
            self.rounds[k].append(values.get(k, math.nan))

    # ------------------------------------------------------------------ tables
    def round_frame(self, gpu_types: tuple[str, ...]) -> pd.DataFrame:
        """The round log as a DataFrame (with ``gpu_seconds_<type>`` columns: busy GPU-seconds)."""
        df = pd.DataFrame(self.rounds)
        busy = np.array(self.busy).reshape(-1, self.m)
        for k, name in enumerate(gpu_types):
            df[f"gpu_seconds_{name}"] = busy[:, k]
        return df

    def run_frame(self) -> pd.DataFrame | None:
        """The run log (None when not recorded)."""
        if not self.record_runs:
            return None
        return pd.DataFrame({k: (np.concatenate(v) if v else np.zeros(0)) for k, v in self.runs.items()})

    def job_frame(self, trace: Any, ids: np.ndarray, s: np.ndarray, arrival: np.ndarray, types: tuple[str, ...],
                  deadlines: np.ndarray | None, measured: np.ndarray) -> pd.DataFrame:
        """One row per job (see :class:`~hetsched.sim.SimulationResult`); times in seconds, each
        time column named with its unit (``jct_s``, ``finish_s`` ...)."""
        n = ids.shape[0]
        completed, finish, iso = self.completed, self.finish, self.iso_time
        jct = finish - arrival
        with np.errstate(divide="ignore", invalid="ignore"):
            ftf = np.where(completed & (iso > 0), jct / iso, np.nan)
        dl = deadlines if deadlines is not None else np.full(n, np.inf)
        data: dict[str, Any] = {
            "job_id": ids,
            "job_type": trace.job_types if trace.job_types is not None else np.full(n, None, dtype=object),
            "scale_factor": s, "arrival_s": arrival, "start_s": self.start, "finish_s": finish, "jct_s": jct,
            "queueing_delay_s": self.start - arrival, "total_steps": self.total, "steps_done": self.done,
            "completed": completed, "run_seconds": self.run_seconds, "isolated_time_s": iso, "ftf": ftf,
            "preemptions": self.preempt, "migrations": self.migr, "restarts": self.restarts,
            "restart_seconds": self.restart_sec,
        }
        for k, t in enumerate(types):
            data[f"gpu_seconds_{t}"] = self.gpu_sec[:, k] if n else np.zeros(0)
        data["deadline_s"] = dl
        data["slo_violated"] = np.isfinite(dl) & (~completed | (finish > dl))
        data["in_window"] = measured
        return pd.DataFrame(data)
