r"""Inside-server GPU selection (MAPA-style): which GPUs of a server a gang gets.

A server's GPUs are joined by links of different speeds (NVLink, doubled NVLink, PCIe, the
inter-socket bus). :class:`GpuGraph` holds one server shape as a symmetric bandwidth matrix
``B`` (GB/s per direction, ``B[a, b] > 0`` for every pair: GPUs without a direct link still
talk through PCIe and the host, and that path's bandwidth is the entry). An
:class:`Interconnect` says which servers have which graph, plus the bandwidth of each
server's uplink and each rack's uplink (used by :mod:`hetsched.placement.contention`).

Bandwidth a pattern sees (Lin et al., "MAPA: Multi-Accelerator Pattern Allocation Policy
for Multi-Tenant GPU Servers", SC'21, §3: the application's pattern graph matched onto the
hardware graph, scored by the bandwidth it gets)
--------------------------------------------------------------------------------------------
For a subset :math:`S` of :math:`k` GPUs,

* ring all-reduce: the ring runs at its slowest link, and we may choose the ring's order:

  .. math:: \beta_{ring}(S) = \max_{\text{Hamiltonian cycles } C \text{ of } S}\ \min_{(a,b) \in C} B_{ab}

  (:math:`k = 2`: the one link, used in both directions; :math:`k \le 8`: at most
  :math:`7!/2 = 2520` cycles, all enumerated);
* all-to-all: every pair exchanges directly, so the slowest pair bounds it:
  :math:`\beta_{a2a}(S) = \min_{a \ne b \in S} B_{ab}`;
* :math:`k = 1`: no traffic between GPUs, :math:`\beta = \infty` (reported as NaN).

Choosing the subset (MAPA §4, its "preserve" policy)
---------------------------------------------------
Among the free GPUs :math:`F` of a server, a job that is *bandwidth-sensitive* (a gang of
two or more with communication intensity > 0) takes the :math:`S \subseteq F`, :math:`|S| = k`
that maximises, in this order,

1. :math:`\beta(S)` (the bandwidth its pattern sees),
2. :math:`\sigma(S) = \sum_{a<b \in S} B_{ab}` (aggregate bandwidth inside the subset; with
   several NCCL rings a job uses more than the bottleneck ring, and this is what makes a fully
   connected NVLink quad beat a square with the same bottleneck),
3. :math:`\sigma(F \setminus S)` (bandwidth left among the GPUs that stay free: keep
   high-bandwidth islands whole for the next job),

and the lowest GPU ids on a tie (sums equal up to rounding, 1e-12 of the largest, are
ties: the same sum added in another order can differ in its last bit). A job that is not
sensitive ranks by 3, then 1, then 2:
it takes the GPUs whose loss hurts the rest least. For every graph the choice is computed
once for every free set and every :math:`k` (``2^n`` free sets, :math:`n \le 8`) and
placement only looks it up, server by server, largest sensitive gang first.

What differs from MAPA: MAPA scores candidate matches with its own link-sum ("LAST")
scores and a preservation score from pattern counts; we use the bottleneck of the best ring
(the rate NCCL's ring runs at) first and aggregate bandwidth second, and the preservation
term is the bandwidth left among free GPUs. Servers larger than 8 GPUs are refused (the exact
search enumerates ``2^n`` free sets).
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..inputs.topology import Topology
from ..validation import (
    check_mapping,
    check_matrix,
    check_nonempty_str,
    check_positive,
    fail,
    read_json_file,
)

__all__ = [
    "MAX_GRAPH_GPUS",
    "PATTERNS",
    "BoundInterconnect",
    "GpuGraph",
    "Interconnect",
    "load_interconnect",
    "preset_graph",
]

log = logging.getLogger(__name__)

#: Communication patterns a job may declare (index = code used in arrays).
PATTERNS = ("ring", "all_to_all")

#: Largest server the exact subset search handles.
MAX_GRAPH_GPUS = 8

#: NVLink 2 (V100): GB/s per direction per link.
_NVLINK2 = 25.0


def _dgx1_v100(pcie_gb_s: float = 10.0) -> np.ndarray:
    """DGX-1 (V100) hybrid cube-mesh: two fully connected quads 0-3 and 4-7, GPU ``i`` linked to
    ``i + 4``; each GPU has six NVLinks over four neighbours, so two of its links are doubled:
    0-3, 1-2, 2-3, 0-4, 1-5, 4-7, 5-6, 6-7 (the same matrix as MAPA's ``dgx-v`` system, which
    also gives 10 GB/s to the pairs without NVLink, through PCIe and the inter-socket bus)."""
    b = np.full((8, 8), float(pcie_gb_s))
    single = [(0, 1), (0, 2), (1, 3), (2, 6), (3, 7), (4, 5), (4, 6), (5, 7)]
    double = [(0, 3), (1, 2), (2, 3), (0, 4), (1, 5), (4, 7), (5, 6), (6, 7)]
    for pairs, bw in ((single, _NVLINK2), (double, 2 * _NVLINK2)):
        for a, c in pairs:
            b[a, c] = b[c, a] = bw
    np.fill_diagonal(b, 0.0)
    return b


def _uniform(n: int, bw: float) -> np.ndarray:
    b = np.full((n, n), float(bw))
    np.fill_diagonal(b, 0.0)
    return b


#: Named graphs: name -> (builder, description).
_PRESETS = {
    "dgx1_v100": (lambda: _dgx1_v100(), "8 V100, hybrid cube-mesh NVLink 2 (25/50 GB/s), 10 GB/s PCIe/QPI"),
    "nvswitch8": (lambda: _uniform(8, 300.0), "8 GPUs on NVSwitch, 300 GB/s between every pair (DGX A100)"),
    "pcie8": (lambda: _uniform(8, 12.0), "8 GPUs on PCIe 3 only, 12 GB/s between every pair"),
    "pcie4": (lambda: _uniform(4, 12.0), "4 GPUs on PCIe 3 only, 12 GB/s between every pair"),
}


@dataclass(frozen=True, eq=False)
class GpuGraph:
    """The GPU interconnect of one server shape.

    Parameters
    ----------
    name : str
        A label (used in messages).
    bandwidth : array-like, shape (n, n)
        GB/s per direction between GPU ``a`` and ``b`` (local indices); symmetric, zero on the
        diagonal, positive and finite elsewhere; ``1 <= n <= 8``.

    Examples
    --------
    >>> g = preset_graph("dgx1_v100")
    >>> g.best_bandwidth(4, "ring"), g.best_subset(4, "ring")
    (25.0, (0, 1, 2, 3))
    """

    name: str
    bandwidth: np.ndarray
    _tables: dict = field(default_factory=dict, repr=False, compare=False, init=False)

    def __post_init__(self) -> None:
        check_nonempty_str(self.name, "graph name")
        b = check_matrix(self.bandwidth, f"bandwidth of graph {self.name!r}", shape=(-1, -1),
                         shape_text="(n, n)", where=lambda i: f"entry ({i[0]}, {i[1]})")
        n = b.shape[0]
        if b.shape != (n, n) or not 1 <= n <= MAX_GRAPH_GPUS:
            raise ValidationError(f"`bandwidth` of graph {self.name!r} must be square with 1..{MAX_GRAPH_GPUS} "
                                  f"GPUs; got shape {b.shape}.")
        if np.any(np.diag(b) != 0):
            i = int(np.flatnonzero(np.diag(b) != 0)[0])
            raise ValidationError(f"`bandwidth` of graph {self.name!r} must be 0 on the diagonal; "
                                  f"entry ({i}, {i}) is {b[i, i]:g}.")
        asym = np.argwhere(b != b.T)
        if asym.size:
            i, j = (int(v) for v in asym[0])
            raise ValidationError(f"`bandwidth` of graph {self.name!r} must be symmetric; entry ({i}, {j}) is "
                                  f"{b[i, j]:g} but ({j}, {i}) is {b[j, i]:g}.")
        off = ~np.eye(n, dtype=bool)
        if np.any(b[off] <= 0):
            i, j = (int(v) for v in np.argwhere(off & (b <= 0))[0])
            raise ValidationError(f"`bandwidth` of graph {self.name!r} must be positive between distinct GPUs "
                                  f"(the PCIe/host path when there is no direct link); entry ({i}, {j}) is {b[i, j]:g}.")
        b.setflags(write=False)
        object.__setattr__(self, "bandwidth", b)

    @property
    def n_gpus(self) -> int:
        """GPUs of the server shape."""
        return int(self.bandwidth.shape[0])

    # ------------------------------------------------------------------ scores
    def scores(self, pattern: str) -> np.ndarray:
        """``beta(S)`` for every subset mask ``S`` (bit ``a`` = GPU ``a``), shape ``(2**n,)``;
        ``inf`` for subsets of fewer than two GPUs."""
        return self._table(pattern)["score"]

    def subset_bandwidth(self, gpus: Any, pattern: str = "ring") -> float:
        """``beta`` of the subset ``gpus`` (local indices); NaN for fewer than two GPUs."""
        mask = _mask_of(gpus, self.n_gpus, self.name)
        s = float(self.scores(pattern)[mask])
        return math.nan if math.isinf(s) else s

    def best_bandwidth(self, k: int, pattern: str = "ring") -> float:
        """The largest ``beta`` of any ``k``-subset (NaN for ``k = 1``)."""
        return float(self._table(pattern)["best"][self._k(k)])

    def best_subset(self, k: int, pattern: str = "ring", *, free: Any = None,
                    sensitive: bool = True) -> tuple[int, ...]:
        """The ``k`` GPUs (local indices, ascending) chosen among ``free`` (default all) by the
        rule of the module docstring."""
        k = self._k(k)
        fmask = (1 << self.n_gpus) - 1 if free is None else _mask_of(free, self.n_gpus, self.name)
        if bin(fmask).count("1") < k:
            raise ValidationError(f"graph {self.name!r}: `free` holds {bin(fmask).count('1')} GPUs; a gang of {k} "
                                  f"does not fit.")
        m = int(self._table(pattern)["choice"][int(sensitive), k, fmask])
        return tuple(a for a in range(self.n_gpus) if m >> a & 1)

    def _k(self, k: Any) -> int:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= self.n_gpus:
            raise fail("k", f"an integer in [1, {self.n_gpus}] (the GPUs of graph {self.name!r})", k)
        return int(k)

    def _table(self, pattern: str) -> dict[str, np.ndarray]:
        if pattern not in PATTERNS:
            raise fail("pattern", f"one of {list(PATTERNS)}", pattern)
        if pattern not in self._tables:
            self._tables[pattern] = _build_tables(self.bandwidth, pattern)
        return self._tables[pattern]


def preset_graph(name: str) -> GpuGraph:
    """A named graph: ``"dgx1_v100"``, ``"nvswitch8"``, ``"pcie8"`` or ``"pcie4"`` (see the docs)."""
    if name not in _PRESETS:
        raise fail("preset", f"one of {sorted(_PRESETS)}", name)
    return GpuGraph(name, _PRESETS[name][0]())


# ---------------------------------------------------------------------- the tables
def _popcount(masks: np.ndarray) -> np.ndarray:
    return np.array([bin(int(m)).count("1") for m in masks], dtype=np.int64)


def _pair_sums(b: np.ndarray) -> np.ndarray:
    """``sigma(S)``: sum of ``B`` over the pairs inside ``S``, for every mask."""
    n = b.shape[0]
    masks = np.arange(1 << n)
    bits = (masks[:, None] >> np.arange(n)) & 1
    return 0.5 * np.einsum("ma,ab,mb->m", bits, b, bits)


def _cycles(k: int) -> np.ndarray:
    """Hamiltonian cycles of ``k`` positions, each once: position 0 first, and of a cycle and
    its reverse only the one whose second position is below its last."""
    rest = [p for p in itertools.permutations(range(1, k)) if p[0] < p[-1]]
    return np.array([(0, *p) for p in rest], dtype=np.int64)


def _subset_scores(b: np.ndarray, pattern: str) -> np.ndarray:
    """``beta(S)`` for every mask (``inf`` below two GPUs)."""
    n = b.shape[0]
    masks = np.arange(1 << n)
    pop = _popcount(masks)
    score = np.full(masks.shape, np.inf)
    for k in range(2, n + 1):
        sub = masks[pop == k]
        members = np.array([[a for a in range(n) if m >> a & 1] for m in sub], dtype=np.int64)
        if pattern == "all_to_all":
            iu = np.triu_indices(k, 1)
            score[sub] = b[members[:, iu[0]], members[:, iu[1]]].min(axis=1)
            continue
        cyc = _cycles(k) if k > 2 else np.array([[0, 1]], dtype=np.int64)   # a ring of two: its one link
        nodes = members[:, cyc]                                   # (n_sub, n_cycles, k)
        links = b[nodes, np.roll(nodes, -1, axis=2)]              # each cycle's links
        score[sub] = links.min(axis=2).max(axis=1)
    return score


#: Values closer than this times the largest one rank equal in :func:`_dense_rank`.
TIE_RELATIVE = 1e-12


def _dense_rank(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Ranks 0.. of ``values`` and how many there are: sorted values closer than
    :data:`TIE_RELATIVE` times the largest magnitude to the previous one share its rank (a
    pair sum over {0, 2, 3, 4} and one over {0, 1, 2, 3} can be the same number summed in
    another order and differ in the last bit; exact ranks then broke the tie by that bit
    instead of by the lowest ids)."""
    flat = values.reshape(-1)
    if not flat.size:
        return np.zeros(values.shape, dtype=np.int64), 0
    order = np.argsort(flat, kind="stable")
    v = flat[order]
    tol = TIE_RELATIVE * float(np.abs(v).max())
    step = np.empty(v.size, dtype=bool)
    step[0] = False
    step[1:] = np.diff(v) > tol
    rank = np.cumsum(step)
    out = np.empty(flat.size, dtype=np.int64)
    out[order] = rank
    return out.reshape(values.shape), int(rank[-1]) + 1


