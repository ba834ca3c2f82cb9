"""The online scheduler's three rooms (issue 24): intake and reports, the round step, and
persistence. All SQL lives in ``online/store.py``; the package reads the policy's per-job
tables by name in ``online/job_tables.py`` only; ``online`` does not import the simulator
(it sits below ``sim`` in the layering); the mechanism options are the round engine's record."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import hetsched as hs
from hetsched.errors import ValidationError
from hetsched.online import OnlineScheduler
from hetsched.rounds.options import MechanismOptions

ONLINE = Path(hs.__file__).resolve().parent / "online"
#: An SQL statement (upper-case keywords, as the store writes them).
SQL = re.compile(r"\b(SELECT\b[\s\S]*\bFROM|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|"
                 r"CREATE\s+(TABLE|INDEX)|DROP\s+(TABLE|INDEX)|PRAGMA|BEGIN(\s+IMMEDIATE)?\b|COMMIT\b|ROLLBACK\b)")
SQL_CALLS = {"execute", "executemany", "executescript", "cursor", "connect"}


def _modules() -> list[Path]:
    files = sorted(ONLINE.glob("*.py"))
    assert {"intake.py", "step.py", "store.py", "scheduler.py"} <= {p.name for p in files}
    return files


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


@pytest.mark.parametrize("path", [p for p in _modules() if p.name != "store.py"], ids=lambda p: p.name)
def test_no_sql_outside_the_store(path: Path) -> None:
    tree = _tree(path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            assert not SQL.search(node.value), f"{path.name}:{node.lineno}: SQL in {node.value[:60]!r}"
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
            assert "sqlite3" not in names, f"{path.name}:{node.lineno} imports sqlite3"
        elif isinstance(node, ast.Attribute):
            assert node.attr not in SQL_CALLS | {"conn"}, f"{path.name}:{node.lineno}: .{node.attr}"


def test_the_store_holds_the_sql() -> None:
    text = (ONLINE / "store.py").read_text(encoding="utf-8")
    assert "import sqlite3" in text and SQL.search(text)


def _imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The absolute module names an import statement of ``hetsched.online.<module>`` names
    (for ``from X import y`` both ``X`` and ``X.y``)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = "hetsched.online".split(".")
    base = base[: len(base) - (node.level - 1)] if node.level else []
    target = ".".join(base + ([node.module] if node.module else []))
    return [target] + [f"{target}.{a.name}" for a in node.names]


def _is_sim(name: str) -> bool:
    return name == "hetsched.sim" or name.startswith("hetsched.sim.")


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_online_does_not_import_the_simulator(path: Path) -> None:
    for node in ast.walk(_tree(path)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = _imported(node)
            assert not any(_is_sim(n) for n in names), f"{path.name}:{node.lineno}: imports {names}"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            assert not _is_sim(node.value.split(":")[0]), f"{path.name}:{node.lineno}: {node.value!r}"


def test_the_import_check_sees_a_relative_import_of_the_simulator() -> None:
    node = ast.parse("from ..sim.options import SimOptions").body[0]
    assert any(_is_sim(n) for n in _imported(node))
    node = ast.parse("from .. import sim").body[0]
    assert any(_is_sim(n) for n in _imported(node))


@pytest.mark.parametrize("path", [p for p in _modules() if p.name != "job_tables.py"], ids=lambda p: p.name)
def test_capabilities_not_names(path: Path) -> None:
    """Outside ``job_tables.py`` nothing is looked up on the policy or scheduler by a name in
    a string, save the protocol's optional ``rows_checked`` and ``adaptive`` declarations."""
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
            name = node.args[1] if len(node.args) > 1 else None
            if isinstance(name, ast.Constant):
                assert name.value in ("rows_checked", "adaptive"), f"{path.name}:{node.lineno}: {node.func.id}(..., {name.value!r})"


def test_options_are_the_mechanism_record() -> None:
    cluster = hs.Cluster({"v100": 2})
    for opts in (MechanismOptions(rule="deficit"), hs.SimOptions(rule="deficit")):
        s = OnlineScheduler("max_min_fairness", cluster, options=opts)
        s.submit("a", throughputs={"v100": 1.0})
        assert s.next_round(0.0).assignments["job_id"].tolist() == ["a"]
        assert s.scheduler.rule == "deficit"
        s.close()
    with pytest.raises(ValidationError, match=r"`options` must be a hetsched\.rounds\.MechanismOptions.*dict"):
        OnlineScheduler("max_min_fairness", cluster, options={"rule": "deficit"})
    with pytest.raises(ValidationError, match=r"`options.mechanism` must be 'rounds'"):
        OnlineScheduler("max_min_fairness", cluster, options=MechanismOptions(mechanism="ideal"))


def test_every_write_goes_through_one_store_transaction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each public call that changes something is one transaction of the store (what
    ``benchmarks/online.py`` times by wrapping ``Store.transaction``)."""
    from hetsched.online import store as store_module

    calls: list[int] = []
    original = store_module.Store.transaction

    def counted(self):
        calls.append(1)
        return original(self)

    monkeypatch.setattr(store_module.Store, "transaction", counted)
    s = OnlineScheduler("max_min_fairness", hs.Cluster({"v100": 1}), store=tmp_path / "s.db")
    for call in (lambda: s.submit("a", throughputs={"v100": 1.0}), lambda: s.next_round(0.0),
                 lambda: s.report("a", "v100", 10.0, 10.0), lambda: s.complete("a"), lambda: s.next_round(10.0)):
        before = len(calls)
        call()
        assert len(calls) == before + 1
    s.close()


def test_bind_online_moved_to_job_tables_and_the_old_name_warns() -> None:
    import numpy as np

    from hetsched.online import sides
    from hetsched.online.job_tables import bind_online

    pol = hs.policies.MaxMinFairness()
    kw = {"ids": np.array(["a"], dtype=object), "active": np.array([0]), "scale_factors": np.array([1]),
          "T": np.ones((1, 1)), "sides": sides.SideRates(1), "reference": None, "rows": np.array([-1]),
          "gpu_types": ("v100",)}
    with pytest.warns(DeprecationWarning, match=r"hetsched\.online\.job_tables\.bind_online"):
        old = sides.bind_online(pol, **kw)
    assert old == bind_online(pol, **kw)
