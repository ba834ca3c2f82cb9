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
    # exact block-angular path for level / max-sum LPs at scale (docs/scaling.md); opt-in
    "structured": "hetsched.structured.backend:StructuredBackend",
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


#: Variables from which "auto" sends an LP to an interior-point method. Measured on
#: random max-min LPs (docs/benchmarks.md): at 3,000 variables HiGHS dual simplex took
#: 0.079 s, HiGHS IPX 0.042 s; at 12,000, 1.9 s vs 0.21 s; at 48,000 Clarabel (called
#: directly) took 0.54 s, IPX 1.20 s, PDLP 4.1 s. Below the threshold simplex wins and
#: returns a vertex.
AUTO_IPM_MIN_VARS = 2_000

#: Variables from which "auto" sends a program that carries its block-angular structure
#: (``lp.meta["structure"]``: level LPs) to the exact structured path (docs/scaling.md):
#: measured 0.97 s vs 15.0 s (Clarabel) for two-stage max-min at 20,000 jobs x 10 types.
#: It certifies its optimum or hands the program to the general choice below.
AUTO_STRUCTURED_MIN_VARS = 20_000


def choose_auto(lp: LinearProgram) -> tuple[str, dict[str, Any]]:
    """The backend and options ``solver="auto"`` uses for ``lp``.

    * integer programs: HiGHS branch-and-cut;
    * LPs with fewer than :data:`AUTO_IPM_MIN_VARS` variables: HiGHS dual simplex;
    * level LPs (max-min, makespan, FTF) and other programs marked block-angular
      (``meta["structure"]``, e.g. max-sum throughput) with at least
      :data:`AUTO_STRUCTURED_MIN_VARS` variables: the exact structured path
      (:mod:`hetsched.structured`), which hands a program it cannot certify to the choice below;
    * other larger LPs: Clarabel's interior point called directly (HiGHS IPX with crossover
      when Clarabel is not installed).
    """
    if lp.is_mip:
        return "highs", {}
    if lp.n_vars < AUTO_IPM_MIN_VARS:
        return "highs", {"solver": "simplex"}
    if lp.n_vars >= AUTO_STRUCTURED_MIN_VARS and "structure" in lp.meta:
        cls = _load("structured")
        if cls is not None and cls.available():
            return "structured", {}
    cls = _load("clarabel")
    if cls is not None and cls.available():
        return "clarabel", {}
    return "highs", {"solver": "ipm", "run_crossover": "on"}
