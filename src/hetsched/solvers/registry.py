"""Registry of solver backends and the one per-shape choice behind ``solver="auto"``.

Backends register themselves where they are defined (``@register_backend`` on the class);
:mod:`hetsched.solvers` imports the built-in ones, so every built-in name is known once
``hetsched`` is imported. The registry imports no backend: a backend module imports it, not
the other way round (no import circle, no import by string). A backend's package (cvxpy,
PuLP, Clarabel) is imported only when the backend runs or :meth:`Backend.available` is asked.

What a backend can do is data on the class (:class:`~hetsched.solvers.base.Capabilities`);
code asks :func:`capabilities` or ``choose_auto(lp, require=...)``, not names.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..errors import CapabilityError, UnknownSolverError
from .base import Backend, Capabilities
from .program import LinearProgram

__all__ = [
    "AUTO_IPM_MIN_VARS",
    "AUTO_STRUCTURED_MIN_VARS",
    "available_solvers",
    "capabilities",
    "choose_auto",
    "get_backend",
    "highs_options",
    "register_backend",
    "registered_solvers",
]

_REGISTRY: dict[str, type[Backend]] = {}


def register_backend(cls: type[Backend]) -> type[Backend]:
    """Register a :class:`Backend` subclass under ``cls.name`` (usable as a decorator)."""
    if not cls.name:
        raise ValueError("a backend class needs a non-empty `name`")
    if not isinstance(cls.capabilities, Capabilities):
        raise ValueError(f"backend {cls.name!r}: `capabilities` must be a hetsched.solvers.Capabilities")
    _REGISTRY[cls.name] = cls
    return cls


def _installed(name: str) -> type[Backend] | None:
    cls = _REGISTRY.get(name)
    return cls if cls is not None and cls.available() else None


def registered_solvers() -> list[str]:
    """Every backend name hetsched knows, installed or not."""
    return sorted(_REGISTRY)


def available_solvers() -> list[str]:
    """Backend names whose solver package is installed here."""
    return [name for name in registered_solvers() if _installed(name) is not None]


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
    cls = _installed(name)
    if cls is None:
        raise UnknownSolverError(
            f"`solver` {name!r} is not an installed backend; choose one of "
            f"{['auto', *available_solvers()]}."
        )
    return cls()


def capabilities(name: str) -> Capabilities:
    """The :class:`~hetsched.solvers.base.Capabilities` of registered backend ``name``
    (installed or not).

    Raises
    ------
    UnknownSolverError
        If no backend of that name is registered.
    """
    cls = _REGISTRY.get(name) if isinstance(name, str) else None
    if cls is None:
        raise UnknownSolverError(f"`solver` {name!r} is not a registered backend; choose one of {registered_solvers()}.")
    return cls.capabilities


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


def highs_options(lp: LinearProgram) -> dict[str, Any]:
    """HiGHS' algorithm for ``lp``: branch-and-cut for integer programs, dual simplex below
    :data:`AUTO_IPM_MIN_VARS` variables, IPX with crossover (a vertex) above."""
    if lp.is_mip:
        return {}
    if lp.n_vars < AUTO_IPM_MIN_VARS:
        return {"solver": "simplex"}
    return {"solver": "ipm", "run_crossover": "on"}


def _auto_candidates(lp: LinearProgram) -> list[tuple[str, dict[str, Any]]]:
    """The backends "auto" would use for ``lp``, best first (the measured choice)."""
    if lp.is_mip or lp.n_vars < AUTO_IPM_MIN_VARS:
        return [("highs", highs_options(lp))]
    out: list[tuple[str, dict[str, Any]]] = []
    if lp.n_vars >= AUTO_STRUCTURED_MIN_VARS and "structure" in lp.meta:
        out.append(("structured", {}))
    out += [("clarabel", {}), ("highs", highs_options(lp))]
    return out


def choose_auto(lp: LinearProgram, *, require: Iterable[str] = ()) -> tuple[str, dict[str, Any]]:
    """The backend and options ``solver="auto"`` uses for ``lp``.

    * integer programs: HiGHS branch-and-cut;
    * LPs with fewer than :data:`AUTO_IPM_MIN_VARS` variables: HiGHS dual simplex;
    * level LPs (max-min, makespan, FTF) and other programs marked block-angular
      (``meta["structure"]``, e.g. max-sum throughput) with at least
      :data:`AUTO_STRUCTURED_MIN_VARS` variables: the exact structured path
      (:mod:`hetsched.solvers.structured`), which hands a program it cannot certify to the choice below;
    * other larger LPs: Clarabel's interior point called directly (HiGHS IPX with crossover
      when Clarabel is not installed).

    Parameters
    ----------
    lp : LinearProgram
    require : iterable of str
        Capability flags (:class:`~hetsched.solvers.base.Capabilities`) the backend must
        have: candidates without them are skipped, e.g. ``("general",)`` for the structured
        path's own fallback, ``("warm_start",)`` for a program re-solved in place.

    Raises
    ------
    CapabilityError
        No installed backend of the choice has the required capabilities.
    """
    need = tuple(require)
    Capabilities().has(need)  # unknown flag names raise ValidationError
    for name, options in _auto_candidates(lp):
        cls = _installed(name)
        if cls is not None and cls.capabilities.has(need) and (cls.capabilities.mip or not lp.is_mip):
            return name, options
    raise CapabilityError(
        f"`solver` 'auto' found no installed backend with capabilities {list(need)} for program {lp.name!r}; "
        f"installed: {available_solvers()}."
    )
