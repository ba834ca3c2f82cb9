r"""Pollux's goodput model of one job on one GPU type: step time, statistical efficiency,
the batch-size search, and the fit of the step-time model to measurements.

References: A. Qiao et al., "Pollux: Co-adaptive Cluster Scheduling for Goodput-Optimized
Deep Learning", OSDI'21, §3 (statistical efficiency §3.1, throughput model §3.2); S.
McCandlish et al., "An Empirical Model of Large-Batch Training", 2018 (gradient noise scale).

Throughput (Pollux §3.2). A job runs ``K`` replicas on ``N`` nodes with a per-GPU
("atomic") batch ``m`` and ``s >= 0`` gradient-accumulation steps before the synchronising
step::

    T_acc(m)      = alpha_c + beta_c * m                        (one accumulation step)
    T_net(N, K)   = 1e-8                                        if K == 1 (no all-reduce)
                  = alpha_r + beta_r * max(K - 2, 0)            if N == 1 < K (one node)
                  = alpha_n + beta_n * max(K - 2, 0)            if N > 1
    T_sync(m)     = (T_acc^gamma + T_net^gamma)^(1 / gamma)     (overlap, 1 <= gamma <= 10)
    T_iter        = s * T_acc(m) + T_sync(m),   M = K * m * (s + 1),   throughput = M / T_iter

(ring all-reduce: alpha is the slowest link, beta the cost per replica beyond two; gamma = 1
is no overlap of compute and communication, large gamma full overlap). The 1e-8 of a lone
replica keeps logarithms finite.

Statistical efficiency (Pollux §3.1). With the gradient square norm ``sqr = |g|^2`` and
variance ``var = tr(Sigma)`` measured at the initial batch ``M0`` (gradient noise scale
``var / sqr`` in units of ``M0`` examples, McCandlish et al.) and ``scale = M / M0``::

    gain(M)       = (var + sqr) / (var / scale + sqr)   (progress of one iteration at M,
                                                         in iterations at M0)
    efficiency(M) = gain(M) / scale                     (1 at M = M0, decreasing in M)
    goodput       = throughput * efficiency              (examples/s)
    progress_rate = gain / T_iter                        (M0-iterations per second, as Sia)

``sqr`` and ``var`` must be >= 0; with ``sqr == var == 0`` (nothing measured) the gain is
``scale`` and the efficiency 1 (perfect scaling), which is also the limit ``sqr -> 0``.

:meth:`GoodputModel.optimize` searches the total batch per placement (Pollux §3.2, rule in
its docstring); :func:`fit_perf_params` fits ``PerfParams`` to measured step times.
"""

from __future__ import annotations

import logging
from dataclasses import astuple, dataclass, fields
from typing import Any

import numpy as np

from ..errors import ValidationError, show
from ..validation import (
    check_bool,
    check_instance,
    check_int,
    check_interval,
    check_real,
    fail,
    fail_at,
)

__all__ = ["FitResult", "GoodputModel", "GradParams", "PerfParams", "efficiency", "fit_perf_params", "optimize_many",
           "gain", "iteration_time", "network_time"]

logger = logging.getLogger(__name__)

#: Network time of a single replica (no all-reduce); > 0 so that logarithms stay finite.
SINGLE_REPLICA_NET = 1e-8
#: Lower bound of every alpha / beta in :func:`fit_perf_params`.
FIT_LOWER = 1e-8
#: Upper bound of every alpha / beta in the fit (keeps the log-space search finite).
FIT_UPPER = 1e6
_START = np.array([0.1, 0.01, 0.1, 0.01, 0.1, 0.01, 1.001])
_GAMMA_STARTS = (1.001, 2.0, 4.0)


