"""No text overlaps in any figure hetsched writes (issue 30, item 9).

The checker (:func:`hetsched.sim.figure_check.overlapping_text`) is tested on figures made
bad on purpose (a legend over the title, crowded x tick labels, a legend over the bars, a
caption cut off) and on a good one. Then every figure the command line writes is checked
as it is saved, at the resolution it is saved with: ``plot`` (each kind, one run and
several), ``sweep --plot`` and ``plot SWEEP`` (error bars offset per series), ``reproduce``
(a quick run through the command, and each experiment's figure drawn from the results
committed under ``benchmarks/results/reproduce``, the figures in ``docs/img``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib")
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from hetsched.cli import main  # noqa: E402
from hetsched.reproduce import EXPERIMENTS  # noqa: E402
from hetsched.reproduce.base import read_result  # noqa: E402
from hetsched.sim.figure_check import overlapping_text  # noqa: E402
from hetsched.sim.figure_layout import caption, dodge, wrap_label  # noqa: E402

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "reproduce"
SIM = ["simulate", "--jobs", "12", "--rate", "10", "--cluster", "v100=8,k80=8", "--long-job-prob", "0",
       "--no-progress"]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture
def saved(monkeypatch) -> dict[str, list[tuple[str, str]]]:
    """Every figure saved while the test runs: file name -> what the checker finds, at the
    resolution it was saved with."""
    found: dict[str, list[tuple[str, str]]] = {}
    original = Figure.savefig

    def savefig(self: Figure, fname, *args, **kwargs):
        found[Path(fname).name] = overlapping_text(self, dpi=kwargs.get("dpi"))
        return original(self, fname, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", savefig)
    return found


# --------------------------------------------------------------------------- the checker
def _line_figure(**legend):
    fig, ax = plt.subplots(figsize=(4, 3), layout="constrained")
    ax.plot([0, 1], [0, 1], label="a rising line")
    ax.plot([0, 1], [1, 0], label="a falling line")
    ax.set_title("a title over the data")
    ax.set_xlabel("x")
    ax.legend(**legend)
    return fig


def test_checker_passes_a_good_figure() -> None:
    fig = _line_figure(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    caption(fig, "a caption line under everything, long enough to be wrapped onto a second line by the helper")
    assert overlapping_text(fig) == []
    assert overlapping_text(fig, dpi=150) == []


def test_checker_finds_a_legend_over_the_title() -> None:
    fig = _line_figure(loc="lower left", bbox_to_anchor=(0.0, 0.97), ncol=2)
    found = overlapping_text(fig, legends_inside=True)
    assert any("title" in a + b and "legend" in a + b for a, b in found), found


def test_checker_finds_tick_labels_that_run_together() -> None:
    fig, ax = plt.subplots(figsize=(3, 2), layout="constrained")
    names = [f"a_rather_long_policy_name_{i}" for i in range(5)]
    ax.bar(range(5), [1, 2, 3, 2, 1])
    ax.set_xticks(range(5), names)
    found = overlapping_text(fig)
    assert any("x tick label" in a and "x tick label" in b for a, b in found), found
    # wrapped to the width each gets, they stand apart
    ax.set_xticks(range(5), [wrap_label(n.replace("_", " "), 5) for n in names], fontsize=5)
    assert not [p for p in overlapping_text(fig) if "tick" in p[0] and "tick" in p[1]]


def test_checker_finds_a_legend_over_the_data_and_text_off_the_page() -> None:
    fig = _line_figure(loc="center")
    assert ("legend (axes 0)", "data area (axes 0)") in overlapping_text(fig)
    assert overlapping_text(fig, legends_inside=True) == []
    fig = _line_figure(loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.text(0.7, 0.5, "a note that runs past the right edge of the figure")
    assert any(b == "outside the figure" and "a note" in a for a, b in overlapping_text(fig))


def test_dodge_centres_the_series_on_the_true_x() -> None:
    x = np.array([1.0, 2.0, 4.0])
    shifted = [dodge(x, i, 3) for i in range(3)]
    assert np.allclose(np.mean(shifted, axis=0), x)
    assert np.allclose(shifted[1], x) and np.all(shifted[0] < x) and np.all(shifted[2] > x)
    assert np.allclose(shifted[2] - x, 0.25 / 3)          # 1/4 of the smallest gap, over 3 series
    assert np.allclose(dodge(x, 1, 2, log=True) / x, 1.04 ** 0.5)


# ------------------------------------------------------------------ figures of the CLI
def test_plot_command_figures_do_not_overlap(tmp_path: Path, saved, capsys) -> None:
    runs = []
    for name, extra in (("mmf", ["--policy", "max_min_fairness"]), ("fifo", ["--policy", "fifo", "--seed", "1"])):
        assert main([*SIM, *extra, "--out", str(tmp_path / name)]) == 0
        runs.append(str(tmp_path / name))
    assert main(["plot", *runs, "--out", str(tmp_path / "two")]) == 0
    assert main(["plot", runs[0], "--out", str(tmp_path / "one")]) == 0        # one run: utilization_over_time
    capsys.readouterr()
    assert sorted(saved) == ["ftf_cdf.png", "jct_cdf.png", "solver_time.png", "utilization.png"]
    assert len(saved) == 4 and all(v == [] for v in saved.values()), saved


def test_sweep_figure_offsets_error_bars_and_does_not_overlap(tmp_path: Path, saved, capsys) -> None:
    out = tmp_path / "sw"
    assert main(["sweep", "--policies", "fifo,max_min_fairness", "--loads", "6,12", "--seeds", "0,1", "--jobs", "8",
                 "--long-job-prob", "0", "--workers", "1", "--cluster", "v100=4,k80=4", "--out", str(out),
                 "--no-progress", "--plot"]) == 0
    assert saved == {"jct_vs_load.png": []}
    saved.clear()
    assert main(["plot", str(out), "--out", str(tmp_path / "figs")]) == 0
    assert saved == {"jct_vs_load.png": []}
    capsys.readouterr()
    # the two policies' points stand 1/8 of the load step apart, either side of the true load
    import pandas as pd

    from hetsched.sim import plots

    ax = plots.jct_vs_load(pd.read_csv(out / "sweep.csv"))
    xs = [line.get_xdata() for line in ax.get_lines() if line.get_marker() == "o"]
    assert len(xs) == 2 and np.allclose(xs[0], [6 - 0.375, 12 - 0.375]) and np.allclose(xs[1], [6 + 0.375, 12 + 0.375])
    setup = ax.figure.get_supxlabel().replace("\u00a0", " ")
    assert "seeds 0-1" in setup and "cluster v100=4, k80=4" in setup.lower()


def test_reproduce_command_figure_does_not_overlap(tmp_path: Path, saved, capsys) -> None:
    assert main(["reproduce", "--quick", "sia_elastic", "--out", str(tmp_path), "--workers", "1"]) == 0
    capsys.readouterr()
    assert saved == {"reproduce_sia_elastic.png": []}


def _committed(name: str):
    if not (RESULTS / f"{name}_summary.csv").is_file():
        pytest.skip(f"no committed results of {name} in {RESULTS}")
    return read_result(name, RESULTS)


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_reproduce_figures_of_the_committed_results_do_not_overlap(name: str) -> None:
    """The figures in docs/img, drawn again from the results they were drawn from."""
    fig = EXPERIMENTS[name].plot(_committed(name))
    assert overlapping_text(fig, dpi=110) == []
    assert fig.get_supxlabel()                                  # the setup, in a caption


def test_las_figure_marks_saturated_points_and_does_not_overlap() -> None:
    result = _committed("gavel_fig9")
    s = result.summary
    s.loc[(s["policy"] == "agnostic") & (s["load"] == s["load"].max()), "saturated"] = True
    fig = EXPERIMENTS["gavel_fig9"].plot(result)
    assert overlapping_text(fig, dpi=110) == []
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["aware", "agnostic", "did not drain"]