def _build_tables(b: np.ndarray, pattern: str) -> dict[str, np.ndarray]:
    """``score`` per mask, ``best`` per k, and ``choice[sensitive, k, free mask]`` (-1: no fit)."""
    n = b.shape[0]
    masks = np.arange(1 << n)
    pop = _popcount(masks)
    score = _subset_scores(b, pattern)
    sigma = _pair_sums(b)
    best = np.full(n + 1, np.nan)
    choice = np.full((2, n + 1, 1 << n), -1, dtype=np.int64)
    for k in range(1, n + 1):
        cand = masks[pop == k]                                    # ascending: ties go to the lowest ids
        if k >= 2:
            best[k] = float(score[cand].max())
        fits = (cand[None, :] & ~masks[:, None]) == 0             # (free mask, candidate)
        r_beta, nb = _dense_rank(np.where(np.isinf(score[cand]), 0.0, score[cand]))
        r_sig, ns = _dense_rank(sigma[cand])
        r_left, nl = _dense_rank(sigma[masks[:, None] ^ cand[None, :]])
        keys = {
            1: (r_beta[None, :] * ns + r_sig[None, :]) * nl + r_left,          # sensitive
            0: (r_left * nb + r_beta[None, :]) * ns + r_sig[None, :],          # not sensitive
        }
        for sens, key in keys.items():
            key = np.where(fits, key, -1)
            pick = key.argmax(axis=1)
            ok = key[np.arange(masks.size), pick] >= 0
            choice[sens, k] = np.where(ok, cand[pick], -1)
    log.debug("interconnect tables: %d GPUs, pattern %s, best %s", n, pattern, best.tolist())
    return {"score": score, "best": best, "choice": choice}


