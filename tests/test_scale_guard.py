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
    assert st.main(["--cases", "maxmin_1e5", "--out", str(path)]) == 1
    assert "REGRESSION: maxmin_1e5" in capsys.readouterr().err
    assert path.read_text() == before
    rejected = st.read_recorded(tmp_path / "scale_targets.rejected.csv")
    assert float(rejected["maxmin_1e5"]["seconds"]) == 9.0 and "water_filling_2048" in rejected
    assert st.main(["--cases", "maxmin_1e5", "--out", str(path), "--accept"]) == 0
    merged = st.read_recorded(path)
    assert float(merged["maxmin_1e5"]["seconds"]) == 9.0 and merged["maxmin_1e6"]["status"] == "time_limit"
