r"""A master's simplex basis carried from one column-generation round to the next.

Between two floor rounds the master keeps most of what it had: the master jobs only grow
(violators join), their variables only grow (new columns), the coupling rows stay; what
changes are the fixed jobs' group columns (regrouped at the new prices) and the
capacities left to the master. Rebuilt from scratch, a master of 20,000 jobs (46,000
variables, 42,000 rows) took 5 s of HiGHS IPX per round at 10^6 jobs although only 1,300
jobs had joined (max-min, hard family, docs/scaling.md).

:class:`MasterBasis` keeps the statuses of what outlives a round, keyed by job and type
rather than by column position: every master job variable, every master job's time and
floor row, every coupling row, and every group column and link row by its group's key
(:attr:`~.master.Aggregate.keys`: vertex, runner-up and price-ratio bin, so the same move
of the same kind of jobs). :func:`start_basis` maps them onto the next master's layout:
known entries keep their status, a new job's variables start nonbasic at 0 with its two
rows' slacks basic, a new group column starts nonbasic at 0 (its jobs at their vertices)
with its link row's slack basic. The count of basic variables then need not match the
rows (a group gone from one round to the next may have been basic); HiGHS accepts such an
"alien" basis and completes it to a nonsingular one with slack columns
(``HighsBasis.alien``). The basis only chooses where the simplex method starts: the
master's optimum, and so the certificate, does not depend on it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from ..program import LinearProgram
from .master import Aggregate
from .problem import SeparableProblem

__all__ = ["BASIC", "LOWER", "BasisMemo", "MasterBasis", "capture_basis", "start_basis"]

log = logging.getLogger(__name__)

#: ``highspy.HighsBasisStatus`` values (kLower, kBasic).
LOWER, BASIC = 0, 1


@dataclass
class MasterBasis:
    """Statuses of a solved floor master, keyed by job and type (int8, -1: not in it).

    Attributes
    ----------
    amb : ndarray (n_a,)
        The master jobs, sorted.
    x : ndarray (n_a, m)
        Status of each master job's variable on each type.
    time, floor : ndarray (n_a,)
        Status of each master job's time row and floor row.
    cap : ndarray (n_cap,)
        Status of each coupling row.
    groups, group_status : ndarray (G,)
        Keys of the group columns, sorted, and their statuses.
    links, link_status : ndarray (L,)
        Keys of the first column of each link row, sorted, and the rows' statuses.
    """

    amb: np.ndarray
    x: np.ndarray
    time: np.ndarray
    floor: np.ndarray
    cap: np.ndarray
    groups: np.ndarray
    group_status: np.ndarray
    links: np.ndarray
    link_status: np.ndarray


@dataclass
class BasisMemo:
    """The last solved master's basis (None before any, or after a master that ended
    without one)."""

    last: MasterBasis | None = None


def _keyed(keys: np.ndarray | None, status: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(keys, statuses) sorted by key (empty without keys)."""
    if keys is None or not keys.size:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int8)
    order = np.argsort(keys, kind="stable")
    return keys[order], status[order].astype(np.int8)


def _lookup(keys: np.ndarray, status: np.ndarray, want: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(positions in ``want`` whose key is in ``keys``, their statuses)."""
    if not keys.size or not want.size:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int8)
    pos = np.minimum(np.searchsorted(keys, want), keys.size - 1)
    hit = np.flatnonzero(keys[pos] == want)
    return hit, status[pos[hit]]


def _group_keys(agg: Aggregate | None) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Keys of the group columns and of each link row's first column (None without groups)."""
    if agg is None or agg.keys is None:
        return None, None
    links = agg.keys[agg.link[:, 0]] if agg.link is not None and agg.link.size else None
    return agg.keys, links


def capture_basis(P: SeparableProblem, amb: np.ndarray, lp: LinearProgram, maps: dict, agg: Aggregate | None,
                  col_status: np.ndarray, row_status: np.ndarray) -> MasterBasis:
    """The :class:`MasterBasis` of a floor master over jobs ``amb`` with group columns
    ``agg`` (the program ``lp`` and the maps of :func:`~.master.build_master`) from its
    column and row statuses."""
    n_a = maps["n_a"]
    x = np.full((n_a, P.m), -1, dtype=np.int8)
    on = lp.x_index >= 0
    x[on] = col_status[lp.x_index[on]]
    t0, base, lv_pos = maps["t_row0"], maps["base"], maps["lv_pos"]
    floor = np.full(n_a, -1, dtype=np.int8)
    has = lv_pos >= 0
    floor[has] = row_status[base + lv_pos[has]]
    cap = np.full(P.n_cap, -1, dtype=np.int8)
    cap[maps["cap_types"]] = row_status[: maps["n_cap"]]
    gk, lk = _group_keys(agg)
    g0, G = maps["g0"], maps["G"]
    groups = _keyed(gk, col_status[g0 : g0 + G])
    links = _keyed(lk, row_status[maps["n_cap"] : t0])
    return MasterBasis(amb=np.asarray(amb).copy(), x=x, time=row_status[t0 : t0 + n_a].astype(np.int8), floor=floor,
                       cap=cap, groups=groups[0], group_status=groups[1], links=links[0], link_status=links[1])


def start_basis(P: SeparableProblem, amb: np.ndarray, lp: LinearProgram, maps: dict, agg: Aggregate | None,
                prev: MasterBasis) -> tuple[np.ndarray, np.ndarray] | None:
    """(column statuses, row statuses) of the floor master ``lp`` over jobs ``amb`` with
    group columns ``agg`` started from the last round's basis ``prev`` (module docstring);
    an alien basis in general. None (start cold) when more jobs are new than the jobs and
    group columns the last master had."""
    col = np.full(lp.n_vars, LOWER, dtype=np.int8)
    row = np.full(lp.n_rows, BASIC, dtype=np.int8)
    n_a = maps["n_a"]
    pos = np.searchsorted(prev.amb, amb)
    pos_c = np.minimum(pos, max(prev.amb.size - 1, 0))
    known = (pos < prev.amb.size) & (prev.amb[pos_c] == amb) if prev.amb.size else np.zeros(n_a, dtype=bool)
    kj = np.flatnonzero(known)
    old = pos_c[kj]
    xi = lp.x_index[kj]
    st = prev.x[old]
    keep = (xi >= 0) & (st >= 0)
    col[xi[keep]] = st[keep]
    row[maps["t_row0"] + kj] = prev.time[old]
    lv = maps["lv_pos"][kj]
    fl = prev.floor[old]
    ok = (lv >= 0) & (fl >= 0)
    row[maps["base"] + lv[ok]] = fl[ok]
    cap_st = prev.cap[maps["cap_types"]]
    row[: maps["n_cap"]] = np.where(cap_st >= 0, cap_st, BASIC)
    gk, lk = _group_keys(agg)
    matched = kj.size
    if gk is not None:
        hit, st = _lookup(prev.groups, prev.group_status, gk)
        col[maps["g0"] + hit] = st
        matched += hit.size
    log.debug("structured master start: %d of %d jobs known, %d of %d group columns matched", kj.size, n_a,
              matched - kj.size, 0 if gk is None else gk.size)
    if n_a - kj.size > matched:
        # more new jobs than known jobs and group columns: the basis says little about the
        # master (max-min, hard family, 10^6 jobs: 18,841 jobs joining a master of 11,780
        # group columns took dual simplex 16.9 s from its basis, IPX 6.1 s cold)
        return None
    if lk is not None:
        hit, st = _lookup(prev.links, prev.link_status, lk)
        row[maps["n_cap"] + hit] = st
    return col, row
