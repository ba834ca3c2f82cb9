"""Tests of the command line (hetsched.cli / python -m hetsched)."""

from __future__ import annotations

import doctest
import subprocess
import sys
from pathlib import Path

import pytest

import hetsched
import hetsched.cli as cli_mod
from hetsched.cli import main
from hetsched.errors import MissingFieldError, SolverError

GAVEL_PATH = Path(__file__).resolve().parents[2] / "shared" / "data" / "gavel" / "simulation_throughputs.json"


def test_doctests() -> None:
    result = doctest.testmod(cli_mod)
    assert result.failed == 0 and result.attempted > 0


def test_policies_lists_every_registered_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policies"]) == 0
    assert capsys.readouterr().out.split() == hetsched.list_policies()


def test_demo_end_to_end(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["demo", "--jobs", "30", "--seed", "1"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "demo: 30 jobs (seed 1)" in out
    assert "GPUs used (v100/p100/k80)" in out
    for name in hetsched.list_policies():
        # each policy has a table row or a "skipped" note
        assert any(line.split()[:1] == [name] for line in out.splitlines()) or f"skipped {name!r}" in out, name
    assert "error" not in out


def test_demo_policy_subset_and_gpu_types(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["demo", "--jobs", "12", "--policies", "max_min_fairness", "--gpu-types", "a100,k80",
                 "--gpus-per-type", "8"])
    out = capsys.readouterr().out
    assert code == 0, out
    rows = [line for line in out.splitlines() if line.startswith("max_min_fairness")]
    assert len(rows) == 1 and "optimal" in rows[0]
    assert "{'a100': 8, 'k80': 8}" in out
    assert "isolated" not in out


def test_demo_skips_policies_missing_fields(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    real = hetsched.solve

    def fake(name, jobs, cluster, **kw):
        if name == "max_min_fairness":
            raise MissingFieldError("policy 'max_min_fairness' needs job field `slos`")
        return real(name, jobs, cluster, **kw)

    monkeypatch.setattr(hetsched, "solve", fake)
    code = main(["demo", "--jobs", "10", "--policies", "max_min_fairness,isolated"])
    out = capsys.readouterr().out
    assert code == 0
    assert "note: skipped 'max_min_fairness'" in out and "slos" in out


def test_demo_exit_code_when_a_solve_fails(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def boom(name, jobs, cluster, **kw):
        raise SolverError("backend crashed")

    monkeypatch.setattr(hetsched, "solve", boom)
    code = main(["demo", "--jobs", "5", "--policies", "isolated"])
    out = capsys.readouterr().out
    assert code == 1
    assert "error: 'isolated' failed: backend crashed" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["demo", "--policies", "no_such_policy"],
        ["demo", "--jobs", "0"],
        ["demo", "--throughputs", "/nonexistent/throughputs.json"],
        ["demo", "--gpu-types", "h100"],
        ["demo", "--jobs", "abc"],
        ["frobnicate"],
    ],
)
def test_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert capsys.readouterr().err


@pytest.mark.skipif(not GAVEL_PATH.is_file(), reason="Gavel's throughput table not present")
def test_demo_with_gavel_table(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["demo", "--jobs", "40", "--throughputs", str(GAVEL_PATH), "--policies", "max_min_fairness,isolated"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "Gavel-format table" in out and "26 job types" in out


def test_python_dash_m() -> None:
    proc = subprocess.run([sys.executable, "-m", "hetsched", "policies"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "max_min_fairness" in proc.stdout.split()
