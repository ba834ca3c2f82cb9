r"""Muri (Zhao et al., "Multi-Resource Interleaving for Deep Learning Training", SIGCOMM 2022):
group up to four jobs that use storage, CPU, GPU and network in turn, and schedule the groups.

The interleaving model (phases, cycle, efficiency) is :mod:`hetsched.schedulers.interleaving`
(§3 of the paper). Each round this scheduler

1. **orders** the active jobs by priority (§5): ``"srsf"`` (Muri-S, durations known):
   least remaining service first, remaining steps / best throughput x GPUs; ``"las"``
   (Muri-L, durations unknown): least attained service first, GPU-seconds received so far
   (a member of a group of :math:`k` receives :math:`1/k` of its GPUs' time); ties by arrival;
2. **selects** the candidates, the jobs in that order while their GPUs add up to at most
   ``max_group`` x the cluster's GPUs (every GPU can hold a group of ``max_group``; Muri's
   simulator picks jobs the same way);
3. **groups** the candidates of each gang size by repeated maximum-weight matching (§4.1,
   Edmonds' blossom algorithm, :func:`networkx.max_weight_matching`): first jobs into pairs,
   then the units (pairs and jobs left alone) into groups of up to ``max_group``. An edge
   between two units weighs the interleaving efficiency :math:`\gamma` of their union, and
   exists only when the union's cycle is shorter than running its members one after
   another, :math:`C < \sum_j T_j` (:math:`R\gamma > 1`), and interleaving slows no
   member below what time slicing would give it, :math:`C \le k\,T_j` for every member
   (Muri's code checks this for the highest-priority member only; we ask it of all, which
   also makes an edge's weight depend on the jobs' phases alone). Matched units merge, most
   efficient first, only while the candidates demand more GPUs than the cluster has (Muri
   packs to fit the selected jobs, not for its own sake). Up to ``exact_limit`` units the
   matching is Edmonds' (each unit keeping its ``candidates`` best edges); above, it is
   greedy by weight over classes of interchangeable units (equal phases and usable types),
   at least half the maximum weight;
4. **runs** the groups in the order of their best member, each on the fastest GPU type (for
   its best member) that has room for its gang and that every member can use, skipping
   groups that do not fit (smaller ones later may).

A group of :math:`k \ge 2` jobs on :math:`g` GPUs of type :math:`t` is returned as :math:`k`
rows with one ``group`` number (:class:`~hetsched.rounds.RoundRows`): each member holds the
:math:`g` GPUs for ``share`` :math:`= 1/k` of the round at ``rate`` :math:`= k \cdot
X_{j,t} \cdot T_j / C`, so that it progresses at :math:`X_{j,t} T_j / C` steps/s (its
isolated throughput times its speed factor) and the group's GPUs count once against
capacity; placement places the group as one gang. Phases are seconds per iteration on each
GPU type: given ones are taken as they are on every type; default ones are the job type's
fractions (:func:`~hetsched.schedulers.interleaving.default_phase_fractions`) times the
job's iteration time on the type, :math:`1 / X_{j,t}`.

Differences from the paper (see ``docs/muri.md``): a heterogeneous cluster (the paper's is
one GPU type), so a group also needs a common GPU type; the matching keeps only each unit's
``candidates`` best edges, and above ``exact_limit`` units it is greedy by weight (at least
half the maximum weight) instead of Edmonds' blossom (networkx's is pure Python and takes
seconds at 1,000 jobs; Muri's own implementation is exact on every pair); no per-group interleaving overhead factor (Muri's simulator multiplies the
cycle by a measured 1.0x-1.1x); the cycle's rates hold for the whole round even when a
member finishes inside it (as a pair's do in the round loop).

Examples
--------
>>> import hetsched as hs
>>> from hetsched.schedulers.muri import Muri
>>> cluster = hs.Cluster({"v100": 2, "k80": 2})
>>> res = hs.simulate(Muri(), hs.generate_workload(8, rate_per_hour=8.0, seed=3, cluster=cluster), cluster)
>>> int(res.summary["n_completed"])
8
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import networkx as nx
import numpy as np

from ..errors import ValidationError
from ..inputs.jobs import usable_mask
from ..mechanism.history import rows_of
from ..validation import check_choice, check_int, check_real
from .interleaving import (
    R,
    batch_best_cycles,
    batch_pair_cycles,
    default_phase_fractions,
    phase_table,
)

__all__ = ["MATCHINGS", "PRIORITIES", "Muri", "MuriState"]

log = logging.getLogger(__name__)

#: Job orders: Muri-S (shortest remaining service first) and Muri-L (least attained service).
PRIORITIES = ("srsf", "las")
#: How units are matched (see :class:`Muri`).
MATCHINGS = ("auto", "blossom", "greedy")


@dataclass(frozen=True, eq=False)
class MuriState:
    """What Muri remembers between rounds (immutable; rows follow ``job_ids``, ascending).

    Attributes
    ----------
    job_ids : ndarray of int64
        Driver job numbers seen running.
    attained : ndarray
        GPU-seconds each received (a group member: its share of the group's GPUs).
    time : float
        Clock: start of the next round.
    rounds : int
        Rounds recorded.
    """

    job_ids: np.ndarray
    attained: np.ndarray
    time: float = 0.0
    rounds: int = 0

    def attained_of(self, jobs: np.ndarray) -> np.ndarray:
        """Attained GPU-seconds of ``jobs`` (0 for jobs never run)."""
        rows = rows_of(self.job_ids, jobs)
        out = np.zeros(jobs.shape[0])
        out[rows >= 0] = self.attained[rows[rows >= 0]]
        return out


@dataclass(frozen=True, eq=False)
class Muri:
    """Muri's grouping and scheduling as a round scheduler (see the module docstring).

    Parameters
    ----------
    priority : {"srsf", "las"}, default "srsf"
        Muri-S (least remaining GPU-time first) or Muri-L (least attained GPU-time first).
    max_group : int, default 4
        Largest group (1: no interleaving; 2: pairs only; at most 4, one job per resource).
    phases : mapping, optional
        Trace id -> the four stage durations of one iteration in seconds, a sequence in the
        order ``("storage", "cpu", "gpu", "network")`` or a mapping by those names. When
        given, every job must be in it. Default: each job type's seeded fractions times the
        job's iteration time on the GPU type (module docstring).
    seed : int, default 0
        Seed of the default phase fractions.
    candidates : int, default 8
        Edges kept per unit in each matching (its best ones by efficiency).
    matching : {"auto", "blossom", "greedy"}, default "auto"
        Maximum-weight matching by Edmonds' blossom algorithm (networkx, exact, the paper's),
        greedy by weight (at least half the maximum weight, far faster), or blossom up to
        ``exact_limit`` units per matching and greedy above.
    exact_limit : int, default 64
        Largest matching ``"auto"`` solves exactly.
    """

    name: ClassVar[str] = "muri"

    priority: str = "srsf"
    max_group: int = 4
    phases: Mapping[Any, Any] | None = None
    seed: int = 0
    candidates: int = 8
    matching: str = "auto"
    exact_limit: int = 64
    _table: dict[Any, np.ndarray] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_choice(self.priority, "priority", PRIORITIES)
        check_int(self.max_group, "max_group", low=1, high=R)
        check_int(self.seed, "seed", low=0)
        check_int(self.candidates, "candidates", low=1)
        check_choice(self.matching, "matching", MATCHINGS)
        check_int(self.exact_limit, "exact_limit", low=0)
        object.__setattr__(self, "_table", phase_table(self.phases))

    def params(self) -> dict[str, Any]:
        """The constructor's parameters as given."""
        return {"priority": self.priority, "max_group": self.max_group, "phases": self.phases, "seed": self.seed,
                "candidates": self.candidates, "matching": self.matching, "exact_limit": self.exact_limit}

    # ------------------------------------------------------------------ phases
    def phase_fractions(self, view: Any) -> tuple[np.ndarray, bool]:
        """Per active job, its four stage durations (seconds, when given) or its default
        fractions of an iteration; and whether they are seconds (given) or fractions."""
        ids = view.context.get("ids")
        ids = view.jobs if ids is None else np.asarray(ids)[view.jobs]
        if self._table:
            out = np.empty((view.n_jobs, R))
            for i, j in enumerate(ids.tolist()):
                p = self._table.get(j)
                if p is None:
                    raise ValidationError(f"`phases` has no entry for job {j!r}; give every job's stage durations "
                                          "or none (the defaults by job type).")
                out[i] = p
            return out, True
        cat, rows = view.context.get("catalogue"), view.context.get("catalogue_rows")
        if cat is not None and rows is not None:
            types = np.asarray(cat.job_types, dtype=object)[np.asarray(rows)[view.jobs]]
        else:
            types = np.asarray([str(j) for j in ids.tolist()], dtype=object)
        uniq, inv = np.unique(types.astype(str), return_inverse=True)
        fr = np.array([default_phase_fractions(t, self.seed) for t in uniq.tolist()]).reshape(-1, R)
        return fr[inv], False

    @staticmethod
    def _on_type(frac: np.ndarray, seconds: bool, thr: np.ndarray) -> np.ndarray:
        """Phases (seconds) of jobs whose throughput on the chosen type is ``thr``."""
        if seconds:
            return frac
        with np.errstate(divide="ignore"):
            return frac / np.where(thr > 0, thr, np.nan)[:, None]

    # ------------------------------------------------------------------ round loop
    def initial_state(self, start_time: float = 0.0) -> MuriState:
        """No job has run; the clock at ``start_time``."""
        t = check_real(start_time, "start_time")
        return MuriState(job_ids=np.zeros(0, np.int64), attained=np.zeros(0), time=t)

    def priority_order(self, view: Any, state: MuriState) -> np.ndarray:
        """Positions of the active jobs, highest priority first (module docstring, step 1)."""
        T = view.throughputs
        best = T.max(axis=1) if T.size else np.zeros(view.n_jobs)
        if self.priority == "srsf":
            with np.errstate(divide="ignore", invalid="ignore"):
                key = np.where(best > 0, view.remaining / best * view.scale_factors, np.inf)
        else:
            key = state.attained_of(view.jobs)
        return np.lexsort((view.jobs, view.arrival, key))

    def plan_round(self, view: Any, state: MuriState) -> Any:
        """The rows of this round (module docstring)."""
        from ..rounds.protocol import RoundRows

        t0 = time.perf_counter()
        if not isinstance(state, MuriState):
            raise ValidationError(f"`state` must be a MuriState; got {type(state).__name__}.")
        n = view.n_jobs
        if n == 0:
            return RoundRows.empty(info={"solved": False})
        T = view.throughputs
        s = view.scale_factors.astype(np.int64)
        cap = np.asarray(view.capacities, dtype=np.int64)
        usable = usable_mask(T, s, cap)
        order = self.priority_order(view, state)
        order = order[usable[order].any(axis=1)]
        rank = np.full(n, n, np.int64)
        rank[order] = np.arange(order.size)
        take = order[np.cumsum(s[order]) <= self.max_group * int(cap.sum())]
        frac, seconds = self.phase_fractions(view)
        ref = np.argmax(np.where(usable, T, -1.0), axis=1)
        P_ref = self._on_type(frac, seconds, T[np.arange(n), ref])
        # classes of interchangeable jobs: equal phases on their reference type, equal usable types
        _, cls = np.unique(np.concatenate([np.nan_to_num(P_ref, nan=-1.0), usable], axis=1), axis=0,
                           return_inverse=True)
        cls = cls.reshape(-1)
        groups: list[list[int]] = []
        excess = [int(s[take].sum()) - int(cap.sum())]   # GPUs demanded beyond the cluster's
        for g in np.unique(s[take]).tolist()[::-1]:
            members = take[s[take] == g]
            groups.extend(self._group(members, P_ref, cls, usable, excess, g))
        groups = sorted((sorted(m, key=lambda j: int(rank[j])) for m in groups), key=lambda m: int(rank[m[0]]))
        rows = self._rows(view, groups, frac, seconds, usable, cap)
        rows = RoundRows(**rows, info={"solved": False, "plan_s": time.perf_counter() - t0,
                                       "groups": sum(len(m) > 1 for m in groups)})
        return rows

    def _group(self, members: np.ndarray, P: np.ndarray, cls: np.ndarray, usable: np.ndarray, excess: list[int],
               g: int) -> list[list[int]]:
        """Repeated maximum-weight matching of ``members`` (gang size ``g``) into groups,
        merging only while the candidates demand more GPUs than the cluster has (``excess``)."""
        units: list[list[int]] = [[int(j)] for j in members.tolist()]
        size = 1
        while size < self.max_group and len(units) > 1 and excess[0] > 0:
            units = self._match(units, P, cls, usable, excess, g)
            size *= 2
        return units

    def _match(self, units: list[list[int]], P: np.ndarray, cls: np.ndarray, usable: np.ndarray,
               excess: list[int], g: int) -> list[list[int]]:
        """One matching round: units matched in pairs merge, the most efficient first, while
        GPUs are short (module docstring, step 3)."""
        exact = self.matching == "blossom" or (self.matching == "auto" and len(units) <= self.exact_limit)
        return (self._match_exact if exact else self._match_greedy)(units, P, cls, usable, excess, g)

    def _weights(self, pad: np.ndarray, sizes: np.ndarray, a: np.ndarray, b: np.ndarray, P: np.ndarray,
                 usable: np.ndarray) -> np.ndarray:
        """Edge weight of units ``a[i]``, ``b[i]`` (rows of ``pad``): the efficiency of their
        union, 0 where they share no GPU type, do not beat running one after another
        (:math:`C < \\sum_j T_j`) or slow a member below time slicing (:math:`C > k\\,T_j`)."""
        weight = np.zeros(a.size)
        for ka in np.unique(sizes[a]).tolist():
            for kb in np.unique(sizes[b]).tolist():
                sel = np.flatnonzero((sizes[a] == ka) & (sizes[b] == kb))
                if not sel.size:
                    continue
                mem = np.concatenate([pad[a[sel], :ka], pad[b[sel], :kb]], axis=1)
                common = usable[mem].all(axis=1).any(axis=1)
                G = P[mem]                                          # (n, k, R)
                cyc = batch_pair_cycles(G[:, 0], G[:, 1]) if ka + kb == 2 else batch_best_cycles(G)
                iso = G.sum(axis=2)
                good = (common & np.isfinite(cyc) & (cyc > 0) & (cyc < iso.sum(axis=1) * (1 - 1e-12))
                        & (cyc <= (ka + kb) * iso.min(axis=1) * (1 + 1e-12)))
                with np.errstate(invalid="ignore", divide="ignore"):
                    weight[sel] = np.where(good, iso.sum(axis=1) / (R * cyc), 0.0)
        return weight

    @staticmethod
    def _padded(units: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        sizes = np.array([len(x) for x in units], dtype=np.int64)
        pad = np.zeros((len(units), int(sizes.max())), np.int64)
        for i, x in enumerate(units):
            pad[i, :len(x)] = x
        return pad, sizes

    def _match_exact(self, units: list[list[int]], P: np.ndarray, cls: np.ndarray, usable: np.ndarray,
                     excess: list[int], g: int) -> list[list[int]]:
        """Edmonds' blossom (networkx) on every pair of units, each keeping its best
        ``candidates`` edges."""
        u = len(units)
        pad, sizes = self._padded(units)
        a, b = np.triu_indices(u, k=1)
        ok = sizes[a] + sizes[b] <= self.max_group
        a, b = a[ok], b[ok]
        weight = self._weights(pad, sizes, a, b, P, usable)
        keep = weight > 0
        a, b, weight = a[keep], b[keep], weight[keep]
        if not a.size:
            return units
        ends = np.concatenate([a, b])
        w2 = np.concatenate([weight, weight])
        edge = np.concatenate([np.arange(a.size)] * 2)
        o = np.lexsort((-w2, ends))
        ends, edge = ends[o], edge[o]
        start = np.searchsorted(ends, ends, side="left")
        kept = np.zeros(a.size, bool)
        kept[edge[(np.arange(ends.size) - start) < self.candidates]] = True
        a, b, weight = a[kept], b[kept], weight[kept]
        Gx = nx.Graph()
        Gx.add_weighted_edges_from(zip(a.tolist(), b.tolist(), weight.tolist()))
        matched = nx.max_weight_matching(Gx, maxcardinality=False)
        w_of = {(int(x), int(y)): w for x, y, w in zip(a.tolist(), b.tolist(), weight.tolist())}
        pairs = sorted(((w_of[(min(x, y), max(x, y))], min(x, y), max(x, y)) for x, y in matched), reverse=True)
        out: list[list[int]] = []
        used = np.zeros(u, bool)
        for _, x, y in pairs:
            if excess[0] <= 0:
                break
            out.append(units[x] + units[y])
            used[x] = used[y] = True
            excess[0] -= g
        out.extend(units[i] for i in np.flatnonzero(~used).tolist())
        return out

    def _match_greedy(self, units: list[list[int]], P: np.ndarray, cls: np.ndarray, usable: np.ndarray,
                      excess: list[int], g: int) -> list[list[int]]:
        """Greedy matching by weight on *classes* of identical units (the same members'
        classes: equal phases and usable types), so the weights are computed once per pair of
        classes; within a class the units with the best-priority member go first."""
        keys: dict[tuple[int, ...], int] = {}
        of_key: list[list[int]] = []
        for i, unit in enumerate(units):
            k = keys.setdefault(tuple(sorted(int(cls[j]) for j in unit)), len(keys))
            if k == len(of_key):
                of_key.append([])
            of_key[k].append(i)
        reps = [units[m[0]] for m in of_key]
        pad, sizes = self._padded(reps)
        count = np.array([len(m) for m in of_key])
        a, b = np.triu_indices(len(reps), k=0)
        ok = (sizes[a] + sizes[b] <= self.max_group) & ((a != b) | (count[a] >= 2))
        a, b = a[ok], b[ok]
        weight = self._weights(pad, sizes, a, b, P, usable)
        out: list[list[int]] = []
        used = np.zeros(len(units), bool)
        nxt = np.zeros(len(reps), np.int64)
        for e in np.argsort(-weight, kind="stable").tolist():
            if weight[e] <= 0 or excess[0] <= 0:
                break
            x, y = int(a[e]), int(b[e])
            while excess[0] > 0:
                need_x = 2 if x == y else 1
                if count[x] - nxt[x] < need_x or count[y] - nxt[y] < 1:
                    break
                ux = of_key[x][nxt[x]]
                nxt[x] += 1
                uy = of_key[y][nxt[y]]
                nxt[y] += 1
                out.append(units[ux] + units[uy])
                used[ux] = used[uy] = True
                excess[0] -= g
        out.extend(units[i] for i in np.flatnonzero(~used).tolist())
        return out

    def _rows(self, view: Any, groups: list[list[int]], frac: np.ndarray, seconds: bool, usable: np.ndarray,
              cap: np.ndarray) -> dict[str, Any]:
        """Place the groups in order on the fastest type with room; the rows of those placed."""
        T = view.throughputs
        U = view.unconsolidated if view.unconsolidated is not None else T
        s = view.scale_factors.astype(np.int64)
        free = cap.astype(np.int64).copy()
        cols: dict[str, list] = {k: [] for k in ("job", "gpu_type", "gpus", "rate", "spread_rate", "share", "group")}
        gid = 0
        for mem in groups:
            m = np.asarray(mem, dtype=np.int64)
            g = int(s[m[0]])
            lead = m[0]
            ok = usable[m].all(axis=0) & (free >= g)
            if not ok.any():
                continue
            kt = int(np.argmax(np.where(ok, T[lead], -1.0)))
            free[kt] -= g
            k = m.size
            if k == 1:
                factor = np.ones(1)
            else:
                P = self._on_type(frac[m], seconds, T[m, kt])
                cyc = float(batch_best_cycles(P[None])[0])
                factor = P.sum(axis=1) / cyc
            cols["job"].append(view.jobs[m])
            cols["gpu_type"].append(np.full(k, kt))
            cols["gpus"].append(np.full(k, g))
            cols["rate"].append(k * T[m, kt] * factor)
            cols["spread_rate"].append(k * U[m, kt] * factor)
            cols["share"].append(np.full(k, 1.0 / k))
            cols["group"].append(np.full(k, gid if k > 1 else -1))
            gid += k > 1
        if not cols["job"]:
            return {"job": np.zeros(0, np.int64), "gpu_type": np.zeros(0, np.int64), "gpus": np.zeros(0, np.int64),
                    "rate": np.zeros(0)}
        out = {k: np.concatenate(v) for k, v in cols.items()}
        o = np.argsort(out["job"], kind="stable")
        return {k: v[o] for k, v in out.items()}

    def record_round(self, state: MuriState, ran: Any, seconds: np.ndarray) -> MuriState:
        """Add each row's GPU-seconds (``gpus x share x seconds``) to its job's attained service."""
        if not isinstance(state, MuriState):
            raise ValidationError(f"`state` must be a MuriState; got {type(state).__name__}.")
        sec = np.asarray(seconds, dtype=float)
        inc = ran.gpus * ran.share * sec
        ids = np.union1d(state.job_ids, ran.job)
        att = np.zeros(ids.size)
        att[np.searchsorted(ids, state.job_ids)] = state.attained
        np.add.at(att, np.searchsorted(ids, ran.job), inc)
        L = float(sec.max()) if sec.size else 0.0
        return MuriState(job_ids=ids.astype(np.int64), attained=att, time=state.time + (L if math.isfinite(L) else 0.0),
                         rounds=state.rounds + 1)
