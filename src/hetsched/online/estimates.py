"""The current throughput estimates of the online scheduler's jobs: the moving averages of
their reports completed by the :class:`~hetsched.online.ThroughputEstimator`, recomputed
only when a report changed them (reports mark them stale, the round step reads them)."""

from __future__ import annotations

import numpy as np

from .estimator import ThroughputEstimator
from .table import JobTable

__all__ = ["Estimates"]


class Estimates:
    """Estimates of the jobs of ``jobs`` (see the module docstring).

    Parameters
    ----------
    jobs : JobTable
        The job table whose ``ema``, ``n_measured``, ``profile`` and ``matched`` columns
        the estimates come from (``matched`` is filled here).
    estimator : ThroughputEstimator
    """

    def __init__(self, jobs: JobTable, estimator: ThroughputEstimator) -> None:
        self.jobs = jobs
        self.estimator = estimator
        self._cache: tuple[np.ndarray, np.ndarray] | None = None   # (active, T) of the last call
        self._stale = True                   # a report changed the measurements since
        self._offsets: np.ndarray | None = None
        self._unmatched: set[int] = set()    # jobs whose reference match is to be redone

    def reported(self, num: int) -> None:
        """Job ``num``'s own moving average changed."""
        self._stale = True
        self._unmatched.add(num)

    def restored(self) -> None:
        """The job table was read back from a store: match every job measured on two types or more."""
        self._unmatched = set(np.flatnonzero((self.jobs.view("n_measured") > 0).sum(axis=1) >= 2).tolist())

    def of(self, active: np.ndarray) -> np.ndarray:
        """Estimates of the jobs ``active`` (n, GPU types), cached while nothing is reported."""
        J = self.jobs
        if (self._cache is not None and not self._stale and self._cache[0].shape == active.shape
                and np.array_equal(self._cache[0], active)):
            return self._cache[1]
        if self._stale or self._offsets is None:
            measured = J.view("n_measured") > 0
            self._offsets = self.estimator.offsets(np.where(measured, J.view("ema"), np.nan))
        if self._unmatched:
            rows = np.fromiter(sorted(self._unmatched), dtype=np.int64)
            obs = np.where(J.n_measured[rows] > 0, J.ema[rows], np.nan)
            J.matched[rows] = self.estimator.match(obs, J.sf[rows])
            self._unmatched.clear()
        T = self._complete(active)
        self._cache = (active.copy(), T)
        self._stale = False
        return T

    def of_any(self, nums: np.ndarray) -> np.ndarray:
        """Estimates of any jobs ``nums`` (finished ones too), not cached."""
        self.of(self.jobs.active())   # refresh offsets and matches
        return self._complete(nums)

    def _complete(self, nums: np.ndarray) -> np.ndarray:
        J = self.jobs
        obs = np.where(J.n_measured[nums] > 0, J.ema[nums], np.nan)
        return self.estimator.complete(obs, J.sf[nums], J.profile[nums], offsets=self._offsets,
                                       matched=J.matched[nums])
