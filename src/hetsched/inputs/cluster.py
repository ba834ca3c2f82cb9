"""GPU cluster description: GPU types, counts, optional prices and host CPU/memory."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..validation import check_int, check_nonneg, check_positive, check_type_map

__all__ = ["Cluster", "check_gpu_type_names"]


class Cluster:
    """A heterogeneous GPU cluster.

    Parameters
    ----------
    counts : Mapping[str, int]
        GPU type -> number of GPUs of that type. Counts are non-negative integers; at
        least one type must be named.
    prices : Mapping[str, float], optional
        GPU type -> price in $ per GPU-hour (positive). Needed only by cost-aware policies.
    cpus, memory : Mapping[str, float], optional
        GPU type -> host CPU cores / host memory (GiB) available to the jobs that run on
        that type, summed over its servers (non-negative; ``inf`` for no limit). When
        given, a mapping must name every type that has GPUs. Jobs that state
        ``cpus_per_gpu`` / ``mem_per_gpu`` need them; LP policies then add one capacity row
        per type: ``sum_j s_j cpus_per_gpu_j X[j, k] <= cpus[k]`` (and the same for memory).

    Attributes
    ----------
    gpu_types : tuple of str
        GPU type names in the order given.
    counts : numpy.ndarray
        Integer counts aligned with ``gpu_types``.

    Examples
    --------
    >>> c = Cluster({"v100": 4, "k80": 8}, prices={"v100": 2.48, "k80": 0.45})
    >>> c.capacities(["k80", "a100", "v100"]).tolist()
    [8.0, 0.0, 4.0]
    >>> c.total_gpus
    12
    """

    __slots__ = ("_index", "_prices", "_resources", "counts", "gpu_types", "topology")

    def __init__(
        self,
        counts: Mapping[str, int],
        prices: Mapping[str, float] | None = None,
        *,
        cpus: Mapping[str, float] | None = None,
        memory: Mapping[str, float] | None = None,
    ) -> None:
        counts = check_type_map(counts, "counts", _count, what="count")
        if len(counts) == 0:
            raise ValidationError("`counts` must name at least one GPU type; got an empty mapping.")
        types: list[str] = []
        values: list[int] = []
        for name, value in counts.items():
            types.append(name)
            values.append(int(value))
        self.gpu_types: tuple[str, ...] = tuple(types)
        self.counts = np.asarray(values, dtype=np.int64)
        self.counts.setflags(write=False)
        self._index = {t: i for i, t in enumerate(self.gpu_types)}
        #: Optional :class:`hetsched.inputs.topology.Topology` (servers, racks, GPU ids); set by
        #: :meth:`from_servers`, ``None`` for a cluster described by counts only.
        self.topology = None
        self._prices: dict[str, float] | None = None
        if prices is not None:
            self._prices = check_type_map(prices, "prices", check_positive, what="$/GPU-hour",
                                          known=self.gpu_types)
        self._resources: dict[str, dict[str, float]] = {}
        for rname, given in (("cpus", cpus), ("memory", memory)):
            if given is not None:
                self._resources[rname] = self._check_resource(rname, given)

    def _check_resource(self, rname: str, given: Mapping[str, float]) -> dict[str, float]:
        """Validate a per-type host-resource capacity mapping (``cpus`` or ``memory``)."""
        clean = check_type_map(given, rname, _capacity, what="capacity", known=self.gpu_types)
        missing = [t for t, c in zip(self.gpu_types, self.counts) if c > 0 and t not in clean]
        if missing:
            raise ValidationError(
                f"`{rname}` must name every GPU type that has GPUs (use inf for no limit); missing {missing}."
            )
        return clean

    @classmethod
    def from_servers(
        cls,
        servers,
        *,
        gpus_per_server: int | Mapping[str, int] = 8,
        servers_per_rack: int | None = None,
        gpu_types: Iterable[str] | None = None,
        prices: Mapping[str, float] | None = None,
        cpus: Mapping[str, float] | None = None,
        memory: Mapping[str, float] | None = None,
        levels: Iterable[Any] | None = None,
    ) -> Cluster:
        """A cluster with a server topology (servers, racks, GPU ids, levels).

        Parameters
        ----------
        servers : Topology, Mapping[str, int] or iterable of Server
            A :class:`~hetsched.inputs.topology.Topology`; or GPU type -> count, cut into servers
            of ``gpus_per_server`` GPUs and racks of ``servers_per_rack`` servers (see
            :meth:`Topology.from_counts <hetsched.inputs.topology.Topology.from_counts>`); or one
            :class:`~hetsched.inputs.topology.Server` (or ``(name, gpu_type, num_gpus[, rack])``
            tuple) per server.
        gpus_per_server, servers_per_rack : optional
            Used only when ``servers`` is a mapping of counts.
        gpu_types : iterable of str, optional
            Type order for an explicit server list (default: order of first appearance).
        prices, cpus, memory : Mapping[str, float], optional
            As in :class:`Cluster` (``cpus`` / ``memory``: per-type totals over the servers).
        levels : iterable of Level, optional
            The topology's hierarchy (:class:`~hetsched.inputs.topology.Level` records,
            bottom-up; default servers and racks). With a Topology, replaces its levels.

        Returns
        -------
        Cluster
            ``counts`` are the topology's per-type GPU totals; ``topology`` holds it.

        Examples
        --------
        >>> c = Cluster.from_servers({"v100": 16, "k80": 8}, gpus_per_server=8)
        >>> c.as_dict(), c.topology.n_servers
        ({'v100': 16, 'k80': 8}, 3)
        """
        from .topology import Topology

        if isinstance(servers, Topology):
            if gpu_types is not None and tuple(gpu_types) != servers.gpu_types:
                raise ValidationError(
                    f"`gpu_types` {list(gpu_types)} must match the topology's types "
                    f"{list(servers.gpu_types)} when `servers` is a Topology."
                )
            topo = servers if levels is None else servers.with_levels(levels)
        elif isinstance(servers, Mapping):
            topo = Topology.from_counts(
                servers, gpus_per_server=gpus_per_server, servers_per_rack=servers_per_rack, levels=levels
            )
        elif isinstance(servers, (str, bytes)) or not isinstance(servers, Iterable):
            raise ValidationError(
                f"`servers` must be a Topology, a mapping GPU type -> count or an iterable of servers; "
                f"got {type(servers).__name__} {servers!r:.80}."
            )
        else:
            topo = Topology(servers, gpu_types=None if gpu_types is None else list(gpu_types), levels=levels)
        cluster = cls(topo.counts(), prices=prices, cpus=cpus, memory=memory)
        cluster.topology = topo
        return cluster

    # ------------------------------------------------------------------ queries
    @property
    def total_gpus(self) -> int:
        """Total number of GPUs over all types."""
        return int(self.counts.sum())

    @property
    def prices(self) -> dict[str, float] | None:
        """$/GPU-hour per type, or ``None`` when no prices were given."""
        return None if self._prices is None else dict(self._prices)

    @property
    def cpus(self) -> dict[str, float] | None:
        """Host CPU cores per GPU type, or ``None`` when not given."""
        r = self._resources.get("cpus")
        return None if r is None else dict(r)

    @property
    def memory(self) -> dict[str, float] | None:
        """Host memory (GiB) per GPU type, or ``None`` when not given."""
        r = self._resources.get("memory")
        return None if r is None else dict(r)

    def resource_vector(self, resource: str, gpu_types: Iterable[str]) -> np.ndarray | None:
        """Capacity of host resource ``resource`` ("cpus" or "memory") aligned with ``gpu_types``.

        ``None`` when the cluster was built without it; types the cluster lacks get 0.

        Examples
        --------
        >>> Cluster({"v100": 8}, cpus={"v100": 64}).resource_vector("cpus", ["k80", "v100"]).tolist()
        [0.0, 64.0]
        """
        if not isinstance(resource, str) or resource not in ("cpus", "memory"):
            raise ValidationError(f"`resource` must be 'cpus' or 'memory'; got {resource!r:.80}.")
        if isinstance(gpu_types, str):
            raise ValidationError(f"`gpu_types` must be a sequence of GPU type names; got the string {gpu_types!r}.")
        r = self._resources.get(resource)
        if r is None:
            return None
        return np.array([r.get(t, 0.0) for t in gpu_types], dtype=float)

    def count(self, gpu_type: str) -> int:
        """Number of GPUs of ``gpu_type`` (0 for a type the cluster does not have)."""
        if not isinstance(gpu_type, str):
            raise ValidationError(f"`gpu_type` must be a GPU type name (str); got {type(gpu_type).__name__}.")
        i = self._index.get(gpu_type)
        return 0 if i is None else int(self.counts[i])

    def capacities(self, gpu_types: Iterable[str]) -> np.ndarray:
        """GPU counts aligned with ``gpu_types`` as floats; unknown types count as 0."""
        if isinstance(gpu_types, str):
            raise ValidationError(f"`gpu_types` must be a sequence of GPU type names; got the string {gpu_types!r} "
                                  f"(a list of one name is [{gpu_types!r}]).")
        try:
            names = list(gpu_types)
        except TypeError:
            raise ValidationError(f"`gpu_types` must be a sequence of GPU type names; got "
                                  f"{type(gpu_types).__name__}.") from None
        return np.array([self.count(t) for t in names], dtype=float)

    def price_vector(self, gpu_types: Iterable[str], *, needed_by: str) -> np.ndarray:
        """Prices aligned with ``gpu_types``.

        Types with no GPUs in the cluster get price ``inf`` (they are never used).

        Raises
        ------
        ValidationError
            If a type that has GPUs has no price; ``needed_by`` names the caller.
        """
        gpu_types = list(gpu_types)
        out = np.full(len(gpu_types), np.inf)
        missing = []
        for i, t in enumerate(gpu_types):
            if self.count(t) == 0:
                continue
            if self._prices is None or t not in self._prices:
                missing.append(t)
            else:
                out[i] = self._prices[t]
        if missing:
            raise ValidationError(
                f"{needed_by} needs `Cluster(prices=...)` for every GPU type it can use; "
                f"missing prices for {missing}."
            )
        return out

    def as_dict(self) -> dict[str, int]:
        """GPU type -> count."""
        return {t: int(c) for t, c in zip(self.gpu_types, self.counts)}

    def __repr__(self) -> str:
        extra = "" if self._prices is None else f", prices={self._prices}"
        for rname, r in self._resources.items():
            extra += f", {rname}={r}"
        return f"Cluster({self.as_dict()}{extra})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Cluster):
            return NotImplemented
        return (self.as_dict() == other.as_dict() and self._prices == other._prices
                and self._resources == other._resources)

    def __hash__(self) -> int:
        return hash((tuple(self.as_dict().items()), tuple(sorted((self._prices or {}).items()))))


def _count(value: Any, name: str) -> int:
    """A GPU count: a non-negative integer (``8.0`` accepted)."""
    return check_int(value, name, low=0, whole_floats=True)


def _capacity(value: Any, name: str) -> float:
    """A host-resource capacity: a non-negative number, inf for no limit."""
    return check_nonneg(value, name, allow_inf=True, rule="a non-negative number (or inf)")


def check_gpu_type_names(gpu_types: Sequence[str], cluster: Cluster, *, argument: str = "jobs") -> None:
    """Refuse GPU-type names that cannot both be meant.

    The jobs name a type the cluster lacks *and* the cluster has GPUs of a type no job
    names (``"V100"`` beside ``"v100"``): solving would leave those GPUs idle and still
    report ``optimal``. A type the cluster lists with 0 GPUs counts as known (absent on
    purpose).

    Parameters
    ----------
    gpu_types : sequence of str
        The jobs' GPU-type labels (throughput columns).
    cluster : Cluster
    argument : str, default "jobs"
        How the error names the jobs' side (``"jobs"``, ``"workload"``).

    Raises
    ------
    ValidationError
        Naming both lists, the unmatched names on each side and a "did you mean" for near
        matches (case-insensitive).

    Examples
    --------
    >>> check_gpu_type_names(["v100", "k80"], Cluster({"v100": 2, "k80": 2}))
    >>> check_gpu_type_names(["V100", "k80"], Cluster({"v100": 2, "k80": 2}))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    hetsched.errors.ValidationError: `jobs` and `cluster` name different GPU types: ... (did you mean 'V100' -> 'v100'?)....
    """
    named = set(gpu_types)
    unknown = [t for t in gpu_types if t not in cluster.gpu_types]
    unused = [t for t in cluster.gpu_types if t not in named and cluster.count(t) > 0]
    if not (unknown and unused):
        return
    lower = {u.lower(): u for u in unused}
    hints = []
    for t in unknown:  # the same name but for case, else a close spelling ("v100" is not "a100")
        near = [t.lower()] if t.lower() in lower else difflib.get_close_matches(t.lower(), list(lower), n=1,
                                                                                 cutoff=0.8)
        if near:
            hints.append(f"{t!r} -> {lower[near[0]]!r}")
    raise ValidationError(
        f"`{argument}` and `cluster` name different GPU types: the {argument}' types {list(gpu_types)} include "
        f"{unknown}, which the cluster lacks, and the cluster's types {list(cluster.gpu_types)} include {unused} "
        "with GPUs that no job can use" + (f" (did you mean {', '.join(hints)}?)" if hints else "")
        + ". Name the types alike; to leave a type out on purpose, give the jobs a zero-throughput column for it "
        "or drop it from the cluster.")
