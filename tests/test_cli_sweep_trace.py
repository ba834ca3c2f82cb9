"""``sweep --trace`` (issue 30 review): ``python -m hetsched sweep --trace FILE ...`` used to
ignore ``--trace`` without a word and sweep generated workloads (``--jobs`` of them at
``--loads``). It now runs ``--policies`` on the trace; the options that only make sense for
generated workloads (``--loads``, and ``--plot``, which draws JCT against load; ``--seeds`` on
a gavel trace, and more than one seed on any trace: the simulation is deterministic) are
refused with an error that names the option, the rule and the value."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import hetsched as hs
from hetsched.cli import main

FIX = Path(__file__).parent / "fixtures"
TRACE, TPUT = FIX / "gavel_small.trace", FIX / "gavel_throughputs_small.json"
CLUSTER = "v100=2,p100=2,k80=2"
BASE = ["sweep", "--trace", str(TRACE), "--throughputs", str(TPUT), "--cluster", CLUSTER, "--workers", "1",
        "--no-progress"]


def _cli(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_sweep_runs_the_policies_on_the_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _cli(capsys, *BASE, "--policies", "fifo,max_min_fairness", "--out", tmp_path / "sw")
    assert code == 0, err
    df = pd.read_csv(tmp_path / "sw" / "sweep.csv")
    trace = hs.load_trace(TRACE, throughputs=TPUT)
    # before: 2 loads x 200 generated jobs per row, the trace never read
    assert len(df) == 2 and "load" not in df and (df["trace"] == str(TRACE)).all()
    assert df[["policy", "seed"]].values.tolist() == [["fifo", 0], ["max_min_fairness", 0]]
    assert (df["n_jobs"] == trace.n_jobs).all() and df["error"].isna().all()   # "" in the CSV: no error
    # each row is the simulation of the trace itself
    cluster = hs.Cluster({"v100": 2, "p100": 2, "k80": 2})
    for policy in ("fifo", "max_min_fairness"):
        res = hs.simulate(policy, trace, cluster, options=hs.SimOptions(seed=0))
        row = df[(df["policy"] == policy) & (df["seed"] == 0)].iloc[0]
        assert row["avg_jct_s"] == pytest.approx(res.summary["avg_jct_s"])
        assert row["makespan_s"] == pytest.approx(res.summary["makespan_s"])
    prov = json.loads((tmp_path / "sw" / "provenance.json").read_text())
    assert prov["config"]["workload"]["source"] == trace.source and prov["config"]["workload"]["n_jobs"] == 4
    assert prov["config"]["seed"] == [0] and "load" not in prov["config"]


def test_sweep_trace_refuses_loads_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _cli(capsys, *BASE, "--loads", "1,2", "--out", tmp_path / "loads")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "`--loads` sets the arrival rates of generated workloads" in err
    assert f"`--trace` {str(TRACE)!r} replays the trace's own arrivals" in err and "got --loads '1,2'" in err
    assert not (tmp_path / "loads").exists()
    code, out, err = _cli(capsys, *BASE, "--plot", "--out", tmp_path / "plot")
    assert code == 2 and "`--plot` draws average JCT against load" in err and "no load axis" in err
    assert not (tmp_path / "plot").exists()


def test_sweep_trace_skip_bad_rows_is_honoured_and_recorded(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.trace"
    bad.write_text(TRACE.read_text() + "GPT-9 (batch size 1)\tcmd\tdir\t--steps\t1\t100\t1\t1\t-1\t99000\n")
    args = [a if a != str(TRACE) else str(bad) for a in BASE] + ["--policies", "fifo"]
    code, _, err = _cli(capsys, *args)
    assert code == 2 and "1 of 5 row(s) cannot be used (no_throughput_row: 1)" in err
    code, _, err = _cli(capsys, *args, "--skip-bad-rows", "--out", tmp_path / "sw")
    assert code == 0, err
    assert "skipped (--skip-bad-rows): {'no_throughput_row': 1}" in err
    prov = json.loads((tmp_path / "sw" / "provenance.json").read_text())
    meta = prov["config"]["workload"]["meta"]
    assert meta["load_report"]["dropped"] == {"no_throughput_row": 1} and meta["skipped_counts"] == {
        "no_throughput_row": 1}
    assert pd.read_csv(tmp_path / "sw" / "sweep.csv")["n_jobs"].tolist() == [4]


def test_sweep_without_trace_keeps_its_default_loads(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _cli(capsys, "sweep", "--policies", "fifo", "--jobs", "4", "--long-job-prob", "0", "--workers",
                          "1", "--cluster", "v100=8,p100=8,k80=8", "--no-progress")
    assert code == 0, err
    assert [ln.split()[1] for ln in out.splitlines()[1:]] == ["2.000", "4.000"]   # --loads 2,4 as before