@dataclass(frozen=True)
class PerfParams:
    """Step-time model of one job on one GPU type (seconds; betas in seconds per example
    or per replica).

    Parameters
    ----------
    alpha_c, beta_c : float
        Accumulation step ``T_acc(m) = alpha_c + beta_c * m``; >= 0, not both 0.
    alpha_r, beta_r : float
        All-reduce within one node, >= 0.
    alpha_n, beta_n : float
        All-reduce across nodes, >= 0.
    gamma : float
        Overlap exponent in [1, 10].
    """

    alpha_c: float
    beta_c: float
    alpha_r: float
    beta_r: float
    alpha_n: float
    beta_n: float
    gamma: float

    def __post_init__(self) -> None:
        for f in fields(self):
            low, high = (1.0, 10.0) if f.name == "gamma" else (0.0, None)
            object.__setattr__(self, f.name, check_real(getattr(self, f.name), f.name, low=low, high=high))
        if self.alpha_c == 0.0 and self.beta_c == 0.0:
            raise ValidationError("`alpha_c` and `beta_c` must not both be 0 (a step takes time); got 0.0 and 0.0.")

    def as_array(self) -> np.ndarray:
        """The seven parameters as a float array in field order."""
        return np.array(astuple(self), dtype=float)

    @classmethod
    def from_array(cls, values: Any) -> PerfParams:
        """Parameters from seven numbers in field order (inverse of :meth:`as_array`)."""
        arr = _array(values, "values", integer=False, low=0.0)
        if arr.shape != (7,):
            raise fail("values", "an array of 7 numbers", values, shown=f"shape {arr.shape}")
        return cls(*(float(v) for v in arr))


@dataclass(frozen=True)
class GradParams:
    """Gradient statistics at the initial batch size.

    Parameters
    ----------
    sqr, var : float
        ``|g|^2`` and ``tr(Sigma)``, finite and >= 0 (both 0: efficiency 1 everywhere).
    """

    sqr: float
    var: float

    def __post_init__(self) -> None:
        for name in ("sqr", "var"):
            object.__setattr__(self, name, check_real(getattr(self, name), name, low=0.0))


@dataclass(frozen=True)
class FitResult:
    """Outcome of :func:`fit_perf_params`.

    Attributes
    ----------
    params : PerfParams
        Fitted parameters (when ``success`` is False: the optimiser's last iterate).
    success : bool
        Whether L-BFGS-B reported convergence.
    message : str
        The optimiser's message and the parameters fixed by the identifiability rules.
    rmsle : float
        Root mean square log error over compute and step times together (no regularisers).
    n_samples : int
        Number of samples fitted.
    """

    params: PerfParams
    success: bool
    message: str
    rmsle: float
    n_samples: int


# ------------------------------------------------------------------------ validation
def _where(shape: tuple[int, ...], i: int) -> str:
    if len(shape) <= 1:
        return f"position {i}"
    return f"position {tuple(int(j) for j in np.unravel_index(i, shape))}"


def _array(value: Any, name: str, *, integer: bool, low: float, low_open: bool = False) -> np.ndarray:
    """``value`` as a float array, every entry finite, >= ``low`` (> with ``low_open``),
    and whole when ``integer``; else ValidationError naming the first bad position."""
    raw = np.asarray(value)
    if raw.dtype.kind not in "iuf":
        raise fail(name, "numeric (int or float)", value, shown=f"{show(value):.80}")
    arr = raw.astype(float, copy=False)
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(arr) | ((arr <= low) if low_open else (arr < low))
        if integer:
            bad |= arr != np.round(arr)
    if bad.any():
        if integer:
            rule = {1.0: "positive integers", 0.0: "non-negative integers"}.get(low, f"integers >= {low:g}")
        else:
            rule = "positive finite numbers" if low == 0.0 and low_open else f"finite numbers >= {low:g}"
        i = int(np.flatnonzero(bad)[0])
        if arr.ndim == 0:
            raise fail(name, rule, value)
        raise fail_at(name, rule, _where(arr.shape, i), arr.flat[i], verb="has")
    return arr


def _placement(nodes: Any, replicas: Any) -> tuple[np.ndarray, np.ndarray]:
    n = _array(nodes, "nodes", integer=True, low=1.0)
    k = _array(replicas, "replicas", integer=True, low=1.0)
    try:
        n, k = np.broadcast_arrays(n, k)
    except ValueError:
        raise ValidationError(f"`nodes` and `replicas` must have broadcastable shapes; got {n.shape} "
                              f"and {k.shape}.") from None
    bad = n > k
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValidationError(f"`nodes` must be <= `replicas` (one replica per node at least); "
                              f"{_where(n.shape, i)} has nodes={n.flat[i]:g}, replicas={k.flat[i]:g}.")
    return n, k


# ----------------------------------------------------------------- model (no checks)
def _net(p: PerfParams, n: np.ndarray, k: np.ndarray) -> np.ndarray:
    extra = np.maximum(k - 2.0, 0.0)
    t = np.where(n > 1, p.alpha_n + p.beta_n * extra, p.alpha_r + p.beta_r * extra)
    return np.where(k > 1, t, SINGLE_REPLICA_NET)


