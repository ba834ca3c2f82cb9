"""No raw exceptions from the trace readers, sweep() and the command line's --out.

* a byte that is not UTF-8 in a trace is a ValidationError naming file, line and byte
  offset (or, with on_bad_rows="skip", a skipped row counted in meta["skipped"]);
* a run of sweep() that raises, or whose executor future fails (BrokenProcessPool...), gets
  its error in the ``error`` column and the other runs are kept;
* ``--out`` is checked before the run: exit 2 with one line on stderr.
"""

from __future__ import annotations

import concurrent.futures as cf
import importlib
import os
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pandas as pd
import pytest

import hetsched as hs
import hetsched.sim as sim_pkg
import hetsched.sim.bench as bench_mod
from hetsched.cli import main
from hetsched.errors import ValidationError
from hetsched.sim import (
    load_trace,
    read_gavel_trace,
    read_helios_trace,
    read_pai_trace,
    read_philly_trace,
    sweep,
)

sweep_mod = importlib.import_module("hetsched.sim.sweep")  # the module; hetsched.sim.sweep is the function
FIX = Path(__file__).parent / "fixtures"
TPUT = FIX / "gavel_throughputs_small.json"


def _corrupt(tmp_path: Path, name: str, line: int, old: bytes, new: bytes) -> tuple[Path, int]:
    """Copy fixture ``name`` with ``old`` replaced by ``new`` on line ``line`` (from 1);
    return the path and the offset of the first bad byte."""
    data = (FIX / name).read_bytes().split(b"\n")
    assert old in data[line - 1]
    data[line - 1] = data[line - 1].replace(old, new, 1)
    out = b"\n".join(data)
    p = tmp_path / name
    p.write_bytes(out)
    bad = next(i for i in range(len(out)) if out[i] >= 0x80)
    return p, bad


# ------------------------------------------------------------------------------ readers
def test_gavel_bad_byte(tmp_path: Path) -> None:
    p, off = _corrupt(tmp_path, "gavel_small.trace", 2, b"LM", b"L\xffM")
    for read in (lambda e: read_gavel_trace(p, TPUT, on_bad_rows=e), lambda e: load_trace(p, throughputs=TPUT, on_bad_rows=e)):
        with pytest.raises(ValidationError) as info:
            read("raise")
        msg = str(info.value)
        assert str(p) in msg and "line 2" in msg and f"byte offset {off}" in msg and "0xff" in msg and "UTF-8" in msg
        tr = read("skip")
        assert tr.n_jobs == 3
        assert len(tr.meta["skipped"]) == 1 and "line 2" in tr.meta["skipped"][0]
        assert tr.arrival_times.tolist() == [0.0, 360.0, 4000.0]


def test_gavel_bad_byte_after_other_bad_rows_keeps_line_numbers(tmp_path: Path) -> None:
    p, _ = _corrupt(tmp_path, "gavel_small.trace", 1, b"ResNet", b"Res\xc3Net")
    ls = p.read_bytes().split(b"\n")
    ls[2] = b"garbage"
    p.write_bytes(b"\n".join(ls))
    with pytest.raises(ValidationError, match="line 1: is not valid UTF-8"):
        read_gavel_trace(p, TPUT)
    tr = read_gavel_trace(p, TPUT, on_bad_rows="skip")
    assert tr.n_jobs == 2 and [s.split(": ")[1] for s in tr.meta["skipped"]] == ["line 1", "line 3"]


def test_helios_bad_byte(tmp_path: Path) -> None:
    name = "helios_cluster_log_small.csv"
    good = read_helios_trace(FIX / name)
    p, off = _corrupt(tmp_path, name, 2, b"ua", b"u\xe9a")
    with pytest.raises(ValidationError) as info:
        read_helios_trace(p)
    msg = str(info.value)
    assert str(p) in msg and "line 2" in msg and f"byte offset {off}" in msg and "0xe9" in msg
    with pytest.raises(ValidationError, match=f"line 2: .*byte offset {off}"):
        load_trace(p, throughputs=TPUT, unmatched="skip")
    t = read_helios_trace(p, on_bad_rows="skip")
    assert len(t) == len(good) - 1 and good["job_id"].iloc[0] not in set(t["job_id"])
    assert len(t.attrs["meta"]["skipped"]) == 1 and "line 2" in t.attrs["meta"]["skipped"][0]
    tr = load_trace(p, throughputs=TPUT, unmatched="skip", on_bad_rows="skip")
    assert len(tr.meta["skipped"]) == 1
    # the header cannot be skipped
    h = tmp_path / "h.csv"
    h.write_bytes(b"\xff" + (FIX / name).read_bytes())
    with pytest.raises(ValidationError, match="line 1 \\(the header\\) is not valid UTF-8: byte 0xff at byte offset 0"):
        read_helios_trace(h, on_bad_rows="skip")


