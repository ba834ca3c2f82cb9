r"""Sia-style job configurations (GPU type, GPU count, nodes) and the goodput bootstrap model.

A *configuration* is what an elastic job is given for a round: ``gpus`` GPUs of one GPU type,
spread over ``nodes`` servers. Following Sia (Jayaram Subramanya et al., SOSP'23, §3–4, and
``get_valid_configs`` in its artifact's ``adaptdl_sched/policy/mip.py``) the set is restricted
so that it stays small and packs onto servers:

* within one node, powers of two up to the node size ``R_k`` (1, 2, 4, ..., plus ``R_k``
  itself when it is not a power of two: a whole node);
* beyond one node, whole nodes: ``2 R_k, 3 R_k, ..., N_k R_k`` for the ``N_k`` full-size
  servers of type k;
* nothing above ``max_gpus`` (Sia's artifact stops at 64 GPUs per job).

With a :class:`~hetsched.inputs.topology.Topology` on the cluster, ``R_k`` is the largest server of
type k and ``N_k`` the number of servers of that size; otherwise ``R_k`` is
``gpus_per_node`` (default :data:`DEFAULT_GPUS_PER_NODE`) and ``N_k = floor(C_k / R_k)``;
single-node counts never exceed ``C_k``.

Goodput bootstrap (Sia SOSP'23 §3–4; Pollux, Qiao et al., OSDI'21, §3)
-----------------------------------------------------------------------
Sia profiles each new job on one GPU of each type and, until it has observed the job on
several GPUs, extrapolates: across types by the ratio of single-GPU throughputs, across
counts by a scaling model. Here the JobSet's ``T[j, k]`` is the measurement, taken at the
job's scale factor ``s_j`` (1 for Sia's single-GPU profiles), and

.. math::

    g(n, N) = \frac{n}{1 + o(n, N)} \cdot \frac{\nu + 1}{\nu + n},
    \qquad
    o(n, N) = \begin{cases} 0 & n = 1 \\ o_\text{intra} & n > 1,\ N = 1 \\
                            o_\text{inter} & N > 1 \end{cases}

    \mathrm{goodput}_{j,(k,n,N)} = T_{jk}\, \frac{g(n, N)}{g(s_j, N_{ref})}

The first factor is data-parallel throughput with a fixed per-GPU batch: one synchronisation
per step whose cost, relative to the step's compute, is ``o_intra`` inside a node
(NVLink/PCIe all-reduce) and ``o_inter`` across nodes (network all-reduce). The second is
Pollux's statistical efficiency :math:`E = (\varphi + M_0)/(\varphi + M)` at batch
:math:`M = n M_0` with :math:`\nu = \varphi / M_0` the gradient noise scale in units of
the one-GPU batch; ``nu = inf`` (the default) gives plain throughput. The defaults
``o_intra = 0.1``, ``o_inter = 0.3`` are illustrative round numbers (about 90 % scaling
efficiency inside an 8-GPU node, 75 % across nodes), not measurements: set them from your
own profiles or pass a full goodput table instead. ``o_intra = o_inter = 0`` is the linear
scaling Sia's artifact assumes before it has a model. The ratio model across types
(:func:`impute_type_throughputs`) fills the types a job was not measured on, from
relative GPU speeds given by the user or learned from jobs measured on both types.

In numpy::

    speedup = n / (1 + np.where(n == 1, 0, np.where(N == 1, o_intra, o_inter)))
    g = speedup * (nu + 1) / (nu + n)          # = speedup when nu is inf
    goodput = T[:, type_of_config] * g[config] / g_ref[:, type_of_config]
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...errors import ValidationError
from ...inputs.cluster import Cluster
from ...validation import check_instance, check_int, check_mapping, is_whole

__all__ = [
    "DEFAULT_GPUS_PER_NODE",
    "DEFAULT_MAX_GPUS",
    "ConfigurationSet",
    "bootstrap_goodput",
    "configuration_set",
    "configurations_from_labels",
    "impute_type_throughputs",
    "node_layout",
    "scaling_factor",
]

log = logging.getLogger(__name__)

#: GPUs per node when the cluster has no topology and no ``gpus_per_node`` is given.
DEFAULT_GPUS_PER_NODE = 8
#: Largest configuration by default (Sia's artifact enumerates configurations up to 64 GPUs).
DEFAULT_MAX_GPUS = 64


@dataclass(frozen=True, eq=False)
class ConfigurationSet:
    """Configurations as aligned arrays, ordered by GPU type, then GPU count.

    Attributes
    ----------
    gpu_types : tuple of str
        GPU type names (the columns of X).
    type_index : ndarray of int, shape (n_configs,)
        Index into ``gpu_types`` of each configuration.
    gpus : ndarray of int, shape (n_configs,)
        GPUs of each configuration.
    nodes : ndarray of int, shape (n_configs,)
        Nodes (servers) each configuration spans.
    gpus_per_node : ndarray of int, shape (n_types,)
        Node size ``R_k`` used per type (0 for a type without GPUs).

    Examples
    --------
    >>> cs = configuration_set(Cluster({"v100": 16, "k80": 4}), gpus_per_node=8)
    >>> cs.labels()
    [('v100', 1), ('v100', 2), ('v100', 4), ('v100', 8), ('v100', 16), ('k80', 1), ('k80', 2), ('k80', 4)]
    >>> cs.nodes.tolist()
    [1, 1, 1, 1, 2, 1, 1, 1]
    """

    gpu_types: tuple[str, ...]
    type_index: np.ndarray
    gpus: np.ndarray
    nodes: np.ndarray
    gpus_per_node: np.ndarray

    @property
    def n_configs(self) -> int:
        """Number of configurations."""
        return int(self.gpus.shape[0])

    def labels(self) -> list[tuple[str, int]]:
        """``(gpu_type, gpus)`` per configuration."""
        return [(self.gpu_types[k], int(n)) for k, n in zip(self.type_index, self.gpus)]

    def index(self) -> dict[tuple[str, int], int]:
        """``(gpu_type, gpus)`` -> position."""
        return {lab: i for i, lab in enumerate(self.labels())}

    def to_frame(self) -> pd.DataFrame:
        """One row per configuration: ``gpu_type``, ``gpus``, ``nodes``."""
        return pd.DataFrame({
            "gpu_type": [self.gpu_types[k] for k in self.type_index],
            "gpus": self.gpus.astype(np.int64),
            "nodes": self.nodes.astype(np.int64),
        })

    def __repr__(self) -> str:
        per = {t: int((self.type_index == k).sum()) for k, t in enumerate(self.gpu_types)}
        return f"ConfigurationSet(n_configs={self.n_configs}, per_type={per})"


def node_layout(
    cluster: Cluster,
    gpu_types: Sequence[str],
    gpus_per_node: int | Mapping[str, int] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per type: capacity ``C_k``, node size ``R_k`` and number of full-size nodes ``N_k``.

    ``gpus_per_node`` (an int or a per-type mapping) wins over the cluster's topology;
    without either, nodes have :data:`DEFAULT_GPUS_PER_NODE` GPUs.
    """
    gpu_types = list(gpu_types)
    cap = cluster.capacities(gpu_types).astype(np.int64)
    R = np.zeros(len(gpu_types), dtype=np.int64)
    N = np.zeros(len(gpu_types), dtype=np.int64)
    topo = getattr(cluster, "topology", None)
    if gpus_per_node is None and topo is not None:
        for k, t in enumerate(gpu_types):
            if cap[k] == 0 or t not in topo.gpu_types:
                continue
            sizes = topo.server_sizes(t)
            R[k] = int(sizes.max())
            N[k] = int((sizes == R[k]).sum())
        return cap, R, N
    for k, t in enumerate(gpu_types):
        if cap[k] == 0:
            continue
        if gpus_per_node is None:
            per = DEFAULT_GPUS_PER_NODE
        elif isinstance(gpus_per_node, Mapping):
            if t not in gpus_per_node:
                raise ValidationError(
                    f"`gpus_per_node` must give a node size for every GPU type the cluster has; missing {t!r}."
                )
            per = check_int(gpus_per_node[t], f"gpus_per_node[{t!r}]", low=1)
        else:
            per = check_int(gpus_per_node, "gpus_per_node", low=1)
        R[k] = min(per, int(cap[k]))
        N[k] = int(cap[k]) // per if cap[k] >= per else 1
    return cap, R, N


