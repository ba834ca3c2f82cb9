"""The cluster as Slurm sees it: usable nodes and their GRES GPU types -> a hetsched
:class:`~hetsched.Cluster` with one server per (node, GPU type)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ..errors import ValidationError
from ..inputs.cluster import Cluster
from .records import SlurmNode

__all__ = ["SlurmCluster", "read_cluster"]

log = logging.getLogger(__name__)


class SlurmCluster:
    """A :class:`Cluster` read from Slurm, and which node each of its servers is.

    Attributes
    ----------
    cluster : Cluster or None
        Servers named ``"<node>/<type>"``, one per usable node and GPU type, types in the
        throughput table's order; None when no usable node has a GPU.
    node_of : dict of str to str
        Server name -> node name.
    largest : int
        The most GPUs of one type on one usable node (0 without any).
    largest_of : dict of str to int
        Per GPU type, the most GPUs of it on one usable node (0: none usable).
    unusable : tuple of str
        Nodes left out: down, drained, draining, failing or not responding.
    """

    def __init__(self, cluster: Cluster | None, node_of: dict[str, str], largest_of: dict[str, int],
                 unusable: tuple[str, ...]) -> None:
        self.cluster, self.node_of, self.largest_of, self.unusable = cluster, node_of, largest_of, unusable
        self.largest = max(largest_of.values(), default=0)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SlurmCluster) and self.key() == other.key()

    def key(self) -> tuple:
        """What tells two readings apart: servers, types and counts."""
        topo = None if self.cluster is None else self.cluster.topology
        return () if topo is None else (topo.server_names, tuple(topo.server_type.tolist()),
                                        tuple(topo.server_gpus.tolist()))

    __hash__ = None  # type: ignore[assignment]


def read_cluster(nodes: Sequence[SlurmNode], gpu_types: Sequence[str]) -> SlurmCluster:
    """The usable GPUs of ``nodes`` as a cluster over ``gpu_types``.

    Parameters
    ----------
    nodes : sequence of SlurmNode
        The partition's nodes (:meth:`SlurmCommands.nodes`).
    gpu_types : sequence of str
        The GPU types of the throughput table; every GRES type of every node (usable or not)
        must be one of them.

    Returns
    -------
    SlurmCluster

    Raises
    ------
    ValidationError
        A GRES type that is not a GPU type of the throughput table (naming both lists).

    Examples
    --------
    >>> from hetsched.slurm.records import SlurmNode
    >>> sc = read_cluster([SlurmNode("n1", {"v100": 2, "k80": 4}, True, "idle"),
    ...                    SlurmNode("n2", {"v100": 4}, False, "idle+DRAIN")], ["v100", "k80"])
    >>> sc.cluster.as_dict(), sc.unusable, sc.largest
    ({'v100': 2, 'k80': 4}, ('n2',), 4)
    """
    types = list(gpu_types)
    gres = sorted({t for n in nodes for t in n.gpus})
    unknown = [t for t in gres if t not in types]
    if unknown:
        raise ValidationError(f"Slurm's GRES GPU types {gres} must all be GPU types of the throughput table "
                              f"{types}; {unknown} are not (rename the GRES type in gres.conf/slurm.conf or add "
                              "the type to the table).")
    servers, node_of, largest_of, unusable = [], {}, dict.fromkeys(types, 0), []
    for n in nodes:
        if n.untyped_gpus:
            log.warning("node %s has %d GPU(s) without a GRES type: hetsched cannot plan them", n.name,
                        n.untyped_gpus)
        if not n.usable:
            unusable.append(n.name)
            continue
        for t in types:
            g = int(n.gpus.get(t, 0))
            if g > 0:
                name = f"{n.name}/{t}"
                servers.append((name, t, g))
                node_of[name] = n.name
                largest_of[t] = max(largest_of[t], g)
    cluster = Cluster.from_servers(servers, gpu_types=types) if servers else None
    return SlurmCluster(cluster, node_of, largest_of, tuple(unusable))
