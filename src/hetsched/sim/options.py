"""SimOptions: the options of one simulation, validated once, as a small frozen record.

:class:`SimOptions` is the round engine's :class:`~hetsched.rounds.RoundOptions` (which is
a :class:`~hetsched.rounds.MechanismOptions`) plus what only the simulator does: hide the
throughputs from the scheduler and reveal them through reports. :func:`make_options` builds
one from a preset and changes (what :func:`~hetsched.sim.simulate` does with ``preset=``).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ..errors import ValidationError
from ..rounds.options import RoundOptions
from ..validation import check_bool, check_choice, check_nonneg

__all__ = ["PRESETS", "SimOptions", "make_options"]

#: Named settings (:meth:`SimOptions.preset`): field -> value over the defaults.
PRESETS: dict[str, dict[str, Any]] = {
    "hetsched": {},
    "gavel": {"round_seconds": 360.0, "reallocate": "on_change", "min_solve_interval": 1920.0,
              "arrivals": "wait", "reset_shares": True, "rule": "gavel", "work_conserving": True,
              "backfill": True},
}


@dataclass(frozen=True, kw_only=True)
class SimOptions(RoundOptions):
    """Everything :func:`~hetsched.sim.simulate` takes besides the scheduler, workload and
    cluster.

    The fields of :class:`~hetsched.rounds.MechanismOptions` (``mechanism``, ``reallocate``,
    ``rule``, ``stickiness``, ``work_conserving``, ``reset_shares``, ``solver``,
    ``solve_time_limit``, ``solver_options``, ``min_solve_interval``, ``arrivals``,
    ``backfill``) and of :class:`~hetsched.rounds.RoundOptions` (``round_seconds``,
    ``placement``, ``window``, ``window_unit``, ``stop_after_window``, ``seed``,
    ``progress``, ``max_time``, ``wall_time_limit``, ``gpus_per_server``, ``record_runs``,
    ``restart_seconds``; see there for each), plus:

    Parameters
    ----------
    learn_throughputs : bool, default False
        Hide the throughputs from the scheduler: it runs inside an
        :class:`~hetsched.OnlineScheduler` that learns them from per-round reports
        (:func:`hetsched.sim.replay.simulate_online`); progress still follows the true ones.
    report_noise : float, default 0
        With ``learn_throughputs``: reported steps are the true ones times
        ``exp(report_noise * Z)``, Z standard normal (seeded by ``seed``).
    throughput_reference : ThroughputCatalogue or None
        With ``learn_throughputs``: profiled job types the estimator completes against.
    network : NetworkAware or None
        GPU interconnect graphs, uplinks and per-job communication
        (:class:`hetsched.placement.NetworkAware`, ``docs/interconnect.md``): placement
        chooses GPUs inside servers and keeps communication-heavy gangs whole, and each placed
        job runs at the bandwidth its GPUs and links give it. Needs placement; not with
        ``learn_throughputs`` (yet).

    ``opts.mechanism_options`` is the :class:`~hetsched.rounds.MechanismOptions` part (what
    a :class:`~hetsched.rounds.PolicyScheduler` or an online scheduler takes).

    Raises
    ------
    ValidationError
        A field breaks its rule, or ``report_noise`` / ``throughput_reference`` without
        ``learn_throughputs``.

    Examples
    --------
    >>> SimOptions(round_seconds=60.0).replace(restart_seconds=30.0).restart_seconds
    30.0
    >>> SimOptions(rule="deficit").mechanism_options.rule
    'deficit'
    """

    _what: ClassVar[str] = "simulation option"

    learn_throughputs: bool = False
    report_noise: float = 0.0
    throughput_reference: Any = None
    network: Any = None

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
        check_choice(name, "preset", sorted(PRESETS))
        return cls().replace(**{**PRESETS[name], **overrides})

    def __post_init__(self) -> None:
        super().__post_init__()
        set_ = object.__setattr__
        set_(self, "learn_throughputs", check_bool(self.learn_throughputs, "learn_throughputs"))
        set_(self, "report_noise", check_nonneg(self.report_noise, "report_noise"))
        if (self.report_noise > 0 or self.throughput_reference is not None) and not self.learn_throughputs:
            raise ValidationError("`report_noise` and `throughput_reference` apply with `learn_throughputs=True` only.")
        if self.learn_throughputs and self.mechanism != "rounds":
            raise ValidationError("`learn_throughputs=True` needs `mechanism='rounds'` (an online scheduler runs "
                                  "whole GPUs per round).")
        if self.network is not None:
            from ..placement.network_aware import NetworkAware

            if not isinstance(self.network, NetworkAware):
                raise ValidationError(f"`network` must be a hetsched.placement.NetworkAware or None; got "
                                      f"{type(self.network).__name__}.")
            if self.placement is False or self.mechanism != "rounds" or self.learn_throughputs:
                raise ValidationError("`network` needs placement (`mechanism='rounds'`, `placement` not False) and "
                                      "does not run with `learn_throughputs=True` yet.")
        if self.throughput_reference is not None:
            from ..inputs.throughputs import ThroughputCatalogue

            if not isinstance(self.throughput_reference, ThroughputCatalogue):
                raise ValidationError(f"`throughput_reference` must be a hetsched.ThroughputCatalogue or None; got "
                                      f"{type(self.throughput_reference).__name__}.")


def make_options(options: SimOptions | None = None, *, preset: str | None = None, **changes: Any) -> SimOptions:
    """One :class:`SimOptions` from a record or a preset, with ``changes`` on top.

    Parameters
    ----------
    options : SimOptions, optional
        The record to start from (default: the defaults).
    preset : {"gavel", "hetsched"}, optional
        Start from :meth:`SimOptions.preset` instead (not with ``options``).
    **changes
        Fields to set (:meth:`~hetsched.rounds.MechanismOptions.replace`).

    Raises
    ------
    ValidationError
        ``options`` is not a SimOptions; both ``options`` and ``preset``; an unknown field or
        a value that breaks its rule.

    Examples
    --------
    >>> make_options(preset="gavel", seed=3).min_solve_interval
    1920.0
    """
    if preset is not None and options is not None:
        raise ValidationError("give `preset` or `options`, not both (use SimOptions.preset(name, ...) for both).")
    if preset is not None:
        return SimOptions.preset(preset, **changes)
    if options is None:
        options = SimOptions()
    elif not isinstance(options, SimOptions):
        raise ValidationError(f"`options` must be a hetsched.sim.SimOptions or None; got {type(options).__name__}.")
    return options.replace(**changes) if changes else options


def call_options(func: str, options: SimOptions | None, preset: str | None, keywords: Mapping[str, Any]) -> SimOptions:
    """The options of a call of ``func`` (:func:`~hetsched.sim.simulate` and
    :func:`~hetsched.sim.replay.simulate_online`): :func:`make_options`, and one
    DeprecationWarning (attributed to ``func``'s caller) naming the SimOptions fields given as
    keywords, once they are known to be valid."""
    opts = make_options(options, preset=preset, **keywords)
    if keywords:
        names = sorted(keywords)
        warnings.warn(
            f"{func}(): option keywords {names} are deprecated and will be removed in the next release; pass "
            f"options=SimOptions(...) (or SimOptions.preset(name, ...)) instead.", DeprecationWarning, stacklevel=3)
    return opts
