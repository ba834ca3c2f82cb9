r"""Certificates: an independent re-check of every allocation :func:`hetsched.solve` returns.

After a solve, :func:`certify` recomputes from ``X`` and the raw inputs alone (the JobSet's
arrays and the cluster's counts, prices and host capacities) the largest violation of each
constraint family and, where the policy's objective is a function of ``X``, the objective.
It shares no code with the formulations: everything below is written from the math in
``docs/formulations.md`` and the policies' docstrings, so a bug in a formulation helper
(coefficients, masks, aggregation, expansion of classes) is not repeated here.

Constraint families (all "largest violation", 0 when none; compared with ``tol``):

``finite``
    1 when a returned solution holds NaN or inf, else 0.
``nonnegative``
    :math:`\max(0, -\min X)`.
``rows``
    :math:`\max_j (\sum_k X_{jk} - 1)^+` (wall-clock time ``extra["time"]`` for allocation
    spaces).
``capacity``
    :math:`\max_k (\sum_j s_j X_{jk} - C_k)^+ / \max(1, C_k)`. Allocation spaces (space sharing,
    placement sensitivity): summed over ``extra["allocation_rows"]["gpus"]`` per type (a pair's
    gang counted once), not over ``X``, which is isolated-equivalent time. Sia: the *chosen*
    GPU counts of ``extra["configurations"]``.
``unusable``
    :math:`\max X_{jk}` where :math:`T_{jk} \le 0` or :math:`C_k < s_j` (negative entries count
    under ``nonnegative``). Sia: largest
    difference between ``X`` and the one-hot matrix of ``extra["configurations"]``.
``cpus`` / ``memory``
    When jobs state ``cpus_per_gpu`` / ``mem_per_gpu`` and the policy models host resources
    (LP policies; not ``isolated``, ``proportional``, ``fifo``, ``allox``, ``sia``):
    :math:`\max_k (\sum_j s_j d_j X_{jk} - R_k)^+ / \max(1, R_k)`, and :math:`X_{jk}` where
    one gang needs more than :math:`R_k`.
``slo``
    ``max_sum_throughput`` with ``slos`` (and ``use_slos``): largest shortfall
    :math:`(R_j/\mathrm{slo}_j - \mathrm{thr}_j)^+ / \max_k T_{jk}`, the fraction of time on the
    job's fastest type it still lacks (the scale its SLO row is solved on).
``closed_form``
    ``isolated`` / ``proportional``: largest difference from the closed form.
``bound``
    Objective against a bound the solver reported: ``finish_time_fairness``'s
    ``lower_bound`` (ρ may not be below it) and ``max_min_fairness``'s ``stage1_level``
    (stage 2 may not drop the minimum share below it); shortfall divided by ``max(1, |bound|)``
    (solvers hold rows to an absolute tolerance).

Objectives recomputed (relative tolerance ``tol``): ``max_min_fairness``,
``max_min_fairness_water_filling`` (minimum normalized share), ``hierarchical_max_min_fairness``
(minimum weighted entity share), ``max_sum_throughput`` (total (cost-normalized) throughput),
``min_makespan`` (makespan), ``finish_time_fairness`` (worst ρ), ``isolated``,
``proportional``, ``fifo`` (total throughput). Others (``allox``: JCT of a schedule, not of
``X``; ``drf``, ``gandiva_fair``, ``sia``; policies not registered here) say
"not checked" in :attr:`Certificate.objective_check`.

Examples
--------
>>> import hetsched as hs
>>> jobs = hs.JobSet([[4.0, 1.0], [2.0, 1.0]], gpu_types=["v100", "k80"])
>>> res = hs.solve("max_sum_throughput", jobs, hs.Cluster({"v100": 1, "k80": 1}))
>>> res.certificate.ok, res.certificate.objective_check
(True, 'agrees')
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..inputs.cluster import Cluster
from ..inputs.jobs import JobSet
from ..validation import check_instance

__all__ = ["DEFAULT_TOL", "FAILED_STATUS", "Certificate", "certify"]

#: Default tolerance: absolute for X entries and row sums, relative (to ``max(1, C)``) for
#: capacities, relative for objectives (that of ``tests/checker.py``).
DEFAULT_TOL = 1e-6

#: Status a result gets when its certificate fails (``success`` is then False).
FAILED_STATUS = "failed_certificate"

#: Policies whose objective this module recomputes.
OBJECTIVE_POLICIES = (
    "max_min_fairness", "max_min_fairness_water_filling", "hierarchical_max_min_fairness",
    "max_sum_throughput", "min_makespan", "finish_time_fairness", "isolated", "proportional", "fifo",
)

#: Policies that do not model host CPU / memory (closed forms, schedules, Sia's configurations).
NO_HOST_RESOURCES = ("isolated", "proportional", "fifo", "allox", "sia")

_NOT_CHECKED_WHY = {
    "allox": "AlloX's objective (average JCT) is a property of the schedule, not of X",
    "sia": "Sia's objective is over configurations and goodputs, not X (mip_gap recorded)",
    "drf": "DRF's dominant shares depend on user tickets; not recomputed",
    "gandiva_fair": "Gandiva_fair's value depends on user tickets and trades; not recomputed",
}

_RESOURCES = (("cpus_per_gpu", "cpus"), ("mem_per_gpu", "memory"))
_BOUND_KEYS = ("mip_gap", "lp_bound", "lp_gap", "lower_bound", "upper_bound", "stage1_level")


@dataclass(frozen=True, eq=False)
class Certificate:
    """An independent check of one allocation (see the module docstring).

    Attributes
    ----------
    ok : bool
        No violation above ``tol`` and the recomputed objective agrees (or is not checked).
    violations : dict
        Family -> largest violation (0.0 when none). Only the families that apply are present.
    objective_reported, objective_recomputed : float
        The result's objective and this module's (NaN when not checked).
    objective_check : str
        "agrees", "disagrees", "not checked: <why>" or "no solution".
    bounds : dict
        Solver-reported bounds / gaps found on the result (``mip_gap``, ``lp_bound``,
        ``lower_bound``, ``upper_bound``, ``stage1_level``), as given.
    tol : float
        Tolerance used.
    message : str
        What failed, or a one-line summary.
    seconds : float
        Time spent certifying.
    """

    ok: bool
    violations: dict[str, float] = field(default_factory=dict)
    objective_reported: float = float("nan")
    objective_recomputed: float = float("nan")
    objective_check: str = "not checked"
    bounds: dict[str, Any] = field(default_factory=dict)
    tol: float = DEFAULT_TOL
    message: str = ""
    seconds: float = 0.0

    @property
    def max_violation(self) -> float:
        """Largest violation over all families (0.0 when none were checked)."""
        return max(self.violations.values(), default=0.0)

    @property
    def failures(self) -> list[str]:
        """Families whose violation exceeds ``tol``."""
        return [k for k, v in self.violations.items() if not v <= self.tol]

    def __repr__(self) -> str:
        return (f"Certificate(ok={self.ok}, max_violation={self.max_violation:.3g}, "
                f"objective={self.objective_check!r})")


def _close(a: float, b: float, tol: float) -> bool:
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= tol * max(abs(a), abs(b)) + 1e-12


def _where_max(A: np.ndarray, mask: np.ndarray) -> float:
    """``max |A|`` over ``mask`` (0 when empty), one pass each way."""
    if not mask.any():
        return 0.0
    hi = float(np.max(A, where=mask, initial=0.0))
    lo = float(np.min(A, where=mask, initial=0.0))
    return max(hi, -lo)


#: Rows per block of :func:`_scan` (blocks of X and T stay in cache across its reductions).
SCAN_ROWS = 16384


def _scan(X: np.ndarray, T: np.ndarray, s: np.ndarray, wall: np.ndarray) -> tuple[np.ndarray, float, np.ndarray,
                                                                               float, np.ndarray]:
    """One blocked pass over X and T: row sums of ``wall``, ``min X``, ``s @ X``, the largest
    ``X[j,k]`` where ``T[j,k] <= 0``, and ``thr = (T * X).sum(1)``. Blocking keeps each block in
    cache for all five reductions (about twice as fast as five whole-array passes at 1e6 x 10)."""
    n, m = X.shape
    ones = np.ones(m)
    rows, thr, used = np.empty(n), np.empty(n), np.zeros(m)
    xmin, leak = np.inf, 0.0
    for a in range(0, n, SCAN_ROWS):
        b = min(n, a + SCAN_ROWS)
        x, t = X[a:b], T[a:b]
        rows[a:b] = wall[a:b] @ ones
        xmin = min(xmin, float(x.min()))
        used += s[a:b] @ x
        zero = t <= 0
        leak = max(leak, float(np.max(x, where=zero, initial=0.0)))
        thr[a:b] = np.einsum("ij,ij->i", t, x)
    return rows, xmin, used, leak, thr


def _unusable_gangs(X: np.ndarray, s: np.ndarray, C: np.ndarray, worst: float) -> float:
    """``max(worst, largest X[j,k] where C_k < s_j)``, column by column (few columns have any)."""
    for k in np.flatnonzero(C < s.max()):
        big = s > C[k]
        if big.any():
            worst = max(worst, float(X[big, k].max()))
    return max(0.0, worst)


def _rel_excess(used: np.ndarray, cap: np.ndarray) -> float:
    with np.errstate(invalid="ignore"):
        ex = (used - cap) / np.maximum(1.0, cap)
    ex = ex[~np.isnan(ex)]
    return float(max(0.0, ex.max())) if ex.size else 0.0


def _type_index(gpu_types: tuple[str, ...], labels: Any) -> np.ndarray:
    pos = {t: i for i, t in enumerate(gpu_types)}
    return np.array([pos.get(t, -1) if isinstance(t, str) else -1 for t in labels], dtype=np.int64)


def _proportional_reference(Tt: np.ndarray, C: np.ndarray) -> np.ndarray:
    total = C.sum()
    return Tt @ C / total if total > 0 else np.zeros(Tt.shape[0])


def _normalized_shares(X: np.ndarray, T: np.ndarray, s: np.ndarray, C: np.ndarray, aware: bool,
                       w: np.ndarray | None, thr: np.ndarray) -> np.ndarray:
    """``s_j thr~_j(X) / (w_j p_j)`` with ``thr~`` over T (aware; ``thr`` given) or 1[T > 0]."""
    Tt = T if aware else (T > 0).astype(float)
    p = _proportional_reference(Tt, C)
    if not aware:
        thr = np.einsum("ij,ij->i", Tt, X)
    denom = p if w is None else w * p
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denom > 0, s * thr / denom, 0.0)


def _isolated_reference(n: int, s: np.ndarray, C: np.ndarray) -> np.ndarray:
    """x_iso[j,k] = (C_k / n) / s_j (0 where C_k < s_j), rows divided by max(1, row sum)."""
    x = (C[None, :] / max(n, 1)) / s[:, None]
    x = np.where(C[None, :] >= s[:, None], x, 0.0)
    return x / np.maximum(1.0, x.sum(axis=1))[:, None]


def _objective(policy: str, params: Mapping[str, Any], X: np.ndarray, thr: np.ndarray, jobs: Any, cluster: Any,
               C: np.ndarray) -> float:
    T, s = jobs.throughputs, jobs.scale_factors.astype(float)
    if policy in ("max_min_fairness", "max_min_fairness_water_filling"):
        shares = _normalized_shares(X, T, s, C, bool(params.get("heterogeneity_aware", True)), jobs.weights,
                                    thr)
        return float(shares.min())
    if policy == "hierarchical_max_min_fairness":
        u = _normalized_shares(X, T, s, C, bool(params.get("heterogeneity_aware", True)), None, thr)
        labels, codes = np.unique(np.asarray(jobs.entities).astype(str), return_inverse=True)
        given = params.get("entity_weights") or {}
        wmap = {str(k): float(v) for k, v in given.items()}
        W = np.array([wmap.get(lab, 1.0) for lab in labels])
        return float((np.bincount(codes, weights=u, minlength=len(labels)) / W).min())
    if policy == "max_sum_throughput":
        if params.get("normalize_by_cost", False):
            price = cluster.price_vector(jobs.gpu_types, needed_by="certificate")
            return float(np.einsum("ij,ij->", T / price[None, :], X))
        return float(thr.sum())
    if policy == "min_makespan":
        with np.errstate(divide="ignore"):
            return float(np.max(jobs.steps_remaining / thr))
    if policy == "finish_time_fairness":
        R = jobs.steps_remaining
        t = jobs.field("time_since_start", 0.0)
        e = jobs.field("isolated_time_elapsed", 0.0)
        iso = np.einsum("ij,ij->i", T, _isolated_reference(jobs.n_jobs, s, C))
        with np.errstate(divide="ignore"):
            D = e + R / iso
            return float(((t + R / thr) / D).max())
    # isolated, proportional, fifo: total throughput
    return float(thr.sum())


def certify(policy: str, params: Mapping[str, Any], X: np.ndarray, jobs: Any, cluster: Any, *, status: str,
            objective: float, extra: Mapping[str, Any], tol: float = DEFAULT_TOL) -> Certificate:
    """Certificate of allocation ``X`` of ``jobs`` on ``cluster`` under ``policy`` (see module docstring).

    ``jobs`` and ``cluster`` are the inputs of :func:`hetsched.solve` (not aggregated);
    ``objective`` and ``extra`` are what the result reports.

    Raises
    ------
    ValidationError
        ``jobs`` is not a JobSet or ``cluster`` not a Cluster.
    """
    check_instance(jobs, "jobs", JobSet, "a hetsched.JobSet")
    check_instance(cluster, "cluster", Cluster, "a hetsched.Cluster")
    t0 = time.perf_counter()
    bounds = {k: extra[k] for k in _BOUND_KEYS if k in extra and extra[k] is not None}
    n, m = jobs.n_jobs, jobs.n_types
    X = np.asarray(X, dtype=float)
    early = _nothing_to_check(X, n, m, status, objective, bounds, tol, t0)
    if early is not None:
        return early
    T = jobs.throughputs
    s = jobs.scale_factors.astype(float)
    C = cluster.capacities(jobs.gpu_types).astype(float)
    space = "allocation_rows" in extra
    wall = np.asarray(extra["time"], dtype=float) if space and "time" in extra else X
    row_sums, xmin, used, leak, thr = _scan(X, T, s, wall)
    if not (np.isfinite(row_sums).all() and np.isfinite(thr).all() and np.isfinite(xmin)) and not np.isfinite(X).all():
        return _stamped(t0, ok=False, violations={"finite": 1.0}, objective_reported=float(objective),
                        bounds=bounds, tol=tol, message="X holds NaN or inf entries next to numbers")
    v: dict[str, float] = {"finite": 0.0}
    v["nonnegative"] = max(0.0, -xmin)
    v["rows"] = max(0.0, float(row_sums.max()) - 1.0)
    v["unusable"], used = _unusable_and_used(policy, extra, X, jobs, s, C, used, leak)
    v["capacity"] = _rel_excess(used, C)
    if policy not in NO_HOST_RESOURCES:
        v.update(_host_resources(X, jobs, cluster, s, wall))
    slo = _slo_shortfall(policy, params, jobs, T, thr)
    if slo is not None:
        v["slo"] = slo
    if policy in ("isolated", "proportional"):
        v["closed_form"] = _closed_form_gap(policy, X, T, s, C)
    reported = float(objective)
    recomputed, check, problems = _objective_check(policy, params, X, thr, jobs, cluster, C, reported, status, tol)
    bound = _bound_violation(policy, bounds, recomputed)
    if bound is not None:
        v["bound"] = bound
    return _verdict(v, problems, check, reported, recomputed, bounds, tol, t0)


def _stamped(t0: float, **fields: Any) -> Certificate:
    """A :class:`Certificate` of ``fields`` whose ``seconds`` run from ``t0`` to now."""
    return Certificate(**fields, seconds=time.perf_counter() - t0)


def _nothing_to_check(X: np.ndarray, n: int, m: int, status: str, objective: float, bounds: dict[str, Any],
                      tol: float, t0: float) -> Certificate | None:
    """The certificate of an ``X`` that cannot be checked entry by entry (no jobs, a wrong
    shape, or all NaN: no solution), else None."""
    if n == 0:
        return _stamped(t0, ok=True, objective_reported=float(objective), objective_check="no solution",
                        bounds=bounds, tol=tol, message="no jobs: nothing to check")
    if X.shape != (n, m):
        return _stamped(t0, ok=False, violations={"shape": float("inf")}, objective_reported=float(objective),
                        bounds=bounds, tol=tol, message=f"X has shape {X.shape}, expected {(n, m)}")
    if X.size and np.isnan(X.flat[0]) and np.isnan(X).all():
        return _stamped(t0, ok=True, objective_reported=float(objective), objective_check="no solution",
                        bounds=bounds, tol=tol, message=f"no solution to check (status {status!r})")
    return None


def _unusable_and_used(policy: str, extra: Mapping[str, Any], X: np.ndarray, jobs: Any, s: np.ndarray,
                       C: np.ndarray, used: np.ndarray, leak: float) -> tuple[float, np.ndarray]:
    """The ``unusable`` violation and the GPUs used per type. ``used`` and ``leak`` come from
    :func:`_scan` (``s @ X`` and the largest X where T <= 0); Sia counts its chosen
    configurations instead and allocation spaces their ``allocation_rows``."""
    n, m = X.shape
    if policy == "sia" and "configurations" in extra:
        cfg = extra["configurations"]
        k_of = _type_index(jobs.gpu_types, cfg["gpu_type"].tolist())
        gpus = np.asarray(cfg["gpus"].fillna(0), dtype=float)
        on = k_of >= 0
        used = np.bincount(k_of[on], weights=gpus[on], minlength=m)
        onehot = np.zeros((n, m))
        onehot[np.flatnonzero(on), k_of[on]] = 1.0
        return float(np.abs(X - onehot).max()), used
    if "allocation_rows" in extra:
        rows = extra["allocation_rows"]
        k_of = _type_index(jobs.gpu_types, rows["gpu_type"].tolist())
        used = np.bincount(k_of[k_of >= 0], weights=np.asarray(rows["gpus"], dtype=float)[k_of >= 0],
                           minlength=m)
    return _unusable_gangs(X, s, C, max(0.0, leak)), used


def _host_resources(X: np.ndarray, jobs: Any, cluster: Any, s: np.ndarray, wall: np.ndarray) -> dict[str, float]:
    """Violation per host resource (``cpus``, ``memory``) the jobs state and the cluster has:
    excess of ``s d @ wall`` over the hosts' totals, or X where one gang needs more than them."""
    out: dict[str, float] = {}
    for fname, rname in _RESOURCES:
        if not jobs.has(fname):
            continue
        R = cluster.resource_vector(rname, jobs.gpu_types)
        if R is None:
            continue
        need = s * np.asarray(jobs.field(fname), dtype=float)
        never = need[:, None] > R[None, :] * (1 + 1e-12)
        out[rname] = max(_rel_excess(need @ wall, R), _where_max(X, never))
    return out


