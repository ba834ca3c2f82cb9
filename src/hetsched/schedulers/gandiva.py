r"""Gandiva (Xiao et al., "Gandiva: Introspective Cluster Scheduling for Deep Learning",
OSDI 2018): time slicing, introspective packing, grow-shrink and migration, as a round
scheduler. Not to be confused with Gandiva_fair (EuroSys'20,
:mod:`hetsched.formulations.gandiva_fair`).

Mechanisms (§3) and policy (§4), per round
------------------------------------------
1. **Time slicing** (suspend-resume, §3.1): when jobs outnumber GPUs they take turns, the
   job that has waited longest first (ties by arrival); each whole gang takes the fastest GPU
   type with room.
2. **Migration to defragment** (§3.3, §4.2): when the next waiting gang of ``g`` GPUs fits
   on no type although enough GPUs are free in total, running single jobs of the type with
   the most free GPUs move to other types with room (the fewest moves first, smallest jobs
   first) until the gang fits there; the moved jobs then run at their rate on the new type
   and pay the loop's restart cost.
3. **Introspective packing** (§4.1): a waiting job may share the GPUs of a running job of
   the same gang size on a type both can use. What a pair is worth is *learned*: the pair's
   normalised throughput :math:`\rho = r_a / X_{a,t} + r_b / X_{b,t}` (each member's pair
   rate over its rate alone on that type) is known only after the pair ran, from the rates
   of the rows that ran (:meth:`GandivaIntrospective.record_round`). A measured pair with
   :math:`\rho \ge` ``keep_threshold`` is kept (packed again whenever both wait for GPUs); one
   below it is undone and never tried again on that type; at most ``max_trials`` untried
   pairs are tried per round, and only while jobs wait.
4. **Grow-shrink** (§3.4): when no job waits, running jobs alone on their GPUs double their
   GPU count while the type has room, up to ``max_grow`` x their gang, in priority order.
   Extra GPUs scale linearly with an efficiency: a job of gang :math:`s` on :math:`g \ge s`
   GPUs runs at :math:`X_{j,t}\,(1 + e\,(g/s - 1))`, :math:`e` = ``grow_efficiency``. A
   grown job shrinks back to its gang as soon as jobs wait (the next round plans it so).

Where the pair rates come from
------------------------------
The scheduler decides from its measurements only; a pair's true rates are read when the
pair is *run*, to fill the row: in the simulator from the workload's catalogue pair table
(``context["catalogue"]``, the table Gavel's packing uses), or from ``pair_rates`` given to
the constructor (trace ids -> GPU type -> the two rates). A pair absent from both runs at
``pair_prior`` x each member's rate alone (the driver then progresses the jobs at that
rate and the scheduler measures exactly that). Online, a pair runs at whatever speed it
runs, and the rows' rates are only what the scheduler planned: the verdict on a pair comes
from what its two workers *reported* while sharing (``OnlineScheduler.report(...,
partner=...)``, learned with ``learn=True``), which the online scheduler hands over as
``context["measured_pair_rates"]``; each plan recomputes :math:`\rho` of every pair both
members reported on from those rates over the jobs' current estimates alone. A pair whose
workers report no partner keeps the verdict of its planned rates (``pair_rates``, else the
prior).

Example: a pair tried, measured and undone
------------------------------------------
>>> import numpy as np
>>> from hetsched.schedulers.gandiva import GandivaIntrospective
>>> g = GandivaIntrospective(pair_rates={("a", "b"): {"v100": (0.3, 0.3)}})
>>> st = g.initial_state()
>>> st.pair_verdict(0, 1, 0) is None          # untried
True
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..errors import ValidationError
from ..inputs.jobs import usable_mask
from ..validation import check_int, check_real

__all__ = ["GandivaIntrospective", "GandivaState"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class GandivaState:
    """What Gandiva has measured (immutable).

    Attributes
    ----------
    pair_a, pair_b : ndarray of int64
        Measured pairs (driver job numbers, ``pair_a < pair_b``).
    pair_type : ndarray of int64
        GPU-type column each was measured on.
    pair_rho : ndarray
        Its normalised throughput :math:`\\rho` (last measurement).
    time : float
        Clock: start of the next round.
    rounds, trials, undone : int
        Rounds recorded; pairs measured for the first time; of those, pairs undone.
    """

    pair_a: np.ndarray
    pair_b: np.ndarray
    pair_type: np.ndarray
    pair_rho: np.ndarray
    time: float = 0.0
    rounds: int = 0
    trials: int = 0
    undone: int = 0

    def verdicts(self) -> dict[int, dict[tuple[int, int], float]]:
        """job -> {(other job, type column): last measured rho}, both ways."""
        out: dict[int, dict[tuple[int, int], float]] = {}
        for a, b, k, r in zip(self.pair_a.tolist(), self.pair_b.tolist(), self.pair_type.tolist(),
                              self.pair_rho.tolist()):
            out.setdefault(a, {})[(b, k)] = r
            out.setdefault(b, {})[(a, k)] = r
        return out

    def pair_verdict(self, a: int, b: int, k: int) -> float | None:
        """The measured :math:`\\rho` of jobs ``a`` and ``b`` on type column ``k``; None if never run."""
        lo, hi = min(a, b), max(a, b)
        hit = np.flatnonzero((self.pair_a == lo) & (self.pair_b == hi) & (self.pair_type == k))
        return float(self.pair_rho[hit[-1]]) if hit.size else None


@dataclass(frozen=True, eq=False)
class GandivaIntrospective:
    """Gandiva (OSDI'18) as a round scheduler; scheduler name ``"gandiva"`` (see the module docstring).

    Parameters
    ----------
    keep_threshold : float, default 1.0
        A measured pair is kept when its normalised throughput reaches this (1: packing
        must beat time slicing the two jobs).
    max_trials : int, default 1
        Untried pairs tried per round (0: never pack).
    pair_prior : float, default 0.5
        Each member's rate, as a fraction of its rate alone, of a pair no table knows.
    grow : bool, default True
        Grow jobs onto idle GPUs when nobody waits.
    max_grow : int, default 2
        Largest multiple of its gang a job grows to (a power of two).
    grow_efficiency : float, default 0.8
        Efficiency ``e`` of extra GPUs (0: useless, 1: linear).
    migrate : bool, default True
        Move running jobs between types to make room for a waiting gang.
    pair_rates : mapping, optional
        ``(id_a, id_b) -> {gpu_type: (rate_a, rate_b)}`` in steps/s (trace ids); overrides the
        catalogue's pair table for those pairs.
    """

    name: ClassVar[str] = "gandiva"

    keep_threshold: float = 1.0
    max_trials: int = 1
    pair_prior: float = 0.5
    grow: bool = True
    max_grow: int = 2
    grow_efficiency: float = 0.8
    migrate: bool = True
    pair_rates: Mapping[Any, Any] | None = None
    _pairs: dict[tuple[Any, Any], dict[str, tuple[float, float]]] = field(default_factory=dict, init=False,
                                                                          repr=False)

    def __post_init__(self) -> None:
        check_real(self.keep_threshold, "keep_threshold", low=0.0)
        check_int(self.max_trials, "max_trials", low=0)
        check_real(self.pair_prior, "pair_prior", low=0.0, high=1.0)
        if not isinstance(self.grow, bool):
            raise ValidationError(f"`grow` must be a bool; got {self.grow!r}.")
        if not isinstance(self.migrate, bool):
            raise ValidationError(f"`migrate` must be a bool; got {self.migrate!r}.")
        check_int(self.max_grow, "max_grow", low=1)
        if self.max_grow & (self.max_grow - 1):
            raise ValidationError(f"`max_grow` must be a power of two; got {self.max_grow}.")
        check_real(self.grow_efficiency, "grow_efficiency", low=0.0, high=1.0)
        object.__setattr__(self, "_pairs", _pair_table(self.pair_rates))

    def params(self) -> dict[str, Any]:
        """The constructor's parameters as given."""
        return {k: getattr(self, k) for k in ("keep_threshold", "max_trials", "pair_prior", "grow", "max_grow",
                                             "grow_efficiency", "migrate", "pair_rates")}

    def initial_state(self, start_time: float = 0.0) -> GandivaState:
        """Nothing measured; the clock at ``start_time``."""
        t = check_real(start_time, "start_time")
        z = np.zeros(0, np.int64)
        return GandivaState(pair_a=z, pair_b=z, pair_type=z, pair_rho=np.zeros(0), time=t)

    # ------------------------------------------------------------------ truth of a pair (used only to run it)
    def true_pair_rates(self, view: Any, a: int, b: int, k: int) -> tuple[float, float]:
        """The rates of active positions ``a`` and ``b`` sharing type column ``k``, as the pair
        *runs*: ``pair_rates``, else the catalogue's pair table, else the prior. Never used to
        decide whether to pack."""
        T = view.throughputs
        ids = view.context.get("ids")
        ia, ib = (view.jobs[a], view.jobs[b]) if ids is None else (ids[view.jobs[a]], ids[view.jobs[b]])
        t = view.gpu_types[k]
        for key, flip in (((ia, ib), False), ((ib, ia), True)):
            got = self._pairs.get(key)
            if got is not None and t in got:
                ra, rb = got[t]
                return (rb, ra) if flip else (ra, rb)
        cat, rows = view.context.get("catalogue"), view.context.get("catalogue_rows")
        if cat is not None and rows is not None and cat.pairs is not None and t in cat.gpu_types:
            ra_row, rb_row = int(rows[view.jobs[a]]), int(rows[view.jobs[b]])
            p = int(cat.pairs.positions([ra_row], [rb_row])[0])
            if p >= 0:
                v = cat.pairs.lookup(ra_row, rb_row)[list(cat.gpu_types).index(t)]
                return float(v[0]), float(v[1])
        return self.pair_prior * float(T[a, k]), self.pair_prior * float(T[b, k])

    # ------------------------------------------------------------------ round loop
    def plan_round(self, view: Any, state: GandivaState) -> Any:
        """The rows of this round (module docstring)."""
        from ..rounds.protocol import RoundRows

        t0 = time.perf_counter()
        if not isinstance(state, GandivaState):
            raise ValidationError(f"`state` must be a GandivaState; got {type(state).__name__}.")
        n = view.n_jobs
        if n == 0:
            return RoundRows.empty(info={"solved": False})
        T = view.throughputs
        s = view.scale_factors.astype(np.int64)
        cap = np.asarray(view.capacities, dtype=np.int64)
        usable = usable_mask(T, s, cap)
        waited = view.waiting if view.waiting is not None else np.zeros(n)
        order = np.lexsort((view.jobs, view.arrival, -waited))
        order = order[usable[order].any(axis=1)]
        free = cap.copy()
        on = np.full(n, -1, np.int64)           # type column of each running job
        waiting: list[int] = []
        for j in order.tolist():
            ok = usable[j] & (free >= s[j])
            if not ok.any() and self.migrate:
                ok = self._defragment(j, on, free, s, usable, T)
            if ok.any():
                k = int(np.argmax(np.where(ok, T[j], -1.0)))
                on[j] = k
                free[k] -= s[j]
            else:
                waiting.append(j)
        partner = np.full(n, -1, np.int64)
        tried = 0
        pos = {int(j): i for i, j in enumerate(view.jobs.tolist())}
        known = _reported_verdicts(state.verdicts(), view.context.get("measured_pair_rates"), pos, T)
        for w in waiting:
            jw = int(view.jobs[w])
            hit = None
            for (o, k), rho in known.get(jw, {}).items():   # a pair measured good: pack it again
                r = pos.get(o)
                if (rho >= self.keep_threshold and r is not None and on[r] == k and partner[r] < 0 and s[r] == s[w]
                        and usable[w, k]):
                    hit = r
                    break
            if hit is None and tried < self.max_trials:      # else try one pair nobody measured
                mine = known.get(jw, {})
                for r in order.tolist():
                    k = int(on[r])
                    if (k >= 0 and partner[r] < 0 and s[r] == s[w] and usable[w, k]
                            and (int(view.jobs[r]), k) not in mine):
                        hit = r
                        tried += 1
                        break
            if hit is not None:
                partner[hit], partner[w] = w, hit
                on[w] = on[hit]
        gpus = np.where(on >= 0, s, 0)
        if self.grow and not waiting:
            for j in order.tolist():
                k = int(on[j])
                if k < 0 or partner[j] >= 0:
                    continue
                while gpus[j] * 2 <= self.max_grow * s[j] and free[k] >= gpus[j]:
                    free[k] -= gpus[j]
                    gpus[j] *= 2
        return self._rows(view, on, partner, gpus, tried, t0)

    def _defragment(self, j: int, on: np.ndarray, free: np.ndarray, s: np.ndarray, usable: np.ndarray,
                    T: np.ndarray) -> np.ndarray:
        """Move running jobs off one type so that gang ``j`` fits there (module docstring, step 2);
        the types ``j`` can now take (none if no move makes room: nothing is moved then)."""
        need = int(s[j])
        if int(free.sum()) < need:
            return np.zeros(free.size, bool)
        for k in np.argsort(-free, kind="stable").tolist():
            if not usable[j, k]:
                continue
            short = need - int(free[k])
            movers = [r for r in np.flatnonzero(on == k)[np.argsort(s[on == k], kind="stable")].tolist()]
            plan: list[tuple[int, int]] = []
            room = free.copy()
            for r in movers:
                if short <= 0:
                    break
                dest = usable[r] & (room >= s[r])
                dest[k] = False
                if dest.any():
                    d = int(np.argmax(np.where(dest, T[r], -1.0)))
                    room[d] -= s[r]
                    room[k] += s[r]
                    short -= int(s[r])
                    plan.append((r, d))
            if short <= 0:
                for r, d in plan:
                    on[r] = d
                free[:] = room
                log.debug("gandiva: moved %d job(s) off type column %d to fit a gang of %d", len(plan), k, need)
                ok = np.zeros(free.size, bool)
                ok[k] = True
                return ok
        return np.zeros(free.size, bool)

    def _rows(self, view: Any, on: np.ndarray, partner: np.ndarray, gpus: np.ndarray, tried: int, t0: float) -> Any:
        from ..rounds.protocol import RoundRows

        T = view.throughputs
        U = view.unconsolidated if view.unconsolidated is not None else T
        s = view.scale_factors.astype(np.int64)
        lead = np.flatnonzero((on >= 0) & ((partner < 0) | (partner > np.arange(on.size))))
        k = on[lead]
        p = partner[lead]
        grow = 1.0 + self.grow_efficiency * (gpus[lead] / s[lead] - 1.0)
        rate = T[lead, k] * grow
        spread = U[lead, k] * grow
        prate = np.zeros(lead.size)
        pspread = np.zeros(lead.size)
        iso = np.stack([T[lead, k], np.zeros(lead.size)], axis=1)
        for i in np.flatnonzero(p >= 0).tolist():
            ra, rb = self.true_pair_rates(view, int(lead[i]), int(p[i]), int(k[i]))
            rate[i], prate[i] = ra, rb
            spread[i], pspread[i] = ra, rb
            iso[i, 1] = T[p[i], k[i]]
        return RoundRows(view.jobs[lead], k, gpus[lead], rate, partner=np.where(p >= 0, view.jobs[np.maximum(p, 0)], -1),
                         partner_rate=prate, spread_rate=spread, partner_spread_rate=pspread,
                         payload={"iso": iso},
                         info={"solved": False, "plan_s": time.perf_counter() - t0, "pair_trials": tried,
                               "pairs": int((p >= 0).sum()), "grown": int((gpus[lead] > s[lead]).sum())})

    def record_round(self, state: GandivaState, ran: Any, seconds: np.ndarray) -> GandivaState:
        """Learn :math:`\\rho` of every pair that ran, from the rates its row ran at."""
        if not isinstance(state, GandivaState):
            raise ValidationError(f"`state` must be a GandivaState; got {type(state).__name__}.")
        sec = np.asarray(seconds, dtype=float)
        L = float(sec.max()) if sec.size else 0.0
        pairs = np.flatnonzero(ran.is_pair & (sec > 0))
        if not pairs.size or not isinstance(ran.payload, dict):
            return dataclasses.replace(state, time=state.time + (L if math.isfinite(L) else 0.0),
                                       rounds=state.rounds + 1)
        table = {(a, b, k): r for a, b, k, r in zip(state.pair_a.tolist(), state.pair_b.tolist(),
                                                    state.pair_type.tolist(), state.pair_rho.tolist())}
        trials = undone = 0
        iso = ran.payload["iso"][ran.row_id[pairs]]
        for n_, i in enumerate(pairs.tolist()):
            if iso[n_, 0] <= 0 or iso[n_, 1] <= 0:
                continue
            r = float(ran.rate[i] / iso[n_, 0] + ran.partner_rate[i] / iso[n_, 1])
            x, y, k = int(ran.job[i]), int(ran.partner[i]), int(ran.gpu_type[i])
            key = (min(x, y), max(x, y), k)
            if key not in table:
                trials += 1
                undone += r < self.keep_threshold
                log.debug("gandiva: pair (%d, %d) on column %d measured rho=%.3f: %s", x, y, k, r,
                          "kept" if r >= self.keep_threshold else "undone")
            table[key] = r
        keys = np.array(list(table), dtype=np.int64).reshape(-1, 3)
        return GandivaState(pair_a=keys[:, 0].copy(), pair_b=keys[:, 1].copy(), pair_type=keys[:, 2].copy(),
                            pair_rho=np.array(list(table.values()), dtype=float),
                            time=state.time + (L if math.isfinite(L) else 0.0), rounds=state.rounds + 1,
                            trials=state.trials + trials, undone=state.undone + undone)


def _reported_verdicts(known: dict[int, dict[tuple[int, int], float]], measured: Any, pos: Mapping[int, int],
                       T: np.ndarray) -> dict[int, dict[tuple[int, int], float]]:
    """``known`` with the :math:`\\rho` of every pair of active jobs whose members reported
    while sharing (``measured(a, b, k) -> (rate_a, rate_b)`` or None; online) recomputed from
    those reports over each member's rate alone on that type (``T``, by active position)."""
    if not callable(measured):
        return known
    for a, pairs in known.items():
        ia = pos.get(a)
        if ia is None:
            continue
        for (b, k), _ in list(pairs.items()):
            ib = pos.get(b)
            got = measured(a, b, k) if ib is not None else None
            if got is None or T[ia, k] <= 0 or T[ib, k] <= 0:
                continue
            pairs[(b, k)] = float(got[0] / T[ia, k] + got[1] / T[ib, k])
    return known


def _pair_table(value: Any) -> dict[tuple[Any, Any], dict[str, tuple[float, float]]]:
    """Check ``pair_rates``: (id_a, id_b) -> {gpu_type: (rate_a, rate_b)}, finite, >= 0."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError(f"`pair_rates` must be a mapping (id_a, id_b) -> {{gpu_type: (rate_a, rate_b)}}; "
                              f"got {type(value).__name__}.")
    out: dict[tuple[Any, Any], dict[str, tuple[float, float]]] = {}
    for key, per_type in value.items():
        if not (isinstance(key, tuple) and len(key) == 2) or key[0] == key[1]:
            raise ValidationError(f"`pair_rates` keys must be pairs of two different job ids; got {key!r}.")
        if not isinstance(per_type, Mapping):
            raise ValidationError(f"`pair_rates[{key!r}]` must map GPU type -> (rate_a, rate_b); got {per_type!r}.")
        d: dict[str, tuple[float, float]] = {}
        for t, v in per_type.items():
            try:
                ra, rb = (float(x) for x in v)
            except (TypeError, ValueError):
                raise ValidationError(f"`pair_rates[{key!r}][{t!r}]` must be two rates (steps/s); got {v!r}.") from None
            if not (math.isfinite(ra) and math.isfinite(rb) and ra >= 0 and rb >= 0):
                raise ValidationError(f"`pair_rates[{key!r}][{t!r}]` must be finite and >= 0; got {v!r}.")
            d[str(t)] = (ra, rb)
        out[key] = d
    return out