def _mask_of(gpus: Any, n: int, name: str) -> int:
    items = list(gpus)
    m = 0
    for a in items:
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)) or not 0 <= a < n:
            raise ValidationError(f"graph {name!r} has GPUs 0..{n - 1}; got GPU {a!r}.")
        if m >> int(a) & 1:
            raise ValidationError(f"graph {name!r}: GPU {int(a)} is listed twice.")
        m |= 1 << int(a)
    return m


# ---------------------------------------------------------------------- the cluster's graphs
@dataclass(frozen=True)
class Interconnect:
    """Which servers have which GPU graph, and the uplinks between servers.

    Parameters
    ----------
    graphs : Mapping[str, GpuGraph]
        Graphs by name.
    types : Mapping[str, str], optional
        GPU type -> graph name: every server of that type has that graph.
    servers : Mapping[str, str], optional
        Server name -> graph name (overrides ``types``).
    server_uplink_gb_s : float or None
        Bandwidth (GB/s) of each server's link to its rack switch; ``None``: inter-server
        links are not modelled (no contention).
    rack_uplink_gb_s : float or None
        Bandwidth (GB/s) of each rack's uplink to the spine; ``None``: a non-blocking spine.

    Servers named by neither mapping have no graph: their GPUs are chosen as placement's
    read-back gives them, and their jobs' predicted bandwidth is NaN. ``types`` may name GPU
    types a cluster does not have (one file for several clusters; logged); ``servers`` must
    name servers of the cluster.
    """

    graphs: Mapping[str, GpuGraph]
    types: Mapping[str, str] = field(default_factory=dict)
    servers: Mapping[str, str] = field(default_factory=dict)
    server_uplink_gb_s: float | None = None
    rack_uplink_gb_s: float | None = None

    def __post_init__(self) -> None:
        check_mapping(self.graphs, "graphs")
        for name, g in self.graphs.items():
            if not isinstance(g, GpuGraph):
                raise ValidationError(f"`graphs[{name!r}]` must be a GpuGraph; got {type(g).__name__}.")
        for arg in ("types", "servers"):
            m = check_mapping(getattr(self, arg), arg)
            for key, gname in m.items():
                if gname not in self.graphs:
                    raise ValidationError(f"`{arg}[{key!r}]` names graph {gname!r}, which is not in `graphs` "
                                          f"({sorted(self.graphs)}).")
        for arg in ("server_uplink_gb_s", "rack_uplink_gb_s"):
            object.__setattr__(self, arg, check_positive(getattr(self, arg), arg, allow_none=True))
        if self.rack_uplink_gb_s is not None and self.server_uplink_gb_s is None:
            raise ValidationError("`rack_uplink_gb_s` needs `server_uplink_gb_s` (the links below the rack uplink).")

    def bind(self, topology: Topology) -> BoundInterconnect:
        """The graphs of ``topology``'s servers as arrays (checked against each server's GPUs).

        Raises
        ------
        ValidationError
            A type or server the topology does not have; a graph whose GPU count differs from
            a server it is given to (the message names the server and both numbers).
        """
        names = list(self.graphs)
        gindex = {g: i for i, g in enumerate(names)}
        server_graph = np.full(topology.n_servers, -1, np.int64)
        unused = sorted(t for t in self.types if t not in topology.gpu_types)
        if unused:   # one file may describe more GPU types than a given cluster has
            log.info("interconnect: GPU types %s are not in the cluster; their graphs are unused", unused)
        for t, g in self.types.items():
            if t in topology.gpu_types:
                server_graph[topology.server_type == topology.type_index(t)] = gindex[g]
        for s, g in self.servers.items():
            server_graph[topology.server_index(s, argument=f"servers[{s!r}]")] = gindex[g]
        sizes = np.array([self.graphs[g].n_gpus for g in names], dtype=np.int64)
        has = server_graph >= 0
        bad = np.flatnonzero(has & (sizes[np.maximum(server_graph, 0)] != topology.server_gpus))
        if bad.size:
            s = int(bad[0])
            g = names[server_graph[s]]
            raise ValidationError(f"interconnect graph {g!r} has {self.graphs[g].n_gpus} GPUs but server "
                                  f"{topology.server_names[s]!r} has {int(topology.server_gpus[s])}; give that server "
                                  f"a graph of its size in `servers`.")
        graphs = [self.graphs[g] for g in names]
        return BoundInterconnect(self, topology, tuple(graphs), server_graph)

    @classmethod
    def from_topology(cls, topology: Topology) -> Interconnect:
        """The interconnect a multi-level topology implies (``Topology(levels=...)``).

        Two GPUs of one server talk at the bandwidth of their lowest common level
        (``topology.link_bandwidth``): that is the server's graph (servers with equal
        matrices share one). The level above ``"server"`` joins servers (its bandwidth is the
        server uplink) and the level above ``"rack"``, when the topology has one, joins racks
        (the rack uplink). A server gets no graph when it has more than
        :data:`MAX_GRAPH_GPUS` GPUs or a pair of its GPUs has no declared bandwidth; an uplink
        whose level declares no bandwidth is None (not modelled).

        Raises
        ------
        ValidationError
            ``topology`` has no levels (a topology without :meth:`link_bandwidth`).
        """
        if not hasattr(topology, "link_bandwidth") or not hasattr(topology, "level_names"):
            raise ValidationError("`topology` must be a hetsched Topology with levels (link_bandwidth); got "
                                  f"{type(topology).__name__}.")
        names = topology.level_names
        s_l = names.index("server")
        graphs: dict[str, GpuGraph] = {}
        servers: dict[str, str] = {}
        shapes: dict[tuple[int, bytes], str] = {}
        skipped = 0
        for n in np.unique(topology.server_gpus).tolist():
            srv = np.flatnonzero(topology.server_gpus == n)
            if n > MAX_GRAPH_GPUS:
                skipped += srv.size
                continue
            a, b = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
            first = topology.gpu_offset[srv][:, None, None]
            bw = topology.link_bandwidth(first + a[None], first + b[None])      # (servers, n, n)
            bw[:, np.arange(n), np.arange(n)] = 0.0
            for s, mat in zip(srv.tolist(), bw):
                if not np.all(np.isfinite(mat)):
                    skipped += 1
                    continue
                key = (n, mat.tobytes())
                if key not in shapes:
                    shapes[key] = f"shape{len(shapes)}"
                    graphs[shapes[key]] = GpuGraph(shapes[key], mat)
                servers[topology.server_names[s]] = shapes[key]
        if skipped:
            log.info("interconnect from topology: %d servers without a graph (more than %d GPUs or a pair without "
                     "a declared bandwidth)", skipped, MAX_GRAPH_GPUS)
        up = topology.level_bandwidth(s_l + 1) if s_l + 1 < len(names) else None
        rack_up = None
        if up is not None and s_l + 2 < len(names) and names[s_l + 1] == "rack":
            rack_up = topology.level_bandwidth(s_l + 2)
        return cls(graphs=graphs, servers=servers, server_uplink_gb_s=up, rack_uplink_gb_s=rack_up)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Interconnect:
        """An interconnect from its JSON form (see ``docs/interconnect.md``)::

            {"graphs": {"dgx": {"preset": "dgx1_v100"}, "p4": {"bandwidth_gb_s": [[0, 12], [12, 0]]}},
             "types": {"v100": "dgx"}, "servers": {"k80-s3": "p4"},
             "server_uplink_gb_s": 12.5, "rack_uplink_gb_s": 50.0}
        """
        check_mapping(data, "interconnect")
        known = {"graphs", "types", "servers", "server_uplink_gb_s", "rack_uplink_gb_s"}
        extra = sorted(set(data) - known)
        if extra:
            raise ValidationError(f"interconnect keys must be among {sorted(known)}; got unknown {extra}.")
        if "graphs" not in data:
            raise ValidationError("interconnect must have a 'graphs' mapping; it has none.")
        graphs: dict[str, GpuGraph] = {}
        for name, spec in check_mapping(data["graphs"], "graphs").items():
            check_mapping(spec, f"graphs[{name!r}]")
            if set(spec) == {"preset"}:
                g = preset_graph(spec["preset"])
                graphs[name] = GpuGraph(name, g.bandwidth.copy())
            elif set(spec) == {"bandwidth_gb_s"}:
                graphs[name] = GpuGraph(name, spec["bandwidth_gb_s"])
            else:
                raise ValidationError(f"`graphs[{name!r}]` must have exactly one key, 'preset' or 'bandwidth_gb_s'; "
                                      f"got {sorted(spec)}.")
        return cls(graphs=graphs, types=dict(data.get("types", {})), servers=dict(data.get("servers", {})),
                   server_uplink_gb_s=data.get("server_uplink_gb_s"), rack_uplink_gb_s=data.get("rack_uplink_gb_s"))


