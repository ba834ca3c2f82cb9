r"""Network-aware placement in the simulator: per-job communication tables, and how fast a
placed job runs on the GPUs and links it got.

:class:`NetworkAware` is what a simulation is given (``SimOptions(network=...)``, or
``hetsched simulate --interconnect FILE``): the cluster's :class:`Interconnect`, each job's
communication intensity :math:`c_j \in [0, 1]` and pattern ("ring" or "all_to_all"), and the
weight of the placement cost that keeps communication-heavy gangs on one server
(``PlacementCosts.network``). Bound to a workload it becomes :class:`BoundNetwork`, arrays over
the workload's jobs, and :meth:`BoundNetwork.rate_factors` turns a round's placement into one
throughput factor per job:

* a job on one server with predicted bandwidth :math:`\beta` (its subset, its pattern) and
  :math:`\beta^*` the best any subset of its size gets on an empty server of its graph (what a
  throughput table measured on a whole server saw) runs at

  .. math:: f_j = \frac{1}{(1 - c_j) + c_j\,\beta^* / \beta}

  (its communication time grows as :math:`1/\beta`; :math:`f = 1` on the best subset);
* a job spread over servers already runs at its table's *unconsolidated* throughput; on top,
  the contention model of :mod:`hetsched.placement.contention` (max-min fair shares of the
  server and rack uplinks) scales it by :math:`x_j / a_j`;
* one GPU, or a server without a graph: :math:`f = 1`.

Default communication intensity (when no table is given): the share of throughput a job
loses when spread, :math:`c_j = \operatorname{mean}_k (1 - U_{jk} / T_{jk})` over the types it
runs on (:math:`T` consolidated, :math:`U` unconsolidated throughputs of the workload, both in
every generated workload), 0 for one-GPU jobs. This is a proxy that errs high: with an
inter-/intra-server bandwidth ratio :math:`r`, :math:`1 - U/T = c(r - 1)/(1 + c(r - 1)) \ge c`.
A workload without unconsolidated throughputs needs an explicit table. Default pattern: ring.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ValidationError, show
from ..inputs.topology import Topology
from ..validation import check_bool, check_nonneg
from .contention import max_min_shares, spread_links
from .costs import PlacementCosts
from .interconnect import PATTERNS, BoundInterconnect, Interconnect
from .result import Placement

__all__ = ["BoundNetwork", "NetworkAware"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NetworkAware:
    """Interconnect, per-job communication tables and the network cost of a simulation.

    Parameters
    ----------
    interconnect : Interconnect
        GPU graphs and uplinks.
    comm_intensity : float, Mapping or None
        One value in [0, 1] for every job, a mapping trace id -> value covering every job, or
        None for the default of the module docstring.
    patterns : str, Mapping or None
        "ring" or "all_to_all" for every job, a mapping trace id -> pattern covering every job,
        or None (all "ring").
    network_cost : float, default 20.0
        ``PlacementCosts.network`` of the placement (0: the placement ignores communication,
        the simulator still applies the bandwidth and contention factors).
    choose_gpus : bool, default True
        Choose GPUs inside servers by the interconnect (MAPA); False keeps placement's lowest
        free ids (the simulator still applies the factors: an ablation).
    """

    interconnect: Interconnect
    comm_intensity: Any = None
    patterns: Any = None
    network_cost: float = 20.0
    choose_gpus: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.interconnect, Interconnect):
            raise ValidationError(f"`interconnect` must be a hetsched.placement.Interconnect; got "
                                  f"{type(self.interconnect).__name__}.")
        object.__setattr__(self, "network_cost", check_nonneg(self.network_cost, "network_cost"))
        object.__setattr__(self, "choose_gpus", check_bool(self.choose_gpus, "choose_gpus"))
        c = self.comm_intensity
        if c is not None and not isinstance(c, Mapping):
            _intensity(c, "comm_intensity")
        p = self.patterns
        if p is not None and not isinstance(p, Mapping) and p not in PATTERNS:
            raise ValidationError(f"`patterns` must be one of {list(PATTERNS)}, a mapping or None; got {show(p)}.")

    def bind(self, topology: Topology, ids: np.ndarray, scale_factors: np.ndarray, T: np.ndarray,
             U: np.ndarray | None) -> BoundNetwork:
        """Arrays over the workload's jobs (``ids`` are trace ids, ``T``/``U`` the consolidated and
        unconsolidated throughputs over the cluster's types).

        Raises
        ------
        ValidationError
            A table that misses a job or names one the workload does not have, a value out of
            range, or no table where the workload has no unconsolidated throughputs.
        """
        n = ids.shape[0]
        multi = np.asarray(scale_factors) > 1
        comm = np.asarray(self._intensities(ids, T, U), dtype=float) * multi
        pattern = self._patterns(ids)
        costs = PlacementCosts(network=self.network_cost)
        log.info("network-aware placement: %d jobs, mean communication intensity of gangs %.3f", n,
                 float(comm[multi].mean()) if multi.any() else 0.0)
        return BoundNetwork(self.interconnect.bind(topology), comm, pattern, costs, self.choose_gpus)

    def _intensities(self, ids: np.ndarray, T: np.ndarray, U: np.ndarray | None) -> np.ndarray:
        c = self.comm_intensity
        n = ids.shape[0]
        if c is None:
            if U is None:
                raise ValidationError("`comm_intensity` is needed: the workload has no unconsolidated throughputs to "
                                      "derive it from; give one value or a table trace id -> value.")
            with np.errstate(divide="ignore", invalid="ignore"):
                loss = np.where(T > 0, 1.0 - U / np.where(T > 0, T, 1.0), np.nan)
            cnt = np.sum(T > 0, axis=1)
            out = np.where(cnt > 0, np.nansum(np.clip(loss, 0.0, 1.0), axis=1) / np.maximum(cnt, 1), 0.0)
            return out
        if isinstance(c, Mapping):
            return _per_job(c, ids, "comm_intensity", lambda v, where: _intensity(v, where))
        return np.full(n, _intensity(c, "comm_intensity"))

    def _patterns(self, ids: np.ndarray) -> np.ndarray:
        p = self.patterns
        if p is None:
            return np.zeros(ids.shape[0], np.int64)
        if isinstance(p, Mapping):
            def one(v: Any, where: str) -> int:
                if v not in PATTERNS:
                    raise ValidationError(f"`{where}` must be one of {list(PATTERNS)}; got {show(v)}.")
                return PATTERNS.index(v)
            return _per_job(p, ids, "patterns", one).astype(np.int64)
        return np.full(ids.shape[0], PATTERNS.index(p), np.int64)


def _intensity(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not 0.0 <= float(v) <= 1.0:
        raise ValidationError(f"`{where}` must be a number in [0, 1]; got {show(v)}.")
    return float(v)


def _per_job(table: Mapping, ids: np.ndarray, name: str, one: Any) -> np.ndarray:
    """Values of ``table`` (trace id -> value) in the order of ``ids``; every job, no stranger."""
    keys = {str(k): v for k, v in table.items()}
    wanted = [str(i) for i in ids.tolist()]
    missing = [i for i in wanted if i not in keys]
    if missing:
        raise ValidationError(f"`{name}` must give a value for every job; missing {missing[:5]}"
                              f"{' ...' if len(missing) > 5 else ''} ({len(missing)} of {len(wanted)}).")
    extra = sorted(set(keys) - set(wanted))
    if extra:
        raise ValidationError(f"`{name}` names jobs the workload does not have: {extra[:5]}.")
    return np.array([one(keys[i], f"{name}[{i!r}]") for i in wanted], dtype=float)


@dataclass(frozen=True, eq=False)
class BoundNetwork:
    """:class:`NetworkAware` bound to a workload and a topology (arrays over workload jobs)."""

    interconnect: BoundInterconnect
    comm: np.ndarray
    pattern: np.ndarray
    costs: PlacementCosts
    choose_gpus: bool = True

    def place_kwargs(self, jobs: np.ndarray) -> dict[str, Any]:
        """Keywords of :func:`~hetsched.placement.place` for the workload jobs ``jobs``."""
        return {"interconnect": self.interconnect, "comm_intensity": self.comm[jobs],
                "patterns": [PATTERNS[p] for p in self.pattern[jobs].tolist()], "costs": self.costs,
                "choose_gpus": self.choose_gpus}

    def rate_factors(self, placement: Placement, jobs: np.ndarray) -> np.ndarray:
        """Throughput factor per job of ``placement`` (``jobs``: their workload indices); see
        the module docstring. Unplaced jobs get 1."""
        return rate_factors(placement, self.interconnect, self.comm[jobs])


def rate_factors(placement: Placement, bound: BoundInterconnect, comm: np.ndarray) -> np.ndarray:
    """The factor :math:`f_j` of every job of ``placement`` (module docstring).

    Parameters
    ----------
    placement : Placement
        Placed with ``interconnect`` (so that it carries ``bandwidth``).
    bound : BoundInterconnect
    comm : ndarray of float, shape (n_jobs,)
        Communication intensity per job of the placement.
    """
    n = placement.job_ids.shape[0]
    f = np.ones(n)
    servers = placement.servers_used
    bw = placement.bandwidth if placement.bandwidth is not None else np.full(n, np.nan)
    best = placement.info.get("best_bandwidth", np.full(n, np.nan))
    one = (servers == 1) & np.isfinite(bw) & np.isfinite(best) & (comm > 0)
    f[one] = 1.0 / ((1.0 - comm[one]) + comm[one] * best[one] / bw[one])
    ic = bound.interconnect
    spread = np.flatnonzero((servers > 1) & (comm > 0))
    if spread.size and ic.server_uplink_gb_s is not None:
        topo = placement.topology
        job_servers = []
        for j in spread.tolist():
            g = placement.gpus[placement.gpu_offset[j]:placement.gpu_offset[j + 1]]
            job_servers.append(np.unique(topo.gpu_server[g]))
        A, cap = spread_links(job_servers, topo.server_rack, topo.n_servers, topo.n_racks,
                              ic.server_uplink_gb_s, ic.rack_uplink_gb_s)
        demand = comm[spread] * ic.server_uplink_gb_s
        x = max_min_shares(A, demand, cap)
        f[spread] = np.where(demand > 0, x / np.where(demand > 0, demand, 1.0), 1.0)
    return f
