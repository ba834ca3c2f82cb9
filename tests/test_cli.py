"""Tests of the command line (hetsched.cli / python -m hetsched)."""

from __future__ import annotations

import doctest
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import hetsched
import hetsched.cli as cli_mod
import hetsched.rounds.policy_scheduler as sim_mod
from hetsched.cli import main
from hetsched.errors import MissingFieldError, SolverError

try:
    import matplotlib

    matplotlib.use("Agg")
    HAVE_MPL = True
except ImportError:  # the optional `plot` extra
    HAVE_MPL = False
needs_mpl = pytest.mark.skipif(not HAVE_MPL, reason="matplotlib (hetsched[plot]) not installed")

GAVEL_PATH = Path(__file__).resolve().parents[2] / "shared" / "data" / "gavel" / "simulation_throughputs.json"
FIX = Path(__file__).parent / "fixtures"


def test_doctests() -> None:
    result = doctest.testmod(cli_mod)
    assert result.failed == 0 and result.attempted > 0


def test_policies_lists_every_name_simulate_takes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policies"]) == 0
    names = capsys.readouterr().out.split()
    from hetsched.schedulers.names import ROUND_SCHEDULERS

    assert {"tiresias", "pollux", "sia_adaptive", "optimus"} <= set(ROUND_SCHEDULERS)
    assert names == sorted(set(hetsched.list_policies()) | set(ROUND_SCHEDULERS))


def test_simulate_packing_workload_from_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    """--param packing=workload works on generated jobs: the generated table gets its pair
    table (issue 30, item 4: it used to fail with advice only Python could follow)."""
    assert main(["simulate", "--policy", "max_min_fairness", "--param", "packing=workload", "--jobs", "6",
                 "--no-progress"]) == 0
    assert "packing" in capsys.readouterr().out


def test_simulate_runs_a_round_scheduler_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    """One name space: --policy takes Tiresias (not an LP policy) like any policy (issue 30, item 4)."""
    assert main(["simulate", "--policy", "tiresias", "--jobs", "6", "--no-progress"]) == 0
    assert "tiresias" in capsys.readouterr().out
    assert main(["simulate", "--policy", "tiresias", "--param", "promote_knob=0", "--jobs", "3"]) == 2


