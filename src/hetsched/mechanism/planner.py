"""plan_round: X + history -> which jobs run on which GPU type this round.

:func:`plan_round_arrays` is the kernel; it runs these phases in order:

1. check the inputs: the options and history (:func:`_check_options`), then the arrays
   (:func:`~hetsched.mechanism.validation.check_allocation_arrays`);
2. align the share history to the rows and columns of X (:meth:`ShareHistory.aligned`);
3. "rounds" mode: order the entries of X by priority or claim, keeping only those still
   owed time unless work-conserving (:func:`_priority_entries`);
4. pack whole gangs into the GPUs of each type, with backfill or head-of-line blocking
   (:func:`_pack_entries`);
5. derive time shares, preemptions and migrations (:func:`_rounds_outcome`; "ideal" mode
   skips 3-4: :func:`_ideal_outcome`);
6. build the RoundPlan with its message, log lines and timing (:func:`_build_plan`).

:func:`plan_round` adapts an Allocation (or a plain X with a JobSet) to these arrays.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ..errors import ValidationError
from ..inputs.cluster import Cluster
from ..inputs.jobs import JobSet
from ..result import Allocation
from ..validation import check_bool, check_choice, check_instance, check_nonneg
from .history import ShareHistory, check_round_seconds
from .packing import greedy_pack, greedy_pack_blocking, greedy_pack_members
from .plan import MODES, RULES, RoundPlan
from .priority import priority_order
from .validation import as_id_array, check_allocation_arrays

__all__ = ["DEFAULT_ROUND_SECONDS", "plan_round", "plan_round_arrays"]

log = logging.getLogger(__name__)

#: Gavel's round length (seconds).
DEFAULT_ROUND_SECONDS = 360.0


def plan_round_arrays(
    X: Any,
    scale_factors: Any,
    capacities: Any,
    history: ShareHistory | None = None,
    *,
    job_ids: Any = None,
    gpu_types: Sequence[str],
    round_seconds: float = DEFAULT_ROUND_SECONDS,
    mode: str = "rounds",
    rule: str = "gavel",
    stickiness: float = 0.0,
    work_conserving: bool = True,
    tolerance: float = 1e-6,
    zero_tol: float = 1e-9,
    members: Any = None,
    backfill: bool = True,
    waiting: Any = None,
) -> RoundPlan:
    """Plan one round from plain arrays (the core; :func:`plan_round` adapts an Allocation).

    Parameters
    ----------
    X : array-like, shape (n_jobs, n_gpu_types)
        Target fraction of wall-clock time of each job on each type. Rows sum to at most
        1; per type ``sum_j s_j X[j, k] <= C_k``.
    scale_factors : array-like of int, shape (n_jobs,)
        Gang size ``s_j`` (GPUs a job uses at once; never split).
    capacities : array-like of int, shape (n_gpu_types,)
        Whole GPUs of each type (``Cluster.capacities(gpu_types)``).
    history : ShareHistory, optional
        What each job received so far (default: nothing). Jobs it knows that are not rows
        of ``X`` are dropped (the plan's message names them); rows it does not know start
        fresh. Columns are matched by GPU type name.
    job_ids : array-like, optional
        Unique id of each row (default ``0 .. n_jobs-1``); used to match the history.
    gpu_types : sequence of str
        Column labels of ``X``.
    round_seconds : float, default 360
        Length of the round being planned (Gavel: 360 s; Sia: 60 s); must be positive.
    mode : {"rounds", "ideal"}, default "rounds"
        "rounds": whole gangs on one type per job. "ideal": apply X exactly as fractions.
    rule : {"gavel", "deficit"}, default "gavel"
        Priority rule (see :mod:`hetsched.mechanism.priority`).
    stickiness : float, default 0
        Lease continuity: last round's type wins over another entry unless that one's
        priority is more than ``1 + stickiness`` times higher ("gavel"), or its deficit is
        more than ``stickiness`` rounds larger ("deficit"). 0 is Gavel's plain rule.
    work_conserving : bool, default True
        True (Gavel): GPUs left after every job that is owed time has been placed go to
        jobs with ``X[j, k] > 0`` that are already ahead, so a job may receive more than
        X when X leaves room. False: a job runs on a type only while it is owed time
        there at the end of the round (``X * (e + L) > received``); shares then converge
        to X from both sides, and GPUs may idle.
    tolerance : float, default 1e-6
        Slack for the row-sum and capacity checks of ``X``; ``inf`` disables them.
    zero_tol : float, default 1e-9
        Entries of X at or below it count as zero: the job never runs on that type (LP
        solvers return such noise; Gavel's rule would give it infinite priority).
    members : array-like of int, shape (n_jobs, 2), optional
        When the rows of X are *allocation rows* rather than jobs (space sharing, or one
        job's consolidated and unconsolidated rows), the member jobs of each row (-1 for
        "no second member"): rows sharing a member never run in the same round
        (:func:`~hetsched.mechanism.packing.greedy_pack_members`). ``scale_factors`` are
        then the rows' GPU counts.
    waiting : array-like of float, shape (n_jobs,), optional
        How long each row has waited (any unit; larger waits longer), the tie-break after the
        deficit. Default: the history's rounds waited since the job last ran (a job new to
        the history counts 0; a driver that knows arrival times passes seconds since the job
        last ran or arrived).
    backfill : bool, default True
        True (Gavel's ``_schedule_jobs_on_workers_helper``): a job whose gang does not fit
        is skipped and later, smaller jobs may run. False: the walk stops at the first job
        that fits none of its types (head-of-line blocking;
        :func:`~hetsched.mechanism.packing.greedy_pack_blocking`). Not with ``members``.

    Returns
    -------
    RoundPlan
        The round's assignment; record it with ``history.record(plan, seconds)``.

    Raises
    ------
    ValidationError
        Any rule above broken (the message names the argument, the rule and the value).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.5, 0.0], [0.5, 0.5], [0.0, 1.0]])
    >>> plan = plan_round_arrays(X, [1, 1, 1], [1, 2], gpu_types=["v100", "k80"])
    >>> plan.assignment.tolist()
    [0, 1, 1]
    """
    t0 = time.perf_counter()
    tolerance, zero_tol, stickiness, L, history = _check_options(
        history, tolerance, zero_tol, stickiness, round_seconds, mode, rule, work_conserving
    )
    X, s, cap, ids, types = check_allocation_arrays(
        X, scale_factors, capacities, job_ids, gpu_types, tolerance=tolerance, zero_tol=zero_tol
    )
    base = history.aligned(ids, types)
    if mode == "ideal":
        outcome = _ideal_outcome(X, zero_tol)
    else:
        ej, ek = _priority_entries(
            X, base, L, rule=rule, stickiness=stickiness, zero_tol=zero_tol,
            work_conserving=work_conserving, waiting=waiting,
        )
        assignment, passes = _pack_entries(ej, ek, s, cap, X.shape[0], backfill=backfill, members=members)
        outcome = _rounds_outcome(assignment, base.last_type, X.shape, passes)
    plan_s = time.perf_counter() - t0
    return _build_plan(
        outcome, base, history, ids=ids, types=types, s=s, cap=cap, mode=mode, rule=rule, L=L, plan_s=plan_s
    )


class _Outcome(NamedTuple):
    """What the round does, before it is wrapped in a RoundPlan."""

    assignment: np.ndarray
    time_share: np.ndarray
    preempted: np.ndarray
    migrated: np.ndarray
    passes: int


def _check_options(
    history: Any, tolerance: Any, zero_tol: Any, stickiness: Any, round_seconds: Any,
    mode: Any, rule: Any, work_conserving: Any,
) -> tuple[float, float, float, float, ShareHistory]:
    """Phase 1a: check the scalar options, then the history (the arrays come next).

    Returns ``(tolerance, zero_tol, stickiness, round_seconds, history)`` as clean values;
    a ``history`` of None becomes an empty one.
    """
    tolerance = check_nonneg(tolerance, "tolerance", allow_inf=True)
    zero_tol = check_nonneg(zero_tol, "zero_tol")
    stickiness = check_nonneg(stickiness, "stickiness")
    L = check_round_seconds(round_seconds)
    check_choice(mode, "mode", MODES)
    check_choice(rule, "rule", RULES)
    check_bool(work_conserving, "work_conserving")
    if history is None:
        history = ShareHistory.empty()
    check_instance(history, "history", ShareHistory, "a ShareHistory or None")
    return tolerance, zero_tol, stickiness, L, history


def _priority_entries(
    X: np.ndarray, base: Any, L: float, *, rule: str, stickiness: float, zero_tol: float,
    work_conserving: bool, waiting: Any,
) -> tuple[np.ndarray, np.ndarray]:
    """Phase 3: the entries ``(job row, type column)`` of X in priority order, best first.

    Takes the checked X, the aligned history ``base`` and the round length ``L``.
    ``waiting`` (the tie-break) defaults to the history's rounds waited. Without work
    conservation only entries still owed time are kept (:func:`priority_order`).
    """
    return priority_order(
        X, base.received, base.elapsed, base.last_type, L, rule=rule, stickiness=stickiness, zero_tol=zero_tol,
        work_conserving=work_conserving,
        waiting=base.rounds_waiting if waiting is None else _waiting(waiting, X.shape[0]),
        waited=base.seconds_waiting,
    )


def _pack_entries(
    ej: np.ndarray, ek: np.ndarray, s: np.ndarray, cap: np.ndarray, n: int, *, backfill: Any, members: Any,
) -> tuple[np.ndarray, int]:
    """Phase 4: place whole gangs by walking the sorted entries; ``(assignment, passes)``.

    ``backfill=True`` skips a gang that does not fit (:func:`greedy_pack`, or
    :func:`greedy_pack_members` when ``members`` names the jobs of allocation rows);
    False stops at the first job that fits none of its types (:func:`greedy_pack_blocking`).
    """
    check_bool(backfill, "backfill")
    if not backfill and members is not None:
        raise ValidationError("`backfill=False` is not supported with `members` (space-sharing rows).")
    if not backfill:
        return greedy_pack_blocking(ej, ek, s, cap, n), 1
    if members is None:
        return greedy_pack(ej, ek, s, cap, n)
    mem = np.asarray(members, dtype=np.int64)
    if mem.shape != (n, 2):
        raise ValidationError(f"`members` must have shape (n_rows, 2) = ({n}, 2); got {mem.shape}.")
    return greedy_pack_members(ej, ek, s, cap, mem), 1


def _rounds_outcome(
    assignment: np.ndarray, prev: np.ndarray, shape: tuple[int, int], passes: int
) -> _Outcome:
    """Phase 5 ("rounds" mode): one-hot time shares of ``assignment`` (of X's ``shape``),
    and the jobs preempted or migrated relative to last round's types ``prev``."""
    share = np.zeros(shape)
    run = assignment >= 0
    share[np.flatnonzero(run), assignment[run]] = 1.0
    ran = prev >= 0
    preempted = ran & (assignment != prev)
    migrated = preempted & run
    return _Outcome(assignment, share, preempted, migrated, passes)


def _ideal_outcome(X: np.ndarray, zero_tol: float) -> _Outcome:
    """Phase 5 ("ideal" mode): X applied exactly (entries at or below ``zero_tol`` as 0);
    no job is assigned a single type, preempted or migrated; no packing pass."""
    n = X.shape[0]
    share = np.where(X > zero_tol, X, 0.0)
    return _Outcome(
        np.full(n, -1, dtype=np.int64), share, np.zeros(n, dtype=bool), np.zeros(n, dtype=bool), 0
    )


def _build_plan(
    outcome: _Outcome, base: Any, history: ShareHistory, *, ids: np.ndarray, types: tuple[str, ...],
    s: np.ndarray, cap: np.ndarray, mode: str, rule: str, L: float, plan_s: float,
) -> RoundPlan:
    """Phase 6: the RoundPlan of ``outcome``, with its message and log lines.

    Takes the aligned history ``base`` (kept on the plan for :meth:`ShareHistory.record`),
    the history it came from, the checked arrays and options, and the planning time.
    """
    assignment, share, preempted, migrated, passes = outcome
    prev = base.last_type
    message = _message(ids.shape[0], base, assignment, s, cap, types, mode, passes)
    if base.dropped_ids.size:
        log.info("plan_round: dropped %d job(s) from the history: %s", base.dropped_ids.size,
                 base.dropped_ids[:5].tolist())
    log.debug("plan_round: %s (%.3f ms)", message, 1e3 * plan_s)
    return RoundPlan(
        job_ids=ids,
        gpu_types=types,
        scale_factors=s,
        capacities=cap,
        mode=mode,
        rule=rule,
        round_seconds=L,
        assignment=assignment,
        time_share=share,
        previous_type=prev,
        preempted=preempted,
        migrated=migrated,
        new_jobs=int((base.rows < 0).sum()),
        dropped_ids=base.dropped_ids,
        message=message,
        timings={"plan_s": plan_s},
        _base_version=history.version,
        _base=base,
    )


def _waiting(waiting: Any, n: int) -> np.ndarray:
    """``waiting`` as one finite float per row of X (the priorities' tie-break)."""
    w = np.asarray(waiting, dtype=float)
    if w.shape != (n,) or not np.isfinite(w).all():
        raise ValidationError(f"`waiting` must hold one finite number per row of X ({n}); got shape {w.shape}.")
    return w


def _message(
    n: int, base: Any, assignment: np.ndarray, s: np.ndarray, cap: np.ndarray,
    types: tuple[str, ...], mode: str, passes: int,
) -> str:
    """The plan's message: who runs, GPUs used, new and dropped jobs and types."""
    parts = []
    if mode == "ideal":
        parts.append(f"ideal mode: {n} job(s) receive X exactly")
    else:
        run = assignment >= 0
        used = np.bincount(assignment[run], weights=s[run], minlength=len(types)).astype(int)
        parts.append(
            f"{int(run.sum())} of {n} job(s) run; GPUs used "
            + ", ".join(f"{t} {u}/{c}" for t, u, c in zip(types, used, cap))
            + f" ({passes} packing pass(es))"
        )
    new = int((base.rows < 0).sum())
    if new:
        parts.append(f"{new} job(s) new to the history")
    if base.dropped_ids.size:
        shown = base.dropped_ids[:5].tolist()
        more = "" if base.dropped_ids.size <= 5 else f" and {base.dropped_ids.size - 5} more"
        parts.append(
            f"dropped {base.dropped_ids.size} job(s) from the history that are not in the allocation: "
            f"{shown}{more}"
        )
    if base.dropped_types:
        parts.append(f"dropped history columns of GPU types not in the allocation: {base.dropped_types}")
    return "; ".join(parts)


def plan_round(
    allocation: Allocation | np.ndarray,
    history: ShareHistory | None = None,
    cluster: Cluster | None = None,
    *,
    jobs: JobSet | None = None,
    scale_factors: Any = None,
    job_ids: Any = None,
    gpu_types: Sequence[str] | None = None,
    **options: Any,
) -> RoundPlan:
    """Plan one round: which jobs run, on which GPU type, with whole gangs.

    A thin adapter over :func:`plan_round_arrays`: it reads X, job ids and GPU types from
    an :class:`~hetsched.Allocation` (or takes a plain X array), gang sizes from ``jobs``
    or ``scale_factors``, and capacities from ``cluster.capacities(gpu_types)``.

    Parameters
    ----------
    allocation : Allocation or array-like of shape (n_jobs, n_gpu_types)
        The allocation to follow. The mechanism keeps using it until the caller hands in a
        new one (see :meth:`ShareHistory.reset` and :func:`carve_shares`).
    history : ShareHistory, optional
        What each job received so far (default: nothing).
    cluster : Cluster
        GPU counts; every GPU type the allocation names is scheduled (types the cluster
        lacks have capacity 0).
    jobs : JobSet, optional
        Supplies gang sizes (and, for a plain X, ids and GPU types). Its ids must match the
        allocation's.
    scale_factors : array-like of int, optional
        Gang sizes, when ``jobs`` is not given. Required with an Allocation (it does not
        carry them); default 1 for a plain X.
    job_ids, gpu_types : optional
        Row ids and column labels of a plain X (default: from ``jobs``; ids ``0..n-1``;
        GPU types: the cluster's, when X has as many columns).
    **options
        ``round_seconds``, ``mode``, ``rule``, ``stickiness``, ``work_conserving``,
        ``tolerance``, ``zero_tol``
        (see :func:`plan_round_arrays`).

    Returns
    -------
    RoundPlan

    Raises
    ------
    ValidationError
        Bad input; see :func:`plan_round_arrays`.

    Examples
    --------
    >>> import hetsched as hs
    >>> from hetsched.mechanism import ShareHistory, plan_round
    >>> cluster = hs.Cluster({"v100": 1, "k80": 1})
    >>> jobs = hs.JobSet([[2.0, 1.0], [2.0, 1.0]], gpu_types=["v100", "k80"])
    >>> alloc = hs.solve("max_min_fairness", jobs, cluster)
    >>> history = ShareHistory.empty()
    >>> for _ in range(4):
    ...     plan = plan_round(alloc, history, cluster, jobs=jobs)
    ...     history = history.record(plan, 360.0)
    >>> history.share_error(alloc.X) < 1e-9
    True
    """
    check_instance(cluster, "cluster", Cluster, "a hetsched.Cluster")
    check_instance(jobs, "jobs", JobSet, "a hetsched.JobSet", allow_none=True)
    if jobs is not None and scale_factors is not None:
        raise ValidationError("give `jobs` or `scale_factors`, not both.")
    if isinstance(allocation, Allocation):
        X, ids, types, scale_factors = _read_allocation(allocation, jobs, scale_factors, job_ids, gpu_types)
    else:
        X, ids, types, scale_factors = _read_plain_x(allocation, cluster, jobs, scale_factors, job_ids, gpu_types)
    types = tuple(types)
    _check_option_names(options)
    return plan_round_arrays(
        X, scale_factors, cluster.capacities(types), history, job_ids=ids, gpu_types=types, **options
    )


def _read_allocation(
    allocation: Allocation, jobs: JobSet | None, scale_factors: Any, job_ids: Any, gpu_types: Any,
) -> tuple[np.ndarray, np.ndarray, tuple[str, ...], Any]:
    """``(X, job_ids, gpu_types, scale_factors)`` of a solved Allocation for :func:`plan_round`.

    Gang sizes come from ``jobs`` (whose ids must match), else ``scale_factors``, else the
    allocation itself; ids and types must not be passed again.
    """
    if job_ids is not None or gpu_types is not None:
        raise ValidationError("`job_ids` and `gpu_types` come from the Allocation; do not pass them too.")
    if not allocation.has_solution:
        raise ValidationError(
            f"`allocation` has no solution to follow (status {allocation.status!r}: {allocation.message})."
        )
    X, ids, types = allocation.X, allocation.job_ids, allocation.gpu_types
    if jobs is not None:
        _check_same_ids(jobs.ids, ids)
        scale_factors = jobs.scale_factors
    elif scale_factors is None:
        scale_factors = getattr(allocation, "scale_factors", None)
        if scale_factors is None:
            raise ValidationError(
                "`scale_factors` (or `jobs`) is required with an Allocation: it does not carry gang sizes."
            )
    return X, ids, types, scale_factors


def _read_plain_x(
    X: Any, cluster: Cluster, jobs: JobSet | None, scale_factors: Any, job_ids: Any, gpu_types: Any,
) -> tuple[Any, Any, Any, Any]:
    """``(X, job_ids, gpu_types, scale_factors)`` of a plain X for :func:`plan_round`.

    Missing ids, types and gang sizes come from ``jobs``; GPU types otherwise from the
    cluster, when X has as many columns as it has types.
    """
    ids = job_ids
    types = gpu_types
    if jobs is not None:
        if ids is None:
            ids = jobs.ids
        else:
            _check_same_ids(jobs.ids, as_id_array(ids))
        if types is None:
            types = jobs.gpu_types
        scale_factors = jobs.scale_factors
    if types is None:
        ncols = np.shape(X)[1] if np.ndim(X) == 2 else None
        if ncols != len(cluster.gpu_types):
            raise ValidationError(
                f"`gpu_types` is required for a plain X whose {ncols} column(s) do not match the "
                f"cluster's {len(cluster.gpu_types)} types {list(cluster.gpu_types)}."
            )
        types = cluster.gpu_types
    return X, ids, types, scale_factors


def _check_option_names(options: dict[str, Any]) -> None:
    """Refuse ``**options`` of :func:`plan_round` that :func:`plan_round_arrays` does not take."""
    known = {name for name, par in inspect.signature(plan_round_arrays).parameters.items()
             if par.kind is inspect.Parameter.KEYWORD_ONLY and name not in ("job_ids", "gpu_types")}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValidationError(f"`options` of plan_round must be among {sorted(known)}; got unknown {unknown}.")


def _check_same_ids(expected: np.ndarray, got: np.ndarray) -> None:
    if expected.shape != got.shape or not np.array_equal(expected, got):
        raise ValidationError(
            f"`jobs` must list the allocation's jobs in the same order; got ids "
            f"{expected[:5].tolist()}... for an allocation with {got[:5].tolist()}..."
        )
