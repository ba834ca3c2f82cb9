"""The scale benchmark's regression guard (benchmarks/scale_targets.py): a row more than the
factor slower than its recorded row, or one that lost "optimal", fails the run; the recorded
CSV is kept."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import scale_targets as st  # noqa: E402


def _recorded(tmp_path: Path) -> Path:
    path = tmp_path / "scale_targets.csv"
    path.write_text("case,seconds,status\nmaxmin_1e5,2.0,optimal\nwater_filling_2048,1.0,optimal\n"
                    "maxmin_1e6,10.0,time_limit\n")
    return path


def test_slower_than_twice_or_not_optimal_is_a_regression(tmp_path: Path) -> None:
    rec = st.read_recorded(_recorded(tmp_path))
    rows = [{"case": "maxmin_1e5", "seconds": 4.1, "status": "optimal"},          # 2.05x
            {"case": "water_filling_2048", "seconds": 1.9, "status": "optimal"},  # 1.9x: fine
            {"case": "maxmin_1e6", "seconds": 99.0, "status": "optimal"},         # recorded not optimal: no base
            {"case": "maxmin_1e5_hard", "seconds": 50.0, "status": "optimal"}]    # new case: no base
    bad = st.regressions(rows, rec, 2.0)
    assert len(bad) == 1 and bad[0].startswith("maxmin_1e5:") and "2.0x" in bad[0]
    lost = st.regressions([{"case": "water_filling_2048", "seconds": 0.5, "status": "time_limit"}], rec, 2.0)
    assert lost == ["water_filling_2048: status 'time_limit' (recorded: optimal)"]
    assert st.regressions(rows, rec, 3.0) == []


def test_main_exits_1_and_keeps_the_recorded_csv(tmp_path: Path, monkeypatch, capsys) -> None:
    path = _recorded(tmp_path)
    before = path.read_text()

    class Done:
        returncode = 0
        stdout = '{"case": "maxmin_1e5", "seconds": 9.0, "status": "optimal"}\n'
        stderr = ""

    monkeypatch.setattr(st.subprocess, "run", lambda *a, **k: Done())
    monkeypatch.setattr(st, "machine_seconds", lambda: 0.25)
    assert st.main(["--cases", "maxmin_1e5", "--out", str(path)]) == 1
    assert "REGRESSION: maxmin_1e5" in capsys.readouterr().err
    assert path.read_text() == before
    rejected = st.read_recorded(tmp_path / "scale_targets.rejected.csv")
    assert float(rejected["maxmin_1e5"]["seconds"]) == 9.0 and "water_filling_2048" in rejected
    assert st.main(["--cases", "maxmin_1e5", "--out", str(path), "--accept"]) == 0
    merged = st.read_recorded(path)
    assert float(merged["maxmin_1e5"]["seconds"]) == 9.0 and merged["maxmin_1e6"]["status"] == "time_limit"
    # the rows this run recorded carry its machine time; the others keep theirs (none here)
    assert float(merged["maxmin_1e5"]["machine_s"]) == 0.25 and merged["water_filling_2048"]["machine_s"] == ""


def test_machine_time_scales_the_recorded_seconds(tmp_path: Path) -> None:
    """With ``machine_s`` on both sides the recorded seconds are scaled to this machine: 3x
    slower on a machine that takes 2.5x as long is no regression, 6x is; on a machine twice
    as fast 1.2x slower is one; a recorded row without ``machine_s`` is compared as is."""
    path = tmp_path / "scale_targets.csv"
    path.write_text("case,seconds,status,machine_s\nmaxmin_1e5,2.0,optimal,0.2\nwater_filling_2048,1.0,optimal,\n")
    rec = st.read_recorded(path)
    slow_machine = 0.5  # 2.5x the recorded machine's time
    assert st.regressions([{"case": "maxmin_1e5", "seconds": 6.0, "status": "optimal"}], rec, 2.0, slow_machine) == []
    bad = st.regressions([{"case": "maxmin_1e5", "seconds": 12.0, "status": "optimal"}], rec, 2.0, slow_machine)
    assert len(bad) == 1 and "6.0x" in bad[0] and "2.50x the recorded one's time" in bad[0]
    fast_machine = 0.1  # half the recorded machine's time
    assert len(st.regressions([{"case": "maxmin_1e5", "seconds": 2.4, "status": "optimal"}], rec, 2.0,
                              fast_machine)) == 1
    # no machine time recorded for this row: absolute seconds, whatever this machine is
    assert st.regressions([{"case": "water_filling_2048", "seconds": 1.9, "status": "optimal"}], rec, 2.0,
                          slow_machine) == []
    assert len(st.regressions([{"case": "water_filling_2048", "seconds": 2.1, "status": "optimal"}], rec, 2.0,
                              slow_machine)) == 1


def test_machine_seconds_is_a_positive_finite_time() -> None:
    """The fixed workload runs (its LP solves to optimality, else it raises) and takes a
    positive, finite time."""
    t = st.machine_seconds(repeats=1)
    assert 0.0 < t < 60.0
