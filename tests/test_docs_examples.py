"""Every ```python block of README.md and docs/*.md runs as written.

Blocks are collected by glob, so a new document is picked up without a change here. Each
block runs like a script pasted into a file: a fresh namespace with ``__name__ ==
"__main__"`` (so ``if __name__ == "__main__":`` bodies run too), in an empty temporary
working directory (files a block writes, e.g. ``res.to_dir("out")``, land there). A block
must therefore be self-contained: imports and data included. Gavel's measured table is read
only through ``hs.gavel_throughputs()``, whose :class:`~hetsched.errors.DataNotFoundError`
(the file is not on this machine) is the one failure turned into a skip; a block that reads
``../shared/data`` directly is an error (test below).

Fences that are not meant to run use another language tag (```bash, ```toml, ```text) or
none.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hetsched.errors import DataNotFoundError

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", flags=re.S | re.M)
#: Engines a block may need; the test command installs them (extras ray, dask).
OPTIONAL_ENGINES = {"ray", "distributed", "dask"}


def blocks(path: Path) -> list[tuple[int, str]]:
    """``(line of the opening fence, code)`` of every ```python block of ``path``."""
    text = path.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in FENCE.finditer(text)]


CASES = [
    pytest.param(doc, line, code, id=f"{doc.relative_to(ROOT)}:{line}")
    for doc in DOCS
    for line, code in blocks(doc)
]


@pytest.mark.parametrize(("doc", "line", "code"), CASES)
def test_python_block_runs(doc: Path, line: int, code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    run_block(code, doc, line)


def run_block(code: str, doc: Path, line: int) -> None:
    """Execute one block as a script; skip (only) when Gavel's data or an engine is absent."""
    # pad with blank lines so that tracebacks show the line numbers of the Markdown file
    compiled = compile("\n" * line + code, str(doc), "exec")
    try:
        exec(compiled, {"__name__": "__main__"})
    except DataNotFoundError as exc:
        pytest.skip(f"needs a data file that is not on this machine: {exc}")
    except ModuleNotFoundError as exc:
        if exc.name not in OPTIONAL_ENGINES:
            raise
        pytest.skip(f"needs {exc.name}: pip install 'hetsched[ray,dask]'")
    finally:
        _close_figures()


def _close_figures() -> None:
    import sys

    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        plt.close("all")


def test_collector_finds_the_blocks() -> None:
    """The fence pattern sees every ```python opening line (none silently missed)."""
    for doc in DOCS:
        openings = sum(1 for ln in doc.read_text(encoding="utf-8").splitlines() if ln.strip().startswith("```python"))
        assert openings == len(blocks(doc)), doc
    assert len(blocks(ROOT / "README.md")) >= 3
    assert len(CASES) >= 15


def test_blocks_read_gavel_data_only_through_the_helper() -> None:
    for doc in DOCS:
        for line, code in blocks(doc):
            assert "shared/data" not in code and "load_gavel_throughputs(" not in code, (
                f"{doc.relative_to(ROOT)}:{line} reads a data file directly; use hs.gavel_throughputs()"
            )



def test_missing_gavel_table_skips_and_other_errors_fail(tmp_path: Path) -> None:
    missing = tmp_path / "simulation_throughputs.json"
    with pytest.raises(pytest.skip.Exception, match="stanford-futuredata/gavel"):
        run_block(f"import hetsched as hs\nhs.gavel_throughputs({str(missing)!r})\n", tmp_path / "x.md", 1)
    with pytest.raises(NameError):
        run_block("print(undefined_name)\n", tmp_path / "x.md", 1)
    with pytest.raises(ModuleNotFoundError):
        run_block("import no_such_module_for_docs\n", tmp_path / "x.md", 1)
    with pytest.raises(ZeroDivisionError) as info:   # tracebacks point at the Markdown line
        run_block("x = 1\n1 / 0\n", tmp_path / "x.md", 40)
    assert info.traceback[-1].lineno + 1 == 42


def test_readme_demo_claim_is_exact(capsys: pytest.CaptureFixture[str]) -> None:
    """README: the demo runs every registered policy, Tiresias and the two variants, none skipped."""
    import hetsched as hs
    from hetsched.cli import main

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "every registered policy" in readme and "Tiresias" in readme
    assert main(["demo", "--jobs", "4"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0] for line in out.splitlines()[3:] if line and not line.startswith(("note", "error"))}
    expected = set(hs.list_policies()) | {"tiresias", "max_min_fairness+packing", "finish_time_fairness+placement"}
    assert rows == expected
    assert "skipped" not in out
