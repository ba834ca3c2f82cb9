"""Provenance of output directories (command line, config, seed, versions, git commit) and the
progress-bar default (on a terminal; off under CI or when stderr is not a terminal)."""

from __future__ import annotations

import importlib.metadata
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import hetsched as hs
from hetsched.cli import main
from hetsched.sim import SimulationResult, generate_workload, simulate
from hetsched.sim.provenance import git_commit, json_clean, progress_wanted, provenance

ROOT = Path(__file__).resolve().parents[1]
SIM = ["simulate", "--jobs", "6", "--rate", "10", "--cluster", "v100=8,k80=8", "--long-job-prob", "0"]


def _independent_head() -> str | None:
    if shutil.which("git") is None:
        return None
    out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False)
    return out.stdout.strip() if out.returncode == 0 else None


# ------------------------------------------------------------------------------ git
def test_git_commit_of_this_checkout():
    head = _independent_head()
    if head is None:
        pytest.skip("not a git checkout, or git is missing")
    rec = git_commit()
    assert rec["git_commit"] == head and len(head) == 40
    assert isinstance(rec["git_dirty"], bool)


def test_git_commit_never_fails(tmp_path, monkeypatch):
    assert git_commit(tmp_path) == {"git_commit": None, "git_dirty": None}  # not a repository
    assert git_commit(tmp_path / "nope") == {"git_commit": None, "git_dirty": None}
    monkeypatch.setenv("PATH", str(tmp_path))  # no git on the PATH
    assert git_commit() == {"git_commit": None, "git_dirty": None}
    assert provenance(argv=["x"])["git_commit"] is None


def test_git_commit_of_a_repository_without_the_package(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is missing")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q",
                    "--allow-empty", "-m", "x"], check=True)
    # a repository whose files do not include the package: not hetsched's commit
    assert git_commit(tmp_path)["git_commit"] is None


# ------------------------------------------------------------------------------ the record
def test_provenance_record():
    rec = provenance(argv=["python", "-m", "hetsched", "simulate", "--out", "a b"], config={"x": float("inf"), "y": (1, 2)},
                     seed=[0, 1], extra={"note": "n"})
    assert json.loads(json.dumps(rec)) == rec
    assert shlex.split(rec["command_line"]) == rec["command"]
    assert rec["config"] == {"x": None, "y": [1, 2]} and rec["seed"] == [0, 1] and rec["note"] == "n"
    for pkg in ("numpy", "scipy", "pandas", "highspy", "cvxpy"):
        assert rec["versions"][pkg] == importlib.metadata.version(pkg)
    assert rec["versions"]["hetsched"] == importlib.metadata.version("hetsched")
    assert json_clean({"a": np.int64(3), "b": np.float32(0.5), "c": (1, [2.0]), "d": np.bool_(True),
                       "e": float("nan"), 7: hs.Cluster({"v100": 1})}) == \
        {"a": 3, "b": 0.5, "c": [1, [2.0]], "d": True, "e": None, "7": repr(hs.Cluster({"v100": 1}))}


def test_result_to_dir_writes_and_reads_provenance(tmp_path):
    res = simulate("fifo", generate_workload(5, rate_per_hour=6, seed=0), hs.Cluster({"v100": 8}),
                   options=hs.SimOptions(seed=3))
    res.to_dir(tmp_path)
    rec = json.loads((tmp_path / "provenance.json").read_text())
    assert rec["seed"] == 3 and rec["config"]["policy"] == "fifo" and rec["command"] == sys.argv
    assert SimulationResult.from_dir(tmp_path).extra["provenance"] == rec


# ------------------------------------------------------------------------------ command line
def test_simulate_out_records_provenance(tmp_path, capsys):
    argv = [*SIM, "--seed", "4", "--no-progress", "--out", str(tmp_path / "o")]
    assert main(argv) == 0
    assert "provenance.json" in capsys.readouterr().out
    rec = json.loads((tmp_path / "o" / "provenance.json").read_text())
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert rec["command"] == [sys.executable, "-m", "hetsched", *argv]
    assert rec["config"] == summary["config"] and rec["seed"] == 4
    assert rec["versions"]["pandas"] == importlib.metadata.version("pandas")
    assert rec["git_commit"] == _independent_head()


def test_simulate_config_records_the_toml(tmp_path, capsys):
    p = tmp_path / "one.toml"
    text = ('policy = "fifo"\n[cluster]\nv100 = 4\nk80 = 4\n[workload]\nn_jobs = 6\nload = 6.0\n'
            'long_job_prob = 0.0\nscale_factor_probs = {1 = 1.0}\n')
    p.write_text(text)
    assert main(["simulate", "--config", str(p), "--out", str(tmp_path / "o"), "--no-progress"]) == 0
    rec = json.loads((tmp_path / "o" / "provenance.json").read_text())
    assert rec["config_toml"] == text and rec["config_file"] == str(p.resolve())


def test_sweep_out_records_provenance(tmp_path, capsys):
    argv = ["sweep", "--policies", "fifo", "--loads", "6,12", "--seeds", "0,1", "--jobs", "6", "--long-job-prob", "0",
            "--workers", "1", "--cluster", "v100=4,k80=4", "--out", str(tmp_path), "--no-progress"]
    assert main(argv) == 0
    rec = json.loads((tmp_path / "provenance.json").read_text())
    assert rec["command"][3:] == argv and rec["seed"] == [0, 1]
    assert rec["config"]["load"] == [6.0, 12.0] and rec["config"]["cluster"] == {"v100": 4, "k80": 4}
    assert rec["config"]["n_jobs"] == 6 and rec["config"]["policy"] == {"fifo": "Fifo(backfill=True)"}
    df = pd.read_csv(tmp_path / "sweep.csv", keep_default_na=False)
    assert len(df) == 4
    assert set(df["git_commit"]) == {rec["git_commit"] or ""}
    assert set(df["hetsched_version"].astype(str)) == {rec["versions"]["hetsched"]}


# ------------------------------------------------------------------------------ progress
class _Terminal:
    def __init__(self, tty: bool) -> None:
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize(
    "flag,ci,tty,expected",
    [(None, None, True, True), (None, None, False, False), (None, "true", True, False), (None, "1", True, False),
     (None, "false", True, True), (None, "0", True, True), (True, "true", False, True), (False, None, True, False)],
)
def test_progress_default(monkeypatch, flag, ci, tty, expected):
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    monkeypatch.setattr(sys, "stderr", _Terminal(tty))
    assert progress_wanted(flag) is expected


def test_cli_progress_bar_on_request_and_off_under_ci(monkeypatch, capsys):
    pytest.importorskip("tqdm")
    monkeypatch.setenv("CI", "true")
    assert main(SIM) == 0
    assert "job" not in capsys.readouterr().err  # no bar under CI
    assert main([*SIM, "--progress"]) == 0
    assert "simulate" in capsys.readouterr().err  # tqdm's bar (desc "simulate") on stderr
    argv = ["sweep", "--policies", "fifo", "--loads", "6", "--jobs", "4", "--long-job-prob", "0", "--workers", "1",
            "--cluster", "v100=4,k80=4"]
    assert main([*argv, "--progress"]) == 0
    assert "sweep" in capsys.readouterr().err
    assert main(argv) == 0
    assert "sweep" not in capsys.readouterr().err