def configuration_set(
    cluster: Cluster,
    gpu_types: Sequence[str] | None = None,
    *,
    gpus_per_node: int | Mapping[str, int] | None = None,
    max_gpus: int | None = DEFAULT_MAX_GPUS,
) -> ConfigurationSet:
    """Sia's configuration set for ``cluster`` (see the module docstring).

    Parameters
    ----------
    cluster : Cluster
        GPU counts, and servers when it has a topology.
    gpu_types : sequence of str, optional
        Type order (default: the cluster's); types the cluster lacks get no configuration.
    gpus_per_node : int or Mapping[str, int], optional
        Node size per type; overrides the cluster's topology.
    max_gpus : int or None, default 64
        Largest configuration (None: no cap).

    Returns
    -------
    ConfigurationSet

    Examples
    --------
    >>> from hetsched import Cluster
    >>> cs = configuration_set(Cluster.from_servers({"a100": 32, "t4": 6}, gpus_per_server={"a100": 8, "t4": 4}))
    >>> cs.labels()
    [('a100', 1), ('a100', 2), ('a100', 4), ('a100', 8), ('a100', 16), ('a100', 24), ('a100', 32), ('t4', 1), ('t4', 2), ('t4', 4)]
    """
    check_instance(cluster, "cluster", Cluster, "a hetsched.Cluster")
    types = tuple(cluster.gpu_types if gpu_types is None else (str(t) for t in gpu_types))
    if max_gpus is not None:
        max_gpus = check_int(max_gpus, "max_gpus", low=1)
    cap, R, N = node_layout(cluster, types, gpus_per_node)
    t_idx: list[np.ndarray] = []
    g: list[np.ndarray] = []
    nd: list[np.ndarray] = []
    for k in range(len(types)):
        if R[k] == 0:
            continue
        single = [1 << i for i in range(int(R[k]).bit_length()) if (1 << i) <= R[k]]
        if single[-1] != R[k]:
            single.append(int(R[k]))  # a whole node that is not a power of two
        multi = [j * int(R[k]) for j in range(2, int(N[k]) + 1)]
        counts = np.asarray(single + multi, dtype=np.int64)
        nodes = np.asarray([1] * len(single) + list(range(2, int(N[k]) + 1)), dtype=np.int64)
        keep = counts <= cap[k]
        if max_gpus is not None:
            keep &= counts <= max_gpus
        t_idx.append(np.full(int(keep.sum()), k, dtype=np.int64))
        g.append(counts[keep])
        nd.append(nodes[keep])
    cat = lambda parts: np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return ConfigurationSet(types, cat(t_idx), cat(g), cat(nd), R)


