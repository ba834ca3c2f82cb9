"""Registry of solver backends and the per-shape choice behind ``solver="auto"``."""

from __future__ import annotations

import importlib
from typing import Any

from ..errors import UnknownSolverError
from ..program import LinearProgram
from .base import Backend

__all__ = ["register_backend", "get_backend", "available_solvers", "registered_solvers", "choose_auto"]

_REGISTRY: dict[str, type[Backend]] = {}
# Backends that live in their own module, imported on first use so that importing
# hetsched does not import cvxpy or PuLP.
_LAZY: dict[str, str] = {
    "highs": "hetsched.solvers.highs:HighsBackend",
    "clarabel": "hetsched.solvers.clarabel_backend:ClarabelBackend",
    "cvxpy": "hetsched.solvers.cvxpy_backend:CvxpyBackend",
    "pulp": "hetsched.solvers.pulp_backend:PulpBackend",
}


def register_backend(cls: type[Backend]) -> type[Backend]:
    """Register a :class:`Backend` subclass under ``cls.name`` (usable as a decorator)."""
    if not cls.name:
        raise ValueError("a backend class needs a non-empty `name`")
    _REGISTRY[cls.name] = cls
    return cls


def _load(name: str) -> type[Backend] | None:
    if name in _REGISTRY:
        return _REGISTRY[name]
    target = _LAZY.get(name)
    if target is None:
        return None
    module, attr = target.split(":")
    try:
        cls = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError):
        return None
    _REGISTRY[name] = cls
    return cls


def registered_solvers() -> list[str]:
    """Every backend name hetsched knows, installed or not."""
    return sorted(set(_REGISTRY) | set(_LAZY))


def available_solvers() -> list[str]:
    """Backend names whose solver package is installed here."""
    out = []
    for name in registered_solvers():
        cls = _load(name)
        if cls is not None and cls.available():
            out.append(name)
    return out


def get_backend(name: str) -> Backend:
    """An instance of backend ``name``.

    Raises
    ------
    UnknownSolverError
        If the name is unknown or its package is not installed; the message lists the
        installed ones.
    """
    if not isinstance(name, str):
        raise UnknownSolverError(f"`solver` must be a string; got {name!r}.")
    cls = _load(name)
    if cls is None or not cls.available():
        raise UnknownSolverError(
            f"`solver` {name!r} is not an installed backend; choose one of "
            f"{['auto', *available_solvers()]}."
        )
    return cls()


#: Variables above which "auto" sends an LP to HiGHS' interior point (IPX) instead of
#: dual simplex. Max-min LPs are very degenerate: see docs/benchmarks.md for the
#: measurements behind this threshold.
AUTO_IPM_MIN_VARS = 20_000


def choose_auto(lp: LinearProgram) -> tuple[str, dict[str, Any]]:
    """The backend and options ``solver="auto"`` uses for ``lp``.

    Integer programs go to HiGHS branch-and-cut. LPs go to HiGHS dual simplex when small
    (exact vertex solutions, fast warm starts) and to HiGHS IPX with crossover when large.
    """
    if lp.is_mip:
        return "highs", {}
    if lp.n_vars >= AUTO_IPM_MIN_VARS:
        return "highs", {"solver": "ipm", "run_crossover": "on"}
    return "highs", {"solver": "simplex"}
