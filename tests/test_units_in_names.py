"""Units in names (issue 30, item 8): the simulation's outputs held seconds in columns called
``jct``, ``avg_jct``, ``makespan`` beside ``avg_jct_hours``; ``solve --out`` wrote ``1.86e-09``
where the allocation is 0, and ``solve`` did not print the allocation its help promises."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import hetsched as hs
from hetsched.cli import main
from hetsched.sim import SimulationResult
from hetsched.sim.metrics import RENAMED_JOB_COLUMNS, RENAMED_SUMMARY_KEYS, Summary
from hetsched.solvers.certificate import DEFAULT_TOL

JOB_TIME_COLUMNS = {"arrival_s", "start_s", "finish_s", "jct_s", "queueing_delay_s", "isolated_time_s", "deadline_s",
                    "run_seconds", "restart_seconds"}
SUMMARY_TIME_KEYS = {"avg_jct_s", "median_jct_s", "p99_jct_s", "makespan_s", "avg_queueing_delay_s", "sim_start_s",
                     "sim_end_s", "avg_jct_hours", "simulated_hours"}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("units") / "run"
    assert main(["simulate", "--jobs", "12", "--seed", "0", "--no-progress", "--out", str(out)]) == 0
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
