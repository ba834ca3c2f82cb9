"""Trace readers on hand-written fixtures (tests/fixtures/), one per schema, and every kind
of bad row rejected with its row number."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from sim_checker import check_simulation

import hetsched as hs
from hetsched.errors import ValidationError
from hetsched.inputs.traces.load_report import EXPECTED_REASONS
from hetsched.sim import (
    load_trace,
    read_gavel_trace,
    read_helios_trace,
    read_pai_trace,
    read_philly_trace,
    simulate,
    trace_from_table,
)

FIX = Path(__file__).parent / "fixtures"
TPUT = FIX / "gavel_throughputs_small.json"
GAVEL_PATH = Path(__file__).resolve().parents[2] / "shared" / "data" / "gavel" / "simulation_throughputs.json"


def lines(name: str) -> list[str]:
    return (FIX / name).read_text().splitlines(keepends=True)


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def report_of(out) -> dict:
    """The load report of a trace or a job table; its counts must add up to its rows."""
    rep = out.meta["load_report"] if hasattr(out, "meta") else out.attrs["meta"]["load_report"]
    total = rep["kept"] + sum(rep["dropped"].values()) + sum(rep["malformed"].values()) + sum(rep["filtered"].values())
    assert total == rep["rows"], rep
    return rep


def check_bad_row(read, match: str, reason: str, n_left: int) -> None:
    """``read(on_bad_rows)`` on a file with one bad row. By default (issue 30) any bad row,
    a row real traces hold (EXPECTED_REASONS) or a malformed one, is an error that counts it
    and names it, its reason and how to opt in; ``on_bad_rows="skip"`` drops and counts it
    (under ``dropped`` or ``malformed``)."""
    with pytest.raises(ValidationError, match=match) as info:
        read("raise")
    msg = str(info.value)
    assert " 1 of " in msg and f"cannot be used ({reason}: 1)" in msg and 'on_bad_rows="skip"' in msg, msg
    expected = reason in EXPECTED_REASONS
    out = read("skip")
    rep = report_of(out)
    assert rep["on_bad_rows"] == "skip"
    kind, other = ("dropped", "malformed") if expected else ("malformed", "dropped")
    assert rep[kind] == {reason: 1} and rep[other] == {}, rep
    assert re.search(match, rep["examples"][reason][0]), rep["examples"]
    assert rep["kept"] == n_left
    n = out.n_jobs if hasattr(out, "n_jobs") else len(out)
    assert n == n_left


# ------------------------------------------------------------------------------ Gavel
def test_gavel_trace_fixture():
    tr = read_gavel_trace(FIX / "gavel_small.trace", TPUT)
    assert tr.n_jobs == 4
    assert tr.jobs.ids.tolist() == [0, 1, 2, 3]
    assert tr.job_types.tolist() == ["ResNet-18 (batch size 64)", "LM (batch size 20)",
                                     "ResNet-18 (batch size 64)", "LM (batch size 20)"]
    assert tr.arrival_times.tolist() == [0.0, 120.5, 360.0, 4000.0]
    assert tr.total_steps.tolist() == [36000.0, 14400.0, 64800.0, 25200.0]
    assert tr.jobs.scale_factors.tolist() == [1, 1, 2, 2]
    assert tr.jobs.weights.tolist() == [1.0, 1.0, 2.0, 1.0]
    # columns in file order; ('ResNet-18 (batch size 64)', 2) on v100 is 18 steps/s, 9 spread
    assert tr.gpu_types == ("v100", "p100", "k80")
    assert tr.jobs.throughputs[2].tolist() == [18.0, 11.0, 3.5]
    assert tr.unconsolidated[2, 0] == 9.0
    # SLO 2.0 x (64800 steps / 18 steps/s on the V100) after arrival 360; others have none
    assert tr.deadlines[2] == pytest.approx(360 + 2.0 * 3600)
    assert np.isinf(tr.deadlines[[0, 1, 3]]).all()


def test_gavel_trace_simulates_and_conserves():
    tr = read_gavel_trace(FIX / "gavel_small.trace", TPUT)
    res = simulate("max_min_fairness", tr, hs.Cluster.from_servers({"v100": 2, "p100": 2, "k80": 2}, gpus_per_server=1))
    assert res.summary["n_completed"] == 4
    assert check_simulation(res) == []
    assert res.runs["spread"].any()  # 2-GPU gangs on 1-GPU servers run unconsolidated


@pytest.mark.parametrize(
    "line_no,replacement,match,reason",
    [
        (2, "LM (batch size 20)\tcmd\tdir\t--steps\t1\t14400\t1\t1\t-1\t-3\n", r"line 2: `arrival_time` must be non-negative", "bad_value"),
        (2, "LM (batch size 20)\tcmd\tdir\t--steps\t1\t0\t1\t1\t-1\t120\n", r"line 2: `total_steps` must be a positive integer; got '0'", "bad_value"),
        (2, "LM (batch size 20)\tcmd\tdir\t--steps\t1\t14.5\t1\t1\t-1\t120\n", r"line 2: `total_steps` must be an integer", "bad_value"),
        (3, "ResNet-18 (batch size 64)\tcmd\tdir\t--steps\t1\t100\t2\t1\t-1\t60\n", r"line 3: `arrival_time` must be non-decreasing; got 60 after 120.5", "out_of_order"),
        (2, "GPT-9 (batch size 1)\tcmd\tdir\t--steps\t1\t100\t1\t1\t-1\t120\n", r"line 2: unknown job type \('GPT-9 \(batch size 1\)', scale factor 1\)", "no_throughput_row"),
        (2, "LM (batch size 20)\tcmd\tdir\t--steps\t1\t100\t4\t1\t-1\t120\n", r"line 2: unknown job type \('LM \(batch size 20\)', scale factor 4\).*similar", "no_throughput_row"),
        (2, "LM (batch size 20)\tcmd\tdir\t--steps\t1\t100\t1\t1\t-1\tnan\n", r"line 2: `arrival_time` is missing", "missing_field"),
        (2, "LM (batch size 20)\tcmd\tdir\t--steps\t1\tlots\t1\t1\t-1\t120\n", r"line 2: `total_steps` must be a number; got 'lots'", "not_a_number"),
        (2, "LM (batch size 20)\tcmd\tdir\t--steps\t1\t100\t1\t0\t-1\t120\n", r"line 2: `priority_weight` must be positive", "bad_value"),
        (2, "LM (batch size 20)\tcmd\t100\t1\t-1\t120\n", r"line 2: a Gavel trace line has 10 tab-separated columns", "bad_columns"),
    ],
)
def test_gavel_bad_rows(tmp_path, line_no, replacement, match, reason):
    ls = lines("gavel_small.trace")
    ls[line_no - 1] = replacement
    p = write(tmp_path, "bad.trace", "".join(ls))
    check_bad_row(lambda e: read_gavel_trace(p, TPUT, on_bad_rows=e), match, reason, 3)
    skipped = read_gavel_trace(p, TPUT, on_bad_rows="skip")
    assert skipped.n_jobs == 3 and len(skipped.meta["skipped"]) == 1


def test_gavel_job_larger_than_cluster_and_missing_files(tmp_path):
    with pytest.raises(ValidationError, match=r"line 3: job 2 \('ResNet-18 \(batch size 64\)'\) asks for 2 GPUs but no GPU type of the cluster"):
        read_gavel_trace(FIX / "gavel_small.trace", TPUT, cluster=hs.Cluster({"v100": 1, "p100": 1, "k80": 1}))
    with pytest.raises(ValidationError, match="must be an existing local file"):
        read_gavel_trace(tmp_path / "nope.trace", TPUT)
    with pytest.raises(ValidationError, match="does not exist"):
        read_gavel_trace(FIX / "gavel_small.trace", tmp_path / "nope.json")
    with pytest.raises(ValidationError, match="on_bad_rows"):
        read_gavel_trace(FIX / "gavel_small.trace", TPUT, on_bad_rows="ignore")


def test_gavel_trace_with_no_job_is_an_error(tmp_path):
    """A trace that ends with 0 jobs is always an error (issue 30): an empty file, and a file
    whose only job type has no throughput-table row (which used to load as 0 jobs, exit 0)."""
    with pytest.raises(ValidationError, match=r"no job to replay: 0 row\(s\) read, 0 kept \(the file holds no job"):
        read_gavel_trace(write(tmp_path, "empty.trace", ""), TPUT)
    unknown = write(tmp_path, "unknown.trace", "NoSuchModel (batch size 1)\tcmd\tdir\t--num_steps\t1\t100\t1\t1\t-1\t0\n"
                                             "NoSuchModel (batch size 1)\tcmd\tdir\t--num_steps\t1\t100\t1\t1\t-1\t5\n")
    with pytest.raises(ValidationError, match=r"2 of 2 row\(s\) cannot be used \(no_throughput_row: 2\): line 1: "
                                              r"unknown job type .*; line 2: .*No row would be left"):
        read_gavel_trace(unknown, TPUT)
    with pytest.raises(ValidationError, match=r"no job to replay: 2 row\(s\) read, 0 kept; not kept: "
                                              r"\{'no_throughput_row': 2\}"):
        read_gavel_trace(unknown, TPUT, on_bad_rows="skip")


@pytest.mark.skipif(not GAVEL_PATH.is_file(), reason="Gavel's throughput table not present")
def test_gavel_trace_with_the_measured_table(tmp_path):
    p = write(tmp_path, "t.trace", "ResNet-50 (batch size 64)\tcmd\tdir\t--num_steps\t1\t1000\t4\t1\t-1\t0\n"
                                   "Transformer (batch size 32)\tcmd\tdir\t--num_steps\t1\t500\t1\t1\t-1\t10\n")
    tr = read_gavel_trace(p, GAVEL_PATH)
    assert tr.n_jobs == 2 and tr.unconsolidated is not None
    res = simulate("max_min_fairness", tr, hs.Cluster({"v100": 4, "p100": 4, "k80": 4}))
    assert check_simulation(res) == []


# ------------------------------------------------------------------------------ Philly
def test_philly_fixture():
    t = read_philly_trace(FIX / "philly_cluster_job_log_small.json")
    assert t["job_id"].tolist() == ["application_1506638472019_0001", "application_1506638472019_0002",
                                    "application_1506638472019_0003"]
    assert t["arrival"].tolist() == [0.0, 600.0, 3600.0]
    assert t["num_gpus"].tolist() == [1, 4, 2]  # last attempt of job 2 spans two hosts
    assert t["duration"].tolist() == [3600.0, 7200.0, 1800.0]
    assert t["status"].tolist() == ["Pass", "Killed", "Failed"]
    only_pass = read_philly_trace(FIX / "philly_cluster_job_log_small.json", statuses=["Pass"])
    assert len(only_pass) == 1 and only_pass.attrs["meta"]["filtered_status"] == 2


def _philly(tmp_path, mutate):
    data = json.loads((FIX / "philly_cluster_job_log_small.json").read_text())
    mutate(data)
    return write(tmp_path, "philly.json", json.dumps(data))


@pytest.mark.parametrize(
    "mutate,match,reason",
    [
        (lambda d: d[1].update(attempts=[]), r"entry 1: job 'application_1506638472019_0002': `attempts` must be a non-empty list", "never_started"),
        (lambda d: d[1]["attempts"][-1].update(start_time=None), r"entry 1: .*`attempts\[-1\].start_time` is missing", "never_started"),
        (lambda d: d[2]["attempts"][0].update(end_time="None"), r"entry 2: .*`attempts\[-1\].end_time` is missing \(got 'None'\)", "unfinished"),
        (lambda d: d[2]["attempts"][0].pop("end_time"), r"entry 2: .*`attempts\[-1\].end_time` is missing", "unfinished"),
        (lambda d: d[0]["attempts"][0].update(end_time="2017-10-03 03:00:30"), r"entry 0: .*duration must be positive", "zero_duration"),
        (lambda d: d[0]["attempts"][0].update(end_time="2017-10-03 02:00:00"), r"entry 0: .*duration must be positive", "negative_duration"),
        (lambda d: d[0]["attempts"][0].update(detail=[{"ip": "m1", "gpus": []}]), r"entry 0: .*holds no GPUs", "no_gpus"),
        (lambda d: d[0]["attempts"][0].update(detail="m1"), r"entry 0: .*`attempts\[-1\].detail` must be a list", "bad_detail"),
        (lambda d: d[2].update(submitted_time="2017-10-03 02:00:00"), r"entry 2: .*arrivals must be non-decreasing", "out_of_order"),
        (lambda d: d[1].update(submitted_time="yesterday"), r"entry 1: .*`submitted_time` must be seconds or a date-time", "bad_time"),
        (lambda d: d[1]["attempts"][-1].update(end_time="soon"), r"entry 1: .*`attempts\[-1\].end_time` must be seconds or a date-time", "bad_time"),
        (lambda d: d[1].update(submitted_time="2017-10-03 03:40:00"), r"entry 1: .*is after the start of its last attempt", "submitted_after_start"),
        (lambda d: d[1].update(jobid=d[0]["jobid"]), r"entry 1: job id 'application_1506638472019_0001' appears twice \(first at entry 0\)", "duplicate_id"),
        (lambda d: d[1].update(jobid=""), r"entry 1: `jobid` must be a non-empty string", "missing_field"),
        (lambda d: d.__setitem__(1, ["not", "a", "job"]), r"entry 1: each entry must be an object; got list", "not_an_object"),
    ],
)
def test_philly_bad_rows(tmp_path, mutate, match, reason):
    p = _philly(tmp_path, mutate)
    check_bad_row(lambda e: read_philly_trace(p, on_bad_rows=e), match, reason, 2)


def test_philly_cluster_fit_sort_and_to_trace(tmp_path):
    with pytest.raises(ValidationError, match=r"entry 1: job 'application_1506638472019_0002' asks for 4 GPUs but the largest GPU type has 2"):
        read_philly_trace(FIX / "philly_cluster_job_log_small.json", cluster=hs.Cluster({"v100": 2, "k80": 2}))
    p = _philly(tmp_path, lambda d: d[2].update(submitted_time="2017-10-03 02:00:00"))
    t = read_philly_trace(p, sort=True)
    assert t["job_id"].iloc[0] == "application_1506638472019_0003"
    cat = hs.load_gavel_throughputs(TPUT)
    table = read_philly_trace(FIX / "philly_cluster_job_log_small.json")
    with pytest.raises(ValidationError, match=r"entry 1: job 'application_1506638472019_0002' uses 4 GPUs, but the throughput table has rows only for scale factors \[1, 2\]"):
        trace_from_table(table, cat)
    tr = trace_from_table(table, cat, unmatched="skip", seed=3)
    assert tr.n_jobs == 2 and tr.meta["dropped_unmatched"] == 1
    # steps: duration x the job type's throughput on the reference (fastest) type, the V100
    assert tr.total_steps[0] == np.ceil(3600 * tr.jobs.throughputs[0, 0])
    assert tr.job_types[1] in ("ResNet-18 (batch size 64)", "LM (batch size 20)")
    assert tr.jobs.entities.tolist() == ["u1", "u1"]  # Philly's users become entities
    res = simulate("hierarchical_max_min_fairness", tr, hs.Cluster({"v100": 2, "p100": 2, "k80": 2}))
    assert check_simulation(res) == []
    again = trace_from_table(table, cat, unmatched="skip", seed=3)
    assert again.job_types.tolist() == tr.job_types.tolist()


# ------------------------------------------------------------------------------ Helios
def test_helios_fixture():
    t = read_helios_trace(FIX / "helios_cluster_log_small.csv", gpu_type="v100")
    assert t["job_id"].tolist() == ["4fd8a9", "9a01bb", "c2d4e6"]  # the CPU-only job is dropped
    assert t.attrs["meta"]["cpu_jobs"] == 1
    assert t["arrival"].tolist() == [0.0, 290.0, 590.0]
    assert t["num_gpus"].tolist() == [1, 8, 2]
    assert t["duration"].tolist() == [3600.0, 7200.0, 1800.0]
    assert (t["gpu_type"] == "v100").all()
    done = read_helios_trace(FIX / "helios_cluster_log_small.csv", states=["COMPLETED"])
    assert done["job_id"].tolist() == ["4fd8a9"]


@pytest.mark.parametrize(
    "line_no,replacement,match,reason",
    [
        (3, "77c3e0,ub,-1,2,1,COMPLETED,2020-04-01 00:01:00,,,60,vc1\n", r"line 3: job '77c3e0': `gpu_num` must be a non-negative integer", "bad_value"),
        (4, "9a01bb,uc,8,48,1,CANCELLED,2020-04-01 00:05:00,,,0,vc2\n", r"line 4: job '9a01bb': duration must be positive", "zero_duration"),
        (4, "9a01bb,uc,8,48,1,CANCELLED,2020-04-01 00:05:00,,,-5,vc2\n", r"line 4: job '9a01bb': duration must be positive; got -5 s", "negative_duration"),
        (4, "9a01bb,uc,8,48,1,CANCELLED,2020-04-01 00:05:00,,,nan,vc2\n", r"line 4: job '9a01bb': .*`duration`", "unfinished"),
        (4, "9a01bb,uc,8,48,1,RUNNING,2020-04-01 00:05:00,2020-04-01 00:06:00,,,vc2\n", r"line 4: job '9a01bb': `end_time` is missing", "unfinished"),
        (4, "9a01bb,uc,8,48,1,CANCELLED,2020-04-01 00:05:00,,,,vc2\n", r"line 4: job '9a01bb': `start_time` is missing", "never_started"),
        (4, "9a01bb,uc,1.5,48,1,CANCELLED,2020-04-01 00:05:00,,,60,vc2\n", r"line 4: job '9a01bb': `gpu_num` must be an integer", "bad_value"),
        (4, "9a01bb,uc,eight,48,1,CANCELLED,2020-04-01 00:05:00,,,60,vc2\n", r"line 4: job '9a01bb': `gpu_num` must be a number; got 'eight'", "not_a_number"),
        (4, "9a01bb,uc,8,48,1,CANCELLED,at five,,,60,vc2\n", r"line 4: job '9a01bb': `submit_time` must be seconds or a date-time", "bad_time"),
        (5, "c2d4e6,ua,2,12,1,FAILED,2020-03-31 00:10:00,,,1800,vc1\n", r"line 5: arrivals must be non-decreasing", "out_of_order"),
        (5, ",ua,2,12,1,FAILED,2020-04-01 00:10:00,,,1800,vc1\n", r"line 5: `job_id` is missing", "missing_field"),
        (5, "4fd8a9,ua,2,12,1,FAILED,2020-04-01 00:10:00,,,1800,vc1\n", r"line 5: job id '4fd8a9' appears twice \(first at line 2\)", "duplicate_id"),
        (5, "c2d4e6,ua,2,12,1,FAILED,2020-04-01 00:10:00,,,1800,vc1,extra\n", r"line 5: has more cells", "bad_columns"),
    ],
)
def test_helios_bad_rows(tmp_path, line_no, replacement, match, reason):
    ls = lines("helios_cluster_log_small.csv")
    ls[line_no - 1] = replacement
    p = write(tmp_path, "cluster_log.csv", "".join(ls))
    # line 3 is the CPU-only job (filtered in the fixture): breaking it leaves the other three
    check_bad_row(lambda e: read_helios_trace(p, on_bad_rows=e), match, reason, 3 if line_no == 3 else 2)


def test_helios_bad_header_and_cluster(tmp_path):
    p = write(tmp_path, "c.csv", "id,gpus\n1,1\n")
    with pytest.raises(ValidationError, match=r"line 1: the header must name \['job_id', 'gpu_num', 'submit_time'"):
        read_helios_trace(p)
    with pytest.raises(ValidationError, match=r"line 4: job '9a01bb' asks for 8 GPUs but type 'v100' has 4"):
        read_helios_trace(FIX / "helios_cluster_log_small.csv", gpu_type="v100", cluster=hs.Cluster({"v100": 4}))
    # Lucid-style log: numeric seconds, start/end instead of duration, extra columns
    q = write(tmp_path, "lucid.csv", "job_id,user,gpu_num,submit_time,start_time,end_time,amp\n"
                                     "a,u,1,100,110,400,1\nb,u,2,150,150,1150,0\n")
    t = read_helios_trace(q)
    assert t["arrival"].tolist() == [0.0, 50.0] and t["duration"].tolist() == [290.0, 1000.0]


# ------------------------------------------------------------------------------ PAI
def test_pai_fixture():
    t = read_pai_trace(FIX / "pai_job_table_small.csv", FIX / "pai_task_table_small.csv")
    assert t["job_id"].tolist() == ["job_a1", "job_b2", "job_c3"]  # job_d4 has CPU tasks only
    assert t.attrs["meta"]["cpu_jobs"] == 1
    assert t["num_gpus"].tolist() == [1, 2, 4]  # 2 instances x 50% rounds up to 2 GPUs; 4 x 100%
    assert t["gpu_type"].tolist() == ["v100", "t4", "p100"]
    assert t["arrival"].tolist() == [0.0, 500.0, 1000.0]
    assert t["duration"].tolist() == [3600.0, 600.0, 7200.0]
    only = read_pai_trace(FIX / "pai_job_table_small.csv", FIX / "pai_task_table_small.csv", statuses=["Terminated"])
    assert only["job_id"].tolist() == ["job_a1", "job_c3"]


@pytest.mark.parametrize(
    "table,line_no,replacement,match,reason",
    [
        ("job", 2, "job_b2,inst_2,user_y,Running,1500.0,\n", r"pai_job_table\.csv: (.*: )?line 2: job 'job_b2': `end_time` is missing", "unfinished"),
        ("job", 2, "job_b2,inst_2,user_y,Waiting,,\n", r"pai_job_table\.csv: (.*: )?line 2: job 'job_b2': `start_time` is missing", "never_started"),
        ("job", 2, "job_b2,inst_2,user_y,Failed,1500.0,1500.0\n", r"line 2: job 'job_b2': duration must be positive", "zero_duration"),
        ("job", 2, "job_b2,inst_2,user_y,Failed,1500.0,1400.0\n", r"line 2: job 'job_b2': duration must be positive", "negative_duration"),
        ("job", 2, "job_b2,inst_2,user_y,Failed,1500.0,later\n", r"line 2: job 'job_b2': `end_time` must be a number; got 'later'", "not_a_number"),
        ("job", 2, "job_b2,inst_2,user_y,Failed,1500.0\n", r"line 2: has 5 comma-separated cells", "bad_columns"),
        ("job", 2, "job_b2,inst_2,user_y,Failed,500.0,2100.0\n", r"line 2: arrivals must be non-decreasing", "out_of_order"),
        ("job", 2, "job_a1,inst_2,user_y,Failed,1500.0,2100.0\n", r"line 2: job 'job_a1' appears twice \(first at line 1\)", "duplicate_id"),
    ],
)
def test_pai_bad_job_rows(tmp_path, table, line_no, replacement, match, reason):
    jl, tl = lines("pai_job_table_small.csv"), lines("pai_task_table_small.csv")
    jl[line_no - 1] = replacement
    pj = write(tmp_path, "pai_job_table.csv", "".join(jl))
    pt = write(tmp_path, "pai_task_table.csv", "".join(tl))
    check_bad_row(lambda e: read_pai_trace(pj, pt, on_bad_rows=e), match, reason, 2)


@pytest.mark.parametrize(
    "line_no,replacement,match,reason",
    [
        (1, "job_zz,worker,1,Terminated,1000.0,4600.0,600.0,29.0,100.0,V100\n", r"pai_task_table\.csv: (.*: )?line 1: task 'worker' names job 'job_zz', which is not in the job table", "unknown_job"),
        (4, "job_c3,worker,x,Terminated,2000.0,9200.0,600.0,29.0,100.0,P100\n", r"line 4: task 'worker' of job 'job_c3': `inst_num` must be a number", "not_a_number"),
        (4, "job_c3,worker,4,Terminated,2000.0,9200.0,600.0,29.0,-100.0,P100\n", r"line 4: task 'worker' of job 'job_c3': `plan_gpu` must be non-negative; got '-100.0'", "bad_value"),
    ],
)
def test_pai_bad_task_rows(tmp_path, line_no, replacement, match, reason):
    jl, tl = lines("pai_job_table_small.csv"), lines("pai_task_table_small.csv")
    tl[line_no - 1] = replacement
    pj = write(tmp_path, "pai_job_table.csv", "".join(jl))
    pt = write(tmp_path, "pai_task_table.csv", "".join(tl))
    with pytest.raises(ValidationError, match=match):
        read_pai_trace(pj, pt)
    t = read_pai_trace(pj, pt, on_bad_rows="skip")
    tasks = report_of(t)["tasks"]
    assert tasks["malformed"] == {reason: 1} and re.search(match, tasks["examples"][reason][0])
    # a malformed task's job goes with it (its GPU count would be wrong); in the first case
    # job_a1 lost its only task to job_zz and holds no GPUs
    assert t["job_id"].tolist() == (["job_b2", "job_c3"] if line_no == 1 else ["job_a1", "job_b2"])
    if line_no == 4:
        assert report_of(t)["malformed"] == {"bad_task": 1}


def test_pai_with_header_and_load_trace(tmp_path):
    header = "job_name,inst_id,user,status,start_time,end_time\n"
    pj = write(tmp_path, "j.csv", header + "".join(lines("pai_job_table_small.csv")))
    t = read_pai_trace(pj, FIX / "pai_task_table_small.csv")
    assert len(t) == 3
    tr = load_trace(pj, "pai", task_path=FIX / "pai_task_table_small.csv", throughputs=TPUT, unmatched="skip",
                    gpu_type_map={"t4": "k80"})
    assert tr.n_jobs == 2  # the 4-GPU job has no catalogue row
    # job_b2 ran on a T4, mapped to the K80 column: steps = 600 s x its K80 throughput
    row = list(tr.jobs.ids).index("job_b2")
    assert tr.total_steps[row] == np.ceil(600 * tr.jobs.throughputs[row, 2])
    with pytest.raises(ValidationError, match="task_path"):
        load_trace(pj, "pai", throughputs=TPUT)


def test_load_trace_dispatch():
    tr = load_trace(FIX / "helios_cluster_log_small.csv", throughputs=TPUT, unmatched="skip")
    assert tr.n_jobs == 2 and tr.source.endswith("helios_cluster_log_small.csv")
    tr = load_trace(FIX / "philly_cluster_job_log_small.json", unmatched="round_up", seed=1)  # generated catalogue
    assert tr.n_jobs == 3 and tr.gpu_types == ("v100", "p100", "k80")
    tr = load_trace(FIX / "gavel_small.trace", throughputs=TPUT)
    assert tr.n_jobs == 4
    with pytest.raises(ValidationError, match="needs `throughputs`"):
        load_trace(FIX / "gavel_small.trace")
    with pytest.raises(ValidationError, match="`format` must be one of"):
        load_trace(FIX / "gavel_small.trace", "slurm", throughputs=TPUT)


# ------------------------------------------------------------------------------ rows real traces hold
def _philly_entry(i, sub, start, end, gpus, *, vc="vc1", status="Pass", attempts=None):
    att = [{"start_time": start, "end_time": end, "detail": [{"ip": "m1", "gpus": [f"gpu{k}" for k in range(gpus)]}]}]
    return {"status": status, "vc": vc, "jobid": f"app_{i}", "user": f"u{i % 2}", "submitted_time": sub,
            "attempts": att if attempts is None else attempts}


def test_philly_real_trace_rows_dropped_and_counted(tmp_path):
    entries = [
        _philly_entry(0, "2017-10-03 00:00:00", "2017-10-03 00:00:10", "2017-10-03 01:00:10", 1),
        _philly_entry(1, "2017-10-03 00:01:00", None, None, 1, attempts=[]),                            # never started
        _philly_entry(2, "2017-10-03 00:02:00", "2017-10-03 00:02:00", "None", 2),                      # unfinished
        _philly_entry(3, "2017-10-03 00:03:00", "2017-10-03 00:03:30", "2017-10-03 00:03:30", 1),       # zero length
        _philly_entry(4, "2017-10-03 00:04:00", "2017-10-03 00:04:00", "2017-10-03 00:05:00", 0),       # no GPUs
        _philly_entry(5, "2017-10-03 00:05:00", None, "2017-10-03 00:06:00", 1),                        # never started
        _philly_entry(6, "2017-10-03 00:06:00", "2017-10-03 00:06:00", "2017-10-03 00:36:00", 4, vc="vc2"),
    ]
    p = write(tmp_path, "cluster_job_log", json.dumps(entries))
    with pytest.raises(ValidationError, match=r"entry 1: job 'app_1': `attempts` must be a non-empty list"):
        read_philly_trace(p)
    t = read_philly_trace(p, on_bad_rows="skip")
    assert t["job_id"].tolist() == ["app_0", "app_6"]
    assert t["arrival"].tolist() == [0.0, 360.0] and t["duration"].tolist() == [3600.0, 1800.0]
    rep = report_of(t)
    assert rep["rows"] == 7 and rep["kept"] == 2
    assert rep["dropped"] == {"never_started": 2, "unfinished": 1, "zero_duration": 1, "no_gpus": 1}
    assert rep["malformed"] == {} and rep["filtered"] == {}
    assert rep["examples"]["unfinished"] == [f"{p}: entry 2: job 'app_2': `attempts[-1].end_time` is missing (got 'None')"]
    assert [s.split(": ")[1] for s in t.attrs["meta"]["skipped"]] == ["entry 1", "entry 2", "entry 3", "entry 4", "entry 5"]
    with pytest.raises(ValidationError, match=r"entry 1: job 'app_1': `attempts` must be a non-empty list"):
        read_philly_trace(p, on_bad_rows="raise")
    # the report travels into the trace built from the table
    tr = load_trace(p, "philly", throughputs=TPUT, unmatched="skip", on_bad_rows="skip")
    assert tr.meta["load_report"]["dropped"] == rep["dropped"]


def test_philly_vc_selection(tmp_path):
    fix = FIX / "philly_cluster_job_log_small.json"
    one = read_philly_trace(fix, vc="vc1")
    assert one["job_id"].tolist() == ["application_1506638472019_0001", "application_1506638472019_0003"]
    assert report_of(one)["filtered"] == {"vc": 1} and one.attrs["meta"]["filtered_vc"] == 1
    both = read_philly_trace(fix, vc=["vc1", "vc2"])
    assert len(both) == 3 and report_of(both)["filtered"] == {}
    # with statuses: each row is counted once, under the first filter it fails
    t = read_philly_trace(fix, vc="vc1", statuses=["Pass"])
    assert t["job_id"].tolist() == ["application_1506638472019_0001"]
    assert report_of(t)["filtered"] == {"status": 2}
    with pytest.raises(ValidationError, match=r"`vc` must name virtual clusters of .*unknown \['vc9'\]; available: \['vc1', 'vc2'\]"):
        read_philly_trace(fix, vc=["vc1", "vc9"])
    with pytest.raises(ValidationError, match="`vc` must be a string, a non-empty sequence of strings or None; got 3"):
        read_philly_trace(fix, vc=3)
    novc = write(tmp_path, "novc.json", json.dumps([{k: v for k, v in e.items() if k != "vc"}
                                                    for e in json.loads(fix.read_text())]))
    with pytest.raises(ValidationError, match="its entries have no `vc` field"):
        read_philly_trace(novc, vc="vc1")
    tr = load_trace(fix, throughputs=TPUT, vc="vc1")  # through load_trace's options
    assert tr.jobs.ids.tolist() == ["application_1506638472019_0001", "application_1506638472019_0003"]


def test_helios_real_trace_rows_dropped_and_counted(tmp_path):
    text = ("job_id,user,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"
            "a,u,1,6,1,COMPLETED,2020-04-01 00:00:00,2020-04-01 00:00:05,2020-04-01 01:00:05,3600,vc1\n"
            "b,u,0,6,1,COMPLETED,2020-04-01 00:01:00,2020-04-01 00:01:00,2020-04-01 00:02:00,60,vc1\n"   # CPU only
            "c,u,8,48,1,CANCELLED,2020-04-01 00:02:00,,,0,vc1\n"                                        # zero length
            "d,u,2,12,1,RUNNING,2020-04-01 00:03:00,2020-04-01 00:03:00,,,vc1\n"                        # unfinished
            "e,u,4,24,1,CANCELLED,2020-04-01 00:04:00,,,,vc1\n"                                         # never started
            "f,u,2,12,1,FAILED,2020-04-01 00:05:00,2020-04-01 00:05:00,2020-04-01 00:35:00,1800,vc1\n")
    p = write(tmp_path, "cluster_log.csv", text)
    t = read_helios_trace(p, on_bad_rows="skip")
    assert t["job_id"].tolist() == ["a", "f"] and t["arrival"].tolist() == [0.0, 300.0]
    rep = report_of(t)
    assert (rep["rows"], rep["kept"]) == (6, 2)
    assert rep["dropped"] == {"zero_duration": 1, "unfinished": 1, "never_started": 1}
    assert rep["filtered"] == {"cpu_only": 1} and t.attrs["meta"]["cpu_jobs"] == 1
    done = read_helios_trace(p, states="COMPLETED", on_bad_rows="skip")
    assert done["job_id"].tolist() == ["a"] and report_of(done)["filtered"] == {"status": 4, "cpu_only": 1}
    with pytest.raises(ValidationError, match=r"line 4: job 'c': duration must be positive; got 0 s"):
        read_helios_trace(p, on_bad_rows="raise")


def test_pai_real_trace_rows_dropped_and_counted(tmp_path):
    pj = write(tmp_path, "pai_job_table.csv",
               "j1,i1,u1,Terminated,100.0,700.0\n"
               "j2,i2,u1,Running,200.0,\n"          # unfinished
               "j3,i3,u2,Waiting,,\n"               # never started
               "j4,i4,u2,Terminated,300.0,900.0\n"  # CPU only
               "j5,i5,u3,Failed,400.0,400.0\n"      # zero length
               "j6,i6,u3,Terminated,500.0,1500.0\n")
    pt = write(tmp_path, "pai_task_table.csv",
               "j1,worker,2,Terminated,100.0,700.0,600.0,29.0,50.0,V100\n"
               "j2,worker,1,Running,200.0,,600.0,29.0,100.0,V100\n"
               "j4,ps,1,Terminated,300.0,900.0,600.0,29.0,,\n"
               "j6,worker,1,Terminated,500.0,1500.0,600.0,29.0,100.0,T4\n"
               "j6,ps,1,Terminated,500.0,1500.0,600.0,29.0,0.0,MISC\n")
    with pytest.raises(ValidationError, match=r"3 of 6 row\(s\) cannot be used"):
        read_pai_trace(pj, pt)
    t = read_pai_trace(pj, pt, on_bad_rows="skip")
    assert t["job_id"].tolist() == ["j1", "j6"]
    assert t["num_gpus"].tolist() == [2, 1]  # 2 instances x ceil(50 %) ; 1 x 100 % (+ a 0 % task)
    assert t["gpu_type"].tolist() == ["v100", "t4"]
    rep = report_of(t)
    assert (rep["rows"], rep["kept"]) == (6, 2)
    assert rep["dropped"] == {"unfinished": 1, "never_started": 1, "zero_duration": 1}
    assert rep["filtered"] == {"cpu_only": 1}
    assert rep["tasks"]["rows"] == 5 and rep["tasks"]["filtered"] == {"job_not_kept": 1, "cpu_task": 2}


def test_errors_argument_is_checked():
    for read in (lambda: read_philly_trace(FIX / "philly_cluster_job_log_small.json", errors="ignore"),
                 lambda: read_helios_trace(FIX / "helios_cluster_log_small.csv", errors=True),
                 lambda: read_gavel_trace(FIX / "gavel_small.trace", TPUT, errors="lenient")):
        with pytest.raises(ValidationError, match=r"`errors` must be one of \['drop', 'skip', 'raise'\]"):
            read()
    for read in (lambda: read_philly_trace(FIX / "philly_cluster_job_log_small.json", on_bad_rows="drop"),
                 lambda: read_pai_trace(FIX / "pai_job_table_small.csv", FIX / "pai_task_table_small.csv",
                                        on_bad_rows=None),
                 lambda: load_trace(FIX / "gavel_small.trace", throughputs=TPUT, on_bad_rows="warn")):
        with pytest.raises(ValidationError, match=r"`on_bad_rows` must be one of \['raise', 'skip'\]"):
            read()


# ------------------------------------------------------------------------------ against a row-by-row parse
def _secs(text):
    return (datetime.strptime(text, "%Y-%m-%d %H:%M:%S") - datetime(1970, 1, 1)).total_seconds()


def _stamp(s):
    return (datetime(2019, 1, 1) + timedelta(seconds=int(s))).strftime("%Y-%m-%d %H:%M:%S")


def _random_philly(rng, n):
    """Entries in submission order; each kind of row real logs hold at random."""
    out = []
    sub = np.sort(rng.integers(0, 10 * 86400, n))
    for i in range(n):
        st = int(sub[i] + rng.integers(0, 300))
        en = st + int(rng.integers(1, 7200))
        kind = rng.choice(["ok", "never", "nostart", "open", "zero", "nogpu"], p=[0.6, 0.08, 0.08, 0.08, 0.08, 0.08])
        gpus = 0 if kind == "nogpu" else int(rng.choice([1, 2, 4, 8]))
        out.append(_philly_entry(i, _stamp(sub[i]), None if kind == "nostart" else _stamp(st),
                                 "None" if kind == "open" else _stamp(st if kind == "zero" else en), gpus,
                                 vc=f"vc{i % 3}", attempts=[] if kind == "never" else None))
    return out


def _philly_by_hand(entries):
    rows, dropped = [], Counter()
    for i, e in enumerate(entries):
        if not e["attempts"]:
            dropped["never_started"] += 1
            continue
        last = e["attempts"][-1]
        if last["start_time"] is None:
            dropped["never_started"] += 1
            continue
        if last["end_time"] == "None":
            dropped["unfinished"] += 1
            continue
        g = sum(len(h["gpus"]) for h in last["detail"])
        if g == 0:
            dropped["no_gpus"] += 1
            continue
        d = _secs(last["end_time"]) - _secs(last["start_time"])
        if d == 0:
            dropped["zero_duration"] += 1
            continue
        rows.append((e["jobid"], _secs(e["submitted_time"]), g, d, e["user"], e["status"], f"entry {i}"))
    return rows, dropped


def _compare(table, rows, dropped):
    got = list(zip(table["job_id"], table["arrival"], table["num_gpus"], table["duration"], table["user"],
                   table["status"], table["source_row"]))
    t0 = min(r[1] for r in rows)
    assert got == [(r[0], r[1] - t0, *r[2:]) for r in rows]
    assert report_of(table)["dropped"] == dict(dropped)


@pytest.mark.parametrize("seed", range(4))
def test_philly_matches_a_row_by_row_parse(tmp_path, seed):
    entries = _random_philly(np.random.default_rng(seed), 300)
    p = write(tmp_path, "log.json", json.dumps(entries))
    rows, dropped = _philly_by_hand(entries)
    _compare(read_philly_trace(p, on_bad_rows="skip"), rows, dropped)
    # one virtual cluster: the same rows of that VC
    sel = [e if e["vc"] == "vc1" else None for e in entries]
    rows1, dropped1 = _philly_by_hand([e or {"attempts": [{"start_time": None}]} for e in sel])
    dropped1["never_started"] -= sel.count(None)
    _compare(read_philly_trace(p, vc="vc1", on_bad_rows="skip"), rows1, +dropped1)


@pytest.mark.parametrize("seed", range(4))
def test_helios_matches_a_row_by_row_parse(tmp_path, seed):
    rng = np.random.default_rng(seed)
    lines_, rows, dropped, cpu = ["job_id,user,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue"], [], Counter(), 0
    sub = np.sort(rng.integers(0, 10 * 86400, 300))
    for i, s in enumerate(sub):
        g = int(rng.choice([0, 1, 2, 8]))
        kind = rng.choice(["ok", "zero", "open", "never"], p=[0.7, 0.1, 0.1, 0.1])
        d = 0 if kind == "zero" else int(rng.integers(1, 5000))
        st, en = ("", "") if kind == "never" else (_stamp(s), "" if kind == "open" else _stamp(s + d))
        dur = "" if kind in ("open", "never") else str(d)
        lines_.append(f"j{i},u{i % 4},{g},4,1,X,{_stamp(s)},{st},{en},{dur},q")
        if g == 0:
            cpu += 1
        elif kind == "ok":
            rows.append((f"j{i}", _secs(_stamp(s)), g, float(d), f"u{i % 4}", "X", f"line {i + 2}"))
        else:
            dropped[{"zero": "zero_duration", "open": "unfinished", "never": "never_started"}[kind]] += 1
    p = write(tmp_path, "cluster_log.csv", "\n".join(lines_) + "\n")
    t = read_helios_trace(p, on_bad_rows="skip")
    _compare(t, rows, dropped)
    assert report_of(t)["filtered"].get("cpu_only", 0) == cpu


@pytest.mark.parametrize("seed", range(4))
def test_pai_matches_a_row_by_row_parse(tmp_path, seed):
    rng = np.random.default_rng(seed)
    jobs_, tasks_, rows, dropped = [], [], [], Counter()
    sub = np.sort(rng.uniform(0, 10 * 86400, 300)).round(1)
    for i, s in enumerate(sub):
        kind = rng.choice(["ok", "open", "never", "zero"], p=[0.7, 0.1, 0.1, 0.1])
        d = 0.0 if kind == "zero" else float(rng.integers(1, 5000))
        st = "" if kind == "never" else f"{s:.1f}"
        en = "" if kind in ("open", "never") else f"{s + d:.1f}"
        jobs_.append(f"job{i},inst{i},u{i % 5},S,{st},{en}")
        n_tasks = int(rng.integers(1, 4))
        gpus, types = 0, set()
        for k in range(n_tasks):
            inst, plan = int(rng.integers(1, 4)), float(rng.choice([0.0, 25.0, 100.0, 150.0]))
            gt = str(rng.choice(["V100", "T4", "MISC"]))
            tasks_.append(f"job{i},t{k},{inst},S,{st},{en},1.0,1.0,{plan},{gt}")
            if plan > 0:
                gpus += inst * math.ceil(plan / 100)
                if gt != "MISC":
                    types.add(gt.lower())
        if kind != "ok":
            dropped[{"zero": "zero_duration", "open": "unfinished", "never": "never_started"}[kind]] += 1
        elif gpus:
            rows.append((f"job{i}", float(st), gpus, float(en) - float(st), f"u{i % 5}", "S", f"pai_job_table.csv line {i + 1}",
                         types.pop() if len(types) == 1 else None))
    pj = write(tmp_path, "pai_job_table.csv", "\n".join(jobs_) + "\n")
    pt = write(tmp_path, "pai_task_table.csv", "\n".join(tasks_) + "\n")
    t = read_pai_trace(pj, pt, on_bad_rows="skip")
    _compare(t, [r[:7] for r in rows], dropped)
    assert [x if isinstance(x, str) else None for x in t["gpu_type"]] == [r[7] for r in rows]


@pytest.mark.parametrize("variant", ["crlf", "quoted", "spaces", "header"])
def test_csv_fast_and_slow_paths_agree(tmp_path, variant):
    """A regular file goes through pandas' C parser, an irregular one (quotes) through the
    csv module; CRLF line ends, cells padded with spaces and a header line read the same."""
    jl, tl = lines("pai_job_table_small.csv"), lines("pai_task_table_small.csv")
    base = read_pai_trace(FIX / "pai_job_table_small.csv", FIX / "pai_task_table_small.csv")
    if variant == "crlf":
        jl, tl = [x.replace("\n", "\r\n") for x in jl], [x.replace("\n", "\r\n") for x in tl]
    elif variant == "quoted":
        jl = [x.replace("user_x", '"user_x"') for x in jl]
    elif variant == "spaces":
        tl = [x.replace(",", " , ") for x in tl]
    else:
        jl = ["job_name,inst_id,user,status,start_time,end_time\n", *jl]
    pj = write(tmp_path, "pai_job_table.csv", "".join(jl))
    pt = write(tmp_path, "pai_task_table.csv", "".join(tl))
    t = read_pai_trace(pj, pt)
    cols = ["job_id", "arrival", "num_gpus", "duration", "gpu_type", "user", "status"]
    assert t[cols].equals(base[cols])
    offset = 1 if variant == "header" else 0  # a header shifts the line numbers
    assert t["source_row"].tolist() == [f"pai_job_table.csv line {int(r.split()[-1]) + offset}" for r in base["source_row"]]


# ------------------------------------------------------------- one module per format (issue 24)
def test_one_module_per_format_and_readers_keeps_every_name():
    import importlib

    from hetsched.inputs import traces
    from hetsched.inputs.traces import readers as R

    homes = {"read_gavel_trace": "gavel", "read_gavel_cluster_specs": "gavel", "read_philly_trace": "philly",
             "read_helios_trace": "helios", "read_pai_trace": "pai", "trace_from_table": "table",
             "JOB_TABLE_COLUMNS": "table", "load_trace": "readers"}
    for name, home in homes.items():
        mod = importlib.import_module(f"hetsched.inputs.traces.{home}")
        assert getattr(R, name) is getattr(mod, name) is getattr(traces, name) is getattr(hs.sim, name)
    # names the module held before the split, public or not, still resolve
    assert R.load_gavel_throughputs is hs.load_gavel_throughputs and R.Trace is hs.Workload
    assert R._job_prefix is importlib.import_module("hetsched.inputs.traces.cells").job_prefix
    assert isinstance(R._HELIOS, dict) and R._PAI_JOB[0] == "job_name"
    with pytest.raises(AttributeError):
        R.no_such_name  # noqa: B018


def test_readers_give_the_one_workload_container():
    tr = read_gavel_trace(FIX / "gavel_small.trace", TPUT)
    assert isinstance(tr, hs.Workload) and tr.for_simulation() is tr


def test_helios_header_only_is_a_clear_error_not_pandas_empty_data(tmp_path):
    """A Helios log with its header and no record (issue 30: pandas' EmptyDataError escaped)."""
    from hetsched.inputs.traces import load_trace

    header = (FIX / "helios_cluster_log_small.csv").read_text().splitlines()[0] + "\n"
    p = write(tmp_path, "cluster_log.csv", header)
    with pytest.raises(ValidationError, match=r"cluster_log\.csv: no job to replay: 0 row\(s\) read, 0 kept"):
        load_trace(p, "helios")
