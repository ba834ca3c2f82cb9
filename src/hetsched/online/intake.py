"""Intake and reports of the online scheduler: what callers send (``submit``, ``report``,
``complete``, ``cancel``) checked, applied to the job table and written through the store
(:class:`Intake`). Every check runs before anything is stored; a refused call changes nothing."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ..inputs.jobs import STEPS_MAX, THROUGHPUT_RANGE, WEIGHT_RANGE
from ..validation import (
    check_bool,
    check_int,
    check_mapping,
    check_nonempty_str,
    check_nonneg,
    check_positive,
    check_real,
)
from .adaptive_jobs import OnlineAdaptiveJobs
from .estimates import Estimates
from .estimator import ThroughputEstimator
from .sides import SPREAD, SideRates
from .step import RoundStep
from .store import Store
from .table import ACTIVE, STATUS_NAMES, JobTable, id_key

__all__ = ["Intake"]


class Intake:
    """The job table and what callers send to it (see the module docstring).

    Parameters
    ----------
    step : RoundStep
        The round step (the round a report belongs to, the last plan's rows, the mark that
        the active set changed); it shares the job table, side rates and estimates.
    store : Store
    estimator : ThroughputEstimator
        Profiles of job types and the moving-average rule.
    learn : bool
        Update estimates from reports.
    requires : tuple of str
        Job fields the policy cannot run without (``steps_remaining``, ``entities``).
    policy_name : str or None
        Named in the message when a required field is missing.
    adaptive : OnlineAdaptiveJobs or None
        The adaptive jobs, when the scheduler adapts them (every job is one then).
    """

    def __init__(self, step: RoundStep, store: Store, estimator: ThroughputEstimator, *, learn: bool,
                 requires: tuple[str, ...], policy_name: str | None,
                 adaptive: OnlineAdaptiveJobs | None = None) -> None:
        self.step = step
        self.store = store
        self.estimator = estimator
        self.jobs: JobTable = step.jobs
        self.sides: SideRates = step.sides
        self.estimates: Estimates = step.estimates
        self.gpu_types = step.gpu_types
        self.capacities = step.capacities
        self.learn = learn
        self.requires = frozenset(requires)
        self.policy_name = policy_name
        self.adaptive = adaptive

    def restore(self) -> None:
        """Read the jobs, their measurements and side rates back from the store."""
        J = self.jobs
        J.load(self.store.load_jobs(), self.gpu_types)
        A = self.adaptive
        rows = self.store.load_adaptive_jobs()
        if A is None and rows:
            raise ValidationError(f"store {self.store.where!r} holds {len(rows)} adaptive job(s); open it with the "
                                  "adaptive scheduler (and profiles) that wrote it.")
        if A is not None:
            if len(rows) != J.n:
                raise ValueError(f"{J.n} jobs but {len(rows)} adaptive job rows")
            for num, model, replicas, batch in rows:
                if model not in A.profiles:
                    raise ValidationError(f"job {J.ids[num]!r} of the store runs model {model!r}, which `profiles` "
                                          f"lacks (has {sorted(A.profiles)}).")
                A.add(J.ids[num], A.profiles[model], replicas, batch)
        for num, k, ema, n in self.store.load_measured():
            J.ema[num, k] = ema
            J.n_measured[num, k] = n
        self.estimates.restored()
        self.sides.load(self.store.load_side_rates())

    # ------------------------------------------------------------------ job ids
    def number(self, job_id: Any, *, need_active: bool = True) -> int:
        """The number of a submitted job (and active, with ``need_active``)."""
        if isinstance(job_id, bool) or not isinstance(job_id, (str, int, np.integer)):
            raise ValidationError(f"`job_id` must be a str or int; got {job_id!r}.")
        num = self.jobs.index.get(id_key(job_id))
        if num is None:
            raise ValidationError(f"`job_id` {job_id!r} is not a submitted job.")
        status = int(self.jobs.status[num])
        if need_active and status != ACTIVE:
            raise ValidationError(f"`job_id` {job_id!r} is {STATUS_NAMES[status]}; only active jobs can be reported, "
                                  "completed or cancelled.")
        return num

    def other(self, num: int, partner: Any, spread: bool) -> int | None:
        """The ``other`` of a side rate a report is about (None: the job's own rate)."""
        if partner is None:
            return SPREAD if spread else None
        if spread:
            raise ValidationError("give `partner` (space sharing) or `spread=True` (a spread gang), not both: a "
                                  "shared gang is consolidated.")
        if isinstance(partner, bool) or not isinstance(partner, (str, int, np.integer)):
            raise ValidationError(f"`partner` must be a job id (str or int) or None; got {partner!r}.")
        p = self.jobs.index.get(id_key(partner))
        if p is None:
            raise ValidationError(f"`partner` {partner!r} is not a submitted job.")
        if p == num:
            raise ValidationError(f"`partner` {partner!r} is the reporting job itself; a job cannot share with itself.")
        if int(self.jobs.sf[p]) != int(self.jobs.sf[num]):
            raise ValidationError(f"`partner` {partner!r} uses {int(self.jobs.sf[p])} GPUs and the job "
                                  f"{int(self.jobs.sf[num])}; only jobs with equal gangs share GPUs.")
        return p

    # ------------------------------------------------------------------ submit
    def submit(self, job_id: Any, *, job_type: Any, scale_factor: Any, throughputs: Any, total_steps: Any,
               weight: Any, entity: Any, arrival: Any, deadline: Any, spread_throughputs: Any,
               pair_throughputs: Any, model: Any = None, batch_size: Any = None) -> None:
        """:meth:`OnlineScheduler.submit <hetsched.online.OnlineScheduler.submit>`."""
        if isinstance(job_id, bool) or not isinstance(job_id, (str, int, np.integer)) or \
                (isinstance(job_id, str) and not job_id):
            raise ValidationError(f"`job_id` must be a non-empty str or an int; got {job_id!r}.")
        if id_key(job_id) in self.jobs.index:
            raise ValidationError(f"`job_id` {job_id!r} was already submitted (ids are unique per store).")
        check_nonempty_str(job_type, "job_type", allow_none=True)
        sf = check_int(scale_factor, "scale_factor", low=1)
        adaptive = None
        if self.adaptive is None:
            if model is not None or batch_size is not None:
                raise ValidationError(f"`model` and `batch_size` are for adaptive schedulers (Pollux, AdaptiveSia, "
                                      f"Optimus); got model={model!r}, batch_size={batch_size!r}.")
            if sf > int(self.capacities.max()):   # (an adaptive job's GPUs are the scheduler's choice)
                raise ValidationError(f"`scale_factor` {sf} is larger than every GPU type of the cluster "
                                      f"(largest: {int(self.capacities.max())} GPUs).")
        else:
            if model is None:
                raise ValidationError(f"`model` is required: the scheduler adapts jobs, and job {job_id!r} needs "
                                      f"its model's profile (one of {sorted(self.adaptive.profiles)}).")
            if job_type is not None and job_type != model:
                raise ValidationError(f"`job_type` {job_type!r} differs from `model` {model!r}; an adaptive job's "
                                      "type is its model (leave job_type out).")
            if spread_throughputs is not None or pair_throughputs is not None:
                raise ValidationError("`spread_throughputs` and `pair_throughputs` are for fixed-throughput jobs; an "
                                      "adaptive job's speed on any placement comes from its goodput model.")
            prof, batch = self.adaptive.check_job(job_id, model, sf, batch_size)
            adaptive = (prof, batch)
            job_type = model
            if total_steps is None:
                total_steps = float(prof.completion_progress)
        w = check_real(weight, "weight", low=WEIGHT_RANGE[0], high=WEIGHT_RANGE[1])
        total = check_real(total_steps, "total_steps", low=0.0, low_open=True, high=STEPS_MAX, allow_none=True)
        if total is None and "steps_remaining" in self.requires:
            raise ValidationError(f"`total_steps` is required: policy {self.policy_name!r} needs remaining steps.")
        check_nonempty_str(entity, "entity", allow_none=True)
        if entity is None and "entities" in self.requires:
            raise ValidationError(f"`entity` is required: policy {self.policy_name!r} needs entities.")
        arr = (self.step.last_now or 0.0) if arrival is None else check_real(arrival, "arrival")
        dl = check_real(deadline, "deadline", allow_none=True)
        if adaptive is not None and throughputs is None:
            throughputs = dict(zip(self.gpu_types, self.adaptive.first_rates_of(adaptive[0], job_id, sf, adaptive[1])))
        profile = self._profile(throughputs, job_type, sf)
        if adaptive is None and profile is not None and not (profile > 0).any() and not np.isnan(profile).any():
            raise ValidationError(f"`throughputs` of job {job_id!r} are 0 on every GPU type; it could never run.")
        prof_json = None if profile is None else json.dumps(
            {t: float(v) for t, v in zip(self.gpu_types, profile) if not math.isnan(v)})
        spread = None if spread_throughputs is None else self._rates(spread_throughputs, "spread_throughputs")
        pairs = self._pair_rates(pair_throughputs, sf)
        j = self.jobs.n
        side = SideRates(len(self.gpu_types))      # this job's rates, checked before anything is stored
        if spread is not None:
            side.give(j, SPREAD, spread)
        for p, mine, theirs in pairs:
            side.give(j, p, mine)
            side.give(p, j, theirs)
        side_rows = [r for key in side.given for r in side.store_rows(*key)]
        self.jobs.add(job_id, job_type=job_type, sf=sf, weight=w, total=total, arrival=arr, deadline=dl,
                      entity=entity, profile=profile)
        if adaptive is not None:
            self.adaptive.add(job_id, adaptive[0], sf, adaptive[1])
        try:
            self.store.save_job(self.jobs.job_row(j, prof_json), side_rows,
                                adaptive=None if adaptive is None else (adaptive[0].model, sf, adaptive[1]))
        except BaseException:
            self.jobs.pop_last()
            if adaptive is not None:
                self.adaptive.pop_last()
            raise
        for key, v in side.given.items():
            self.sides.give(*key, v)
        self.step.changed = True

    def _rates(self, rates: Any, name: str) -> np.ndarray:
        """A mapping GPU type -> steps/s as a vector over the cluster's types (NaN: not given)."""
        check_mapping(rates, name, rule="a mapping GPU type -> steps/s")
        out = np.full(len(self.gpu_types), np.nan)
        for t, v in rates.items():
            if t not in self.gpu_types:
                raise ValidationError(f"`{name}` names GPU type {t!r}, which the cluster lacks "
                                      f"(types: {list(self.gpu_types)}).")
            x = check_real(v, f"{name}[{t!r}]", low=0.0, high=THROUGHPUT_RANGE[1])
            if 0 < x < THROUGHPUT_RANGE[0]:
                raise ValidationError(f"`{name}[{t!r}]` must be 0 or in [{THROUGHPUT_RANGE[0]:g}, "
                                      f"{THROUGHPUT_RANGE[1]:g}] steps/s; got {v!r}.")
            out[self.gpu_types.index(t)] = x
        return out

    def _pair_rates(self, pairs: Any, sf: int) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """``pair_throughputs`` of a submit as (partner number, mine, theirs) vectors."""
        if pairs is None:
            return []
        if not isinstance(pairs, Mapping):
            raise ValidationError("`pair_throughputs` must be a mapping partner id -> {GPU type: (mine, theirs)}; "
                                  f"got {type(pairs).__name__}.")
        out = []
        for pid, rates in pairs.items():
            p = self.number(pid, need_active=False)
            if int(self.jobs.sf[p]) != sf:
                raise ValidationError(f"`pair_throughputs` partner {pid!r} uses {int(self.jobs.sf[p])} GPUs and this "
                                      f"job {sf}; only jobs with equal gangs share GPUs.")
            if not isinstance(rates, Mapping):
                raise ValidationError(f"`pair_throughputs[{pid!r}]` must be a mapping GPU type -> (mine, theirs); "
                                      f"got {type(rates).__name__}.")
            both = {}
            for t, v in rates.items():
                if not isinstance(v, (tuple, list)) or len(v) != 2:
                    raise ValidationError(f"`pair_throughputs[{pid!r}][{t!r}]` must be a pair (mine, theirs) of "
                                          f"steps/s; got {v!r}.")
                both[t] = v
            mine = self._rates({t: v[0] for t, v in both.items()}, f"pair_throughputs[{pid!r}] (mine)")
            theirs = self._rates({t: v[1] for t, v in both.items()}, f"pair_throughputs[{pid!r}] (theirs)")
            out.append((p, mine, theirs))
        return out

    def _profile(self, throughputs: Mapping[str, float] | None, job_type: str | None, sf: int) -> np.ndarray | None:
        """The reference row of the job's type and gang (NaN where unknown), overridden by the
        ``throughputs`` a submit gives (checked as :meth:`_rates` checks rates)."""
        prof = self.estimator.profile(job_type, sf)
        if throughputs is None:
            return prof
        given = self._rates(throughputs, "throughputs")
        out = np.full(len(self.gpu_types), np.nan) if prof is None else prof
        named = ~np.isnan(given)  # a given rate is finite (check_real refuses NaN)
        out[named] = given[named]
        return out

    # ------------------------------------------------------------------ complete, cancel
    def finish(self, job_id: Any, now: Any, status: int) -> None:
        """Mark an active job completed or cancelled (``status``) at ``now`` (optional)."""
        num = self.number(job_id)
        t = check_real(now, "now", allow_none=True)
        self.store.finish_job(num, status, t)
        self.jobs.status[num] = status
        self.jobs.finish[num] = np.nan if t is None else t
        self.step.changed = True

    # ------------------------------------------------------------------ reports
    def report(self, job_id: Any, gpu_type: Any, steps: Any, seconds: Any, *, partner: Any, spread: Any,
               gpus: Any, measured: Any = None) -> None:
        """:meth:`OnlineScheduler.report <hetsched.online.OnlineScheduler.report>`."""
        num = self.number(job_id)
        if not isinstance(gpu_type, str) or gpu_type not in self.gpu_types:
            raise ValidationError(f"`gpu_type` must be one of the cluster's types {list(self.gpu_types)}; "
                                  f"got {gpu_type!r}.")
        k = self.gpu_types.index(gpu_type)
        st = check_nonneg(steps, "steps")
        sec = check_positive(seconds, "seconds")
        other = self.other(num, partner, check_bool(spread, "spread"))
        J = self.jobs
        adaptive = None
        if self.adaptive is None:
            if measured is not None:
                raise ValidationError("`measured` is for adaptive jobs (Pollux, AdaptiveSia, Optimus); this "
                                      "scheduler learns throughputs from steps and seconds.")
            factor = self._factor(num, k, gpus)
            learn = self.learn and (other is not None or factor is not None)
        else:
            if partner is not None:
                raise ValidationError("`partner`: adaptive jobs do not share GPUs.")
            check_int(gpus, "gpus", low=1, allow_none=True)
            if measured is not None:
                adaptive = self.adaptive.check_measured(num, gpu_type, measured)
            factor, learn = None, False     # the scheduler learns from `measured`, not from throughputs
        if other is None:
            old, n_old = float(J.ema[num, k]), int(J.n_measured[num, k])
            obs = st / sec / (factor if factor is not None else 1.0)
        else:
            old, n_old = self.sides.ema_of(num, other, k)
            obs = st / sec
        ema = self.estimator.update(old, obs) if learn else old
        n_meas = n_old + (1 if learn else 0)
        rate = float(J.iso_rate[num])
        iso = float(J.iso_time[num]) + (st / rate if st > 0 and math.isfinite(rate) and rate > 0 else 0.0)
        done = float(J.done[num]) + st
        own = side = None
        if learn and other is None:
            own = (ema, n_meas)
        elif learn:
            g = self.sides.given.get((num, other))
            side = (other, None if g is None or math.isnan(g[k]) else float(g[k]), ema, n_meas)
        self.store.append_report(self.step.round_index, num, k, st, sec, steps_done=done, iso_time=iso,
                                 measured=own, side=side,
                                 adaptive=None if adaptive is None else json.dumps(
                                     {"report": adaptive[0], "metrics": adaptive[1]}))
        if adaptive is not None:
            self.adaptive.measured(num, *adaptive)
        J.done[num] = done
        J.iso_time[num] = iso
        J.pending_s[num] += sec
        if learn and other is None:
            J.ema[num, k] = ema
            J.n_measured[num, k] = n_meas
            self.estimates.reported(num)
        elif learn:
            self.sides.learn(num, other, k, ema, n_meas)

    def _factor(self, num: int, k: int, gpus: Any) -> float | None:
        """What a report on ``gpus`` GPUs of type ``k`` is divided by to give the job's own rate
        (None: it cannot be scaled, learn nothing)."""
        sf = int(self.jobs.sf[num])
        check_int(gpus, "gpus", low=1, allow_none=True)
        lease = self.step.lease(num, k)
        if gpus is None:
            gpus = sf if lease is None else lease[0]
        if lease is not None and lease[0] == int(gpus):
            f = lease[1]
            return f if math.isfinite(f) and f > 0 else None
        if int(gpus) == sf:
            return 1.0
        raise ValidationError(f"`gpus` {int(gpus)} is neither the job's gang ({sf}) nor what the last plan gave it on "
                              f"{self.gpu_types[k]!r}; a rate on that many GPUs cannot be scaled to the job's own.")

    # ------------------------------------------------------------------ reading
    def table(self) -> pd.DataFrame:
        """:meth:`OnlineScheduler.job_table <hetsched.online.OnlineScheduler.job_table>`."""
        J = self.jobs
        return pd.DataFrame({
            "job_id": J.ids_array, "job_type": J.job_type, "scale_factor": J.view("sf").copy(),
            "status": [STATUS_NAMES[int(s)] for s in J.view("status")], "steps_done": J.view("done").copy(),
            "total_steps": J.view("total").copy(), "arrival_s": J.view("arrival").copy(),
            "finish_s": J.view("finish").copy(), "weight": J.view("weight").copy(),
        }, index=pd.RangeIndex(J.n, name="number"))
