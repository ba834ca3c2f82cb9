r"""Priorities of (job, type) entries and the order in which the greedy packer walks them.

Gavel's rule (``rule="gavel"``)
-------------------------------
With :math:`e_j` the seconds job :math:`j` has been in the allocation since its shares
were reset and :math:`r_{jk}` the seconds it ran on type :math:`k` in that time,

.. math::

    \text{priority}_{jk} = \frac{X_{jk}}{r_{jk} / e_j} = \frac{X_{jk}\, e_j}{r_{jk}}
    \quad(+\infty \text{ when } r_{jk} = 0),

i.e. the time the job should have had on the type over the time it had: above 1 means
behind. The tie-break is the *claim at the end of this round*,
:math:`X_{jk}(\max(e_j, w_j) + L) - r_{jk}`, with :math:`w_j` the seconds the job has
waited since it last ran, kept across share resets (:attr:`ShareHistory.seconds_waiting`).
Without a reset since the job last ran :math:`w_j \le e_j` and this is Gavel's deficit
:math:`X_{jk}(e_j + L) - r_{jk}`; after a full reset it differs only for a job that has
not run since and was already waiting before, whose entries are all :math:`+\infty`:
among those, the claim grows with the wait, so a job with a small :math:`X` that keeps
waiting outranks jobs with a larger :math:`X` that just ran. (Measured only over
:math:`e_j`, every reset restarted the wait and, with a reset every round, a smaller row
could lose every round: it starved. ``docs/mechanism.md`` proves a bound on the wait.)
Next comes *how long the job has waited* (longest first: seconds since it last ran or
arrived when the caller passes ``waiting``, else the rounds waited since it last ran),
then the entry order (job row, then type column), which makes the plan deterministic.
Priorities and claims are compared at :data:`TIE_DECIMALS` decimals (claims in rounds), so
that solver noise in X (an interior-point solution gives symmetric jobs X equal to 1e-9)
does not decide ties.
Only entries with :math:`X_{jk} > \text{zero\_tol}` exist.
Lease continuity multiplies the priority of the type a job ran on last round by
:math:`1 + \text{stickiness}`.

Gavel normalizes :math:`r_{jk}` by the total time of *type* :math:`k` (not by the job's
own time); within one type both orders agree, across types ours compares like with like
and lets a job that arrives later start from its own arrival.

Largest deficit first (``rule="deficit"``)
------------------------------------------
The key is the claim at the end of the round in units of rounds,
:math:`(X_{jk}(\max(e_j, w_j) + L) - r_{jk}) / L`, plus ``stickiness`` on last round's
type; ties by :math:`X_{jk}`, then rounds waited, then entry order. It keeps every job
close to its share in absolute time (no :math:`+\infty` for never-served entries), which
converges with a smaller constant.

In numpy::

    jj, kk = np.nonzero(X > zero_tol)
    x, r, e = X[jj, kk], received[jj, kk], elapsed[jj]
    prio = np.where(r > 0, x * e / r, np.inf)
    deficit = (x * (np.maximum(e, waited[jj]) + L) - r) / L   # claim, in rounds
    order = np.lexsort((-waiting[jj], -deficit.round(6), -prio.round(6)))  # stable: entry order last
    # (``prio`` rounded where finite; np.round keeps inf)
"""

from __future__ import annotations

import numpy as np

__all__ = ["TIE_DECIMALS", "priority_order"]

#: Decimals at which priorities and deficits (in rounds) are compared: closer values tie.
TIE_DECIMALS = 6


def priority_order(
    X: np.ndarray,
    received: np.ndarray,
    elapsed: np.ndarray,
    last_type: np.ndarray,
    round_seconds: float,
    *,
    rule: str,
    stickiness: float,
    zero_tol: float,
    work_conserving: bool = True,
    waiting: np.ndarray | None = None,
    waited: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Entries ``(job row, type column)`` with ``X > zero_tol``, best first.

    Parameters
    ----------
    X : ndarray, shape (n_jobs, n_gpu_types)
        Target time fractions.
    received : ndarray, shape (n_jobs, n_gpu_types)
        Seconds received per job and type since the last share reset.
    elapsed : ndarray, shape (n_jobs,)
        Seconds since each job's last share reset (or arrival).
    last_type : ndarray of int, shape (n_jobs,)
        Type column each job ran on last round, -1 if none.
    round_seconds : float
        Length ``L`` of the round being planned.
    rule : {"gavel", "deficit"}
        Priority rule (see the module docstring).
    stickiness : float
        Lease-continuity bonus for last round's type.
    zero_tol : float
        Entries at or below it count as zero (never scheduled).
    work_conserving : bool, default True
        False keeps only entries still owed time at the end of the round
        (``X * (e + L) - r > 0``): no job runs ahead of its share, GPUs may idle.
    waiting : ndarray of int, shape (n_jobs,), optional
        Rounds each job has waited (tie-break: longest first); default all 0.
    waited : ndarray, shape (n_jobs,), optional
        Seconds each job has waited since it last ran, kept across share resets
        (:attr:`ShareHistory.seconds_waiting`); the deficit is measured over
        ``max(elapsed, waited)``. Default all 0 (the deficit over ``elapsed`` alone).

    Returns
    -------
    entry_job, entry_type : ndarray of int64
        Sorted entries, best first.
    """
    jj, kk = np.nonzero(X > zero_tol)
    x = X[jj, kk]
    r = received[jj, kk]
    e = elapsed[jj]
    claim = e if waited is None else np.maximum(e, np.asarray(waited, dtype=float)[jj])
    deficit = x * (claim + round_seconds) - r
    if not work_conserving:
        owed = deficit > 0
        jj, kk, x, r, e, deficit = jj[owed], kk[owed], x[owed], r[owed], e[owed], deficit[owed]
    sticky = last_type[jj] == kk
    w = np.zeros(jj.shape[0]) if waiting is None else np.asarray(waiting, dtype=float)[jj]
    d = np.round(deficit / round_seconds, TIE_DECIMALS)
    if rule == "gavel":
        with np.errstate(divide="ignore", invalid="ignore"):
            prio = np.where(r > 0, x * e / r, np.inf)
        if stickiness > 0:
            prio = np.where(sticky, prio * (1.0 + stickiness), prio)
        order = np.lexsort((-w, -d, -np.round(prio, TIE_DECIMALS)))
    else:
        key = d
        if stickiness > 0:
            key = np.where(sticky, key + stickiness, key)
        order = np.lexsort((-w, -np.round(x, TIE_DECIMALS), -key))
    return jj[order].astype(np.int64), kk[order].astype(np.int64)
