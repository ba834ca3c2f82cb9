"""Seeded uniform draws that depend only on a seed and a job's id.

Schedulers whose per-job data has a documented default (Synergy's host sensitivity,
AntMan's classes) draw it from the job's id, so that the same job gets the same numbers in
the simulator, the online scheduler and the demo, whatever other jobs are active. The id is
hashed with CRC-32 (of its type name and text, so ``1`` and ``"1"`` differ), combined with
the seed and a salt, and mixed by SplitMix64 (Steele, Lea and Flood, "Fast Splittable
Pseudorandom Number Generators", OOPSLA 2014); the top 53 bits give a float in [0, 1).

>>> from hetsched.inputs.id_draws import id_uniforms
>>> u = id_uniforms(["a", "b"], seed=1, n_draws=3)
>>> u.shape, bool(((u >= 0) & (u < 1)).all())
((2, 3), True)
>>> bool((id_uniforms(["b"], seed=1, n_draws=3) == u[1]).all())
True
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

from ..validation import check_int

__all__ = ["id_uniforms"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's output function on an array of uint64 (wrapping arithmetic)."""
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


def id_uniforms(ids: Any, seed: int, n_draws: int, *, salt: str = "") -> np.ndarray:
    """``n_draws`` uniform numbers in [0, 1) per id, a pure function of (seed, salt, id).

    Parameters
    ----------
    ids : array-like
        Job ids (any values with a ``str``).
    seed : int
        Non-negative seed (taken modulo 2**32).
    n_draws : int
        Draws per id.
    salt : str, optional
        Separates the draws of different users of the same ids.
    """
    check_int(seed, "seed", low=0)
    check_int(n_draws, "n_draws", low=0)
    flat = np.asarray(ids, dtype=object).reshape(-1).tolist()
    keys = np.fromiter((zlib.crc32(f"{salt}:{type(j).__name__}:{j}".encode()) for j in flat),
                       dtype=np.uint64, count=len(flat))
    base = _mix((np.uint64(seed & 0xFFFFFFFF) << np.uint64(32)) ^ keys + np.zeros(1, np.uint64))
    steps = (np.arange(1, n_draws + 1, dtype=np.uint64) * _GOLDEN)[None, :]
    x = _mix(base[:, None] + steps)
    return (x >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)
