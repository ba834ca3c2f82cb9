"""OnlineScheduler.batch: many calls in one store transaction (issue 28: the Slurm driver's
thousands of reports per round), each call still all or nothing."""

from __future__ import annotations

import pytest

import hetsched as hs
from hetsched.errors import ValidationError
from hetsched.online import StoreError

CLUSTER = hs.Cluster({"v100": 2, "k80": 2})


def test_a_batch_commits_its_calls_and_a_failed_call_inside_leaves_no_trace(tmp_path):
    s = hs.OnlineScheduler("max_min_fairness", CLUSTER, store=tmp_path / "s.db")
    s.submit("a", throughputs={"v100": 2.0, "k80": 1.0}, total_steps=1e4)
    s.next_round(0.0)
    with s.batch():
        s.submit("b", throughputs={"v100": 2.0, "k80": 1.0}, total_steps=1e4)
        s.report("a", "v100", steps=300.0, seconds=150.0)
        with pytest.raises(ValidationError):
            s.report("a", "v100", steps=-1.0, seconds=10.0)
        with pytest.raises(ValidationError):
            s.submit("b", throughputs={"v100": 1.0})         # duplicate id
    s.close()
    s = hs.OnlineScheduler("max_min_fairness", CLUSTER, store=tmp_path / "s.db")
    table = s.job_table().set_index("job_id")
    assert list(table.index) == ["a", "b"] and table.loc["a", "steps_done"] == 300.0
    assert s.estimates().loc["a", "v100"] == 2.0
    s.close()


def test_an_exception_leaving_the_batch_rolls_it_all_back_and_stops_the_object(tmp_path):
    s = hs.OnlineScheduler("max_min_fairness", CLUSTER, store=tmp_path / "s.db")
    s.submit("a", throughputs={"v100": 2.0, "k80": 1.0}, total_steps=1e4)
    with pytest.raises(RuntimeError, match="boom"):
        with s.batch():
            s.submit("b", throughputs={"v100": 2.0, "k80": 1.0})
            raise RuntimeError("boom")
    with pytest.raises(StoreError, match=r"stopped after an error \(a batch of calls was rolled back"):
        s.submit("c", throughputs={"v100": 1.0})
    s.close()
    s = hs.OnlineScheduler("max_min_fairness", CLUSTER, store=tmp_path / "s.db")
    assert list(s.job_table()["job_id"]) == ["a"]
    s.close()