def test_philly_bad_byte(tmp_path: Path) -> None:
    name = "philly_cluster_job_log_small.json"
    p, off = _corrupt(tmp_path, name, 2, b'"u1"', b'"u\xff1"')
    with pytest.raises(ValidationError) as info:
        read_philly_trace(p)
    msg = str(info.value)
    assert str(p) in msg and "line 2" in msg and f"byte offset {off}" in msg
    with pytest.raises(ValidationError, match="line 2: is not valid UTF-8"):
        load_trace(p, throughputs=TPUT)
    t = read_philly_trace(p, on_bad_rows="skip")
    assert len(t) == 2 and "application_1506638472019_0001" not in set(t["job_id"])
    assert len(t.attrs["meta"]["skipped"]) == 1 and "entry 0: is not valid UTF-8" in t.attrs["meta"]["skipped"][0]
    # a bad byte outside any string breaks the JSON itself: not skippable
    q = tmp_path / "q.json"
    q.write_bytes((FIX / name).read_bytes().replace(b"[", b"[\xff", 1))
    with pytest.raises(ValidationError, match="line 1: is not valid UTF-8: byte 0xff at byte offset 1"):
        read_philly_trace(q, on_bad_rows="skip")


def test_pai_bad_byte(tmp_path: Path) -> None:
    jobs, tasks = "pai_job_table_small.csv", "pai_task_table_small.csv"
    good = read_pai_trace(FIX / jobs, FIX / tasks)
    pt, off = _corrupt(tmp_path, tasks, 2, b"tensorflow", b"tensor\xa0flow")
    with pytest.raises(ValidationError) as info:
        read_pai_trace(FIX / jobs, pt)
    msg = str(info.value)
    assert str(pt) in msg and "line 2" in msg and f"byte offset {off}" in msg
    t = read_pai_trace(FIX / jobs, pt, on_bad_rows="skip")
    assert len(t.attrs["meta"]["skipped"]) == 1 and "line 2: is not valid UTF-8" in t.attrs["meta"]["skipped"][0]
    assert len(t) <= len(good)
    pj, off = _corrupt(tmp_path, jobs, 1, b"user_x", b"user_\x80x")
    with pytest.raises(ValidationError, match=f"line 1: is not valid UTF-8: byte 0x80 at byte offset {off}"):
        load_trace(pj, "pai", task_path=FIX / tasks, throughputs=TPUT, unmatched="skip")
    t = read_pai_trace(pj, FIX / tasks, on_bad_rows="skip")
    assert "job_a1" not in set(t["job_id"]) and any("UTF-8" in s for s in t.attrs["meta"]["skipped"])


# ------------------------------------------------------------------------------ sweep
GRID = {
    "policy": "fifo",
    "load": [6.0],
    "seed": [0, 1, 2, 3],
    "n_jobs": 4,
    "long_job_prob": 0.0,
    "cluster": hs.Cluster({"v100": 4, "k80": 4}),
}


class _FailingExecutor(cf.Executor):
    """Runs in the caller; the futures of some submissions fail instead."""

    def __init__(self, fail: dict[int, BaseException], refuse: int | None = None) -> None:
        self.fail, self.refuse, self.n = fail, refuse, 0

    def submit(self, fn, /, *args, **kwargs):
        i, self.n = self.n, self.n + 1
        if i == self.refuse:
            raise RuntimeError("cannot schedule new futures after shutdown")
        fut: cf.Future = cf.Future()
        if i in self.fail:
            fut.set_exception(self.fail[i])
        else:
            fut.set_result(fn(*args, **kwargs))
        return fut


def test_sweep_keeps_runs_when_futures_fail() -> None:
    base = sweep(GRID, max_workers=1)
    assert (base["error"] == "").all()
    ex = _FailingExecutor({1: ValueError("worker lost its data"),
                           2: BrokenProcessPool("A process in the process pool was terminated abruptly")},
                          refuse=3)
    df = sweep(GRID, ex)
    assert len(df) == 4 and list(df["run"]) == [0, 1, 2, 3] and list(df["seed"]) == [0, 1, 2, 3]
    errors = df["error"].tolist()
    assert errors[0] == "" and errors[1] == "ValueError: worker lost its data"
    assert errors[3] == "RuntimeError: cannot schedule new futures after shutdown"
    # a broken pool keeps its own message and names the likely cause (an unguarded script)
    assert errors[2].startswith("BrokenProcessPool: A process in the process pool was terminated abruptly")
    assert 'if __name__ == "__main__":' in errors[2]
    assert df.loc[0, "avg_jct_s"] == base.loc[0, "avg_jct_s"]
    assert df.loc[1:, "avg_jct_s"].isna().all()


