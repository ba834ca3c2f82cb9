"""``reproduce hived_anomaly`` at test size (the experiment's own sizes are in docs/hived.md)."""

from __future__ import annotations

import hetsched.reproduce.hived as rh
from hetsched.reproduce import EXPERIMENTS, Settings, write_result


def test_hived_anomaly_runs_small_and_hived_has_none(tmp_path, monkeypatch):
    monkeypatch.setattr(rh, "QUICK", {"gpus": 64, "jobs": 60, "seeds": (0,)})
    res = EXPERIMENTS["hived_anomaly"].run(Settings(quick=True, workers=1))
    s = res.summary.set_index("policy")
    assert set(s.index) == {"quota", "hived"}
    assert s.loc["hived", "anomaly_hours"] == 0.0
    assert (res.runs["n_completed"] == 60).all()
    assert set(res.extra["tenants"]["tenant"]) == {"e0", "e1", "e2", "e3"}
    written = write_result(res, tmp_path)
    assert (tmp_path / "hived_anomaly_summary.csv") in written


def test_tenants_of_the_experiment_fit_every_size():
    from hetsched.hived import HiveD

    for gpus in (64, 256, 512, 1024):
        HiveD(tenants=rh.hived_tenants(gpus)).setup(rh.hived_cluster(gpus))
