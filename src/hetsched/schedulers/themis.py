r"""Themis (Mahajan et al., NSDI'20): an arbiter that auctions leased GPUs to the apps furthest
from finish-time fairness.

hetsched already has Themis' *metric* as an LP (``finish_time_fairness``, Gavel's
formulation); this module is its *mechanism* (paper §4), as a round scheduler.

Finish-time fairness (§3)
-------------------------
With :math:`R_i` steps left, :math:`iso_i` the job's throughput on its isolated share of the
cluster (:func:`hetsched.formulations.common.isolated_throughput`: 1/n of every type),
:math:`e_i` the isolated-equivalent time it has received and :math:`a_i` the time since it
arrived, the arbiter's estimate of job :math:`i`'s finish-time fairness is what it would be
if the job ran at its fair share from now on:

.. math::

    \hat\rho_i = \frac{a_i + R_i / iso_i}{e_i + R_i / iso_i}
    \qquad(> 1: \text{the job has fallen behind its fair share}).

Each round
----------
1. **Leases.** A job that won GPUs keeps them (its gang, on one type) until its lease
   ends, ``lease_seconds`` after the auction that granted it; leased jobs run every round of
   their lease. GPUs whose leases ended, or whose jobs finished, are *free*.
2. **Arbiter and the knob f** (§4.1). When GPUs are free, the jobs without a lease that can
   use some type are sorted by :math:`\hat\rho` (worst first) and the first
   :math:`\max(1, \lceil (1-f)\,n \rceil)` of them bid: ``fairness_knob`` :math:`f = 0` lets
   every such job bid (efficiency), :math:`f \to 1` only the worst (fairness).
2a. **Gang reservation** (``gang_reservation``; ours, not the paper's). If the worst job's
   gang fits no type with the GPUs free now, the free GPUs of its fastest usable type (up to
   its gang size) are held back from the auction and from work conservation, and stay held
   for that job (not for whichever job is worst next round) until its gang fits, when it
   takes its gang there (outside the auction; it counts as one of the bidders), so that
   they accumulate as leases end; without it, work conservation hands every freed
   GPU to small jobs on new leases and a large gang waits indefinitely (we measured 4-GPU
   jobs waiting 40 hours on a 24-GPU cluster; docs/themis.md).
3. **Bids** (§4.2). Job :math:`i` values :math:`g` GPUs of type :math:`k` by the inverse of
   the finish-time fairness of its remaining work when it holds them,
   :math:`1/\rho^{rem}_i = \mathrm{thr}_i / iso_i`; holding :math:`g \le s_i` GPUs of its
   gang size :math:`s_i` for the lease is a :math:`g/s_i` time share of a gang, so

   .. math:: V_i(x) = \sum_k \frac{T^{\mathrm{eff}}_{ik}}{s_i\, iso_i}\, x_{ik},
      \qquad \sum_k x_{ik} \le s_i,

   with :math:`T^{\mathrm{eff}}_{ik}` the consolidated throughput when a gang fits on one
   server of type :math:`k`, the workload's *unconsolidated* throughput otherwise
   (placement-aware bids: a spread gang is worth less), and 0 on a type with fewer free GPUs
   than the gang. Explicit tables (``bids``, keyed by trace id) replace these.
4. **Auction.** The partial-allocation auction
   (:func:`~hetsched.schedulers.themis_auction.partial_allocation`): the Nash-social-welfare
   optimum over the free GPUs, of which bidder :math:`i` keeps the fraction
   :math:`c_i` (its hidden payment is the rest). The round's ``info`` reports the auction's
   status: an "inaccurate" solve (Clarabel's AlmostSolved) is used and reported
   (``solve_ok`` False); a failed one gives its whole offer to step 6.
5. **Whole gangs.** The GPUs the bidders keep, :math:`\sum_i c_i x^\star_{ik}`, are rounded to
   the nearest whole number per type (the *budget*). Each bidder's *credit* grows by the share
   of a gang it won, :math:`\sum_k c_i x^\star_{ik} / s_i`; bidders that won something, in
   order of credit (ties by :math:`\hat\rho`), take one gang each, on the type where they
   won most, while the budget and the free GPUs allow, and a gang costs one credit; a
   bidder owed a whole gang (credit at least 1) is served first, from the free GPUs even
   beyond this auction's budget (earlier auctions paid it in shares). Over
   many auctions each job receives gangs in proportion to what it won (a deficit rule, like
   the round mechanism's), where ranking one auction's winners alone would always favour
   small gangs (they win larger shares of a gang).
6. **Work conservation** (``work_conserving``). Everything still free (the hidden payments
   and rounding leftovers) goes to the jobs that did not bid, worst :math:`\hat\rho` first,
   then to bidders that won no gang, each on its fastest type with room.

Every gang granted in steps 5 and 6 is leased for ``lease_seconds``.

Examples
--------
>>> import hetsched as hs
>>> from hetsched.schedulers import Themis
>>> w = hs.generate_workload(6, rate_per_hour=6.0, seed=1)
>>> res = hs.simulate(Themis(fairness_knob=0.5, lease_seconds=720.0), w, hs.Cluster({"v100": 4, "k80": 4}))
>>> int(res.summary["n_completed"])
6
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..formulations.common import isolated_throughput
from ..inputs.jobs import usable_mask
from ..mechanism.history import rows_of
from ..mechanism.packing import greedy_pack
from ..validation import check_bool, check_mapping, check_positive, check_real
from .themis_auction import AuctionResult, partial_allocation, valuation_tables

__all__ = ["Themis", "ThemisState", "finish_time_estimate"]

log = logging.getLogger(__name__)

#: A lease that ends within this many seconds of the round start has ended.
_EPS = 1e-9


@dataclass(frozen=True, eq=False)
class ThemisState:
    """Leases between rounds (immutable; rows follow ``job_ids``, the driver's job numbers).

    Attributes
    ----------
    job_ids : ndarray of int64
    lease_type : ndarray of int64
        Type column (in ``gpu_types``) of the job's leased gang, -1 for none.
    lease_end : ndarray
        When the lease ends (driver clock, seconds); meaningless without a lease.
    credit : ndarray or None
        Shares of a gang won in auctions and not yet turned into a gang (step 5).
    reserved_for : int
        Job (driver number) GPUs are being held back for (step 2a), -1 for none.
    gpu_types : tuple of str or None
    time : float
        Start of the next round.
    rounds, auctions : int
        Rounds recorded; auctions run.
    """

    job_ids: np.ndarray
    lease_type: np.ndarray
    lease_end: np.ndarray
    credit: np.ndarray | None = None
    reserved_for: int = -1
    gpu_types: tuple[str, ...] | None = None
    time: float = 0.0
    rounds: int = 0
    auctions: int = 0

    @classmethod
    def empty(cls, start_time: float = 0.0) -> ThemisState:
        """No job known, no lease, the clock at ``start_time``."""
        t = check_real(start_time, "start_time")
        return cls(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0), None, t)

    def __repr__(self) -> str:
        return (f"ThemisState(jobs={self.job_ids.size}, leases={int((self.lease_type >= 0).sum())}, "
                f"time={self.time:g}, rounds={self.rounds}, auctions={self.auctions})")


def finish_time_estimate(remaining: np.ndarray, isolated: np.ndarray, since_arrival: np.ndarray,
                         received: np.ndarray) -> np.ndarray:
    r""":math:`\hat\rho_i = (a_i + R_i/iso_i) / (e_i + R_i/iso_i)` (see the module docstring)."""
    rest = np.asarray(remaining, float) / np.asarray(isolated, float)
    return (np.asarray(since_arrival, float) + rest) / (np.asarray(received, float) + rest)


@dataclass(frozen=True, kw_only=True)
class Themis:
    """Themis' arbiter: leases, the fairness knob, the partial-allocation auction and work
    conservation (see the module docstring).

    Parameters
    ----------
    fairness_knob : float, default 0.8
        :math:`f \\in [0, 1]`: the worst :math:`\\max(1, \\lceil(1-f)\\,n\\rceil)` of the
        ``n`` jobs without a lease bid in each auction.
    lease_seconds : float, default 1800
        How long a won gang is held (positive, seconds).
    work_conserving : bool, default True
        Give the GPUs no bidder keeps (hidden payments, rounding) to the other jobs.
    placement_aware : bool, default True
        Value a type whose servers cannot hold the gang at the workload's unconsolidated
        throughput (needs a cluster with servers; counts-only clusters are treated as one
        server per type).
    gang_reservation : bool, default True
        When the worst job's gang fits no type with the free GPUs, keep the free GPUs of its
        fastest type (up to its gang) for it, and give it its gang once it fits, out of the auction and of work
        conservation until enough leases end (step 2a; not in the paper).
    bids : mapping, optional
        Explicit bid tables keyed by trace id: ``{id: {gpu_type: [value at 0, 1, ... GPUs]}}``
        (monotone, concave, 0 at 0 GPUs; a type left out is worth nothing). When given, every
        bidding job must have one.

    Raises
    ------
    ValidationError
        ``fairness_knob`` outside [0, 1], a lease that is not a positive number of seconds,
        flags that are not bools, ``bids`` that are not a mapping of mappings.
    """

    fairness_knob: float = 0.8
    lease_seconds: float = 1800.0
    work_conserving: bool = True
    placement_aware: bool = True
    gang_reservation: bool = True
    bids: Mapping[Any, Mapping[str, Sequence[float]]] | None = None

    name = "themis"

    def __post_init__(self) -> None:
        check_real(self.fairness_knob, "fairness_knob", low=0.0, high=1.0)
        check_positive(self.lease_seconds, "lease_seconds", unit="seconds")
        check_bool(self.work_conserving, "work_conserving")
        check_bool(self.placement_aware, "placement_aware")
        check_bool(self.gang_reservation, "gang_reservation")
        check_mapping(self.bids, "bids", rule="a mapping trace id -> {gpu_type: [values]}", allow_none=True)
        if self.bids is not None:
            for jid, per in self.bids.items():
                check_mapping(per, f"bids[{jid!r}]", rule="a mapping gpu_type -> [value at 0, 1, ... GPUs]")
                for t, tab in per.items():     # monotone, concave, 0 at 0 GPUs: checked now, not mid-run
                    valuation_tables([[tab]], gpu_types=[t], names=[jid], field="bids")

    def initial_state(self, start_time: float = 0.0) -> ThemisState:
        """No leases, the clock at ``start_time``."""
        return ThemisState.empty(start_time)

    # ------------------------------------------------------------------ bids
    def effective_throughputs(self, view: Any) -> np.ndarray:
        """:math:`T^{\\mathrm{eff}}`: consolidated where a gang fits one server of the type,
        unconsolidated elsewhere (with ``placement_aware`` and a workload that has them)."""
        T = view.throughputs
        if not self.placement_aware or view.unconsolidated is None or view.cluster.topology is None:
            return T
        topo = view.cluster.topology
        largest = np.array([int(topo.server_sizes(t).max(initial=0)) for t in view.gpu_types])
        fits = view.scale_factors[:, None] <= largest[None, :]
        return np.where(fits, T, view.unconsolidated)

    def _tables(self, view: Any, rows: np.ndarray, free: np.ndarray) -> Any:
        ids = view.context.get("ids")
        if ids is None:
            raise ValidationError("Themis(bids=...) needs the trace ids of the jobs (view.context['ids']).")
        tid = np.asarray(ids)[view.jobs[rows]]
        tables = []
        for j in tid.tolist():
            if j not in self.bids:
                raise ValidationError(f"`bids` has no table for job {j!r}; with `bids`, every job must have one.")
            per = self.bids[j]
            extra = sorted(set(per) - set(view.gpu_types))
            if extra:
                raise ValidationError(f"`bids` for job {j!r} names GPU type {extra[0]!r}, which the cluster does not "
                                      f"have ({list(view.gpu_types)}).")
            row = []
            for k, t in enumerate(view.gpu_types):
                tab = list(per.get(t, [0.0]))
                row.append(tab[: int(free[k]) + 1] if len(tab) > free[k] + 1 else tab)
            tables.append(row)
        return valuation_tables(tables, gpu_types=view.gpu_types, names=tid.tolist(), field="bids")

    # ------------------------------------------------------------ round loop
    def plan_round(self, view: Any, state: ThemisState) -> Any:
        """The rows this round: leased gangs, and the winners of an auction of the free GPUs."""
        from ..rounds.protocol import RoundRows

        t0 = time.perf_counter()
        st = self.initial_state(view.now) if state is None else state
        if not isinstance(st, ThemisState):
            raise ValidationError(f"`state` must be a ThemisState; got {type(st).__name__}.")
        n, m = view.n_jobs, len(view.gpu_types)
        s = view.scale_factors.astype(np.int64)
        cap = np.asarray(view.capacities, dtype=np.int64)
        T = view.throughputs
        U = view.unconsolidated if view.unconsolidated is not None else T
        # leases carried over (type columns re-mapped by name)
        known = rows_of(st.job_ids, view.jobs)
        lease = np.full(n, -1, np.int64)
        end = np.zeros(n)
        credit = np.zeros(n)
        reserved_for = -1
        has = np.flatnonzero(known >= 0)
        if has.size and st.credit is not None:
            credit[has] = st.credit[known[has]]
        if has.size and st.gpu_types is not None:
            lut = np.array([view.gpu_types.index(t) if t in view.gpu_types else -1 for t in st.gpu_types] + [-1])
            lease[has] = lut[st.lease_type[known[has]]]
            end[has] = st.lease_end[known[has]]
        held = (lease >= 0) & (end > view.now + _EPS)
        lease[~held] = -1
        free = cap - np.bincount(lease[held], weights=s[held], minlength=m).astype(np.int64)
        info: dict[str, Any] = {"solved": False, "solve_ok": True, "solve_s": 0.0, "bidders": 0, "leased": int(held.sum())}
        Teff = self.effective_throughputs(view)
        usable = usable_mask(Teff, s, cap)
        cand = np.flatnonzero(~held & usable.any(axis=1))
        new = np.full(n, -1, np.int64)
        if cand.size and (free > 0).any():
            jobs = view.jobset()
            iso = isolated_throughput(jobs, cap, Teff)
            rho = finish_time_estimate(view.remaining, np.where(iso > 0, iso, np.nan),
                                       np.maximum(view.now - view.arrival, 0.0), view.isolated_time)
            rho = np.nan_to_num(rho, nan=0.0)
            order = cand[np.lexsort((view.jobs[cand], -rho[cand]))]
            pos = np.flatnonzero(view.jobs[order] == st.reserved_for)
            worst = int(order[pos[0]]) if pos.size else int(order[0])   # a reservation stays with its job
            fit_now = usable[worst] & (s[worst] <= free)
            if pos.size and fit_now.any():
                # the reservation is complete: the job takes its gang on its fastest type that fits
                k = int(np.flatnonzero(fit_now)[np.argmax(Teff[worst, fit_now])])
                new[worst] = k
                free[k] -= s[worst]
                order = order[order != worst]
                info["reservation_granted"] = int(view.jobs[worst])
            elif self.gang_reservation and not fit_now.any():
                reserved_for = int(view.jobs[worst])
            reserve = self._reservation(worst, usable, Teff, s, free) if reserved_for >= 0 else np.zeros_like(free)
            free = free - reserve
            info["reserved"] = int(reserve.sum())
            n_bid = max(1, math.ceil((1.0 - float(self.fairness_knob)) * (order.size + (new >= 0).sum()) - 1e-12))
            bidders = order[:max(0, min(n_bid - int((new >= 0).sum()), order.size))]
            fits = usable[bidders] & (s[bidders, None] <= free[None, :])
            if bidders.size and fits.any():
                auction = self._auction(view, bidders, fits, Teff, iso, free)
                info.update(solved=True, solve_ok=auction.success, solve_status=auction.status,
                            solve_s=auction.solve_s, bidders=int(bidders.size), solve_classes=auction.classes,
                            payment_mean=float(np.nanmean(auction.fractions)))
                if not auction.status.startswith("failed"):   # "inaccurate" is used, and reported
                    credit[bidders] += auction.kept.sum(axis=1) / s[bidders]
                    new[bidders] = self._round_gangs(auction.kept, fits, bidders, s, free, credit, rho)
                    credit[bidders[new[bidders] >= 0]] -= 1.0
                else:
                    log.warning("themis: auction %s (%s); its offer goes to work conservation", auction.status,
                                auction.message)
                if not auction.success:
                    log.info("themis: round %d auction status %s", view.round_index, auction.status)
            if self.work_conserving:
                won = bidders[new[bidders] >= 0]     # (a completed reservation is already out of `free`)
                left = free - np.bincount(new[won], weights=s[won], minlength=m).astype(np.int64)
                rest = order[new[order] < 0]
                bid = np.isin(rest, bidders)
                rest = np.concatenate([rest[~bid], rest[bid]])
                pref = np.argsort(-np.where(usable[rest], Teff[rest], -np.inf), axis=1, kind="stable")
                cj = np.repeat(rest, m)
                ck = pref.ravel()
                ok = usable[cj, ck]
                extra, _ = greedy_pack(cj[ok], ck[ok], s, left, n)
                new = np.where(extra >= 0, extra, new)
        granted = new >= 0
        lease[granted] = new[granted]
        end[granted] = view.now + float(self.lease_seconds)
        r = np.flatnonzero(lease >= 0)
        k = lease[r]
        info["plan_s"] = time.perf_counter() - t0
        info["granted"] = int(granted.sum())
        payload = (view.jobs.copy(), lease, end, credit, reserved_for, float(view.now), float(view.round_seconds),
                   int(st.auctions + bool(info["solved"])), tuple(view.gpu_types))
        return RoundRows(view.jobs[r], k, s[r], T[r, k], spread_rate=U[r, k], info=info, payload=payload)

    def _reservation(self, worst: int, usable: np.ndarray, Teff: np.ndarray, s: np.ndarray,
                     free: np.ndarray) -> np.ndarray:
        """GPUs kept free for the worst job when its gang fits no type now (step 2a)."""
        reserve = np.zeros_like(free)
        if not self.gang_reservation or (usable[worst] & (s[worst] <= free)).any():
            return reserve
        ks = np.flatnonzero(usable[worst])
        k = int(ks[np.lexsort((-free[ks], -Teff[worst, ks]))[0]])   # its fastest type: the same every round
        reserve[k] = min(int(free[k]), int(s[worst]))
        return reserve

    def _auction(self, view: Any, bidders: np.ndarray, fits: np.ndarray, Teff: np.ndarray, iso: np.ndarray,
                 free: np.ndarray) -> AuctionResult:
        s = view.scale_factors[bidders].astype(float)
        if self.bids is not None:
            tab = self._tables(view, bidders, free)
            return partial_allocation(tables=tab, offered=free, demand=s)
        values = np.where(fits, Teff[bidders] / (s * iso[bidders])[:, None], 0.0)
        return partial_allocation(values, free, demand=s, names=view.jobs[bidders].tolist())

    @staticmethod
    def _round_gangs(kept: np.ndarray, fits: np.ndarray, bidders: np.ndarray, s: np.ndarray, free: np.ndarray,
                     credit: np.ndarray, rho: np.ndarray) -> np.ndarray:
        """Whole gangs from the kept (divisible) GPUs: see step 5 of the module docstring."""
        sb = s[bidders]
        m = kept.shape[1]
        won = kept.sum(axis=1) / sb
        order = np.lexsort((-rho[bidders], -credit[bidders]))
        order = order[won[order] > 0]
        pref = np.argsort(-kept[order], axis=1, kind="stable")
        cj = np.repeat(order, m)
        ck = pref.ravel()
        # bidders owed a whole gang (credit >= 1) take it from the free GPUs ...
        owed = (credit[bidders][cj] >= 1.0) & fits[cj, ck]
        got, _ = greedy_pack(cj[owed], ck[owed], sb, free, bidders.size)
        used = np.bincount(ck[owed][got[cj[owed]] == ck[owed]], weights=sb[cj[owed]][got[cj[owed]] == ck[owed]],
                           minlength=m).astype(np.int64)
        # ... the others share the rounded budget of what the auction kept
        budget = np.floor(kept.sum(axis=0) + 0.5).astype(np.int64)
        room = np.minimum(np.maximum(budget - used, 0), free - used)
        rest = (got[cj] < 0) & (kept[cj, ck] > 0) & fits[cj, ck]
        more, _ = greedy_pack(cj[rest], ck[rest], sb, room, bidders.size)
        return np.where(got >= 0, got, more)

    def record_round(self, state: ThemisState, ran: Any, seconds: np.ndarray) -> ThemisState:
        """The leases granted when the round was planned (they hold whether or not placement ran
        every row), and the clock."""
        st = self.initial_state() if state is None else state
        if not isinstance(st, ThemisState):
            raise ValidationError(f"`state` must be a ThemisState; got {type(st).__name__}.")
        jobs, lease, end, credit, reserved_for, now, L, auctions, types = ran.payload
        sec = np.asarray(seconds, dtype=float)
        length = float(sec.max()) if sec.size else L
        return ThemisState(job_ids=np.asarray(jobs, np.int64), lease_type=np.asarray(lease, np.int64),
                           lease_end=np.asarray(end, float), credit=np.asarray(credit, float),
                           reserved_for=int(reserved_for), gpu_types=tuple(types), time=now + length,
                           rounds=st.rounds + 1, auctions=int(auctions))
