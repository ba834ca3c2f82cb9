"""SimOptions: the options of one simulation, validated once, as a small frozen record."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

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
from .provenance import progress_wanted

__all__ = ["SimOptions"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SimOptions:
    """Everything :func:`~hetsched.sim.simulate` takes besides the scheduler, workload and
    cluster (each is also a keyword of ``simulate``; see there for the meaning).

    Parameters
    ----------
    round_seconds : float, default 360
    mechanism : {"rounds", "ideal"}, default "rounds"
    placement : bool or None, default None
    reallocate : "on_change" or float, default "on_change"
    window : (start, end) or None
    window_unit : {"jobs", "seconds"}, default "jobs"
    stop_after_window : bool, default True
    seed : int, default 0
    progress : None, True, "auto" or callable
        "auto" draws a bar where the CLI would (:func:`~hetsched.sim.provenance.progress_wanted`:
        stderr is a terminal and ``CI`` is unset or false).
    max_time, wall_time_limit : float or None
    solver : str, default "auto"
    solve_time_limit : float or None
    solver_options : Mapping or None
    rule : {"gavel", "deficit"}, default "gavel"
    work_conserving : bool, default True
    stickiness : float, default 0
    reset_shares : bool, default True
    gpus_per_server : int, default 8
    record_runs : bool, default True
    restart_seconds : float, default 0
        Seconds without progress after a job starts on GPUs it did not hold the round
        before (first start, resume after preemption, migration, change of type or GPU
        count). 0 keeps Gavel's accounting.
    min_solve_interval : float, default 0
        With ``reallocate="on_change"``, a change re-solves only once this many seconds
        have passed since the last solve (see :class:`~hetsched.sim.PolicyScheduler`).
    arrivals : {"carve", "wait"}, default "carve"
        Jobs arriving between two solves get a carved share, or wait for the next solve.
    backfill : bool, default True
        Later, smaller jobs may run past one whose gang does not fit (False: the mechanism's
        walk stops there).
    learn_throughputs : bool, default False
        Hide the throughputs from the scheduler: it runs inside an
        :class:`~hetsched.OnlineScheduler` that learns them from per-round reports
        (:func:`hetsched.online.simulate_online`); progress still follows the true ones.
    report_noise : float, default 0
        With ``learn_throughputs``: reported steps are the true ones times
        ``exp(report_noise * Z)``, Z standard normal (seeded by ``seed``).
    throughput_reference : ThroughputCatalogue or None
        With ``learn_throughputs``: profiled job types the estimator completes against.

    Examples
    --------
    >>> SimOptions(round_seconds=60.0).replace(restart_seconds=30.0).restart_seconds
    30.0
    """

    round_seconds: float = 360.0
    mechanism: str = "rounds"
    placement: bool | None = None
    reallocate: str | float = "on_change"
    window: tuple[float, float] | None = None
    window_unit: str = "jobs"
    stop_after_window: bool = True
    seed: int = 0
    progress: Any = None
    max_time: float | None = None
    wall_time_limit: float | None = None
    solver: str = "auto"
    solve_time_limit: float | None = None
    solver_options: Mapping[str, Any] | None = None
    rule: str = "gavel"
    work_conserving: bool = True
    stickiness: float = 0.0
    reset_shares: bool = True
    gpus_per_server: int = 8
    record_runs: bool = True
    restart_seconds: float = 0.0
    min_solve_interval: float = 0.0
    arrivals: str = "carve"
    backfill: bool = True
    learn_throughputs: bool = False
    report_noise: float = 0.0
    throughput_reference: Any = None

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> SimOptions:
        """Options of a named preset, with ``overrides`` applied on top.

        ``"gavel"``: Gavel's simulator (``scheduler/scheduler.py``, ``Scheduler``): 360 s
        rounds (``time_per_iteration``); the allocation is recomputed at a round boundary
        when jobs arrived or finished, but at most once per 1,920 s
        (``minimum_time_between_allocation_resets``, in ``_update_priorities``); a job that
        arrives in between gets priority 0 and waits for that recompute, even with GPUs
        idle (``_add_to_priorities``, ``_schedule_jobs_on_workers``); received time is reset
        for every job at each recompute (``_reset_time_run_so_far``); Gavel's priority
        rule, walked greedily with backfill (``_schedule_jobs_on_workers_helper``).
        ``"hetsched"``: the defaults.

        Examples
        --------
        >>> o = SimOptions.preset("gavel", round_seconds=120.0)
        >>> o.min_solve_interval, o.arrivals, o.round_seconds
        (1920.0, 'wait', 120.0)
        """
        presets: dict[str, dict[str, Any]] = {
            "hetsched": {},
            "gavel": {"round_seconds": 360.0, "reallocate": "on_change", "min_solve_interval": 1920.0,
                      "arrivals": "wait", "reset_shares": True, "rule": "gavel", "work_conserving": True,
                      "backfill": True},
        }
        check_choice(name, "preset", sorted(presets))
        return cls().replace(**{**presets[name], **overrides})

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "round_seconds", check_positive(self.round_seconds, "round_seconds", unit="seconds"))
        check_choice(self.mechanism, "mechanism", MODES)
        check_choice(self.rule, "rule", RULES)
        if isinstance(self.reallocate, str):
            if self.reallocate != "on_change":
                raise fail("reallocate", "'on_change' or a positive number of seconds", self.reallocate)
        else:
            check_positive(self.reallocate, "reallocate", unit="seconds")
        for name in ("max_time", "wall_time_limit", "solve_time_limit"):
            set_(self, name, check_positive(getattr(self, name), name, unit="seconds", allow_none=True))
        check_nonneg(self.stickiness, "stickiness")
        check_mapping(self.solver_options, "solver_options", allow_none=True)
        for name in ("stop_after_window", "reset_shares", "record_runs", "work_conserving", "backfill"):
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
        set_(self, "min_solve_interval", check_nonneg(self.min_solve_interval, "min_solve_interval", unit="seconds"))
        check_choice(self.arrivals, "arrivals", ("carve", "wait"))
        check_choice(self.window_unit, "window_unit", ("jobs", "seconds"))
        if self.window is not None:  # its shape and values now, not when a run starts
            from .metrics import window_mask

            window_mask(self.window, np.zeros(0), unit=self.window_unit)
        p = self.progress
        if not (p is None or isinstance(p, bool) or p == "auto" or callable(p)):
            raise fail("progress", "None, True, False, 'auto' or a callable", p)
        check_int(self.seed, "seed", low=0)
        set_(self, "learn_throughputs", check_bool(self.learn_throughputs, "learn_throughputs"))
        set_(self, "report_noise", check_nonneg(self.report_noise, "report_noise"))
        if (self.report_noise > 0 or self.throughput_reference is not None) and not self.learn_throughputs:
            raise ValidationError("`report_noise` and `throughput_reference` apply with `learn_throughputs=True` only.")
        if self.learn_throughputs and self.mechanism != "rounds":
            raise ValidationError("`learn_throughputs=True` needs `mechanism='rounds'` (an online scheduler runs "
                                  "whole GPUs per round).")
        if self.throughput_reference is not None:
            from ..inputs.throughputs import ThroughputCatalogue

            if not isinstance(self.throughput_reference, ThroughputCatalogue):
                raise ValidationError(f"`throughput_reference` must be a hetsched.ThroughputCatalogue or None; got "
                                      f"{type(self.throughput_reference).__name__}.")

    def replace(self, **changes: Any) -> SimOptions:
        """A copy with ``changes`` applied (validated again)."""
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise ValidationError(f"unknown simulation option(s) {unknown}; valid: "
                                  f"{sorted(f.name for f in dataclasses.fields(self))}.")
        return dataclasses.replace(self, **changes)

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