def _overlap(x: np.ndarray, y: np.ndarray, gamma: float) -> np.ndarray:
    """``(x^gamma + y^gamma)^(1/gamma)`` without overflow (x, y > 0)."""
    big, small = np.maximum(x, y), np.minimum(x, y)
    return big * (1.0 + (small / big) ** gamma) ** (1.0 / gamma)


def _iter_time(p: PerfParams, n: Any, k: Any, m: Any, s: Any) -> np.ndarray:
    acc = p.alpha_c + p.beta_c * m
    return s * acc + _overlap(acc, _net(p, n, k), p.gamma)


def _gain(g: GradParams, m0: float, batch: np.ndarray) -> np.ndarray:
    scale = batch / m0
    if g.sqr == 0.0 and g.var == 0.0:
        return scale
    return (g.var + g.sqr) / (g.var / scale + g.sqr)


# ---------------------------------------------------------------------- public model
def network_time(perf: PerfParams, nodes: Any, replicas: Any) -> np.ndarray:
    """All-reduce time ``T_net(N, K)`` in seconds (module docstring; 1e-8 for one replica).

    Parameters
    ----------
    perf : PerfParams
    nodes, replicas : array_like of int
        Broadcastable, ``1 <= nodes <= replicas``.

    Returns
    -------
    numpy.ndarray
        The broadcast shape.
    """
    check_instance(perf, "perf", PerfParams, "a PerfParams")
    return np.asarray(_net(perf, *_placement(nodes, replicas)))


def iteration_time(perf: PerfParams, nodes: Any, replicas: Any, atomic_bsz: Any, accum_steps: Any = 0) -> np.ndarray:
    """Seconds of one iteration, ``T_iter = s * T_acc(m) + T_sync(m)``.

    Parameters
    ----------
    perf : PerfParams
    nodes, replicas : array_like of int
        ``1 <= nodes <= replicas``.
    atomic_bsz : array_like of float
        Per-GPU batch ``m > 0``.
    accum_steps : array_like of int, optional
        Local steps ``s >= 0`` before the synchronising one (default 0).

    Returns
    -------
    numpy.ndarray
        The broadcast shape of the four arrays.
    """
    check_instance(perf, "perf", PerfParams, "a PerfParams")
    n, k = _placement(nodes, replicas)
    m = _array(atomic_bsz, "atomic_bsz", integer=False, low=0.0, low_open=True)
    return np.asarray(_iter_time(perf, n, k, m, _array(accum_steps, "accum_steps", integer=True, low=0.0)))


def _check_batch(grad: GradParams, init_batch_size: Any, batch_size: Any) -> tuple[int, np.ndarray]:
    check_instance(grad, "grad", GradParams, "a GradParams")
    m0 = check_int(init_batch_size, "init_batch_size", low=1)
    return m0, _array(batch_size, "batch_size", integer=False, low=0.0, low_open=True)


def gain(grad: GradParams, init_batch_size: int, batch_size: Any) -> np.ndarray:
    """Progress of one iteration at ``M = batch_size`` in iterations at ``M0``:
    ``(var + sqr) / (var / scale + sqr)``, ``scale = M / M0`` (``scale`` if both are 0).

    Parameters
    ----------
    grad : GradParams
    init_batch_size : int
        ``M0 >= 1``, where ``grad`` was measured.
    batch_size : array_like of float
        ``M > 0``.

    Returns
    -------
    numpy.ndarray
        The shape of ``batch_size``.
    """
    m0, batch = _check_batch(grad, init_batch_size, batch_size)
    return np.asarray(_gain(grad, m0, batch))


def efficiency(grad: GradParams, init_batch_size: int, batch_size: Any) -> np.ndarray:
    """Statistical efficiency ``gain(M) / (M / M0)``: 1 at ``M0``, decreasing in ``M``.

    Parameters and returns as :func:`gain`.
    """
    m0, batch = _check_batch(grad, init_batch_size, batch_size)
    return np.asarray(_gain(grad, m0, batch) / (batch / m0))


