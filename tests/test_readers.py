"""Trace readers on hand-written fixtures (tests/fixtures/), one per schema, and every kind
of bad row rejected with its row number."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import hetsched as hs
from hetsched.errors import ValidationError
from hetsched.sim import (
    load_trace,
    read_gavel_trace,
    read_helios_trace,
    read_pai_trace,
    read_philly_trace,
    simulate,
    trace_from_table,
)
from sim_checker import check_simulation

FIX = Path(__file__).parent / "fixtures"
TPUT = FIX / "gavel_throughputs_small.json"
GAVEL_PATH = Path(__file__).resolve().parents[2] / "shared" / "data" / "gavel" / "simulation_throughputs.json"


def lines(name: str) -> list[str]:
    return (FIX / name).read_text().splitlines(keepends=True)


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


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
    "line_no,replacement,match",
    [
        (2, "LM (batch size 20)\tcmd\tdir\t--steps\t1\t14400\t1\t1\t-1\t-3\n", r"line 2: `arrival_time` must be non-negative"),
        (2, "LM (batch size 20)\tcmd\tdir\t--steps\t1\t0\t1\t1\t-1\t120\n", r"line 2: `total_steps` must be a positive integer; got '0'"),
        (2, "LM (batch size 20)\tcmd\tdir\t--steps\t1\t14.5\t1\t1\t-1\t120\n", r"line 2: `total_steps` must be an integer"),
        (3, "ResNet-18 (batch size 64)\tcmd\tdir\t--steps\t1\t100\t2\t1\t-1\t60\n", r"line 3: `arrival_time` must be non-decreasing; got 60 after 120.5"),
        (2, "GPT-9 (batch size 1)\tcmd\tdir\t--steps\t1\t100\t1\t1\t-1\t120\n", r"line 2: unknown job type \('GPT-9 \(batch size 1\)', scale factor 1\)"),
        (2, "LM (batch size 20)\tcmd\tdir\t--steps\t1\t100\t4\t1\t-1\t120\n", r"line 2: unknown job type \('LM \(batch size 20\)', scale factor 4\).*similar"),
        (2, "LM (batch size 20)\tcmd\tdir\t--steps\t1\t100\t1\t1\t-1\tnan\n", r"line 2: `arrival_time` is missing"),
        (2, "LM (batch size 20)\tcmd\tdir\t--steps\t1\t100\t1\t0\t-1\t120\n", r"line 2: `priority_weight` must be positive"),
        (2, "LM (batch size 20)\tcmd\t100\t1\t-1\t120\n", r"line 2: a Gavel trace line has 10 tab-separated columns"),
    ],
)
def test_gavel_bad_rows(tmp_path, line_no, replacement, match):
    ls = lines("gavel_small.trace")
    ls[line_no - 1] = replacement
    p = write(tmp_path, "bad.trace", "".join(ls))
    with pytest.raises(ValidationError, match=match):
        read_gavel_trace(p, TPUT)
    skipped = read_gavel_trace(p, TPUT, errors="skip")
    assert skipped.n_jobs == 3 and len(skipped.meta["skipped"]) == 1


def test_gavel_job_larger_than_cluster_and_missing_files(tmp_path):
    with pytest.raises(ValidationError, match=r"line 3: job 2 \('ResNet-18 \(batch size 64\)'\) asks for 2 GPUs but no GPU type of the cluster"):
        read_gavel_trace(FIX / "gavel_small.trace", TPUT, cluster=hs.Cluster({"v100": 1, "p100": 1, "k80": 1}))
    with pytest.raises(ValidationError, match="must be an existing local file"):
        read_gavel_trace(tmp_path / "nope.trace", TPUT)
    with pytest.raises(ValidationError, match="does not exist"):
        read_gavel_trace(FIX / "gavel_small.trace", tmp_path / "nope.json")
    with pytest.raises(ValidationError, match="errors"):
        read_gavel_trace(FIX / "gavel_small.trace", TPUT, errors="ignore")


def test_gavel_empty_trace(tmp_path):
    tr = read_gavel_trace(write(tmp_path, "empty.trace", ""), TPUT)
    assert tr.n_jobs == 0
    res = simulate("max_min_fairness", tr, hs.Cluster({"v100": 1}))
    assert res.summary["n_jobs"] == 0


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
    "mutate,match",
    [
        (lambda d: d[1].update(attempts=[]), r"entry 1: job 'application_1506638472019_0002': `attempts` must be a non-empty list"),
        (lambda d: d[2]["attempts"][0].update(end_time="None"), r"entry 2: .*`attempts\[-1\].end_time` is missing"),
        (lambda d: d[0]["attempts"][0].update(end_time="2017-10-03 02:00:00"), r"entry 0: .*duration must be positive"),
        (lambda d: d[0]["attempts"][0].update(detail=[{"ip": "m1", "gpus": []}]), r"entry 0: .*holds no GPUs"),
        (lambda d: d[2].update(submitted_time="2017-10-03 02:00:00"), r"entry 2: .*arrivals must be non-decreasing"),
        (lambda d: d[1].update(submitted_time="yesterday"), r"entry 1: .*`submitted_time` must be seconds or a date-time"),
        (lambda d: d[1].update(jobid=d[0]["jobid"]), r"entry 1: job id 'application_1506638472019_0001' appears twice \(first at entry 0\)"),
    ],
)
def test_philly_bad_rows(tmp_path, mutate, match):
    p = _philly(tmp_path, mutate)
    with pytest.raises(ValidationError, match=match):
        read_philly_trace(p)
    assert len(read_philly_trace(p, errors="skip")) == 2


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
    "line_no,replacement,match",
    [
        (3, "77c3e0,ub,-1,2,1,COMPLETED,2020-04-01 00:01:00,,,60,vc1\n", r"line 3: job '77c3e0': `gpu_num` must be a non-negative integer"),
        (4, "9a01bb,uc,8,48,1,CANCELLED,2020-04-01 00:05:00,,,0,vc2\n", r"line 4: job '9a01bb': duration must be positive"),
        (4, "9a01bb,uc,8,48,1,CANCELLED,2020-04-01 00:05:00,,,nan,vc2\n", r"line 4: job '9a01bb': .*`duration`"),
        (4, "9a01bb,uc,1.5,48,1,CANCELLED,2020-04-01 00:05:00,,,60,vc2\n", r"line 4: job '9a01bb': `gpu_num` must be an integer"),
        (5, "c2d4e6,ua,2,12,1,FAILED,2020-03-31 00:10:00,,,1800,vc1\n", r"line 5: arrivals must be non-decreasing"),
        (5, ",ua,2,12,1,FAILED,2020-04-01 00:10:00,,,1800,vc1\n", r"line 5: `job_id` is missing"),
        (5, "c2d4e6,ua,2,12,1,FAILED,2020-04-01 00:10:00,,,1800,vc1,extra\n", r"line 5: has more cells"),
    ],
)
def test_helios_bad_rows(tmp_path, line_no, replacement, match):
    ls = lines("helios_cluster_log_small.csv")
    ls[line_no - 1] = replacement
    p = write(tmp_path, "cluster_log.csv", "".join(ls))
    with pytest.raises(ValidationError, match=match):
        read_helios_trace(p)
    read_helios_trace(p, errors="skip")


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
    "table,line_no,replacement,match",
    [
        ("job", 2, "job_b2,inst_2,user_y,Failed,1500.0,\n", r"pai_job_table\.csv: line 2: job 'job_b2': `end_time` is missing"),
        ("job", 2, "job_b2,inst_2,user_y,Failed,1500.0,1400.0\n", r"line 2: job 'job_b2': duration must be positive"),
        ("job", 2, "job_b2,inst_2,user_y,Failed,1500.0\n", r"line 2: has 5 comma-separated cells"),
        ("job", 2, "job_b2,inst_2,user_y,Failed,500.0,2100.0\n", r"line 2: arrivals must be non-decreasing"),
        ("task", 1, "job_zz,worker,1,Terminated,1000.0,4600.0,600.0,29.0,100.0,V100\n", r"pai_task_table\.csv: line 1: task 'worker' names job 'job_zz', which is not in the job table"),
        ("task", 4, "job_c3,worker,x,Terminated,2000.0,9200.0,600.0,29.0,100.0,P100\n", r"line 4: task 'worker' of job 'job_c3': `inst_num` must be a number"),
    ],
)
def test_pai_bad_rows(tmp_path, table, line_no, replacement, match):
    jl, tl = lines("pai_job_table_small.csv"), lines("pai_task_table_small.csv")
    target = jl if table == "job" else tl
    target[line_no - 1] = replacement
    pj = write(tmp_path, "pai_job_table.csv", "".join(jl))
    pt = write(tmp_path, "pai_task_table.csv", "".join(tl))
    with pytest.raises(ValidationError, match=match):
        read_pai_trace(pj, pt)
    read_pai_trace(pj, pt, errors="skip")


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
