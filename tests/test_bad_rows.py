"""Issue 30, item 2: no trace row and no throughput-table cell disappears without the caller
saying so.

Each test reproduces a failure as the issue reported it:

* a throughput table without one job type silently dropped 30 % of a 96-row Gavel trace
  (one ``note:`` line, exit 0): now an error that counts and names the rows, unless
  ``on_bad_rows="skip"`` / ``--skip-bad-rows``, which drops them with a warning and
  records the counts in the result's provenance;
* a Gavel trace whose only job type is unknown loaded to 0 jobs: always an error;
* a Helios row with a NaN duration was skipped silently: an error by default, dropped and
  counted with ``on_bad_rows="skip"``;
* a throughput table without one GPU's row for a model silently became throughput 0 on that
  GPU: an error naming the model and the GPU type, unless ``missing="zero"``.
"""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path

import numpy as np
import pytest

import hetsched as hs
from hetsched.cli import main
from hetsched.errors import ValidationError
from hetsched.sim import (
    load_trace,
    read_gavel_trace,
    read_helios_trace,
    read_philly_trace,
)

FIX = Path(__file__).parent / "fixtures"
TPUT = FIX / "gavel_throughputs_small.json"
GAVEL = Path(__file__).resolve().parents[2] / "shared" / "data" / "gavel"
R18, LM = "ResNet-18 (batch size 64)", "LM (batch size 20)"
#: The rows (from 0) of the 96-row trace whose job type the table below lacks: 29, 30 %.
LM_ROWS = sorted(set(range(3, 96, 10)) | set(range(6, 96, 10)) | set(range(9, 96, 10)) | {95})


def _table_without(tmp_path: Path, job_type: str) -> Path:
    """The fixture's throughput table with every row of ``job_type`` removed."""
    raw = json.loads(TPUT.read_text())
    out = {gpu: {k: v for k, v in rows.items() if job_type not in k} for gpu, rows in raw.items()}
    p = tmp_path / "throughputs.json"
    p.write_text(json.dumps(out))
    return p


def _trace_96(tmp_path: Path) -> Path:
    """96 Gavel-format rows, one a minute, 3,600 steps each; rows LM_ROWS are LM jobs."""
    lines = []
    for i in range(96):
        jt = LM if i in LM_ROWS else R18
        lines.append(f"{jt}\tpython3 main.py\tdir\t--num_steps\t1\t3600\t1\t1\t-1\t{60 * i}\n")
    p = tmp_path / "trace_96.trace"
    p.write_text("".join(lines))
    return p


# ------------------------------------------------------------------------------ Gavel traces
def test_table_lacking_a_job_type_is_an_error_that_counts_and_names_the_rows(tmp_path):
    table, trace = _table_without(tmp_path, LM), _trace_96(tmp_path)
    assert len(LM_ROWS) == 29
    with pytest.raises(ValidationError) as info:
        read_gavel_trace(trace, table)
    msg = str(info.value)
    assert msg.startswith(f"{trace}: 29 of 96 row(s) cannot be used (no_throughput_row: 29): ")
    # the first three bad rows by line number (line = row + 1), the rule, and how to opt in
    assert "line 4: unknown job type ('LM (batch size 20)', scale factor 1): not a row of the throughput table" in msg
    assert "; line 7: " in msg and "; line 10: " in msg and "and 26 more" in msg
    assert 'on_bad_rows="skip"' in msg and "--skip-bad-rows" in msg
    with pytest.raises(ValidationError, match=r"29 of 96 row\(s\) cannot be used"):
        load_trace(trace, throughputs=table)   # the dispatcher too


