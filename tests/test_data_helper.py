"""hs.gavel_throughputs(): where Gavel's measured table is looked for, and the error when absent."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import hetsched as hs
from hetsched.errors import DataNotFoundError
from hetsched.inputs.throughputs import GAVEL_THROUGHPUTS_ENV, gavel_throughputs_path

TABLE = {"v100": {"('A (batch size 8)', 1)": {"null": 4.0}}, "k80": {"('A (batch size 8)', 1)": {"null": 1.0}}}


def write_table(path: Path) -> Path:
    path.write_text(json.dumps(TABLE))
    return path


def test_explicit_path_wins_and_is_read(tmp_path, monkeypatch):
    mine = write_table(tmp_path / "mine.json")
    monkeypatch.setenv(GAVEL_THROUGHPUTS_ENV, str(tmp_path / "elsewhere.json"))
    cat = hs.gavel_throughputs(mine)
    assert cat.gpu_types == ("v100", "k80") and cat.throughputs.tolist() == [[4.0, 1.0]]


def test_environment_variable_is_used(tmp_path, monkeypatch):
    env = write_table(tmp_path / "env.json")
    monkeypatch.setenv(GAVEL_THROUGHPUTS_ENV, str(env))
    assert gavel_throughputs_path() == env
    assert hs.gavel_throughputs().throughputs.tolist() == [[4.0, 1.0]]


def test_missing_file_raises_naming_source_and_every_place_tried(tmp_path, monkeypatch):
    missing = tmp_path / "simulation_throughputs.json"
    with pytest.raises(DataNotFoundError, match=r"scheduler/simulation_throughputs\.json.*stanford-futuredata/gavel") as info:
        hs.gavel_throughputs(missing)
    assert str(missing) in str(info.value) and "`path`" in str(info.value)
    assert isinstance(info.value, FileNotFoundError) and isinstance(info.value, hs.HetschedError)
    # an unset-or-wrong environment variable is named among the places tried
    monkeypatch.setenv(GAVEL_THROUGHPUTS_ENV, str(missing))
    try:
        found = gavel_throughputs_path()
    except DataNotFoundError as exc:
        assert re.search(re.escape(f"${GAVEL_THROUGHPUTS_ENV}"), str(exc))
    else:  # this checkout has Gavel's table beside it: that is the next place looked at
        assert found.name == "simulation_throughputs.json" and found.parts[-3:-1] == ("data", "gavel")


def test_malformed_file_is_a_validation_error_not_missing(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(hs.ValidationError, match="valid JSON"):
        hs.gavel_throughputs(bad)
