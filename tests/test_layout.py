"""The package layout (issue 18): the top level is the public face, and modules that moved
keep their old import paths for one release, with a DeprecationWarning."""

from __future__ import annotations

import importlib
import warnings
from pathlib import Path

import pytest

import hetsched
from hetsched import MOVED_MODULES

SRC = Path(hetsched.__file__).resolve().parent

#: Modules allowed at the top level: the public face (solve, the CLI, errors, the policy
#: namespace, the result record, validation rules, executors) and the entry point.
TOP_LEVEL = {"__init__", "__main__", "api", "cli", "errors", "executors", "policies", "result", "validation"}


def test_top_level_holds_only_the_public_face():
    assert {p.stem for p in SRC.glob("*.py")} == TOP_LEVEL


def test_packages_follow_the_data_flow():
    packages = {p.name for p in SRC.iterdir() if (p / "__init__.py").is_file()}
    assert {"inputs", "formulations", "solvers", "mechanism", "placement", "sim"} <= packages
    assert (SRC / "solvers" / "structured" / "__init__.py").is_file()
    assert (SRC / "formulations" / "sia" / "__init__.py").is_file()
    assert (SRC / "formulations" / "spaces" / "__init__.py").is_file()


@pytest.mark.parametrize("old", sorted(MOVED_MODULES))
def test_old_import_paths_forward_and_warn(old):
    new = importlib.import_module(MOVED_MODULES[old])
    shim = importlib.import_module(old)
    public = [n for n in getattr(new, "__all__", []) if not n.startswith("_")]
    assert public, f"{MOVED_MODULES[old]} has no __all__"
    name = public[0]
    with pytest.warns(DeprecationWarning, match=MOVED_MODULES[old].replace(".", r"\.")):
        got = getattr(shim, name)
    assert got is getattr(new, name)


def test_from_import_of_an_old_path_gives_the_same_class():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from hetsched.jobs import JobSet as old_jobset
        from hetsched.structured.problem import recognize as old_recognize
    from hetsched.inputs.jobs import JobSet
    from hetsched.solvers.structured.problem import recognize

    assert old_jobset is JobSet is hetsched.JobSet
    assert old_recognize is recognize
