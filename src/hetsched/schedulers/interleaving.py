r"""Muri's multi-resource interleaving model: per-job resource phases, the cycle of an
interleaved group, its efficiency, and the default phases of a job type.

Zhao et al., "Multi-Resource Interleaving for Deep Learning Training", SIGCOMM 2022, §3
(the model) and §4.1 (the efficiency that weighs the matching).

Model
-----
One training iteration of job :math:`j` uses :math:`R = 4` resources one after another,
storage I/O, CPU (pre-processing), GPU (forward and backward) and network (gradient
synchronisation), for :math:`t_{j,r}` seconds each; alone, an iteration takes
:math:`T_j = \sum_r t_{j,r}` (the stages do not overlap).

A group of :math:`k \le R` jobs in the order :math:`\pi = (\pi_0, \dots, \pi_{k-1})` is
interleaved in :math:`R` slots per cycle: in slot :math:`s` job :math:`\pi_i` uses resource
:math:`(s - i) \bmod R`, so no two members ever use the same resource at once. A slot lasts
as long as its longest stage, and the cycle (in which every member does one iteration) is

.. math::

    C(\pi) = \sum_{s=0}^{R-1} \max_{0 \le i < k} t_{\pi_i, (s - i) \bmod R}.

Muri runs the order with the shortest cycle, :math:`C = \min_\pi C(\pi)` (at most
:math:`4! = 24` orders). Each member then does one iteration per :math:`C` seconds instead of
one per :math:`T_j`: its **speed factor** is :math:`T_j / C \le 1` (every member visits every
resource once per cycle, so :math:`C \ge T_j`). The group's **interleaving efficiency** is
the busy fraction of the :math:`R` resources over a cycle (Muri's ``used ratio``),

.. math::

    \gamma = \frac{\sum_{j \in G} \sum_r t_{j,r}}{R \cdot C},

which is :math:`1/R` for one job alone and 1 for a perfect interleaving. In numpy, for phases
``P`` of shape ``(k, R)`` and an order ``perm``: ``C = P[perm[i], (s - i) % R].max(over i)
.sum(over s)``.

Default phases
--------------
A workload rarely records stage times. When none are given, :func:`default_phase_fractions`
draws, for each *job type*, the share of each stage in an iteration from a generator seeded
by ``(seed, crc32(job type))`` (deterministic, and the same for every job of a type):
storage :math:`U(0.02, 0.30)`, CPU :math:`U(0.02, 0.30)`, GPU :math:`U(0.30, 1.00)`,
network :math:`U(0.02, 0.40)`, normalised to sum to 1. A job's phases on a GPU type are these
fractions times its iteration time there, :math:`1 / \text{throughput}`. The ranges are our
assumption (GPU-bound jobs, as in Muri's Table 1 where the GPU stage is the longest for most
models); pass measured phases for a real study.
"""

from __future__ import annotations

import itertools
import math
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..validation import check_int

__all__ = ["RESOURCES", "batch_best_cycles", "batch_pair_cycles", "best_cycle", "cycle_time", "default_phase_fractions",
           "efficiency", "phase_table", "speed_factors"]

#: The resources of one iteration, in the order an iteration uses them.
RESOURCES = ("storage", "cpu", "gpu", "network")
R = len(RESOURCES)

#: (low, high) of each stage's draw for the default fractions (before normalising).
DEFAULT_RANGES = ((0.02, 0.30), (0.02, 0.30), (0.30, 1.00), (0.02, 0.40))

_PERMS: dict[int, np.ndarray] = {k: np.array(list(itertools.permutations(range(k))), dtype=np.int64)
                                 for k in range(1, R + 1)}


def _phases(P: Any) -> np.ndarray:
    a = np.asarray(P, dtype=float)
    if a.ndim != 2 or a.shape[1] != R or not 1 <= a.shape[0] <= R:
        raise ValidationError(f"`phases` must have shape (k, {R}) with 1 <= k <= {R}; got {a.shape}.")
    if not (np.isfinite(a).all() and (a >= 0).all()):
        raise ValidationError("`phases` must be finite and non-negative.")
    return a


def cycle_time(P: Any, order: Sequence[int] | None = None) -> float:
    r"""Cycle :math:`C(\pi)` of the group with phases ``P`` (shape ``(k, 4)``, seconds) run in
    ``order`` (positions into ``P``; default ``0..k-1``)."""
    a = _phases(P)
    k = a.shape[0]
    perm = np.arange(k) if order is None else np.asarray(order, dtype=np.int64)
    if sorted(perm.tolist()) != list(range(k)):
        raise ValidationError(f"`order` must be a permutation of 0..{k - 1}; got {list(order or [])}.")
    s = np.arange(R)[:, None]
    return float(a[perm[None, :], (s - np.arange(k)[None, :]) % R].max(axis=1).sum())


