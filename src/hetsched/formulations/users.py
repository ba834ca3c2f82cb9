"""Users (owners of jobs) and their tickets, for user-level policies (Gandiva_fair, DRF).

A job's user is its ``JobSet.entities`` label; without entities every job is its own user,
labelled by its job id. Tickets (weights) come from a mapping user -> positive number, or
default to 1 per user (``jobs.weights`` when every job is its own user).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ..inputs.jobs import JobSet
from ..solvers.program import LinearProgram
from ..validation import check_mapping, check_positive
from .builder import AllocationVars, ProgramBuilder
from .common import add_base_rows

__all__ = ["UserGroups", "check_ticket_map", "user_groups", "user_type_rows", "within_user_program"]


class UserGroups:
    """Jobs grouped by user.

    Attributes
    ----------
    labels : ndarray of object, shape (n_users,)
        User labels, in order of first appearance.
    inverse : ndarray of int, shape (n_jobs,)
        User of each job (row of ``labels``).
    tickets : ndarray, shape (n_users,)
        Tickets (weights) of each user.
    """

    def __init__(self, labels: np.ndarray, inverse: np.ndarray, tickets: np.ndarray) -> None:
        self.labels = labels
        self.inverse = inverse
        self.tickets = tickets

    @property
    def n_users(self) -> int:
        """Number of users with at least one job."""
        return int(self.labels.shape[0])

    @property
    def share(self) -> np.ndarray:
        """Ticket share of each user: ``tickets / tickets.sum()``."""
        return self.tickets / self.tickets.sum()


def check_ticket_map(tickets: Any, name: str) -> dict[Any, float] | None:
    """Validate a user -> positive number mapping (None passes through)."""
    if tickets is None:
        return None
    check_mapping(tickets, name, rule="a mapping of user -> positive number")
    return {user: check_positive(value, f"{name}[{user!r}]", rule="a positive number")
            for user, value in tickets.items()}


def user_groups(jobs: JobSet, tickets: Mapping[Any, float] | None = None, *, name: str = "tickets",
                allow_absent: bool = False) -> UserGroups:
    """Group the jobs by user and attach tickets.

    Parameters
    ----------
    jobs : JobSet
        Users are ``jobs.entities`` (or the job ids when absent).
    tickets : Mapping[user, float], optional
        Positive tickets per user; must name every user that has jobs. Default: 1 per user,
        or ``jobs.weights`` when every job is its own user.
    name : str
        Argument name for error messages.
    allow_absent : bool, default False
        Whether ``tickets`` may name users with no job in ``jobs`` (they are ignored, their
        share goes to the others). False: such names are an error (likely a typo).

    Raises
    ------
    ValidationError
        Non-positive tickets; unknown users (unless ``allow_absent``); users without tickets.

    Examples
    --------
    >>> import hetsched as hs
    >>> jobs = hs.JobSet([[1.0], [1.0], [1.0]], gpu_types=["v100"], entities=["ann", "bob", "ann"])
    >>> g = user_groups(jobs, {"ann": 1.0, "bob": 3.0})
    >>> g.labels.tolist(), g.inverse.tolist(), g.share.tolist()
    (['ann', 'bob'], [0, 1, 0], [0.25, 0.75])
    """
    clean = check_ticket_map(tickets, name)
    ents = getattr(jobs, "entities", None)
    if ents is None:
        labels = np.asarray(jobs.ids, dtype=object)
        inverse = np.arange(jobs.n_jobs, dtype=np.int64)
        default = np.asarray(jobs.weights, dtype=float)
    else:
        codes, uniques = pd.factorize(pd.Series(np.asarray(ents, dtype=object)), sort=False)
        labels = np.asarray(uniques, dtype=object)
        inverse = codes.astype(np.int64)
        default = np.ones(labels.shape[0])
    if clean is None:
        return UserGroups(labels, inverse, default)
    known = set(labels.tolist())
    unknown = [u for u in clean if u not in known]
    if unknown and not allow_absent:
        raise ValidationError(
            f"`{name}` names user(s) {unknown[:5]} with no job in `jobs` (users: {sorted(map(str, known))[:10]}); "
            "fix the names, or pass allow_absent_users=True to ignore users that are idle."
        )
    missing = [u for u in labels.tolist() if u not in clean]
    if missing:
        raise ValidationError(f"`{name}` must give every user with jobs a ticket count; missing {missing[:5]}.")
    return UserGroups(labels, inverse, np.array([clean[u] for u in labels.tolist()], dtype=float))


def user_type_rows(b: ProgramBuilder, X: AllocationVars, g: UserGroups, per_job: np.ndarray, cap: np.ndarray) -> None:
    """Rows ``sum_{j in u} per_job_j X[j, k] <= cap[u, k]`` for the (user, type) pairs where the
    user's jobs could exceed the cap (each ``X[j, k] <= 1``; other rows cannot bind)."""
    m = cap.shape[1]
    vals = per_job[X.job]
    row = g.inverse[X.job] * m + X.gpu
    most = np.bincount(row, weights=vals, minlength=g.n_users * m)
    bind = np.flatnonzero(most > cap.ravel() * (1 + 1e-12))
    local = np.full(g.n_users * m, -1, dtype=np.int64)
    local[bind] = np.arange(bind.size)
    keep = (vals > 0) & (local[row] >= 0)
    b.add_rows(rows=local[row[keep]], cols=X.cols[keep], vals=vals[keep], lb=-np.inf, ub=cap.ravel()[bind],
               n_rows=int(bind.size))


