"""The built-in adaptive workload (hetsched.inputs.adaptive_synthetic): its profiles follow
the formula its docstring states (values derived here by hand from that formula), its jobs
are what the docstring says, every adaptive scheduler completes them, bad input is refused."""

from __future__ import annotations

import numpy as np
import pytest

import hetsched as hs
from hetsched.errors import ValidationError
from hetsched.inputs.adaptive_synthetic import (
    SPEED,
    synthetic_adaptive_workload,
    synthetic_profiles,
)
from hetsched.schedulers.names import make_scheduler


def _row(mach, placement: str, local: int):
    p = mach.placements
    hit = p[(p["placement"] == placement) & (p["local_bsz"] == local)]
    assert len(hit) == 1
    return float(hit["step_time"].iloc[0]), float(hit["sync_time"].iloc[0])


def test_times_follow_the_formula() -> None:
    """resnet-s: compute (0.02 + 0.0025 m) / s, sync 0.002 / s on one GPU, 0.05 (1 + 0.1 (K - 2))
    on one node, 0.25 (1 + 0.2 (K - 2)) across nodes; s = the type's speed times a seeded
    factor in [0.8, 1.25]."""
    prof = synthetic_profiles(("t4", "a100"), n_models=1, seed=3)["resnet-s"]
    for t in ("t4", "a100"):
        mach = prof.machines[t]
        step1, sync1 = _row(mach, "1", 64)
        speed = (0.02 + 0.0025 * 64) / (step1 - sync1)
        assert SPEED[t] * 0.8 - 1e-9 <= speed <= SPEED[t] * 1.25 + 1e-9
        assert sync1 == pytest.approx(0.002 / speed)
        step, _ = _row(mach, "1", 16)
        assert step == pytest.approx((0.02 + 0.0025 * 16 + 0.002) / speed)
        _, sync4 = _row(mach, "4", 64)
        assert sync4 == pytest.approx(0.05 * 1.2)
        _, sync22 = _row(mach, "22", 64)
        assert sync22 == pytest.approx(0.25 * 1.4)
    assert prof.machines["t4"].gpus_per_node == 4 and prof.machines["a100"].gpus_per_node == 8
    assert (prof.init_batch_size, prof.max_batch_size, prof.max_epochs) == (64, 512, 10)
    assert prof.completion_progress == 10 * 2000
    assert prof.restart_seconds == 25.0


def test_noise_scale_grows_over_training() -> None:
    """|g|^2 = 1 / (1 + e), var = 4 (1 + e) for resnet-s at every batch."""
    prof = synthetic_profiles(("t4",), n_models=1)["resnet-s"]
    for e in (0, 4, 9):
        sqr, var = prof.grad_stats(np.array([64]), e)
        assert float(np.ravel(sqr)[0]) == pytest.approx(1 / (1 + e))
        assert float(np.ravel(var)[0]) == pytest.approx(4 * (1 + e))


def test_workload_rows() -> None:
    w = synthetic_adaptive_workload(40, seed=5)
    f = w.table.frame
    assert len(f) == 40 and f["arrival"].is_monotonic_increasing and f["arrival"].iloc[0] == 0.0
    assert set(f["num_replicas"]) <= {1, 2, 4}
    for _, r in f.iterrows():
        prof = w.profiles[r["model"]]
        assert r["batch_size"] == min(prof.init_batch_size * r["num_replicas"], prof.max_batch_size)
    same = synthetic_adaptive_workload(40, seed=5).table.frame
    assert f.equals(same)
    assert not f.equals(synthetic_adaptive_workload(40, seed=6).table.frame)


@pytest.mark.parametrize(("name", "seconds"), [("pollux", 60.0), ("sia_adaptive", 60.0), ("optimus", 60.0),
                                               ("max_sum_throughput", 360.0)])
def test_every_adaptive_scheduler_completes_the_jobs(name: str, seconds: float) -> None:
    w = synthetic_adaptive_workload(10, gpu_types=("t4", "v100"), seed=1)
    cluster = hs.Cluster.from_servers({"t4": 8, "v100": 8}, gpus_per_server={"t4": 4, "v100": 8})
    sched = name if name == "max_sum_throughput" else make_scheduler(name)
    res = hs.simulate(sched, w, cluster, options=hs.SimOptions(round_seconds=seconds))
    assert res.summary["n_completed"] == 10


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"gpu_types": ()}, "at least one GPU type"),
    ({"gpu_types": ("t4", "h100")}, "distinct types of"),
    ({"gpu_types": ("t4", "t4")}, "distinct types of"),
    ({"n_models": 0}, "`n_models`"),
    ({"n_models": 5}, "`n_models`"),
    ({"seed": -1}, "`seed`"),
])
def test_bad_profile_arguments(kwargs: dict, match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        synthetic_profiles(**kwargs)


@pytest.mark.parametrize(("kwargs", "match"), [({"n_jobs": 0}, "`n_jobs`"), ({"rate_per_hour": 0.0}, "`rate_per_hour`"),
                                               ({"n_jobs": True}, "`n_jobs`")])
def test_bad_workload_arguments(kwargs: dict, match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        synthetic_adaptive_workload(**kwargs)


def test_demo_prints_the_adaptive_schedulers(capsys: pytest.CaptureFixture[str]) -> None:
    """The demo's adaptive table: a row with numbers for each of the four schedulers."""
    from hetsched.cli import main

    assert main(["demo", "--jobs", "6", "--policies", "fifo"]) == 0
    out = capsys.readouterr().out
    assert "adaptive jobs: 6 jobs of built-in synthetic profiles" in out
    for name in ("sia_adaptive", "pollux", "optimus", "gavel_tunedjobs"):
        row = [ln for ln in out.splitlines() if ln.startswith(name + " ")]
        assert len(row) == 1, name
        assert float(row[0].split()[1]) > 0
