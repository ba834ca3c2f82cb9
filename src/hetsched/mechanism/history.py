"""ShareHistory: what each job has received so far, passed to and returned by the planner.

The history is immutable: :meth:`ShareHistory.record` returns a new history, so a plan can
be replayed, compared or discarded without side effects (the planner is a function of its
inputs).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ..validation import check_instance, check_positive, check_real
from .plan import RoundPlan
from .validation import as_id_array

__all__ = ["ShareHistory", "check_round_seconds", "rows_of"]

_VERSIONS = itertools.count(1)


def check_round_seconds(value: Any, name: str = "round_seconds") -> float:
    """``value`` as a positive finite float (:func:`hetsched.validation.check_positive`)."""
    return check_positive(value, name, unit="seconds")


def rows_of(known_ids: np.ndarray, job_ids: np.ndarray) -> np.ndarray:
    """Row of each of ``job_ids`` in ``known_ids`` (int64; -1 for an id not there).

    The identity when both hold the same ids in the same order, without hashing.
    """
    n = int(job_ids.shape[0])
    if known_ids.shape[0] == 0:
        return np.full(n, -1, dtype=np.int64)
    if known_ids.shape == job_ids.shape and np.array_equal(known_ids, job_ids):
        return np.arange(n, dtype=np.int64)
    return pd.Index(known_ids).get_indexer(job_ids).astype(np.int64)


@dataclass(frozen=True, eq=False)
class ShareHistory:
    """Per-job record of the time received on each GPU type since the last share reset.

    Build an empty one with :meth:`empty`; get the next one with :meth:`record`.

    Attributes
    ----------
    gpu_types : tuple of str or None
        Column labels (None until the first recorded plan fixes them).
    job_ids : ndarray
        Jobs known to the history, in row order.
    received : ndarray, shape (n_jobs, n_gpu_types)
        Seconds each job ran on each type since its shares were last reset.
    elapsed : ndarray, shape (n_jobs,)
        Seconds each job has been part of the allocation since its shares were last reset
        (a job that arrives later starts at 0). ``received / elapsed`` is the share the
        priorities compare with ``X``.
    attained : ndarray, shape (n_jobs, n_gpu_types)
        Seconds on each type since the job was first planned (never reset).
    last_type : ndarray of int64, shape (n_jobs,)
        Column of the type each job ran on in the last recorded round, -1 if it did not run.
    preemptions : ndarray of int64, shape (n_jobs,)
        Rounds in which the job was preempted (ran the round before, not on the same type
        now), never reset.
    rounds_waiting : ndarray of int64, shape (n_jobs,)
        Consecutive recorded rounds in which the job has not run (since it last ran, or
        since it arrived).
    rounds : int
        Rounds recorded.
    seconds_waiting : ndarray, shape (n_jobs,)
        Seconds of the recorded rounds since the job last ran (or was first planned), kept
        across share resets: the priorities measure a never-served job's claim over
        ``max(elapsed, seconds_waiting)`` (see :mod:`hetsched.mechanism.priority`). None
        (a history stored before this field existed) reads as zeros.
    """

    gpu_types: tuple[str, ...] | None
    job_ids: np.ndarray
    received: np.ndarray
    elapsed: np.ndarray
    attained: np.ndarray
    last_type: np.ndarray
    preemptions: np.ndarray
    rounds_waiting: np.ndarray
    rounds: int = 0
    seconds_waiting: np.ndarray | None = None
    version: int = field(default_factory=lambda: next(_VERSIONS))

    def __post_init__(self) -> None:
        if self.seconds_waiting is None:
            object.__setattr__(self, "seconds_waiting", np.zeros(self.job_ids.shape[0]))

    # ------------------------------------------------------------ construction
    @classmethod
    def empty(cls, gpu_types: Sequence[str] | None = None) -> ShareHistory:
        """A history that knows no job (optionally with fixed column labels)."""
        m = 0 if gpu_types is None else len(tuple(gpu_types))
        return cls(
            gpu_types=None if gpu_types is None else tuple(str(t) for t in gpu_types),
            job_ids=np.zeros(0, dtype=np.int64),
            received=np.zeros((0, m)),
            elapsed=np.zeros(0),
            attained=np.zeros((0, m)),
            last_type=np.zeros(0, dtype=np.int64),
            preemptions=np.zeros(0, dtype=np.int64),
            rounds_waiting=np.zeros(0, dtype=np.int64),
            seconds_waiting=np.zeros(0),
        )

    @property
    def n_jobs(self) -> int:
        """Number of jobs the history knows."""
        return int(self.job_ids.shape[0])

    @property
    def shares(self) -> np.ndarray:
        """``received / elapsed`` per job and type (0 for a job with no elapsed time)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            out = self.received / self.elapsed[:, None]
        out[self.elapsed <= 0] = 0.0
        return out

    # --------------------------------------------------------------- alignment
    def aligned(self, job_ids: np.ndarray, gpu_types: Sequence[str]) -> _Aligned:
        """Rows and columns of this history matched to ``job_ids`` and ``gpu_types``."""
        gpu_types = tuple(gpu_types)
        n = int(job_ids.shape[0])
        m = len(gpu_types)
        if (
            self.gpu_types == gpu_types
            and self.job_ids.shape == job_ids.shape
            and np.array_equal(self.job_ids, job_ids)
        ):
            # Same jobs, same columns: share the (never mutated) arrays.
            return _Aligned(
                rows=np.arange(n, dtype=np.int64), dropped_ids=self.job_ids[:0], dropped_types=[],
                received=self.received, attained=self.attained, elapsed=self.elapsed,
                last_type=self.last_type, preemptions=self.preemptions, rounds_waiting=self.rounds_waiting,
                seconds_waiting=self.seconds_waiting,
            )
        rows = rows_of(self.job_ids, job_ids)
        known = rows >= 0
        kept = np.zeros(self.n_jobs, dtype=bool)
        kept[rows[known]] = True
        dropped_ids = self.job_ids[~kept]
        # columns by name (loop over GPU types only)
        if self.gpu_types is None or self.gpu_types == gpu_types:
            cols = np.arange(m) if self.gpu_types is not None else np.full(m, -1)
        else:
            pos = {t: i for i, t in enumerate(self.gpu_types)}
            cols = np.array([pos.get(t, -1) for t in gpu_types], dtype=np.int64)
        dropped_types = (
            [] if self.gpu_types is None else [t for t in self.gpu_types if t not in set(gpu_types)]
        )
        received = np.zeros((n, m))
        attained = np.zeros((n, m))
        if self.n_jobs and known.any():
            src = rows[known]
            for k in range(m):  # loop over GPU types only
                c = int(cols[k])
                if c >= 0:
                    received[known, k] = self.received[src, c]
                    attained[known, k] = self.attained[src, c]
        elapsed = np.zeros(n)
        preemptions = np.zeros(n, dtype=np.int64)
        rounds_waiting = np.zeros(n, dtype=np.int64)
        seconds_waiting = np.zeros(n)
        last_type = np.full(n, -1, dtype=np.int64)
        if known.any():
            src = rows[known]
            elapsed[known] = self.elapsed[src]
            preemptions[known] = self.preemptions[src]
            rounds_waiting[known] = self.rounds_waiting[src]
            seconds_waiting[known] = self.seconds_waiting[src]
            lt = self.last_type[src]
            if self.gpu_types is not None:
                lut = np.full(len(self.gpu_types) + 1, -1, dtype=np.int64)  # -1 maps to -1
                for k in range(m):
                    if cols[k] >= 0:
                        lut[cols[k]] = k
                lt = lut[lt]
            last_type[known] = lt
        return _Aligned(
            rows=rows, dropped_ids=dropped_ids, dropped_types=dropped_types,
            received=received, attained=attained, elapsed=elapsed, last_type=last_type,
            preemptions=preemptions, rounds_waiting=rounds_waiting, seconds_waiting=seconds_waiting,
        )

    # ------------------------------------------------------------------ update
    def record(self, plan: RoundPlan, round_seconds: float | None = None) -> ShareHistory:
        """The history after ``plan`` ran for ``round_seconds``.

        Parameters
        ----------
        plan : RoundPlan
            The plan that ran (from :func:`plan_round` with this history or any other).
        round_seconds : float, optional
            How long it actually ran (default: ``plan.round_seconds``); a round cut short by
            a new allocation records its real length.

        Returns
        -------
        ShareHistory
            A new history for exactly the plan's jobs: jobs the plan dropped are gone, new
            jobs start with this round.

        Raises
        ------
        ValidationError
            ``plan`` is not a RoundPlan, or ``round_seconds`` is not a positive number.
        """
        check_instance(plan, "plan", RoundPlan, "a RoundPlan from plan_round()")
        L = plan.round_seconds if round_seconds is None else check_round_seconds(round_seconds)
        if plan._base_version == self.version and plan._base is not None:
            base = plan._base  # the alignment the planner already made from this history
        else:
            base = self.aligned(plan.job_ids, plan.gpu_types)
        share = plan.time_share
        running = plan.running
        received = base.received + share * L
        attained = base.attained + share * L
        elapsed = base.elapsed + L
        preemptions = base.preemptions + plan.preempted.astype(np.int64)
        rounds_waiting = np.where(running, 0, base.rounds_waiting + 1)
        seconds_waiting = np.where(running, 0.0, base.seconds_waiting + L)
        last_type = plan.assignment.copy() if plan.mode == "rounds" else np.full(plan.n_jobs, -1, dtype=np.int64)
        return ShareHistory(
            gpu_types=tuple(plan.gpu_types),
            job_ids=plan.job_ids,
            received=received,
            elapsed=elapsed,
            attained=attained,
            last_type=last_type,
            preemptions=preemptions,
            rounds_waiting=rounds_waiting,
            rounds=self.rounds + 1,
            seconds_waiting=seconds_waiting,
        )

    def reset(self, decay: float = 0.0, job_ids: Sequence[Any] | np.ndarray | None = None) -> ShareHistory:
        """Forget (part of) the shares, e.g. when a new allocation X is handed in.

        Parameters
        ----------
        decay : float in [0, 1], default 0
            ``received`` and ``elapsed`` are multiplied by ``decay``: 0 forgets everything
            (Gavel's behaviour on every new allocation), 1 keeps everything, values in
            between weigh the past geometrically. ``last_type`` (lease continuity),
            ``attained``, ``preemptions``, ``rounds_waiting`` and ``seconds_waiting`` are kept.
        job_ids : sequence, optional
            Reset only these jobs (e.g. those whose rows of X changed); default all.

        Returns
        -------
        ShareHistory
            A new history.

        Raises
        ------
        ValidationError
            ``decay`` outside [0, 1]; ``job_ids`` naming a job the history does not know.
        """
        d = check_real(decay, "decay", low=0.0, high=1.0)
        factor = np.full(self.n_jobs, d)
        if job_ids is not None:
            ids = as_id_array(job_ids)
            rows = rows_of(self.job_ids, ids)
            if (rows < 0).any():
                bad = ids[rows < 0][:5].tolist()
                raise ValidationError(f"`job_ids` must be jobs the history knows; unknown: {bad}.")
            factor = np.ones(self.n_jobs)
            factor[rows] = d
        # a new version: plans cached against this history's version must not take the reset one for it
        return dataclasses.replace(self, received=self.received * factor[:, None], elapsed=self.elapsed * factor,
                                   version=next(_VERSIONS))

    # ----------------------------------------------------------------- reports
    def share_error(self, X: np.ndarray, job_ids: Sequence[Any] | np.ndarray | None = None) -> float:
        """``max |received / elapsed - X|`` over the jobs of ``X`` that have elapsed time.

        ``job_ids`` gives the rows of ``X`` (default: the history's own order).
        """
        X = np.asarray(X, dtype=float)
        if job_ids is None:
            if X.shape[0] != self.n_jobs:
                raise ValidationError(
                    f"`X` must have one row per job of the history ({self.n_jobs}); got {X.shape[0]}."
                )
            share, el = self.shares, self.elapsed
        else:
            base = self.aligned(as_id_array(job_ids), self.gpu_types or ())
            with np.errstate(invalid="ignore", divide="ignore"):
                share = np.where(base.elapsed[:, None] > 0, base.received / base.elapsed[:, None], 0.0)
            el = base.elapsed
        live = el > 0
        if not live.any():
            return 0.0
        return float(np.abs(share[live] - X[live]).max())

    def to_frame(self) -> pd.DataFrame:
        """One row per job: ``received_<type>``, ``elapsed``, ``preemptions``, ``rounds_waiting``."""
        types = self.gpu_types or ()
        data: dict[str, Any] = {f"received_{t}": self.received[:, k] for k, t in enumerate(types)}
        data["elapsed"] = self.elapsed
        data["preemptions"] = self.preemptions
        data["rounds_waiting"] = self.rounds_waiting
        return pd.DataFrame(data, index=pd.Index(self.job_ids, name="job_id"))

    def __repr__(self) -> str:
        return f"ShareHistory(jobs={self.n_jobs}, gpu_types={list(self.gpu_types or ())}, rounds={self.rounds})"


@dataclass(frozen=True, eq=False)
class _Aligned:
    """History arrays matched to an allocation's rows and columns (internal)."""

    rows: np.ndarray
    dropped_ids: np.ndarray
    dropped_types: list[str]
    received: np.ndarray
    attained: np.ndarray
    elapsed: np.ndarray
    last_type: np.ndarray
    preemptions: np.ndarray
    rounds_waiting: np.ndarray
    seconds_waiting: np.ndarray
