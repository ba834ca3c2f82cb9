"""Units in names (issue 30, item 8): the simulation's outputs held seconds in columns called
``jct``, ``avg_jct``, ``makespan`` beside ``avg_jct_hours``; ``solve --out`` wrote ``1.86e-09``
where the allocation is 0, and ``solve`` did not print the allocation its help promises.

The review after it found more time columns without their unit: ``rounds.csv`` ``start`` (and
``busy_<type>``, busy GPU-seconds), ``runs.csv`` ``t_start`` / ``t_end`` / ``restart``,
``Workload.to_frame()`` ``deadline`` (and ``arrival_times``, ``slos`` ... of
``JobSet.to_frame()``), the online scheduler's ``job_table()`` ``arrival`` / ``finish``. Each
table is checked here the same way: every column that is not in its list of columns that hold
no time must name its unit, so that a time column added later without one fails."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import hetsched as hs
from hetsched.cli import main
from hetsched.inputs.jobs import TIME_FIELD_COLUMNS
from hetsched.sim import SimulationResult
from hetsched.sim.metrics import (
    RENAMED_JOB_COLUMNS,
    RENAMED_ROUND_COLUMNS,
    RENAMED_RUN_COLUMNS,
    RENAMED_SUMMARY_KEYS,
    Summary,
    renamed_round_columns,
)
from hetsched.solvers.certificate import DEFAULT_TOL

JOB_TIME_COLUMNS = {"arrival_s", "start_s", "finish_s", "jct_s", "queueing_delay_s", "isolated_time_s", "deadline_s",
                    "run_seconds", "restart_seconds"}
SUMMARY_TIME_KEYS = {"avg_jct_s", "median_jct_s", "p99_jct_s", "makespan_s", "avg_queueing_delay_s", "sim_start_s",
                     "sim_end_s", "avg_jct_hours", "simulated_hours"}

#: A name that says its unit: ends in one (``start_s``, ``run_seconds``, ``avg_jct_hours``), is one
#: (``seconds``, the round length) or holds one before a GPU type (``gpu_seconds_v100``).
UNIT = re.compile(r"(^|_)(s|seconds|hours)(_|$)")
#: Columns that hold no time, per table; every other column must name its unit. (``rate`` is
#: steps per second, a speed; ``T_``/``U_`` throughputs are steps per second too.)
NO_TIME = {
    "rounds": {"round", "n_active", "n_running", "arrived", "completed", "solved", "solve_ok", "solve_status",
               "solve_jobs", "solve_classes", "preempted", "migrated", "restarts"},
    "runs": {"round", "job", "gpu_type", "gpus", "share", "unit", "partner", "rate", "steps", "spread", "batch_size"},
    "workload": {"job_type", "scale_factor", "weight", "steps_remaining", "catalogue_row", "entity", "cpus_per_gpu",
                 "mem_per_gpu"},
    "job_table": {"job_id", "job_type", "scale_factor", "status", "steps_done", "total_steps", "weight"},
}


def without_unit(columns, table: str) -> list[str]:
    """The columns of ``table`` that hold a time (not in :data:`NO_TIME`) and do not name its unit."""
    return [c for c in columns if c not in NO_TIME[table] and not re.match(r"[TU]_", c) and not UNIT.search(c)]


def test_the_rule_catches_the_old_names() -> None:
    assert without_unit(["round", "start", "seconds", "busy_v100", "gpu_seconds_v100"], "rounds") == ["start",
                                                                                                      "busy_v100"]
    assert without_unit(["t_start", "t_end", "restart", "start_s", "restart_s"], "runs") == ["t_start", "t_end",
                                                                                            "restart"]
    assert without_unit(["T_v100", "deadline", "arrival_times", "slos", "duration_s"], "workload") == [
        "deadline", "arrival_times", "slos"]
    assert without_unit(["arrival", "finish", "arrival_s"], "job_table") == ["arrival", "finish"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("units") / "run"
    assert main(["simulate", "--jobs", "12", "--seed", "0", "--no-progress", "--out", str(out), "--runs",
                 "--restart-seconds", "30"]) == 0
    return out


def test_jobs_csv_and_summary_json_name_every_time_with_its_unit(run_dir: Path) -> None:
    jobs = pd.read_csv(run_dir / "jobs.csv")
    assert JOB_TIME_COLUMNS <= set(jobs.columns)
    assert not set(RENAMED_JOB_COLUMNS) & set(jobs.columns), "a time column without its unit"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert SUMMARY_TIME_KEYS <= set(summary)
    assert not set(RENAMED_SUMMARY_KEYS) & set(summary), "a time key without its unit"
    # the values are the seconds they say
    done = jobs[jobs["completed"]]
    assert (done["jct_s"] == done["finish_s"] - done["arrival_s"]).all()
    assert summary["avg_jct_s"] == pytest.approx(done["jct_s"].mean())
    assert summary["avg_jct_hours"] == pytest.approx(summary["avg_jct_s"] / 3600)
    assert summary["makespan_s"] == pytest.approx(done["finish_s"].max() - jobs["arrival_s"].min())


def test_old_summary_keys_read_with_a_deprecation_warning(run_dir: Path) -> None:
    res = SimulationResult.from_dir(run_dir)
    assert isinstance(res.summary, Summary)
    for old, new in RENAMED_SUMMARY_KEYS.items():
        with pytest.warns(DeprecationWarning, match=f"'{old}' is deprecated; use '{new}'"):
            assert res.summary[old] == res.summary[new]
        with pytest.warns(DeprecationWarning):
            assert res.summary.get(old) == res.summary[new]
    assert "avg_jct" not in res.summary and res.summary.get("no_such_key", 3) == 3
    with pytest.raises(KeyError):
        res.summary["no_such_key"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert res.summary["avg_jct_s"] > 0 and res.summary.get("makespan_s") > 0


def test_a_directory_with_the_old_names_reads_back(run_dir: Path, tmp_path: Path) -> None:
    old_dir = tmp_path / "old"
    old_dir.mkdir()
    for f in ("rounds.csv", "provenance.json"):
        (old_dir / f).write_bytes((run_dir / f).read_bytes())
    back = {v: k for k, v in RENAMED_JOB_COLUMNS.items()}
    pd.read_csv(run_dir / "jobs.csv").rename(columns=back).to_csv(old_dir / "jobs.csv", index=False)
    doc = json.loads((run_dir / "summary.json").read_text())
    back_keys = {v: k for k, v in RENAMED_SUMMARY_KEYS.items()}
    (old_dir / "summary.json").write_text(json.dumps({back_keys.get(k, k): v for k, v in doc.items()}))
    with pytest.warns(DeprecationWarning, match="older hetsched"):
        old = SimulationResult.from_dir(old_dir)
    new = SimulationResult.from_dir(run_dir)
    assert list(old.jobs.columns) == list(new.jobs.columns)
    assert old.summary["avg_jct_s"] == new.summary["avg_jct_s"]
    old.to_dir(tmp_path / "rewritten")                    # written back with the new names only
    assert "jct" not in pd.read_csv(tmp_path / "rewritten" / "jobs.csv").columns
    assert "avg_jct" not in json.loads((tmp_path / "rewritten" / "summary.json").read_text())


def test_solve_out_snaps_values_within_the_certificate_tolerance(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """The interior-point solver returns 1e-10-ish entries where the allocation is 0: the CSV now
    holds exactly 0 there (and 1 where the entry is within the tolerance of 1)."""
    args = ["solve", "--jobs", "100", "--seed", "0", "--solver", "clarabel"]
    # the original failure: the raw X holds entries that are not 0 but within the tolerance of it
    from hetsched.cli import _build_parser, _make_policy, _parse_cluster, _workload

    ns = _build_parser().parse_args(args)
    cluster = _parse_cluster(ns.cluster, None)
    jobs = _workload(ns, cluster).jobs.with_columns(cluster.gpu_types)
    res = hs.solve(_make_policy(ns.policy, [], schedulers=False), jobs, cluster, solver="clarabel")
    tiny = (np.abs(res.X) > 0) & (np.abs(res.X) <= DEFAULT_TOL)
    assert tiny.any(), "the raw solution has entries within the tolerance of 0"
    assert res.certificate.tol == DEFAULT_TOL

    out = tmp_path / "alloc.csv"
    assert main([*args, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    df = pd.read_csv(out, index_col="job_id")
    X = df[list(cluster.gpu_types)].to_numpy()
    assert not ((np.abs(X) > 0) & (np.abs(X) <= DEFAULT_TOL)).any()
    assert not ((np.abs(X - 1) > 0) & (np.abs(X - 1) <= DEFAULT_TOL)).any()
    assert (X >= 0).all() and "e-" not in out.read_text()
    assert np.array_equal(X == 0, np.abs(res.X) <= DEFAULT_TOL)
    assert np.allclose(X, res.X, atol=DEFAULT_TOL, rtol=0)
    assert np.allclose(df["effective_throughput"], (jobs.throughputs * X).sum(axis=1))
    # the allocation is printed, as the help promises: one row per job
    assert "allocation (fraction of time per GPU type" in printed
    rows = [ln.split()[0] for ln in printed.splitlines() if ln.startswith("j") and not ln.startswith("job_id")]
    assert rows == [str(j) for j in jobs.ids]
    assert "-0.00" not in printed


def test_solve_help_states_what_it_prints_and_the_snapping(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["solve", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "print it" in text and "one row per job" in text
    assert "within the certificate's tolerance (1e-6) of 0 or 1 are written as exactly 0 or 1" in text


def test_to_frame_snap() -> None:
    res = hs.solve("max_min_fairness", hs.JobSet([[2.0, 1.0], [1.0, 1.0]], gpu_types=["v100", "k80"]),
                   hs.Cluster({"v100": 1, "k80": 1}))
    object.__setattr__(res, "X", np.array([[1 - 1e-9, 2e-9], [-3e-10, 0.5]]))
    raw, snapped = res.to_frame(), res.to_frame(snap=1e-6)
    assert raw.iloc[0, 0] != 1.0 and snapped.iloc[0].tolist() == [1.0, 0.0, 2.0]
    assert snapped.iloc[1].tolist() == [0.0, 0.5, 0.5]
    with pytest.raises(hs.errors.ValidationError, match="`snap`"):
        res.to_frame(snap=-1.0)


# ------------------------------------------------------------------------------ the review's tables
def test_rounds_csv_and_runs_csv_name_every_time_with_its_unit(run_dir: Path) -> None:
    """``rounds.csv`` held ``start`` (and ``busy_<type>``), ``runs.csv`` ``t_start``, ``t_end``,
    ``restart``: seconds without their unit."""
    rounds = pd.read_csv(run_dir / "rounds.csv")
    runs = pd.read_csv(run_dir / "runs.csv")
    assert without_unit(rounds.columns, "rounds") == [] and without_unit(runs.columns, "runs") == []
    types = json.loads((run_dir / "summary.json").read_text())["config"]["cluster"]
    assert not set(renamed_round_columns(tuple(types))) & set(rounds.columns)
    assert not set(RENAMED_RUN_COLUMNS) & set(runs.columns)
    assert {"start_s", "seconds", *(f"gpu_seconds_{t}" for t in types)} <= set(rounds.columns)
    assert {"start_s", "end_s", "restart_s"} <= set(runs.columns)
    # the values are the seconds they say: rounds follow each other, entries lie inside their round
    assert np.allclose(np.diff(rounds["start_s"]), rounds["seconds"].iloc[:-1])
    start = rounds.set_index("round")["start_s"]
    assert np.allclose(runs["start_s"], start.loc[runs["round"]].to_numpy())
    assert ((runs["end_s"] > runs["start_s"]) & (runs["end_s"] - runs["start_s"] <= 360.0 + 1e-9)).all()
    assert runs["restart_s"].max() == 30.0 and (runs["restart_s"] <= runs["end_s"] - runs["start_s"]).all()
    busy = sum(rounds[f"gpu_seconds_{t}"].sum() for t in types)
    assert busy == pytest.approx(pd.read_csv(run_dir / "jobs.csv")[[f"gpu_seconds_{t}" for t in types]].sum().sum())
    res = SimulationResult.from_dir(run_dir)
    u = res.utilization_over_time()
    assert list(u.columns[:2]) == ["start_s", "seconds"] and u["start_s"].tolist() == rounds["start_s"].tolist()


def test_rounds_and_runs_with_the_old_names_read_back_with_a_deprecation_warning(run_dir: Path,
                                                                                 tmp_path: Path) -> None:
    old_dir = tmp_path / "old"
    old_dir.mkdir()
    for f in ("jobs.csv", "summary.json", "provenance.json"):
        (old_dir / f).write_bytes((run_dir / f).read_bytes())
    types = tuple(json.loads((run_dir / "summary.json").read_text())["config"]["cluster"])
    back = {v: k for k, v in renamed_round_columns(types).items()}
    assert back["start_s"] == "start" and RENAMED_ROUND_COLUMNS == {"start": "start_s"}
    pd.read_csv(run_dir / "rounds.csv").rename(columns=back).to_csv(old_dir / "rounds.csv", index=False)
    pd.read_csv(run_dir / "runs.csv").rename(columns={v: k for k, v in RENAMED_RUN_COLUMNS.items()}).to_csv(
        old_dir / "runs.csv", index=False)
    assert {"start", "busy_v100"} <= set(pd.read_csv(old_dir / "rounds.csv").columns)
    with pytest.warns(DeprecationWarning, match=r"older hetsched.*'start'.*'busy_v100'.*'t_start'"):
        old = SimulationResult.from_dir(old_dir)
    new = SimulationResult.from_dir(run_dir)
    pd.testing.assert_frame_equal(old.rounds, new.rounds)
    pd.testing.assert_frame_equal(old.runs, new.runs)
    old.to_dir(tmp_path / "rewritten", runs=True)            # written back with the new names only
    assert list(pd.read_csv(tmp_path / "rewritten" / "rounds.csv").columns) == list(new.rounds.columns)
    assert list(pd.read_csv(tmp_path / "rewritten" / "runs.csv").columns) == list(new.runs.columns)


def test_workload_and_jobset_frames_name_every_time_with_its_unit() -> None:
    """``Workload.to_frame()`` held ``deadline`` and ``JobSet.to_frame()`` the time fields under
    their keyword names (``arrival_times``, ``slos`` ...)."""
    tr = hs.generate_workload(8, rate_per_hour=4.0, seed=0, slo_factors=[1.5, 2.0])
    df = tr.to_frame()
    assert tr.deadlines is not None and without_unit(df.columns, "workload") == []
    assert {"arrival_s", "deadline_s", "duration_s"} <= set(df.columns) and "deadline" not in df
    assert df["deadline_s"].tolist() == tr.deadlines.tolist()
    assert df["arrival_s"].tolist() == tr.arrival_times.tolist()
    jobs = hs.JobSet([[2.0, 1.0]], gpu_types=["v100", "k80"], steps_remaining=[10.0], time_since_start=[5.0],
                     slos=[60.0], arrival_times=[1.0], isolated_time_elapsed=[2.0], cpus_per_gpu=[4.0])
    frame = jobs.to_frame()
    assert without_unit(frame.columns, "workload") == []
    assert set(TIME_FIELD_COLUMNS.values()) <= set(frame.columns)
    assert frame[["time_since_start_s", "slo_s", "arrival_s", "isolated_time_elapsed_s"]].iloc[0].tolist() == [
        5.0, 60.0, 1.0, 2.0]
    assert hs.Workload(jobs).to_frame().columns.tolist() == frame.columns.tolist()


def test_online_job_table_names_every_time_with_its_unit() -> None:
    """``OnlineScheduler.job_table()`` held ``arrival`` and ``finish`` (seconds)."""
    sched = hs.OnlineScheduler("max_min_fairness", hs.Cluster({"v100": 1, "k80": 1}), round_seconds=60.0)
    try:
        sched.submit("a", throughputs={"v100": 2.0, "k80": 1.0}, total_steps=100.0, arrival=10.0)
        sched.submit("b", throughputs={"v100": 2.0, "k80": 1.0}, total_steps=1e6, arrival=20.0)
        sched.next_round(20.0)
        sched.report("a", "v100", 100.0, 50.0)
        sched.complete("a", now=70.0)
        sched.next_round(80.0)
        table = sched.job_table().set_index("job_id")
    finally:
        sched.close()
    assert without_unit(table.reset_index().columns, "job_table") == []
    assert "arrival" not in table and "finish" not in table
    assert table["arrival_s"].tolist() == [10.0, 20.0]
    assert table.loc["a", "status"] == "completed" and table.loc["a", "finish_s"] == 70.0
    assert np.isnan(table.loc["b", "finish_s"])
