r"""Throughputs learned online: per (job, type) moving averages of what workers report, and
estimates for the types a job has not run on yet.

Three sources, in this order, give job :math:`j`'s throughput on GPU type :math:`k`:

1. **Measured** (:math:`k` was reported for :math:`j`): an exponential moving average of the
   measured rates, as Gavel does (``scheduler/scheduler.py``, ``Scheduler._update_throughput``,
   ``EMA_ALPHA = 0.25``): the first report sets the value, later ones move it by
   :math:`\hat T \leftarrow \alpha\, \text{steps}/\text{seconds} + (1-\alpha)\hat T`.
2. **Profiled** (the job was submitted with a job type found in the reference table, or with
   throughputs): that profile, rescaled by the geometric mean of measured/profiled over the
   types already measured (so a job that runs 10 % slower than its profile is expected to
   be 10 % slower everywhere).
3. **Completed** (nothing known about the type): in log space,

   * no measurement: the geometric mean of the reference rows with the job's gang size;
   * one measured type: **per-type speed ratios**, the column effects :math:`\mu_k` of the
     additive model :math:`\log T_{jk} = a_j + \mu_k` fitted to the reference table and to
     every measurement so far (so a type missing from the reference gets its ratio from
     jobs measured on it and on another type);
   * two or more measured types: **matching against the reference** (Gavel's estimator,
     ``scheduler/throughput_estimator.py``, ``ThroughputEstimator._match_job_to_reference_job``,
     completes the new row by matrix factorization and then takes the nearest reference
     job type by cosine distance): the mean profile of the ``neighbours`` reference rows
     closest to the job's measured profile, each shifted to the job's level. Distance: the
     squared differences of the measured log-profile after removing the level, plus
     ``level_weight`` times the squared level difference and ``scale_weight`` times the
     squared difference of :math:`\log_2` gang sizes. ``completion="lowrank"`` instead fits
     :math:`\log T_{jk} = a_j + \mu_k + u_j v_k` with :math:`v` the first singular vector of
     the centred reference table (ridge ``lowrank_ridge`` on :math:`u_j`).

``docs/online.md`` reports the hold-out errors of each choice on Gavel's table
(:func:`holdout_errors`); with one measured type no completion beat the per-type ratios
there, with two the nearest-reference match cut the median error by about a third.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ..inputs.jobs import THROUGHPUT_RANGE
from ..inputs.throughputs import ThroughputCatalogue
from ..validation import check_choice, check_int, check_nonneg, check_real

__all__ = ["COMPLETIONS", "ThroughputEstimator", "holdout_errors"]

log = logging.getLogger(__name__)

#: Completion methods for jobs measured on two or more types.
COMPLETIONS = ("nearest", "lowrank", "ratio")



class ThroughputEstimator:
    """Turns measurements and profiles into a full throughput matrix (see the module docstring).

    Parameters
    ----------
    gpu_types : sequence of str
        Columns of every matrix (the cluster's types).
    reference : ThroughputCatalogue, optional
        Profiled job types (e.g. :func:`hetsched.load_gavel_throughputs`); columns are matched
        by name, types it lacks get ratios from measurements only. Without it, completion uses
        measurements only.
    ema_alpha : float, default 0.25
        Weight of a new measurement (Gavel's ``EMA_ALPHA``); 1 keeps the last measurement only.
    completion : {"nearest", "lowrank", "ratio"}, default "nearest"
        How types are estimated for a job measured on two or more types.
    neighbours : int, default 5
        Reference rows averaged by ``"nearest"``.
    level_weight, scale_weight : float, default 0.05 and 0.5
        Distance terms of ``"nearest"`` (see the module docstring).
    lowrank_ridge : float, default 0.1
        Ridge on the job's factor in ``"lowrank"``.

    Examples
    --------
    >>> import numpy as np
    >>> from hetsched import ThroughputCatalogue
    >>> ref = ThroughputCatalogue(["a", "b"], [1, 1], ["k80", "v100"], [[1.0, 4.0], [2.0, 8.0]])
    >>> est = ThroughputEstimator(["k80", "v100"], ref)
    >>> obs = np.array([[3.0, np.nan]])           # measured 3 steps/s on a K80 only
    >>> est.complete(obs, np.array([1])).round(6).tolist()   # the reference's 4x ratio
    [[3.0, 12.0]]
    """

    def __init__(self, gpu_types: Sequence[str], reference: ThroughputCatalogue | None = None, *,
                 ema_alpha: float = 0.25, completion: str = "nearest", neighbours: int = 5,
                 level_weight: float = 0.05, scale_weight: float = 0.5, lowrank_ridge: float = 0.1) -> None:
        self.gpu_types = tuple(str(t) for t in gpu_types)
        if not self.gpu_types:
            raise ValidationError("`gpu_types` must name at least one GPU type; got none.")
        if reference is not None and not isinstance(reference, ThroughputCatalogue):
            raise ValidationError(f"`reference` must be a hetsched.ThroughputCatalogue or None; "
                                  f"got {type(reference).__name__}.")
        self.ema_alpha = check_real(ema_alpha, "ema_alpha", low=0.0, high=1.0, low_open=True)
        self.completion = check_choice(completion, "completion", COMPLETIONS)
        self.neighbours = check_int(neighbours, "neighbours", low=1)
        self.level_weight = check_nonneg(level_weight, "level_weight")
        self.scale_weight = check_nonneg(scale_weight, "scale_weight")
        self.lowrank_ridge = check_nonneg(lowrank_ridge, "lowrank_ridge")
        self.reference = reference
        m = len(self.gpu_types)
        if reference is not None:
            col = {t: k for k, t in enumerate(reference.gpu_types)}
            R = np.full((len(reference), m), np.nan)
            for k, t in enumerate(self.gpu_types):
                if t in col:
                    R[:, k] = reference.throughputs[:, col[t]]
            self._profile_rows = {(str(a), int(s)): i for i, (a, s) in
                                  enumerate(zip(reference.job_types, reference.scale_factors))}
            self._ref_raw = R
            with np.errstate(divide="ignore"):
                logR = np.where(R > 0, np.log(np.where(R > 0, R, 1.0)), np.nan)
            known = ~np.all(np.isnan(R), axis=0)                 # types the reference has
            full = ~np.isnan(logR[:, known]).any(axis=1)
            self._ref_log = logR[full]
            self._ref_sf = reference.scale_factors[full].astype(float)
            self._ref_known = known
        else:
            self._profile_rows = {}
            self._ref_raw = np.zeros((0, m))
            self._ref_log = np.zeros((0, m))
            self._ref_sf = np.zeros(0)
            self._ref_known = np.zeros(m, bool)
        self._mu_ref = self._fit_offsets(np.zeros((0, m)))

    # ------------------------------------------------------------------ measurements
    def update(self, ema: float, measured: float) -> float:
        """The moving average after ``measured`` (``ema`` NaN: the first measurement)."""
        if math.isnan(ema):
            return float(measured)
        return float(self.ema_alpha * measured + (1.0 - self.ema_alpha) * ema)

    def profile(self, job_type: str | None, scale_factor: int) -> np.ndarray | None:
        """The reference row of ``(job_type, scale_factor)`` over :attr:`gpu_types` (NaN for
        types the reference lacks), or None when the reference has no such row."""
        if job_type is None:
            return None
        i = self._profile_rows.get((str(job_type), int(scale_factor)))
        return None if i is None else self._ref_raw[i].copy()

    def has_job_type(self, job_type: str) -> bool:
        """Whether the reference has a row for ``job_type`` (any gang size)."""
        return any(a == job_type for a, _ in self._profile_rows)

    # ------------------------------------------------------------------ completion
    def _fit_offsets(self, observed_log: np.ndarray, iterations: int = 30) -> np.ndarray:
        """Column effects ``mu`` of ``log T = a_j + mu_k`` over the reference and ``observed_log``
        (NaN: missing), by alternating means; types nothing measured get 0 (equal speed)."""
        m = len(self.gpu_types)
        rows = [self._ref_log] if self._ref_log.size else []
        if observed_log.size:
            usable = (~np.isnan(observed_log)).sum(axis=1) >= 2
            if usable.any():
                rows.append(observed_log[usable])
        if not rows:
            return np.zeros(m)
        Y = np.concatenate(rows)
        M = ~np.isnan(Y)
        Y0 = np.where(M, Y, 0.0)
        cnt_k = M.sum(axis=0)
        cnt_j = np.maximum(M.sum(axis=1), 1)
        mu = np.zeros(m)
        for _ in range(iterations):
            a = (Y0 - mu[None, :] * M).sum(axis=1) / cnt_j
            mu_new = np.where(cnt_k > 0, (Y0 - a[:, None] * M).sum(axis=0) / np.maximum(cnt_k, 1), 0.0)
            if np.allclose(mu_new, mu, rtol=0, atol=1e-12):
                mu = mu_new
                break
            mu = mu_new
        measured_types = cnt_k > 0
        if measured_types.any():
            mu = np.where(measured_types, mu - mu[measured_types].mean(), 0.0)
        return mu

    def offsets(self, observed: np.ndarray | None = None) -> np.ndarray:
        """Per-type log speed offsets (the per-type ratios, :math:`T_k/T_o = e^{\\mu_k - \\mu_o}`),
        fitted to the reference and the measured matrix ``observed`` (NaN: unmeasured)."""
        if observed is None or observed.size == 0:
            return self._mu_ref.copy()
        with np.errstate(divide="ignore", invalid="ignore"):
            L = np.where(observed > 0, np.log(np.where(observed > 0, observed, 1.0)), np.nan)
        return self._fit_offsets(L)

    def complete(self, observed: np.ndarray, scale_factors: np.ndarray, profiles: np.ndarray | None = None, *,
                 offsets: np.ndarray | None = None, matched: np.ndarray | None = None) -> np.ndarray:
        """Full throughput rows from measured values (see the module docstring).

        Parameters
        ----------
        observed : ndarray, shape (n, m)
            Measured throughputs (the moving averages), NaN where a type was not measured.
        scale_factors : ndarray, shape (n,)
            Gang sizes.
        profiles : ndarray, shape (n, m), optional
            Profiled or submitted throughputs, NaN where unknown (a row of NaN: no profile).
        offsets : ndarray, shape (m,), optional
            Per-type log offsets (:meth:`offsets`); default: from the reference only.
        matched : ndarray, shape (n, m), optional
            :meth:`match` of these rows, when the caller cached it (it depends on a row's own
            measurements only); default: computed here.

        Returns
        -------
        ndarray, shape (n, m)
            Measured entries as given; the others estimated; positive values clipped to
            :data:`hetsched.inputs.jobs.THROUGHPUT_RANGE`; 0 where a profile says the job cannot run.
        """
        obs = np.asarray(observed, dtype=float)
        n, m = obs.shape
        sf = np.asarray(scale_factors, dtype=float).reshape(-1)
        mu = self._mu_ref if offsets is None else np.asarray(offsets, dtype=float)
        out = np.full((n, m), np.nan)
        measured = ~np.isnan(obs)
        with np.errstate(divide="ignore", invalid="ignore"):
            Lobs = np.where(measured & (obs > 0), np.log(np.where(obs > 0, obs, 1.0)), np.nan)
        pos = ~np.isnan(Lobs)
        n_pos = pos.sum(axis=1)
        # 2. profiles (rescaled by the measured/profiled ratio)
        if profiles is not None:
            P = np.asarray(profiles, dtype=float)
            has = ~np.isnan(P).all(axis=1)
            with np.errstate(divide="ignore", invalid="ignore"):
                LP = np.where(P > 0, np.log(np.where(P > 0, P, 1.0)), np.nan)
                both = pos & ~np.isnan(LP)
                shift = np.where(both.any(axis=1), np.where(both, Lobs - LP, 0.0).sum(axis=1)
                                 / np.maximum(both.sum(axis=1), 1), 0.0)
                scaled = np.where(P > 0, P * np.exp(shift)[:, None], np.where(P == 0, 0.0, np.nan))
            out[has] = scaled[has]
        # 3. completion, where still unknown
        need = np.isnan(out)
        if need.any():
            if matched is None:
                matched = self.match(obs, sf)
            comp = self._complete_rows(Lobs, pos, n_pos, sf, mu)
            comp = np.where(np.isnan(matched), comp, matched)
            out = np.where(need, comp, out)
        lo, hi = THROUGHPUT_RANGE
        out = np.where(out > 0, np.clip(out, lo, hi), 0.0)
        return np.where(measured, np.where(obs > 0, np.clip(obs, lo, hi), lo), out)

    def _complete_rows(self, Lobs: np.ndarray, pos: np.ndarray, n_pos: np.ndarray, sf: np.ndarray,
                       mu: np.ndarray) -> np.ndarray:
        n, m = Lobs.shape
        L = np.full((n, m), np.nan)
        # no measurement: geometric mean of the reference rows with this gang size (or all)
        none = n_pos == 0
        if none.any():
            L[none] = self._prior_log(sf[none], mu)
        # one or more: per-type ratios (the level a_j = mean of log T - mu over measured types)
        some = ~none
        if some.any():
            a = np.where(pos[some], Lobs[some] - mu[None, :], 0.0).sum(axis=1) / n_pos[some]
            L[some] = a[:, None] + mu[None, :]
        return np.exp(L)

    def match(self, observed: np.ndarray, scale_factors: np.ndarray) -> np.ndarray:
        """Estimates from the reference match (``completion`` "nearest" or "lowrank") for rows
        measured on two or more types the reference has; NaN elsewhere (and for every row with
        ``completion="ratio"``). Depends on each row's own measurements only.

        Parameters
        ----------
        observed : ndarray, shape (n, m)
            Measured throughputs, NaN where unmeasured.
        scale_factors : ndarray, shape (n,)
        """
        obs = np.asarray(observed, dtype=float)
        n, m = obs.shape
        sf = np.asarray(scale_factors, dtype=float).reshape(-1)
        out = np.full((n, m), np.nan)
        if self.completion == "ratio" or self._ref_log.shape[0] < max(self.neighbours, 2) or n == 0:
            return out
        with np.errstate(divide="ignore", invalid="ignore"):
            Lobs = np.where(~np.isnan(obs) & (obs > 0), np.log(np.where(obs > 0, obs, 1.0)), np.nan)
        pos = ~np.isnan(Lobs) & self._ref_known[None, :]
        multi = pos.sum(axis=1) >= 2
        if not multi.any():
            return out
        known = np.flatnonzero(self._ref_known)
        for pattern in np.unique(pos[multi], axis=0):
            rows = np.flatnonzero(multi & (pos == pattern).all(axis=1))
            cols = np.flatnonzero(pattern)
            if self.completion == "nearest":
                est = self._nearest(Lobs[np.ix_(rows, cols)], cols, sf[rows])
            else:
                est = self._lowrank(Lobs[np.ix_(rows, cols)], cols)
            out[np.ix_(rows, known)] = np.exp(est[:, known])
        return out

    def _prior_log(self, sf: np.ndarray, mu: np.ndarray) -> np.ndarray:
        if self._ref_log.shape[0] == 0:
            return np.broadcast_to(mu, (sf.shape[0], mu.shape[0])).copy()
        out = np.empty((sf.shape[0], mu.shape[0]))
        overall = self._ref_log.mean(axis=0)
        fill = np.where(self._ref_known, overall, overall[self._ref_known].mean() + mu - mu[self._ref_known].mean())
        for s in np.unique(sf):
            sel = self._ref_sf == s
            row = self._ref_log[sel].mean(axis=0) if sel.any() else fill
            out[sf == s] = np.where(self._ref_known, row, fill)
        return out

    def _nearest(self, V: np.ndarray, cols: np.ndarray, sf: np.ndarray) -> np.ndarray:
        R = self._ref_log                                   # (r, m)
        d = R[None, :, cols] - V[:, None, :]                # (n, r, c)
        level = d.mean(axis=2)                              # (n, r)
        dist = ((d - level[:, :, None]) ** 2).sum(axis=2) + self.level_weight * level ** 2 \
            + self.scale_weight * (np.log2(self._ref_sf)[None, :] - np.log2(np.maximum(sf, 1.0))[:, None]) ** 2
        k = min(self.neighbours, R.shape[0])
        idx = np.argsort(dist, axis=1, kind="stable")[:, :k]   # (n, k)
        lvl = np.take_along_axis(level, idx, axis=1)           # (n, k)
        return (R[idx] - lvl[:, :, None]).mean(axis=1)

    def _lowrank(self, V: np.ndarray, cols: np.ndarray) -> np.ndarray:
        R = self._ref_log
        known = self._ref_known
        mu = R.mean(axis=0)
        C = R[:, known] - mu[known]
        C = C - C.mean(axis=1, keepdims=True)
        _, S, Vt = np.linalg.svd(C, full_matrices=False)
        v = np.zeros(R.shape[1])
        v[known] = Vt[0] * S[0] / math.sqrt(R.shape[0])
        A = np.stack([np.ones(cols.size), v[cols]], axis=1)         # (c, 2)
        G = A.T @ A + np.diag([1e-12, self.lowrank_ridge])
        x = np.linalg.solve(G, A.T @ (V - mu[cols]).T)              # (2, n)
        return mu[None, :] + x[0][:, None] + x[1][:, None] * v[None, :]


def holdout_errors(catalogue: ThroughputCatalogue, *, completions: Sequence[str] = ("ratio", "nearest", "lowrank"),
                   n_observed: Sequence[int] = (1, 2), **estimator_kwargs: Any) -> pd.DataFrame:
    """Leave-one-job-type-out errors of the estimator on a throughput table.

    For every job type, its rows are removed from the reference; for every row of it and
    every choice of ``n`` measured GPU types (exact values), the other types are estimated
    by each completion method. Zero entries (the job cannot run there) are neither measured
    nor scored.

    Returns
    -------
    DataFrame
        One row per (held-out row, measured set, target type, method): ``job_type``,
        ``scale_factor``, ``n_observed``, ``observed``, ``target``, ``completion``, ``true``,
        ``estimate``, ``log_error`` (``log(estimate / true)``).
    """
    types = catalogue.gpu_types
    T = np.asarray(catalogue.throughputs, dtype=float)
    records: list[dict[str, Any]] = []
    for held in pd.unique(catalogue.job_types):
        keep = np.flatnonzero(catalogue.job_types != held)
        ref = ThroughputCatalogue(catalogue.job_types[keep], catalogue.scale_factors[keep], types, T[keep])
        ests = {c: ThroughputEstimator(types, ref, completion=c, **estimator_kwargs) for c in completions}
        for r in np.flatnonzero(catalogue.job_types == held):
            avail = np.flatnonzero(T[r] > 0)
            for n in n_observed:
                for obs_set in itertools.combinations(avail.tolist(), n):
                    targets = [k for k in avail.tolist() if k not in obs_set]
                    if not targets:
                        continue
                    obs = np.full((1, len(types)), np.nan)
                    obs[0, list(obs_set)] = T[r, list(obs_set)]
                    for c, est in ests.items():
                        row = est.complete(obs, catalogue.scale_factors[r:r + 1])[0]
                        for k in targets:
                            records.append({"job_type": held, "scale_factor": int(catalogue.scale_factors[r]),
                                            "n_observed": n, "observed": "+".join(types[i] for i in obs_set),
                                            "target": types[k], "completion": c, "true": T[r, k],
                                            "estimate": row[k], "log_error": math.log(row[k] / T[r, k])})
    return pd.DataFrame.from_records(records)