def configurations_from_labels(
    labels: Sequence[tuple[str, int]], cluster: Cluster, gpu_types: Sequence[str],
    gpus_per_node: int | Mapping[str, int] | None = None,
) -> ConfigurationSet:
    """A :class:`ConfigurationSet` from ``(gpu_type, gpus)`` labels (a goodput table's columns).

    ``nodes`` is ``ceil(gpus / R_k)``. Raises :class:`ValidationError` for a type not in
    ``gpu_types``, a count that is not a positive integer, or a repeated label.
    """
    types = tuple(gpu_types)
    pos = {t: k for k, t in enumerate(types)}
    _, R, _ = node_layout(cluster, types, gpus_per_node)
    t_idx, g = [], []
    seen = set()
    for lab in labels:
        if not (isinstance(lab, tuple) and len(lab) == 2):
            raise ValidationError(
                f"`goodput` columns must be (gpu_type, gpus) pairs; got {lab!r}."
            )
        t, n = lab
        if t not in pos:
            raise ValidationError(
                f"`goodput` column {lab!r} names GPU type {t!r}, which is not one of the jobs' GPU types {list(types)}."
            )
        if not is_whole(n) or n < 1:
            raise ValidationError(f"`goodput` column {lab!r} must have a positive integer GPU count; got {n!r}.")
        if (t, int(n)) in seen:
            raise ValidationError(f"`goodput` columns must be unique; {(t, int(n))!r} appears twice.")
        seen.add((t, int(n)))
        t_idx.append(pos[t])
        g.append(int(n))
    t_arr = np.asarray(t_idx, dtype=np.int64)
    g_arr = np.asarray(g, dtype=np.int64)
    per = np.maximum(R[t_arr], 1) if t_arr.size else np.zeros(0, dtype=np.int64)
    nodes = -(-g_arr // per) if t_arr.size else np.zeros(0, dtype=np.int64)
    order = np.lexsort((g_arr, t_arr)) if t_arr.size else np.zeros(0, dtype=np.int64)
    return ConfigurationSet(types, t_arr[order], g_arr[order], nodes[order].astype(np.int64), R)


def scaling_factor(
    gpus: np.ndarray,
    nodes: np.ndarray,
    *,
    intra_node_overhead: float = 0.1,
    inter_node_overhead: float = 0.3,
    noise_scale_ratio: float = math.inf,
) -> np.ndarray:
    """:math:`g(n, N)`: goodput on ``gpus`` GPUs over ``nodes`` nodes relative to one GPU.

    Examples
    --------
    >>> scaling_factor(np.array([1, 2, 8, 16]), np.array([1, 1, 1, 2])).round(4).tolist()
    [1.0, 1.8182, 7.2727, 12.3077]
    >>> scaling_factor(np.array([1, 4]), np.array([1, 1]), intra_node_overhead=0.0, noise_scale_ratio=3.0).tolist()
    [1.0, 2.2857142857142856]
    """
    n = np.asarray(gpus, dtype=float)
    N = np.asarray(nodes, dtype=float)
    overhead = np.where(n <= 1, 0.0, np.where(N <= 1, intra_node_overhead, inter_node_overhead))
    speedup = n / (1.0 + overhead)
    if math.isinf(noise_scale_ratio):
        return speedup
    return speedup * (noise_scale_ratio + 1.0) / (noise_scale_ratio + n)


def impute_type_throughputs(
    throughputs: np.ndarray,
    gpu_types: Sequence[str],
    type_speedups: Mapping[str, float] | str,
) -> np.ndarray:
    r"""Fill the zero entries of ``throughputs`` with Sia's ratio model across GPU types.

    For a job measured on types :math:`K_j` (positive entries) and a type :math:`k \notin K_j`,

    .. math:: \hat T_{jk} = \exp\Big(\frac{1}{|K_j|}\sum_{k' \in K_j} \log T_{jk'} + \log r_{kk'}\Big)

    where :math:`r_{kk'}` is ``type_speedups[k] / type_speedups[k']`` for a mapping of
    relative single-GPU speeds, or, for ``"learned"``, the geometric mean of
    :math:`T_{ik}/T_{ik'}` over the jobs measured on both types (Sia keeps such per-type
    ratios from the jobs it has seen). Pairs with no common job contribute nothing; an
    entry with no estimate stays 0.

    Examples
    --------
    >>> T = np.array([[4.0, 1.0], [2.0, 0.0], [0.0, 3.0]])
    >>> impute_type_throughputs(T, ["v100", "k80"], "learned").tolist()
    [[4.0, 1.0], [2.0, 0.5], [12.0, 3.0]]
    >>> impute_type_throughputs(T, ["v100", "k80"], {"v100": 2.0, "k80": 1.0}).tolist()
    [[4.0, 1.0], [2.0, 1.0], [6.0, 3.0]]
    """
    T = np.asarray(throughputs, dtype=float)
    m = T.shape[1]
    measured = T > 0
    L = np.where(measured, np.log(np.where(measured, T, 1.0)), np.nan)
    if isinstance(type_speedups, str):
        if type_speedups != "learned":
            raise ValidationError(
                f"`type_speedups` must be None, 'learned' or a mapping of GPU type -> relative speed; "
                f"got {type_speedups!r}."
            )
        diff = L[:, :, None] - L[:, None, :]  # (n, k, k')
        both = ~np.isnan(diff)
        cnt = both.sum(axis=0)
        logr = np.where(cnt > 0, np.nansum(np.where(both, diff, 0.0), axis=0) / np.maximum(cnt, 1), np.nan)
    else:
        check_mapping(type_speedups, "type_speedups",
                      rule="None, 'learned' or a mapping of GPU type -> relative speed")
        speeds = np.full(m, np.nan)
        for k, t in enumerate(gpu_types):
            if t in type_speedups:
                v = type_speedups[t]
                try:
                    fv = float(v)
                except (TypeError, ValueError):
                    fv = float("nan")
                if not (math.isfinite(fv) and fv > 0):
                    raise ValidationError(f"`type_speedups[{t!r}]` must be a positive number; got {v!r}.")
                speeds[k] = fv
        logs = np.log(speeds)
        logr = logs[:, None] - logs[None, :]
    est = L[:, None, :] + logr[None, :, :]  # (n, k, k'): estimate of log T[j,k] from k'
    ok = ~np.isnan(est)
    cnt = ok.sum(axis=2)
    mean = np.where(cnt > 0, np.nansum(np.where(ok, est, 0.0), axis=2) / np.maximum(cnt, 1), np.nan)
    fill = ~measured & ~np.isnan(mean)
    out = T.copy()
    out[fill] = np.exp(mean[fill])
    return out


def bootstrap_goodput(
    throughputs: np.ndarray,
    scale_factors: np.ndarray,
    configs: ConfigurationSet,
    *,
    intra_node_overhead: float = 0.1,
    inter_node_overhead: float = 0.3,
    noise_scale_ratio: float = math.inf,
) -> np.ndarray:
    """Goodput of each job on each configuration, shape (n_jobs, n_configs).

    ``throughputs[j, k]`` is the job's measurement on ``scale_factors[j]`` GPUs of type k
    (0: the job cannot run there, so every configuration of type k gets 0).

    Examples
    --------
    >>> from hetsched import Cluster
    >>> cs = configuration_set(Cluster({"v100": 4}), gpus_per_node=4)
    >>> bootstrap_goodput(np.array([[2.0]]), np.array([1]), cs, intra_node_overhead=0.0).tolist()
    [[2.0, 4.0, 8.0]]
    """
    T = np.asarray(throughputs, dtype=float)
    s = np.asarray(scale_factors, dtype=np.int64)
    kw = dict(intra_node_overhead=intra_node_overhead, inter_node_overhead=inter_node_overhead,
              noise_scale_ratio=noise_scale_ratio)
    g = scaling_factor(configs.gpus, configs.nodes, **kw)  # (C,)
    R = np.maximum(configs.gpus_per_node, 1)  # (m,)
    ref_nodes = np.maximum(1, -(-s[:, None] // R[None, :]))  # (n, m)
    g_ref = scaling_factor(np.broadcast_to(s[:, None], ref_nodes.shape), ref_nodes, **kw)  # (n, m)
    k = configs.type_index
    return T[:, k] * g[None, :] / g_ref[:, k]