def test_skip_drops_them_with_a_warning_and_counts_them_in_the_provenance(tmp_path, caplog):
    table, trace = _table_without(tmp_path, LM), _trace_96(tmp_path)
    with caplog.at_level(logging.WARNING, logger="hetsched"):
        tr = read_gavel_trace(trace, table, on_bad_rows="skip")
    assert tr.n_jobs == 96 - 29 and set(tr.job_types.tolist()) == {R18}
    rep = tr.meta["load_report"]
    assert rep["on_bad_rows"] == "skip" and rep["rows"] == 96 and rep["kept"] == 67
    assert rep["dropped"] == {"no_throughput_row": 29} and rep["malformed"] == {}
    assert tr.meta["no_throughput_row"] == 29 and len(tr.meta["skipped"]) == 20   # the first 20 listed
    assert tr.meta["skipped_counts"] == {"no_throughput_row": 29} and tr.meta["skipped_left_out"] == 9
    warned = [r for r in caplog.records if r.levelno == logging.WARNING and "trace_96.trace" in r.getMessage()]
    assert len(warned) == 1 and "{'no_throughput_row': 29}" in warned[0].getMessage()
    # the counts travel into the simulation's config (summary.json and provenance.json)
    res = hs.simulate("fifo", tr.head(6), hs.Cluster({"v100": 2, "p100": 2, "k80": 2}))
    assert res.config["workload_meta"]["load_report"]["dropped"] == {"no_throughput_row": 29}
    d = res.to_dir(tmp_path / "out")
    summary = json.loads((d / "summary.json").read_text())
    assert summary["config"]["workload_meta"]["load_report"]["dropped"] == {"no_throughput_row": 29}
    prov = json.loads((d / "provenance.json").read_text())
    assert prov["config"]["workload_meta"]["load_report"]["on_bad_rows"] == "skip"


def test_only_job_type_unknown_is_an_error_whatever_on_bad_rows_says(tmp_path):
    """It used to load as 0 jobs without an error."""
    p = tmp_path / "unknown.trace"
    p.write_text("".join(f"GPT-9 (batch size 1)\tcmd\tdir\t--steps\t1\t100\t1\t1\t-1\t{10 * i}\n" for i in range(4)))
    with pytest.raises(ValidationError, match=r"4 of 4 row\(s\) cannot be used \(no_throughput_row: 4\): line 1: "
                                              r"unknown job type \('GPT-9 \(batch size 1\)', scale factor 1\).*"
                                              r"No row would be left to replay: 4 row\(s\) read, 0 kept"):
        read_gavel_trace(p, TPUT)
    with pytest.raises(ValidationError, match=r"no job to replay: 4 row\(s\) read, 0 kept; not kept: "
                                              r"\{'no_throughput_row': 4\}"):
        read_gavel_trace(p, TPUT, on_bad_rows="skip")
    with pytest.raises(ValidationError, match="no job to replay"):
        load_trace(p, throughputs=TPUT, on_bad_rows="skip")


# ------------------------------------------------------------------------------ Helios NaN duration
HELIOS_HEADER = "job_id,user,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"


def test_helios_nan_duration_is_an_error_by_default_and_counted_when_skipped(tmp_path):
    p = tmp_path / "cluster_log.csv"
    p.write_text(HELIOS_HEADER
                 + "a,u,1,6,1,COMPLETED,2020-04-01 00:00:00,2020-04-01 00:00:05,2020-04-01 01:00:05,3600,vc1\n"
                 + "b,u,2,6,1,COMPLETED,2020-04-01 00:01:00,2020-04-01 00:01:00,,nan,vc1\n"
                 + "c,u,1,6,1,COMPLETED,2020-04-01 00:02:00,2020-04-01 00:02:00,2020-04-01 00:32:00,1800,vc1\n")
    with pytest.raises(ValidationError) as info:
        read_helios_trace(p)
    msg = str(info.value)
    assert "1 of 3 row(s) cannot be used (unfinished: 1): line 3: job 'b': `duration` is missing (got 'nan')" in msg
    t = read_helios_trace(p, on_bad_rows="skip")
    assert t["job_id"].tolist() == ["a", "c"]
    rep = t.attrs["meta"]["load_report"]
    assert rep["dropped"] == {"unfinished": 1} and rep["kept"] == 2
    assert rep["examples"]["unfinished"] == [f"{p}: line 3: job 'b': `duration` is missing (got 'nan')"]
    # through load_trace into the trace's meta
    tr = load_trace(p, throughputs=TPUT, on_bad_rows="skip")
    assert tr.meta["load_report"]["dropped"] == {"unfinished": 1}


def test_helios_header_only_is_a_validation_error(tmp_path):
    """It used to raise pandas' EmptyDataError."""
    p = tmp_path / "cluster_log.csv"
    p.write_text(HELIOS_HEADER)
    for mode in ("raise", "skip"):
        with pytest.raises(ValidationError, match=r"no job to replay: 0 row\(s\) read, 0 kept \(the file holds no job"):
            read_helios_trace(p, on_bad_rows=mode)