def within_user_program(jobs: JobSet, cluster: Any, g: UserGroups, value: np.ndarray, gpus: np.ndarray,
                        floor: np.ndarray, *, slack: float = 1e-9, extra_rows: Any = None,
                        name: str = "within_users") -> LinearProgram:
    """Spread each user's GPUs over its jobs as evenly as possible (max-min of job values).

    .. math:: \\max \\sum_u t_u \\ \\text{s.t.}\\ v_j \\cdot X_j \\ge t_u\\ (j \\in u),\\
        \\sum_{j\\in u} s_j X_{jk} \\le G_{uk},\\ \\sum_{j\\in u} v_j \\cdot X_j \\ge F_u,\\ \\text{base rows}

    with ``value`` v (n, m), ``gpus`` G (users, types), ``floor`` F (users). Separable by
    user, so maximizing the sum maximizes every user's minimum. ``extra_rows(b, X)`` may add
    rows (e.g. dominant-share floors). ``meta["t"]``: index of ``t_0``.
    """
    cap = cluster.capacities(jobs.gpu_types)
    b = ProgramBuilder()
    usable = value > 0
    X = b.add_allocation(usable)
    t = b.add_vars(g.n_users, lb=0.0, ub=np.inf, cost=1.0)
    add_base_rows(b, X, jobs, cap, cluster=cluster)
    user_type_rows(b, X, g, jobs.scale_factors.astype(float), gpus * (1 + slack) + 1e-12)
    vals = value[X.job, X.gpu]
    b.add_rows(rows=g.inverse[X.job], cols=X.cols, vals=vals, lb=floor * (1 - slack), ub=np.inf, n_rows=g.n_users)
    live = np.flatnonzero(usable.any(axis=1))
    local = np.full(jobs.n_jobs, -1, dtype=np.int64)
    local[live] = np.arange(live.size)
    b.add_rows(rows=np.concatenate([local[X.job], np.arange(live.size)]),
               cols=np.concatenate([X.cols, t + g.inverse[live]]),
               vals=np.concatenate([vals, -np.ones(live.size)]), lb=0.0, ub=np.inf, n_rows=int(live.size))
    if extra_rows is not None:
        extra_rows(b, X)
    return b.build(sense="max", x_index=X.x_index, name=name, meta={"t": t})