def best_cycle(P: Any) -> tuple[float, tuple[int, ...]]:
    """The shortest cycle over every order of the group, and that order (the first found
    in lexicographic order among equals)."""
    a = _phases(P)
    k = a.shape[0]
    perms = _PERMS[k]                                   # (n_perm, k)
    s = np.arange(R)[None, :, None]
    i = np.arange(k)[None, None, :]
    stage = a[perms[:, None, :], (s - i) % R]          # (n_perm, R, k)
    cyc = stage.max(axis=2).sum(axis=1)
    b = int(np.argmin(cyc))
    return float(cyc[b]), tuple(int(x) for x in perms[b])


def batch_pair_cycles(Pa: np.ndarray, Pb: np.ndarray) -> np.ndarray:
    """Best cycle of many pairs at once: ``Pa``, ``Pb`` of shape ``(n, 4)`` (the two orders
    of a pair are the only ones; a pair's cycle is ``sum_s max(a_s, b_{s-1})``)."""
    c1 = np.maximum(Pa, np.roll(Pb, 1, axis=1)).sum(axis=1)
    c2 = np.maximum(Pb, np.roll(Pa, 1, axis=1)).sum(axis=1)
    return np.minimum(c1, c2)


def batch_best_cycles(P: np.ndarray) -> np.ndarray:
    """Best cycle of many groups of one size at once: ``P`` of shape ``(n, k, 4)``."""
    n, k, _ = P.shape
    perms = _PERMS[k]                                           # (p, k)
    s = np.arange(R)[None, :, None]
    i = np.arange(k)[None, None, :]
    col = (s - i) % R                                           # (1, R, k)
    stage = P[:, perms[:, None, :], col]                        # (n, p, R, k)
    return stage.max(axis=3).sum(axis=2).min(axis=1)


def efficiency(P: Any) -> float:
    r"""Interleaving efficiency :math:`\gamma` of the group with phases ``P`` (best order)."""
    a = _phases(P)
    c, _ = best_cycle(a)
    return float(a.sum() / (R * c)) if c > 0 else math.nan


def speed_factors(P: Any) -> np.ndarray:
    r"""Each member's speed while interleaved, :math:`T_j / C` (best order), in ``(0, 1]``."""
    a = _phases(P)
    c, _ = best_cycle(a)
    return a.sum(axis=1) / c


def default_phase_fractions(job_type: str, seed: int = 0) -> np.ndarray:
    """The default share of each stage in an iteration of ``job_type`` (see the module
    docstring): four numbers summing to 1, the same for every call with these arguments."""
    seed = check_int(seed, "seed", low=0)
    rng = np.random.default_rng([seed, zlib.crc32(str(job_type).encode())])
    lo = np.array([r[0] for r in DEFAULT_RANGES])
    hi = np.array([r[1] for r in DEFAULT_RANGES])
    f = rng.uniform(lo, hi)
    return f / f.sum()


def phase_table(phases: Mapping[Any, Any] | None) -> dict[Any, np.ndarray]:
    """Check explicit per-job phases: trace id -> four seconds (a sequence in the order of
    :data:`RESOURCES`, or a mapping resource -> seconds).

    Raises
    ------
    ValidationError
        Not a mapping; an entry that is not four numbers or names an unknown resource; a
        duration that is negative or not finite; a job whose durations are all zero. The
        message names the job, the field and the value.
    """
    if phases is None:
        return {}
    if not isinstance(phases, Mapping):
        raise ValidationError(f"`phases` must be a mapping trace id -> durations {RESOURCES}; "
                              f"got {type(phases).__name__}.")
    out: dict[Any, np.ndarray] = {}
    for job, v in phases.items():
        if isinstance(v, Mapping):
            unknown = sorted(set(map(str, v)) - set(RESOURCES))
            missing = [r for r in RESOURCES if r not in v]
            if unknown or missing:
                raise ValidationError(f"`phases` of job {job!r} must give exactly {list(RESOURCES)}; "
                                      f"unknown {unknown}, missing {missing}.")
            vals = [v[r] for r in RESOURCES]
        else:
            vals = list(v) if isinstance(v, (Sequence, np.ndarray)) and not isinstance(v, str) else [v]
            if len(vals) != R:
                raise ValidationError(f"`phases` of job {job!r} must be {R} durations {RESOURCES}; got {v!r}.")
        arr = np.zeros(R)
        for r, x in enumerate(vals):
            if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)) \
                    or not math.isfinite(float(x)) or float(x) < 0:
                raise ValidationError(f"`phases` of job {job!r}: field {RESOURCES[r]!r} must be a finite number "
                                      f">= 0 (seconds); got {x!r}.")
            arr[r] = float(x)
        if arr.sum() <= 0:
            raise ValidationError(f"`phases` of job {job!r}: the durations {dict(zip(RESOURCES, vals))} are all "
                                  "zero; an iteration must take some time.")
        out[job] = arr
    return out