# ------------------------------------------------------------------------------ the errors= keyword
def test_errors_keyword_still_works_and_warns(tmp_path):
    p = tmp_path / "c.csv"
    p.write_text(HELIOS_HEADER + "a,u,1,6,1,COMPLETED,0,0,100,100,q\nb,u,1,6,1,RUNNING,10,10,,,q\n")
    for old in ("drop", "skip"):
        with pytest.warns(DeprecationWarning, match=rf"`errors='{old}'` is deprecated; pass `on_bad_rows='skip'`"):
            t = read_helios_trace(p, errors=old)
        assert t["job_id"].tolist() == ["a"] and t.attrs["meta"]["load_report"]["on_bad_rows"] == "skip"
    with pytest.warns(DeprecationWarning, match="on_bad_rows='raise'"):
        with pytest.raises(ValidationError, match=r"1 of 2 row\(s\) cannot be used \(unfinished: 1\)"):
            read_helios_trace(p, errors="raise")
    # load_trace maps it once (one warning, pointing at the caller)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_trace(p, throughputs=TPUT, errors="drop")
    dep = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert len(dep) == 1 and dep[0].filename == __file__
    with pytest.warns(DeprecationWarning), pytest.raises(ValidationError, match="contradicts `on_bad_rows='skip'`"):
        read_philly_trace(FIX / "philly_cluster_job_log_small.json", errors="raise", on_bad_rows="skip")


# ------------------------------------------------------------------------------ command line
def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_cli_refuses_bad_rows_and_skip_bad_rows_records_them(tmp_path, capsys):
    table, trace = _table_without(tmp_path, LM), _trace_96(tmp_path)
    args = ["simulate", "--policy", "fifo", "--trace", trace, "--throughputs", table,
            "--cluster", "v100=4,p100=4,k80=4"]
    code, out, err = _cli(capsys, *args, "--out", tmp_path / "refused")
    assert code == 2 and out == ""
    assert err.startswith("error: ") and "29 of 96 row(s) cannot be used (no_throughput_row: 29)" in err
    assert "--skip-bad-rows" in err and not (tmp_path / "refused" / "summary.json").exists()
    code, out, err = _cli(capsys, *args, "--skip-bad-rows", "--out", tmp_path / "run")
    assert code == 0, err
    assert f"note: {trace}: 96 rows, 67 kept; skipped (--skip-bad-rows): {{'no_throughput_row': 29}}" in err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["n_jobs"] == 67
    assert summary["config"]["workload_meta"]["load_report"]["dropped"] == {"no_throughput_row": 29}
    prov = json.loads((tmp_path / "run" / "provenance.json").read_text())
    assert "--skip-bad-rows" in prov["command"]
    assert prov["config"]["workload_meta"]["load_report"]["dropped"] == {"no_throughput_row": 29}


def test_cli_skip_bad_rows_on_solve_and_with_a_config(tmp_path, capsys):
    table, trace = _table_without(tmp_path, LM), _trace_96(tmp_path)
    args = ["solve", "--trace", trace, "--throughputs", table, "--cluster", "v100=4,p100=4,k80=4"]
    assert _cli(capsys, *args)[0] == 2
    code, _, err = _cli(capsys, *args, "--skip-bad-rows")
    assert code == 0 and "skipped (--skip-bad-rows): {'no_throughput_row': 29}" in err
    cfg = tmp_path / "exp.toml"
    cfg.write_text(f'policy = "fifo"\n[cluster]\nv100 = 4\np100 = 4\nk80 = 4\n'
                   f'[workload]\nkind = "gavel"\npath = "{trace}"\nthroughputs = "{table}"\n')
    code, _, err = _cli(capsys, "simulate", "--config", cfg, "--out", tmp_path / "cfg_refused")
    assert code == 2 and "29 of 96 row(s) cannot be used" in err
    code, _, err = _cli(capsys, "simulate", "--config", cfg, "--skip-bad-rows", "--out", tmp_path / "cfg")
    assert code == 0, err
    summary = json.loads((tmp_path / "cfg" / "summary.json").read_text())
    assert summary["config"]["workload_meta"]["load_report"]["dropped"] == {"no_throughput_row": 29}


