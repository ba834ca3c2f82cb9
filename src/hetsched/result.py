"""Allocation: the frozen result of :func:`hetsched.solve`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .solvers.certificate import Certificate

__all__ = ["Allocation"]


@dataclass(frozen=True, eq=False)
class Allocation:
    """Result of :func:`hetsched.solve`, in the spirit of scipy's ``OptimizeResult``.

    Attributes
    ----------
    policy : str
        Policy name.
    params : dict
        Policy parameters as given.
    status : str
        "optimal", "infeasible", "unbounded", "time_limit", ... (see ``hetsched.solvers.STATUSES``),
        or "failed_certificate" when the solver's answer failed the independent re-check
        (:attr:`certificate`; the solver's own status is then in ``extra["solver_status"]``).
    success : bool
        ``status == "optimal"`` (False when the certificate failed).
    message : str
        What happened, in words (solver status, infeasible jobs, fallbacks).
    objective : float
        The policy's objective evaluated on ``X`` (NaN when there is no X).
    X : ndarray, shape (n_jobs, n_gpu_types)
        Fraction of time each job spends on each type; rows in job order, columns in
        ``gpu_types`` order. NaN everywhere when the solver returned no solution.
    job_ids : ndarray
        Job ids in row order.
    gpu_types : tuple of str
        Column labels.
    throughputs : ndarray
        The ``T`` the allocation was computed for (for ``effective_throughput``).
    solver : str
        Backend(s) used, comma-separated ("none" for closed-form policies).
    timings : dict
        Seconds: ``aggregate_s``, ``build_s``, ``solve_s``, ``total_s``.
    sizes : dict
        ``n_jobs``, ``n_classes`` (after aggregation), ``n_programs``, ``max_vars``, ``max_rows``.
    extra : dict
        Policy-specific information (e.g. ``infeasible_jobs``, ``mip_gap``, ``stage1_level``).
    certificate : Certificate or None
        Independent re-check of ``X`` (constraint violations per family, recomputed objective;
        see :mod:`hetsched.solvers.certificate`). Set by :func:`hetsched.solve`.
    """

    policy: str
    params: dict[str, Any]
    status: str
    success: bool
    message: str
    objective: float
    X: np.ndarray
    job_ids: np.ndarray
    gpu_types: tuple[str, ...]
    throughputs: np.ndarray
    solver: str
    timings: dict[str, float] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    certificate: Certificate | None = None

    @property
    def effective_throughput(self) -> np.ndarray:
        """``(T * X).sum(1)``: steps/s each job gets on average under X (NaN without X)."""
        return (self.throughputs * self.X).sum(axis=1)

    @property
    def has_solution(self) -> bool:
        """Whether X holds numbers (False when the solver returned no solution)."""
        return not bool(np.isnan(self.X).any()) if self.X.size else self.success

    def to_frame(self, *, snap: float | None = None) -> pd.DataFrame:
        """DataFrame indexed by job id: one column per GPU type plus ``effective_throughput``.

        Parameters
        ----------
        snap : float, optional
            Write entries of ``X`` within ``snap`` of 0 or of 1 as exactly 0 or 1 (and
            ``effective_throughput`` from those entries). Solvers stop within a tolerance, so
            an entry that is 0 in the optimum comes back as e.g. ``1.86e-09``; pass the
            certificate's tolerance (``res.certificate.tol``, 1e-6 by default: what the
            independent re-check accepts as 0) to write what the allocation means.
            ``python -m hetsched solve --out`` does. Default: X as the solver returned it.

        Examples
        --------
        >>> import hetsched as hs
        >>> res = hs.solve("max_min_fairness", hs.JobSet([[2.0, 1.0]], gpu_types=["v100", "k80"]),
        ...                hs.Cluster({"v100": 1, "k80": 1}))
        >>> res.to_frame(snap=res.certificate.tol).loc[0].tolist()   # job 0: all its time on the v100
        [1.0, 0.0, 2.0]
        """
        X = self.X
        if snap is not None:
            tol = float(snap)
            if not (tol >= 0 and np.isfinite(tol)):
                from .errors import ValidationError

                raise ValidationError(f"`snap` must be a finite tolerance >= 0; got {snap!r}.")
            X = np.where(np.abs(X) <= tol, 0.0, X)
            X = np.where(np.abs(X - 1.0) <= tol, 1.0, X)
        df = pd.DataFrame(X, index=pd.Index(self.job_ids, name="job_id"), columns=list(self.gpu_types))
        df["effective_throughput"] = (self.throughputs * X).sum(axis=1)
        return df

    def __repr__(self) -> str:
        n, m = self.X.shape
        cert = self.certificate
        if cert is None:
            shown = "none"
        elif cert.ok:
            shown = f"ok(max_violation={cert.max_violation:.2g}, objective {cert.objective_check.split(':')[0]})"
        else:
            shown = f"FAILED({', '.join(cert.failures) or 'objective'})"
        return (
            f"Allocation(policy={self.policy!r}, status={self.status!r}, objective={self.objective:.6g}, "
            f"X=<{n}x{m}>, solver={self.solver!r}, total_s={self.timings.get('total_s', float('nan')):.3f}, "
            f"certificate={shown})"
        )
