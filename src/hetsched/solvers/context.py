"""SolveContext: runs the programs a policy formulates, with one solver choice, one time
budget and one set of counters (programs solved, build and solve seconds, sizes)."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..errors import CapabilityError, SolverError
from ..validation import check_mapping, check_positive
from .base import Capabilities, SolverOutput
from .fallback import EXACT_BACKEND, exact_options, fallback_reason
from .highs_session import HighsSession
from .program import LinearProgram
from .registry import available_solvers, choose_auto, get_backend

__all__ = ["SolveContext"]

log = logging.getLogger(__name__)


class SolveContext:
    """Execution context handed to :meth:`Policy.solve`.

    Parameters
    ----------
    solver : str
        "auto" or a backend name (see :func:`hetsched.available_solvers`).
    time_limit : float, optional
        Wall-clock budget in seconds for *all* programs of this solve.
    options : Mapping, optional
        Backend options, passed through unchanged (for "auto", to the backend it picks).
    """

    def __init__(
        self,
        solver: str = "auto",
        time_limit: float | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        time_limit = check_positive(time_limit, "time_limit", unit="seconds", allow_none=True)
        check_mapping(options, "options", allow_none=True)
        self.solver = solver
        if solver != "auto":
            get_backend(solver)  # raises UnknownSolverError with the list of installed ones
        self.time_limit = time_limit
        self.options = dict(options or {})
        self._start = time.perf_counter()
        self.n_programs = 0
        self.solve_s = 0.0
        self.build_s = 0.0
        self.max_vars = 0
        self.max_rows = 0
        self.backends_used: list[str] = []
        self.last_mip_gap: float | None = None
        #: "program: reason" for every program re-solved by the exact fallback
        self.fallbacks: list[str] = []

    def remaining(self) -> float | None:
        """Seconds left of the time budget (None when unlimited)."""
        if self.time_limit is None:
            return None
        return self.time_limit - (time.perf_counter() - self._start)

    @contextmanager
    def building(self) -> Iterator[None]:
        """Context manager that adds its wall time to ``build_s``."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.build_s += time.perf_counter() - t0

    def _not_started(self, lp: LinearProgram, backend: str) -> SolverOutput:
        """The output for a program the exhausted time budget left no time to start."""
        return SolverOutput(
            status="time_limit", x=np.full(lp.n_vars, np.nan), objective=float("nan"),
            has_solution=False, native_status="not started",
            message=f"time limit of {self.time_limit}s reached before program {lp.name!r}",
            solve_s=0.0, backend=backend,
        )

    def choose(self, lp: LinearProgram, *, require: tuple[str, ...] = ()) -> tuple[str, dict[str, Any]]:
        """The backend and options this context uses for ``lp``: :func:`choose_auto` among
        backends with the capability flags ``require`` for "auto", else the context's backend
        (no options).

        Raises
        ------
        CapabilityError
            The context's backend lacks a flag of ``require``, or cannot solve integer
            programs and ``lp`` is one.
        """
        if self.solver == "auto":
            return choose_auto(lp, require=require)
        caps = get_backend(self.solver).capabilities
        missing = [flag for flag in require if not caps.has((flag,))]
        if missing:
            raise CapabilityError(f"`solver` {self.solver!r} lacks the capabilities {missing} that program "
                                  f"{lp.name!r} needs; backends that have them: {_having(tuple(require))}.")
        if lp.is_mip and not caps.mip:
            raise CapabilityError(
                f"`solver` {self.solver!r} cannot solve integer programs ({lp.name}); use one of {_having(('mip',))}."
            )
        return self.solver, {}

    def capabilities(self, lp: LinearProgram) -> Capabilities:
        """The capabilities of the backend :meth:`choose` picks for ``lp``."""
        return get_backend(self.choose(lp)[0]).capabilities

    @property
    def warm_start(self) -> bool:
        """Whether :meth:`open_session` works here: solver "auto" (whose choice includes a
        backend with the ``warm_start`` capability) or a backend that has it."""
        return self.solver == "auto" or get_backend(self.solver).capabilities.warm_start

    def open_session(self, lp: LinearProgram, *, purpose: str) -> HighsSession:
        """Load ``lp`` into a warm-startable session (for sequences of related LPs).

        Raises
        ------
        CapabilityError
            When the context's solver is neither "auto" nor a backend with the
            ``warm_start`` capability.
        """
        if not self.warm_start:
            raise CapabilityError(
                f"{purpose} re-solves one LP many times with warm starts, which needs `solver` 'auto' "
                f"or a backend with that capability {_having(('warm_start',))}; got {self.solver!r}."
            )
        name = self.choose(lp, require=("warm_start",))[0]
        with self.building():
            session = HighsSession(lp, self.options)
        self.max_vars = max(self.max_vars, lp.n_vars)
        self.max_rows = max(self.max_rows, lp.n_rows)
        if name not in self.backends_used:
            self.backends_used.append(name)
        return session

    def rerun(self, session: HighsSession, *, options: Mapping[str, Any] | None = None) -> SolverOutput:
        """Solve ``session`` from its current basis, within the remaining time budget."""
        remaining = self.remaining()
        if remaining is not None and remaining <= 0:
            return self._not_started(session.lp, self.choose(session.lp, require=("warm_start",))[0])
        merged = {**dict(options or {}), **self.options}
        out = session.run(time_limit=remaining, options=merged)
        self.n_programs += 1
        self.solve_s += out.solve_s
        return out

    def run(self, lp: LinearProgram, *, options: Mapping[str, Any] | None = None) -> SolverOutput:
        """Solve one program with the chosen backend and record counters.

        ``options`` are per-program overrides a policy may pass (e.g. a MIP gap it owns);
        user options given to the context take precedence.
        """
        name, auto_opts = self.choose(lp)
        backend = get_backend(name)
        merged = {**auto_opts, **dict(options or {}), **self.options}
        remaining = self.remaining()
        reason = None
        if remaining is not None and remaining <= 0:
            out = self._not_started(lp, name)
        else:
            try:
                out = backend.solve(lp, time_limit=remaining, options=merged)
            except SolverError as exc:
                if name == EXACT_BACKEND:
                    raise
                out, reason = None, f"{name} failed ({exc})"
            else:
                reason = fallback_reason(lp, out, user_options=bool(self.options))
        if out is not None:
            self._count(lp, name, out)
        if reason is not None:
            out = self._run_exact(lp, reason)
        if out.mip_gap is not None:
            self.last_mip_gap = out.mip_gap
        log.debug("program %s via %s: %s (%.3fs)", lp.name, out.backend, out.status, out.solve_s)
        return out

    def _count(self, lp: LinearProgram, name: str, out: SolverOutput) -> None:
        self.n_programs += 1
        self.solve_s += out.solve_s
        self.max_vars = max(self.max_vars, lp.n_vars)
        self.max_rows = max(self.max_rows, lp.n_rows)
        if name not in self.backends_used:
            self.backends_used.append(name)

    def _run_exact(self, lp: LinearProgram, reason: str) -> SolverOutput:
        """Re-solve ``lp`` with the exact fallback (:mod:`hetsched.solvers.fallback`), without
        the user's backend options; the message and ``info["fallback"]`` say why."""
        log.info("program %s: %s; re-solving with %s", lp.name, reason, EXACT_BACKEND)
        self.fallbacks.append(f"{lp.name}: {reason}")
        remaining = self.remaining()
        if remaining is not None and remaining <= 0:
            out = self._not_started(lp, EXACT_BACKEND)
        else:
            out = get_backend(EXACT_BACKEND).solve(lp, time_limit=remaining, options=exact_options(lp))
        self._count(lp, EXACT_BACKEND, out)
        return dataclasses.replace(out, message=f"{out.message} (exact fallback: {reason})",
                                   info={**out.info, "fallback": reason})

    @contextmanager
    def exact(self) -> Iterator[None]:
        """Run the programs of the block with the exact fallback backend, without the user's
        backend options (for a strategy that failed as a whole, e.g. a level loop)."""
        saved = self.solver, self.options
        self.solver, self.options = EXACT_BACKEND, {}
        try:
            yield
        finally:
            self.solver, self.options = saved


def _having(flags: tuple[str, ...]) -> list[str]:
    """Installed backends with every capability flag in ``flags``."""
    return [name for name in available_solvers() if get_backend(name).capabilities.has(flags)]
