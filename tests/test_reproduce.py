"""python -m hetsched reproduce: the command, its files, argument checks, the aggregations, and
two directions that physics guarantees robustly on small Gavel-setup instances."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hetsched.cli import main
from hetsched.errors import ValidationError
from hetsched.reproduce import EXPERIMENTS, Settings, check_names, find_gavel_table
from hetsched.reproduce.base import throughput_table
from hetsched.reproduce.gavel import FIG8, las_runs, las_summary
from hetsched.reproduce.sia import sia_summary
from hetsched.reproduce.themis import ftf_run

NAMES = ["gavel_fig8", "gavel_fig9", "hived_anomaly", "sia_elastic", "sia_table3", "sia_table3_newtrace", "themis_ftf"]


def test_cli_quick_smallest_experiment_writes_expected_files(tmp_path: Path, capsys) -> None:
    out = tmp_path / "res"
    code = main(["reproduce", "--quick", "sia_elastic", "--out", str(out), "--workers", "1"])
    assert code == 0
    runs = pd.read_csv(out / "sia_elastic.csv", keep_default_na=False)
    assert {"policy", "load", "seed", "restart_seconds", "avg_jct_hours", "p99_jct_s", "makespan_s", "utilization",
            "status", "n_completed", "error", "run_wall_s"} <= set(runs.columns)
    assert sorted(runs["policy"]) == ["gavel", "gavel+packing", "sia"]
    assert (runs["error"] == "").all() and (runs["status"] == "drained").all()
    assert (runs["n_completed"] == 40).all()                      # quick: 40 jobs, every one measured
    summary = pd.read_csv(out / "sia_elastic_summary.csv")
    assert {"policy", "load", "restart_seconds", "seeds", "avg_jct_hours", "sia_reduction"} <= set(summary.columns)
    assert summary.loc[summary["policy"] == "sia", "sia_reduction"].tolist() == [0.0]
    pub = pd.read_csv(out / "sia_elastic_published.csv")
    assert list(pub.columns) == ["claim", "paper_value", "ours", "source"] and pub["source"].str.startswith("https://").all()
    pytest.importorskip("matplotlib")
    assert (out / "reproduce_sia_elastic.png").stat().st_size > 0
    printed = capsys.readouterr().out
    assert "sia_elastic" in printed and "published:" in printed


@pytest.mark.usefixtures("sia_root")     # skips where Sia's artifact data is not on this machine
def test_sia_table3_quick_writes_files_and_adaptive_schedulers_beat_gavel(tmp_path: Path) -> None:
    """Sia's Table 3 direction on the quick workload (Philly workload 1, first 48 jobs): the
    adaptive schedulers (Sia, Pollux) finish jobs sooner on average than Gavel running each
    job at its submitted GPU count and batch size; every job completes."""
    out = tmp_path / "t3"
    assert main(["reproduce", "--quick", "sia_table3", "--out", str(out), "--workers", "1"]) == 0
    runs = pd.read_csv(out / "sia_table3.csv").set_index("scheduler")
    assert sorted(runs.index) == ["gavel", "optimus", "pollux", "sia"]
    assert (runs["n_completed"] == 48).all() and (runs["status"] == "drained").all()
    avg = runs["avg_jct_hours"]
    assert avg["sia"] < avg["gavel"] and avg["pollux"] < avg["gavel"]
    assert runs.loc["gavel", "mean_batch"] != runs.loc["gavel", "mean_batch"]     # NaN: Gavel never picks a batch
    assert runs.loc["sia", "mean_batch"] > 0 and runs.loc["pollux", "mean_batch"] > 0
    pub = pd.read_csv(out / "sia_table3_published.csv")
    assert "order of avg JCT" in set(pub["claim"])


@pytest.mark.usefixtures("sia_root")
def test_sia_table3_newtrace_quick_has_the_papers_order(tmp_path: Path) -> None:
    """Table 3's newTrace half on the quick workload (newTrace workload 1, first 48 jobs):
    Sia < Pollux < Gavel on average JCT, every job completes, the paper's newTrace row is the
    one compared against."""
    from hetsched.reproduce.sia_table3 import PAPER_TABLE3

    out = tmp_path / "nt"
    assert main(["reproduce", "--quick", "sia_table3_newtrace", "--out", str(out), "--workers", "1"]) == 0
    runs = pd.read_csv(out / "sia_table3_newtrace.csv").set_index("scheduler")
    assert set(runs["workload"]) == {"newtrace-1"}
    assert (runs["n_completed"] == 48).all() and (runs["status"] == "drained").all()
    avg = runs["avg_jct_hours"]
    assert avg["sia"] < avg["pollux"] < avg["gavel"]
    summary = pd.read_csv(out / "sia_table3_newtrace_summary.csv").set_index("scheduler")
    assert summary.loc["gavel", "paper_makespan_hours"] == PAPER_TABLE3["newtrace"]["gavel"][2]
    pub = pd.read_csv(out / "sia_table3_newtrace_published.csv")
    assert pub.loc[pub["claim"] == "order of avg JCT", "ours"].item() == "Sia < Pollux < Gavel"


def test_cli_unknown_name_is_exit_2_naming_the_valid_ones(tmp_path: Path, capsys) -> None:
    code = main(["reproduce", "--quick", "gavel_fig8", "fig99", "--out", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err
    assert "fig99" in err and all(n in err for n in NAMES)
    assert not any(tmp_path.iterdir())                            # nothing ran


def test_cli_bad_workers_and_out_are_exit_2(tmp_path: Path, capsys) -> None:
    assert main(["reproduce", "--quick", "sia_elastic", "--workers", "0", "--out", str(tmp_path)]) == 2
    assert "`workers`" in capsys.readouterr().err
    f = tmp_path / "file.txt"
    f.write_text("x")
    assert main(["reproduce", "--quick", "sia_elastic", "--out", str(f)]) == 2
    assert main(["reproduce", "--quick", "sia_elastic", "--out", str(tmp_path),
                 "--throughputs", str(tmp_path / "missing.json")]) == 2
    assert "`throughputs`" in capsys.readouterr().err


def test_names_registry_and_settings_validation() -> None:
    assert sorted(EXPERIMENTS) == NAMES
    assert check_names(None) == list(EXPERIMENTS) and check_names([]) == list(EXPERIMENTS)
    assert check_names(["themis_ftf", "gavel_fig8", "themis_ftf"]) == ["themis_ftf", "gavel_fig8"]
    with pytest.raises(ValidationError, match="unknown"):
        check_names(["Gavel_Fig8"])
    with pytest.raises(ValidationError, match="`quick`"):
        Settings(quick="yes")
    with pytest.raises(ValidationError, match="`workers`"):
        Settings(workers=1.5)
    with pytest.raises(ValidationError, match="`workers`"):
        Settings(workers=True)


def test_throughput_table_is_found_or_falls_back_and_says_so(tmp_path: Path) -> None:
    cat, note = throughput_table(None, pairs=True)
    assert "GENERATED" in note and cat.pairs is not None and cat.gpu_types == ("v100", "p100", "k80")
    with pytest.raises(ValidationError, match="not a file"):
        find_gavel_table(tmp_path / "nope.json")
    found = find_gavel_table()
    if found is not None:
        cat, note = throughput_table(found)
        assert "measured" in note and cat.pairs is not None


def test_las_summary_hand_made() -> None:
    runs = pd.DataFrame({
        "policy": ["aware", "aware", "agnostic", "agnostic", "aware", "agnostic"],
        "load": [2.0, 2.0, 2.0, 2.0, 6.0, 6.0], "seed": [0, 1, 0, 1, 0, 0],
        "status": ["window_done"] * 5 + ["max_time"],
        "avg_jct_hours": [10.0, 12.0, 20.0, 24.0, 15.0, 90.0],
        "p99_jct_s": [3600.0] * 6, "worst_ftf": [1.0] * 6, "utilization": [0.5] * 6, "run_wall_s": [1.0] * 6,
    })
    s = las_summary(runs).set_index(["policy", "load"])
    assert s.loc[("aware", 2.0), "avg_jct_hours"] == pytest.approx(11.0)
    assert s.loc[("aware", 2.0), "std_jct_hours"] == pytest.approx(np.sqrt(2.0))
    assert s.loc[("agnostic", 2.0), "agnostic_over_aware"] == pytest.approx(22.0 / 11.0)
    assert s.loc[("agnostic", 6.0), "agnostic_over_aware"] == pytest.approx(6.0)
    assert bool(s.loc[("agnostic", 6.0), "saturated"]) and not bool(s.loc[("aware", 6.0), "saturated"])
    assert s.loc[("aware", 2.0), "seeds"] == 2 and s.loc[("agnostic", 6.0), "drained"] == 0


def test_sia_summary_hand_made() -> None:
    runs = pd.DataFrame({
        "policy": ["sia", "gavel", "sia", "gavel"], "load": [2.0] * 4, "restart_seconds": [0.0, 0.0, 30.0, 30.0],
        "seed": [0] * 4, "avg_jct_hours": [5.0, 10.0, 6.0, 8.0], "p99_jct_s": [7200.0] * 4,
        "makespan_s": [36000.0] * 4, "utilization": [0.5] * 4, "run_wall_s": [1.0] * 4,
    })
    s = sia_summary(runs).set_index(["restart_seconds", "policy"])["sia_reduction"]
    assert s[(0.0, "gavel")] == pytest.approx(0.5) and s[(30.0, "gavel")] == pytest.approx(0.25)
    assert s[(0.0, "sia")] == 0.0


@pytest.fixture(scope="module")
def catalogue():
    return throughput_table(find_gavel_table())[0]


def test_heterogeneity_aware_las_beats_agnostic_under_contention(catalogue) -> None:
    # 108 GPUs, single-GPU jobs at 6 jobs/h, jobs 100-200: the agnostic policy gives every job
    # equal time on K80s it runs 3-10x slower on. Checked on seeds 0-3 with Gavel's table and the
    # generated one: agnostic is 11-35 % slower in all eight.
    df = las_runs(FIG8, catalogue, loads=(6.0,), seeds=(0,), window=(100, 200), workers=1)
    jct = df.set_index("policy")["avg_jct_hours"]
    assert (df["status"] == "window_done").all()
    assert jct["aware"] < jct["agnostic"]


def test_ftf_worst_rho_not_above_fifo(catalogue) -> None:
    # Philly multi-GPU mix at 3 jobs/h, jobs 100-200: FIFO makes a job wait behind every earlier
    # one; FTF's LP raises the worst rho's share. Seeds 0-3, both tables: FTF <= FIFO in all eight
    # (one tie).
    ftf, _ = ftf_run("finish_time_fairness", 0, catalogue, 3.0, (100, 200))
    fifo, rho = ftf_run("fifo", 0, catalogue, 3.0, (100, 200))
    assert ftf["worst_ftf"] <= fifo["worst_ftf"] + 1e-9
    assert rho.size == fifo["n_completed"] == 100 and rho.max() == pytest.approx(fifo["worst_ftf"])


def test_all_experiments_skip_one_whose_data_is_absent_but_a_named_one_raises(monkeypatch) -> None:
    """`reproduce` with no name runs what it can (sia_table3 needs Sia's artifact data); asked
    for by name, a missing data set is an error."""
    import hetsched.reproduce as rp
    from hetsched.errors import DataNotFoundError
    from hetsched.reproduce.base import Experiment, ExperimentResult

    def absent(settings):
        raise DataNotFoundError("not here")

    ran = []

    def ok(settings):
        ran.append("ok")
        return ExperimentResult("ok", pd.DataFrame(), pd.DataFrame())

    monkeypatch.setattr(rp, "EXPERIMENTS", {"needs_data": Experiment("needs_data", "t", absent, None),
                                            "ok": Experiment("ok", "t", ok, None)})
    results = rp.run_experiments(None, Settings(quick=True))
    assert [r.name for r in results] == ["ok"] and ran == ["ok"]
    with pytest.raises(DataNotFoundError, match="not here"):
        rp.run_experiments(["needs_data"], Settings(quick=True))


def test_table3_result_summarises_runs_by_hand() -> None:
    """The Table 3 summary is the mean over workloads per scheduler, beside the paper's row of
    the chosen half; an unknown half is a clear error."""
    from hetsched.errors import ValidationError
    from hetsched.reproduce.sia_table3 import PAPER_TABLE3, table3_result

    rows = []
    for w, (sia, pollux, gavel) in (("newtrace-1", (0.5, 1.0, 4.0)), ("newtrace-2", (0.7, 2.0, 6.0))):
        for name, avg in (("sia", sia), ("pollux", pollux), ("gavel", gavel)):
            rows.append({"workload": w, "scheduler": name, "n_jobs": 10, "n_completed": 10, "avg_jct_hours": avg,
                         "p99_jct_hours": 2 * avg, "makespan_hours": 10 * avg, "wall_s": 1.0})
    res = table3_result("newtrace", pd.DataFrame(rows))
    s = res.summary.set_index("scheduler")
    assert s.loc["sia", "avg_jct_hours"] == pytest.approx(0.6)
    assert s.loc["pollux", "makespan_hours"] == pytest.approx(15.0)
    assert s.loc["gavel", "p99_jct_hours"] == pytest.approx(10.0)
    assert s.loc["pollux", "paper_avg_jct_hours"] == PAPER_TABLE3["newtrace"]["pollux"][0]
    assert res.name == "sia_table3_newtrace" and s.loc["sia", "workloads"] == 2
    assert "Sia < Pollux < Gavel" in set(res.published["ours"])
    with pytest.raises(ValidationError, match="`kind`.*'helios'"):
        table3_result("helios", pd.DataFrame(rows))
