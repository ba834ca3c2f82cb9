"""SolveContext: runs the programs a policy formulates, with one solver choice, one time
budget and one set of counters (programs solved, build and solve seconds, sizes)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np

from .errors import CapabilityError, ValidationError
from .program import LinearProgram
from .solvers.base import SolverOutput
from .solvers.highs_session import HighsSession
from .solvers.registry import choose_auto, get_backend

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
        if time_limit is not None:
            try:
                tl = float(time_limit)
            except (TypeError, ValueError):
                raise ValidationError(f"`time_limit` must be a positive number of seconds; got {time_limit!r}.") from None
            if not np.isfinite(tl) or tl <= 0:
                raise ValidationError(f"`time_limit` must be a positive number of seconds; got {time_limit!r}.")
            time_limit = tl
        if options is not None and not isinstance(options, Mapping):
            raise ValidationError(f"`options` must be a mapping; got {type(options).__name__}.")
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

    def open_session(self, lp: LinearProgram, *, purpose: str) -> HighsSession:
        """Load ``lp`` into a warm-startable HiGHS session (for sequences of related LPs).

        Raises
        ------
        CapabilityError
            When the context's solver is neither "auto" nor "highs".
        """
        if self.solver not in ("auto", "highs"):
            raise CapabilityError(
                f"{purpose} re-solves one LP many times with warm starts, which needs `solver` 'auto' "
                f"or 'highs'; got {self.solver!r}."
            )
        with self.building():
            session = HighsSession(lp, self.options)
        self.max_vars = max(self.max_vars, lp.n_vars)
        self.max_rows = max(self.max_rows, lp.n_rows)
        if "highs" not in self.backends_used:
            self.backends_used.append("highs")
        return session

    def rerun(self, session: HighsSession, *, options: Mapping[str, Any] | None = None) -> SolverOutput:
        """Solve ``session`` from its current basis, within the remaining time budget."""
        remaining = self.remaining()
        if remaining is not None and remaining <= 0:
            return self._not_started(session.lp, "highs")
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
        if self.solver == "auto":
            name, auto_opts = choose_auto(lp)
        else:
            name, auto_opts = self.solver, {}
        backend = get_backend(name)
        if lp.is_mip and not backend.supports_mip:
            raise CapabilityError(
                f"`solver` {name!r} cannot solve integer programs ({lp.name}); use 'highs' or 'pulp'."
            )
        merged = {**auto_opts, **dict(options or {}), **self.options}
        remaining = self.remaining()
        if remaining is not None and remaining <= 0:
            out = self._not_started(lp, name)
        else:
            out = backend.solve(lp, time_limit=remaining, options=merged)
        self.n_programs += 1
        self.solve_s += out.solve_s
        self.max_vars = max(self.max_vars, lp.n_vars)
        self.max_rows = max(self.max_rows, lp.n_rows)
        if name not in self.backends_used:
            self.backends_used.append(name)
        if out.mip_gap is not None:
            self.last_mip_gap = out.mip_gap
        log.debug("program %s via %s: %s (%.3fs)", lp.name, name, out.status, out.solve_s)
        return out
