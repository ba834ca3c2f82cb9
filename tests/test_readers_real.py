"""Readers on Gavel's published files (``../shared/data/gavel``, skipped when absent) and the
reader of Gavel's ``cluster_specs.json``.

The data directory is found as in ``tests/test_gavel_msr_traces.py``: beside the checkout.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import hetsched as hs
from hetsched.errors import ValidationError
from hetsched.sim import read_gavel_cluster_specs, read_gavel_trace

GAVEL = Path(__file__).resolve().parents[2] / "shared" / "data" / "gavel"
GAVEL_TPUT = GAVEL / "simulation_throughputs.json"
MSR = GAVEL / "traces" / "msr"
SPECS = MSR / "cluster_specs.json"
needs_gavel = pytest.mark.skipif(not GAVEL_TPUT.is_file() or not SPECS.is_file(),
                                 reason="../shared/data/gavel is not present")


# ------------------------------------------------------------------------------ cluster_specs.json
def test_cluster_specs_hand_written(tmp_path):
    p = tmp_path / "cluster_specs.json"
    p.write_text(json.dumps({"philly": ["500:0:0"], "small": ["8:16:24", "4:0:4"]}))
    specs = read_gavel_cluster_specs(p)
    assert list(specs) == ["philly", "small"]
    assert [c.as_dict() for c in specs["small"]] == [{"v100": 8, "p100": 16, "k80": 24}, {"v100": 4, "p100": 0, "k80": 4}]
    assert specs["philly"][0].count("v100") == 500 and specs["philly"][0].count("k80") == 0
    other = read_gavel_cluster_specs(p, gpu_types=("a100", "v100", "t4"))
    assert other["small"][0].as_dict() == {"a100": 8, "v100": 16, "t4": 24}


@pytest.mark.parametrize(
    "content,match",
    [
        ("[1, 2]", r"must hold a JSON object of trace name -> list of 'V:P:K' specs; got list"),
        ("{not json", r"must hold a JSON object"),
        ('{"philly": "500:0:0"}', r"'philly' must map to a non-empty list of spec strings"),
        ('{"philly": ["500:0"]}', r"'philly'\[0\] must be 3 non-negative integers separated by ':' \(v100:p100:k80\); got '500:0'"),
        ('{"philly": ["500:-1:0"]}', r"'philly'\[0\] must be 3 non-negative integers"),
        ('{"philly": ["8:0:0", "0:0:0"]}', r"'philly'\[1\] must hold at least one GPU"),
    ],
)
def test_cluster_specs_bad_files(tmp_path, content, match):
    p = tmp_path / "cluster_specs.json"
    p.write_text(content)
    with pytest.raises(ValidationError, match=match):
        read_gavel_cluster_specs(p)


def test_cluster_specs_bad_arguments(tmp_path):
    with pytest.raises(ValidationError, match="must be an existing local file"):
        read_gavel_cluster_specs(tmp_path / "nope.json")
    p = tmp_path / "c.json"
    p.write_text('{"a": ["1:1:1"]}')
    with pytest.raises(ValidationError, match="`gpu_types` must be distinct GPU type names"):
        read_gavel_cluster_specs(p, gpu_types=("v100", "v100", "k80"))


@needs_gavel
def test_cluster_specs_real_file():
    specs = read_gavel_cluster_specs(SPECS)
    # Gavel's copy (scheduler/traces/msr/cluster_specs.json) holds one cluster of 500 V100s
    assert list(specs) == ["philly"]
    (cluster,) = specs["philly"]
    assert cluster.as_dict() == {"v100": 500, "p100": 0, "k80": 0}


@needs_gavel
def test_msr_trace_on_its_cluster_simulates():
    cat = hs.load_gavel_throughputs(GAVEL_TPUT)
    (cluster,) = read_gavel_cluster_specs(SPECS)["philly"]
    with pytest.raises(hs.ValidationError, match=r"63 of 2000 row\(s\) cannot be used \(no_throughput_row: 63\)"):
        read_gavel_trace(MSR / "seed=0" / "6c71a0.trace", cat, cluster=cluster)
    tr = read_gavel_trace(MSR / "seed=0" / "6c71a0.trace", cat, cluster=cluster, on_bad_rows="skip")
    rep = tr.meta["load_report"]
    # skipped: the 63 jobs without a throughput-table row are dropped and counted
    assert rep["dropped"] == {"no_throughput_row": 63} and rep["malformed"] == {}
    assert rep["rows"] == 2000 and rep["kept"] == tr.n_jobs == 1937
    res = hs.simulate("max_min_fairness", tr.head(10), cluster, options=hs.SimOptions(max_time=86400.0))
    assert res.summary["n_jobs"] == 10 and res.summary["failed_solves"] == 0


@needs_gavel
def test_every_msr_trace_report_adds_up():
    cat = hs.load_gavel_throughputs(GAVEL_TPUT)
    for f in sorted((MSR / "seed=0").glob("*.trace")):
        tr = read_gavel_trace(f, cat, on_bad_rows="skip")
        rep = tr.meta["load_report"]
        n_lines = sum(1 for line in f.read_text().splitlines() if line.strip())
        assert rep["rows"] == n_lines, f.name
        assert rep["kept"] + sum(rep["dropped"].values()) == n_lines, f.name
        assert set(rep["dropped"]) <= {"no_throughput_row"} and rep["malformed"] == {}, f.name
        assert tr.jobs.ids.tolist() == list(range(tr.n_jobs))
        assert (np.diff(tr.arrival_times) >= 0).all()
