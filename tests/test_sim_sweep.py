"""sweep() through different executors, TOML experiment files, plots."""

from __future__ import annotations

import concurrent.futures as cf
from pathlib import Path

import pandas as pd
import pytest

import hetsched as hs
from hetsched.errors import ValidationError
from hetsched.policies import MaxMinFairness
from hetsched.sim import (
    ExperimentConfig,
    SimulationResult,
    expand_grid,
    load_config,
    run_config,
    simulate,
    sweep,
)
from hetsched.sim.sweep import TIMING_COLUMNS

GRID = {
    "policy": {"aware": MaxMinFairness(), "agnostic": MaxMinFairness(heterogeneity_aware=False)},
    "load": [6.0, 12.0],
    "seed": [0, 1],
    "n_jobs": 12,
    "long_job_prob": 0.0,
    "cluster": hs.Cluster({"v100": 8, "p100": 4, "k80": 8}),
    "window": (2, 10),
}


def stable(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=[c for c in TIMING_COLUMNS if c in df]).reset_index(drop=True)


@pytest.fixture(scope="module")
def serial() -> pd.DataFrame:
    return sweep(GRID, max_workers=1)


def test_expand_grid_order_and_labels():
    runs = expand_grid(GRID)
    assert len(runs) == 8
    assert [r["labels"]["policy"] for r in runs[:4]] == ["aware"] * 4
    assert [(r["labels"]["load"], r["labels"]["seed"]) for r in runs[:4]] == [(6.0, 0), (6.0, 1), (12.0, 0), (12.0, 1)]
    assert runs[0]["labels"]["cluster"] == "v100=8,p100=4,k80=8"
    assert runs[0]["params"]["window"] == (2, 10)


def test_sweep_is_tidy(serial):
    df = serial
    assert len(df) == 8 and (df["error"] == "").all()
    assert list(df["run"]) == list(range(8))
    for col in ("policy", "load", "seed", "cluster", "avg_jct_s", "makespan_s", "worst_ftf", "utilization", "n_measured"):
        assert col in df
    assert (df["n_measured"] == 8).all()
    # the same seed gives the same trace to both policies: identical arrivals, so the
    # aware and agnostic runs at one (load, seed) differ only by the policy
    a = df[df["policy"] == "aware"].reset_index()
    b = df[df["policy"] == "agnostic"].reset_index()
    assert (a["sim_start_s"] == b["sim_start_s"]).all()


def test_results_identical_whichever_executor(serial):
    with cf.ThreadPoolExecutor(max_workers=2) as ex:
        threads = sweep(GRID, ex)
    procs = sweep(GRID, max_workers=2)  # the default process pool
    pd.testing.assert_frame_equal(stable(serial), stable(threads))
    pd.testing.assert_frame_equal(stable(serial), stable(procs))


def test_dask_executor_if_installed(serial):
    distributed = pytest.importorskip("distributed")
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None) as client:
        df = sweep(GRID, client.get_executor())
    pd.testing.assert_frame_equal(stable(serial), stable(df))


def test_errors_are_reported_per_run_and_time_limits():
    # a cluster without GPUs fails its runs (a small cluster no longer does: the generator caps gangs at it)
    grid = dict(GRID, load=[6.0], seed=0, cluster=[hs.Cluster({"v100": 8, "p100": 4, "k80": 8}), hs.Cluster({"v100": 0})])
    df = sweep(grid, max_workers=1)
    assert (df.loc[df["cluster"] == "v100=0", "error"].str.contains("ValidationError")).all()
    assert (df.loc[df["cluster"] != "v100=0", "error"] == "").all()
    limited = sweep(dict(GRID, load=[6.0], seed=0, max_time=3600.0, window=None), max_workers=1)
    assert (limited["status"] == "max_time").all()


@pytest.mark.parametrize(
    "grid,match",
    [({"policy": "fifo", "cluster": {"v100": 1}}, "load"),
     ({"policy": "fifo", "load": [1.0], "cluster": {"v100": 1}}, "n_jobs"),
     ({"load": [1.0], "n_jobs": 1, "cluster": {"v100": 1}}, "policy"),
     ({"policy": "fifo", "load": [1.0], "n_jobs": 1, "cluster": {"v100": 1}, "speed": 3}, "unknown keys"),
     ({"policy": "fifo", "load": [], "n_jobs": 1, "cluster": {"v100": 1}}, "empty list"),
     ("not a grid", "mapping")],
)
def test_bad_grids(grid, match):
    with pytest.raises(ValidationError, match=match):
        expand_grid(grid)


