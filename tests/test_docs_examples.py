"""Every ```python block of README.md and docs/*.md runs as written.

Blocks are collected by glob, so a new document is picked up without a change here. Each
block runs like a script pasted into a file: a fresh namespace with ``__name__ ==
"__main__"`` (so ``if __name__ == "__main__":`` bodies run too), in an empty temporary
working directory (files a block writes, e.g. ``res.to_dir("out")``, land there). A block
must therefore be self-contained: imports and data included. Gavel's measured table is read
only through ``hs.gavel_throughputs()``, whose :class:`~hetsched.errors.DataNotFoundError`
(the file is not on this machine) is the one failure turned into a skip; a block that reads
``../shared/data`` directly is an error (test below).

Fences that are not meant to run use another language tag (```toml, ```text) or none.

Every shell block (```bash, ```sh, ```shell, ```console) of README.md runs too, as written,
through ``bash`` (see :func:`test_readme_shell_block_runs`): in a temporary copy of the
checkout's top (``dev.py``, and ``../shared`` linked when this machine has it), with
``HETSCHED_DEV_PYTHON`` naming the interpreter that runs the tests, so that ``python3 dev.py
run -- ...`` runs the command line in this environment instead of creating or installing
one. The exceptions, kept to these:

* the two set-up commands ``python3 dev.py demo`` and ``python3 dev.py test`` are not run
  (they create and install the virtual environment; the second would run this suite);
* a block whose first line is ``# not run by the tests: <reason>`` is not run (none today);
* a block that reads ``../shared/...`` files this machine lacks is skipped, as the Python
  blocks are when Gavel's table is absent.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
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
    """README: the demo runs every registered policy, Tiresias, the seed schedulers, HiveD's
    three and the two variants, none skipped."""
    import hetsched as hs
    from hetsched.cli import main

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    seed = ("themis", "synergy", "antman", "muri", "gandiva")
    assert "every registered policy" in readme and "Tiresias" in readme and "HiveD" in readme
    assert all(name.capitalize() in readme.replace("AntMan", "Antman") for name in seed)
    assert main(["demo", "--jobs", "4"]) == 0
    out = capsys.readouterr().out
    fixed, adaptive = out.split("\nadaptive jobs:")
    rows = {line.split()[0] for line in fixed.splitlines()[3:] if line and not line.startswith(("note", "error"))}
    expected = set(hs.list_policies()) | {"tiresias", "max_min_fairness+packing", "finish_time_fairness+placement",
                                          *seed, "hived", "hived_quota", "hived_policy"}
    assert rows == expected
    assert "adaptive schedulers" in readme
    rows = {line.split()[0] for line in adaptive.splitlines()[3:] if line and not line.startswith(("note", "error"))}
    assert rows == {"sia_adaptive", "pollux", "optimus", "gavel_tunedjobs"}
    assert "skipped" not in out


# ----------------------------------------------------------------------------- shell blocks
SHELL_FENCE = re.compile(r"^```(bash|sh|shell|console)[ \t]*\n(.*?)^```[ \t]*$", flags=re.S | re.M)
#: The README's set-up commands: they create the virtual environment and install into it (and
#: the second runs this suite), so they are the commands the shell-block test does not run.
SETUP_COMMANDS = ("python3 dev.py demo", "python3 dev.py test")
#: First line of a shell block that is explicitly not runnable (followed by the reason).
NOT_RUN = "# not run by the tests:"


def shell_blocks(path: Path) -> list[tuple[int, str, str]]:
    """``(line of the opening fence, language tag, text)`` of every shell block of ``path``."""
    text = path.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start()) + 1, m.group(1), m.group(2)) for m in SHELL_FENCE.finditer(text)]


def shell_script(lang: str, text: str) -> str:
    """The commands of a block as a bash script: ```console blocks keep only their ``$ `` lines
    (the rest is shown output); the set-up commands are dropped."""
    lines = text.splitlines()
    if lang == "console":
        lines = [ln[2:] for ln in lines if ln.startswith("$ ")]
    keep = [ln for ln in lines if ln.split("#", 1)[0].strip() not in SETUP_COMMANDS]
    return "\n".join(keep) + "\n"


def _commands(script: str) -> list[str]:
    """The command lines of a script (comments and blank lines dropped, continuations joined)."""
    joined = re.sub(r"\\\n\s*", " ", script)
    return [ln.strip() for ln in joined.splitlines() if ln.strip() and not ln.strip().startswith("#")]


README_SHELL = [
    pytest.param(line, lang, text, id=f"README.md:{line}") for line, lang, text in shell_blocks(ROOT / "README.md")
]


@pytest.mark.parametrize(("line", "lang", "text"), README_SHELL)
def test_readme_shell_block_runs(line: int, lang: str, text: str, tmp_path: Path) -> None:
    """Each README shell block runs as pasted after the set-up command (issue 30, item 5: ``python -m
    hetsched ...`` failed with "No module named hetsched" on a fresh machine, where nothing
    activated the virtual environment)."""
    if text.startswith(NOT_RUN):
        pytest.skip(f"README.md:{line} is marked {text.splitlines()[0]!r}")
    script = shell_script(lang, text)
    if not _commands(script):
        assert [c.split("#", 1)[0].strip() for c in _commands(text)] == list(SETUP_COMMANDS), text
        pytest.skip("the set-up commands create and install the virtual environment (not run here)")
    missing = sorted({w for w in shlex.split(script, comments=True) if w.startswith("../shared/")
                      and not (ROOT.parent / w[3:]).exists()})
    if missing:
        pytest.skip(f"needs data files that are not on this machine: {missing}")
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copy2(ROOT / "dev.py", repo / "dev.py")
    if (ROOT.parent / "shared").exists():
        (tmp_path / "shared").symlink_to(ROOT.parent / "shared", target_is_directory=True)
    env = {**os.environ, "HETSCHED_DEV_PYTHON": sys.executable, "MPLBACKEND": "Agg"}
    env.pop("VIRTUAL_ENV", None)
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, f"README.md:{line} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


def test_readme_shell_blocks_need_no_activated_environment() -> None:
    """Every README command runs through dev.py or names .venv's programs: a bare ``python``
    or ``python -m hetsched`` needs an activated environment (issue 30, item 5)."""
    commands = [c for _, lang, text in shell_blocks(ROOT / "README.md") for c in _commands(shell_script(lang, text))]
    assert commands, "the README shows command lines"
    bad = [c for c in commands if not c.startswith(("python3 dev.py ", ".venv/bin/"))]
    assert not bad, f"README commands that need an activated environment: {bad}"
    for doc in DOCS:
        for line, lang, text in shell_blocks(doc):
            assert "python -m hetsched" not in text, f"{doc.relative_to(ROOT)}:{line} uses `python -m hetsched`"


def test_shell_collector_finds_the_blocks() -> None:
    """The shell fence pattern sees every shell opening line of README.md; the README has the
    set-up block and runnable ones."""
    tags = ("```bash", "```sh", "```shell", "```console")
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    openings = sum(1 for ln in text.splitlines() if ln.strip().startswith(tags))
    assert openings == len(README_SHELL) >= 3
    assert sum(1 for _, lang, t in shell_blocks(ROOT / "README.md") if _commands(shell_script(lang, t))) >= 2


def test_shell_block_runner_fails_on_a_failing_command(tmp_path: Path) -> None:
    """The runner does fail: a command that exits non-zero (as ``python -m hetsched`` without the
    environment did) fails the test."""
    with pytest.raises(AssertionError, match="exited"):
        test_readme_shell_block_runs(1, "bash", "python3 dev.py run -- no-such-command\n", tmp_path)
    assert shell_script("console", "$ python3 dev.py demo\noutput\n$ echo hi\n") == "echo hi\n"