def test_cli_skip_bad_rows_without_a_trace_is_an_error(capsys):
    code, _, err = _cli(capsys, "simulate", "--jobs", "3", "--skip-bad-rows")
    assert code == 2 and "`--skip-bad-rows` applies to the rows of a --trace" in err and "generated" in err
    code, _, err = _cli(capsys, "sweep", "--jobs", "3", "--loads", "2", "--skip-bad-rows")
    assert code == 2 and "`--skip-bad-rows` applies to the rows of a trace" in err


# ------------------------------------------------------------------------------ throughput tables
def _write(tmp_path: Path, obj: dict, name: str = "t.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(obj))
    return p


def test_table_without_one_gpus_row_for_a_model_is_an_error_naming_both(tmp_path, caplog):
    raw = json.loads(TPUT.read_text())
    del raw["k80"][f"('{LM}', 2)"]                 # no K80 entry for LM on 2 GPUs
    del raw["p100"][f"('{R18}', 1)"]               # and no P100 entry for ResNet-18 on 1 GPU
    p = _write(tmp_path, raw)
    with pytest.raises(ValidationError) as info:
        hs.load_gavel_throughputs(p)
    msg = str(info.value)
    assert "2 row(s) (job type, scale factor) have no isolated throughput on some GPU type" in msg
    assert f"('{LM}', 2) on ['k80']" in msg and f"('{R18}', 1) on ['p100']" in msg
    assert 'missing="zero"' in msg
    with pytest.raises(ValidationError, match=r"no isolated throughput"):
        read_gavel_trace(FIX / "gavel_small.trace", p)   # a path given to a reader: the same rule
    # explicitly: throughput 0 there, said in a WARNING
    with caplog.at_level(logging.WARNING, logger="hetsched.inputs.throughputs"):
        cat = hs.load_gavel_throughputs(p, missing="zero")
    lm2 = int(cat.index_of([LM], [2])[0])
    r1 = int(cat.index_of([R18], [1])[0])
    assert cat.throughputs[lm2, cat.gpu_types.index("k80")] == 0.0
    assert cat.throughputs[r1, cat.gpu_types.index("p100")] == 0.0
    assert any("'k80' lacks 1 row" in r.getMessage() and "missing='zero'" in r.getMessage() for r in caplog.records)


def test_a_zero_in_the_table_is_kept_as_cannot_run_there(tmp_path):
    raw = json.loads(TPUT.read_text())
    raw["k80"][f"('{LM}', 2)"] = {"null": 0.0}
    cat = hs.load_gavel_throughputs(_write(tmp_path, raw))
    assert cat.throughputs[int(cat.index_of([LM], [2])[0]), cat.gpu_types.index("k80")] == 0.0


def test_missing_argument_is_checked(tmp_path):
    with pytest.raises(ValidationError, match=r"`missing` must be one of \['raise', 'zero'\]; got 'ignore'"):
        hs.load_gavel_throughputs(TPUT, missing="ignore")
    with pytest.raises(ValidationError, match=r"`path` must be a str or pathlib.Path .*; got dict"):
        hs.load_gavel_throughputs({"v100": {}})


# ------------------------------------------------------------------------------ real data still loads
@pytest.mark.skipif(not (GAVEL / "simulation_throughputs.json").is_file(), reason="../shared/data/gavel is not present")
def test_gavel_table_and_traces_load_by_default(caplog):
    """Gavel's table has every row on every consolidated type (its k80_unconsolidated table
    lacks six rows: unconsolidated throughput 0 there, said in a WARNING), and its physical-
    cluster and generated traces have a table row for every job."""
    with caplog.at_level(logging.WARNING, logger="hetsched.inputs.throughputs"):
        cat = hs.gavel_throughputs()
    assert any("'k80_unconsolidated' lacks 6 row(s)" in r.getMessage() for r in caplog.records)
    assert (cat.unconsolidated[:, cat.gpu_types.index("k80")] == 0).sum() >= 6
    files = sorted((GAVEL / "traces" / "physical_cluster").glob("*.trace"))
    files += sorted((GAVEL / "traces" / "generated").glob("*.trace"))
    assert len(files) >= 9
    for f in files:
        tr = read_gavel_trace(f, cat)
        assert tr.meta["load_report"]["dropped"] == {} and tr.n_jobs > 0, f.name
    # an msr trace needs the explicit opt-in; its counts are in the report
    msr = GAVEL / "traces" / "msr" / "seed=0" / "6c71a0.trace"
    with pytest.raises(ValidationError, match=r"63 of 2000 row\(s\) cannot be used \(no_throughput_row: 63\)"):
        read_gavel_trace(msr, cat)
    tr = read_gavel_trace(msr, cat, on_bad_rows="skip")
    assert tr.meta["load_report"]["dropped"] == {"no_throughput_row": 63} and tr.n_jobs == 1937
    assert np.isfinite(tr.arrival_times).all()


# ------------------------------------------------------------------------------ --missing on the command line
def _incomplete_table(tmp_path: Path) -> Path:
    """The fixture's table without K80's row for LM on 2 GPUs."""
    raw = json.loads(TPUT.read_text())
    del raw["k80"][f"('{LM}', 2)"]
    return _write(tmp_path, raw, "incomplete.json")


SMALL = ["--cluster", "v100=4,p100=4,k80=4"]


@pytest.mark.parametrize("argv", [
    ["simulate", "--jobs", "6", "--long-job-prob", "0", "--no-progress", *SMALL],
    ["solve", "--jobs", "6", *SMALL],
    ["sweep", "--policies", "fifo", "--loads", "6", "--jobs", "4", "--long-job-prob", "0", "--workers", "1",
     "--no-progress", *SMALL],
    ["simulate", "--trace", str(FIX / "gavel_small.trace"), "--policy", "fifo", "--no-progress", *SMALL],
    ["sweep", "--trace", str(FIX / "gavel_small.trace"), "--policies", "fifo", "--workers", "1", "--no-progress",
     *SMALL],
    ["demo", "--jobs", "4", "--policies", "fifo", "--gpus-per-type", "4"],
    ["bench", "--loads", "6", "--window", "2", "4"],
], ids=["simulate", "solve", "sweep", "simulate-trace", "sweep-trace", "demo", "bench"])
def test_cli_missing_switch_for_an_incomplete_table(tmp_path, capsys, argv):
    """There was no command-line switch for ``missing=``: an incomplete table could only be an
    error. Default: exit 2 naming the row, the GPU type and the switch; ``--missing zero`` runs."""
    table = _incomplete_table(tmp_path)
    code, out, err = _cli(capsys, *argv, "--throughputs", table)
    assert code == 2 and err.count("\n") == 1, err
    assert "1 row(s) (job type, scale factor) have no isolated throughput on some GPU type" in err
    assert f"('{LM}', 2) on ['k80']" in err and "--missing zero" in err
    code, out, err = _cli(capsys, *argv, "--throughputs", table, "--missing", "zero")
    assert code == 0, err
    code, out, err = _cli(capsys, *argv, "--throughputs", TPUT, "--missing", "raise")   # a complete table: as before
    assert code == 0, err


def test_cli_missing_without_a_table_and_with_a_config(tmp_path, capsys):
    code, _, err = _cli(capsys, "simulate", "--jobs", "3", "--missing", "zero")
    assert code == 2 and "`--missing zero` applies to the throughput table of `--throughputs`" in err
    assert "none is given" in err
    code, _, err = _cli(capsys, "simulate", "--missing", "maybe")
    assert code == 2 and "argument --missing: invalid choice: 'maybe'" in err
    table = _incomplete_table(tmp_path)
    cfg = tmp_path / "exp.toml"
    body = (f'policy = "fifo"\n[cluster]\nv100 = 4\np100 = 4\nk80 = 4\n[workload]\nn_jobs = 4\nload = 6.0\n'
            f'long_job_prob = 0.0\nthroughputs = "{table}"\n')
    cfg.write_text(body)
    code, _, err = _cli(capsys, "simulate", "--config", cfg)
    assert code == 2 and "no isolated throughput" in err and 'missing = "zero" in [workload]' in err
    assert _cli(capsys, "simulate", "--config", cfg, "--missing", "zero")[0] == 0
    cfg.write_text(body + 'missing = "zero"\n')
    assert _cli(capsys, "simulate", "--config", cfg)[0] == 0
    gen = tmp_path / "gen.toml"
    gen.write_text('policy = "fifo"\n[cluster]\nv100 = 4\n[workload]\nn_jobs = 4\nload = 6.0\n')
    code, _, err = _cli(capsys, "simulate", "--config", gen, "--missing", "zero")
    assert code == 2 and "`--missing zero` applies to a throughput table" in err and "names none" in err
    gen.write_text(gen.read_text() + 'missing = "zero"\n')
    code, _, err = _cli(capsys, "simulate", "--config", gen)
    assert code == 2 and "[workload] `missing` ('zero') applies to its `throughputs` table" in err


def test_cli_missing_is_in_the_help(capsys):
    for command in ("simulate", "solve", "sweep", "demo", "bench"):
        assert main([command, "--help"]) == 0
        text = " ".join(capsys.readouterr().out.split())
        assert "--missing {raise,zero}" in text and "'zero' reads it as throughput 0 there" in text, command


def test_bench_refuses_a_throughputs_file_that_does_not_exist(tmp_path, capsys):
    """It used to fall back to the generated table without a word."""
    code, _, err = _cli(capsys, "bench", "--throughputs", tmp_path / "nope.json")
    assert code == 2 and "`--throughputs` must be an existing Gavel-format throughput JSON file" in err
    assert "nope.json" in err


# ------------------------------------------------------------------------------ meta["skipped"] on a big trace
def test_skipped_keeps_counts_and_the_first_messages_of_many_bad_rows(tmp_path):
    """``meta["skipped"]`` held the message of every dropped row: on a trace with thousands of
    bad rows, thousands of messages in every result's summary.json and provenance.json."""
    rows = []
    for i in range(3000):
        t = f"2020-04-01 {i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}"
        if i % 3 == 0:
            rows.append(f"ok{i},u,1,6,1,COMPLETED,{t},{t},{t},600,vc1\n")
        elif i % 3 == 1:
            rows.append(f"nan{i},u,1,6,1,COMPLETED,{t},{t},,nan,vc1\n")          # unfinished
        else:
            rows.append(f"bad{i},u,x{i},6,1,COMPLETED,{t},{t},{t},600,vc1\n")     # malformed gpu_num
    p = tmp_path / "cluster_log.csv"
    p.write_text(HELIOS_HEADER + "".join(rows))
    t = read_helios_trace(p, on_bad_rows="skip")
    assert len(t) == 1000
    meta = t.attrs["meta"]
    assert len(meta["skipped"]) == 20 and meta["skipped_left_out"] == 1980
    assert sum(meta["skipped_counts"].values()) == 2000 and meta["skipped_counts"]["unfinished"] == 1000
    assert meta["load_report"]["dropped"] == {"unfinished": 1000}
    assert sum(meta["load_report"]["malformed"].values()) == 1000
    assert all(len(v) <= 3 for v in meta["load_report"]["examples"].values())
    # the first 20 bad rows, found in the order the readers found them, each naming its line
    assert all(s.startswith(f"{p}: line ") for s in meta["skipped"])
    # into a simulation's summary.json and provenance.json: kilobytes, not every message
    tr = load_trace(p, throughputs=TPUT, on_bad_rows="skip")
    assert tr.meta["skipped_left_out"] == 1980 and len(tr.meta["skipped"]) == 20
    res = hs.simulate("fifo", tr.head(3), hs.Cluster({"v100": 2, "p100": 2, "k80": 2}))
    d = res.to_dir(tmp_path / "out")
    assert (d / "summary.json").stat().st_size < 20_000 and (d / "provenance.json").stat().st_size < 20_000
    wm = json.loads((d / "summary.json").read_text())["config"]["workload_meta"]
    assert wm["skipped_left_out"] == 1980 and wm["skipped_counts"] == meta["skipped_counts"]


def test_skipped_messages_are_built_only_for_the_rows_listed(monkeypatch):
    """A check's message is built for at most N_LISTED rows, however many rows fail it."""
    from hetsched.inputs.traces.load_report import N_LISTED, LoadReport, RowChecks

    calls = []
    rep = LoadReport("big.csv", on_bad_rows="skip")
    chk = RowChecks(rep, [f"line {i + 2}" for i in range(100_000)])
    bad = np.zeros(100_000, dtype=bool)
    bad[::2] = True
    chk.fail(bad, "unfinished", lambda i: calls.append(i) or f"row {i}")
    chk.resolve()
    rep.kept = 50_000
    assert len(calls) == N_LISTED == 20 and calls == list(range(0, 40, 2))
    assert rep.counts["dropped"] == {"unfinished": 50_000} and len(rep.skipped) == 20
