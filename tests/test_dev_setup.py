"""dev.py and the package's dependencies: each command installs only what it uses, the command
line runs without an activated environment, and pytest is a test dependency only (issue 30,
items 5 and 6)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load_dev() -> ModuleType:
    spec = importlib.util.spec_from_file_location("hetsched_dev_script", ROOT / "dev.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def dev(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[ModuleType, list[list[str]]]:
    """dev.py with its virtual environment in ``tmp_path`` (the interpreter file exists, so none is
    created) and ``subprocess`` recorded instead of run."""
    mod = _load_dev()
    venv = tmp_path / ".venv"
    (venv / "bin").mkdir(parents=True)
    py = venv / "bin" / "python"
    py.write_text("")
    monkeypatch.setattr(mod, "VENV", venv)
    monkeypatch.setattr(mod, "PY", py)
    monkeypatch.setattr(mod, "STAMP", venv / ".hetsched-install-stamp")
    monkeypatch.delenv("HETSCHED_DEV_PYTHON", raising=False)
    calls: list[list[str]] = []

    def record(cmd, *args, **kwargs):
        calls.append([str(c) for c in cmd])
        return subprocess.CompletedProcess(cmd, 0) if kwargs.get("check") is not None else 0

    monkeypatch.setattr(mod.subprocess, "run", record)
    monkeypatch.setattr(mod.subprocess, "call", record)
    return mod, calls


def _installs(calls: list[list[str]]) -> list[str]:
    return [c[-1] for c in calls if c[1:4] == ["-m", "pip", "install"]]


def test_demo_installs_no_extra(dev: tuple[ModuleType, list[list[str]]]) -> None:
    """``python3 dev.py demo`` installed hetsched[test] with Ray and Dask (1.1 GB); it needs none."""
    mod, calls = dev
    assert mod.main(["demo"]) == 0
    assert _installs(calls) == [str(ROOT)]            # hetsched alone, no [extras]
    assert calls[-1][-2:] == ["hetsched", "demo"]
    calls.clear()
    assert mod.main(["demo", "--jobs", "4"]) == 0      # installed once: not again
    assert _installs(calls) == []


def test_test_installs_the_test_extra_and_covers_the_other_commands(dev: tuple[ModuleType, list[list[str]]]) -> None:
    mod, calls = dev
    assert mod.main(["demo"]) == 0
    assert mod.main(["test", "tests/test_api.py"]) == 0
    assert _installs(calls) == [str(ROOT), f"{ROOT}[test]"]
    assert calls[-1][1:3] == ["-m", "pytest"] and calls[-1][-1] == "tests/test_api.py"
    calls.clear()
    for cmd in (["run", "--", "policies"], ["demo"], ["bench"], ["test"]):
        assert mod.main(cmd) == 0
    assert _installs(calls) == []                      # [test] includes [plot]: nothing more to install
    assert json.loads(mod.STAMP.read_text())["extras"] == ["test"]


def test_run_installs_plot_and_runs_the_cli_in_the_callers_directory(dev: tuple[ModuleType, list[list[str]]]) -> None:
    mod, calls = dev
    assert mod.main(["run", "--", "simulate", "--jobs", "3"]) == 0
    assert _installs(calls) == [f"{ROOT}[plot]"]
    assert calls[-1] == [str(mod.PY), "-m", "hetsched", "simulate", "--jobs", "3"]
    calls.clear()
    assert mod.main(["demo"]) == 0                     # [plot] covers the demo's (empty) set
    assert _installs(calls) == []


def test_a_changed_pyproject_reinstalls_what_was_there(dev: tuple[ModuleType, list[list[str]]]) -> None:
    mod, calls = dev
    mod.STAMP.write_text(json.dumps({"pyproject": "an older pyproject.toml", "extras": ["test"]}))
    assert mod.main(["demo"]) == 0
    assert _installs(calls) == [f"{ROOT}[test]"]       # the demo does not undo the test install
    mod.STAMP.write_text("0" * 64)                     # the stamp of the former dev.py: reinstall
    calls.clear()
    assert mod.main(["demo"]) == 0
    assert _installs(calls) == [str(ROOT)]


def test_unknown_command_prints_the_usage(dev: tuple[ModuleType, list[list[str]]], capsys: pytest.CaptureFixture[str]) -> None:
    mod, calls = dev
    assert mod.main(["deploy"]) == 2 and not calls
    assert "python3 dev.py run -- ARGS" in capsys.readouterr().out


def test_dev_run_needs_no_activated_environment(tmp_path: Path) -> None:
    """``python3 dev.py run -- ...`` from another directory, with a python3 that does not have
    hetsched, runs the command line (issue 30, item 5: ``python -m hetsched`` said "No module named
    hetsched" there). The interpreter is this one (HETSCHED_DEV_PYTHON) so that nothing is installed."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["HETSCHED_DEV_PYTHON"] = sys.executable
    proc = subprocess.run([sys.executable, "-I", str(ROOT / "dev.py"), "run", "--", "simulate", "--jobs", "3",
                           "--out", "runs"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "runs" / "summary.json").is_file()       # relative paths are the caller's


def test_pytest_is_a_test_dependency_only() -> None:
    """pytest (with pluggy, iniconfig, Pygments) was a runtime dependency (issue 30, item 6)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = [d.split(";")[0].split("[")[0].split("<")[0].split(">")[0].split("=")[0].split("~")[0].strip().lower()
             for d in project["dependencies"]]
    assert "pytest" not in names and "hypothesis" not in names
    assert {"ray", "dask", "matplotlib"}.isdisjoint(names)
    test_extra = project["optional-dependencies"]["test"]
    assert any(d.startswith("pytest") for d in test_extra)


def test_no_module_of_the_package_imports_pytest() -> None:
    """Every module of hetsched imports without pulling in pytest (or hypothesis)."""
    code = """
import importlib, pkgutil, sys
import hetsched
failed = []
for info in pkgutil.walk_packages(hetsched.__path__, "hetsched."):
    try:
        importlib.import_module(info.name)
    except ImportError as exc:   # an optional engine (ray, dask, matplotlib) that is not installed
        failed.append((info.name, str(exc)))
print(sorted(m for m in ("pytest", "_pytest", "hypothesis") if m in sys.modules))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"
