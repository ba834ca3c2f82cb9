r"""Link sharing between servers: max-min fair shares and the slowdown they cause.

Jobs whose gangs span servers talk over the servers' uplinks (NIC to rack switch) and, when
they span racks, over the racks' uplinks to the spine (CASSINI, Rajasekaran et al., NSDI'24,
§2: jobs that share a congested link slow each other down). This module is the documented
contention model the simulator uses.

Model (a fluid, time-averaged one)
----------------------------------
A spread job :math:`j` with communication intensity :math:`c_j \in [0, 1]` (the share of its
step time it spends communicating when it has the network to itself) offers an average load

.. math:: a_j = c_j \, p_j, \qquad p_j = \min_{\text{servers } s \text{ of } j} u_s,

on every link it crosses, :math:`u_s` the server uplink bandwidth (it sends at its NIC's speed
a share :math:`c_j` of the time). Links :math:`\ell` have capacity :math:`C_\ell`. The
allocation :math:`x` is the max-min fair one with demands as caps (progressive filling,
Bertsekas & Gallager, *Data Networks*, §6.5.2): raise every unfrozen job's :math:`x_j` at the
same pace; freeze a job when it reaches :math:`a_j` or when a link it crosses fills. A job
progresses in proportion to the bytes it moves, so its rate is scaled by

.. math:: f_j = x_j / a_j \in (0, 1] \quad (f_j = 1 \text{ when } a_j = 0).

When the loads on every link fit (:math:`\sum_{j \ni \ell} a_j \le C_\ell`) nobody slows
down: the model assumes jobs' communication phases interleave, the best case CASSINI's
time-shifting aims for. When they do not fit, a job's slowdown is its share of the overload
as if it were bandwidth-bound, an upper bound on the slowdown of a job that overlaps compute
with communication.

Hand-checked case (``tests/test_network_aware.py``): one link of 10 GB/s, loads 8, 4, 2.
Equal shares 10/3 exceed 2, so the third job gets 2; the other two split the remaining 8 as 4
and 4; the second is then at its load. :math:`x = (4, 4, 2)`, :math:`f = (0.5, 1, 1)`.
"""

from __future__ import annotations

import logging

import numpy as np
import scipy.sparse as sp

from ..errors import ValidationError

__all__ = ["max_min_shares", "spread_links"]

log = logging.getLogger(__name__)

#: Relative tolerance under which a link counts as full / a job as at its demand.
_TOL = 1e-12


def max_min_shares(incidence: sp.spmatrix | np.ndarray, demand: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Max-min fair rates with demands as caps (progressive filling).

    Parameters
    ----------
    incidence : sparse or dense matrix, shape (n_flows, n_links)
        Non-zero where flow ``j`` crosses link ``l``.
    demand : ndarray of float, shape (n_flows,)
        Each flow's cap (its offered load), non-negative and finite.
    capacity : ndarray of float, shape (n_links,)
        Each link's capacity, positive and finite.

    Returns
    -------
    ndarray of float, shape (n_flows,)
        ``x`` with ``0 <= x <= demand`` and ``incidence.T @ x <= capacity``.

    Examples
    --------
    >>> max_min_shares(np.ones((3, 1)), np.array([8.0, 4.0, 2.0]), np.array([10.0])).tolist()
    [4.0, 4.0, 2.0]
    """
    A = sp.csr_matrix(incidence, dtype=np.float64)
    A.data[:] = 1.0
    d = np.asarray(demand, dtype=np.float64)
    cap = np.asarray(capacity, dtype=np.float64)
    n, m = A.shape
    if d.shape != (n,) or cap.shape != (m,):
        raise ValidationError(f"`demand` must have shape ({n},) and `capacity` ({m},); got {d.shape} and {cap.shape}.")
    if np.any(~np.isfinite(d) | (d < 0)):
        raise ValidationError(f"`demand` must be finite and >= 0; got {d[~np.isfinite(d) | (d < 0)][0]!r}.")
    if np.any(~np.isfinite(cap) | (cap <= 0)):
        raise ValidationError(f"`capacity` must be positive and finite; got {cap[~np.isfinite(cap) | (cap <= 0)][0]!r}.")
    AT = A.T.tocsr()
    x = np.zeros(n)
    active = d > 0
    left = cap.copy()
    for _ in range(n + m + 1):   # every pass freezes a flow or fills a link
        if not active.any():
            break
        users = AT @ active.astype(np.float64)             # active flows per link
        on = users > 0
        inc_link = np.min(left[on] / users[on]) if on.any() else np.inf
        inc = min(inc_link, float(np.min(d[active] - x[active])))
        x[active] += inc
        left -= inc * users
        full = on & (left <= _TOL * cap)
        left[full] = 0.0
        blocked = (A @ full.astype(np.float64)) > 0
        active &= ~blocked & (x < d * (1 - _TOL))
    else:  # pragma: no cover - the loop bound is a proof, not a fallback
        raise AssertionError("progressive filling did not finish")
    return np.minimum(x, d)


def spread_links(job_servers: list[np.ndarray], server_rack: np.ndarray, n_servers: int, n_racks: int,
                 server_uplink_gb_s: float, rack_uplink_gb_s: float | None) -> tuple[sp.csr_matrix, np.ndarray]:
    """The links spread jobs cross: ``(incidence, capacity)``.

    Links ``0..n_servers-1`` are server uplinks (``server_uplink_gb_s`` each); with
    ``rack_uplink_gb_s``, links ``n_servers + r`` are rack uplinks, crossed by jobs that span
    more than one rack. A job on one server crosses nothing.

    Parameters
    ----------
    job_servers : list of ndarray of int
        The distinct servers of each job.
    server_rack : ndarray of int
        Rack of each server.
    """
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    for j, srv in enumerate(job_servers):
        if srv.size < 2:
            continue
        links = srv
        if rack_uplink_gb_s is not None:
            racks = np.unique(server_rack[srv])
            if racks.size > 1:
                links = np.concatenate([srv, n_servers + racks])
        rows.append(np.full(links.size, j))
        cols.append(links)
    n_links = n_servers + (n_racks if rack_uplink_gb_s is not None else 0)
    r = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    c = np.concatenate(cols) if cols else np.zeros(0, np.int64)
    A = sp.csr_matrix((np.ones(r.size), (r, c)), shape=(len(job_servers), n_links))
    cap = np.full(n_links, float(server_uplink_gb_s))
    if rack_uplink_gb_s is not None:
        cap[n_servers:] = float(rack_uplink_gb_s)
    return A, cap