def _slo_shortfall(policy: str, params: Mapping[str, Any], jobs: Any, T: np.ndarray,
                   thr: np.ndarray) -> float | None:
    """Largest SLO shortfall of throughputs ``thr`` (relative to each job's fastest type), or
    None when the policy and jobs have no SLO rows (only ``max_sum_throughput`` has them)."""
    if not (policy == "max_sum_throughput" and params.get("use_slos", True) and jobs.has("slos")
            and jobs.has("steps_remaining")):
        return None
    target = jobs.steps_remaining / jobs.slos
    best = T.max(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        short = np.where(best > 0, (target - thr) / best, 0.0)
    return max(0.0, float(short.max()))


def _closed_form_gap(policy: str, X: np.ndarray, T: np.ndarray, s: np.ndarray, C: np.ndarray) -> float:
    """Largest ``|X - reference|`` for ``isolated`` / ``proportional``, blocked as in :func:`_scan`."""
    n = X.shape[0]
    total = C.sum()
    frac = C / total * min(1.0, total / float(s.sum()))
    worst = 0.0
    for a in range(0, n, SCAN_ROWS):
        b = min(n, a + SCAN_ROWS)
        if policy == "isolated":
            ref = _isolated_reference(n, s[a:b], C) * (T[a:b] > 0)
        else:
            ref = np.where((T[a:b] > 0) & (C[None, :] >= s[a:b, None]), frac[None, :], 0.0)
        worst = max(worst, float(np.abs(X[a:b] - ref).max()))
    return worst


def _objective_check(policy: str, params: Mapping[str, Any], X: np.ndarray, thr: np.ndarray, jobs: Any,
                     cluster: Any, C: np.ndarray, reported: float, status: str,
                     tol: float) -> tuple[float, str, list[str]]:
    """Recompute the objective and compare it with ``reported``: returns ``(recomputed``
    (NaN when not checked), ``objective_check``, the problems found``)``. Never raises."""
    recomputed = float("nan")
    problems: list[str] = []
    if policy not in OBJECTIVE_POLICIES:
        why = _NOT_CHECKED_WHY.get(policy, f"no independent objective for policy {policy!r}")
        return recomputed, "not checked: " + why, problems
    try:
        recomputed = _objective(policy, params, X, thr, jobs, cluster, C)
    except Exception as exc:  # a certificate never raises: it reports
        return recomputed, f"not checked: recomputation failed ({type(exc).__name__}: {exc})", problems
    if math.isnan(reported):
        check = "agrees" if math.isnan(recomputed) or status != "optimal" else "disagrees"
        if check == "agrees" and not math.isnan(recomputed):
            check = f"not checked: no objective reported (status {status!r})"
    else:
        check = "agrees" if _close(reported, recomputed, tol) else "disagrees"
    if check == "disagrees":
        problems.append(f"objective reported {reported!r} but recomputed {recomputed!r}")
    return recomputed, check, problems


def _bound_violation(policy: str, bounds: Mapping[str, Any], recomputed: float) -> float | None:
    """Shortfall of the recomputed objective against a bound the solver reported
    (``finish_time_fairness``'s ``lower_bound``, ``max_min_fairness``'s ``stage1_level``),
    relative to ``max(1, |bound|)``; None when there is no such finite bound or no objective."""
    if math.isnan(recomputed):
        return None
    if policy == "finish_time_fairness" and isinstance(bounds.get("lower_bound"), (int, float)):
        lb = float(bounds["lower_bound"])
        if math.isfinite(lb):
            return max(0.0, (lb - recomputed) / max(1.0, abs(lb)))
    if policy == "max_min_fairness" and isinstance(bounds.get("stage1_level"), (int, float)):
        lvl = float(bounds["stage1_level"])
        if math.isfinite(lvl):  # stage 2 keeps share_j >= level (1 - 1e-9)
            return max(0.0, (lvl - 1e-9 * abs(lvl) - recomputed) / max(1.0, abs(lvl)))
    return None


def _verdict(v: dict[str, float], problems: list[str], check: str, reported: float, recomputed: float,
             bounds: dict[str, Any], tol: float, t0: float) -> Certificate:
    """The final certificate: violations ``v`` above ``tol`` come before the objective's
    ``problems`` in the message; ok when there are none."""
    bad = [k for k, val in v.items() if not val <= tol]
    problems = [f"{k} violated by {v[k]:.3g} (tol {tol:g})" for k in bad] + problems
    ok = not problems
    if ok:
        message = (f"certified: max violation {max(v.values()):.3g} over {len(v)} families; objective "
                   f"{check}")
    else:
        message = "certificate failed: " + "; ".join(problems)
    return _stamped(t0, ok=ok, violations=v, objective_reported=reported, objective_recomputed=recomputed,
                    objective_check=check, bounds=bounds, tol=tol, message=message)
