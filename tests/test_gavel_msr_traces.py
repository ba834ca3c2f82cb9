"""Gavel's older 7-column trace format (its Philly-derived ``msr`` traces).

Columns, as Gavel's older ``scheduler/utils.py`` ``parse_trace(trace_file, run_dir)`` reads
them: job_type, command, num_steps_arg, needs_data_dir, total_steps, arrival_time,
scale_factor. Hand-written files use the project's small fixture table; the real traces
(``../shared/data/gavel``) are read when present and skipped otherwise.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import hetsched as hs
from hetsched.errors import ValidationError
from hetsched.sim import load_trace, read_gavel_trace

FIX = Path(__file__).parent / "fixtures"
TPUT = FIX / "gavel_throughputs_small.json"
GAVEL = Path(__file__).resolve().parents[2] / "shared" / "data" / "gavel"
GAVEL_TPUT = GAVEL / "simulation_throughputs.json"
MSR = GAVEL / "traces" / "msr"
PHYSICAL = GAVEL / "traces" / "physical_cluster"

R18 = "ResNet-18 (batch size 64)"
LM = "LM (batch size 20)"
CMD = "cd %s/gpusched/workloads/pytorch/image_classification/cifar10 && python3 main.py --data_dir=%s/data/cifar10"


def row7(job_type: str, steps: str, arrival: str, scale: str, needs_data_dir: str = "1",
         cmd: str = CMD, steps_arg: str = "--num_steps") -> str:
    return f"{job_type}\t{cmd}\t{steps_arg}\t{needs_data_dir}\t{steps}\t{arrival}\t{scale}\n"


GOOD = [
    row7(R18, "36000", "0.000000", "1"),
    row7(LM, "14400", "120.500000", "2", needs_data_dir="0", cmd="cd %s/lm && python main.py", steps_arg="--steps"),
    row7(R18, "64800", "360.000000", "2"),
    row7(LM, "25200", "4000.000000", "1"),
]


def write(tmp_path: Path, lines: list[str], name: str = "vc.trace") -> Path:
    p = tmp_path / name
    p.write_text("".join(lines))
    return p


# ------------------------------------------------------------------------------ hand-written
def test_seven_column_fields_hand_checked(tmp_path):
    tr = read_gavel_trace(write(tmp_path, GOOD), TPUT)
    assert tr.n_jobs == 4
    assert tr.jobs.ids.tolist() == [0, 1, 2, 3]
    assert tr.job_types.tolist() == [R18, LM, R18, LM]
    # column 5 is total_steps, column 6 the arrival, column 7 the scale factor
    assert tr.total_steps.tolist() == [36000.0, 14400.0, 64800.0, 25200.0]
    assert tr.arrival_times.tolist() == [0.0, 120.5, 360.0, 4000.0]
    assert tr.jobs.scale_factors.tolist() == [1, 2, 2, 1]
    # no weight column: Gavel uses 1; no SLO column: no deadlines
    assert tr.jobs.weights.tolist() == [1.0, 1.0, 1.0, 1.0]
    assert tr.deadlines is None
    # throughputs of (type, scale factor) from the table, columns v100, p100, k80
    assert tr.gpu_types == ("v100", "p100", "k80")
    assert tr.jobs.throughputs.tolist() == [[10.0, 6.0, 2.0], [7.0, 5.5, 3.8], [18.0, 11.0, 3.5], [4.0, 3.0, 2.0]]
    assert tr.unconsolidated[2, 0] == 9.0
    assert tr.meta["columns"] == [7]
    assert tr.meta["skipped"] == [] and tr.meta["no_throughput_row"] == 0
    # load_trace picks the Gavel reader for a .trace file and reads the same
    same = load_trace(tmp_path / "vc.trace", throughputs=TPUT)
    assert same.total_steps.tolist() == tr.total_steps.tolist()
    assert same.jobs.scale_factors.tolist() == tr.jobs.scale_factors.tolist()


def test_seven_and_ten_columns_line_by_line(tmp_path):
    ten = f"{R18}\tpython3 main.py\tcifar10\t--num_steps\t1\t5000\t1\t2\t-1\t5000\n"
    tr = read_gavel_trace(write(tmp_path, GOOD + [ten]), TPUT)
    assert tr.n_jobs == 5
    assert tr.jobs.weights.tolist() == [1.0, 1.0, 1.0, 1.0, 2.0]
    assert tr.meta["columns"] == [7, 10]


def test_blank_lines_and_crlf(tmp_path):
    lines = [GOOD[0].replace("\n", "\r\n"), "\n", GOOD[1]]
    tr = read_gavel_trace(write(tmp_path, lines), TPUT)
    assert tr.n_jobs == 2 and tr.jobs.scale_factors.tolist() == [1, 2]


@pytest.mark.parametrize(
    "line_no, replacement, match",
    [
        (2, row7(LM, "lots", "120.5", "2"), "`total_steps` must be a number; got 'lots'"),
        (2, row7(LM, "0", "120.5", "2"), "`total_steps` must be a positive integer"),
        (2, row7(LM, "14400.5", "120.5", "2"), "`total_steps` must be an integer"),
        (2, row7(LM, "14400", "120.5", "0"), r"`scale_factor` must be a positive integer; got '0' \(Gavel's older"),
        (2, row7(LM, "14400", "120.5", "1.5"), "`scale_factor` must be an integer"),
        (2, row7(LM, "14400", "nan", "2"), "`arrival_time` is missing"),
        (2, row7(LM, "14400", "-3", "2"), "`arrival_time` must be non-negative"),
        (3, row7(R18, "64800", "100", "2"), "`arrival_time` must be non-decreasing; got 100 after 120.5"),
        (2, row7(LM, "14400", "120.5", "2", needs_data_dir="yes"), "`needs_data_dir` .* must be 0 or 1; got 'yes'"),
        (2, "\t".join(GOOD[1].rstrip("\n").split("\t")[:6]) + "\n", r"a Gavel trace line has 10 tab-separated columns \(7, 9 or 11 accepted\); got 6"),
        (2, GOOD[1].rstrip("\n") + "\textra\n", r"a Gavel trace line .*; got 8"),
    ],
)
def test_bad_rows_named_by_line(tmp_path, line_no, replacement, match):
    lines = list(GOOD)
    lines[line_no - 1] = replacement
    p = write(tmp_path, lines)
    with pytest.raises(ValidationError, match=rf"line {line_no}: {match}"):
        read_gavel_trace(p, TPUT)
    tr = read_gavel_trace(p, TPUT, on_bad_rows="skip")
    assert tr.n_jobs == 3
    assert len(tr.meta["skipped"]) == 1 and f"line {line_no}:" in tr.meta["skipped"][0]
    assert tr.meta["no_throughput_row"] == 0


def test_missing_throughput_table_row(tmp_path):
    lines = list(GOOD)
    lines[1] = row7(LM, "14400", "120.5", "16")  # the table has LM at 1 and 2 GPUs only
    lines.insert(3, row7("CycleGAN", "500", "2000", "1", cmd="cd %s/cyclegan && python3 cyclegan.py",
                         steps_arg="--n_steps"))
    p = write(tmp_path, lines)
    with pytest.raises(ValidationError) as info:
        read_gavel_trace(p, TPUT)  # the default: an error that counts and names the rows (issue 30)
    msg = str(info.value)
    assert "2 of 5 row(s) cannot be used (no_throughput_row: 2)" in msg
    assert "line 2:" in msg and repr(LM) in msg and "scale factor 16" in msg and "line 4:" in msg
    assert "not a row of the throughput table" in msg and "scale factors [1, 2] only" in msg
    # on_bad_rows="skip" drops and counts them: Gavel's msr traces are full of them
    tr = read_gavel_trace(p, TPUT, on_bad_rows="skip")
    rep = tr.meta["load_report"]
    assert rep["dropped"] == {"no_throughput_row": 2} and rep["malformed"] == {}
    assert rep["rows"] == 5 and rep["kept"] == 3
    assert tr.n_jobs == 3
    assert tr.job_types.tolist() == [R18, R18, LM]
    assert tr.arrival_times.tolist() == [0.0, 360.0, 4000.0]
    assert tr.meta["no_throughput_row"] == 2
    assert [s.split(": ")[1] for s in tr.meta["skipped"]] == ["line 2", "line 4"]
    assert "'CycleGAN', scale factor 1" in tr.meta["skipped"][1]


def test_all_rows_skipped_is_an_error_that_counts_them(tmp_path):
    """Every row lacking a throughput-table row leaves 0 jobs: an error that counts the rows and
    the reason (a trace of 0 jobs is always an error, issue 30), whatever ``on_bad_rows`` says."""
    p = write(tmp_path, [row7(LM, "100", "0", "32"), row7(R18, "100", "5", "64")])
    with pytest.raises(ValidationError, match=r"2 of 2 row\(s\) cannot be used \(no_throughput_row: 2\): line 1: "
                                              r"unknown job type.* No row would be left to replay"):
        read_gavel_trace(p, TPUT)
    with pytest.raises(ValidationError, match=r"2 row\(s\) read, 0 kept; not kept: \{'no_throughput_row': 2\}; "
                                              r"e\.g\. .*line 1: unknown job type"):
        read_gavel_trace(p, TPUT, on_bad_rows="skip")


# ------------------------------------------------------------------------------ real files
needs_gavel = pytest.mark.skipif(not GAVEL.is_dir(), reason="../shared/data/gavel is not present")

#: (jobs read, rows skipped) per msr trace of seed 0 with Gavel's table; every skipped row
#: is a (job type, scale factor) the table lacks (scale factors up to 64, or multi-GPU
#: rows of types measured on one GPU only).
MSR_COUNTS = {
    "0e4a51": (984, 197), "103959": (861, 125), "11cb48": (1819, 181), "23dbec": (8, 1),
    "2869ce": (354, 179), "51b7ef": (17, 1), "6214e9": (1985, 15), "6c71a0": (1937, 63),
    "795a4c": (3, 0), "7f04ca": (789, 183), "925e2b": (3, 1), "b436b2": (1874, 126),
    "e13805": (504, 103), "ed69ec": (951, 0), "ee9e8c": (1627, 373),
}


@pytest.fixture(scope="module")
def gavel_table():
    if not GAVEL_TPUT.is_file():
        pytest.skip("../shared/data/gavel is not present")
    return hs.load_gavel_throughputs(GAVEL_TPUT)


def _data_lines(p: Path) -> int:
    return sum(1 for line in p.read_text().splitlines() if line.strip())


@needs_gavel
def test_every_msr_trace_reads(gavel_table):
    files = sorted((MSR / "seed=0").glob("*.trace"))
    assert {f.stem for f in files} == set(MSR_COUNTS)
    total_read = total_lines = 0
    for f in files:
        tr = read_gavel_trace(f, gavel_table, on_bad_rows="skip")
        n_lines = _data_lines(f)
        skipped = tr.meta["skipped"]
        n_skipped = len(skipped) + tr.meta["skipped_left_out"]          # at most 20 messages listed
        assert len(skipped) == min(n_skipped, 20)
        assert (tr.n_jobs, n_skipped) == MSR_COUNTS[f.stem], f.name
        assert tr.n_jobs + n_skipped == n_lines
        assert tr.meta["columns"] == [7]
        assert tr.meta["no_throughput_row"] == n_skipped == sum(tr.meta["skipped_counts"].values())
        assert all("not a row of the throughput table" in s for s in skipped)
        arr = tr.arrival_times
        assert arr[0] >= 0 and (np.diff(arr) >= 0).all()
        assert set(tr.jobs.scale_factors.tolist()) <= {1, 2, 4, 8}
        assert (tr.total_steps > 0).all() and (tr.jobs.weights == 1.0).all()
        assert tr.deadlines is None
        # every kept job runs somewhere
        assert (tr.jobs.throughputs.max(axis=1) > 0).all()
        total_read += tr.n_jobs
        total_lines += n_lines
    assert total_lines == 15264
    assert total_read == 13716  # 90 % of the msr jobs have a table row


@needs_gavel
def test_msr_trace_raises_on_the_first_missing_row(gavel_table):
    with pytest.raises(ValidationError, match=r"0e4a51\.trace: 197 of 1181 row\(s\) cannot be used "
                                              r"\(no_throughput_row: 197\): line 42: unknown job type "
                                              r"\('Recommendation \(batch size 512\)', scale factor 4\).*and 194 more"):
        read_gavel_trace(MSR / "seed=0" / "0e4a51.trace", gavel_table)
    # on_bad_rows="skip" drops and counts them
    tr = read_gavel_trace(MSR / "seed=0" / "0e4a51.trace", gavel_table, on_bad_rows="skip")
    assert tr.n_jobs == MSR_COUNTS["0e4a51"][0]
    assert tr.meta["load_report"]["dropped"] == {"no_throughput_row": MSR_COUNTS["0e4a51"][1]}
    # a file where every row has a table row reads with the default
    assert read_gavel_trace(MSR / "seed=0" / "ed69ec.trace", gavel_table).n_jobs == 951


@needs_gavel
def test_msr_cluster_spec_fits_every_job(gavel_table):
    specs = json.loads((MSR / "cluster_specs.json").read_text())
    assert specs and all(isinstance(v, list) and v for v in specs.values())
    for strs in specs.values():
        for spec in strs:
            v100, p100, k80 = (int(x) for x in spec.split(":"))
            counts = {t: c for t, c in (("v100", v100), ("p100", p100), ("k80", k80)) if c > 0}
            cluster = hs.Cluster(counts)
            for f in sorted((MSR / "seed=0").glob("*.trace"))[:3]:
                tr = read_gavel_trace(f, gavel_table, cluster=cluster, on_bad_rows="skip")
                assert tr.n_jobs == MSR_COUNTS[f.stem][0]


@needs_gavel
def test_every_physical_cluster_trace_reads(gavel_table):
    files = sorted(PHYSICAL.glob("*.trace"))
    assert len(files) >= 8 and "debug_v2.trace" in {f.name for f in files}
    for f in files:
        tr = read_gavel_trace(f, gavel_table, on_bad_rows="skip")
        assert tr.meta["skipped"] == [], f.name
        assert tr.n_jobs == _data_lines(f) > 0
        assert set(tr.meta["columns"]) <= {7, 9, 10, 11}
        assert (np.diff(tr.arrival_times) >= 0).all()


@needs_gavel
def test_msr_trace_simulates_end_to_end(gavel_table):
    tr = read_gavel_trace(MSR / "seed=0" / "6c71a0.trace", gavel_table, on_bad_rows="skip").head(12)
    res = hs.simulate("max_min_fairness", tr, hs.Cluster({"v100": 8, "p100": 8, "k80": 8}),
                      options=hs.SimOptions.preset("gavel", max_time=2 * 86400.0))
    s = res.summary
    assert s["status"] in ("max_time", "completed")
    assert s["n_jobs"] == 12
    assert s["n_completed"] >= 1 and s["failed_solves"] == 0
    assert 0.0 < s["utilization"] <= 1.0
    assert s["sim_end_s"] <= 2 * 86400.0 + 1e-6