def load_interconnect(path: str | Path) -> Interconnect:
    """Read an interconnect JSON file (:meth:`Interconnect.from_dict`)."""
    return Interconnect.from_dict(read_json_file(path, "interconnect file"))


@dataclass(frozen=True, eq=False)
class BoundInterconnect:
    """An :class:`Interconnect` on one topology: per-server graph index (-1: none) and the
    graphs' tables stacked so that placement looks them up with arrays."""

    interconnect: Interconnect
    topology: Topology
    graphs: tuple[GpuGraph, ...]
    server_graph: np.ndarray

    def stacked(self) -> dict[str, np.ndarray]:
        """``score[g, pattern, mask]``, ``best[g, pattern, k]`` and
        ``choice[g, pattern, sensitive, k, free mask]`` over all graphs (padded to 8 GPUs)."""
        if "_stacked" in self.__dict__:
            return self.__dict__["_stacked"]
        G, P, M, K = len(self.graphs), len(PATTERNS), 1 << MAX_GRAPH_GPUS, MAX_GRAPH_GPUS + 1
        score = np.full((max(G, 1), P, M), np.nan)
        best = np.full((max(G, 1), P, K), np.nan)
        choice = np.full((max(G, 1), P, 2, K, M), -1, np.int64)
        for g, graph in enumerate(self.graphs):
            n = graph.n_gpus
            for p, pat in enumerate(PATTERNS):
                t = graph._table(pat)
                score[g, p, : 1 << n] = t["score"]
                best[g, p, : n + 1] = t["best"]
                choice[g, p, :, : n + 1, : 1 << n] = t["choice"]
        out = {"score": score, "best": best, "choice": choice}
        self.__dict__["_stacked"] = out
        return out
