"""Optimus (hetsched.schedulers.optimus): the online convergence fit, the marginal-gain
allocation on hand-made and random instances, the remaining-work estimate and its prior,
parameter checks, an end-to-end run on a small Sia workload, and a differential check that
the scheduler's decisions do not depend on the truth's completion progress."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

import hetsched as hs
from hetsched.errors import DataNotFoundError, ValidationError
from hetsched.formulations.sia.configurations import configuration_set
from hetsched.rounds.protocol import RoundView, check_rows
from hetsched.schedulers.names import ROUND_SCHEDULERS, list_schedulers, make_scheduler
from hetsched.schedulers.optimus import (
    ConvergenceFit,
    Optimus,
    OptimusState,
    fit_convergence,
    marginal_gain_allocation,
    observed_metrics,
    remaining_from_fit,
)

B0, B1, B2 = 0.002, 0.5, 0.1     # hand-chosen curve 1 / (B0 x + B1) + B2


def _sia_or_skip():
    from hetsched.inputs.profiles import sia_data_path
    try:
        sia_data_path()
    except DataNotFoundError:
        pytest.skip("Sia's artifact data is not on this machine")
    from hetsched.inputs.adaptive import sia_workload
    return sia_workload("philly", 1)


def _x_star(b0: float, b1: float, x1: float, delta: float) -> float:
    """Progress where 1/(b0 x + b1) = delta / (b0 x1 + b1) (the module's threshold)."""
    return ((b0 * x1 + b1) / delta - b1) / b0


# ------------------------------------------------------------------ convergence fit
def test_fit_recovers_beta_of_a_loss_curve_and_predicts_the_remaining_work():
    x = np.arange(1.0, 11.0) * 100.0
    fit = fit_convergence(x, 1.0 / (B0 * x + B1) + B2)
    assert fit is not None and fit.sign == 1.0 and fit.n_points == 10
    assert fit.beta0 == pytest.approx(B0, rel=1e-6)
    assert fit.beta1 == pytest.approx(B1, rel=1e-6)
    assert fit.beta2 == pytest.approx(B2, rel=1e-6, abs=1e-9)
    assert fit.rmse < 1e-9
    # delta = 0.05: 1/(B0 x* + B1) = 0.05 * 1/(B0*100 + B1) -> B0 x* + B1 = 14 -> x* = 6750
    assert _x_star(B0, B1, 100.0, 0.05) == pytest.approx(6750.0)
    assert fit.converged_at(0.05) == pytest.approx(6750.0, rel=1e-4)
    got = remaining_from_fit(fit, 1000.0, 0.05)
    assert got == pytest.approx(5750.0, rel=0.01)          # within 1 %


def test_fit_detects_an_accuracy_like_metric_and_recovers_beta():
    x = np.array([150.0, 300.0, 450.0, 600.0, 900.0, 1200.0])
    acc = 0.9 - 1.0 / (B0 * x + B1)                         # rises towards 0.9
    fit = fit_convergence(x, acc)
    assert fit.sign == -1.0
    assert (fit.beta0, fit.beta1) == (pytest.approx(B0, rel=1e-6), pytest.approx(B1, rel=1e-6))
    assert fit.beta2 == pytest.approx(-0.9, rel=1e-6)      # of -accuracy
    np.testing.assert_allclose(fit.curve(x), acc, rtol=1e-8)
    want = _x_star(B0, B1, 150.0, 0.1)
    assert fit.converged_at(0.1) == pytest.approx(want, rel=1e-4)
    assert remaining_from_fit(fit, 1200.0, 0.1) == pytest.approx(want - 1200.0, rel=0.02)


def test_fit_with_a_forced_direction_and_the_cases_without_a_curve():
    x = np.arange(1.0, 6.0) * 10.0
    assert fit_convergence(x[:2], [3.0, 2.0]) is None                 # fewer than 3 points
    assert fit_convergence(x, np.full(5, 0.7)) is None                # constant metric
    assert fit_convergence(x, 1.0 / (0.1 * x + 1.0), sign=-1) is None  # read the wrong way round: flat best fit
    f = fit_convergence(x, 1.0 / (0.1 * x + 1.0), sign=1)
    assert f.beta0 == pytest.approx(0.1, rel=1e-6)


def test_remaining_from_fit_cap_and_floor():
    flat = ConvergenceFit(beta0=1e-12, beta1=1.0, beta2=0.0, sign=1.0, first_progress=10.0, last_progress=100.0,
                          n_points=5, rmse=0.0)
    assert remaining_from_fit(flat, 100.0, 0.05) == pytest.approx(100.0 / 0.05 - 100.0)   # capped at x_last / delta
    done = ConvergenceFit(beta0=1.0, beta1=0.0, beta2=0.0, sign=1.0, first_progress=10.0, last_progress=300.0,
                          n_points=5, rmse=0.0)
    assert done.converged_at(0.05) == pytest.approx(200.0)
    assert remaining_from_fit(done, 300.0, 0.05, floor=7.0) == 7.0   # past x*: the rest of the epoch
    with pytest.raises(ValidationError, match="`delta`"):
        done.converged_at(1.5)


@pytest.mark.parametrize("args, match", [
    (([1.0, 2.0], [1.0]), "same length"),
    (([1.0, 2.0, np.nan], [1.0, 2.0, 3.0]), "finite"),
    (([1.0, 1.0, 2.0], [3.0, 2.0, 1.0]), "increasing"),
    (([0.0, 1.0, 2.0], [3.0, 2.0, 1.0]), "positive"),
])
def test_fit_refuses_bad_points(args, match):
    with pytest.raises(ValidationError, match=match):
        fit_convergence(*args)


# ------------------------------------------------------------------ remaining work
class _Profile:
    """A stand-in ModelProfile: epochs of 100 progress each, one validation run whose
    metric is the hand curve at each epoch's end and NaN from epoch ``known`` on."""

    model = "toy"
    max_epochs = 30

    def __init__(self, known: int) -> None:
        self._starts = np.arange(self.max_epochs + 1) * 100.0
        x = self._starts[1:]
        metric = 1.0 / (B0 * x + B1) + B2
        metric[known:] = np.nan                           # a future the job must not read
        self.validation = {64: pd.DataFrame({"metric": metric}), 4096: pd.DataFrame({"metric": np.zeros(30)})}

    def epoch_of(self, p):
        return np.int64(min(np.searchsorted(self._starts[: self.max_epochs], p, side="right") - 1,
                            self.max_epochs - 1))

    def epoch_progress(self, e):
        return self._starts[np.asarray(e)]


class _Prog:
    def __init__(self, profile):
        self.models = [profile]
        self.submitted_batch = np.array([50])              # nearest run in ratio: 64
        self.names = np.array(["toy-0"], dtype=object)

    def observed_metrics(self, job, progress):
        return observed_metrics(self.models[job], int(self.submitted_batch[job]), progress)


def test_remaining_prior_finished_median_and_fit():
    prof = _Profile(known=10)
    prog, sched, st = _Prog(prof), Optimus(), OptimusState()
    st.progress[0] = 50.0                                  # in epoch 0, nothing observed
    assert sched.remaining(st, prog, 0) == (pytest.approx(50.0), "prior")   # max(1 * 50, 100 - 50)
    st.progress[0] = 250.0                                 # two epochs: still too few to fit
    assert sched.remaining(st, prog, 0) == (pytest.approx(250.0), "prior")
    assert Optimus(prior_multiple=3.0).remaining(st, prog, 0)[0] == pytest.approx(500.0)
    st.finished["toy"] = [2000.0, 2200.0, 2600.0]          # finished jobs of the model: median 2200
    assert sched.remaining(st, prog, 0) == (pytest.approx(1950.0), "finished")
    st.progress[0] = 1000.0 + 1e-6                         # ten epochs seen (epoch 10 is NaN: unread)
    got, src = sched.remaining(st, prog, 0)
    assert src == "fit" and got == pytest.approx(5750.0, rel=1e-3)
    assert st.fits[0][0] == 10 and st.fits[0][1].beta0 == pytest.approx(B0, rel=1e-5)
    x, y = observed_metrics(prof, 50, 1000.0 + 1e-6)
    assert x.tolist() == [100.0 * e for e in range(1, 11)] and np.isfinite(y).all()


def test_observed_metrics_on_a_real_profile_reads_completed_epochs_only():
    w = _sia_or_skip()
    prof = w.profiles["cifar10"]
    e3 = float(prof.epoch_progress(3))
    x, y = observed_metrics(prof, 2500, e3 - 1e-6)          # nearest validated batch in ratio: 2048
    assert x.size == 2
    x, y = observed_metrics(prof, 2500, e3 + 1e-6)
    assert x.size == 3 and x[-1] == pytest.approx(e3)
    np.testing.assert_array_equal(y, prof.validation[2048]["metric"].to_numpy()[:3])
    assert fit_convergence(x, y).sign == -1.0              # accuracy rises


# ------------------------------------------------------------------ allocation
LADDER = [np.array([1, 2, 4])]


def test_marginal_gain_hand_instance():
    # One type, ladder 1, 2, 4 GPUs. Job A: 100 s of work at speedup 1, 2, 4 -> T = 100, 50, 25.
    # Job B: T = 30 at any size (no speedup).
    # First steps (infinite gain) by least T: B (30) then A (100), one GPU each.
    # 4 GPUs, 2 free: A 1->2 gains 50/GPU, A 1->4 needs 3 (no), B gains 0 -> A = 2; 1 free:
    #   A 2->4 needs 2 (no), B 1->2 gains 0 (no job gains) -> A = 2, B = 1, one GPU idle.
    # 5 GPUs, 3 free: A 1->2 gains 50/GPU, 1->4 gains 75/3 = 25/GPU -> A = 2; 2 free: A 2->4
    #   gains 25/2 = 12.5/GPU -> A = 4, B = 1.
    T = np.array([[[100.0, 50.0, 25.0]], [[30.0, 30.0, 30.0]]])
    ty, lev = marginal_gain_allocation(LADDER, T, [4])
    assert ty.tolist() == [0, 0] and LADDER[0][lev].tolist() == [2, 1]
    ty, lev = marginal_gain_allocation(LADDER, T, [5])
    assert LADDER[0][lev].tolist() == [4, 1]


def test_marginal_gain_order_of_first_steps_and_lookahead():
    # 2 GPUs for 3 jobs: unknown speed (NaN) first, then least T: Y (NaN) and Z (T 20) run, X waits.
    T = np.array([[[50.0, 40.0, 30.0]], [[np.nan, np.nan, np.nan]], [[20.0, 15.0, 10.0]]])
    ty, lev = marginal_gain_allocation(LADDER, T, [2])
    assert ty.tolist() == [-1, 0, 0] and lev.tolist() == [-1, 0, 0]    # Y (unknown) never grows
    # One job whose 2-GPU time is no better (a restart bump): it looks past it to 4 GPUs.
    ty, lev = marginal_gain_allocation(LADDER, np.array([[[100.0, 100.0, 40.0]]]), [4])
    assert lev.tolist() == [2]
    # Type choice: its current type when it has room, else the most free GPUs per job.
    two = [np.array([1, 2]), np.array([1, 2])]
    flat = np.full((1, 2, 2), 10.0)
    assert marginal_gain_allocation(two, flat, [2, 2], current_type=[1])[0].tolist() == [1]
    assert marginal_gain_allocation(two, flat, [2, 2], current_type=[-1])[0].tolist() == [0]
    assert marginal_gain_allocation(two, flat, [0, 2], current_type=[0])[0].tolist() == [1]
    three = np.full((3, 2, 2), 10.0)
    assert marginal_gain_allocation(two, three, [4, 2])[0].tolist() == [0, 1, 0]   # 4/1, then 2/1 > 3/2, then 3/2 > 1/2


def test_marginal_gain_refuses_bad_shapes():
    with pytest.raises(ValidationError, match="`time`"):
        marginal_gain_allocation(LADDER, np.zeros((2, 2, 3)), [4])
    with pytest.raises(ValidationError, match="ascending"):
        marginal_gain_allocation([np.array([2, 1])], np.zeros((1, 1, 2)), [4])
    with pytest.raises(ValidationError, match="`current_type`"):
        marginal_gain_allocation(LADDER, np.zeros((1, 1, 3)), [4], current_type=[0, 0])


@pytest.mark.parametrize("seed", range(8))
def test_marginal_gain_random_instances_respect_capacity(seed):
    rng = np.random.default_rng(seed)
    caps = {"a": int(rng.integers(0, 20)), "b": int(rng.integers(1, 30)), "c": int(rng.integers(1, 12))}
    cluster = hs.Cluster(caps)
    cs = configuration_set(cluster, ("a", "b", "c"), gpus_per_node=int(rng.choice([4, 8])))
    levels = [np.sort(cs.gpus[cs.type_index == k]).astype(np.int64) for k in range(3)]
    n, L = int(rng.integers(1, 25)), max(a.size for a in levels)
    T = np.full((n, 3, L), np.inf)
    for j in range(n):
        work = rng.uniform(10, 1000)
        for k in range(3):
            g = levels[k].astype(float)
            speed = g ** rng.uniform(0.2, 1.0) * rng.uniform(0.5, 2.0)
            t = work / speed + rng.uniform(0, 20, g.size) * (rng.random(g.size) < 0.3)
            t[rng.random(g.size) < 0.1] = np.inf                     # cannot run there
            T[j, k, :g.size] = t
        if rng.random() < 0.15:
            T[j, :, :] = np.where(np.isinf(T[j]), np.inf, np.nan)   # unknown speed
    cur = rng.integers(-1, 3, n)
    cap = cluster.capacities(("a", "b", "c")).astype(np.int64)
    ty, lev = marginal_gain_allocation(levels, T, cap, current_type=cur)
    used = np.zeros(3, np.int64)
    for j in range(n):
        assert (ty[j] < 0) == (lev[j] < 0)
        if ty[j] >= 0:
            assert np.isfinite(T[j, ty[j], lev[j]]) or np.isnan(T[j, ty[j], lev[j]])
            used[ty[j]] += levels[ty[j]][lev[j]]
    assert (used <= cap).all(), (used, cap)
    free = cap - used
    for j in range(n):
        if ty[j] < 0:     # left out: no type it can run on had room for its first step
            for k in range(3):
                ok = [i for i in range(levels[k].size) if not np.isposinf(T[j, k, i])]
                assert not ok or levels[k][ok[0]] > free[k]
        elif np.isfinite(T[j, ty[j], lev[j]]):   # greedy ended: no larger level that fits gains
            k, li = ty[j], lev[j]
            for lj in range(li + 1, levels[k].size):
                if levels[k][lj] - levels[k][li] <= free[k] and np.isfinite(T[j, k, lj]):
                    assert T[j, k, lj] >= T[j, k, li]


# ------------------------------------------------------------------ parameters and registry
@pytest.mark.parametrize("kwargs, match", [
    ({"convergence_delta": 0.0}, r"`convergence_delta` must be a number in \(0, 1\); got 0.0"),
    ({"convergence_delta": 1.0}, r"`convergence_delta` must be a number in \(0, 1\)"),
    ({"convergence_delta": float("nan")}, "`convergence_delta`"),
    ({"convergence_delta": "0.1"}, "`convergence_delta`"),
    ({"min_epochs": 2}, r"`min_epochs` must be an integer >= 3; got 2"),
    ({"min_epochs": 3.0}, "`min_epochs`"),
    ({"prior_multiple": 0.5}, r"`prior_multiple` must be a finite number >= 1; got 0.5"),
    ({"prior_multiple": float("inf")}, "`prior_multiple`"),
    ({"restart_aware": 1}, r"`restart_aware` must be True or False; got 1"),
    ({"max_gpus_per_job": 0}, r"`max_gpus_per_job` must be a positive integer; got 0"),
])
def test_bad_parameters(kwargs, match):
    with pytest.raises(ValidationError, match=match):
        Optimus(**kwargs)


def test_registered_and_parameters_round_trip():
    assert ROUND_SCHEDULERS["optimus"] is Optimus and "optimus" in list_schedulers()
    s = make_scheduler("optimus", convergence_delta=0.1, restart_aware=False)
    assert isinstance(s, Optimus) and s.params() == {
        "convergence_delta": 0.1, "min_epochs": 3, "prior_multiple": 2.0, "restart_aware": False,
        "max_gpus_per_job": 64}
    assert set(s.params()) == {f.name for f in dataclasses.fields(Optimus)}
    with pytest.raises(ValidationError, match="no parameter 'delta'"):
        make_scheduler("optimus", delta=0.1)


def test_plan_round_needs_adaptive_jobs_and_its_state():
    w = _sia_or_skip()
    from hetsched.inputs.adaptive import AdaptiveProgress
    cluster = _small_cluster()
    view = _view(AdaptiveProgress(_subset(w, [0]), cluster), cluster, np.array([True]), np.zeros(1),
                 np.zeros(1), 0.0, 0, 60.0)
    with pytest.raises(ValidationError, match="OptimusState"):
        Optimus().plan_round(view, object())
    with pytest.raises(ValidationError, match="AdaptiveWorkload"):
        Optimus().plan_round(dataclasses.replace(view, context={}), Optimus().initial_state())


# ------------------------------------------------------------------ real workload
def _small_cluster() -> hs.Cluster:
    return hs.Cluster.from_servers({"t4": 8, "rtx": 16, "a100": 8}, gpus_per_server={"t4": 4, "rtx": 8, "a100": 8})


def _subset(w, rows, arrivals=None):
    from hetsched.inputs.adaptive import AdaptiveWorkload
    from hetsched.inputs.traces.sia import AdaptiveJobTable
    frame = w.table.frame.iloc[list(rows)].reset_index(drop=True).copy()
    frame["name"] = [f"{m}-{i}" for i, m in enumerate(frame["model"])]
    if arrivals is not None:
        frame["arrival"] = np.asarray(arrivals, dtype=float)
    return AdaptiveWorkload(AdaptiveJobTable(frame, w.table.source), w.profiles, source="test")


def test_end_to_end_small_workload_every_job_completes_at_its_submitted_batch():
    w = _subset(_sia_or_skip(), range(8))
    cluster = _small_cluster()
    res = hs.simulate(make_scheduler("optimus"), w, cluster,
                      options=hs.SimOptions(round_seconds=60.0, record_runs=True))
    assert bool(res.jobs["completed"].all()), res.jobs[["job_id", "completed"]]
    runs = res.runs
    submitted = w.table.frame["batch_size"].to_numpy()
    assert (runs["batch_size"].to_numpy() == submitted[runs["job"].to_numpy()]).all()
    cap = cluster.capacities(("t4", "rtx", "a100"))       # the rows' type columns
    per = runs.groupby(["round", "gpu_type"])["gpus"].sum()
    for (_, k), g in per.items():
        assert g <= cap[int(k)]
    assert res.summary["avg_jct_s"] > 0 and math.isfinite(res.summary["makespan_s"])


def _view(prog, cluster, active, done, arrival, now, rnd, L):
    jobs = np.flatnonzero(active).astype(np.int64)
    m = len(prog.types)
    return RoundView(now=now, round_index=rnd, round_seconds=L, cluster=cluster, gpu_types=prog.types,
                     capacities=prog.capacity.copy(), jobs=jobs, throughputs=np.ones((jobs.size, m)),
                     unconsolidated=None, scale_factors=np.ones(jobs.size, np.int64), weights=np.ones(jobs.size),
                     remaining=prog.completion[jobs] - done[jobs], arrival=arrival[jobs],
                     isolated_time=np.zeros(jobs.size), context={"adaptive": prog})


def _drive(sched, w, cluster, scale, rounds=40, L=300.0):
    """A minimal round loop: the scheduler sees an AdaptiveProgress whose ``completion`` is
    the truth's times ``scale`` (per job; and ``remaining`` to match, so its progress so far
    is the same), while jobs advance and finish by the truth. Returns the rows of every round
    and the scheduler's estimates."""
    from hetsched.inputs.adaptive import AdaptiveProgress
    truth, seen = AdaptiveProgress(w, cluster), AdaptiveProgress(w, cluster)
    seen.completion = truth.completion * scale
    arrival = w.table.frame["arrival"].to_numpy(float)
    done = np.zeros(w.n_jobs)
    state = sched.initial_state(0.0)
    rows_log, est_log = [], []
    for rnd in range(rounds):
        now = rnd * L
        active = (arrival <= now) & (done < truth.completion)
        if not active.any():
            if (done >= truth.completion).all():
                break
            continue
        view = _view(seen, cluster, active, done, arrival, now, rnd, L)
        rows = sched.plan_round(view, state)
        check_rows(rows, view)
        secs = np.full(rows.n_rows, L)
        rate = truth.average_rates(rows.job, rows.gpu_type, rows.gpus, rows.batch_size, np.zeros(rows.n_rows, bool),
                                   done[rows.job], secs)
        done[rows.job] = np.minimum(done[rows.job] + rate * secs, truth.completion[rows.job])
        done[done >= truth.completion - 1e-6] = truth.completion[done >= truth.completion - 1e-6]
        state = sched.record_round(state, rows.take(np.arange(rows.n_rows), rate=rate, spread_rate=rate), secs)
        rows_log.append((rnd, rows.job.tolist(), rows.gpu_type.tolist(), rows.gpus.tolist(), rows.batch_size.tolist()))
        est_log.append({j: state.estimates[j] for j in view.jobs.tolist()})
    return rows_log, est_log


@dataclasses.dataclass(frozen=True)
class _Cheater(Optimus):
    """Reads the truth's completion: what the check below must catch."""

    def remaining(self, state, prog, job):
        return max(float(prog.completion[job]) - state.progress[job], 1e-9), "prior"


def test_decisions_do_not_depend_on_the_truths_completion():
    base = _sia_or_skip()
    # cifar10 jobs and a deepspeech2 job; a late cifar10 job arrives after the first ones ended
    w = _subset(base, [0, 2, 1, 4, 6], arrivals=[0.0, 0.0, 100.0, 200.0, 6000.0])
    cluster = hs.Cluster.from_servers({"t4": 4, "rtx": 16}, gpus_per_server={"t4": 4, "rtx": 8})  # jobs share types
    scale = np.array([1.0, 6.0, 2.0, 1.0, 4.0])          # a different "truth" per job
    rows1, est1 = _drive(Optimus(), w, cluster, 1.0)
    rows5, est5 = _drive(Optimus(), w, cluster, scale)
    assert rows1 == rows5
    for a, b in zip(est1, est5):
        assert a.keys() == b.keys()
        for j in a:
            assert a[j][1] == b[j][1] and a[j][0] == pytest.approx(b[j][0], rel=1e-9)
    sources = {src for e in est1 for _, src in e.values()}
    assert sources == {"prior", "fit", "finished"}     # every path of the estimate was taken
    # the same check catches a scheduler that reads the truth's completion
    cheat1, _ = _drive(_Cheater(), w, cluster, 1.0, rounds=12)
    cheat5, _ = _drive(_Cheater(), w, cluster, scale, rounds=12)
    assert cheat1 != cheat5
