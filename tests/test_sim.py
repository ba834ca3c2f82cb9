"""Tests of the simulator loop (hetsched.sim.simulate): hand-derived cases, conservation
checked by an independent checker over the run log, determinism, bad input."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from sim_checker import check_simulation

import hetsched as hs
from hetsched.errors import ValidationError
from hetsched.policies import MaxMinFairness
from hetsched.sim import SimulationResult, generate_workload, simulate

TIMING_COLS = ("solve_s", "plan_s", "place_s")


def one_job(T, steps, arrival=0.0, gpu_types=("v100", "k80"), scale=1):
    return hs.JobSet([T], gpu_types=list(gpu_types), steps_remaining=[steps], arrival_times=[arrival],
                     scale_factors=[scale])


# ------------------------------------------------------------------ hand-derived cases
@pytest.mark.parametrize("mechanism", ["rounds", "ideal"])
@pytest.mark.parametrize("steps,arrival", [(7200.0, 0.0), (1000.0, 50.0), (12345.0, 1000.0)])
def test_one_job_on_idle_cluster_runs_at_its_best_throughput(mechanism, steps, arrival):
    # The job arrives at an idle cluster, so its first round starts at its arrival; it runs
    # on the fastest type every round and finishes inside its last round at the exact time:
    # JCT = steps / best throughput, no rounding (rounding appears only for jobs that
    # arrive while a round is running: they wait for the next round boundary).
    res = simulate("max_min_fairness", one_job([3.0, 1.0], steps, arrival), hs.Cluster({"v100": 1, "k80": 2}),
                   options=hs.SimOptions(mechanism=mechanism))
    row = res.jobs.iloc[0]
    assert row["jct_s"] == pytest.approx(steps / 3.0, rel=1e-12)
    assert row["finish_s"] == pytest.approx(arrival + steps / 3.0, rel=1e-12)
    assert row["queueing_delay_s"] == 0.0
    assert res.summary["n_rounds"] == math.ceil(steps / 3.0 / 360.0)
    assert check_simulation(res) == []


def test_multi_gpu_job_uses_its_gang_throughput():
    jobs = one_job([8.0, 2.0], 8000.0, scale=4)
    res = simulate("max_min_fairness", jobs, hs.Cluster({"v100": 4, "k80": 8}))
    assert res.jobs["jct_s"].iloc[0] == pytest.approx(1000.0)
    assert res.jobs["gpu_seconds_v100"].iloc[0] == pytest.approx(4 * 1000.0)
    assert res.summary["gpu_hours_v100"] == pytest.approx(4000.0 / 3600)


@pytest.mark.parametrize("mechanism", ["rounds", "ideal"])
def test_two_jobs_sharing_one_gpu_hand_derived(mechanism):
    # One GPU. A (3600 s of work) arrives at 0 and runs alone in round [0, 360). B (360 s)
    # arrives at 100 and joins at the boundary 360; max-min gives each X = 1/2.
    # rounds: at 360 the shares are reset, both entries have infinite priority and equal
    #   deficits; the tie goes to the job that has waited longer: B (260 s since it arrived)
    #   over A (it just ran). B runs [360, 720) and finishes at 720 (JCT 620);
    # ideal: both run at half speed from 360; B's 360 s of work take 720 s -> 1080 (JCT 980).
    # Either way A has 3,240 s of work left after 360 s and the GPU gives it 3,600 s in
    # [360, 3960): A finishes at 3960.
    jobs = hs.JobSet([[1.0], [1.0]], gpu_types=["v100"], ids=["A", "B"], steps_remaining=[3600.0, 360.0],
                     arrival_times=[0.0, 100.0])
    res = simulate("max_min_fairness", jobs, hs.Cluster({"v100": 1}), options=hs.SimOptions(mechanism=mechanism))
    j = res.jobs.set_index("job_id")
    b_finish = 720.0 if mechanism == "rounds" else 1080.0
    assert j.loc["B", "finish_s"] == pytest.approx(b_finish)
    assert j.loc["B", "jct_s"] == pytest.approx(b_finish - 100.0)
    assert j.loc["A", "finish_s"] == pytest.approx(3960.0)
    assert check_simulation(res) == []


def test_isolated_policy_in_ideal_mode_has_ftf_one():
    # Under the isolated policy every job receives exactly its 1/n share, which is what the
    # finish-time-fairness denominator measures: rho = 1 for every job that starts at a round
    # boundary (here all arrive at 0).
    rng = np.random.default_rng(3)
    T = rng.uniform(0.5, 3.0, (6, 2))
    jobs = hs.JobSet(T, gpu_types=["a", "b"], steps_remaining=rng.uniform(1, 5, 6) * 3600, arrival_times=np.zeros(6))
    res = simulate("isolated", jobs, hs.Cluster({"a": 3, "b": 3}), options=hs.SimOptions(mechanism="ideal"))
    assert np.allclose(res.jobs["ftf"], 1.0, rtol=1e-9)
    assert res.summary["worst_ftf"] == pytest.approx(1.0)


def test_ideal_and_rounds_agree_within_a_bound_that_shrinks_with_the_round():
    # Measured (6 random instances, 12 single-GPU jobs, staggered arrivals, 2+3 GPUs):
    # max_j |JCT_rounds - JCT_ideal| <= 6.3 L for L in {720, 180, 45} s; asserted <= 8 L.
    for seed in (1,):
        rng = np.random.default_rng(seed)
        n = 12
        jobs = hs.JobSet(rng.uniform(0.5, 2, (n, 2)), gpu_types=["a", "b"], steps_remaining=rng.uniform(1, 8, n) * 3600,
                         arrival_times=np.sort(rng.uniform(0, 4 * 3600, n)))
        cl = hs.Cluster({"a": 2, "b": 3})
        worst = {}
        for L in (720.0, 45.0):
            r = simulate("max_min_fairness", jobs, cl, options=hs.SimOptions(round_seconds=L))
            i = simulate("max_min_fairness", jobs, cl, options=hs.SimOptions(mechanism="ideal", round_seconds=L))
            worst[L] = float(np.abs(r.jobs["jct_s"] - i.jobs["jct_s"]).max())
            assert worst[L] <= 8 * L, (seed, L, worst[L])
        assert worst[45.0] < worst[720.0]


# ------------------------------------------------------------------ conservation
@pytest.fixture(scope="module")
def placed_run() -> SimulationResult:
    tr = generate_workload(60, rate_per_hour=12.0, seed=4, long_job_prob=0.05)
    cluster = hs.Cluster.from_servers({"v100": 12, "p100": 8, "k80": 16}, gpus_per_server=4)
    return simulate("max_min_fairness", tr, cluster)


def test_conservation_with_placement(placed_run):
    res = placed_run
    assert res.config["placement"] is True
    assert res.summary["status"] == "drained"
    assert res.summary["n_completed"] == 60
    assert check_simulation(res) == []
    # gangs that placement spread over servers progressed at the unconsolidated throughput
    assert res.runs["spread"].dtype == bool


@pytest.mark.parametrize("policy", [p for p in hs.list_policies() if p != "sia"])
def test_every_policy_conserves_work(policy):
    needs_entities = "entities" in hs.policies.make_policy(policy).requires
    tr = generate_workload(15, rate_per_hour=10.0, seed=1, long_job_prob=0.0, n_entities=3 if needs_entities else None)
    res = simulate(policy, tr, hs.Cluster({"v100": 8, "p100": 4, "k80": 8}))
    assert res.summary["n_completed"] == 15, res.summary["status"]
    assert check_simulation(res) == []


def test_periodic_reallocation_carves_shares_for_arrivals():
    tr = generate_workload(30, rate_per_hour=8.0, seed=2, long_job_prob=0.0)
    res = simulate("max_min_fairness", tr, hs.Cluster({"v100": 8, "p100": 4, "k80": 8}),
                   options=hs.SimOptions(reallocate=1920.0))
    assert res.summary["n_completed"] == 30
    solved = res.rounds[res.rounds["solved"]]
    assert (np.diff(solved["start_s"]) >= 1920.0 - 1e-6).all()
    assert check_simulation(res) == []


def test_checker_catches_a_broken_log(placed_run):
    bad = placed_run.runs.copy()
    bad.loc[bad.index[0], "steps"] += 1.0
    broken = SimulationResult(**{**placed_run.__dict__, "runs": bad})
    assert any("steps" in v for v in check_simulation(broken))
    over = placed_run.runs.copy()
    over["gpus"] = over["gpus"] * 10
    assert any("capacity" in v for v in check_simulation(SimulationResult(**{**placed_run.__dict__, "runs": over})))


# ------------------------------------------------------------------ windows, limits, results
def test_window_and_max_time():
    tr = generate_workload(50, rate_per_hour=6.0, seed=5)
    cl = hs.Cluster({"v100": 8, "p100": 8, "k80": 8})
    res = simulate("max_min_fairness", tr, cl, options=hs.SimOptions(window=(20, 40)))
    assert res.summary["status"] == "window_done"
    assert res.summary["n_measured"] == 20 and res.summary["n_completed"] == 20
    assert res.jobs["in_window"].sum() == 20
    assert res.jobs.loc[res.jobs["in_window"], "completed"].all()
    res_t = simulate("max_min_fairness", tr, cl, options=hs.SimOptions(window=(3600.0, 7200.0), window_unit="seconds"))
    sel = res_t.jobs["in_window"]
    assert ((res_t.jobs.loc[sel, "arrival_s"] >= 3600) & (res_t.jobs.loc[sel, "arrival_s"] < 7200)).all()
    capped = simulate("max_min_fairness", tr, cl, options=hs.SimOptions(max_time=10 * 3600.0))
    assert capped.summary["status"] == "max_time"
    assert capped.summary["n_unfinished"] > 0
    assert not capped.jobs["completed"].all()
    assert check_simulation(capped) == []


def test_determinism_per_seed():
    tr1 = generate_workload(25, rate_per_hour=8.0, seed=7, long_job_prob=0.0)
    tr2 = generate_workload(25, rate_per_hour=8.0, seed=7, long_job_prob=0.0)
    cl = hs.Cluster.from_servers({"v100": 8, "p100": 8, "k80": 8}, gpus_per_server=4)
    a = simulate("finish_time_fairness", tr1, cl, options=hs.SimOptions(seed=7))
    b = simulate("finish_time_fairness", tr2, cl, options=hs.SimOptions(seed=7))
    pd.testing.assert_frame_equal(a.jobs, b.jobs)
    pd.testing.assert_frame_equal(a.rounds.drop(columns=list(TIMING_COLS)), b.rounds.drop(columns=list(TIMING_COLS)))
    pd.testing.assert_frame_equal(a.runs, b.runs)
    c = simulate("max_min_fairness", {"n_jobs": 25, "rate_per_hour": 8.0, "long_job_prob": 0.1}, cl,
                 options=hs.SimOptions(seed=8))
    assert not np.allclose(c.jobs["arrival_s"].to_numpy(), a.jobs["arrival_s"].to_numpy())
    assert a.config["seed"] == 7 and "numpy" in a.versions and "hetsched" in a.versions


def test_result_round_trip_and_utilization(tmp_path, placed_run):
    d = placed_run.to_dir(tmp_path / "out", runs=True)
    for f in ("jobs.csv", "rounds.csv", "summary.json", "runs.csv"):
        assert (d / f).is_file()
    back = SimulationResult.from_dir(d)
    assert back.summary["avg_jct_s"] == pytest.approx(placed_run.summary["avg_jct_s"])
    assert back.config["policy"] == "max_min_fairness"
    u = placed_run.utilization_over_time()
    assert ((u["total"] >= 0) & (u["total"] <= 1 + 1e-9)).all()
    busy = sum(placed_run.rounds[f"gpu_seconds_{t}"].sum() for t in placed_run.gpu_types)
    span = placed_run.summary["sim_end_s"] - placed_run.summary["sim_start_s"]
    assert placed_run.summary["utilization"] == pytest.approx(busy / (36 * span))


def test_progress_callback_and_slo_deadlines():
    seen = []
    tr = generate_workload(10, rate_per_hour=10.0, seed=0, long_job_prob=0.0, slo_factors=(1.0, 50.0),
                          scale_factor_probs={1: 1.0})
    res = simulate("max_min_fairness", tr, hs.Cluster({"v100": 1, "p100": 1, "k80": 1}),
                   options=hs.SimOptions(progress=lambda t, done, total: seen.append((t, done, total))))
    assert seen and seen[-1][1] == 10 and seen[-1][2] == 10
    assert res.summary["slo_jobs"] == 10
    late = res.jobs["finish_s"] > res.jobs["deadline_s"]
    assert (res.jobs["slo_violated"] == late).all()
    assert res.summary["slo_violations"] == int(late.sum())


def test_agnostic_variant_is_recorded():
    tr = generate_workload(10, rate_per_hour=10.0, seed=0, long_job_prob=0.0, scale_factor_probs={1: 1.0})
    res = simulate(MaxMinFairness(heterogeneity_aware=False), tr, hs.Cluster({"v100": 2, "k80": 2}))
    assert res.config["policy"] == "max_min_fairness(heterogeneity_aware=False)"
    assert res.config["policy_params"]["heterogeneity_aware"] is False


# ------------------------------------------------------------------ bad input
def test_empty_workload_is_an_empty_result():
    empty = hs.JobSet(np.zeros((0, 2)), gpu_types=["v100", "k80"], steps_remaining=np.zeros(0))
    res = simulate("max_min_fairness", empty, hs.Cluster({"v100": 1, "k80": 1}))
    assert res.summary["n_jobs"] == 0 and res.summary["n_rounds"] == 0
    assert math.isnan(res.summary["avg_jct_s"])
    assert len(res.jobs) == 0


@pytest.mark.parametrize(
    "arrivals,match",
    [([0.0, 50.0, 10.0], r"non-decreasing.*job 'j2' \(row 2\) arrives at 10.0, before job 'j1' \(row 1\) at 50.0"),
     ([-5.0, 0.0, 1.0], r"finite and non-negative; job 'j0' \(row 0\) has -5.0")],
)
def test_bad_arrivals(arrivals, match):
    jobs = hs.JobSet([[1.0]] * 3, gpu_types=["v100"], ids=["j0", "j1", "j2"], steps_remaining=[10.0] * 3,
                     arrival_times=arrivals)
    with pytest.raises(ValidationError, match=match):
        simulate("max_min_fairness", jobs, hs.Cluster({"v100": 1}))
    # NaN arrivals never get this far: the JobSet itself rejects them
    with pytest.raises(ValidationError, match="arrival_times"):
        hs.JobSet([[1.0]], gpu_types=["v100"], steps_remaining=[1.0], arrival_times=[np.nan])


def test_gpu_demand_larger_than_the_cluster():
    jobs = hs.JobSet([[1.0, 1.0], [2.0, 1.0]], gpu_types=["v100", "k80"], ids=["small", "huge"],
                     scale_factors=[1, 16], steps_remaining=[10.0, 10.0])
    with pytest.raises(ValidationError, match=r"job 'huge' asks for 16 GPUs but the largest GPU type it can run on"):
        simulate("max_min_fairness", jobs, hs.Cluster({"v100": 8, "k80": 4}))


def test_job_that_runs_on_no_cluster_type():
    jobs = hs.JobSet([[0.0, 1.0]], gpu_types=["v100", "tpu"], ids=["x"], steps_remaining=[10.0])
    with pytest.raises(ValidationError, match=r"job 'x' has zero throughput on every GPU type the cluster has"):
        simulate("max_min_fairness", jobs, hs.Cluster({"v100": 2}))


def test_window_that_selects_no_jobs():
    tr = generate_workload(5, rate_per_hour=5.0, seed=0)
    with pytest.raises(ValidationError, match=r"`window` \(10, 20\) \(jobs\) selects no jobs: the trace has 5 jobs"):
        simulate("max_min_fairness", tr, hs.Cluster({"v100": 4, "p100": 4, "k80": 4}),
                 options=hs.SimOptions(window=(10, 20)))


@pytest.mark.parametrize(
    "kwargs,match",
    [({"round_seconds": 0}, "round_seconds"), ({"round_seconds": float("nan")}, "round_seconds"),
     ({"mechanism": "fluid"}, "mechanism"), ({"reallocate": "sometimes"}, "reallocate"),
     ({"reallocate": -5}, "reallocate"), ({"max_time": -1}, "max_time"), ({"rule": "lottery"}, "rule"),
     ({"mechanism": "ideal", "placement": True}, "placement"), ({"window": (5, 1)}, "window"),
     ({"window": (0, 2), "window_unit": "hours"}, "window_unit"), ({"progress": 3}, "progress")],
)
def test_bad_options(kwargs, match):
    tr = generate_workload(3, rate_per_hour=5.0, seed=0)
    with pytest.raises(ValidationError, match=match):
        simulate("max_min_fairness", tr, hs.Cluster({"v100": 4, "p100": 4, "k80": 4}), **kwargs)


def test_bad_workload_and_policy():
    cl = hs.Cluster({"v100": 1})
    with pytest.raises(ValidationError, match="workload"):
        simulate("max_min_fairness", [[1.0]], cl)
    with pytest.raises(ValidationError, match="n_jobs"):
        simulate("max_min_fairness", {"rate_per_hour": 1.0}, cl)
    with pytest.raises(hs.UnknownPolicyError, match="not a known policy"):
        simulate("no_such_policy", generate_workload(2, rate_per_hour=1.0), cl)
    no_steps = hs.JobSet([[1.0]], gpu_types=["v100"])
    with pytest.raises(ValidationError, match="steps_remaining"):
        simulate("max_min_fairness", no_steps, cl)


def test_configuration_policy_runs():
    # Sia used to be rejected by the simulator; its configurations now run as rows
    tr = generate_workload(4, rate_per_hour=5.0, seed=0, long_job_prob=0.0)
    cl = hs.Cluster({"v100": 4, "p100": 4, "k80": 4})
    res = simulate("sia", tr, cl)
    assert res.summary["n_completed"] == 4
    js = hs.JobSet(tr.jobs.with_columns(cl.gpu_types).throughputs, gpu_types=cl.gpu_types, ids=np.arange(4),
                   scale_factors=tr.jobs.scale_factors)
    goodput = hs.policies.Sia().goodput_table(js, cl)  # the policy's input model, per configuration
    bound = lambda j, p, k, g: float(goodput.loc[j, (cl.gpu_types[k], g)])  # noqa: E731
    assert check_simulation(res, rate_bound=bound) == []
    assert (res.runs["gpus"] != res.jobs["scale_factor"].to_numpy()[res.runs["job"]]).any()  # elastic


def test_progress_auto_follows_the_cli_rule(monkeypatch):
    """SimOptions(progress="auto") draws a bar only where the CLI would: a terminal, not under CI."""
    import sys as _sys

    from hetsched.sim.options import SimOptions

    class _Tty:
        def isatty(self):
            return True

        def write(self, s):
            return len(s)

        def flush(self):
            pass

    monkeypatch.setattr(_sys, "stderr", _Tty())
    monkeypatch.setenv("CI", "true")
    hook, close = SimOptions(progress="auto").progress_hook(10)
    assert hook is None
    close()
    monkeypatch.setenv("CI", "")
    pytest.importorskip("tqdm")
    hook, close = SimOptions(progress="auto").progress_hook(10)
    assert callable(hook)
    close()
