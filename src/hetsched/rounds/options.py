"""The round engine's options, each declared once, validated once, as small frozen records.

* :class:`MechanismOptions`: what configures a :class:`~hetsched.rounds.PolicyScheduler`
  (when to re-solve, the round mechanism, the solver). The online scheduler takes it as it
  is; :class:`RoundOptions` and :class:`~hetsched.sim.SimOptions` embed it by inheritance.
* :class:`RoundOptions`: the mechanism options plus what the simulated-clock loop
  (:func:`~hetsched.rounds.loop.run_rounds`) needs: round length, measurement window, stop
  conditions, placement, restarts, the run log, the seed and the progress bar.

Each record checks its own fields in ``__post_init__``; ``replace(**changes)`` validates
again and names unknown fields.

>>> opts = RoundOptions(round_seconds=60.0, rule="deficit")
>>> opts.mechanism_options
MechanismOptions(mechanism='rounds', reallocate='on_change', rule='deficit', stickiness=0.0, work_conserving=True, \
reset_shares=True, solver='auto', solve_time_limit=None, solver_options=None, min_solve_interval=0.0, \
arrivals='carve', backfill=True)
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Self

import numpy as np

from ..errors import ValidationError
from ..mechanism.plan import MODES, RULES
from ..validation import (
    check_bool,
    check_choice,
    check_int,
    check_mapping,
    check_nonneg,
    check_positive,
    fail,
)

__all__ = ["ARRIVALS", "MechanismOptions", "RoundOptions", "progress_wanted", "window_mask"]

log = logging.getLogger(__name__)

#: What jobs that arrive between two solves get: a share carved from the allocation, or nothing.
ARRIVALS = ("carve", "wait")


@dataclass(frozen=True, kw_only=True)
class MechanismOptions:
    """The options of a :class:`~hetsched.rounds.PolicyScheduler`: when it re-solves, how
    the round mechanism turns the allocation into rows, and how it calls the solver.

    Parameters
    ----------
    mechanism : {"rounds", "ideal"}, default "rounds"
        "rounds": whole gangs on one type per round (Gavel's mechanism). "ideal": every job
        receives exactly its X each round (fluid; no placement).
    reallocate : "on_change" or float, default "on_change"
        Re-solve when the set of active jobs changed (arrival or completion), or every that
        many seconds (jobs arriving in between get a share carved from the current X,
        :func:`hetsched.mechanism.carve_shares`).
    rule : {"gavel", "deficit"}, default "gavel"
        Round mechanism priority rule (:func:`hetsched.mechanism.plan_round_arrays`).
    stickiness : float, default 0
        Bonus for keeping a job where it ran last round (same function).
    work_conserving : bool, default True
        Fill GPUs the allocation leaves idle (same function).
    reset_shares : bool, default True
        Forget received shares whenever a new allocation is computed (Gavel).
    solver : str, default "auto"
    solve_time_limit : float or None
    solver_options : Mapping or None
        Passed to :func:`hetsched.solve` as ``solver``, ``time_limit`` and ``options``.
    min_solve_interval : float, default 0
        With ``reallocate="on_change"``: a change of the active set triggers a solve only
        once this many seconds have passed since the last one (Gavel's
        ``minimum_time_between_allocation_resets``, 1,920 s); until then the change waits.
        The first solve, and a solve when no active job has a row (the cluster drained),
        happen at once.
    arrivals : {"carve", "wait"}, default "carve"
        Jobs that arrive between two solves: a share carved from the current allocation,
        or nothing until the next solve (Gavel).
    backfill : bool, default True
        Whether later, smaller jobs may run past one whose gang does not fit (False: the
        mechanism's walk stops there). Space-sharing rows always backfill.

    Raises
    ------
    ValidationError
        A field breaks its rule (the message names the field, the rule and the value).

    Examples
    --------
    >>> MechanismOptions(rule="deficit").replace(backfill=False).backfill
    False
    >>> MechanismOptions(arrivals="queue")
    Traceback (most recent call last):
    ...
    hetsched.errors.ValidationError: `arrivals` must be one of ['carve', 'wait']; got 'queue'.
    """

    #: What the record's fields are called in messages ("unknown mechanism option(s) ...").
    _what: ClassVar[str] = "mechanism option"

    mechanism: str = "rounds"
    reallocate: str | float = "on_change"
    rule: str = "gavel"
    stickiness: float = 0.0
    work_conserving: bool = True
    reset_shares: bool = True
    solver: str = "auto"
    solve_time_limit: float | None = None
    solver_options: Mapping[str, Any] | None = None
    min_solve_interval: float = 0.0
    arrivals: str = "carve"
    backfill: bool = True

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        check_choice(self.mechanism, "mechanism", MODES)
        check_choice(self.rule, "rule", RULES)
        if isinstance(self.reallocate, str):
            if self.reallocate != "on_change":
                raise fail("reallocate", "'on_change' or a positive number of seconds", self.reallocate)
        else:
            check_positive(self.reallocate, "reallocate", unit="seconds")
        set_(self, "solve_time_limit",
             check_positive(self.solve_time_limit, "solve_time_limit", unit="seconds", allow_none=True))
        check_nonneg(self.stickiness, "stickiness")
        check_mapping(self.solver_options, "solver_options", allow_none=True)
        for name in ("reset_shares", "work_conserving", "backfill"):
            set_(self, name, check_bool(getattr(self, name), name))
        set_(self, "min_solve_interval", check_nonneg(self.min_solve_interval, "min_solve_interval", unit="seconds"))
        check_choice(self.arrivals, "arrivals", ARRIVALS)

    @property
    def mechanism_options(self) -> MechanismOptions:
        """The :class:`MechanismOptions` part of this record (the record itself when it is one)."""
        if type(self) is MechanismOptions:
            return self
        return MechanismOptions(**{f.name: getattr(self, f.name) for f in dataclasses.fields(MechanismOptions)})

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` applied (validated again).

        Raises
        ------
        ValidationError
            A name that is not a field of this record, or a value that breaks its rule.
        """
        valid = sorted(f.name for f in dataclasses.fields(self))
        unknown = sorted(set(changes) - set(valid))
        if unknown:
            raise ValidationError(f"unknown {self._what}(s) {unknown}; valid: {valid}.")
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True, kw_only=True)
class RoundOptions(MechanismOptions):
    """:class:`MechanismOptions` plus the options of the simulated-clock round loop.

    Parameters
    ----------
    round_seconds : float, default 360
        Round length (Gavel: 360 s).
    placement : bool or None, default None
        Map each round onto servers and GPU ids (default: when the cluster has a topology);
        needs ``mechanism="rounds"``.
    window : (start, end) or None
        Measured jobs (:func:`window_mask`).
    window_unit : {"jobs", "seconds"}, default "jobs"
    stop_after_window : bool, default True
        With a window, stop once every measured job has finished.
    seed : int, default 0
        Seed of a generated workload; recorded in the result.
    progress : None, True, "auto" or callable
        Progress bar (tqdm; "auto" draws one where :func:`progress_wanted` says so) or a
        callable ``f(sim_time, n_completed, n_total)`` called every round.
    max_time, wall_time_limit : float or None
        Stop at this simulated time, or after this many wall-clock seconds.
    gpus_per_server : int, default 8
        Server size when ``placement=True`` and the cluster has no topology.
    record_runs : bool, default True
        Keep the run log.
    restart_seconds : float, default 0
        Seconds without progress after a job starts on GPUs it did not hold the round
        before; needs ``mechanism="rounds"``.
    mechanism, reallocate, rule, ... :
        As :class:`MechanismOptions`.

    Examples
    --------
    >>> RoundOptions(round_seconds=60.0).replace(restart_seconds=30.0).restart_seconds
    30.0
    """

    _what: ClassVar[str] = "round option"

    round_seconds: float = 360.0
    placement: bool | None = None
    window: tuple[float, float] | None = None
    window_unit: str = "jobs"
    stop_after_window: bool = True
    seed: int = 0
    progress: Any = None
    max_time: float | None = None
    wall_time_limit: float | None = None
    gpus_per_server: int = 8
    record_runs: bool = True
    restart_seconds: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        set_ = object.__setattr__
        set_(self, "round_seconds", check_positive(self.round_seconds, "round_seconds", unit="seconds"))
        for name in ("max_time", "wall_time_limit"):
            set_(self, name, check_positive(getattr(self, name), name, unit="seconds", allow_none=True))
        for name in ("stop_after_window", "record_runs"):
            set_(self, name, check_bool(getattr(self, name), name))
        if self.placement is not None:
            set_(self, "placement", check_bool(self.placement, "placement"))
            if self.placement and self.mechanism != "rounds":
                raise ValidationError(
                    "`placement=True` needs `mechanism='rounds'` (the ideal mechanism has no whole GPUs to place).")
        check_int(self.gpus_per_server, "gpus_per_server", low=1)
        set_(self, "restart_seconds", check_nonneg(self.restart_seconds, "restart_seconds", unit="seconds"))
        if self.restart_seconds > 0 and self.mechanism != "rounds":
            raise ValidationError("`restart_seconds` > 0 needs `mechanism='rounds'` (the ideal mechanism has no "
                                  "starts and stops to charge).")
        check_choice(self.window_unit, "window_unit", ("jobs", "seconds"))
        if self.window is not None:  # its shape and values now, not when a run starts
            window_mask(self.window, np.zeros(0), unit=self.window_unit)
        p = self.progress
        if not (p is None or isinstance(p, bool) or p == "auto" or callable(p)):
            raise fail("progress", "None, True, False, 'auto' or a callable", p)
        check_int(self.seed, "seed", low=0)

    def progress_hook(self, n_total: int) -> tuple[Callable[[float, int], None] | None, Callable[[], None]]:
        """``(hook(t, n_done), close())`` for the ``progress`` option."""
        progress = self.progress
        if progress is None or progress is False:
            return None, lambda: None
        if callable(progress):
            return (lambda t, done: progress(t, done, n_total)), (lambda: None)
        if progress is True or progress == "auto":
            if progress == "auto" and not progress_wanted():  # the CLI's rule: a terminal, not under CI
                return None, lambda: None
            try:
                from tqdm import tqdm
            except ImportError:
                log.info("progress bar requested but tqdm is not installed")
                return None, lambda: None
            bar = tqdm(total=n_total, unit="job", desc="simulate", leave=False)
            state = {"done": 0}

            def hook(t: float, done: int) -> None:
                if done > state["done"]:
                    bar.update(done - state["done"])
                    state["done"] = done
                bar.set_postfix_str(f"t={t / 3600:.1f}h", refresh=False)

            return hook, bar.close
        raise fail("progress", "None, True, False, 'auto' or a callable", progress)


def progress_wanted(flag: bool | None = None) -> bool:
    """Whether to draw progress bars: ``flag`` when given (``--progress`` /
    ``--no-progress``), else only on a terminal and not under CI -- stderr is a TTY and the
    environment variable ``CI`` is unset, empty, ``0`` or ``false``."""
    if flag is not None:
        return bool(flag)
    ci = os.environ.get("CI", "").strip().lower()
    if ci not in ("", "0", "false", "no"):
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stderr
        return False


def window_mask(window: Any, arrivals: np.ndarray, *, unit: str = "jobs") -> np.ndarray:
    """Boolean mask of the jobs a measurement window selects.

    Parameters
    ----------
    window : (start, end) or None
        ``unit="jobs"``: positions in arrival order, ``start <= i < end`` (Gavel's
        ``-s/-e`` job-id window). ``unit="seconds"``: arrival times, ``start <= a < end``.
        None selects every job.
    arrivals : ndarray
        Arrival times in order.
    unit : {"jobs", "seconds"}

    Raises
    ------
    ValidationError
        A malformed window or ``arrivals``, or a window that selects no job of a non-empty
        trace.
    """
    given = arrivals
    try:
        arrivals = np.asarray(given, dtype=float)
    except (TypeError, ValueError):
        raise ValidationError(f"`arrivals` must be a 1-d array of arrival times; got {type(given).__name__}.") from None
    if arrivals.ndim != 1:
        raise ValidationError(f"`arrivals` must be a 1-d array of arrival times; got {type(given).__name__} of "
                              f"shape {arrivals.shape}.")
    n = arrivals.shape[0]
    if window is None:
        return np.ones(n, dtype=bool)
    if unit not in ("jobs", "seconds"):
        raise ValidationError(f"`window_unit` must be 'jobs' or 'seconds'; got {unit!r}.")
    try:
        start, end = window
        start_f, end_f = float(start), float(end)
    except (TypeError, ValueError):
        raise ValidationError(f"`window` must be a pair (start, end); got {window!r}.") from None
    if not (math.isfinite(start_f) and start_f >= 0 and end_f > start_f):
        raise ValidationError(f"`window` must satisfy 0 <= start < end (end may be inf); got {window!r}.")
    if unit == "jobs":
        if start_f != int(start_f) or (math.isfinite(end_f) and end_f != int(end_f)):
            raise ValidationError(f"`window` in jobs must hold integer positions; got {window!r}.")
        pos = np.arange(n)
        mask = (pos >= start_f) & (pos < end_f)
        what = f"positions 0..{n - 1}"
    else:
        mask = (arrivals >= start_f) & (arrivals < end_f)
        what = (
            f"arrivals from {arrivals[0]:.6g} s to {arrivals[-1]:.6g} s" if n else "no arrivals"
        )
    if n and not mask.any():
        raise ValidationError(
            f"`window` {tuple(window)!r} ({unit}) selects no jobs: the trace has {n} jobs ({what})."
        )
    return mask
