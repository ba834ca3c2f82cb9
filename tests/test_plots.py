"""Comparison plots: ``python -m hetsched plot RUN_DIR [RUN_DIR ...]``, legends named after
each run's config, the smoothed utilization (checked against hand-computed windows), and
bad arguments (exit 2)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("matplotlib")
import matplotlib

matplotlib.use("Agg")

from hetsched.cli import main
from hetsched.errors import ValidationError
from hetsched.sim import SimulationResult, plots

PNG = b"\x89PNG\r\n\x1a\n"
SIM = ["simulate", "--jobs", "12", "--rate", "10", "--cluster", "v100=8,k80=8", "--long-job-prob", "0",
       "--no-progress"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("runs")
    dirs = {}
    for name, extra in (("mmf", ["--policy", "max_min_fairness"]), ("fifo0", ["--policy", "fifo"]),
                        ("fifo1", ["--policy", "fifo", "--seed", "1"]), ("fifo0_again", ["--policy", "fifo"])):
        assert main([*SIM, *extra, "--out", str(base / name)]) == 0
        dirs[name] = base / name
    return dirs


def _is_png(p: Path) -> bool:
    return p.is_file() and p.read_bytes()[:8] == PNG and p.stat().st_size > 5000


def test_cli_overlays_two_runs(runs, tmp_path, capsys):
    out = tmp_path / "figs"
    assert main(["plot", str(runs["mmf"]), str(runs["fifo0"]), "--out", str(out)]) == 0
    written = capsys.readouterr().out
    for kind in ("jct_cdf", "ftf_cdf", "utilization", "solver_time"):
        assert _is_png(out / f"{kind}.png"), kind
        assert str(out / f"{kind}.png") in written
    # one figure of one kind to a file
    assert main(["plot", str(runs["mmf"]), str(runs["fifo0"]), "--kind", "ftf_cdf", "--out", str(tmp_path / "f.png")]) == 0
    assert _is_png(tmp_path / "f.png")


def test_legends_come_from_each_runs_config(runs):
    results = [SimulationResult.from_dir(runs[k]) for k in ("mmf", "fifo0", "fifo1")]
    labels = plots.run_labels(results)
    # distinct policies keep their label; the two FIFO runs differ in their seed
    assert labels == ["max_min_fairness", "fifo (seed=0)", "fifo (seed=1)"]
    ax = plots.jct_cdf(dict(zip(labels, results)))
    assert [t.get_text() for t in ax.get_legend().get_texts()] == labels
    # identical configs fall back to the names given (the directories)
    same = [SimulationResult.from_dir(runs[k]) for k in ("fifo0", "fifo0_again")]
    assert plots.run_labels(same, ["fifo0", "fifo0_again"]) == ["fifo (fifo0)", "fifo (fifo0_again)"]


def test_jct_cdf_lines_are_the_measured_jobs(runs):
    res = SimulationResult.from_dir(runs["mmf"])
    jobs = pd.read_csv(runs["mmf"] / "jobs.csv")
    expect = np.sort(jobs.loc[jobs["in_window"].astype(bool), "jct_s"].to_numpy() / 3600)
    (line,) = plots.jct_cdf({"a": res}).get_lines()
    x, y = line.get_data()
    assert np.allclose(x, expect) and np.allclose(y, np.arange(1, expect.size + 1) / expect.size)


def _fake_result(busy, seconds, capacity=2):
    starts = np.concatenate([[0.0], np.cumsum(seconds)[:-1]])
    rounds = pd.DataFrame({"start_s": starts, "seconds": seconds, "gpu_seconds_v100": busy})
    return SimulationResult(jobs=pd.DataFrame(), rounds=rounds, runs=None, summary={}, config={"policy": "x"},
                            versions={}, gpu_types=("v100",), capacities=np.array([float(capacity)]))


def test_smoothed_utilization_by_hand():
    # three 360 s rounds of 2 GPUs: 720, 0 and 360 busy GPU-seconds -> 1, 0, 0.5
    res = _fake_result([720.0, 0.0, 360.0], [360.0, 360.0, 360.0])
    u, hours = plots.smoothed_utilization(res, window_hours=0.1)  # 6 min: each round alone
    assert hours == pytest.approx(0.1)
    assert u["v100"].tolist() == pytest.approx([1.0, 0.0, 0.5]) and u["total"].tolist() == pytest.approx([1.0, 0.0, 0.5])
    assert u["hours"].tolist() == pytest.approx([0.05, 0.15, 0.25])
    u, _ = plots.smoothed_utilization(res, window_hours=2.0)  # every round in every window
    assert u["v100"].tolist() == pytest.approx([0.5, 0.5, 0.5])
    # unequal rounds are weighted by their length: (720 + 90) / (2 x (360 + 90))
    res = _fake_result([720.0, 90.0], [360.0, 90.0])
    u, _ = plots.smoothed_utilization(res, window_hours=1.0)
    assert u["v100"].tolist() == pytest.approx([0.9, 0.9])
    # default window: 1/50 of the span, at least one round
    _, hours = plots.smoothed_utilization(_fake_result([0.0] * 100, [360.0] * 100))
    assert hours == pytest.approx(100 * 360 / 50 / 3600)
    _, hours = plots.smoothed_utilization(_fake_result([0.0] * 3, [360.0] * 3))
    assert hours == pytest.approx(0.1)
    with pytest.raises(ValidationError, match="`window_hours` must be a positive number of hours; got -1"):
        plots.smoothed_utilization(res, window_hours=-1)


def test_utilization_by_type_panels(runs):
    results = {k: SimulationResult.from_dir(runs[k]) for k in ("mmf", "fifo0")}
    fig = plots.utilization_by_type(results, window_hours=0.5)
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert titles == ["v100", "k80", "all GPUs"]
    assert all(len(ax.get_lines()) == 2 for ax in fig.axes if ax.get_visible())
    assert "30 min" in fig._suptitle.get_text()


def test_sweep_directory_plots_jct_vs_load(tmp_path, capsys):
    assert main(["sweep", "--policies", "fifo", "--loads", "6,12", "--jobs", "8", "--long-job-prob", "0",
                 "--workers", "1", "--cluster", "v100=4,k80=4", "--out", str(tmp_path / "sw"), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["plot", str(tmp_path / "sw"), "--out", str(tmp_path / "figs")]) == 0
    assert _is_png(tmp_path / "figs" / "jct_vs_load.png")


@pytest.mark.parametrize(
    "argv,message",
    [
        (["plot", "{missing}", "--out", "{tmp}/x.png"], "which does not exist"),
        (["plot", "{run}", "{tmp}", "--out", "{tmp}/x.png"], "a directory without summary.json or sweep.csv"),
        (["plot", "{run}", "{csv}", "--out", "{tmp}/x.png"], "all simulate --out directories or all sweeps, not both"),
        (["plot", "{run}", "--kind", "jct_vs_load", "--out", "{tmp}/x.png"], "`--kind` 'jct_vs_load' needs a sweep"),
        (["plot", "{csv}", "--kind", "utilization", "--out", "{tmp}/x.png"], "`--kind` 'utilization' needs simulate --out directories"),
        (["plot", "{run}", "--out", "{csv}"], "`--out` must be a directory"),
        (["plot", "{run}", "--window-hours", "0", "--kind", "utilization", "--out", "{tmp}/u.png"], "`window_hours` must be a positive"),
    ],
)
def test_bad_plot_arguments_exit_2(runs, tmp_path, capsys, argv, message):
    csv = tmp_path / "s.csv"
    csv.write_text("policy,load,avg_jct_hours\nfifo,1,2.0\n")
    fill = {"missing": str(tmp_path / "nope"), "tmp": str(tmp_path), "run": str(runs["mmf"]), "csv": str(csv)}
    assert main([a.format(**fill) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err, err