def test_sweep_over_a_fixed_trace():
    from hetsched.sim import generate_workload

    tr = generate_workload(8, rate_per_hour=8.0, seed=3, long_job_prob=0.0, scale_factor_probs={1: 1.0})
    df = sweep({"policy": ["max_min_fairness", "fifo"], "workload": tr, "cluster": {"v100": 2, "k80": 2}},
               max_workers=1)
    assert df["policy"].tolist() == ["max_min_fairness", "fifo"]
    assert (df["n_completed"] == 8).all()


# ------------------------------------------------------------------------------ TOML
TOML = """
name = "tiny"

[cluster]
v100 = 8
p100 = 4
k80 = 8

[workload]
kind = "generated"
n_jobs = 10
load = {load}
long_job_prob = 0.0

[simulation]
round_seconds = 360
window = [2, 8]
seed = 0

[policies]
aware = "max_min_fairness"
agnostic = {{ name = "max_min_fairness", heterogeneity_aware = false }}
"""


def test_toml_sweep_and_single_run(tmp_path):
    p = tmp_path / "exp.toml"
    p.write_text(TOML.format(load="[6.0, 12.0]"))
    cfg = load_config(p)
    assert isinstance(cfg, ExperimentConfig) and cfg.n_runs == 4
    assert cfg.policies["agnostic"].heterogeneity_aware is False
    df = run_config(cfg, max_workers=1)
    assert isinstance(df, pd.DataFrame) and len(df) == 4 and (df["error"] == "").all()
    single = tmp_path / "one.toml"
    single.write_text(TOML.format(load="6.0").replace('agnostic = {{ name = "max_min_fairness", heterogeneity_aware = false }}', "").replace(
        'agnostic = { name = "max_min_fairness", heterogeneity_aware = false }', ""))
    res = run_config(single)
    assert isinstance(res, SimulationResult)
    same = df[(df["policy"] == "aware") & (df["load"] == 6.0)].iloc[0]
    assert res.summary["avg_jct_s"] == pytest.approx(same["avg_jct_s"])


def test_toml_trace_workload(tmp_path):
    fix = Path(__file__).parent / "fixtures"
    p = tmp_path / "trace.toml"
    p.write_text(f"""
policy = "max_min_fairness"
[cluster]
v100 = 2
p100 = 2
k80 = 2
gpus_per_server = 1
[workload]
kind = "gavel"
path = "{fix / 'gavel_small.trace'}"
throughputs = "{fix / 'gavel_throughputs_small.json'}"
""")
    res = run_config(p)
    assert res.summary["n_completed"] == 4 and res.config["placement"] is True


@pytest.mark.parametrize(
    "text,match",
    [("[cluster]\nv100 = 1\n", "at least one policy"),
     ("policy = 'fifo'\n", r"\[cluster\]"),
     ("policy = 'fifo'\n[cluster]\nv100 = 1\n[workload]\nkind = 'slurm'\n", "kind must be one of"),
     ("policy = 'fifo'\n[cluster]\nv100 = 1\n[weird]\n", "unknown top-level"),
     ("[cluster]\nv100 = 1\n[policies]\nx = { name = 'max_min_fairness', speed = 2 }\n", "not all parameters"),
     ("policy = 'fifo'\n[cluster\n", "invalid TOML")],
)
def test_bad_toml(tmp_path, text, match):
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(ValidationError, match=match):
        load_config(p)


# ------------------------------------------------------------------------------ plots
def test_plots_return_axes(serial):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.axes import Axes

    from hetsched.sim import generate_workload, plots

    tr = generate_workload(20, rate_per_hour=8.0, seed=0, long_job_prob=0.0)
    cl = hs.Cluster({"v100": 8, "p100": 4, "k80": 8})
    a = simulate("max_min_fairness", tr, cl)
    b = simulate(MaxMinFairness(heterogeneity_aware=False), tr, cl)
    for ax in (plots.jct_cdf([a, b]), plots.ftf_cdf({"aware": a, "agnostic": b}), plots.utilization_over_time(a),
               plots.solver_time_vs_size(a), plots.jct_vs_load(serial)):
        assert isinstance(ax, Axes)
        assert ax.get_xlabel() and ax.get_ylabel()
    ax = plots.jct_vs_load(serial)
    assert len(ax.get_legend().get_texts()) == 2
    with pytest.raises(ValidationError, match="no column"):
        plots.jct_vs_load(serial, x="nope")
    import matplotlib.pyplot as plt

    plt.close("all")
