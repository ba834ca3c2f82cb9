"""preset="gavel": Gavel's re-solve gate and waiting arrivals, derived by hand."""

from __future__ import annotations

import pytest
from sim_checker import check_simulation

import hetsched as hs
from hetsched.errors import ValidationError
from hetsched.sim import SimOptions

# a: long job at t=0; b: 360 steps (360 s at 1 step/s) arriving at t=100; two GPUs.
JOBS = hs.JobSet([[1.0], [1.0]], gpu_types=["v100"], ids=["a", "b"], arrival_times=[0.0, 100.0],
                 steps_remaining=[100000.0, 360.0])
CLUSTER = hs.Cluster({"v100": 2})


def _start(res, job):
    return float(res.jobs.set_index("job_id").loc[job, "start_s"])


def test_default_solves_at_the_next_round() -> None:
    # b waits for the round boundary at 360, then a re-solve gives it the idle GPU.
    res = hs.simulate("max_min_fairness", JOBS, CLUSTER)
    assert _start(res, "b") == 360.0
    assert check_simulation(res) == []


def test_gavel_preset_arrival_waits_for_the_reset_interval() -> None:
    # Last solve at 0; the next is allowed at the first round boundary at least 1,920 s later:
    # 6 x 360 = 2,160. Until then b has no allocation and waits although a GPU is idle.
    res = hs.simulate("max_min_fairness", JOBS, CLUSTER, preset="gavel")
    assert _start(res, "b") == 2160.0
    assert float(res.jobs.set_index("job_id").loc["b", "finish_s"]) == 2520.0
    # solves: at 0; at 2,160 (b arrived); b's completion at 2,520 waits for 2,160 + 1,920 -> 4,320
    assert res.rounds.loc[res.rounds["solved"], "start_s"].tolist() == [0.0, 2160.0, 4320.0]
    assert res.config["min_solve_interval"] == 1920.0 and res.config["arrivals"] == "wait"
    assert check_simulation(res) == []


def test_explicit_keywords_override_the_preset() -> None:
    res = hs.simulate("max_min_fairness", JOBS, CLUSTER, options=hs.SimOptions.preset("gavel", min_solve_interval=0.0))
    assert _start(res, "b") == 360.0
    res = hs.simulate("max_min_fairness", JOBS, CLUSTER, options=hs.SimOptions.preset("gavel", round_seconds=600.0))
    assert _start(res, "b") == 2400.0   # first boundary >= 1,920 s with 600 s rounds


def test_carved_arrivals_with_the_gate() -> None:
    # the gate alone: b gets a carved share at its first boundary (360) without a re-solve
    res = hs.simulate("max_min_fairness", JOBS, CLUSTER, options=hs.SimOptions(min_solve_interval=1920.0))
    assert _start(res, "b") == 360.0
    assert res.rounds["solved"].iloc[1] == False  # noqa: E712 - numpy bool


def test_a_drained_cluster_solves_at_once() -> None:
    # Gavel forces a reset when nothing is queued or running: a job arriving after the
    # cluster drained starts at its arrival even inside the interval.
    jobs = hs.JobSet([[1.0], [1.0]], gpu_types=["v100"], ids=["a", "b"], arrival_times=[0.0, 500.0],
                     steps_remaining=[100.0, 100.0])
    res = hs.simulate("max_min_fairness", jobs, CLUSTER, preset="gavel")
    assert _start(res, "b") == 500.0


@pytest.mark.parametrize(("kw", "match"), [
    ({"preset": "slurm"}, r"`preset` must be one of \['gavel', 'hetsched'\]; got 'slurm'"),
    ({"preset": "gavel", "options": SimOptions()}, "give `preset` or `options`, not both"),
    ({"arrivals": "queue"}, r"`arrivals` must be one of \['carve', 'wait'\]; got 'queue'"),
    ({"min_solve_interval": -1.0}, "`min_solve_interval` must be a finite number of seconds >= 0; got -1.0"),
    ({"min_solve_interval": float("nan")}, "`min_solve_interval` must be a finite number"),
])
def test_bad_preset_options(kw, match) -> None:
    with pytest.raises(ValidationError, match=match):
        hs.simulate("max_min_fairness", JOBS, CLUSTER, **kw)