class GoodputModel:
    """Goodput of one job on one GPU type (Pollux §3).

    Parameters
    ----------
    perf : PerfParams
        Step-time model.
    grad : GradParams
        Gradient statistics measured at ``init_batch_size``.
    init_batch_size : int
        ``M0 >= 1``.

    Notes
    -----
    :meth:`throughput`, :meth:`goodput` and :meth:`progress_rate` take broadcastable arrays
    ``nodes``, ``replicas`` (``1 <= nodes <= replicas``), ``atomic_bsz`` (> 0) and
    ``accum_steps`` (integers >= 0, default 0) and return their broadcast shape.
    """

    def __init__(self, perf: PerfParams, grad: GradParams, init_batch_size: int) -> None:
        self.perf: PerfParams = check_instance(perf, "perf", PerfParams, "a PerfParams")
        self.grad: GradParams = check_instance(grad, "grad", GradParams, "a GradParams")
        self.init_batch_size: int = check_int(init_batch_size, "init_batch_size", low=1)

    def __repr__(self) -> str:
        return f"GoodputModel({self.perf!r}, {self.grad!r}, init_batch_size={self.init_batch_size})"

    def _parts(self, nodes: Any, replicas: Any, atomic_bsz: Any, accum_steps: Any) -> tuple[np.ndarray, np.ndarray]:
        t = iteration_time(self.perf, nodes, replicas, atomic_bsz, accum_steps)
        return t, np.asarray(replicas, float) * np.asarray(atomic_bsz, float) * (np.asarray(accum_steps, float) + 1)

    def _gain(self, batch: np.ndarray) -> np.ndarray:
        return _gain(self.grad, float(self.init_batch_size), batch)

    def throughput(self, nodes: Any, replicas: Any, atomic_bsz: Any, accum_steps: Any = 0) -> np.ndarray:
        """Examples per second, ``K * m * (s + 1) / T_iter``."""
        t, batch = self._parts(nodes, replicas, atomic_bsz, accum_steps)
        return np.asarray(batch / t)

    def goodput(self, nodes: Any, replicas: Any, atomic_bsz: Any, accum_steps: Any = 0) -> np.ndarray:
        """``throughput * efficiency(K * m * (s + 1))``, examples per second."""
        t, batch = self._parts(nodes, replicas, atomic_bsz, accum_steps)
        return np.asarray(self._gain(batch) * self.init_batch_size / t)

    def progress_rate(self, nodes: Any, replicas: Any, atomic_bsz: Any, accum_steps: Any = 0) -> np.ndarray:
        """``gain(K * m * (s + 1)) / T_iter``, iterations at ``M0`` per second (Sia's measure)."""
        t, batch = self._parts(nodes, replicas, atomic_bsz, accum_steps)
        return np.asarray(self._gain(batch) / t)

    def optimize(self, nodes: Any, replicas: Any, *, max_batch_size: int, atomic_bsz_range: tuple[int, int],
                 accumulation: bool = True, n_candidates: int = 50) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Best goodput over the total batch size, per (``nodes``, ``replicas``) element.

        The rule (Pollux's search, with ``max_batch_size`` a hard limit): ``n_candidates``
        totals ``M`` geometric in ``[lo, hi]``, ``lo = max(M0, K * atomic_min)``, ``hi =
        max_batch_size`` (``min(max_batch_size, K * atomic_max)`` without accumulation).
        Each gives local batch ``L = ceil(M / K)``, accumulation steps ``s = ceil(L /
        atomic_max) - 1`` (0 without accumulation) and two configurations: atomic batch
        ``ceil(L / (s + 1))`` and ``atomic_max`` (full GPUs), same ``s``. One more takes the
        largest total under the limit: ``L = floor(max_batch_size / K)``, atomic
        ``floor(L / (s + 1))``. Atomic batches are clipped into the range; a configuration
        counts only if ``M0 <= K * atomic * (s + 1) <= max_batch_size``, and the best
        goodput wins. The first candidate is ``M0`` itself when ``M0 >= K * atomic_min``.
        None counts (e.g. ``K * atomic_min > max_batch_size``): goodput 0, atomic 0,
        accumulation 0. Between candidates the search is approximate.

        Parameters
        ----------
        nodes, replicas : array_like of int
            Broadcastable, ``1 <= nodes <= replicas``.
        max_batch_size : int
            Largest total batch, >= ``init_batch_size``.
        atomic_bsz_range : tuple of int
            ``(atomic_min, atomic_max)``, ``1 <= atomic_min <= atomic_max``: what fits a GPU.
        accumulation : bool, optional
            Allow gradient accumulation (default True).
        n_candidates : int, optional
            Geometric candidates per element (default 50).

        Returns
        -------
        goodput, atomic_bsz, accum_steps : numpy.ndarray
            Float, int64, int64, each of the broadcast shape of ``nodes`` and ``replicas``.
        """
        n, k = _placement(nodes, replicas)
        m0 = self.init_batch_size
        max_bsz = check_int(max_batch_size, "max_batch_size", low=m0, rule=f"an integer >= init_batch_size = {m0}")
        lo_a, hi_a = check_interval(atomic_bsz_range, "atomic_bsz_range", low=1.0)
        if not (lo_a.is_integer() and hi_a.is_integer()):
            raise fail("atomic_bsz_range", "a pair of integers (atomic_min, atomic_max), 1 <= min <= max",
                       atomic_bsz_range)
        accumulation = check_bool(accumulation, "accumulation")
        n_cand = check_int(n_candidates, "n_candidates", low=1)
        return _optimize_arrays(self.perf, np.asarray(self.grad.sqr), np.asarray(self.grad.var),
                                np.asarray(float(m0)), np.asarray(float(max_bsz)), np.asarray(lo_a), np.asarray(hi_a),
                                n, k, accumulation, n_cand)


def _optimize_arrays(perf: Any, sqr: np.ndarray, var: np.ndarray, m0: np.ndarray, max_bsz: np.ndarray,
                     lo_a: np.ndarray, hi_a: np.ndarray, n: np.ndarray, k: np.ndarray, accumulation: bool,
                     n_cand: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:meth:`GoodputModel.optimize` on arrays (no checks): every argument (and every field of
    ``perf``, a PerfParams or an object with the same fields as arrays) broadcasts to one
    shape; returns ``(goodput, atomic, accum)`` of that shape."""
    fields_ = ("alpha_c", "beta_c", "alpha_r", "beta_r", "alpha_n", "beta_n", "gamma")
    arrays = np.broadcast_arrays(sqr, var, m0, max_bsz, lo_a, hi_a, n, k,
                                 *(np.asarray(getattr(perf, f), dtype=float) for f in fields_))
    sqr, var, m0, max_bsz, lo_a, hi_a, n, k = (a[..., None] for a in arrays[:8])
    pe = _ArrayParams(*(a[..., None] for a in arrays[8:]))
    kk, nn = k, n
    lo = np.maximum(m0, kk * lo_a)
    hi = (max_bsz + 0.0 * lo) if accumulation else np.minimum(max_bsz, kk * hi_a)
    ok = lo <= hi
    ratio = np.where(ok, hi / np.where(ok, lo, 1.0), 1.0)
    cand = lo * ratio ** np.linspace(0.0, 1.0, n_cand)
    local = np.ceil(cand / kk - 1e-9)  # the 1e-9 keeps an exact M = K * L at L
    top = np.maximum(np.floor(max_bsz / kk), 1.0)
    if not accumulation:
        top = np.minimum(top, hi_a)
    local = np.concatenate([local, local, top + 0.0 * local[..., :1]], axis=-1)
    steps = np.ceil(local / hi_a) - 1.0 if accumulation else np.zeros_like(local)
    per_step = local / (steps + 1.0)
    atomic = np.concatenate([np.ceil(per_step[..., :n_cand]), hi_a + 0.0 * cand, np.floor(per_step[..., -1:])],
                            axis=-1)
    atomic = np.clip(atomic, lo_a, hi_a)
    total = kk * atomic * (steps + 1.0)
    valid = ok & (total <= max_bsz) & (total >= m0)
    scale = total / m0
    with np.errstate(divide="ignore", invalid="ignore"):
        g = np.where((sqr == 0.0) & (var == 0.0), scale, (var + sqr) / (var / scale + sqr))
    good = np.where(valid, g * m0 / _iter_time(pe, nn, kk, atomic, steps), -np.inf)
    best = np.argmax(good, axis=-1)[..., None]
    found = np.take_along_axis(valid, best, -1)[..., 0]
    out = [np.where(found, np.take_along_axis(a, best, -1)[..., 0], 0.0) for a in (good, atomic, steps)]
    return out[0], out[1].astype(np.int64), out[2].astype(np.int64)


@dataclass(frozen=True)
class _ArrayParams:
    """PerfParams' fields as arrays (for :func:`_optimize_arrays`)."""

    alpha_c: Any
    beta_c: Any
    alpha_r: Any
    beta_r: Any
    alpha_n: Any
    beta_n: Any
    gamma: Any


def optimize_many(models: list[GoodputModel], nodes: Any, replicas: Any, *, max_batch_size: Any,
                  atomic_bsz_range: tuple[Any, Any], accumulation: bool = True,
                  n_candidates: int = 50) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:meth:`GoodputModel.optimize` for many models at once: row ``j`` of the result is
    ``models[j].optimize(nodes, replicas, max_batch_size=max_batch_size[j],
    atomic_bsz_range=(lo[j], hi[j]))`` (one vectorised evaluation; what a round of an adaptive
    scheduler needs for every job and configuration).

    Parameters
    ----------
    models : list of GoodputModel
        ``J`` models.
    nodes, replicas : array_like of int, shape (C,)
        The configurations, ``1 <= nodes <= replicas``.
    max_batch_size : array_like of int, shape (J,)
        Each model's largest total batch (>= its initial batch).
    atomic_bsz_range : (lo, hi)
        Per-GPU batch limits: ``lo`` of shape (J,), ``hi`` of shape (J, C) (a placement's
        profiled limit); integers with ``1 <= lo``. A configuration with ``hi < lo`` cannot run
        (goodput 0).
    accumulation, n_candidates
        As :meth:`GoodputModel.optimize`.

    Returns
    -------
    goodput, atomic_bsz, accum_steps : numpy.ndarray, shape (J, C)
    """
    if not models:
        c = np.asarray(replicas).reshape(-1).shape[0]
        return np.zeros((0, c)), np.zeros((0, c), np.int64), np.zeros((0, c), np.int64)
    for i, m in enumerate(models):
        if not isinstance(m, GoodputModel):
            raise ValidationError(f"`models` must hold GoodputModel objects; position {i} has {type(m).__name__}.")
    n, k = _placement(np.asarray(nodes).reshape(-1), np.asarray(replicas).reshape(-1))
    J, C = len(models), n.shape[0]
    if not (isinstance(atomic_bsz_range, (tuple, list)) and len(atomic_bsz_range) == 2):
        raise fail("atomic_bsz_range", "a pair (lo of shape (n_models,), hi of shape (n_models, n_configs))",
                   atomic_bsz_range, shown=f"{show(atomic_bsz_range):.80}")
    if np.shape(atomic_bsz_range[1]) != (J, C):
        raise ValidationError(f"`atomic_bsz_range[1]` must have shape (n_models, n_configs) = ({J}, {C}); got "
                              f"{np.shape(atomic_bsz_range[1])}.")
    m0 = np.array([m.init_batch_size for m in models], dtype=float)
    max_bsz = _array(max_batch_size, "max_batch_size", integer=True, low=1.0).reshape(-1)
    lo = _array(atomic_bsz_range[0], "atomic_bsz_range[0]", integer=True, low=1.0).reshape(-1)
    hi = _array(atomic_bsz_range[1], "atomic_bsz_range[1]", integer=True, low=0.0).reshape(J, C)
    if max_bsz.shape != (J,) or lo.shape != (J,):
        raise ValidationError(f"`max_batch_size` and `atomic_bsz_range[0]` must have one entry per model ({J}); got "
                              f"{max_bsz.shape} and {lo.shape}.")
    if (max_bsz < m0).any():
        j = int(np.flatnonzero(max_bsz < m0)[0])
        raise ValidationError(f"`max_batch_size` must be >= each model's init_batch_size; model {j} has "
                              f"{max_bsz[j]:g} < {m0[j]:g}.")
    perf = _ArrayParams(*(np.array([getattr(m.perf, f.name) for m in models])[:, None] for f in fields(PerfParams)))
    sqr = np.array([m.grad.sqr for m in models])[:, None]
    var = np.array([m.grad.var for m in models])[:, None]
    runnable = hi >= lo[:, None]
    good, atomic, accum = _optimize_arrays(perf, sqr, var, m0[:, None], max_bsz[:, None], lo[:, None],
                                           np.where(runnable, hi, lo[:, None]), n[None, :], k[None, :],
                                           check_bool(accumulation, "accumulation"),
                                           check_int(n_candidates, "n_candidates", low=1))
    return (np.where(runnable, good, 0.0), np.where(runnable, atomic, 0), np.where(runnable, accum, 0))


# ----------------------------------------------------------------------------- fit
def _fit_inputs(nodes: Any, replicas: Any, atomic_bsz: Any, compute_time: Any, step_time: Any) -> list[np.ndarray]:
    spec = [("nodes", nodes, True), ("replicas", replicas, True), ("atomic_bsz", atomic_bsz, True),
            ("compute_time", compute_time, False), ("step_time", step_time, False)]
    out = []
    for name, value, integer in spec:
        arr = np.atleast_1d(_array(value, name, integer=integer, low=1.0 if integer else 0.0, low_open=not integer))
        if arr.ndim != 1 or arr.size == 0:
            raise fail(name, "a non-empty 1-D array", value, shown=f"shape {arr.shape}")
        if out and arr.size != out[0].size:
            raise ValidationError(f"`{name}` must have the length of `nodes` ({out[0].size}); got {arr.size}.")
        out.append(arr)
    _placement(out[0], out[1])
    return out


def _objective(theta: np.ndarray, free: np.ndarray, base: np.ndarray, data: list[np.ndarray],
               warmup: bool = False) -> tuple[float, np.ndarray]:
    """The fit's objective (``warmup``: plain mean squared log errors, no regularisers) and
    its gradient in the free parameters (alpha/beta in log space, gamma as is)."""
    p = base.copy()
    p[free] = theta
    p[:6] = np.exp(p[:6])
    ac, bc, ar, br, an, bn, g = p
    n, k, m, c, s = data
    extra, multi, inter = np.maximum(k - 2.0, 0.0), k > 1, n > 1
    x = ac + bc * m
    y = np.where(multi, np.where(inter, an + bn * extra, ar + br * extra), SINGLE_REPLICA_NET)
    t = _overlap(x, y, g)
    u, v = (x / t) ** g, (y / t) ** g  # u + v = 1: d ln T / d ln x, d ln T / d ln y
    e1, e2 = np.log(x) - np.log(c), np.log(t) - np.log(s)
    intra_w, inter_w = v * (multi & ~inter) / y, v * (multi & inter) / y
    # d ln x / d p and d ln T / d p, columns in parameter order
    dx = np.stack([1 / x, m / x] + [np.zeros_like(x)] * 5, axis=1)
    dt = np.stack([u / x, u * m / x, intra_w, intra_w * extra, inter_w, inter_w * extra,
                   (u * np.log(x / t) + v * np.log(y / t)) / g], axis=1)
    chain = np.r_[p[:6], 1.0]  # d p / d theta
    if warmup:
        return float(np.mean(e1 ** 2) + np.mean(e2 ** 2)), (2.0 * (e1 @ dx + e2 @ dt) / e1.size * chain)[free]
    l1, l2 = np.sqrt(np.mean(e1 ** 2)), np.sqrt(np.mean(e2 ** 2))
    grad = (e1 @ dx / (e1.size * l1) if l1 > 0 else 0.0) + (e2 @ dt / (e2.size * l2) if l2 > 0 else 0.0)
    rn, rr = bn / an, br / ar
    value = l1 + l2 + 1e-3 * (g - 1.0) ** 2 + 1e-2 * (rn ** 2 + rr ** 2)
    grad = grad * chain
    grad[6] += 2e-3 * (g - 1.0)
    grad[[4, 5, 2, 3]] += 2e-2 * np.array([-rn ** 2, rn ** 2, -rr ** 2, rr ** 2])
    return float(value), grad[free]


def fit_perf_params(nodes: Any, replicas: Any, atomic_bsz: Any, compute_time: Any, step_time: Any, *,
                    initial: PerfParams | None = None) -> FitResult:
    """Fit :class:`PerfParams` to measured step times (Pollux §3.2) with L-BFGS-B.

    Objective: RMS log error of ``T_acc`` against ``compute_time`` plus that of ``T_sync``
    against ``step_time``, plus ``1e-3 (gamma - 1)^2 + 1e-2 ((beta_n / alpha_n)^2 +
    (beta_r / alpha_r)^2)`` (prefer little overlap and flat, optimistic networks). Bounds:
    alpha/beta in [1e-8, 1e6] (searched in log space), gamma in [1, 10]; start alpha = 0.1,
    beta = 0.01. Parameters the data cannot identify are fixed: one distinct atomic batch ->
    ``alpha_c = mean(compute_time) / 2``; no multi-node sample -> ``alpha_n, beta_n`` at
    1e-8, afterwards raised to at least ``1.1 alpha_r``, ``1.1 beta_r`` (inter-node is
    slower); no single-node sample with ``replicas > 1`` -> ``alpha_r, beta_r`` at 1e-8; no
    sample with ``replicas > 2`` -> ``beta_r, beta_n`` at 1e-8.

    Parameters
    ----------
    nodes, replicas, atomic_bsz : array_like of int
        One entry per sample, integers >= 1, ``nodes <= replicas``.
    compute_time : array_like of float
        Seconds of one accumulation step (step time minus synchronisation), > 0.
    step_time : array_like of float
        Seconds of one synchronising step, > 0.
    initial : PerfParams, optional
        A warm start (e.g. the previous fit of the same job, refitted after one more
        sample): the fit then runs from it alone instead of from the three starts below.

    Returns
    -------
    FitResult
        ``success`` False, with a logged warning, when L-BFGS-B did not converge.

    Notes
    -----
    At an exact fit the RMSLE is a cone (not differentiable), where L-BFGS-B stalls far from
    the optimum; and the model is not convex. So each of the starts gamma = 1.001, 2, 4
    first minimises the smooth mean squared log errors, then the objective above from there;
    the lowest objective wins (its convergence flag is reported).
    """
    # scipy.optimize is imported here, not with the module: it costs ~0.14 s to load
    from scipy.optimize import minimize

    data = _fit_inputs(nodes, replicas, atomic_bsz, compute_time, step_time)
    n, k, m, c, s = data
    base = np.r_[np.log(_START[:6]), _START[6]]
    free = np.ones(7, dtype=bool)
    fixed: dict[str, float] = {}
    if np.unique(m).size == 1:
        fixed["alpha_c"] = float(np.mean(c)) / 2.0
    if not (n > 1).any():
        fixed.update(alpha_n=FIT_LOWER, beta_n=FIT_LOWER)
    if not ((n == 1) & (k > 1)).any():
        fixed.update(alpha_r=FIT_LOWER, beta_r=FIT_LOWER)
    if not (k > 2).any():
        fixed.update(beta_r=FIT_LOWER, beta_n=FIT_LOWER)
    names = [f.name for f in fields(PerfParams)]
    for name, value in fixed.items():
        free[names.index(name)], base[names.index(name)] = False, np.log(value)
    bounds = [(np.log(FIT_LOWER), np.log(FIT_UPPER))] * int(free[:6].sum()) + ([(1.0, 10.0)] if free[6] else [])
    res = None
    starts = [np.r_[base[:6], g0] for g0 in _GAMMA_STARTS]
    options = {"ftol": 1e-10, "gtol": 1e-7, "maxiter": 1000}
    if initial is not None:
        if not isinstance(initial, PerfParams):
            raise ValidationError(f"`initial` must be a PerfParams or None; got {type(initial).__name__}.")
        warm = initial.as_array().astype(float)
        warm[:6] = np.log(np.clip(warm[:6], FIT_LOWER, FIT_UPPER))
        warm[6] = min(max(warm[6], 1.0), 10.0)
        warm[~free] = base[~free]
        starts = [warm]
        options = {"ftol": 1e-10, "gtol": 1e-7, "maxiter": 500}   # refining a fit, not finding one
    for start in starts:
        x = start[free]
        for warmup in (True, False):
            out = minimize(_objective, x, args=(free, base, data, warmup), jac=True, method="L-BFGS-B",
                           bounds=bounds, options=options)
            x = out.x
        if res is None or out.fun < res.fun:
            res = out
    p = base.copy()
    p[free] = res.x
    p[:6] = np.exp(p[:6])
    finite = bool(np.all(np.isfinite(p)))
    if not finite:  # never hand out NaN: report the start instead, unsuccessful
        p = np.r_[np.exp(base[:6]), base[6]]
    if not (n > 1).any():
        p[4], p[5] = max(p[4], 1.1 * p[2]), max(p[5], 1.1 * p[3])
    params = PerfParams.from_array(p)
    pred_c = params.alpha_c + params.beta_c * m
    err = np.r_[np.log(pred_c / c), np.log(_overlap(pred_c, _net(params, n, k), params.gamma) / s)]
    rmsle = float(np.sqrt(np.mean(err ** 2)))
    success = bool(res.success) and finite
    message = str(res.message) + ("" if finite else "; non-finite parameters") + (
        f"; fixed: {', '.join(sorted(fixed))}" if fixed else "")
    if not success:
        logger.warning("fit_perf_params did not converge on %d samples (rmsle %.3g): %s", n.size, rmsle, message)
    return FitResult(params, success, message, rmsle, int(n.size))
