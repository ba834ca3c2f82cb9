"""Server topology of a cluster: servers (GPU type, GPUs per server, rack) and GPU ids.

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
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..validation import check_int, check_nonempty_str, check_type_map, fail, is_whole

__all__ = ["Server", "Topology"]

log = logging.getLogger(__name__)


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
        "_server_index",
        "_type_index",
        "gpu_offset",
        "gpu_server",
        "gpu_types",
        "rack_names",
        "server_gpus",
        "server_names",
        "server_rack",
        "server_type",
    )

    def __init__(self, servers: Iterable[Any], gpu_types: Sequence[str] | None = None) -> None:
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
        log.debug("topology: %d servers, %d racks, %d GPUs", topo.n_servers, len(topo.rack_names), topo.n_gpus)
        return topo

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
        return (
            f"Topology({self.n_servers} servers, {self.n_racks} racks, {self.n_gpus} GPUs: "
            f"{self.counts()})"
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
        )

    __hash__ = None  # type: ignore[assignment]


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