@pytest.mark.parametrize("how", ["serial", "threads"])
def test_sweep_keeps_runs_when_a_run_raises(monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    real = sweep_mod.simulate

    def flaky(policy, trace, cluster, *, options):
        if options.seed == 2:
            raise ZeroDivisionError("float division by zero")
        return real(policy, trace, cluster, options=options)

    monkeypatch.setattr(sweep_mod, "simulate", flaky)
    if how == "serial":
        df = sweep(GRID, max_workers=1)
    else:
        with cf.ThreadPoolExecutor(2) as ex:
            df = sweep(GRID, ex)
    assert len(df) == 4
    assert df["error"].tolist() == ["", "", "ZeroDivisionError: float division by zero", ""]
    assert df.loc[df["seed"] != 2, "n_completed"].eq(4).all()


class _KillsWorker:
    """Unpickling it ends the worker process (a worker that dies mid-sweep)."""

    def __reduce__(self):
        return (os._exit, (7,))


def test_sweep_survives_a_dead_worker() -> None:
    trace = hs.sim.generate_workload(4, rate_per_hour=6.0, seed=0, long_job_prob=0.0)
    grid = {"policy": "fifo", "cluster": hs.Cluster({"v100": 4, "k80": 4}), "workload": [trace, _KillsWorker()]}
    with cf.ProcessPoolExecutor(max_workers=1) as ex:
        df = sweep(grid, ex)
    assert len(df) == 2
    assert df.loc[1, "error"].startswith("BrokenProcessPool: ")
    assert df.loc[0, "error"] == "" or df.loc[0, "error"].startswith("BrokenProcessPool: ")


# ------------------------------------------------------------------------------ CLI --out
@pytest.fixture
def no_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every command fails the test if it gets as far as running."""

    def ran(*a, **k):
        raise AssertionError("the run started before --out was checked")

    monkeypatch.setattr(sim_pkg, "simulate", ran)
    monkeypatch.setattr(sim_pkg, "run_config", ran)
    monkeypatch.setattr(sim_pkg, "sweep", ran)
    monkeypatch.setattr(hs, "solve", ran)
    monkeypatch.setattr(bench_mod, "speed_run", ran)


def _bad_out(argv: list[str], value: str, capsys: pytest.CaptureFixture[str], *words: str) -> None:
    assert main(argv + ["--out", value]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: `--out` must be") and repr(value) in lines[0]
    for w in words:
        assert w in lines[0]


COMMANDS = {
    "simulate": (["simulate", "--jobs", "3"], "dir"),
    "sweep": (["sweep", "--jobs", "3", "--workers", "1"], "dir"),
    "solve": (["solve", "--jobs", "3"], "file"),
    "bench": (["bench", "--loads", "6", "--window", "1", "3"], "file"),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_out_checked_before_the_run(command: str, tmp_path: Path, no_run, capsys: pytest.CaptureFixture[str]) -> None:
    argv, kind = COMMANDS[command]
    a_file = tmp_path / "taken.txt"
    a_file.write_text("x")
    # below a regular file: neither a directory nor a file can go there
    _bad_out(argv, str(a_file / "sub" / "out.csv"), capsys, "is a file, not a directory")
    if kind == "dir":
        _bad_out(argv, str(a_file), capsys, "directory", "existing file")
    else:
        _bad_out(argv, str(tmp_path), capsys, "file path", "is a directory")
    assert a_file.read_text() == "x" and not (tmp_path / "taken.txt" / "sub").exists()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes anywhere")
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_out_unwritable(command: str, tmp_path: Path, no_run, capsys: pytest.CaptureFixture[str]) -> None:
    argv, _ = COMMANDS[command]
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        _bad_out(argv, str(locked / "new" / "out"), capsys, "not writable")
    finally:
        locked.chmod(0o700)


def test_simulate_config_out_checked_first(tmp_path: Path, no_run, capsys: pytest.CaptureFixture[str]) -> None:
    a_file = tmp_path / "f"
    a_file.write_text("x")
    _bad_out(["simulate", "--config", str(tmp_path / "any.toml")], str(a_file), capsys, "existing file")
    _bad_out(["sweep", "--config", str(tmp_path / "any.toml")], str(a_file), capsys, "existing file")


def test_write_failure_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    cols = ["load", "jobs_started", "rounds", "solves", "sim_hours", "wall_s", "sim_h_per_wall_s", "rounds_per_s",
            "policy_s", "mechanism_s", "placement_s", "other_s", "avg_jct_hours"]
    monkeypatch.setattr(bench_mod, "speed_run", lambda **kw: dict.fromkeys(cols, 1.0))

    def full(self, *a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_csv", full)
    assert main(["bench", "--loads", "6", "--out", str(tmp_path / "b.csv")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: OSError: [Errno 28] No space left on device"]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_out_unwritable_any_user(command: str, tmp_path: Path, no_run, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    """The same as test_out_unwritable where root would bypass permissions: os.access says no."""
    argv, _ = COMMANDS[command]
    locked = tmp_path / "locked"
    locked.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **k: False if Path(p) == locked else real(p, mode, **k))
    _bad_out(argv, str(locked / "new" / "out"), capsys, "cannot be created", str(locked), "not writable")
    _bad_out(argv, str(locked / "out"), capsys, "is not writable")
