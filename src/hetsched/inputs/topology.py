"""Server topology of a cluster: servers (GPU type, GPUs per server, rack), GPU ids and levels.

A :class:`Topology` is a columnar record, one row per server. Every GPU has a *global id*
``gpu_offset[s] + i`` for the ``i``-th GPU (its *local index*) of server ``s``; placements
name GPUs either by global id or as ``(server name, local index)`` pairs.

Build one from explicit servers::

    Topology([Server("a0", "v100", 8, rack="r0"), Server("b0", "k80", 4, rack="r1")])

or from per-type counts, cut into servers of ``gpus_per_server`` and grouped into racks of
``servers_per_rack``::

    Topology.from_counts({"v100": 16, "k80": 8}, gpus_per_server=8, servers_per_rack=2)

:meth:`hetsched.Cluster.from_servers` wraps either form into a :class:`~hetsched.Cluster`
whose ``topology`` attribute holds the result.

Levels
------
A topology is also a hierarchy of *levels*, from the single GPU up: level 0 is always
``"gpu"``; the user declares the others bottom-up as :class:`Level` records (``levels=``
of every constructor, or :meth:`Topology.with_levels`)::

    levels = [Level("nvlink_pair", size=2, bandwidth=300.0),    # 2 GPUs
              Level("pcie_switch", size=2, bandwidth=32.0),     # 2 pairs
              Level("server", bandwidth=25.0),                  # the servers
              Level("rack", bandwidth=12.5),                    # Server.rack
              Level("pod", size=4, bandwidth=5.0)]              # 4 racks

Without ``levels`` a topology has the three levels ``("gpu", "server", "rack")``: what
existed before levels (servers and racks) is two levels of the hierarchy. The rules:

* ``"server"`` must be declared (exactly once): its units are the servers. ``"rack"`` is
  optional: when declared (above the server), its units are the servers' racks.
* Every other level has a ``size``: the number of units of the level just below that make
  one unit of it, grouped consecutively (local GPU order inside a server; unit order
  above). Below the server the size may differ per GPU type (a mapping type -> size, every
  type named). A server whose GPU count is not a multiple ends with a smaller (partial)
  unit, like ``from_counts``' last server; so does a group above the server.
* Units nest: every unit lies inside one unit of the level above (checked: a sized level
  between the server and the rack that would split a rack is refused).
* ``bandwidth`` (GB/s, positive, or None when unknown) is the bandwidth of the links that
  join the units of the level below inside one unit of this level: two GPUs whose lowest
  common level is ``l`` talk at ``bandwidth`` of level ``l``
  (:meth:`Topology.common_level`, :meth:`Topology.link_bandwidth`).

Per level ``l`` (an index into ``level_names``) the topology holds aligned arrays:
``gpu_unit[l]`` (unit of every GPU, shape ``(n_gpus,)``; units are numbered in order of
their first GPU), ``unit_parent[l]`` (unit of the level above, -1 at the top level),
``unit_gpus[l]`` (GPUs per unit), ``unit_children[l]`` (units of level ``l - 1`` inside)
and ``unit_type[l]`` (index into ``gpu_types``, -1 for a unit that mixes types);
:meth:`Topology.unit_name` names a unit (servers and racks by their names; others
``"{server}/{level}{i}"`` below the server and ``"{level}{i}"`` above it). Queries:
``level_names``, ``n_levels``, :meth:`~Topology.level_index`, :meth:`~Topology.n_units`,
:meth:`~Topology.level_bandwidth`, :meth:`~Topology.common_level`,
:meth:`~Topology.link_bandwidth`.

>>> topo = Topology.from_counts({"v100": 16}, gpus_per_server=8, servers_per_rack=1,
...                             levels=[Level("pair", size=2, bandwidth=300.0), Level("server", bandwidth=25.0),
...                                     Level("rack", bandwidth=12.5)])
>>> topo.level_names, [topo.n_units(lev) for lev in topo.level_names]
(('gpu', 'pair', 'server', 'rack'), [16, 8, 2, 2])
>>> topo.link_bandwidth([0, 0, 0], [1, 2, 8]).tolist()
[300.0, 25.0, nan]
>>> topo.unit_name("pair", 5)
'v100-s1/pair1'

This API is stable: placement and HiveD's cells (:mod:`hetsched.hived.cells`) read it.

Topology files
--------------
:func:`read_topology` reads a JSON file (``--topology FILE`` on the command line), the
same mapping :meth:`Topology.from_dict` takes and :meth:`Topology.to_dict` writes::

    {"levels": [{"name": "nvlink_pair", "size": 2, "bandwidth": 300},
                {"name": "server", "bandwidth": 25}, {"name": "rack", "bandwidth": 12.5}],
     "servers": [{"name": "a0", "gpu_type": "v100", "num_gpus": 8, "rack": "r0"}]}

or, instead of ``"servers"``, ``"counts": {"v100": 64}`` with optional
``"gpus_per_server"`` and ``"servers_per_rack"`` (as in :meth:`Topology.from_counts`).
``"levels"`` is optional (default: gpu, server, rack).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..validation import (
    check_int,
    check_nonempty_str,
    check_positive,
    check_type_map,
    fail,
    is_whole,
    read_json_file,
)

__all__ = ["DEFAULT_LEVELS", "Level", "Server", "Topology", "read_topology"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Level:
    """One level of a topology's hierarchy (see "Levels" in the module docstring).

    Parameters
    ----------
    name : str
        Unique, non-empty level name. ``"gpu"`` is level 0 and is never declared;
        ``"server"`` and ``"rack"`` are the servers and their racks.
    size : int or Mapping[str, int], optional
        Units of the level below per unit of this one (a positive integer; below the
        server, optionally per GPU type). Required for every level but ``"server"`` and
        ``"rack"``, which must not have one.
    bandwidth : float, optional
        GB/s of the links that join the units of the level below inside one unit of this
        level (positive, finite); None: not known.
    """

    name: str
    size: int | Mapping[str, int] | None = None
    bandwidth: float | None = None


#: The levels of a topology declared without ``levels``: servers and racks.
DEFAULT_LEVELS: tuple[Level, ...] = (Level("server"), Level("rack"))


@dataclass(frozen=True)
class Server:
    """One server: a name, the type of its GPUs, how many it has, and its rack.

    Parameters
    ----------
    name : str
        Unique, non-empty server name.
    gpu_type : str
        GPU type of every GPU in the server (servers are homogeneous).
    num_gpus : int
        Number of GPUs, a positive integer.
    rack : str, default "rack0"
        Rack (or any locality domain: pod, switch) the server sits in.
    """

    name: str
    gpu_type: str
    num_gpus: int
    rack: str = "rack0"


class Topology:
    """Servers, racks and GPU ids of a cluster, as aligned arrays.

    Parameters
    ----------
    servers : iterable of Server, tuple or mapping
        One entry per server: a :class:`Server`, a tuple ``(name, gpu_type, num_gpus[, rack])``
        or a mapping with those keys.
    gpu_types : sequence of str, optional
        Order of GPU types (default: order of first appearance). Every server type must be
        listed; listed types without servers are kept (they have 0 GPUs).

    Attributes
    ----------
    gpu_types : tuple of str
        GPU type names.
    server_names : tuple of str
        Server names, in the order given.
    server_type : ndarray of int, shape (n_servers,)
        Index into ``gpu_types`` per server.
    server_gpus : ndarray of int, shape (n_servers,)
        GPUs per server.
    rack_names : tuple of str
        Rack names in order of first appearance.
    server_rack : ndarray of int, shape (n_servers,)
        Index into ``rack_names`` per server.
    gpu_offset : ndarray of int, shape (n_servers + 1,)
        Global id of the first GPU of each server; ``gpu_offset[-1]`` is the GPU count.
    gpu_server : ndarray of int, shape (n_gpus,)
        Server of each global GPU id.

    Examples
    --------
    >>> topo = Topology.from_counts({"v100": 16, "k80": 12}, gpus_per_server=8, servers_per_rack=2)
    >>> topo.server_names
    ('v100-s0', 'v100-s1', 'k80-s0', 'k80-s1')
    >>> topo.server_gpus.tolist(), topo.counts()
    ([8, 8, 8, 4], {'v100': 16, 'k80': 12})
    >>> topo.gpu_label(9), topo.gpu_id("v100-s1", 1)
    (('v100-s1', 1), 9)
    """

    __slots__ = (
        "_level_index",
        "_server_index",
        "_type_index",
        "gpu_offset",
        "gpu_server",
        "gpu_types",
        "gpu_unit",
        "levels",
        "rack_names",
        "server_gpus",
        "server_names",
        "server_rack",
        "server_type",
        "unit_children",
        "unit_gpus",
        "unit_names",
        "unit_parent",
        "unit_type",
    )

    def __init__(self, servers: Iterable[Any], gpu_types: Sequence[str] | None = None, *,
                 levels: Iterable[Any] | None = None) -> None:
        names: list[str] = []
        types: list[str] = []
        gpus: list[int] = []
        racks: list[str] = []
        for i, entry in enumerate(servers):
            name, gtype, n, rack = _server_fields(entry, i)
            names.append(name)
            types.append(gtype)
            gpus.append(n)
            racks.append(rack)
        if not names:
            raise ValidationError("`servers` must list at least one server; got none.")
        self._init_arrays(names, types, np.asarray(gpus, dtype=np.int64), racks, gpu_types)
        self._init_levels(levels)

    # ------------------------------------------------------------------ construction
    def _init_arrays(
        self,
        names: list[str],
        types: list[str],
        gpus: np.ndarray,
        racks: list[str],
        gpu_types: Sequence[str] | None,
    ) -> None:
        seen: dict[str, int] = {}
        for i, n in enumerate(names):
            if n in seen:
                raise ValidationError(
                    f"`servers` names must be unique; {n!r} appears at positions {seen[n]} and {i}."
                )
            seen[n] = i
        if gpu_types is None:
            gpu_types = list(dict.fromkeys(types))
        else:
            gpu_types = list(gpu_types)
            for t in gpu_types:
                if not isinstance(t, str) or not t:
                    raise ValidationError(f"`gpu_types` entries must be non-empty strings; got {t!r}.")
            if len(set(gpu_types)) != len(gpu_types):
                raise ValidationError(f"`gpu_types` must not repeat a type; got {gpu_types}.")
        type_index = {t: k for k, t in enumerate(gpu_types)}
        unknown = sorted({t for t in types if t not in type_index})
        if unknown:
            raise ValidationError(
                f"servers use GPU types {unknown} that are not in `gpu_types` ({list(gpu_types)})."
            )
        rack_names = list(dict.fromkeys(racks))
        rack_index = {r: i for i, r in enumerate(rack_names)}
        self.gpu_types = tuple(gpu_types)
        self.server_names = tuple(names)
        self.server_type = np.fromiter((type_index[t] for t in types), dtype=np.int64, count=len(types))
        self.server_gpus = np.asarray(gpus, dtype=np.int64)
        self.rack_names = tuple(rack_names)
        self.server_rack = np.fromiter((rack_index[r] for r in racks), dtype=np.int64, count=len(racks))
        self.gpu_offset = np.zeros(len(names) + 1, dtype=np.int64)
        np.cumsum(self.server_gpus, out=self.gpu_offset[1:])
        self.gpu_server = np.repeat(np.arange(len(names), dtype=np.int64), self.server_gpus)
        for arr in (self.server_type, self.server_gpus, self.server_rack, self.gpu_offset, self.gpu_server):
            arr.setflags(write=False)
        self._server_index = seen
        self._type_index = type_index

    @classmethod
    def from_counts(
        cls,
        counts: Mapping[str, int],
        *,
        gpus_per_server: int | Mapping[str, int] = 8,
        servers_per_rack: int | None = None,
        levels: Iterable[Any] | None = None,
    ) -> Topology:
        """Cut per-type GPU counts into servers and racks.

        Parameters
        ----------
        counts : Mapping[str, int]
            GPU type -> number of GPUs (non-negative integers).
        gpus_per_server : int or Mapping[str, int], default 8
            GPUs per server (per type when a mapping). A count that is not a multiple gets
            one smaller last server.
        servers_per_rack : int, optional
            Servers per rack. Racks never mix types; ``None`` puts all servers of a type in
            one rack.
        levels : iterable of Level, optional
            The hierarchy above the GPU (see "Levels" in the module docstring); default
            servers and racks.

        Returns
        -------
        Topology
            Servers named ``"{type}-s{i}"`` in racks named ``"{type}-r{i}"``.
        """
        if not isinstance(counts, Mapping) or len(counts) == 0:
            raise fail("counts", "a non-empty mapping of GPU type -> count", counts)
        counts = check_type_map(counts, "counts", _count, what="count")
        check_int(servers_per_rack, "servers_per_rack", low=1, allow_none=True, whole_floats=True)
        names: list[str] = []
        types: list[str] = []
        racks: list[str] = []
        sizes: list[np.ndarray] = []
        for gtype, count in counts.items():
            if isinstance(gpus_per_server, Mapping):
                if gtype not in gpus_per_server:
                    raise ValidationError(
                        f"`gpus_per_server` must give a size for every type in `counts`; "
                        f"missing {gtype!r}."
                    )
                per = gpus_per_server[gtype]
                label = f"gpus_per_server[{gtype!r}]"
            else:
                per = gpus_per_server
                label = "gpus_per_server"
            per = check_int(per, label, low=1, whole_floats=True)
            n_full, rest = divmod(count, per)
            n_servers = n_full + (1 if rest else 0)
            size = np.full(n_servers, per, dtype=np.int64)
            if rest:
                size[-1] = rest
            sizes.append(size)
            names.extend(f"{gtype}-s{i}" for i in range(n_servers))
            types.extend([gtype] * n_servers)
            spr = n_servers if servers_per_rack is None else int(servers_per_rack)
            racks.extend(f"{gtype}-r{i // max(spr, 1)}" for i in range(n_servers))
        if isinstance(gpus_per_server, Mapping):
            extra = sorted(set(gpus_per_server) - set(counts))
            if extra:
                raise ValidationError(
                    f"`gpus_per_server` names types {extra} that are not in `counts` ({list(counts)})."
                )
        if not names:
            raise ValidationError(f"`counts` must hold at least one GPU; got {dict(counts)}.")
        topo = cls.__new__(cls)
        topo._init_arrays(names, types, np.concatenate(sizes), racks, list(counts))
        topo._init_levels(levels)
        log.debug("topology: %d servers, %d racks, %d GPUs", topo.n_servers, len(topo.rack_names), topo.n_gpus)
        return topo

    def _init_levels(self, levels: Iterable[Any] | None) -> None:
        """Validate ``levels`` and build the per-level arrays (see the module docstring)."""
        decl = _check_levels(DEFAULT_LEVELS if levels is None else levels, self)
        n_g = self.n_gpus
        gpu_type = self.server_type[self.gpu_server]
        local = np.arange(n_g, dtype=np.int64) - self.gpu_offset[self.gpu_server]
        group = np.ones(len(self.gpu_types), dtype=np.int64)  # GPUs per unit of the last level below the server
        unit: list[np.ndarray] = [np.arange(n_g, dtype=np.int64)]
        above = False
        for lev in decl:
            if lev.name == "server":
                u = self.gpu_server.copy()
                above = True
            elif lev.name == "rack":
                u = _first_seen(self.server_rack[self.gpu_server])
            elif not above:
                size = lev.size if isinstance(lev.size, Mapping) else dict.fromkeys(self.gpu_types, lev.size)
                group = group * np.array([size.get(t, 1) for t in self.gpu_types], dtype=np.int64)
                per = group[self.server_type]                               # GPUs per unit, per server
                n_units = -(-self.server_gpus // per)                       # ceil
                start = np.zeros(self.n_servers + 1, dtype=np.int64)
                np.cumsum(n_units, out=start[1:])
                u = start[self.gpu_server] + local // per[self.gpu_server]
            else:
                u = unit[-1] // int(lev.size)                               # consecutive units of the level below
            unit.append(u.astype(np.int64, copy=False))
        levels_all = (Level("gpu"),) + decl
        n_l = len(levels_all)
        parents: list[np.ndarray] = []
        gpus: list[np.ndarray] = []
        children: list[np.ndarray] = []
        utype: list[np.ndarray] = []
        for li in range(n_l):
            n_u = int(unit[li].max()) + 1 if n_g else 0
            gpus.append(np.bincount(unit[li], minlength=n_u).astype(np.int64))
            tmin = np.full(n_u, len(self.gpu_types), dtype=np.int64)
            tmax = np.full(n_u, -1, dtype=np.int64)
            np.minimum.at(tmin, unit[li], gpu_type)
            np.maximum.at(tmax, unit[li], gpu_type)
            utype.append(np.where(tmin == tmax, tmin, -1))
            if li + 1 < n_l:
                par = np.full(n_u, -1, dtype=np.int64)
                par[unit[li]] = unit[li + 1]
                bad = np.flatnonzero(par[unit[li]] != unit[li + 1])
                if bad.size:
                    child = int(unit[li][bad[0]])
                    spans = np.unique(unit[li + 1][unit[li] == child]).tolist()
                    raise ValidationError(
                        f"`levels`: units of level {levels_all[li].name!r} must each lie inside one unit of level "
                        f"{levels_all[li + 1].name!r}; unit {child} of {levels_all[li].name!r} spans its units "
                        f"{spans} (declare {levels_all[li + 1].name!r} so that it groups whole "
                        f"{levels_all[li].name!r} units).")
                parents.append(par)
            else:
                parents.append(np.full(n_u, -1, dtype=np.int64))
        for li in range(n_l):
            n_below = parents[li - 1] if li else None
            children.append(np.zeros(gpus[li].shape[0], np.int64) if n_below is None
                            else np.bincount(n_below, minlength=gpus[li].shape[0]).astype(np.int64))
        for group_ in (unit, parents, gpus, children, utype):
            for arr in group_:
                arr.setflags(write=False)
        self.levels = levels_all
        self.gpu_unit = tuple(unit)
        self.unit_parent = tuple(parents)
        self.unit_gpus = tuple(gpus)
        self.unit_children = tuple(children)
        self.unit_type = tuple(utype)
        self._level_index = {lev.name: i for i, lev in enumerate(levels_all)}

    def with_levels(self, levels: Iterable[Any] | None) -> Topology:
        """The same servers with the hierarchy ``levels`` (None: servers and racks)."""
        topo = Topology.__new__(Topology)
        topo._init_arrays(list(self.server_names), [self.gpu_types[k] for k in self.server_type],
                          self.server_gpus.copy(), [self.rack_names[r] for r in self.server_rack], self.gpu_types)
        topo._init_levels(levels)
        return topo

    # ------------------------------------------------------------------ levels
    @property
    def level_names(self) -> tuple[str, ...]:
        """Names of the levels, bottom-up (``"gpu"`` first)."""
        return tuple(lev.name for lev in self.levels)

    @property
    def n_levels(self) -> int:
        """Number of levels, the GPU level included."""
        return len(self.levels)

    def level_index(self, level: str | int, *, argument: str = "level") -> int:
        """Index of ``level`` (a name, or an index checked for range) in ``level_names``."""
        if isinstance(level, str):
            li = self._level_index.get(level)
            if li is None:
                raise ValidationError(
                    f"`{argument}` names level {level!r}, which the topology does not have "
                    f"(levels: {list(self.level_names)}).")
            return li
        return check_int(level, argument, low=0, high=self.n_levels - 1)

    def n_units(self, level: str | int) -> int:
        """Number of units at ``level``."""
        return int(self.unit_gpus[self.level_index(level)].shape[0])

    def level_bandwidth(self, level: str | int) -> float | None:
        """GB/s of the links inside one unit of ``level`` (None when not declared)."""
        return self.levels[self.level_index(level)].bandwidth

    def unit_name(self, level: str | int, unit: int) -> str:
        """Name of unit ``unit`` of ``level``: a server or rack name, ``"{server}/gpu{i}"`` for a
        GPU, ``"{parent}/{level}{i}"`` below the server and ``"{level}{i}"`` above it."""
        li = self.level_index(level)
        u = check_int(unit, "unit", low=0, high=self.n_units(li) - 1)
        name = self.levels[li].name
        if name == "server":
            return self.server_names[u]
        if name == "rack":
            first = int(np.flatnonzero(self.gpu_unit[li] == u)[0])
            return self.rack_names[int(self.server_rack[self.gpu_server[first]])]
        server_level = self._level_index["server"]
        if li < server_level:
            first = int(np.flatnonzero(self.gpu_unit[li] == u)[0])
            s = int(self.gpu_server[first])
            first_in_server = int(self.gpu_unit[li][self.gpu_offset[s]])
            return f"{self.server_names[s]}/{name}{u - first_in_server}"
        return f"{name}{u}"

    def common_level(self, a: Any, b: Any) -> np.ndarray:
        """Lowest level whose unit holds both GPUs, per pair of global ids (broadcast).

        0 for the same GPU; ``n_levels`` for GPUs in different units of the top level.
        """
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        for name, v in (("a", a), ("b", b)):
            if v.size and (v.min() < 0 or v.max() >= self.n_gpus):
                raise ValidationError(f"`{name}` must hold GPU ids in [0, {self.n_gpus - 1}]; got {v.min()}..{v.max()}.")
        a, b = np.broadcast_arrays(a, b)
        out = np.full(a.shape, self.n_levels, dtype=np.int64)
        for li in range(self.n_levels - 1, -1, -1):
            same = self.gpu_unit[li][a] == self.gpu_unit[li][b]
            out[same] = li
        return out

    def link_bandwidth(self, a: Any, b: Any) -> np.ndarray:
        """GB/s between GPUs ``a`` and ``b``: the bandwidth of their common level (``inf`` for
        the same GPU, ``nan`` where the level declares none or above the top level)."""
        bw = np.array([np.inf] + [np.nan if lev.bandwidth is None else lev.bandwidth for lev in self.levels[1:]]
                      + [np.nan])
        return bw[self.common_level(a, b)]

    # ------------------------------------------------------------------ files
    def to_dict(self) -> dict[str, Any]:
        """The topology as the mapping :meth:`from_dict` reads (explicit servers, levels)."""
        return {
            "levels": [{k: v for k, v in (("name", lev.name), ("size", dict(lev.size) if isinstance(lev.size, Mapping)
                                                                      else lev.size), ("bandwidth", lev.bandwidth))
                        if v is not None} for lev in self.levels[1:]],
            "servers": [{"name": n, "gpu_type": self.gpu_types[k], "num_gpus": int(g), "rack": self.rack_names[r]}
                        for n, k, g, r in zip(self.server_names, self.server_type, self.server_gpus, self.server_rack)],
            "gpu_types": list(self.gpu_types),
        }

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any], *, argument: str = "topology") -> Topology:
        """A topology from a mapping (the format of :func:`read_topology`).

        Parameters
        ----------
        spec : Mapping
            ``"servers"`` (a list of server mappings) or ``"counts"`` (with optional
            ``"gpus_per_server"``, ``"servers_per_rack"``); optional ``"levels"`` (a list of
            ``{"name", "size", "bandwidth"}`` mappings) and ``"gpu_types"`` (type order, with
            ``"servers"``).
        argument : str
            Name of the argument or file in error messages.
        """
        if not isinstance(spec, Mapping):
            raise fail(argument, "a mapping with 'servers' or 'counts' (and optionally 'levels')", spec,
                       shown=type(spec).__name__)
        known = {"servers", "counts", "gpus_per_server", "servers_per_rack", "levels", "gpu_types"}
        extra = sorted(set(spec) - known)
        if extra:
            raise ValidationError(f"`{argument}` has unknown key(s) {extra}; known: {sorted(known)}.")
        if ("servers" in spec) == ("counts" in spec):
            raise ValidationError(f"`{argument}` must have exactly one of 'servers' and 'counts'; got keys {sorted(spec)}.")
        levels = spec.get("levels")
        if "servers" in spec:
            for key in ("gpus_per_server", "servers_per_rack"):
                if key in spec:
                    raise ValidationError(f"`{argument}`: {key!r} goes with 'counts', not with 'servers'.")
            servers = spec["servers"]
            if not isinstance(servers, Sequence) or isinstance(servers, (str, bytes)):
                raise fail(f"{argument}['servers']", "a list of servers", servers, shown=type(servers).__name__)
            return cls(servers, gpu_types=spec.get("gpu_types"), levels=levels)
        if "gpu_types" in spec:
            raise ValidationError(f"`{argument}`: 'gpu_types' goes with 'servers' (with 'counts' the order is the "
                                  "order of 'counts').")
        return cls.from_counts(spec["counts"], gpus_per_server=spec.get("gpus_per_server", 8),
                               servers_per_rack=spec.get("servers_per_rack"), levels=levels)

    # ------------------------------------------------------------------ queries
    @property
    def n_servers(self) -> int:
        """Number of servers."""
        return len(self.server_names)

    @property
    def n_gpus(self) -> int:
        """Number of GPUs over all servers."""
        return int(self.gpu_offset[-1])

    @property
    def n_racks(self) -> int:
        """Number of racks."""
        return len(self.rack_names)

    def counts(self) -> dict[str, int]:
        """GPU type -> number of GPUs, in ``gpu_types`` order."""
        per = np.bincount(self.server_type, weights=self.server_gpus, minlength=len(self.gpu_types))
        return {t: int(c) for t, c in zip(self.gpu_types, per)}

    def server_sizes(self, gpu_type: str) -> np.ndarray:
        """GPUs of each server of ``gpu_type`` (int64, empty for a type with no server)."""
        k = self._type_index.get(gpu_type)
        return self.server_gpus[self.server_type == k] if k is not None else np.zeros(0, np.int64)

    def type_index(self, gpu_type: str, *, argument: str = "gpu_type") -> int:
        """Index of ``gpu_type`` in ``gpu_types``; ``argument`` names the caller's argument."""
        k = self._type_index.get(gpu_type) if isinstance(gpu_type, str) else None
        if k is None:
            raise ValidationError(
                f"`{argument}` names GPU type {gpu_type!r}, which the cluster does not have "
                f"(types: {list(self.gpu_types)})."
            )
        return k

    def server_index(self, name: str, *, argument: str = "server") -> int:
        """Index of the server called ``name``; ``argument`` names the caller's argument."""
        s = self._server_index.get(name) if isinstance(name, str) else None
        if s is None:
            raise ValidationError(f"`{argument}` names unknown server {name!r}.")
        return s

    def gpu_id(self, server: str | int, local: int, *, argument: str = "gpu") -> int:
        """Global id of GPU ``local`` of ``server`` (a name or an index)."""
        s = server if is_whole(server) and not isinstance(server, str) else self.server_index(server, argument=argument)
        s = int(s)
        if not 0 <= s < self.n_servers:
            raise ValidationError(f"`{argument}` names server index {s}; valid: 0..{self.n_servers - 1}.")
        if isinstance(local, bool) or not is_whole(local) or not 0 <= int(local) < self.server_gpus[s]:
            raise ValidationError(
                f"`{argument}`: server {self.server_names[s]!r} has GPUs 0..{self.server_gpus[s] - 1}; "
                f"got index {local!r}."
            )
        return int(self.gpu_offset[s] + int(local))

    def gpu_label(self, gpu: int) -> tuple[str, int]:
        """``(server name, local index)`` of global GPU id ``gpu``."""
        s = int(self.gpu_server[gpu])
        return self.server_names[s], int(gpu - self.gpu_offset[s])

    def to_frame(self):
        """One row per server: name, gpu_type, num_gpus, rack, first_gpu."""
        import pandas as pd

        return pd.DataFrame(
            {
                "name": list(self.server_names),
                "gpu_type": [self.gpu_types[k] for k in self.server_type],
                "num_gpus": self.server_gpus,
                "rack": [self.rack_names[r] for r in self.server_rack],
                "first_gpu": self.gpu_offset[:-1],
            }
        )

    def __len__(self) -> int:
        return self.n_servers

    def __repr__(self) -> str:
        levels = "" if self.level_names == ("gpu", "server", "rack") else f"; levels {list(self.level_names)}"
        return (
            f"Topology({self.n_servers} servers, {self.n_racks} racks, {self.n_gpus} GPUs: "
            f"{self.counts()}{levels})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Topology):
            return NotImplemented
        return (
            self.gpu_types == other.gpu_types
            and self.server_names == other.server_names
            and self.rack_names == other.rack_names
            and np.array_equal(self.server_type, other.server_type)
            and np.array_equal(self.server_gpus, other.server_gpus)
            and np.array_equal(self.server_rack, other.server_rack)
            and self.levels == other.levels
        )

    __hash__ = None  # type: ignore[assignment]


def read_topology(path: Any) -> Topology:
    """Read a topology from a JSON file (format: "Topology files" in the module docstring)."""
    from pathlib import Path

    spec = read_json_file(path, "`topology` file")
    return Topology.from_dict(spec, argument=f"topology file {Path(path).name}")


def _first_seen(keys: np.ndarray) -> np.ndarray:
    """Renumber ``keys`` 0.. in order of first appearance."""
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    rank = np.empty(first.shape[0], dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.shape[0])
    return rank[inverse.reshape(-1)]


def _level_fields(entry: Any, i: int) -> tuple[Any, Any, Any]:
    if isinstance(entry, Level):
        return entry.name, entry.size, entry.bandwidth
    if isinstance(entry, Mapping):
        extra = sorted(set(entry) - {"name", "size", "bandwidth"})
        if extra or "name" not in entry:
            raise ValidationError(f"`levels[{i}]` must have the key 'name' and optionally 'size' and 'bandwidth'; "
                                  f"got keys {sorted(entry)}.")
        return entry["name"], entry.get("size"), entry.get("bandwidth")
    if isinstance(entry, (tuple, list)) and 1 <= len(entry) <= 3:
        padded = list(entry) + [None] * (3 - len(entry))
        return padded[0], padded[1], padded[2]
    raise ValidationError(f"`levels[{i}]` must be a Level, a mapping or a (name[, size[, bandwidth]]) tuple; "
                          f"got {entry!r:.80}.")


def _check_levels(levels: Iterable[Any], topo: Topology) -> tuple[Level, ...]:
    """The declared levels, checked against the rules of the module docstring."""
    if isinstance(levels, (str, bytes, Mapping)) or not isinstance(levels, Iterable):
        raise fail("levels", "a sequence of Level records", levels, shown=type(levels).__name__)
    out: list[Level] = []
    seen: dict[str, int] = {}
    above = False
    for i, entry in enumerate(levels):
        name, size, bw = _level_fields(entry, i)
        check_nonempty_str(name, f"levels[{i}].name")
        if name == "gpu":
            raise ValidationError(f"`levels[{i}]`: 'gpu' is level 0 of every topology and is not declared.")
        if name in seen:
            raise ValidationError(f"`levels` names must be unique; {name!r} appears at positions {seen[name]} and {i}.")
        seen[name] = i
        bw = check_positive(bw, f"levels[{i}].bandwidth", unit="GB/s", allow_none=True)
        if name in ("server", "rack"):
            if size is not None:
                raise ValidationError(f"`levels[{i}]`: level {name!r} is made of the servers' "
                                      f"{'GPUs' if name == 'server' else 'racks'} and takes no `size`; got {size!r}.")
            if name == "rack" and not above:
                raise ValidationError(f"`levels[{i}]`: level 'rack' must come after level 'server'.")
            above = True
        elif isinstance(size, Mapping):
            if above:
                raise ValidationError(f"`levels[{i}].size` of level {name!r} above the server must be one integer "
                                      f"(units above the server may mix GPU types); got {dict(size)!r}.")
            present = [t for t, k in zip(topo.gpu_types, np.bincount(topo.server_type, minlength=len(topo.gpu_types)))
                       if k > 0]
            size = check_type_map(size, f"levels[{i}].size", lambda v, n: check_int(v, n, low=1, whole_floats=True),
                                  what="units of the level below", known=topo.gpu_types, known_name="gpu_types")
            missing = [t for t in present if t not in size]
            if missing:
                raise ValidationError(f"`levels[{i}].size` of level {name!r} must give a size for every GPU type with "
                                      f"servers; missing {missing}.")
        else:
            if size is None:
                raise ValidationError(f"`levels[{i}]`: level {name!r} needs a `size` (units of the level below per "
                                      f"unit); only 'server' and 'rack' are derived from the servers.")
            size = check_int(size, f"levels[{i}].size", low=1, whole_floats=True)
        out.append(Level(name, size, bw))
    if "server" not in seen:
        raise ValidationError(f"`levels` must include level 'server'; got {[lev.name for lev in out]}.")
    return tuple(out)


def _count(value: Any, name: str) -> int:
    """A GPU count: a non-negative integer (``8.0`` accepted)."""
    return check_int(value, name, low=0, whole_floats=True)


def _server_fields(entry: Any, i: int) -> tuple[str, str, int, str]:
    if isinstance(entry, Server):
        name, gtype, n, rack = entry.name, entry.gpu_type, entry.num_gpus, entry.rack
    elif isinstance(entry, Mapping):
        try:
            name, gtype, n = entry["name"], entry["gpu_type"], entry["num_gpus"]
        except KeyError as exc:
            raise ValidationError(
                f"`servers[{i}]` must have keys 'name', 'gpu_type', 'num_gpus' (and optionally "
                f"'rack'); missing {exc.args[0]!r}."
            ) from None
        rack = entry.get("rack", "rack0")
    elif isinstance(entry, (tuple, list)) and len(entry) in (3, 4):
        name, gtype, n = entry[0], entry[1], entry[2]
        rack = entry[3] if len(entry) == 4 else "rack0"
    else:
        raise ValidationError(
            f"`servers[{i}]` must be a Server, a (name, gpu_type, num_gpus[, rack]) tuple or a "
            f"mapping; got {entry!r}."
        )
    check_nonempty_str(name, f"servers[{i}].name")
    check_nonempty_str(gtype, f"servers[{i}].gpu_type")
    n = check_int(n, f"servers[{i}].num_gpus", low=1, whole_floats=True)
    check_nonempty_str(rack, f"servers[{i}].rack")
    return name, gtype, n, rack