# ----------------------------------------------------------------------------- demo
def test_demo_end_to_end(capsys: pytest.CaptureFixture[str]) -> None:
    # no wall-clock bound here: on the 2-core VM with one other process it took 39-44 s
    # (the demo's own speed belongs in a benchmark, not in a test)
    code = main(["demo", "--jobs", "20", "--seed", "1"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "demo: simulated 20 jobs (seed 1" in out
    assert "avg JCT h" in out and "worst FTF" in out
    for name in hetsched.list_policies():
        # each policy has a summary row or a "skipped" note
        assert any(line.split()[:1] == [name] for line in out.splitlines()) or f"skipped {name!r}" in out, name
    assert "error" not in out


def test_demo_policy_subset_and_gpu_types(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["demo", "--jobs", "12", "--policies", "max_min_fairness", "--gpu-types", "a100,k80",
                 "--gpus-per-type", "8"])
    out = capsys.readouterr().out
    assert code == 0, out
    rows = [line for line in out.splitlines() if line.startswith("max_min_fairness")]
    assert len(rows) == 1 and len(rows[0].split()) == 9
    assert "{'a100': 8, 'k80': 8}" in out
    assert "isolated" not in out


def test_demo_skips_policies_missing_fields(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    real = sim_mod.solve

    def fake(policy, jobs, cluster, **kw):
        if policy.name == "max_min_fairness":
            raise MissingFieldError("policy 'max_min_fairness' needs job field `slos`")
        return real(policy, jobs, cluster, **kw)

    monkeypatch.setattr(sim_mod, "solve", fake)
    code = main(["demo", "--jobs", "10", "--policies", "max_min_fairness,isolated"])
    out = capsys.readouterr().out
    assert code == 0
    assert "note: skipped 'max_min_fairness'" in out and "slos" in out
    assert any(line.startswith("isolated") for line in out.splitlines())


def test_demo_exit_code_when_a_solve_fails(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def boom(policy, jobs, cluster, **kw):
        raise SolverError("backend crashed")

    monkeypatch.setattr(sim_mod, "solve", boom)
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
        ["simulate", "--policy", "no_such_policy", "--jobs", "3"],
        ["simulate", "--jobs", "3", "--cluster", "v100=-1"],
        ["simulate", "--jobs", "3", "--cluster", "h100=8"],
        ["simulate", "--jobs", "3", "--round-seconds", "0"],
        ["simulate", "--jobs", "3", "--window", "50", "60"],
        ["simulate", "--jobs", "3", "--param", "speed=2"],
        ["simulate", "--jobs", "3", "--reallocate", "often"],
        ["simulate", "--trace", "/nonexistent.trace", "--throughputs", str(FIX / "gavel_throughputs_small.json")],
        ["sweep", "--loads", "a,b"],
        ["plot", "/nonexistent", "--out", "x.png"],
    ],
)
def test_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert capsys.readouterr().err


@pytest.mark.skipif(not GAVEL_PATH.is_file(), reason="Gavel's throughput table not present")
def test_demo_with_gavel_table(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["demo", "--jobs", "15", "--throughputs", str(GAVEL_PATH), "--policies", "max_min_fairness,isolated"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "Gavel-format table" in out and "26 job types" in out


def test_python_dash_m() -> None:
    proc = subprocess.run([sys.executable, "-m", "hetsched", "policies"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "max_min_fairness" in proc.stdout.split()


# ----------------------------------------------------------------------------- simulate
def test_simulate_contract(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "hetsched", "simulate", "--policy", "max_min_fairness", "--jobs",
                           "200", "--seed", "0", "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    jobs = pd.read_csv(out / "jobs.csv")
    assert len(jobs) == 200
    for col in ("job_id", "arrival_s", "finish_s", "jct_s"):
        assert col in jobs
    assert (jobs["jct_s"] > 0).all()
    summary = json.loads((out / "summary.json").read_text())
    for key in ("avg_jct_s", "makespan_s", "worst_ftf", "utilization"):
        assert isinstance(summary[key], float), key
    assert summary["avg_jct_s"] == pytest.approx(jobs["jct_s"].mean())
    assert summary["config"]["seed"] == 0 and "numpy" in summary["versions"]
    assert "avg JCT (h)" in proc.stdout


@needs_mpl
def test_simulate_options_trace_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "g"
    code = main(["simulate", "--trace", str(FIX / "gavel_small.trace"), "--throughputs",
                 str(FIX / "gavel_throughputs_small.json"), "--cluster", "v100=2,p100=2,k80=2", "--gpus-per-server", "1",
                 "--param", "heterogeneity_aware=false", "--out", str(out), "--runs", "--no-progress"])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "max_min_fairness(heterogeneity_aware=False)" in text
    assert (out / "runs.csv").is_file()
    for kind in ("jct_cdf", "ftf_cdf", "utilization", "solver_time"):
        png = tmp_path / f"{kind}.png"
        assert main(["plot", str(out), "--kind", kind, "--out", str(png)]) == 0
        assert png.stat().st_size > 1000
    assert main(["plot", str(out), "--kind", "jct_vs_load", "--out", str(tmp_path / "x.png")]) == 2
    code = main(["simulate", "--jobs", "20", "--rate", "10", "--single-gpu", "--window", "5", "15", "--mechanism",
                 "ideal", "--reallocate", "1800", "--long-job-prob", "0"])
    text = capsys.readouterr().out
    assert code == 0 and "10 / 10" in text


def test_simulate_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "one.toml"
    p.write_text('policy = "fifo"\n[cluster]\nv100 = 4\nk80 = 4\n[workload]\nn_jobs = 6\nload = 6.0\n'
                 'long_job_prob = 0.0\nscale_factor_probs = {1 = 1.0}\n')
    assert main(["simulate", "--config", str(p), "--out", str(tmp_path / "o")]) == 0
    assert "policy fifo" in capsys.readouterr().out
    p.write_text(p.read_text().replace("load = 6.0", "load = [6.0, 8.0]"))
    assert main(["simulate", "--config", str(p)]) == 2
    assert "use `sweep --config`" in capsys.readouterr().err


# ----------------------------------------------------------------------------- sweep, solve, bench
@needs_mpl
def test_sweep_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["sweep", "--agnostic", "--loads", "6,12", "--jobs", "10", "--long-job-prob", "0", "--workers", "1",
                 "--cluster", "v100=8,p100=4,k80=8", "--out", str(tmp_path), "--plot"])
    out = capsys.readouterr().out
    assert code == 0, out
    df = pd.read_csv(tmp_path / "sweep.csv")
    assert len(df) == 4 and set(df["policy"]) == {"max_min_fairness", "max_min_fairness(heterogeneity_aware=False)"}
    assert (tmp_path / "jct_vs_load.png").is_file()
    assert main(["plot", str(tmp_path / "sweep.csv"), "--out", str(tmp_path / "again.png")]) == 0


def test_solve_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv = tmp_path / "alloc.csv"
    assert main(["solve", "--policy", "max_min_fairness", "--jobs", "30", "--out", str(csv)]) == 0
    out = capsys.readouterr().out
    assert "max_min_fairness: optimal" in out and "GPUs used: v100" in out
    assert len(pd.read_csv(csv)) == 30


def test_bench_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv = tmp_path / "speed.csv"
    assert main(["bench", "--loads", "6", "--window", "5", "15", "--out", str(csv)]) == 0
    out = capsys.readouterr().out
    assert "sim_h_per_wall_s" in out
    df = pd.read_csv(csv)
    assert df["status"].iloc[0] == "window_done" and df["rounds"].iloc[0] > 0
