r"""Optimus (Peng et al., EuroSys'18) as a round scheduler for adaptive jobs.

Optimus predicts how much work each job has left from its training curve (§3.1), how fast
it runs on a given allocation (§3.2), and hands out resources greedily by *marginal gain*:
the decrease of a job's estimated completion time per added unit of resource (§4.1). Here
the jobs are the all-reduce data-parallel jobs of :mod:`hetsched.inputs.adaptive`; what
changes from the paper is said at each step.

Convergence model, fitted online (§3.1)
---------------------------------------
Optimus fits the training loss after :math:`k` steps with

.. math::  l(k) = \frac{1}{\beta_0 k + \beta_1} + \beta_2, \qquad \beta_0, \beta_1 \ge 0,

by (non-negative) least squares to the points the job reports. Our jobs report a
validation *metric* once per epoch (the profile's validation run whose batch size is nearest,
in ratio, to the job's batch, at the epochs the job has completed: what the job would have
observed; no later epoch is read). The metric may be accuracy-like (it increases) or
loss-like (it decreases): its direction :math:`s` is the sign of the least-squares slope of
the metric over the epochs seen (:math:`s = +1` for a decreasing metric, :math:`-1` for an
increasing one), and the same form is fitted to :math:`y = s \cdot \text{metric}` against
the job's progress :math:`x` (iterations at its initial batch size, counted at the end of
each epoch). The fit (:func:`fit_convergence`) works on the points scaled to
:math:`[0, 1]` (progress by the last point's, :math:`y` by its range). With the offset
:math:`a = \beta_1/\beta_0` fixed, the model :math:`c/(x + a) + \beta_2` is linear, so the
least-squares :math:`(c \ge 0, \beta_2)` has a closed form; the best :math:`a` is found on a
geometric grid and refined by a bounded scalar search (:func:`scipy.optimize.minimize_scalar`),
then polished by :func:`scipy.optimize.least_squares` with the bounds
:math:`\beta_0, \beta_1 \ge 0`. :math:`\beta_2` is free (Optimus keeps :math:`\beta_2 \ge 0`
because a loss is non-negative; a sign-adjusted metric's asymptote may be negative) down to
10 ranges of the points below their lowest value (a curve that has not bent yet would
otherwise send it to :math:`-\infty`). There is no curve (the prior applies) with fewer than
3 points, a constant metric, or a flat best fit (:math:`c = 0`).

Convergence threshold. With :math:`x_1` the first point (end of the first epoch), the job is
predicted to converge when the fitted curve has closed all but a share :math:`\delta` of the
gap between its value at :math:`x_1` and its asymptote :math:`\beta_2`:

.. math::  \frac{1}{\beta_0 x^* + \beta_1} = \delta\,\frac{1}{\beta_0 x_1 + \beta_1}
           \;\Longrightarrow\; x^* = \frac{(\beta_0 x_1 + \beta_1)/\delta - \beta_1}{\beta_0},

(scale-free: the same for any unit or offset of the metric). :math:`\delta = 0.05` by
default: on the Sia artifact's validation runs (at the batch sizes of Philly workload 1) the
predicted end after 3-20 epochs then lies within 0.2-2.1x of the true one for cifar10,
deepspeech2, imagenet and yolov3, mostly 0.4-1.5x; a hyperbola is a rough model of curves
with learning-rate steps (imagenet's step at epoch 30 sends later fits to the cap below). Safeguards: :math:`x^*` is
at most :math:`x_\text{last}/\delta` (a fit that has not bent yet, :math:`\beta_0 \approx 0`,
would otherwise predict almost endless training), and a job still running past
:math:`x^*` has at least the rest of its current epoch left. The remaining work is
:math:`\max(x^* - x, \text{rest of the epoch})`.

Prior. Before ``min_epochs`` (3) epochs have ended, or where the fit fails, the remaining
work is the median progress at which finished jobs of the same model ended
(:meth:`~hetsched.inputs.adaptive.AdaptiveJobs.ended_at`: what a finished job reported in
all; a simulated job ends at its target), less the
progress so far; with none finished, :math:`(m - 1)\,x` (``prior_multiple`` :math:`m = 2`:
a job is believed half done), and always at least the rest of the current epoch (a job
knows its epoch length). The completion of a job still running is never used for an
estimate; the progress so far comes from
:func:`~hetsched.schedulers.adaptive_base.prepare_state` like Pollux's.

Speed model (§3.2)
------------------
Optimus fits a parameter-server speed function to a job's measured speeds. Our jobs are
all-reduce data parallel, so the job's fitted Pollux throughput model stands in for it
(:class:`~hetsched.schedulers.goodput_beliefs.GoodputBeliefs`, one model per job pooled over
GPU types: Optimus is heterogeneity-unaware; no one-GPU seed). A configuration's speed is the
model's progress rate (iterations at the initial batch per second, statistical efficiency
included) at the job's *submitted* batch size, split over the replicas as the job would
split it (accumulation steps where the per-GPU batch does not fit): Optimus does not adapt
the batch size, and every row runs at the submitted batch. Before a job has reported, its
speedup is linear (Pollux's prior), :math:`v(a) = a\,\hat v_1`, with :math:`\hat v_1` the
median believed one-GPU speed of the reported jobs of the same model; without one the job's
speed is unknown, and it is given only its first allocation step (its first round is the
run that measures it, as Optimus runs a new job briefly to get its first speed samples).

Allocation (§4.1)
-----------------
Estimated completion time of job :math:`j` on configuration :math:`c`:
:math:`T_j(c) = R_j / v_j(c) + r_j\,[c \ne c_j^\text{now}]`, with :math:`R_j` the remaining
work, :math:`v_j` the believed speed, and :math:`r_j` the model's checkpoint-restore time,
charged where the job would change configuration (``restart_aware``; the round loop charges
it on every change). Every active job starts with 0 GPUs (:math:`T = \infty`):

1. **First steps.** Every job gets a first step before any job grows (its gain from
   :math:`\infty` is infinite; Optimus gives every job a worker first, against starvation),
   in order of least :math:`T_j` on that step (jobs of unknown speed first, in arrival
   order). The step is the smallest configuration the job can run on its type; the type is
   the one it runs on now if that still has room, else the one with the most free GPUs per
   job there (counting the jobs already given a step on it and those still to come that run
   on it now; plain "most free GPUs" would put every new job on the largest type while all
   jobs hold one GPU, and leave smaller types idle). Optimus does not tell types apart, and
   a job keeps its type while it grows.
2. **Growth.** Repeatedly, the job whose completion time decreases most per added GPU,
   :math:`(T_j(c) - T_j(c')) / (g(c') - g(c))`, over the configurations :math:`c'` of its
   type larger than its own :math:`c` that fit the type's free GPUs (Sia's configuration
   set: 1, 2, 4, ... GPUs on one node, then whole nodes), moves to its best :math:`c'`; until
   no GPU is free or no job gains (:func:`marginal_gain_allocation`). Looking past the next
   configuration lets a job over a restart bump (back to its current count) or a slow
   node-crossing size.

Per type, the GPUs given never exceed the type's capacity. With ``restart_aware``, the
restart term keeps a running job at its current type and count unless its marginal gains
(or another job's) outweigh a restart.

References
----------
Y. Peng, Y. Bao, Y. Chen, C. Wu, C. Guo. "Optimus: An Efficient Dynamic Resource Scheduler
for Deep Learning Clusters." EuroSys 2018, §3.1 (convergence), §3.2 (speed), §4.1
(marginal-gain allocation). A. Qiao et al., "Pollux", OSDI 2021 (the throughput model and
progress). S. Jayaram Subramanya et al., "Sia", SOSP 2023 (configuration set, profiles).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..errors import ValidationError
from ..rounds.protocol import RoundRows, RoundView
from ..validation import check_bool, check_int, check_real
from .adaptive_base import (
    AdaptiveState,
    adaptive_progress,
    prepare_state,
    record,
    rows_for_choice,
)
from .convergence import (
    _TINY,
    ConvergenceFit,
    fit_convergence,
    observed_metrics,
    remaining_from_fit,
)

__all__ = [
    "ConvergenceFit",
    "Optimus",
    "OptimusState",
    "fit_convergence",
    "marginal_gain_allocation",
    "observed_metrics",
    "remaining_from_fit",
]

log = logging.getLogger(__name__)

# ------------------------------------------------------------------ allocation
def marginal_gain_allocation(levels: Sequence[Any], time: Any, capacities: Any, *,
                             current_type: Any = None) -> tuple[np.ndarray, np.ndarray]:
    r"""Optimus's greedy marginal-gain allocation over per-type configuration ladders.

    Parameters
    ----------
    levels : sequence of array_like
        Per GPU type, the ascending GPU counts of its configurations.
    time : array_like, shape (n_jobs, n_types, max levels)
        Estimated completion time of each job at each configuration (``inf``: it cannot run
        there, and entries past a type's last level; ``nan``: unknown speed -- the job gets
        only its first step, ahead of the jobs whose time is known).
    capacities : array_like of int
        GPUs per type.
    current_type : array_like of int, optional
        The type each job runs on now (-1: none); its first step goes there if it fits.

    Returns
    -------
    (type, level) : tuple of ndarray of int64
        Per job, the type and the index into ``levels[type]`` it gets (-1, -1: nothing).

    Notes
    -----
    First steps, in order of least time at the step (unknown first, then job order): the
    smallest level the job can run on the chosen type (current type if it has room, else the
    one with the most free GPUs). Then, repeatedly, the move with the largest decrease of
    time per added GPU to any larger level of the job's type that fits the free GPUs (ties:
    the lower job); it stops when no move has a positive gain.
    """
    T = np.asarray(time, dtype=float)
    lv = [np.asarray(a, dtype=np.int64).reshape(-1) for a in levels]
    cap = np.asarray(capacities, dtype=np.int64).reshape(-1)
    if T.ndim != 3 or T.shape[1] != len(lv) or cap.shape[0] != len(lv):
        raise ValidationError(f"`time` must have shape (n_jobs, {len(lv)}, max levels) matching `levels` and "
                              f"`capacities` ({cap.shape[0]} types); got {T.shape}.")
    L = max((a.size for a in lv), default=0)
    if T.shape[2] < L:
        raise ValidationError(f"`time` must have at least {L} levels (the longest ladder); got {T.shape[2]}.")
    for k, a in enumerate(lv):
        if a.size and (a[0] < 1 or np.any(np.diff(a) <= 0)):
            raise ValidationError(f"`levels[{k}]` must be ascending positive GPU counts; got {a.tolist()!r}.")
    n, m = T.shape[0], len(lv)
    cur = np.full(n, -1, np.int64) if current_type is None else np.asarray(current_type, np.int64).reshape(-1)
    if cur.shape[0] != n:
        raise ValidationError(f"`current_type` must have one entry per job ({n}); got {cur.shape[0]}.")
    free = cap.copy()
    ty = np.full(n, -1, np.int64)
    lev = np.full(n, -1, np.int64)

    def first_level(j: int, k: int) -> int:
        for li in range(lv[k].size):
            if not np.isposinf(T[j, k, li]):
                return li
        return -1

    firsts = np.array([[first_level(j, k) for k in range(m)] for j in range(n)], dtype=np.int64).reshape(n, m)
    key = np.full(n, np.inf)
    unknown = np.zeros(n, bool)
    for j in range(n):
        vals = [T[j, k, firsts[j, k]] for k in range(m) if firsts[j, k] >= 0]
        if not vals:
            continue
        if any(np.isnan(v) for v in vals):
            unknown[j] = True
            key[j] = -np.inf
        else:
            key[j] = min(vals)
    order = sorted(range(n), key=lambda j: (key[j], j))
    # jobs per type: those given a first step there, and those still to come that run there now
    holders = np.bincount(cur[(cur >= 0) & (cur < m)], minlength=m).astype(float)
    for j in order:
        stays = 0 <= cur[j] < m
        if stays:
            holders[cur[j]] -= 1
        if not np.isfinite(key[j]) and not unknown[j]:
            continue   # can run nowhere
        fits = [k for k in range(m) if firsts[j, k] >= 0 and free[k] >= lv[k][firsts[j, k]]]
        if not fits:
            continue
        if stays and int(cur[j]) in fits:
            k = int(cur[j])
        else:   # most free GPUs per job there (counting this one)
            k = max(fits, key=lambda t: (free[t] / (holders[t] + 1.0), free[t], -t))
        ty[j], lev[j] = k, firsts[j, k]
        free[k] -= lv[k][lev[j]]
        holders[k] += 1
    # growth
    while True:
        best_gain, best = 0.0, None
        for j in np.flatnonzero(ty >= 0).tolist():
            k, li = int(ty[j]), int(lev[j])
            t_now = T[j, k, li]
            if not np.isfinite(t_now):
                continue
            g_now = lv[k][li]
            for lj in range(li + 1, lv[k].size):
                dg = int(lv[k][lj] - g_now)
                if dg > free[k]:
                    break
                t_new = T[j, k, lj]
                if not np.isfinite(t_new):
                    continue
                gain = (t_now - t_new) / dg
                if gain > best_gain:
                    best_gain, best = gain, (j, lj)
        if best is None:
            break
        j, lj = best
        k = int(ty[j])
        free[k] -= int(lv[k][lj] - lv[k][lev[j]])
        lev[j] = lj
    return ty, lev


# ------------------------------------------------------------------ the scheduler
@dataclass
class OptimusState(AdaptiveState):
    """Optimus's state across rounds: :class:`~hetsched.schedulers.adaptive_base.AdaptiveState`
    plus its convergence fits and what it saw of finished jobs.

    Attributes
    ----------
    fits : dict
        Job -> (epochs seen, ConvergenceFit or None) of its latest fit.
    active : set
        Jobs active at the last round planned (one that leaves the set has finished).
    finished : dict
        Model name -> progress at which each finished job of the model ended.
    estimates : dict
        Job -> (remaining work, "fit" / "finished" / "prior") of the last round planned.
    configs_of : dict
        Job -> per-type (config columns, nodes, GPUs, atomic batch, accumulation, runnable),
        built once per job at its submitted batch.
    """

    fits: dict[int, tuple[int, ConvergenceFit | None]] = field(default_factory=dict)
    active: set[int] = field(default_factory=set)
    finished: dict[str, list[float]] = field(default_factory=dict)
    estimates: dict[int, tuple[float, str]] = field(default_factory=dict)
    configs_of: dict[int, list[tuple[np.ndarray, ...]]] = field(default_factory=dict)


@dataclass(frozen=True)
class Optimus:
    """Optimus's marginal-gain scheduling with an online convergence model (see the module
    docstring).

    Parameters
    ----------
    convergence_delta : float, default 0.05
        Share of the fitted curve's gap to its asymptote (at the first epoch) left at
        convergence; in (0, 1).
    min_epochs : int, default 3
        Epochs a job must have completed before its curve is fitted (at least 3: the curve
        has three coefficients).
    prior_multiple : float, default 2
        Without a fit or a finished job of the model, a job's total work is believed to be
        this multiple of its progress so far (at least 1).
    restart_aware : bool, default True
        Charge the model's restart time in the completion time of every configuration but
        the one a job runs on now.
    max_gpus_per_job : int, default 64
        Largest configuration.

    Examples
    --------
    >>> from hetsched.schedulers.optimus import Optimus
    >>> Optimus(convergence_delta=0.1).params()["convergence_delta"]
    0.1
    """

    name: ClassVar[str] = "optimus"
    adaptive: ClassVar[bool] = True     # plans adaptive jobs (see AdaptiveRounds)
    convergence_delta: float = 0.05
    min_epochs: int = 3
    prior_multiple: float = 2.0
    restart_aware: bool = True
    max_gpus_per_job: int = 64

    def __post_init__(self) -> None:
        check_real(self.convergence_delta, "convergence_delta", low=0.0, high=1.0, low_open=True, high_open=True)
        check_int(self.min_epochs, "min_epochs", low=3)
        check_real(self.prior_multiple, "prior_multiple", low=1.0)
        check_bool(self.restart_aware, "restart_aware")
        check_int(self.max_gpus_per_job, "max_gpus_per_job", low=1)

    def initial_state(self, start_time: float = 0.0) -> OptimusState:
        """Nothing learned yet."""
        return OptimusState()

    # -------------------------------------------------------------- remaining work
    def remaining(self, state: OptimusState, prog: Any, job: int) -> tuple[float, str]:
        """``(remaining work, source)`` of ``job`` from its progress so far (see the module
        docstring); source is "fit", "finished" or "prior"."""
        p = float(state.progress.get(job, 0.0))
        prof = prog.models[job]
        done = int(prof.epoch_of(p))
        floor = max(float(prof.epoch_progress(done + 1)) - p, _TINY)
        seen = state.fits.get(job)
        if seen is None or seen[0] != done:
            fit = None
            if done >= self.min_epochs:
                x, y = prog.observed_metrics(job, p)
                fit = fit_convergence(x, y)
                if fit is None:
                    log.debug("job %s: no convergence fit after %d epochs; using the prior", prog.names[job], done)
            state.fits[job] = (done, fit)
        fit = state.fits[job][1]
        if fit is not None:
            return remaining_from_fit(fit, p, self.convergence_delta, floor), "fit"
        ended = state.finished.get(prof.model)
        if ended:
            return max(float(np.median(ended)) - p, floor), "finished"
        return max((self.prior_multiple - 1.0) * p, floor), "prior"

    # -------------------------------------------------------------- speeds
    def _configs(self, state: OptimusState, prog: Any, job: int) -> list[tuple[np.ndarray, ...]]:
        """Per type: (config columns, nodes, GPUs, atomic batch, accumulation steps, runnable)
        at the job's submitted batch (cached)."""
        got = state.configs_of.get(job)
        if got is not None:
            return got
        cs = state.configs
        batch = int(prog.submitted_batch[job])
        out = []
        for k in range(len(cs.gpu_types)):
            cols = np.flatnonzero(cs.type_index == k)
            cols = cols[np.argsort(cs.gpus[cols], kind="stable")]
            nodes = cs.nodes[cols].astype(np.int64)
            gpus = cs.gpus[cols].astype(np.int64)
            atomic = np.ones(cols.size, np.int64)
            accum = np.zeros(cols.size, np.int64)
            ok = np.zeros(cols.size, bool)
            if prog.has_type(job, k):
                for i, (N, K) in enumerate(zip(nodes.tolist(), gpus.tolist())):
                    try:
                        atomic[i], accum[i] = prog.split_batch(job, k, N, K, batch)
                        ok[i] = True
                    except (ValidationError, ValueError) as exc:
                        log.debug("job %s cannot run on %d GPU(s) of %s: %s", prog.names[job], K,
                                  cs.gpu_types[k], exc)
            out.append((cols, nodes, gpus, atomic, accum, ok))
        state.configs_of[job] = out
        return out

    def speeds(self, view: RoundView, state: OptimusState, prog: Any) -> list[list[np.ndarray]]:
        """Believed progress rate of each active job (outer list) on each configuration of
        each type (inner list, GPU counts ascending), at its submitted batch: 0 where it
        cannot run, NaN where unknown (no report, and no reported job of its model for the
        linear prior)."""
        beliefs = state.beliefs
        per: list[list[np.ndarray]] = []
        one_gpu: dict[str, list[float]] = {}     # model -> believed one-GPU speeds of reported jobs
        for j in view.jobs.tolist():
            model = beliefs.model(j, view.gpu_types[0])    # pooled over types: any type names it
            row = []
            for _, nodes, gpus, atomic, accum, ok in self._configs(state, prog, j):
                v = np.zeros(gpus.size)
                if model is None:
                    v[ok] = np.nan
                elif ok.any():
                    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                        got = np.asarray(model.progress_rate(nodes[ok], gpus[ok], atomic[ok], accum[ok]), float)
                    v[ok] = np.where(np.isfinite(got) & (got > 0), got, 0.0)
                    one = v[(gpus == 1) & ok]
                    if one.size and one[0] > 0:
                        one_gpu.setdefault(prog.models[j].model, []).append(float(one[0]))
                row.append(v)
            per.append(row)
        for i, j in enumerate(view.jobs.tolist()):    # linear speedup prior (Pollux's) for the rest
            ref = one_gpu.get(prog.models[j].model)
            if not ref:
                continue
            v1 = float(np.median(ref))
            for v, (_, _, gpus, _, _, _) in zip(per[i], self._configs(state, prog, j)):
                unknown = np.isnan(v)
                v[unknown] = gpus[unknown] * v1
        return per

    # -------------------------------------------------------------- the round
    def _note_finished(self, state: OptimusState, view: RoundView, prog: Any) -> None:
        now = set(view.jobs.tolist())
        for j in sorted(state.active - now):
            end = prog.ended_at(j)
            if end > 0:     # NaN (cancelled) is not
                state.finished.setdefault(prog.models[j].model, []).append(float(end))
                log.debug("job %s finished at progress %.1f (believed)", prog.names[j], end)
        state.active = now

    def plan_round(self, view: RoundView, state: OptimusState) -> RoundRows:
        """Estimate every active job's remaining work and speeds, then allocate by marginal
        gain; every job at its submitted batch."""
        t0 = time.perf_counter()
        prog = adaptive_progress(view, "Optimus")
        if not isinstance(state, OptimusState):
            raise ValidationError(f"`state` must be the OptimusState of Optimus.initial_state(); got "
                                  f"{type(state).__name__}.")
        self._note_finished(state, view, prog)
        prepare_state(state, view, per_type=False, seed_single_gpu=False, max_gpus=self.max_gpus_per_job)
        cs = state.configs
        n, m = view.n_jobs, len(view.gpu_types)
        speeds = self.speeds(view, state, prog)
        levels = []
        for k in range(m):
            cols = np.flatnonzero(cs.type_index == k)
            levels.append(np.sort(cs.gpus[cols]).astype(np.int64))
        L = max((a.size for a in levels), default=0)
        T = np.full((n, m, max(L, 1)), np.inf)
        cur_type = np.full(n, -1, np.int64)
        sources: dict[str, int] = {"fit": 0, "finished": 0, "prior": 0}
        for i, j in enumerate(view.jobs.tolist()):
            R, src = self.remaining(state, prog, j)
            state.estimates[j] = (R, src)
            sources[src] += 1
            cur = state.current.get(j)
            if cur is not None:
                cur_type[i] = cur[0]
            r = float(prog.restart_seconds[j]) if self.restart_aware else 0.0
            for k in range(m):
                v = speeds[i][k]
                gpus = levels[k]
                with np.errstate(divide="ignore", invalid="ignore"):
                    t = np.where(v > 0, R / np.where(v > 0, v, 1.0), np.where(np.isnan(v), np.nan, np.inf))
                if r > 0:
                    keep = np.zeros(gpus.size, bool)
                    if cur is not None and cur[0] == k:
                        keep = gpus == cur[1]
                    t = np.where(np.isfinite(t) & ~keep, t + r, t)
                T[i, k, :gpus.size] = t
        t1 = time.perf_counter()
        ty, lev = marginal_gain_allocation(levels, T, view.capacities, current_type=cur_type)
        solve_s = time.perf_counter() - t1
        choice = np.full(n, -1, np.int64)
        rate = np.zeros(n)
        for i in np.flatnonzero(ty >= 0).tolist():
            k, li = int(ty[i]), int(lev[i])
            cols = state.configs_of[int(view.jobs[i])][k][0]
            choice[i] = cols[li]
            v = speeds[i][k][li]
            rate[i] = float(v) if np.isfinite(v) and v > 0 else 0.0
        batch = np.asarray(prog.submitted_batch, dtype=np.int64)[view.jobs]
        info = {"solved": True, "solve_ok": True, "solve_status": "greedy", "solve_s": solve_s,
                "solve_jobs": n, "plan_s": time.perf_counter() - t0, "remaining_sources": sources}
        log.debug("round %d: %d job(s), %d allocated, %d GPU(s); remaining estimates %s", view.round_index, n,
                  int((choice >= 0).sum()), int(cs.gpus[choice[choice >= 0]].sum()), sources)
        return rows_for_choice(view, state, choice, batch, rate, info)

    def record_round(self, state: OptimusState, ran: RoundRows, seconds: np.ndarray) -> OptimusState:
        """Learn from what ran (:func:`~hetsched.schedulers.adaptive_base.record`)."""
        return record(state, ran, seconds)

    def params(self) -> dict[str, Any]:
        """The parameters (for result labels)."""
        return {"convergence_delta": self.convergence_delta, "min_epochs": self.min_epochs,
                "prior_multiple": self.prior_multiple, "restart_aware": self.restart_aware,
                "max_gpus_per_job": self.max_gpus_per_job}
