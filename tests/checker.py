"""Independent feasibility checker for allocations.

It knows nothing about how ``X`` was computed: it only checks the base constraints of the
spec against the raw inputs.

* ``X`` has the shape of ``T`` and is finite;
* ``X >= -tol``;
* every row sums to at most ``1 + tol``;
* capacity: ``sum_j s_j X[j, k] <= C_k + tol * max(1, C_k)`` for every type ``k``;
* ``|X[j, k]| <= tol`` wherever ``T[j, k] == 0`` or ``C_k < s_j`` (the job cannot run there).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["check_allocation", "assert_feasible"]


def check_allocation(
    X: np.ndarray | Sequence,
    T: np.ndarray | Sequence,
    scale_factors: np.ndarray | Sequence,
    capacities: np.ndarray | Sequence,
    tol: float = 1e-6,
) -> list[str]:
    """Return the list of violated base constraints (empty when ``X`` is feasible)."""
    X = np.asarray(X, dtype=float)
    T = np.asarray(T, dtype=float)
    s = np.asarray(scale_factors, dtype=float).reshape(-1)
    C = np.asarray(capacities, dtype=float).reshape(-1)
    problems: list[str] = []
    if T.ndim != 2:
        return [f"T must be 2-D; got shape {T.shape}"]
    n, m = T.shape
    if X.shape != (n, m):
        return [f"X has shape {X.shape}, expected {(n, m)}"]
    if s.shape != (n,):
        return [f"scale_factors has shape {s.shape}, expected {(n,)}"]
    if C.shape != (m,):
        return [f"capacities has shape {C.shape}, expected {(m,)}"]
    if n == 0:
        return problems

    finite = np.isfinite(X)
    if not finite.all():
        bad = np.argwhere(~finite)
        problems.append(f"X not finite at {len(bad)} entries, e.g. {tuple(int(i) for i in bad[0])}")
        return problems  # everything below would be meaningless

    neg = X < -tol
    if neg.any():
        j, k = np.argwhere(neg)[0]
        problems.append(
            f"X negative at {int(neg.sum())} entries, e.g. X[{j},{k}] = {X[j, k]!r}"
        )

    rows = X.sum(axis=1)
    over = rows > 1 + tol
    for j in np.flatnonzero(over):
        problems.append(f"row {j} sums to {rows[j]!r} > 1")

    used = s @ X
    cap_over = used > C + tol * np.maximum(1.0, C)
    for k in np.flatnonzero(cap_over):
        problems.append(f"type {k}: sum_j s_j X[j,{k}] = {used[k]!r} > capacity {C[k]!r}")

    forbidden = (T <= 0) | (C[None, :] < s[:, None])
    leak = forbidden & (np.abs(X) > tol)
    for j, k in np.argwhere(leak):
        why = "T == 0" if T[j, k] <= 0 else f"C_k = {C[k]:g} < s_j = {s[j]:g}"
        problems.append(f"X[{j},{k}] = {X[j, k]!r} but the job cannot run there ({why})")
    return problems


def assert_feasible(
    X: np.ndarray | Sequence,
    T: np.ndarray | Sequence,
    scale_factors: np.ndarray | Sequence,
    capacities: np.ndarray | Sequence,
    tol: float = 1e-6,
    context: str = "",
) -> None:
    """Raise ``AssertionError`` listing every violation found by :func:`check_allocation`."""
    problems = check_allocation(X, T, scale_factors, capacities, tol=tol)
    if problems:
        head = f"infeasible allocation{(' (' + context + ')') if context else ''}:"
        raise AssertionError("\n  ".join([head, *problems]))
