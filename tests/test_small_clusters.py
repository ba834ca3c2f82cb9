"""Small clusters (issue 30, item 7): a sweep on 4 GPUs per type failed every row because the
default generator drew 8-GPU gangs, and the plot step's error named an internal variable
(``sweep_df``). The generator now caps gangs at what the cluster it is given can run, and says so."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import hetsched as hs
from hetsched.cli import main
from hetsched.errors import ValidationError

SMALL = {"v100": 4, "p100": 4, "k80": 4}       # the cluster: 4 GPUs per type


def test_uncapped_draw_has_gangs_the_small_cluster_cannot_run() -> None:
    """The original failure: the default mix draws 8-GPU jobs, which 4 GPUs per type cannot run."""
    w = hs.generate_workload(200, rate_per_hour=4.0, seed=0)
    assert (w.jobs.scale_factors == 8).any()
    with pytest.raises(ValidationError, match="asks for 8 GPUs"):
        hs.simulate("max_min_fairness", w, hs.Cluster(SMALL))


def test_generator_caps_gangs_at_the_cluster_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    base = hs.generate_workload(200, rate_per_hour=4.0, seed=0)
    with caplog.at_level(logging.WARNING, logger="hetsched"):
        w = hs.generate_workload(200, rate_per_hour=4.0, seed=0, cluster=hs.Cluster(SMALL))
    assert w.jobs.scale_factors.max() == 4
    assert any("capped at 4 GPUs" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)
    cap = w.meta["scale_factor_cap"]
    assert cap["max_gpus"] == 4 and cap["largest_type_gpus"] == 4 and cap["moved"] == {"8": 0.05}
    assert "capped at 4 GPUs" in w.meta["notes"][0]
    assert w.meta["scale_factor_probs"] == {"1": 0.7, "2": 0.1, "4": pytest.approx(0.2)}
    # the same stream: every job that was not an 8-GPU gang is the same job; the gangs became 4-GPU jobs
    eight = base.jobs.scale_factors == 8
    assert np.array_equal(w.jobs.scale_factors[eight], np.full(eight.sum(), 4.0))
    assert np.array_equal(w.jobs.scale_factors[~eight], base.jobs.scale_factors[~eight])
    assert np.array_equal(w.catalogue_rows[~eight], base.catalogue_rows[~eight])
    assert np.array_equal(w.arrival_times, base.arrival_times)
    res = hs.simulate("max_min_fairness", w, hs.Cluster(SMALL))
    assert res.summary["n_completed"] == 200


def test_no_cap_no_note_when_the_cluster_runs_every_gang(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="hetsched"):
        w = hs.generate_workload(50, rate_per_hour=4.0, seed=0, cluster=hs.Cluster({"v100": 8, "p100": 2, "k80": 1}))
    assert "scale_factor_cap" not in w.meta and "notes" not in w.meta and not caplog.records
    same = hs.generate_workload(50, rate_per_hour=4.0, seed=0)
    assert np.array_equal(w.jobs.scale_factors, same.jobs.scale_factors)
    # servers do not cap: a gang spreads over several 4-GPU servers of its type
    topo = hs.Cluster.from_servers({"v100": 8, "p100": 8, "k80": 8}, gpus_per_server=4)
    assert "notes" not in hs.generate_workload(50, rate_per_hour=4.0, seed=0, cluster=topo).meta
    # a cluster of 2 per type: 4- and 8-GPU jobs become 2-GPU jobs
    two = hs.generate_workload(100, rate_per_hour=4.0, seed=0, cluster=hs.Cluster({"v100": 2, "k80": 2}),
                               gpu_types=["v100", "k80"])
    assert two.jobs.scale_factors.max() == 2 and two.meta["scale_factor_cap"]["moved"] == {"4": 0.15, "8": 0.05}
    with pytest.raises(ValidationError, match="`cluster` must be a hetsched.Cluster"):
        hs.generate_workload(5, rate_per_hour=4.0, cluster={"v100": 4})


def test_simulate_and_sweep_generate_for_their_cluster() -> None:
    cluster = hs.Cluster(SMALL)
    res = hs.simulate("max_min_fairness", {"n_jobs": 200, "rate_per_hour": 4.0}, cluster)
    assert res.summary["n_completed"] == 200
    df = hs.sweep({"policy": "max_min_fairness", "load": [2.0, 4.0], "seed": 0, "n_jobs": 200, "cluster": SMALL},
                  max_workers=1)
    assert (df["error"] == "").all(), df["error"].tolist()
    assert df["n_completed"].tolist() == [200, 200]


def test_cli_sweep_on_four_gpus_per_type(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The exact case of the issue: ``python -m hetsched sweep`` on 4 GPUs per type (default 200
    jobs, loads 2 and 4) with the plot step."""
    matplotlib = pytest.importorskip("matplotlib")   # the plot extra (installed by the test command)
    matplotlib.use("Agg")
    out = tmp_path / "sw"
    assert main(["sweep", "--cluster", "v100=4,p100=4,k80=4", "--workers", "1", "--no-progress", "--out", str(out),
                 "--plot"]) == 0
    cap = capsys.readouterr()
    assert "capped at 4 GPUs" in cap.err
    df = pd.read_csv(out / "sweep.csv", keep_default_na=False)
    assert (df["error"] == "").all() and (df["n_completed"] == 200).all()
    assert (out / "jct_vs_load.png").is_file()


def _failed_sweep_csv(path: Path) -> Path:
    path.mkdir()
    pd.DataFrame({"run": [0, 1], "policy": ["max_min_fairness"] * 2, "load": [2.0, 4.0], "seed": [0, 0],
                  "error": ["ValidationError: job 'j26' asks for 8 GPUs but the largest GPU type it can run on "
                            "('v100') has 4 (6 such job(s))."] * 2}).to_csv(path / "sweep.csv", index=False)
    return path


def test_plot_of_a_failed_sweep_names_the_failure_not_a_variable(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """``plot`` of the issue's sweep (every row failed) said "`sweep_df` has no column
    'avg_jct_hours'"; it now says that every run failed, with the first error and the file."""
    d = _failed_sweep_csv(tmp_path / "sw")
    assert main(["plot", str(d), "--out", str(tmp_path / "fig.png")]) == 2
    err = capsys.readouterr().err
    assert "sweep_df" not in err
    assert "every run of the sweep failed (2 run(s))" in err and "asks for 8 GPUs" in err and "sweep.csv" in err
    from hetsched.sim import plots

    with pytest.raises(ValidationError) as info:
        plots.jct_vs_load(pd.read_csv(d / "sweep.csv"))
    assert "sweep_df" not in str(info.value)
    with pytest.raises(ValidationError, match="the sweep table has no column 'avg_jct_hours'") as info:
        plots.jct_vs_load(pd.DataFrame({"load": [1.0], "policy": ["fifo"]}))
    with pytest.raises(ValidationError, match="needs the table hetsched.sweep\\(\\) returns"):
        plots.jct_vs_load([1, 2])


def test_sweep_plot_when_every_run_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sw"
    assert main(["sweep", "--cluster", "v100=0,p100=0,k80=0", "--jobs", "3", "--workers", "1", "--no-progress",
                 "--out", str(out), "--plot"]) == 1
    err = capsys.readouterr().err
    assert "no figure written: every run of the sweep failed (2)" in err and "sweep_df" not in err
    assert (out / "sweep.csv").is_file() and not (out / "jct_vs_load.png").exists()
